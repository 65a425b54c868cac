//! Summary trees and cuts (seed 002, "Querying ultra-long contexts with summary trees").
//!
//! Leaves are the document's segments (in order; documents appended later add leaves at the
//! end). Internal nodes summarise their two children with `prompts/tree_summary.txt`, given as
//! prior context the top-level summaries of everything before them. The tree is left-heavy: a
//! span of n > 1 leaves splits into the largest power of two below n on the left and the rest on
//! the right, so the complete power-of-two subtrees never change when leaves are appended, and
//! appending re-summarises only the new right spine. Summaries are stored by span, which makes
//! that reuse automatic.
//!
//! Answering: a cut starts at the root; the LLM names the entry to refine with "INSUFFICIENT
//! DETAIL <n>" (`prompts/tree_cut.txt`; leaves are marked INELIGIBLE DOCUMENT), and that entry is
//! replaced by its children, until the cap on refinements, a reply naming no eligible entry, or
//! a refinement that would overflow the window; the answer comes from the final cut through the
//! shared answer prompt.
//!
//! Invariants: a summary of a span depends only on the leaves up to the span's end, so it is
//! computed once; a failed summary is recorded, never dropped: a reply cut off at max_tokens is
//! kept as it is, an empty or failed one is replaced by the concatenated child texts cut to the
//! window, a reply that repeats the prior context (`COPY_THRESHOLD`) is asked again without
//! the prior context, and one that repeats one of the two parts is replaced by the children's
//! text; the cut always covers every leaf exactly once, in order.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use regex::Regex;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::answer::{
    answer_step, option_letter, with_options, Answered, Step, StepKind, Trace, Window,
};
use crate::error::LlmError;
use crate::llm::{ChatReply, ChatRequest, LedgerSnapshot, Message, Service};
use crate::memory::StepFailure;
use crate::prompts::{PromptError, PromptId, Prompts};
use crate::text::{count_tokens, lcs_precision, segment, truncate_tokens};

pub const FORMAT: &str = "qrmem-summary-tree";
/// 2: summaries that repeat the prior context are asked again without it (version 1 trees
/// built by a small model could hold one copied text in every node). 3: a summary that repeats
/// one of its two parts is replaced by the children's text (in version 2 trees a parent could
/// be a copy of its first child, all the way to the root).
pub const VERSION: u32 = 3;

/// A node: `len` leaves from `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Span {
    pub start: usize,
    pub len: usize,
}

impl Span {
    /// The left-heavy split: the largest power of two strictly below `len` on the left.
    pub fn children(self) -> Option<(Span, Span)> {
        if self.len < 2 {
            return None;
        }
        let k = 1usize << (usize::BITS - 1 - (self.len - 1).leading_zeros());
        Some((
            Span {
                start: self.start,
                len: k,
            },
            Span {
                start: self.start + k,
                len: self.len - k,
            },
        ))
    }

    fn key(self) -> String {
        format!("{}+{}", self.start, self.len)
    }
}

/// Every internal span of a tree over `n` leaves, children before parents, left before right.
pub fn post_order(n: usize) -> Vec<Span> {
    fn walk(s: Span, out: &mut Vec<Span>) {
        if let Some((l, r)) = s.children() {
            walk(l, out);
            walk(r, out);
            out.push(s);
        }
    }
    let mut out = Vec::new();
    if n > 0 {
        walk(Span { start: 0, len: n }, &mut out);
    }
    out
}

/// The complete subtrees covering leaves `0..end` (the binary digits of `end`): the
/// top-level nodes that precede a span starting at `end`.
fn prefix_blocks(end: usize) -> Vec<Span> {
    let mut out = Vec::new();
    let mut start = 0;
    for bit in (0..usize::BITS).rev() {
        let size = 1usize << bit;
        if end - start >= size {
            out.push(Span { start, len: size });
            start += size;
        }
    }
    out
}

