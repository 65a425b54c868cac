//! The single-document entry points of the method API, as `qrmem ask` and `qrmem build` use
//! them: read a document, prepare (or open, or extend) its memory, save it, answer a question.
//! The eval harness and batch jobs reach the same [`prepare`], [`open`] and [`run`] through their
//! memory directories.
//!
//! Invariant: a method answers here exactly as in the harness: the method named (or, for an
//! opened memory, the one its kind implies) prepares the memory it names and answers through
//! [`Method::answer`](super::Method::answer).

use std::path::{Path, PathBuf};

use super::method::{answer as run, MethodSpec};
use super::spec::{
    append_to_tree, new_summary_tree, open, prepare_with, save, MemoryKind, MethodError, Prepared,
    Runtime, Tuning,
};
use crate::answer::Trace;

/// Reads a document, naming the file and the problem when it cannot be used.
pub fn read_document(path: &Path) -> Result<String, MethodError> {
    let bytes = std::fs::read(path).map_err(|e| {
        MethodError::File(format!("cannot read the document {}: {e}", path.display()))
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        MethodError::File(format!(
            "the document {} is not UTF-8 text (invalid byte at offset {})",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })?;
    if text.trim().is_empty() {
        return Err(MethodError::File(format!(
            "the document {} is empty",
            path.display()
        )));
    }
    Ok(text)
}

/// Where `ask` finds its memory.
#[derive(Clone, Debug)]
pub enum Source {
    /// A saved memory of any kind.
    Memory(PathBuf),
    /// A document whose memory is prepared first (oriented to the question), and saved to the
    /// path if one is given.
    Document {
        path: PathBuf,
        save: Option<PathBuf>,
    },
}

/// One question for `ask`.
#[derive(Clone, Debug)]
pub struct AskRequest {
    pub source: Source,
    pub question: String,
    /// Multiple-choice options (the answer is then the letter).
    pub options: Vec<String>,
    /// The method; default: the one an opened memory's kind implies, else the configuration's.
    pub method: Option<String>,
    /// Ablations of the navigators: score edges with Q only; answer from S_imp only.
    pub no_reflection: bool,
    pub no_navigation: bool,
    pub tuning: Tuning,
}

/// What `ask` did.
#[derive(Debug)]
pub struct AskOutcome {
    pub trace: Trace,
    /// When the memory was prepared now: what it holds, in one line.
    pub built: Option<String>,
}

/// The method of `req`: its name, with the ablation suffixes asked for.
fn method_of(req: &AskRequest, default: &str) -> Result<MethodSpec, MethodError> {
    let mut name = req.method.clone().unwrap_or_else(|| default.to_string());
    for (on, suffix) in [
        (req.no_reflection, "-no-reflection"),
        (req.no_navigation, "-no-navigation"),
    ] {
        if on {
            name.push_str(suffix);
        }
    }
    name.parse().map_err(|e: String| {
        if req.no_reflection || req.no_navigation {
            MethodError::File(format!(
                "{e}; --no-reflection and --no-navigation apply to one navigator (kn, ges or te) at a time"
            ))
        } else {
            MethodError::File(e)
        }
    })
}

/// Answers one question: opens or prepares the memory, then runs the method over it.
/// `progress` shows a graph build's steps.
pub async fn ask(
    ctx: &Runtime<'_>,
    req: &AskRequest,
    progress: Option<indicatif::ProgressBar>,
) -> Result<AskOutcome, MethodError> {
    let config = ctx.config;
    let configured = config.navigate.method.as_str();
    let (prepared, spec, built) = match &req.source {
        Source::Memory(path) => {
            let prepared = open(path)?;
            let default = match &req.method {
                Some(m) => m.clone(),
                None => prepared
                    .default_method(configured)
                    .map_err(MethodError::File)?
                    .to_string(),
            };
            let spec = method_of(req, &default)?;
            (prepared, spec, None)
        }
        Source::Document { path, save: to } => {
            let spec = method_of(req, configured)?;
            let document = read_document(path)?;
            let prepared = prepare_with(
                spec.memory_kind(),
                ctx,
                &document,
                Some(&req.question),
                &path.display().to_string(),
                progress,
                &req.tuning,
            )
            .await?;
            if let Some(to) = to {
                save(&prepared, to)?;
            }
            let built = prepared.summary_line();
            (prepared, spec, Some(built))
        }
    };
    let nav = &config.navigate;
    let trace = run(
        &spec,
        &ctx.ctx(None, &[]),
        nav,
        &prepared,
        &req.question,
        &req.options,
    )
    .await?;
    Ok(AskOutcome { trace, built })
}

/// One memory for `build`.
#[derive(Clone, Debug)]
pub struct BuildRequest {
    pub kind: MemoryKind,
    pub document: PathBuf,
    /// The question a QRMeM graph is oriented to.
    pub question: Option<String>,
    pub out: PathBuf,
    /// Summary tree only: append the document to the tree already at `out`.
    pub append: bool,
    pub tuning: Tuning,
}

/// Builds (or, `append`, extends) the memory of `req` and saves it; returns the memory and a
/// description of it for the user.
pub async fn build(
    ctx: &Runtime<'_>,
    req: &BuildRequest,
    progress: Option<indicatif::ProgressBar>,
) -> Result<(Prepared, String), MethodError> {
    if req.append && req.kind != MemoryKind::SummaryTree {
        return Err(MethodError::File(
            "--append works with --kind summary-tree only (a QRMeM memory is built per document)"
                .into(),
        ));
    }
    let document = read_document(&req.document)?;
    let name = req.document.display().to_string();
    if req.kind == MemoryKind::SummaryTree {
        // A summary tree grows by appending documents: a new tree is an empty one appended to.
        let mut tree = if req.append && req.out.exists() {
            match open(&req.out)? {
                Prepared::Tree(tree) => tree,
                other => {
                    return Err(MethodError::File(format!(
                        "{} is a {} memory, not a summary tree: --append extends one",
                        req.out.display(),
                        other.kind().name()
                    )))
                }
            }
        } else {
            Box::new(new_summary_tree(ctx))
        };
        let before = tree.leaves.len();
        let written = append_to_tree(ctx, &mut tree, &document, &name).await?;
        tree.ledger.add(&ctx.llm.ledger().snapshot());
        let text = format!(
            "summary tree: {} leaves ({} new), {} summaries written now ({} in all), {} failures",
            tree.leaves.len(),
            tree.leaves.len() - before,
            written,
            tree.summaries.len(),
            tree.failures.len()
        );
        let prepared = Prepared::Tree(tree);
        save(&prepared, &req.out)?;
        return Ok((prepared, text));
    }
    let prepared = prepare_with(
        req.kind,
        ctx,
        &document,
        req.question.as_deref(),
        &name,
        progress,
        &req.tuning,
    )
    .await?;
    save(&prepared, &req.out)?;
    let text = prepared.describe(10);
    Ok((prepared, text))
}
