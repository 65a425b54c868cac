//! Memory construction (QRMeM section 2.1): segment, summarise, extract per segment (entities,
//! relations and questions in one joint call), admit the questions to the pool in segment order
//! (the graph update keeps what an admitted question brought), then combine globally (relation
//! ends resolved to entities, disambiguation, entity-segment links, Relation Update) into one
//! graph.
//!
//! LLM failures never abort a build: each is recorded as a [`StepFailure`] of its step and the
//! build goes on with what the other steps produced.
//!
//! Invariants: a kept relation's two ends are entities of the graph, each named in the relation's
//! segment or resolved to an entity of the document; a relation is dropped only as a self-loop,
//! for an empty description, for an end found nowhere, or as unsupported (both ends named in
//! the segment, in no one paragraph), each counted in [`RelationDrops`]. The CPU stages (schema extraction, end resolution, segment links) run on
//! rayon's pool; their results are put back in segment order, so a build does not depend on
//! timing.

mod assemble;
mod cooccurrence;
mod extract;
mod links;

pub use cooccurrence::build_cooccurrence;
pub use links::is_generic;
pub(crate) use links::link_segments;
mod resolve;
mod summary;
mod update;

use std::time::Instant;

use futures::stream::{self, StreamExt};
use indicatif::ProgressBar;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use rayon::prelude::*;
use serde_json::json;
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::schema;
use super::types::{
    BuildParams, BuildStats, Entity, GeneratedQuestion, Memory, Relation, Source, StepFailure,
    FORMAT, VERSION,
};
use crate::config::Config;
use crate::llm::{JsonSchema, Message, Service};
use crate::prompts::{PromptError, Prompts};
use crate::text::{segment, QuestionPool, Segment};
use links::mark_generic;

#[derive(Debug, Error)]
pub enum BuildError {
    #[error("the document {0} is empty (no text to segment)")]
    EmptyDocument(String),
    #[error(transparent)]
    Prompt(#[from] PromptError),
}

impl BuildParams {
    pub fn from_config(config: &Config) -> Self {
        let m = &config.memory;
        BuildParams {
            segment_tokens: m.segment_tokens,
            question_rouge_threshold: m.question_rouge_threshold,
            entity_similarity: m.entity_similarity,
            graph_update: m.graph_update,
            open_entity: m.open_entity,
            max_relation_updates: m.max_relation_updates,
            // The window, less the reply and the prompt's own instructions.
            summary_input_tokens: config
                .navigate
                .context_window
                .saturating_sub(config.navigate.reply_tokens + 400)
                .max(256),
            extraction_max_tokens: m.extraction_max_tokens,
            extraction_frequency_penalty: m.extraction_frequency_penalty,
            cooccurrence: false,
            extraction_cut_repeats: m.extraction_cut_repeats,
            extraction_format: m.extraction_format,
            extraction_max_entities: m.extraction_max_entities,
        }
    }