#[derive(Debug, Error)]
pub enum TreeError {
    #[error(transparent)]
    Prompt(#[from] PromptError),
    #[error("the document {0} is empty")]
    EmptyDocument(String),
    #[error("the summary tree is empty")]
    EmptyTree,
    #[error("the question is empty")]
    EmptyQuestion,
    #[error("the final answer failed: {0}")]
    Answer(String),
    /// The message names the file.
    #[error("{0}")]
    Read(String),
    /// The message names the file.
    #[error("{0}")]
    Write(String),
}

/// Build and cut settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TreeParams {
    pub leaf_tokens: usize,
    /// Prior context is cut to this many tokens (its most recent part).
    pub prior_context_tokens: usize,
    /// Refinements of a cut at most (the seed suggests a cap).
    pub max_refinements: usize,
}

impl Default for TreeParams {
    fn default() -> Self {
        TreeParams {
            leaf_tokens: 600,
            prior_context_tokens: 1000,
            max_refinements: 6,
        }
    }
}

/// The persisted tree.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SummaryTree {
    pub format: String,
    pub version: u32,
    pub model: String,
    pub params: TreeParams,
    pub leaves: Vec<String>,
    /// Span key ("start+len") -> summary.
    pub summaries: BTreeMap<String, String>,
    pub failures: Vec<StepFailure>,
    pub ledger: LedgerSnapshot,
    pub build_secs: f64,
}

impl SummaryTree {
    pub fn new(params: TreeParams, model: &str) -> Self {
        SummaryTree {
            format: FORMAT.into(),
            version: VERSION,
            model: model.into(),
            params,
            leaves: Vec::new(),
            summaries: BTreeMap::new(),
            failures: Vec::new(),
            ledger: LedgerSnapshot::default(),
            build_secs: 0.0,
        }
    }

    pub fn root(&self) -> Option<Span> {
        (!self.leaves.is_empty()).then_some(Span {
            start: 0,
            len: self.leaves.len(),
        })
    }

    /// The text shown for a node: a leaf's text, or the span's summary.
    pub fn text(&self, s: Span) -> &str {
        if s.len == 1 {
            self.leaves.get(s.start).map_or("", String::as_str)
        } else {
            self.summaries.get(&s.key()).map_or("", String::as_str)
        }
    }

    /// Records a summary request of `span` that failed, or was replaced, as a failure of the
    /// `tree_summary` step, in the ledger and in the tree's failures.
    fn fail_summary(&mut self, llm: &Service, span: Span, why: String) {
        llm.ledger().record_failed_step("tree_summary");
        self.failures.push(StepFailure {
            segment: Some(span.start),
            step: "tree_summary".into(),
            error: format!("span {}: {why}", span.key()),
        });
    }

