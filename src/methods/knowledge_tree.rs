//! Knowledge Tree and MemWalker (seed 000).
//!
//! Build: the document is cut into chunks of about `chunk_chars` characters (on segment
//! boundaries); each chunk is a leaf whose metadata the LLM extracts (Knowledge Tree: Summary,
//! Content Types from `prompts/kt_taxonomy.txt`, Critical Actions, Decisions, Noteworthy Events,
//! About; MemWalker: a plain summary); consecutive nodes are grouped 5-8 to a branch whose
//! metadata the LLM writes from its children's (Content Types and About also merged from them),
//! level by level, up to one root.
//!
//! Ask (Knowledge Tree): up to `max_branch_attempts` times, descend from the root choosing the
//! child with the LLM (every option's full metadata shown) down to a branch of leaves; there try
//! up to `leaves_per_branch` leaves (chosen the same way), each answered with Answer / Partial /
//! No Answer; a complete answer ends the search; a tried leaf and then an exhausted branch are
//! removed from the options. The result is the complete answer, else the first partial one.
//! MemWalker: the same tree with plain summaries; one path from the root, reverting to the
//! parent when a leaf gives no complete answer, until `max_branch_attempts x leaves_per_branch`
//! leaves have been read.
//!
//! Invariants: node indices are stable (children before parents; the root last); a failed
//! extraction is recorded and the node keeps a summary made of its text's beginning, so the tree
//! is always complete; every LLM choice and leaf verdict is a step of the trace.

use std::collections::BTreeSet;
use std::time::Instant;

use futures::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use thiserror::Error;

use crate::answer::{option_letter, with_options, Step, StepKind, Trace, Window};
use crate::llm::{JsonSchema, LedgerSnapshot, Message, Service};
use crate::memory::StepFailure;
use crate::prompts::{PromptError, PromptId, Prompts};
use crate::text::{count_tokens, segment, truncate_tokens};

pub const FORMAT: &str = "qrmem-knowledge-tree";
pub const VERSION: u32 = 1;

#[derive(Debug, Error)]
pub enum KtError {
    #[error(transparent)]
    Prompt(#[from] PromptError),
    #[error("the document {0} is empty")]
    EmptyDocument(String),
    #[error("the question is empty")]
    EmptyQuestion,
}

/// Knowledge Tree (structured metadata) or MemWalker (plain summaries).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    KnowledgeTree,
    MemWalker,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KtParams {
    pub chunk_chars: usize,
    pub branch_min: usize,
    pub branch_max: usize,
    pub max_branch_attempts: usize,
    pub leaves_per_branch: usize,
}

impl Default for KtParams {
    fn default() -> Self {
        KtParams {
            chunk_chars: 5000,
            branch_min: 5,
            branch_max: 8,
            max_branch_attempts: 3,
            leaves_per_branch: 2,
        }
    }
}

/// A node's metadata (MemWalker fills `summary` only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub summary: String,
    pub content_types: Vec<String>,
    pub critical_actions: Vec<String>,
    pub decisions: Vec<String>,
    pub noteworthy_events: Vec<String>,
    pub about: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// "Leaf", "Branch" or "Root".
    pub level: String,
    pub meta: Meta,
    /// A leaf's text.
    pub content: Option<String>,
    pub children: Vec<usize>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KnowledgeTree {
    pub format: String,
    pub version: u32,
    pub variant: Variant,
    pub model: String,
    pub params: KtParams,
    pub nodes: Vec<Node>,
    pub failures: Vec<StepFailure>,
    pub ledger: LedgerSnapshot,
    pub build_secs: f64,
}

/// Splits `n` consecutive nodes into groups of `min..=max` (as even as possible; fewer than
/// `min` nodes make one group).
pub fn groups(n: usize, min: usize, max: usize) -> Vec<std::ops::Range<usize>> {
    if n == 0 {
        return vec![];
    }
    let max = max.max(1);
    let mut g = n.div_ceil(max);
    // Prefer fewer, fuller groups while every group keeps at least `min`.
    while g > 1 && n / g < min {
        g -= 1;
    }
    let (base, extra) = (n / g, n % g);
    let mut out = Vec::with_capacity(g);
    let mut start = 0;
    for i in 0..g {
        let len = base + usize::from(i < extra);
        out.push(start..start + len);
        start += len;
    }
    out
}

fn list(v: Option<&Value>) -> Vec<String> {
    let none = |s: &str| {
        let t = s.trim().trim_matches('.').to_ascii_lowercase();
        t.is_empty() || t == "none" || t == "n/a" || t == "null"
    };
    match v {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| match x {
                Value::String(s) if !none(s) => Some(s.trim().to_string()),
                Value::Null => None,
                Value::String(_) => None,
                other => Some(other.to_string()),
            })
            .collect(),
        Some(Value::String(s)) if !none(s) => vec![s.trim().to_string()],
        _ => vec![],
    }
}

