//! Chain: a multi-hop question answered one hop at a time along the path it finds through the
//! document's passages (issue 88). QRMeM's reflection recast: instead of asking "is it
//! answerable?" over everything shown, each step reads one entity's own passages, states the
//! one fact the question needs next as a triple, and names the entity the following fact is
//! about; that entity's own passages (by title, else its best passage by BM25) are the next
//! hop's context. The final answer reads the path's triples, stated, above the passages the
//! hops read (`chain-passagesN`) or alone (`chain-facts-passagesN`).
//!
//! Hops are bounded by `navigate.max_trials` (at most that many hop calls, then one answer
//! call). The chain ends when a hop names no next entity, names one it already read, finds no
//! passage for it, or fails to parse. A chain that found no fact falls back to the one-shot
//! answer of `bm25-own-hop-passagesN` (the same start and budget).

use std::collections::HashSet;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::baseline::{hop_by_title, one_prompt_answer, segment_spans, Baseline};
use super::method::{wrong_memory, Family, Method, MethodSpec};
use super::spec::{MemoryKind, MethodError, Prepared};
use super::Ctx;
use crate::answer::{
    answer_step, option_letter, with_options, AnswerError, Answered, ScoredEdge, Step, StepKind,
    Trace,
};
use crate::config::NavigateConfig;
use crate::llm::{JsonSchema, Message};
use crate::memory::Memory;
use crate::prompts::PromptId;
use crate::text::passages::{own_units, title_key, unit_titles, MIN_NAME};
use crate::text::{occurs_in, span, Bm25};

/// At most this many passages a hop reads: an entity's own passage, or two where two
/// passages carry its title. Set before any measurement.
pub const HOP_UNITS: usize = 2;

/// The chain method: every prompt shows at most `passages` tokens of passages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chain {
    pub passages: usize,
    /// The final answer reads the path's triples alone (the passages only where no fact was
    /// found).
    pub facts_only: bool,
}

pub const FAMILY: Family = Family {
    names: "chain-passagesN (one hop at a time: each hop reads one entity's own passages, at most N tokens, and states the fact the question needs next; the answer reads the path's triples above the passages read), chain-facts-passagesN (the answer reads the triples alone)",
    parse: |name| parse(name).map(MethodSpec::new),
};

fn parse(name: &str) -> Option<Chain> {
    let (rest, facts_only) = match name.strip_prefix("chain-facts-passages") {
        Some(rest) => (rest, true),
        None => (name.strip_prefix("chain-passages")?, false),
    };
    let n: usize = rest.parse().ok().filter(|&n| n >= 1)?;
    (n.to_string() == rest).then_some(Chain {
        passages: n,
        facts_only,
    })
}

impl std::fmt::Display for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let facts = if self.facts_only { "-facts" } else { "" };
        write!(f, "chain{facts}-passages{}", self.passages)
    }
}

#[async_trait]
impl Method for Chain {
    fn name(&self) -> String {
        self.to_string()
    }

    fn memory_kind(&self) -> MemoryKind {
        MemoryKind::Segments
    }

    fn uses_trials(&self) -> bool {
        true
    }

    async fn answer(
        &self,
        ctx: &Ctx<'_>,
        nav: &NavigateConfig,
        prepared: &Prepared,
        question: &str,
        options: &[String],
    ) -> Result<Trace, MethodError> {
        let Prepared::Graph(memory) = prepared else {
            return Err(wrong_memory(self, prepared));
        };
        if question.trim().is_empty() {
            return Err(AnswerError::EmptyQuestion.into());
        }
        let cap = crate::text::passages::cap(nav.passage_tokens);
        let view = super::navigators::passage_view(memory, cap, None)?;
        let before = ctx.llm.ledger().snapshot().total();
        let q = with_options(question, options);
        let walked = self.walk(ctx, nav.max_trials.max(1), &view, &q).await?;
        if walked.facts.is_empty() {
            // The chain broke before its first fact: the one-shot answer from the same start.
            let fallback = Baseline::Bm25OwnHopPassages(self.passages);
            let mut shown =
                fallback.context_of(ctx.prompts, ctx.embedder, ctx.window, nav, memory, &q)?;
            shown.note = format!(
                "the chain found no fact: one-shot answer from {fallback}'s context ({})",
                shown.note
            );
            let mut trace =
                one_prompt_answer(ctx, &self.name(), question, options, before, shown).await?;
            let read = span::of_indices(&segment_spans(&view), &walked.read);
            trace.read_spans = span::merge([trace.read_spans.clone(), read].concat());
            let answer_step = std::mem::take(&mut trace.steps);
            trace.steps = walked.steps;
            trace.steps.extend(answer_step);
            trace.failures = walked.failures;
            return Ok(trace);
        }
        Ok(self
            .final_answer(ctx, &view, question, options, &q, walked, before)
            .await?)
    }
}

