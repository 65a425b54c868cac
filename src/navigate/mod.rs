//! Navigation (QRMeM section 2.2): link the question's entities to the graph (E_s, `start`),
//! rank S_imp (`rank`), then QRMeM-KN (Algorithm 1, `kn`), Graph Expansion Search (`ges`) or
//! Entity Trial (`te`), with the answerability check (`check`) and the final answer prompt
//! (here, or at sentence grain in `sentences`), every prompt within the context window L; the
//! per-question diagnostics are read from the trace (`diagnostics`).

mod bridge;
pub(crate) mod check;
mod diagnostics;
mod ges;
mod kn;
mod rank;
mod sentences;
mod start;
mod te;

pub use diagnostics::{CheckRecord, NavDiagnostics};

pub(crate) use check::Check;
pub(crate) use rank::{add_scored, fuse_ranks};

use std::collections::BTreeSet;

use petgraph::stable_graph::{EdgeIndex, NodeIndex};
use thiserror::Error;

use crate::answer::{
    answer_step, option_letter, with_options, AnswerError, Answered, Step, Trace, Window,
};
use crate::config::{AnswerConfig, NavMethod, NavigateConfig};
use crate::embed::{EmbedError, Embedder};
use crate::error::LlmError;
use crate::llm::Service;
use crate::memory::Memory;
use crate::prompts::{PromptError, PromptId, Prompts};
use crate::text::span::{self, Span};

