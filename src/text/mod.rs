//! Text utilities: the cl100k token counter, the segmenter, ROUGE-L.

mod rouge;
mod segment;
mod tokens;

pub use rouge::{rouge_l, QuestionPool};
pub use segment::{segment, Segment};
pub use tokens::count_tokens;
