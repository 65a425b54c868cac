//! Text utilities: the cl100k token counter, the segmenter, ROUGE-L, BM25.

mod bm25;
mod rouge;
mod segment;
pub mod span;
mod tokens;

pub use bm25::Bm25;
pub use rouge::{lcs_precision, rouge_l, QuestionPool};
pub use segment::{segment, Segment};
pub use span::Span;
pub use tokens::{count_tokens, truncate_tokens};
