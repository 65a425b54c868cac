//! The passage view of a memory (issue 66): the same graph over the document's own passages
//! (`text::passages`) instead of its 600-token segments, derived without an LLM call, so every
//! memory built before passages existed gains them and no graph is rebuilt.
//!
//! In the view, `segments` are the passages and every index that named a segment names a
//! passage: an entity is linked to each passage that names one of its mentions as a whole word
//! (the rule segments are linked by), and a relation to the passages of its source segments
//! that name its ends (both if any passage does, else either, else every passage of those
//! segments). Generic marks stay as the build set them; segment vectors are dropped (the
//! caller embeds the passages), edge vectors kept.
//!
//! Invariant: the view's passages cover the document exactly, as segments do.

use std::collections::BTreeSet;

use super::build::link_segments;
use super::types::Memory;
use crate::text::passages::passages;
use crate::text::Segment;

impl Memory {
    /// This memory over passages of at most `max_tokens` tokens (see the module docs).
    pub fn passage_view(&self, max_tokens: usize) -> Memory {
        let document: String = self.segments.iter().map(|s| s.text.as_str()).collect();
        let units = passages(&document, max_tokens);
        let mut view = self.clone();
        // Each segment's passages: those overlapping its byte range.
        let of_segment = |seg: &Segment| -> Vec<usize> {
            units
                .iter()
                .filter(|p| p.start < seg.end && seg.start < p.end)
                .map(|p| p.index)
                .collect()
        };
        for e in view.graph.node_weights_mut() {
            e.segments.clear();
        }
        link_segments(&mut view.graph, &units);
        let edges: Vec<_> = view.graph.edge_indices().collect();
        for edge in edges {
            let Some((h, t)) = view.graph.edge_endpoints(edge) else {
                continue;
            };
            let (hp, tp) = (
                view.graph[h].segments.clone(),
                view.graph[t].segments.clone(),
            );
            let within: BTreeSet<usize> = self.graph[edge]
                .segments
                .iter()
                .filter_map(|&s| self.segments.get(s))
                .flat_map(of_segment)
                .collect();
            let both: BTreeSet<usize> = within
                .iter()
                .copied()
                .filter(|p| hp.contains(p) && tp.contains(p))
                .collect();
            let either: BTreeSet<usize> = within
                .iter()
                .copied()
                .filter(|p| hp.contains(p) || tp.contains(p))
                .collect();
            view.graph[edge].segments = if !both.is_empty() {
                both
            } else if !either.is_empty() {
                either
            } else {
                within
            };
        }
        // Generated questions name the passage their segment begins in.
        for q in &mut view.questions {
            if let Some(seg) = self.segments.get(q.segment) {
                q.segment = of_segment(seg).first().copied().unwrap_or(0);
            }
        }
        if let Some(v) = &mut view.vectors {
            v.segments.clear();
        }
        view.segments = units;
        view
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::memory::{BuildParams, Entity, Memory, Relation, Source};
    use std::collections::BTreeSet;

    #[test]
    fn entities_and_relations_are_linked_to_the_passages_that_name_them() {
        let doc = "Passage 1:\nRon Joyce\nRon Joyce co-founded Tim Hortons in 1964.\n\nPassage 2:\nTim Hortons\nTim Hortons has 4,800 restaurants.\n\nPassage 3:\nOther\nAn unrelated passage about Ottawa.";
        let mut params = BuildParams::from_config(&Config::default());
        params.segment_tokens = 600;
        let mut m = Memory::segments_only(doc, params, "test");
        assert_eq!(m.segments.len(), 1);
        let entity = |name: &str| Entity {
            name: name.into(),
            kind: "other".into(),
            mentions: [name.to_string()].into(),
            segments: BTreeSet::from([0]),
            sources: [Source::Llm].into(),
            generic: false,
        };
        let ron = m.graph.add_node(entity("Ron Joyce"));
        let tim = m.graph.add_node(entity("Tim Hortons"));
        let e = m.graph.add_edge(
            ron,
            tim,
            Relation {
                description: "Ron Joyce co-founded Tim Hortons".into(),
                segments: BTreeSet::from([0]),
                merged_from: 1,
                helper_questions: vec![],
            },
        );
        let v = m.passage_view(300);
        assert_eq!(v.segments.len(), 3);
        assert_eq!(
            v.segments
                .iter()
                .map(|s| s.text.as_str())
                .collect::<String>(),
            doc
        );
        assert_eq!(v.graph[ron].segments, BTreeSet::from([0]));
        assert_eq!(v.graph[tim].segments, BTreeSet::from([0, 1]));
        // The relation is stated where both ends are named.
        assert_eq!(v.graph[e].segments, BTreeSet::from([0]));
        // The memory itself is untouched.
        assert_eq!(m.graph[tim].segments, BTreeSet::from([0]));
    }
}
