//! The context window: every prompt, instructions and reply budget included, fits L tokens.

use crate::config::{NavigateConfig, Order};
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
    /// At most this many segments in a prompt; 0 for as many as fit.
    pub max_segments: usize,
    /// At most this many tokens of segments (or passages) in a prompt; 0 for as many as the
    /// window holds: the context budget of the passage-grain methods.
    pub max_tokens: usize,
}

impl Window {
    pub fn new(limit: usize, reply: usize) -> Self {
        Window {
            limit,
            reply,
            max_segments: 0,
            max_tokens: 0,
        }
    }

    /// The window `[navigate]` configures: `context_window` L with `reply_tokens` kept for the
    /// reply.
    pub fn of(nav: &NavigateConfig) -> Self {
        Window::new(nav.context_window, nav.reply_tokens)
    }

    /// This window, showing at most `n` segments (0: as many as fit).
    pub fn at_most(self, n: usize) -> Self {
        Window {
            max_segments: n,
            ..self
        }
    }

    /// This window, showing at most `n` tokens of segments (0: as many as fit).
    pub fn within(self, n: usize) -> Self {
        Window {
            max_tokens: n,
            ..self
        }
    }

    /// Tokens a prompt may use.
    pub fn prompt_budget(&self) -> usize {
        self.limit.saturating_sub(self.reply + TEMPLATE_TOKENS)
    }

    /// Tokens prompt `id` leaves for its segments (one separator token counted per segment).
    pub fn room(
        &self,
        prompts: &Prompts,
        id: PromptId,
        question: &str,
    ) -> Result<usize, PromptError> {
        let overhead =
            count_tokens(&prompts.render(id, &[("segments", ""), ("question", question)])?);
        let room = self.prompt_budget().saturating_sub(overhead);
        Ok(if self.max_tokens > 0 {
            room.min(self.max_tokens)
        } else {
            room
        })
    }

    /// Chooses the segments shown in prompt `id` (placeholders `{segments}` and `{question}`):
    /// first `imp` in its order while they fit, then `add` by descending score while they fit,
    /// each segment once, until `max_segments` are chosen when that is not 0. Returns the text
    /// (segments in document order, blank-line separated) and the segments shown, in document
    /// order.
    pub fn fit(
        &self,
        prompts: &Prompts,
        id: PromptId,
        question: &str,
        memory: &Memory,
        imp: &[usize],
        add: &[(usize, f32)],
    ) -> Result<(String, Vec<usize>), PromptError> {
        self.fit_ordered(prompts, id, question, memory, imp, add, Order::Document)
    }

    /// [`Window::fit`], with the text's segments in `order`: document order, or the order they
    /// were chosen in (`imp` first, then `add` by score). The segments returned are always in
    /// document order.
    #[allow(clippy::too_many_arguments)]
    pub fn fit_ordered(
        &self,
        prompts: &Prompts,
        id: PromptId,
        question: &str,
        memory: &Memory,
        imp: &[usize],
        add: &[(usize, f32)],
        order: Order,
    ) -> Result<(String, Vec<usize>), PromptError> {
        let budget = self.room(prompts, id, question)?;
        let mut ranked: Vec<(usize, f32)> = add.to_vec();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let candidates = imp
            .iter()
            .copied()
            .chain(ranked.into_iter().map(|(s, _)| s));
        let mut chosen: Vec<usize> = Vec::new();
        let mut used = 0usize;
        for s in candidates {
            if self.max_segments > 0 && chosen.len() == self.max_segments {
                break;
            }
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
            let text = match order {
                Order::Document => join(memory, &in_order),
                Order::Relevance => join(memory, &chosen),
            };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::memory::BuildParams;
    use crate::text::Segment;

    /// Ten short segments, "Segment k says k." each.
    fn memory() -> Memory {
        let params = BuildParams::from_config(&Config::default());
        let mut memory = Memory::segments_only("unused.", params, "test");
        memory.segments = (0..10)
            .map(|k| {
                let text = format!("Segment {k} says {k}.");
                Segment {
                    index: k,
                    start: 0,
                    end: text.len(),
                    tokens: count_tokens(&text),
                    text,
                }
            })
            .collect();
        memory
    }

    fn fit(
        window: Window,
        imp: &[usize],
        add: &[(usize, f32)],
        order: Order,
    ) -> (String, Vec<usize>) {
        let prompts = Prompts::load().unwrap();
        window
            .fit_ordered(&prompts, PromptId::Answer, "Q?", &memory(), imp, add, order)
            .unwrap()
    }

    #[test]
    fn at_most_n_segments_shows_the_kept_ones_first_then_the_best_scores() {
        let wide = Window::new(4096, 256);
        let scores = [(4, 0.1), (7, 0.9), (2, 0.5), (7, 0.2), (9, 0.5)];
        // No cap: every segment, each once, shown in document order.
        assert_eq!(
            fit(wide, &[3, 1], &scores, Order::Document).1,
            vec![1, 2, 3, 4, 7, 9]
        );
        // At most 3: both kept segments, then the best-scored one not already kept.
        let (text, shown) = fit(wide.at_most(3), &[3, 1], &scores, Order::Relevance);
        assert_eq!(shown, vec![1, 3, 7]);
        assert_eq!(
            text,
            "Segment 3 says 3.\n\nSegment 1 says 1.\n\nSegment 7 says 7."
        );
        // At most 4, nothing kept: by score, ties by index, each segment once.
        let (text, shown) = fit(wide.at_most(4), &[], &scores, Order::Relevance);
        assert_eq!(shown, vec![2, 4, 7, 9]);
        assert!(text.starts_with("Segment 7 says 7.\n\nSegment 2 says 2.\n\nSegment 9"));
        // A cap below the kept segments cuts them in their order.
        assert_eq!(
            fit(wide.at_most(2), &[5, 3, 1], &scores, Order::Document).1,
            vec![3, 5]
        );
        // A segment both kept and scored counts once.
        assert_eq!(
            fit(wide.at_most(2), &[7], &scores, Order::Document).1,
            vec![2, 7]
        );
    }

    #[test]
    fn a_window_too_small_for_every_segment_keeps_the_first_chosen() {
        let prompts = Prompts::load().unwrap();
        let one = count_tokens("Segment 3 says 3.") + 1;
        let probe = Window::new(100_000, 0);
        let overhead =
            probe.prompt_budget() - probe.room(&prompts, PromptId::Answer, "Q?").unwrap();
        let narrow = Window::new(overhead + TEMPLATE_TOKENS + 2 * one + 1, 0);
        assert_eq!(
            fit(narrow, &[3, 1, 5], &[(7, 0.9)], Order::Document).1,
            vec![1, 3]
        );
    }
}