    /// These parameters with the extraction options (`extraction_cut_repeats`,
    /// `extraction_format`, `extraction_max_entities`) as every memory built before them had
    /// them: the one list of those options, for the kinds built without the joint extraction
    /// call, the store's match of graphs that differ in them alone, and `inspect`.
    pub fn with_former_extraction(&self) -> Self {
        BuildParams {
            extraction_cut_repeats: 0,
            extraction_format: crate::config::ExtractionFormat::Paper,
            extraction_max_entities: crate::config::FORMER_EXTRACTION_MAX_ENTITIES,
            ..self.clone()
        }
    }
}

/// Relation Update calls per segment at most (with `max_relation_updates`): with the one joint
/// call per segment and the summary, a build stays under 1.5 calls per segment.
const RELATION_UPDATES_PER_SEGMENT: usize = 4;

/// An unordered entity pair (smaller index first): the key relations are grouped by.
type Pair = (NodeIndex, NodeIndex);

/// A relation with its resolved (head, tail) nodes.
type Resolved = (NodeIndex, NodeIndex, RawRelation);

/// One pair's relations, grouped by the segment they came from (in segment order).
type PerSegment = Vec<(usize, Vec<RawRelation>)>;

/// An entity occurrence as extracted from one segment.
#[derive(Clone, Debug)]
struct RawEntity {
    segment: usize,
    name: String,
    kind: String,
    source: Source,
}

impl RawEntity {
    /// The schema extractor's entities of segment `segment`.
    fn schema(segment: usize, found: Vec<schema::SchemaEntity>) -> Vec<RawEntity> {
        found
            .into_iter()
            .map(|e| RawEntity {
                segment,
                name: e.name,
                kind: e.kind.to_string(),
                source: Source::Schema,
            })
            .collect()
    }
}

#[derive(Clone, Debug)]
struct RawRelation {
    segment: usize,
    head: String,
    tail: String,
    description: String,
}

/// A question the joint call proposed, with what it brought to the graph (kept only when the
/// pool admits the question: the paper's graph update from the generated questions).
#[derive(Debug, Default)]
struct Proposed {
    text: String,
    entities: Vec<RawEntity>,
    relations: Vec<RawRelation>,
}

/// What one segment produced.
#[derive(Debug, Default)]
struct SegmentOut {
    entities: Vec<RawEntity>,
    relations: Vec<RawRelation>,
    proposed: Vec<Proposed>,
    failures: Vec<StepFailure>,
    dropped_entities: usize,
    /// The extraction reply was stopped at a repeated list element.
    cut_at_repeat: bool,
}

/// A prompt file split into chat messages at its `### system`, `### user` and `### assistant`
/// lines (a one-shot example is a user turn and the assistant's reply: a small model copies an
/// example written inside the instructions); text without markers is one user message.
fn conversation(text: &str) -> Vec<Message> {
    let mut messages = Vec::new();
    let mut role: Option<&str> = None;
    let mut body = String::new();
    let mut push = |role: Option<&str>, body: &str| {
        let body = body.trim();
        if body.is_empty() {
            return;
        }
        messages.push(match role {
            Some("system") => Message::system(body),
            Some("assistant") => Message::assistant(body),
            _ => Message::user(body),
        });
    };
    for line in text.split_inclusive('\n') {
        let marker = line.trim_end();
        if let Some(r) = marker
            .strip_prefix("### ")
            .filter(|r| matches!(*r, "system" | "user" | "assistant"))
        {
            push(role, &body);
            body.clear();
            role = Some(r);
        } else {
            body.push_str(line);
        }
    }
    push(role, &body);
    messages
}

fn schema(name: &str, properties: serde_json::Value, required: &[&str]) -> Option<JsonSchema> {
    Some(JsonSchema {
        name: name.to_string(),
        schema: json!({"type": "object", "properties": properties, "required": required}),
    })
}

fn failure(segment: Option<usize>, step: &str, error: impl ToString) -> StepFailure {
    StepFailure {
        segment,
        step: step.to_string(),
        error: error.to_string(),
    }
}

/// Builds memories. One builder can build many documents; each build has its own ledger entries
/// in the shared service.
pub struct Builder<'a> {
    llm: &'a Service,
    prompts: &'a Prompts,
    params: BuildParams,
    concurrency: usize,
    progress: ProgressBar,
}

impl<'a> Builder<'a> {
    pub fn new(
        llm: &'a Service,
        prompts: &'a Prompts,
        params: BuildParams,
        concurrency: usize,
    ) -> Self {
        Builder {
            llm,
            prompts,
            params,
            concurrency: concurrency.max(1),
            progress: ProgressBar::hidden(),
        }
    }

    /// Reports progress over segments (and the merge) on this bar.
    pub fn with_progress(mut self, progress: ProgressBar) -> Self {
        self.progress = progress;
        self
    }

