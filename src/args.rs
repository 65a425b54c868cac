//! The command line of the `qrmem` binary (part of the binary, not of the library): every
//! subcommand and flag, parsed by clap. `main.rs` turns them into calls of the library.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use qrmem::methods::MemoryKind;

#[derive(Parser)]
#[command(
    name = "qrmem",
    version,
    about = "Long-context question answering over a query-oriented memory (QRMeM)"
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Args)]
pub(crate) struct Global {
    /// Configuration file (default: $QRMEM_CONFIG, else ./qrmem.toml if present, else built-in defaults).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// OpenAI-compatible base URL (repeat for round-robin over several servers).
    #[arg(long = "llm-base-url", global = true, value_name = "URL")]
    pub(crate) llm_base_url: Vec<String>,
    /// Model name sent to the server (overrides the configuration's and an eval experiment's
    /// `model`).
    #[arg(long = "llm-model", global = true, value_name = "NAME")]
    pub(crate) llm_model: Option<String>,
    /// Requests in flight at once.
    #[arg(long, global = true, value_name = "N")]
    pub(crate) concurrency: Option<usize>,
    /// Per-request timeout in seconds.
    #[arg(long, global = true, value_name = "SECS")]
    pub(crate) timeout: Option<f64>,
    /// Do not read or write the LLM reply cache.
    #[arg(long = "no-cache", global = true)]
    pub(crate) no_cache: bool,
    /// Directory of the LLM reply cache.
    #[arg(long = "cache-dir", global = true, value_name = "DIR")]
    pub(crate) cache_dir: Option<PathBuf>,
    /// More log output (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// One LLM round trip: prints the reply, then the ledger.
    Chat(ChatArgs),
    /// Checks the LLM endpoint, the model, the embedder model directory and libtorch.
    Doctor,
    /// Builds the memory of a document (segments + query-oriented graph) into a memory file.
    Build(BuildArgs),
    /// Answers a question over a memory (or a document, building its memory first).
    Ask(AskArgs),
    /// Lists the presets (named configurations, the default first) and the method grammar.
    Methods,
    /// Answers every question of a jobs file (one JSON job per line) into an output file;
    /// resumable. Exit status 0 when every question was answered, 2 when some failed or were
    /// invalid (see their lines), 1 when the run could not start.
    Batch(BatchArgs),
    /// Runs methods over a dataset and writes results.jsonl, report.md and report.json.
    Eval(EvalArgs),
    /// Puts several runs over the same items side by side (the 0.5B and the 1.5B run; a run
    /// before and after a change): each method's score and fact recall per run, and each later
    /// run against the first with paired 95% intervals; writes compare.md, compare.json and
    /// compare.png into --out.
    Compare {
        /// The run directories (at least two); the first is the one the others are paired
        /// against. With --datasets, one run a dataset.
        #[arg(required = true, num_args = 1..)]
        runs: Vec<PathBuf>,
        /// Where to write compare.md, compare.json and compare.png (with --datasets,
        /// table1.md and table1.json).
        #[arg(long)]
        out: PathBuf,
        /// The runs are over different datasets (HotpotQA, 2WikiMultihopQA, MuSiQue): the
        /// QRMeM paper's Table 1 layout, methods by dataset, each cell F1, fact recall, tokens
        /// and calls per question, the best KN row against the best BM25 row on each, and the
        /// paper's GPT-3.5-turbo figures beside.
        #[arg(long)]
        datasets: bool,
        /// With --datasets: these methods, in this order (NAME@T for one of several max
        /// trials), comma-separated; default every method of the runs.
        #[arg(long, requires = "datasets", value_delimiter = ',')]
        methods: Vec<String>,
    },
    /// Two rows paired question by question: F1 and answer-context fact recall, the mean
    /// difference (A minus B) with the reports' paired 95% bootstrap interval, on the questions
    /// both answered. Several runs (comma-separated) pool their questions, the first named
    /// winning where two hold the same question and row.
    Pair {
        /// Run directories, comma-separated.
        runs: String,
        /// The first row: a method name, or NAME@T for its rows of max trials T.
        a: String,
        /// The second row.
        b: String,
        /// Only the questions of this kind (question type, e.g. compositional; MuSiQue's hop
        /// count, e.g. 2hop).
        #[arg(long)]
        kind: Option<String>,
    },
    /// Prints a memory's counts, failures and top entities (or a corpus directory's).
    Inspect {
        /// The memory file, or a corpus directory.
        memory: PathBuf,
        /// How many top entities to list.
        #[arg(long, default_value_t = 15)]
        top: usize,
    },
    /// Writes one self-contained HTML page of a memory and, with --trace, of one question's
    /// navigation over it (the graph or tree around it, the trace, the document strip).
    View(ViewArgs),
    /// Exports a memory's graph for Gephi / Cytoscape.
    Export(ExportArgs),
    /// Prints the effective configuration as TOML (the API key is never printed).
    Config,
    /// Dataset preparation.
    #[command(subcommand)]
    Data(DataCommand),
    /// A memory over many documents (issue 68): add and remove documents, list them, search
    /// their passages, measure retrieval with HippoRAG's protocol.
    Corpus(CorpusArgs),
}

