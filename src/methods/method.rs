//! The boundary every method stands behind: the [`Method`] trait and the [`MethodSpec`] handle
//! the harness, batch jobs and the CLI pass around (`registry` parses a name into one).
//!
//! Boundary: the callers (`eval`, `batch`, `qrmem ask`) know a method only through this trait;
//! what a method reads is a [`Prepared`] memory of its [`MemoryKind`], built by
//! [`super::prepare`]. Adding a method is one module implementing [`Method`] with a [`Family`]
//! that parses its names, its `mod` line, and one line in `registry::FAMILIES`.
//!
//! Invariant: a method's [`Method::name`] parses back to the same method (the name is how rows of
//! `results.jsonl` name their method).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use super::spec::{MemoryKind, MethodError, Prepared};
use super::Ctx;
use crate::answer::Trace;
use crate::config::NavigateConfig;

/// A method: a name, the memory it reads and how it answers a question from that memory.
#[async_trait]
pub trait Method: Send + Sync + fmt::Debug {
    /// The name used on the command line and in reports; it parses back to this method.
    fn name(&self) -> String;

    /// The memory this method reads.
    fn memory_kind(&self) -> MemoryKind;

    /// Whether `max_trials` applies (the navigators; not the one-shot methods).
    fn uses_trials(&self) -> bool {
        false
    }

    /// The row family reports compare (Table 1's best KN row against its best BM25 row).
    fn role(&self) -> Role {
        Role::Other
    }

    /// Whether its units (trace indices) are the document's passages, not the memory's
    /// segments (the passage baselines, `-passagesN` navigators, the chain).
    fn reads_passages(&self) -> bool {
        false
    }

    /// Answers `question` from `prepared` (a memory of [`Method::memory_kind`]); `options`
    /// (multiple choice) make the answer the option letter. `nav` holds the navigation settings
    /// of the configuration (a navigator overrides its own method and ablation flags).
    async fn answer(
        &self,
        ctx: &Ctx<'_>,
        nav: &NavigateConfig,
        prepared: &Prepared,
        question: &str,
        options: &[String],
    ) -> Result<Trace, MethodError>;

    /// What rows recorded before rows carried their spans say about the context shown (the
    /// report's backfill). A method added since has no such rows.
    fn recorded_context(&self) -> Recorded {
        Recorded::Unknown
    }
}

/// The family a report puts a row in, read from the method, never from its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// QRMeM-KN over a QRMeM memory (the graph or the co-occurrence memory), any modifiers.
    Kn,
    /// A BM25 row: top-k segments, sentences, passages, the hop.
    Bm25,
    Other,
}

/// How the spans of an old row (one without spans) are recovered from what it recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// A truncation of the document, recomputed from the prompt and window.
    Truncation { from_end: bool },
    /// `segments_used` indexes the 600-token segments; `answer`: whether they were all in the
    /// one answer prompt (otherwise only the read spans are known).
    Segments { answer: bool },
    /// `segments_used` indexes the units of the method's own memory (leaves, nodes), and the
    /// answer showed what was read.
    Units,
    /// Nothing can be recovered.
    Unknown,
}

/// A family of methods: the names it answers to (for help and error messages) and its parser.
pub struct Family {
    /// The family's names as users write them, with what each does, e.g. "bm25-topK (the K
    /// best segments by BM25), ..."; made from the family's own table where it has one.
    pub names: fn() -> String,
    /// The method a name stands for, if it is one of this family's.
    pub parse: fn(&str) -> Option<MethodSpec>,
}

/// A name of a family's table: its pattern (a trailing `K` or `N` stands for the number it
/// takes, at least 1, written plainly), what it does, and the method it makes. A family with
/// such a table parses, names and describes its methods from it alone.
pub struct Form<T> {
    pub pattern: &'static str,
    pub effect: &'static str,
    pub make: fn(usize) -> T,
}

impl<T: PartialEq> Form<T> {
    /// The pattern's fixed part and whether a number follows it.
    fn prefix(&self) -> (&'static str, bool) {
        match self.pattern.strip_suffix(['K', 'N']) {
            Some(prefix) => (prefix, true),
            None => (self.pattern, false),
        }
    }

    /// The method `name` stands for in `forms`, if any.
    pub fn parse(forms: &[Form<T>], name: &str) -> Option<T> {
        forms.iter().find_map(|form| match form.prefix() {
            (prefix, false) => (name == prefix).then(|| (form.make)(0)),
            (prefix, true) => {
                let n = name.strip_prefix(prefix)?;
                let k: usize = n.parse().ok().filter(|&k| k >= 1)?;
                (k.to_string() == n).then(|| (form.make)(k))
            }
        })
    }

    /// The name of `method` (whose number is `n`, 0 for none) in `forms`.
    pub fn name(forms: &[Form<T>], method: &T, n: usize) -> Option<String> {
        let form = forms.iter().find(|form| (form.make)(n) == *method)?;
        Some(match form.prefix() {
            (prefix, true) => format!("{prefix}{n}"),
            (prefix, false) => prefix.to_string(),
        })
    }

    /// Every pattern with what it does, comma-separated.
    pub fn help(forms: &[Form<T>]) -> String {
        forms
            .iter()
            .map(|f| format!("{} ({})", f.pattern, f.effect))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A method, by the name used on the command line and in reports: a shared handle on a
/// [`Method`]. Two specs are equal when their names are.
#[derive(Clone)]
pub struct MethodSpec(Arc<dyn Method>);

impl MethodSpec {
    pub fn new(method: impl Method + 'static) -> Self {
        MethodSpec(Arc::new(method))
    }
}

impl std::ops::Deref for MethodSpec {
    type Target = dyn Method;
    fn deref(&self) -> &(dyn Method + 'static) {
        &*self.0
    }
}

impl fmt::Display for MethodSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.name())
    }
}

impl fmt::Debug for MethodSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MethodSpec({})", self.0.name())
    }
}

impl PartialEq for MethodSpec {
    fn eq(&self, other: &Self) -> bool {
        self.0.name() == other.0.name()
    }
}

impl Eq for MethodSpec {}

/// Answers `question` over `prepared` with `spec`, and names the trace by the spec.
pub async fn answer(
    spec: &MethodSpec,
    ctx: &Ctx<'_>,
    nav: &NavigateConfig,
    prepared: &Prepared,
    question: &str,
    options: &[String],
) -> Result<Trace, MethodError> {
    let mut trace = spec.answer(ctx, nav, prepared, question, options).await?;
    trace.method = spec.to_string();
    Ok(trace)
}

/// The error of a method given a memory it cannot read.
pub fn wrong_memory(method: &dyn Method, prepared: &Prepared) -> MethodError {
    MethodError::WrongMemory {
        method: method.name(),
        kind: prepared.kind_name(),
    }
}
