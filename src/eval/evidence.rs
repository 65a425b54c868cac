//! Whether a method put the evidence in front of the model: the context spans a row showed,
//! the gold evidence of its item, fact recall and the all-facts rate (`backfill` computes the
//! spans of rows recorded before rows carried them).
//!
//! Fact recall of a row: the share of its item's supporting sentences that lie wholly inside
//! the spans shown (a sentence cut by a segment boundary counts only when both sides were
//! shown). A row is "all facts" when every supporting sentence was shown. Items without gold
//! evidence (QuALITY, Qasper) have no recall: "n/a", never 0.

use serde::{Deserialize, Serialize};

use crate::text::count_tokens;
use crate::text::span::{self, Span};

/// The context a row showed and its item's gold evidence. Flattened into `results.jsonl`
/// rows (absent keys in rows recorded before spans were) and into `backfill.jsonl` lines.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ContextSpans {
    /// Byte ranges of the document shown verbatim in the final answer prompt (merged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_spans: Option<Vec<Span>>,
    /// Byte ranges shown in any prompt of the question, the answer's included (merged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_spans: Option<Vec<Span>>,
    /// cl100k tokens of the document text inside `answer_spans`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_context_tokens: Option<usize>,
    /// The byte ranges of the item's supporting sentences; None where the dataset gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gold_spans: Option<Vec<Span>>,
}

impl ContextSpans {
    /// The spans of a finished question over `document`.
    pub fn of(document: &str, answer: Vec<Span>, read: Vec<Span>, gold: Option<Vec<Span>>) -> Self {
        ContextSpans {
            answer_context_tokens: Some(tokens_in(document, &answer)),
            answer_spans: Some(answer),
            read_spans: Some(read),
            gold_spans: gold,
        }
    }

    /// Fact recall of the answer context: (supporting sentences shown, supporting sentences);
    /// None without gold evidence or answer spans.
    pub fn answer_recall(&self) -> Option<(usize, usize)> {
        recall(self.gold_spans.as_deref()?, self.answer_spans.as_deref()?)
    }

    /// The answer context's precision: the share of its document bytes that lie inside the
    /// gold supporting sentences, 0..1; None without gold evidence or answer spans, or for an
    /// empty context.
    pub fn answer_gold_share(&self) -> Option<f64> {
        gold_share(self.gold_spans.as_deref()?, self.answer_spans.as_deref()?)
    }

    /// Fact recall of everything read.
    pub fn read_recall(&self) -> Option<(usize, usize)> {
        recall(self.gold_spans.as_deref()?, self.read_spans.as_deref()?)
    }

    /// Fills what `self` lacks from `other`.
    pub fn or(self, other: &ContextSpans) -> ContextSpans {
        ContextSpans {
            answer_spans: self.answer_spans.or_else(|| other.answer_spans.clone()),
            read_spans: self.read_spans.or_else(|| other.read_spans.clone()),
            answer_context_tokens: self.answer_context_tokens.or(other.answer_context_tokens),
            gold_spans: self.gold_spans.or_else(|| other.gold_spans.clone()),
        }
    }
}

/// (gold spans lying wholly inside `shown`, gold spans); None when there is no gold evidence.
pub fn recall(gold: &[Span], shown: &[Span]) -> Option<(usize, usize)> {
    if gold.is_empty() {
        return None;
    }
    let shown = span::merge(shown.to_vec());
    let hits = gold.iter().filter(|&&g| span::covered(g, &shown)).count();
    Some((hits, gold.len()))
}

/// The share of the bytes of `shown` that lie inside `gold` (both lists of byte ranges);
/// None when there is no gold evidence or nothing was shown.
pub fn gold_share(gold: &[Span], shown: &[Span]) -> Option<f64> {
    if gold.is_empty() {
        return None;
    }
    let shown = span::merge(shown.to_vec());
    let gold = span::merge(gold.to_vec());
    let total: usize = shown.iter().map(|s| s.1.saturating_sub(s.0)).sum();
    if total == 0 {
        return None;
    }
    let inside: usize = shown
        .iter()
        .flat_map(|s| {
            gold.iter()
                .map(move |g| s.1.min(g.1).saturating_sub(s.0.max(g.0)))
        })
        .sum();
    Some(inside as f64 / total as f64)
}