#[derive(Args)]
pub(crate) struct CorpusArgs {
    /// The corpus directory (default: $QRMEM_HOME/corpus, ~/.cache/qrmem/corpus).
    #[arg(long, value_name = "DIR", global = true)]
    pub(crate) corpus: Option<PathBuf>,
    #[command(subcommand)]
    pub(crate) command: CorpusCommand,
}

/// A multi-hop dev file and how many of its questions (`corpus recall` and `corpus qa`).
#[derive(Args)]
pub(crate) struct DevFileArgs {
    /// The dev file: HotpotQA distractor JSON, 2WikiMultihopQA JSON or MuSiQue jsonl.
    #[arg(long = "in", value_name = "FILE")]
    pub(crate) input: PathBuf,
    /// Which dataset the file holds: hotpotqa, 2wiki or musique.
    #[arg(long, default_value = "hotpotqa")]
    pub(crate) dataset: String,
    /// Only the first N questions.
    #[arg(long)]
    pub(crate) limit: Option<usize>,
}

#[derive(Subcommand)]
pub(crate) enum CorpusCommand {
    /// Adds documents: files, or directories (their .txt and .md files, recursively). Each
    /// document is one transaction; a document already in the corpus is skipped, so an
    /// interrupted add is resumed by running it again.
    Add {
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Passages of at most this many tokens (fixed when the corpus is created).
        #[arg(long, default_value_t = qrmem::text::passages::DEFAULT_PASSAGE_TOKENS)]
        passage_tokens: usize,
        /// Each document's extraction record: `cooccurrence` (the schema extractor per
        /// passage, no LLM call) or `llm` (the QRMeM graph the configured LLM builds over the
        /// document, one joint extraction call a segment, through the reply cache).
        #[arg(long, default_value = "cooccurrence", value_parser = ["cooccurrence", "llm"])]
        extract: String,
    },
    /// Removes documents, by name or id prefix (as `ls` prints them), in one transaction.
    Remove {
        #[arg(required = true, value_name = "DOC")]
        docs: Vec<String>,
    },
    /// Lists the documents: id, passages, entities, bytes, name.
    Ls,
    /// Keeps the corpus open: reads one JSON request a line on stdin and writes one JSON reply
    /// a line on stdout, in order, until stdin ends. Requests: {"op": "add", "name", "text"}
    /// (or "path"), {"op": "remove", "docs": [...]}, {"op": "search", "query", "k"?,
    /// "retriever"?}, {"op": "ls"}. Each add or remove is one transaction, as from the
    /// command line; a bad request gets {"ok": false, "error": ...} and the next one is read.
    Serve,
    /// The best passages for a query across every document.
    Search {
        query: String,
        /// How many passages.
        #[arg(long, default_value_t = 5)]
        k: usize,
        #[arg(long, default_value = "bm25", help = retrievers_help())]
        retriever: String,
    },
    /// HippoRAG's retrieval protocol: every paragraph of a multi-hop dev file's questions as one
    /// document of the corpus, every question asked against all of them; prints passage
    /// recall@2 and @5 per retriever (use an empty --corpus directory of its own).
    Recall {
        #[command(flatten)]
        dev: DevFileArgs,
        /// Also write the measurement (per question too) as JSON here.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// The paragraphs' extraction record, as `add --extract` takes it: with `llm`, the
        /// paragraphs of the questions measured (--limit) get the LLM's record first (through
        /// the reply cache; those that have it are not extracted again).
        #[arg(long, default_value = "cooccurrence", value_parser = ["cooccurrence", "llm"])]
        extract: String,
        /// Comma-separated retrievers to measure, the first the one the others are paired
        /// with (default: bm25, bm25-hop, graph-start, graph-hop, graph-own-hop, and dense when
        /// the embedder loads; dense embeds every passage first, minutes a few thousand).
        #[arg(long, value_delimiter = ',')]
        retrievers: Vec<String>,
    },
    /// QA over the corpus: the first questions of a multi-hop dev file (every paragraph of
    /// the file added, whatever --limit, as `recall` adds them) answered by the LLM from the passages each
    /// retriever ranks best; writes OUT/results.jsonl (a line per question and retriever, as
    /// each finishes; a second run answers only what is missing) and OUT/report.md (EM, F1,
    /// the gold paragraphs shown, F1 paired with the first retriever).
    Qa {
        #[command(flatten)]
        dev: DevFileArgs,
        /// Comma-separated retrievers or navigators over the co-occurrence memory of each
        /// question's candidate passages (as `ask --corpus --retriever` takes them); the first
        /// is the one the others are paired with.
        #[arg(long, default_value = "bm25,bm25-hop,graph-own-hop")]
        retrievers: String,
        /// Tokens of passages in each answer prompt.
        #[arg(long, default_value_t = 400)]
        context_tokens: usize,
        /// The run directory.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// The paragraphs' extraction record, as `recall --extract` takes it: with `llm`, the
        /// paragraphs of the questions asked (--limit) get the LLM's record first (the other
        /// paragraphs the co-occurrence one), so the navigators read the LLM's relations
        /// there.
        #[arg(long, default_value = "cooccurrence", value_parser = ["cooccurrence", "llm"])]
        extract: String,
    },
}