fn meta_from(v: &Value) -> Meta {
    let get = |k: &str| v.get(k);
    Meta {
        summary: get("Summary")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_string(),
        content_types: list(get("Content Types")),
        critical_actions: list(get("Critical Actions")),
        decisions: list(get("Decisions")),
        noteworthy_events: list(get("Noteworthy Events")),
        about: list(get("About")),
    }
}

fn render_meta(m: &Meta, variant: Variant) -> String {
    let l = |v: &[String]| {
        if v.is_empty() {
            "None".to_string()
        } else {
            v.join("; ")
        }
    };
    match variant {
        Variant::MemWalker => format!("Summary: {}", m.summary),
        Variant::KnowledgeTree => format!(
            "Summary: {}\nContent Types: {}\nCritical Actions: {}\nDecisions: {}\nNoteworthy Events: {}\nAbout: {}",
            m.summary,
            l(&m.content_types),
            l(&m.critical_actions),
            l(&m.decisions),
            l(&m.noteworthy_events),
            l(&m.about)
        ),
    }
}

fn merge_unique(into: &mut Vec<String>, from: &[String], cap: usize) {
    for x in from {
        if into.len() >= cap {
            break;
        }
        if !into.iter().any(|y| y.eq_ignore_ascii_case(x)) {
            into.push(x.clone());
        }
    }
}

#[derive(Deserialize)]
struct Choice {
    #[serde(rename = "Selected Option Index")]
    index: Value,
    #[serde(rename = "Selection Reason", default)]
    reason: String,
}

#[derive(Deserialize)]
struct Verdict {
    #[serde(rename = "Answer", default)]
    answer: Option<Value>,
    #[serde(rename = "No Answer", default)]
    no_answer: Value,
    #[serde(rename = "Partial Answer", default)]
    partial: Value,
}

impl Verdict {
    /// (answer, complete, verdict note). A reply that writes an answer is at least a partial
    /// answer even when it also sets "No Answer" (the prompt allows "No Answer" only when no
    /// answer can be given; small models set every flag to true beside a concrete answer):
    /// such a contradiction is read as a Partial Answer, so the search goes on and the answer
    /// is kept as a fallback, and the note says so.
    fn classify(self) -> (Option<String>, bool, String) {
        let answer = match self.answer {
            Some(Value::String(s))
                if !s.trim().is_empty() && !s.trim().eq_ignore_ascii_case("null") =>
            {
                Some(s.trim().to_string())
            }
            _ => None,
        };
        let no_answer = truthy(&self.no_answer);
        let partial = truthy(&self.partial);
        match answer {
            None => (None, false, "No Answer".to_string()),
            Some(a) if no_answer => (
                Some(a),
                false,
                "Partial Answer (the reply gave an answer but also set \"No Answer\")".to_string(),
            ),
            Some(a) if partial => (Some(a), false, "Partial Answer".to_string()),
            Some(a) => (Some(a), true, "Answer".to_string()),
        }
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::String(s) => s.trim().eq_ignore_ascii_case("true"),
        _ => false,
    }
}

/// What a build needs besides the document.
pub struct BuildCtx<'a> {
    pub llm: &'a Service,
    pub prompts: &'a Prompts,
    pub window: Window,
    /// LLM calls in flight at once (leaves and branches of one level are independent).
    pub concurrency: usize,
}

