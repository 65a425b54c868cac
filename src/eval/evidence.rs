//! Whether a method put the evidence in front of the model: the context spans a row showed,
//! the gold evidence of its item, fact recall and the all-facts rate, and the backfill that
//! computes spans for rows recorded before rows carried them.
//!
//! Fact recall of a row: the share of its item's supporting sentences that lie wholly inside
//! the spans shown (a sentence cut by a segment boundary counts only when both sides were
//! shown). A row is "all facts" when every supporting sentence was shown. Items without gold
//! evidence (QuALITY, Qasper) have no recall: "n/a", never 0.
//!
//! Boundary: the backfill reads the run's items, its committed memories and `results.jsonl`,
//! and writes only `DIR/backfill.jsonl`. Invariant: the backfill is a function of those files
//! (no LLM call), so writing it twice gives the same bytes; a row's own spans always win over
//! the backfill's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::datasets::QaItem;
use super::runner::{doc_key, ResultRecord};
use crate::answer::{with_options, Window};
use crate::methods::{self, MemoryKind, MethodSpec, Recorded};
use crate::prompts::Prompts;
use crate::text::span::{self, Span};
use crate::text::{count_tokens, segment};

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

/// One line of `DIR/backfill.jsonl`: spans computed without the LLM for a row recorded before
/// rows carried them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BackfillRecord {
    pub item: String,
    pub method: String,
    pub max_trials: Option<usize>,
    #[serde(flatten)]
    pub spans: ContextSpans,
    /// How the spans were found, or why some could not be.
    pub note: String,
}

/// The file the backfill writes in a run directory.
pub const BACKFILL: &str = "backfill.jsonl";

type Key = (String, String, Option<usize>);

/// Reads `DIR/backfill.jsonl` (none: empty).
pub fn read_backfill(dir: &Path) -> Result<BTreeMap<Key, ContextSpans>, String> {
    let path = dir.join(BACKFILL);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r: BackfillRecord = serde_json::from_str(line)
            .map_err(|e| format!("{} line {}: {e}", path.display(), i + 1))?;
        out.insert((r.item, r.method, r.max_trials), r.spans);
    }
    Ok(out)
}

/// What the backfill needs to map a row's recorded indices through its memory.
pub struct BackfillCtx<'a> {
    pub prompts: &'a Prompts,
    pub window: Window,
    /// The segment length the segment-indexed methods used.
    pub segment_tokens: usize,
    /// The run's memory directory (`DIR/memories`).
    pub memories: PathBuf,
}

/// Computes the spans of every row in `results` that lacks them (rows recorded before spans
/// were), from the row's `segments_used` and the memory its indices refer to, and writes them
/// to `DIR/backfill.jsonl` (replacing the file; nothing is written when no row needs it).
/// Returns the number of rows backfilled and the notes of rows whose spans could not be found.
pub fn backfill(
    ctx: &BackfillCtx<'_>,
    dir: &Path,
    items: &[QaItem],
    results: &[ResultRecord],
) -> Result<(usize, Vec<String>), String> {
    let by_id: BTreeMap<&str, &QaItem> = items.iter().map(|i| (i.id.as_str(), i)).collect();
    let mut memories: BTreeMap<(String, MemoryKind), Option<Vec<Span>>> = BTreeMap::new();
    let mut lines: BTreeMap<Key, BackfillRecord> = BTreeMap::new();
    let mut problems = Vec::new();
    for r in results {
        if r.spans.answer_spans.is_some() && r.spans.gold_spans.is_some() {
            continue;
        }
        let Some(item) = by_id.get(r.item.as_str()) else {
            problems.push(format!("{} {}: item not in the dataset", r.method, r.item));
            continue;
        };
        let (spans, note) = row_spans(ctx, item, r, &mut memories);
        if !note.is_empty() && spans.answer_spans.is_none() {
            problems.push(format!("{} {}: {note}", r.method, r.item));
        }
        lines.insert(
            r.key(),
            BackfillRecord {
                item: r.item.clone(),
                method: r.method.clone(),
                max_trials: r.max_trials,
                spans,
                note,
            },
        );
    }
    if lines.is_empty() {
        return Ok((0, problems));
    }
    let mut text = String::new();
    for rec in lines.values() {
        text.push_str(&serde_json::to_string(rec).map_err(|e| e.to_string())?);
        text.push('\n');
    }
    crate::fsutil::write_atomic(&dir.join(BACKFILL), text.as_bytes())?;
    Ok((lines.len(), problems))
}

