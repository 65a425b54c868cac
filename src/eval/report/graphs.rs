//! The graph table: per QRMeM graph kind, the mean diagnostics of its builds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::rows::mean;
use crate::eval::rows::BuildRecord;
use crate::memory::GraphDiagnostics;

/// A graph memory kind's diagnostics, averaged over its builds that recorded them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphRow {
    pub kind: String,
    /// Builds with diagnostics, of `builds` in all.
    pub documents: usize,
    pub builds: usize,
    pub entities_per_segment: f64,
    pub schema_entities_per_segment: f64,
    pub llm_entities_per_segment: f64,
    pub relation_entities_per_segment: f64,
    pub raw_relations_per_doc: f64,
    /// Kept over extracted relations, over all builds (0..1).
    pub kept_share: f64,
    pub dropped_unresolved_per_doc: Option<f64>,
    pub dropped_self_loop_per_doc: Option<f64>,
    pub dropped_empty_per_doc: Option<f64>,
    /// Relations dropped as unsupported (ends in no one paragraph); None when no build of the
    /// row counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_unsupported_per_doc: Option<f64>,
    pub edges_per_segment: f64,
    pub entities_with_edge: f64,
    pub llm_entities_with_edge: Option<f64>,
    pub median_segments_per_entity: f64,
    pub over_linked_entities_per_doc: f64,
    /// LLM calls (requests and reply-cache hits) per segment, over the builds that counted
    /// unsupported relations (issue 38's joint extraction and after).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_per_segment: Option<f64>,
    /// Prompt tokens (sent and replayed) per document token, over the same builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_per_document_token: Option<f64>,
}

/// The graph table: per graph kind, the mean diagnostics of the builds that recorded them.
pub(super) fn graph_rows(first: &BTreeMap<(String, String), &BuildRecord>) -> Vec<GraphRow> {
    // Per kind: builds, their diagnostics, and (calls/segment, prompt tokens/document token).
    type Acc<'a> = (usize, Vec<&'a GraphDiagnostics>, Vec<(f64, f64)>);
    let mut by_kind: BTreeMap<&str, Acc<'_>> = BTreeMap::new();
    for b in first.values() {
        if !b.kind.is_graph() || b.error.is_some() {
            continue;
        }
        let e = by_kind.entry(b.kind.name()).or_default();
        e.0 += 1;
        if let Some(g) = &b.graph {
            e.1.push(g);
            if g.dropped_unsupported.is_some() && b.segments > 0 && b.document_tokens > 0 {
                let c = &b.cost;
                e.2.push((
                    (c.requests + c.cache_hits) as f64 / b.segments as f64,
                    (c.prompt_tokens + c.replayed_prompt_tokens) as f64 / b.document_tokens as f64,
                ));
            }
        }
    }
    by_kind
        .into_iter()
        .filter(|(_, (_, gs, _))| !gs.is_empty())
        .map(|(kind, (builds, gs, costs))| {
            let cost =
                |f: fn(&(f64, f64)) -> f64| (!costs.is_empty()).then(|| mean(costs.iter().map(f)));
            let avg = |f: &dyn Fn(&GraphDiagnostics) -> f64| mean(gs.iter().map(|g| f(g)));
            let avg_opt = |f: &dyn Fn(&GraphDiagnostics) -> Option<f64>| {
                let v: Vec<f64> = gs.iter().filter_map(|g| f(g)).collect();
                (!v.is_empty()).then(|| mean(v.into_iter()))
            };
            let raw: usize = gs.iter().map(|g| g.raw_relations).sum();
            let kept: usize = gs.iter().map(|g| g.relations_kept).sum();
            GraphRow {
                kind: kind.to_string(),
                documents: gs.len(),
                builds,
                entities_per_segment: avg(&|g| g.entities_per_segment),
                schema_entities_per_segment: avg(&|g| g.entities_per_segment_by_source.schema),
                llm_entities_per_segment: avg(&|g| g.entities_per_segment_by_source.llm),
                relation_entities_per_segment: avg(&|g| g.entities_per_segment_by_source.relation),
                raw_relations_per_doc: avg(&|g| g.raw_relations as f64),
                kept_share: if raw > 0 {
                    kept as f64 / raw as f64
                } else {
                    0.0
                },
                dropped_unresolved_per_doc: avg_opt(&|g| {
                    g.dropped_unresolved_end.map(|x| x as f64)
                }),
                dropped_self_loop_per_doc: avg_opt(&|g| g.dropped_self_loop.map(|x| x as f64)),
                dropped_empty_per_doc: avg_opt(&|g| g.dropped_empty.map(|x| x as f64)),
                dropped_unsupported_per_doc: avg_opt(&|g| g.dropped_unsupported.map(|x| x as f64)),
                edges_per_segment: avg(&|g| g.edges_per_segment),
                entities_with_edge: avg(&|g| g.entities_with_edge),
                llm_entities_with_edge: avg_opt(&|g| g.llm_entities_with_edge),
                median_segments_per_entity: avg(&|g| g.median_segments_per_entity),
                over_linked_entities_per_doc: avg(&|g| g.over_linked_entities as f64),
                calls_per_segment: cost(|c| c.0),
                prompt_tokens_per_document_token: cost(|c| c.1),
            }
        })
        .collect()
}
