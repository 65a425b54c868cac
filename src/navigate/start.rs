//! The start (QRMeM section 2.2): the question's entities, linked to graph entities (E_s).

use std::collections::BTreeSet;

use petgraph::stable_graph::NodeIndex;
use serde::Deserialize;
use serde_json::json;

use super::{NavigateError, Navigator, Run};
use crate::answer::{Step, StepKind};
use crate::llm::{JsonSchema, Message};
use crate::memory::merge::{english_stemmer, normalize, same_entity};
use crate::memory::Entity;
use crate::prompts::PromptId;
use crate::text::whole_word;

#[derive(Deserialize)]
struct EntityList {
    #[serde(default)]
    entities: Vec<String>,
}

impl Navigator<'_> {
    /// E_s: the question's entities (LLM extraction), linked to graph entities by the
    /// disambiguation normaliser, by mentions found verbatim in the question, and, for names
    /// that match nothing, by embedding similarity to entity names.
    pub(super) async fn start(&self, run: &mut Run) -> Result<BTreeSet<NodeIndex>, NavigateError> {
        let p = self
            .prompts
            .render(PromptId::QuestionEntities, &[("question", &run.question)])?;
        let names: Vec<String> = match self
            .llm
            .chat_json::<EntityList>(
                "question_entities",
                vec![Message::user(p)],
                Some(JsonSchema {
                    name: "entities".into(),
                    schema: json!({"type": "object", "properties": {"entities": {"type": "array", "maxItems": 8, "items": {"type": "string", "minLength": 1, "maxLength": 80}}}, "required": ["entities"]}),
                }),
            )
            .await
        {
            Ok(r) => r.value.entities,
            Err(e) => {
                run.failures.push(format!("question_entities: {e}"));
                Vec::new()
            }
        };
        let linked = self.link(&names, &run.question)?;
        let mut note = format!("question entities: {}", names.join(", "));
        let linked = if linked.is_empty() {
            // Nothing links: start from the entities of the best dense segment.
            let best = crate::embed::score_segments(self.embedder, self.memory, &run.question)?;
            let seg = best.first().map(|(s, _)| *s).unwrap_or(0);
            note.push_str(&format!(
                "; none linked, starting from the entities of segment {seg}"
            ));
            self.memory
                .graph
                .node_indices()
                .filter(|&n| self.memory.graph[n].segments.contains(&seg))
                .take(8)
                .collect()
        } else {
            linked
        };
        run.push(Step {
            kind: StepKind::Start,
            entities: self.names(&linked),
            note,
            ..Step::default()
        });
        Ok(linked)
    }

    /// Links names to graph entities.
    pub(crate) fn link(
        &self,
        names: &[String],
        question: &str,
    ) -> Result<BTreeSet<NodeIndex>, NavigateError> {
        let g = &self.memory.graph;
        let stemmer = english_stemmer();
        let threshold = self.memory.params.entity_similarity;
        let keys: Vec<(NodeIndex, Vec<Vec<String>>)> = g
            .node_indices()
            .map(|n| {
                (
                    n,
                    g[n].mentions
                        .iter()
                        .chain(std::iter::once(&g[n].name))
                        .map(|m| normalize(m, &stemmer))
                        .collect(),
                )
            })
            .collect();
        let mut linked = BTreeSet::new();
        let mut unmatched = Vec::new();
        for name in names {
            let k = normalize(name, &stemmer);
            // A single common word ("film", "city") names no particular entity.
            if k.is_empty() || is_common_word(name) {
                continue;
            }
            let hits: Vec<NodeIndex> = keys
                .iter()
                .filter(|(_, ks)| ks.iter().any(|m| same_entity(&k, m, threshold)))
                .map(|(n, _)| *n)
                .collect();
            if hits.is_empty() {
                unmatched.push(name.clone());
            }
            linked.extend(hits);
        }
        // Mentions found verbatim in the question (see `joins_verbatim`).
        let q_lower = question.to_lowercase();
        for n in g.node_indices() {
            if joins_verbatim(&g[n], question, &q_lower) {
                linked.insert(n);
            }
        }
        if !unmatched.is_empty() && g.node_count() > 0 {
            let nodes: Vec<NodeIndex> = g.node_indices().collect();
            let texts: Vec<&str> = nodes.iter().map(|&n| g[n].name.as_str()).collect();
            let mut all: Vec<&str> = unmatched.iter().map(String::as_str).collect();
            all.extend(texts.iter().copied());
            let vectors = crate::embed::embed_exact(self.embedder, &all)?;
            let (qv, nv) = vectors.split_at(unmatched.len());
            for q in qv {
                let best = nv
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (i, crate::embed::cosine(q, v)))
                    .max_by(|a, b| a.1.total_cmp(&b.1));
                if let Some((i, score)) = best {
                    if score >= 0.6 {
                        linked.insert(nodes[i]);
                    }
                }
            }
        }
        Ok(linked)
    }
}

