//! The baselines of the QRMeM paper's Table 1, answering with the same prompt
//! (`prompts/answer.txt`) and the same window as the navigators: BM25 top-k and dense
//! (Contriever-style) top-k retrieval over segments, truncation keeping the left or the right of
//! the document, and the full document for long-context models.

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;

use super::method::{wrong_memory, Family, Form, Method, MethodSpec, Recorded, Role};
use super::spec::{MemoryKind, MethodError, Prepared};

use super::Ctx;
use crate::answer::{
    answer_step, option_letter, with_options, AnswerError, Answered, Trace, Window,
};
use crate::config::NavigateConfig;
use crate::memory::Memory;
use crate::prompts::{PromptId, Prompts};
use crate::text::sentences::Sentences;
use crate::text::span::{self, Span};
use crate::text::{excerpt, truncate_tokens, Bm25};

/// A baseline method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Baseline {
    Bm25(usize),
    /// BM25 over the document's sentences: the best sentences, each with its window (the
    /// sentences before and after it in its passage), under their passages' titles, within
    /// this many tokens (the sentence-grain
    /// context the navigators' `-sentencesN` rows are compared with at the same budget).
    Bm25Sentences(usize),
    Dense(usize),
    /// BM25 over the document's passages (`text::passages`): the best passages, shown in
    /// document order under their titles, within this many tokens.
    Bm25Passages(usize),
    /// `bm25-passagesN` with the hop (`text::passages::hop`): the best passage, then the own
    /// passages (by title) of the names it holds, then the rest by BM25: the path from a
    /// passage to the passage of an entity it names, without the graph.
    Bm25HopPassages(usize),
    /// `bm25-hop-passagesN` from the own start (`text::passages::own_units`): the passages
    /// titled with names the question holds (at most two, best first), then the hop from the
    /// first of them; the best passage where the question names no title.
    Bm25OwnHopPassages(usize),
    /// The embedder over the document's passages, within this many tokens.
    DensePassages(usize),
    VanillaLeft,
    VanillaRight,
    Full,
}

/// Every baseline name, in the order of the help.
pub const FORMS: &[Form<Baseline>] = &[
    Form {
        pattern: "bm25-topK",
        effect: "the K best ~600-token segments by BM25 (the paper's row)",
        make: Baseline::Bm25,
    },
    Form {
        pattern: "contriever-topK",
        effect: "the K best segments by the embedder (the paper's Contriever row)",
        make: Baseline::Dense,
    },
    Form {
        pattern: "bm25-sentencesN",
        effect: "N tokens of the best sentences by BM25, each with its neighbours",
        make: Baseline::Bm25Sentences,
    },
    Form {
        pattern: "bm25-passagesN",
        effect: "N tokens of the document's best passages by BM25",
        make: Baseline::Bm25Passages,
    },
    Form {
        pattern: "contriever-passagesN",
        effect: "N tokens of the best passages by the embedder",
        make: Baseline::DensePassages,
    },
    Form {
        pattern: "bm25-hop-passagesN",
        effect: "bm25-passagesN with the hop: the best passage, then the own passages of the names it holds",
        make: Baseline::Bm25HopPassages,
    },
    Form {
        pattern: "bm25-own-hop-passagesN",
        effect: "the hop from the passages titled with the question's names (the `fast` preset)",
        make: Baseline::Bm25OwnHopPassages,
    },
    Form {
        pattern: "vanilla-left",
        effect: "the document's start, truncated to the window",
        make: |_| Baseline::VanillaLeft,
    },
    Form {
        pattern: "vanilla-right",
        effect: "the document's end, truncated to the window",
        make: |_| Baseline::VanillaRight,
    },
    Form {
        pattern: "full",
        effect: "the whole document, for long-context models",
        make: |_| Baseline::Full,
    },
];

impl Baseline {
    /// The number the baseline's name carries (0 for none).
    fn number(self) -> usize {
        match self {
            Baseline::Bm25(n)
            | Baseline::Bm25Sentences(n)
            | Baseline::Dense(n)
            | Baseline::Bm25Passages(n)
            | Baseline::Bm25HopPassages(n)
            | Baseline::Bm25OwnHopPassages(n)
            | Baseline::DensePassages(n) => n,
            Baseline::VanillaLeft | Baseline::VanillaRight | Baseline::Full => 0,
        }
    }
}

impl FromStr for Baseline {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Form::parse(FORMS, s).ok_or_else(|| format!("unknown baseline '{s}' ({})", names()))
    }
}

impl fmt::Display for Baseline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&Form::name(FORMS, self, self.number()).ok_or(fmt::Error)?)
    }
}

fn names() -> String {
    Form::help(FORMS)
}

pub const FAMILY: Family = Family {
    names,
    parse: |name| name.parse::<Baseline>().ok().map(MethodSpec::new),
};

