//! Answering across a corpus's documents (issue 68): the passages a retriever ranks best for
//! the question, each under its document's name, as many as fit the context budget, through
//! the answer step every method ends with; or a navigator over the question's own memory of the
//! corpus's best candidate passages.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::str::FromStr;

use petgraph::stable_graph::NodeIndex;
use petgraph::visit::EdgeRef;

use crate::answer::{
    answer_step, option_letter, with_options, AnswerError, Answered, Trace, Window,
};
use crate::corpus::{CorpusError, CorpusStore, PassageRef, RelationRow, Retriever};
use crate::memory::merge::{english_stemmer, normalize};
use crate::memory::{Entity, Memory, Relation, Source};
use crate::prompts::PromptId;
use crate::text::{count_tokens, Span};

use super::spec::{prepare, MemoryKind, MethodError, Prepared};
use super::{MethodSpec, Runtime};

/// Passages the retriever ranks before the budget cuts them.
const CANDIDATES: usize = 30;

/// Why a question over a corpus could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum AcrossError {
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    #[error(transparent)]
    Answer(#[from] AnswerError),
    #[error(transparent)]
    Method(#[from] MethodError),
    #[error("the corpus {0} has no passages: add documents first (`qrmem corpus add`)")]
    Empty(String),
}

/// A question answered across a corpus: the trace, and the passages its answer prompt showed
/// (document id, passage index), in the order shown.
pub struct CorpusAnswer {
    pub trace: Trace,
    pub passages: Vec<PassageRef>,
}

/// Answers `question` (with `options`: multiple choice) from the passages `retriever` ranks
/// best across `corpus`, in rank order, each under its document's name, within
/// `context_tokens` tokens (and the answer prompt's room in the configured window).
pub async fn ask_corpus(
    ctx: &Runtime<'_>,
    corpus: &dyn CorpusStore,
    question: &str,
    options: &[String],
    retriever: Retriever,
    context_tokens: usize,
) -> Result<CorpusAnswer, AcrossError> {
    if question.trim().is_empty() {
        return Err(AnswerError::EmptyQuestion.into());
    }
    let before = ctx.llm.ledger().snapshot().total();
    let q = with_options(question, options);
    let embedder = (retriever == Retriever::Dense).then_some(ctx.embedder);
    let ranked = corpus.rank(retriever, &q, CANDIDATES, embedder)?;
    if ranked.is_empty() && corpus.all_passages()?.is_empty() {
        return Err(AcrossError::Empty(corpus.location().display().to_string()));
    }
    let room = Window::of(&ctx.config.navigate)
        .room(ctx.prompts, PromptId::Answer, &q)
        .map_err(AnswerError::from)?;
    let budget = if context_tokens == 0 {
        room
    } else {
        context_tokens.min(room)
    };
    let Shown {
        blocks,
        names,
        passages,
        used,
    } = shown_passages(corpus, ranked, budget)?;
    let shown: Vec<String> = names
        .iter()
        .zip(&passages)
        .map(|(name, (_, idx))| format!("{name}#{idx}"))
        .collect();
    let text = blocks.join("\n\n");
    let note = format!(
        "{retriever} across the corpus: {} passages, {used} tokens (budget {budget}): {}",
        shown.len(),
        shown.join(", ")
    );
    let Answered {
        answer,
        reasoning,
        step,
    } = answer_step(ctx.llm, ctx.prompts, &q, &text, Vec::new(), note).await?;
    let after = ctx.llm.ledger().snapshot().total();
    let answer = if options.is_empty() {
        answer.trim().to_string()
    } else {
        option_letter(&answer, options)
    };
    let mut trace = Trace {
        method: CorpusMethod::Retrieve(retriever).corpus_name(budget),
        question: question.to_string(),
        answer,
        reasoning,
        steps: vec![step],
        ..Trace::default()
    };
    trace.set_cost(&before, &after);
    Ok(CorpusAnswer { trace, passages })
}

/// The passages an answer prompt over a corpus shows: each under its document's name, in the
/// given order, as many as fit `budget` tokens (one too long for what is left is passed over).
pub struct Shown {
    /// `[name]` and the passage's text, one block each.
    pub blocks: Vec<String>,
    /// Each shown passage's document name.
    pub names: Vec<String>,
    pub passages: Vec<PassageRef>,
    /// Tokens the blocks take.
    pub used: usize,
}

/// The passages of `ranked` that an answer prompt of `budget` tokens shows (see [`Shown`]).
pub fn shown_passages(
    corpus: &dyn CorpusStore,
    ranked: Vec<PassageRef>,
    budget: usize,
) -> Result<Shown, CorpusError> {
    let mut out = Shown {
        blocks: Vec::new(),
        names: Vec::new(),
        passages: Vec::new(),
        used: 0,
    };
    for (doc, idx) in ranked {
        let Some(p) = corpus.passage(&doc, idx)? else {
            continue;
        };
        let name = corpus.name_of(&doc)?.unwrap_or_default();
        let block = format!("[{name}]\n{}", p.text.trim());
        let cost = count_tokens(&block) + 1;
        if out.used + cost > budget {
            continue;
        }
        out.used += cost;
        out.blocks.push(block);
        out.names.push(name);
        out.passages.push((doc, idx));
    }
    Ok(out)
}

/// Candidate passages a navigator's question memory is built over: the graph's own-start hop
/// across the corpus, best first.
pub const NAVIGATED_CANDIDATES: usize = 20;

/// How a question is answered across a corpus: the passages a retriever ranks best (one call),
/// or a navigator over the question's own memory of the corpus's best candidates
/// ([`navigate_corpus`]).
#[derive(Clone, Debug, PartialEq)]
pub enum CorpusMethod {
    Retrieve(Retriever),
    Navigate(MethodSpec),
}

impl fmt::Display for CorpusMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CorpusMethod::Retrieve(r) => write!(f, "{r}"),
            CorpusMethod::Navigate(spec) => write!(f, "{}", spec.name()),
        }
    }
}

