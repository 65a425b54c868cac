//! The memories methods read: their kinds ([`MemoryKind`]), a prepared memory of any kind
//! ([`Prepared`]), how one is built for a document ([`prepare`]), saved ([`save`]) and opened
//! again with its kind read from the file's format ([`open`]). The cost of a build is read off
//! the service's (scoped) ledger.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::method::MethodSpec;
use crate::answer::{AnswerError, Window};
use crate::config::{Config, ExtractionFormat};
use crate::embed::{EmbedError, Embedder};
use crate::llm::Service;
use crate::memory::{BuildError, BuildParams, Builder, Memory};
use crate::navigate::NavigateError;
use crate::prompts::{PromptId, Prompts};
use crate::text::Span;

use super::garlic::{Garlic, GarlicCtx, GarlicError, GarlicParams};
use super::knowledge_tree::{BuildCtx, KnowledgeTree, KtError, KtParams, Variant};
use super::summary_tree::{SummaryTree, TreeError, TreeParams};

/// The memory a method reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryKind {
    /// The full QRMeM memory: graph with question generation and graph update.
    Graph,
    /// Ablation: no question generation or graph update.
    NoGraphUpdate,
    /// Ablation: schema-based entities only.
    NoOpenEntity,
    /// Not the paper's: schema entities and sentence co-occurrence edges, no LLM call
    /// (`memory::build_cooccurrence`).
    Cooccurrence,
    /// Segments only (no LLM call): the baselines.
    Segments,
    /// A left-heavy summary tree over the segments (seed 002).
    SummaryTree,
    /// A Knowledge Tree with structured metadata (seed 000).
    KnowledgeTree,
    /// The same tree with plain summaries (MemWalker, seed 000's baseline). Written as
    /// "memwalker" like its method and file names; "mem-walker" (kebab-case, before) still reads.
    #[serde(rename = "memwalker", alias = "mem-walker")]
    MemWalker,
    /// GARLIC's weighted DAG of Information Points (seed 003).
    Garlic,
}

impl std::str::FromStr for MemoryKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        MemoryKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = MemoryKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown memory kind '{s}' (one of: {})", names.join(", "))
            })
    }
}

impl MemoryKind {
    /// Every kind, in the order of help texts.
    pub const ALL: [MemoryKind; 9] = [
        MemoryKind::Graph,
        MemoryKind::NoGraphUpdate,
        MemoryKind::NoOpenEntity,
        MemoryKind::Cooccurrence,
        MemoryKind::Segments,
        MemoryKind::SummaryTree,
        MemoryKind::KnowledgeTree,
        MemoryKind::MemWalker,
        MemoryKind::Garlic,
    ];

    /// The kind `name` names (as [`MemoryKind::name`] writes it).
    pub fn from_name(name: &str) -> Option<MemoryKind> {
        MemoryKind::ALL.into_iter().find(|k| k.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            MemoryKind::Graph => "graph",
            MemoryKind::NoGraphUpdate => "no-graph-update",
            MemoryKind::NoOpenEntity => "no-open-entity",
            MemoryKind::Cooccurrence => "cooccurrence",
            MemoryKind::Segments => "segments",
            MemoryKind::SummaryTree => "summary-tree",
            MemoryKind::KnowledgeTree => "knowledge-tree",
            MemoryKind::MemWalker => "memwalker",
            MemoryKind::Garlic => "garlic",
        }
    }

