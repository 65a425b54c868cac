//! The rows of a report: per method (and max trials) the scores, cost, evidence and navigation
//! per question; per memory kind the build cost per document; and the means they share.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::eval::evidence::{self, ContextSpans};
use crate::eval::rows::{BuildRecord, ResultRecord, RowCost};

/// One row of Table 1.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MethodRow {
    pub method: String,
    pub max_trials: Option<usize>,
    pub questions: usize,
    /// 100 x mean exact match (accuracy for multiple choice).
    pub em: f64,
    /// 100 x mean F1 (accuracy for multiple choice).
    pub f1: f64,
    pub failures: usize,
    /// Requests sent to the LLM per question.
    pub requests_per_question: f64,
    /// Requests + reply-cache hits per question: the LLM calls the method needs.
    pub calls_per_question: f64,
    /// Tokens of those calls: sent ones as the server counted them, cached ones as they cost
    /// when first sent.
    pub prompt_tokens_per_question: f64,
    pub completion_tokens_per_question: f64,
    /// Share of the sent prompt tokens the server reused from its prompt cache (0..1): GARLIC's
    /// growing visited-node prefix shows here.
    #[serde(default)]
    pub server_cached_share: f64,
    pub wall_secs_per_question: f64,
    /// What the answerer was shown of the gold evidence.
    #[serde(default)]
    pub evidence: EvidenceCols,
    /// The graph navigators' diagnostics, over the rows that recorded them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub navigation: Option<NavRow>,
}

/// Navigation diagnostics of a row, per question.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NavRow {
    /// Questions whose rows recorded diagnostics.
    pub questions: usize,
    pub start_entities: f64,
    /// |S_imp| before the window.
    pub s_imp: f64,
    pub checks: f64,
    /// Checks that answered (-2), of all checks.
    pub answered_checks: usize,
    pub all_checks: usize,
    /// Checks whose reply never parsed.
    pub failed_checks: usize,
    pub expansions: f64,
    /// Expansions after which the next prompt showed another set of segments.
    pub changed_expansions: f64,
    /// Questions where at least one expansion changed the shown set.
    pub questions_changed: usize,
    /// |S_imp| after ranking and the start share (rows that recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s_imp_kept: Option<f64>,
    /// Neighbours taken that changed nothing shown (no trial spent), per question, over the
    /// rows that recorded |S_imp| kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_picks: Option<f64>,
}

impl NavRow {
    pub(super) fn of(rs: &[&ResultRecord]) -> Option<NavRow> {
        let navs: Vec<&crate::navigate::NavDiagnostics> =
            rs.iter().filter_map(|r| r.nav.as_ref()).collect();
        if navs.is_empty() {
            return None;
        }
        let checks = || navs.iter().flat_map(|n| n.checks.iter());
        Some(NavRow {
            questions: navs.len(),
            start_entities: mean(navs.iter().map(|n| n.start_entities as f64)),
            s_imp: mean(navs.iter().filter_map(|n| n.s_imp.map(|x| x as f64))),
            checks: mean(navs.iter().map(|n| n.checks.len() as f64)),
            answered_checks: checks().filter(|c| c.action == Some(-2)).count(),
            all_checks: checks().count(),
            failed_checks: checks().filter(|c| c.failed).count(),
            expansions: mean(navs.iter().map(|n| n.expansions as f64)),
            changed_expansions: mean(navs.iter().map(|n| n.expansions_changed as f64)),
            questions_changed: navs.iter().filter(|n| n.expansions_changed > 0).count(),
            s_imp_kept: navs
                .iter()
                .any(|n| n.s_imp_kept.is_some())
                .then(|| mean(navs.iter().filter_map(|n| n.s_imp_kept.map(|x| x as f64)))),
            idle_picks: navs.iter().any(|n| n.s_imp_kept.is_some()).then(|| {
                mean(
                    navs.iter()
                        .filter(|n| n.s_imp_kept.is_some())
                        .map(|n| n.idle_picks as f64),
                )
            }),
        })
    }
}

