//! GARLIC (seed 003, section 3): a hierarchical weighted DAG of Information Points (IPs) and a
//! greedy best-first search whose length the LLM controls.
//!
//! Build: 300-token chunks are the level-1 nodes; each level is cut into batches of consecutive
//! nodes up to the window, each batch is summarised into bullet-point IPs
//! (`prompts/garlic_summary.txt`), and the IPs are the next level's nodes, until one batch makes
//! the top level. An IP i has an edge to every node j of its batch with weight e_ij, summing to 1
//! over j. The paper reads e_ij off the LLM's attention, which an HTTP API does not expose; here
//! e_ij is the IP's embedding similarity to node j (negative values as 0), normalised (see
//! ARCHITECTURE.md, Deviations).
//!
//! Search: the visited set S starts as the top-level nodes. Each round asks "Can this question
//! be answered by the following information?" over the question and S in visit order (a prompt
//! that only grows, so llama.cpp's prompt cache reuses it); after `patience` "Yes" replies (or a
//! full window, or no node left) the same conversation asks for the answer; a search that ends
//! without a "Yes" answers with the shared answer prompt instead. Otherwise the next
//! node is the unvisited one with the highest z_j + s_j, where z = E^T a (a_i: the relevance of
//! visited node i to the question, multiplied by its position with the question first, as the
//! paper normalises attention), and s the query-node similarity; z and s each normalised to sum 1.

use std::collections::BTreeSet;
use std::time::Instant;

use futures::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::answer::{option_letter, with_options, Step, StepKind, Trace, Window};
use crate::embed::{dot, embed_exact, embed_one, EmbedError, Embedder};
use crate::llm::{ChatRequest, LedgerSnapshot, Message, Service};
use crate::memory::StepFailure;
use crate::prompts::{PromptError, PromptId, Prompts};
use crate::text::{count_tokens, segment, truncate_tokens};

pub const FORMAT: &str = "qrmem-garlic";
pub const VERSION: u32 = 1;

#[derive(Debug, Error)]
pub enum GarlicError {
    #[error(transparent)]
    Prompt(#[from] PromptError),
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error("the document {0} is empty")]
    EmptyDocument(String),
    #[error("the question is empty")]
    EmptyQuestion,
    #[error("the answer failed: {0}")]
    Answer(String),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GarlicParams {
    pub chunk_tokens: usize,
    /// Levels above the chunks at most.
    pub max_levels: usize,
    /// "Yes" replies before the search stops (the paper: p = 1).
    pub patience: usize,
    /// Checks at most (a guard; the window usually ends the search first).
    pub max_checks: usize,
}

impl Default for GarlicParams {
    fn default() -> Self {
        GarlicParams {
            chunk_tokens: 300,
            max_levels: 4,
            patience: 1,
            max_checks: 40,
        }
    }
}

/// A node: a chunk (level 1) or an IP, with its weighted edges to the nodes it summarises.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GNode {
    pub level: usize,
    pub text: String,
    /// (child, e_ij); the weights sum to 1.
    pub children: Vec<(usize, f32)>,
    pub vector: Vec<f32>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Garlic {
    pub format: String,
    pub version: u32,
    pub model: String,
    pub embedder: String,
    pub params: GarlicParams,
    pub nodes: Vec<GNode>,
    /// The top-level nodes, in order: the search's start.
    pub top: Vec<usize>,
    pub failures: Vec<StepFailure>,
    pub ledger: LedgerSnapshot,
    pub build_secs: f64,
}

/// What a build needs besides the document.
pub struct GarlicCtx<'a> {
    pub llm: &'a Service,
    pub prompts: &'a Prompts,
    pub embedder: &'a dyn Embedder,
    pub window: Window,
    pub concurrency: usize,
}

