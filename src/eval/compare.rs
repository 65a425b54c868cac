//! Runs side by side (`qrmem compare RUN_DIR RUN_DIR... --out DIR`): several runs over the
//! same items (a run with the 0.5B model and one with the 1.5B; a run before and after a
//! change) in one table and one figure. For each method, its score and answer-context fact
//! recall in every run, and each later run against the first on the questions both answered:
//! the mean paired difference with its 95% bootstrap interval (`paired.rs`, the reports' seed).
//!
//! Invariant: a pure function of the runs' `results.jsonl` and `backfill.jsonl` (a row's own
//! spans win over the backfill's, as in the report), so the comparison regenerates
//! byte-identical.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::backfill;
use super::evidence::ContextSpans;
use super::paired::{self, Interval};
use super::rows::{self, ResultRecord};
use super::runner::EvalError;

/// The comparison's files in its output directory.
pub const COMPARE_MD: &str = "compare.md";
pub const COMPARE_JSON: &str = "compare.json";
pub const COMPARE_PNG: &str = "compare.png";

/// One compared run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// The run directory as given.
    pub dir: String,
    /// Its label in tables and the figure: the answering model of its rows (when one model
    /// answered them all), else the directory's name.
    pub label: String,
    /// Questions with at least one row.
    pub questions: usize,
}

/// A method in one run: its rows' mean score and fact recall.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub questions: usize,
    /// 100 x mean F1 (accuracy for multiple choice).
    pub score: f64,
    /// 100 x mean answer-context fact recall, over the rows with gold evidence and spans.
    pub fact_recall: Option<f64>,
}

/// A later run against the first, for one method, on the questions both answered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    /// Points of score, this run minus the first.
    pub score: Interval,
    /// Points of fact recall, on the shared questions with gold evidence and spans in both.
    pub fact_recall: Option<Interval>,
}

/// One method across the runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The method, with `@T` when it has rows at several max-trials values.
    pub method: String,
    /// Per run (None: no row of this method in that run).
    pub cells: Vec<Option<Cell>>,
    /// Per run after the first, against the first (None: no shared question).
    pub deltas: Vec<Option<Delta>>,
}

/// The comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// "F1", or "accuracy" when the runs' questions are multiple choice.
    pub metric: String,
    pub runs: Vec<RunInfo>,
    pub rows: Vec<Row>,
}

/// A row's key within a run: (method, max trials).
pub(super) type MethodKey = (String, Option<usize>);

/// One question's row as the comparisons read it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct QuestionScore {
    /// F1 (accuracy), 0..1; 0 for a failed row.
    pub score: f64,
    /// Answer-context fact recall, 0..1, where the row has gold evidence and spans.
    pub recall: Option<f64>,
    /// Tokens of document text in the final answer prompt, where recorded.
    pub tokens: Option<usize>,
    /// LLM calls (requests and reply-cache hits).
    pub calls: u64,
}

/// Per question, its row.
pub(super) type Scores = BTreeMap<String, QuestionScore>;

/// One run as read: its label, its methods in first-seen order, each method's rows, and
/// whether its questions are multiple choice.
pub(super) struct RunRead {
    pub info: RunInfo,
    pub order: Vec<MethodKey>,
    pub scores: BTreeMap<MethodKey, Scores>,
    pub multiple_choice: bool,
    /// The dataset labels its rows carry.
    pub datasets: BTreeSet<String>,
    /// Each question's kind (question type, or MuSiQue's hop count), where any of its rows
    /// carries one.
    pub kinds: BTreeMap<String, String>,
}

impl RunRead {
    /// A run of these scores alone (a contexts-only directory: no model, no kinds).
    pub(super) fn of_scores(dir: &Path, scores: BTreeMap<MethodKey, Scores>) -> RunRead {
        let questions: BTreeSet<&String> = scores.values().flat_map(|s| s.keys()).collect();
        RunRead {
            info: RunInfo {
                dir: dir.display().to_string(),
                label: dir.display().to_string(),
                questions: questions.len(),
            },
            order: scores.keys().cloned().collect(),
            scores,
            multiple_choice: false,
            datasets: BTreeSet::new(),
            kinds: BTreeMap::new(),
        }
    }
}

