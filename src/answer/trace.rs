//! The trace every method returns: the answer, each step with what its prompt showed, the
//! document ranges shown, and what the question cost.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::llm::StageStats;
use crate::text::span::{self, Span};

/// An edge considered in a step, with its score.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScoredEdge {
    pub text: String,
    pub score: f32,
}

/// What a trace step did. Serialised as the names traces have always carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// The start: the question's entities linked to the graph (E_s).
    #[default]
    Start,
    /// An answerability check (Appendix E).
    Answerability,
    /// A KN trial: a neighbour whose segments changed what the next check shows (or the end of
    /// the expansions, with `ended`).
    Expand,
    /// A neighbour that changed nothing shown: no trial spent.
    ExpandIdle,
    /// A GES expansion round.
    GesExpand,
    /// GES's elaborated query.
    Elaborate,
    /// A TE entity update.
    TeUpdate,
    /// The final answer prompt.
    Answer,
    /// A summary-tree cut.
    Cut,
    /// GARLIC's enough-information check.
    Check,
    /// GARLIC's search stopping.
    Stop,
    /// GARLIC visiting a node.
    Visit,
    /// A Knowledge Tree / MemWalker choice of a child.
    Choose,
    /// A Knowledge Tree / MemWalker leaf read.
    Leaf,
    /// MemWalker going back up.
    Revert,
    /// A chain hop: one fact read from the hop entity's passages, and the entity it leads to.
    Hop,
}

impl StepKind {
    /// The name traces carry.
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Start => "start",
            StepKind::Answerability => "answerability",
            StepKind::Expand => "expand",
            StepKind::ExpandIdle => "expand_idle",
            StepKind::GesExpand => "ges_expand",
            StepKind::Elaborate => "elaborate",
            StepKind::TeUpdate => "te_update",
            StepKind::Answer => "answer",
            StepKind::Cut => "cut",
            StepKind::Check => "check",
            StepKind::Stop => "stop",
            StepKind::Visit => "visit",
            StepKind::Choose => "choose",
            StepKind::Leaf => "leaf",
            StepKind::Revert => "revert",
            StepKind::Hop => "hop",
        }
    }
}

impl fmt::Display for StepKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for StepKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// One step of a navigation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub kind: StepKind,
    /// The entity set after the step.
    pub entities: Vec<String>,
    /// The best-scored candidate edges (at most 5), best first.
    pub candidates: Vec<ScoredEdge>,
    /// The edge chosen (KN) or the edges that passed the threshold (GES).
    pub chosen: Vec<ScoredEdge>,
    /// Segments sent in the prompt of this step (original order).
    pub segments: Vec<usize>,
    /// S_add after the step: (segment, score).
    pub s_add: Vec<(usize, f32)>,
    /// -2 answered, -1 cannot (answerability steps).
    pub action: Option<i32>,
    /// The reasoning or the failure reason R.
    pub reason: String,
    pub note: String,
    /// An answerability check whose reply never parsed (counted as -1).
    #[serde(default, skip_serializing_if = "is_false")]
    pub failed: bool,
    /// An expansion step that found no neighbour left to take: navigation ends.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ended: bool,
    /// Answerability steps: the probability the model gave the "answerable" action (-2) at the
    /// action token, when the server returned log probabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_answerable: Option<f64>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What `ask` returns: the answer and its trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// kn, ges, te, or a baseline's name (bm25-top3, ...).
    pub method: String,
    pub question: String,
    pub answer: String,
    /// Whether an answerability check said -2 (false: answered from the final segments).
    pub answered: bool,
    pub reasoning: String,
    /// E_s as linked from the question.
    pub start_entities: Vec<String>,
    pub steps: Vec<Step>,
    /// Every segment any prompt of this question showed the LLM.
    pub segments_used: Vec<usize>,
    /// The segments of the final answer prompt.
    pub final_segments: Vec<usize>,
    /// LLM requests and tokens of this question (the ledger delta).
    pub requests: u64,
    pub cache_hits: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Steps that failed and were recorded (navigation went on).
    pub failures: Vec<String>,
    /// The byte ranges of the document shown verbatim in the final answer prompt (merged).
    /// Summaries are not spans of the document and are not counted.
    #[serde(default)]
    pub answer_spans: Vec<Span>,
    /// The byte ranges of the document shown in any prompt of this question, the answer's
    /// included (merged).
    #[serde(default)]
    pub read_spans: Vec<Span>,
    /// |S_imp| before the window was applied (the graph navigators; None for other methods).
    #[serde(default)]
    pub s_imp: Option<usize>,
    /// |S_imp| after ranking and the start share (KN, TE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s_imp_kept: Option<usize>,
}

impl Trace {
    /// Sets `answer_spans` and `read_spans` from `final_segments` and `segments_used`, given
    /// the byte range of every unit (segment, leaf, chunk) those indices refer to.
    pub fn set_spans(&mut self, units: &[Span]) {
        self.answer_spans = span::of_indices(units, &self.final_segments);
        self.read_spans = span::of_indices(units, &self.segments_used);
    }

    /// Sets the question's LLM cost from the ledger's totals before and after it.
    pub fn set_cost(&mut self, before: &StageStats, after: &StageStats) {
        self.requests = after.requests - before.requests;
        self.cache_hits = after.cache_hits - before.cache_hits;
        self.prompt_tokens = after.prompt_tokens - before.prompt_tokens;
        self.completion_tokens = after.completion_tokens - before.completion_tokens;
    }

    /// The readable summary the CLI prints.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "method {}  answered by check: {}  steps {}  requests {} (+{} cached)  tokens {} prompt / {} completion\n",
            self.method,
            self.answered,
            self.steps.len(),
            self.requests,
            self.cache_hits,
            self.prompt_tokens,
            self.completion_tokens
        );
        s.push_str(&format!(
            "start entities: {}\n",
            self.start_entities.join(", ")
        ));
        for (i, st) in self.steps.iter().enumerate() {
            s.push_str(&format!(
                "  {:>2}. {:<14} segments {:?}",
                i + 1,
                st.kind,
                st.segments
            ));
            if let Some(a) = st.action {
                s.push_str(&format!(" action {a}"));
            }
            if let Some(c) = st.chosen.first() {
                s.push_str(&format!(" chose [{:.3}] {}", c.score, c.text));
            }
            if !st.note.is_empty() {
                s.push_str(&format!(" ({})", st.note));
            }
            s.push('\n');
        }
        s.push_str(&format!("segments used: {:?}\n", self.segments_used));
        for f in &self.failures {
            s.push_str(&format!("failure: {f}\n"));
        }
        s
    }
}
