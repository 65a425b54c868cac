//! `qrmem corpus`: the commands over a corpus (`qrmem::corpus`), parsed in `args.rs`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::args::{AskArgs, CorpusArgs, CorpusCommand, DevFileArgs};
use qrmem::corpus::{Added, Corpus, CorpusStore, Retriever};
use qrmem::eval::corpus_qa::corpus_qa;
use qrmem::eval::corpus_recall::{add_paragraphs, corpus_recall, paragraph_documents};
use qrmem::eval::datasets::{load_multihop_raw, MultiHopRaw};
use qrmem::methods::CorpusMethod;
use qrmem::text::passages::DEFAULT_PASSAGE_TOKENS;

pub(crate) async fn run(config: &qrmem::Config, args: &CorpusArgs) -> Result<()> {
    let dir = args
        .corpus
        .clone()
        .unwrap_or_else(|| qrmem::config::qrmem_home().join("corpus"));
    match &args.command {
        CorpusCommand::Add {
            paths,
            passage_tokens,
            extract,
        } if extract == "llm" => add_llm(config, &dir, paths, *passage_tokens).await?,
        CorpusCommand::Add {
            paths,
            passage_tokens,
            ..
        } => {
            let files = documents(paths)?;
            if files.is_empty() {
                let named: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                bail!(
                    "{} holds no .txt or .md file: nothing was added",
                    named.join(", ")
                );
            }
            let mut corpus = Corpus::open(&dir, *passage_tokens)?;
            let bar = qrmem::progress::count_bar(files.len() as u64, "adding documents");
            // Each file is read as its turn comes (a large directory is never in memory at
            // once); one that cannot be read, or is empty, is named and left out, and the
            // others are added.
            let mut refused: Vec<String> = Vec::new();
            let docs = files.iter().filter_map(|f| {
                read_or_refuse(f, &bar, &mut refused).map(|text| (f.display().to_string(), text))
            });
            let (mut new, mut present) = (0, 0);
            let (_, cost) = corpus.add_all(docs, |name, added| {
                match added {
                    Added::New { .. } => new += 1,
                    Added::Present { name: was, .. } => {
                        present += 1;
                        bar.println(format!("{name}: already in the corpus as {was}"));
                    }
                }
                bar.inc(1);
            })?;
            bar.finish_and_clear();
            eprintln!(
                "added {new} documents ({present} already present) to {}: extraction {:.3} s, assembly {:.3} s, index {:.3} s",
                dir.display(),
                cost.extract.as_secs_f64(),
                cost.assemble.as_secs_f64(),
                cost.index.as_secs_f64()
            );
            none_refused(&refused, files.len())?;
        }
        CorpusCommand::Remove { docs } => {
            let mut corpus = Corpus::open_existing(&dir)?;
            let removed = corpus.remove(docs)?;
            eprintln!("removed {} documents from {}", removed.len(), dir.display());
        }
        CorpusCommand::Serve => serve(&dir)?,
        CorpusCommand::Ls => {
            let corpus = Corpus::open_existing(&dir)?;
            println!("id\tpassages\tentities\tbytes\tname");
            for d in corpus.list()? {
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    &d.id[..12.min(d.id.len())],
                    d.passages,
                    d.entities,
                    d.bytes,
                    d.name
                );
            }
        }
        CorpusCommand::Search {
            query,
            k,
            retriever,
        } => {
            if query.trim().is_empty() {
                bail!("the query is empty: give the words to search for");
            }
            let retriever: Retriever = retriever.parse().map_err(anyhow::Error::msg)?;
            let mut corpus = Corpus::open_existing(&dir)?;
            let embedder = match retriever {
                Retriever::Dense => {
                    let e = qrmem::embed::from_config(config).context("loading the embedder")?;
                    corpus.embed_missing(&e, config.embed.batch_size.max(1), |_, _| {})?;
                    Some(e)
                }
                _ => None,
            };
            let embedder = embedder.as_ref().map(|e| e as &dyn qrmem::embed::Embedder);
            for (rank, (doc, idx)) in corpus
                .rank(retriever, query, *k, embedder)?
                .into_iter()
                .enumerate()
            {
                let name = corpus.name_of(&doc)?.unwrap_or_default();
                let text = corpus
                    .passage(&doc, idx)?
                    .map(|p| p.text)
                    .unwrap_or_default();
                println!("{}. {name} (passage {idx})\n{}\n", rank + 1, text.trim());
            }
        }
        CorpusCommand::Recall {
            dev,
            json,
            extract,
            retrievers: chosen,
        } => {
            let dataset = &dev.dataset;
            let mut items = load_multihop_raw(dataset, &dev.input)?;
            items.truncate(dev.limit.unwrap_or(items.len()));
            let mut corpus = Corpus::open(&dir, DEFAULT_PASSAGE_TOKENS)?;
            if extract == "llm" {
                // The LLM's records first, each paragraph under its title as the measurement's
                // own add names it; that add (the co-occurrence pass) then leaves their
                // assembly in place.
                llm_records(config, &mut corpus, &items).await?;
            }
            let chosen: Vec<Retriever> = chosen
                .iter()
                .map(|r| r.parse().map_err(anyhow::Error::msg))
                .collect::<Result<_>>()?;
            // The dense row when the embedder loads (and, with --retrievers, when named);
            // without it, the lexical rows.
            let wants_dense = chosen.is_empty() || chosen.contains(&Retriever::Dense);
            let embedder = match wants_dense.then(|| qrmem::embed::from_config(config)) {
                Some(Ok(e)) => Some(e),
                Some(Err(e)) if chosen.contains(&Retriever::Dense) => {
                    return Err(e).context("--retrievers names dense")
                }
                Some(Err(e)) => {
                    eprintln!("no dense row: {e}");
                    None
                }
                None => None,
            };
            let mut retrievers = chosen;
            if retrievers.is_empty() {
                retrievers = vec![
                    Retriever::Bm25,
                    Retriever::Bm25Hop,
                    Retriever::GraphStart,
                    Retriever::GraphHop,
                    Retriever::GraphOwnHop,
                ];
                if embedder.is_some() {
                    retrievers.push(Retriever::Dense);
                }
            }
            let bar = qrmem::progress::count_bar(0, "");
            let report = corpus_recall(
                dataset,
                &items,
                &mut corpus,
                &retrievers,
                embedder.as_ref().map(|e| e as &dyn qrmem::embed::Embedder),
                |what, done, total| {
                    bar.set_length(total as u64);
                    bar.set_message(what.to_string());
                    bar.set_position(done as u64);
                },
            )?;
            bar.finish_and_clear();
            println!("{}", report.to_markdown());
            if let Some(path) = json {
                write_json(path, &report)?;
            }
        }
        CorpusCommand::Qa {
            dev,
            retrievers,
            context_tokens,
            out,
            extract,
        } => qa(config, &dir, dev, retrievers, *context_tokens, out, extract).await?,
    }
    Ok(())
}

