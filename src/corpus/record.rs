//! The first phase of construction, per document: its extraction record. Here the
//! co-occurrence pass (no LLM call): for each passage, the entities the schema extractor finds
//! (`memory::schema`, the CoreNLP stand-in), each with the key the assembly merges on. The
//! record is immutable and keyed by the document's content and these settings; the second
//! phase, the assembly of the records present into entities with their provenance, is the
//! `mentions` table the store keeps from them (`store.rs`).

use serde::{Deserialize, Serialize};

use crate::memory::merge::{english_stemmer, normalize};
use crate::memory::schema;
use crate::text::occurs_in;
use crate::text::passages::MIN_NAME;

/// The record kind of the co-occurrence pass, and the version of its settings: a change to
/// what the pass extracts is a new key, so old records are never read as new ones.
pub const RECORD_KIND: &str = "cooccurrence";
pub(crate) const RECORD_SETTINGS: &str = "schema-titles-v2";

/// One document's extraction record: per passage (in order), its entities.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocRecord {
    pub passages: Vec<Vec<EntityRow>>,
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
                let (title, text) = (title.as_ref(), text.as_ref());
                let lower = text.to_lowercase();
                let own = (title.chars().count() >= MIN_NAME && occurs_in(&lower, title))
                    .then(|| (title.to_string(), "title"));
                let mut rows: Vec<EntityRow> = schema::extract(text)
                    .into_iter()
                    .filter(|e| e.kind != "number" && e.kind != "time")
                    .map(|e| (e.name, e.kind))
                    .chain(own)
                    .filter_map(|(name, kind)| {
                        let key = normalize(&name, &stemmer).join(" ");
                        (!key.is_empty()).then(|| EntityRow {
                            key,
                            name,
                            kind: kind.to_string(),
                        })
                    })
                    .collect();
                // One row per key; the title's row wins (it marks the passage as the
                // entity's own).
                rows.sort_by(|a, b| {
                    (&a.key, a.kind != "title", &a.name).cmp(&(&b.key, b.kind != "title", &b.name))
                });
                rows.dedup_by(|a, b| a.key == b.key);
                rows
            })
            .collect();
        DocRecord { passages }
    }
}
