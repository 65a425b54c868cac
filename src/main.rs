//! The `qrmem` binary: a thin layer of argument parsing over the library.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};

use indicatif::{ProgressBar, ProgressStyle};
use qrmem::batch::{BatchCtx, BatchOptions};
use qrmem::config::{Config, ConfigSource};
use qrmem::doctor;
use qrmem::embed::{BertEmbedder, DiskCache, Embedder};
use qrmem::llm::{
    ChatRequest, JsonSchema, LedgerSnapshot, Message, OpenAiClient, Policy, ReplyCache, Service,
};
use qrmem::memory::Memory;
use qrmem::memory::{BuildParams, Builder};
use qrmem::methods::{Baseline, Ctx as MethodCtx, MethodSpec};
use qrmem::navigate::{Navigator, Options as NavOptions, Window};
use qrmem::prompts::Prompts;

#[derive(Parser)]
#[command(
    name = "qrmem",
    version,
    about = "Long-context question answering over a query-oriented memory (QRMeM)"
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args)]
struct Global {
    /// Configuration file (default: $QRMEM_CONFIG, else ./qrmem.toml if present, else built-in defaults).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// OpenAI-compatible base URL (repeat for round-robin over several servers).
    #[arg(long = "llm-base-url", global = true, value_name = "URL")]
    llm_base_url: Vec<String>,
    /// Model name sent to the server.
    #[arg(long = "llm-model", global = true, value_name = "NAME")]
    llm_model: Option<String>,
    /// Requests in flight at once.
    #[arg(long, global = true, value_name = "N")]
    concurrency: Option<usize>,
    /// Per-request timeout in seconds.
    #[arg(long, global = true, value_name = "SECS")]
    timeout: Option<f64>,
    /// Do not read or write the LLM reply cache.
    #[arg(long = "no-cache", global = true)]
    no_cache: bool,
    /// Directory of the LLM reply cache.
    #[arg(long = "cache-dir", global = true, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// More log output (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
}

#[derive(Subcommand)]
enum Command {
    /// One LLM round trip: prints the reply, then the ledger.
    Chat(ChatArgs),
    /// Checks the LLM endpoint, the model, the embedder model directory and libtorch.
    Doctor,
    /// Builds the memory of a document (segments + query-oriented graph) into a memory file.
    Build(BuildArgs),
    /// Answers a question over a memory (or a document, building its memory first).
    Ask(AskArgs),
    /// Answers every question of a jobs file (one JSON job per line) into an output file;
    /// resumable. Exit status 0 when every question was answered, 2 when some failed or were
    /// invalid (see their lines), 1 when the run could not start.
    Batch(BatchArgs),
    /// Runs methods over a dataset and writes results.jsonl, report.md and report.json.
    Eval(EvalArgs),
    /// Prints a memory's counts, failures and top entities.
    Inspect {
        /// The memory file.
        memory: PathBuf,
        /// How many top entities to list.
        #[arg(long, default_value_t = 15)]
        top: usize,
    },
    /// Exports a memory's graph for Gephi / Cytoscape.
    Export(ExportArgs),
    /// Prints the effective configuration as TOML (the API key is never printed).
    Config,
    /// Dataset preparation.
    #[command(subcommand)]
    Data(DataCommand),
}

#[derive(Subcommand)]
enum DataCommand {
    /// LongBench-style long contexts from HotpotQA (the stand-in for LongBench's HotpotQA).
    LongbenchStyle {
        /// HotpotQA distractor JSON.
        #[arg(long = "in", value_name = "FILE")]
        input: PathBuf,
        /// Output jsonl (LongBench's fields).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Words per context, about.
        #[arg(long, default_value_t = 9000)]
        words: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Only the first N items.
        #[arg(long)]
        limit: Option<usize>,
    },
}