/// Fact recall over the rows with gold evidence and spans.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvidenceCell {
    /// Questions measured (with gold evidence and known spans).
    pub questions: usize,
    /// Mean share of an item's supporting sentences shown, 0..1.
    pub fact_recall: f64,
    /// Questions whose every supporting sentence was shown.
    pub all_facts: usize,
}

/// The evidence columns of a row: "n/a" (None) where the dataset has no gold evidence or the
/// spans are not known.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EvidenceCols {
    /// In the final answer prompt.
    pub answer: Option<EvidenceCell>,
    /// In any prompt of the question.
    pub read: Option<EvidenceCell>,
    /// Mean cl100k tokens of document text in the final answer prompt.
    pub answer_context_tokens: Option<f64>,
    /// Mean share of the answer context's document bytes inside the gold supporting sentences,
    /// 0..1 (its precision; absent from reports written before it was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gold_share: Option<f64>,
}

impl EvidenceCols {
    pub(super) fn of(spans: &[&ContextSpans]) -> Self {
        let cell = |f: &dyn Fn(&ContextSpans) -> Option<(usize, usize)>| {
            evidence::summarise(spans.iter().map(|s| f(s))).map(|(recall, all, n)| EvidenceCell {
                questions: n,
                fact_recall: recall,
                all_facts: (all * n as f64).round() as usize,
            })
        };
        let tokens: Vec<f64> = spans
            .iter()
            .filter_map(|s| s.answer_context_tokens.map(|t| t as f64))
            .collect();
        EvidenceCols {
            answer: cell(&ContextSpans::answer_recall),
            read: cell(&ContextSpans::read_recall),
            answer_context_tokens: (!tokens.is_empty()).then(|| mean(tokens.into_iter())),
            gold_share: {
                let shares: Vec<f64> = spans.iter().filter_map(|s| s.answer_gold_share()).collect();
                (!shares.is_empty()).then(|| mean(shares.into_iter()))
            },
        }
    }

    /// The "fact recall % | all facts | read recall % | read all facts | answer ctx tok/q |
    /// gold share %" cells.
    pub(super) fn cells(&self) -> String {
        let cell = |c: &Option<EvidenceCell>| match c {
            Some(c) => format!(
                "{:.1} | {}/{}",
                100.0 * c.fact_recall,
                c.all_facts,
                c.questions
            ),
            None => "n/a | n/a".to_string(),
        };
        format!(
            "{} | {} | {} | {}",
            cell(&self.answer),
            cell(&self.read),
            self.answer_context_tokens
                .map_or("n/a".to_string(), |t| format!("{t:.0}")),
            self.gold_share
                .map_or("n/a".to_string(), |g| format!("{:.1}", 100.0 * g))
        )
    }
}

/// The columns `EvidenceCols::cells` fills.
pub(super) const EVIDENCE_COLUMNS: [&str; 6] = [
    "fact recall %",
    "all facts",
    "read fact recall %",
    "read all facts",
    "answer-context tok/q",
    "gold share of context %",
];

/// Build cost per memory kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BuildRow {
    pub kind: String,
    pub documents: usize,
    pub failures: usize,
    pub document_tokens_per_doc: f64,
    pub segments_per_doc: f64,
    pub requests_per_doc: f64,
    pub calls_per_doc: f64,
    pub prompt_tokens_per_doc: f64,
    pub completion_tokens_per_doc: f64,
    /// Prompt + completion tokens of the build over the document's own tokens.
    pub tokens_per_document_token: f64,
    /// Share of the sent prompt tokens the server reused from its prompt cache (0..1).
    #[serde(default)]
    pub server_cached_share: f64,
    pub wall_secs_per_doc: f64,
}

pub(super) fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        s / n as f64
    }
}

