//! Answering across a corpus's documents (issue 68): the passages a retriever ranks best for
//! the question, each under its document's name, as many as fit the context budget, through
//! the answer step every method ends with.

use crate::answer::{
    answer_step, option_letter, with_options, AnswerError, Answered, Trace, Window,
};
use crate::corpus::{CorpusError, CorpusStore, PassageRef, Retriever};
use crate::prompts::PromptId;
use crate::text::count_tokens;

use super::Runtime;

/// Passages the retriever ranks before the budget cuts them.
const CANDIDATES: usize = 30;

/// Why a question over a corpus could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum AcrossError {
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    #[error(transparent)]
    Answer(#[from] AnswerError),
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
