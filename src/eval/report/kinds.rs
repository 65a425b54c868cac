//! The rows split by question kind: HotpotQA's and 2WikiMultihopQA's question type (bridge,
//! comparison, compositional, ...) and MuSiQue's hop count (2hop, 3hop, 4hop), where the dataset
//! gives one (issue 67: comparison questions and 3-4 hop questions behave otherwise than bridge
//! questions).
//!
//! Invariant: a row's own `kind` wins; rows recorded before rows carried it take their item's
//! kind from the dataset's items, when the report's caller has them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::comparisons::RowKey;
use super::rows::{EvidenceCols, QuestionMeans};
use crate::eval::evidence::ContextSpans;
use crate::eval::rows::ResultRecord;

/// Every row's score and fact recall per question kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ByKind {
    /// The kinds in name order, each with the number of the run's questions of that kind.
    pub kinds: Vec<(String, usize)>,
    pub rows: Vec<KindRow>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KindRow {
    pub method: String,
    pub max_trials: Option<usize>,
    /// One cell per kind, in `ByKind::kinds` order; None where the row answered no question of
    /// that kind.
    pub cells: Vec<Option<KindCell>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KindCell {
    /// The row's questions of this kind.
    pub questions: usize,
    /// 100 x mean F1 (accuracy for multiple choice).
    pub f1: f64,
    /// Mean answer-context fact recall, 0..1, over the questions with gold evidence and spans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fact_recall: Option<f64>,
}

/// The rows split by kind, `kinds` giving each item's kind where its rows do not; None when the
/// run's questions have fewer than two kinds (nothing to split).
pub(super) fn by_kind(
    rows: &BTreeMap<RowKey, Vec<&ResultRecord>>,
    spans: &BTreeMap<(String, String, Option<usize>), ContextSpans>,
    kinds: &BTreeMap<String, String>,
) -> Option<ByKind> {
    // A row's own kind, else its item's.
    fn row_kind<'a>(r: &'a ResultRecord, kinds: &'a BTreeMap<String, String>) -> Option<&'a str> {
        r.kind
            .as_deref()
            .or_else(|| kinds.get(&r.item).map(String::as_str))
    }
    // Each question once, with its kind.
    let mut questions: BTreeMap<&str, &str> = BTreeMap::new();
    for r in rows.values().flatten() {
        if let Some(k) = row_kind(r, kinds) {
            questions.entry(r.item.as_str()).or_insert(k);
        }
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for k in questions.values() {
        *counts.entry(k).or_default() += 1;
    }
    if counts.len() < 2 {
        return None;
    }
    let rows = rows
        .iter()
        .map(|((_, method, max_trials), rs)| {
            // The row's records by kind, split once.
            let mut by: BTreeMap<&str, Vec<&ResultRecord>> = BTreeMap::new();
            for r in rs {
                if let Some(k) = row_kind(r, kinds) {
                    by.entry(k).or_default().push(r);
                }
            }
            KindRow {
                method: method.clone(),
                max_trials: *max_trials,
                cells: counts
                    .keys()
                    .map(|kind| {
                        let of_kind = by.get(kind)?;
                        let shown: Vec<&ContextSpans> =
                            of_kind.iter().filter_map(|r| spans.get(&r.key())).collect();
                        Some(KindCell {
                            questions: of_kind.len(),
                            f1: QuestionMeans::of(of_kind).f1,
                            fact_recall: EvidenceCols::of(&shown).answer.map(|c| c.fact_recall),
                        })
                    })
                    .collect(),
            }
        })
        .collect();
    Some(ByKind {
        kinds: counts
            .into_iter()
            .map(|(k, n)| (k.to_string(), n))
            .collect(),
        rows,
    })
}