#[async_trait]
impl Method for Baseline {
    fn name(&self) -> String {
        self.to_string()
    }

    fn memory_kind(&self) -> MemoryKind {
        MemoryKind::Segments
    }

    fn role(&self) -> Role {
        match self {
            Baseline::Bm25(_)
            | Baseline::Bm25Sentences(_)
            | Baseline::Bm25Passages(_)
            | Baseline::Bm25HopPassages(_)
            | Baseline::Bm25OwnHopPassages(_) => Role::Bm25,
            _ => Role::Other,
        }
    }

    fn reads_passages(&self) -> bool {
        matches!(
            self,
            Baseline::Bm25Passages(_)
                | Baseline::Bm25HopPassages(_)
                | Baseline::Bm25OwnHopPassages(_)
                | Baseline::DensePassages(_)
        )
    }

    async fn answer(
        &self,
        ctx: &Ctx<'_>,
        nav: &NavigateConfig,
        prepared: &Prepared,
        question: &str,
        options: &[String],
    ) -> Result<Trace, MethodError> {
        let Prepared::Graph(m) = prepared else {
            return Err(wrong_memory(self, prepared));
        };
        match self.passage_view(nav, m, ctx.embedder)? {
            Some(view) => Ok(answer(*self, ctx, &view, question, options).await?),
            None => Ok(answer(*self, ctx, m, question, options).await?),
        }
    }

    fn recorded_context(&self) -> Recorded {
        match self {
            Baseline::VanillaLeft => Recorded::Truncation { from_end: false },
            Baseline::VanillaRight => Recorded::Truncation { from_end: true },
            Baseline::Bm25(_) | Baseline::Dense(_) | Baseline::Full => {
                Recorded::Segments { answer: true }
            }
            Baseline::Bm25Sentences(_)
            | Baseline::Bm25Passages(_)
            | Baseline::Bm25HopPassages(_)
            | Baseline::Bm25OwnHopPassages(_)
            | Baseline::DensePassages(_) => Recorded::Unknown,
        }
    }
}

/// Answers `question` over `memory`'s segments with a baseline. One LLM request.
pub async fn answer(
    baseline: Baseline,
    ctx: &Ctx<'_>,
    memory: &Memory,
    question: &str,
    options: &[String],
) -> Result<Trace, AnswerError> {
    if question.trim().is_empty() {
        return Err(AnswerError::EmptyQuestion);
    }
    let before = ctx.llm.ledger().snapshot().total();
    let q = with_options(question, options);
    let shown = context(baseline, ctx.prompts, ctx.embedder, ctx.window, memory, &q)?;
    one_prompt_answer(ctx, &baseline.to_string(), question, options, before, shown).await
}

impl Baseline {
    /// What this baseline shows the answerer for question `q` (options included) over
    /// `memory`, with no LLM call: the passage baselines read the memory's passage view
    /// (passages of at most `nav.passage_tokens`, or the default cap). What `qrmem eval
    /// --contexts-only` measures.
    pub fn context_of(
        self,
        prompts: &Prompts,
        embedder: &dyn crate::embed::Embedder,
        window: Window,
        nav: &NavigateConfig,
        memory: &Memory,
        q: &str,
    ) -> Result<ShownText, MethodError> {
        let view = self.passage_view(nav, memory, embedder)?;
        let units = view.as_ref().unwrap_or(memory);
        Ok(context(self, prompts, embedder, window, units, q)?)
    }

    /// The passage view the passage baselines read (passages of at most
    /// `nav.passage_tokens`, or the default cap; with vectors only for the embedder's row);
    /// None for the others, which read `memory` itself.
    fn passage_view(
        self,
        nav: &NavigateConfig,
        memory: &Memory,
        embedder: &dyn crate::embed::Embedder,
    ) -> Result<Option<Memory>, MethodError> {
        let dense = match self {
            Baseline::Bm25Passages(_)
            | Baseline::Bm25HopPassages(_)
            | Baseline::Bm25OwnHopPassages(_) => false,
            Baseline::DensePassages(_) => true,
            _ => return Ok(None),
        };
        let cap = crate::text::passages::cap(nav.passage_tokens);
        let embedder = dense.then_some(embedder);
        Ok(Some(super::navigators::passage_view(
            memory, cap, embedder,
        )?))
    }
}

/// Every unit of `memory` ranked for `q`, best first: by BM25 (`lexical`) or the embedder.
fn rank_units(
    lexical: bool,
    embedder: &dyn crate::embed::Embedder,
    memory: &Memory,
    q: &str,
) -> Result<Vec<(usize, f32)>, AnswerError> {
    if !lexical {
        return Ok(crate::embed::score_segments(embedder, memory, q)?);
    }
    Ok(Bm25::over(&memory.segments)
        .rank(q)
        .into_iter()
        .map(|(i, s)| (i, s as f32))
        .collect())
}

