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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use futures::stream::{self, StreamExt};
use indicatif::ProgressBar;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use rayon::prelude::*;
use rust_stemmers::Stemmer;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::diagnostics::OVER_LINKED_SHARE;
use super::merge::{cluster, english_stemmer, normalize, same_entity};
use super::schema;
use super::types::{
    BuildParams, BuildStats, Entity, GeneratedQuestion, Memory, Relation, RelationDrops, Source,
    StepFailure, FORMAT, VERSION,
};
use crate::config::Config;
use crate::llm::{Decoding, JsonSchema, Message, Service};
use crate::prompts::{PromptError, PromptId, Prompts};
use crate::text::{at_word_boundaries, count_tokens, occurs_in, segment, QuestionPool, Segment};

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
        }
    }
}

/// Relation Update calls per segment at most (with `max_relation_updates`): with the one joint
/// call per segment and the summary, a build stays under 1.5 calls per segment.
const RELATION_UPDATES_PER_SEGMENT: usize = 4;

/// A memory of fewer segments marks no entity generic: a fifth of three segments is one.
const GENERIC_MIN_SEGMENTS: usize = 5;

/// An unordered entity pair (smaller index first): the key relations are grouped by.
type Pair = (NodeIndex, NodeIndex);

/// A relation with its resolved (head, tail) nodes.
type Resolved = (NodeIndex, NodeIndex, RawRelation);

/// One pair's relations, grouped by the segment they came from (in segment order).
type PerSegment = Vec<(usize, Vec<RawRelation>)>;

/// The outcome of Relation Update for one pair.
struct MergedRelation {
    description: String,
    helper_questions: Vec<String>,
    calls: usize,
}

/// An entity occurrence as extracted from one segment.
#[derive(Clone, Debug)]
struct RawEntity {
    segment: usize,
    name: String,
    kind: String,
    source: Source,
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
}

