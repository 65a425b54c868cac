//! The one method abstraction the eval harness and batch jobs use: a [`MethodSpec`] names a
//! method (a QRMeM navigator, an ablation or a baseline), says which memory it needs
//! ([`MemoryKind`]), prepares that memory for a document ([`prepare`]) and answers a question
//! from it with a trace ([`answer`]); the cost of each call is read off the service's (scoped)
//! ledger.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::{Baseline, Ctx};
use crate::config::Config;
use crate::embed::{EmbedError, Embedder};
use crate::llm::Service;
use crate::memory::{BuildError, BuildParams, Builder, Memory};
use crate::navigate::{Method as NavMethod, NavigateError, Navigator, Options, Trace, Window};
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

impl MemoryKind {
    pub fn name(self) -> &'static str {
        match self {
            MemoryKind::Graph => "graph",
            MemoryKind::NoGraphUpdate => "no-graph-update",
            MemoryKind::NoOpenEntity => "no-open-entity",
            MemoryKind::Segments => "segments",
            MemoryKind::SummaryTree => "summary-tree",
            MemoryKind::KnowledgeTree => "knowledge-tree",
            MemoryKind::MemWalker => "memwalker",
            MemoryKind::Garlic => "garlic",
        }
    }

    /// The prompts its build sends (their fingerprint is part of the memory's key).
    pub fn build_prompts(self) -> &'static [PromptId] {
        match self {
            MemoryKind::Graph | MemoryKind::NoGraphUpdate | MemoryKind::NoOpenEntity => &[
                PromptId::Summary,
                PromptId::SegmentContext,
                PromptId::Entities,
                PromptId::Relations,
                PromptId::Questions,
                PromptId::Update,
                PromptId::RelationUpdate,
            ],
            MemoryKind::Segments => &[],
            MemoryKind::SummaryTree => &[PromptId::TreeSummary],
            MemoryKind::KnowledgeTree => &[PromptId::KtTaxonomy, PromptId::KtNode],
            MemoryKind::MemWalker => &[PromptId::Summary],
            MemoryKind::Garlic => &[PromptId::GarlicSummary],
        }
    }

    /// Whether preparing this memory calls the LLM.
    pub fn needs_llm(self) -> bool {
        self != MemoryKind::Segments
    }

    /// The build parameters of this kind under `config`.
    pub fn params(self, config: &Config) -> BuildParams {
        let mut p = BuildParams::from_config(config);
        match self {
            MemoryKind::NoGraphUpdate => p.graph_update = false,
            MemoryKind::NoOpenEntity => p.open_entity = false,
            MemoryKind::Graph
            | MemoryKind::Segments
            | MemoryKind::SummaryTree
            | MemoryKind::KnowledgeTree
            | MemoryKind::MemWalker
            | MemoryKind::Garlic => {}
        }
        p
    }
}

/// A method, by the name used on the command line and in reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MethodSpec {
    /// A QRMeM navigator over a memory of `memory` kind.
    Navigate {
        method: NavMethod,
        reflection: bool,
        navigation: bool,
        memory: MemoryKind,
    },
    Baseline(Baseline),
    /// Summary-tree cuts (seed 002).
    SummaryTree,
    /// Knowledge Tree navigation (seed 000).
    KnowledgeTree,
    /// MemWalker navigation (seed 000's baseline).
    MemWalker,
    /// GARLIC's LLM-controlled best-first search (seed 003).
    Garlic,
}

pub const METHOD_NAMES: &str = "kn, ges, te, kn-no-reflection, kn-no-navigation, no-graph-update, no-open-entity, bm25-topK, contriever-topK, vanilla-left, vanilla-right, full, summary-tree, knowledge-tree, memwalker, garlic";