impl FromStr for CorpusMethod {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Ok(r) = s.parse::<Retriever>() {
            return Ok(CorpusMethod::Retrieve(r));
        }
        match s.parse::<MethodSpec>() {
            Ok(spec) if over_candidates(&spec) => Ok(CorpusMethod::Navigate(spec)),
            Ok(spec) => Err(format!(
                "'{}' cannot answer across a corpus: a method there reads the question's candidate passages, as a navigator of their co-occurrence memory (name it with -cooccurrence, e.g. kn-cooccurrence-hop-final-s-mix-passages400) or as passages (a chain, e.g. chain-path-passages400); the retrievers are bm25, bm25-hop, dense, graph-start, graph-hop, graph-own-hop",
                spec.name()
            )),
            Err(_) => Err(format!(
                "unknown corpus method '{s}': a retriever (bm25, bm25-hop, dense, graph-start, graph-hop, graph-own-hop), a navigator over the co-occurrence memory (e.g. kn-cooccurrence-hop-final-s-mix-passages400) or a chain (e.g. chain-path-passages400)"
            )),
        }
    }
}

/// Whether `spec` can answer over a question's candidate passages across a corpus: a
/// navigator of their co-occurrence memory, or a method that reads them as passages and needs
/// no LLM-built memory (a chain, a passage baseline). The oracle rows read no passages.
fn over_candidates(spec: &MethodSpec) -> bool {
    match spec.memory_kind() {
        MemoryKind::Cooccurrence => true,
        MemoryKind::Segments => spec.reads_passages(),
        _ => false,
    }
}