#[derive(Subcommand)]
pub(crate) enum DataCommand {
    /// LongBench-style long contexts from HotpotQA, 2WikiMultihopQA or MuSiQue (the stand-in
    /// for LongBench's versions of them).
    LongbenchStyle {
        /// The dev file: HotpotQA distractor JSON, 2WikiMultihopQA JSON or MuSiQue jsonl.
        #[arg(long = "in", value_name = "FILE")]
        input: PathBuf,
        /// Which dataset the file holds: hotpotqa, 2wiki or musique.
        #[arg(long, default_value = "hotpotqa")]
        dataset: String,
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
pub(crate) struct BuildArgs {
    /// The document (UTF-8 text).
    #[arg(long, value_name = "FILE")]
    pub(crate) doc: PathBuf,
    /// The question the graph is oriented to (optional).
    #[arg(long)]
    pub(crate) question: Option<String>,
    /// Where to write the memory file.
    #[arg(long, value_name = "MEMORY")]
    pub(crate) out: PathBuf,
    /// Ablation: no question generation or graph update.
    #[arg(long)]
    pub(crate) no_graph_update: bool,
    /// Ablation: schema-based extractor only, no LLM entity recognition.
    #[arg(long)]
    pub(crate) no_open_entity: bool,
    /// Segment length in cl100k tokens (default from the configuration: 600).
    #[arg(long)]
    pub(crate) segment_tokens: Option<usize>,
    /// Do not compute the segment and edge vectors (the navigators then embed on demand).
    #[arg(long)]
    pub(crate) no_vectors: bool,
    /// What to build: graph (the QRMeM memory, default), no-graph-update, no-open-entity,
    /// segments, summary-tree (seed 002), knowledge-tree, memwalker (seed 000) or garlic (003).
    #[arg(long, default_value = "graph")]
    pub(crate) kind: MemoryKind,
    /// Summary tree only: append the document to the tree already at --out (only the new
    /// right spine is summarised).
    #[arg(long)]
    pub(crate) append: bool,
}

#[derive(Args)]
pub(crate) struct AskArgs {
    /// A memory file built by `qrmem build` (any kind: it is read from the file).
    #[arg(
        long,
        value_name = "MEMORY",
        conflicts_with_all = ["doc", "corpus"],
        required_unless_present_any = ["doc", "corpus"]
    )]
    pub(crate) memory: Option<PathBuf>,
    /// A corpus (`qrmem corpus add`): the question is answered across its documents, from the
    /// passages --retriever ranks best, each under its document's name.
    #[arg(long, value_name = "DIR", conflicts_with = "doc")]
    pub(crate) corpus: Option<PathBuf>,
    /// With --corpus: bm25, bm25-hop, dense, graph-start, graph-hop or graph-own-hop (default:
    /// the best recall over eval/runs/corpus-recall's three corpora), or a navigator over the
    /// co-occurrence memory of the question's best 20 candidate passages (e.g.
    /// kn-cooccurrence-hop-final-s-mix-passages400; its name sets its budget), or a chain
    /// walking those passages hop by hop (e.g. chain-path-passages400).
    #[arg(long, requires = "corpus", default_value = "graph-own-hop")]
    pub(crate) retriever: String,
    /// With --corpus: tokens of passages in the answer prompt (0: as many as the window holds).
    #[arg(long, requires = "corpus", default_value_t = 400)]
    pub(crate) context_tokens: usize,
    /// A document: its memory is built first (oriented to the question).
    #[arg(long, value_name = "FILE")]
    pub(crate) doc: Option<PathBuf>,
    /// With --doc: also save the built memory here.
    #[arg(long, value_name = "MEMORY", requires = "doc")]
    pub(crate) save_memory: Option<PathBuf>,
    /// With --doc: segment length in cl100k tokens.
    #[arg(long, requires = "doc")]
    pub(crate) segment_tokens: Option<usize>,
    #[arg(long)]
    pub(crate) question: String,
    /// A multiple-choice option (repeat, in order A, B, C, ...): the answer is the letter.
    #[arg(long = "option")]
    pub(crate) options: Vec<String>,
    /// A method of the grammar (`qrmem methods` lists it): kn, ges, te and their modifiers,
    /// a baseline (bm25-own-hop-passages400, bm25-top3, ...), chain-passagesN, or a seed
    /// system (summary-tree, knowledge-tree, memwalker, garlic). Default: the preset.
    #[arg(long, conflicts_with = "preset")]
    pub(crate) method: Option<String>,
    /// A named configuration (`qrmem methods` lists them): fast (the default with --doc),
    /// qrmem-paper, qrmem-best, qrmem-no-build, chain. With --memory and neither flag, the
    /// memory's own method (a tree's or GARLIC's, else the configuration's navigator).
    #[arg(long)]
    pub(crate) preset: Option<String>,
    #[arg(long)]
    pub(crate) max_trials: Option<usize>,
    /// Ablation: score edges with the question only.
    #[arg(long)]
    pub(crate) no_reflection: bool,
    /// Ablation: answer from the question entities' segments only.
    #[arg(long)]
    pub(crate) no_navigation: bool,
    /// Write the full trace as JSON here.
    #[arg(long, value_name = "FILE")]
    pub(crate) trace: Option<PathBuf>,
    /// knowledge-tree / memwalker with --doc: characters per leaf chunk (the seed: 5000).
    #[arg(long, requires = "doc")]
    pub(crate) chunk_chars: Option<usize>,
}

