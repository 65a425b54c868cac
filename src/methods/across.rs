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
    let mut blocks = Vec::new();
    let mut shown = Vec::new();
    let mut passages = Vec::new();
    let mut used = 0;
    for (doc, idx) in ranked {
        let Some(p) = corpus.passage(&doc, idx)? else {
            continue;
        };
        let name = corpus.name_of(&doc)?.unwrap_or_default();
        let block = format!("[{name}]\n{}", p.text.trim());
        let cost = count_tokens(&block) + 1;
        if used + cost > budget {
            continue;
        }
        used += cost;
        blocks.push(block);
        shown.push(format!("{name}#{idx}"));
        passages.push((doc, idx));
    }
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
