//! Batch QA jobs (`qrmem batch`): one job per input line, a document and its questions; one
//! answer record per question in the output journal.
//!
//! Boundary: reads the jobs file and the documents it names, writes only the output journal and
//! the memory directory. Invariants: every question of the input ends as exactly one output
//! line (answered, failed or invalid), written as soon as it is known; a re-run skips the
//! questions already in the output, so a killed run loses no finished answer and duplicates
//! nothing; bad input is reported on its own line and never stops the other jobs.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use futures::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::journal::{Journal, JournalError};
use crate::llm::LedgerSnapshot;
use crate::methods::{self, MemoryDir, MethodSpec, Origin, Runtime, Scope};
use crate::progress;

#[derive(Debug, Error)]
pub enum BatchError {
    #[error("cannot read the jobs file {path}: {message}")]
    Input { path: String, message: String },
    #[error(transparent)]
    Output(#[from] JournalError),
}

/// One question of a job, as given.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct QuestionIn {
    id: String,
    question: String,
    #[serde(default)]
    options: Vec<String>,
}

/// One input line.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobIn {
    id: String,
    #[serde(default)]
    doc: Option<String>,
    #[serde(default)]
    doc_path: Option<String>,
    questions: Vec<QuestionIn>,
}

/// What became of one question (or of an input line that names no question).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// An answer was produced.
    Answered,
    /// The method failed (LLM retry budget spent, build failure, ...): re-run with
    /// `--retry-failed` to try again.
    Failed,
    /// The input was unusable: the error says where and why.
    Invalid,
}

/// The compact trace kept with each answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceSummary {
    /// Whether an answerability check said the evidence sufficed (navigators).
    pub answered_by_check: bool,
    pub steps: usize,
    pub segments_used: Vec<usize>,
    pub start_entities: Vec<String>,
    /// Steps that failed but did not stop the answer.
    pub step_failures: Vec<String>,
}

/// One output line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnswerRecord {
    /// Line of the jobs file (1-based).
    pub line: usize,
    pub job: Option<String>,
    pub question_id: Option<String>,
    pub status: Status,
    pub answer: Option<String>,
    pub method: String,
    pub trace: Option<TraceSummary>,
    /// Whether the document's memory was built by this job or loaded from the memory directory.
    pub memory: Option<String>,
    pub requests: u64,
    pub cache_hits: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub wall_secs: f64,
    pub error: Option<String>,
    /// With `--corpus`: the passages the answer was read from, each as `document#passage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<String>,
}

impl AnswerRecord {
    /// The resume key: the job and question ids, or the line for a line without them.
    fn key(&self) -> String {
        match (&self.job, &self.question_id) {
            (Some(j), Some(q)) => key(j, q),
            _ => format!("#line {}", self.line),
        }
    }

    fn invalid(
        line: usize,
        job: Option<&str>,
        qid: Option<&str>,
        method: &str,
        error: String,
    ) -> Self {
        AnswerRecord {
            line,
            job: job.map(str::to_string),
            question_id: qid.map(str::to_string),
            status: Status::Invalid,
            answer: None,
            method: method.to_string(),
            trace: None,
            memory: None,
            requests: 0,
            cache_hits: 0,
            prompt_tokens: 0,
            completion_tokens: 0,
            wall_secs: 0.0,
            error: Some(error),
            sources: None,
        }
    }
}

fn key(job: &str, question: &str) -> String {
    // Ids are JSON strings; the separator cannot be confused because both are escaped.
    format!("{}\u{1f}{}", job.escape_debug(), question.escape_debug())
}

/// Settings of a batch run.
pub struct BatchOptions {
    pub method: MethodSpec,
    pub memory_dir: PathBuf,
    /// Documents larger than this are refused (bytes).
    pub max_document_bytes: u64,
    /// Jobs (documents) and questions in flight at once; the LLM client's own limit still caps
    /// requests.
    pub concurrency: usize,
    /// Re-run the questions that failed (drops their old lines first).
    pub retry_failed: bool,
    pub progress: bool,
    /// Ask every question across this corpus instead of a job's own document (jobs then name
    /// no document).
    pub corpus: Option<CorpusJobs>,
}

