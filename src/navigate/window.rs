//! The context window: every prompt, instructions and reply budget included, fits L tokens.

use crate::memory::Memory;
use crate::prompts::{PromptError, PromptId, Prompts};
use crate::text::count_tokens;

/// Tokens kept free for the chat template's role markers.
const TEMPLATE_TOKENS: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// L, in cl100k tokens.
    pub limit: usize,
    /// Reserved for the reply.
    pub reply: usize,
}

impl Window {
    pub fn new(limit: usize, reply: usize) -> Self {
        Window { limit, reply }
    }

    /// Tokens a prompt may use.
    pub fn prompt_budget(&self) -> usize {
        self.limit.saturating_sub(self.reply + TEMPLATE_TOKENS)
    }

    /// Chooses the segments shown in prompt `id` (placeholders `{segments}` and `{question}`):
    /// first `imp` in its order while they fit, then `add` by descending score while they fit.
    /// Returns the text (segments in document order, blank-line separated) and the segments
    /// shown, in document order.
    pub fn fit(
        &self,
        prompts: &Prompts,
        id: PromptId,
        question: &str,
        memory: &Memory,
        imp: &[usize],
        add: &[(usize, f32)],
    ) -> Result<(String, Vec<usize>), PromptError> {
        let overhead =
            count_tokens(&prompts.render(id, &[("segments", ""), ("question", question)])?);
        let budget = self.prompt_budget().saturating_sub(overhead);
        let mut ranked: Vec<(usize, f32)> = add.to_vec();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let order = imp
            .iter()
            .copied()
            .chain(ranked.into_iter().map(|(s, _)| s));
        let mut chosen: Vec<usize> = Vec::new();
        let mut used = 0usize;
        for s in order {
            let Some(seg) = memory.segments.get(s) else {
                continue;
            };
            if chosen.contains(&s) {
                continue;
            }
            let cost = seg.tokens + 1;
            if used + cost <= budget {
                chosen.push(s);
                used += cost;
            }
        }
        // Token counts of a join can differ from the sum: check the real prompt and drop the
        // last-chosen segment until it fits.
        loop {
            let mut in_order = chosen.clone();
            in_order.sort_unstable();
            let text = join(memory, &in_order);
            let prompt = prompts.render(id, &[("segments", &text), ("question", question)])?;
            if count_tokens(&prompt) <= self.prompt_budget() || chosen.is_empty() {
                return Ok((text, in_order));
            }
            chosen.pop();
        }
    }
}

fn join(memory: &Memory, segments: &[usize]) -> String {
    segments
        .iter()
        .filter_map(|&s| memory.segments.get(s))
        .map(|s| s.text.trim())
        .collect::<Vec<_>>()
        .join("\n\n")
}