    /// Appends `document` as new leaves and summarises every span that is new. Returns the
    /// number of summaries written.
    pub async fn append(
        &mut self,
        llm: &Service,
        prompts: &Prompts,
        window: Window,
        document: &str,
        name: &str,
    ) -> Result<usize, TreeError> {
        let started = Instant::now();
        let segs = segment(document, self.params.leaf_tokens);
        if segs.iter().all(|s| s.text.trim().is_empty()) {
            return Err(TreeError::EmptyDocument(name.to_string()));
        }
        self.leaves.extend(segs.into_iter().map(|s| s.text));
        let overhead = count_tokens(&prompts.render(
            PromptId::TreeSummary,
            &[("prior_context", ""), ("entries", "")],
        )?);
        let budget = window
            .prompt_budget()
            .saturating_sub(overhead + self.params.prior_context_tokens);
        let mut written = 0;
        for span in post_order(self.leaves.len()) {
            if self.summaries.contains_key(&span.key()) {
                continue;
            }
            let Some((l, r)) = span.children() else {
                continue;
            };
            let prior: Vec<&str> = prefix_blocks(span.start)
                .into_iter()
                .map(|b| self.text(b))
                .collect();
            let prior =
                truncate_tokens(&prior.join("\n\n"), self.params.prior_context_tokens, true);
            let half = budget / 2;
            let parts = [
                truncate_tokens(self.text(l), half, false),
                truncate_tokens(self.text(r), half, false),
            ];
            let entries = format!("Part 1:\n{}\n\nPart 2:\n{}", parts[0], parts[1]);
            let mut reply = ask_summary(llm, prompts, &prior, &entries).await?;
            if let Some(share) = reply.as_ref().ok().and_then(|r| copies(&r.content, &prior)) {
                // A small model can repeat the prior context instead of summarising the
                // parts; every node above would then inherit the same text.
                self.fail_summary(
                    llm,
                    span,
                    format!(
                        "the reply repeats the prior context ({:.0}% of its words, in order); \
                         asked again without it",
                        share * 100.0
                    ),
                );
                reply = ask_summary(llm, prompts, "", &entries).await?;
            }
            // A reply that repeats one of the parts summarises neither: the other part would be
            // lost from every node above, so the children's text stands in.
            let copied_part = reply.as_ref().ok().and_then(|r| {
                (1..)
                    .zip(&parts)
                    .find_map(|(n, p)| copies(&r.content, p).map(|share| (n, share)))
            });
            let summary = if let Some((n, share)) = copied_part {
                self.fail_summary(
                    llm,
                    span,
                    format!(
                        "the reply repeats part {n} ({:.0}% of its words, in order); the \
                         children's text stands in",
                        share * 100.0
                    ),
                );
                truncate_tokens(&entries, budget, false)
            } else {
                match reply {
                    Ok(reply) if !reply.content.trim().is_empty() && !reply.was_cut_off() => {
                        reply.content.trim().to_string()
                    }
                    Ok(reply) if !reply.content.trim().is_empty() => {
                        self.fail_summary(
                            llm,
                            span,
                            "cut off at max_tokens; the cut-off reply is kept".into(),
                        );
                        reply.content.trim().to_string()
                    }
                    Ok(_) => {
                        self.fail_summary(
                            llm,
                            span,
                            "empty reply; the children's text stands in".into(),
                        );
                        truncate_tokens(&entries, budget, false)
                    }
                    Err(e) => {
                        self.fail_summary(llm, span, format!("{e}; the children's text stands in"));
                        truncate_tokens(&entries, budget, false)
                    }
                }
            };
            self.summaries.insert(span.key(), summary);
            written += 1;
        }
        self.build_secs += started.elapsed().as_secs_f64();
        Ok(written)
    }

