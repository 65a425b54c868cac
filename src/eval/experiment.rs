//! The eval driver behind `qrmem eval`: an experiment file (`eval/*.toml`) and the flags that
//! override it resolve to a [`Plan`]; [`run`] answers its pairs into the run directory (the
//! runner) and records where the time went; [`report`] rewrites `report.md` / `report.json`
//! from the run directory, first backfilling the spans of rows recorded before rows carried
//! them.
//!
//! Boundary: reads the experiment file and the dataset, writes `DIR/run-notes.json`,
//! `DIR/timing.jsonl`, `DIR/backfill.jsonl` and the reports (the runner writes the rest).
//! Invariant: the report's rows follow the experiment file's method order, whatever subset a
//! run was given; the experiment's notes are read afresh on every report.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Deserialize;

use super::datasets::QaItem;
use super::items;
use super::rows::{self, ResultRecord};
use super::runner::{self, EvalError, EvalOptions, RunSummary};
use super::{backfill, Report};
use crate::answer::Window;
use crate::config::Config;
use crate::embed::TimedEmbedder;
use crate::methods::MethodSpec;
use crate::methods::Runtime;
use crate::prompts::Prompts;

/// The paired table's reference row when the experiment names none: the strongest cheap
/// baseline of the QRMeM paper's Table 1.
pub const DEFAULT_REFERENCE: &str = "bm25-top3";

/// An experiment file: title, dataset, data, methods, limit, skip, seed, words, trials,
/// reference, model, memories_built_by, notes.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    pub title: Option<String>,
    pub dataset: Option<String>,
    /// The dataset's path, relative to the experiment file.
    pub data: Option<PathBuf>,
    #[serde(default)]
    pub methods: Vec<String>,
    pub limit: Option<usize>,
    /// Leave out the first N of the `limit` items (a run over items 31-60: limit 60, skip 30).
    pub skip: Option<usize>,
    pub seed: Option<u64>,
    pub words: Option<usize>,
    pub trials: Option<String>,
    /// The row the report's paired table compares every other row with (`METHOD` or
    /// `METHOD@TRIALS`); bm25-top3 when not given.
    pub reference: Option<String>,
    /// The model the run answers with, as the server names it (`--llm-model` overrides it; it
    /// overrides the configuration's). The report names it, so a run answered by another model
    /// than the configured one reports the right model when its report is rewritten.
    pub model: Option<String>,
    /// Answer over the memories this model built and build none (`--memories-built-by`
    /// overrides it).
    pub memories_built_by: Option<String>,
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Experiment {
    /// Reads an experiment file; its data path is made relative to the file's directory.
    pub fn read(path: &Path) -> Result<Experiment, EvalError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            EvalError::Input(format!(
                "cannot read the experiment file {}: {e}",
                path.display()
            ))
        })?;
        let mut e: Experiment = toml::from_str(&text).map_err(|e| {
            EvalError::Input(format!(
                "the experiment file {} is invalid: {e}",
                path.display()
            ))
        })?;
        for (key, v) in [
            ("model", &e.model),
            ("memories_built_by", &e.memories_built_by),
        ] {
            if v.as_deref().is_some_and(|m| m.trim().is_empty()) {
                return Err(EvalError::Input(format!(
                    "the experiment file {}: {key} is empty (name a model as the server does, or leave the key out)",
                    path.display()
                )));
            }
        }
        if let Some(d) = &e.data {
            if d.is_relative() {
                e.data = Some(path.parent().unwrap_or(Path::new(".")).join(d));
            }
        }
        Ok(e)
    }
}

/// What `qrmem eval` was asked: each field overrides the experiment file's.
#[derive(Clone, Debug, Default)]
pub struct Request {
    pub experiment: Option<PathBuf>,
    pub dataset: Option<String>,
    pub data: Option<PathBuf>,
    pub methods: Vec<String>,
    pub limit: Option<usize>,
    pub skip: Option<usize>,
    pub seed: Option<u64>,
    pub words: Option<usize>,
    /// "1..6" or "1,2,4".
    pub trials: Option<String>,
    /// `--llm-model`.
    pub model: Option<String>,
    /// `--memories-built-by`.
    pub memories_built_by: Option<String>,
}