impl CorpusMethod {
    /// Its name in traces and output lines, answering from at most `budget` tokens of
    /// passages: `corpus-`, then the retriever and `-passagesN`, or the navigator's name (which
    /// holds its own budget).
    pub fn corpus_name(&self, budget: usize) -> String {
        match self {
            CorpusMethod::Retrieve(r) => format!("corpus-{r}-passages{budget}"),
            CorpusMethod::Navigate(spec) => format!("corpus-{}", spec.name()),
        }
    }

    /// Whether it needs the embedder (the dense retriever, and every navigator: KN scores
    /// edges and passages by it).
    pub fn needs_embedder(&self) -> bool {
        matches!(
            self,
            CorpusMethod::Retrieve(Retriever::Dense) | CorpusMethod::Navigate(_)
        )
    }
}

/// Answers `question` across `corpus` with `method`: [`ask_corpus`] for a retriever (within
/// `context_tokens`), [`navigate_corpus`] for a navigator (its name sets its budget).
pub async fn answer_corpus(
    ctx: &Runtime<'_>,
    corpus: &dyn CorpusStore,
    question: &str,
    options: &[String],
    method: &CorpusMethod,
    context_tokens: usize,
) -> Result<CorpusAnswer, AcrossError> {
    match method {
        CorpusMethod::Retrieve(r) => {
            ask_corpus(ctx, corpus, question, options, *r, context_tokens).await
        }
        CorpusMethod::Navigate(spec) => navigate_corpus(ctx, corpus, question, options, spec).await,
    }
}

/// Answers `question` across `corpus` with the navigator or chain `spec`, as it answers over
/// one document: the question's candidate passages (the graph's own-start hop across the
/// corpus, at most [`NAVIGATED_CANDIDATES`], best first) become one document of `Passage i:`
/// blocks under their titles, its memory is built (the co-occurrence memory for a navigator,
/// the passages for a chain; no LLM call), and the method runs over it with the configured
/// `[navigate]` and `[answer]`. A chain's hops find their subjects' passages by title among
/// the candidates. The passages its answer showed are
/// mapped back to their documents.
pub async fn navigate_corpus(
    ctx: &Runtime<'_>,
    corpus: &dyn CorpusStore,
    question: &str,
    options: &[String],
    spec: &MethodSpec,
) -> Result<CorpusAnswer, AcrossError> {
    if question.trim().is_empty() {
        return Err(AnswerError::EmptyQuestion.into());
    }
    let q = with_options(question, options);
    let ranked = corpus.rank(Retriever::GraphOwnHop, &q, NAVIGATED_CANDIDATES, None)?;
    let (document, ranges) = candidate_document(corpus, &ranked)?;
    if ranges.is_empty() {
        return Err(AcrossError::Empty(corpus.location().display().to_string()));
    }
    // The method's own memory of the candidates: their co-occurrence memory for a navigator,
    // their passages for a chain (neither makes an LLM call).
    let mut prepared = prepare(
        spec.memory_kind(),
        ctx,
        &document,
        None,
        &format!("the candidate passages of '{question}'"),
        None,
    )
    .await?;
    // Where the candidates' records hold the LLM's relations (`corpus add --extract llm`),
    // the question's memory has them too: QRMeM's relations across documents.
    let mut related = 0;
    if let Prepared::Graph(memory) = &mut prepared {
        let mut by_key = memory_keys(memory);
        for c in &ranges {
            let (doc, idx) = &c.passage;
            let relations = corpus.relations_of(doc, *idx)?;
            if relations.is_empty() {
                continue;
            }
            let names = corpus.entities_of(doc, *idx)?;
            related += add_relations(memory, &mut by_key, c.span, &names, &relations);
        }
    }
    let mut trace = super::run(
        spec,
        &ctx.ctx(None, &[]),
        &ctx.config.navigate,
        &prepared,
        question,
        options,
    )
    .await?;
    // The shown passages, in the order of the question's document (the candidates' rank).
    let shown: Vec<&Candidate> = ranges
        .iter()
        .filter(|c| {
            let (start, end) = c.span;
            trace
                .answer_spans
                .iter()
                .any(|&(a, b)| a < end && start < b)
        })
        .collect();
    let passages: Vec<PassageRef> = shown.iter().map(|c| c.passage.clone()).collect();
    let names: Vec<String> = shown
        .iter()
        .map(|c| format!("{}#{}", c.name, c.passage.1))
        .collect();
    if let Some(step) = trace.steps.last_mut() {
        step.note.push_str(&format!(
            "; across the corpus: {} of {} candidate passages shown: {}{}",
            passages.len(),
            ranges.len(),
            names.join(", "),
            if related > 0 {
                format!("; relations from the LLM's records: {related}")
            } else {
                String::new()
            }
        ));
    }
    trace.method = format!("corpus-{}", spec.name());
    Ok(CorpusAnswer { trace, passages })
}