#[derive(Args)]
struct BuildArgs {
    /// The document (UTF-8 text).
    #[arg(long, value_name = "FILE")]
    doc: PathBuf,
    /// The question the graph is oriented to (optional).
    #[arg(long)]
    question: Option<String>,
    /// Where to write the memory file.
    #[arg(long, value_name = "MEMORY")]
    out: PathBuf,
    /// Ablation: no question generation or graph update.
    #[arg(long)]
    no_graph_update: bool,
    /// Ablation: schema-based extractor only, no LLM entity recognition.
    #[arg(long)]
    no_open_entity: bool,
    /// Segment length in cl100k tokens (default from the configuration: 600).
    #[arg(long)]
    segment_tokens: Option<usize>,
    /// Do not compute the segment and edge vectors (the navigators then embed on demand).
    #[arg(long)]
    no_vectors: bool,
    /// What to build: the QRMeM graph memory (default) or a summary tree (seed 002).
    #[arg(long, value_enum, default_value_t = BuildKind::Graph)]
    kind: BuildKind,
    /// Summary tree only: append the document to the tree already at --out (only the new
    /// right spine is summarised).
    #[arg(long)]
    append: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BuildKind {
    Graph,
    SummaryTree,
}

#[derive(Args)]
struct AskArgs {
    /// A memory file built by `qrmem build`.
    #[arg(
        long,
        value_name = "MEMORY",
        conflicts_with = "doc",
        required_unless_present = "doc"
    )]
    memory: Option<PathBuf>,
    /// A document: its memory is built first (oriented to the question).
    #[arg(long, value_name = "FILE")]
    doc: Option<PathBuf>,
    /// With --doc: also save the built memory here.
    #[arg(long, value_name = "MEMORY", requires = "doc")]
    save_memory: Option<PathBuf>,
    /// With --doc: segment length in cl100k tokens.
    #[arg(long, requires = "doc")]
    segment_tokens: Option<usize>,
    #[arg(long)]
    question: String,
    /// A multiple-choice option (repeat, in order A, B, C, ...): the answer is the letter.
    #[arg(long = "option")]
    options: Vec<String>,
    /// kn (Algorithm 1), ges (Graph Expansion Search), te (Entity Trial), a baseline
    /// (bm25-topK, contriever-topK, vanilla-left, vanilla-right, full), or a seed system
    /// (summary-tree, knowledge-tree, memwalker, garlic).
    #[arg(long)]
    method: Option<String>,
    #[arg(long)]
    max_trials: Option<usize>,
    /// Ablation: score edges with the question only.
    #[arg(long)]
    no_reflection: bool,
    /// Ablation: answer from the question entities' segments only.
    #[arg(long)]
    no_navigation: bool,
    /// Write the full trace as JSON here.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// knowledge-tree / memwalker with --doc: characters per leaf chunk (the seed: 5000).
    #[arg(long, requires = "doc")]
    chunk_chars: Option<usize>,
}

#[derive(Args)]
struct BatchArgs {
    /// Jobs, one per line: {"id", "doc" | "doc_path", "questions": [{"id", "question", "options"?}]}.
    /// A doc_path is relative to the jobs file's directory.
    #[arg(long, value_name = "FILE")]
    input: PathBuf,
    /// Answers, one JSON line per question; re-running skips the questions already there.
    #[arg(long, value_name = "FILE")]
    output: PathBuf,
    /// kn (default from the configuration), ges, te, an ablation or a baseline.
    #[arg(long)]
    method: Option<String>,
    /// Where built memories are kept, keyed by document content (default ~/.cache/qrmem/memories).
    #[arg(long, value_name = "DIR")]
    memory_dir: Option<PathBuf>,
    /// Refuse documents larger than this many bytes.
    #[arg(long, default_value_t = 4 * 1024 * 1024)]
    max_doc_bytes: u64,
    /// Try the questions that failed in an earlier run again.
    #[arg(long)]
    retry_failed: bool,
}

