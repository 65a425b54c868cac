//! Answering across a corpus's documents (issue 68): the passages a retriever ranks best for
//! the question, each under its document's name, as many as fit the context budget, through
//! the answer step every method ends with; or a navigator over the question's own memory of the
//! corpus's best candidate passages.

use std::fmt;
use std::str::FromStr;

use crate::answer::{
    answer_step, option_letter, with_options, AnswerError, Answered, Trace, Window,
};
use crate::corpus::{CorpusError, CorpusStore, PassageRef, Retriever};
use crate::prompts::PromptId;
use crate::text::{count_tokens, Span};

use super::spec::{prepare, MemoryKind, MethodError};
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
        method: format!("corpus-{retriever}-passages{budget}"),
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
            Ok(spec) if spec.memory_kind() == MemoryKind::Cooccurrence => {
                Ok(CorpusMethod::Navigate(spec))
            }
            Ok(spec) => Err(format!(
                "'{}' cannot answer across a corpus: a navigator there reads the co-occurrence memory of the question's candidate passages (name it with -cooccurrence, e.g. kn-cooccurrence-hop-final-s-mix-passages400); the retrievers are bm25, bm25-hop, dense, graph-start, graph-hop, graph-own-hop",
                spec.name()
            )),
            Err(_) => Err(format!(
                "unknown corpus method '{s}': a retriever (bm25, bm25-hop, dense, graph-start, graph-hop, graph-own-hop) or a navigator over the co-occurrence memory (e.g. kn-cooccurrence-hop-final-s-mix-passages400)"
            )),
        }
    }
}

impl CorpusMethod {
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

/// Answers `question` across `corpus` with the navigator `spec`, as QRMeM answers over one
/// document: the question's candidate passages (the graph's own-start hop across the corpus,
/// at most [`NAVIGATED_CANDIDATES`], best first) become one document of `Passage i:` blocks
/// under their titles, its co-occurrence memory is built (no LLM call), and the navigator runs
/// over it with the configured `[navigate]` and `[answer]`. The passages its answer showed are
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
    let prepared = prepare(
        MemoryKind::Cooccurrence,
        ctx,
        &document,
        None,
        &format!("the candidate passages of '{question}'"),
        None,
    )
    .await?;
    let mut trace = super::run(
        spec,
        &ctx.ctx(None),
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
            "; across the corpus: {} of {} candidate passages shown: {}",
            passages.len(),
            ranges.len(),
            names.join(", ")
        ));
    }
    trace.method = format!("corpus-{}", spec.name());
    Ok(CorpusAnswer { trace, passages })
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