/// A resolved experiment: what to run and how to report it.
pub struct Plan {
    pub title: String,
    pub dataset: String,
    pub data: Option<PathBuf>,
    /// The methods this run answers with.
    pub methods: Vec<MethodSpec>,
    pub trials: Vec<usize>,
    pub limit: Option<usize>,
    /// Items left out at the start (the items are the `limit` first, less these).
    pub skip: usize,
    pub seed: u64,
    pub words: usize,
    /// The report's row order: the experiment file's methods, then any other this run names.
    pub method_order: Vec<String>,
    /// The row the paired table compares with.
    pub reference: String,
    /// The model that answers (None: the configuration's).
    pub model: Option<String>,
    /// Answer over the memories this model built; build none.
    pub memories_built_by: Option<String>,
    /// The experiment file's notes.
    pub notes: Vec<String>,
}

impl Plan {
    pub fn resolve(req: &Request) -> Result<Plan, EvalError> {
        let exp = match &req.experiment {
            Some(p) => Experiment::read(p)?,
            None => Experiment::default(),
        };
        let dataset =
            req.dataset.clone().or(exp.dataset).ok_or_else(|| {
                EvalError::Input("give --dataset (or an --experiment file)".into())
            })?;
        let names: Vec<String> = if req.methods.is_empty() {
            exp.methods.clone()
        } else {
            req.methods.clone()
        };
        let methods: Vec<MethodSpec> = names
            .iter()
            .map(|m| m.trim().parse::<MethodSpec>().map_err(EvalError::Input))
            .collect::<Result<_, _>>()?;
        let trials = match req.trials.as_ref().or(exp.trials.as_ref()) {
            Some(t) => parse_trials(t).map_err(EvalError::Input)?,
            None => vec![],
        };
        let title = exp
            .title
            .clone()
            .unwrap_or_else(|| format!("{dataset}: {}", names.join(", ")));
        // Report rows follow the experiment file's order, whatever subset this run was given
        // (`--methods` resumes a few rows of a run), then any method the file does not list.
        let mut method_order: Vec<String> = exp
            .methods
            .iter()
            .map(|m| {
                m.trim()
                    .parse::<MethodSpec>()
                    .map_or_else(|_| m.trim().to_string(), |s| s.to_string())
            })
            .collect();
        for s in &methods {
            let s = s.to_string();
            if !method_order.contains(&s) {
                method_order.push(s);
            }
        }
        let words = req
            .words
            .or(exp.words)
            .unwrap_or_else(|| items::default_words(&dataset));
        Ok(Plan {
            title,
            data: req.data.clone().or(exp.data),
            dataset,
            methods,
            trials,
            limit: req.limit.or(exp.limit),
            skip: req.skip.or(exp.skip).unwrap_or(0),
            seed: req.seed.or(exp.seed).unwrap_or(0),
            words,
            method_order,
            reference: exp
                .reference
                .unwrap_or_else(|| DEFAULT_REFERENCE.to_string()),
            model: req.model.clone().or(exp.model),
            memories_built_by: req.memories_built_by.clone().or(exp.memories_built_by),
            notes: exp.notes,
        })
    }

    /// The plan's items, and the notes the run should carry (the LongBench-style label).
    pub fn load_items(&self) -> Result<(Vec<QaItem>, Vec<String>), EvalError> {
        let data = self
            .data
            .as_ref()
            .ok_or_else(|| EvalError::Input("give --data (or an --experiment file)".into()))?;
        let (mut items, notes) =
            items::load(&self.dataset, data, self.limit, self.seed, self.words)
                .map_err(|e| EvalError::Input(e.to_string()))?;
        if self.skip >= items.len() && self.skip > 0 {
            return Err(EvalError::Input(format!(
                "skip {} leaves no item of the {} loaded (raise limit)",
                self.skip,
                items.len()
            )));
        }
        items.drain(..self.skip.min(items.len()));
        Ok((items, notes))
    }
}

