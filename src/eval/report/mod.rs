//! The report of a run directory: per method (and max trials) the scores, failures and cost per
//! question, in the layout of the QRMeM paper's Table 1; the build cost per document; and the
//! max-trials sweep (Figure 4). A pure function of `results.jsonl` and `builds.jsonl`, so an
//! interrupted-then-resumed run reports exactly what an uninterrupted one does.
//!
//! `rows` computes the method and build rows, `comparisons` the common-questions and paired
//! tables, `graphs` the graph table, `markdown` writes report.md; this file builds the report
//! and writes its files.

mod comparisons;
mod graphs;
mod kinds;
mod markdown;
mod rows;

pub use comparisons::{Common, CommonRow, Paired, PairedRow};
pub use graphs::GraphRow;
pub use kinds::{ByKind, KindCell, KindRow};
pub(crate) use markdown::trials_cell;
pub use rows::{BuildRow, EvidenceCell, EvidenceCols, MethodRow, NavRow};

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::evidence::ContextSpans;
use super::rows::{BuildRecord, ResultRecord};
use comparisons::{common_rows, paired_rows};
use graphs::graph_rows;
use kinds::by_kind;
use rows::{build_rows, cached_share, first_builds, mean, QuestionMeans};

/// The cost-quality figure's file, next to report.md.
pub const COST_QUALITY_PNG: &str = "cost-quality.png";
/// The budget figure beside `report.md`: score and fact recall against the answer context.
pub const BUDGET_PNG: &str = "budget.png";

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
    /// Every row per question kind (type or hop count), where the questions have two or more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_kind: Option<ByKind>,
}

/// What rows recorded before rows carried it lack, recovered from the run's items without the
/// LLM: the backfill's spans (`DIR/backfill.jsonl`) and each item's kind (id -> kind).
#[derive(Clone, Copy, Debug)]
pub struct Recovered<'a> {
    pub spans: &'a BTreeMap<(String, String, Option<usize>), ContextSpans>,
    pub kinds: &'a BTreeMap<String, String>,
}

/// How the report lays out its rows.
#[derive(Clone, Copy, Debug)]
pub struct Layout<'a> {
    /// The row order (methods not in it follow by name).
    pub method_order: &'a [String],
    /// The row the paired table compares every other row with: `METHOD` or `METHOD@TRIALS`.
    pub reference: &'a str,
}