#[derive(Args)]
pub(crate) struct BatchArgs {
    /// Jobs, one per line: {"id", "doc" | "doc_path", "questions": [{"id", "question", "options"?}]}.
    /// A doc_path is relative to the jobs file's directory.
    #[arg(long, value_name = "FILE")]
    pub(crate) input: PathBuf,
    /// Answers, one JSON line per question; re-running skips the questions already there.
    #[arg(long, value_name = "FILE")]
    pub(crate) output: PathBuf,
    /// A method of the grammar (`qrmem methods`); default: the preset.
    #[arg(long, conflicts_with = "preset")]
    pub(crate) method: Option<String>,
    /// A named configuration (`qrmem methods`; default fast: one call per question, no LLM
    /// build).
    #[arg(long, conflicts_with = "corpus")]
    pub(crate) preset: Option<String>,
    /// Where built memories are kept, keyed by document content (default ~/.cache/qrmem/memories).
    #[arg(long, value_name = "DIR")]
    pub(crate) memory_dir: Option<PathBuf>,
    /// Refuse documents larger than this many bytes.
    #[arg(long, default_value_t = 4 * 1024 * 1024)]
    pub(crate) max_doc_bytes: u64,
    /// Try the questions that failed in an earlier run again.
    #[arg(long)]
    pub(crate) retry_failed: bool,
    /// Ask every question across this corpus (`qrmem corpus add`); jobs then name no document.
    #[arg(long, value_name = "DIR", conflicts_with = "method")]
    pub(crate) corpus: Option<PathBuf>,
    /// With --corpus: bm25, bm25-hop, dense, graph-start, graph-hop or graph-own-hop (default:
    /// the best recall over eval/runs/corpus-recall's three corpora), or a navigator over the
    /// co-occurrence memory of the question's best 20 candidate passages (e.g.
    /// kn-cooccurrence-hop-final-s-mix-passages400; its name sets its budget), or a chain
    /// walking those passages hop by hop (e.g. chain-path-passages400).
    #[arg(long, requires = "corpus", default_value = "graph-own-hop")]
    pub(crate) retriever: String,
    /// With --corpus: tokens of passages in the answer prompt (0: as many as the window holds).
    #[arg(long, requires = "corpus", default_value_t = 400)]
    pub(crate) context_tokens: usize,
}