    /// Answers `question` from a cut refined by the LLM.
    pub async fn ask(
        &self,
        llm: &Service,
        prompts: &Prompts,
        window: Window,
        question: &str,
        options: &[String],
    ) -> Result<Trace, TreeError> {
        if question.trim().is_empty() {
            return Err(TreeError::EmptyQuestion);
        }
        let root = self.root().ok_or(TreeError::EmptyTree)?;
        let before = llm.ledger().snapshot().total();
        let q = with_options(question, options);
        let cut_overhead =
            count_tokens(&prompts.render(PromptId::TreeCut, &[("question", &q), ("entries", "")])?);
        let answer_overhead =
            count_tokens(&prompts.render(PromptId::Answer, &[("question", &q), ("segments", "")])?);
        let budget = window
            .prompt_budget()
            .saturating_sub(cut_overhead.max(answer_overhead));
        let mut cut = vec![root];
        let mut steps = Vec::new();
        let mut failures = Vec::new();
        let marker = Regex::new(r"(?i)INSUFFICIENT\s+DETAIL\W{0,3}(\d+)")
            .map_err(|e| TreeError::Answer(e.to_string()))?;
        for _ in 0..self.params.max_refinements {
            if cut.iter().all(|s| s.len == 1) {
                break;
            }
            let entries = self.render_cut(&cut);
            let prompt = prompts.render(
                PromptId::TreeCut,
                &[("question", &q), ("entries", &entries)],
            )?;
            let request = ChatRequest {
                messages: vec![Message::user(prompt)],
                sampling: llm.sampling(),
                schema: None,
            };
            let reply = match llm.chat("tree_cut", &request).await {
                Ok(r) => r.content,
                Err(e) => {
                    failures.push(format!("tree_cut: {e}"));
                    break;
                }
            };
            // The first number that names an eligible entry.
            let pick = marker
                .captures_iter(&reply)
                .filter_map(|c| c.get(1)?.as_str().parse::<usize>().ok())
                .find(|&n| n >= 1 && n <= cut.len() && cut[n - 1].len > 1);
            let Some(n) = pick else {
                steps.push(Step {
                    kind: StepKind::Cut,
                    note: "the reply names no eligible entry: the cut stands".into(),
                    reason: reply.chars().take(300).collect(),
                    ..Step::default()
                });
                break;
            };
            let node = cut[n - 1];
            let Some((l, r)) = node.children() else { break };
            let mut next = cut.clone();
            next.splice(n - 1..n, [l, r]);
            let size = count_tokens(&self.render_cut(&next));
            if size > budget {
                steps.push(Step {
                    kind: StepKind::Cut,
                    note: format!("refining entry {n} ({}) would take {size} tokens, over the window's {budget}: the cut stands", node.key()),
                    reason: reply.chars().take(300).collect(),
                    ..Step::default()
                });
                break;
            }
            steps.push(Step {
                kind: StepKind::Cut,
                segments: (node.start..node.start + node.len).collect(),
                note: format!(
                    "INSUFFICIENT DETAIL {n}: span {} -> {} + {}",
                    node.key(),
                    l.key(),
                    r.key()
                ),
                reason: reply.chars().take(300).collect(),
                ..Step::default()
            });
            cut = next;
        }
        let text = truncate_tokens(&self.render_plain(&cut), budget, false);
        let leaves: Vec<usize> = cut.iter().filter(|s| s.len == 1).map(|s| s.start).collect();
        let note = format!(
            "final cut: {}",
            cut.iter().map(|s| s.key()).collect::<Vec<_>>().join(", ")
        );
        let Answered {
            answer,
            reasoning,
            step,
        } = answer_step(llm, prompts, &q, &text, leaves.clone(), note)
            .await
            .map_err(|e| TreeError::Answer(e.to_string()))?;
        let answer = if options.is_empty() {
            answer.trim().to_string()
        } else {
            option_letter(&answer, options)
        };
        steps.push(step);
        let after = llm.ledger().snapshot().total();
        let mut trace = Trace {
            method: "summary-tree".into(),
            question: question.to_string(),
            answer,
            answered: false,
            reasoning,
            start_entities: vec![],
            steps,
            segments_used: leaves.clone(),
            final_segments: leaves,
            failures,
            ..Trace::default()
        };
        trace.set_cost(&before, &after);
        trace.set_spans(&self.leaf_spans());
        Ok(trace)
    }

    /// The byte range of every leaf in the text the tree was built from (its documents, in
    /// order: leaves are segments, which cover their document exactly).
    pub fn leaf_spans(&self) -> Vec<crate::text::Span> {
        crate::text::span::consecutive(self.leaves.iter().map(String::as_str))
    }

