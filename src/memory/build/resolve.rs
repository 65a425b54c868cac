//! Relation-end resolution: each end of an extracted relation resolved to an entity of its
//! segment or of the document (or, with open entity recognition, made one), and the relation
//! kept only when both ends are named in one paragraph of the segment.

use std::collections::{BTreeSet, HashMap};

use rayon::prelude::*;

use rust_stemmers::Stemmer;

use super::extract::clean_name;
use super::{RawEntity, RawRelation, SegmentOut};
use crate::memory::merge::{english_stemmer, normalize, same_entity};
use crate::memory::schema::paragraphs;
use crate::memory::types::{BuildStats, RelationDrops, Source};
use crate::text::{occurs_in, Segment};

/// A relation end as a name: cleaned, without a possessive ("Baji Rao's" -> "Baji Rao").
fn end_name(end: &str) -> String {
    let n = clean_name(end);
    for suffix in ["'s", "’s", "'", "’"] {
        if let Some(stripped) = n.strip_suffix(suffix) {
            if !stripped.trim().is_empty() {
                return stripped.trim_end().to_string();
            }
        }
    }
    n
}

/// How well a relation end's normalised tokens `end` match an entity's `entity`: `Some(score)`
/// when the end's tokens are a part of the entity's that keeps its first token, or its last
/// when the end is one token ("Baji Rao" -> "Baji Rao I", "Hoffmann" -> "Clara Hoffmann"), or
/// when disambiguation would merge them; higher is closer. An end longer than the entity names
/// something more specific ("Swiss society of engineers" is not "Swiss") and is not matched here.
fn fuzzy_score(end: &[String], entity: &[String], threshold: f64) -> Option<f64> {
    if end.is_empty() || entity.is_empty() {
        return None;
    }
    let jw = strsim::jaro_winkler(&end.join(" "), &entity.join(" "));
    let part = end.len() <= entity.len()
        && end.iter().all(|t| entity.contains(t))
        && (end[0] == entity[0] || (end.len() == 1 && entity.last() == end.last()));
    if part {
        Some(1.0 + jw)
    } else if same_entity(end, entity, threshold) {
        Some(jw)
    } else {
        None
    }
}

/// Whether a multi-word entity's tokens all lie in the end's, in order of the end: the last
/// resort for an end the model lengthened beyond the segment's text ("the Velden Bridge over
/// the Aare" -> "Velden Bridge").
fn contains_entity(end: &[String], entity: &[String]) -> bool {
    entity.len() >= 2 && end.len() > entity.len() && end.windows(entity.len()).any(|w| w == entity)
}

/// How a relation end was resolved.
#[derive(Debug, PartialEq)]
enum End {
    /// To an entity of the segment or the document: its surface name.
    Found(String),
    /// To a new entity: the end occurs in the segment but no entity had it.
    New(String),
    /// It occurs nowhere in the segment and matches no entity.
    Absent,
}

/// The entities one relation end can resolve to: the segment's own (surface name and
/// normalised key, growing as ends become entities) and the document's by key.
struct EndIndex<'a> {
    local: Vec<(String, Vec<String>)>,
    global: &'a HashMap<Vec<String>, String>,
    stemmer: &'a Stemmer,
    threshold: f64,
    allow_new: bool,
}

impl EndIndex<'_> {
    /// The disambiguation normaliser, then a fuzzy match against the segment's entities, then
    /// the document's entities by key, then the segment's text (a new entity), then a
    /// segment entity the end contains.
    fn resolve(&mut self, end: &str, segment_lower: &str) -> End {
        let name = end_name(end);
        let key = normalize(&name, self.stemmer);
        if key.is_empty() {
            return End::Absent;
        }
        if let Some((surface, _)) = self.local.iter().find(|(_, k)| *k == key) {
            return End::Found(surface.clone());
        }
        let best = self
            .local
            .iter()
            .filter_map(|(s, k)| fuzzy_score(&key, k, self.threshold).map(|x| (x, s)))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((_, surface)) = best {
            return End::Found(surface.clone());
        }
        if let Some(surface) = self.global.get(&key) {
            return End::Found(surface.clone());
        }
        if self.allow_new && occurs_in(segment_lower, &name) {
            self.local.push((name.clone(), key));
            return End::New(name);
        }
        self.local
            .iter()
            .filter(|(_, k)| contains_entity(&key, k))
            .max_by_key(|(_, k)| k.len())
            .map_or(End::Absent, |(s, _)| End::Found(s.clone()))
    }
}

/// The paragraphs (indices into `paragraphs`) that name one of `names` as whole words.
fn naming(paragraphs: &[String], names: &[&str]) -> BTreeSet<usize> {
    paragraphs
        .iter()
        .enumerate()
        .filter(|(_, p)| names.iter().any(|n| occurs_in(p, n)))
        .map(|(i, _)| i)
        .collect()
}

