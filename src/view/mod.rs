//! `qrmem view`: one self-contained HTML page of a memory and, optionally, one question's
//! navigation over it: the graph around the question (or the tree / DAG and the path taken), the
//! trace as a timeline, and the document as a strip of units coloured by when they were shown,
//! with the gold evidence marked where the dataset gives it.
//!
//! Boundary: reads a [`Prepared`] memory and a [`Trace`]; writes one HTML string. The page needs
//! no network: cytoscape.js (vendored from npm with its licence, `vendor/`) and the page's own
//! script and style are inlined.
//! Invariants: the page's data is JSON inside a `<script type="application/json">` with every
//! `<`, `>` and `&` escaped, and the page's script writes text only through `textContent`, so
//! HTML in entity names, relations or segments is shown, never run; the graph holds the
//! neighbourhood of what the trace touched (at most [`MAX_NODES`] nodes), never the whole memory.

mod corpus;

pub use corpus::corpus_data;

use std::collections::{BTreeMap, BTreeSet};

use petgraph::stable_graph::NodeIndex;
use petgraph::visit::{EdgeRef, IntoEdgeReferences};
use petgraph::Direction;
use serde::Serialize;
use thiserror::Error;

use crate::answer::Trace;
use crate::memory::Memory;
use crate::methods::{MethodSpec, Prepared};
use crate::text::Span;

/// The most nodes a page draws.
pub const MAX_NODES: usize = 150;

const CYTOSCAPE: &str = include_str!("vendor/cytoscape.min.js");
const SCRIPT: &str = include_str!("page.js");
const STYLE: &str = include_str!("page.css");