/// `corpus recall` / `qa --extract llm`: the paragraphs of `items` (the questions measured)
/// given the LLM's record, through the reply cache; refuses if any could not be.
async fn llm_records(
    config: &qrmem::Config,
    corpus: &mut Corpus,
    items: &[MultiHopRaw],
) -> Result<()> {
    let docs = paragraph_documents(items);
    let total = docs.len();
    let bar = qrmem::progress::count_bar(total as u64, "extracting paragraphs");
    let (svc, done) = llm_add(config, corpus, docs.into_iter().map(Ok), total, &bar).await?;
    bar.finish_and_clear();
    let spent = svc.ledger().snapshot().total();
    eprintln!(
        "the LLM's records: {} paragraphs added, {} given the record, {} had it; LLM: {} requests, {} from the reply cache",
        done.new, done.updated, done.had, spent.requests, spent.cache_hits
    );
    none_refused(&done.refused, total)
}

/// `qrmem corpus add --extract llm`: each document's record is the QRMeM graph the LLM builds
/// over it (`corpus::add_with_llm`: `concurrency` documents at once, each stored in the files'
/// order as one transaction; one that has such a record is not extracted again).
async fn add_llm(
    config: &qrmem::Config,
    dir: &Path,
    paths: &[PathBuf],
    passage_tokens: usize,
) -> Result<()> {
    let files = documents(paths)?;
    let mut corpus = Corpus::open(dir, passage_tokens)?;
    let bar = qrmem::progress::count_bar(files.len() as u64, "extracting documents");
    // Each file is read as its group comes; one that cannot be read is named above the bar.
    let docs = files.iter().map(|f| {
        qrmem::methods::read_document(f)
            .map(|text| (f.display().to_string(), text))
            .map_err(|e| {
                bar.println(e.to_string());
                e.to_string()
            })
    });
    let (svc, done) = llm_add(config, &mut corpus, docs, files.len(), &bar).await?;
    bar.finish_and_clear();
    let spent = svc.ledger().snapshot().total();
    eprintln!(
        "added {} documents to {}, gave {} present ones this record, left {} that had it; LLM: {} requests, {} from the reply cache",
        done.new,
        dir.display(),
        done.updated,
        done.had,
        spent.requests,
        spent.cache_hits
    );
    none_refused(&done.refused, files.len())
}