/// What the hops found: the triples in order, the units read (in the order first read), the
/// trace steps and the failures recorded.
struct Walked {
    facts: Vec<[String; 3]>,
    read: Vec<usize>,
    steps: Vec<Step>,
    failures: Vec<String>,
}

#[derive(Deserialize)]
struct HopReply {
    #[serde(default)]
    subject: String,
    #[serde(default)]
    relation: String,
    #[serde(default)]
    object: String,
    #[serde(default)]
    next: String,
}

impl Chain {
    /// The hops: at most `max_hops` hop calls over `view` (the passage view) for `q`.
    async fn walk(
        &self,
        ctx: &Ctx<'_>,
        max_hops: usize,
        view: &Memory,
        q: &str,
    ) -> Result<Walked, AnswerError> {
        let ranked: Vec<usize> = Bm25::over(&view.segments)
            .rank(q)
            .into_iter()
            .map(|(u, _)| u)
            .collect();
        let titles = unit_titles(&view.segments);
        let lower = q.to_lowercase();
        // The start: the passages titled with the question's names, else its best two.
        let mut units = own_units(&ranked, &titles, |t| occurs_in(&lower, t));
        let mut via = "the question's own passages";
        if units.is_empty() {
            units = ranked.iter().copied().take(HOP_UNITS).collect();
            via = "the question's best passages by BM25";
        }
        let mut walked = Walked {
            facts: Vec::new(),
            read: Vec::new(),
            steps: Vec::new(),
            failures: Vec::new(),
        };
        let mut subjects: HashSet<String> = HashSet::new();
        for hop in 0..max_hops {
            let (text, shown) = self.hop_text(view, &units);
            if shown.is_empty() {
                break;
            }
            for &u in &shown {
                if !walked.read.contains(&u) {
                    walked.read.push(u);
                }
            }
            let reply = match self.hop_call(ctx, &walked.facts, &text, q).await {
                Ok(r) => r,
                Err(e) => {
                    walked.failures.push(format!("hop {}: {e}", hop + 1));
                    break;
                }
            };
            let fact = [
                reply.subject.trim().to_string(),
                reply.relation.trim().to_string(),
                reply.object.trim().to_string(),
            ];
            let next = reply.next.trim().to_string();
            let stated = !fact[2].is_empty();
            if stated {
                subjects.insert(title_key(&fact[0]));
                walked.facts.push(fact.clone());
            }
            // The next hop: the named entity's own passages, if it is new and has any.
            let key = title_key(&next);
            let (next_units, how) = if next.is_empty() {
                (Vec::new(), "none named: the chain ends")
            } else if !subjects.insert(key.clone()) {
                (Vec::new(), "already read: the chain ends")
            } else {
                let found = units_of(view, &titles, &ranked, &key, &walked.read);
                if found.0.is_empty() || found.0 == shown {
                    (Vec::new(), "no new passage: the chain ends")
                } else {
                    found
                }
            };
            walked.steps.push(Step {
                kind: StepKind::Hop,
                entities: if next.is_empty() {
                    vec![]
                } else {
                    vec![next.clone()]
                },
                chosen: if stated {
                    vec![ScoredEdge {
                        text: fact.join(" | "),
                        score: 1.0,
                    }]
                } else {
                    vec![]
                },
                segments: shown,
                reason: if stated {
                    fact.join(" | ")
                } else {
                    "no fact stated".into()
                },
                note: format!(
                    "hop {}: read {via}; next: {} ({how})",
                    hop + 1,
                    if next.is_empty() { "-" } else { next.as_str() }
                ),
                ended: next_units.is_empty(),
                ..Step::default()
            });
            if next_units.is_empty() {
                break;
            }
            units = next_units;
            via = how;
        }
        Ok(walked)
    }

    /// The text one hop shows: `units` in their order while they fit the budget, at most
    /// [`HOP_UNITS`]; and the units shown.
    fn hop_text(&self, view: &Memory, units: &[usize]) -> (String, Vec<usize>) {
        let mut shown = Vec::new();
        let mut used = 0;
        for &u in units {
            let Some(seg) = view.segments.get(u) else {
                continue;
            };
            if shown.len() == HOP_UNITS || (used + seg.tokens > self.passages && !shown.is_empty())
            {
                break;
            }
            used += seg.tokens;
            shown.push(u);
        }
        let text = shown
            .iter()
            .filter_map(|&u| view.segments.get(u))
            .map(|s| s.text.trim())
            .collect::<Vec<_>>()
            .join("\n\n");
        (text, shown)
    }

