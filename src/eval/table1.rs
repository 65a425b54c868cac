//! The QRMeM paper's Table 1 in its layout (`qrmem compare --datasets RUN... --out DIR`, issue
//! 67): rows are methods, columns the datasets of the given runs (one run a dataset: HotpotQA,
//! 2WikiMultihopQA, MuSiQue), each cell the method's F1 with its answer-context fact recall,
//! tokens and LLM calls per question; under it, per dataset, the best KN row against the best
//! BM25 row with the paired interval; beside each dataset, the paper's GPT-3.5-turbo F1 where
//! the paper reports the method.
//!
//! Invariant: a pure function of the runs' results (as `compare` is), so it regenerates
//! byte-identical.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::compare::{read, MethodKey, RunInfo, Scores};
use super::paired::{self, Interval};
use super::runner::EvalError;

pub const TABLE1_MD: &str = "table1.md";
pub const TABLE1_JSON: &str = "table1.json";

/// The paper's Table 1, GPT-3.5-turbo block, F1 x 100 on LongBench's HotpotQA,
/// 2WikiMultihopQA and MuSiQue, for the methods this project runs under these names.
const PAPER_GPT35: &[(&str, [f64; 3])] = &[
    ("bm25-top3", [45.11, 34.71, 14.76]),
    ("contriever-top3", [39.50, 45.23, 19.48]),
    ("vanilla-left", [42.29, 36.15, 10.20]),
    ("vanilla-right", [30.98, 26.91, 12.13]),
    ("memwalker", [41.13, 44.32, 13.23]),
    ("ges", [47.31, 44.32, 19.31]),
    ("kn", [46.32, 46.98, 20.94]),
];

/// The paper's column of a dataset label (the rows' `dataset`), if it has one.
fn paper_column(dataset: &str) -> Option<usize> {
    let d = dataset.to_ascii_lowercase();
    if d.contains("hotpot") || d == "longbench-style" || d == "longbench" {
        Some(0)
    } else if d.contains("2wiki") {
        Some(1)
    } else if d.contains("musique") {
        Some(2)
    } else {
        None
    }
}

/// One dataset's run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DatasetRun {
    /// The rows' dataset label (the directory's name when its rows name several).
    pub dataset: String,
    pub run: RunInfo,
}

/// A method on one dataset: means over the questions it answered.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cell {
    pub questions: usize,
    pub f1: f64,
    pub fact_recall: Option<f64>,
    /// Tokens of document text in the final answer prompt, per question.
    pub tokens: Option<f64>,
    pub calls: f64,
}

/// One method across the datasets.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The method, with `@T` when some run has it at several max-trials values.
    pub method: String,
    pub cells: Vec<Option<Cell>>,
    /// The paper's GPT-3.5-turbo F1 on each dataset, where it reports the method.
    pub paper: Vec<Option<f64>>,
}

/// On one dataset, the best KN row against the best BM25 row (each over every question).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Best {
    pub kn: String,
    pub kn_f1: f64,
    pub bm25: String,
    pub bm25_f1: f64,
    /// F1 points, KN minus BM25, paired per question.
    pub f1: Interval,
    /// Fact-recall points, KN minus BM25, on the questions with gold evidence in both.
    pub fact_recall: Option<Interval>,
}

/// The table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Table1 {
    pub datasets: Vec<DatasetRun>,
    pub rows: Vec<Row>,
    /// Per dataset (None: no KN or no BM25 row answered every question).
    pub best: Vec<Option<Best>>,
}

