//! The eval runner: every (item, method, max_trials) pair of a run, concurrently up to the LLM
//! limit, each result appended to `DIR/results.jsonl` as soon as it is known.
//!
//! Boundary: reads items (already loaded), writes `DIR/results.jsonl`, `DIR/builds.jsonl` and
//! memories under `DIR/memories/`. Invariants: one line per finished pair; re-running the same
//! run skips finished pairs (so a killed run loses nothing and duplicates nothing); a memory is
//! built once per (document, memory kind) and shared by every method and question that reads it;
//! each result's cost is read off its own scoped ledger, so concurrency never mixes costs.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use futures::stream::{self, StreamExt};
use serde::Serialize;
use thiserror::Error;

use super::datasets::QaItem;
use super::evidence::ContextSpans;
use super::metrics;
use super::rows::{doc_key, trace_stem, BuildRecord, ResultRecord, RowCost};
use crate::answer::Trace;
use crate::journal::{Journal, JournalError};
use crate::llm::{LedgerSnapshot, StageStats};
use crate::methods::{
    self, MemoryDir, MemoryKind, MethodError, MethodSpec, Origin, Prepared, Runtime, Scope,
};
use crate::progress::{self, clock, eta_text};
use crate::text::count_tokens;

#[derive(Debug, Error)]
pub enum EvalError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("nothing to evaluate: {0}")]
    Empty(String),
    /// An experiment file, dataset, notes file or run directory that cannot be used (the
    /// message names it and says why).
    #[error("{0}")]
    Input(String),
}

/// The settings of a run.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    pub methods: Vec<MethodSpec>,
    /// Max-trials values for the navigators (empty: the configuration's).
    pub trials: Vec<usize>,
    pub concurrency: usize,
    /// Drop failed results and run those pairs again.
    pub retry_failed: bool,
    /// Show progress on stderr: bars on a terminal, one plain line per finished build and
    /// (item, method) pair otherwise (a run left in the background with its stderr in a log).
    pub progress: bool,
    /// Keep every question's full trace as JSON in this directory.
    pub trace_dir: Option<PathBuf>,
    /// Also write each question's HTML page (`qrmem view`) next to its trace.
    pub html: bool,
    /// Build (or load) the methods' memories and journal the builds, but answer nothing: the
    /// memories are then read by later runs (issue 38's graph rebuilds).
    pub build_only: bool,
    /// Read the memories that this model built (in `DIR/memories`, by their key) and build
    /// none: the pairs whose memory is not there are left for a later run. Lets another model
    /// answer over memories built once (issue 39's 1.5B runs over the 0.5B graphs).
    pub memories_built_by: Option<String>,
}

/// What a run did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunSummary {
    pub finished: usize,
    pub failed: usize,
    pub skipped: usize,
    pub memories_built: usize,
    pub memories_loaded: usize,
    /// Pairs left undone because their memory is not built (`memories_built_by`).
    pub not_built: usize,
    pub ledger: LedgerSnapshot,
    pub wall_secs: f64,
}

/// The scores of `prediction` for `item`: (EM, F1) by the dataset's official metric.
pub fn score(item: &QaItem, prediction: &str) -> (f64, f64) {
    metrics::answer_scores(
        &item.dataset,
        &item.answers,
        item.gold_letter.as_deref(),
        prediction,
    )
}

/// A method at a max-trials setting.
type Pair = (MethodSpec, Option<usize>);

/// The pairs of a run, in a fixed order.
fn pairs(opts: &EvalOptions, default_trials: usize) -> Vec<Pair> {
    let trials = if opts.trials.is_empty() {
        vec![default_trials]
    } else {
        opts.trials.clone()
    };
    let mut out = Vec::new();
    for m in &opts.methods {
        if m.uses_trials() {
            out.extend(trials.iter().map(|&t| (m.clone(), Some(t))));
        } else {
            out.push((m.clone(), None));
        }
    }
    out
}

