//! vanilla-middle: LongBench's own truncation. A document longer than the answer prompt's room
//! keeps its first half and its last half of that room and loses the middle (LongBench
//! truncates every over-long prompt this way); the answer prompt is the baselines'.
//!
//! Also the check of ARCHITECTURE.md's claim that adding a method is one module and one line
//! (in [`super::registry::FAMILIES`]).

use async_trait::async_trait;

use super::baseline::{answer_room, one_prompt_answer, vanilla_span, ShownText};
use super::method::{wrong_memory, Family, Method, MethodSpec};
use super::spec::{MemoryKind, MethodError, Prepared};
use super::Ctx;
use crate::answer::{with_options, AnswerError, Trace, Window};
use crate::config::NavigateConfig;
use crate::prompts::Prompts;
use crate::text::{count_tokens, truncate_tokens, Span};

/// What stands where the middle was cut.
const CUT: &str = "\n\n[...]\n\n";

#[derive(Clone, Copy, Debug)]
pub struct VanillaMiddle;

pub const FAMILY: Family = Family {
    names: || "vanilla-middle".to_string(),
    parse: |name| (name == "vanilla-middle").then(|| MethodSpec::new(VanillaMiddle)),
};

/// The text vanilla-middle shows of `document` for the question `q` (with its options), and
/// the byte ranges of the document it holds: the whole document when it fits the answer
/// prompt's room in the window, else its head and tail of half that room each.
pub fn middle_text(
    prompts: &Prompts,
    window: Window,
    document: &str,
    q: &str,
) -> Result<(String, Vec<Span>), AnswerError> {
    let budget = answer_room(prompts, window, q)?;
    if count_tokens(document) <= budget {
        return Ok((document.to_string(), vec![(0, document.len())]));
    }
    let room = budget.saturating_sub(count_tokens(CUT));
    let head = truncate_tokens(document, room / 2, false);
    let tail = truncate_tokens(document, room - room / 2, true);
    let spans = vec![
        vanilla_span(document, &head, false),
        vanilla_span(document, &tail, true),
    ];
    Ok((format!("{head}{CUT}{tail}"), spans))
}

#[async_trait]
impl Method for VanillaMiddle {
    fn name(&self) -> String {
        "vanilla-middle".into()
    }

    fn memory_kind(&self) -> MemoryKind {
        MemoryKind::Segments
    }

    async fn answer(
        &self,
        ctx: &Ctx<'_>,
        _nav: &NavigateConfig,
        prepared: &Prepared,
        question: &str,
        options: &[String],
    ) -> Result<Trace, MethodError> {
        let Prepared::Graph(memory) = prepared else {
            return Err(wrong_memory(self, prepared));
        };
        if question.trim().is_empty() {
            return Err(AnswerError::EmptyQuestion.into());
        }
        let before = ctx.llm.ledger().snapshot().total();
        let document: String = memory.segments.iter().map(|s| s.text.as_str()).collect();
        let q = with_options(question, options);
        let (text, spans) = middle_text(ctx.prompts, ctx.window, &document, &q)?;
        let note = match spans.as_slice() {
            [(a, b)] => format!("the whole document (bytes {a}..{b})"),
            _ => format!("head and tail kept, middle cut: {spans:?}"),
        };
        let shown = ShownText {
            text,
            segments: Vec::new(),
            spans,
            note,
        };
        Ok(one_prompt_answer(ctx, &self.name(), question, options, before, shown).await?)
    }
}