/// cl100k tokens of the text of `spans` in `document` (spans off the document count 0).
pub fn tokens_in(document: &str, spans: &[Span]) -> usize {
    spans
        .iter()
        .filter_map(|&(a, b)| document.get(a..b))
        .map(count_tokens)
        .sum()
}

/// Fact recall and all-facts rate over rows: (mean recall 0..1, share of rows with every fact
/// shown 0..1, rows measured). None when no row has both gold evidence and spans.
pub fn summarise(
    recalls: impl Iterator<Item = Option<(usize, usize)>>,
) -> Option<(f64, f64, usize)> {
    let (mut sum, mut all, mut n) = (0.0, 0usize, 0usize);
    for (hits, facts) in recalls.flatten() {
        sum += hits as f64 / facts as f64;
        all += usize::from(hits == facts);
        n += 1;
    }
    (n > 0).then(|| (sum / n as f64, all as f64 / n as f64, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_counts_sentences_wholly_inside_the_shown_spans() {
        // Three gold sentences; the second is cut by a segment boundary at 50.
        let gold = vec![(10, 20), (45, 55), (90, 99)];
        // Only the segment before the boundary: the cut sentence is not shown.
        assert_eq!(recall(&gold, &[(0, 50)]), Some((1, 3)));
        // Both sides of the boundary: it is.
        assert_eq!(recall(&gold, &[(50, 80), (0, 50)]), Some((2, 3)));
        assert_eq!(recall(&gold, &[(0, 100)]), Some((3, 3)));
        assert_eq!(recall(&gold, &[]), Some((0, 3)));
        // No gold evidence: n/a, never 0.
        assert_eq!(recall(&[], &[(0, 100)]), None);
    }

    #[test]
    fn gold_share_is_the_gold_part_of_the_bytes_shown() {
        let gold = vec![(10, 20), (30, 40)];
        assert_eq!(gold_share(&gold, &[(10, 20)]), Some(1.0));
        assert_eq!(gold_share(&gold, &[(0, 40)]), Some(0.5));
        assert_eq!(gold_share(&gold, &[(15, 35), (0, 5)]), Some(10.0 / 25.0));
        assert_eq!(gold_share(&gold, &[(50, 60)]), Some(0.0));
        assert_eq!(gold_share(&gold, &[]), None);
        assert_eq!(gold_share(&[], &[(0, 10)]), None);
    }

    #[test]
    fn summaries_average_recall_and_count_all_facts_rows() {
        let rows = vec![Some((1, 2)), Some((3, 3)), None, Some((0, 4))];
        let (recall, all, n) = summarise(rows.into_iter()).unwrap();
        assert_eq!(n, 3);
        assert!((recall - (0.5 + 1.0 + 0.0) / 3.0).abs() < 1e-12);
        assert!((all - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(summarise(vec![None, None].into_iter()), None);
    }

    #[test]
    fn context_tokens_count_the_document_text_in_the_spans() {
        let doc = "alpha beta gamma delta";
        assert_eq!(tokens_in(doc, &[(0, 5)]), count_tokens("alpha"));
        assert_eq!(
            tokens_in(doc, &[(0, 5), (11, 16)]),
            count_tokens("alpha") + count_tokens("gamma")
        );
        assert_eq!(tokens_in(doc, &[(100, 200)]), 0);
    }

    #[test]
    fn a_rows_own_spans_win_over_the_backfill() {
        let own = ContextSpans {
            answer_spans: Some(vec![(0, 1)]),
            ..ContextSpans::default()
        };
        let old = ContextSpans {
            answer_spans: Some(vec![(5, 9)]),
            read_spans: Some(vec![(5, 9)]),
            gold_spans: Some(vec![(5, 6)]),
            answer_context_tokens: Some(2),
        };
        let got = own.or(&old);
        assert_eq!(got.answer_spans, Some(vec![(0, 1)]));
        assert_eq!(got.read_spans, Some(vec![(5, 9)]));
        assert_eq!(got.gold_spans, Some(vec![(5, 6)]));
    }
}