/// Whether a name is one lowercase word: a common noun, not a name.
fn is_common_word(name: &str) -> bool {
    let t = name.trim();
    !t.is_empty()
        && !t.contains(char::is_whitespace)
        && t.chars().all(|c| !c.is_uppercase())
        && t.chars().any(char::is_alphabetic)
}

/// Whether entity `e` joins E_s because the question names it verbatim (`q_lower` is the
/// question in lowercase): not a number or a date, and one of its mentions named in the question
/// (`named_in`). A generic entity (linked to more than a fifth of the segments) joins only by a
/// capitalised mention, a name: in these documents the question's own topics ("Giacomo
/// Puccini", "New Hampshire") recur in a third of the segments, while a generic phrase ("its
/// headquarters", "the film") names nothing in particular. The ranked, bounded start keeps a
/// frequent name from flooding S_imp: its inverse segment frequency is low.
fn joins_verbatim(e: &Entity, question: &str, q_lower: &str) -> bool {
    if e.kind == "number" || e.kind == "time" {
        return false;
    }
    e.mentions.iter().any(|m| {
        (!e.generic || m.trim().chars().next().is_some_and(char::is_uppercase))
            && named_in(question, q_lower, m)
    })
}

/// Whether mention `m` is named verbatim in `question` (`q_lower` is its lowercase form): a
/// mention of two or more words as a whole-word match in any case; a one-word mention only as
/// written, capitalised, and not as the question's first word (which is capitalised anyway).
fn named_in(question: &str, q_lower: &str, m: &str) -> bool {
    let m = m.trim();
    if m.chars().count() < 3 {
        return false;
    }
    if m.contains(char::is_whitespace) {
        return whole_word(q_lower, &m.to_lowercase());
    }
    if !m.chars().next().is_some_and(char::is_uppercase) {
        return false;
    }
    let first_end = question
        .char_indices()
        .find(|&(i, c)| i > 0 && !c.is_alphanumeric())
        .map_or(question.len(), |(i, _)| i);
    whole_word(&question[first_end..], m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Source;

    #[test]
    fn one_word_mentions_link_only_as_written_and_capitalised() {
        let q = "Which city did Beta move to from the harbour town of Delta Bay?";
        let l = q.to_lowercase();
        assert!(named_in(q, &l, "Beta"));
        assert!(named_in(q, &l, "delta bay"), "two words: any case");
        assert!(!named_in(q, &l, "city"), "a lowercase word");
        assert!(
            !named_in(q, &l, "Harbour"),
            "written lowercase in the question"
        );
        assert!(!named_in(q, &l, "Which"), "the question's first word");
        assert!(is_common_word("film") && !is_common_word("Film") && !is_common_word("film star"));
    }

    #[test]
    fn a_generic_entity_joins_by_a_name_not_by_a_phrase() {
        let q = "In what city did the \"Prince of tenors\" star in a film based on an opera by Giacomo Puccini?";
        let l = q.to_lowercase();
        let ent = |mention: &str, generic: bool| Entity {
            name: mention.into(),
            kind: "other".into(),
            mentions: [mention.to_string()].into_iter().collect(),
            segments: [1, 3, 4, 8].into_iter().collect(),
            sources: [Source::Schema].into_iter().collect(),
            generic,
        };
        // The second hop's composer recurs in 8 of 24 segments (generic) and is named.
        assert!(joins_verbatim(&ent("Giacomo Puccini", true), q, &l));
        assert!(joins_verbatim(&ent("Puccini", true), q, &l));
        assert!(joins_verbatim(&ent("Prince of tenors", false), q, &l));
        // A generic phrase does not join; the same phrase joins when it is not generic.
        assert!(!joins_verbatim(&ent("a film", true), q, &l));
        assert!(joins_verbatim(&ent("a film", false), q, &l));
        // Numbers and dates never join this way; nor does a name the question lacks.
        let mut year = ent("Prince", false);
        year.kind = "time".into();
        assert!(!joins_verbatim(&year, q, &l));
        assert!(!joins_verbatim(&ent("Tosca", false), q, &l));
    }
}
