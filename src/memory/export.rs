//! Export of the graph for Gephi / Cytoscape: GraphML or plain JSON.

use std::fmt::Write;

use petgraph::visit::{EdgeRef, IntoEdgeReferences};
use serde::Serialize;

use super::types::Memory;

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

fn join<T: ToString>(items: impl IntoIterator<Item = T>, sep: &str) -> String {
    items
        .into_iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(sep)
}

/// Why a memory could not be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Load(#[from] super::StoreError),
    #[error("cannot write the memory as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// `qrmem export`: the memory file at `path` as GraphML (`graphml`) or JSON.
pub fn of_file(path: &std::path::Path, graphml: bool) -> Result<String, ExportError> {
    let m = super::load(path)?;
    if graphml {
        Ok(self::graphml(&m))
    } else {
        Ok(json(&m)?)
    }
}

/// GraphML with node attributes name, type, segments, mentions and edge attributes description,
/// segments.
pub fn graphml(memory: &Memory) -> String {
    let mut s = String::new();
    s.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    s.push_str("<graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\">\n");
    for (id, for_, name) in [
        ("name", "node", "name"),
        ("type", "node", "type"),
        ("nsegments", "node", "segments"),
        ("mentions", "node", "mentions"),
        ("description", "edge", "description"),
        ("esegments", "edge", "segments"),
    ] {
        let _ = writeln!(
            s,
            "  <key id=\"{id}\" for=\"{for_}\" attr.name=\"{name}\" attr.type=\"string\"/>"
        );
    }
    s.push_str("  <graph id=\"qrmem\" edgedefault=\"directed\">\n");
    for n in memory.graph.node_indices() {
        let e = &memory.graph[n];
        let _ = writeln!(
            s,
            "    <node id=\"n{}\"><data key=\"name\">{}</data><data key=\"type\">{}</data><data key=\"nsegments\">{}</data><data key=\"mentions\">{}</data></node>",
            n.index(),
            xml_escape(&e.name),
            xml_escape(&e.kind),
            join(&e.segments, ","),
            xml_escape(&join(&e.mentions, "; "))
        );
    }
    for e in memory.graph.edge_references() {
        let r = e.weight();
        let _ = writeln!(
            s,
            "    <edge id=\"e{}\" source=\"n{}\" target=\"n{}\"><data key=\"description\">{}</data><data key=\"esegments\">{}</data></edge>",
            e.id().index(),
            e.source().index(),
            e.target().index(),
            xml_escape(&r.description),
            join(&r.segments, ",")
        );
    }
    s.push_str("  </graph>\n</graphml>\n");
    s
}

#[derive(Serialize)]
struct JsonNode<'a> {
    id: usize,
    name: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    segments: Vec<usize>,
    mentions: Vec<&'a str>,
}

#[derive(Serialize)]
struct JsonEdge<'a> {
    id: usize,
    source: usize,
    target: usize,
    description: &'a str,
    segments: Vec<usize>,
}

#[derive(Serialize)]
struct JsonGraph<'a> {
    nodes: Vec<JsonNode<'a>>,
    edges: Vec<JsonEdge<'a>>,
}

/// `{"nodes": [...], "edges": [...]}`.
pub fn json(memory: &Memory) -> Result<String, serde_json::Error> {
    let g = &memory.graph;
    let graph = JsonGraph {
        nodes: g
            .node_indices()
            .map(|n| JsonNode {
                id: n.index(),
                name: &g[n].name,
                kind: &g[n].kind,
                segments: g[n].segments.iter().copied().collect(),
                mentions: g[n].mentions.iter().map(String::as_str).collect(),
            })
            .collect(),
        edges: g
            .edge_references()
            .map(|e| JsonEdge {
                id: e.id().index(),
                source: e.source().index(),
                target: e.target().index(),
                description: &e.weight().description,
                segments: e.weight().segments.iter().copied().collect(),
            })
            .collect(),
    };
    serde_json::to_string_pretty(&graph)
}