pub fn build(
    title: &str,
    model: &str,
    results: &[ResultRecord],
    builds: &[BuildRecord],
    recovered: Recovered<'_>,
    layout: Layout<'_>,
    notes: Vec<String>,
) -> Report {
    let Layout {
        method_order,
        reference,
    } = layout;
    // The last record of a key wins (there is one per key unless a file was edited).
    let latest = super::rows::latest(results);
    // Each row's spans: its own, else the backfill's; a failed row showed the answerer nothing.
    let none = ContextSpans::default();
    let spans: BTreeMap<(String, String, Option<usize>), ContextSpans> = latest
        .iter()
        .map(|(k, r)| {
            let mut s = r.spans.clone().or(recovered.spans.get(k).unwrap_or(&none));
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
    let by_kind = by_kind(&rows, &spans, recovered.kinds);
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
    let first = first_builds(builds);
    let builds = build_rows(&first);
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
        by_kind,
    }
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

    /// The budget figure's points: the rows whose method name carries a context budget
    /// (`plot::budget_family`) and that measured fact recall and answer-context tokens, in
    /// families with at least two budgets.
    pub fn budget_points(&self) -> Vec<super::plot::BudgetPoint> {
        let mut points: Vec<super::plot::BudgetPoint> = self
            .methods
            .iter()
            .filter(|r| r.questions > 0)
            .filter_map(|r| {
                let (family, _) = super::plot::budget_family(&r.method)?;
                Some(super::plot::BudgetPoint {
                    family,
                    method: r.method.clone(),
                    tokens: r.evidence.answer_context_tokens?,
                    score: r.f1,
                    recall: 100.0 * r.evidence.answer.as_ref()?.fact_recall,
                })
            })
            .collect();
        let count = |f: &str, pts: &[super::plot::BudgetPoint]| {
            pts.iter().filter(|p| p.family == f).count()
        };
        let keep: Vec<bool> = points
            .iter()
            .map(|p| count(&p.family, &points) > 1)
            .collect();
        let mut k = keep.iter();
        points.retain(|_| *k.next().unwrap_or(&false));
        points
    }

    /// Writes report.md, report.json, the cost-quality figure, the budget figure (with two
    /// budgets of one method family) and (with a sweep) trials.png into `dir`.
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
        let budget = self.budget_points();
        if !budget.is_empty() {
            let title = format!(
                "{}: {} questions, {}: score and fact recall against the answer context",
                self.dataset, self.items, self.model
            );
            super::plot::budget_png(&dir.join(BUDGET_PNG), &title, &self.metric, &budget)
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
            Recovered {
                spans: &BTreeMap::new(),
                kinds: &BTreeMap::new(),
            },
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
            kind: None,
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
    fn rows_are_split_by_question_kind_from_the_rows_or_else_the_items() {
        // q1 and q2 record their kind; q3's row predates kinds, so the items give it.
        let mut rows = vec![
            answer("q1", "a", 1.0, 100),
            answer("q2", "a", 0.0, 100),
            answer("q3", "a", 0.5, 100),
            answer("q1", "b", 0.0, 100),
        ];
        for (r, kind) in rows.iter_mut().zip(["bridge", "bridge", "", "bridge"]) {
            r.kind = (!kind.is_empty()).then(|| kind.to_string());
        }
        // b's one question has the gold sentence (2, 5) wholly in its answer context.
        rows[3].spans = ContextSpans {
            answer_spans: Some(vec![(0, 10)]),
            read_spans: Some(vec![(0, 10)]),
            answer_context_tokens: Some(3),
            gold_spans: Some(vec![(2, 5)]),
        };
        let kinds = BTreeMap::from([("q3".to_string(), "comparison".to_string())]);
        let order = ["a".to_string(), "b".to_string()];
        let r = build(
            "t",
            "m",
            &rows,
            &[],
            Recovered {
                spans: &BTreeMap::new(),
                kinds: &kinds,
            },
            Layout {
                method_order: &order,
                reference: "a",
            },
            vec![],
        );
        let k = r.by_kind.as_ref().expect("two kinds, so a split");
        assert_eq!(
            k.kinds,
            vec![("bridge".to_string(), 2), ("comparison".to_string(), 1)]
        );
        let cell = |row: usize, kind: usize| k.rows[row].cells[kind].clone();
        let a_bridge = cell(0, 0).expect("a answered both bridge questions");
        assert_eq!((a_bridge.questions, a_bridge.f1), (2, 50.0));
        assert_eq!(a_bridge.fact_recall, None);
        assert_eq!(cell(0, 1).map(|c| c.f1), Some(50.0));
        let b_bridge = cell(1, 0).expect("b answered one bridge question");
        assert_eq!((b_bridge.questions, b_bridge.fact_recall), (1, Some(1.0)));
        assert_eq!(cell(1, 1), None);
        let md = r.to_markdown();
        assert!(
            md.contains("| method | max trials | bridge (2) | comparison (1) |"),
            "{md}"
        );
        assert!(md.contains("| a | - | 50.0 / n/a | 50.0 / n/a |"), "{md}");
        assert!(md.contains("| b | - | 0.0 / 100 (1) |  |"), "{md}");
        // One kind (or none) splits nothing.
        let r = report_of(&rows[..2], &[], &order, "a");
        assert_eq!(r.by_kind, None);
        assert!(!r.to_markdown().contains("By question kind"));
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
