//! Graph diagnostics: how dense and how precise a QRMeM graph is, computed from the memory
//! alone (its entities, edges and build counters). Recorded in `builds.jsonl` for every graph
//! build, printed by `qrmem inspect` and averaged in the report's graph table.

use serde::{Deserialize, Serialize};

use super::types::{is_default, Memory, Source};

/// An entity linked to more than this share of the segments is counted as over-linked.
pub const OVER_LINKED_SHARE: f64 = 0.2;

/// Entities per segment, by where they came from (an entity with several sources counts under
/// each).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BySource {
    pub schema: f64,
    pub llm: f64,
    pub update: f64,
    pub relation: f64,
}

/// The diagnostics of one graph.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GraphDiagnostics {
    pub segments: usize,
    pub entities: usize,
    /// Entities per segment.
    pub entities_per_segment: f64,
    pub entities_per_segment_by_source: BySource,
    /// Relations extracted over all segments, before resolution.
    pub raw_relations: usize,
    /// Relations whose both ends resolved (before merging by entity pair).
    pub relations_kept: usize,
    /// Dropped relations by cause; None for memories built before causes were counted.
    pub dropped_unresolved_end: Option<usize>,
    pub dropped_self_loop: Option<usize>,
    pub dropped_empty: Option<usize>,
    /// Dropped because both ends are named in the segment but in no one paragraph (None for
    /// memories built before this was counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_unsupported: Option<usize>,
    /// Graph edges (kept relations merged by entity pair).
    pub edges: usize,
    pub edges_per_segment: f64,
    /// Share of entities with at least one edge (0..1).
    pub entities_with_edge: f64,
    /// Share of the LLM-extracted entities (named as entities by the LLM's extraction or by an
    /// admitted question; not the ends made entities) with at least one edge (0..1; None
    /// without any).
    pub llm_entities_with_edge: Option<f64>,
    /// Median number of segments an entity is linked to.
    pub median_segments_per_entity: f64,
    /// Entities linked to more than 20% of the segments.
    pub over_linked_entities: usize,
    /// Extraction replies stopped at a repeated list element (left out when none).
    #[serde(default, skip_serializing_if = "is_default")]
    pub cut_replies: usize,
}

fn median(mut v: Vec<usize>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2] as f64
    } else {
        (v[n / 2 - 1] + v[n / 2]) as f64 / 2.0
    }
}

/// The diagnostics of `memory`'s graph.
pub fn diagnose(memory: &Memory) -> GraphDiagnostics {
    let g = &memory.graph;
    let segments = memory.segments.len();
    let per_segment = |x: usize| {
        if segments == 0 {
            0.0
        } else {
            x as f64 / segments as f64
        }
    };
    let with_source = |s: Source| g.node_weights().filter(|e| e.sources.contains(&s)).count();
    let has_edge = |n| !memory.neighbours(n).is_empty();
    let entities = g.node_count();
    let linked = g.node_indices().filter(|&n| has_edge(n)).count();
    let llm: Vec<_> = g
        .node_indices()
        .filter(|&n| g[n].sources.contains(&Source::Llm) || g[n].sources.contains(&Source::Update))
        .collect();
    let llm_linked = llm.iter().filter(|&&n| has_edge(n)).count();
    let limit = OVER_LINKED_SHARE * segments as f64;
    let st = &memory.stats;
    let drops = st.relation_drops;
    GraphDiagnostics {
        segments,
        entities,
        entities_per_segment: per_segment(entities),
        entities_per_segment_by_source: BySource {
            schema: per_segment(with_source(Source::Schema)),
            llm: per_segment(with_source(Source::Llm)),
            update: per_segment(with_source(Source::Update)),
            relation: per_segment(with_source(Source::Relation)),
        },
        raw_relations: st.raw_relations,
        relations_kept: st.raw_relations.saturating_sub(st.dropped_relations),
        dropped_unresolved_end: drops.map(|d| d.unresolved_end),
        dropped_self_loop: drops.map(|d| d.self_loop),
        dropped_empty: drops.map(|d| d.empty_description),
        // Counted only by builds that check support (they record relation-end entities too;
        // older ones have neither): a memory with no drops of this cause still says 0.
        dropped_unsupported: drops
            .filter(|_| memory.params.extraction_max_tokens > 0)
            .map(|d| d.unsupported),
        edges: g.edge_count(),
        edges_per_segment: per_segment(g.edge_count()),
        entities_with_edge: if entities == 0 {
            0.0
        } else {
            linked as f64 / entities as f64
        },
        llm_entities_with_edge: (!llm.is_empty()).then(|| llm_linked as f64 / llm.len() as f64),
        median_segments_per_entity: median(g.node_weights().map(|e| e.segments.len()).collect()),
        over_linked_entities: g
            .node_weights()
            .filter(|e| e.segments.len() as f64 > limit)
            .count(),
        cut_replies: st.cut_replies,
    }
}