    /// The prompts its build with `params` sends (their fingerprint is part of the memory's
    /// key). The paper's graph and the no-open-entity ablation also name the two question-less
    /// extraction prompts, which no build sends since the no-graph-update ablation asks the
    /// joint call and leaves its questions out (issue 56): taking them off would re-key every
    /// committed graph. No-graph-update names what it sends, so a memory built with the former
    /// question-less prompt is never read as one of today's.
    pub fn build_prompts(self, params: &BuildParams) -> &'static [PromptId] {
        let compact = params.extraction_format == ExtractionFormat::Compact;
        match self {
            MemoryKind::NoGraphUpdate if compact => &[
                PromptId::Summary,
                PromptId::ExtractCompact,
                PromptId::RelationUpdate,
            ],
            MemoryKind::NoGraphUpdate => &[
                PromptId::Summary,
                PromptId::Extract,
                PromptId::RelationUpdate,
            ],
            MemoryKind::Graph | MemoryKind::NoOpenEntity if compact => &[
                PromptId::Summary,
                PromptId::ExtractCompact,
                PromptId::ExtractCompactNoQuestions,
                PromptId::RelationUpdate,
            ],
            MemoryKind::Graph | MemoryKind::NoOpenEntity => &[
                PromptId::Summary,
                PromptId::Extract,
                PromptId::ExtractNoQuestions,
                PromptId::RelationUpdate,
            ],
            MemoryKind::Segments | MemoryKind::Cooccurrence => &[],
            MemoryKind::SummaryTree => &[PromptId::TreeSummary],
            MemoryKind::KnowledgeTree => &[PromptId::KtTaxonomy, PromptId::KtNode],
            MemoryKind::MemWalker => &[PromptId::Summary],
            MemoryKind::Garlic => &[PromptId::GarlicSummary],
        }
    }

    /// Whether a memory of this kind is a QRMeM memory file (the graph, its ablations, or the
    /// segments only), which the graph navigators and the baselines can both read.
    pub fn is_qrmem_memory(self) -> bool {
        self.is_graph() || self == MemoryKind::Segments
    }

    /// Whether this memory is an entity graph the navigators read (the paper's, its ablations,
    /// or the co-occurrence graph): its builds are journaled with their graph diagnostics.
    pub fn is_graph(self) -> bool {
        self.is_extracted() || self == MemoryKind::Cooccurrence
    }

    /// Whether this memory is built by the joint extraction call (the paper's graph and its
    /// ablations): only these depend on the extraction options (`extraction_format`,
    /// `extraction_cut_repeats`, `extraction_max_entities`).
    pub fn is_extracted(self) -> bool {
        matches!(
            self,
            MemoryKind::Graph | MemoryKind::NoGraphUpdate | MemoryKind::NoOpenEntity
        )
    }

    /// Whether preparing this memory calls the LLM.
    pub fn needs_llm(self) -> bool {
        !matches!(self, MemoryKind::Segments | MemoryKind::Cooccurrence)
    }

    /// Whether a build of this memory is saved in `MemoryDir` and journaled in `builds.jsonl`:
    /// every memory the LLM builds, and every graph (the segments-only index, rebuilt in
    /// milliseconds, is neither).
    pub fn is_kept(self) -> bool {
        self.needs_llm() || self.is_graph()
    }

    /// The build parameters of this kind under `config`.
    pub fn params(self, config: &Config) -> BuildParams {
        let mut p = BuildParams::from_config(config);
        match self {
            MemoryKind::NoGraphUpdate => p.graph_update = false,
            MemoryKind::NoOpenEntity => p.open_entity = false,
            MemoryKind::Cooccurrence => p.cooccurrence = true,
            MemoryKind::Graph
            | MemoryKind::Segments
            | MemoryKind::SummaryTree
            | MemoryKind::KnowledgeTree
            | MemoryKind::MemWalker
            | MemoryKind::Garlic => {}
        }
        // The extraction options shape the joint extraction call only: the other kinds are
        // built without it, and their keys do not depend on them.
        if self.is_extracted() {
            p
        } else {
            p.with_former_extraction()
        }
    }
}

