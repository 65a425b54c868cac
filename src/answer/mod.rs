//! The answering vocabulary every method shares, navigators and seed systems alike: the
//! context window L and the fitting of text into it ([`Window`]), the answer prompt
//! ([`answer_from`], and [`answer_step`] with the trace step it records), multiple-choice options ([`with_options`], [`option_letter`]) and the
//! [`Trace`] a method returns.
//!
//! Boundary: this module knows prompts, the LLM service and the memory's segments, not the
//! graph navigation (`navigate`) nor any method; they all import it.

mod options;
mod prompt;
mod trace;
mod window;

pub use options::{option_letter, with_options};
pub use prompt::{answer_from, answer_step, Answered};
pub use trace::{ScoredEdge, Step, StepKind, Trace};
pub use window::Window;

use thiserror::Error;

use crate::embed::EmbedError;
use crate::error::LlmError;
use crate::prompts::PromptError;

/// Why an answer step could not answer.
#[derive(Debug, Error)]
pub enum AnswerError {
    #[error(transparent)]
    Prompt(#[from] PromptError),
    /// The answer prompt's reply never parsed, or the server failed.
    #[error("navigation step '{step}' failed: {source}")]
    Step { step: String, source: LlmError },
    /// A retriever's embedding failed (dense top-k).
    #[error("embedding failed: {0}")]
    Embed(#[from] EmbedError),
    #[error("the question is empty")]
    EmptyQuestion,
}
