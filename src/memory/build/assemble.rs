//! Graph assembly: the extracted entities disambiguated into the graph's nodes, the kept
//! relations grouped by entity pair, and one edge per pair with its merged description.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use petgraph::stable_graph::{NodeIndex, StableDiGraph};

use super::update::MergedRelation;
use super::{failure, Pair, RawEntity, RawRelation, Resolved, SegmentOut};
use crate::memory::merge::{cluster, english_stemmer, normalize};
use crate::memory::types::{BuildStats, Entity, Relation, RelationDrops, StepFailure};

/// The nodes a relation end can name: by an extracted entity's surface name, else by its
/// normalised key.
pub(super) struct Names {
    by_surface: HashMap<String, NodeIndex>,
    by_key: HashMap<Vec<String>, NodeIndex>,
}

/// The graph's entities: every extracted entity (the relation ends' included) clustered by
/// disambiguation, one node per cluster in order of first appearance, named by its most
/// frequent surface name and typed by its most frequent kind.
pub(super) fn entities(
    outs: &[SegmentOut],
    threshold: f64,
    stats: &mut BuildStats,
) -> (StableDiGraph<Entity, Relation>, Names) {
    let stemmer = english_stemmer();
    let raw: Vec<RawEntity> = outs
        .iter()
        .flat_map(|o| o.entities.iter().cloned())
        .collect();
    stats.raw_entities = raw.len();
    stats.dropped_entities = outs.iter().map(|o| o.dropped_entities).sum();
    let names: Vec<String> = raw.iter().map(|e| e.name.clone()).collect();
    let (rep, merges) = cluster(&names, threshold);
    stats.merges = merges;

    // Clusters in order of first appearance.
    let mut order: Vec<usize> = Vec::new();
    let mut members: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, &r) in rep.iter().enumerate() {
        members.entry(r).or_insert_with(|| {
            order.push(r);
            Vec::new()
        });
        if let Some(m) = members.get_mut(&r) {
            m.push(i);
        }
    }
    let mut graph: StableDiGraph<Entity, Relation> = StableDiGraph::new();
    let mut by_surface: HashMap<String, NodeIndex> = HashMap::new();
    let mut by_key: HashMap<Vec<String>, NodeIndex> = HashMap::new();
    for r in &order {
        let idx = &members[r];
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for &i in idx {
            *counts.entry(raw[i].name.as_str()).or_default() += 1;
            if raw[i].kind != "other" {
                *kinds.entry(raw[i].kind.as_str()).or_default() += 1;
            }
        }
        let first_pos = |name: &str| {
            idx.iter()
                .position(|&i| raw[i].name == name)
                .unwrap_or(usize::MAX)
        };
        let name = counts
            .iter()
            .max_by(|a, b| {
                a.1.cmp(b.1)
                    .then(a.0.len().cmp(&b.0.len()))
                    .then(first_pos(b.0).cmp(&first_pos(a.0)))
            })
            .map(|(n, _)| n.to_string())
            .unwrap_or_default();
        let kind = kinds
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(k, _)| k.to_string())
            .unwrap_or_else(|| "other".into());
        let entity = Entity {
            name,
            kind,
            mentions: idx.iter().map(|&i| raw[i].name.clone()).collect(),
            segments: idx.iter().map(|&i| raw[i].segment).collect(),
            sources: idx.iter().map(|&i| raw[i].source).collect(),
            generic: false,
        };
        let node = graph.add_node(entity);
        for &i in idx {
            by_surface.entry(raw[i].name.clone()).or_insert(node);
            by_key
                .entry(normalize(&raw[i].name, &stemmer))
                .or_insert(node);
        }
    }
    (graph, Names { by_surface, by_key })
}

/// The kept relations grouped by entity pair; a relation whose ends name no node, or one node,
/// is dropped and counted.
pub(super) fn group_relations(
    kept: Vec<RawRelation>,
    names: &Names,
    drops: &mut RelationDrops,
) -> BTreeMap<Pair, Vec<Resolved>> {
    let stemmer = english_stemmer();
    let (by_surface, by_key) = (&names.by_surface, &names.by_key);
    // Relations: both ends are surface names of raw entities now; group by entity pair.
    let node_of = |name: &str| -> Option<NodeIndex> {
        by_surface
            .get(name)
            .copied()
            .or_else(|| by_key.get(&normalize(name, &stemmer)).copied())
    };
    let mut groups: BTreeMap<Pair, Vec<Resolved>> = BTreeMap::new();
    for r in kept {
        match (node_of(&r.head), node_of(&r.tail)) {
            (Some(h), Some(t)) if h != t => {
                let key = if h < t { (h, t) } else { (t, h) };
                groups.entry(key).or_default().push((h, t, r));
            }
            // Two names that disambiguation merged into one entity.
            (Some(_), Some(_)) => drops.self_loop += 1,
            _ => drops.unresolved_end += 1,
        }
    }
    groups
}

/// One edge per entity pair: its relations' description merged by Relation Update, or their
/// descriptions joined (a failed update is recorded as a failure of the "merge" step).
pub(super) fn add_edges(
    graph: &mut StableDiGraph<Entity, Relation>,
    groups: BTreeMap<Pair, Vec<Resolved>>,
    mut merged: HashMap<Pair, Result<MergedRelation, String>>,
    stats: &mut BuildStats,
    failures: &mut Vec<StepFailure>,
) {
    for (key, rels) in groups {
        let (h, t, _) = &rels[0];
        let segs: BTreeSet<usize> = rels.iter().map(|(_, _, r)| r.segment).collect();
        let mut descriptions: Vec<String> = Vec::new();
        for (_, _, r) in &rels {
            if !descriptions.contains(&r.description) {
                descriptions.push(r.description.clone());
            }
        }
        let (description, helper_questions) = match merged.remove(&key) {
            Some(Ok(m)) => {
                stats.relation_updates += m.calls;
                (m.description, m.helper_questions)
            }
            Some(Err(e)) => {
                failures.push(failure(
                    None,
                    "merge",
                    format!("{} / {}: {e}", graph[key.0].name, graph[key.1].name),
                ));
                (descriptions.join(" "), Vec::new())
            }
            None => (descriptions.join(" "), Vec::new()),
        };
        graph.add_edge(
            *h,
            *t,
            Relation {
                description,
                segments: segs,
                merged_from: rels.len(),
                helper_questions,
            },
        );
    }
}