    /// The cut as the cut prompt shows it: numbered, leaves marked ineligible.
    fn render_cut(&self, cut: &[Span]) -> String {
        cut.iter()
            .enumerate()
            .map(|(i, s)| {
                if s.len == 1 {
                    format!("{}. INELIGIBLE DOCUMENT\n{}", i + 1, self.text(*s))
                } else {
                    format!("{}. {}", i + 1, self.text(*s))
                }
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    fn render_plain(&self, cut: &[Span]) -> String {
        cut.iter()
            .map(|s| self.text(*s))
            .collect::<Vec<_>>()
            .join("\n\n")
    }
}

/// The summary-tree cuts (seed 002) as a method.
#[derive(Clone, Copy, Debug)]
pub struct SummaryTreeMethod;

pub const FAMILY: super::method::Family = super::method::Family {
    names: || "summary-tree".to_string(),
    parse: |name| {
        (name == "summary-tree").then(|| super::method::MethodSpec::new(SummaryTreeMethod))
    },
};

#[async_trait::async_trait]
impl super::method::Method for SummaryTreeMethod {
    fn name(&self) -> String {
        "summary-tree".into()
    }

    fn memory_kind(&self) -> super::MemoryKind {
        super::MemoryKind::SummaryTree
    }

    async fn answer(
        &self,
        ctx: &super::Ctx<'_>,
        _nav: &crate::config::NavigateConfig,
        prepared: &super::Prepared,
        question: &str,
        options: &[String],
    ) -> Result<Trace, super::MethodError> {
        let super::Prepared::Tree(t) = prepared else {
            return Err(super::method::wrong_memory(self, prepared));
        };
        Ok(t.ask(ctx.llm, ctx.prompts, ctx.window, question, options)
            .await?)
    }

    fn recorded_context(&self) -> super::Recorded {
        // The final cut's leaves, shown verbatim.
        super::Recorded::Units
    }
}

/// Writes the tree atomically.
pub fn save(tree: &SummaryTree, path: &Path) -> Result<(), TreeError> {
    let bytes = serde_json::to_vec(tree)
        .map_err(|e| TreeError::Write(format!("cannot serialise the summary tree: {e}")))?;
    crate::fsutil::write_atomic(path, &bytes).map_err(TreeError::Write)
}

/// A summary whose words are at least this share of the prior context's, in order, copies it
/// (`lcs_precision`); genuine summaries that tie back to the prior context in a sentence or
/// two stay far below it.
pub const COPY_THRESHOLD: f64 = 0.8;

/// When `reply` copies `source`: the share of the reply's words found in `source` in order
/// (`lcs_precision`), if it reaches `COPY_THRESHOLD`; `None` for an empty reply or source.
fn copies(reply: &str, source: &str) -> Option<f64> {
    if reply.trim().is_empty() || source.trim().is_empty() {
        return None;
    }
    Some(lcs_precision(reply, source)).filter(|share| *share >= COPY_THRESHOLD)
}

/// One summary request: the parts `entries` with `prior` as their prior context. The outer
/// error is the prompt's; the inner one the LLM's, which the caller records.
async fn ask_summary(
    llm: &Service,
    prompts: &Prompts,
    prior: &str,
    entries: &str,
) -> Result<Result<ChatReply, LlmError>, TreeError> {
    let prompt = prompts.render(
        PromptId::TreeSummary,
        &[("prior_context", prior), ("entries", entries)],
    )?;
    let request = ChatRequest {
        messages: vec![Message::user(prompt)],
        sampling: llm.sampling(),
        schema: None,
    };
    Ok(llm.chat("tree_summary", &request).await)
}

/// Reads a tree, checking its format and version.
pub fn load(path: &Path) -> Result<SummaryTree, TreeError> {
    crate::fsutil::read_versioned(path, FORMAT, VERSION, "summary tree").map_err(TreeError::Read)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(s: Span) -> String {
        match s.children() {
            None => "x".into(),
            Some((l, r)) => format!("({} {})", shape(l), shape(r)),
        }
    }

    #[test]
    fn left_heavy_shapes_for_one_to_nine_leaves() {
        let expected = [
            "x",
            "(x x)",
            "((x x) x)",
            "((x x) (x x))",
            "(((x x) (x x)) x)",
            "(((x x) (x x)) (x x))",
            "(((x x) (x x)) ((x x) x))",
            "(((x x) (x x)) ((x x) (x x)))",
            "((((x x) (x x)) ((x x) (x x))) x)",
        ];
        for (i, e) in expected.iter().enumerate() {
            assert_eq!(
                shape(Span {
                    start: 0,
                    len: i + 1
                }),
                *e,
                "{} leaves",
                i + 1
            );
            assert_eq!(post_order(i + 1).len(), i, "n - 1 internal nodes");
        }
        // Appending never changes an existing complete block: the spans of n leaves that are not
        // spans of n + 1 leaves lie on the right spine only.
        for n in 1..40usize {
            let old: std::collections::BTreeSet<Span> = post_order(n).into_iter().collect();
            let new: std::collections::BTreeSet<Span> = post_order(n + 1).into_iter().collect();
            for s in old.difference(&new) {
                assert_eq!(
                    s.start + s.len,
                    n,
                    "only spans ending at the old end change: {s:?}"
                );
            }
        }
    }

    #[test]
    fn prefix_blocks_are_the_binary_digits() {
        let b = prefix_blocks(13);
        assert_eq!(
            b,
            vec![
                Span { start: 0, len: 8 },
                Span { start: 8, len: 4 },
                Span { start: 12, len: 1 }
            ]
        );
        assert!(prefix_blocks(0).is_empty());
    }
}