/// Reads one run (see [`RunRead`]).
pub(super) fn read(dir: &Path) -> Result<RunRead, EvalError> {
    if !dir.join("results.jsonl").exists() {
        return Err(EvalError::Input(format!(
            "{} holds no results.jsonl: not a run directory",
            dir.display()
        )));
    }
    let (results, _) = rows::read_run(dir)?;
    let backfill = backfill::read_backfill(dir).map_err(EvalError::Input)?;
    let latest = rows::latest(&results);
    // The report's row order where there is a report, then any other method as first seen.
    let mut order: Vec<MethodKey> = report_order(dir);
    for r in &results {
        let k = (r.method.clone(), r.max_trials);
        if !order.contains(&k) {
            order.push(k);
        }
    }
    let mut scores: BTreeMap<MethodKey, Scores> = BTreeMap::new();
    let mut questions = BTreeSet::new();
    let mut models = BTreeSet::new();
    let mut kinds = BTreeMap::new();
    let datasets: BTreeSet<String> = results.iter().map(|r| r.dataset.clone()).collect();
    let multiple_choice = results.iter().any(|r| r.gold_letter.is_some());
    for (key, r) in &latest {
        let spans: ContextSpans = match backfill.get(key) {
            Some(b) => r.spans.clone().or(b),
            None => r.spans.clone(),
        };
        let recall = if r.error.is_some() {
            // A failed row showed nothing.
            spans.gold_spans.as_ref().map(|_| 0.0)
        } else {
            spans
                .answer_recall()
                .map(|(hits, facts)| hits as f64 / facts as f64)
        };
        questions.insert(r.item.clone());
        if let Some(k) = &r.kind {
            kinds.entry(r.item.clone()).or_insert_with(|| k.clone());
        }
        if let Some(m) = &r.model {
            models.insert(m.clone());
        }
        scores
            .entry((r.method.clone(), r.max_trials))
            .or_default()
            .insert(
                r.item.clone(),
                QuestionScore {
                    score: row_score(r),
                    recall,
                    tokens: spans.answer_context_tokens,
                    calls: r.cost.requests + r.cost.cache_hits,
                },
            );
    }
    let label = match models.len() {
        1 => models.into_iter().next().unwrap_or_default(),
        _ => dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| dir.display().to_string()),
    };
    Ok(RunRead {
        info: RunInfo {
            dir: dir.display().to_string(),
            label,
            questions: questions.len(),
        },
        order,
        scores,
        multiple_choice,
        datasets,
        kinds,
    })
}