impl GraphDiagnostics {
    /// The lines `qrmem inspect` prints.
    pub fn describe(&self) -> String {
        let opt = |x: Option<usize>| x.map_or("n/a".to_string(), |x| x.to_string());
        let b = &self.entities_per_segment_by_source;
        let cut = if self.cut_replies > 0 {
            format!(
                "  extraction replies stopped at a repeated element: {}\n",
                self.cut_replies
            )
        } else {
            String::new()
        };
        let lines = format!(
            "graph diagnostics:\n  entities per segment: {:.1} (schema {:.1}, LLM {:.1}, update {:.1}, relation end {:.1})\n  relations: {} extracted, {} kept; dropped: {} unresolved end, {} self-loop, {} empty, {} unsupported\n  edges: {} ({:.2} per segment); entities with an edge: {:.1}% (LLM-extracted: {})\n  median segments per entity: {:.1}; entities linked to more than {:.0}% of the segments: {}\n",
            self.entities_per_segment,
            b.schema,
            b.llm,
            b.update,
            b.relation,
            self.raw_relations,
            self.relations_kept,
            opt(self.dropped_unresolved_end),
            opt(self.dropped_self_loop),
            opt(self.dropped_empty),
            opt(self.dropped_unsupported),
            self.edges,
            self.edges_per_segment,
            100.0 * self.entities_with_edge,
            self.llm_entities_with_edge
                .map_or("n/a".to_string(), |x| format!("{:.1}%", 100.0 * x)),
            self.median_segments_per_entity,
            100.0 * OVER_LINKED_SHARE,
            self.over_linked_entities
        );
        lines + &cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{BuildParams, Entity, Relation, RelationDrops};
    use std::collections::BTreeSet;

    fn entity(name: &str, segments: &[usize], sources: &[Source]) -> Entity {
        Entity {
            name: name.into(),
            kind: "other".into(),
            mentions: [name.to_string()].into(),
            segments: segments.iter().copied().collect(),
            sources: sources.iter().copied().collect(),
            generic: false,
        }
    }

    #[test]
    fn diagnostics_count_by_hand() {
        let params = BuildParams {
            segment_tokens: 600,
            question_rouge_threshold: 0.6,
            entity_similarity: 0.9,
            graph_update: true,
            open_entity: true,
            max_relation_updates: 10,
            summary_input_tokens: 1000,
            extraction_max_tokens: 2048,
            extraction_frequency_penalty: 0.5,
            cooccurrence: false,
            extraction_cut_repeats: 0,
            extraction_format: Default::default(),
            extraction_max_entities: crate::config::FORMER_EXTRACTION_MAX_ENTITIES,
        };
        let doc = "a. b. c. d. e. f. g. h. i. j.";
        let mut m = Memory::segments_only(doc, params, "m");
        // Ten segments, as if the segmenter had cut one per sentence.
        m.segments = crate::text::segment(doc, 2);
        assert_eq!(m.segments.len(), 10);
        let g = &mut m.graph;
        let a = g.add_node(entity("A", &[0], &[Source::Llm, Source::Schema]));
        let b = g.add_node(entity("B", &[1, 2], &[Source::Llm]));
        let _c = g.add_node(entity("C", &[0, 1, 2], &[Source::Schema]));
        let _d = g.add_node(entity("D", &[3], &[Source::Llm]));
        let rel = Relation {
            description: "A knows B".into(),
            segments: BTreeSet::from([0]),
            merged_from: 1,
            helper_questions: vec![],
        };
        g.add_edge(a, b, rel);
        m.stats.raw_relations = 5;
        m.stats.dropped_relations = 4;
        m.stats.relation_drops = Some(RelationDrops {
            unresolved_end: 3,
            self_loop: 1,
            empty_description: 0,
            unsupported: 0,
        });
        let d = diagnose(&m);
        assert_eq!((d.segments, d.entities, d.edges), (10, 4, 1));
        assert!((d.entities_per_segment - 0.4).abs() < 1e-12);
        assert!((d.entities_per_segment_by_source.llm - 0.3).abs() < 1e-12);
        assert!((d.entities_per_segment_by_source.schema - 0.2).abs() < 1e-12);
        assert_eq!(d.relations_kept, 1);
        assert_eq!(
            (
                d.dropped_unresolved_end,
                d.dropped_self_loop,
                d.dropped_empty
            ),
            (Some(3), Some(1), Some(0))
        );
        assert!((d.edges_per_segment - 0.1).abs() < 1e-12);
        assert!((d.entities_with_edge - 0.5).abs() < 1e-12);
        // A and B of the three LLM entities have an edge.
        assert!((d.llm_entities_with_edge.unwrap() - 2.0 / 3.0).abs() < 1e-12);
        // Segment counts 1, 2, 3, 1: median 1.5.
        assert!((d.median_segments_per_entity - 1.5).abs() < 1e-12);
        // More than 20% of 10 segments: only C (3 segments).
        assert_eq!(d.over_linked_entities, 1);
        // A memory from before causes were counted says n/a.
        m.stats.relation_drops = None;
        let old = diagnose(&m);
        assert_eq!(old.dropped_unresolved_end, None);
        assert!(old.describe().contains("n/a unresolved end"));
    }
}
