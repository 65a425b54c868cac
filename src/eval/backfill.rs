//! The backfill: context spans computed without the LLM for rows recorded before rows carried
//! them, from the run's items, its committed memories and `results.jsonl`.
//!
//! Boundary: reads those files and writes only `DIR/backfill.jsonl`. Invariant: the backfill is
//! a function of those files (no LLM call), so writing it twice gives the same bytes; a row's
//! own spans always win over the backfill's ([`ContextSpans::or`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::datasets::QaItem;
use super::evidence::{tokens_in, ContextSpans};
use super::rows::{doc_key, ResultRecord};
use crate::answer::{with_options, Window};
use crate::methods::{self, MemoryKind, MethodSpec, Recorded};
use crate::prompts::Prompts;
use crate::text::segment;
use crate::text::span::{self, Span};

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
