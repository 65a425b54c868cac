//! Text utilities: the cl100k token counter, the segmenter, sentences and passages, excerpts
//! (chosen sentences rendered within a token budget), ROUGE-L, BM25, whole-word matching.

mod bm25;
pub mod excerpt;
pub mod passages;
mod rouge;
mod segment;
pub mod sentences;
pub mod span;
mod tokens;
mod words;

pub use bm25::Bm25;
pub use excerpt::Excerpt;
pub use rouge::{lcs_precision, rouge_l, QuestionPool};
pub use segment::{segment, Segment};
pub use sentences::Sentences;
pub use span::Span;
pub use tokens::{count_tokens, truncate_tokens};
pub use words::{at_word_boundaries, find_whole_word, occurs_in, whole_word, words};