/// The spans of one old row, and a note on how they were found.
fn row_spans(
    ctx: &BackfillCtx<'_>,
    item: &QaItem,
    r: &ResultRecord,
    memories: &mut BTreeMap<(String, MemoryKind), Option<Vec<Span>>>,
) -> (ContextSpans, String) {
    let document = item.context.as_str();
    let gold = item.gold_spans.clone();
    let none = |note: String| {
        (
            ContextSpans {
                gold_spans: gold.clone(),
                ..ContextSpans::default()
            },
            note,
        )
    };
    if r.error.is_some() {
        return none("the row failed: nothing was shown".into());
    }
    let Ok(spec) = r.method.parse::<MethodSpec>() else {
        return none(format!("unknown method {}", r.method));
    };
    let q = with_options(&item.question, &item.options);
    let used = &r.segments_used;
    let (answer, read, note): (Option<Vec<Span>>, Vec<Span>, String) = match spec.recorded_context()
    {
        Recorded::Truncation { from_end } => {
            match methods::vanilla_text(ctx.prompts, ctx.window, document, &q, from_end) {
                Ok((text, _)) => {
                    let s = span::merge(vec![methods::vanilla_span(document, &text, from_end)]);
                    (
                        Some(s.clone()),
                        s,
                        "the truncation range, recomputed".into(),
                    )
                }
                Err(e) => return none(format!("cannot render the answer prompt: {e}")),
            }
        }
        Recorded::Segments { answer } => {
            let units: Vec<Span> = segment(document, ctx.segment_tokens)
                .iter()
                .map(|s| (s.start, s.end))
                .collect();
            let read = span::of_indices(&units, used);
            // The baselines, and GES (whose only prompt with segments is its answer), showed
            // segments_used in the answer prompt.
            if answer {
                (
                    Some(read.clone()),
                    read,
                    "segments_used (one prompt)".into(),
                )
            } else {
                // The row kept every segment shown, not the final answer prompt's: what the
                // answer showed is not known for these rows.
                (
                    None,
                    read,
                    "read spans from segments_used; the answer prompt's segments were not recorded"
                        .into(),
                )
            }
        }
        Recorded::Units => {
            let kind = spec.memory_kind();
            let key = (doc_key(document), kind);
            let units = memories
                .entry(key)
                .or_insert_with(|| memory_units(&ctx.memories, document, kind))
                .clone();
            let Some(units) = units else {
                return none(format!(
                    "no single readable {} memory of this document in {}",
                    kind.name(),
                    ctx.memories.display()
                ));
            };
            let read = span::of_indices(&units, used);
            // Each of these answers from what it read: the final cut's leaves, the leaves read
            // (knowledge tree, MemWalker) or the level-1 chunks visited (GARLIC).
            (
                Some(read.clone()),
                read,
                format!("segments_used mapped through the {} memory", kind.name()),
            )
        }
        Recorded::Unknown => {
            return none(format!(
                "{} rows always carried their spans: nothing to recover",
                spec
            ))
        }
    };
    let spans = ContextSpans {
        answer_context_tokens: answer.as_ref().map(|a| tokens_in(document, a)),
        answer_spans: answer,
        read_spans: Some(read),
        gold_spans: gold,
    };
    (spans, note)
}

/// The unit spans of the one memory of `kind` for `document` in `dir` (files are named
/// `{document hash}-{kind}-{key}`); None when there is none, several, or it does not read or
/// does not cover the document.
fn memory_units(dir: &Path, document: &str, kind: MemoryKind) -> Option<Vec<Span>> {
    let path = find_memory(dir, document, kind)?;
    let prepared = methods::load_prepared(kind, &path).ok()?;
    // The units must be the document's own pieces, in order.
    prepared.covers(document).then(|| prepared.unit_spans())
}

/// The one memory file of `kind` for `document` in a run's memory directory (files are named
/// `{document hash}-{kind}-{key}`); None when there is none or several.
pub fn find_memory(dir: &Path, document: &str, kind: MemoryKind) -> Option<PathBuf> {
    let prefix = format!("{}-{}-", doc_key(document), kind.name());
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .collect();
    if found.len() != 1 {
        return None;
    }
    found.pop()
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