/// Bullet points of a summary reply ("* ...", "- ...", "• ...", "1. ...").
pub fn parse_points(reply: &str) -> Vec<String> {
    reply
        .lines()
        .filter_map(|l| {
            let t = l.trim();
            let body = t
                .strip_prefix('*')
                .or_else(|| t.strip_prefix('-'))
                .or_else(|| t.strip_prefix('•'))
                .or_else(|| {
                    let digits = t.chars().take_while(char::is_ascii_digit).count();
                    (digits > 0)
                        .then(|| t[digits..].strip_prefix('.'))
                        .flatten()
                })?;
            let body = body.trim();
            (body.chars().filter(|c| c.is_alphanumeric()).count() >= 3).then(|| body.to_string())
        })
        .collect()
}

/// e_ij: similarities clipped at 0 and normalised to sum 1 (uniform when all are 0).
pub fn edge_weights(ip: &[f32], inputs: &[&[f32]]) -> Vec<f32> {
    let raw: Vec<f32> = inputs.iter().map(|v| dot(ip, v).max(0.0)).collect();
    let sum: f32 = raw.iter().sum();
    if sum > 0.0 {
        raw.iter().map(|x| x / sum).collect()
    } else {
        vec![1.0 / inputs.len().max(1) as f32; inputs.len()]
    }
}

fn normalise(v: &mut [f32]) {
    let sum: f32 = v.iter().sum();
    if sum > 0.0 {
        v.iter_mut().for_each(|x| *x /= sum);
    }
}

impl Garlic {
    pub async fn build(
        ctx: &GarlicCtx<'_>,
        params: GarlicParams,
        document: &str,
        name: &str,
    ) -> Result<Garlic, GarlicError> {
        let started = Instant::now();
        let chunks: Vec<String> = segment(document, params.chunk_tokens)
            .into_iter()
            .map(|s| s.text)
            .filter(|t| !t.trim().is_empty())
            .collect();
        if chunks.is_empty() {
            return Err(GarlicError::EmptyDocument(name.to_string()));
        }
        let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
        let vectors = embed_exact(ctx.embedder, &refs)?;
        let mut g = Garlic {
            format: FORMAT.into(),
            version: VERSION,
            model: ctx.llm.model().to_string(),
            embedder: ctx.embedder.model_id().to_string(),
            params,
            nodes: chunks
                .into_iter()
                .zip(vectors)
                .map(|(text, vector)| GNode {
                    level: 1,
                    text,
                    children: vec![],
                    vector,
                })
                .collect(),
            top: vec![],
            failures: vec![],
            ledger: LedgerSnapshot::default(),
            build_secs: 0.0,
        };
        let overhead = count_tokens(
            &ctx.prompts
                .render(PromptId::GarlicSummary, &[("information", "")])?,
        );
        let budget = ctx.window.prompt_budget().saturating_sub(overhead).max(64);
        let mut level: Vec<usize> = (0..g.nodes.len()).collect();
        for depth in 2..=g.params.max_levels + 1 {
            // Consecutive nodes while they fit.
            let mut batches: Vec<Vec<usize>> = vec![];
            let mut used = 0;
            for &n in &level {
                let t = count_tokens(&g.nodes[n].text) + 1;
                match batches.last_mut() {
                    Some(b) if used + t <= budget => {
                        b.push(n);
                        used += t;
                    }
                    _ => {
                        batches.push(vec![n]);
                        used = t;
                    }
                }
            }
            let texts: Vec<String> = batches
                .iter()
                .map(|b| {
                    let joined = b
                        .iter()
                        .map(|&n| g.nodes[n].text.trim().replace('\n', " "))
                        .collect::<Vec<_>>()
                        .join("\n");
                    truncate_tokens(&joined, budget, false)
                })
                .collect();
            let replies: Vec<Result<Vec<String>, String>> = stream::iter(texts.iter())
                .map(|text| async move {
                    let p = ctx
                        .prompts
                        .render(PromptId::GarlicSummary, &[("information", text)])
                        .map_err(|e| e.to_string())?;
                    let request = ChatRequest {
                        messages: vec![Message::user(p)],
                        sampling: ctx.llm.sampling(),
                        schema: None,
                    };
                    let reply = ctx
                        .llm
                        .chat("garlic_summary", &request)
                        .await
                        .map_err(|e| e.to_string())?;
                    let points = parse_points(&reply.content);
                    if points.is_empty() {
                        Err(format!(
                            "no bullet points in the reply: {}",
                            reply.content.chars().take(200).collect::<String>()
                        ))
                    } else {
                        Ok(points)
                    }
                })
                .buffered(ctx.concurrency.max(1))
                .collect()
                .await;
            let mut next = Vec::new();
            for (b, (batch, reply)) in batches.iter().zip(replies).enumerate() {
                let points = match reply {
                    Ok(p) => p,
                    Err(e) => {
                        ctx.llm.ledger().record_failed_step("garlic_summary");
                        g.failures.push(StepFailure {
                            segment: None,
                            step: "garlic_summary".into(),
                            error: format!(
                                "level {depth}, batch {b}: {e}; the batch's beginning stands in"
                            ),
                        });
                        vec![truncate_tokens(&texts[b], 80, false)]
                    }
                };
                let prefs: Vec<&str> = points.iter().map(String::as_str).collect();
                let vecs = embed_exact(ctx.embedder, &prefs)?;
                for (text, vector) in points.into_iter().zip(vecs) {
                    let inputs: Vec<&[f32]> = batch
                        .iter()
                        .map(|&n| g.nodes[n].vector.as_slice())
                        .collect();
                    let w = edge_weights(&vector, &inputs);
                    g.nodes.push(GNode {
                        level: depth,
                        text,
                        children: batch.iter().copied().zip(w).collect(),
                        vector,
                    });
                    next.push(g.nodes.len() - 1);
                }
            }
            level = next;
            if batches.len() == 1 {
                break;
            }
        }
        g.top = level;
        g.ledger = ctx.llm.ledger().snapshot();
        g.build_secs = started.elapsed().as_secs_f64();
        Ok(g)
    }

