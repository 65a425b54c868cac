//! Entity-segment links and generic marks: every segment that names an entity joins its
//! segments, and an entity linked to too many segments is marked generic.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use rayon::prelude::*;

use crate::memory::diagnostics::OVER_LINKED_SHARE;
use crate::memory::types::{Entity, Relation};
use crate::text::{at_word_boundaries, Segment};

/// A memory of fewer segments marks no entity generic: a fifth of three segments is one.
const GENERIC_MIN_SEGMENTS: usize = 5;

/// Adds to each entity every segment whose text contains one of its mentions as a whole word
/// (one Aho-Corasick pass per segment over all mentions, segments on rayon's pool: linear in
/// the text). A mention of several words matches in any case; a one-word mention only as
/// written ("Bern" is not "bern", "Art" is not "art"), since a lone word in another case is
/// most often another word.
pub(crate) fn link_segments(graph: &mut StableDiGraph<Entity, Relation>, segments: &[Segment]) {
    let mut patterns: Vec<String> = Vec::new();
    let mut owner: Vec<NodeIndex> = Vec::new();
    for n in graph.node_indices() {
        for m in &graph[n].mentions {
            if m.chars().count() >= 2 {
                patterns.push(m.clone());
                owner.push(n);
            }
        }
    }
    if patterns.is_empty() {
        return;
    }
    let one_word: Vec<bool> = patterns
        .iter()
        .map(|p| !p.contains(char::is_whitespace))
        .collect();
    let ac: AhoCorasick = match AhoCorasickBuilder::new()
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::Standard)
        .build(&patterns)
    {
        Ok(ac) => ac,
        Err(e) => {
            tracing::warn!("cannot index entity mentions for segment links: {e}");
            return;
        }
    };
    let hits: Vec<Vec<usize>> = segments
        .par_iter()
        .map(|seg| {
            let text = &seg.text;
            let mut found = Vec::new();
            for m in ac.find_overlapping_iter(text) {
                let p = m.pattern().as_usize();
                let case_ok = !one_word[p] || text[m.start()..m.end()] == patterns[p];
                if at_word_boundaries(text, m.start(), m.end()) && case_ok {
                    found.push(p);
                }
            }
            found
        })
        .collect();
    for (seg, found) in segments.iter().zip(hits) {
        for p in found {
            graph[owner[p]].segments.insert(seg.index);
        }
    }
}

/// Whether an entity linked to `linked` of a memory's `segments` segments is generic: linked to
/// more than [`OVER_LINKED_SHARE`] of them, in a memory of [`GENERIC_MIN_SEGMENTS`] or more.
/// The one definition the build's marks and the page view share.
pub fn is_generic(linked: usize, segments: usize) -> bool {
    segments >= GENERIC_MIN_SEGMENTS && linked as f64 > OVER_LINKED_SHARE * segments as f64
}

/// Marks every entity generic or not ([`is_generic`]).
pub(super) fn mark_generic(graph: &mut StableDiGraph<Entity, Relation>, segments: usize) {
    if segments < GENERIC_MIN_SEGMENTS {
        return;
    }
    for e in graph.node_weights_mut() {
        e.generic = is_generic(e.segments.len(), segments);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::types::Source;
    use crate::text::segment;
    use std::collections::BTreeSet;

    #[test]
    fn segment_links_are_whole_words_only() {
        let mut g: StableDiGraph<Entity, Relation> = StableDiGraph::new();
        let art = g.add_node(Entity {
            name: "Art".into(),
            kind: "other".into(),
            mentions: ["Art".to_string()].into(),
            segments: BTreeSet::new(),
            sources: [Source::Schema].into(),
            generic: false,
        });
        let segments = segment(
            "Arthur painted. Some artist came.\n\nModern art, said Arthur.\n\nArt-deco walls.",
            8,
        );
        assert_eq!(segments.len(), 3, "{segments:?}");
        link_segments(&mut g, &segments);
        // "Arthur" and "artist" are not "Art", nor is "art" (a one-word mention matches only
        // as written); "Art-" is.
        assert_eq!(g[art].segments, BTreeSet::from([2]));
    }
}