/// The (method, max trials) rows of `DIR/report.json`, in its order (none without a report).
fn report_order(dir: &Path) -> Vec<MethodKey> {
    #[derive(Deserialize)]
    struct Row {
        method: String,
        max_trials: Option<usize>,
    }
    #[derive(Deserialize)]
    struct Report {
        methods: Vec<Row>,
    }
    std::fs::read(dir.join("report.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Report>(&b).ok())
        .map(|r| {
            r.methods
                .into_iter()
                .map(|m| (m.method, m.max_trials))
                .collect()
        })
        .unwrap_or_default()
}

fn row_score(r: &ResultRecord) -> f64 {
    if r.error.is_some() {
        0.0
    } else {
        r.f1
    }
}

/// Compares the runs in `dirs` (the first is the one the others are paired against).
pub fn compare(dirs: &[PathBuf]) -> Result<Comparison, EvalError> {
    if dirs.len() < 2 {
        return Err(EvalError::Input(
            "compare needs at least two run directories".into(),
        ));
    }
    let mut runs = Vec::new();
    let mut order: Vec<MethodKey> = Vec::new();
    let mut all = Vec::new();
    let mut multiple_choice = false;
    for d in dirs {
        let run = read(d)?;
        multiple_choice |= run.multiple_choice;
        for k in run.order {
            if !order.contains(&k) {
                order.push(k);
            }
        }
        runs.push(run.info);
        all.push(run.scores);
    }
    // Labels must tell the runs apart.
    let labels: BTreeSet<&String> = runs.iter().map(|r| &r.label).collect();
    if labels.len() < runs.len() {
        for (i, r) in runs.iter_mut().enumerate() {
            r.label = format!("{} (run {})", r.label, i + 1);
        }
    }
    let rows = order
        .iter()
        .map(|key| {
            let swept = order.iter().filter(|o| o.0 == key.0).count() > 1;
            let method = match key.1 {
                Some(t) if swept => format!("{}@{t}", key.0),
                _ => key.0.clone(),
            };
            let per_run: Vec<Option<&Scores>> = all.iter().map(|s| s.get(key)).collect();
            let cells = per_run
                .iter()
                .map(|s| {
                    s.map(|s| {
                        let recalls: Vec<f64> = s.values().filter_map(|v| v.recall).collect();
                        Cell {
                            questions: s.len(),
                            score: 100.0 * s.values().map(|v| v.score).sum::<f64>()
                                / s.len() as f64,
                            fact_recall: (!recalls.is_empty()).then(|| {
                                100.0 * recalls.iter().sum::<f64>() / recalls.len() as f64
                            }),
                        }
                    })
                })
                .collect();
            let deltas = per_run
                .iter()
                .skip(1)
                .map(|later| {
                    let (first, later) = (per_run[0]?, (*later)?);
                    let shared: Vec<(&QuestionScore, &QuestionScore)> = later
                        .iter()
                        .filter_map(|(q, b)| first.get(q).map(|a| (b, a)))
                        .collect();
                    let score = paired::interval(
                        &shared
                            .iter()
                            .map(|(b, a)| (100.0 * b.score, 100.0 * a.score))
                            .collect::<Vec<_>>(),
                    )?;
                    let recall_pairs: Vec<(f64, f64)> = shared
                        .iter()
                        .filter_map(|(b, a)| Some((100.0 * b.recall?, 100.0 * a.recall?)))
                        .collect();
                    Some(Delta {
                        score,
                        fact_recall: paired::interval(&recall_pairs),
                    })
                })
                .collect();
            Row {
                method,
                cells,
                deltas,
            }
        })
        .collect();
    let metric = if multiple_choice { "accuracy" } else { "F1" };
    Ok(Comparison {
        metric: metric.into(),
        runs,
        rows,
    })
}

impl Comparison {
    /// The comparison as markdown: the runs, then one table of score and fact recall per run
    /// and each later run's paired difference against the first.
    pub fn to_markdown(&self) -> String {
        let metric = self.metric.as_str();
        let mut s = String::new();
        let _ = writeln!(s, "# Runs side by side\n");
        for (i, r) in self.runs.iter().enumerate() {
            let _ = writeln!(
                s,
                "{}. **{}**: `{}` ({} questions)",
                i + 1,
                r.label,
                r.dir,
                r.questions
            );
        }
        let _ = writeln!(
            s,
            "\n![{metric} and fact recall by run]({COMPARE_PNG})\n\nEach method's {metric} and \
             answer-context fact recall (the share of the gold supporting sentences inside the \
             final answer prompt) in each run, over the questions it answered there; each later \
             run against run 1 on the questions both answered: the mean difference in points \
             with its 95% paired bootstrap interval ({} resamples, seed {}), and the questions \
             won / tied / lost. An interval that holds 0 is no difference.\n",
            paired::RESAMPLES,
            paired::SEED
        );
        let first = &self.runs[0].label;
        let mut cols = vec!["method".to_string()];
        for r in &self.runs {
            cols.push(format!("{metric} {}", r.label));
        }
        for r in self.runs.iter().skip(1) {
            cols.push(format!("{metric} {} - {first}", r.label));
        }
        for r in &self.runs {
            cols.push(format!("fact recall {}", r.label));
        }
        for r in self.runs.iter().skip(1) {
            cols.push(format!("recall {} - {first}", r.label));
        }
        let _ = writeln!(s, "| {} |", cols.join(" | "));
        let _ = writeln!(
            s,
            "|---|{}",
            (1..cols.len()).map(|_| "---:|").collect::<String>()
        );
        let interval = |i: &Interval| {
            format!(
                "{:+.1} [{:+.1}, {:+.1}] ({}/{}/{}, n = {})",
                i.mean, i.low, i.high, i.wins, i.ties, i.losses, i.n
            )
        };
        for row in &self.rows {
            let mut cells = vec![row.method.clone()];
            for c in &row.cells {
                cells.push(
                    c.as_ref()
                        .map_or("-".into(), |c| format!("{:.1} ({})", c.score, c.questions)),
                );
            }
            for d in &row.deltas {
                cells.push(d.as_ref().map_or("-".into(), |d| interval(&d.score)));
            }
            for c in &row.cells {
                cells.push(
                    c.as_ref()
                        .and_then(|c| c.fact_recall)
                        .map_or("n/a".into(), |r| format!("{r:.1}%")),
                );
            }
            for d in &row.deltas {
                cells.push(
                    d.as_ref()
                        .and_then(|d| d.fact_recall.as_ref())
                        .map_or("n/a".into(), interval),
                );
            }
            let _ = writeln!(s, "| {} |", cells.join(" | "));
        }
        s
    }

    /// Writes compare.md, compare.json and compare.png into `out` (created if missing).
    pub fn write(&self, out: &Path) -> Result<(), EvalError> {
        let metric = self.metric.as_str();
        let io = |e: std::io::Error| EvalError::Input(format!("writing {}: {e}", out.display()));
        std::fs::create_dir_all(out).map_err(io)?;
        std::fs::write(out.join(COMPARE_MD), self.to_markdown()).map_err(io)?;
        let json = serde_json::to_vec_pretty(self).map_err(|e| EvalError::Input(e.to_string()))?;
        std::fs::write(out.join(COMPARE_JSON), json).map_err(io)?;
        let labels: Vec<String> = self.runs.iter().map(|r| r.label.clone()).collect();
        // The methods in two runs or more (all of them when none is).
        let shared: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.cells.iter().filter(|c| c.is_some()).count() > 1)
            .collect();
        let drawn: Vec<&Row> = if shared.is_empty() {
            self.rows.iter().collect()
        } else {
            shared
        };
        let series = |f: &dyn Fn(&Cell) -> Option<f64>| -> Vec<super::plot::RunSeries> {
            drawn
                .iter()
                .map(|r| super::plot::RunSeries {
                    method: r.method.clone(),
                    values: r.cells.iter().map(|c| c.as_ref().and_then(f)).collect(),
                })
                .collect()
        };
        let mut panels = vec![(metric, series(&|c| Some(c.score)))];
        let recall = series(&|c| c.fact_recall);
        if recall.iter().any(|s| s.values.iter().any(Option::is_some)) {
            panels.push(("answer-context fact recall %", recall));
        }
        super::plot::compare_png(&out.join(COMPARE_PNG), &labels, &panels)
            .map_err(EvalError::Input)?;
        Ok(())
    }
}

/// Rows and run directories for the comparisons' tests.
#[cfg(test)]
pub(super) mod test_runs {
    use std::path::Path;

    use crate::eval::evidence::ContextSpans;
    use crate::eval::rows::ResultRecord;
    use crate::eval::RowCost;

    pub fn row(item: &str, method: &str, f1: f64, recall_hit: bool) -> ResultRecord {
        ResultRecord {
            item: item.into(),
            dataset: "d".into(),
            method: method.into(),
            max_trials: None,
            question: "q".into(),
            prediction: "p".into(),
            gold: vec!["g".into()],
            gold_letter: None,
            em: 0.0,
            f1,
            error: None,
            cost: RowCost::default(),
            wall_secs: 0.0,
            answered_by_check: false,
            steps: 1,
            segments_used: vec![],
            step_failures: vec![],
            final_segments: None,
            spans: ContextSpans {
                answer_spans: Some(if recall_hit { vec![(0, 10)] } else { vec![] }),
                read_spans: Some(vec![]),
                answer_context_tokens: Some(1),
                gold_spans: Some(vec![(2, 5)]),
            },
            nav: None,
            model: Some("m".into()),
            kind: None,
        }
    }

    pub fn write_run(dir: &Path, rows: &[ResultRecord], model: &str) {
        std::fs::create_dir_all(dir).unwrap();
        let text: String = rows
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.model = Some(model.into());
                serde_json::to_string(&r).unwrap() + "\n"
            })
            .collect();
        std::fs::write(dir.join("results.jsonl"), text).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::test_runs::{row, write_run};
    use super::*;

    #[test]
    fn two_runs_give_the_known_differences_and_intervals() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        // Run a: kn scores 0, 0.5 on q1, q2; bm25 1 on q1. Run b: kn 1, 1 (and q3, not in a).
        write_run(
            &a,
            &[
                row("q1", "kn", 0.0, false),
                row("q2", "kn", 0.5, true),
                row("q1", "bm25-top3", 1.0, true),
            ],
            "small",
        );
        write_run(
            &b,
            &[
                row("q1", "kn", 1.0, true),
                row("q2", "kn", 1.0, true),
                row("q3", "kn", 1.0, true),
            ],
            "large",
        );
        let c = compare(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(
            c.runs.iter().map(|r| r.label.as_str()).collect::<Vec<_>>(),
            ["small", "large"]
        );
        let kn = &c.rows[0];
        assert_eq!(kn.method, "kn");
        let (ca, cb) = (kn.cells[0].as_ref().unwrap(), kn.cells[1].as_ref().unwrap());
        assert_eq!((ca.questions, ca.score), (2, 25.0));
        assert_eq!((cb.questions, cb.score), (3, 100.0));
        assert_eq!(ca.fact_recall, Some(50.0));
        // Paired on q1 and q2 only: +100 and +50, mean +75.
        let d = kn.deltas[0].as_ref().unwrap();
        assert_eq!(d.score.n, 2);
        assert_eq!(d.score.mean, 75.0);
        assert_eq!((d.score.wins, d.score.ties, d.score.losses), (2, 0, 0));
        assert!(
            d.score.low >= 50.0 && d.score.high <= 100.0,
            "{:?}",
            d.score
        );
        let r = d.fact_recall.as_ref().unwrap();
        assert_eq!((r.n, r.mean), (2, 50.0));
        // bm25-top3 is only in run a: a cell, no difference.
        let bm25 = &c.rows[1];
        assert!(bm25.cells[1].is_none() && bm25.deltas[0].is_none());
        // Written: markdown with the interval, JSON, and a figure with kn's two points and
        // bm25's one in each panel.
        let out = tmp.path().join("out");
        assert_eq!(c.metric, "F1");
        c.write(&out).unwrap();
        let md = std::fs::read_to_string(out.join(COMPARE_MD)).unwrap();
        assert!(md.contains("| kn | 25.0 (2) | 100.0 (3) | +75.0 ["), "{md}");
        assert!(out.join(COMPARE_JSON).exists() && out.join(COMPARE_PNG).exists());
        // A directory that is no run is refused, naming it.
        let err = compare(&[a, tmp.path().join("nothing")]).unwrap_err();
        assert!(err.to_string().contains("nothing"), "{err}");
    }
}