/// The table of the runs in `dirs` (one a dataset), with the methods `methods` in that order
/// (every method of the runs, as first seen, when empty).
pub fn table1(dirs: &[PathBuf], methods: &[String]) -> Result<Table1, EvalError> {
    if dirs.is_empty() {
        return Err(EvalError::Input(
            "compare --datasets needs at least one run directory".into(),
        ));
    }
    let mut datasets = Vec::new();
    let mut order: Vec<MethodKey> = Vec::new();
    let mut all: Vec<BTreeMap<MethodKey, Scores>> = Vec::new();
    for d in dirs {
        let run = read(d)?;
        if run.multiple_choice {
            return Err(EvalError::Input(format!(
                "{}: multiple-choice questions; Table 1's multi-hop columns are F1 runs",
                d.display()
            )));
        }
        let dataset = match run.datasets.len() {
            1 => run.datasets.iter().next().cloned().unwrap_or_default(),
            _ => run.info.label.clone(),
        };
        for k in run.order {
            if !order.contains(&k) {
                order.push(k);
            }
        }
        datasets.push(DatasetRun {
            dataset,
            run: run.info,
        });
        all.push(run.scores);
    }
    let name = |key: &MethodKey| -> String {
        let swept = order.iter().filter(|o| o.0 == key.0).count() > 1;
        match key.1 {
            Some(t) if swept => format!("{}@{t}", key.0),
            _ => key.0.clone(),
        }
    };
    let keys: Vec<MethodKey> = if methods.is_empty() {
        order.clone()
    } else {
        let mut keys = Vec::new();
        for m in methods {
            let at = |k: &MethodKey| k.1.is_some_and(|t| format!("{}@{t}", k.0) == *m);
            match order.iter().find(|k| name(k) == *m || at(k)) {
                Some(k) => keys.push(k.clone()),
                None => {
                    return Err(EvalError::Input(format!(
                    "no run has the method '{m}' (a method at several max trials is named NAME@T)"
                )))
                }
            }
        }
        keys
    };
    let rows = keys
        .iter()
        .map(|key| Row {
            method: name(key),
            cells: all.iter().map(|s| s.get(key).map(cell)).collect(),
            paper: datasets
                .iter()
                .map(|d| {
                    let col = paper_column(&d.dataset)?;
                    PAPER_GPT35
                        .iter()
                        .find(|(m, _)| *m == key.0)
                        .map(|(_, f1)| f1[col])
                })
                .collect(),
        })
        .collect();
    let best = datasets
        .iter()
        .zip(&all)
        .map(|(d, scores)| best_pair(scores, d.run.questions, &name))
        .collect();
    Ok(Table1 {
        datasets,
        rows,
        best,
    })
}

fn cell(s: &Scores) -> Cell {
    let n = s.len().max(1) as f64;
    let recalls: Vec<f64> = s.values().filter_map(|v| v.recall).collect();
    let tokens: Vec<f64> = s
        .values()
        .filter_map(|v| v.tokens.map(|t| t as f64))
        .collect();
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    Cell {
        questions: s.len(),
        f1: 100.0 * s.values().map(|v| v.score).sum::<f64>() / n,
        fact_recall: mean(&recalls).map(|r| 100.0 * r),
        tokens: mean(&tokens),
        calls: s.values().map(|v| v.calls as f64).sum::<f64>() / n,
    }
}

/// The best (highest F1) KN row and BM25 row among those that answered all `questions`, and
/// their paired difference.
fn best_pair(
    scores: &BTreeMap<MethodKey, Scores>,
    questions: usize,
    name: &dyn Fn(&MethodKey) -> String,
) -> Option<Best> {
    let role = |name: &str| {
        name.parse::<crate::methods::MethodSpec>()
            .map_or(crate::methods::Role::Other, |m| m.role())
    };
    let best_of = |family: crate::methods::Role| -> Option<(&MethodKey, &Scores, f64)> {
        scores
            .iter()
            .filter(|(k, s)| role(&k.0) == family && s.len() == questions)
            .map(|(k, s)| (k, s, cell(s).f1))
            .max_by(|a, b| a.2.total_cmp(&b.2).then_with(|| b.0.cmp(a.0)))
    };
    let (kk, ks, kf) = best_of(crate::methods::Role::Kn)?;
    let (bk, bs, bf) = best_of(crate::methods::Role::Bm25)?;
    let mut f1_pairs: Vec<(f64, f64)> = Vec::new();
    let mut recall_pairs: Vec<(f64, f64)> = Vec::new();
    for (q, a) in ks {
        let Some(b) = bs.get(q) else { continue };
        f1_pairs.push((100.0 * a.score, 100.0 * b.score));
        if let (Some(x), Some(y)) = (a.recall, b.recall) {
            recall_pairs.push((100.0 * x, 100.0 * y));
        }
    }
    let f1 = paired::interval(&f1_pairs)?;
    Some(Best {
        kn: name(kk),
        kn_f1: kf,
        bm25: name(bk),
        bm25_f1: bf,
        f1,
        fact_recall: paired::interval(&recall_pairs),
    })
}