/// `qrmem batch --corpus DIR`: the corpus and how its passages are chosen.
#[derive(Clone, Debug)]
pub struct CorpusJobs {
    pub dir: PathBuf,
    /// A retriever, or a navigator over each question's candidates (`methods::CorpusMethod`).
    pub retriever: methods::CorpusMethod,
    /// Tokens of passages in the answer prompt (0: as many as the window holds).
    pub context_tokens: usize,
}

impl BatchOptions {
    /// The method's name in the output lines.
    fn method_name(&self) -> String {
        match &self.corpus {
            Some(c) => c.retriever.corpus_name(c.context_tokens),
            None => self.method.to_string(),
        }
    }
}

/// The end of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BatchSummary {
    pub answered: usize,
    pub failed: usize,
    pub invalid: usize,
    /// Questions already in the output from an earlier run.
    pub skipped: usize,
    pub memories_built: usize,
    pub memories_loaded: usize,
    pub ledger: LedgerSnapshot,
    pub wall_secs: f64,
}

/// A job whose document is readable, with its still-unanswered questions.
struct Job {
    line: usize,
    id: String,
    name: String,
    document: String,
    questions: Vec<QuestionIn>,
}

/// Reads and validates the jobs file. Returns the runnable jobs and the records of the input
/// that cannot run (already filtered by `done`).
fn parse_jobs(
    input: &Path,
    opts: &BatchOptions,
    done: &HashSet<String>,
) -> Result<(Vec<Job>, Vec<AnswerRecord>, usize), BatchError> {
    let bytes = std::fs::read(input).map_err(|e| BatchError::Input {
        path: input.display().to_string(),
        message: e.to_string(),
    })?;
    let base = input.parent().unwrap_or(Path::new("."));
    let method = opts.method_name();
    let mut jobs = Vec::new();
    let mut bad = Vec::new();
    let mut skipped = 0usize;
    let mut seen_ids: HashMap<String, usize> = HashMap::new();
    let push_bad = |r: AnswerRecord, bad: &mut Vec<AnswerRecord>, skipped: &mut usize| {
        if done.contains(&r.key()) {
            *skipped += 1;
        } else {
            bad.push(r);
        }
    };
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line_no = i + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let here = format!("{}:{line_no}", input.display());
        let text = match std::str::from_utf8(raw) {
            Ok(t) => t,
            Err(e) => {
                let r = AnswerRecord::invalid(
                    line_no,
                    None,
                    None,
                    &method,
                    format!(
                        "{here}: the line is not UTF-8 (invalid byte at column {})",
                        e.valid_up_to() + 1
                    ),
                );
                push_bad(r, &mut bad, &mut skipped);
                continue;
            }
        };
        let job: JobIn = match serde_json::from_str(text) {
            Ok(j) => j,
            Err(e) => {
                let r = AnswerRecord::invalid(line_no, None, None, &method, format!("{here}: not a job ({e}); expected {{\"id\", \"doc\" | \"doc_path\", \"questions\": [{{\"id\", \"question\", \"options\"?}}]}}"));
                push_bad(r, &mut bad, &mut skipped);
                continue;
            }
        };
        let jid = job.id.trim().to_string();
        let every = |msg: &str, bad: &mut Vec<AnswerRecord>, skipped: &mut usize| {
            if job.questions.is_empty() {
                let r = AnswerRecord::invalid(
                    line_no,
                    Some(&jid),
                    None,
                    &method,
                    format!("{here}: job '{jid}': {msg}"),
                );
                if done.contains(&r.key()) {
                    *skipped += 1;
                } else {
                    bad.push(r);
                }
            }
            for q in &job.questions {
                let r = AnswerRecord::invalid(
                    line_no,
                    Some(&jid),
                    Some(&q.id),
                    &method,
                    format!("{here}: job '{jid}': {msg}"),
                );
                if done.contains(&r.key()) {
                    *skipped += 1;
                } else {
                    bad.push(r);
                }
            }
        };
        if jid.is_empty() {
            let r = AnswerRecord::invalid(
                line_no,
                None,
                None,
                &method,
                format!("{here}: the job id is empty"),
            );
            push_bad(r, &mut bad, &mut skipped);
            continue;
        }
        if let Some(first) = seen_ids.get(&jid) {
            // The first job with this id owns its output keys; this one is reported by line.
            let r = AnswerRecord::invalid(line_no, None, None, &method, format!("{here}: duplicated job id '{jid}' (first on line {first}); this job is not run"));
            push_bad(r, &mut bad, &mut skipped);
            continue;
        }
        seen_ids.insert(jid.clone(), line_no);
        if job.questions.is_empty() {
            every("the job has no questions", &mut bad, &mut skipped);
            continue;
        }
        let (document, name) = match (&job.doc, &job.doc_path) {
            (Some(_), _) | (_, Some(_)) if opts.corpus.is_some() => {
                every(
                    "with --corpus a job names no document (\"doc\", \"doc_path\"): its questions are asked across the corpus",
                    &mut bad,
                    &mut skipped,
                );
                continue;
            }
            (None, None) if opts.corpus.is_some() => (String::new(), String::new()),
            (Some(_), Some(_)) => {
                every(
                    "give either \"doc\" or \"doc_path\", not both",
                    &mut bad,
                    &mut skipped,
                );
                continue;
            }
            (None, None) => {
                every(
                    "the job has neither \"doc\" nor \"doc_path\"",
                    &mut bad,
                    &mut skipped,
                );
                continue;
            }
            (Some(d), None) => {
                if d.len() as u64 > opts.max_document_bytes {
                    every(
                        &format!(
                            "the document is {} bytes, over the limit of {} (--max-doc-bytes)",
                            d.len(),
                            opts.max_document_bytes
                        ),
                        &mut bad,
                        &mut skipped,
                    );
                    continue;
                }
                (d.clone(), format!("{jid} (inline)"))
            }
            (None, Some(p)) => {
                let path = base.join(p);
                match read_document(&path, opts.max_document_bytes) {
                    Ok(d) => (d, path.display().to_string()),
                    Err(msg) => {
                        every(&msg, &mut bad, &mut skipped);
                        continue;
                    }
                }
            }
        };
        if document.trim().is_empty() && opts.corpus.is_none() {
            every("the document is empty", &mut bad, &mut skipped);
            continue;
        }
        let mut qids = HashSet::new();
        let mut questions = Vec::new();
        for q in job.questions {
            let problem = if q.id.trim().is_empty() {
                Some("the question id is empty".to_string())
            } else if !qids.insert(q.id.clone()) {
                Some(format!("duplicated question id '{}' in job '{jid}'", q.id))
            } else if q.question.trim().is_empty() {
                Some(format!("question '{}' is empty", q.id))
            } else if q.options.iter().any(|o| o.trim().is_empty()) {
                Some(format!("question '{}' has an empty option", q.id))
            } else {
                None
            };
            if let Some(p) = problem {
                // A duplicated id must not take over the first question's key.
                let qid = if p.starts_with("duplicated") {
                    None
                } else {
                    Some(q.id.as_str())
                };
                let job_for_key = qid.map(|_| jid.as_str());
                let r = AnswerRecord::invalid(
                    line_no,
                    job_for_key,
                    qid,
                    &method,
                    format!("{here}: {p}"),
                );
                push_bad(r, &mut bad, &mut skipped);
                continue;
            }
            if done.contains(&key(&jid, &q.id)) {
                skipped += 1;
            } else {
                questions.push(q);
            }
        }
        if !questions.is_empty() {
            jobs.push(Job {
                line: line_no,
                id: jid,
                name,
                document,
                questions,
            });
        }
    }
    Ok((jobs, bad, skipped))
}