/// The per-question means a row reports, in the main table and the paired one alike, so the two
/// tables cannot drift apart in how they score or count.
pub(super) struct QuestionMeans {
    /// 100 x mean exact match.
    pub(super) em: f64,
    /// 100 x mean F1.
    pub(super) f1: f64,
    pub(super) requests: f64,
    pub(super) calls: f64,
    pub(super) prompt_tokens: f64,
    pub(super) completion_tokens: f64,
}

impl QuestionMeans {
    pub(super) fn of(rs: &[&ResultRecord]) -> Self {
        QuestionMeans {
            em: 100.0 * mean(rs.iter().map(|r| r.em)),
            f1: 100.0 * mean(rs.iter().map(|r| r.f1)),
            requests: mean(rs.iter().map(|r| r.cost.requests as f64)),
            calls: mean(rs.iter().map(|r| r.cost.calls() as f64)),
            prompt_tokens: mean(rs.iter().map(|r| r.cost.all_prompt_tokens() as f64)),
            completion_tokens: mean(rs.iter().map(|r| r.cost.all_completion_tokens() as f64)),
        }
    }
}

/// Cached over sent prompt tokens; 0 when nothing was sent or the server did not say.
pub(super) fn cached_share<'a>(costs: impl Iterator<Item = &'a RowCost>) -> f64 {
    let (sent, cached) = costs.fold((0u64, 0u64), |(s, c), x| {
        (s + x.prompt_tokens, c + x.cached_prompt_tokens)
    });
    if sent > 0 {
        cached as f64 / sent as f64
    } else {
        0.0
    }
}

/// One build per (document, kind): the first that succeeded, else the last failure. A memory
/// built again (its file lost, or its key changed) is replayed from the reply cache, and that
/// second row would count the cost twice and the wall time as ~0.
pub(super) fn first_builds(builds: &[BuildRecord]) -> BTreeMap<(String, String), &BuildRecord> {
    let mut first: BTreeMap<(String, String), &BuildRecord> = BTreeMap::new();
    for b in builds {
        let key = (b.document.clone(), b.kind.name().to_string());
        match first.get(&key) {
            Some(kept) if kept.error.is_none() => {}
            _ => {
                first.insert(key, b);
            }
        }
    }
    first
}

/// The build table: per memory kind, the cost per document of its builds.
pub(super) fn build_rows(first: &BTreeMap<(String, String), &BuildRecord>) -> Vec<BuildRow> {
    let mut by_kind: BTreeMap<String, Vec<&BuildRecord>> = BTreeMap::new();
    for b in first.values().copied() {
        by_kind
            .entry(b.kind.name().to_string())
            .or_default()
            .push(b);
    }
    by_kind
        .into_iter()
        .map(|(kind, bs)| {
            let doc_tokens: f64 = bs.iter().map(|b| b.document_tokens as f64).sum();
            let spent: f64 = bs
                .iter()
                .map(|b| (b.cost.all_prompt_tokens() + b.cost.all_completion_tokens()) as f64)
                .sum();
            BuildRow {
                kind,
                documents: bs.len(),
                failures: bs.iter().filter(|b| b.error.is_some()).count(),
                document_tokens_per_doc: mean(bs.iter().map(|b| b.document_tokens as f64)),
                segments_per_doc: mean(bs.iter().map(|b| b.segments as f64)),
                requests_per_doc: mean(bs.iter().map(|b| b.cost.requests as f64)),
                calls_per_doc: mean(bs.iter().map(|b| b.cost.calls() as f64)),
                prompt_tokens_per_doc: mean(bs.iter().map(|b| b.cost.all_prompt_tokens() as f64)),
                completion_tokens_per_doc: mean(
                    bs.iter().map(|b| b.cost.all_completion_tokens() as f64),
                ),
                tokens_per_document_token: if doc_tokens > 0.0 {
                    spent / doc_tokens
                } else {
                    0.0
                },
                server_cached_share: cached_share(bs.iter().map(|b| &b.cost)),
                wall_secs_per_doc: mean(bs.iter().map(|b| b.wall_secs)),
            }
        })
        .collect()
}