/// "1..6" (inclusive) or "1,2,4".
pub fn parse_trials(s: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("--trials '{s}': give a range like 1..6 or a list like 1,2,4 (each >= 1)");
    let v: Vec<usize> = if let Some((a, b)) = s.split_once("..") {
        let (a, b): (usize, usize) = (
            a.trim().parse().map_err(|_| bad())?,
            b.trim().parse().map_err(|_| bad())?,
        );
        (a..=b).collect()
    } else {
        s.split(',')
            .map(|x| x.trim().parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?
    };
    if v.is_empty() || v.contains(&0) {
        return Err(bad());
    }
    Ok(v)
}

/// The run's own notes, in the run directory.
pub const RUN_NOTES: &str = "run-notes.json";

/// The notes a run recorded: `run-notes.json`, or for a run made before it existed the older
/// `notes.json` (the run's notes and the experiment's of that time, merged); none if neither.
pub fn read_run_notes(out: &Path) -> Result<Vec<String>, EvalError> {
    for name in [RUN_NOTES, "notes.json"] {
        let path = out.join(name);
        match std::fs::read(&path) {
            Ok(text) => {
                return serde_json::from_slice(&text).map_err(|_| {
                    EvalError::Input(format!("{} is not a JSON list of notes", path.display()))
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(EvalError::Input(format!(
                    "cannot read {}: {e}",
                    path.display()
                )))
            }
        }
    }
    Ok(Vec::new())
}

/// How [`run`] runs the plan.
#[derive(Clone, Debug, Default)]
pub struct Flags {
    /// Run the pairs that failed in an earlier run again.
    pub retry_failed: bool,
    /// Keep every question's trace here (DIR/traces with `html`).
    pub trace_dir: Option<PathBuf>,
    /// Write each question's page next to its trace.
    pub html: bool,
    /// Build the memories only (see [`EvalOptions::build_only`]).
    pub build_only: bool,
}

/// Runs the plan's pairs into `out` (resuming what is there), printing progress and the ledger
/// on stderr, and appends where the time went to `out/timing.jsonl`.
pub async fn run(
    ctx: &Runtime<'_>,
    plan: &Plan,
    out: &Path,
    flags: Flags,
) -> Result<RunSummary, EvalError> {
    let Flags {
        retry_failed,
        trace_dir,
        html,
        build_only,
    } = flags;
    let memories_built_by = plan.memories_built_by.clone();
    if build_only && memories_built_by.is_some() {
        return Err(EvalError::Input(
            "--build-only builds memories and --memories-built-by (or the experiment's memories_built_by) forbids building: give one of them".into(),
        ));
    }
    // Pages go next to the traces: DIR/traces unless another directory is named.
    let trace_dir = match trace_dir {
        None if html => Some(out.join(PAGES)),
        other => other,
    };
    let io = |path: &Path, e: std::io::Error| {
        EvalError::Input(format!("cannot write {}: {e}", path.display()))
    };
    std::fs::create_dir_all(out).map_err(|e| io(out, e))?;
    let (items, run_notes) = plan.load_items()?;
    let path = out.join(RUN_NOTES);
    let notes = serde_json::to_vec_pretty(&run_notes).map_err(|e| io(&path, e.into()))?;
    std::fs::write(&path, notes).map_err(|e| io(&path, e))?;
    let started = Instant::now();
    let embedder = TimedEmbedder::new(ctx.embedder);
    let ectx = Runtime {
        llm: ctx.llm,
        prompts: ctx.prompts,
        embedder: &embedder,
        config: ctx.config,
    };
    let opts = EvalOptions {
        methods: plan.methods.clone(),
        trials: plan.trials.clone(),
        // Builds only: two documents at a time, so memories finish (and can be committed)
        // one after another while the second keeps the server's slots busy.
        concurrency: if build_only {
            2
        } else {
            ctx.config.llm.concurrency
        },
        retry_failed,
        progress: true,
        trace_dir: trace_dir.clone(),
        html,
        build_only,
        memories_built_by,
    };
    eprintln!(
        "{} questions x {} methods -> {}",
        items.len(),
        plan.methods.len(),
        out.display()
    );
    let summary = runner::run(&ectx, &items, out, &opts).await?;
    eprintln!(
        "finished {} pairs ({} failed), skipped {} already done; memories built {}, loaded {}; {:.1} s",
        summary.finished, summary.failed, summary.skipped, summary.memories_built, summary.memories_loaded, summary.wall_secs
    );
    if summary.not_built > 0 {
        eprintln!(
            "left {} pairs undone: their memories are not built (build them with --build-only and the building model)",
            summary.not_built
        );
    }
    eprintln!("{}", summary.ledger);
    // Where the time went: LLM calls (requests and cache reads), embedding, the rest.
    let wall = started.elapsed().as_secs_f64();
    let t = summary.ledger.total();
    let timing = serde_json::json!({
        "wall_secs": wall,
        "llm_secs": t.wall_secs,
        "embed_secs": embedder.secs(),
        "embedded_texts": embedder.texts(),
        "other_secs": (wall - t.wall_secs - embedder.secs()).max(0.0),
        "requests": t.requests,
        "cache_hits": t.cache_hits,
        "pairs_finished": summary.finished,
        "pairs_skipped": summary.skipped,
        "mean_in_flight": summary.ledger.in_flight.mean(),
        "concurrency": ctx.config.llm.concurrency,
    });
    eprintln!("timing: {timing}");
    let path = out.join("timing.jsonl");
    let mut line = timing.to_string().into_bytes();
    line.push(b'\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(&line))
        .map_err(|e| io(&path, e))?;
    if let (true, Some(dir)) = (html, &trace_dir) {
        let (results, _) = rows::read_run(out)?;
        let n = write_index(out, dir, &results)?;
        eprintln!(
            "wrote {} ({n} question pages)",
            dir.join("index.html").display()
        );
    }
    Ok(summary)
}

/// `--report-only --html`: rewrites the page of every row whose trace is kept in `dir`, from
/// the trace and the run's memory of its document (no LLM), then the index. Returns the pages
/// written and the rows that had no page, with why.
pub fn rewrite_pages(
    config: &Config,
    plan: &Plan,
    out: &Path,
    dir: &Path,
) -> Result<(usize, Vec<String>), EvalError> {
    let (items, _) = plan.load_items()?;
    let by_id: std::collections::BTreeMap<&str, &QaItem> =
        items.iter().map(|i| (i.id.as_str(), i)).collect();
    let (results, _) = rows::read_run(out)?;
    let memories = runner::memories_dir(out);
    let (mut written, mut skipped) = (0, Vec::new());
    for r in rows::latest(&results).into_values() {
        let trace_path = dir.join(format!("{}.json", rows::trace_stem(r)));
        if !trace_path.exists() {
            continue;
        }
        let why = |e: String| format!("{} {}: {e}", r.method, r.item);
        let Some(item) = by_id.get(r.item.as_str()) else {
            skipped.push(why("not in the dataset".into()));
            continue;
        };
        let kind = match r.method.parse::<MethodSpec>() {
            Ok(spec) => spec.memory_kind(),
            Err(e) => {
                skipped.push(why(e));
                continue;
            }
        };
        let prepared = if kind.needs_llm() {
            let Some(path) = backfill::find_memory(&memories, &item.context, kind) else {
                skipped.push(why(format!(
                    "no single {} memory in {}",
                    kind.name(),
                    memories.display()
                )));
                continue;
            };
            match crate::methods::load_prepared(kind, &path) {
                Ok(p) => p,
                Err(e) => {
                    skipped.push(why(e));
                    continue;
                }
            }
        } else {
            crate::methods::Prepared::Graph(Box::new(crate::memory::Memory::segments_only(
                &item.context,
                kind.params(config),
                &config.llm.model,
            )))
        };
        let (trace, _) = crate::view::read_trace(&trace_path, &memories)
            .map_err(|e| EvalError::Input(e.to_string()))?;
        match runner::write_page(dir, r, &trace, item, &prepared) {
            Ok(()) => written += 1,
            Err(e) => skipped.push(why(e)),
        }
    }
    write_index(out, dir, &results)?;
    Ok((written, skipped))
}

/// Where `--html` puts the traces and pages unless `--trace-dir` names another directory.
pub const PAGES: &str = "traces";

/// Writes `dir/index.html`: one row per result of the run whose page is in `dir` (score, fact
/// recall of the answer context, answer-context tokens, requests and prompt tokens), sortable
/// by any column; the latest record of each key counts, as in the report. Returns the number
/// of rows.
pub fn write_index(out: &Path, dir: &Path, results: &[ResultRecord]) -> Result<usize, EvalError> {
    let esc = crate::view::escape;
    let mut rows = String::new();
    let mut n = 0;
    for r in rows::latest(results).into_values() {
        let stem = rows::trace_stem(r);
        if !dir.join(format!("{stem}.html")).exists() {
            continue;
        }
        n += 1;
        let recall = r.spans.answer_recall().map_or("n/a".to_string(), |(a, b)| {
            format!("{:.1}", 100.0 * a as f64 / b.max(1) as f64)
        });
        let tokens = r
            .spans
            .answer_context_tokens
            .map_or("n/a".to_string(), |t| t.to_string());
        rows.push_str(&format!(
            "<tr><td><a href=\"{}.html\">{}</a></td><td>{}</td><td>{}</td><td>{:.2}</td><td>{recall}</td><td>{tokens}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(&stem),
            esc(&r.item),
            esc(&r.method),
            super::report::trials_cell(r.max_trials),
            r.f1,
            r.cost.requests,
            r.cost.prompt_tokens,
            esc(&r.question),
        ));
    }
    // The report's cost-quality figure, linked from where the index lies (the report writes
    // it after the index, so it is linked whether or not it exists yet).
    let figure = out.join(super::report::COST_QUALITY_PNG);
    let src = match dir.parent() {
        Some(p) if p == out => format!("../{}", super::report::COST_QUALITY_PNG),
        _ => figure.display().to_string(),
    };
    let figure_html = format!(
        "<p><img src=\"{}\" alt=\"each method's score and fact recall against its LLM tokens per question\" style=\"max-width:100%\"></p>\n",
        esc(&src)
    );
    let page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>qrmem: question pages of {}</title>\n<style>{INDEX_STYLE}</style>\n</head>\n<body>\n<h1>Question pages of {}</h1>\n{figure_html}<p>Click a column's header to sort by it. Fact recall: the share of the question's supporting sentences inside the final answer prompt (n/a: no gold evidence, or not recorded).</p>\n<table id=\"index\">\n<thead><tr><th>item</th><th>method</th><th>trials</th><th>score</th><th>fact recall %</th><th>answer tokens</th><th>requests</th><th>prompt tokens</th><th>question</th></tr></thead>\n<tbody>\n{rows}</tbody>\n</table>\n<script>{INDEX_SCRIPT}</script>\n</body>\n</html>\n",
        esc(&out.display().to_string()),
        esc(&out.display().to_string()),
    );
    let path = dir.join("index.html");
    std::fs::write(&path, page)
        .map_err(|e| EvalError::Input(format!("cannot write {}: {e}", path.display())))?;
    Ok(n)
}

const INDEX_STYLE: &str = "body{font:13px/1.4 system-ui,sans-serif;margin:1rem}table{border-collapse:collapse}th,td{border:1px solid #ddd;padding:2px 6px;text-align:left}th{cursor:pointer;background:#f4f4f4}";

/// Sorts the table by the clicked column (numbers as numbers, "n/a" last).
const INDEX_SCRIPT: &str = "(function(){var t=document.getElementById('index');var dir={};t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){dir[i]=!dir[i];var rows=Array.prototype.slice.call(t.tBodies[0].rows);rows.sort(function(a,b){var x=a.cells[i].textContent,y=b.cells[i].textContent;var p=parseFloat(x),q=parseFloat(y);var c=(isNaN(p)||isNaN(q))?x.localeCompare(y):p-q;if(isNaN(p)&&!isNaN(q))c=1;if(!isNaN(p)&&isNaN(q))c=-1;return dir[i]?c:-c;});rows.forEach(function(r){t.tBodies[0].appendChild(r);});});});})();";

/// Rewrites `out/report.md` and `out/report.json` from the run directory and returns the
/// report. With the dataset at hand, the spans of rows recorded before rows carried them are
/// first computed into `out/backfill.jsonl`; without it, an earlier backfill is read.
pub fn report(config: &Config, plan: &Plan, out: &Path) -> Result<Report, EvalError> {
    let mut notes = read_run_notes(out)?;
    for n in &plan.notes {
        if !notes.contains(n) {
            notes.push(n.clone());
        }
    }
    if out.join(PAGES).join("index.html").exists() {
        notes.push(format!(
            "Question pages (qrmem view, one per question, sortable index): [{PAGES}/index.html]({PAGES}/index.html)."
        ));
    }
    let (results, builds) = rows::read_run(out)?;
    // The items give the gold evidence and documents that old rows' spans are computed from,
    // and the question kinds old rows lack.
    let kinds: BTreeMap<String, String> = match plan.load_items() {
        Ok((items, _)) => {
            let prompts = Prompts::load().map_err(|e| EvalError::Input(e.to_string()))?;
            let nav = &config.navigate;
            let ctx = backfill::BackfillCtx {
                prompts: &prompts,
                window: Window::of(nav),
                segment_tokens: config.memory.segment_tokens,
                memories: runner::memories_dir(out),
            };
            let (n, problems) =
                backfill::backfill(&ctx, out, &items, &results).map_err(EvalError::Input)?;
            if n > 0 {
                eprintln!(
                    "backfilled the spans of {n} rows recorded before rows carried them ({}); {} without answer spans",
                    out.join(backfill::BACKFILL).display(),
                    problems.len()
                );
            }
            items
                .into_iter()
                .filter_map(|i| Some((i.id, i.kind?)))
                .collect()
        }
        Err(e) => {
            eprintln!(
                "note: {e}; evidence columns come from {} where it exists",
                out.join(backfill::BACKFILL).display()
            );
            BTreeMap::new()
        }
    };
    let backfill = backfill::read_backfill(out).map_err(EvalError::Input)?;
    let report = super::report::build(
        &plan.title,
        &config.llm.model,
        &results,
        &builds,
        super::report::Recovered {
            spans: &backfill,
            kinds: &kinds,
        },
        super::report::Layout {
            method_order: &plan.method_order,
            reference: &plan.reference,
        },
        notes,
    );
    report
        .write(out)
        .map_err(|e| EvalError::Input(format!("writing the report into {}: {e}", out.display())))?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trials_parse_as_ranges_and_lists() {
        assert_eq!(parse_trials("1..3").unwrap(), vec![1, 2, 3]);
        assert_eq!(parse_trials("1, 2,4").unwrap(), vec![1, 2, 4]);
        for bad in ["0..2", "a", "", "3..1", "1,,2"] {
            let err = parse_trials(bad).unwrap_err();
            assert!(err.contains(&format!("'{bad}'")), "{err}");
        }
    }

    fn experiment_file(dir: &Path, extra: &str) -> PathBuf {
        let path = dir.join("exp.toml");
        let text = format!("dataset = \"hotpotqa\"\nmethods = [\"bm25-top3\"]\n{extra}");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn the_experiment_names_the_answering_and_building_models_and_the_flags_override_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = experiment_file(
            dir.path(),
            "model = \"big\"\nmemories_built_by = \"small\"\n",
        );
        let req = Request {
            experiment: Some(path),
            ..Request::default()
        };
        let plan = Plan::resolve(&req).unwrap();
        assert_eq!(plan.model.as_deref(), Some("big"));
        assert_eq!(plan.memories_built_by.as_deref(), Some("small"));
        let plan = Plan::resolve(&Request {
            model: Some("flag".into()),
            memories_built_by: Some("other".into()),
            ..req
        })
        .unwrap();
        assert_eq!(plan.model.as_deref(), Some("flag"));
        assert_eq!(plan.memories_built_by.as_deref(), Some("other"));
        // Without either, the configuration's model answers and memories may be built.
        let path = experiment_file(dir.path(), "");
        let plan = Plan::resolve(&Request {
            experiment: Some(path),
            ..Request::default()
        })
        .unwrap();
        assert_eq!((plan.model, plan.memories_built_by), (None, None));
    }

    #[test]
    fn an_empty_model_in_the_experiment_is_an_error_naming_the_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        for key in ["model", "memories_built_by"] {
            let path = experiment_file(dir.path(), &format!("{key} = \" \"\n"));
            let err = match Experiment::read(&path) {
                Err(EvalError::Input(e)) => e,
                other => panic!("expected an input error, got {:?}", other.map(|_| ())),
            };
            assert!(
                err.contains("exp.toml") && err.contains(&format!("{key} is empty")),
                "{err}"
            );
        }
    }

    #[test]
    fn skip_leaves_out_the_first_items_of_the_limit() {
        let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/longbench_hotpotqa.jsonl");
        let plan = |skip: Option<usize>| {
            Plan::resolve(&Request {
                dataset: Some("longbench".into()),
                data: Some(fixture.clone()),
                methods: vec!["bm25-top3".into()],
                limit: Some(2),
                skip,
                ..Request::default()
            })
            .unwrap()
        };
        let all = plan(None).load_items().unwrap().0;
        assert_eq!(all.len(), 2);
        let rest = plan(Some(1)).load_items().unwrap().0;
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].id, all[1].id);
        let err = match plan(Some(2)).load_items() {
            Err(EvalError::Input(e)) => e,
            other => panic!("expected an input error, got {:?}", other.map(|_| ())),
        };
        assert!(err.contains("skip 2 leaves no item"), "{err}");
    }
}