/// Reads a document file: UTF-8, at most `max` bytes.
fn read_document(path: &Path, max: u64) -> Result<String, String> {
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("cannot read the document {}: {e}", path.display()))?;
    if meta.len() > max {
        return Err(format!(
            "the document {} is {} bytes, over the limit of {} (--max-doc-bytes)",
            path.display(),
            meta.len(),
            max
        ));
    }
    let bytes = std::fs::read(path)
        .map_err(|e| format!("cannot read the document {}: {e}", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "the document {} is not UTF-8 text (invalid byte at offset {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// Runs the jobs of `input` into the journal at `output`.
pub async fn run(
    ctx: &Runtime<'_>,
    input: &Path,
    output: &Path,
    opts: &BatchOptions,
) -> Result<BatchSummary, BatchError> {
    let started = Instant::now();
    let retry = opts.retry_failed;
    let (journal, old) =
        Journal::open::<AnswerRecord>(output, |r| !(retry && r.status == Status::Failed))?;
    let done: HashSet<String> = old.iter().map(AnswerRecord::key).collect();
    let (jobs, bad, skipped) = parse_jobs(input, opts, &done)?;
    let nav = ctx.config.navigate.clone();
    let method = &opts.method;
    let method_name = opts.method_name();
    let corpus =
        match &opts.corpus {
            Some(c) => Some(crate::corpus::Corpus::open_existing(&c.dir).map_err(|e| {
                BatchError::Input {
                    path: c.dir.display().to_string(),
                    message: e.to_string(),
                }
            })?),
            None => None,
        };
    let corpus = corpus.as_ref();
    let method_name = &method_name;
    let store = MemoryDir::new(&opts.memory_dir);
    let total: usize = jobs.iter().map(|j| j.questions.len()).sum();
    let bar = if opts.progress {
        indicatif::ProgressBar::new(total as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    // The ETA is the mean rate since the start: questions finish in bursts after each
    // document's memory is built (see `progress`).
    bar.set_style(progress::style(
        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} questions, ETA {mean_eta}  {msg}",
    ));
    let counts = Counts::default();
    for r in &bad {
        journal.append(r)?;
        counts.add(r.status);
    }
    let built = AtomicU64::new(0);
    let loaded = AtomicU64::new(0);
    let concurrency = opts.concurrency.max(1);
    let results: Vec<Result<(), BatchError>> = stream::iter(jobs.iter())
        .map(|job| {
            let (journal, store, bar, counts, built, loaded) =
                (&journal, &store, &bar, &counts, &built, &loaded);
            let nav = &nav;
            async move {
                let scope = Scope::of(ctx);
                let pctx = scope.runtime(ctx);
                if let (Some(corpus), Some(cj)) = (corpus, &opts.corpus) {
                    return answer_across(
                        ctx,
                        corpus,
                        cj,
                        method_name,
                        job,
                        journal,
                        counts,
                        bar,
                        concurrency,
                    )
                    .await;
                }
                bar.set_message(format!("memory of job '{}'", job.id));
                let prepared = store
                    .get_or_prepare(
                        method.memory_kind(),
                        &pctx,
                        &job.document,
                        None,
                        &job.name,
                        None,
                    )
                    .await;
                let (build_cost, build_secs) = scope.spent();
                let (memory, origin) = match prepared {
                    Ok(m) => m,
                    Err(e) => {
                        // The build's cost is charged to the first question's line.
                        for (i, q) in job.questions.iter().enumerate() {
                            let mut r = AnswerRecord::invalid(
                                job.line,
                                Some(&job.id),
                                Some(&q.id),
                                method_name,
                                format!("job '{}': {e}", job.id),
                            );
                            r.status = Status::Failed;
                            if i == 0 {
                                r.requests = build_cost.requests;
                                r.cache_hits = build_cost.cache_hits;
                                r.prompt_tokens = build_cost.prompt_tokens;
                                r.completion_tokens = build_cost.completion_tokens;
                                r.wall_secs = build_secs;
                            }
                            journal.append(&r)?;
                            counts.add(r.status);
                            bar.inc(1);
                        }
                        return Ok(());
                    }
                };
                match origin {
                    Origin::Built => built.fetch_add(1, Ordering::Relaxed),
                    Origin::Loaded => loaded.fetch_add(1, Ordering::Relaxed),
                };
                let memory_note = format!(
                    "{} {}",
                    match origin {
                        Origin::Built => "built",
                        Origin::Loaded => "loaded",
                    },
                    store
                        .path_for(method.memory_kind(), &pctx, &job.document, None)
                        .display()
                );
                let memory = &memory;
                let memory_note = &memory_note;
                let answers: Vec<Result<(), BatchError>> = stream::iter(job.questions.iter())
                    .map(|q| async move {
                        let asked = methods::ask_scoped(
                            ctx,
                            method,
                            nav,
                            memory,
                            &q.question,
                            &q.options,
                            None,
                            &[],
                        )
                        .await;
                        let r = answer_record(
                            job,
                            q,
                            method_name,
                            memory_note.clone(),
                            &asked.cost,
                            asked.wall_secs,
                            asked.outcome.map_err(|e| e.to_string()),
                        );
                        journal.append(&r)?;
                        counts.add(r.status);
                        bar.inc(1);
                        Ok(())
                    })
                    .buffer_unordered(concurrency)
                    .collect()
                    .await;
                answers.into_iter().collect::<Result<(), BatchError>>()
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    bar.finish_and_clear();
    results.into_iter().collect::<Result<(), BatchError>>()?;
    Ok(BatchSummary {
        answered: counts.answered.load(Ordering::Relaxed) as usize,
        failed: counts.failed.load(Ordering::Relaxed) as usize,
        invalid: counts.invalid.load(Ordering::Relaxed) as usize,
        skipped,
        memories_built: built.load(Ordering::Relaxed) as usize,
        memories_loaded: loaded.load(Ordering::Relaxed) as usize,
        ledger: ctx.llm.ledger().snapshot(),
        wall_secs: started.elapsed().as_secs_f64(),
    })
}

/// A job's questions asked across the corpus (`--corpus`), `concurrency` at a time, each
/// line written as soon as it is known.
#[allow(clippy::too_many_arguments)]
async fn answer_across(
    ctx: &Runtime<'_>,
    corpus: &crate::corpus::Corpus,
    cj: &CorpusJobs,
    name: &str,
    job: &Job,
    journal: &Journal,
    counts: &Counts,
    bar: &indicatif::ProgressBar,
    concurrency: usize,
) -> Result<(), BatchError> {
    let answers: Vec<Result<(), BatchError>> = stream::iter(job.questions.iter())
        .map(|q| async move {
            let scope = Scope::of(ctx);
            let outcome = methods::answer_corpus(
                &scope.runtime(ctx),
                corpus,
                &q.question,
                &q.options,
                &cj.retriever,
                cj.context_tokens,
            )
            .await
            .map(|a| a.trace);
            let (cost, wall_secs) = scope.spent();
            let sources = outcome
                .as_ref()
                .ok()
                .and_then(|t| t.steps.last())
                .map(|s| s.note.clone());
            let mut r = answer_record(
                job,
                q,
                name,
                format!("corpus {}", cj.dir.display()),
                &cost,
                wall_secs,
                outcome.map_err(|e| e.to_string()),
            );
            r.sources = sources;
            journal.append(&r)?;
            counts.add(r.status);
            bar.inc(1);
            Ok(())
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    answers.into_iter().collect()
}

/// The output line of question `q` of `job`: its cost and wall time, and the answer and trace
/// summary, or the error, of `outcome`.
fn answer_record(
    job: &Job,
    q: &QuestionIn,
    method: &str,
    memory: String,
    cost: &crate::llm::StageStats,
    wall_secs: f64,
    outcome: Result<crate::answer::Trace, String>,
) -> AnswerRecord {
    let mut r = AnswerRecord::invalid(job.line, Some(&job.id), Some(&q.id), method, String::new());
    r.memory = Some(memory);
    r.requests = cost.requests;
    r.cache_hits = cost.cache_hits;
    r.prompt_tokens = cost.prompt_tokens;
    r.completion_tokens = cost.completion_tokens;
    r.wall_secs = wall_secs;
    match outcome {
        Ok(trace) => {
            r.status = Status::Answered;
            r.error = None;
            r.answer = Some(trace.answer.clone());
            r.trace = Some(TraceSummary {
                answered_by_check: trace.answered,
                steps: trace.steps.len(),
                segments_used: trace.segments_used.clone(),
                start_entities: trace.start_entities.clone(),
                step_failures: trace.failures.clone(),
            });
        }
        Err(e) => {
            r.status = Status::Failed;
            r.error = Some(format!("question '{}' of job '{}': {e}", q.id, job.id));
        }
    }
    r
}

#[derive(Default)]
struct Counts {
    answered: AtomicU64,
    failed: AtomicU64,
    invalid: AtomicU64,
}

impl Counts {
    fn add(&self, s: Status) {
        match s {
            Status::Answered => &self.answered,
            Status::Failed => &self.failed,
            Status::Invalid => &self.invalid,
        }
        .fetch_add(1, Ordering::Relaxed);
    }
}

impl std::fmt::Display for BatchSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "answered {}, failed {}, invalid {}, skipped (already in the output) {}; memories built {}, loaded {}; {:.1} s",
            self.answered, self.failed, self.invalid, self.skipped, self.memories_built, self.memories_loaded, self.wall_secs
        )?;
        write!(f, "{}", self.ledger)
    }
}