impl KnowledgeTree {
    /// Builds the tree of `document`.
    pub async fn build(
        ctx: &BuildCtx<'_>,
        variant: Variant,
        params: KtParams,
        document: &str,
        name: &str,
    ) -> Result<KnowledgeTree, KtError> {
        let (llm, prompts, window, concurrency) =
            (ctx.llm, ctx.prompts, ctx.window, ctx.concurrency);
        let started = Instant::now();
        // Chunks of about chunk_chars characters, on segment boundaries.
        let segs = segment(document, (params.chunk_chars / 8).max(16));
        let mut chunks: Vec<String> = Vec::new();
        for s in segs {
            match chunks.last_mut() {
                Some(c) if c.len() + s.text.len() <= params.chunk_chars => c.push_str(&s.text),
                _ => chunks.push(s.text),
            }
        }
        chunks.retain(|c| !c.trim().is_empty());
        if chunks.is_empty() {
            return Err(KtError::EmptyDocument(name.to_string()));
        }
        let mut tree = KnowledgeTree {
            format: FORMAT.into(),
            version: VERSION,
            variant,
            model: llm.model().to_string(),
            params,
            nodes: Vec::new(),
            failures: Vec::new(),
            ledger: LedgerSnapshot::default(),
            build_secs: 0.0,
        };
        let budget = window.prompt_budget().saturating_sub(600);
        // Leaves, in parallel.
        let metas: Vec<(Meta, Option<String>)> = stream::iter(chunks.iter())
            .map(|c| tree.extract(llm, prompts, "Leaf", truncate_tokens(c, budget, false)))
            .buffered(concurrency.max(1))
            .collect()
            .await;
        for (i, (meta, failure)) in metas.into_iter().enumerate() {
            if let Some(e) = failure {
                tree.failures.push(StepFailure {
                    segment: Some(i),
                    step: "kt_leaf".into(),
                    error: e,
                });
            }
            tree.nodes.push(Node {
                level: "Leaf".into(),
                meta,
                content: Some(chunks[i].clone()),
                children: vec![],
            });
        }
        // Branches, level by level, then the root.
        let mut level: Vec<usize> = (0..tree.nodes.len()).collect();
        loop {
            let gs = groups(level.len(), tree.params.branch_min, tree.params.branch_max);
            let is_root = gs.len() == 1;
            let label = if is_root { "Root" } else { "Branch" };
            let inputs: Vec<(Vec<usize>, String)> = gs
                .iter()
                .map(|g| {
                    let kids: Vec<usize> = level[g.clone()].to_vec();
                    let text = kids
                        .iter()
                        .enumerate()
                        .map(|(k, &c)| {
                            format!("Part {k}:\n{}", render_meta(&tree.nodes[c].meta, variant))
                        })
                        .collect::<Vec<_>>()
                        .join("\n\n");
                    (kids, truncate_tokens(&text, budget, false))
                })
                .collect();
            let metas: Vec<(Meta, Option<String>)> = stream::iter(inputs.iter())
                .map(|(_, text)| tree.extract(llm, prompts, label, text.clone()))
                .buffered(concurrency.max(1))
                .collect()
                .await;
            let mut next = Vec::new();
            for ((kids, _), (mut meta, failure)) in inputs.into_iter().zip(metas) {
                if let Some(e) = failure {
                    tree.failures.push(StepFailure {
                        segment: None,
                        step: "kt_branch".into(),
                        error: e,
                    });
                }
                if variant == Variant::KnowledgeTree {
                    for &k in &kids {
                        let child = tree.nodes[k].meta.clone();
                        merge_unique(&mut meta.content_types, &child.content_types, 12);
                        merge_unique(&mut meta.about, &child.about, 30);
                    }
                }
                tree.nodes.push(Node {
                    level: label.into(),
                    meta,
                    content: None,
                    children: kids,
                });
                next.push(tree.nodes.len() - 1);
            }
            if is_root {
                break;
            }
            level = next;
        }
        tree.build_secs = started.elapsed().as_secs_f64();
        tree.ledger = llm.ledger().snapshot();
        Ok(tree)
    }

