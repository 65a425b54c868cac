//! The co-occurrence memory, built with no LLM call (issue 56's mode (b); a deviation from the
//! paper, which extracts relations with the LLM, written in ARCHITECTURE.md): the schema
//! extractor's entities disambiguated into nodes as the paper's build does, the entity-segment
//! index and generic marks, and one edge between every two entities named in one sentence,
//! described by that sentence (GraphReader links the key elements of one atomic fact the same
//! way). It answers what the LLM-extracted relations buy over what costs nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use rayon::prelude::*;

use super::links::{link_segments, mark_generic};
use super::{assemble, BuildError, RawEntity, SegmentOut};
use crate::memory::schema;
use crate::memory::types::{BuildParams, Entity, Memory, Relation};
use crate::text::{find_whole_word, Segment, Sentences};

/// The most sentences an edge's description keeps (a pair named together in many sentences
/// would otherwise carry a page of text into every prompt that shows the edge).
pub const MAX_EDGE_SENTENCES: usize = 3;

/// Builds the co-occurrence memory of `document` (`name` only names it in errors). `params`
/// must have `cooccurrence` set; `model` is recorded, though no model is called.
pub fn build_cooccurrence(
    document: &str,
    name: &str,
    params: BuildParams,
    model: &str,
) -> Result<Memory, BuildError> {
    let started = Instant::now();
    let mut memory = Memory::segments_only(document, params, model);
    if memory.segments.iter().all(|s| s.text.trim().is_empty()) {
        return Err(BuildError::EmptyDocument(name.to_string()));
    }
    let outs: Vec<SegmentOut> = memory
        .segments
        .par_iter()
        .map(|s| SegmentOut {
            entities: RawEntity::schema(s.index, schema::extract(&s.text)),
            ..SegmentOut::default()
        })
        .collect();
    let (mut graph, _) =
        assemble::entities(&outs, memory.params.entity_similarity, &mut memory.stats);
    link_segments(&mut graph, &memory.segments);
    mark_generic(&mut graph, memory.segments.len());
    memory.stats.raw_relations = sentence_edges(&mut graph, document, &memory.segments);
    memory.graph = graph;
    memory.build_secs = started.elapsed().as_secs_f64();
    Ok(memory)
}

/// Where entity `e` is first named in `sentence` (`lower` is its lowercase form), by the rule
/// of the entity-segment links: a mention of several words in any case, a one-word mention only
/// as written.
fn first_named(e: &Entity, sentence: &str, lower: &str) -> Option<usize> {
    e.mentions
        .iter()
        .filter(|m| m.chars().count() >= 2)
        .filter_map(|m| {
            if m.contains(char::is_whitespace) {
                find_whole_word(lower, &m.to_lowercase())
            } else {
                find_whole_word(sentence, m)
            }
        })
        .min()
}

/// One pair's co-occurrences: its direction (the first sentence's order), its sentences and
/// segments, and how many sentences named both.
struct Pairing {
    head: NodeIndex,
    tail: NodeIndex,
    sentences: Vec<String>,
    segments: BTreeSet<usize>,
    count: usize,
}

