//! The joint extraction (QRMeM section 2.1): per segment, one call for its entities, its
//! relations (as triples) and, with the graph update, the questions it raises with what they
//! bring; the reply's types and schema, and the cleaning of extracted names.

use serde::Deserialize;
use serde_json::json;

use super::{
    conversation, failure, schema, BuildError, Builder, Proposed, RawEntity, RawRelation,
    SegmentOut,
};
use crate::config::ExtractionFormat;
use crate::llm::{Decoding, JsonSchema};
use crate::memory::types::Source;
use crate::prompts::PromptId;
use crate::text::{occurs_in, Segment};

#[derive(Deserialize)]
#[serde(untagged)]
enum EntityItem {
    Full {
        name: String,
        #[serde(default, rename = "type")]
        kind: String,
    },
    Name(String),
    /// The compact format's [name, type].
    Pair(Vec<String>),
}

#[derive(Deserialize)]
struct RelationItem {
    #[serde(default)]
    head: String,
    #[serde(default)]
    tail: String,
    #[serde(default, alias = "relation")]
    description: String,
}

/// A relation as the joint call writes it: a [subject, predicate, object] triple (its
/// description is the sentence "subject predicate object."), or an object with a description.
#[derive(Deserialize)]
#[serde(untagged)]
enum TripleItem {
    Triple(Vec<String>),
    Relation(RelationItem),
}