    async fn hop_call(
        &self,
        ctx: &Ctx<'_>,
        facts: &[[String; 3]],
        text: &str,
        q: &str,
    ) -> Result<HopReply, AnswerError> {
        let facts_text = if facts.is_empty() {
            "(none yet)".to_string()
        } else {
            facts_block(facts)
        };
        let p = ctx.prompts.render(
            PromptId::ChainHop,
            &[("facts", &facts_text), ("passages", text), ("question", q)],
        )?;
        let schema = json!({"type": "object", "properties": {
            "subject": {"type": "string", "maxLength": 120},
            "relation": {"type": "string", "maxLength": 80},
            "object": {"type": "string", "maxLength": 160},
            "next": {"type": "string", "maxLength": 120}
        }, "required": ["subject", "relation", "object", "next"]});
        let r = ctx
            .llm
            .chat_json::<HopReply>(
                "chain_hop",
                vec![Message::user(p)],
                Some(JsonSchema {
                    name: "chain_hop".into(),
                    schema,
                }),
            )
            .await
            .map_err(|source| AnswerError::Step {
                step: "chain_hop".into(),
                source,
            })?;
        Ok(r.value)
    }

    /// The answer from the path's triples (and, unless `facts_only`, the passages read, then
    /// the own-hop order, within the budget).
    #[allow(clippy::too_many_arguments)]
    async fn final_answer(
        &self,
        ctx: &Ctx<'_>,
        view: &Memory,
        question: &str,
        options: &[String],
        q: &str,
        walked: Walked,
        before: crate::llm::StageStats,
    ) -> Result<Trace, AnswerError> {
        let facts = facts_block(&walked.facts);
        let header = format!("Facts found, one hop at a time:\n{facts}");
        let (text, shown) = if self.facts_only {
            (header.clone(), Vec::new())
        } else {
            let ranked: Vec<(usize, f32)> = Bm25::over(&view.segments)
                .rank(q)
                .into_iter()
                .map(|(u, s)| (u, s as f32))
                .collect();
            let mut order = walked.read.clone();
            order.extend(hop_by_title(view, q, true, &ranked));
            // The room counts the facts as part of the question.
            let (passages, shown) = ctx.window.within(self.passages).fit(
                ctx.prompts,
                PromptId::Answer,
                &format!("{q}\n{header}"),
                view,
                &order,
                &[],
            )?;
            (format!("{header}\n\n{passages}"), shown)
        };
        let note = format!(
            "{} fact(s) from {} hop(s); {} passage(s) shown",
            walked.facts.len(),
            walked.steps.len(),
            shown.len()
        );
        let Answered {
            answer,
            reasoning,
            step,
        } = answer_step(ctx.llm, ctx.prompts, q, &text, shown.clone(), note).await?;
        let after = ctx.llm.ledger().snapshot().total();
        let answer = if options.is_empty() {
            answer.trim().to_string()
        } else {
            option_letter(&answer, options)
        };
        let mut used = walked.read.clone();
        used.extend(shown.iter().copied());
        used.sort_unstable();
        used.dedup();
        let mut steps = walked.steps;
        steps.push(step);
        let mut trace = Trace {
            method: self.name(),
            question: question.to_string(),
            answer,
            reasoning,
            steps,
            segments_used: used,
            final_segments: shown,
            failures: walked.failures,
            ..Trace::default()
        };
        trace.set_spans(&segment_spans(view));
        trace.set_cost(&before, &after);
        Ok(trace)
    }
}

/// The triples, one a line: `1. subject | relation | object`.
pub fn facts_block(facts: &[[String; 3]]) -> String {
    facts
        .iter()
        .enumerate()
        .map(|(i, f)| format!("{}. {}", i + 1, f.join(" | ")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The passages of the entity `key` ([`title_key`] of its name): those titled with it (at
/// most [`HOP_UNITS`], in the question's BM25 order), else the best passage for the name by
/// BM25 that no hop has read; and how they were found.
fn units_of(
    view: &Memory,
    titles: &[Vec<String>],
    ranked: &[usize],
    key: &str,
    read: &[usize],
) -> (Vec<usize>, &'static str) {
    if key.chars().count() >= MIN_NAME {
        let own: Vec<usize> = ranked
            .iter()
            .copied()
            .filter(|&u| {
                titles.get(u).is_some_and(|ts| {
                    ts.iter()
                        .any(|t| t == key || occurs_in(key, t) || occurs_in(t, key))
                })
            })
            .take(HOP_UNITS)
            .collect();
        if !own.is_empty() {
            return (own, "its own passage by title");
        }
    }
    let best = Bm25::over(&view.segments)
        .rank(key)
        .into_iter()
        .find(|&(u, s)| s > 0.0 && !read.contains(&u))
        .map(|(u, _)| u);
    match best {
        Some(u) => (vec![u], "its best passage by BM25"),
        None => (Vec::new(), "no passage"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for name in ["chain-passages400", "chain-facts-passages200"] {
            assert_eq!(parse(name).unwrap().to_string(), name);
        }
        for bad in [
            "chain-passages0",
            "chain-passages040",
            "chain-passages",
            "chain",
            "chain-facts-passages",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn facts_are_numbered_triples() {
        let f = [
            ["A".to_string(), "mother".into(), "B".into()],
            ["B".to_string(), "died".into(), "851".into()],
        ];
        assert_eq!(facts_block(&f), "1. A | mother | B\n2. B | died | 851");
    }
}
