//! The `qrmem` binary: parses the command line (`args.rs`), loads the configuration, calls the
//! library and prints. Every method is reached through `qrmem::methods` (ask, build, open) or the
//! eval and batch drivers, which use the same API.

mod args;
mod chat_cmd;
mod corpus_cmd;

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;

use qrmem::batch::BatchOptions;
use qrmem::config::{Config, ConfigSource, FlagOverrides};
use qrmem::doctor;
use qrmem::embed::{Embedder, Unavailable};
use qrmem::eval::experiment::{self, Plan, Request};
use qrmem::llm::{LedgerSnapshot, Service};
use qrmem::methods::{self, presets, MethodSpec, Runtime, Tuning};
use qrmem::prompts::Prompts;

use args::{
    AskArgs, BatchArgs, BuildArgs, Cli, Command, DataCommand, EvalArgs, ExportFormat, Global,
};

/// Writes to standard output. A closed pipe (`qrmem export ... | head`) is an error that
/// `main` turns into a quiet exit with status 0, as `head` expects of the programs before it.
pub(crate) fn write_stdout(args: std::fmt::Arguments) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_fmt(args)?;
    out.flush()?;
    Ok(())
}

/// `print!` that returns the error of a closed pipe instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {
        write_stdout(format_args!($($arg)*))?
    };
}

/// `println!` that returns the error of a closed pipe instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        write_stdout(format_args!($($arg)*))?;
        write_stdout(format_args!("\n"))?;
    }};
}

/// Whether `e` is (caused by) writing to a pipe whose reader has gone.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

async fn eval(config: &Config, g: &Global, args: &EvalArgs) -> Result<ExitCode> {
    let plan = Plan::resolve(&Request {
        experiment: args.experiment.clone(),
        dataset: args.dataset.clone(),
        data: args.data.clone(),
        methods: args.methods.clone(),
        limit: args.limit,
        skip: args.skip,
        seed: args.seed,
        words: args.words,
        trials: args.trials.clone(),
        model: g.llm_model.clone(),
        memories_built_by: args.memories_built_by.clone(),
    })?;
    // The experiment's model answers unless --llm-model named one (already in the config).
    let with_model;
    let config = match &plan.model {
        Some(m) if *m != config.llm.model => {
            let mut c = config.clone();
            c.llm.model = m.clone();
            with_model = c;
            &with_model
        }
        _ => config,
    };
    if !args.report_only {
        let prompts = Prompts::load()?;
        let svc = Service::from_config(config)?;
        let embedder = qrmem::embed::from_config(config).context("loading the embedder")?;
        let ctx = Runtime {
            llm: &svc,
            prompts: &prompts,
            embedder: &embedder,
            config,
        };
        let flags = experiment::Flags {
            retry_failed: args.retry_failed,
            trace_dir: args.trace_dir.clone(),
            html: args.html,
            build_only: args.build_only,
        };
        if args.contexts_only {
            outln!(
                "{}",
                qrmem::eval::contexts::contexts_only(&ctx, &plan, &args.out)?
            );
            return Ok(ExitCode::SUCCESS);
        }
        experiment::run(&ctx, &plan, &args.out, flags).await?;
    }
    if args.report_only && args.html {
        let pages = || args.out.join(experiment::PAGES);
        let dir = args.trace_dir.clone().unwrap_or_else(pages);
        let (n, skipped) = experiment::rewrite_pages(config, &plan, &args.out, &dir)?;
        eprintln!("rewrote {n} question pages in {}", dir.display());
        for s in skipped {
            eprintln!("  no page: {s}");
        }
    }
    let report = experiment::report(config, &plan, &args.out)?;
    outln!("{}", report.to_markdown());
    eprintln!("wrote {}", args.out.join("report.md").display());
    Ok(ExitCode::SUCCESS)
}

fn load_config(g: &Global) -> Result<(Config, ConfigSource)> {
    let (config, source) = Config::load(g.config.as_deref(), std::env::vars())?;
    let flags = FlagOverrides {
        base_urls: g.llm_base_url.clone(),
        model: g.llm_model.clone(),
        concurrency: g.concurrency,
        timeout_secs: g.timeout,
        no_cache: g.no_cache,
        cache_dir: g.cache_dir.clone(),
    };
    Ok((config.with_flags(&flags, &source)?, source))
}

/// The ledger and the wall time, when an LLM call was made (a command that failed before its
/// first call has no cost to report).
pub(crate) fn print_ledger(ledger: &LedgerSnapshot, wall: std::time::Duration) {
    let total = ledger.total();
    if total.requests + total.cache_hits == 0 {
        return;
    }
    eprintln!("\n{ledger}wall time {:.2} s", wall.as_secs_f64());
}