    /// One node's metadata; on failure a summary made of the text's beginning and the error.
    async fn extract(
        &self,
        llm: &Service,
        prompts: &Prompts,
        level: &str,
        content: String,
    ) -> (Meta, Option<String>) {
        let fallback = |e: String| {
            (
                Meta {
                    summary: truncate_tokens(&content, 120, false),
                    ..Meta::default()
                },
                Some(e),
            )
        };
        match self.variant {
            Variant::MemWalker => {
                #[derive(Deserialize)]
                struct S {
                    summary: String,
                }
                let p = match prompts.render(PromptId::Summary, &[("context", &content)]) {
                    Ok(p) => p,
                    Err(e) => return fallback(e.to_string()),
                };
                let schema = json!({"type": "object", "properties": {"summary": {"type": "string", "minLength": 1}}, "required": ["summary"]});
                match llm
                    .chat_json::<S>(
                        "mw_summary",
                        vec![Message::user(p)],
                        Some(JsonSchema {
                            name: "summary".into(),
                            schema,
                        }),
                    )
                    .await
                {
                    Ok(r) => (
                        Meta {
                            summary: r.value.summary.trim().to_string(),
                            ..Meta::default()
                        },
                        None,
                    ),
                    Err(e) => fallback(e.to_string()),
                }
            }
            Variant::KnowledgeTree => {
                let taxonomy = match prompts.render(PromptId::KtTaxonomy, &[]) {
                    Ok(t) => t,
                    Err(e) => return fallback(e.to_string()),
                };
                let p = match prompts.render(
                    PromptId::KtNode,
                    &[
                        ("level", level),
                        ("taxonomy", taxonomy.trim()),
                        ("content", &content),
                    ],
                ) {
                    Ok(p) => p,
                    Err(e) => return fallback(e.to_string()),
                };
                let list = json!({"type": "array", "items": {"type": "string"}, "maxItems": 12});
                let schema = json!({"type": "object", "properties": {
                    "Summary": {"type": "string", "minLength": 1},
                    "Content Types": list, "Critical Actions": list, "Decisions": list,
                    "Noteworthy Events": list, "About": list
                }, "required": ["Summary", "Content Types", "Critical Actions", "Decisions", "Noteworthy Events", "About"]});
                match llm
                    .chat_json::<Value>(
                        "kt_node",
                        vec![Message::user(p)],
                        Some(JsonSchema {
                            name: "kt_node".into(),
                            schema,
                        }),
                    )
                    .await
                {
                    Ok(r) => {
                        let m = meta_from(&r.value);
                        if m.summary.is_empty() {
                            fallback("the reply has no Summary".into())
                        } else {
                            (m, None)
                        }
                    }
                    Err(e) => fallback(e.to_string()),
                }
            }
        }
    }

    pub fn root(&self) -> Option<usize> {
        self.nodes.len().checked_sub(1)
    }

    fn is_leaf(&self, n: usize) -> bool {
        self.nodes[n].children.is_empty()
    }