    /// The next node by GBFS: argmax over unvisited j of z_j + s_j.
    pub fn next_node(&self, visited: &[usize], sims: &[f32]) -> Option<usize> {
        let n = self.nodes.len();
        let mut z = vec![0f32; n];
        for (pos, &i) in visited.iter().enumerate() {
            // The question holds position 1, so the k-th visited node (k from 0) is at k + 2.
            let a = sims[i] * (pos + 2) as f32;
            for &(j, e) in &self.nodes[i].children {
                z[j] += e * a;
            }
        }
        normalise(&mut z);
        let mut s = sims.to_vec();
        normalise(&mut s);
        let seen: BTreeSet<usize> = visited.iter().copied().collect();
        (0..n)
            .filter(|j| !seen.contains(j))
            .map(|j| (j, z[j] + s[j]))
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
            .map(|(j, _)| j)
    }

    /// Answers `question` (see the module docs).
    pub async fn ask(
        &self,
        llm: &Service,
        prompts: &Prompts,
        embedder: &dyn Embedder,
        window: Window,
        question: &str,
        options: &[String],
    ) -> Result<Trace, GarlicError> {
        if question.trim().is_empty() {
            return Err(GarlicError::EmptyQuestion);
        }
        let before = llm.ledger().snapshot().total();
        let q = with_options(question, options);
        let qv = embed_one(embedder, &q)?;
        let sims: Vec<f32> = self
            .nodes
            .iter()
            .map(|n| dot(&qv, &n.vector).max(0.0))
            .collect();
        let mut visited: Vec<usize> = self.top.clone();
        let info = |v: &[usize]| {
            v.iter()
                .map(|&n| self.nodes[n].text.trim().replace('\n', " "))
                .collect::<Vec<_>>()
                .join("\n")
        };
        // Room for whichever answer request follows: the second turn, or the shared answer
        // prompt over the same information when the search ends without a "Yes".
        let empty = [("question", ""), ("information", ""), ("segments", "")];
        let second_turn = count_tokens(&prompts.render(PromptId::GarlicAnswer, &[])?) + 16;
        let shared = count_tokens(&prompts.render(PromptId::Answer, &empty)?).saturating_sub(
            count_tokens(&prompts.render(PromptId::GarlicCheck, &empty)?),
        );
        let answer_overhead = second_turn.max(shared);
        let budget = window.prompt_budget().saturating_sub(answer_overhead);
        let mut steps = Vec::new();
        let mut yes = 0;
        let mut last_reply;
        let mut checks = 0;
        loop {
            let prompt = prompts.render(
                PromptId::GarlicCheck,
                &[("question", &q), ("information", &info(&visited))],
            )?;
            let request = ChatRequest {
                messages: vec![Message::user(prompt.clone())],
                sampling: crate::llm::Sampling {
                    max_tokens: 8,
                    ..llm.sampling()
                },
                schema: None,
            };
            checks += 1;
            last_reply = match llm.chat("garlic_check", &request).await {
                Ok(r) => r.content.trim().to_string(),
                Err(e) => {
                    steps.push(Step {
                        kind: StepKind::Check,
                        note: format!("the check failed ({e}); counted as No"),
                        ..Step::default()
                    });
                    "No".to_string()
                }
            };
            let said_yes = last_reply
                .to_ascii_lowercase()
                .trim_start_matches(|c: char| !c.is_alphanumeric())
                .starts_with("yes");
            yes += usize::from(said_yes);
            steps.push(Step {
                kind: StepKind::Check,
                segments: visited.clone(),
                note: format!(
                    "{} nodes visited: {}",
                    visited.len(),
                    if said_yes { "Yes" } else { "No" }
                ),
                reason: last_reply.chars().take(80).collect(),
                ..Step::default()
            });
            if yes >= self.params.patience {
                break;
            }
            if checks >= self.params.max_checks {
                steps.push(Step {
                    kind: StepKind::Stop,
                    note: format!("{checks} checks: the guard stops the search"),
                    ..Step::default()
                });
                break;
            }
            let Some(next) = self.next_node(&visited, &sims) else {
                steps.push(Step {
                    kind: StepKind::Stop,
                    note: "every node visited".into(),
                    ..Step::default()
                });
                break;
            };
            let mut trial = visited.clone();
            trial.push(next);
            let size = count_tokens(&prompts.render(
                PromptId::GarlicCheck,
                &[("question", &q), ("information", &info(&trial))],
            )?);
            if size > budget {
                steps.push(Step { kind: StepKind::Stop, note: format!("node {next} would take the prompt to {size} tokens, over {budget}: the window is full"), ..Step::default() });
                break;
            }
            steps.push(Step {
                kind: StepKind::Visit,
                segments: vec![next],
                note: format!("GBFS: node {next} (level {})", self.nodes[next].level),
                ..Step::default()
            });
            visited = trial;
        }
        let stopped_on_yes = yes >= self.params.patience;
        let (raw, how) = if stopped_on_yes {
            // The paper's second turn of the same conversation, after the "Yes".
            let first = prompts.render(
                PromptId::GarlicCheck,
                &[("question", &q), ("information", &info(&visited))],
            )?;
            let second = prompts.render(PromptId::GarlicAnswer, &[])?;
            let request = ChatRequest {
                messages: vec![
                    Message::user(first),
                    Message::assistant(last_reply.clone()),
                    Message::user(second.trim().to_string()),
                ],
                sampling: llm.sampling(),
                schema: None,
            };
            let reply = llm
                .chat("garlic_answer", &request)
                .await
                .map_err(|e| GarlicError::Answer(e.to_string()))?;
            (
                reply.content.trim().to_string(),
                "the second turn after Yes",
            )
        } else {
            // The search ended without a "Yes" (no node left, a full window or the guard). A
            // second turn after "No" only repeats the refusal; answer from the visited nodes
            // with the answer prompt every other method shares.
            let (answer, _reasoning) =
                crate::answer::answer_from(llm, prompts, &q, &info(&visited))
                    .await
                    .map_err(|e| GarlicError::Answer(e.to_string()))?;
            (
                answer.trim().to_string(),
                "the shared answer prompt, no Yes",
            )
        };
        let answer = if options.is_empty() {
            raw.clone()
        } else {
            option_letter(&raw, options)
        };
        steps.push(Step {
            kind: StepKind::Answer,
            segments: visited.clone(),
            note: format!("answered from {} nodes by {how}", visited.len()),
            reason: raw.clone(),
            ..Step::default()
        });
        let after = llm.ledger().snapshot().total();
        let chunks: Vec<usize> = visited
            .iter()
            .copied()
            .filter(|&n| self.nodes[n].level == 1)
            .collect();
        let mut trace = Trace {
            method: "garlic".into(),
            question: question.to_string(),
            answer,
            answered: stopped_on_yes,
            reasoning: raw,
            start_entities: vec![],
            steps,
            segments_used: chunks.clone(),
            final_segments: chunks,
            failures: vec![],
            ..Trace::default()
        };
        trace.set_cost(&before, &after);
        trace.set_spans(&self.node_spans());
        Ok(trace)
    }

