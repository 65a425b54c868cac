//! The first phase of construction, per document: its extraction record. Here the
//! co-occurrence pass (no LLM call): for each passage, the entities the schema extractor finds
//! (`memory::schema`, the CoreNLP stand-in), each with the key the assembly merges on. The
//! record is immutable and keyed by the document's content and these settings; the second
//! phase, the assembly of the records present into entities with their provenance, is the
//! `mentions` table the store keeps from them (`store.rs`).

use std::collections::BTreeSet;

use petgraph::visit::{EdgeRef, IntoEdgeReferences};
use serde::{Deserialize, Serialize};

use crate::memory::merge::{english_stemmer, normalize};
use crate::memory::schema;
use crate::memory::Memory;
use crate::text::occurs_in;
use crate::text::passages::MIN_NAME;

/// The record kind of the co-occurrence pass, and the version of its settings: a change to
/// what the pass extracts is a new key, so old records are never read as new ones.
pub const RECORD_KIND: &str = "cooccurrence";
pub(crate) const RECORD_SETTINGS: &str = "schema-titles-v2";

/// A record with what made it: its kind (`cooccurrence`, `llm-graph`) and the version of the
/// settings it was made with (a record of other settings is never read as this one's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub kind: String,
    pub settings: String,
    pub record: DocRecord,
}

/// One document's extraction record: per passage (in order), its entities, and (the LLM's
/// record only) the relations between them the passage states.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocRecord {
    pub passages: Vec<Vec<EntityRow>>,
    /// Per passage (as many as `passages`, or none): the LLM's relations whose two ends the
    /// passage names. Left out when empty, so a co-occurrence record is written as it was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relations: Vec<Vec<RelationRow>>,
}

/// A relation as a passage holds it: its two ends by merge key (each an entity row of the
/// passage) and the LLM's sentence.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RelationRow {
    pub head: String,
    pub tail: String,
    pub description: String,
}

/// An entity as a passage names it: the merge key (the normalised, stemmed name), the name as
/// written and its kind.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EntityRow {
    pub key: String,
    pub name: String,
    pub kind: String,
}

impl DocRecord {
    /// The co-occurrence pass over a document's passages, each given with its title: the
    /// entities the schema extractor finds, and the title itself when the passage's text
    /// names it (a passage's title is the entity it is about, and the extractor leaves out a
    /// lone name at the start of a line).
    pub fn cooccurrence<S: AsRef<str>>(passages: &[(S, S)]) -> Self {
        let stemmer = english_stemmer();
        let passages = passages
            .iter()
            .map(|(title, text)| {
                let found = schema::extract(text.as_ref())
                    .into_iter()
                    .filter(|e| e.kind != "number" && e.kind != "time")
                    .map(|e| (e.name, e.kind.to_string()));
                passage_rows(title.as_ref(), text.as_ref(), found, &stemmer)
            })
            .collect();
        DocRecord {
            passages,
            relations: Vec::new(),
        }
    }

    /// The LLM's record of a document (`llm-graph`): per passage, the entities of the QRMeM
    /// graph built over the whole document (`memory`, one joint extraction call a segment, as
    /// the paper builds it) that the passage names (a name or mention as whole words), with the
    /// entity's type; and the title as in [`DocRecord::cooccurrence`]. A relation of the graph
    /// goes to every passage that names both its ends (the graph keeps the segments a relation
    /// came from, not the passages).
    pub fn from_memory<S: AsRef<str>>(memory: &Memory, passages: &[(S, S)]) -> Self {
        let stemmer = english_stemmer();
        let entities: Vec<(&str, Vec<String>, &str)> = memory
            .graph
            .node_weights()
            .map(|e| {
                let names = std::iter::once(&e.name)
                    .chain(&e.mentions)
                    .map(|m| m.trim().to_lowercase())
                    .filter(|m| m.chars().count() >= MIN_NAME)
                    .collect();
                (e.name.as_str(), names, e.kind.as_str())
            })
            .collect();
        let passages = passages
            .iter()
            .map(|(title, text)| {
                let lower = text.as_ref().to_lowercase();
                let found = entities
                    .iter()
                    .filter(|(_, names, _)| names.iter().any(|m| occurs_in(&lower, m)))
                    .map(|(name, _, kind)| (name.to_string(), kind.to_string()));
                passage_rows(title.as_ref(), text.as_ref(), found, &stemmer)
            })
            .collect::<Vec<_>>();
        let key = |name: &str| normalize(name, &stemmer).join(" ");
        let edges: Vec<RelationRow> = (&memory.graph)
            .edge_references()
            .map(|e| RelationRow {
                head: key(&memory.graph[e.source()].name),
                tail: key(&memory.graph[e.target()].name),
                description: e.weight().description.clone(),
            })
            .filter(|r| r.head != r.tail)
            .collect();
        let relations = passages
            .iter()
            .map(|rows| {
                let named: BTreeSet<&str> = rows.iter().map(|r| r.key.as_str()).collect();
                let mut out: Vec<RelationRow> = edges
                    .iter()
                    .filter(|r| named.contains(r.head.as_str()) && named.contains(r.tail.as_str()))
                    .cloned()
                    .collect();
                out.sort();
                out.dedup();
                out
            })
            .collect::<Vec<_>>();
        let relations = if relations.iter().all(Vec::is_empty) {
            Vec::new()
        } else {
            relations
        };
        DocRecord {
            passages,
            relations,
        }
    }

    /// The relations of passage `idx` (none for a record without them).
    pub fn relations_of(&self, idx: usize) -> &[RelationRow] {
        self.relations.get(idx).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// A passage's entity rows: `found` (name, kind) and its title when the text names it, each
/// with its merge key, one row per key (the title's row wins: it marks the passage as the
/// entity's own).
fn passage_rows(
    title: &str,
    text: &str,
    found: impl Iterator<Item = (String, String)>,
    stemmer: &rust_stemmers::Stemmer,
) -> Vec<EntityRow> {
    let lower = text.to_lowercase();
    let own = (title.chars().count() >= MIN_NAME && occurs_in(&lower, title))
        .then(|| (title.to_string(), "title".to_string()));
    let mut rows: Vec<EntityRow> = found
        .chain(own)
        .filter_map(|(name, kind)| {
            let key = normalize(&name, stemmer).join(" ");
            (!key.is_empty()).then_some(EntityRow { key, name, kind })
        })
        .collect();
    rows.sort_by(|a, b| {
        (&a.key, a.kind != "title", &a.name).cmp(&(&b.key, b.kind != "title", &b.name))
    });
    rows.dedup_by(|a, b| a.key == b.key);
    rows
}