/// The units of `ranked` (best first) in the hop's order, the own passages found by title: a
/// passage is the own passage of a name the first start unit holds when its title occurs there
/// as whole words. The start is the best unit, or with `own` the passages titled with names
/// `question` holds (the best unit where it holds none).
pub(super) fn hop_by_title(
    memory: &Memory,
    question: &str,
    own: bool,
    ranked: &[(usize, f32)],
) -> Vec<usize> {
    use crate::text::passages::{hop, own_units, unit_titles};
    let order: Vec<usize> = ranked.iter().map(|&(u, _)| u).collect();
    let titles = unit_titles(&memory.segments);
    let mut start = Vec::new();
    if own {
        let q = question.to_lowercase();
        start = own_units(&order, &titles, |t| crate::text::occurs_in(&q, t));
    }
    if start.is_empty() {
        start.extend(order.first());
    }
    let body = start
        .first()
        .and_then(|&u| memory.segments.get(u))
        .map(|u| u.text.to_lowercase())
        .unwrap_or_default();
    hop(
        &start,
        &order,
        &titles,
        |t| crate::text::occurs_in(&body, t),
        &order,
    )
    .0
}

/// What `baseline` shows for question `q` over `memory`'s units (the passage baselines expect
/// the passage view), with no LLM call.
pub(super) fn context(
    baseline: Baseline,
    prompts: &Prompts,
    embedder: &dyn crate::embed::Embedder,
    window: Window,
    memory: &Memory,
    q: &str,
) -> Result<ShownText, AnswerError> {
    let q = q.to_string();
    let document: String = memory.segments.iter().map(|s| s.text.as_str()).collect();
    let (text, shown, note) = match baseline {
        Baseline::Bm25(k) | Baseline::Dense(k) => {
            let lexical = matches!(baseline, Baseline::Bm25(_));
            let ranked = rank_units(lexical, embedder, memory, &q)?;
            let top: Vec<(usize, f32)> = ranked.into_iter().take(k).collect();
            let (text, shown) = window.fit(prompts, PromptId::Answer, &q, memory, &[], &top)?;
            (text, shown, format!("top {k}: {top:?}"))
        }
        Baseline::Bm25Passages(n)
        | Baseline::DensePassages(n)
        | Baseline::Bm25HopPassages(n)
        | Baseline::Bm25OwnHopPassages(n) => {
            // `memory` is the passage view: every passage ranked, the best shown within n
            // tokens, in document order.
            let lexical = !matches!(baseline, Baseline::DensePassages(_));
            let ranked = rank_units(lexical, embedder, memory, &q)?;
            // The hop's order is kept as given; the others are taken by score.
            let (kept, ranked) = match baseline {
                Baseline::Bm25HopPassages(_) | Baseline::Bm25OwnHopPassages(_) => {
                    let own = matches!(baseline, Baseline::Bm25OwnHopPassages(_));
                    (hop_by_title(memory, &q, own, &ranked), Vec::new())
                }
                _ => (Vec::new(), ranked),
            };
            let (text, shown) =
                window
                    .within(n)
                    .fit(prompts, PromptId::Answer, &q, memory, &kept, &ranked)?;
            let note = format!("{} passages within {n} tokens", shown.len());
            (text, shown, note)
        }
        Baseline::VanillaLeft | Baseline::VanillaRight => {
            let from_end = baseline == Baseline::VanillaRight;
            let (text, budget) = vanilla_text(prompts, window, &document, &q, from_end)?;
            (
                text,
                Vec::new(),
                format!(
                    "{} tokens kept from the {}",
                    budget,
                    if from_end { "right" } else { "left" }
                ),
            )
        }
        Baseline::Full => (
            document.clone(),
            (0..memory.segments.len()).collect(),
            "the whole document, no truncation".into(),
        ),
        Baseline::Bm25Sentences(n) => {
            let shown = bm25_sentences(prompts, window, memory, &document, &q, n)?;
            let note = format!(
                "{} sentences, {} tokens (budget {n})",
                shown.excerpt.sentences.len(),
                shown.excerpt.tokens
            );
            return Ok(ShownText {
                text: shown.excerpt.text,
                segments: shown.segments,
                spans: shown.excerpt.spans,
                note,
            });
        }
    };
    let spans = match baseline {
        Baseline::VanillaLeft | Baseline::VanillaRight => span::merge(vec![vanilla_span(
            &document,
            &text,
            baseline == Baseline::VanillaRight,
        )]),
        _ => span::of_indices(&segment_spans(memory), &shown),
    };
    Ok(ShownText {
        text,
        segments: shown,
        spans,
        note,
    })
}

