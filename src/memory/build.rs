//! Memory construction (QRMeM section 2.1): segment, summarise, extract per segment (entities,
//! relations, questions, graph update), then combine globally (disambiguation, relation merge,
//! entity-segment links) into one graph.
//!
//! LLM failures never abort a build: each is recorded as a [`StepFailure`] of its step and the
//! build goes on with what the other steps produced.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use futures::stream::{self, StreamExt};
use indicatif::ProgressBar;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::merge::{cluster, english_stemmer, normalize};
use super::schema;
use super::types::{
    BuildParams, BuildStats, Entity, GeneratedQuestion, Memory, Relation, RelationDrops, Source,
    StepFailure, FORMAT, VERSION,
};
use crate::config::Config;
use crate::llm::{JsonSchema, Message, Service};
use crate::prompts::{PromptError, PromptId, Prompts};
use crate::text::{count_tokens, segment, QuestionPool, Segment};

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
        }
    }
}

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

/// What one segment produced.
#[derive(Debug, Default)]
struct SegmentOut {
    entities: Vec<RawEntity>,
    relations: Vec<RawRelation>,
    proposed_questions: Vec<String>,
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
struct EntitiesReply {
    #[serde(default)]
    entities: Vec<EntityItem>,
}

#[derive(Deserialize)]
struct RelationItem {
    head: String,
    tail: String,
    description: String,
}

#[derive(Deserialize)]
struct RelationsReply {
    #[serde(default)]
    relations: Vec<RelationItem>,
}

#[derive(Deserialize)]
struct QuestionsReply {
    #[serde(default)]
    questions: Vec<String>,
}

#[derive(Deserialize)]
struct UpdateReply {
    #[serde(default)]
    entities: Vec<EntityItem>,
    #[serde(default)]
    relations: Vec<RelationItem>,
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

fn relation_schema(max: usize) -> serde_json::Value {
    json!({
        "type": "array", "maxItems": max,
        "items": {"type": "object", "properties": {
            "head": {"type": "string", "minLength": 1, "maxLength": 80},
            "tail": {"type": "string", "minLength": 1, "maxLength": 80},
            "description": {"type": "string", "minLength": 3, "maxLength": 300}
        }, "required": ["head", "tail", "description"]}
    })
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

fn entity_lines(entities: &[RawEntity]) -> String {
    let mut seen = BTreeSet::new();
    let mut s = String::new();
    for e in entities {
        if seen.insert(e.name.to_lowercase()) {
            s.push_str(&format!("- {} ({})\n", e.name, e.kind));
        }
    }
    if s.is_empty() {
        s.push_str("(none)\n");
    }
    s
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

/// Whether `needle` occurs in `haystack` as whole words, ignoring case.
fn occurs_in(haystack_lower: &str, needle: &str) -> bool {
    let n = needle.trim().to_lowercase();
    if n.is_empty() {
        return false;
    }
    let mut from = 0;
    while let Some(pos) = haystack_lower[from..].find(&n) {
        let s = from + pos;
        let e = s + n.len();
        let before_ok = haystack_lower[..s]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric());
        let after_ok = haystack_lower[e..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_alphanumeric());
        if before_ok && after_ok {
            return true;
        }
        from = s + n.chars().next().map(char::len_utf8).unwrap_or(1);
    }
    false
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
        let phases = if self.params.graph_update { 2 } else { 1 };
        self.progress
            .set_length((segments.len() * phases + 1) as u64);
        self.progress.set_message("summary");
        let mut failures = Vec::new();
        let summary = self.summarize(&segments, &mut failures).await?;

        // Phase 1, per segment: entities, relations, proposed questions.
        self.progress.set_message("entities, relations, questions");
        let mut results: Vec<(usize, Result<SegmentOut, BuildError>)> =
            stream::iter(segments.iter())
                .map(|seg| async { (seg.index, self.extract(seg, &summary, question).await) })
                .buffer_unordered(self.concurrency)
                .collect()
                .await;
        results.sort_by_key(|(i, _)| *i);
        let mut outs: Vec<SegmentOut> = results
            .into_iter()
            .map(|(_, o)| o)
            .collect::<Result<_, _>>()?;

        // The question pool, in segment order so the result does not depend on timing.
        let mut stats = BuildStats::default();
        let mut pool = QuestionPool::new(self.params.question_rouge_threshold);
        let mut accepted: Vec<Vec<String>> = vec![Vec::new(); segments.len()];
        for (i, o) in outs.iter().enumerate() {
            for q in &o.proposed_questions {
                if pool.offer(q) {
                    accepted[i].push(q.trim().to_string());
                } else {
                    stats.rejected_questions += 1;
                }
            }
        }

        // Phase 2: the graph update from each segment's admitted questions.
        if self.params.graph_update {
            self.progress.set_message("graph update");
            let updates: Vec<(usize, Result<SegmentOut, BuildError>)> =
                stream::iter(segments.iter())
                    .map(|seg| {
                        let current = outs[seg.index].entities.clone();
                        let qs = accepted[seg.index].clone();
                        let summary = &summary;
                        async move { (seg.index, self.update(seg, summary, &current, &qs).await) }
                    })
                    .buffer_unordered(self.concurrency)
                    .collect()
                    .await;
            for (i, u) in updates {
                let u = u?;
                let o = &mut outs[i];
                o.entities.extend(u.entities);
                o.relations.extend(u.relations);
                o.failures.extend(u.failures);
                o.dropped_entities += u.dropped_entities;
            }
        }

        self.progress.set_message("merge");
        let questions: Vec<GeneratedQuestion> = accepted
            .iter()
            .enumerate()
            .flat_map(|(segment, qs)| {
                qs.iter().map(move |q| GeneratedQuestion {
                    segment,
                    text: q.clone(),
                })
            })
            .collect();
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

    /// The document summary T, map-reduce when the document exceeds one call's input budget.
    async fn summarize(
        &self,
        segments: &[Segment],
        failures: &mut Vec<StepFailure>,
    ) -> Result<String, BuildError> {
        let mut parts: Vec<String> = segments.iter().map(|s| s.text.clone()).collect();
        let budget = self.params.summary_input_tokens;
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
                            schema("summary", json!({"summary": {"type": "string", "minLength": 1, "maxLength": 2000}}), &["summary"]),
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

    /// The shared head of every per-segment prompt: the document summary, then the segment.
    /// The four per-segment prompts (entities, relations, questions, update) start with exactly
    /// this text, so an OpenAI-compatible server with a prompt cache (llama.cpp's `cache_prompt`)
    /// computes it once per segment instead of four times.
    fn segment_context(&self, seg: &Segment, summary: &str) -> Result<String, BuildError> {
        Ok(self.prompts.render(
            PromptId::SegmentContext,
            &[("summary", summary), ("segment", &seg.text)],
        )?)
    }

    /// `context` (from [`Self::segment_context`], already rendered) followed by the task prompt.
    fn segment_prompt(
        &self,
        context: &str,
        id: PromptId,
        values: &[(&str, &str)],
    ) -> Result<String, BuildError> {
        let task = self.prompts.render(id, values)?;
        Ok(format!("{context}{task}"))
    }

    /// Phase 1 for one segment.
    async fn extract(
        &self,
        seg: &Segment,
        summary: &str,
        question: Option<&str>,
    ) -> Result<SegmentOut, BuildError> {
        let mut out = SegmentOut::default();
        let context = self.segment_context(seg, summary)?;
        let lower = seg.text.to_lowercase();
        for e in schema::extract(&seg.text) {
            out.entities.push(RawEntity {
                segment: seg.index,
                name: e.name,
                kind: e.kind.to_string(),
                source: Source::Schema,
            });
        }
        if self.params.open_entity {
            let p = self.segment_prompt(
                &context,
                PromptId::Entities,
                &[("question", question_text(question))],
            )?;
            match self
                .llm
                .chat_json::<EntitiesReply>(
                    "entities",
                    vec![Message::user(p)],
                    schema(
                        "entities",
                        json!({"entities": entity_schema(30)}),
                        &["entities"],
                    ),
                )
                .await
            {
                Ok(r) => self.take_entities(seg, &lower, r.value.entities, Source::Llm, &mut out),
                Err(e) => out.failures.push(failure(Some(seg.index), "entities", e)),
            }
        }
        self.progress.tick();
        let entities = entity_lines(&out.entities);
        let p = self.segment_prompt(
            &context,
            PromptId::Relations,
            &[
                ("question", question_text(question)),
                ("entities", &entities),
            ],
        )?;
        match self
            .llm
            .chat_json::<RelationsReply>(
                "relations",
                vec![Message::user(p)],
                schema(
                    "relations",
                    json!({"relations": relation_schema(30)}),
                    &["relations"],
                ),
            )
            .await
        {
            Ok(r) => out.relations.extend(
                r.value
                    .relations
                    .into_iter()
                    .map(|r| raw_relation(seg.index, r)),
            ),
            Err(e) => out.failures.push(failure(Some(seg.index), "relations", e)),
        }
        if self.params.graph_update {
            let relations = relation_lines(&out.relations);
            let entities = entity_lines(&out.entities);
            let p = self.segment_prompt(
                &context,
                PromptId::Questions,
                &[("entities", &entities), ("relations", &relations)],
            )?;
            match self
                .llm
                .chat_json::<QuestionsReply>(
                    "questions",
                    vec![Message::user(p)],
                    schema(
                        "questions",
                        json!({"questions": {"type": "array", "maxItems": 5, "items": {"type": "string", "minLength": 5, "maxLength": 200}}}),
                        &["questions"],
                    ),
                )
                .await
            {
                Ok(r) => out.proposed_questions = r.value.questions,
                Err(e) => out.failures.push(failure(Some(seg.index), "questions", e)),
            }
        }
        self.progress.inc(1);
        Ok(out)
    }

    /// Phase 2 for one segment: entities and relations supplemented from its questions.
    async fn update(
        &self,
        seg: &Segment,
        summary: &str,
        current: &[RawEntity],
        questions: &[String],
    ) -> Result<SegmentOut, BuildError> {
        let mut out = SegmentOut::default();
        if questions.is_empty() {
            self.progress.inc(1);
            return Ok(out);
        }
        let qs: String = questions.iter().map(|q| format!("- {q}\n")).collect();
        let p = self.segment_prompt(
            &self.segment_context(seg, summary)?,
            PromptId::Update,
            &[("entities", &entity_lines(current)), ("questions", &qs)],
        )?;
        match self
            .llm
            .chat_json::<UpdateReply>(
                "update",
                vec![Message::user(p)],
                schema(
                    "update",
                    json!({"entities": entity_schema(15), "relations": relation_schema(15)}),
                    &["entities", "relations"],
                ),
            )
            .await
        {
            Ok(r) => {
                let lower = seg.text.to_lowercase();
                self.take_entities(seg, &lower, r.value.entities, Source::Update, &mut out);
                out.relations.extend(
                    r.value
                        .relations
                        .into_iter()
                        .map(|r| raw_relation(seg.index, r)),
                );
            }
            Err(e) => out.failures.push(failure(Some(seg.index), "update", e)),
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

    /// Global combination: disambiguation, entity-segment links, relation merge, the graph.
    async fn combine(
        &self,
        segments: &[Segment],
        summary: &str,
        question: Option<&str>,
        outs: &mut [SegmentOut],
        stats: &mut BuildStats,
        failures: &mut Vec<StepFailure>,
    ) -> Result<StableDiGraph<Entity, Relation>, BuildError> {
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
        let mut node_of_rep: HashMap<usize, NodeIndex> = HashMap::new();
        let stemmer = english_stemmer();
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
            };
            let node = graph.add_node(entity);
            node_of_rep.insert(*r, node);
            for &i in idx {
                by_surface.entry(raw[i].name.to_lowercase()).or_insert(node);
                by_key
                    .entry(normalize(&raw[i].name, &stemmer))
                    .or_insert(node);
            }
        }
        link_segments(&mut graph, segments);

        // Relations: resolve both ends, group by entity pair.
        let resolve = |name: &str| -> Option<NodeIndex> {
            let name = clean_name(name);
            by_surface
                .get(&name.to_lowercase())
                .copied()
                .or_else(|| by_key.get(&normalize(&name, &stemmer)).copied())
        };
        let mut groups: BTreeMap<Pair, Vec<Resolved>> = BTreeMap::new();
        let mut drops = RelationDrops::default();
        for r in outs.iter().flat_map(|o| o.relations.iter()) {
            stats.raw_relations += 1;
            match (resolve(&r.head), resolve(&r.tail)) {
                (Some(h), Some(t)) if h != t && !r.description.is_empty() => {
                    let key = if h < t { (h, t) } else { (t, h) };
                    groups.entry(key).or_default().push((h, t, r.clone()));
                }
                (Some(h), Some(t)) => {
                    stats.dropped_relations += 1;
                    if h == t {
                        drops.self_loop += 1;
                    } else {
                        drops.empty_description += 1;
                    }
                }
                _ => {
                    stats.dropped_relations += 1;
                    drops.unresolved_end += 1;
                }
            }
        }
        stats.relation_drops = Some(drops);
        // Pairs with relations from two or more segments go through Relation Update.
        let mut plans: Vec<(Pair, PerSegment)> = Vec::new();
        for (key, rels) in &groups {
            let mut by_seg: BTreeMap<usize, Vec<RawRelation>> = BTreeMap::new();
            for (_, _, r) in rels {
                by_seg.entry(r.segment).or_default().push(r.clone());
            }
            if by_seg.len() >= 2 && plans.len() < self.params.max_relation_updates {
                plans.push((*key, by_seg.into_iter().collect()));
            }
        }
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
/// (one Aho-Corasick pass per segment over all mentions: linear in the text).
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
    for seg in segments {
        let text = &seg.text;
        for m in ac.find_overlapping_iter(text) {
            let before_ok = text[..m.start()]
                .chars()
                .next_back()
                .is_none_or(|c| !c.is_alphanumeric());
            let after_ok = text[m.end()..]
                .chars()
                .next()
                .is_none_or(|c| !c.is_alphanumeric());
            if before_ok && after_ok {
                let node = owner[m.pattern().as_usize()];
                graph[node].segments.insert(seg.index);
            }
        }
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
        });
        let segments = segment(
            "Arthur painted. Some artist came.\n\nModern art, said Arthur.\n\nArt-deco walls.",
            8,
        );
        assert_eq!(segments.len(), 3, "{segments:?}");
        link_segments(&mut g, &segments);
        // "Arthur" and "artist" are not "Art"; "art," and "Art-" are.
        assert_eq!(g[art].segments, BTreeSet::from([1, 2]));
    }

    #[test]
    fn whole_word_occurrence() {
        assert!(occurs_in("the velden bridge opened", "Velden Bridge"));
        assert!(!occurs_in("the article", "art"));
        assert!(occurs_in("art, and more", "art"));
        assert!(!occurs_in("x", ""));
    }
}