#[derive(Args)]
struct EvalArgs {
    /// An experiment file (eval/*.toml): title, dataset, data, methods, limit, seed, words,
    /// trials, notes. Its data path is relative to the file; flags override it.
    #[arg(long, value_name = "FILE")]
    experiment: Option<PathBuf>,
    /// hotpotqa (distractor json), longbench (jsonl), longbench-style (built from HotpotQA
    /// json), quality (L-Eval jsonl), quality-flat (QuALITY's own jsonl), qasper (L-Eval jsonl).
    #[arg(long)]
    dataset: Option<String>,
    #[arg(long, value_name = "PATH")]
    data: Option<PathBuf>,
    /// Comma-separated methods: kn, ges, te, kn-no-reflection, kn-no-navigation,
    /// no-graph-update, no-open-entity, bm25-topK, contriever-topK, vanilla-left,
    /// vanilla-right, full, summary-tree, knowledge-tree, memwalker, garlic.
    #[arg(long, value_delimiter = ',')]
    methods: Vec<String>,
    /// The first N questions only.
    #[arg(long)]
    limit: Option<usize>,
    /// Seed of the LongBench-style generation.
    #[arg(long)]
    seed: Option<u64>,
    /// Words per LongBench-style context.
    #[arg(long)]
    words: Option<usize>,
    /// Max-trials sweep for the navigators: "1..6" or "1,2,4" (default: the configuration's).
    #[arg(long)]
    trials: Option<String>,
    /// The run directory: results.jsonl, builds.jsonl, memories/, report.md, report.json.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Run the pairs that failed in an earlier run again.
    #[arg(long)]
    retry_failed: bool,
    /// Only (re)write the report from the results already in DIR (with the dataset at hand,
    /// first computing the spans of rows recorded before rows carried them: DIR/backfill.jsonl).
    #[arg(long)]
    report_only: bool,
    /// Keep every question's full trace as JSON in this directory.
    #[arg(long, value_name = "DIR")]
    trace_dir: Option<PathBuf>,
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Experiment {
    title: Option<String>,
    dataset: Option<String>,
    data: Option<PathBuf>,
    #[serde(default)]
    methods: Vec<String>,
    limit: Option<usize>,
    seed: Option<u64>,
    words: Option<usize>,
    trials: Option<String>,
    #[serde(default)]
    notes: Vec<String>,
}

/// "1..6" (inclusive) or "1,2,4".
fn parse_trials(s: &str) -> Result<Vec<usize>> {
    let bad = || {
        anyhow::anyhow!("--trials '{s}': give a range like 1..6 or a list like 1,2,4 (each >= 1)")
    };
    let v: Vec<usize> = if let Some((a, b)) = s.split_once("..") {
        let (a, b): (usize, usize) = (
            a.trim().parse().map_err(|_| bad())?,
            b.trim().parse().map_err(|_| bad())?,
        );
        (a..=b).collect()
    } else {
        s.split(',')
            .map(|x| x.trim().parse().map_err(|_| bad()))
            .collect::<Result<_>>()?
    };
    if v.is_empty() || v.contains(&0) {
        return Err(bad());
    }
    Ok(v)
}

async fn eval(config: &Config, args: &EvalArgs) -> Result<ExitCode> {
    let exp: Experiment = match &args.experiment {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read the experiment file {}", p.display()))?;
            let mut e: Experiment = toml::from_str(&text)
                .with_context(|| format!("the experiment file {} is invalid", p.display()))?;
            if let Some(d) = &e.data {
                if d.is_relative() {
                    e.data = Some(p.parent().unwrap_or(std::path::Path::new(".")).join(d));
                }
            }
            e
        }
        None => Experiment::default(),
    };
    let dataset = args
        .dataset
        .clone()
        .or(exp.dataset)
        .context("give --dataset (or an --experiment file)")?;
    let methods: Vec<String> = if args.methods.is_empty() {
        exp.methods.clone()
    } else {
        args.methods.clone()
    };
    let specs: Vec<MethodSpec> = methods
        .iter()
        .map(|m| m.trim().parse::<MethodSpec>().map_err(anyhow::Error::msg))
        .collect::<Result<_>>()?;
    let trials = match args.trials.as_ref().or(exp.trials.as_ref()) {
        Some(t) => parse_trials(t)?,
        None => vec![],
    };
    let limit = args.limit.or(exp.limit);
    let seed = args.seed.or(exp.seed).unwrap_or(0);
    let words = args.words.or(exp.words).unwrap_or(9000);
    let title = exp
        .title
        .clone()
        .unwrap_or_else(|| format!("{dataset}: {}", methods.join(", ")));
    // Notes the run itself makes (the LongBench-style label) go to run-notes.json when the run
    // starts; the experiment file's notes are read afresh on every report, so an edited note
    // replaces its old wording instead of standing beside it.
    let mut run_notes: Vec<String> = Vec::new();
    let out = &args.out;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
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
    for s in &specs {
        let s = s.to_string();
        if !method_order.contains(&s) {
            method_order.push(s);
        }
    }
    let data = args.data.clone().or(exp.data);
    let load_items = |run_notes: &mut Vec<String>| -> Result<Vec<qrmem::eval::datasets::QaItem>> {
        let data = data
            .as_ref()
            .context("give --data (or an --experiment file)")?;
        let (items, notes) = qrmem::eval::datasets::load(&dataset, data, limit, seed, words)?;
        run_notes.extend(notes);
        Ok(items)
    };
    let mut items = Vec::new();
    if !args.report_only {
        items = load_items(&mut run_notes)?;
        let path = out.join(RUN_NOTES);
        std::fs::write(&path, serde_json::to_vec_pretty(&run_notes)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let prompts = Prompts::load()?;
        let svc = service(config)?;
        let started = Instant::now();
        let bert = load_embedder(config)?;
        let embedder = qrmem::embed::TimedEmbedder::new(&bert);
        let ctx = qrmem::eval::EvalCtx {
            llm: &svc,
            prompts: &prompts,
            embedder: &embedder,
            config,
        };
        let opts = qrmem::eval::EvalOptions {
            methods: specs.clone(),
            trials,
            concurrency: config.llm.concurrency,
            retry_failed: args.retry_failed,
            progress: true,
            trace_dir: args.trace_dir.clone(),
        };
        eprintln!(
            "{} questions x {} methods -> {}",
            items.len(),
            specs.len(),
            out.display()
        );
        let summary = qrmem::eval::run(&ctx, &items, out, &opts).await?;
        eprintln!(
            "finished {} pairs ({} failed), skipped {} already done; memories built {}, loaded {}; {:.1} s",
            summary.finished, summary.failed, summary.skipped, summary.memories_built, summary.memories_loaded, summary.wall_secs
        );
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
            "concurrency": config.llm.concurrency,
        });
        eprintln!("timing: {timing}");
        let mut line = serde_json::to_vec(&timing)?;
        line.push(b'\n');
        use std::io::Write as _;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(out.join("timing.jsonl"))
            .and_then(|mut f| f.write_all(&line))
            .with_context(|| format!("writing {}", out.join("timing.jsonl").display()))?;
    } else {
        run_notes = read_run_notes(out)?;
        // The items give the gold evidence and documents that old rows' spans are computed
        // from; without them the report reads the backfill an earlier report wrote.
        match load_items(&mut Vec::new()) {
            Ok(loaded) => items = loaded,
            Err(e) => eprintln!(
                "note: {e:#}; evidence columns come from {} where it exists",
                out.join(qrmem::eval::evidence::BACKFILL).display()
            ),
        }
    }
    let mut notes = run_notes;
    for n in &exp.notes {
        if !notes.contains(n) {
            notes.push(n.clone());
        }
    }
    let (results, builds) = qrmem::eval::runner::read_run(out)?;
    if !items.is_empty() {
        let prompts = Prompts::load()?;
        let nav = &config.navigate;
        let ctx = qrmem::eval::evidence::BackfillCtx {
            prompts: &prompts,
            window: qrmem::navigate::Window::new(nav.context_window, nav.reply_tokens),
            segment_tokens: config.memory.segment_tokens,
            memories: qrmem::eval::runner::memories_dir(out),
        };
        let (n, problems) = qrmem::eval::evidence::backfill(&ctx, out, &items, &results)
            .map_err(anyhow::Error::msg)?;
        if n > 0 {
            eprintln!(
                "backfilled the spans of {n} rows recorded before rows carried them ({}); {} without answer spans",
                out.join(qrmem::eval::evidence::BACKFILL).display(),
                problems.len()
            );
        }
    }
    let backfill = qrmem::eval::evidence::read_backfill(out).map_err(anyhow::Error::msg)?;
    let report = qrmem::eval::report::build(
        &title,
        &config.llm.model,
        &results,
        &builds,
        &backfill,
        &method_order,
        notes,
    );
    report
        .write(out)
        .with_context(|| format!("writing the report into {}", out.display()))?;
    println!("{}", report.to_markdown());
    eprintln!("wrote {}", out.join("report.md").display());
    Ok(ExitCode::SUCCESS)
}

