//! The second hop of the start (issue 55, item 4; `navigate.start_bridge`).
//!
//! A two-hop question names its first hop; the second is reached through a bridge entity the
//! question does not name. S_imp holds only the segments of E_s, ranked by the question's words,
//! so the bridge's segment is found late or never. This order keeps the best segment first and
//! puts next the segments that name the most bridge entities: the entities named in the best
//! segment's paragraphs that name an entity of E_s (the paragraph that answers the first hop),
//! other than E_s's own and those linked to over a fifth of the segments. Any segment of the
//! document may come in; ties keep the given order, then document order.
//!
//! The hop (issue 66; `navigate.start_hop`) follows the same path at passage grain, from an
//! entity to its own passage: the best unit first, then the units that hold the own passages
//! (the LongBench `Passage i:` passage titled with one of its names, a parenthesis after the
//! name aside) of the entities the best unit names, at most `text::passages::HOP_HOMES` of them, best by the
//! question's BM25 over the whole document; then the given ranking. A document without passage
//! titles has no own passages, and the order is the given one. With the own start
//! (`navigate.start_own`) the path begins at E_s: the own passages of the question's entities
//! (at most `text::passages::OWN_STARTS`) come first, and the hop follows the names of the
//! first of them instead of the best unit's.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::stable_graph::NodeIndex;

use super::Navigator;
use crate::memory::schema::paragraphs;
use crate::memory::Entity;
use crate::text::passages::{hop, own_units, title_key, unit_titles};
use crate::text::{occurs_in, Bm25};

/// Mentions shorter than this (in characters) neither mark a paragraph as naming E_s nor make
/// an entity a bridge: two- and three-letter names ("US", "The") match too much.
const MIN_MENTION: usize = crate::text::passages::MIN_NAME;

impl Navigator<'_> {
    /// `ranked` (best first) in the second-hop order, with the bridge entities' names. A
    /// segment keeps its score when `ranked` has one, 0 otherwise.
    pub(crate) fn bridge_order(
        &self,
        start: &BTreeSet<NodeIndex>,
        ranked: &[(usize, f32)],
    ) -> (Vec<(usize, f32)>, Vec<String>) {
        let Some(&(best, _)) = ranked.first() else {
            return (Vec::new(), Vec::new());
        };
        let g = &self.memory.graph;
        let start_mentions: Vec<String> = start.iter().flat_map(|&n| names(&g[n])).collect();
        let first_hop: Vec<String> = self
            .memory
            .segments
            .get(best)
            .map(|s| paragraphs(&s.text))
            .unwrap_or_default()
            .into_iter()
            .filter(|p| start_mentions.iter().any(|m| occurs_in(p, m)))
            .collect();
        let bridges: Vec<NodeIndex> = g
            .node_indices()
            .filter(|&n| {
                let e = &g[n];
                !start.contains(&n)
                    && !e.generic
                    && e.segments.contains(&best)
                    && names(e).any(|m| first_hop.iter().any(|p| occurs_in(p, &m)))
            })
            .collect();
        let mut named: BTreeMap<usize, usize> = BTreeMap::new();
        for &n in &bridges {
            for &s in &g[n].segments {
                *named.entry(s).or_default() += 1;
            }
        }
        let rank: BTreeMap<usize, (usize, f32)> = ranked
            .iter()
            .enumerate()
            .map(|(i, &(s, x))| (s, (i, x)))
            .collect();
        let mut rest: Vec<usize> = (0..self.memory.segments.len())
            .filter(|&s| s != best)
            .collect();
        rest.sort_by_key(|s| {
            (
                std::cmp::Reverse(named.get(s).copied().unwrap_or(0)),
                rank.get(s).map_or(usize::MAX, |r| r.0),
                *s,
            )
        });
        let order = std::iter::once(best)
            .chain(rest)
            .map(|s| (s, rank.get(&s).map_or(0.0, |r| r.1)))
            .collect();
        let mut names: Vec<String> = bridges.iter().map(|&n| g[n].name.clone()).collect();
        names.sort();
        (order, names)
    }
}

impl Navigator<'_> {
    /// `ranked` (best first) in the hop's order (see the module docs), with the titles of
    /// the own passages it brought. A unit keeps its score when `ranked` has one, 0 otherwise.
    /// With `navigate.start_own` the hop starts from the own passages of `start` (E_s), where
    /// it has any, and follows the names of the first.
    pub(crate) fn hop_order(
        &self,
        question: &str,
        start: &BTreeSet<NodeIndex>,
        ranked: &[(usize, f32)],
    ) -> (Vec<(usize, f32)>, Vec<String>) {
        let Some(&(best, _)) = ranked.first() else {
            return (Vec::new(), Vec::new());
        };
        let g = &self.memory.graph;
        let by_question: Vec<usize> = Bm25::over(&self.memory.segments)
            .rank(question)
            .into_iter()
            .map(|(u, _)| u)
            .collect();
        let titles = unit_titles(&self.memory.segments);
        let mut first = vec![best];
        if self.opts.start_own {
            let own_names: BTreeSet<String> = start
                .iter()
                .filter(|&&n| g.contains_node(n))
                .flat_map(|&n| names(&g[n]).map(|m| title_key(&m)).collect::<Vec<_>>())
                .collect();
            let own = own_units(&by_question, &titles, |t| own_names.contains(t));
            if !own.is_empty() {
                first = own;
            }
        }
        let from = first[0];
        // The names of the entities the first unit names.
        let named: BTreeSet<String> = g
            .node_indices()
            .map(|n| &g[n])
            .filter(|e| {
                !e.generic && e.kind != "number" && e.kind != "time" && e.segments.contains(&from)
            })
            .flat_map(|e| names(e).map(|m| title_key(&m)).collect::<Vec<_>>())
            .collect();
        let rest: Vec<usize> = ranked.iter().map(|&(u, _)| u).collect();
        let (order, via) = hop(&first, &by_question, &titles, |t| named.contains(t), &rest);
        let score: BTreeMap<usize, f32> = ranked.iter().copied().collect();
        let order = order
            .into_iter()
            .map(|u| (u, score.get(&u).copied().unwrap_or(0.0)))
            .collect();
        (order, via)
    }
}

/// An entity's name and mentions of at least `MIN_MENTION` characters, trimmed and lowercased
/// (paragraphs are lowercased).
fn names(e: &Entity) -> impl Iterator<Item = String> + '_ {
    e.mentions
        .iter()
        .chain(std::iter::once(&e.name))
        .map(|m| m.trim())
        .filter(|m| m.chars().count() >= MIN_MENTION)
        .map(str::to_lowercase)
}