#[derive(Args)]
pub(crate) struct EvalArgs {
    /// An experiment file (eval/*.toml): title, dataset, data, methods, limit, seed, words,
    /// trials, reference (the row the report pairs the others with; bm25-top3), notes. Its data
    /// path is relative to the file; flags override it.
    #[arg(long, value_name = "FILE")]
    pub(crate) experiment: Option<PathBuf>,
    /// hotpotqa (distractor json), longbench (jsonl), longbench-style (built from HotpotQA
    /// json), 2wiki (2WikiMultihopQA json), musique (MuSiQue jsonl), 2wiki-longbench-style and
    /// musique-longbench-style (their LongBench-style long contexts), quality (L-Eval jsonl),
    /// quality-flat (QuALITY's own jsonl), qasper (L-Eval jsonl).
    #[arg(long)]
    pub(crate) dataset: Option<String>,
    #[arg(long, value_name = "PATH")]
    pub(crate) data: Option<PathBuf>,
    /// Comma-separated methods (the list is the registry's: `qrmem::methods::method_names`).
    #[arg(long, value_delimiter = ',', help = methods_help())]
    pub(crate) methods: Vec<String>,
    /// The first N questions only.
    #[arg(long)]
    pub(crate) limit: Option<usize>,
    /// Leave out the first N of those (items 31-60: --limit 60 --skip 30).
    #[arg(long)]
    pub(crate) skip: Option<usize>,
    /// Seed of the LongBench-style generation.
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Words per LongBench-style context.
    #[arg(long)]
    pub(crate) words: Option<usize>,
    /// Max-trials sweep for the navigators: "1..6" or "1,2,4" (default: the configuration's).
    #[arg(long)]
    pub(crate) trials: Option<String>,
    /// The run directory: results.jsonl, builds.jsonl, memories/, report.md, report.json.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: PathBuf,
    /// Run the pairs that failed in an earlier run again.
    #[arg(long)]
    pub(crate) retry_failed: bool,
    /// Build (or load) the methods' memories and record the builds, but answer no question
    /// (two documents at a time; the memories stay in DIR/memories for later runs).
    #[arg(long)]
    pub(crate) build_only: bool,
    /// Answer over the memories MODEL built (as --llm-model names it; their files' keys carry
    /// it) and build none: a pair whose memory is not in DIR/memories is left undone. Lets a
    /// larger model answer over memories built once with a smaller one. Overrides the
    /// experiment's `memories_built_by`.
    #[arg(long, value_name = "MODEL")]
    pub(crate) memories_built_by: Option<String>,
    /// Only (re)write the report from the results already in DIR (with the dataset at hand,
    /// first computing the spans of rows recorded before rows carried them: DIR/backfill.jsonl).
    #[arg(long)]
    pub(crate) report_only: bool,
    /// Measure, without the LLM, what the baselines among --methods would show the answerer
    /// (fact recall, gold share, tokens per question) and write DIR/contexts.md, with each
    /// question's spans in DIR/contexts.jsonl; answer nothing.
    #[arg(long)]
    pub(crate) contexts_only: bool,
    /// Keep every question's full trace as JSON in this directory.
    #[arg(long, value_name = "DIR")]
    pub(crate) trace_dir: Option<PathBuf>,
    /// Also write an HTML page per question next to its trace (in DIR/traces unless
    /// --trace-dir names another directory), and an index page that report.md links.
    #[arg(long)]
    pub(crate) html: bool,
}