impl FromStr for MethodSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let nav = |method, reflection, navigation, memory| MethodSpec::Navigate {
            method,
            reflection,
            navigation,
            memory,
        };
        Ok(match s {
            "kn" => nav(NavMethod::Kn, true, true, MemoryKind::Graph),
            "ges" => nav(NavMethod::Ges, true, true, MemoryKind::Graph),
            "te" => nav(NavMethod::Te, true, true, MemoryKind::Graph),
            "kn-no-reflection" => nav(NavMethod::Kn, false, true, MemoryKind::Graph),
            "kn-no-navigation" => nav(NavMethod::Kn, true, false, MemoryKind::Graph),
            "no-graph-update" => nav(NavMethod::Kn, true, true, MemoryKind::NoGraphUpdate),
            "no-open-entity" => nav(NavMethod::Kn, true, true, MemoryKind::NoOpenEntity),
            "summary-tree" => MethodSpec::SummaryTree,
            "knowledge-tree" => MethodSpec::KnowledgeTree,
            "memwalker" => MethodSpec::MemWalker,
            "garlic" => MethodSpec::Garlic,
            other => match other.parse::<Baseline>() {
                Ok(b) => MethodSpec::Baseline(b),
                Err(_) => return Err(format!("unknown method '{other}' (one of: {METHOD_NAMES})")),
            },
        })
    }
}

impl fmt::Display for MethodSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MethodSpec::Baseline(b) => b.fmt(f),
            MethodSpec::SummaryTree => f.write_str("summary-tree"),
            MethodSpec::KnowledgeTree => f.write_str("knowledge-tree"),
            MethodSpec::MemWalker => f.write_str("memwalker"),
            MethodSpec::Garlic => f.write_str("garlic"),
            MethodSpec::Navigate {
                method,
                reflection,
                navigation,
                memory,
            } => match (memory, reflection, navigation) {
                (MemoryKind::NoGraphUpdate, ..) => f.write_str("no-graph-update"),
                (MemoryKind::NoOpenEntity, ..) => f.write_str("no-open-entity"),
                (_, false, _) => write!(f, "{method}-no-reflection"),
                (_, _, false) => write!(f, "{method}-no-navigation"),
                _ => method.fmt(f),
            },
        }
    }
}

impl MethodSpec {
    pub fn memory_kind(&self) -> MemoryKind {
        match self {
            MethodSpec::Navigate { memory, .. } => *memory,
            MethodSpec::Baseline(_) => MemoryKind::Segments,
            MethodSpec::SummaryTree => MemoryKind::SummaryTree,
            MethodSpec::KnowledgeTree => MemoryKind::KnowledgeTree,
            MethodSpec::MemWalker => MemoryKind::MemWalker,
            MethodSpec::Garlic => MemoryKind::Garlic,
        }
    }

