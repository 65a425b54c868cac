//! Chain: a multi-hop question answered one hop at a time along the path it finds through the
//! document's passages (issue 88). QRMeM's reflection recast: instead of asking "is it
//! answerable?" over everything shown, each step reads one entity's own passages, states the
//! one fact the question needs next as a triple, and names the entity the following fact is
//! about; that entity's own passages (by title, else its best passage by BM25) are the next
//! hop's context. The final answer reads the path's triples, stated, above the passages the
//! hops read (`chain-passagesN`) or alone (`chain-facts-passagesN`).
//!
//! Hops are bounded by `navigate.max_trials` (at most that many hop calls, then one answer
//! call). The next hop reads the entity the model names as "next" (its own passages by title,
//! else its best passage by BM25), else the fact's object where it has a passage of its own;
//! the chain ends when neither leads to a new passage, an entity comes back, or a reply fails
//! to parse. A chain that found no fact falls back to the one-shot
//! answer of `bm25-own-hop-passagesN` (the same start and budget).

use std::collections::HashSet;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::baseline::{
    context, hop_by_title, one_prompt_answer, segment_spans, Baseline, ShownText,
};
use super::method::{wrong_memory, Family, Form, Method, MethodSpec};
use super::spec::{MemoryKind, MethodError, Prepared};
use super::Ctx;
use crate::answer::{
    answer_step, option_letter, with_options, AnswerError, Answered, ScoredEdge, Step, StepKind,
    Trace,
};
use crate::config::NavigateConfig;
use crate::llm::{JsonSchema, Message};
use crate::memory::Memory;
use crate::navigate::check::says_missing;
use crate::prompts::PromptId;
use crate::text::passages::{own_units, title_key, unit_titles, MIN_NAME};
use crate::text::{occurs_in, span, Bm25, Span};

/// At most this many passages a hop reads: an entity's own passage, or two where two
/// passages carry its title. Set before any measurement.
pub const HOP_UNITS: usize = 2;

/// The chain method: every prompt shows at most `passages` tokens of passages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Chain {
    pub passages: usize,
    /// The final answer reads the path's triples alone (the passages only where no fact was
    /// found).
    pub facts_only: bool,
    /// The path is the model's decomposition of the question into sub-questions (one call),
    /// each answered over its own context (`bm25-own-hop-passagesN`'s for the sub-question,
    /// the answers so far above it); the last answer answers the question.
    pub decompose: bool,
    /// With `decompose`: the last sub-question is not asked; the question itself is answered
    /// in one final call from the answers found, stated, above the last sub-question's
    /// passages and then the question's own (`chain-decompose-final-passagesN`). A sub-question
    /// that names an answer not yet found is skipped, and a hop answered "no information"
    /// ends the chain (the final call then reads what was found and the question's passages).
    pub final_call: bool,
    /// The path is the model's triples with unknowns (`[Jaws, director, #1]`, `[#1, mother,
    /// #2]`, one call); each triple is asked as "What is the {relation} of {subject}?" over
    /// the subject's own passages (by title) and then the sub-question's
    /// `bm25-own-hop-passagesN` passages, the found triples above them; the question is
    /// answered last from the triples found, stated, above the last hop's passages and the
    /// question's own (`chain-path-passagesN`).
    pub path: bool,
}

/// Every chain name, in the order of the help.
pub const FORMS: &[Form<Chain>] = &[
    Form {
        pattern: "chain-passagesN",
        effect: "one hop at a time: each hop reads one entity's own passages, at most N tokens, and states the fact the question needs next; the answer reads the path's triples above the passages read",
        make: |n| Chain::new(n, false, false, false),
    },
    Form {
        pattern: "chain-facts-passagesN",
        effect: "chain-passagesN, the answer reading the triples alone",
        make: |n| Chain::new(n, true, false, false),
    },
    Form {
        pattern: "chain-decompose-passagesN",
        effect: "the model's sub-questions, each answered over its own N tokens of passages with the answers so far above them; the last answer is the answer",
        make: |n| Chain::new(n, false, true, false),
    },
    Form {
        pattern: "chain-decompose-final-passagesN",
        effect: "chain-decompose-passagesN, but the question itself is answered last, from the answers found stated above the last hop's passages and the question's own",
        make: |n| Chain::new(n, false, true, true),
    },
    Form {
        pattern: "chain-path-passagesN",
        effect: "the question's path as triples with unknowns (one call), each asked of its subject's own passages with the triples found above them, N tokens a hop; the question answered last from the facts found, stated as sentences, above the last hop's passages and the question's own",
        make: |n| Chain {
            path: true,
            ..Chain::new(n, false, false, true)
        },
    },
];