/// The configured embedder, or (`lenient`) a stand-in that says why there is none when a
/// method asks for vectors: the tree methods never do.
fn embedder(config: &Config, lenient: bool) -> Result<Box<dyn Embedder>> {
    match qrmem::embed::from_config(config) {
        Ok(e) => Ok(Box::new(e)),
        Err(e) if lenient => Ok(Box::new(Unavailable {
            reason: e.to_string(),
        })),
        Err(e) => {
            Err(e).context("loading the embedder (pass --no-vectors to build without vectors)")
        }
    }
}

async fn ask(config: &Config, args: &AskArgs) -> Result<()> {
    if args.question.trim().is_empty() {
        bail!("--question is empty: give the question to answer");
    }
    if let Some(dir) = &args.corpus {
        return corpus_cmd::ask(config, dir, args).await;
    }
    let mut config = config.clone();
    // --method, else --preset, else (with --doc) the default preset; with --memory and
    // neither, the memory's own method.
    let preset = match (&args.preset, &args.method, &args.doc) {
        (Some(name), _, _) => Some(presets::preset(name).map_err(anyhow::Error::msg)?),
        (None, None, Some(_)) => {
            Some(presets::preset(presets::DEFAULT).map_err(anyhow::Error::msg)?)
        }
        _ => None,
    };
    if let Some(t) = preset.and_then(|p| p.trials) {
        config.navigate.max_trials = t;
    }
    if let Some(n) = args.max_trials {
        config.navigate.max_trials = n;
    }
    if let Some(n) = args.segment_tokens {
        config.memory.segment_tokens = n;
    }
    config.validate(&ConfigSource::Flags)?;
    let source = match (&args.memory, &args.doc) {
        (Some(path), _) => methods::Source::Memory(path.clone()),
        (None, Some(doc)) => methods::Source::Document {
            path: doc.clone(),
            save: args.save_memory.clone(),
        },
        (None, None) => bail!("give --memory or --doc"),
    };
    let request = methods::AskRequest {
        source,
        question: args.question.clone(),
        options: args.options.clone(),
        method: args
            .method
            .clone()
            .or_else(|| preset.map(|p| p.method.to_string())),
        no_reflection: args.no_reflection,
        no_navigation: args.no_navigation,
        tuning: Tuning {
            chunk_chars: args.chunk_chars,
            chunk_tokens: args.segment_tokens,
            vectors: true,
        },
    };
    let prompts = Prompts::load()?;
    let svc = Service::from_config(&config)?;
    let embedder = embedder(&config, true)?;
    let ctx = Runtime {
        llm: &svc,
        prompts: &prompts,
        embedder: embedder.as_ref(),
        config: &config,
    };
    let started = Instant::now();
    let outcome = methods::ask(&ctx, &request, Some(qrmem::progress::step_bar())).await;
    let ledger = svc.ledger().snapshot();
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            print_ledger(&ledger, started.elapsed());
            return Err(e.into());
        }
    };
    if let Some(built) = &outcome.built {
        eprintln!("{built}");
    }
    let trace = outcome.trace;
    if let Some(path) = &args.trace {
        std::fs::write(path, serde_json::to_vec_pretty(&trace)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    outln!("{}", trace.answer);
    eprintln!("\n{}", trace.summary());
    print_ledger(&ledger, started.elapsed());
    Ok(())
}

async fn batch(config: &Config, args: &BatchArgs) -> Result<ExitCode> {
    let mut config = config.clone();
    let method: MethodSpec = match &args.method {
        Some(m) => m.parse().map_err(anyhow::Error::msg)?,
        None => {
            let p = presets::preset(args.preset.as_deref().unwrap_or(presets::DEFAULT))
                .map_err(anyhow::Error::msg)?;
            if let Some(t) = p.trials {
                config.navigate.max_trials = t;
            }
            p.spec().map_err(anyhow::Error::msg)?
        }
    };
    let config = &config;
    let prompts = Prompts::load()?;
    let svc = Service::from_config(config)?;
    let embedder = qrmem::embed::from_config(config).context("loading the embedder")?;
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
        corpus: match &args.corpus {
            Some(dir) => Some(qrmem::batch::CorpusJobs {
                dir: dir.clone(),
                retriever: args.retriever.parse().map_err(anyhow::Error::msg)?,
                context_tokens: args.context_tokens,
            }),
            None => None,
        },
    };
    let ctx = Runtime {
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

async fn build(config: &Config, args: &BuildArgs) -> Result<()> {
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
    let request = methods::BuildRequest {
        kind: args.kind,
        document: args.doc.clone(),
        question: args.question.clone(),
        out: args.out.clone(),
        append: args.append,
        tuning: Tuning {
            vectors: !args.no_vectors,
            ..Tuning::default()
        },
    };
    let prompts = Prompts::load()?;
    let svc = Service::from_config(&config)?;
    let embedder: Box<dyn Embedder> = if args.no_vectors {
        Box::new(Unavailable {
            reason: "the build was asked for no vectors (--no-vectors)".into(),
        })
    } else {
        embedder(&config, false)?
    };
    let ctx = Runtime {
        llm: &svc,
        prompts: &prompts,
        embedder: embedder.as_ref(),
        config: &config,
    };
    let started = Instant::now();
    let built = methods::build(&ctx, &request, Some(qrmem::progress::step_bar())).await;
    let ledger = svc.ledger().snapshot();
    match built {
        Ok((_, description)) => {
            outln!("{description}");
            outln!("wrote {}", args.out.display());
            print_ledger(&ledger, started.elapsed());
            Ok(())
        }
        Err(e) => {
            print_ledger(&ledger, started.elapsed());
            Err(e.into())
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let (config, source) = load_config(&cli.global)?;
    match &cli.command {
        Command::Chat(args) => {
            chat_cmd::chat(&config, args).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Doctor => {
            let mut checks = doctor::run(&config, &source).await;
            checks.push(doctor::embedder_check(&config));
            for c in &checks {
                outln!("{c}");
            }
            let failed = checks
                .iter()
                .filter(|c| c.status == doctor::Status::Fail)
                .count();
            if failed > 0 {
                outln!("\n{failed} check(s) failed.");
                Ok(ExitCode::from(1))
            } else {
                outln!("\nAll required checks passed.");
                Ok(ExitCode::SUCCESS)
            }
        }
        Command::Build(args) => build(&config, args).await.map(|()| ExitCode::SUCCESS),
        Command::Ask(args) => ask(&config, args).await.map(|()| ExitCode::SUCCESS),
        Command::Methods => {
            outln!("Presets (--preset NAME; the first is the default of ask --doc and batch):\n");
            outln!("{}", presets::table());
            outln!("The grammar (--method NAME), family by family:\n");
            for names in methods::method_families() {
                outln!("- {names}\n");
            }
            outln!("Measured F1 of each preset and row: README.md (Results) and eval/README.md.");
            Ok(ExitCode::SUCCESS)
        }
        Command::Batch(args) => batch(&config, args).await,
        Command::Eval(args) => eval(&config, &cli.global, args).await,
        Command::Compare {
            runs,
            out,
            datasets: true,
            methods,
        } => {
            let t = qrmem::eval::table1::table1(runs, methods)?;
            t.write(out)?;
            outln!("{}", t.to_markdown());
            eprintln!(
                "wrote {}",
                out.join(qrmem::eval::table1::TABLE1_MD).display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Compare { runs, out, .. } => {
            let c = qrmem::eval::compare::compare(runs)?;
            c.write(out)?;
            outln!("{}", c.to_markdown());
            eprintln!(
                "wrote {}",
                out.join(qrmem::eval::compare::COMPARE_MD).display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Pair { runs, a, b, kind } => {
            let runs: Vec<std::path::PathBuf> = runs
                .split(',')
                .filter(|r| !r.is_empty())
                .map(Into::into)
                .collect();
            let p = qrmem::eval::pair::pair(&runs, a, b, kind.as_deref())?;
            outln!("{}", p.to_text().trim_end());
            Ok(ExitCode::SUCCESS)
        }
        Command::Inspect { memory, top } if memory.join("corpus.sqlite").is_file() => {
            out!(
                "{}",
                qrmem::corpus::Corpus::open_existing(memory)?.describe(*top)?
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Inspect { memory, top } => {
            let m = methods::open(memory)?;
            out!("{}", m.describe(*top));
            outln!("\n{}", m.ledger());
            Ok(ExitCode::SUCCESS)
        }
        Command::View(args) => {
            let wrote = match (&args.corpus, &args.memory) {
                (Some(dir), _) => {
                    let retriever = args.retriever.parse().map_err(anyhow::Error::msg)?;
                    let question = args.question.as_deref().unwrap_or_default();
                    qrmem::view::write_corpus_page(
                        dir,
                        question,
                        retriever,
                        args.context_tokens,
                        &args.out,
                    )?
                }
                (None, Some(memory)) => {
                    qrmem::view::write_page(memory, args.trace.as_deref(), &args.out)?
                }
                (None, None) => anyhow::bail!("view needs --memory or --corpus"),
            };
            eprintln!("{wrote}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Export(args) => {
            let graphml = matches!(args.format, ExportFormat::Graphml);
            let text = qrmem::memory::export::of_file(&args.memory, graphml)?;
            match &args.out {
                Some(path) => std::fs::write(path, text)
                    .with_context(|| format!("writing {}", path.display()))?,
                None => out!("{text}"),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Data(DataCommand::LongbenchStyle {
            input,
            dataset,
            out,
            words,
            seed,
            limit,
        }) => {
            use qrmem::eval::longbench_style::write_jsonl;
            let n = write_jsonl(dataset, input, out, *words, *seed, *limit)?;
            eprintln!(
                "wrote {n} items of about {words} words to {}",
                out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Corpus(args) => corpus_cmd::run(&config, args)
            .await
            .map(|()| ExitCode::SUCCESS),
        Command::Config => {
            outln!("# source: {source}\n{}", config.to_toml()?);
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
        // The reader of our output has gone (`| head`): nothing more to say.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