#[derive(Args)]
pub(crate) struct ViewArgs {
    /// The memory file (any kind).
    #[arg(long, value_name = "MEMORY", required_unless_present = "corpus")]
    pub(crate) memory: Option<PathBuf>,
    /// A trace over that memory (`qrmem ask --trace`, or `qrmem eval --trace-dir`, whose files
    /// also carry the gold evidence where the dataset gives it).
    #[arg(long, value_name = "TRACE", conflicts_with = "corpus")]
    pub(crate) trace: Option<PathBuf>,
    /// A corpus (`qrmem corpus add`) instead of a memory: the page of --question over it, the
    /// passages --retriever ranks best and the entities the shown ones name (no LLM call).
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with = "memory",
        requires = "question"
    )]
    pub(crate) corpus: Option<PathBuf>,
    /// With --corpus: the question.
    #[arg(long, requires = "corpus")]
    pub(crate) question: Option<String>,
    /// With --corpus: bm25, bm25-hop, graph-start, graph-hop or graph-own-hop.
    #[arg(long, requires = "corpus", default_value = "graph-own-hop")]
    pub(crate) retriever: String,
    /// With --corpus: the answer prompt's budget, in tokens of passages.
    #[arg(long, requires = "corpus", default_value_t = 400)]
    pub(crate) context_tokens: usize,
    /// Where to write the page.
    #[arg(long, value_name = "PAGE")]
    pub(crate) out: PathBuf,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum ExportFormat {
    Graphml,
    Json,
}

#[derive(Args)]
pub(crate) struct ExportArgs {
    pub(crate) memory: PathBuf,
    #[arg(long, value_enum)]
    pub(crate) format: ExportFormat,
    /// Output file (default: standard output).
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
}

#[derive(Args)]
pub(crate) struct ChatArgs {
    /// The prompt; `-` reads it from standard input.
    pub(crate) prompt: String,
    /// A system message.
    #[arg(long)]
    pub(crate) system: Option<String>,
    /// A JSON Schema file: the reply must be JSON following it (parsed, retried as the paper says).
    #[arg(long, value_name = "FILE")]
    pub(crate) schema: Option<PathBuf>,
    /// Ledger stage label.
    #[arg(long, default_value = "chat")]
    pub(crate) stage: String,
    #[arg(long)]
    pub(crate) max_tokens: Option<u32>,
    #[arg(long)]
    pub(crate) temperature: Option<f32>,
    /// Also write the ledger as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub(crate) ledger_out: Option<PathBuf>,
}

/// The corpus's `--retriever` help, from the retrievers' table.
fn retrievers_help() -> String {
    format!(
        "One of: {}",
        qrmem::methods::method::Form::help(qrmem::corpus::retrieve::FORMS)
    )
}

/// The `--methods` help: every method family the registry knows, so the list cannot go stale.
fn methods_help() -> String {
    format!(
        "Comma-separated methods: {}",
        qrmem::methods::method_names()
    )
}