/// The run's own notes, in the run directory.
const RUN_NOTES: &str = "run-notes.json";

/// The notes a run recorded: `run-notes.json`, or for a run made before it existed the older
/// `notes.json` (the run's notes and the experiment's of that time, merged); none if neither.
fn read_run_notes(out: &Path) -> Result<Vec<String>> {
    for name in [RUN_NOTES, "notes.json"] {
        let path = out.join(name);
        match std::fs::read(&path) {
            Ok(text) => {
                return serde_json::from_slice(&text)
                    .with_context(|| format!("{} is not a JSON list of notes", path.display()));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }
    Ok(Vec::new())
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ExportFormat {
    Graphml,
    Json,
}

#[derive(Args)]
struct ExportArgs {
    memory: PathBuf,
    #[arg(long, value_enum)]
    format: ExportFormat,
    /// Output file (default: standard output).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(Args)]
struct ChatArgs {
    /// The prompt; `-` reads it from standard input.
    prompt: String,
    /// A system message.
    #[arg(long)]
    system: Option<String>,
    /// A JSON Schema file: the reply must be JSON following it (parsed, retried as the paper says).
    #[arg(long, value_name = "FILE")]
    schema: Option<PathBuf>,
    /// Ledger stage label.
    #[arg(long, default_value = "chat")]
    stage: String,
    #[arg(long)]
    max_tokens: Option<u32>,
    #[arg(long)]
    temperature: Option<f32>,
    /// Also write the ledger as JSON to this file.
    #[arg(long, value_name = "FILE")]
    ledger_out: Option<PathBuf>,
}

fn load_config(g: &Global) -> Result<(Config, ConfigSource)> {
    let (mut config, source) = Config::load(g.config.as_deref(), std::env::vars())?;
    if !g.llm_base_url.is_empty() {
        config.llm.base_urls = g.llm_base_url.clone();
    }
    if let Some(m) = &g.llm_model {
        config.llm.model = m.clone();
    }
    if let Some(n) = g.concurrency {
        config.llm.concurrency = n;
    }
    if let Some(t) = g.timeout {
        config.llm.timeout_secs = t;
    }
    if g.no_cache {
        config.cache.enabled = false;
    }
    if let Some(d) = &g.cache_dir {
        config.cache.dir = d.clone();
    }
    config.validate(&source)?;
    Ok((config, source))
}

fn service(config: &Config) -> Result<Service> {
    let client = OpenAiClient::new(&config.llm, config.api_key.clone())?;
    let cache = if config.cache.enabled {
        Some(ReplyCache::open(&config.cache.dir)?)
    } else {
        None
    };
    Ok(Service::new(
        Arc::new(client),
        cache,
        Policy::from(&config.llm),
    ))
}

fn print_ledger(ledger: &LedgerSnapshot, wall: std::time::Duration) {
    eprintln!("\n{ledger}wall time {:.2} s", wall.as_secs_f64());
}

async fn chat(config: &Config, args: &ChatArgs) -> Result<()> {
    let prompt = if args.prompt == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading the prompt from standard input")?;
        s
    } else {
        args.prompt.clone()
    };
    if prompt.trim().is_empty() {
        bail!("the prompt is empty");
    }
    let svc = service(config)?;
    let mut messages = Vec::new();
    if let Some(s) = &args.system {
        messages.push(Message::system(s.clone()));
    }
    messages.push(Message::user(prompt));
    let started = Instant::now();
    let outcome = match &args.schema {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the schema {}", path.display()))?;
            let schema: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("the schema {} is not JSON", path.display()))?;
            svc.chat_json::<serde_json::Value>(
                &args.stage,
                messages,
                Some(JsonSchema {
                    name: "reply".into(),
                    schema,
                }),
            )
            .await
            .map(|s| serde_json::to_string_pretty(&s.value).unwrap_or(s.reply.content))
        }
        None => {
            let mut sampling = svc.sampling();
            if let Some(t) = args.temperature {
                sampling.temperature = t;
            }
            if let Some(m) = args.max_tokens {
                sampling.max_tokens = m;
            }
            let request = ChatRequest {
                messages,
                sampling,
                schema: None,
            };
            svc.chat(&args.stage, &request).await.map(|r| {
                if r.was_cut_off() {
                    eprintln!("(the reply was cut off at max_tokens; raise --max-tokens)");
                }
                r.content
            })
        }
    };
    let ledger = svc.ledger().snapshot();
    if let Some(path) = &args.ledger_out {
        std::fs::write(path, serde_json::to_vec_pretty(&ledger)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    match outcome {
        Ok(text) => {
            println!("{}", text.trim_end());
            print_ledger(&ledger, started.elapsed());
            Ok(())
        }
        Err(e) => {
            print_ledger(&ledger, started.elapsed());
            Err(e.into())
        }
    }
}

/// The embedder, its vectors kept by content in `<cache dir>/embeddings` unless the cache is
/// off (`--no-cache`), like the LLM's replies.
fn load_embedder(config: &Config) -> Result<DiskCache<BertEmbedder>> {
    let e = &config.embed;
    let bert = BertEmbedder::load(
        &e.model_dir,
        e.normalize.as_option(),
        e.batch_size,
        e.threads,
    )
    .context("loading the embedder (pass --no-vectors to build without vectors)")?;
    let dir = config
        .cache
        .enabled
        .then(|| config.cache.dir.join("embeddings"));
    Ok(DiskCache::new(bert, dir))
}

/// Reads a document, naming the file and the problem when it cannot be used.
fn read_document(path: &std::path::Path) -> Result<String> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read the document {}", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "the document {} is not UTF-8 text (invalid byte at offset {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })?;
    if text.trim().is_empty() {
        bail!("the document {} is empty", path.display());
    }
    Ok(text)
}

async fn ask(config: &Config, args: &AskArgs) -> Result<()> {
    let mut config = config.clone();
    if let Some(m) = &args.method {
        config.navigate.method = m.clone();
    }
    if let Some(n) = args.max_trials {
        config.navigate.max_trials = n;
    }
    if args.no_reflection {
        config.navigate.reflection = false;
    }
    if args.no_navigation {
        config.navigate.navigation = false;
    }
    if let Some(n) = args.segment_tokens {
        config.memory.segment_tokens = n;
    }
    if args.method.as_deref() == Some("summary-tree") {
        return ask_tree(&config, args).await;
    }
    if matches!(args.method.as_deref(), Some("knowledge-tree" | "memwalker")) {
        return ask_kt(&config, args).await;
    }
    if args.method.as_deref() == Some("garlic") {
        return ask_garlic(&config, args).await;
    }
    let baseline = args
        .method
        .as_deref()
        .and_then(|m| m.parse::<Baseline>().ok());
    if baseline.is_some() {
        config.navigate.method = "kn".into();
    }
    config.validate(&ConfigSource::Flags)?;
    let opts = NavOptions::from_config(&config.navigate).map_err(anyhow::Error::msg)?;
    let prompts = Prompts::load()?;
    let svc = service(&config)?;
    let embedder = load_embedder(&config)?;
    let started = Instant::now();
    let memory = match (&args.memory, &args.doc) {
        (None, Some(doc)) if baseline.is_some() => {
            let document = read_document(doc)?;
            Memory::segments_only(&document, BuildParams::from_config(&config), svc.model())
        }
        (Some(path), _) => qrmem::memory::load(path)?,
        (None, Some(doc)) => {
            let document = read_document(doc)?;
            let bar = progress_bar();
            let builder = Builder::new(
                &svc,
                &prompts,
                BuildParams::from_config(&config),
                config.llm.concurrency,
            )
            .with_progress(bar);
            let mut m = builder
                .build(&document, Some(&args.question), &doc.display().to_string())
                .await?;
            qrmem::embed::index_memory(&mut m, &embedder)?;
            eprintln!(
                "built the memory: {} segments, {} entities, {} relations, {} failures",
                m.segments.len(),
                m.entity_count(),
                m.relation_count(),
                m.failures.len()
            );
            if let Some(path) = &args.save_memory {
                qrmem::memory::save(&m, path)?;
            }
            m
        }
        (None, None) => bail!("give --memory or --doc"),
    };
    let outcome = match baseline {
        Some(b) => {
            let ctx = MethodCtx {
                llm: &svc,
                prompts: &prompts,
                embedder: &embedder,
                window: Window::new(config.navigate.context_window, config.navigate.reply_tokens),
            };
            qrmem::methods::answer(b, &ctx, &memory, &args.question, &args.options).await
        }
        None => {
            Navigator::new(&svc, &prompts, &embedder, &memory, opts)
                .ask(&args.question, &args.options)
                .await
        }
    };
    finish_ask(outcome.map_err(anyhow::Error::from), &svc, started, args)
}

async fn batch(config: &Config, args: &BatchArgs) -> Result<ExitCode> {
    let method: MethodSpec = match &args.method {
        Some(m) => m.parse().map_err(anyhow::Error::msg)?,
        None => config.navigate.method.parse().map_err(anyhow::Error::msg)?,
    };
    let prompts = Prompts::load()?;
    let svc = service(config)?;
    let embedder = load_embedder(config)?;
    let opts = BatchOptions {
        method,
        memory_dir: args
            .memory_dir
            .clone()
            .unwrap_or_else(|| qrmem::config::qrmem_home().join("memories")),
        max_document_bytes: args.max_doc_bytes,
        concurrency: config.llm.concurrency,
        retry_failed: args.retry_failed,
        progress: true,
    };
    let ctx = BatchCtx {
        llm: &svc,
        prompts: &prompts,
        embedder: &embedder,
        config,
    };
    let summary = qrmem::batch::run(&ctx, &args.input, &args.output, &opts).await?;
    eprintln!("{summary}");
    eprintln!("answers in {}", args.output.display());
    Ok(if summary.failed + summary.invalid > 0 {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

async fn ask_garlic(config: &Config, args: &AskArgs) -> Result<()> {
    use qrmem::methods::garlic::{self, Garlic, GarlicCtx, GarlicParams};
    let prompts = Prompts::load()?;
    let svc = service(config)?;
    let embedder = load_embedder(config)?;
    let started = Instant::now();
    let window = Window::new(config.navigate.context_window, config.navigate.reply_tokens);
    let g = match (&args.memory, &args.doc) {
        (Some(path), _) => garlic::load(path).map_err(anyhow::Error::msg)?,
        (None, Some(doc)) => {
            let document = read_document(doc)?;
            let mut params = GarlicParams::default();
            if let Some(n) = args.segment_tokens {
                params.chunk_tokens = n;
            }
            let ctx = GarlicCtx {
                llm: &svc,
                prompts: &prompts,
                embedder: &embedder,
                window,
                concurrency: config.llm.concurrency,
            };
            let g = Garlic::build(&ctx, params, &document, &doc.display().to_string()).await?;
            if let Some(path) = &args.save_memory {
                garlic::save(&g, path).map_err(anyhow::Error::msg)?;
            }
            g
        }
        (None, None) => bail!("give --memory or --doc"),
    };
    let outcome = g
        .ask(
            &svc,
            &prompts,
            &embedder,
            window,
            &args.question,
            &args.options,
        )
        .await;
    finish_ask(outcome.map_err(anyhow::Error::from), &svc, started, args)
}

async fn ask_kt(config: &Config, args: &AskArgs) -> Result<()> {
    use qrmem::methods::knowledge_tree::{self, KnowledgeTree, KtParams, Variant};
    let prompts = Prompts::load()?;
    let svc = service(config)?;
    let started = Instant::now();
    let window = Window::new(config.navigate.context_window, config.navigate.reply_tokens);
    let variant = if args.method.as_deref() == Some("memwalker") {
        Variant::MemWalker
    } else {
        Variant::KnowledgeTree
    };
    let tree = match (&args.memory, &args.doc) {
        (Some(path), _) => {
            let t = knowledge_tree::load(path).map_err(anyhow::Error::msg)?;
            if t.variant != variant {
                bail!(
                    "{} is a {:?} tree, not {:?}",
                    path.display(),
                    t.variant,
                    variant
                );
            }
            t
        }
        (None, Some(doc)) => {
            let document = read_document(doc)?;
            let mut params = KtParams::default();
            if let Some(c) = args.chunk_chars {
                params.chunk_chars = c.max(100);
            }
            let ctx = knowledge_tree::BuildCtx {
                llm: &svc,
                prompts: &prompts,
                window,
                concurrency: config.llm.concurrency,
            };
            let t =
                KnowledgeTree::build(&ctx, variant, params, &document, &doc.display().to_string())
                    .await?;
            if let Some(path) = &args.save_memory {
                knowledge_tree::save(&t, path).map_err(anyhow::Error::msg)?;
            }
            t
        }
        (None, None) => bail!("give --memory or --doc"),
    };
    let outcome = tree
        .ask(&svc, &prompts, window, &args.question, &args.options)
        .await;
    finish_ask(outcome.map_err(anyhow::Error::from), &svc, started, args)
}

async fn ask_tree(config: &Config, args: &AskArgs) -> Result<()> {
    use qrmem::methods::summary_tree::{self, SummaryTree, TreeParams};
    let prompts = Prompts::load()?;
    let svc = service(config)?;
    let started = Instant::now();
    let window = Window::new(config.navigate.context_window, config.navigate.reply_tokens);
    let tree = match (&args.memory, &args.doc) {
        (Some(path), _) => summary_tree::load(path)?,
        (None, Some(doc)) => {
            let document = read_document(doc)?;
            let mut t = SummaryTree::new(
                TreeParams {
                    leaf_tokens: args.segment_tokens.unwrap_or(config.memory.segment_tokens),
                    ..TreeParams::default()
                },
                svc.model(),
            );
            t.append(
                &svc,
                &prompts,
                window,
                &document,
                &doc.display().to_string(),
            )
            .await?;
            if let Some(path) = &args.save_memory {
                summary_tree::save(&t, path)?;
            }
            t
        }
        (None, None) => bail!("give --memory or --doc"),
    };
    let outcome = tree
        .ask(&svc, &prompts, window, &args.question, &args.options)
        .await;
    finish_ask(outcome.map_err(anyhow::Error::from), &svc, started, args)
}

/// Prints the answer, the trace summary and the ledger; writes the trace file if asked.
fn finish_ask(
    outcome: Result<qrmem::navigate::Trace>,
    svc: &Service,
    started: Instant,
    args: &AskArgs,
) -> Result<()> {
    let ledger = svc.ledger().snapshot();
    let trace = match outcome {
        Ok(t) => t,
        Err(e) => {
            print_ledger(&ledger, started.elapsed());
            return Err(e);
        }
    };
    if let Some(path) = &args.trace {
        std::fs::write(path, serde_json::to_vec_pretty(&trace)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    println!("{}", trace.answer);
    eprintln!("\n{}", trace.summary());
    print_ledger(&ledger, started.elapsed());
    Ok(())
}

fn progress_bar() -> ProgressBar {
    ProgressBar::new(0).with_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} steps, ETA {eta}  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    )
}

async fn build_tree(config: &Config, args: &BuildArgs) -> Result<()> {
    use qrmem::methods::summary_tree::{self, SummaryTree, TreeParams};
    let document = read_document(&args.doc)?;
    let prompts = Prompts::load()?;
    let svc = service(config)?;
    let started = Instant::now();
    let mut tree = if args.append && args.out.exists() {
        summary_tree::load(&args.out)?
    } else {
        SummaryTree::new(
            TreeParams {
                leaf_tokens: args.segment_tokens.unwrap_or(config.memory.segment_tokens),
                ..TreeParams::default()
            },
            svc.model(),
        )
    };
    let before = tree.leaves.len();
    let window = Window::new(config.navigate.context_window, config.navigate.reply_tokens);
    let written = tree
        .append(
            &svc,
            &prompts,
            window,
            &document,
            &args.doc.display().to_string(),
        )
        .await?;
    tree.ledger.add(&svc.ledger().snapshot());
    summary_tree::save(&tree, &args.out)?;
    println!(
        "summary tree: {} leaves ({} new), {} summaries written now ({} in all), {} failures",
        tree.leaves.len(),
        tree.leaves.len() - before,
        written,
        tree.summaries.len(),
        tree.failures.len()
    );
    println!("wrote {}", args.out.display());
    print_ledger(&svc.ledger().snapshot(), started.elapsed());
    Ok(())
}

async fn build(config: &Config, args: &BuildArgs) -> Result<()> {
    if args.kind == BuildKind::SummaryTree {
        return build_tree(config, args).await;
    }
    if args.append {
        bail!(
            "--append works with --kind summary-tree only (a QRMeM memory is built per document)"
        );
    }
    let mut config = config.clone();
    if args.no_graph_update {
        config.memory.graph_update = false;
    }
    if args.no_open_entity {
        config.memory.open_entity = false;
    }
    if let Some(n) = args.segment_tokens {
        config.memory.segment_tokens = n;
    }
    config.validate(&ConfigSource::Flags)?;
    let document = read_document(&args.doc)?;
    let prompts = Prompts::load()?;
    let svc = service(&config)?;
    let started = Instant::now();
    let bar = progress_bar();
    let builder = Builder::new(
        &svc,
        &prompts,
        BuildParams::from_config(&config),
        config.llm.concurrency,
    )
    .with_progress(bar);
    let memory = builder
        .build(
            &document,
            args.question.as_deref(),
            &args.doc.display().to_string(),
        )
        .await;
    let ledger = svc.ledger().snapshot();
    let memory = match memory {
        Ok(m) => m,
        Err(e) => {
            print_ledger(&ledger, started.elapsed());
            return Err(e.into());
        }
    };
    let mut memory = memory;
    if !args.no_vectors {
        let embedder = load_embedder(&config)?;
        let t = Instant::now();
        let n = qrmem::embed::index_memory(&mut memory, &embedder)?;
        eprintln!(
            "embedded {n} segments and edges with {} in {:.1} s",
            embedder.model_id(),
            t.elapsed().as_secs_f64()
        );
    }
    qrmem::memory::save(&memory, &args.out)?;
    println!("{}", qrmem::memory::describe(&memory, 10));
    println!("wrote {}", args.out.display());
    print_ledger(&ledger, started.elapsed());
    Ok(())
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let (config, source) = load_config(&cli.global)?;
    match &cli.command {
        Command::Chat(args) => {
            chat(&config, args).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Doctor => {
            let mut checks = doctor::run(&config, &source).await;
            checks.push(match load_embedder(&config) {
                Ok(e) => doctor::Check {
                    name: "embedder".into(),
                    status: doctor::Status::Ok,
                    detail: format!(
                        "{} loads: dim {}, {}, max {} tokens, on {:?}",
                        e.model_id(),
                        e.dim(),
                        if e.normalized() {
                            "normalised (cosine)"
                        } else {
                            "raw dot product"
                        },
                        e.inner().max_len(),
                        e.inner().device()
                    ),
                    fix: None,
                },
                Err(err) => doctor::Check {
                    name: "embedder".into(),
                    status: doctor::Status::Warn,
                    detail: format!("{err:#}"),
                    fix: Some("scripts/setup-embedder.sh, or set QRMEM_EMBED_MODEL_DIR".into()),
                },
            });
            for c in &checks {
                println!("{c}");
            }
            let failed = checks
                .iter()
                .filter(|c| c.status == doctor::Status::Fail)
                .count();
            if failed > 0 {
                println!("\n{failed} check(s) failed.");
                Ok(ExitCode::from(1))
            } else {
                println!("\nAll required checks passed.");
                Ok(ExitCode::SUCCESS)
            }
        }
        Command::Build(args) => {
            build(&config, args).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Ask(args) => {
            ask(&config, args).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Batch(args) => batch(&config, args).await,
        Command::Eval(args) => eval(&config, args).await,
        Command::Inspect { memory, top } => {
            let m = qrmem::memory::load(memory)?;
            print!("{}", qrmem::memory::describe(&m, *top));
            println!("\n{}", m.ledger);
            Ok(ExitCode::SUCCESS)
        }
        Command::Export(args) => {
            let m = qrmem::memory::load(&args.memory)?;
            let text = match args.format {
                ExportFormat::Graphml => qrmem::memory::export::graphml(&m),
                ExportFormat::Json => qrmem::memory::export::json(&m)?,
            };
            match &args.out {
                Some(path) => std::fs::write(path, text)
                    .with_context(|| format!("writing {}", path.display()))?,
                None => print!("{text}"),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Data(DataCommand::LongbenchStyle {
            input,
            out,
            words,
            seed,
            limit,
        }) => {
            // Padding draws on every item's paragraphs; --limit only cuts the output.
            let raw = qrmem::eval::datasets::load_hotpot_raw(input)?;
            let n = limit.unwrap_or(raw.len()).min(raw.len());
            let items = qrmem::eval::longbench_style::generate(&raw, n, *words, *seed);
            let mut text = String::new();
            for it in &items[..n] {
                text.push_str(&serde_json::to_string(it)?);
                text.push('\n');
            }
            let tmp = out.with_extension("jsonl.tmp");
            std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
            std::fs::rename(&tmp, out).with_context(|| format!("writing {}", out.display()))?;
            eprintln!(
                "wrote {n} items of about {words} words to {} (seed {seed})",
                out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Config => {
            println!("# source: {source}\n{}", config.to_toml()?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let default_level = match cli.global.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