    /// The byte range of every node in the document: a level-1 node's chunk (they come first
    /// and are consecutive segments of the document), an empty range for Information Points.
    pub fn node_spans(&self) -> Vec<crate::text::Span> {
        crate::text::span::consecutive(self.nodes.iter().map(|n| {
            if n.level == 1 {
                n.text.as_str()
            } else {
                ""
            }
        }))
    }
}

/// GARLIC's LLM-controlled best-first search (seed 003) as a method.
#[derive(Clone, Copy, Debug)]
pub struct GarlicMethod;

pub const FAMILY: super::method::Family = super::method::Family {
    names: || "garlic".to_string(),
    parse: |name| (name == "garlic").then(|| super::method::MethodSpec::new(GarlicMethod)),
};

#[async_trait::async_trait]
impl super::method::Method for GarlicMethod {
    fn name(&self) -> String {
        "garlic".into()
    }

    fn memory_kind(&self) -> super::MemoryKind {
        super::MemoryKind::Garlic
    }

    async fn answer(
        &self,
        ctx: &super::Ctx<'_>,
        _nav: &crate::config::NavigateConfig,
        prepared: &super::Prepared,
        question: &str,
        options: &[String],
    ) -> Result<Trace, super::MethodError> {
        let super::Prepared::Garlic(g) = prepared else {
            return Err(super::method::wrong_memory(self, prepared));
        };
        Ok(g.ask(
            ctx.llm,
            ctx.prompts,
            ctx.embedder,
            ctx.window,
            question,
            options,
        )
        .await?)
    }

