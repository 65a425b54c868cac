//! The comparisons of rows: every row on the questions all rows answered (when they answered
//! different sets), and every row against the reference row, paired by question.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::rows::{EvidenceCols, QuestionMeans};
use crate::eval::evidence::ContextSpans;
use crate::eval::paired::{self, Interval};
use crate::eval::rows::ResultRecord;

/// One row scored on the questions every row has a result for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommonRow {
    pub method: String,
    pub max_trials: Option<usize>,
    pub em: f64,
    pub f1: f64,
    /// Requests sent to the server per question, as in the main table.
    #[serde(default)]
    pub requests_per_question: f64,
    /// LLM calls per question (requests plus reply-cache hits), as in the main table.
    #[serde(default)]
    pub calls_per_question: f64,
    pub prompt_tokens_per_question: f64,
    pub completion_tokens_per_question: f64,
    #[serde(default)]
    pub evidence: EvidenceCols,
}

/// The paired comparison, made only when the rows answered different sets of questions (a run
/// part-way, or methods added to a finished run): every row on the same questions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Common {
    pub questions: usize,
    pub rows: Vec<CommonRow>,
}

/// The paired comparison against a reference row (the experiment's `reference`, by default
/// bm25-top3): per row, the difference in F1 (accuracy for multiple choice) and in fact recall
/// on the questions both rows scored, with 95% paired bootstrap intervals.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Paired {
    pub reference: String,
    pub rows: Vec<PairedRow>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairedRow {
    pub method: String,
    pub max_trials: Option<usize>,
    /// Points of F1 (or accuracy), method minus reference.
    pub score: Interval,
    /// Points of answer-context fact recall, method minus reference, on the questions both
    /// rows have spans and gold evidence for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fact_recall: Option<Interval>,
}

pub(super) type RowKey = (usize, String, Option<usize>);

/// Every row against the reference row (`METHOD` or `METHOD@TRIALS`), paired by question;
/// None when the reference has no row or no other row exists.
pub(super) fn paired_rows(
    rows: &BTreeMap<RowKey, Vec<&ResultRecord>>,
    spans: &BTreeMap<(String, String, Option<usize>), ContextSpans>,
    reference: &str,
) -> Option<Paired> {
    let (ref_method, ref_trials) = match reference.split_once('@') {
        Some((m, t)) => (m, Some(t.parse::<usize>().ok()?)),
        None => (reference, None),
    };
    let (_, reference_rows) = rows
        .iter()
        .find(|((_, m, t), _)| m == ref_method && *t == ref_trials)?;
    let by_item: BTreeMap<&str, &ResultRecord> = reference_rows
        .iter()
        .map(|r| (r.item.as_str(), *r))
        .collect();
    let recall = |r: &ResultRecord| {
        spans
            .get(&r.key())
            .and_then(ContextSpans::answer_recall)
            .map(|(hits, facts)| 100.0 * hits as f64 / facts as f64)
    };
    let out: Vec<PairedRow> = rows
        .iter()
        .filter(|((_, m, t), _)| !(m == ref_method && *t == ref_trials))
        .filter_map(|((_, method, max_trials), rs)| {
            let both: Vec<(&ResultRecord, &ResultRecord)> = rs
                .iter()
                .filter_map(|r| by_item.get(r.item.as_str()).map(|b| (*r, *b)))
                .collect();
            let score: Vec<(f64, f64)> = both
                .iter()
                .map(|(r, b)| (100.0 * r.f1, 100.0 * b.f1))
                .collect();
            let facts: Vec<(f64, f64)> = both
                .iter()
                .filter_map(|(r, b)| Some((recall(r)?, recall(b)?)))
                .collect();
            Some(PairedRow {
                method: method.clone(),
                max_trials: *max_trials,
                score: paired::interval(&score)?,
                fact_recall: paired::interval(&facts),
            })
        })
        .collect();
    (!out.is_empty()).then(|| Paired {
        reference: reference.to_string(),
        rows: out,
    })
}

/// Every row on the questions all rows have a result for; `None` when the rows already share
/// one set of questions, or share none.
pub(super) fn common_rows(
    rows: &BTreeMap<RowKey, Vec<&ResultRecord>>,
    spans: &BTreeMap<(String, String, Option<usize>), ContextSpans>,
) -> Option<Common> {
    use std::collections::BTreeSet;
    let sets: Vec<BTreeSet<&str>> = rows
        .values()
        .map(|rs| rs.iter().map(|r| r.item.as_str()).collect())
        .collect();
    let first = sets.first()?;
    if sets.iter().all(|s| s == first) {
        return None;
    }
    let shared: BTreeSet<&str> = first
        .iter()
        .copied()
        .filter(|i| sets.iter().all(|s| s.contains(i)))
        .collect();
    if shared.is_empty() {
        return None;
    }
    let rows = rows
        .iter()
        .map(|((_, method, max_trials), rs)| {
            let rs: Vec<&ResultRecord> = rs
                .iter()
                .copied()
                .filter(|r| shared.contains(r.item.as_str()))
                .collect();
            let m = QuestionMeans::of(&rs);
            CommonRow {
                method: method.clone(),
                max_trials: *max_trials,
                em: m.em,
                f1: m.f1,
                requests_per_question: m.requests,
                calls_per_question: m.calls,
                prompt_tokens_per_question: m.prompt_tokens,
                completion_tokens_per_question: m.completion_tokens,
                evidence: EvidenceCols::of(
                    &rs.iter()
                        .filter_map(|r| spans.get(&r.key()))
                        .collect::<Vec<_>>(),
                ),
            }
        })
        .collect();
    Some(Common {
        questions: shared.len(),
        rows,
    })
}