/// Each merge key of `memory`'s entity names and mentions, with the entity it names (the first
/// where two share one).
fn memory_keys(memory: &Memory) -> HashMap<String, NodeIndex> {
    let stemmer = english_stemmer();
    let mut by_key: HashMap<String, NodeIndex> = HashMap::new();
    for n in memory.graph.node_indices() {
        let e = &memory.graph[n];
        for m in std::iter::once(&e.name).chain(&e.mentions) {
            by_key.entry(normalize(m, &stemmer).join(" ")).or_insert(n);
        }
    }
    by_key
}

/// Adds the `relations` a passage's record holds to the question's `memory`, the passage lying
/// at `span` of its document: each an edge (the LLM's sentence) between the entities its two
/// ends name (found by merge key among the memory's names and mentions; an end the
/// co-occurrence pass did not find becomes an entity named as the record's row `names` writes
/// it), linked to the segments the passage lies in. A relation the memory already holds
/// between the same two entities with the same sentence gains these segments instead. Returns
/// the edges added. `by_key` is [`memory_keys`] of `memory`, kept up to date here, so that a
/// question's candidates share it.
fn add_relations(
    memory: &mut Memory,
    by_key: &mut HashMap<String, NodeIndex>,
    span: Span,
    names: &[(String, String)],
    relations: &[RelationRow],
) -> usize {
    let segments: BTreeSet<usize> = memory
        .segments
        .iter()
        .filter(|s| s.start < span.1 && span.0 < s.end)
        .map(|s| s.index)
        .collect();
    let mut node = |memory: &mut Memory, key: &str| -> Option<NodeIndex> {
        if let Some(&n) = by_key.get(key) {
            return Some(n);
        }
        let (_, name) = names.iter().find(|(k, _)| k == key)?;
        let n = memory.graph.add_node(Entity {
            name: name.clone(),
            kind: "other".to_string(),
            mentions: BTreeSet::from([name.clone()]),
            segments: segments.clone(),
            sources: BTreeSet::from([Source::Llm]),
            generic: false,
        });
        by_key.insert(key.to_string(), n);
        Some(n)
    };
    let mut added = 0;
    for r in relations {
        let (Some(head), Some(tail)) = (node(memory, &r.head), node(memory, &r.tail)) else {
            continue;
        };
        if head == tail {
            continue;
        }
        let same = memory
            .graph
            .edges_connecting(head, tail)
            .find(|e| e.weight().description == r.description)
            .map(|e| e.id());
        match same {
            Some(e) => memory.graph[e].segments.extend(segments.iter().copied()),
            None => {
                memory.graph.add_edge(
                    head,
                    tail,
                    Relation {
                        description: r.description.clone(),
                        segments: segments.clone(),
                        merged_from: 1,
                        helper_questions: Vec::new(),
                    },
                );
                added += 1;
            }
        }
    }
    added
}

/// A candidate passage in the question's document: where it lies there, and its document's
/// name.
struct Candidate {
    passage: PassageRef,
    span: Span,
    name: String,
}