/// `docs` (`total` of them) added to `corpus` with the LLM's record, `bar` advanced after each
/// group; where stderr is not a terminal (the bar is not drawn) a line a group instead, its
/// ETA at the mean rate of the documents extracted (not of those that already had it).
async fn llm_add(
    config: &qrmem::Config,
    corpus: &mut Corpus,
    docs: impl IntoIterator<Item = std::result::Result<(String, String), String>>,
    total: usize,
    bar: &indicatif::ProgressBar,
) -> Result<(qrmem::llm::Service, qrmem::corpus::LlmAdded)> {
    let prompts = qrmem::prompts::Prompts::load()?;
    let svc = qrmem::llm::Service::from_config(config)?;
    let params = qrmem::memory::BuildParams::from_config(config);
    let lines = !std::io::stderr().is_terminal();
    let started = std::time::Instant::now();
    let done = qrmem::corpus::add_with_llm(
        corpus,
        &svc,
        &prompts,
        &params,
        config.llm.concurrency,
        docs,
        |done, extracted| {
            bar.set_position(done.seen() as u64);
            if lines {
                let left = (total - done.seen().min(total)) as u64;
                eprintln!(
                    "{} {}/{total} documents: {} added, {} given this record, {} had it, {} refused; ETA {}",
                    qrmem::progress::clock(),
                    done.seen(),
                    done.new,
                    done.updated,
                    done.had,
                    done.refused.len(),
                    qrmem::progress::eta_text(
                        extracted as u64,
                        extracted as u64 + left,
                        started.elapsed()
                    )
                );
            }
        },
    )
    .await?;
    Ok((svc, done))
}

/// `f` read as a document (`methods::read_document`: readable, UTF-8 text, not empty), or None
/// once the reason is printed above `bar`, counted on it and kept in `refused`.
fn read_or_refuse(
    f: &Path,
    bar: &indicatif::ProgressBar,
    refused: &mut Vec<String>,
) -> Option<String> {
    match qrmem::methods::read_document(f) {
        Ok(text) => Some(text),
        Err(e) => {
            bar.println(e.to_string());
            bar.inc(1);
            refused.push(e.to_string());
            None
        }
    }
}

/// Fails naming every file of `refused` (of `total` given); Ok when there is none.
fn none_refused(refused: &[String], total: usize) -> Result<()> {
    if !refused.is_empty() {
        bail!(
            "{} of {total} files were not added:\n  {}",
            refused.len(),
            refused.join("\n  ")
        );
    }
    Ok(())
}