/// One segment's relations with both ends resolved: the entities its ends created, the
/// relations kept (ends renamed to entity surface names), and the drops by cause. Both ends
/// must be named in the segment (by the end's own spelling or its entity's name), in one
/// paragraph: the small models name the question's entities as ends in segments that never
/// mention them, and chain the entities of neighbouring passages. A relation the reply repeats
/// word for word counts once.
pub(super) fn resolve_segment(
    segment: &Segment,
    entities: &[RawEntity],
    relations: &[RawRelation],
    global: &HashMap<Vec<String>, String>,
    threshold: f64,
    allow_new: bool,
) -> (Vec<RawEntity>, Vec<RawRelation>, RelationDrops) {
    let stemmer = english_stemmer();
    let mut seen = BTreeSet::new();
    let local: Vec<(String, Vec<String>)> = entities
        .iter()
        .filter(|e| seen.insert(e.name.clone()))
        .map(|e| (e.name.clone(), normalize(&e.name, &stemmer)))
        .filter(|(_, k)| !k.is_empty())
        .collect();
    let mut index = EndIndex {
        local,
        global,
        stemmer: &stemmer,
        threshold,
        allow_new,
    };
    let lower = segment.text.to_lowercase();
    let paragraphs = paragraphs(&segment.text);
    let mut created = Vec::new();
    let mut kept = Vec::new();
    let mut drops = RelationDrops::default();
    for r in unique(relations) {
        if r.description.is_empty() {
            drops.empty_description += 1;
            continue;
        }
        let mut names: Vec<String> = Vec::new();
        for end in [r.head.as_str(), r.tail.as_str()] {
            match index.resolve(end, &lower) {
                End::Found(n) => names.push(n),
                End::New(n) => {
                    created.push(RawEntity {
                        segment: segment.index,
                        name: n.clone(),
                        kind: "other".into(),
                        source: Source::Relation,
                    });
                    names.push(n);
                }
                End::Absent => {}
            }
        }
        let named = |end: &str, name: &str| naming(&paragraphs, &[&end_name(end), name]);
        match names.as_slice() {
            [h, t] if h == t => drops.self_loop += 1,
            [h, t] => {
                let (hp, tp) = (named(&r.head, h), named(&r.tail, t));
                if hp.is_empty() || tp.is_empty() {
                    drops.unresolved_end += 1;
                } else if hp.is_disjoint(&tp) {
                    drops.unsupported += 1;
                } else {
                    kept.push(RawRelation {
                        segment: r.segment,
                        head: h.clone(),
                        tail: t.clone(),
                        description: r.description.clone(),
                    });
                }
            }
            _ => drops.unresolved_end += 1,
        }
    }
    (created, kept, drops)
}

/// `relations` without word-for-word repeats (greedy decoding can repeat one triple until the
/// list's limit), in order.
pub(super) fn unique(relations: &[RawRelation]) -> Vec<&RawRelation> {
    let mut seen = BTreeSet::new();
    relations
        .iter()
        .filter(|r| {
            seen.insert((
                r.head.to_lowercase(),
                r.tail.to_lowercase(),
                r.description.to_lowercase(),
            ))
        })
        .collect()
}