#[derive(Debug, Error)]
pub enum ViewError {
    #[error("cannot write the page {path}: {reason}")]
    Write { path: String, reason: String },
    #[error("the trace {trace} does not belong to the memory {memory}: {reason}")]
    Mismatch {
        trace: String,
        memory: String,
        reason: String,
    },
    #[error("cannot read the trace {trace} (for the memory {memory}): {reason}")]
    Trace {
        trace: String,
        memory: String,
        reason: String,
    },
    #[error(transparent)]
    Memory(#[from] crate::methods::MethodError),
    #[error(transparent)]
    Corpus(#[from] crate::corpus::CorpusError),
    #[error("cannot serialise the page data: {0}")]
    Json(#[from] serde_json::Error),
}

/// Reads a trace file: a [`Trace`] as JSON, and the gold evidence's spans where the file carries
/// them (`gold_spans`, as `qrmem eval --trace-dir` writes them).
pub fn read_trace(
    path: &std::path::Path,
    memory: &std::path::Path,
) -> Result<(Trace, Option<Vec<Span>>), ViewError> {
    let fail = |reason: String| ViewError::Trace {
        trace: path.display().to_string(),
        memory: memory.display().to_string(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| fail(format!("not JSON: {e}")))?;
    let gold = match value.get("gold_spans") {
        Some(g) if !g.is_null() => Some(
            serde_json::from_value(g.clone())
                .map_err(|e| fail(format!("gold_spans is not a list of [start, end]: {e}")))?,
        ),
        _ => None,
    };
    let trace: Trace =
        serde_json::from_value(value).map_err(|e| fail(format!("not a qrmem trace: {e}")))?;
    Ok((trace, gold))
}

/// `qrmem view`: the page of the memory file `memory` (and the trace file `trace`) written to
/// `out`; returns the line that says what was written.
pub fn write_page(
    memory: &std::path::Path,
    trace: Option<&std::path::Path>,
    out: &std::path::Path,
) -> Result<String, ViewError> {
    let (page, data) = page_of_files(memory, trace)?;
    write_file(out, &page)?;
    Ok(format!(
        "wrote {} ({} nodes, {} edges, {} trace steps, {} units)",
        out.display(),
        data.nodes.len(),
        data.edges.len(),
        data.steps.len(),
        data.units.len()
    ))
}

/// Writes the page of `question` over the corpus in `dir` ([`corpus_data`]) to `out`.
pub fn write_corpus_page(
    dir: &std::path::Path,
    question: &str,
    retriever: crate::corpus::Retriever,
    budget: usize,
    out: &std::path::Path,
) -> Result<String, ViewError> {
    let corpus = crate::corpus::Corpus::open_existing(dir)?;
    let data = corpus_data(&corpus, question, retriever, budget)?;
    write_file(out, &render(&data)?)?;
    Ok(format!(
        "wrote {} ({} entities, {} links, {} passages, {} shown)",
        out.display(),
        data.nodes.len(),
        data.edges.len(),
        data.units.len(),
        data.units.iter().filter(|u| u.answer).count()
    ))
}

/// Writes `page` to `out`, an error naming it.
fn write_file(out: &std::path::Path, page: &str) -> Result<(), ViewError> {
    std::fs::write(out, page.as_bytes()).map_err(|e| ViewError::Write {
        path: out.display().to_string(),
        reason: e.to_string(),
    })
}

/// The page of the memory file `memory` and (optionally) the trace file `trace` over it.
pub fn page_of_files(
    memory: &std::path::Path,
    trace: Option<&std::path::Path>,
) -> Result<(String, ViewData), ViewError> {
    let prepared = crate::methods::open(memory)?;
    let mut labels = Labels {
        memory: memory.display().to_string(),
        ..Labels::default()
    };
    let trace = match trace {
        Some(path) => {
            let (t, gold) = read_trace(path, memory)?;
            labels.trace = path.display().to_string();
            labels.gold = gold;
            Some(t)
        }
        None => None,
    };
    let data = data(&prepared, trace.as_ref(), &labels)?;
    Ok((render(&data)?, data))
}

/// What the page shows besides the memory and the trace.
#[derive(Clone, Debug, Default)]
pub struct Labels {
    /// The memory file, as the page names it.
    pub memory: String,
    /// The trace file, as the page names it.
    pub trace: String,
    /// The gold evidence's byte ranges in the document, where the dataset gives them.
    pub gold: Option<Vec<Span>>,
    /// Extra lines for the header (score, item id, ...).
    pub facts: Vec<String>,
}

/// One drawn node.
#[derive(Clone, Debug, Serialize)]
pub struct ViewNode {
    pub id: String,
    pub label: String,
    /// Entity type, or the tree level ("leaf", "summary", "root", "chunk", "ip").
    pub kind: String,
    /// start (in E_s), touched (by a step), neighbour, or for trees: path, other.
    pub role: String,
    pub generic: bool,
    /// Details shown on click (mentions, segments, a node's text).
    pub detail: String,
}

/// One drawn edge.
#[derive(Clone, Debug, Serialize)]
pub struct ViewEdge {
    pub id: String,
    pub source: String,
    pub target: String,
    pub label: String,
    /// chosen, candidate, or other.
    pub role: String,
}

/// One unit of the document strip.
#[derive(Clone, Debug, Serialize)]
pub struct ViewUnit {
    pub index: usize,
    pub start: usize,
    pub end: usize,
    pub text: String,
    /// The first step whose prompt showed it.
    pub first_shown: Option<usize>,
    /// In the final answer prompt.
    pub answer: bool,
    /// The gold ranges inside it, relative to its start.
    pub gold: Vec<Span>,
}

/// The page's data (also what the browser test compares the DOM with).
#[derive(Clone, Debug, Serialize)]
pub struct ViewData {
    pub memory: String,
    pub trace: String,
    pub kind: String,
    pub method: String,
    pub question: String,
    pub answer: String,
    pub facts: Vec<String>,
    pub tree: bool,
    pub nodes: Vec<ViewNode>,
    pub edges: Vec<ViewEdge>,
    pub units: Vec<ViewUnit>,
    pub steps: Vec<crate::answer::Step>,
    pub start_entities: Vec<String>,
    pub has_gold: bool,
}

/// Checks that `trace` was made over `prepared`: its method reads this kind of memory, its unit
/// indices exist, and its start entities are the memory's.
pub fn check(prepared: &Prepared, trace: &Trace, labels: &Labels) -> Result<(), ViewError> {
    let fail = |reason: String| ViewError::Mismatch {
        trace: labels.trace.clone(),
        memory: labels.memory.clone(),
        reason,
    };
    if let Ok(spec) = trace.method.parse::<MethodSpec>() {
        let wants = spec.memory_kind();
        let has = prepared.kind();
        if !(wants == has || wants.is_qrmem_memory() && has.is_qrmem_memory()) {
            return Err(fail(format!(
                "the trace's method {} reads a {} memory, this is a {} memory",
                trace.method,
                wants.name(),
                has.name()
            )));
        }
    }
    let units = prepared.unit_spans().len();
    let indices = trace
        .segments_used
        .iter()
        .chain(&trace.final_segments)
        .chain(trace.steps.iter().flat_map(|s| s.segments.iter()));
    if let Some(i) = indices.filter(|&&i| i >= units).max() {
        return Err(fail(format!(
            "the trace shows unit {i}, the memory has {units}"
        )));
    }
    if let Prepared::Graph(m) = prepared {
        let names = names(m);
        if let Some(e) = trace
            .start_entities
            .iter()
            .find(|e| !names.contains_key(e.as_str()))
        {
            return Err(fail(format!(
                "the trace's start entity {e:?} is not in the memory"
            )));
        }
    }
    Ok(())
}

fn names(m: &Memory) -> BTreeMap<&str, NodeIndex> {
    m.graph
        .node_indices()
        .map(|n| (m.graph[n].name.as_str(), n))
        .collect()
}

/// Whether `method` works over passages (the method says so: `Method::reads_passages`), so
/// its trace's unit indices name passages. A name that is no method reads segments.
fn reads_passages(method: &str) -> bool {
    method
        .parse::<MethodSpec>()
        .is_ok_and(|m| m.reads_passages())
}

/// The page data of `prepared` and (optionally) `trace` over it.
pub fn data(
    prepared: &Prepared,
    trace: Option<&Trace>,
    labels: &Labels,
) -> Result<ViewData, ViewError> {
    // A passage-grain method's trace (`-passagesN`, `bm25-passagesN`) numbers passages, not
    // segments: the page shows the memory's passage view (the default cap).
    let view;
    let prepared = match (prepared, trace) {
        (Prepared::Graph(m), Some(t)) if reads_passages(&t.method) => {
            view = Prepared::Graph(Box::new(
                m.passage_view(crate::text::passages::DEFAULT_PASSAGE_TOKENS),
            ));
            &view
        }
        _ => prepared,
    };
    if let Some(t) = trace {
        check(prepared, t, labels)?;
    }
    let (nodes, edges, tree) = match prepared {
        Prepared::Graph(m) => {
            let (n, e) = graph_view(m, trace);
            (n, e, false)
        }
        other => {
            let (n, e) = tree_view(other, trace);
            (n, e, true)
        }
    };
    let texts = prepared.unit_texts();
    let spans = prepared.unit_spans();
    let mut first: BTreeMap<usize, usize> = BTreeMap::new();
    let mut answer: BTreeSet<usize> = BTreeSet::new();
    if let Some(t) = trace {
        for (i, s) in t.steps.iter().enumerate() {
            for &u in &s.segments {
                first.entry(u).or_insert(i);
            }
        }
        answer.extend(t.final_segments.iter().copied());
    }
    let gold = labels.gold.clone().unwrap_or_default();
    let units = spans
        .iter()
        .zip(texts)
        .enumerate()
        .filter(|(_, (s, _))| s.0 < s.1)
        .map(|(i, (&(a, b), text))| ViewUnit {
            index: i,
            start: a,
            end: b,
            text,
            first_shown: first.get(&i).copied(),
            answer: answer.contains(&i),
            gold: gold
                .iter()
                .filter(|g| g.0 < b && g.1 > a)
                .map(|g| (g.0.max(a) - a, g.1.min(b) - a))
                .collect(),
        })
        .collect();
    Ok(ViewData {
        memory: labels.memory.clone(),
        trace: labels.trace.clone(),
        kind: prepared.kind().name().into(),
        method: trace.map(|t| t.method.clone()).unwrap_or_default(),
        question: trace.map(|t| t.question.clone()).unwrap_or_default(),
        answer: trace.map(|t| t.answer.clone()).unwrap_or_default(),
        facts: labels.facts.clone(),
        tree,
        nodes,
        edges,
        units,
        steps: trace.map(|t| t.steps.clone()).unwrap_or_default(),
        start_entities: trace.map(|t| t.start_entities.clone()).unwrap_or_default(),
        has_gold: labels.gold.is_some(),
    })
}

/// The ends of an edge as a trace writes it: "head | description | tail".
fn edge_ends(text: &str) -> Option<(&str, &str)> {
    let (head, rest) = text.split_once(" | ")?;
    let (_, tail) = rest.rsplit_once(" | ")?;
    Some((head, tail))
}

/// The graph around the trace: its start entities, every entity a step holds or an edge it
/// scored touches, and their first-order neighbours (the most connected first), up to
/// [`MAX_NODES`]; without a trace, the most connected entities.
fn graph_view(m: &Memory, trace: Option<&Trace>) -> (Vec<ViewNode>, Vec<ViewEdge>) {
    let names = names(m);
    let segments = m.segments.len().max(1);
    let mut role: BTreeMap<NodeIndex, &'static str> = BTreeMap::new();
    let mut chosen: BTreeSet<(String, String)> = BTreeSet::new();
    let mut candidates: BTreeSet<(String, String)> = BTreeSet::new();
    let degree = |n: NodeIndex| {
        m.graph.edges_directed(n, Direction::Outgoing).count()
            + m.graph.edges_directed(n, Direction::Incoming).count()
    };
    match trace {
        Some(t) => {
            for e in &t.start_entities {
                if let Some(&n) = names.get(e.as_str()) {
                    role.insert(n, "start");
                }
            }
            for s in &t.steps {
                let touched = s.entities.iter().map(String::as_str).chain(
                    s.chosen
                        .iter()
                        .chain(&s.candidates)
                        .filter_map(|e| edge_ends(&e.text))
                        .flat_map(|(h, t)| [h, t]),
                );
                for name in touched {
                    if let Some(&n) = names.get(name) {
                        role.entry(n).or_insert("touched");
                    }
                }
                for (set, edges) in [(&mut chosen, &s.chosen), (&mut candidates, &s.candidates)] {
                    for e in edges {
                        if let Some((h, t)) = edge_ends(&e.text) {
                            set.insert((h.to_string(), t.to_string()));
                        }
                    }
                }
            }
            let core: Vec<NodeIndex> = role.keys().copied().collect();
            let mut around: Vec<NodeIndex> = core
                .iter()
                .flat_map(|&n| m.graph.neighbors_undirected(n))
                .filter(|n| !role.contains_key(n))
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            around.sort_by_key(|&n| std::cmp::Reverse(degree(n)));
            for n in around {
                if role.len() >= MAX_NODES {
                    break;
                }
                role.insert(n, "neighbour");
            }
        }
        None => {
            let mut all: Vec<NodeIndex> = m.graph.node_indices().collect();
            all.sort_by_key(|&n| std::cmp::Reverse(degree(n)));
            for n in all.into_iter().take(MAX_NODES.min(60)) {
                role.insert(n, "neighbour");
            }
        }
    }
    let nodes = role
        .iter()
        .map(|(&n, &r)| {
            let e = &m.graph[n];
            let segs: Vec<String> = e.segments.iter().map(usize::to_string).collect();
            ViewNode {
                id: format!("n{}", n.index()),
                label: e.name.clone(),
                kind: e.kind.clone(),
                role: r.into(),
                generic: crate::memory::is_generic(e.segments.len(), segments),
                detail: format!(
                    "{} ({}); mentions: {}; segments: {}",
                    e.name,
                    e.kind,
                    e.mentions.iter().cloned().collect::<Vec<_>>().join(", "),
                    segs.join(" ")
                ),
            }
        })
        .collect();
    let edges = (&m.graph)
        .edge_references()
        .filter(|e| role.contains_key(&e.source()) && role.contains_key(&e.target()))
        .map(|e| {
            let key = (
                m.graph[e.source()].name.clone(),
                m.graph[e.target()].name.clone(),
            );
            ViewEdge {
                id: format!("e{}", e.id().index()),
                source: format!("n{}", e.source().index()),
                target: format!("n{}", e.target().index()),
                label: e.weight().description.clone(),
                role: if chosen.contains(&key) {
                    "chosen"
                } else if candidates.contains(&key) {
                    "candidate"
                } else {
                    "other"
                }
                .into(),
            }
        })
        .collect();
    (nodes, edges)
}

/// The tree or DAG of a seed system, with the units the trace visited marked as the path.
fn tree_view(prepared: &Prepared, trace: Option<&Trace>) -> (Vec<ViewNode>, Vec<ViewEdge>) {
    let visited: BTreeSet<usize> = trace
        .map(|t| {
            t.steps
                .iter()
                .flat_map(|s| s.segments.iter().copied())
                .chain(t.segments_used.iter().copied())
                .collect()
        })
        .unwrap_or_default();
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    let mut edge = |from: String, to: String, label: String| {
        let id = format!("e{}", edges.len());
        edges.push(ViewEdge {
            id,
            source: from,
            target: to,
            label,
            role: "other".into(),
        });
    };
    match prepared {
        Prepared::Tree(t) => {
            // Nodes by span, from the root down; a leaf's index is its unit index.
            let mut stack: Vec<crate::methods::summary_tree::Span> = t.root().into_iter().collect();
            while let Some(s) = stack.pop() {
                let id = format!("s{}-{}", s.start, s.len);
                let leaf = s.len == 1;
                let on_path = (s.start..s.start + s.len).any(|i| visited.contains(&i));
                nodes.push(ViewNode {
                    id: id.clone(),
                    label: if leaf {
                        format!("leaf {}", s.start)
                    } else {
                        format!("{}..{}", s.start, s.start + s.len - 1)
                    },
                    kind: if leaf { "leaf" } else { "summary" }.into(),
                    role: if on_path { "path" } else { "other" }.into(),
                    generic: false,
                    detail: t.text(s).to_string(),
                });
                if let Some((l, r)) = s.children() {
                    for c in [l, r] {
                        edge(id.clone(), format!("s{}-{}", c.start, c.len), String::new());
                        stack.push(c);
                    }
                }
            }
        }
        Prepared::Kt(t) => {
            let children: Vec<Vec<usize>> = t.nodes.iter().map(|n| n.children.clone()).collect();
            let path = with_ancestors(&visited, &children);
            let on_path = |i: usize| path.contains(&i);
            for (i, n) in t.nodes.iter().enumerate() {
                nodes.push(ViewNode {
                    id: format!("k{i}"),
                    label: format!("{} {i}", n.level),
                    kind: n.level.to_lowercase(),
                    role: if on_path(i) { "path" } else { "other" }.into(),
                    generic: false,
                    detail: n.content.clone().unwrap_or_else(|| n.meta.summary.clone()),
                });
                for &c in &n.children {
                    edge(format!("k{i}"), format!("k{c}"), String::new());
                }
            }
        }
        Prepared::Garlic(g) => {
            let children: Vec<Vec<usize>> = g
                .nodes
                .iter()
                .map(|n| n.children.iter().map(|c| c.0).collect())
                .collect();
            let path = with_ancestors(&visited, &children);
            let on_path = |i: usize| path.contains(&i);
            for (i, n) in g.nodes.iter().enumerate() {
                nodes.push(ViewNode {
                    id: format!("g{i}"),
                    label: format!("L{} {i}", n.level),
                    kind: if n.level == 1 { "chunk" } else { "ip" }.into(),
                    role: if on_path(i) { "path" } else { "other" }.into(),
                    generic: false,
                    detail: n.text.clone(),
                });
                for &(c, w) in &n.children {
                    edge(format!("g{i}"), format!("g{c}"), format!("{w:.2}"));
                }
            }
        }
        Prepared::Graph(_) => {}
    }
    (nodes, edges)
}

/// `visited` and every node above one of them (`children[i]`: node i's children).
fn with_ancestors(visited: &BTreeSet<usize>, children: &[Vec<usize>]) -> BTreeSet<usize> {
    let mut path = visited.clone();
    loop {
        let before = path.len();
        for (i, c) in children.iter().enumerate() {
            if c.iter().any(|c| path.contains(c)) {
                path.insert(i);
            }
        }
        if path.len() == before {
            return path;
        }
    }
}

/// JSON safe inside a `<script>` element: `<`, `>` and `&` escaped as JSON escapes.
fn script_json(value: &impl Serialize) -> Result<String, ViewError> {
    Ok(serde_json::to_string(value)?
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026"))
}

/// Text safe inside HTML elements and attribute values.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page of `data`.
pub fn render(data: &ViewData) -> Result<String, ViewError> {
    let title = if data.question.is_empty() {
        format!("qrmem: {}", data.memory)
    } else {
        format!("qrmem: {}", data.question)
    };
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<header id=\"header\"></header>\n<main>\n<section id=\"graph-box\"><h2 id=\"graph-title\"></h2><div id=\"graph\"></div><div id=\"detail\"></div></section>\n<section id=\"timeline-box\"><h2>Trace</h2><ol id=\"timeline\"></ol></section>\n</main>\n<section id=\"doc-box\"><h2>Document</h2><div id=\"legend\"></div><div id=\"strip\"></div><pre id=\"unit-text\"></pre></section>\n<script type=\"application/json\" id=\"data\">{}</script>\n<script>{CYTOSCAPE}</script>\n<script>{SCRIPT}</script>\n</body>\n</html>\n",
        escape(&title),
        script_json(data)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passage_methods_are_told_by_their_names() {
        for m in [
            "kn-passages400",
            "bm25-passages1200",
            "kn-final-s-mix-passages400-check44",
        ] {
            assert!(reads_passages(m), "{m}");
        }
        for m in [
            "kn",
            "gold-passages",
            "bm25-top3",
            "kn-sentences1000",
            "passages",
        ] {
            assert!(!reads_passages(m), "{m}");
        }
    }

    #[test]
    fn script_json_cannot_close_the_script_element() {
        let s = script_json(&"</script><script>alert(1)</script> & <!--").unwrap();
        assert!(
            !s.contains('<') && !s.contains('>') && !s.contains('&'),
            "{s}"
        );
        let back: String = serde_json::from_str(&s).unwrap();
        assert_eq!(back, "</script><script>alert(1)</script> & <!--");
    }

    #[test]
    fn edge_ends_take_the_first_and_last_part() {
        assert_eq!(edge_ends("A | was born in | B"), Some(("A", "B")));
        assert_eq!(edge_ends("A | x | y | B"), Some(("A", "B")));
        assert_eq!(edge_ends("no edge"), None);
    }
}