impl Table1 {
    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# Table 1, reproduced\n");
        for (i, d) in self.datasets.iter().enumerate() {
            let _ = writeln!(
                s,
                "{}. **{}**: `{}` ({} questions, {})",
                i + 1,
                d.dataset,
                d.run.dir,
                d.run.questions,
                d.run.label
            );
        }
        let _ = writeln!(
            s,
            "\nEach cell: F1 (answer-context fact recall %), tokens of document text in the final \
             answer prompt and LLM calls per question, over the questions the method answered \
             (their count when it is not every question). \"paper\": the QRMeM paper's \
             GPT-3.5-turbo F1 on LongBench's own contexts (200 questions each), where it reports \
             the method: a different model and different contexts, so only the order of rows \
             compares.\n"
        );
        let mut cols = vec!["method".to_string()];
        for d in &self.datasets {
            cols.push(format!("{} F1 (recall)", d.dataset));
            cols.push("tok".into());
            cols.push("calls".into());
            cols.push("paper".into());
        }
        let _ = writeln!(s, "| {} |", cols.join(" | "));
        let _ = writeln!(
            s,
            "|---|{}",
            (1..cols.len()).map(|_| "---:|").collect::<String>()
        );
        for row in &self.rows {
            let mut cells = vec![row.method.clone()];
            for (i, c) in row.cells.iter().enumerate() {
                let all = self.datasets[i].run.questions;
                match c {
                    Some(c) => {
                        let recall = c.fact_recall.map_or("n/a".into(), |r| format!("{r:.1}"));
                        let n = if c.questions == all {
                            String::new()
                        } else {
                            format!("; {} q", c.questions)
                        };
                        cells.push(format!("{:.1} ({recall}{n})", c.f1));
                        cells.push(c.tokens.map_or("-".into(), |t| format!("{t:.0}")));
                        cells.push(format!("{:.2}", c.calls));
                    }
                    None => cells.extend(["".to_string(), "".to_string(), "".to_string()]),
                }
                cells.push(row.paper[i].map_or(String::new(), |p| format!("{p:.1}")));
            }
            let _ = writeln!(s, "| {} |", cells.join(" | "));
        }
        let _ = writeln!(
            s,
            "\nThe best KN row against the best BM25 row on each dataset (each over every \
             question; KN rows are named kn..., BM25 rows bm25...): the mean paired difference \
             with its 95% bootstrap interval ({} resamples, seed {}).\n",
            paired::RESAMPLES,
            paired::SEED
        );
        let show = |i: &Interval| format!("{:+.1} [{:+.1}, {:+.1}]", i.mean, i.low, i.high);
        for (d, b) in self.datasets.iter().zip(&self.best) {
            match b {
                Some(b) => {
                    let _ = writeln!(
                        s,
                        "- {}: {} ({:.1}) - {} ({:.1}): F1 {}, fact recall {}",
                        d.dataset,
                        b.kn,
                        b.kn_f1,
                        b.bm25,
                        b.bm25_f1,
                        show(&b.f1),
                        b.fact_recall.as_ref().map_or("n/a".into(), show)
                    );
                }
                None => {
                    let _ = writeln!(
                        s,
                        "- {}: no KN row or no BM25 row answered every question",
                        d.dataset
                    );
                }
            }
        }
        s
    }

    /// Writes table1.md and table1.json into `out` (created if missing).
    pub fn write(&self, out: &Path) -> Result<(), EvalError> {
        let io = |e: std::io::Error| EvalError::Input(format!("writing {}: {e}", out.display()));
        std::fs::create_dir_all(out).map_err(io)?;
        std::fs::write(out.join(TABLE1_MD), self.to_markdown()).map_err(io)?;
        let json = serde_json::to_vec_pretty(self).map_err(|e| EvalError::Input(e.to_string()))?;
        std::fs::write(out.join(TABLE1_JSON), json).map_err(io)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::compare::test_runs::{row, write_run};
    use super::*;

    #[test]
    fn the_table_puts_datasets_side_by_side_and_pairs_the_best_kn_and_bm25_rows() {
        let tmp = tempfile::tempdir().unwrap();
        let (hotpot, wiki) = (tmp.path().join("h"), tmp.path().join("w"));
        let on = |dataset: &str, mut r: ResultRecord| {
            r.dataset = dataset.into();
            r
        };
        use super::super::rows::ResultRecord;
        // HotpotQA: kn 1, 1; kn-passages400 0.5, 0.5; bm25-top3 0, 1; bm25-passages400 only q1.
        let rows: Vec<ResultRecord> = [
            ("q1", "kn", 1.0, true),
            ("q2", "kn", 1.0, true),
            ("q1", "kn-passages400", 0.5, false),
            ("q2", "kn-passages400", 0.5, false),
            ("q1", "bm25-top3", 0.0, false),
            ("q2", "bm25-top3", 1.0, true),
            ("q1", "bm25-passages400", 1.0, true),
        ]
        .into_iter()
        .map(|(q, m, f1, hit)| on("hotpotqa-longbench-style", row(q, m, f1, hit)))
        .collect();
        write_run(&hotpot, &rows, "m");
        // 2Wiki: bm25-top3 only.
        write_run(
            &wiki,
            &[on(
                "2wikimqa-longbench-style",
                row("p1", "bm25-top3", 0.25, true),
            )],
            "m",
        );
        let t = table1(&[hotpot.clone(), wiki.clone()], &[]).unwrap();
        assert_eq!(
            t.datasets
                .iter()
                .map(|d| d.dataset.as_str())
                .collect::<Vec<_>>(),
            ["hotpotqa-longbench-style", "2wikimqa-longbench-style"]
        );
        let bm25 = t.rows.iter().find(|r| r.method == "bm25-top3").unwrap();
        assert_eq!(bm25.cells[0].as_ref().unwrap().f1, 50.0);
        assert_eq!(bm25.cells[1].as_ref().unwrap().f1, 25.0);
        // The paper's GPT-3.5-turbo F1 for BM25 top 3 on HotpotQA and 2Wiki.
        assert_eq!(bm25.paper, [Some(45.11), Some(34.71)]);
        let kn = t.rows.iter().find(|r| r.method == "kn").unwrap();
        assert!(kn.cells[1].is_none());
        // HotpotQA: the best KN row (kn, 100) against the best BM25 row over every question
        // (bm25-top3, 50: bm25-passages400 answered one of two): +50 on the pairs (1, 0), (1, 1).
        let best = t.best[0].as_ref().unwrap();
        assert_eq!((best.kn.as_str(), best.bm25.as_str()), ("kn", "bm25-top3"));
        assert_eq!(best.f1.mean, 50.0);
        assert!(t.best[1].is_none(), "no KN row on 2Wiki");
        let md = t.to_markdown();
        assert!(
            md.contains("| bm25-passages400 | 100.0 (100.0; 1 q) |"),
            "{md}"
        );
        assert!(md.contains("no KN row or no BM25 row"), "{md}");
        // A chosen order; an unknown method is refused naming it.
        let t = table1(
            std::slice::from_ref(&hotpot),
            &["bm25-top3".into(), "kn".into()],
        )
        .unwrap();
        assert_eq!(
            t.rows.iter().map(|r| r.method.as_str()).collect::<Vec<_>>(),
            ["bm25-top3", "kn"]
        );
        let err = table1(&[hotpot], &["te".into()]).unwrap_err().to_string();
        assert!(err.contains("'te'"), "{err}");
    }
}