/// Adds one edge per pair of entities named in one sentence, head the one named first,
/// described by the pair's first [`MAX_EDGE_SENTENCES`] distinct sentences; returns the
/// co-occurrences counted (sentence and pair). A sentence belongs to the segment it begins in,
/// and only that segment's entities are looked for in it.
fn sentence_edges(
    graph: &mut StableDiGraph<Entity, Relation>,
    document: &str,
    segments: &[Segment],
) -> usize {
    let index = Sentences::of(document);
    let mut pairs: BTreeMap<(NodeIndex, NodeIndex), Pairing> = BTreeMap::new();
    let mut count = 0usize;
    for seg in segments {
        let here: Vec<NodeIndex> = graph
            .node_indices()
            .filter(|&n| graph[n].segments.contains(&seg.index))
            .collect();
        for i in index.within((seg.start, seg.end)) {
            let (a, b) = index.sentences[i].span;
            let Some(text) = document.get(a..b) else {
                continue;
            };
            let lower = text.to_lowercase();
            let mut named: Vec<(usize, NodeIndex)> = here
                .iter()
                .filter_map(|&n| first_named(&graph[n], text, &lower).map(|at| (at, n)))
                .collect();
            named.sort_unstable();
            let sentence = text.split_whitespace().collect::<Vec<_>>().join(" ");
            for (x, &(_, h)) in named.iter().enumerate() {
                for &(_, t) in &named[x + 1..] {
                    let key = if h < t { (h, t) } else { (t, h) };
                    let p = pairs.entry(key).or_insert_with(|| Pairing {
                        head: h,
                        tail: t,
                        sentences: Vec::new(),
                        segments: BTreeSet::new(),
                        count: 0,
                    });
                    if p.sentences.len() < MAX_EDGE_SENTENCES && !p.sentences.contains(&sentence) {
                        p.sentences.push(sentence.clone());
                    }
                    p.segments.insert(seg.index);
                    p.count += 1;
                    count += 1;
                }
            }
        }
    }
    for p in pairs.into_values() {
        graph.add_edge(
            p.head,
            p.tail,
            Relation {
                description: p.sentences.join(" "),
                segments: p.segments,
                merged_from: p.count,
                helper_questions: Vec::new(),
            },
        );
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> BuildParams {
        BuildParams {
            cooccurrence: true,
            ..BuildParams::from_config(&crate::config::Config::default())
        }
    }

    #[test]
    fn two_entities_in_one_sentence_get_one_edge_described_by_that_sentence() {
        let doc = "Passage 1:\nAlpha Works\nAlpha Works was founded by Clara Hoffmann in Bern. \
                   It makes clocks.\n\nPassage 2:\nDelta\nDelta lies far from Bern. \
                   Clara Hoffmann never visited Delta.\n";
        let m = build_cooccurrence(doc, "doc", params(), "none").unwrap();
        let node = |name: &str| {
            m.graph
                .node_indices()
                .find(|&n| m.graph[n].name == name)
                .unwrap_or_else(|| {
                    panic!(
                        "no entity {name}: {:?}",
                        m.graph.node_weights().map(|e| &e.name).collect::<Vec<_>>()
                    )
                })
        };
        let (alpha, clara, bern, delta) = (
            node("Alpha Works"),
            node("Clara Hoffmann"),
            node("Bern"),
            node("Delta"),
        );
        let edge = |a, b| {
            m.graph
                .find_edge(a, b)
                .or_else(|| m.graph.find_edge(b, a))
                .map(|e| m.graph[e].clone())
        };
        let founded = edge(alpha, clara).expect("Alpha Works and Clara Hoffmann share a sentence");
        assert_eq!(
            founded.description,
            "Alpha Works was founded by Clara Hoffmann in Bern."
        );
        assert_eq!(founded.merged_from, 1);
        // Head is the one named first.
        assert!(m.graph.find_edge(alpha, clara).is_some());
        assert!(edge(alpha, bern).is_some() && edge(clara, bern).is_some());
        assert_eq!(
            edge(delta, bern).unwrap().description,
            "Delta lies far from Bern."
        );
        assert!(edge(clara, delta).is_some());
        // Entities never named in one sentence get no edge.
        assert!(edge(alpha, delta).is_none());
        // One edge per pair, and no LLM was asked.
        assert_eq!(m.graph.edge_count(), 5);
        assert_eq!(m.ledger.total().requests, 0);
        assert!(m.params.cooccurrence);
    }

    #[test]
    fn an_empty_document_is_refused() {
        assert!(matches!(
            build_cooccurrence("  \n ", "blank.txt", params(), "none"),
            Err(BuildError::EmptyDocument(n)) if n == "blank.txt"
        ));
    }
}
