//! The report of a run directory: per method (and max trials) the scores, failures and cost per
//! question, in the layout of the QRMeM paper's Table 1; the build cost per document; and the
//! max-trials sweep (Figure 4). A pure function of `results.jsonl` and `builds.jsonl`, so an
//! interrupted-then-resumed run reports exactly what an uninterrupted one does.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::evidence::{self, ContextSpans};
use super::paired::{self, Interval};
use super::runner::{BuildRecord, ResultRecord, RowCost};
use crate::memory::GraphDiagnostics;
use crate::methods::MemoryKind;

/// The cost-quality figure's file, next to report.md.
pub const COST_QUALITY_PNG: &str = "cost-quality.png";

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
    fn of(rs: &[&ResultRecord]) -> Option<NavRow> {
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
}

impl EvidenceCols {
    fn of(spans: &[&ContextSpans]) -> Self {
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
        }
    }

    /// The "fact recall % | all facts | read recall % | read all facts | answer ctx tok/q" cells.
    fn cells(&self) -> String {
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
            "{} | {} | {}",
            cell(&self.answer),
            cell(&self.read),
            self.answer_context_tokens
                .map_or("n/a".to_string(), |t| format!("{t:.0}"))
        )
    }
}

/// The columns `EvidenceCols::cells` fills.
const EVIDENCE_COLUMNS: [&str; 5] = [
    "fact recall %",
    "all facts",
    "read fact recall %",
    "read all facts",
    "answer-context tok/q",
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

/// A graph memory kind's diagnostics, averaged over its builds that recorded them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphRow {
    pub kind: String,
    /// Builds with diagnostics, of `builds` in all.
    pub documents: usize,
    pub builds: usize,
    pub entities_per_segment: f64,
    pub schema_entities_per_segment: f64,
    pub llm_entities_per_segment: f64,
    pub relation_entities_per_segment: f64,
    pub raw_relations_per_doc: f64,
    /// Kept over extracted relations, over all builds (0..1).
    pub kept_share: f64,
    pub dropped_unresolved_per_doc: Option<f64>,
    pub dropped_self_loop_per_doc: Option<f64>,
    pub dropped_empty_per_doc: Option<f64>,
    /// Relations dropped as unsupported (ends in no one paragraph); None when no build of the
    /// row counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_unsupported_per_doc: Option<f64>,
    pub edges_per_segment: f64,
    pub entities_with_edge: f64,
    pub llm_entities_with_edge: Option<f64>,
    pub median_segments_per_entity: f64,
    pub over_linked_entities_per_doc: f64,
    /// LLM calls (requests and reply-cache hits) per segment, over the builds that counted
    /// unsupported relations (issue 38's joint extraction and after).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_per_segment: Option<f64>,
    /// Prompt tokens (sent and replayed) per document token, over the same builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_per_document_token: Option<f64>,
}

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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub title: String,
    pub dataset: String,
    /// The model the run answers with (the experiment's, the flag's or the configuration's).
    pub model: String,
    /// Rows whose recorded answering model is another: (model, rows). Rows recorded before
    /// rows carried their model are not counted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_models: Vec<(String, usize)>,
    pub items: usize,
    /// "F1" for open questions, "accuracy" for multiple choice.
    pub metric: String,
    pub methods: Vec<MethodRow>,
    pub builds: Vec<BuildRow>,
    /// Mean graph diagnostics per graph memory kind, over the builds that recorded them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphs: Vec<GraphRow>,
    pub notes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common: Option<Common>,
    /// Every other row against the reference row, question by question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired: Option<Paired>,
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

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        s / n as f64
    }
}

/// The per-question means a row reports, in the main table and the paired one alike, so the two
/// tables cannot drift apart in how they score or count.
struct QuestionMeans {
    /// 100 x mean exact match.
    em: f64,
    /// 100 x mean F1.
    f1: f64,
    requests: f64,
    calls: f64,
    prompt_tokens: f64,
    completion_tokens: f64,
}

