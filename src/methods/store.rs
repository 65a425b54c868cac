//! A directory of prepared memories keyed by content: the document's SHA-256, the memory kind,
//! the build parameters, the LLM model, the orienting question and the embedder. A second job
//! over the same document loads the memory instead of building it again.
//!
//! Invariants: a memory file is only ever written whole (atomic rename, `memory::save`); two
//! tasks asking for the same key at once build it once (a lock per key); an unreadable file
//! is reported and rebuilt, never trusted; a reuse-only store never builds a memory that needs
//! the LLM, and reads a graph built with another extraction reply only when nothing else in
//! its key differs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use super::spec::{load_prepared, prepare, MemoryKind, MethodError, Prepared, Runtime};
use crate::memory::BuildParams;

/// Where a memory came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Built,
    Loaded,
}

pub struct MemoryDir {
    dir: PathBuf,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Read only memories built by this model (their key's model), and never build one: a run
    /// that answers with another model over memories an earlier run built.
    reuse_only: Option<String>,
}

impl MemoryDir {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        MemoryDir {
            dir: dir.into(),
            locks: Mutex::new(HashMap::new()),
            reuse_only: None,
        }
    }

    /// This store reads the memories built by `model` and builds none: a memory that is not
    /// there is [`MethodError::NotBuilt`]. Memories that need no LLM are still prepared.
    pub fn reuse_only(mut self, model: Option<String>) -> Self {
        self.reuse_only = model;
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file a memory of this content would live in.
    pub fn path_for(
        &self,
        kind: MemoryKind,
        ctx: &Runtime<'_>,
        document: &str,
        question: Option<&str>,
    ) -> PathBuf {
        self.path_with(kind, &kind.params(ctx.config), ctx, document, question)
    }

    /// The file of a memory of this content built with `params`.
    fn path_with(
        &self,
        kind: MemoryKind,
        params: &BuildParams,
        ctx: &Runtime<'_>,
        document: &str,
        question: Option<&str>,
    ) -> PathBuf {
        let mut h = Sha256::new();
        h.update(Sha256::digest(document.as_bytes()));
        for part in [
            kind.name(),
            &serde_json::to_string(params).unwrap_or_default(),
            self.reuse_only.as_deref().unwrap_or(ctx.llm.model()),
            ctx.embedder.model_id(),
            question.unwrap_or("\u{0}none"),
            &ctx.prompts.fingerprint(kind.build_prompts(params)),
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        let key = hex::encode(h.finalize());
        let doc = hex::encode(Sha256::digest(document.as_bytes()));
        // QRMeM graphs are large JSON (0.4 MB for a 13k-token document) that gzip shrinks
        // about sixfold; they are committed with the runs that read them.
        let ext = if kind == MemoryKind::SummaryTree {
            "qst"
        } else if kind.is_graph() {
            "qrm.gz"
        } else {
            "qrm"
        };
        self.dir.join(format!(
            "{}-{}-{}.{ext}",
            &doc[..16],
            kind.name(),
            &key[..16]
        ))
    }

    /// Loads the memory for this content, or prepares and saves it.
    pub async fn get_or_prepare(
        &self,
        kind: MemoryKind,
        ctx: &Runtime<'_>,
        document: &str,
        question: Option<&str>,
        name: &str,
        progress: Option<indicatif::ProgressBar>,
    ) -> Result<(Prepared, Origin), MethodError> {
        let path = self.path_for(kind, ctx, document, question);
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
            locks
                .entry(path.display().to_string())
                .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(())))
                .clone()
        };
        let _guard = lock.lock().await;
        // A graph saved before graphs were gzipped has the same name without `.gz`.
        let plain = path.with_extension("");
        for found in [&path, &plain] {
            if found
                .extension()
                .is_some_and(|e| e == "qrm" || e == "gz" || e == "qst")
                && found.exists()
            {
                match load_prepared(kind, found) {
                    Ok(m) => return Ok((m, Origin::Loaded)),
                    Err(e) => tracing::warn!("{e}; building it again"),
                }
            }
        }
        if let (Some(model), true) = (&self.reuse_only, kind.needs_llm()) {
            if let Some(other) = self.other_extraction(kind, ctx, document, question) {
                return Ok((other, Origin::Loaded));
            }
            return Err(MethodError::NotBuilt {
                kind: kind.name().to_string(),
                model: model.clone(),
                path: path.display().to_string(),
            });
        }
        let prepared = prepare(kind, ctx, document, question, name, progress).await?;
        if kind.is_kept() {
            // Saving is what makes the next run free; failing to save costs that, not this run.
            let saved = super::spec::save(&prepared, &path);
            if let Err(e) = saved {
                tracing::warn!("{e}");
            }
        }
        Ok((prepared, Origin::Built))
    }

    /// A reuse-only store's graph of this content built with another extraction reply (format
    /// or repeat cut, which shape the build and nothing a reader does): a file of the same
    /// document and kind whose parameters differ from the configured ones in those two only,
    /// and whose name is the key of its own parameters with today's prompts. So a run reads
    /// graphs that earlier builds made with either extraction, and says which in the log and
    /// in the builds it reports; any other difference still finds nothing.
    fn other_extraction(
        &self,
        kind: MemoryKind,
        ctx: &Runtime<'_>,
        document: &str,
        question: Option<&str>,
    ) -> Option<Prepared> {
        if !kind.is_extracted() {
            return None;
        }
        let configured = kind.params(ctx.config);
        let doc = hex::encode(Sha256::digest(document.as_bytes()));
        let prefix = format!("{}-{}-", &doc[..16], kind.name());
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".qrm.gz"))
            })
            .collect();
        files.sort();
        for file in files {
            let Ok(prepared) = load_prepared(kind, &file) else {
                continue;
            };
            let Prepared::Graph(m) = &prepared else {
                continue;
            };
            if m.params.with_former_extraction() != configured.with_former_extraction()
                || self.path_with(kind, &m.params, ctx, document, question) != file
            {
                continue;
            }
            tracing::info!(
                "{}: read the graph built with extraction_format={} extraction_cut_repeats={} extraction_max_entities={}",
                file.display(),
                m.params.extraction_format,
                m.params.extraction_cut_repeats,
                m.params.extraction_max_entities
            );
            return Some(prepared);
        }
        None
    }
}