/// What a one-prompt method shows the answerer: the text, the segments it holds (if it is made
/// of segments), their byte ranges in the document and a note for the trace.
#[derive(Clone, Debug, Default)]
pub struct ShownText {
    pub text: String,
    pub segments: Vec<usize>,
    pub spans: Vec<Span>,
    pub note: String,
}

/// Answers `question` from `shown` with the answer prompt (one request) and makes the trace of
/// `method`; `before` is the ledger's total before the method's first request.
pub async fn one_prompt_answer(
    ctx: &Ctx<'_>,
    method: &str,
    question: &str,
    options: &[String],
    before: crate::llm::StageStats,
    shown: ShownText,
) -> Result<Trace, AnswerError> {
    let llm = ctx.llm;
    let q = with_options(question, options);
    let spans = span::merge(shown.spans);
    let segments = shown.segments;
    let Answered {
        answer,
        reasoning,
        step,
    } = answer_step(
        llm,
        ctx.prompts,
        &q,
        &shown.text,
        segments.clone(),
        shown.note,
    )
    .await?;
    let after = llm.ledger().snapshot().total();
    let answer = if options.is_empty() {
        answer.trim().to_string()
    } else {
        option_letter(&answer, options)
    };
    let mut trace = Trace {
        method: method.to_string(),
        question: question.to_string(),
        answer,
        answered: false,
        reasoning,
        start_entities: vec![],
        steps: vec![step],
        segments_used: segments.clone(),
        final_segments: segments,
        failures: vec![],
        answer_spans: spans.clone(),
        read_spans: spans,
        ..Trace::default()
    };
    trace.set_cost(&before, &after);
    Ok(trace)
}

/// What bm25-sentencesN shows: the excerpt and the segments its sentences lie in.
pub struct SentenceContext {
    pub excerpt: excerpt::Excerpt,
    pub segments: Vec<usize>,
}

/// The document's sentences ranked by BM25 against `q` (those sharing a word with it), each
/// with its window, within `budget` tokens (and the answer prompt's room).
pub fn bm25_sentences(
    prompts: &Prompts,
    window: Window,
    memory: &Memory,
    document: &str,
    q: &str,
    budget: usize,
) -> Result<SentenceContext, AnswerError> {
    let index = Sentences::of(document);
    let texts: Vec<&str> = index
        .sentences
        .iter()
        .map(|s| &document[s.span.0..s.span.1])
        .collect();
    let priority: Vec<usize> = Bm25::new(&texts)
        .rank(q)
        .into_iter()
        .filter(|&(_, x)| x > 0.0)
        .map(|(i, _)| i)
        .collect();
    let budget = budget.min(answer_room(prompts, window, q)?);
    let excerpt = excerpt::fit(document, &index, &priority, budget, true);
    let segments = excerpt.units(&index, &segment_spans(memory));
    Ok(SentenceContext { excerpt, segments })
}

/// The byte range of every segment of `memory`.
pub fn segment_spans(memory: &Memory) -> Vec<Span> {
    memory.segments.iter().map(|s| (s.start, s.end)).collect()
}

/// The tokens of document text the answer prompt has room for in `window`, for the question
/// `q` (with its options): [`Window::room`] of the answer prompt.
pub fn answer_room(prompts: &Prompts, window: Window, q: &str) -> Result<usize, AnswerError> {
    Ok(window.room(prompts, PromptId::Answer, q)?)
}

/// What vanilla-left (or, `from_end`, vanilla-right) shows of `document` for the question `q`
/// (with its options): the document truncated to the answer prompt's room in the window, and
/// that room in tokens.
pub fn vanilla_text(
    prompts: &Prompts,
    window: Window,
    document: &str,
    q: &str,
    from_end: bool,
) -> Result<(String, usize), AnswerError> {
    let budget = answer_room(prompts, window, q)?;
    Ok((truncate_tokens(document, budget, from_end), budget))
}

/// The byte range of `document` that the truncated `text` shows: a prefix (or, `from_end`, a
/// suffix), as long as the part `text` and `document` share.
pub fn vanilla_span(document: &str, text: &str, from_end: bool) -> Span {
    if from_end {
        let shared = document
            .bytes()
            .rev()
            .zip(text.bytes().rev())
            .take_while(|(a, b)| a == b)
            .count();
        (document.len() - shared, document.len())
    } else {
        let shared = document
            .bytes()
            .zip(text.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        (0, shared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for name in [
            "bm25-top1",
            "bm25-top3",
            "bm25-sentences1200",
            "contriever-top2",
            "vanilla-left",
            "vanilla-right",
            "full",
        ] {
            assert_eq!(name.parse::<Baseline>().unwrap().to_string(), name);
        }
        assert!("bm25-top0".parse::<Baseline>().is_err());
        assert!("bm25-sentences0".parse::<Baseline>().is_err());
        assert!("bm25-sentences012".parse::<Baseline>().is_err());
        assert!("kn".parse::<Baseline>().is_err());
    }
}
