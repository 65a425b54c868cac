//! Two rows paired question by question (`qrmem pair RUNS A B`): the mean difference of F1
//! and of answer-context fact recall on the questions both rows answered, with the reports'
//! paired bootstrap interval (`paired.rs`). Several runs pool their questions (where two
//! hold the same question and row, the first named wins), as when a lead on one dataset is
//! tested on the others; `--kind K` keeps the questions of one kind (question type, or
//! MuSiQue's hop count).
//!
//! A name is a row: `METHOD` is its rows of one max-trials setting or none (the default 4
//! where a sweep ran several), `METHOD@T` its rows of max trials T. A directory of `qrmem eval
//! --contexts-only` (its `contexts.jsonl`) gives rows with fact recall and no F1: a context
//! measured without the LLM pairs with a run's rows.
//!
//! Invariant: a pure function of the runs' rows (as `compare` reads them, backfill
//! included), so the same runs print the same intervals as the reports.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::compare::{read, MethodKey, QuestionScore, RunRead};
use super::contexts::ContextRecord;
use super::paired::{interval, Interval};
use super::runner::EvalError;

/// What `pair` measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Pairing {
    pub a: String,
    pub b: String,
    pub kind: Option<String>,
    pub runs: usize,
    /// Questions both rows answered (of the kind).
    pub questions: usize,
    /// 100 x mean F1 of each row on those questions.
    pub a_f1: f64,
    pub b_f1: f64,
    /// A minus B, in points (none where a row is a context measured without the LLM).
    pub f1: Option<Interval>,
    /// Answer-context fact recall, A minus B, on the questions with gold evidence in both.
    pub recall: Option<Interval>,
    /// Questions both rows answered whose kind no row records (left out under `--kind`).
    pub unknown_kind: usize,
}

/// The (method, max trials) keys a name selects, in order of preference.
fn keys(name: &str) -> Result<Vec<MethodKey>, EvalError> {
    match name.rsplit_once('@') {
        Some((m, t)) => {
            let t: usize = t.parse().map_err(|_| {
                EvalError::Input(format!(
                    "'{name}': the part after @ must be a max-trials number"
                ))
            })?;
            Ok(vec![(m.to_string(), Some(t))])
        }
        None => Ok(vec![(name.to_string(), None), (name.to_string(), Some(4))]),
    }
}

/// Pairs rows `a` and `b` over the runs in `dirs` (see the module).
pub fn pair(dirs: &[PathBuf], a: &str, b: &str, kind: Option<&str>) -> Result<Pairing, EvalError> {
    let mut rows: BTreeMap<MethodKey, BTreeMap<String, QuestionScore>> = BTreeMap::new();
    let mut kinds: BTreeMap<String, String> = BTreeMap::new();
    for dir in dirs {
        let run = if !dir.join("results.jsonl").exists() && dir.join("contexts.jsonl").exists() {
            contexts(dir)?
        } else {
            read(dir)?
        };
        for (key, scores) in run.scores {
            let pooled = rows.entry(key).or_default();
            for (item, score) in scores {
                pooled.entry(item).or_insert(score);
            }
        }
        for (item, k) in run.kinds {
            kinds.entry(item).or_insert(k);
        }
    }
    let select = |name: &str| -> Result<BTreeMap<String, QuestionScore>, EvalError> {
        let mut out = BTreeMap::new();
        for key in keys(name)? {
            for (item, s) in rows.get(&key).into_iter().flatten() {
                out.entry(item.clone()).or_insert(*s);
            }
        }
        if out.is_empty() {
            let known: Vec<String> = rows
                .keys()
                .map(|(m, t)| t.map_or(m.clone(), |t| format!("{m}@{t}")))
                .collect();
            return Err(EvalError::Input(format!(
                "no row '{name}' in {} (rows: {})",
                dirs.iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                known.join(", ")
            )));
        }
        Ok(out)
    };
    let (ra, rb) = (select(a)?, select(b)?);
    let mut unknown_kind = 0;
    let both: Vec<(&QuestionScore, &QuestionScore)> = ra
        .iter()
        .filter_map(|(item, x)| Some((item, x, rb.get(item)?)))
        .filter(|(item, _, _)| match kind {
            None => true,
            Some(k) => match kinds.get(*item) {
                Some(have) => have == k,
                None => {
                    unknown_kind += 1;
                    false
                }
            },
        })
        .map(|(_, x, y)| (x, y))
        .collect();
    // A context measured without the LLM has no F1 (NaN).
    let f1_pairs: Vec<(f64, f64)> = both
        .iter()
        .filter(|(x, y)| !x.score.is_nan() && !y.score.is_nan())
        .map(|(x, y)| (100.0 * x.score, 100.0 * y.score))
        .collect();
    let recall_pairs: Vec<(f64, f64)> = both
        .iter()
        .filter_map(|(x, y)| Some((100.0 * x.recall?, 100.0 * y.recall?)))
        .collect();
    if both.is_empty() {
        return Err(EvalError::Input(format!(
            "no question both '{a}' and '{b}' answered{}",
            kind.map(|k| format!(" of kind '{k}'")).unwrap_or_default()
        )));
    }
    let n = f1_pairs.len().max(1) as f64;
    Ok(Pairing {
        a: a.to_string(),
        b: b.to_string(),
        kind: kind.map(str::to_string),
        runs: dirs.len(),
        questions: both.len(),
        a_f1: f1_pairs.iter().map(|p| p.0).sum::<f64>() / n,
        b_f1: f1_pairs.iter().map(|p| p.1).sum::<f64>() / n,
        f1: interval(&f1_pairs),
        recall: interval(&recall_pairs),
        unknown_kind,
    })
}