    pub async fn build(
        &self,
        document: &str,
        question: Option<&str>,
        name: &str,
    ) -> Result<Memory, BuildError> {
        let started = Instant::now();
        let segments = segment(document, self.params.segment_tokens);
        if segments.iter().all(|s| s.text.trim().is_empty()) {
            return Err(BuildError::EmptyDocument(name.to_string()));
        }
        // Steps: the summary, one per segment, the merge.
        self.progress.set_length((segments.len() + 2) as u64);
        self.progress.set_message("summary");
        let mut failures = Vec::new();
        let summary = self.summarize(&segments, &mut failures).await?;
        self.progress.inc(1);

        // Per segment: the schema extractor (CPU, on rayon's pool), then the joint call.
        self.progress.set_message("extract");
        let found: Vec<Vec<schema::SchemaEntity>> = segments
            .par_iter()
            .map(|s| schema::extract(&s.text))
            .collect();
        let mut results: Vec<(usize, Result<SegmentOut, BuildError>)> =
            stream::iter(segments.iter().zip(found))
                .map(|(seg, found)| async { (seg.index, self.extract(seg, &summary, found).await) })
                .buffer_unordered(self.concurrency)
                .collect()
                .await;
        results.sort_by_key(|(i, _)| *i);
        let mut outs: Vec<SegmentOut> = results
            .into_iter()
            .map(|(_, o)| o)
            .collect::<Result<_, _>>()?;

        // The question pool, in segment order so the result does not depend on timing; an
        // admitted question's entities and relations join its segment's (the graph update).
        let mut stats = BuildStats {
            cut_replies: outs.iter().filter(|o| o.cut_at_repeat).count(),
            ..BuildStats::default()
        };
        let mut pool = QuestionPool::new(self.params.question_rouge_threshold);
        let mut questions: Vec<GeneratedQuestion> = Vec::new();
        for (i, o) in outs.iter_mut().enumerate() {
            for p in std::mem::take(&mut o.proposed) {
                if pool.offer(&p.text) {
                    questions.push(GeneratedQuestion {
                        segment: i,
                        text: p.text.trim().to_string(),
                    });
                    o.entities.extend(p.entities);
                    o.relations.extend(p.relations);
                } else {
                    stats.rejected_questions += 1;
                }
            }
        }

        self.progress.set_message("merge");
        let graph = self
            .combine(
                &segments,
                &summary,
                question,
                &mut outs,
                &mut stats,
                &mut failures,
            )
            .await?;
        for o in &mut outs {
            failures.append(&mut o.failures);
        }
        failures.sort_by(|a, b| a.segment.cmp(&b.segment).then_with(|| a.step.cmp(&b.step)));
        self.progress.inc(1);
        self.progress.finish_and_clear();

        Ok(Memory {
            format: FORMAT.to_string(),
            version: VERSION,
            params: self.params.clone(),
            model: self.llm.model().to_string(),
            question: question.map(str::to_string),
            document_sha256: hex::encode(Sha256::digest(document.as_bytes())),
            document_chars: document.chars().count(),
            summary,
            segments,
            graph,
            questions,
            failures,
            stats,
            ledger: self.llm.ledger().snapshot(),
            build_secs: started.elapsed().as_secs_f64(),
            vectors: None,
            kind: None,
        })
    }

    /// Global combination: relation ends resolved, disambiguation, entity-segment links and
    /// generic marks, relation merge, the graph.
    async fn combine(
        &self,
        segments: &[Segment],
        summary: &str,
        question: Option<&str>,
        outs: &mut [SegmentOut],
        stats: &mut BuildStats,
        failures: &mut Vec<StepFailure>,
    ) -> Result<StableDiGraph<Entity, Relation>, BuildError> {
        let (kept, mut drops) = resolve::resolve_relations(
            segments,
            outs,
            self.params.entity_similarity,
            self.params.open_entity,
            stats,
        );
        let (mut graph, names) = assemble::entities(outs, self.params.entity_similarity, stats);
        link_segments(&mut graph, segments);
        mark_generic(&mut graph, segments.len());
        let groups = assemble::group_relations(kept, &names, &mut drops);
        stats.dropped_relations =
            drops.unresolved_end + drops.self_loop + drops.empty_description + drops.unsupported;
        stats.relation_drops = Some(drops);
        let merged = self
            .update_relations(segments, summary, question, &groups)
            .await;
        assemble::add_edges(&mut graph, groups, merged, stats, failures);
        Ok(graph)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn raw(segment: usize, name: &str, source: Source) -> RawEntity {
        RawEntity {
            segment,
            name: name.into(),
            kind: "other".into(),
            source,
        }
    }

    pub(super) fn rel(head: &str, tail: &str, description: &str) -> RawRelation {
        RawRelation {
            segment: 0,
            head: head.into(),
            tail: tail.into(),
            description: description.into(),
        }
    }

    #[test]
    fn a_prompt_file_becomes_a_conversation() {
        let m = conversation(
            "### system\nBe exact.\n### user\nExample\n### assistant\n{}\n### user\nReal\n",
        );
        let roles: Vec<(crate::llm::Role, &str)> =
            m.iter().map(|m| (m.role, m.content.as_str())).collect();
        use crate::llm::Role::*;
        assert_eq!(
            roles,
            vec![
                (System, "Be exact."),
                (User, "Example"),
                (Assistant, "{}"),
                (User, "Real")
            ]
        );
        assert_eq!(conversation("just text").len(), 1);
    }
}