/// Runs `items` x the methods of `opts` into `dir`.
pub async fn run(
    ctx: &Runtime<'_>,
    items: &[QaItem],
    dir: &Path,
    opts: &EvalOptions,
) -> Result<RunSummary, EvalError> {
    let started = Instant::now();
    if items.is_empty() {
        return Err(EvalError::Empty("the dataset has no items".into()));
    }
    if opts.methods.is_empty() {
        return Err(EvalError::Empty("no methods given".into()));
    }
    let retry = opts.retry_failed;
    let (results, old) = Journal::open::<ResultRecord>(&dir.join("results.jsonl"), |r| {
        !(retry && r.error.is_some())
    })?;
    let (builds, _) = Journal::open::<BuildRecord>(&dir.join("builds.jsonl"), |_| true)?;
    let done: HashSet<(String, String, Option<usize>)> =
        old.iter().map(ResultRecord::key).collect();
    let nav = ctx.config.navigate.clone();
    let all_pairs = pairs(opts, nav.max_trials);

    // Documents in first-appearance order, each with its items' pending pairs.
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<String, Vec<(&QaItem, Vec<Pair>)>> = BTreeMap::new();
    let mut questions_per_doc: BTreeMap<String, usize> = BTreeMap::new();
    let mut skipped = 0usize;
    let mut per_method: BTreeMap<String, u64> = BTreeMap::new();
    for item in items {
        let k = doc_key(&item.context);
        *questions_per_doc.entry(k.clone()).or_default() += 1;
        let pending: Vec<_> = all_pairs
            .iter()
            .filter(|(m, t)| {
                let finished = done.contains(&(item.id.clone(), m.to_string(), *t));
                skipped += usize::from(finished);
                !finished
            })
            .cloned()
            .collect();
        for (m, _) in &pending {
            *per_method.entry(m.to_string()).or_default() += 1;
        }
        if !groups.contains_key(&k) {
            order.push(k.clone());
        }
        groups.entry(k).or_default().push((item, pending));
    }

    let lines = opts.progress && !std::io::stderr().is_terminal();
    let multi = if opts.progress && !lines {
        indicatif::MultiProgress::new()
    } else {
        indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden())
    };
    let style = progress::style("{prefix:>18} {bar:25} {pos}/{len} ETA {mean_eta} {msg}");
    let mut bars: BTreeMap<String, indicatif::ProgressBar> = BTreeMap::new();
    for m in &opts.methods {
        let name = m.to_string();
        let n = per_method.get(&name).copied().unwrap_or(0);
        let bar = multi.add(indicatif::ProgressBar::new(n).with_style(style.clone()));
        bar.set_prefix(name.clone());
        bars.insert(name, bar);
    }

    let store = MemoryDir::new(dir.join("memories")).reuse_only(opts.memories_built_by.clone());
    let trace_dir = &opts.trace_dir;
    let html = opts.html;
    if let Some(d) = trace_dir {
        std::fs::create_dir_all(d)
            .map_err(|e| EvalError::Empty(format!("cannot create {}: {e}", d.display())))?;
    }
    let counters = std::sync::Mutex::new(RunSummary {
        skipped,
        ..RunSummary::default()
    });
    let concurrency = opts.concurrency.max(1);
    // Each document's memory kinds with pending pairs: the memories the run prepares (their
    // count the build lines' tally).
    let kinds_of: BTreeMap<&String, BTreeSet<MemoryKind>> = groups
        .iter()
        .map(|(k, group)| {
            let kinds = group
                .iter()
                .flat_map(|(_, p)| p.iter().map(|(m, _)| m.memory_kind()))
                .collect();
            (k, kinds)
        })
        .collect();
    let tally = std::sync::Mutex::new(BuildTally {
        total: kinds_of.values().map(BTreeSet::len).sum(),
        concurrency,
        ..BuildTally::default()
    });
    let (tally, kinds_of) = (&tally, &kinds_of);
    let outcomes: Vec<Result<(), EvalError>> = stream::iter(order.iter())
        .map(|k| {
            let group = &groups[k];
            let (results, builds, store, bars, counters, nav) =
                (&results, &builds, &store, &bars, &counters, &nav);
            let single = questions_per_doc.get(k).copied().unwrap_or(0) == 1;
            async move {
                let Some(kinds) = kinds_of.get(k).filter(|kinds| !kinds.is_empty()) else {
                    return Ok(());
                };
                let document = &group[0].0.context;
                // The paper orients the graph to the question; a document with several
                // questions gets one memory for all of them.
                let question = if single {
                    Some(group[0].0.question.as_str())
                } else {
                    None
                };
                let mut memories = BTreeMap::new();
                // Whether each memory's units are the document's own pieces (checked once).
                let mut covered: BTreeMap<MemoryKind, bool> = BTreeMap::new();
                let mut unbuilt: BTreeSet<MemoryKind> = BTreeSet::new();
                for &kind in kinds {
                    let scope = Scope::of(ctx);
                    let pctx = scope.runtime(ctx);
                    let bar = indicatif::ProgressBar::hidden();
                    let watch = lines.then(|| {
                        watch_build(
                            bar.clone(),
                            scope.llm().clone(),
                            kind.name(),
                            group[0].0.id.clone(),
                        )
                    });
                    let got = store
                        .get_or_prepare(
                            kind,
                            &pctx,
                            document,
                            question,
                            &group[0].0.id,
                            Some(bar),
                        )
                        .await;
                    if let Some(w) = watch {
                        w.abort();
                    }
                    let (cost, wall_secs) = scope.spent();
                    let mut rec = BuildRecord {
                        document: k.clone(),
                        kind,
                        items: group.iter().map(|(i, _)| i.id.clone()).collect(),
                        document_tokens: count_tokens(document),
                        segments: 0,
                        entities: 0,
                        relations: 0,
                        step_failures: 0,
                        cost: RowCost::of(&cost),
                        wall_secs,
                        error: None,
                        graph: None,
                    };
                    // Journaled: every failure, and every graph or LLM-built memory (loaded
                    // ones and the segments-only index cost nothing worth a line).
                    let journal = match got {
                        Ok((m, origin)) => {
                            rec.segments = m.segments();
                            rec.entities = m.entities();
                            rec.relations = m.relations();
                            rec.step_failures = m.failures();
                            if let Prepared::Graph(g) = &m {
                                if kind.is_graph() {
                                    rec.graph = Some(crate::memory::diagnose(g));
                                }
                            }
                            let covers = m.covers(document);
                            covered.insert(kind, covers);
                            if !covers {
                                say(&format!(
                                    "warning: the {} memory of {} does not cover its document piece by piece; its rows get no spans",
                                    kind.name(),
                                    group[0].0.id
                                ));
                            }
                            let mut c = counters.lock().unwrap_or_else(|p| p.into_inner());
                            match origin {
                                Origin::Built => c.memories_built += 1,
                                Origin::Loaded => c.memories_loaded += 1,
                            }
                            drop(c);
                            memories.insert(kind, Ok(m));
                            origin == Origin::Built && kind.is_kept()
                        }
                        Err(e @ MethodError::NotBuilt { .. }) => {
                            // Left for a later run: no row, no build line.
                            say(&format!("{}: {e}; its pairs are left undone", group[0].0.id));
                            unbuilt.insert(kind);
                            false
                        }
                        Err(e) => {
                            rec.error = Some(e.to_string());
                            memories.insert(kind, Err(e.to_string()));
                            true
                        }
                    };
                    let so_far = {
                        let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
                        t.done += 1;
                        if journal && rec.error.is_none() {
                            t.built += 1;
                            t.build_secs += rec.wall_secs;
                        }
                        t.line()
                    };
                    if journal {
                        builds.append(&rec)?;
                        if lines {
                            say(&format!("{}; {so_far}", build_line(&rec)));
                        }
                    }
                }
                let memories = &memories;
                let covered = &covered;
                let jobs: Vec<(&QaItem, MethodSpec, Option<usize>)> = if opts.build_only {
                    Vec::new()
                } else {
                    group
                        .iter()
                        .flat_map(|(item, p)| p.iter().map(move |(m, t)| (*item, m.clone(), *t)))
                        .collect()
                };
                let before = jobs.len();
                let jobs: Vec<_> = jobs
                    .into_iter()
                    .filter(|(_, m, _)| !unbuilt.contains(&m.memory_kind()))
                    .collect();
                if jobs.len() < before {
                    let mut c = counters.lock().unwrap_or_else(|p| p.into_inner());
                    c.not_built += before - jobs.len();
                }
                let done: Vec<Result<(), EvalError>> = stream::iter(jobs)
                    .map(|(item, spec, trials)| async move {
                        let mut opts = nav.clone();
                        if let Some(t) = trials {
                            opts.max_trials = t;
                        }
                        let asked = match memories.get(&spec.memory_kind()) {
                            Some(Ok(m)) => {
                                let a = methods::ask_scoped(
                                    ctx,
                                    &spec,
                                    &opts,
                                    m,
                                    &item.question,
                                    &item.options,
                                    item.gold_spans.as_deref(),
                                    &item.chain,
                                )
                                .await;
                                (a.outcome.map_err(|e| e.to_string()), a.cost, a.wall_secs)
                            }
                            Some(Err(e)) => unprepared(format!("building the memory failed: {e}")),
                            None => unprepared("no memory was prepared".to_string()),
                        };
                        let (outcome, cost, wall_secs) = asked;
                        let mut rec = ResultRecord {
                            item: item.id.clone(),
                            dataset: item.dataset.clone(),
                            method: spec.to_string(),
                            max_trials: trials,
                            question: item.question.clone(),
                            prediction: String::new(),
                            gold: item.answers.clone(),
                            gold_letter: item.gold_letter.clone(),
                            em: 0.0,
                            f1: 0.0,
                            error: None,
                            cost: RowCost::of(&cost),
                            wall_secs,
                            answered_by_check: false,
                            steps: 0,
                            segments_used: vec![],
                            step_failures: vec![],
                            final_segments: None,
                            spans: ContextSpans {
                                gold_spans: item.gold_spans.clone(),
                                ..ContextSpans::default()
                            },
                            nav: None,
                            model: Some(ctx.llm.model().to_string()),
                            kind: item.kind.clone(),
                        };
                        match outcome {
                            Ok(trace) => {
                                let (em, f1) = score(item, &trace.answer);
                                rec.em = em;
                                rec.f1 = f1;
                                rec.prediction = trace.answer.clone();
                                rec.answered_by_check = trace.answered;
                                rec.steps = trace.steps.len();
                                rec.segments_used = trace.segments_used.clone();
                                rec.step_failures = trace.failures.clone();
                                rec.final_segments = Some(trace.final_segments.clone());
                                if covered.get(&spec.memory_kind()) == Some(&true) {
                                    rec.spans = ContextSpans::of(
                                        &item.context,
                                        trace.answer_spans.clone(),
                                        trace.read_spans.clone(),
                                        item.gold_spans.clone(),
                                    );
                                }
                                rec.nav = trace.s_imp.map(|_| trace.diagnostics());
                                if let Some(dir) = &trace_dir {
                                    let memory = match memories.get(&spec.memory_kind()) {
                                        Some(Ok(m)) if html => Some(m),
                                        _ => None,
                                    };
                                    if let Err(e) = save_trace(dir, &rec, &trace, item, memory) {
                                        say(&format!("warning: {e}"));
                                    }
                                }
                            }
                            Err(e) => rec.error = Some(e),
                        }
                        results.append(&rec)?;
                        {
                            let mut c = counters.lock().unwrap_or_else(|p| p.into_inner());
                            c.finished += 1;
                            c.failed += usize::from(rec.error.is_some());
                        }
                        if let Some(bar) = bars.get(&rec.method) {
                            bar.inc(1);
                            if lines {
                                say(&result_line(&rec, bar));
                            }
                        }
                        Ok(())
                    })
                    .buffer_unordered(concurrency)
                    .collect()
                    .await;
                done.into_iter().collect::<Result<(), EvalError>>()
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    for bar in bars.values() {
        bar.finish();
    }
    outcomes.into_iter().collect::<Result<(), EvalError>>()?;
    let mut summary = counters.into_inner().unwrap_or_else(|p| p.into_inner());
    summary.ledger = ctx.llm.ledger().snapshot();
    summary.wall_secs = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// A question whose memory is missing: its error, no cost, no time.
fn unprepared(error: String) -> (Result<Trace, String>, StageStats, f64) {
    (Err(error), StageStats::default(), 0.0)
}

/// Writes a row's trace as JSON (with the item's gold evidence spans, where the dataset gives
/// them, as `gold_spans`) and, given its memory, its HTML page.
fn save_trace(
    dir: &Path,
    rec: &ResultRecord,
    trace: &Trace,
    item: &QaItem,
    memory: Option<&Prepared>,
) -> Result<(), String> {
    let stem = trace_stem(rec);
    let mut value = serde_json::to_value(trace).map_err(|e| e.to_string())?;
    if let (Some(gold), Some(obj)) = (&item.gold_spans, value.as_object_mut()) {
        obj.insert("gold_spans".into(), serde_json::json!(gold));
    }
    let json = serde_json::to_vec_pretty(&value).map_err(|e| e.to_string())?;
    crate::fsutil::write_atomic(&dir.join(format!("{stem}.json")), &json)?;
    if let Some(m) = memory {
        write_page(dir, rec, trace, item, m)?;
    }
    Ok(())
}

/// Writes a row's HTML page (`qrmem view`) as `dir/{stem}.html`.
pub fn write_page(
    dir: &Path,
    rec: &ResultRecord,
    trace: &Trace,
    item: &QaItem,
    memory: &Prepared,
) -> Result<(), String> {
    let stem = trace_stem(rec);
    let labels = crate::view::Labels {
        memory: format!(
            "the run's {} memory of document {}",
            memory.kind().name(),
            &doc_key(&item.context)
        ),
        trace: format!("{stem}.json"),
        gold: item.gold_spans.clone(),
        facts: vec![
            format!("item {} ({})", item.id, item.dataset),
            format!(
                "gold: {}; score {:.2} (F1 or accuracy)",
                item.gold_letter
                    .clone()
                    .unwrap_or_else(|| item.answers.join(" | ")),
                rec.f1
            ),
        ],
    };
    let page = crate::view::data(memory, Some(trace), &labels)
        .and_then(|d| crate::view::render(&d))
        .map_err(|e| e.to_string())?;
    crate::fsutil::write_atomic(&dir.join(format!("{stem}.html")), page.as_bytes())
}

/// The run's memories so far, for the build lines: a run of many long builds (MuSiQue's graphs
/// take 20 minutes each) says how many are left and when they should be done.
#[derive(Debug, Default)]
struct BuildTally {
    /// Memories the run prepares (loaded ones included).
    total: usize,
    /// Prepared so far: built, loaded or failed.
    done: usize,
    /// Built so far (by the LLM or not), and their wall time summed.
    built: usize,
    build_secs: f64,
    /// Memories prepared at once.
    concurrency: usize,
}

impl BuildTally {
    /// `memories 6/30, run ETA 2 hours`: the ones left at the mean wall time of those built so far,
    /// `concurrency` at a time (each left one counted as a build; a loaded one costs nothing).
    fn line(&self) -> String {
        let left = self.total.saturating_sub(self.done);
        let eta = if left == 0 {
            "0s".to_string()
        } else if self.built == 0 {
            "?".to_string()
        } else {
            let mean = self.build_secs / self.built as f64;
            let waves = left.div_ceil(self.concurrency.max(1)) as f64;
            indicatif::HumanDuration(std::time::Duration::from_secs_f64(mean * waves)).to_string()
        };
        format!("memories {}/{}, run ETA {eta}", self.done, self.total)
    }
}

/// The plain progress line of a finished build (`memory graph 3f2a9c1e (1 item): 41 requests, 612 s`).
fn build_line(rec: &BuildRecord) -> String {
    let doc: String = rec.document.chars().take(8).collect();
    let n = rec.items.len();
    let what = match &rec.error {
        Some(e) => format!("FAILED: {e}"),
        None => format!("{} requests, {:.0} s", rec.cost.requests, rec.wall_secs),
    };
    format!(
        "{} memory {} {doc} ({n} item{}): {what}",
        clock(),
        rec.kind.name(),
        if n == 1 { "" } else { "s" }
    )
}

/// The plain progress line of a finished pair, with the method's count and ETA.
fn result_line(rec: &ResultRecord, bar: &indicatif::ProgressBar) -> String {
    let what = match &rec.error {
        Some(e) => format!("FAILED: {e}"),
        None => format!("em {:.2} f1 {:.2}", rec.em, rec.f1),
    };
    let trials = rec
        .max_trials
        .map(|t| format!(" (trials {t})"))
        .unwrap_or_default();
    format!(
        "{} {}{trials} {}/{} item {}: {what}; {} requests, {:.0} s; ETA {}",
        clock(),
        rec.method,
        bar.position(),
        bar.length().unwrap_or(0),
        rec.item,
        rec.cost.requests,
        rec.wall_secs,
        eta_text(bar.position(), bar.length().unwrap_or(0), bar.elapsed())
    )
}

/// While a memory is prepared with its stderr in a file, prints a line when the build starts
/// (its first step) and then whenever it enters another stage or passes another eighth of its
/// steps: stage, step k of n, LLM calls so far, and the time left at the mean rate. Reads the
/// build's own (hidden) progress bar and ledger every few seconds; aborted when the build ends.
fn watch_build(
    bar: indicatif::ProgressBar,
    llm: crate::llm::Service,
    kind: &'static str,
    item: String,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let started = Instant::now();
        let mut said: Option<(String, u64)> = None;
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            let (pos, len, stage) = (bar.position(), bar.length().unwrap_or(0), bar.message());
            if len == 0 {
                continue;
            }
            let eighth = (pos * 8) / len.max(1);
            let now = (stage.to_string(), eighth);
            if said.as_ref() == Some(&now) {
                continue;
            }
            if said.is_none() {
                say(&format!(
                    "{} build {kind} of {item}: started ({len} steps: summary, one per segment, merge)",
                    clock()
                ));
            }
            let calls = llm.ledger().snapshot().total();
            say(&format!(
                "{} build {kind} of {item}: {stage}, step {pos} of {len}, {} LLM calls, ETA {}",
                clock(),
                calls.requests + calls.cache_hits,
                crate::progress::eta_text(pos, len, started.elapsed())
            ));
            said = Some(now);
        }
    })
}