/// A `--contexts-only` directory's records as rows: fact recall, no F1 (NaN).
fn contexts(dir: &Path) -> Result<RunRead, EvalError> {
    let path = dir.join("contexts.jsonl");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| EvalError::Input(format!("cannot read {}: {e}", path.display())))?;
    let mut scores: BTreeMap<MethodKey, BTreeMap<String, QuestionScore>> = BTreeMap::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let r: ContextRecord = serde_json::from_str(line)
            .map_err(|e| EvalError::Input(format!("{} line {}: {e}", path.display(), n + 1)))?;
        let recall = r.spans.answer_recall().map(|(h, f)| h as f64 / f as f64);
        scores.entry((r.method, None)).or_default().insert(
            r.item,
            QuestionScore {
                score: f64::NAN,
                recall,
                tokens: r.spans.answer_context_tokens,
                calls: 0,
            },
        );
    }
    Ok(RunRead::of_scores(dir, scores))
}

impl Pairing {
    /// The lines `qrmem pair` prints.
    pub fn to_text(&self) -> String {
        let show = |i: &Interval| {
            format!(
                "{:+.1} [{:+.1}, {:+.1}] (higher on {}, equal on {}, lower on {})",
                i.mean, i.low, i.high, i.wins, i.ties, i.losses
            )
        };
        let f1 = match &self.f1 {
            Some(f) => format!("  F1: {:.1} vs {:.1}, {}\n", self.a_f1, self.b_f1, show(f)),
            None => "  F1: none (a context measured without the LLM)\n".to_string(),
        };
        let mut s = format!(
            "{} - {}: {} question(s) both answered{}{}\n{f1}",
            self.a,
            self.b,
            self.questions,
            self.kind
                .as_ref()
                .map(|k| format!(" of kind '{k}'"))
                .unwrap_or_default(),
            if self.runs > 1 {
                format!(", pooled over {} runs", self.runs)
            } else {
                String::new()
            }
        );
        match &self.recall {
            Some(r) => s.push_str(&format!(
                "  answer-context fact recall ({} q): {}\n",
                r.n,
                show(r)
            )),
            None => s.push_str(
                "  answer-context fact recall: no question with gold evidence and spans in both\n",
            ),
        }
        if self.unknown_kind > 0 {
            s.push_str(&format!(
                "  ({} question(s) left out: no row records their kind)\n",
                self.unknown_kind
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::super::compare::test_runs::{row, write_run};
    use super::*;

    #[test]
    fn pools_runs_first_named_wins_and_filters_by_kind() {
        let tmp = tempfile::tempdir().unwrap();
        let (x, y) = (tmp.path().join("x"), tmp.path().join("y"));
        let kinded = |item: &str, m: &str, f1: f64, kind: &str| {
            let mut r = row(item, m, f1, f1 > 0.5);
            r.kind = Some(kind.into());
            r
        };
        write_run(
            &x,
            &[
                kinded("q1", "a", 1.0, "2hop"),
                kinded("q1", "b", 0.0, "2hop"),
                kinded("q2", "a", 0.0, "3hop"),
                kinded("q2", "b", 0.0, "3hop"),
            ],
            "m",
        );
        // y repeats q1 (x's rows win) and adds q3, whose kind no row records.
        write_run(
            &y,
            &[
                row("q1", "a", 0.0, false),
                row("q3", "a", 1.0, true),
                row("q3", "b", 0.5, false),
            ],
            "m",
        );
        let p = pair(&[x.clone(), y.clone()], "a", "b", None).unwrap();
        assert_eq!(p.questions, 3);
        assert!((p.a_f1 - 200.0 / 3.0).abs() < 1e-9);
        let f1 = p.f1.clone().unwrap();
        assert!((f1.mean - 150.0 / 3.0).abs() < 1e-9);
        assert_eq!((f1.wins, f1.ties, f1.losses), (2, 1, 0));
        let two = pair(&[x.clone(), y.clone()], "a", "b", Some("2hop")).unwrap();
        assert_eq!((two.questions, two.unknown_kind), (1, 1));
        assert_eq!(two.f1.as_ref().unwrap().mean, 100.0);
        assert!(two.to_text().contains("1 question(s) left out"));
        let err = pair(std::slice::from_ref(&x), "a", "c", None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no row 'c'") && err.contains("a, b"), "{err}");
        let err = pair(std::slice::from_ref(&x), "a@x", "b", None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("max-trials"), "{err}");
        // A contexts-only directory: row c with recall, no F1, paired with x's row a.
        let z = tmp.path().join("z");
        std::fs::create_dir_all(&z).unwrap();
        let rec = |item: &str, hit: bool| {
            let r = row(item, "c", 0.0, hit);
            serde_json::to_string(&ContextRecord {
                item: r.item,
                method: r.method,
                spans: r.spans,
            })
            .unwrap()
        };
        std::fs::write(
            z.join("contexts.jsonl"),
            rec("q1", false) + "\n" + &rec("q2", true),
        )
        .unwrap();
        let c = pair(&[x, z], "a", "c", None).unwrap();
        assert_eq!((c.questions, c.f1.clone()), (2, None));
        // a: q1 hit (f1 1.0), q2 missed; c: q1 missed, q2 hit.
        assert_eq!(c.recall.as_ref().unwrap().mean, 0.0);
        assert!(c.to_text().contains("F1: none"));
    }
}