/// The candidate passages as one document: each a `Passage i:` block under its title (the
/// document's name; a passage with its own `Passage` header keeps it), in the given order;
/// with each passage's byte range in the document.
fn candidate_document(
    corpus: &dyn CorpusStore,
    ranked: &[PassageRef],
) -> Result<(String, Vec<Candidate>), CorpusError> {
    let mut document = String::new();
    let mut ranges = Vec::new();
    for (k, (doc, idx)) in ranked.iter().enumerate() {
        let Some(p) = corpus.passage(doc, *idx)? else {
            continue;
        };
        let name = corpus.name_of(doc)?.unwrap_or_default();
        let text = p.text.trim();
        let start = document.len();
        if text.starts_with("Passage ") {
            document.push_str(text);
        } else {
            // A paragraph document's text starts with its title: shown once, as the title.
            let body = match text.split_once('\n') {
                Some((first, rest)) if first.trim() == name.trim() => rest.trim(),
                _ => text,
            };
            document.push_str(&format!("Passage {}:\n{}\n{body}", k + 1, name.trim()));
        }
        ranges.push(Candidate {
            passage: (doc.clone(), *idx),
            span: (start, document.len()),
            name,
        });
        document.push_str("\n\n");
    }
    Ok((document, ranges))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{build_cooccurrence, BuildParams};

    /// The LLM's relations of a candidate's record join the question's co-occurrence memory:
    /// between the entities the memory has (found by merge key), or a new entity named as the
    /// record writes it; linked to the passage's segments; a relation met again adds nothing.
    #[test]
    fn a_records_relations_join_the_questions_memory_between_its_entities() {
        let doc = "Passage 1:\nAlpha Works\nAlpha Works was founded by Clara Hoffmann in Bern.\n\n\
                   Passage 2:\nDelta\nDelta lies far from Bern.\n";
        let params = BuildParams {
            cooccurrence: true,
            ..BuildParams::from_config(&crate::config::Config::default())
        };
        let mut m = build_cooccurrence(doc, "doc", params, "none").unwrap();
        let entities = m.graph.node_count();
        let edges = m.graph.edge_count();
        let span = (0, doc.find("Passage 2").unwrap());
        let names = vec![
            ("alpha work".to_string(), "Alpha Works".to_string()),
            ("clockmak".to_string(), "clockmaker".to_string()),
        ];
        let relations = vec![
            RelationRow {
                head: "alpha work".into(),
                tail: "clara hoffmann".into(),
                description: "Alpha Works was founded by Clara Hoffmann.".into(),
            },
            RelationRow {
                head: "alpha work".into(),
                tail: "clockmak".into(),
                description: "Alpha Works is a clockmaker.".into(),
            },
            // An end the passage's rows do not name: left out.
            RelationRow {
                head: "alpha work".into(),
                tail: "nowher".into(),
                description: "Alpha Works is nowhere.".into(),
            },
        ];
        let mut by_key = memory_keys(&m);
        assert_eq!(
            add_relations(&mut m, &mut by_key, span, &names, &relations),
            2
        );
        assert_eq!(m.graph.node_count(), entities + 1);
        assert_eq!(m.graph.edge_count(), edges + 2);
        let node = |name: &str| {
            m.graph
                .node_indices()
                .find(|&n| m.graph[n].name == name)
                .unwrap()
        };
        let founded = m
            .graph
            .edges_connecting(node("Alpha Works"), node("Clara Hoffmann"))
            .find(|e| e.weight().description == "Alpha Works was founded by Clara Hoffmann.")
            .unwrap();
        assert_eq!(founded.weight().segments, BTreeSet::from([0]));
        assert!(m.graph[node("clockmaker")].sources.contains(&Source::Llm));
        // The same relations again (another passage of the same segment, the question's key
        // map shared): nothing new, not even the entity the first call added.
        assert_eq!(
            add_relations(&mut m, &mut by_key, span, &names, &relations),
            0
        );
        assert_eq!(m.graph.edge_count(), edges + 2);
        assert_eq!(m.graph.node_count(), entities + 1);
    }
}