#[derive(Deserialize)]
#[serde(untagged)]
enum EntityItem {
    Full {
        name: String,
        #[serde(default, rename = "type")]
        kind: String,
    },
    Name(String),
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

#[derive(Deserialize)]
struct SummaryReply {
    summary: String,
}

#[derive(Deserialize)]
struct RelationUpdateReply {
    #[serde(default)]
    questions: Vec<String>,
    description: String,
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

/// The joint reply's schema: entities and triples, and (with the graph update) the questions
/// with their triples. A server that follows a JSON schema writes an object's keys in the
/// schema's order, which is the `required` list's (`JsonSchema::as_sent`): the paper's
/// (entities, then relations, then questions). The names sort the same way, so the cache keys
/// of the committed builds did not change when the sent order became the `required` order.
fn extract_schema(questions: bool) -> Option<JsonSchema> {
    let mut properties = json!({
        "entities": entity_schema(25),
        "triples": triple_schema(30),
    });
    let mut required = vec!["entities", "triples"];
    if questions {
        properties["unanswered_questions"] = json!({
            "type": "array", "maxItems": 3,
            "items": {"type": "object", "properties": {
                "question": {"type": "string", "minLength": 5, "maxLength": 200},
                "triples": triple_schema(3)
            }, "required": ["question", "triples"]}
        });
        required.push("unanswered_questions");
    }
    schema("extract", properties, &required)
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

fn raw_relation(segment: usize, r: RelationItem) -> RawRelation {
    RawRelation {
        segment,
        head: r.head.trim().to_string(),
        tail: r.tail.trim().to_string(),
        description: r.description.trim().to_string(),
    }
}

fn relation_lines<'a>(relations: impl IntoIterator<Item = &'a RawRelation>) -> String {
    let s: String = relations
        .into_iter()
        .map(|r| format!("- {} -> {}: {}\n", r.head, r.tail, r.description))
        .collect();
    if s.is_empty() {
        "(none)\n".to_string()
    } else {
        s
    }
}

fn question_text(question: Option<&str>) -> &str {
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
fn clean_name(name: &str) -> String {
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

/// A segment's paragraphs, lower-cased, for the support check: its lines, a short line without
/// a full stop (a title) joined to the next, layout labels left out.
fn paragraphs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || schema::is_layout_label(l) {
            if !pending.is_empty() {
                out.push(std::mem::take(&mut pending));
            }
            continue;
        }
        if !pending.is_empty() {
            pending.push(' ');
        }
        pending.push_str(&l.to_lowercase());
        let title = l.split_whitespace().count() <= 10 && !l.ends_with(['.', '!', '?', '"']);
        if !title {
            out.push(std::mem::take(&mut pending));
        }
    }
    if !pending.is_empty() {
        out.push(pending);
    }
    out
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
fn resolve_segment(
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
fn unique(relations: &[RawRelation]) -> Vec<&RawRelation> {
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

/// The opening of each line of a segment (its first sentence, at most 30 words), up to
/// `budget` tokens: what the summary reads of the segment. Layout labels are skipped.
fn skim(segment: &Segment, budget: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    for line in segment.text.lines() {
        let line = line.trim();
        if line.is_empty() || schema::is_layout_label(line) {
            continue;
        }
        let end = line
            .char_indices()
            .find(|&(i, c)| matches!(c, '.' | '!' | '?') && line[i + 1..].starts_with(' ') && i > 3)
            .map_or(line.len(), |(i, _)| i + 1);
        let first: String = line[..end]
            .split_whitespace()
            .take(30)
            .collect::<Vec<_>>()
            .join(" ");
        let t = count_tokens(&first);
        if used > 0 && used + t > budget {
            break;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&first);
        used += t;
    }
    out
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
        let mut stats = BuildStats::default();
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
        })
    }

    /// The document summary T, from the opening lines of every segment (a skim of about one
    /// call's input budget), map-reduce when even the skim exceeds that budget: the summary
    /// covers the whole document and costs about 0.25 prompt tokens per document token.
    async fn summarize(
        &self,
        segments: &[Segment],
        failures: &mut Vec<StepFailure>,
    ) -> Result<String, BuildError> {
        let budget = self.params.summary_input_tokens;
        let per_segment = (budget * 9 / 10 / segments.len().max(1)).clamp(24, 160);
        let mut parts: Vec<String> = segments
            .par_iter()
            .map(|s| skim(s, per_segment))
            .filter(|s| !s.is_empty())
            .collect();
        for _round in 0..8 {
            // Group consecutive parts up to the budget.
            let mut groups: Vec<String> = Vec::new();
            let mut cur = String::new();
            let mut cur_tokens = 0;
            for p in &parts {
                let t = count_tokens(p);
                if !cur.is_empty() && cur_tokens + t > budget {
                    groups.push(std::mem::take(&mut cur));
                    cur_tokens = 0;
                }
                if !cur.is_empty() {
                    cur.push_str("\n\n");
                }
                cur.push_str(p);
                cur_tokens += t;
            }
            if !cur.is_empty() {
                groups.push(cur);
            }
            let single = groups.len() == 1;
            let prompts: Vec<String> = groups
                .iter()
                .map(|g| self.prompts.render(PromptId::Summary, &[("context", g)]))
                .collect::<Result<_, _>>()?;
            let results: Vec<(usize, Result<String, String>)> = stream::iter(prompts.into_iter().enumerate())
                .map(|(i, p)| async move {
                    let r = self
                        .llm
                        .chat_json::<SummaryReply>(
                            "summary",
                            vec![Message::user(p)],
                            schema("summary", json!({"summary": {"type": "string", "minLength": 1, "maxLength": 700}}), &["summary"]),
                        )
                        .await
                        .map(|s| s.value.summary.trim().to_string())
                        .map_err(|e| e.to_string());
                    (i, r)
                })
                .buffer_unordered(self.concurrency)
                .collect()
                .await;
            let mut results = results;
            results.sort_by_key(|(i, _)| *i);
            let mut next = Vec::new();
            for (_, r) in results {
                match r {
                    Ok(s) if !s.is_empty() => next.push(s),
                    Ok(_) => failures.push(failure(None, "summary", "the summary was empty")),
                    Err(e) => failures.push(failure(None, "summary", e)),
                }
            }
            if single || next.len() <= 1 {
                return Ok(next.into_iter().next().unwrap_or_default());
            }
            parts = next;
        }
        Ok(parts.join("\n"))
    }

    /// The joint extraction of one segment: its schema entities (`found`), and one call for
    /// its entities, relations and (with the graph update) questions. The question the memory
    /// is oriented to is not shown: with it, the 0.5B model wrote the question's entities into
    /// segments that never name them and extracted little else (ARCHITECTURE.md, Deviations:
    /// query orientation of the extraction); the Relation Update prompt shows it, and the memory
    /// records it.
    async fn extract(
        &self,
        seg: &Segment,
        summary: &str,
        found: Vec<schema::SchemaEntity>,
    ) -> Result<SegmentOut, BuildError> {
        let mut out = SegmentOut {
            entities: found
                .into_iter()
                .map(|e| RawEntity {
                    segment: seg.index,
                    name: e.name,
                    kind: e.kind.to_string(),
                    source: Source::Schema,
                })
                .collect(),
            ..SegmentOut::default()
        };
        let lower = seg.text.to_lowercase();
        let with_questions = self.params.graph_update;
        let id = if with_questions {
            PromptId::Extract
        } else {
            PromptId::ExtractNoQuestions
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
        };
        match self
            .llm
            .chat_json_with::<ExtractReply>(
                "extract",
                conversation(&p),
                extract_schema(with_questions),
                Some(decoding),
            )
            .await
        {
            Ok(r) => {
                let reply = r.value;
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
        // Relation ends, per segment on rayon's pool: each becomes an entity's surface name.
        let stemmer = english_stemmer();
        let mut global: HashMap<Vec<String>, String> = HashMap::new();
        for e in outs.iter().flat_map(|o| o.entities.iter()) {
            let key = normalize(&e.name, &stemmer);
            if !key.is_empty() {
                global.entry(key).or_insert_with(|| e.name.clone());
            }
        }
        let threshold = self.params.entity_similarity;
        let allow_new = self.params.open_entity;
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

        let raw: Vec<RawEntity> = outs
            .iter()
            .flat_map(|o| o.entities.iter().cloned())
            .collect();
        stats.raw_entities = raw.len();
        stats.dropped_entities = outs.iter().map(|o| o.dropped_entities).sum();
        let names: Vec<String> = raw.iter().map(|e| e.name.clone()).collect();
        let (rep, merges) = cluster(&names, self.params.entity_similarity);
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
        link_segments(&mut graph, segments);
        mark_generic(&mut graph, segments.len());

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
        stats.dropped_relations =
            drops.unresolved_end + drops.self_loop + drops.empty_description + drops.unsupported;
        stats.relation_drops = Some(drops);
        // Pairs with relations from two or more segments go through Relation Update, those
        // spread over the most segments first, at most one per RELATION_UPDATES_PER_SEGMENT
        // segments (and `max_relation_updates`); the others join their descriptions.
        let mut plans: Vec<(Pair, PerSegment)> = Vec::new();
        for (key, rels) in &groups {
            let mut by_seg: BTreeMap<usize, Vec<RawRelation>> = BTreeMap::new();
            for (_, _, r) in rels {
                by_seg.entry(r.segment).or_default().push(r.clone());
            }
            if by_seg.len() >= 2 {
                plans.push((*key, by_seg.into_iter().collect()));
            }
        }
        plans.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
        plans.truncate(
            self.params
                .max_relation_updates
                .min(segments.len().div_ceil(RELATION_UPDATES_PER_SEGMENT)),
        );
        let merged: Vec<(Pair, Result<MergedRelation, String>)> = stream::iter(plans)
            .map(|(key, per_seg)| async move {
                (
                    key,
                    self.merge_relations(segments, summary, question, &per_seg)
                        .await,
                )
            })
            .buffer_unordered(self.concurrency)
            .collect()
            .await;
        let mut merged: HashMap<Pair, Result<MergedRelation, String>> =
            merged.into_iter().collect();
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
        Ok(graph)
    }

    /// Folds the relations of one entity pair, segment by segment, with the Relation Update
    /// prompt, giving the merged description, the helper questions Q_s and the calls made.
    async fn merge_relations(
        &self,
        segments: &[Segment],
        summary: &str,
        question: Option<&str>,
        per_seg: &[(usize, Vec<RawRelation>)],
    ) -> Result<MergedRelation, String> {
        let Some((first_seg, first)) = per_seg.first() else {
            return Err("no relations".into());
        };
        let mut acc_text = segments
            .get(*first_seg)
            .map(|s| s.text.clone())
            .unwrap_or_default();
        let mut acc_rel = relation_lines(first);
        let mut description = String::new();
        let mut helper = Vec::new();
        let mut calls = 0;
        for (seg, rels) in &per_seg[1..] {
            let seg_text = segments
                .get(*seg)
                .map(|s| s.text.as_str())
                .unwrap_or_default();
            let p = self
                .prompts
                .render(
                    PromptId::RelationUpdate,
                    &[
                        ("question", question_text(question)),
                        ("summary", summary),
                        ("segment1", &acc_text),
                        ("relations1", &acc_rel),
                        ("segment2", seg_text),
                        ("relations2", &relation_lines(rels)),
                    ],
                )
                .map_err(|e| e.to_string())?;
            let r = self
                .llm
                .chat_json::<RelationUpdateReply>(
                    "merge",
                    vec![Message::user(p)],
                    schema(
                        "relation_update",
                        json!({
                            "questions": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 200}},
                            "description": {"type": "string", "minLength": 3, "maxLength": 400}
                        }),
                        &["questions", "description"],
                    ),
                )
                .await
                .map_err(|e| e.to_string())?;
            calls += 1;
            description = r.value.description.trim().to_string();
            helper.extend(
                r.value
                    .questions
                    .into_iter()
                    .map(|q| q.trim().to_string())
                    .filter(|q| !q.is_empty()),
            );
            // The merged relation stands for both segments in the next fold; keep the newer
            // segment's text so the prompt stays within one window.
            acc_text = seg_text.to_string();
            acc_rel = format!("- {description}\n");
        }
        Ok(MergedRelation {
            description,
            helper_questions: helper,
            calls,
        })
    }
}

/// Adds to each entity every segment whose text contains one of its mentions as a whole word
/// (one Aho-Corasick pass per segment over all mentions, segments on rayon's pool: linear in
/// the text). A mention of several words matches in any case; a one-word mention only as
/// written ("Bern" is not "bern", "Art" is not "art"), since a lone word in another case is
/// most often another word.
fn link_segments(graph: &mut StableDiGraph<Entity, Relation>, segments: &[Segment]) {
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

/// Marks generic every entity linked to more than [`OVER_LINKED_SHARE`] of the segments, in a
/// memory of [`GENERIC_MIN_SEGMENTS`] or more.
fn mark_generic(graph: &mut StableDiGraph<Entity, Relation>, segments: usize) {
    if segments < GENERIC_MIN_SEGMENTS {
        return;
    }
    let limit = OVER_LINKED_SHARE * segments as f64;
    for e in graph.node_weights_mut() {
        e.generic = e.segments.len() as f64 > limit;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn raw(segment: usize, name: &str, source: Source) -> RawEntity {
        RawEntity {
            segment,
            name: name.into(),
            kind: "other".into(),
            source,
        }
    }

    fn rel(head: &str, tail: &str, description: &str) -> RawRelation {
        RawRelation {
            segment: 0,
            head: head.into(),
            tail: tail.into(),
            description: description.into(),
        }
    }

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

    #[test]
    fn the_skim_reads_every_line_opening_and_skips_labels() {
        let seg = segment(
            "Passage 3:\nKarl Weber\nKarl Weber was a painter from Lyon. He moved to Paris in \
             1901 and painted bridges.\nPassage 4:\nAare\nThe Aare is a river. It is long.",
            1000,
        )
        .remove(0);
        let s = skim(&seg, 200);
        assert_eq!(
            s,
            "Karl Weber\nKarl Weber was a painter from Lyon.\nAare\nThe Aare is a river."
        );
        // A small budget keeps the first lines only.
        assert_eq!(skim(&seg, 3), "Karl Weber");
    }
}