    /// The LLM's choice among `options` (children of `parent`), or the first option when the
    /// reply cannot be used (recorded in the step).
    async fn choose(
        &self,
        llm: &Service,
        prompts: &Prompts,
        parent: usize,
        options: &[usize],
        question: &str,
        steps: &mut Vec<Step>,
    ) -> Result<usize, KtError> {
        if options.len() == 1 {
            return Ok(options[0]);
        }
        let root = self
            .root()
            .map(|r| self.nodes[r].meta.summary.clone())
            .unwrap_or_default();
        let branch = if Some(parent) == self.root() {
            "None (at the root)".to_string()
        } else {
            render_meta(&self.nodes[parent].meta, self.variant)
        };
        let rendered = options
            .iter()
            .enumerate()
            .map(|(i, &o)| {
                format!(
                    "- Index: {i}\n{}",
                    render_meta(&self.nodes[o].meta, self.variant)
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        let level = if options.iter().all(|&o| self.is_leaf(o)) {
            "Leaf"
        } else {
            "Branch"
        };
        let p = prompts.render(
            PromptId::KtChoose,
            &[
                ("level", level),
                ("root_summary", &root),
                ("branch", &branch),
                ("options", &rendered),
                ("question", question),
            ],
        )?;
        let schema = json!({"type": "object", "properties": {
            "Selected Option Index": {"type": "integer", "minimum": 0, "maximum": options.len() - 1},
            "Selection Reason": {"type": "string", "maxLength": 400}
        }, "required": ["Selected Option Index", "Selection Reason"]});
        let stage = if self.variant == Variant::MemWalker {
            "mw_choose"
        } else {
            "kt_choose"
        };
        let (pick, reason) = match llm
            .chat_json::<Choice>(
                stage,
                vec![Message::user(p)],
                Some(JsonSchema {
                    name: "choose".into(),
                    schema,
                }),
            )
            .await
        {
            Ok(r) => {
                let i = match &r.value.index {
                    Value::Number(n) => n.as_u64().map(|x| x as usize),
                    Value::String(s) => s.trim().parse().ok(),
                    _ => None,
                };
                match i.filter(|&i| i < options.len()) {
                    Some(i) => (i, r.value.reason),
                    None => (
                        0,
                        format!("index {} is not an option; took option 0", r.value.index),
                    ),
                }
            }
            Err(e) => (0, format!("the choice failed ({e}); took option 0")),
        };
        steps.push(Step {
            kind: StepKind::Choose,
            segments: self.leaves_under(options[pick]),
            reason,
            note: format!(
                "node {parent}: option {pick} of {} -> node {}",
                options.len(),
                options[pick]
            ),
            ..Step::default()
        });
        Ok(options[pick])
    }

    /// Leaf indices (= chunk numbers) under `n`.
    fn leaves_under(&self, n: usize) -> Vec<usize> {
        if self.is_leaf(n) {
            return vec![n];
        }
        self.nodes[n]
            .children
            .iter()
            .flat_map(|&c| self.leaves_under(c))
            .collect()
    }

    /// Answers from one leaf: (answer, complete). The verdict (see `Verdict::classify`) is a step.
    async fn try_leaf(
        &self,
        llm: &Service,
        prompts: &Prompts,
        window: Window,
        leaf: usize,
        question: &str,
        steps: &mut Vec<Step>,
    ) -> Result<(Option<String>, bool), KtError> {
        let content = self.nodes[leaf].content.clone().unwrap_or_default();
        let overhead = count_tokens(&prompts.render(
            PromptId::KtAnswer,
            &[("content", ""), ("question", question)],
        )?);
        let text = truncate_tokens(
            &content,
            window.prompt_budget().saturating_sub(overhead),
            false,
        );
        let p = prompts.render(
            PromptId::KtAnswer,
            &[("content", &text), ("question", question)],
        )?;
        let schema = json!({"type": "object", "properties": {
            "Answer": {"type": ["string", "null"], "maxLength": 300},
            "No Answer": {"type": "boolean"},
            "Partial Answer": {"type": "boolean"}
        }, "required": ["Answer", "No Answer", "Partial Answer"]});
        let stage = if self.variant == Variant::MemWalker {
            "mw_answer"
        } else {
            "kt_answer"
        };
        let (answer, complete, note) = match llm
            .chat_json::<Verdict>(
                stage,
                vec![Message::user(p)],
                Some(JsonSchema {
                    name: "leaf_answer".into(),
                    schema,
                }),
            )
            .await
        {
            Ok(r) => r.value.classify(),
            Err(e) => (None, false, format!("the leaf answer failed: {e}")),
        };
        steps.push(Step {
            kind: StepKind::Leaf,
            segments: vec![leaf],
            note: format!("leaf {leaf}: {note}"),
            reason: answer.clone().unwrap_or_default(),
            ..Step::default()
        });
        Ok((answer, complete))
    }

    /// Answers `question` by navigating the tree (see the module docs for the two policies).
    pub async fn ask(
        &self,
        llm: &Service,
        prompts: &Prompts,
        window: Window,
        question: &str,
        options: &[String],
    ) -> Result<Trace, KtError> {
        if question.trim().is_empty() {
            return Err(KtError::EmptyQuestion);
        }
        let root = self
            .root()
            .ok_or_else(|| KtError::EmptyDocument("the tree".into()))?;
        let before = llm.ledger().snapshot().total();
        let q = with_options(question, options);
        let mut steps = Vec::new();
        let mut partials: Vec<String> = Vec::new();
        let mut complete: Option<String> = None;
        let mut used = BTreeSet::new();
        let mut dead: BTreeSet<usize> = BTreeSet::new();
        let p = &self.params;
        match self.variant {
            Variant::KnowledgeTree => {
                'branches: for _ in 0..p.max_branch_attempts {
                    // Descend to a branch of leaves, skipping exhausted nodes.
                    let mut node = root;
                    while !self.nodes[node].children.iter().all(|&c| self.is_leaf(c)) {
                        let opts: Vec<usize> = self.nodes[node]
                            .children
                            .iter()
                            .copied()
                            .filter(|c| !dead.contains(c))
                            .collect();
                        if opts.is_empty() {
                            dead.insert(node);
                            if node == root {
                                break 'branches;
                            }
                            node = root;
                            continue;
                        }
                        node = self
                            .choose(llm, prompts, node, &opts, &q, &mut steps)
                            .await?;
                    }
                    if dead.contains(&node) {
                        break;
                    }
                    for _ in 0..p.leaves_per_branch {
                        let opts: Vec<usize> = self.nodes[node]
                            .children
                            .iter()
                            .copied()
                            .filter(|c| !dead.contains(c))
                            .collect();
                        if opts.is_empty() {
                            break;
                        }
                        let leaf = self
                            .choose(llm, prompts, node, &opts, &q, &mut steps)
                            .await?;
                        used.insert(leaf);
                        let (a, ok) = self
                            .try_leaf(llm, prompts, window, leaf, &q, &mut steps)
                            .await?;
                        dead.insert(leaf);
                        match (a, ok) {
                            (Some(a), true) => {
                                complete = Some(a);
                                break 'branches;
                            }
                            (Some(a), false) => partials.push(a),
                            _ => {}
                        }
                    }
                    dead.insert(node);
                    if node == root {
                        break;
                    }
                }
            }
            Variant::MemWalker => {
                // One path with revert: a depth-first walk guided by the LLM's choices.
                let budget = p.max_branch_attempts * p.leaves_per_branch;
                let mut path = vec![root];
                let mut read = 0;
                while let Some(&node) = path.last() {
                    if read >= budget {
                        break;
                    }
                    if self.is_leaf(node) {
                        used.insert(node);
                        read += 1;
                        let (a, ok) = self
                            .try_leaf(llm, prompts, window, node, &q, &mut steps)
                            .await?;
                        dead.insert(node);
                        path.pop();
                        match (a, ok) {
                            (Some(a), true) => {
                                complete = Some(a);
                                break;
                            }
                            (Some(a), false) => partials.push(a),
                            _ => {}
                        }
                        continue;
                    }
                    let opts: Vec<usize> = self.nodes[node]
                        .children
                        .iter()
                        .copied()
                        .filter(|c| !dead.contains(c))
                        .collect();
                    if opts.is_empty() {
                        dead.insert(node);
                        path.pop();
                        if !path.is_empty() {
                            steps.push(Step {
                                kind: StepKind::Revert,
                                note: format!(
                                    "node {node} exhausted: back to node {}",
                                    path[path.len() - 1]
                                ),
                                ..Step::default()
                            });
                        }
                        continue;
                    }
                    let next = self
                        .choose(llm, prompts, node, &opts, &q, &mut steps)
                        .await?;
                    path.push(next);
                }
            }
        }
        let answered = complete.is_some();
        let answer = complete
            .or_else(|| partials.first().cloned())
            .unwrap_or_else(|| "no answer".to_string());
        let answer = if options.is_empty() {
            answer
        } else {
            option_letter(&answer, options)
        };
        let after = llm.ledger().snapshot().total();
        let used: Vec<usize> = used.into_iter().collect();
        let mut trace = Trace {
            method: match self.variant {
                Variant::KnowledgeTree => "knowledge-tree".into(),
                Variant::MemWalker => "memwalker".into(),
            },
            question: question.to_string(),
            answer,
            answered,
            reasoning: if answered {
                "a leaf gave a complete answer".into()
            } else if partials.is_empty() {
                "no leaf gave an answer".into()
            } else {
                format!("the best partial answer of {}", partials.len())
            },
            start_entities: vec![],
            steps,
            segments_used: used.clone(),
            final_segments: used,
            failures: vec![],
            ..Trace::default()
        };
        trace.set_cost(&before, &after);
        trace.set_spans(&self.node_spans());
        Ok(trace)
    }

    /// The byte range of every node in the document: a leaf's chunk (leaves come first and are
    /// consecutive segments of the document), an empty range for branches and the root.
    pub fn node_spans(&self) -> Vec<crate::text::Span> {
        crate::text::span::consecutive(
            self.nodes
                .iter()
                .map(|n| n.content.as_deref().unwrap_or_default()),
        )
    }
}

/// Knowledge Tree or MemWalker navigation (seed 000) as a method.
#[derive(Clone, Copy, Debug)]
pub struct KtMethod(pub Variant);

pub const FAMILY: super::method::Family = super::method::Family {
    names: || "knowledge-tree, memwalker".to_string(),
    parse: |name| {
        let variant = match name {
            "knowledge-tree" => Variant::KnowledgeTree,
            "memwalker" => Variant::MemWalker,
            _ => return None,
        };
        Some(super::method::MethodSpec::new(KtMethod(variant)))
    },
};

#[async_trait::async_trait]
impl super::method::Method for KtMethod {
    fn name(&self) -> String {
        self.memory_kind().name().into()
    }

    fn memory_kind(&self) -> super::MemoryKind {
        match self.0 {
            Variant::KnowledgeTree => super::MemoryKind::KnowledgeTree,
            Variant::MemWalker => super::MemoryKind::MemWalker,
        }
    }

    async fn answer(
        &self,
        ctx: &super::Ctx<'_>,
        _nav: &crate::config::NavigateConfig,
        prepared: &super::Prepared,
        question: &str,
        options: &[String],
    ) -> Result<Trace, super::MethodError> {
        match prepared {
            super::Prepared::Kt(t) if t.variant == self.0 => Ok(t
                .ask(ctx.llm, ctx.prompts, ctx.window, question, options)
                .await?),
            _ => Err(super::method::wrong_memory(self, prepared)),
        }
    }

    fn recorded_context(&self) -> super::Recorded {
        // The leaves read.
        super::Recorded::Units
    }
}

/// Writes the tree atomically.
pub fn save(tree: &KnowledgeTree, path: &std::path::Path) -> Result<(), String> {
    let bytes = serde_json::to_vec(tree).map_err(|e| e.to_string())?;
    crate::fsutil::write_atomic(path, &bytes)
}

/// Reads a tree, checking its format and version.
pub fn load(path: &std::path::Path) -> Result<KnowledgeTree, String> {
    crate::fsutil::read_versioned(path, FORMAT, VERSION, "knowledge tree")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_hold_five_to_eight() {
        for n in 5..200 {
            let g = groups(n, 5, 8);
            assert_eq!(g.iter().map(|r| r.len()).sum::<usize>(), n);
            // Consecutive and in order.
            assert!(g.windows(2).all(|w| w[0].end == w[1].start), "{n}: {g:?}");
            if n == 9 {
                // 9 cannot be split into groups of 5-8 (5 + 4 leaves one short): it stays one
                // group, the one documented exception.
                assert_eq!(g, vec![0..9]);
            } else {
                assert!(g.iter().all(|r| (5..=8).contains(&r.len())), "{n}: {g:?}");
            }
        }
        assert_eq!(groups(3, 5, 8), vec![0..3]);
        assert!(groups(0, 5, 8).is_empty());
    }

    #[test]
    fn leaf_verdicts_read_contradictions_as_partial() {
        let v = |j: Value| serde_json::from_value::<Verdict>(j).map(Verdict::classify);
        let c = v(json!({"Answer": "C", "No Answer": false, "Partial Answer": false})).unwrap();
        assert_eq!(
            (c.0.as_deref(), c.1, c.2.as_str()),
            (Some("C"), true, "Answer")
        );
        let p = v(json!({"Answer": "C", "No Answer": false, "Partial Answer": true})).unwrap();
        assert_eq!((p.0.as_deref(), p.1), (Some("C"), false));
        assert_eq!(p.2, "Partial Answer");
        // The 0.5B model's habit: an answer with every flag set. Kept, but not complete.
        let x = v(json!({"Answer": "B", "No Answer": true, "Partial Answer": true})).unwrap();
        assert_eq!((x.0.as_deref(), x.1), (Some("B"), false));
        assert!(x.2.contains("also set \"No Answer\""), "{}", x.2);
        let x = v(json!({"Answer": "B", "No Answer": "true", "Partial Answer": false})).unwrap();
        assert_eq!((x.0.as_deref(), x.1), (Some("B"), false));
        for empty in [json!(null), json!(""), json!("null"), json!("  ")] {
            let n =
                v(json!({"Answer": empty, "No Answer": false, "Partial Answer": false})).unwrap();
            assert_eq!((n.0, n.1, n.2.as_str()), (None, false, "No Answer"));
        }
    }

    #[test]
    fn lists_accept_strings_nulls_and_none() {
        assert_eq!(list(Some(&json!(["a", "None", null, 3]))), vec!["a", "3"]);
        assert_eq!(list(Some(&json!("n/a"))), Vec::<String>::new());
        assert_eq!(list(Some(&json!("one"))), vec!["one"]);
    }
}