impl TripleItem {
    fn into_relation(self) -> RelationItem {
        match self {
            TripleItem::Relation(r) => r,
            TripleItem::Triple(t) => {
                let part = |i: usize| t.get(i).map_or("", |s| s.trim()).to_string();
                let (head, predicate, tail) = (part(0), part(1), part(2));
                let description = if head.is_empty() || predicate.is_empty() || tail.is_empty() {
                    String::new()
                } else {
                    format!("{head} {predicate} {tail}.")
                };
                RelationItem {
                    head,
                    tail,
                    description,
                }
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum QuestionItem {
    Full {
        question: String,
        #[serde(default, alias = "relations")]
        triples: Vec<TripleItem>,
        #[serde(default)]
        entities: Vec<EntityItem>,
    },
    Text(String),
}

/// The joint extraction reply. `entities` and `triples` must be present: a reply without them
/// is retried, never read as an empty graph.
#[derive(Deserialize)]
struct ExtractReply {
    entities: Vec<EntityItem>,
    #[serde(alias = "relations")]
    triples: Vec<TripleItem>,
    #[serde(default, alias = "questions")]
    unanswered_questions: Vec<QuestionItem>,
}

/// The compact reply. `entities` and `triples` must be present, as in the paper's.
#[derive(Deserialize)]
struct CompactReply {
    entities: Vec<EntityItem>,
    #[serde(default)]
    questions: Vec<String>,
    triples: Vec<TripleItem>,
}

impl From<CompactReply> for ExtractReply {
    fn from(r: CompactReply) -> Self {
        ExtractReply {
            entities: r.entities,
            triples: r.triples,
            unanswered_questions: r.questions.into_iter().map(QuestionItem::Text).collect(),
        }
    }
}

const ENTITY_KINDS: &[&str] = &[
    "person",
    "location",
    "organization",
    "time",
    "work",
    "event",
    "number",
    "other",
];

/// The compact format's entity: [name, type].
fn entity_pair_schema(max: usize) -> serde_json::Value {
    json!({
        "type": "array", "maxItems": max,
        "items": {"type": "array", "prefixItems": [
            {"type": "string", "minLength": 1, "maxLength": 80},
            {"type": "string", "enum": ENTITY_KINDS}
        ]}
    })
}

fn entity_schema(max: usize) -> serde_json::Value {
    json!({
        "type": "array", "maxItems": max,
        "items": {"type": "object", "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 80},
            "type": {"type": "string", "enum": ENTITY_KINDS}
        }, "required": ["name", "type"]}
    })
}

fn triple_schema(max: usize) -> serde_json::Value {
    json!({
        "type": "array", "maxItems": max,
        "items": {"type": "array", "minItems": 3, "maxItems": 3,
                  "items": {"type": "string", "minLength": 1, "maxLength": 120}}
    })
}

/// The joint reply's schema: entities, triples, and the questions with their triples (asked by
/// every extracted kind; the no-graph-update ablation leaves the questions out of its memory).
/// A server that follows a JSON schema writes an object's keys in the schema's order, which is
/// the `required` list's (`JsonSchema::as_sent`): the paper's (entities, then relations, then
/// questions). The names sort the same way, so the cache keys of the committed builds did not
/// change when the sent order became the `required` order.
fn extract_schema(format: ExtractionFormat, max_entities: usize) -> Option<JsonSchema> {
    if format == ExtractionFormat::Compact {
        return compact_schema(max_entities);
    }
    let properties = json!({
        "entities": entity_schema(max_entities),
        "triples": triple_schema(30),
        "unanswered_questions": {
            "type": "array", "maxItems": 3,
            "items": {"type": "object", "properties": {
                "question": {"type": "string", "minLength": 5, "maxLength": 200},
                "triples": triple_schema(3)
            }, "required": ["question", "triples"]}
        },
    });
    schema(
        "extract",
        properties,
        &["entities", "triples", "unanswered_questions"],
    )
}

/// The compact reply's schema: the entities as [name, type] pairs, then the questions as plain
/// strings, then the triples: the paper's content and order, except that the questions come
/// before the triples (without copies of them), so a reply cut at a looping triple list keeps
/// them.
fn compact_schema(max_entities: usize) -> Option<JsonSchema> {
    let properties = json!({
        "entities": entity_pair_schema(max_entities),
        "questions": {
            "type": "array", "maxItems": 3,
            "items": {"type": "string", "minLength": 5, "maxLength": 200}
        },
        "triples": triple_schema(30),
    });
    schema("extract", properties, &["entities", "questions", "triples"])
}

fn raw_relation(segment: usize, r: RelationItem) -> RawRelation {
    RawRelation {
        segment,
        head: r.head.trim().to_string(),
        tail: r.tail.trim().to_string(),
        description: r.description.trim().to_string(),
    }
}

pub(super) fn question_text(question: Option<&str>) -> &str {
    question.unwrap_or("(no question given: extract what matters for the document as a whole)")
}

fn kind_of(item_kind: &str) -> String {
    let k = item_kind.trim().to_lowercase();
    if ENTITY_KINDS.contains(&k.as_str()) {
        k
    } else {
        "other".to_string()
    }
}

/// An extracted name without quotes and without a trailing parenthetical: models often return
/// "Clara Hoffmann (1851-1923)" for the entity "Clara Hoffmann".
pub(super) fn clean_name(name: &str) -> String {
    let mut n = name
        .trim()
        .trim_matches(|c: char| c == '"' || c == '\'' || c == '“' || c == '”')
        .trim();
    if n.ends_with(')') {
        if let Some(open) = n.rfind(" (") {
            if open > 0 {
                n = n[..open].trim_end();
            }
        }
    }
    n.to_string()
}

impl Builder<'_> {
    /// The joint extraction of one segment: its schema entities (`found`), and one call for
    /// its entities, relations and (with the graph update) questions. The question the memory
    /// is oriented to is not shown: with it, the 0.5B model wrote the question's entities into
    /// segments that never name them and extracted little else (ARCHITECTURE.md, Deviations:
    /// query orientation of the extraction); the Relation Update prompt shows it, and the memory
    /// records it.
    pub(super) async fn extract(
        &self,
        seg: &Segment,
        summary: &str,
        found: Vec<schema::SchemaEntity>,
    ) -> Result<SegmentOut, BuildError> {
        let mut out = SegmentOut {
            entities: RawEntity::schema(seg.index, found),
            ..SegmentOut::default()
        };
        let lower = seg.text.to_lowercase();
        // The no-graph-update ablation sends the same call and leaves its questions out of the
        // memory: the paper's ablation drops the question generation and graph update and keeps
        // the extraction, which our joint call shares with them (ARCHITECTURE.md, Deviations).
        let with_questions = self.params.graph_update;
        let format = self.params.extraction_format;
        let id = match format {
            ExtractionFormat::Paper => PromptId::Extract,
            ExtractionFormat::Compact => PromptId::ExtractCompact,
        };
        let p = self
            .prompts
            .render(id, &[("summary", summary), ("segment", &seg.text)])?;
        let decoding = Decoding {
            max_tokens: if self.params.extraction_max_tokens == 0 {
                2048
            } else {
                self.params.extraction_max_tokens
            },
            frequency_penalty: self.params.extraction_frequency_penalty,
            cut_repeats: self.params.extraction_cut_repeats,
            // Only a looping triple list is cut: the entity list is bounded by its schema, and
            // a cut there would lose the triples written after it.
            cut_repeats_in: Some("triples"),
        };
        let (messages, schema) = (
            conversation(&p),
            extract_schema(format, self.params.extraction_max_entities),
        );
        let asked = match format {
            ExtractionFormat::Paper => self
                .llm
                .chat_json_with::<ExtractReply>("extract", messages, schema, Some(decoding))
                .await
                .map(|r| (r.value, r.reply.was_cut_at_repeat())),
            ExtractionFormat::Compact => self
                .llm
                .chat_json_with::<CompactReply>("extract", messages, schema, Some(decoding))
                .await
                .map(|r| (r.value.into(), r.reply.was_cut_at_repeat())),
        };
        match asked {
            Ok((reply, cut)) => {
                out.cut_at_repeat = cut;
                // The no-open-entity ablation keeps the schema extractor's entities only.
                if self.params.open_entity {
                    self.take_entities(seg, &lower, reply.entities, Source::Llm, &mut out);
                }
                out.relations.extend(
                    reply
                        .triples
                        .into_iter()
                        .map(|r| raw_relation(seg.index, r.into_relation())),
                );
                if with_questions {
                    for q in reply.unanswered_questions {
                        let (text, relations, entities) = match q {
                            QuestionItem::Full {
                                question,
                                triples,
                                entities,
                            } => (question, triples, entities),
                            QuestionItem::Text(t) => (t, Vec::new(), Vec::new()),
                        };
                        if text.trim().is_empty() {
                            continue;
                        }
                        let mut brought = SegmentOut::default();
                        if self.params.open_entity {
                            self.take_entities(seg, &lower, entities, Source::Update, &mut brought);
                        }
                        out.dropped_entities += brought.dropped_entities;
                        out.proposed.push(Proposed {
                            text,
                            entities: brought.entities,
                            relations: relations
                                .into_iter()
                                .map(|r| raw_relation(seg.index, r.into_relation()))
                                .collect(),
                        });
                    }
                }
            }
            Err(e) => out.failures.push(failure(Some(seg.index), "extract", e)),
        }
        self.progress.inc(1);
        Ok(out)
    }

    /// Keeps the LLM's entities that occur in the segment (the prompt asks for names "inside the
    /// triple quote"; anything else is a hallucination and is counted as dropped).
    fn take_entities(
        &self,
        seg: &Segment,
        lower: &str,
        items: Vec<EntityItem>,
        source: Source,
        out: &mut SegmentOut,
    ) {
        for item in items {
            let (name, kind) = match item {
                EntityItem::Full { name, kind } => (name, kind),
                EntityItem::Name(name) => (name, String::new()),
                EntityItem::Pair(pair) => {
                    let mut parts = pair.into_iter();
                    let name = parts.next().unwrap_or_default();
                    (name, parts.next().unwrap_or_default())
                }
            };
            let name = clean_name(&name);
            if name.is_empty() {
                continue;
            }
            if occurs_in(lower, &name) {
                out.entities.push(RawEntity {
                    segment: seg.index,
                    name,
                    kind: kind_of(&kind),
                    source,
                });
            } else {
                out.dropped_entities += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entity_list_is_capped_by_the_option_in_both_formats() {
        for format in [ExtractionFormat::Paper, ExtractionFormat::Compact] {
            let s = extract_schema(format, 8).unwrap();
            assert_eq!(
                s.schema["properties"]["entities"]["maxItems"], 8,
                "{format:?}"
            );
        }
        let former = extract_schema(ExtractionFormat::Paper, 25).unwrap();
        assert_eq!(former.schema["properties"]["entities"]["maxItems"], 25);
        assert_eq!(former.schema["properties"]["triples"]["maxItems"], 30);
    }

    #[test]
    fn names_are_cleaned() {
        assert_eq!(
            clean_name(" \"Clara Hoffmann (1851-1923)\" "),
            "Clara Hoffmann"
        );
        assert_eq!(clean_name("(1851)"), "(1851)");
        assert_eq!(clean_name("Aare"), "Aare");
    }

    #[test]
    fn a_triple_is_a_relation_with_a_sentence() {
        let r = TripleItem::Triple(vec![
            "Karl Weber".into(),
            "was born in".into(),
            "Lyon".into(),
        ])
        .into_relation();
        assert_eq!(
            (r.head.as_str(), r.tail.as_str(), r.description.as_str()),
            ("Karl Weber", "Lyon", "Karl Weber was born in Lyon.")
        );
        let short = TripleItem::Triple(vec!["Karl Weber".into()]).into_relation();
        assert!(
            short.description.is_empty(),
            "counted as an empty description"
        );
    }
}