#[derive(Debug, Error)]
pub enum NavigateError {
    #[error(transparent)]
    Prompt(#[from] PromptError),
    #[error("embedding failed: {0}")]
    Embed(#[from] EmbedError),
    /// A step the navigation cannot go on without (the final answer) failed.
    #[error("navigation step '{step}' failed: {source}")]
    Step { step: String, source: LlmError },
    #[error("the question is empty")]
    EmptyQuestion,
    #[error("the memory has no segments")]
    EmptyMemory,
    #[error(transparent)]
    Answer(#[from] AnswerError),
}

pub struct Navigator<'a> {
    pub(crate) llm: &'a Service,
    pub(crate) prompts: &'a Prompts,
    pub(crate) embedder: &'a dyn Embedder,
    pub(crate) memory: &'a Memory,
    pub(crate) opts: NavigateConfig,
    /// The final answer step's settings (`[answer]` with the method name's modifiers).
    pub(crate) answer: AnswerConfig,
    pub(crate) window: Window,
}

/// Mutable state of one question's navigation.
pub(crate) struct Run {
    pub question: String,
    pub steps: Vec<Step>,
    pub used: BTreeSet<usize>,
    pub failures: Vec<String>,
    /// |S_imp| before the window (set by the navigator).
    pub s_imp: Option<usize>,
    /// |S_imp| after ranking and the start share.
    pub s_imp_kept: Option<usize>,
    /// The question has options (the answer may be an option's text).
    pub multiple_choice: bool,
    /// The entities a sentence-grain answer context looks for: E_s, then the path's.
    pub focus: BTreeSet<NodeIndex>,
    /// The document ranges the final answer prompt showed, when it showed sentences rather
    /// than whole segments.
    pub answer_spans: Option<Vec<Span>>,
    /// KN: the relation edges its trials followed, in order (`answer.path` shows
    /// them to the final answer).
    pub path: Vec<EdgeIndex>,
}

impl Run {
    pub fn push(&mut self, step: Step) {
        self.used.extend(step.segments.iter().copied());
        self.steps.push(step);
    }
}

impl<'a> Navigator<'a> {
    pub fn new(
        llm: &'a Service,
        prompts: &'a Prompts,
        embedder: &'a dyn Embedder,
        memory: &'a Memory,
        opts: NavigateConfig,
        window: Window,
    ) -> Self {
        Navigator {
            llm,
            prompts,
            embedder,
            memory,
            opts,
            answer: AnswerConfig::default(),
            window,
        }
    }

    /// This navigator with `answer` as its final answer step's settings (default: the
    /// paper's, whole units in document order).
    pub fn answering(self, answer: AnswerConfig) -> Self {
        Navigator { answer, ..self }
    }

    /// Answers `question` (with `options` for multiple choice: the answer is then the letter).
    pub async fn ask(&self, question: &str, options: &[String]) -> Result<Trace, NavigateError> {
        if question.trim().is_empty() {
            return Err(NavigateError::EmptyQuestion);
        }
        if self.memory.segments.is_empty() {
            return Err(NavigateError::EmptyMemory);
        }
        let before = self.llm.ledger().snapshot().total();
        let full_question = with_options(question, options);
        let mut run = Run {
            question: full_question,
            steps: Vec::new(),
            used: BTreeSet::new(),
            failures: Vec::new(),
            s_imp: None,
            s_imp_kept: None,
            multiple_choice: !options.is_empty(),
            focus: BTreeSet::new(),
            answer_spans: None,
            path: Vec::new(),
        };
        let start = self.start(&mut run).await?;
        run.focus = start.clone();
        let all = self.segments_of(&start);
        run.s_imp = Some(all.len());
        let start_names = self.names(&start);
        let outcome = match self.opts.method {
            NavMethod::Kn | NavMethod::Te => {
                // S_imp, ranked and cut to the start share of the window.
                let (ranked, [lexical, dense, weight]) =
                    self.rank_segments_by_signal(&run.question, &all, &start)?;
                // The second hop (`navigate.start_bridge`): the best segment, then the segments
                // that name its bridge entities, from the whole document; or the hop
                // (`navigate.start_hop`): the best unit, then its entities' own passages.
                let (ranked, bridges) = if self.opts.start_bridge {
                    let (order, names) = self.bridge_order(&start, &ranked);
                    (order, Some(("second-hop order (bridge entities", names)))
                } else if self.opts.start_hop {
                    let (order, names) = self.hop_order(&run.question, &start, &ranked);
                    (order, Some(("hop order (own passages of", names)))
                } else {
                    (ranked, None)
                };
                let s_imp = self.start_share_of(&run.question, &ranked)?;
                run.s_imp_kept = Some(s_imp.len());
                if let Some(step) = run.steps.last_mut() {
                    step.note.push_str(&format!(
                        "; |E_s| {}, |S_imp| {} ranked {:?}, kept {:?}; by BM25 {:?}, by the embedder {:?}, by entity weight {:?}",
                        start.len(),
                        all.len(),
                        ranked.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
                        s_imp,
                        lexical,
                        dense,
                        weight
                    ));
                    if let Some((how, names)) = bridges {
                        step.note.push_str(&format!("; {how} {names:?})"));
                    }
                }
                if self.opts.method == NavMethod::Kn {
                    let order: Vec<usize> = ranked.iter().map(|&(s, _)| s).collect();
                    self.kn(&mut run, &start, &s_imp, &order).await?
                } else {
                    self.te(&mut run, &start, &s_imp).await?
                }
            }
            NavMethod::Ges => self.ges(&mut run, &start).await?,
        };
        let after = self.llm.ledger().snapshot().total();
        let answer_spans = run.answer_spans.take();
        let answer = if options.is_empty() {
            outcome.answer.trim().to_string()
        } else {
            option_letter(&outcome.answer, options)
        };
        let mut trace = Trace {
            method: self.opts.method.to_string(),
            question: question.to_string(),
            answer,
            answered: outcome.answered,
            reasoning: outcome.reasoning,
            start_entities: start_names,
            final_segments: run
                .steps
                .last()
                .map(|s| s.segments.clone())
                .unwrap_or_default(),
            segments_used: run.used.iter().copied().collect(),
            steps: run.steps,
            failures: run.failures,
            answer_spans: vec![],
            read_spans: vec![],
            s_imp: run.s_imp,
            s_imp_kept: run.s_imp_kept,
            ..Trace::default()
        };
        trace.set_cost(&before, &after);
        let units: Vec<Span> = self
            .memory
            .segments
            .iter()
            .map(|s| (s.start, s.end))
            .collect();
        trace.set_spans(&units);
        if let Some(shown) = answer_spans {
            // Sentences, not whole segments: the answer showed these ranges; the checks showed
            // whole segments.
            let mut read = trace.read_spans.clone();
            read.extend(&shown);
            trace.read_spans = span::merge(read);
            trace.answer_spans = shown;
        }
        Ok(trace)
    }

    pub(crate) fn names(&self, nodes: &BTreeSet<NodeIndex>) -> Vec<String> {
        nodes
            .iter()
            .map(|&n| self.memory.graph[n].name.clone())
            .collect()
    }

    /// Segments of a set of entities (the bipartite index).
    pub(crate) fn segments_of(&self, nodes: &BTreeSet<NodeIndex>) -> BTreeSet<usize> {
        nodes
            .iter()
            .flat_map(|&n| self.memory.graph[n].segments.iter().copied())
            .collect()
    }

    /// `text` with the path's relations above it when `answer.path` is on and the
    /// trials followed any (each `head | description | tail`, in the order followed), and the
    /// note the answer step records about them (empty when nothing was added).
    pub(crate) fn with_path(&self, run: &Run, text: String) -> (String, String) {
        if !self.answer.path {
            return (text, String::new());
        }
        let lines: Vec<String> = run
            .path
            .iter()
            .filter_map(|&e| self.memory.edge_text(e))
            .collect();
        if lines.is_empty() {
            return (text, "; no path to show".to_string());
        }
        let block = format!(
            "Relations that lead from the question's entities to the passages below (entity | relation | entity):\n{}\n\n{text}",
            lines.join("\n")
        );
        (block, format!("; path shown: {lines:?}"))
    }

    /// The context window L every prompt fits (the one the caller's context holds).
    pub(crate) fn window(&self) -> Window {
        self.window
    }

    /// The final answer from `segments` (kept first, in their order) and then `scores` (by
    /// score) while they fit, at most `answer.max_units` of them when that is not 0;
    /// the prompt shows them in the configured answer order.
    pub(crate) async fn final_answer(
        &self,
        run: &mut Run,
        segments: &[usize],
        scores: &[(usize, f32)],
        note: &str,
    ) -> Result<Check, NavigateError> {
        if self.answer.sentence_tokens > 0 {
            let mut order: Vec<usize> = segments.to_vec();
            for &(s, _) in scores {
                if !order.contains(&s) {
                    order.push(s);
                }
            }
            return self.sentence_answer(run, &order, note).await;
        }
        let (text, shown) = self.window().at_most(self.answer.max_units).fit_ordered(
            self.prompts,
            PromptId::Answer,
            &run.question,
            self.memory,
            segments,
            scores,
            self.answer.order,
        )?;
        self.answer_with_path(run, text, shown, note).await
    }

    /// The final answer prompt over `text` (the path's relations above it when
    /// `answer.path` is on), recorded as the answer step showing `units` with `note`.
    pub(crate) async fn answer_with_path(
        &self,
        run: &mut Run,
        text: String,
        units: Vec<usize>,
        note: &str,
    ) -> Result<Check, NavigateError> {
        let (text, path_note) = self.with_path(run, text);
        let Answered {
            answer,
            reasoning,
            step,
        } = answer_step(
            self.llm,
            self.prompts,
            &run.question,
            &text,
            units,
            format!("{note}{path_note}"),
        )
        .await?;
        run.push(step);
        Ok(Check {
            answer,
            reasoning,
            ..Check::default()
        })
    }
}