    fn recorded_context(&self) -> super::Recorded {
        // The level-1 chunks visited.
        super::Recorded::Units
    }
}

/// Writes the graph atomically.
pub fn save(g: &Garlic, path: &std::path::Path) -> Result<(), String> {
    let bytes = serde_json::to_vec(g).map_err(|e| e.to_string())?;
    crate::fsutil::write_atomic(path, &bytes)
}

/// Reads a graph, checking its format and version.
pub fn load(path: &std::path::Path) -> Result<Garlic, String> {
    crate::fsutil::read_versioned(path, FORMAT, VERSION, "GARLIC graph")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bullet_points_are_parsed() {
        let r = "Here you go:\n* Clara Hoffmann designed the bridge.\n- Lucerne is her birthplace.\n2. The bridge opened in 1890.\n*\n• ok";
        assert_eq!(
            parse_points(r),
            vec![
                "Clara Hoffmann designed the bridge.",
                "Lucerne is her birthplace.",
                "The bridge opened in 1890."
            ]
        );
    }

    #[test]
    fn edge_weights_sum_to_one() {
        let w = edge_weights(&[1.0, 0.0], &[&[1.0, 0.0], &[0.6, 0.8], &[-1.0, 0.0]]);
        assert!((w.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert_eq!(w[2], 0.0);
        assert!((w[0] - 1.0 / 1.6).abs() < 1e-6);
        let u = edge_weights(&[0.0, 1.0], &[&[1.0, 0.0], &[-1.0, 0.0]]);
        assert_eq!(u, vec![0.5, 0.5]);
    }
}