impl Chain {
    const fn new(passages: usize, facts_only: bool, decompose: bool, final_call: bool) -> Chain {
        Chain {
            passages,
            facts_only,
            decompose,
            final_call,
            path: false,
        }
    }
}

pub const FAMILY: Family = Family {
    names: || Form::help(FORMS),
    parse: |name| parse(name).map(MethodSpec::new),
};

fn parse(name: &str) -> Option<Chain> {
    Form::parse(FORMS, name)
}

impl std::fmt::Display for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&Form::name(FORMS, self, self.passages).ok_or(std::fmt::Error)?)
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

    fn reads_passages(&self) -> bool {
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
        let before = ctx.llm.ledger().snapshot().total();
        let q = with_options(question, options);
        // The passage view every context of the chain reads (`bm25-own-hop-passagesN`'s own).
        let view = super::navigators::passage_view(memory, cap, None)?;
        if self.path {
            return self
                .along_path(ctx, nav, &view, question, options, &q, before)
                .await;
        }
        if self.decompose {
            let asked = (question, options, q.as_str());
            return self
                .decomposed(ctx, nav, &view, asked, Over::Retrieved, before)
                .await;
        }
        let walked = self.walk(ctx, nav.max_trials.max(1), &view, &q).await?;
        if walked.facts.is_empty() {
            // The chain broke before its first fact: the one-shot answer from the same start.
            let fallback = Baseline::Bm25OwnHopPassages(self.passages);
            let mut shown = context(fallback, ctx.prompts, ctx.embedder, ctx.window, &view, &q)?;
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

/// What each sub-question of a decomposition reads: its own retrieval
/// (`bm25-own-hop-passagesN`'s context for the sub-question), or one fixed text for every hop
/// (the gold paragraphs, `gold-decompose`).
#[derive(Clone, Copy)]
pub(super) enum Over<'a> {
    Retrieved,
    Fixed(&'a ShownText),
}

impl Over<'_> {
    /// What a step asking `q` reads: `bm25-own-hop-passagesN`'s context for `q` (N =
    /// `passages`), or the fixed text.
    fn shown(
        self,
        ctx: &Ctx<'_>,
        view: &Memory,
        passages: usize,
        q: &str,
    ) -> Result<ShownText, AnswerError> {
        match self {
            Over::Retrieved => context(
                Baseline::Bm25OwnHopPassages(passages),
                ctx.prompts,
                ctx.embedder,
                ctx.window,
                view,
                q,
            ),
            Over::Fixed(text) => Ok(text.clone()),
        }
    }
}

#[derive(Deserialize)]
struct Decomposed {
    #[serde(default)]
    questions: Vec<String>,
}

impl Chain {
    /// `chain-decompose-passagesN`: the model's sub-questions, each answered over what `over`
    /// shows for it (its own context, or the gold paragraphs) with the answers so far above
    /// it; the last answer is the answer. A decomposition into fewer than two sub-questions
    /// (or none that parses) answers the question once from what `over` shows for it.
    pub(super) async fn decomposed(
        &self,
        ctx: &Ctx<'_>,
        nav: &NavigateConfig,
        view: &Memory,
        (question, options, q): (&str, &[String], &str),
        over: Over<'_>,
        before: crate::llm::StageStats,
    ) -> Result<Trace, MethodError> {
        let max_hops = nav.max_trials.max(1);
        let p = ctx
            .prompts
            .render(PromptId::ChainDecompose, &[("question", q)])
            .map_err(AnswerError::from)?;
        let schema = json!({"type": "object", "properties": {
            "questions": {"type": "array", "minItems": 1, "maxItems": max_hops,
                "items": {"type": "string", "maxLength": 240}}
        }, "required": ["questions"]});
        let mut failures = Vec::new();
        let subs: Vec<String> =
            match structured::<Decomposed>(ctx, "chain_decompose", p, schema).await {
                Ok(r) => r
                    .questions
                    .into_iter()
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .take(max_hops)
                    .collect(),
                Err(e) => {
                    failures.push(format!("decomposition: {e}"));
                    Vec::new()
                }
            };
        let decomposition = Step {
            kind: StepKind::Hop,
            reason: subs.join(" / "),
            note: format!("decomposition: {} sub-question(s)", subs.len()),
            ..Step::default()
        };
        if subs.len() < 2 {
            let plan = (decomposition, failures);
            return self
                .one_shot(
                    ctx,
                    view,
                    (question, options, q),
                    over,
                    "one step",
                    plan,
                    before,
                )
                .await;
        }
        let mut hops = Hops {
            steps: vec![decomposition],
            failures,
            ..Hops::default()
        };
        // The answers found: `#k` and the k-th sub-question's answer.
        let mut known: Vec<(String, String)> = Vec::new();
        let mut last_sub: Option<String> = None;
        let mut last = (String::new(), String::new(), Vec::new(), Vec::new());
        for (k, sub) in subs.iter().enumerate() {
            let sub_k = fill(sub, &known);
            let is_last = k + 1 == subs.len();
            if self.final_call {
                if names_unfound(&sub_k) {
                    hops.notes
                        .push(format!("skipped \"{sub_k}\": it names an answer not found"));
                    continue;
                }
                if is_last {
                    last_sub = Some(sub_k);
                    break;
                }
            }
            let sub_q = if is_last {
                with_options(&sub_k, options)
            } else {
                sub_k.clone()
            };
            let shown = over.shown(ctx, view, self.passages, &sub_q)?;
            let text = match found_block(&hops.found) {
                None => shown.text.clone(),
                Some(found) => format!("Answers found so far:\n{found}\n\n{}", shown.text),
            };
            let Answered {
                answer,
                reasoning,
                mut step,
            } = answer_step(
                ctx.llm,
                ctx.prompts,
                &sub_q,
                &text,
                shown.segments.clone(),
                format!("sub-question {}: {}", k + 1, shown.note),
            )
            .await?;
            let answer = answer.trim().to_string();
            step.kind = if is_last {
                StepKind::Answer
            } else {
                StepKind::Hop
            };
            step.reason = format!("{sub_k} -> {answer}");
            hops.used.extend(shown.segments.iter().copied());
            hops.read.extend(shown.spans.iter().copied());
            if self.final_call && (answer.is_empty() || says_missing(&answer).is_some()) {
                step.note = format!("{}; no answer found: the chain ends", step.note);
                step.ended = true;
                hops.steps.push(step);
                break;
            }
            hops.steps.push(step);
            known.push((format!("#{}", k + 1), answer.clone()));
            hops.found.push((sub_k, answer.clone()));
            last = (answer, reasoning, shown.segments, shown.spans);
        }
        if self.final_call {
            let last = match last_sub {
                Some(sub) => {
                    let shown = Over::Retrieved.shown(ctx, view, self.passages, &sub)?;
                    Some((format!("\"{sub}\"'s"), shown.segments))
                }
                None => None,
            };
            return self
                .answer_last(ctx, view, question, options, q, last, hops, before)
                .await;
        }
        let after = ctx.llm.ledger().snapshot().total();
        let (answer, reasoning, final_segments, final_spans) = last;
        let answer = if options.is_empty() {
            answer
        } else {
            option_letter(&answer, options)
        };
        let mut used = hops.used;
        used.sort_unstable();
        used.dedup();
        let mut trace = Trace {
            method: self.name(),
            question: question.to_string(),
            answer,
            reasoning,
            steps: hops.steps,
            segments_used: used,
            final_segments,
            failures: hops.failures,
            answer_spans: span::merge(final_spans),
            read_spans: span::merge(hops.read),
            ..Trace::default()
        };
        trace.set_cost(&before, &after);
        Ok(trace)
    }

    /// `chain-decompose-final-passagesN`'s last call: the question itself, over the answers
    /// found (stated, one a line) above the last sub-question's passages and then the
    /// question's own (`bm25-own-hop-passagesN`'s for each), within N tokens.
    #[allow(clippy::too_many_arguments)]
    async fn answer_last(
        &self,
        ctx: &Ctx<'_>,
        view: &Memory,
        question: &str,
        options: &[String],
        q: &str,
        last: Option<(String, Vec<usize>)>,
        hops: Hops,
        before: crate::llm::StageStats,
    ) -> Result<Trace, MethodError> {
        let own_hop = Baseline::Bm25OwnHopPassages(self.passages);
        // The last hop's passages first (the hop the answer is likeliest in), then the
        // question's own (what `bm25-own-hop-passagesN` shows). Chosen on items 1-10 of the
        // three datasets over the two taken in turn (eval/notebook/chain.md).
        let mut order: Vec<usize> = Vec::new();
        if let Some((_, units)) = &last {
            order.extend(units.iter().copied());
        }
        let own = context(own_hop, ctx.prompts, ctx.embedder, ctx.window, view, q)?;
        for u in own.segments {
            if !order.contains(&u) {
                order.push(u);
            }
        }
        let header = if hops.facts.is_empty() {
            found_block(&hops.found)
                .map(|f| format!("Answers found, one question at a time:\n{f}"))
                .unwrap_or_default()
        } else {
            // As sentences: chosen on items 1-10 of the three datasets over the triples
            // themselves and over questions answered (eval/notebook/chain.md).
            format!(
                "Facts found, one hop at a time:\n{}",
                said_block(&hops.facts)
            )
        };
        let (text, shown) = self.under(ctx, view, q, &header, &order)?;
        let mut notes = hops.notes;
        notes.push(format!(
            "{} answer(s) found; {} passage(s) shown, {}",
            hops.found.len().max(hops.facts.len()),
            shown.len(),
            match &last {
                Some((whose, _)) => format!("{whose} first, then the question's"),
                None => "the question's own".to_string(),
            }
        ));
        let done = Done {
            read: hops.used,
            steps: hops.steps,
            failures: hops.failures,
        };
        let last = (q, text.as_str(), shown, notes.join("; "));
        Ok(self
            .last_call(ctx, view, question, options, last, done, before)
            .await?)
    }

    /// A chain's last call: `q` answered from `text` (showing the units `shown`, the step
    /// noted `note`), completing the trace of what came before it (`done`).
    #[allow(clippy::too_many_arguments)]
    async fn last_call(
        &self,
        ctx: &Ctx<'_>,
        view: &Memory,
        question: &str,
        options: &[String],
        (q, text, shown, note): (&str, &str, Vec<usize>, String),
        done: Done,
        before: crate::llm::StageStats,
    ) -> Result<Trace, AnswerError> {
        let Answered {
            answer,
            reasoning,
            step,
        } = answer_step(ctx.llm, ctx.prompts, q, text, shown.clone(), note).await?;
        let after = ctx.llm.ledger().snapshot().total();
        let answer = if options.is_empty() {
            answer.trim().to_string()
        } else {
            option_letter(&answer, options)
        };
        let mut used = done.read;
        used.extend(shown.iter().copied());
        used.sort_unstable();
        used.dedup();
        let mut steps = done.steps;
        steps.push(step);
        let mut trace = Trace {
            method: self.name(),
            question: question.to_string(),
            answer,
            reasoning,
            steps,
            segments_used: used,
            final_segments: shown,
            failures: done.failures,
            ..Trace::default()
        };
        trace.set_spans(&segment_spans(view));
        trace.set_cost(&before, &after);
        Ok(trace)
    }
}

#[derive(Deserialize)]
struct PathReply {
    #[serde(default)]
    path: Vec<Vec<String>>,
}

impl Chain {
    /// `chain-path-passagesN`: the question's path as triples with unknowns (one call), each
    /// triple whose subject is known asked as "What is the {relation} of {subject}?" over the
    /// subject's own passages and then the sub-question's own-hop passages (the triples found
    /// above them), its answer the triple's object; the question answered last from the
    /// triples found. At most `max_trials - 1` hops, so that the calls stay within
    /// `max_trials + 1`; a path that does not parse answers once from
    /// `bm25-own-hop-passagesN`'s context.
    #[allow(clippy::too_many_arguments)]
    async fn along_path(
        &self,
        ctx: &Ctx<'_>,
        nav: &NavigateConfig,
        view: &Memory,
        question: &str,
        options: &[String],
        q: &str,
        before: crate::llm::StageStats,
    ) -> Result<Trace, MethodError> {
        let max_path = nav.max_trials.max(2);
        let p = ctx
            .prompts
            .render(PromptId::ChainPath, &[("question", q)])
            .map_err(AnswerError::from)?;
        let schema = json!({"type": "object", "properties": {
            "path": {"type": "array", "minItems": 1, "maxItems": max_path,
                "items": {"type": "array", "minItems": 3, "maxItems": 3,
                    "items": {"type": "string", "maxLength": 120}}}
        }, "required": ["path"]});
        let mut failures = Vec::new();
        let path: Vec<[String; 3]> =
            match structured::<PathReply>(ctx, "chain_path", p, schema).await {
                Ok(r) => path_triples(r.path, max_path),
                Err(e) => {
                    failures.push(format!("path: {e}"));
                    Vec::new()
                }
            };
        let own_hop = Baseline::Bm25OwnHopPassages(self.passages);
        let plan = Step {
            kind: StepKind::Hop,
            reason: path
                .iter()
                .map(|t| t.join(" | "))
                .collect::<Vec<_>>()
                .join(" / "),
            note: format!("path: {} triple(s)", path.len()),
            ..Step::default()
        };
        if path.is_empty() {
            let plan = (plan, failures);
            return self
                .one_shot(
                    ctx,
                    view,
                    (question, options, q),
                    Over::Retrieved,
                    "no path",
                    plan,
                    before,
                )
                .await;
        }
        let ranked: Vec<usize> = Bm25::over(&view.segments)
            .rank(q)
            .into_iter()
            .map(|(u, _)| u)
            .collect();
        let titles = unit_titles(&view.segments);
        let mut hops = Hops {
            steps: vec![plan],
            failures,
            ..Hops::default()
        };
        // The unknowns found: `#k` and the object that filled it.
        let mut known: Vec<(String, String)> = Vec::new();
        let max_hops = max_path - 1;
        let mut asked = 0;
        let mut last: Option<(String, Vec<usize>)> = None;
        for [s, r, o] in &path {
            let subject = fill(s, &known);
            if names_unfound(&subject) {
                hops.notes
                    .push(format!("skipped \"{s} | {r}\": its subject was not found"));
                continue;
            }
            // A triple between two objects found is the comparison the final call makes; a
            // triple about a date or a number found is a step the model added, not a hop.
            if known.iter().any(|(k, _)| k == o) || (s != &subject && !is_name(&subject)) {
                hops.notes.push(format!(
                    "skipped \"{subject} | {r} | {o}\": not a hop (left to the final call)"
                ));
                continue;
            }
            let sub = format!("What is the {r} of {subject}?");
            // The subject's own passages by title, then the sub-question's best.
            let mut order = units_of(view, &titles, &ranked, &title_key(&subject), &[], false).0;
            let via = if order.is_empty() {
                "the sub-question's passages"
            } else {
                "the subject's own passages, then the sub-question's"
            };
            let shown = context(own_hop, ctx.prompts, ctx.embedder, ctx.window, view, &sub)?;
            for u in shown.segments {
                if !order.contains(&u) {
                    order.push(u);
                }
            }
            if asked == max_hops {
                last = Some((format!("\"{sub}\"'s (not asked)"), order));
                break;
            }
            asked += 1;
            let header = if hops.facts.is_empty() {
                String::new()
            } else {
                format!("Facts found so far:\n{}", facts_block(&hops.facts))
            };
            let (text, units) = self.under(ctx, view, &sub, &header, &order)?;
            let Answered {
                answer, mut step, ..
            } = answer_step(
                ctx.llm,
                ctx.prompts,
                &sub,
                &text,
                units.clone(),
                format!("hop {asked}: {sub} over {via}"),
            )
            .await?;
            let answer = answer.trim().to_string();
            step.kind = StepKind::Hop;
            step.entities = vec![subject.clone()];
            hops.used.extend(units.iter().copied());
            hops.read
                .extend(span::of_indices(&segment_spans(view), &units));
            last = Some((format!("\"{sub}\"'s"), units));
            if answer.is_empty() || says_missing(&answer).is_some() {
                step.reason = format!("{subject} | {r} | (not found)");
                step.note = format!(
                    "{}; no answer: the triples that need it are skipped",
                    step.note
                );
                hops.steps.push(step);
                continue;
            }
            let fact = [subject, r.clone(), answer.clone()];
            step.reason = fact.join(" | ");
            step.chosen = vec![ScoredEdge {
                text: fact.join(" | "),
                score: 1.0,
            }];
            hops.steps.push(step);
            if o.starts_with('#') {
                known.push((o.clone(), answer));
            }
            hops.facts.push(fact);
        }
        self.answer_last(ctx, view, question, options, q, last, hops, before)
            .await
    }
}

/// The path's triples as the model wrote them: three non-empty parts each (a triple
/// that is not is dropped), at most `max`.
fn path_triples(raw: Vec<Vec<String>>, max: usize) -> Vec<[String; 3]> {
    raw.into_iter()
        .filter_map(|t| match t.as_slice() {
            [s, r, o] if !s.trim().is_empty() && !r.trim().is_empty() && !o.trim().is_empty() => {
                Some([
                    s.trim().to_string(),
                    r.trim().to_string(),
                    o.trim().to_string(),
                ])
            }
            _ => None,
        })
        .take(max)
        .collect()
}

/// `s` with each unknown found (`#k`) replaced by its object, the longest names first and
/// then the higher (`#12` before `#2` before `#1`).
fn fill(s: &str, known: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = known.iter().collect();
    sorted.sort_by(|(a, _), (b, _)| b.len().cmp(&a.len()).then_with(|| b.cmp(a)));
    let mut out = s.to_string();
    for (k, v) in sorted {
        out = out.replace(k.as_str(), v);
    }
    out
}

impl Chain {
    /// The answer prompt's text for `q`: `header` (what the chain found; none when empty)
    /// above the units of `order` that fit in N tokens, the room counting the header as part
    /// of the question; and the units shown.
    fn under(
        &self,
        ctx: &Ctx<'_>,
        view: &Memory,
        q: &str,
        header: &str,
        order: &[usize],
    ) -> Result<(String, Vec<usize>), AnswerError> {
        let (passages, shown) = ctx.window.within(self.passages).fit(
            ctx.prompts,
            PromptId::Answer,
            &format!("{q}\n{header}"),
            view,
            order,
            &[],
        )?;
        let text = if header.is_empty() {
            passages
        } else {
            format!("{header}\n\n{passages}")
        };
        Ok((text, shown))
    }

    /// The question answered once from what `over` shows for it (`bm25-own-hop-passagesN`'s
    /// context, or the fixed text), after the plan step `plan.0` (a decomposition or a path
    /// that gave no hops, `why`) and its failures.
    #[allow(clippy::too_many_arguments)]
    async fn one_shot(
        &self,
        ctx: &Ctx<'_>,
        view: &Memory,
        (question, options, q): (&str, &[String], &str),
        over: Over<'_>,
        why: &str,
        (plan, failures): (Step, Vec<String>),
        before: crate::llm::StageStats,
    ) -> Result<Trace, MethodError> {
        let mut shown = over.shown(ctx, view, self.passages, q)?;
        shown.note = match over {
            Over::Retrieved => format!(
                "{why}: one-shot answer from {}'s context ({})",
                Baseline::Bm25OwnHopPassages(self.passages),
                shown.note
            ),
            Over::Fixed(_) => format!("{why}: one-shot answer ({})", shown.note),
        };
        let mut trace =
            one_prompt_answer(ctx, &self.name(), question, options, before, shown).await?;
        trace.steps.insert(0, plan);
        trace.failures = failures;
        Ok(trace)
    }
}

/// What came before a chain's last call: the units read, the trace steps, the failures.
struct Done {
    read: Vec<usize>,
    steps: Vec<Step>,
    failures: Vec<String>,
}

/// What a decomposition's hops found: the sub-questions answered with their answers, the
/// units and spans read, the trace steps, the failures and notes recorded.
#[derive(Default)]
struct Hops {
    found: Vec<(String, String)>,
    /// `chain-path-passagesN`: the triples found, in order.
    facts: Vec<[String; 3]>,
    used: Vec<usize>,
    read: Vec<Span>,
    steps: Vec<Step>,
    failures: Vec<String>,
    notes: Vec<String>,
}

/// The sub-questions answered, one a line (`1. Who directed Jaws? Steven Spielberg`); None
/// when there are none.
fn found_block(found: &[(String, String)]) -> Option<String> {
    (!found.is_empty()).then(|| numbered(found.iter().map(|(s, a)| format!("{s} {a}"))))
}

/// `lines`, numbered from 1, one a line (`1. ...`).
fn numbered(lines: impl Iterator<Item = String>) -> String {
    lines
        .enumerate()
        .map(|(i, l)| format!("{}. {l}", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether a sub-question still holds a `#k` placeholder (an answer not found, or a
/// decomposition that used `#1` before any answer).
fn names_unfound(sub: &str) -> bool {
    sub.as_bytes()
        .windows(2)
        .any(|w| w[0] == b'#' && w[1].is_ascii_digit())
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
            let named = reply.next.trim().to_string();
            // A fact already on the path is no new fact (small models copy the list).
            let stated = !fact[2].is_empty() && !walked.facts.contains(&fact);
            if stated {
                subjects.insert(title_key(&fact[0]));
                walked.facts.push(fact.clone());
            }
            // The next hop: the entity the model names, then the fact's object; each found by
            // title, else by BM25 where it is a name (a date or a number is an answer, not a
            // bridge). A small model leaves "next" empty after almost every first hop, so its
            // word alone never ends the chain.
            let mut next = String::new();
            let (mut next_units, mut how) = (Vec::new(), "none named: the chain ends");
            let object = if stated { fact[2].as_str() } else { "" };
            let candidates = [(named.as_str(), true), (object, is_name(object))];
            for (name, by_bm25) in candidates {
                let key = title_key(name);
                if key.is_empty() || subjects.contains(&key) {
                    continue;
                }
                let found = units_of(view, &titles, &ranked, &key, &walked.read, by_bm25);
                if !found.0.is_empty() && found.0 != shown {
                    subjects.insert(key);
                    next = name.to_string();
                    (next_units, how) = found;
                    break;
                }
                how = "no new passage: the chain ends";
            }
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
        structured::<HopReply>(ctx, "chain_hop", p, schema).await
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
            self.under(ctx, view, q, &header, &order)?
        };
        let note = format!(
            "{} fact(s) from {} hop(s); {} passage(s) shown",
            walked.facts.len(),
            walked.steps.len(),
            shown.len()
        );
        let done = Done {
            read: walked.read,
            steps: walked.steps,
            failures: walked.failures,
        };
        self.last_call(
            ctx,
            view,
            question,
            options,
            (q, text.as_str(), shown, note),
            done,
            before,
        )
        .await
    }
}

/// One structured call of stage `stage`: `prompt` as the user turn, the reply parsed against
/// `schema` with the service's retries.
async fn structured<T: serde::de::DeserializeOwned>(
    ctx: &Ctx<'_>,
    stage: &str,
    prompt: String,
    schema: serde_json::Value,
) -> Result<T, AnswerError> {
    let r = ctx
        .llm
        .chat_json::<T>(
            stage,
            vec![Message::user(prompt)],
            Some(JsonSchema {
                name: stage.into(),
                schema,
            }),
        )
        .await
        .map_err(|source| AnswerError::Step {
            step: stage.into(),
            source,
        })?;
    Ok(r.value)
}

/// Whether `s` reads as a name that may have passages of its own: a capital letter and no
/// digit ("Ralph Rapson", not "20 March 851" or "1,200").
fn is_name(s: &str) -> bool {
    s.chars().any(char::is_uppercase) && !s.chars().any(|c| c.is_ascii_digit())
}

/// The triples as sentences, one a line: `1. The director of Jaws is Steven Spielberg.`
fn said_block(facts: &[[String; 3]]) -> String {
    numbered(
        facts
            .iter()
            .map(|[s, r, o]| format!("The {r} of {s} is {o}.")),
    )
}

/// The triples, one a line: `1. subject | relation | object`.
pub fn facts_block(facts: &[[String; 3]]) -> String {
    numbered(facts.iter().map(|f| f.join(" | ")))
}

/// The passages of the entity `key` ([`title_key`] of its name): those titled with it (at
/// most [`HOP_UNITS`], in the question's BM25 order), else (`by_bm25`) the best passage for
/// the name by BM25 that no hop has read; and how they were found.
fn units_of(
    view: &Memory,
    titles: &[Vec<String>],
    ranked: &[usize],
    key: &str,
    read: &[usize],
    by_bm25: bool,
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
    if !by_bm25 {
        return (Vec::new(), "no passage of its own");
    }
    let best: Vec<usize> = Bm25::over(&view.segments)
        .rank(key)
        .into_iter()
        .filter(|&(u, s)| s > 0.0 && !read.contains(&u))
        .map(|(u, _)| u)
        .take(HOP_UNITS)
        .collect();
    if best.is_empty() {
        (Vec::new(), "no passage")
    } else {
        (best, "its best passages by BM25")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for name in [
            "chain-passages400",
            "chain-facts-passages200",
            "chain-decompose-passages400",
            "chain-decompose-final-passages400",
            "chain-path-passages400",
        ] {
            assert_eq!(parse(name).unwrap().to_string(), name);
        }
        for bad in [
            "chain-passages0",
            "chain-passages040",
            "chain-passages",
            "chain",
            "chain-facts-passages",
            "chain-decompose-final-passages",
            "chain-final-passages400",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_placeholder_left_is_an_answer_not_found() {
        assert!(names_unfound("Which film is #1?"));
        assert!(names_unfound("Where was #12 born?"));
        assert!(!names_unfound("Where was Luis Mandoki born?"));
        assert!(!names_unfound("Who won the #one prize?"));
        assert_eq!(found_block(&[]), None);
        assert_eq!(
            found_block(&[("Who directed Jaws?".into(), "Steven Spielberg".into())]).unwrap(),
            "1. Who directed Jaws? Steven Spielberg"
        );
    }

    #[test]
    fn a_path_fills_its_unknowns_in_order() {
        let raw = vec![
            vec!["Jaws".to_string(), "director".into(), "#1".into()],
            vec!["#1".to_string(), "mother".into()],
            vec!["#1".to_string(), " ".into(), "#2".into()],
            vec!["#1".to_string(), "mother".into(), "#2".into()],
            vec!["#2".to_string(), "date of death".into(), "#3".into()],
        ];
        let path = path_triples(raw, 4);
        assert_eq!(path.len(), 3);
        assert_eq!(path[1], ["#1".to_string(), "mother".into(), "#2".into()]);
        let known = vec![
            ("#1".to_string(), "Steven Spielberg".to_string()),
            ("#12".to_string(), "X".to_string()),
        ];
        assert_eq!(fill("#1", &known), "Steven Spielberg");
        assert_eq!(fill("#12 and #1", &known), "X and Steven Spielberg");
        assert!(names_unfound(&fill("#2", &known)));
        assert_eq!(path_triples(vec![], 4), Vec::<[String; 3]>::new());
    }

    #[test]
    fn facts_are_numbered_triples() {
        let f = [
            ["A".to_string(), "mother".into(), "B".into()],
            ["B".to_string(), "died".into(), "851".into()],
        ];
        assert_eq!(facts_block(&f), "1. A | mother | B\n2. B | died | 851");
        assert_eq!(
            said_block(&f),
            "1. The mother of A is B.\n2. The died of B is 851."
        );
    }
}