    /// Whether `max_trials` applies (the navigators; not the one-shot baselines).
    pub fn uses_trials(&self) -> bool {
        matches!(self, MethodSpec::Navigate { .. })
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
    #[error("summary tree: {0}")]
    Tree(#[from] TreeError),
    #[error("knowledge tree: {0}")]
    Kt(#[from] KtError),
    #[error("GARLIC: {0}")]
    Garlic(#[from] GarlicError),
    #[error("the method {method} cannot read a memory of kind {kind}")]
    WrongMemory { method: String, kind: String },
}

/// A prepared memory: QRMeM's (or the baselines' segments-only) memory, or a summary tree.
#[derive(Clone, Debug)]
pub enum Prepared {
    Graph(Box<Memory>),
    Tree(Box<SummaryTree>),
    Kt(Box<KnowledgeTree>),
    Garlic(Box<Garlic>),
}

impl Prepared {
    /// Segments (leaves) of the document.
    pub fn segments(&self) -> usize {
        match self {
            Prepared::Graph(m) => m.segments.len(),
            Prepared::Tree(t) => t.leaves.len(),
            Prepared::Kt(t) => t.nodes.iter().filter(|n| n.content.is_some()).count(),
            Prepared::Garlic(g) => g.nodes.iter().filter(|n| n.level == 1).count(),
        }
    }
    pub fn entities(&self) -> usize {
        match self {
            Prepared::Graph(m) => m.entity_count(),
            Prepared::Tree(_) | Prepared::Kt(_) | Prepared::Garlic(_) => 0,
        }
    }
    pub fn relations(&self) -> usize {
        match self {
            Prepared::Graph(m) => m.relation_count(),
            Prepared::Tree(t) => t.summaries.len(),
            Prepared::Kt(t) => t.nodes.iter().filter(|n| n.content.is_none()).count(),
            Prepared::Garlic(g) => g.nodes.iter().filter(|n| n.level > 1).count(),
        }
    }
    /// The byte range in the document of every unit a trace's segment indices refer to:
    /// segments (the graph and the baselines), leaves (summary tree), nodes (knowledge tree,
    /// MemWalker, GARLIC: empty ranges for summary nodes).
    pub fn unit_spans(&self) -> Vec<Span> {
        match self {
            Prepared::Graph(m) => super::segment_spans(m),
            Prepared::Tree(t) => t.leaf_spans(),
            Prepared::Kt(t) => t.node_spans(),
            Prepared::Garlic(g) => g.node_spans(),
        }
    }

    /// The text of every unit of [`Prepared::unit_spans`] (empty for summary nodes).
    pub fn unit_texts(&self) -> Vec<String> {
        match self {
            Prepared::Graph(m) => m.segments.iter().map(|s| s.text.clone()).collect(),
            Prepared::Tree(t) => t.leaves.clone(),
            Prepared::Kt(t) => t
                .nodes
                .iter()
                .map(|n| n.content.clone().unwrap_or_default())
                .collect(),
            Prepared::Garlic(g) => g
                .nodes
                .iter()
                .map(|n| {
                    if n.level == 1 {
                        n.text.clone()
                    } else {
                        String::new()
                    }
                })
                .collect(),
        }
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

    /// Build steps that failed and were recorded.
    pub fn failures(&self) -> usize {
        match self {
            Prepared::Graph(m) => m.failures.len(),
            Prepared::Tree(t) => t.failures.len(),
            Prepared::Kt(t) => t.failures.len(),
            Prepared::Garlic(g) => g.failures.len(),
        }
    }
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
        | MemoryKind::Segments => crate::memory::load(path)
            .map(|m| Prepared::Graph(Box::new(m)))
            .map_err(|e| e.to_string()),
    }
}

/// What [`prepare`] needs besides the document.
pub struct PrepareCtx<'a> {
    pub llm: &'a Service,
    pub prompts: &'a Prompts,
    pub embedder: &'a dyn Embedder,
    pub config: &'a Config,
}

/// Prepares the memory of `kind` for `document` (oriented to `question` where given): the
/// segments for the baselines, the built and embedded graph for the navigators.
pub async fn prepare(
    kind: MemoryKind,
    ctx: &PrepareCtx<'_>,
    document: &str,
    question: Option<&str>,
    name: &str,
    progress: Option<indicatif::ProgressBar>,
) -> Result<Prepared, MethodError> {
    let params = kind.params(ctx.config);
    if kind == MemoryKind::Garlic {
        let nav = &ctx.config.navigate;
        let gctx = GarlicCtx {
            llm: ctx.llm,
            prompts: ctx.prompts,
            embedder: ctx.embedder,
            window: Window::new(nav.context_window, nav.reply_tokens),
            concurrency: ctx.config.llm.concurrency,
        };
        let g = Garlic::build(&gctx, GarlicParams::default(), document, name).await?;
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
            window: Window::new(nav.context_window, nav.reply_tokens),
            concurrency: ctx.config.llm.concurrency,
        };
        let tree =
            KnowledgeTree::build(&build, variant, KtParams::default(), document, name).await?;
        return Ok(Prepared::Kt(Box::new(tree)));
    }
    if kind == MemoryKind::SummaryTree {
        let nav = &ctx.config.navigate;
        let mut tree = SummaryTree::new(
            TreeParams {
                leaf_tokens: params.segment_tokens,
                ..TreeParams::default()
            },
            ctx.llm.model(),
        );
        tree.append(
            ctx.llm,
            ctx.prompts,
            Window::new(nav.context_window, nav.reply_tokens),
            document,
            name,
        )
        .await?;
        // The tree serves every question of the document; `question` does not orient it.
        let _ = question;
        // `ctx.llm` is the build's own scoped service in the runner and batch jobs.
        tree.ledger = ctx.llm.ledger().snapshot();
        return Ok(Prepared::Tree(Box::new(tree)));
    }
    let mut memory = if kind.needs_llm() {
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
    crate::embed::index_memory(&mut memory, ctx.embedder)?;
    Ok(Prepared::Graph(Box::new(memory)))
}

/// Answers `question` over `memory` with `spec`. `options` (multiple choice) make the answer
/// the option letter. `nav` holds the navigation settings (its method and ablation flags are
/// overridden by `spec`).
pub async fn answer(
    spec: MethodSpec,
    ctx: &Ctx<'_>,
    nav: &Options,
    prepared: &Prepared,
    question: &str,
    options: &[String],
) -> Result<Trace, MethodError> {
    let mut trace = match (spec, prepared) {
        (MethodSpec::SummaryTree, Prepared::Tree(t)) => {
            t.ask(ctx.llm, ctx.prompts, ctx.window, question, options)
                .await?
        }
        (MethodSpec::KnowledgeTree | MethodSpec::MemWalker, Prepared::Kt(t))
            if (spec == MethodSpec::MemWalker) == (t.variant == Variant::MemWalker) =>
        {
            t.ask(ctx.llm, ctx.prompts, ctx.window, question, options)
                .await?
        }
        (MethodSpec::Garlic, Prepared::Garlic(g)) => {
            g.ask(
                ctx.llm,
                ctx.prompts,
                ctx.embedder,
                ctx.window,
                question,
                options,
            )
            .await?
        }
        (MethodSpec::Baseline(b), Prepared::Graph(m)) => {
            super::answer(b, ctx, m, question, options).await?
        }
        (
            MethodSpec::Navigate {
                method,
                reflection,
                navigation,
                ..
            },
            Prepared::Graph(m),
        ) => {
            let mut opts = nav.clone();
            opts.method = method;
            opts.reflection = reflection;
            opts.navigation = navigation;
            Navigator::new(ctx.llm, ctx.prompts, ctx.embedder, m, opts)
                .ask(question, options)
                .await?
        }
        _ => {
            return Err(MethodError::WrongMemory {
                method: spec.to_string(),
                kind: match prepared {
                    Prepared::Graph(_) => "graph".into(),
                    Prepared::Tree(_) => "summary-tree".into(),
                    Prepared::Kt(t) => format!("{:?}", t.variant),
                    Prepared::Garlic(_) => "garlic".into(),
                },
            })
        }
    };
    trace.method = spec.to_string();
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_kinds_are_written_by_their_names() {
        for kind in [
            MemoryKind::Graph,
            MemoryKind::NoGraphUpdate,
            MemoryKind::NoOpenEntity,
            MemoryKind::Segments,
            MemoryKind::SummaryTree,
            MemoryKind::KnowledgeTree,
            MemoryKind::MemWalker,
            MemoryKind::Garlic,
        ] {
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
            "no-graph-update",
            "no-open-entity",
            "bm25-top3",
            "contriever-top1",
            "vanilla-left",
            "vanilla-right",
            "full",
            "summary-tree",
            "knowledge-tree",
            "memwalker",
            "garlic",
        ] {
            let spec: MethodSpec = name.parse().unwrap();
            assert_eq!(spec.to_string(), name);
        }
        let err = "raptor".parse::<MethodSpec>().unwrap_err();
        assert!(err.contains("unknown method 'raptor'"), "{err}");
        assert!(
            err.contains("garlic"),
            "the error lists the known names: {err}"
        );
        assert_eq!(
            "no-open-entity"
                .parse::<MethodSpec>()
                .unwrap()
                .memory_kind(),
            MemoryKind::NoOpenEntity
        );
        assert!(!"bm25-top2".parse::<MethodSpec>().unwrap().uses_trials());
    }
}