impl QuestionMeans {
    fn of(rs: &[&ResultRecord]) -> Self {
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
fn cached_share<'a>(costs: impl Iterator<Item = &'a RowCost>) -> f64 {
    let (sent, cached) = costs.fold((0u64, 0u64), |(s, c), x| {
        (s + x.prompt_tokens, c + x.cached_prompt_tokens)
    });
    if sent > 0 {
        cached as f64 / sent as f64
    } else {
        0.0
    }
}

/// The "max trials" and score cells of a row: accuracy alone for multiple choice, else EM | F1.
fn trials_and_score(max_trials: Option<usize>, em: f64, f1: f64, mc: bool) -> (String, String) {
    let trials = max_trials.map_or("-".to_string(), |t| t.to_string());
    let score = if mc {
        format!("{f1:.1}")
    } else {
        format!("{em:.1} | {f1:.1}")
    };
    (trials, score)
}

/// The columns `cost_cells` fills.
const COST_COLUMNS: [&str; 4] = [
    "requests/q",
    "LLM calls/q",
    "prompt tok/q",
    "completion tok/q",
];

/// A markdown table's header and alignment rows: the first column left-aligned, numbers right.
fn table_header(s: &mut String, cols: &[&str]) {
    let _ = writeln!(s, "| {} |", cols.join(" | "));
    let align: Vec<&str> = (0..cols.len())
        .map(|i| if i == 0 { "---" } else { "---:" })
        .collect();
    let _ = writeln!(s, "|{}|", align.join("|"));
}

/// The "requests/q | LLM calls/q | prompt tok/q | completion tok/q" cells, the same in every
/// table that shows them.
fn cost_cells(requests: f64, calls: f64, prompt: f64, completion: f64) -> String {
    format!("{requests:.2} | {calls:.2} | {prompt:.0} | {completion:.0}")
}

/// As a table cell: a percentage, or "-" where the server did not say.
fn share_cell(share: f64) -> String {
    if share > 0.0 {
        format!("{:.0}", 100.0 * share)
    } else {
        "-".to_string()
    }
}

/// How the report lays out its rows.
#[derive(Clone, Copy, Debug)]
pub struct Layout<'a> {
    /// The row order (methods not in it follow by name).
    pub method_order: &'a [String],
    /// The row the paired table compares every other row with: `METHOD` or `METHOD@TRIALS`.
    pub reference: &'a str,
}

/// Builds the report.
pub fn build(
    title: &str,
    model: &str,
    results: &[ResultRecord],
    builds: &[BuildRecord],
    backfill: &BTreeMap<(String, String, Option<usize>), ContextSpans>,
    layout: Layout<'_>,
    notes: Vec<String>,
) -> Report {
    let Layout {
        method_order,
        reference,
    } = layout;
    // The last record of a key wins (there is one per key unless a file was edited).
    let latest = super::runner::latest(results);
    // Each row's spans: its own, else the backfill's; a failed row showed the answerer nothing.
    let none = ContextSpans::default();
    let spans: BTreeMap<(String, String, Option<usize>), ContextSpans> = latest
        .iter()
        .map(|(k, r)| {
            let mut s = r.spans.clone().or(backfill.get(k).unwrap_or(&none));
            if r.error.is_some() {
                s.answer_spans = Some(vec![]);
                s.read_spans = Some(vec![]);
                s.answer_context_tokens = Some(0);
            }
            (k.clone(), s)
        })
        .collect();
    let spans_of = |rs: &[&ResultRecord]| -> Vec<&ContextSpans> {
        rs.iter().filter_map(|r| spans.get(&r.key())).collect()
    };
    let mut rows: BTreeMap<(usize, String, Option<usize>), Vec<&ResultRecord>> = BTreeMap::new();
    for r in latest.values() {
        let rank = method_order
            .iter()
            .position(|m| *m == r.method)
            .unwrap_or(method_order.len());
        rows.entry((rank, r.method.clone(), r.max_trials))
            .or_default()
            .push(r);
    }
    let common = common_rows(&rows, &spans);
    let paired = paired_rows(&rows, &spans, reference);
    let methods = rows
        .into_iter()
        .map(|((_, method, max_trials), rs)| {
            let m = QuestionMeans::of(&rs);
            MethodRow {
                method,
                max_trials,
                questions: rs.len(),
                em: m.em,
                f1: m.f1,
                failures: rs.iter().filter(|r| r.error.is_some()).count(),
                requests_per_question: m.requests,
                calls_per_question: m.calls,
                prompt_tokens_per_question: m.prompt_tokens,
                completion_tokens_per_question: m.completion_tokens,
                server_cached_share: cached_share(rs.iter().map(|r| &r.cost)),
                wall_secs_per_question: mean(rs.iter().map(|r| r.wall_secs)),
                evidence: EvidenceCols::of(&spans_of(&rs)),
                navigation: NavRow::of(&rs),
            }
        })
        .collect();
    // One build per (document, kind): the first that succeeded, else the last failure. A memory
    // built again (its file lost, or its key changed) is replayed from the reply cache, and that
    // second row would count the cost twice and the wall time as ~0.
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
    let mut by_kind: BTreeMap<String, Vec<&BuildRecord>> = BTreeMap::new();
    for b in first.values().copied() {
        by_kind
            .entry(b.kind.name().to_string())
            .or_default()
            .push(b);
    }
    let builds = by_kind
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
        .collect();
    let graphs = graph_rows(&first);
    let multiple_choice = results.iter().any(|r| r.gold_letter.is_some());
    let mut items: Vec<&str> = latest.values().map(|r| r.item.as_str()).collect();
    items.sort_unstable();
    items.dedup();
    let mut datasets: Vec<&str> = latest.values().map(|r| r.dataset.as_str()).collect();
    datasets.sort_unstable();
    datasets.dedup();
    let mut other_models: BTreeMap<&str, usize> = BTreeMap::new();
    for m in latest.values().filter_map(|r| r.model.as_deref()) {
        if m != model {
            *other_models.entry(m).or_default() += 1;
        }
    }
    Report {
        title: title.to_string(),
        dataset: datasets.join(", "),
        model: model.to_string(),
        other_models: other_models
            .into_iter()
            .map(|(m, n)| (m.to_string(), n))
            .collect(),
        items: items.len(),
        metric: if multiple_choice { "accuracy" } else { "F1" }.to_string(),
        methods,
        builds,
        graphs,
        notes,
        common,
        paired,
    }
}

