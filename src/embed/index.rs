//! Vectors for a memory, and the scoring the navigators use: edges ("head | relation
//! description | tail") and segments (dense top-k) against a query.

use petgraph::stable_graph::EdgeIndex;

use super::{dot, embed_exact, embed_one, EmbedError, Embedder};
use crate::memory::Memory;
pub use crate::memory::Vectors;

/// Computes and stores the vectors of every segment and edge of `memory`, unless vectors of
/// the same model are already there. Returns how many texts were embedded.
pub fn index_memory(memory: &mut Memory, embedder: &dyn Embedder) -> Result<usize, EmbedError> {
    let edge_ids: Vec<EdgeIndex> = memory.graph.edge_indices().collect();
    if let Some(v) = &memory.vectors {
        if v.model == embedder.model_id()
            && v.segments.len() == memory.segments.len()
            && edge_ids.iter().all(|e| v.edges.contains_key(&e.index()))
        {
            return Ok(0);
        }
    }
    let seg_texts: Vec<&str> = memory.segments.iter().map(|s| s.text.as_str()).collect();
    let segments = embed_exact(embedder, &seg_texts)?;
    let edge_texts: Vec<String> = edge_ids
        .iter()
        .filter_map(|&e| memory.edge_text(e))
        .collect();
    let refs: Vec<&str> = edge_texts.iter().map(String::as_str).collect();
    let edge_vectors = embed_exact(embedder, &refs)?;
    let edges = edge_ids
        .iter()
        .map(|e| e.index())
        .zip(edge_vectors)
        .collect();
    let n = seg_texts.len() + refs.len();
    memory.vectors = Some(Vectors {
        model: embedder.model_id().to_string(),
        dim: embedder.dim(),
        normalized: embedder.normalized(),
        segments,
        edges,
    });
    Ok(n)
}

/// Computes and stores the vectors of `memory`'s segments only, keeping its edge vectors: a
/// passage view (`Memory::passage_view`) has new units over the same edges.
pub fn index_segments(memory: &mut Memory, embedder: &dyn Embedder) -> Result<(), EmbedError> {
    let texts: Vec<&str> = memory.segments.iter().map(|s| s.text.as_str()).collect();
    let segments = embed_exact(embedder, &texts)?;
    match &mut memory.vectors {
        Some(v) if v.model == embedder.model_id() => v.segments = segments,
        _ => {
            memory.vectors = Some(Vectors {
                model: embedder.model_id().to_string(),
                dim: embedder.dim(),
                normalized: embedder.normalized(),
                segments,
                edges: Default::default(),
            })
        }
    }
    Ok(())
}

fn stored<'m>(memory: &'m Memory, embedder: &dyn Embedder) -> Option<&'m Vectors> {
    memory
        .vectors
        .as_ref()
        .filter(|v| v.model == embedder.model_id())
}

/// Scores `edges` against `query` (dot product; the cosine for normalised models), best first.
/// Uses the memory's stored vectors when they are of this model, and embeds the rest.
pub fn score_edges(
    embedder: &dyn Embedder,
    memory: &Memory,
    query: &str,
    edges: &[EdgeIndex],
) -> Result<Vec<(EdgeIndex, f32)>, EmbedError> {
    let q = embed_one(embedder, query)?;
    let store = stored(memory, embedder);
    let mut missing: Vec<(usize, String)> = Vec::new();
    let mut scores: Vec<(EdgeIndex, f32)> = Vec::with_capacity(edges.len());
    for (i, &e) in edges.iter().enumerate() {
        match store.and_then(|v| v.edges.get(&e.index())) {
            Some(v) => scores.push((e, dot(&q, v))),
            None => {
                let text = memory.edge_text(e).ok_or_else(|| {
                    EmbedError::Run(format!("edge {} is not in the graph", e.index()))
                })?;
                missing.push((i, text));
                scores.push((e, 0.0));
            }
        }
    }
    if !missing.is_empty() {
        let texts: Vec<&str> = missing.iter().map(|(_, t)| t.as_str()).collect();
        for ((i, _), v) in missing.iter().zip(embed_exact(embedder, &texts)?) {
            scores[*i].1 = dot(&q, &v);
        }
    }
    scores.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(scores)
}

/// Scores every segment against `query`, best first: (segment index, score).
pub fn score_segments(
    embedder: &dyn Embedder,
    memory: &Memory,
    query: &str,
) -> Result<Vec<(usize, f32)>, EmbedError> {
    let q = embed_one(embedder, query)?;
    let computed;
    let vectors: &[Vec<f32>] = match stored(memory, embedder) {
        Some(v) if v.segments.len() == memory.segments.len() => &v.segments,
        _ => {
            let texts: Vec<&str> = memory.segments.iter().map(|s| s.text.as_str()).collect();
            computed = embed_exact(embedder, &texts)?;
            &computed
        }
    };
    let mut scores: Vec<(usize, f32)> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| (i, dot(&q, v)))
        .collect();
    scores.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(scores)
}