/// `qrmem corpus qa`: the first questions of the dev file `dev` answered across the corpus.
async fn qa(
    config: &qrmem::Config,
    dir: &Path,
    dev: &DevFileArgs,
    retrievers: &str,
    context_tokens: usize,
    out: &Path,
    extract: &str,
) -> Result<()> {
    let retrievers: Vec<CorpusMethod> = retrievers
        .split(',')
        .map(|r| r.trim().parse())
        .collect::<Result<_, String>>()
        .map_err(anyhow::Error::msg)?;
    if retrievers.contains(&CorpusMethod::Retrieve(Retriever::Dense)) {
        bail!("corpus qa: the dense retriever is not offered here (its vectors take long to embed); use corpus recall for it");
    }
    let dataset = dev.dataset.as_str();
    let mut items = load_multihop_raw(dataset, &dev.input)?;
    // Every paragraph of the file is added; the first `asked` questions are asked.
    let asked = dev.limit.unwrap_or(items.len()).min(items.len());
    let mut corpus = Corpus::open(dir, DEFAULT_PASSAGE_TOKENS)?;
    if extract == "llm" {
        llm_records(config, &mut corpus, &items[..asked]).await?;
    }
    let bar = qrmem::progress::count_bar(0, "");
    add_paragraphs(&items, &mut corpus, |what, done, total| {
        bar.set_length(total as u64);
        bar.set_message(what.to_string());
        bar.set_position(done as u64);
    })?;
    items.truncate(asked);
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let prompts = qrmem::prompts::Prompts::load()?;
    let svc = qrmem::llm::Service::from_config(config)?;
    let embedder = embedder_for(config, &retrievers)?;
    let rt = qrmem::methods::Runtime {
        llm: &svc,
        prompts: &prompts,
        embedder: embedder.as_ref(),
        config,
    };
    bar.set_position(0);
    bar.set_message("answering");
    let report = corpus_qa(
        &rt,
        dataset,
        &items,
        &corpus,
        &retrievers,
        context_tokens,
        config.llm.concurrency,
        &out.join("results.jsonl"),
        |line, done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
            bar.set_message(format!(
                "{} {}: f1 {:.2}{}",
                line.retriever,
                line.item,
                line.f1,
                line.error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            ));
        },
    )
    .await?;
    bar.finish_and_clear();
    let md = report.to_markdown();
    std::fs::write(out.join("report.md"), &md)
        .with_context(|| format!("writing {}", out.join("report.md").display()))?;
    write_json(&out.join("report.json"), &report)?;
    println!("{md}");
    Ok(())
}

/// The files `paths` name: files as given, directories' .txt and .md files recursively, sorted.
fn documents(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out)?;
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            bail!("{}: no such file or directory", p.display());
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading the directory {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("txt" | "md")) {
            out.push(p);
        }
    }
    Ok(())
}

fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    std::fs::write(path, serde_json::to_vec_pretty(value)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// The configured embedder when one of `methods` needs it, else none (the lexical and graph
/// retrievers use none, and loading it takes seconds).
fn embedder_for(
    config: &qrmem::Config,
    methods: &[CorpusMethod],
) -> Result<Box<dyn qrmem::embed::Embedder>> {
    Ok(if methods.iter().any(CorpusMethod::needs_embedder) {
        Box::new(qrmem::embed::from_config(config).context("loading the embedder")?)
    } else {
        Box::new(qrmem::embed::Unavailable {
            reason: "the lexical and graph retrievers use no embedder".into(),
        })
    })
}

/// `qrmem ask --corpus DIR`: the question answered across the corpus's documents.
pub(crate) async fn ask(config: &qrmem::Config, dir: &Path, args: &AskArgs) -> Result<()> {
    let method: CorpusMethod = args.retriever.parse().map_err(anyhow::Error::msg)?;
    let mut corpus = Corpus::open_existing(dir)?;
    let prompts = qrmem::prompts::Prompts::load()?;
    let svc = qrmem::llm::Service::from_config(config)?;
    let embedder = embedder_for(config, std::slice::from_ref(&method))?;
    if method == CorpusMethod::Retrieve(Retriever::Dense) {
        corpus.embed_missing(embedder.as_ref(), config.embed.batch_size.max(1), |_, _| {})?;
    }
    let ctx = qrmem::methods::Runtime {
        llm: &svc,
        prompts: &prompts,
        embedder: embedder.as_ref(),
        config,
    };
    let trace = qrmem::methods::answer_corpus(
        &ctx,
        &corpus,
        &args.question,
        &args.options,
        &method,
        args.context_tokens,
    )
    .await?
    .trace;
    if let Some(path) = &args.trace {
        write_json(path, &trace)?;
    }
    println!("{}", trace.answer);
    eprintln!("\n{}", trace.summary());
    if let Some(step) = trace.steps.last() {
        eprintln!("{}", step.note);
    }
    Ok(())
}

/// One request of `qrmem corpus serve`.
#[derive(serde::Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
enum Request {
    Add {
        name: Option<String>,
        text: Option<String>,
        path: Option<PathBuf>,
    },
    Remove {
        docs: Vec<String>,
    },
    Search {
        query: String,
        #[serde(default = "five")]
        k: usize,
        #[serde(default = "bm25")]
        retriever: String,
    },
    Ls,
}

fn five() -> usize {
    5
}

fn bm25() -> String {
    "bm25".into()
}

/// `qrmem corpus serve`: the corpus opened once, one JSON reply a line per request line.
fn serve(dir: &Path) -> Result<()> {
    use std::io::{BufRead, Write};
    let mut corpus = Corpus::open(dir, DEFAULT_PASSAGE_TOKENS)?;
    eprintln!(
        "serving {} (one JSON request a line on stdin)",
        dir.display()
    );
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for (n, line) in stdin.lock().lines().enumerate() {
        let line = line.context("reading stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let started = std::time::Instant::now();
        let reply = match serde_json::from_str::<Request>(&line) {
            Ok(req) => match answer(&mut corpus, req) {
                Ok(mut v) => {
                    v["ok"] = serde_json::json!(true);
                    v
                }
                Err(e) => serde_json::json!({"ok": false, "error": format!("{e:#}")}),
            },
            Err(e) => {
                serde_json::json!({"ok": false, "error": format!("line {}: not a request: {e}", n + 1)})
            }
        };
        let mut reply = reply;
        reply["ms"] = serde_json::json!(started.elapsed().as_secs_f64() * 1e3);
        writeln!(out, "{reply}").context("writing stdout")?;
        out.flush().context("writing stdout")?;
    }
    Ok(())
}

fn answer(corpus: &mut Corpus, req: Request) -> Result<serde_json::Value> {
    Ok(match req {
        Request::Add { name, text, path } => {
            let (name, text) = match (text, path) {
                (Some(text), None) => {
                    (name.context("an add with \"text\" needs a \"name\"")?, text)
                }
                (None, Some(path)) => {
                    let text = qrmem::methods::read_document(&path)?;
                    (name.unwrap_or_else(|| path.display().to_string()), text)
                }
                _ => anyhow::bail!("an add takes \"text\" (with \"name\") or \"path\", not both"),
            };
            if text.trim().is_empty() {
                anyhow::bail!("document '{name}' is empty");
            }
            match corpus.add(&name, &text)? {
                Added::New { id, passages } => {
                    serde_json::json!({"added": id, "passages": passages})
                }
                Added::Present { id, name } => serde_json::json!({"present": id, "name": name}),
            }
        }
        Request::Remove { docs } => serde_json::json!({"removed": corpus.remove(&docs)?}),
        Request::Search {
            query,
            k,
            retriever,
        } => {
            if query.trim().is_empty() {
                anyhow::bail!("the query is empty");
            }
            let retriever: Retriever = retriever.parse().map_err(anyhow::Error::msg)?;
            if retriever == Retriever::Dense {
                anyhow::bail!(
                    "serve answers the lexical and graph retrievers; dense needs `corpus search`"
                );
            }
            let mut hits = Vec::new();
            for (doc, idx) in corpus.rank(retriever, &query, k, None)? {
                let name = corpus.name_of(&doc)?.unwrap_or_default();
                hits.push(serde_json::json!({"doc": doc, "name": name, "passage": idx}));
            }
            serde_json::json!({"hits": hits})
        }
        Request::Ls => {
            let docs: Vec<serde_json::Value> = corpus
                .list()?
                .into_iter()
                .map(|d| serde_json::json!({"id": d.id, "name": d.name, "passages": d.passages}))
                .collect();
            serde_json::json!({"documents": docs})
        }
    })
}