/// Every row against the reference row (`METHOD` or `METHOD@TRIALS`), paired by question;
/// None when the reference has no row or no other row exists.
fn paired_rows(
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

/// The graph table: per graph kind, the mean diagnostics of the builds that recorded them.
fn graph_rows(first: &BTreeMap<(String, String), &BuildRecord>) -> Vec<GraphRow> {
    // Per kind: builds, their diagnostics, and (calls/segment, prompt tokens/document token).
    type Acc<'a> = (usize, Vec<&'a GraphDiagnostics>, Vec<(f64, f64)>);
    let mut by_kind: BTreeMap<&str, Acc<'_>> = BTreeMap::new();
    for b in first.values() {
        if !matches!(
            b.kind,
            MemoryKind::Graph | MemoryKind::NoGraphUpdate | MemoryKind::NoOpenEntity
        ) || b.error.is_some()
        {
            continue;
        }
        let e = by_kind.entry(b.kind.name()).or_default();
        e.0 += 1;
        if let Some(g) = &b.graph {
            e.1.push(g);
            if g.dropped_unsupported.is_some() && b.segments > 0 && b.document_tokens > 0 {
                let c = &b.cost;
                e.2.push((
                    (c.requests + c.cache_hits) as f64 / b.segments as f64,
                    (c.prompt_tokens + c.replayed_prompt_tokens) as f64 / b.document_tokens as f64,
                ));
            }
        }
    }
    by_kind
        .into_iter()
        .filter(|(_, (_, gs, _))| !gs.is_empty())
        .map(|(kind, (builds, gs, costs))| {
            let cost =
                |f: fn(&(f64, f64)) -> f64| (!costs.is_empty()).then(|| mean(costs.iter().map(f)));
            let avg = |f: &dyn Fn(&GraphDiagnostics) -> f64| mean(gs.iter().map(|g| f(g)));
            let avg_opt = |f: &dyn Fn(&GraphDiagnostics) -> Option<f64>| {
                let v: Vec<f64> = gs.iter().filter_map(|g| f(g)).collect();
                (!v.is_empty()).then(|| mean(v.into_iter()))
            };
            let raw: usize = gs.iter().map(|g| g.raw_relations).sum();
            let kept: usize = gs.iter().map(|g| g.relations_kept).sum();
            GraphRow {
                kind: kind.to_string(),
                documents: gs.len(),
                builds,
                entities_per_segment: avg(&|g| g.entities_per_segment),
                schema_entities_per_segment: avg(&|g| g.entities_per_segment_by_source.schema),
                llm_entities_per_segment: avg(&|g| g.entities_per_segment_by_source.llm),
                relation_entities_per_segment: avg(&|g| g.entities_per_segment_by_source.relation),
                raw_relations_per_doc: avg(&|g| g.raw_relations as f64),
                kept_share: if raw > 0 {
                    kept as f64 / raw as f64
                } else {
                    0.0
                },
                dropped_unresolved_per_doc: avg_opt(&|g| {
                    g.dropped_unresolved_end.map(|x| x as f64)
                }),
                dropped_self_loop_per_doc: avg_opt(&|g| g.dropped_self_loop.map(|x| x as f64)),
                dropped_empty_per_doc: avg_opt(&|g| g.dropped_empty.map(|x| x as f64)),
                dropped_unsupported_per_doc: avg_opt(&|g| g.dropped_unsupported.map(|x| x as f64)),
                edges_per_segment: avg(&|g| g.edges_per_segment),
                entities_with_edge: avg(&|g| g.entities_with_edge),
                llm_entities_with_edge: avg_opt(&|g| g.llm_entities_with_edge),
                median_segments_per_entity: avg(&|g| g.median_segments_per_entity),
                over_linked_entities_per_doc: avg(&|g| g.over_linked_entities as f64),
                calls_per_segment: cost(|c| c.0),
                prompt_tokens_per_document_token: cost(|c| c.1),
            }
        })
        .collect()
}

type RowKey = (usize, String, Option<usize>);