/// Writes a progress line to stderr. A closed or full stderr is not worth failing (or, as
/// `eprintln!` would, panicking) a run over: the line is dropped and the results stay on disk.
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The directory of a run's memories.
pub fn memories_dir(dir: &Path) -> PathBuf {
    dir.join("memories")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(dataset: &str, answers: &[&str], letter: Option<&str>) -> QaItem {
        QaItem {
            id: "x".into(),
            dataset: dataset.into(),
            context: "c".into(),
            question: "q".into(),
            options: vec![],
            answers: answers.iter().map(|s| s.to_string()).collect(),
            gold_letter: letter.map(str::to_string),
            supporting: vec![],
            gold_spans: None,
            kind: None,
            chain: Vec::new(),
        }
    }

    #[test]
    fn the_build_tally_gives_the_runs_memories_left_and_their_time() {
        let mut t = BuildTally {
            total: 30,
            concurrency: 4,
            ..BuildTally::default()
        };
        t.done = 4;
        assert_eq!(
            t.line(),
            "memories 4/30, run ETA ?",
            "loaded ones give no rate"
        );
        // Two built at 1,200 s each: 24 left, 6 waves of 4.
        t.done = 6;
        t.built = 2;
        t.build_secs = 2400.0;
        assert_eq!(t.line(), "memories 6/30, run ETA 2 hours");
        t.done = 30;
        assert_eq!(t.line(), "memories 30/30, run ETA 0s");
    }

    #[test]
    fn plain_progress_lines_name_the_pair_and_the_failure() {
        let bar = indicatif::ProgressBar::hidden();
        bar.set_length(30);
        bar.inc(3);
        let mut rec = ResultRecord {
            item: "5a8b57f2".into(),
            dataset: "hotpotqa".into(),
            method: "kn".into(),
            max_trials: Some(2),
            question: "q".into(),
            prediction: "Paris".into(),
            gold: vec!["Paris".into()],
            gold_letter: None,
            em: 1.0,
            f1: 1.0,
            error: None,
            cost: RowCost {
                requests: 4,
                ..RowCost::default()
            },
            wall_secs: 95.4,
            answered_by_check: false,
            steps: 0,
            segments_used: vec![],
            step_failures: vec![],
            final_segments: None,
            spans: ContextSpans::default(),
            nav: None,
            model: None,
            kind: None,
        };
        let line = result_line(&rec, &bar);
        assert!(
            line.contains("kn (trials 2) 3/30 item 5a8b57f2: em 1.00 f1 1.00; 4 requests, 95 s"),
            "{line}"
        );
        assert!(line.contains("; ETA "), "{line}");
        rec.error = Some("the server timed out".into());
        let line = result_line(&rec, &bar);
        assert!(line.contains("FAILED: the server timed out"), "{line}");
        assert!(!line.contains("f1"), "{line}");
    }

    #[test]
    fn scores_follow_the_dataset() {
        // HotpotQA: the yes/no rule.
        assert_eq!(
            score(&item("hotpotqa", &["yes"], None), "yes it is"),
            (0.0, 0.0)
        );
        // LongBench F1 has no such rule and takes the max over answers.
        let (em, f1) = score(
            &item("hotpotqa-longbench-style", &["yes", "Paris"], None),
            "the Paris",
        );
        assert_eq!(em, 1.0);
        assert!((f1 - 1.0).abs() < 1e-9);
        assert_eq!(
            score(&item("quality", &["x"], Some("B")), "(b)"),
            (1.0, 1.0)
        );
        assert_eq!(score(&item("quality", &["x"], Some("B")), "C"), (0.0, 0.0));
    }
}