/// Why a method could not produce an answer.
#[derive(Debug, Error)]
pub enum MethodError {
    #[error("building the memory failed: {0}")]
    Build(#[from] BuildError),
    #[error("embedding the memory failed: {0}")]
    Embed(#[from] EmbedError),
    #[error(transparent)]
    Navigate(#[from] NavigateError),
    #[error(transparent)]
    Answer(#[from] AnswerError),
    #[error("summary tree: {0}")]
    Tree(#[from] TreeError),
    #[error("knowledge tree: {0}")]
    Kt(#[from] KtError),
    #[error("GARLIC: {0}")]
    Garlic(#[from] GarlicError),
    #[error("the method {method} cannot read a memory of kind {kind}")]
    WrongMemory { method: String, kind: String },
    /// A memory file that cannot be read or written (the message names the file).
    #[error("{0}")]
    File(String),
    /// An oracle row (gold-sentences, gold-passages) for an item without gold evidence: only
    /// the eval harness knows an item's evidence, and only for datasets that give it.
    #[error("{method} shows the item's gold evidence, and this question has none (only `qrmem eval` on a dataset with supporting facts, such as hotpotqa or longbench-style, gives it)")]
    NoGoldEvidence { method: String },
    /// The store may only read memories (`MemoryDir::reuse_only`) and this one is not built.
    #[error("no {kind} memory built by {model} is in {path} (this run reads memories, it does not build them)")]
    NotBuilt {
        kind: String,
        model: String,
        path: String,
    },
}

/// A prepared memory, one variant per file format: a QRMeM memory (the graph, the
/// co-occurrence memory, the ablations' graphs, or the baselines' segments only), a summary
/// tree, a knowledge tree (or MemWalker tree), or a GARLIC graph.
#[derive(Clone, Debug)]
pub enum Prepared {
    Graph(Box<Memory>),
    Tree(Box<SummaryTree>),
    Kt(Box<KnowledgeTree>),
    Garlic(Box<Garlic>),
}

/// What every memory format says about itself: one implementation per file format (the graph
/// memory, the summary tree, the knowledge tree, GARLIC's graph). A new kind of memory is one
/// more implementation and one more [`Prepared`] variant, not an arm in each of these.
pub trait MemoryFormat {
    /// The kind of this memory.
    fn kind(&self) -> MemoryKind;
    /// Segments (leaves) of the document.
    fn segments(&self) -> usize;
    /// Entities (graph memories only).
    fn entities(&self) -> usize {
        0
    }
    /// Relations, or a tree's or DAG's summary nodes.
    fn relations(&self) -> usize;
    /// Steps of the build that failed.
    fn failures(&self) -> usize;
    /// What building it cost.
    fn ledger(&self) -> &crate::llm::LedgerSnapshot;
    /// The byte range in the document of every unit a trace's segment indices refer to
    /// (empty ranges for summary nodes).
    fn unit_spans(&self) -> Vec<Span>;
    /// The text of every unit of [`MemoryFormat::unit_spans`] (empty for summary nodes).
    fn unit_texts(&self) -> Vec<String>;
    /// What `qrmem inspect` and `qrmem build` print.
    fn describe(&self, _top: usize) -> String {
        format!(
            "{}: {} leaves, {} summary nodes, {} failures\n",
            self.kind().name(),
            self.segments(),
            self.relations(),
            self.failures()
        )
    }
    /// What the memory holds, in one line (after a build).
    fn summary_line(&self) -> String {
        format!(
            "built the {} memory: {} leaves, {} summary nodes, {} failures",
            self.kind().name(),
            self.segments(),
            self.relations(),
            self.failures()
        )
    }
}

impl MemoryFormat for Memory {
    /// Written in the file; in a memory written before it was, read from its build parameters.
    fn kind(&self) -> MemoryKind {
        match self.kind.as_deref() {
            Some(k) => MemoryKind::from_name(k).unwrap_or(MemoryKind::Graph),
            None if self.params.cooccurrence => MemoryKind::Cooccurrence,
            None if self.graph.node_count() == 0 && self.ledger.total().requests == 0 => {
                MemoryKind::Segments
            }
            None if !self.params.graph_update => MemoryKind::NoGraphUpdate,
            None if !self.params.open_entity => MemoryKind::NoOpenEntity,
            None => MemoryKind::Graph,
        }
    }
    fn segments(&self) -> usize {
        self.segments.len()
    }
    fn entities(&self) -> usize {
        self.entity_count()
    }
    fn relations(&self) -> usize {
        self.relation_count()
    }
    fn failures(&self) -> usize {
        self.failures.len()
    }
    fn ledger(&self) -> &crate::llm::LedgerSnapshot {
        &self.ledger
    }
    fn unit_spans(&self) -> Vec<Span> {
        super::segment_spans(self)
    }
    fn unit_texts(&self) -> Vec<String> {
        self.segments.iter().map(|s| s.text.clone()).collect()
    }
    fn describe(&self, top: usize) -> String {
        crate::memory::describe(self, top)
    }
    fn summary_line(&self) -> String {
        format!(
            "built the memory: {} segments, {} entities, {} relations, {} failures",
            self.segments.len(),
            self.entity_count(),
            self.relation_count(),
            self.failures.len()
        )
    }
}

impl MemoryFormat for SummaryTree {
    fn kind(&self) -> MemoryKind {
        MemoryKind::SummaryTree
    }
    fn segments(&self) -> usize {
        self.leaves.len()
    }
    fn relations(&self) -> usize {
        self.summaries.len()
    }
    fn failures(&self) -> usize {
        self.failures.len()
    }
    fn ledger(&self) -> &crate::llm::LedgerSnapshot {
        &self.ledger
    }
    fn unit_spans(&self) -> Vec<Span> {
        self.leaf_spans()
    }
    fn unit_texts(&self) -> Vec<String> {
        self.leaves.clone()
    }
    fn describe(&self, _top: usize) -> String {
        format!(
            "summary tree: {} leaves, {} summaries, {} failures\n",
            self.leaves.len(),
            self.summaries.len(),
            self.failures.len()
        )
    }
}

impl MemoryFormat for KnowledgeTree {
    fn kind(&self) -> MemoryKind {
        if self.variant == Variant::MemWalker {
            MemoryKind::MemWalker
        } else {
            MemoryKind::KnowledgeTree
        }
    }
    fn segments(&self) -> usize {
        self.nodes.iter().filter(|n| n.content.is_some()).count()
    }
    fn relations(&self) -> usize {
        self.nodes.iter().filter(|n| n.content.is_none()).count()
    }
    fn failures(&self) -> usize {
        self.failures.len()
    }
    fn ledger(&self) -> &crate::llm::LedgerSnapshot {
        &self.ledger
    }
    fn unit_spans(&self) -> Vec<Span> {
        self.node_spans()
    }
    fn unit_texts(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| n.content.clone().unwrap_or_default())
            .collect()
    }
}

impl MemoryFormat for Garlic {
    fn kind(&self) -> MemoryKind {
        MemoryKind::Garlic
    }
    fn segments(&self) -> usize {
        self.nodes.iter().filter(|n| n.level == 1).count()
    }
    fn relations(&self) -> usize {
        self.nodes.iter().filter(|n| n.level > 1).count()
    }
    fn failures(&self) -> usize {
        self.failures.len()
    }
    fn ledger(&self) -> &crate::llm::LedgerSnapshot {
        &self.ledger
    }
    fn unit_spans(&self) -> Vec<Span> {
        self.node_spans()
    }
    fn unit_texts(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| {
                if n.level == 1 {
                    n.text.clone()
                } else {
                    String::new()
                }
            })
            .collect()
    }
}

impl Prepared {
    /// This memory as its format: what every kind says about itself.
    pub fn format(&self) -> &dyn MemoryFormat {
        match self {
            Prepared::Graph(m) => m.as_ref(),
            Prepared::Tree(t) => t.as_ref(),
            Prepared::Kt(t) => t.as_ref(),
            Prepared::Garlic(g) => g.as_ref(),
        }
    }

    /// The kind of this memory ([`MemoryFormat::kind`]).
    pub fn kind(&self) -> MemoryKind {
        self.format().kind()
    }

    /// What the memory holds, in one line (after a build).
    pub fn summary_line(&self) -> String {
        self.format().summary_line()
    }

    /// What `qrmem inspect` and `qrmem build` print: a graph's counts, failures, diagnostics and
    /// `top` entities; a tree's or DAG's counts.
    pub fn describe(&self, top: usize) -> String {
        self.format().describe(top)
    }

    /// What building this memory cost.
    pub fn ledger(&self) -> &crate::llm::LedgerSnapshot {
        self.format().ledger()
    }

    /// The name of this memory's kind, for messages.
    pub fn kind_name(&self) -> String {
        match self {
            Prepared::Graph(_) => "graph".into(),
            other => other.kind().name().into(),
        }
    }

    /// The method that answers from this memory when none is named: the seed systems' own, and
    /// `configured` (the configuration's navigator) for a QRMeM or segments memory.
    pub fn default_method(&self, configured: &str) -> Result<MethodSpec, String> {
        match self.kind() {
            kind if kind.is_qrmem_memory() => configured.parse(),
            kind => kind.name().parse(),
        }
    }

    /// Segments (leaves) of the document.
    pub fn segments(&self) -> usize {
        self.format().segments()
    }
    pub fn entities(&self) -> usize {
        self.format().entities()
    }
    pub fn relations(&self) -> usize {
        self.format().relations()
    }
    /// The byte range in the document of every unit a trace's segment indices refer to:
    /// segments (the graph and the baselines), leaves (summary tree), nodes (knowledge tree,
    /// MemWalker, GARLIC: empty ranges for summary nodes).
    pub fn unit_spans(&self) -> Vec<Span> {
        self.format().unit_spans()
    }

    /// The text of every unit of [`Prepared::unit_spans`] (empty for summary nodes).
    pub fn unit_texts(&self) -> Vec<String> {
        self.format().unit_texts()
    }

    /// Whether the units are `document`'s own pieces at their spans (what a trace's spans
    /// assume: a chunker that dropped a blank piece would shift them).
    pub fn covers(&self, document: &str) -> bool {
        let spans = self.unit_spans();
        spans.iter().map(|s| s.1).max() == Some(document.len())
            && spans
                .iter()
                .zip(self.unit_texts())
                .all(|(&(a, b), t)| a == b || document.get(a..b) == Some(t.as_str()))
    }

    pub fn failures(&self) -> usize {
        self.format().failures()
    }
}

/// Opens a saved memory of any kind: the kind is read from the file's `format` field and, in
/// a graph memory, its `kind` field (a kind this version does not know is refused).
pub fn open(path: &std::path::Path) -> Result<Prepared, MethodError> {
    #[derive(Deserialize)]
    struct Header {
        format: Option<String>,
        kind: Option<String>,
    }
    let bytes = crate::fsutil::read_maybe_gz(path).map_err(|e| {
        MethodError::File(format!(
            "cannot read the memory file {}: {e}",
            path.display()
        ))
    })?;
    // The format of every memory file is a top-level JSON field; a file that is not JSON is
    // left to the graph loader, which says what is wrong with it.
    let (format, written) = serde_json::from_slice::<Header>(&bytes)
        .map(|h| (h.format, h.kind))
        .unwrap_or((None, None));
    let kind = match format.as_deref() {
        Some(super::summary_tree::FORMAT) => MemoryKind::SummaryTree,
        Some(super::knowledge_tree::FORMAT) => MemoryKind::KnowledgeTree,
        Some(super::garlic::FORMAT) => MemoryKind::Garlic,
        _ => match written.as_deref() {
            None => MemoryKind::Graph,
            Some(k) => MemoryKind::from_name(k).ok_or_else(|| {
                MethodError::File(format!(
                    "the memory file {} is of kind '{k}', which this version of qrmem does not know (kinds: {})",
                    path.display(),
                    MemoryKind::ALL.map(MemoryKind::name).join(", ")
                ))
            })?,
        },
    };
    load_prepared(kind, path).map_err(MethodError::File)
}

/// Saves a prepared memory (atomically: a crash leaves the previous file).
pub fn save(prepared: &Prepared, path: &std::path::Path) -> Result<(), MethodError> {
    match prepared {
        Prepared::Graph(m) => crate::memory::save(m, path).map_err(|e| e.to_string()),
        Prepared::Tree(t) => super::summary_tree::save(t, path).map_err(|e| e.to_string()),
        Prepared::Kt(t) => super::knowledge_tree::save(t, path),
        Prepared::Garlic(g) => super::garlic::save(g, path),
    }
    .map_err(MethodError::File)
}

/// Reads a saved memory of `kind` (the loader is chosen by the kind).
pub fn load_prepared(kind: MemoryKind, path: &std::path::Path) -> Result<Prepared, String> {
    match kind {
        MemoryKind::SummaryTree => super::summary_tree::load(path)
            .map(|t| Prepared::Tree(Box::new(t)))
            .map_err(|e| e.to_string()),
        MemoryKind::Garlic => super::garlic::load(path).map(|g| Prepared::Garlic(Box::new(g))),
        MemoryKind::KnowledgeTree | MemoryKind::MemWalker => {
            super::knowledge_tree::load(path).map(|t| Prepared::Kt(Box::new(t)))
        }
        MemoryKind::Graph
        | MemoryKind::NoGraphUpdate
        | MemoryKind::NoOpenEntity
        | MemoryKind::Cooccurrence
        | MemoryKind::Segments => crate::memory::load(path)
            .map(|m| Prepared::Graph(Box::new(m)))
            .map_err(|e| e.to_string()),
    }
}

/// What every command prepares memories and answers questions with: the LLM service, the
/// prompts, the embedder and the configuration (`qrmem ask`, `eval`, `batch` and `build` alike).
pub struct Runtime<'a> {
    pub llm: &'a Service,
    pub prompts: &'a Prompts,
    pub embedder: &'a dyn Embedder,
    pub config: &'a Config,
}

impl<'a> Runtime<'a> {
    /// What a method answers with on this runtime: its LLM, prompts and embedder, the window
    /// of its configuration's `[navigate]` and its `[answer]`, and the question's gold evidence
    /// where the harness has it.
    pub fn ctx(
        &self,
        gold: Option<&'a [crate::text::Span]>,
        chain: &'a [super::oracle::GoldHop],
    ) -> super::Ctx<'a> {
        super::Ctx {
            llm: self.llm,
            prompts: self.prompts,
            embedder: self.embedder,
            window: crate::answer::Window::of(&self.config.navigate),
            answer: self.config.answer,
            gold,
            chain,
        }
    }
}

/// An empty summary tree with the configuration's segment length as its leaf length.
pub(super) fn new_summary_tree(ctx: &Runtime<'_>) -> SummaryTree {
    SummaryTree::new(
        TreeParams {
            leaf_tokens: MemoryKind::SummaryTree.params(ctx.config).segment_tokens,
            ..TreeParams::default()
        },
        ctx.llm.model(),
    )
}

/// Appends `document` to `tree` (only the new right spine is summarised); returns the number
/// of summaries written.
pub(super) async fn append_to_tree(
    ctx: &Runtime<'_>,
    tree: &mut SummaryTree,
    document: &str,
    name: &str,
) -> Result<usize, MethodError> {
    let nav = &ctx.config.navigate;
    let window = Window::of(nav);
    Ok(tree
        .append(ctx.llm, ctx.prompts, window, document, name)
        .await?)
}

/// Settings of one build that the configuration does not hold (the command line's).
#[derive(Clone, Debug)]
pub struct Tuning {
    /// Knowledge tree / MemWalker: characters per leaf chunk (default: the seed's 5000).
    pub chunk_chars: Option<usize>,
    /// GARLIC: tokens per level-1 chunk (default: GARLIC's own).
    pub chunk_tokens: Option<usize>,
    /// Graph and segments memories: compute the segment and edge vectors (the navigators
    /// otherwise embed on demand).
    pub vectors: bool,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            chunk_chars: None,
            chunk_tokens: None,
            vectors: true,
        }
    }
}

/// Prepares the memory of `kind` for `document` (oriented to `question` where given): the
/// segments for the baselines, the built and embedded graph for the navigators.
pub async fn prepare(
    kind: MemoryKind,
    ctx: &Runtime<'_>,
    document: &str,
    question: Option<&str>,
    name: &str,
    progress: Option<indicatif::ProgressBar>,
) -> Result<Prepared, MethodError> {
    prepare_with(
        kind,
        ctx,
        document,
        question,
        name,
        progress,
        &Tuning::default(),
    )
    .await
}

/// [`prepare`] with the settings of `tuning`.
pub async fn prepare_with(
    kind: MemoryKind,
    ctx: &Runtime<'_>,
    document: &str,
    question: Option<&str>,
    name: &str,
    progress: Option<indicatif::ProgressBar>,
    tuning: &Tuning,
) -> Result<Prepared, MethodError> {
    let params = kind.params(ctx.config);
    if kind == MemoryKind::Garlic {
        let nav = &ctx.config.navigate;
        let gctx = GarlicCtx {
            llm: ctx.llm,
            prompts: ctx.prompts,
            embedder: ctx.embedder,
            window: Window::of(nav),
            concurrency: ctx.config.llm.concurrency,
        };
        let mut gparams = GarlicParams::default();
        if let Some(n) = tuning.chunk_tokens {
            gparams.chunk_tokens = n;
        }
        let g = Garlic::build(&gctx, gparams, document, name).await?;
        return Ok(Prepared::Garlic(Box::new(g)));
    }
    if matches!(kind, MemoryKind::KnowledgeTree | MemoryKind::MemWalker) {
        let nav = &ctx.config.navigate;
        let variant = if kind == MemoryKind::MemWalker {
            Variant::MemWalker
        } else {
            Variant::KnowledgeTree
        };
        let build = BuildCtx {
            llm: ctx.llm,
            prompts: ctx.prompts,
            window: Window::of(nav),
            concurrency: ctx.config.llm.concurrency,
        };
        let mut kparams = KtParams::default();
        if let Some(c) = tuning.chunk_chars {
            kparams.chunk_chars = c.max(100);
        }
        let tree = KnowledgeTree::build(&build, variant, kparams, document, name).await?;
        return Ok(Prepared::Kt(Box::new(tree)));
    }
    if kind == MemoryKind::SummaryTree {
        let mut tree = new_summary_tree(ctx);
        append_to_tree(ctx, &mut tree, document, name).await?;
        // The tree serves every question of the document; `question` does not orient it.
        let _ = question;
        // `ctx.llm` is the build's own scoped service in the runner and batch jobs.
        tree.ledger = ctx.llm.ledger().snapshot();
        return Ok(Prepared::Tree(Box::new(tree)));
    }
    let mut memory = if kind == MemoryKind::Cooccurrence {
        crate::memory::build_cooccurrence(document, name, params, ctx.llm.model())?
    } else if kind.needs_llm() {
        let mut builder = Builder::new(ctx.llm, ctx.prompts, params, ctx.config.llm.concurrency);
        if let Some(bar) = progress {
            builder = builder.with_progress(bar);
        }
        builder.build(document, question, name).await?
    } else {
        if document.trim().is_empty() {
            return Err(BuildError::EmptyDocument(name.to_string()).into());
        }
        Memory::segments_only(document, params, ctx.llm.model())
    };
    // The co-occurrence graph has about fifty times the edges of the LLM's (200 a segment):
    // their vectors would make its file 9 MB gzipped and its build minutes long, so the
    // navigators embed the edges they score on demand (cached on disk like any embedding).
    if tuning.vectors && kind != MemoryKind::Cooccurrence {
        crate::embed::index_memory(&mut memory, ctx.embedder)?;
    }
    memory.kind = Some(kind.name().to_string());
    Ok(Prepared::Graph(Box::new(memory)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_kinds_are_written_by_their_names() {
        for kind in MemoryKind::ALL {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.name()));
            assert_eq!(serde_json::from_str::<MemoryKind>(&json).unwrap(), kind);
        }
        // builds.jsonl lines written before the rename still read.
        let old: MemoryKind = serde_json::from_str("\"mem-walker\"").unwrap();
        assert_eq!(old, MemoryKind::MemWalker);
    }

    #[test]
    fn every_name_round_trips() {
        for name in [
            "kn",
            "ges",
            "te",
            "kn-no-reflection",
            "kn-no-navigation",
            "te-no-navigation",
            "kn-relevance-order",
            "kn-sentences1000",
            "kn-sentences1000-check30",
            "ges-sentences800",
            "bm25-sentences1200",
            "gold-sentences",
            "gold-passages",
            "kn-final-s-mix",
            "kn-final-s-mix-relevance-order",
            "kn-answer-top3",
            "ges-answer-top5",
            "kn-final-s-mix-answer-top3-relevance-order",
            "no-graph-update",
            "no-open-entity",
            "kn-cooccurrence",
            "te-cooccurrence-sentences1000",
            "kn-cooccurrence-final-s-mix-check44",
            "kn-bridge",
            "kn-bridge-sentences1000",
            "kn-cooccurrence-bridge-final-s-mix",
            "te-bridge",
            "kn-no-reflection-cooccurrence",
            "kn-no-reflection-bridge-final-s-mix",
            "kn-passages400",
            "ges-passages400",
            "te-passages400",
            "kn-cooccurrence-passages400",
            "kn-final-s-mix-passages400",
            "kn-passages400-sentences200-check44",
            "kn-hop-passages400",
            "kn-cooccurrence-hop-final-s-mix-passages400",
            "te-hop",
            "kn-hop-final-s-mix-passages400-path",
            "kn-own-hop-final-s-mix-passages400",
            "kn-own-hop-final-filled-passages400",
            "ges-hop-passages400",
            "ges-own-hop-passages400",
            "kn-final-filled",
            "te-own-hop-passages400",
            "bm25-own-hop-passages400",
            "kn-sentences1000-path",
            "bm25-passages400",
            "bm25-hop-passages400",
            "contriever-passages1200",
            "bm25-top3",
            "contriever-top1",
            "vanilla-left",
            "vanilla-right",
            "vanilla-middle",
            "full",
            "summary-tree",
            "knowledge-tree",
            "memwalker",
            "garlic",
        ] {
            let spec: MethodSpec = name.parse().unwrap();
            assert_eq!(spec.to_string(), name);
        }
        for bad in [
            "raptor",
            "ges-no-reflection",
            "ges-no-navigation",
            "te-no-reflection",
            "kn-check0",
            "kn-check100",
            "ges-check30",
            "kn-sentences0",
            "kn-no-memory",
            "no-graph-update-cooccurrence",
            "ges-bridge",
            "no-open-entity-bridge",
            "kn-bridge-hop",
            "no-graph-update-hop",
            "bm25-hop-passages0",
            "bm25-hop-top3",
            "kn-own",
            "kn-own-passages400",
            "kn-hop-own",
            "bm25-own-hop-passages0",
            "ges-path",
            "te-hop-path",
            "kn-path-passages400",
            "bm25-passages400-path",
            "kn-passages0",
            "kn-sentences100-passages400",
            "bm25-passages0",
            "bm25-passages04",
            "contriever-passages",
            "bm25-top3-cooccurrence",
            "bm25-top0",
            "vanilla-middle2",
            "ges-final-s-mix",
            "te-hop-final-filled",
            "kn-final-s-mix-final-filled",
            "kn-answer-top0",
            "kn-answer-top03",
            "kn-answer-top",
        ] {
            let err = bad.parse::<MethodSpec>().unwrap_err();
            assert!(err.contains(&format!("unknown method '{bad}'")), "{err}");
            assert!(
                err.contains("garlic") && err.contains("vanilla-middle"),
                "the error lists the known names: {err}"
            );
        }
        assert_eq!(
            "no-open-entity"
                .parse::<MethodSpec>()
                .unwrap()
                .memory_kind(),
            MemoryKind::NoOpenEntity
        );
        assert!(!"bm25-top2".parse::<MethodSpec>().unwrap().uses_trials());
        assert!("te".parse::<MethodSpec>().unwrap().uses_trials());
    }

    #[test]
    fn only_the_graphs_the_joint_extraction_builds_carry_the_extraction_options() {
        let config = Config::default();
        let extracted: Vec<MemoryKind> = MemoryKind::ALL
            .into_iter()
            .filter(|k| k.is_extracted())
            .collect();
        assert_eq!(
            extracted,
            [
                MemoryKind::Graph,
                MemoryKind::NoGraphUpdate,
                MemoryKind::NoOpenEntity
            ]
        );
        for kind in MemoryKind::ALL {
            let p = kind.params(&config);
            let json = serde_json::to_string(&p).unwrap();
            if kind.is_extracted() {
                assert_eq!(p.extraction_cut_repeats, 2, "{kind:?}");
                assert!(
                    json.contains("\"extraction_max_entities\":8"),
                    "{kind:?}: {json}"
                );
            } else {
                assert!(
                    !json.contains("extraction_cut_repeats")
                        && !json.contains("extraction_format")
                        && !json.contains("extraction_max_entities"),
                    "{kind:?}: its key is what it was before the options: {json}"
                );
            }
        }
    }

    #[test]
    fn a_memory_built_before_the_entity_cap_reads_as_25_and_keeps_its_key() {
        let mut p = MemoryKind::Graph.params(&Config::default());
        p.extraction_max_entities = crate::config::FORMER_EXTRACTION_MAX_ENTITIES;
        let json = serde_json::to_value(&p).unwrap();
        assert!(json.get("extraction_max_entities").is_none(), "{json}");
        let back: BuildParams = serde_json::from_value(json).unwrap();
        assert_eq!(back.extraction_max_entities, 25);
        p.extraction_max_entities = 8;
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["extraction_max_entities"], 8);
    }

    #[test]
    fn memory_kinds_parse_by_their_names() {
        for kind in MemoryKind::ALL {
            assert_eq!(kind.name().parse::<MemoryKind>().unwrap(), kind);
        }
        let err = "tree".parse::<MemoryKind>().unwrap_err();
        assert!(
            err.contains("'tree'") && err.contains("summary-tree"),
            "{err}"
        );
    }
}