/// Every row on the questions all rows have a result for; `None` when the rows already share
/// one set of questions, or share none.
fn common_rows(
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

impl Report {
    /// The max-trials sweep: per navigator, (max trials, F1) in trials order.
    pub fn sweep(&self) -> BTreeMap<String, Vec<(usize, f64)>> {
        let mut out: BTreeMap<String, Vec<(usize, f64)>> = BTreeMap::new();
        for r in &self.methods {
            if let Some(t) = r.max_trials {
                out.entry(r.method.clone()).or_default().push((t, r.f1));
            }
        }
        out.retain(|_, v| v.len() > 1);
        for v in out.values_mut() {
            v.sort_by_key(|p| p.0);
        }
        out
    }

    /// The main table: one row per (method, max trials).
    fn results_table(&self, s: &mut String, mc: bool) {
        let _ = writeln!(s, "## Results (Table 1 layout)\n");
        let score_cols: &[&str] = if mc { &["accuracy"] } else { &["EM", "F1"] };
        let cols: Vec<&str> = ["method", "max trials", "questions"]
            .iter()
            .chain(score_cols)
            .chain(&["failures"])
            .chain(&COST_COLUMNS)
            .chain(&["server-cached prompt %", "wall s/q"])
            .copied()
            .collect();
        table_header(s, &cols);
        for r in &self.methods {
            let (trials, score) = trials_and_score(r.max_trials, r.em, r.f1, mc);
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {:.1} |",
                r.method,
                trials,
                r.questions,
                score,
                r.failures,
                cost_cells(
                    r.requests_per_question,
                    r.calls_per_question,
                    r.prompt_tokens_per_question,
                    r.completion_tokens_per_question
                ),
                share_cell(r.server_cached_share),
                r.wall_secs_per_question
            );
        }
    }

    /// The paired table: each row minus the reference, with its interval.
    fn paired_table(&self, s: &mut String, p: &Paired) {
        let _ = writeln!(s, "\n## Paired against {}\n", p.reference);
        let _ = writeln!(
            s,
            "Each row minus {} on the questions both answered, in points: the mean difference and \
             its 95% paired bootstrap interval ({} resamples of the questions, seed {}), and the \
             questions the row scored higher, the same, lower. An interval that holds 0 is no \
             difference at this sample size. Fact recall: of the answer context, on the questions \
             both rows have spans for.\n",
            p.reference,
            paired::RESAMPLES,
            paired::SEED
        );
        let metric = self.metric.as_str();
        let score_col = format!("{metric} difference [95% interval]");
        let wins_col = format!("{metric} higher / same / lower");
        table_header(
            s,
            &[
                "method",
                "max trials",
                "questions",
                &score_col,
                &wins_col,
                "fact recall difference [95% interval]",
                "fact recall higher / same / lower",
            ],
        );
        let iv = |i: &Interval| format!("{:+.1} [{:+.1}, {:+.1}]", i.mean, i.low, i.high);
        let wins = |i: &Interval| format!("{} / {} / {}", i.wins, i.ties, i.losses);
        for r in &p.rows {
            let trials = r.max_trials.map_or("-".to_string(), |t| t.to_string());
            let (facts, fact_wins) = r
                .fact_recall
                .as_ref()
                .map_or(("n/a".to_string(), "n/a".to_string()), |f| (iv(f), wins(f)));
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.method,
                trials,
                r.score.n,
                iv(&r.score),
                wins(&r.score),
                facts,
                fact_wins
            );
        }
    }

    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        let mc = self.metric == "accuracy";
        let _ = writeln!(s, "# {}\n", self.title);
        let builds_only = self.methods.is_empty() && !self.builds.is_empty();
        if builds_only {
            // A --build-only run: no row says which dataset or items it answered.
            let _ = writeln!(
                s,
                "Memory builds only: no question was answered. Model: {}.\n",
                self.model
            );
        } else {
            let _ = writeln!(
                s,
                "Dataset: {}. Items: {}. Model: {}.\n",
                self.dataset, self.items, self.model
            );
        }
        if !self.other_models.is_empty() {
            let others: Vec<String> = self
                .other_models
                .iter()
                .map(|(m, n)| format!("{m} ({n} rows)"))
                .collect();
            let _ = writeln!(
                s,
                "**Rows answered by another model than {}:** {}.\n",
                self.model,
                others.join(", ")
            );
        }
        for n in &self.notes {
            let _ = writeln!(s, "- {n}");
        }
        if !self.notes.is_empty() {
            s.push('\n');
        }
        if !builds_only {
            if !self.cost_points().is_empty() {
                let _ = writeln!(
                    s,
                    "![{metric} and fact recall against LLM tokens per question, one point per method]({COST_QUALITY_PNG})\n\n\
                     [{COST_QUALITY_PNG}]({COST_QUALITY_PNG}): each method's {metric} (left) and \
                     answer-context fact recall (right, where the dataset has gold evidence) \
                     against the prompt and completion tokens of its LLM calls per question, on a \
                     log axis; memory builds are not included (their cost per document is in the \
                     build table).\n",
                    metric = self.metric
                );
            }
            self.results_table(&mut s, mc);
        }
        if self
            .methods
            .iter()
            .any(|r| r.evidence != EvidenceCols::default())
        {
            let _ = writeln!(s, "\n## Evidence in front of the answerer\n");
            let _ = writeln!(
                s,
                "Fact recall: the share of an item's gold supporting sentences lying wholly inside \
                 the document text the final answer prompt showed (mean over questions); all \
                 facts: the questions whose every supporting sentence was shown; \"read\" counts \
                 every prompt of the question. Summaries are not document text and count for \
                 nothing. n/a: the dataset has no gold evidence, or the rows did not record what \
                 their answer prompt showed.\n"
            );
            let cols: Vec<&str> = ["method", "max trials"]
                .iter()
                .chain(&EVIDENCE_COLUMNS)
                .copied()
                .collect();
            table_header(&mut s, &cols);
            for r in &self.methods {
                let trials = r.max_trials.map_or("-".to_string(), |t| t.to_string());
                let _ = writeln!(s, "| {} | {} | {} |", r.method, trials, r.evidence.cells());
            }
        }
        if self.methods.iter().any(|r| r.navigation.is_some()) {
            // The ranked start (issue 39) adds |S_imp| kept and the idle picks; reports of
            // rows before it keep their columns.
            let ranked = self.methods.iter().any(|r| {
                r.navigation
                    .as_ref()
                    .is_some_and(|n| n.s_imp_kept.is_some())
            });
            let _ = writeln!(s, "\n## Navigation\n");
            let _ = writeln!(
                s,
                "Per question, over the rows that recorded navigation diagnostics: |E_s| (entities \
                 linked from the question), |S_imp| before the window, answerability checks (and \
                 how many answered, or never parsed), expansions, and the expansions after which \
                 the next prompt showed another set of segments.{}\n",
                if ranked {
                    " |S_imp| kept: the start set after ranking and the start share of the window; \
                     idle picks: neighbours taken that changed nothing shown, so no trial was spent."
                } else {
                    ""
                }
            );
            let mut cols = vec!["method", "max trials", "questions", "|E_s|", "|S_imp|"];
            if ranked {
                cols.push("|S_imp| kept");
            }
            cols.extend([
                "checks/q",
                "answered checks",
                "failed checks",
                "expansions/q",
                "changing expansions/q",
                "questions changed",
            ]);
            if ranked {
                cols.push("idle picks/q");
            }
            table_header(&mut s, &cols);
            let opt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.1}"));
            for r in &self.methods {
                let Some(n) = &r.navigation else { continue };
                let trials = r.max_trials.map_or("-".to_string(), |t| t.to_string());
                let kept = if ranked {
                    format!(" {} |", opt(n.s_imp_kept))
                } else {
                    String::new()
                };
                let idle = if ranked {
                    format!(" {} |", opt(n.idle_picks))
                } else {
                    String::new()
                };
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {:.1} | {:.1} |{kept} {:.2} | {}/{} | {} | {:.2} | {:.2} | {}/{} |{idle}",
                    r.method,
                    trials,
                    n.questions,
                    n.start_entities,
                    n.s_imp,
                    n.checks,
                    n.answered_checks,
                    n.all_checks,
                    n.failed_checks,
                    n.expansions,
                    n.changed_expansions,
                    n.questions_changed,
                    n.questions
                );
            }
        }
        if let Some(c) = &self.common {
            let _ = writeln!(
                s,
                "\n## On the {} questions every row has a result for\n",
                c.questions
            );
            let _ = writeln!(
                s,
                "The rows above answered different sets of questions (a run part-way, or methods \
                 added later); here each is scored on the same ones.\n"
            );
            let score_cols: &[&str] = if mc { &["accuracy"] } else { &["EM", "F1"] };
            let cols: Vec<&str> = ["method", "max trials"]
                .iter()
                .chain(score_cols)
                .chain(&COST_COLUMNS)
                .chain(&EVIDENCE_COLUMNS)
                .copied()
                .collect();
            table_header(&mut s, &cols);
            for r in &c.rows {
                let (trials, score) = trials_and_score(r.max_trials, r.em, r.f1, mc);
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} |",
                    r.method,
                    trials,
                    score,
                    cost_cells(
                        r.requests_per_question,
                        r.calls_per_question,
                        r.prompt_tokens_per_question,
                        r.completion_tokens_per_question
                    ),
                    r.evidence.cells()
                );
            }
        }
        if let Some(p) = &self.paired {
            self.paired_table(&mut s, p);
        }
        if !self.builds.is_empty() {
            let _ = writeln!(s, "\n## Memory builds (per document)\n");
            table_header(
                &mut s,
                &[
                    "memory",
                    "documents",
                    "failures",
                    "document tokens",
                    "segments",
                    "requests",
                    "LLM calls",
                    "prompt tok",
                    "completion tok",
                    "tokens / document token",
                    "server-cached prompt %",
                    "wall s",
                ],
            );
            for b in &self.builds {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {:.0} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} | {:.2} | {} | {:.0} |",
                    b.kind,
                    b.documents,
                    b.failures,
                    b.document_tokens_per_doc,
                    b.segments_per_doc,
                    b.requests_per_doc,
                    b.calls_per_doc,
                    b.prompt_tokens_per_doc,
                    b.completion_tokens_per_doc,
                    b.tokens_per_document_token,
                    // "-": the server did not say (or the builds predate the field).
                    share_cell(b.server_cached_share),
                    b.wall_secs_per_doc
                );
            }
        }
        if !self.graphs.is_empty() {
            let _ = writeln!(s, "\n## QRMeM graphs (per document)\n");
            let _ = writeln!(
                s,
                "Means over the builds that recorded diagnostics (builds made before they were \
                 recorded are not counted). Entities per segment by source (an entity with several \
                 sources counts under each); relations kept: both ends resolved, over those \
                 extracted; edges: kept relations merged by entity pair; over-linked: entities \
                 linked to more than 20% of the segments.\n"
            );
            // Tables of builds that counted unsupported relations show them in the drops.
            let unsupported = self
                .graphs
                .iter()
                .any(|g| g.dropped_unsupported_per_doc.is_some());
            let mut cols = vec![
                "memory",
                "builds with diagnostics",
                "entities/segment (schema, LLM, relation end)",
                "relations extracted",
                "kept %",
                if unsupported {
                    "dropped: unresolved, self-loop, empty, unsupported"
                } else {
                    "dropped: unresolved, self-loop, empty"
                },
                "edges/segment",
                "entities with an edge % (LLM-extracted)",
                "median segments/entity",
                "over-linked entities",
            ];
            if unsupported {
                cols.extend(["LLM calls/segment", "prompt tok/document token"]);
            }
            table_header(&mut s, &cols);
            let opt = |x: Option<f64>| x.map_or("n/a".to_string(), |x| format!("{x:.1}"));
            for g in &self.graphs {
                let _ = writeln!(
                    s,
                    "| {} | {} of {} | {:.1} ({:.1}, {:.1}, {:.1}) | {:.1} | {:.0} | {}, {}, {} | {:.2} | {:.1} ({}) | {:.1} | {:.1} |{}",
                    g.kind,
                    g.documents,
                    g.builds,
                    g.entities_per_segment,
                    g.schema_entities_per_segment,
                    g.llm_entities_per_segment,
                    g.relation_entities_per_segment,
                    g.raw_relations_per_doc,
                    100.0 * g.kept_share,
                    opt(g.dropped_unresolved_per_doc),
                    opt(g.dropped_self_loop_per_doc),
                    if unsupported {
                        format!(
                            "{}, {}",
                            opt(g.dropped_empty_per_doc),
                            opt(g.dropped_unsupported_per_doc)
                        )
                    } else {
                        opt(g.dropped_empty_per_doc)
                    },
                    g.edges_per_segment,
                    100.0 * g.entities_with_edge,
                    g.llm_entities_with_edge
                        .map_or("n/a".to_string(), |x| format!("{:.1}", 100.0 * x)),
                    g.median_segments_per_entity,
                    g.over_linked_entities_per_doc,
                    if unsupported {
                        let two = |x: Option<f64>| x.map_or("n/a".to_string(), |x| format!("{x:.2}"));
                        format!(
                            " {} | {} |",
                            two(g.calls_per_segment),
                            two(g.prompt_tokens_per_document_token)
                        )
                    } else {
                        String::new()
                    }
                );
            }
        }
        let sweep = self.sweep();
        if !sweep.is_empty() {
            let _ = writeln!(s, "\n## {} against max trials (Figure 4)\n", self.metric);
            for (m, pts) in &sweep {
                let line: Vec<String> = pts.iter().map(|(t, f)| format!("{t}: {f:.1}")).collect();
                let _ = writeln!(s, "- {m}: {}", line.join(", "));
            }
            let _ = writeln!(s, "\n![{} against max trials](trials.png)", self.metric);
        }
        let _ = writeln!(
            s,
            "\nLLM calls/q counts requests plus reply-cache hits (the calls the method needs), and \
             the token columns count all of those calls (a cached reply at what it cost when it was \
             first sent), so they are the method's cost whatever was cached; requests and wall time \
             count only what was sent and spent in the runs that filled results.jsonl. Build costs \
             are per document and shared by every method and question that reads the memory."
        );
        s
    }

    /// The cost-quality figure's points: every row that answered a question, labelled by its
    /// method (and max trials, where a method has rows for several).
    pub fn cost_points(&self) -> Vec<super::plot::CostPoint> {
        self.methods
            .iter()
            .filter(|r| r.questions > 0)
            .map(|r| {
                let swept = self.methods.iter().filter(|o| o.method == r.method).count() > 1;
                let method = match r.max_trials {
                    Some(t) if swept => format!("{}@{t}", r.method),
                    _ => r.method.clone(),
                };
                super::plot::CostPoint {
                    method,
                    tokens: r.prompt_tokens_per_question + r.completion_tokens_per_question,
                    score: r.f1,
                    recall: r.evidence.answer.as_ref().map(|c| 100.0 * c.fact_recall),
                }
            })
            .collect()
    }

    /// Writes report.md, report.json, the cost-quality figure and (with a sweep) trials.png
    /// into `dir`.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::write(dir.join("report.md"), self.to_markdown())?;
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(dir.join("report.json"), json)?;
        let points = self.cost_points();
        if !points.is_empty() {
            let title = format!("{}: {} questions, {}", self.dataset, self.items, self.model);
            super::plot::cost_quality_png(
                &dir.join(COST_QUALITY_PNG),
                &title,
                &self.metric,
                &points,
            )
            .map_err(std::io::Error::other)?;
        }
        let sweep = self.sweep();
        if !sweep.is_empty() {
            super::plot::trials_png(&dir.join("trials.png"), &self.metric, &sweep)
                .map_err(std::io::Error::other)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::RowCost;
    use crate::methods::MemoryKind;
    use crate::text::span::Span;

    /// The report of `results` and `builds` with no backfill and no notes.
    fn report_of(
        results: &[ResultRecord],
        builds: &[BuildRecord],
        method_order: &[String],
        reference: &str,
    ) -> Report {
        build(
            "t",
            "m",
            results,
            builds,
            &BTreeMap::new(),
            Layout {
                method_order,
                reference,
            },
            vec![],
        )
    }

    fn rec(document: &str, requests: u64, prompt: u64, cached: u64, wall: f64) -> BuildRecord {
        BuildRecord {
            document: document.to_string(),
            kind: MemoryKind::Graph,
            items: vec![format!("{document}-q")],
            document_tokens: 1000,
            segments: 2,
            entities: 5,
            relations: 3,
            step_failures: 0,
            cost: RowCost {
                requests,
                prompt_tokens: prompt,
                completion_tokens: 100,
                cached_prompt_tokens: cached,
                ..RowCost::default()
            },
            wall_secs: wall,
            error: None,
            graph: None,
        }
    }

    fn answer(item: &str, method: &str, f1: f64, prompt: u64) -> ResultRecord {
        ResultRecord {
            item: item.to_string(),
            dataset: "d".into(),
            method: method.to_string(),
            max_trials: None,
            question: format!("{item}?"),
            prediction: "p".into(),
            gold: vec!["g".into()],
            gold_letter: None,
            em: 0.0,
            f1,
            error: None,
            cost: RowCost {
                requests: 1,
                prompt_tokens: prompt,
                ..RowCost::default()
            },
            wall_secs: 1.0,
            answered_by_check: false,
            steps: 1,
            segments_used: vec![],
            step_failures: vec![],
            final_segments: None,
            spans: ContextSpans::default(),
            nav: None,
            model: None,
        }
    }

    #[test]
    fn every_report_writes_its_cost_quality_figure_with_a_point_per_method() {
        let rows = vec![
            answer("q1", "a", 1.0, 100),
            answer("q2", "a", 0.5, 300),
            answer("q1", "b", 0.0, 2000),
        ];
        let r = report_of(&rows, &[], &[], "a");
        let points = r.cost_points();
        assert_eq!(
            points.iter().map(|p| p.method.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!((points[0].tokens, points[0].score), (200.0, 75.0));
        let dir = tempfile::tempdir().unwrap();
        r.write(dir.path()).unwrap();
        let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
        assert!(md.contains(&format!("]({COST_QUALITY_PNG})")), "{md}");
        let png = image::open(dir.path().join(COST_QUALITY_PNG)).unwrap();
        // No gold evidence: one panel, the score's.
        assert_eq!(png.width(), 640);
    }

    #[test]
    fn rows_answered_by_another_model_than_the_reports_are_counted_and_named() {
        // report_of's model is "m": rows by "m" and rows that record none are not counted.
        let mut rows = vec![answer("q1", "a", 1.0, 100), answer("q2", "a", 1.0, 100)];
        rows[0].model = Some("m".into());
        let r = report_of(&rows, &[], &[], "a");
        assert!(r.other_models.is_empty());
        assert!(!r.to_markdown().contains("another model"));
        rows[1].model = Some("bigger".into());
        rows.push(answer("q1", "b", 0.0, 100));
        rows[2].model = Some("bigger".into());
        let r = report_of(&rows, &[], &[], "a");
        assert_eq!(r.other_models, vec![("bigger".to_string(), 2)]);
        let md = r.to_markdown();
        assert!(
            md.contains("**Rows answered by another model than m:** bigger (2 rows)."),
            "{md}"
        );
    }

    #[test]
    fn rows_on_different_questions_are_also_scored_on_the_shared_ones() {
        let mut q1 = answer("q1", "a", 1.0, 100);
        q1.cost.cached_prompt_tokens = 90;
        // a's one unshared question is its costly one; b's q2 was served from the reply cache.
        q1.cost.requests = 4;
        let mut b2 = answer("q2", "b", 1.0, 10);
        b2.cost.cache_hits = 1;
        let results = [
            q1,
            answer("q2", "a", 0.0, 300),
            answer("q3", "a", 0.5, 500),
            b2,
            answer("q3", "b", 0.0, 30),
        ];
        let order = ["a".to_string(), "b".to_string()];
        let r = report_of(&results, &[], &order, "bm25-top3");
        assert_eq!(r.methods[0].questions, 3);
        assert!((r.methods[0].f1 - 50.0).abs() < 1e-9);
        // 90 of a's 900 sent prompt tokens came from the server's cache; b's server said none.
        assert!((r.methods[0].server_cached_share - 0.1).abs() < 1e-9);
        let md = r.to_markdown();
        assert!(md.contains("| 300 | 0 | 10 | 1.0 |"), "{md}");
        assert!(md.contains("| 20 | 0 | - | 1.0 |"), "{md}");
        let c = r
            .common
            .as_ref()
            .expect("the rows differ, so a paired table");
        assert_eq!(c.questions, 2);
        let got: Vec<(&str, f64, f64)> = c
            .rows
            .iter()
            .map(|x| (x.method.as_str(), x.f1, x.prompt_tokens_per_question))
            .collect();
        assert_eq!(got, vec![("a", 25.0, 400.0), ("b", 50.0, 20.0)]);
        assert!(
            md.contains("## On the 2 questions every row has a result for"),
            "{md}"
        );
        assert!(
            md.contains("| a | - | 3 | 0.0 | 50.0 | 0 | 2.00 | 2.00 |"),
            "{md}"
        );
        assert!(
            md.contains("| a | - | 0.0 | 25.0 | 1.00 | 1.00 | 400 | 0 |"),
            "{md}"
        );
        assert!(
            md.contains("| b | - | 0.0 | 50.0 | 1.00 | 1.50 | 20 | 0 |"),
            "{md}"
        );
        // The same questions everywhere: no paired table, and report.json keeps its old shape.
        let same = report_of(&results[1..], &[], &order, "bm25-top3");
        assert_eq!(same.common, None);
        assert!(!same.to_markdown().contains("## On the"));
        let json = serde_json::to_value(&same).unwrap();
        assert!(json.get("common").is_none(), "{json}");
    }

    #[test]
    fn every_row_is_paired_with_the_reference_on_the_questions_both_answered() {
        // Gold evidence: two sentences at bytes 0..10 and 20..30.
        let spans = |shown: Vec<Span>| ContextSpans {
            answer_spans: Some(shown),
            read_spans: Some(vec![]),
            answer_context_tokens: Some(5),
            gold_spans: Some(vec![(0, 10), (20, 30)]),
        };
        let with = |mut r: ResultRecord, shown: Vec<Span>| {
            r.spans = spans(shown);
            r
        };
        let both = vec![(0, 30)];
        let one = vec![(0, 10)];
        let results = [
            with(answer("q1", "bm25-top3", 0.5, 10), one.clone()),
            with(answer("q2", "bm25-top3", 0.0, 10), one.clone()),
            with(answer("q3", "bm25-top3", 1.0, 10), both.clone()),
            with(answer("q1", "kn", 1.0, 10), both.clone()),
            with(answer("q2", "kn", 0.5, 10), both.clone()),
            // q4 has no reference row, so it is not paired.
            with(answer("q3", "kn", 1.0, 10), one.clone()),
            with(answer("q4", "kn", 0.0, 10), one),
        ];
        let order = ["kn".to_string(), "bm25-top3".to_string()];
        let r = report_of(&results, &[], &order, "bm25-top3");
        let p = r.paired.as_ref().expect("bm25-top3 has rows");
        assert_eq!(p.rows.len(), 1);
        let kn = &p.rows[0];
        assert_eq!(kn.method, "kn");
        // F1: +50, +50, 0 on q1..q3.
        assert_eq!(
            (kn.score.n, kn.score.wins, kn.score.ties, kn.score.losses),
            (3, 2, 1, 0)
        );
        assert!((kn.score.mean - 100.0 / 3.0).abs() < 1e-9, "{kn:?}");
        // Fact recall: +50, +50, -50 points.
        let f = kn.fact_recall.as_ref().expect("both rows have spans");
        assert_eq!((f.n, f.wins, f.ties, f.losses), (3, 2, 0, 1));
        assert!((f.mean - 50.0 / 3.0).abs() < 1e-9, "{f:?}");
        assert!(f.low <= f.mean && f.mean <= f.high);
        let md = r.to_markdown();
        assert!(md.contains("## Paired against bm25-top3"), "{md}");
        assert!(md.contains("| kn | - | 3 | +33.3 ["), "{md}");
        // A reference without rows, or a malformed one, gives no table.
        for missing in ["contriever-top3", "kn@x"] {
            let r = report_of(&results, &[], &order, missing);
            assert_eq!(r.paired, None, "{missing}");
        }
    }

    #[test]
    fn a_memory_built_twice_counts_once_and_the_server_cache_share_is_reported() {
        let first = rec("a", 10, 4000, 1000, 100.0);
        // The same memory built again from the reply cache: nothing sent, ~0 s.
        let mut again = rec("a", 0, 0, 0, 0.1);
        again.cost.cache_hits = 10;
        again.cost.completion_tokens = 0;
        again.cost.replayed_prompt_tokens = 4000;
        again.cost.replayed_completion_tokens = 100;
        let mut failed = rec("b", 3, 500, 0, 5.0);
        failed.error = Some("the LLM went away".into());
        let retried = rec("b", 10, 6000, 3000, 120.0);
        let r = report_of(&[], &[first, again, failed, retried], &[], "bm25-top3");
        assert_eq!(r.builds.len(), 1);
        let b = &r.builds[0];
        assert_eq!((b.documents, b.failures), (2, 0));
        assert!(
            (b.wall_secs_per_doc - 110.0).abs() < 1e-9,
            "{}",
            b.wall_secs_per_doc
        );
        assert!((b.prompt_tokens_per_doc - 5000.0).abs() < 1e-9);
        assert!((b.server_cached_share - 0.4).abs() < 1e-9);
        assert!(
            r.to_markdown().contains("| 40 | 110 |"),
            "{}",
            r.to_markdown()
        );
    }
}