/// Every segment's relation ends resolved (on rayon's pool, put back in segment order): the
/// entities the ends created join their segment's, and the kept relations and the drops by cause
/// are returned.
pub(super) fn resolve_relations(
    segments: &[Segment],
    outs: &mut [SegmentOut],
    threshold: f64,
    allow_new: bool,
    stats: &mut BuildStats,
) -> (Vec<RawRelation>, RelationDrops) {
    // Relation ends, per segment on rayon's pool: each becomes an entity's surface name.
    let stemmer = english_stemmer();
    let mut global: HashMap<Vec<String>, String> = HashMap::new();
    for e in outs.iter().flat_map(|o| o.entities.iter()) {
        let key = normalize(&e.name, &stemmer);
        if !key.is_empty() {
            global.entry(key).or_insert_with(|| e.name.clone());
        }
    }
    let resolved: Vec<(Vec<RawEntity>, Vec<RawRelation>, RelationDrops)> = outs
        .par_iter()
        .zip(segments.par_iter())
        .map(|(o, seg)| {
            resolve_segment(
                seg,
                &o.entities,
                &o.relations,
                &global,
                threshold,
                allow_new,
            )
        })
        .collect();
    let mut drops = RelationDrops::default();
    let mut kept: Vec<RawRelation> = Vec::new();
    for (o, (created, rels, d)) in outs.iter_mut().zip(resolved) {
        stats.raw_relations += unique(&o.relations).len();
        o.entities.extend(created);
        kept.extend(rels);
        drops.unresolved_end += d.unresolved_end;
        drops.self_loop += d.self_loop;
        drops.empty_description += d.empty_description;
        drops.unsupported += d.unsupported;
    }
    (kept, drops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::build::tests::{raw, rel};
    use crate::text::segment;

    #[test]
    fn relation_ends_resolve_through_spelling_variants_and_the_segment_text() {
        let seg = segment(
            "Baji Rao I was the Peshwa of the Maratha Empire. Baji Rao's son Nanasaheb \
             led the army at the battle of Palkhed, and the peshwa's court sat in Pune. \
             Nanasaheb served Shahu.",
            1000,
        )
        .remove(0);
        let entities = [
            raw(0, "Baji Rao I", Source::Llm),
            raw(0, "Maratha Empire", Source::Schema),
            raw(0, "Nanasaheb", Source::Llm),
        ];
        let stemmer = english_stemmer();
        let global: HashMap<Vec<String>, String> = [
            (normalize("Shahu", &stemmer), "Shahu".to_string()),
            (normalize("Holkar", &stemmer), "Holkar".to_string()),
        ]
        .into();
        let relations = [
            // A shorter spelling and a possessive of an entity.
            rel(
                "Baji Rao",
                "Maratha Empire",
                "Baji Rao was Peshwa of the empire.",
            ),
            rel("Baji Rao's", "Nanasaheb", "Nanasaheb was Baji Rao's son."),
            // Another case, and an entity of another segment (named here, no entity here).
            rel("nanasaheb", "Shahu", "Nanasaheb served Shahu."),
            // An entity of another segment that this one never names: not this segment's fact.
            rel("Nanasaheb", "Holkar", "Nanasaheb fought Holkar."),
            // The same relation again, word for word: counted once.
            rel(
                "Baji Rao",
                "Maratha Empire",
                "Baji Rao was Peshwa of the empire.",
            ),
            // An end that is no entity but is in the text becomes one.
            rel(
                "Nanasaheb",
                "battle of Palkhed",
                "Nanasaheb led the army at Palkhed.",
            ),
            // A self-loop, an end found nowhere, an empty description.
            rel("Baji Rao I", "baji rao", "Baji Rao is Baji Rao."),
            rel(
                "Nanasaheb",
                "Delhi Sultanate",
                "Nanasaheb fought the sultanate.",
            ),
            rel("Nanasaheb", "Pune", ""),
        ];
        let (created, kept, drops) =
            resolve_segment(&seg, &entities, &relations, &global, 0.92, true);
        let pairs: Vec<(&str, &str)> = kept
            .iter()
            .map(|r| (r.head.as_str(), r.tail.as_str()))
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("Baji Rao I", "Maratha Empire"),
                ("Baji Rao I", "Nanasaheb"),
                ("Nanasaheb", "Shahu"),
                ("Nanasaheb", "battle of Palkhed"),
            ]
        );
        assert_eq!(created.len(), 1);
        assert_eq!(
            (created[0].name.as_str(), created[0].source),
            ("battle of Palkhed", Source::Relation)
        );
        assert_eq!(
            (
                drops.self_loop,
                drops.unresolved_end,
                drops.empty_description
            ),
            (1, 2, 1)
        );
        // The no-open-entity ablation makes no entity of an end.
        let (created, kept, drops) =
            resolve_segment(&seg, &entities, &relations, &global, 0.92, false);
        assert!(created.is_empty());
        assert_eq!((kept.len(), drops.unresolved_end), (3, 3));
    }

    #[test]
    fn a_relation_between_two_passages_is_unsupported() {
        let seg = segment(
            "Passage 1:\nHero Burgers\nHero Burgers is a chain based in Toronto.\n\
             Passage 2:\nEncore\nEncore is a resort on the Las Vegas Strip.",
            1000,
        )
        .remove(0);
        let entities = [
            raw(0, "Hero Burgers", Source::Llm),
            raw(0, "Toronto", Source::Llm),
            raw(0, "Encore", Source::Llm),
            raw(0, "Las Vegas Strip", Source::Llm),
        ];
        let relations = [
            rel(
                "Hero Burgers",
                "Toronto",
                "Hero Burgers is based in Toronto.",
            ),
            rel(
                "Toronto",
                "Las Vegas Strip",
                "Toronto is in Las Vegas Strip.",
            ),
            // A title joins its passage: "Encore" of the title line and of the text.
            rel(
                "Encore",
                "Las Vegas Strip",
                "Encore is on the Las Vegas Strip.",
            ),
        ];
        let (_, kept, drops) =
            resolve_segment(&seg, &entities, &relations, &HashMap::new(), 0.92, true);
        assert_eq!(kept.len(), 2);
        assert_eq!(drops.unsupported, 1);
    }

    #[test]
    fn a_longer_end_is_not_its_first_word() {
        let (e, k) = (
            normalize("Swiss society of engineers", &english_stemmer()),
            normalize("Swiss", &english_stemmer()),
        );
        assert_eq!(fuzzy_score(&e, &k, 0.92), None);
        assert!(fuzzy_score(&k, &e, 0.92).is_some());
        assert!(contains_entity(
            &normalize("the Velden Bridge over the Aare", &english_stemmer()),
            &normalize("Velden Bridge", &english_stemmer())
        ));
    }
}
