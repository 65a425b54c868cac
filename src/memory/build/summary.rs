//! The summary (QRMeM section 2.1): the document's summary, written from the opening of each
//! of its segments' lines, that every extraction prompt carries.

use futures::stream::{self, StreamExt};
use rayon::prelude::*;
use serde::Deserialize;
use serde_json::json;

use super::{failure, schema, BuildError, Builder};
use crate::llm::Message;
use crate::memory::types::StepFailure;
use crate::prompts::PromptId;
use crate::text::{count_tokens, Segment};

#[derive(Deserialize)]
struct SummaryReply {
    summary: String,
}

impl Builder<'_> {
    /// The document summary T, from the opening lines of every segment (a skim of about one
    /// call's input budget), map-reduce when even the skim exceeds that budget: the summary
    /// covers the whole document and costs about 0.25 prompt tokens per document token.
    pub(super) async fn summarize(
        &self,
        segments: &[Segment],
        failures: &mut Vec<StepFailure>,
    ) -> Result<String, BuildError> {
        let budget = self.params.summary_input_tokens;
        let per_segment = (budget * 9 / 10 / segments.len().max(1)).clamp(24, 160);
        let mut parts: Vec<String> = segments
            .par_iter()
            .map(|s| skim(s, per_segment))
            .filter(|s| !s.is_empty())
            .collect();
        for _round in 0..8 {
            // Group consecutive parts up to the budget.
            let mut groups: Vec<String> = Vec::new();
            let mut cur = String::new();
            let mut cur_tokens = 0;
            for p in &parts {
                let t = count_tokens(p);
                if !cur.is_empty() && cur_tokens + t > budget {
                    groups.push(std::mem::take(&mut cur));
                    cur_tokens = 0;
                }
                if !cur.is_empty() {
                    cur.push_str("\n\n");
                }
                cur.push_str(p);
                cur_tokens += t;
            }
            if !cur.is_empty() {
                groups.push(cur);
            }
            let single = groups.len() == 1;
            let prompts: Vec<String> = groups
                .iter()
                .map(|g| self.prompts.render(PromptId::Summary, &[("context", g)]))
                .collect::<Result<_, _>>()?;
            let results: Vec<(usize, Result<String, String>)> = stream::iter(prompts.into_iter().enumerate())
                .map(|(i, p)| async move {
                    let r = self
                        .llm
                        .chat_json::<SummaryReply>(
                            "summary",
                            vec![Message::user(p)],
                            schema("summary", json!({"summary": {"type": "string", "minLength": 1, "maxLength": 700}}), &["summary"]),
                        )
                        .await
                        .map(|s| s.value.summary.trim().to_string())
                        .map_err(|e| e.to_string());
                    (i, r)
                })
                .buffer_unordered(self.concurrency)
                .collect()
                .await;
            let mut results = results;
            results.sort_by_key(|(i, _)| *i);
            let mut next = Vec::new();
            for (_, r) in results {
                match r {
                    Ok(s) if !s.is_empty() => next.push(s),
                    Ok(_) => failures.push(failure(None, "summary", "the summary was empty")),
                    Err(e) => failures.push(failure(None, "summary", e)),
                }
            }
            if single || next.len() <= 1 {
                return Ok(next.into_iter().next().unwrap_or_default());
            }
            parts = next;
        }
        Ok(parts.join("\n"))
    }
}

/// The opening of each line of a segment (its first sentence, at most 30 words), up to
/// `budget` tokens: what the summary reads of the segment. Layout labels are skipped.
fn skim(segment: &Segment, budget: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    for line in segment.text.lines() {
        let line = line.trim();
        if line.is_empty() || schema::is_layout_label(line) {
            continue;
        }
        let end = line
            .char_indices()
            .find(|&(i, c)| matches!(c, '.' | '!' | '?') && line[i + 1..].starts_with(' ') && i > 3)
            .map_or(line.len(), |(i, _)| i + 1);
        let first: String = line[..end]
            .split_whitespace()
            .take(30)
            .collect::<Vec<_>>()
            .join(" ");
        let t = count_tokens(&first);
        if used > 0 && used + t > budget {
            break;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&first);
        used += t;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::segment;

    #[test]
    fn the_skim_reads_every_line_opening_and_skips_labels() {
        let seg = segment(
            "Passage 3:\nKarl Weber\nKarl Weber was a painter from Lyon. He moved to Paris in \
             1901 and painted bridges.\nPassage 4:\nAare\nThe Aare is a river. It is long.",
            1000,
        )
        .remove(0);
        let s = skim(&seg, 200);
        assert_eq!(
            s,
            "Karl Weber\nKarl Weber was a painter from Lyon.\nAare\nThe Aare is a river."
        );
        // A small budget keeps the first lines only.
        assert_eq!(skim(&seg, 3), "Karl Weber");
    }
}
