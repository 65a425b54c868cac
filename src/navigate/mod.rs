//! Navigation and answering (QRMeM section 2.2): link the question's entities to the graph
//! (E_s, S_imp), then QRMeM-KN (Algorithm 1), Graph Expansion Search or Entity Trial, every
//! prompt within the context window L, and a trace of every step.

mod ges;
mod kn;
mod sentences;
mod te;
mod window;

pub use window::{FinalContext, Order, Window};

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use petgraph::stable_graph::NodeIndex;
use serde::{Deserialize, Serialize};
use serde_json::json;
use thiserror::Error;

use crate::config::NavigateConfig;
use crate::embed::{EmbedError, Embedder};
use crate::error::LlmError;
use crate::llm::{JsonSchema, LedgerSnapshot, Message, Service};
use crate::memory::merge::{english_stemmer, normalize, same_entity};
use crate::memory::{Entity, Memory};
use crate::prompts::{PromptError, PromptId, Prompts};
use crate::text::span::{self, Span};
use crate::text::Bm25;

/// The constant of reciprocal-rank fusion (Cormack et al. 2009).
const RRF_K: f64 = 60.0;

fn default_rank_weights() -> [f64; 3] {
    crate::config::NavigateConfig::default().rank_weights
}

/// Each fused signal's own order of the segments, best first: BM25, the embedder, the entity
/// weight.
pub(crate) type SignalOrders = [Vec<usize>; 3];

/// Reciprocal-rank fusion of `signals`, each an order of (item, value) best first with its
/// weight. Equal values share a rank, so a signal that cannot tell items apart adds nothing to
/// their order; a signal of weight 0 adds nothing at all.
pub(crate) fn fuse_ranks(signals: &[(&[(usize, f64)], f64)]) -> BTreeMap<usize, f64> {
    let mut fused: BTreeMap<usize, f64> = BTreeMap::new();
    for &(list, w) in signals {
        if w == 0.0 {
            continue;
        }
        let mut rank = 0usize;
        let mut prev: Option<f64> = None;
        for (i, &(item, x)) in list.iter().enumerate() {
            if prev != Some(x) {
                rank = i;
                prev = Some(x);
            }
            *fused.entry(item).or_default() += w / (RRF_K + rank as f64 + 1.0);
        }
    }
    fused
}

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
}

/// The three navigators of the paper.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// QRMeM-KN: reflection-based knowledge navigation (Algorithm 1).
    Kn,
    /// QRMeM-GES: Graph Expansion Search.
    Ges,
    /// QRMeM-TE: Entity Trial on the bipartite entity-segment graph.
    Te,
}

impl FromStr for Method {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "kn" => Ok(Method::Kn),
            "ges" => Ok(Method::Ges),
            "te" => Ok(Method::Te),
            other => Err(format!("unknown method '{other}' (kn, ges or te)")),
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Method::Kn => "kn",
            Method::Ges => "ges",
            Method::Te => "te",
        })
    }
}

/// Navigation settings (from `[navigate]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Options {
    pub method: Method,
    pub context_window: usize,
    pub reply_tokens: usize,
    pub max_trials: usize,
    pub ges_threshold: f32,
    pub ges_max_iterations: usize,
    /// Ablation: score edges with [Q; R; E_s] (true) or Q only (false).
    pub reflection: bool,
    /// Ablation: navigate (true) or answer from S_imp only (false).
    pub navigation: bool,
    /// The share of the window's segment room the ranked start S_imp may take (KN, TE); the
    /// rest is for the segments navigation adds.
    pub start_share: f32,
    /// Reciprocal-rank fusion weights of BM25, the embedder and the E_s entities' rarity.
    #[serde(default = "default_rank_weights")]
    pub rank_weights: [f64; 3],
    /// The order of the segments in the final answer prompt.
    pub answer_order: Order,
    /// KN: what the final answer prompt shows when the trials are spent.
    #[serde(default)]
    pub final_context: FinalContext,
    /// The final answer prompt shows at most this many segments, the best first (0: as many as
    /// the window holds).
    #[serde(default)]
    pub answer_segments: usize,
    /// The final answer prompt shows at most this many tokens of sentences instead of whole
    /// segments (0: whole segments).
    #[serde(default)]
    pub answer_sentence_tokens: usize,
    /// KN stops when the check's P(answerable) is at least this (0: the sampled action decides).
    #[serde(default)]
    pub check_threshold: f64,
}

impl Options {
    pub fn from_config(c: &NavigateConfig) -> Result<Self, String> {
        Ok(Options {
            method: c.method.parse()?,
            context_window: c.context_window,
            reply_tokens: c.reply_tokens,
            max_trials: c.max_trials,
            ges_threshold: c.ges_threshold,
            ges_max_iterations: c.ges_max_iterations,
            reflection: c.reflection,
            navigation: c.navigation,
            start_share: c.start_share,
            rank_weights: c.rank_weights,
            answer_order: c.answer_order.parse()?,
            final_context: c.final_context.parse()?,
            answer_segments: c.answer_segments,
            answer_sentence_tokens: c.answer_sentence_tokens,
            check_threshold: c.check_threshold,
        })
    }
}

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

/// One answerability check as the diagnostics record it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckRecord {
    /// The segments the check's prompt showed.
    pub segments: Vec<usize>,
    /// -2 answered, -1 cannot answer (a failed check counts as -1).
    pub action: Option<i32>,
    /// The reply never parsed (counted as -1).
    #[serde(default)]
    pub failed: bool,
    /// P(answerable) read from the action token's log probabilities (None: not given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_answerable: Option<f64>,
}

/// Per-question navigation diagnostics (a `results.jsonl` row's `nav`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NavDiagnostics {
    /// |E_s|: the entities linked from the question.
    pub start_entities: usize,
    /// |S_imp| before the window was applied.
    pub s_imp: Option<usize>,
    /// |S_imp| after ranking and the start share: the start set the first check showed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s_imp_kept: Option<usize>,
    /// Every answerability check, in order.
    pub checks: Vec<CheckRecord>,
    /// Expansion steps taken (KN's trials, GES's iterations, TE's entity updates).
    pub expansions: usize,
    /// Of those, the ones after which the next prompt showed another set of segments.
    pub expansions_changed: usize,
    /// Neighbours taken that changed nothing shown, so no trial was spent on them (KN).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub idle_picks: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
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

    /// The navigation diagnostics of this trace: |E_s|, |S_imp|, the segments shown at each
    /// check and its verdict, and how many expansions changed what the next prompt showed.
    pub fn diagnostics(&self) -> NavDiagnostics {
        let mut checks = Vec::new();
        let mut expansions = 0;
        let mut changed = 0;
        let mut idle = 0;
        let mut shown: Option<&Vec<usize>> = None;
        let mut pending = false;
        for st in &self.steps {
            match st.kind {
                StepKind::Answerability | StepKind::Answer => {
                    if pending && shown != Some(&st.segments) {
                        changed += 1;
                    }
                    pending = false;
                    shown = Some(&st.segments);
                    if st.kind == StepKind::Answerability {
                        checks.push(CheckRecord {
                            segments: st.segments.clone(),
                            action: st.action,
                            failed: st.failed,
                            p_answerable: st.p_answerable,
                        });
                    }
                }
                StepKind::Expand | StepKind::GesExpand | StepKind::TeUpdate if !st.ended => {
                    // An expansion whose set no check showed (KN skips the check of an
                    // unchanged S_mix) changed nothing.
                    expansions += 1;
                    pending = true;
                }
                StepKind::ExpandIdle => idle += 1,
                _ => {}
            }
        }
        NavDiagnostics {
            start_entities: self.start_entities.len(),
            s_imp: self.s_imp,
            s_imp_kept: self.s_imp_kept,
            checks,
            expansions,
            expansions_changed: changed,
            idle_picks: idle,
        }
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

#[derive(Deserialize)]
struct EntityList {
    #[serde(default)]
    entities: Vec<String>,
}

/// The answerability reply. The server's grammar makes the model write a reply's keys in the
/// order the schema sends them, its `required` order ([`crate::llm::JsonSchema::as_sent`]): the
/// reasoning, then the action, then the answer, as the paper reasons. Before commit 0e74414 the
/// schema went out sorted by name, so the keys were named to sort in that order too: named
/// "action" and "answer" they sorted first, and the 0.5B model chose -2 before writing any
/// reasoning (32 of 32 checks of runs/navigation-longbench-style's first attempt). The names stay
/// (reply-cache keys carry the schema); the old names are still read.
#[derive(Deserialize)]
struct Answerability {
    #[serde(default)]
    reasoning: String,
    #[serde(rename = "verdict_action", alias = "action")]
    action: i32,
    #[serde(default, rename = "verdict_answer", alias = "answer")]
    answer: String,
}

#[derive(Deserialize)]
struct FinalAnswer {
    #[serde(default)]
    reasoning: String,
    answer: String,
}

/// Whether an answer only repeats the answerability prompt's description of the answer field
/// ("the final answer, or an empty string for -1"), as small models sometimes do.
pub(crate) fn is_template_echo(answer: &str) -> bool {
    let a: String = answer
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace())
        .collect();
    let a = a.split_whitespace().collect::<Vec<_>>().join(" ");
    a.is_empty()
        || a == "the final answer"
        || a == "final answer"
        || a.starts_with("the final answer or an empty string")
}

/// The answer of an answerability reply, or why it gives none (empty for a plain -1). Only a
/// reply with action -2 answers (-1 keeps the paper's meaning, "cannot answer", whatever its
/// other fields say), and a -2 does not when its reasoning says the information is missing (the
/// 0.5B model often says -2 and, in the same reply, that the text does not say). Its answer is
/// the answer field, unless that is empty or only the prompt's description of the field; a
/// longer answer field than [`LONG_ANSWER_WORDS`] words is a copy of the text, not an answer
/// (except for multiple choice, whose options can be long). Failing the field, the answer the
/// small models write into the reasoning: the whole reasoning when it is a short phrase (at most
/// [`SHORT_ANSWER_WORDS`] words), or the phrase after "the answer is" in it, only if the phrase
/// is written in the `shown` text (or is yes/no), so that "Not sure" is no answer.
pub(crate) fn check_answer(
    action: i32,
    answer: &str,
    reasoning: &str,
    shown: &str,
    question: &str,
    multiple_choice: bool,
) -> Result<String, String> {
    if action != -2 {
        return Err(String::new());
    }
    if !multiple_choice && is_yes_no(answer) && !is_polar(question) {
        return Err(format!(
            "action -2 with {answer:?} to a question that is not a yes/no question: counted as -1"
        ));
    }
    if let Some(cue) = says_missing(reasoning) {
        return Err(format!(
            "action -2, but its reasoning says the information is missing ({cue:?}): counted as -1"
        ));
    }
    let field = answer.trim();
    if !field.is_empty() && !is_template_echo(field) {
        let words = field.split_whitespace().count();
        if multiple_choice || words <= LONG_ANSWER_WORDS {
            return Ok(field.to_string());
        }
        return Err(format!(
            "action -2 with an answer of {words} words, a copy of the text rather than an answer: counted as -1"
        ));
    }
    let shown_lower = shown.to_lowercase();
    let grounded = |p: &str| {
        let l = p.to_lowercase();
        !p.is_empty()
            && p.split_whitespace().count() <= SHORT_ANSWER_WORDS
            && !is_template_echo(p)
            && (l == "yes" || l == "no" || whole_word(&shown_lower, &l))
    };
    let r = reasoning.trim().trim_end_matches('.').trim();
    if grounded(r) {
        return Ok(r.to_string());
    }
    let lower = reasoning.to_lowercase();
    for cue in ["the answer is", "the final answer is", "answer:"] {
        if let Some(at) = lower.rfind(cue) {
            // Lowercasing keeps byte offsets for the ASCII cue, but not always for the rest.
            let Some(rest) = reasoning.get(at + cue.len()..) else {
                continue;
            };
            let phrase = rest
                .split(['.', '\n', ';'])
                .next()
                .unwrap_or("")
                .trim()
                .trim_matches(|c: char| c == '"' || c == '\'' || c == ':' || c == ',')
                .trim();
            if grounded(phrase) {
                return Ok(phrase.to_string());
            }
        }
    }
    Err(format!(
        "action -2 with no answer (the answer field is empty or the prompt's placeholder: {answer:?}; none in the reasoning): counted as -1"
    ))
}

/// Whether an answer is only "yes" or "no" (the 0.5B model also writes "No/no").
fn is_yes_no(answer: &str) -> bool {
    let words: Vec<String> = answer
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    !words.is_empty() && words.iter().all(|w| w == "yes" || w == "no")
}

/// Whether a question asks yes or no: it opens with an auxiliary verb ("Are both ...?").
fn is_polar(question: &str) -> bool {
    const AUXILIARIES: [&str; 20] = [
        "is", "are", "was", "were", "am", "do", "does", "did", "can", "could", "has", "have",
        "had", "will", "would", "should", "shall", "may", "might", "must",
    ];
    question
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| !w.is_empty())
        .is_some_and(|w| AUXILIARIES.contains(&w.to_lowercase().as_str()))
}

/// The phrase of `reasoning` that says the text lacks the information, if any.
fn says_missing(reasoning: &str) -> Option<&'static str> {
    const CUES: [&str; 16] = [
        "not provide",
        "no information",
        "not mention",
        "not say",
        "doesn't say",
        "not state",
        "not specif",
        "cannot be inferred",
        "cannot be determined",
        "can't be determined",
        "not enough information",
        "insufficient",
        "is missing",
        "not contain",
        "doesn't contain",
        "not include",
    ];
    let l = reasoning.to_lowercase().replace('\u{2019}', "'");
    CUES.into_iter().find(|c| l.contains(c))
}

/// The longest answer field taken as an answer (HotpotQA's answers are a few words).
const LONG_ANSWER_WORDS: usize = 12;

/// The longest phrase taken as an answer found in a check's reasoning.
const SHORT_ANSWER_WORDS: usize = 8;

/// The outcome of an answerability check.
#[derive(Clone, Default)]
pub(crate) struct Check {
    /// The check answered: its verdict says stop and its reply gives an answer.
    pub answered: bool,
    pub answer: String,
    pub reasoning: String,
    /// The verdict says stop, but the reply gives no answer (a -1 sampled while P(answerable)
    /// passed `navigate.check_threshold`): the final answer step answers from what was shown.
    pub stop: bool,
}

/// Navigates one memory. Cheap to create per question.
pub struct Navigator<'a> {
    pub(crate) llm: &'a Service,
    pub(crate) prompts: &'a Prompts,
    pub(crate) embedder: &'a dyn Embedder,
    pub(crate) memory: &'a Memory,
    pub(crate) opts: Options,
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
        opts: Options,
    ) -> Self {
        Navigator {
            llm,
            prompts,
            embedder,
            memory,
            opts,
        }
    }

    /// Answers `question` (with `options` for multiple choice: the answer is then the letter).
    pub async fn ask(&self, question: &str, options: &[String]) -> Result<Trace, NavigateError> {
        if question.trim().is_empty() {
            return Err(NavigateError::EmptyQuestion);
        }
        if self.memory.segments.is_empty() {
            return Err(NavigateError::EmptyMemory);
        }
        let before = self.llm.ledger().snapshot();
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
        };
        let start = self.start(&mut run).await?;
        run.focus = start.clone();
        let all = self.segments_of(&start);
        run.s_imp = Some(all.len());
        let start_names = self.names(&start);
        let outcome = match self.opts.method {
            Method::Kn | Method::Te => {
                // S_imp, ranked and cut to the start share of the window.
                let (ranked, [lexical, dense, weight]) =
                    self.rank_segments_by_signal(&run.question, &all, &start)?;
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
                }
                if self.opts.method == Method::Kn {
                    self.kn(&mut run, &start, &s_imp).await?
                } else {
                    self.te(&mut run, &start, &s_imp).await?
                }
            }
            Method::Ges => self.ges(&mut run, &start).await?,
        };
        let after = self.llm.ledger().snapshot();
        let (requests, cache_hits, prompt_tokens, completion_tokens) = delta(&before, &after);
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
            requests,
            cache_hits,
            prompt_tokens,
            completion_tokens,
            failures: run.failures,
            answer_spans: vec![],
            read_spans: vec![],
            s_imp: run.s_imp,
            s_imp_kept: run.s_imp_kept,
        };
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

    pub(crate) fn window(&self) -> Window {
        Window::new(self.opts.context_window, self.opts.reply_tokens)
    }

    /// Ranks `segments` for `query` by reciprocal-rank fusion of three signals, weighted by
    /// `navigate.rank_weights`: BM25, the embedder's similarity, and the weight of `entities`
    /// each segment holds (the sum of their inverse segment frequencies, so a rare entity of the
    /// question counts more than a common one). Best first, ties by document order; the score is
    /// the fused one. A signal of weight 0 adds nothing, but its order is still returned for the
    /// trace.
    pub(crate) fn rank_segments(
        &self,
        query: &str,
        segments: &BTreeSet<usize>,
        entities: &BTreeSet<NodeIndex>,
    ) -> Result<Vec<(usize, f32)>, NavigateError> {
        Ok(self.rank_segments_by_signal(query, segments, entities)?.0)
    }

    /// [`Navigator::rank_segments`], with each signal's own order (BM25, embedder, entity
    /// weight), best first: the trace shows them, so a reader can see which signal put a
    /// segment where.
    pub(crate) fn rank_segments_by_signal(
        &self,
        query: &str,
        segments: &BTreeSet<usize>,
        entities: &BTreeSet<NodeIndex>,
    ) -> Result<(Vec<(usize, f32)>, SignalOrders), NavigateError> {
        if segments.is_empty() {
            return Ok((Vec::new(), Default::default()));
        }
        let texts: Vec<&str> = self
            .memory
            .segments
            .iter()
            .map(|s| s.text.as_str())
            .collect();
        let within = |ranked: Vec<(usize, f64)>| -> Vec<(usize, f64)> {
            ranked
                .into_iter()
                .filter(|(s, _)| segments.contains(s))
                .collect()
        };
        let lexical = within(Bm25::new(&texts).rank(query));
        let dense = within(
            crate::embed::score_segments(self.embedder, self.memory, query)?
                .into_iter()
                .map(|(s, x)| (s, f64::from(x)))
                .collect(),
        );
        let n = self.memory.segments.len().max(1) as f64;
        let mut weight: BTreeMap<usize, f64> = segments.iter().map(|&s| (s, 0.0)).collect();
        for &e in entities {
            let linked = &self.memory.graph[e].segments;
            let idf = (n / linked.len().max(1) as f64).ln() + 1.0;
            for s in linked {
                if let Some(w) = weight.get_mut(s) {
                    *w += idf;
                }
            }
        }
        let mut by_weight: Vec<(usize, f64)> = weight.into_iter().collect();
        by_weight.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let [w_lexical, w_dense, w_weight] = self.opts.rank_weights;
        let fused = fuse_ranks(&[
            (&lexical, w_lexical),
            (&dense, w_dense),
            (&by_weight, w_weight),
        ]);
        let mut ranked: Vec<(usize, f32)> = fused.into_iter().map(|(s, x)| (s, x as f32)).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let order = |list: &[(usize, f64)]| list.iter().map(|(s, _)| *s).collect::<Vec<_>>();
        let signals = [order(&lexical), order(&dense), order(&by_weight)];
        Ok((ranked, signals))
    }

    /// The ranked start set cut to the start share of the window's segment room (at least its
    /// best segment, if that fits the window at all).
    pub(crate) fn start_share_of(
        &self,
        question: &str,
        ranked: &[(usize, f32)],
    ) -> Result<Vec<usize>, NavigateError> {
        let room = self
            .window()
            .room(self.prompts, PromptId::Answerability, question)?;
        let share = (room as f64 * f64::from(self.opts.start_share.clamp(0.0, 1.0))) as usize;
        let mut kept = Vec::new();
        let mut used = 0usize;
        for &(s, _) in ranked {
            let Some(seg) = self.memory.segments.get(s) else {
                continue;
            };
            let cost = seg.tokens + 1;
            if used + cost <= share || (kept.is_empty() && cost <= room) {
                kept.push(s);
                used += cost;
            }
        }
        Ok(kept)
    }

    /// E_s: the question's entities (LLM extraction), linked to graph entities by the
    /// disambiguation normaliser, by mentions found verbatim in the question, and, for names
    /// that match nothing, by embedding similarity to entity names.
    async fn start(&self, run: &mut Run) -> Result<BTreeSet<NodeIndex>, NavigateError> {
        let p = self
            .prompts
            .render(PromptId::QuestionEntities, &[("question", &run.question)])?;
        let names: Vec<String> = match self
            .llm
            .chat_json::<EntityList>(
                "question_entities",
                vec![Message::user(p)],
                Some(JsonSchema {
                    name: "entities".into(),
                    schema: json!({"type": "object", "properties": {"entities": {"type": "array", "maxItems": 8, "items": {"type": "string", "minLength": 1, "maxLength": 80}}}, "required": ["entities"]}),
                }),
            )
            .await
        {
            Ok(r) => r.value.entities,
            Err(e) => {
                run.failures.push(format!("question_entities: {e}"));
                Vec::new()
            }
        };
        let linked = self.link(&names, &run.question)?;
        let mut note = format!("question entities: {}", names.join(", "));
        let linked = if linked.is_empty() {
            // Nothing links: start from the entities of the best dense segment.
            let best = crate::embed::score_segments(self.embedder, self.memory, &run.question)?;
            let seg = best.first().map(|(s, _)| *s).unwrap_or(0);
            note.push_str(&format!(
                "; none linked, starting from the entities of segment {seg}"
            ));
            self.memory
                .graph
                .node_indices()
                .filter(|&n| self.memory.graph[n].segments.contains(&seg))
                .take(8)
                .collect()
        } else {
            linked
        };
        run.push(Step {
            kind: StepKind::Start,
            entities: self.names(&linked),
            note,
            ..Step::default()
        });
        Ok(linked)
    }

    /// Links names to graph entities.
    pub(crate) fn link(
        &self,
        names: &[String],
        question: &str,
    ) -> Result<BTreeSet<NodeIndex>, NavigateError> {
        let g = &self.memory.graph;
        let stemmer = english_stemmer();
        let threshold = self.memory.params.entity_similarity;
        let keys: Vec<(NodeIndex, Vec<Vec<String>>)> = g
            .node_indices()
            .map(|n| {
                (
                    n,
                    g[n].mentions
                        .iter()
                        .chain(std::iter::once(&g[n].name))
                        .map(|m| normalize(m, &stemmer))
                        .collect(),
                )
            })
            .collect();
        let mut linked = BTreeSet::new();
        let mut unmatched = Vec::new();
        for name in names {
            let k = normalize(name, &stemmer);
            // A single common word ("film", "city") names no particular entity.
            if k.is_empty() || is_common_word(name) {
                continue;
            }
            let hits: Vec<NodeIndex> = keys
                .iter()
                .filter(|(_, ks)| ks.iter().any(|m| same_entity(&k, m, threshold)))
                .map(|(n, _)| *n)
                .collect();
            if hits.is_empty() {
                unmatched.push(name.clone());
            }
            linked.extend(hits);
        }
        // Mentions found verbatim in the question (see `joins_verbatim`).
        let q_lower = question.to_lowercase();
        for n in g.node_indices() {
            if joins_verbatim(&g[n], question, &q_lower) {
                linked.insert(n);
            }
        }
        if !unmatched.is_empty() && g.node_count() > 0 {
            let nodes: Vec<NodeIndex> = g.node_indices().collect();
            let texts: Vec<&str> = nodes.iter().map(|&n| g[n].name.as_str()).collect();
            let mut all: Vec<&str> = unmatched.iter().map(String::as_str).collect();
            all.extend(texts.iter().copied());
            let vectors = crate::embed::embed_exact(self.embedder, &all)?;
            let (qv, nv) = vectors.split_at(unmatched.len());
            for q in qv {
                let best = nv
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (i, crate::embed::cosine(q, v)))
                    .max_by(|a, b| a.1.total_cmp(&b.1));
                if let Some((i, score)) = best {
                    if score >= 0.6 {
                        linked.insert(nodes[i]);
                    }
                }
            }
        }
        Ok(linked)
    }

    /// The Appendix E answerability check on the given segments (fitted to the window).
    pub(crate) async fn answerability(
        &self,
        run: &mut Run,
        mut step: Step,
        segments: &[usize],
    ) -> Result<Check, NavigateError> {
        let (text, shown) = self.window().fit(
            self.prompts,
            PromptId::Answerability,
            &run.question,
            self.memory,
            segments,
            &[],
        )?;
        step.kind = StepKind::Answerability;
        step.segments = shown;
        let p = self.prompts.render(
            PromptId::Answerability,
            &[("segments", &text), ("question", &run.question)],
        )?;
        let schema = json!({"type": "object", "properties": {
            "reasoning": {"type": "string", "maxLength": 600},
            "verdict_action": {"type": "integer", "enum": [-2, -1]},
            "verdict_answer": {"type": "string", "maxLength": 200}
        }, "required": ["reasoning", "verdict_action", "verdict_answer"]});
        let check = match self
            .llm
            .chat_json_logprobs::<Answerability>(
                "answerability",
                vec![Message::user(p)],
                Some(JsonSchema {
                    name: "answerability".into(),
                    schema,
                }),
                CHECK_TOP_LOGPROBS,
            )
            .await
        {
            Ok(r) => {
                let p_answerable = p_answerable(&r.reply.content, &r.reply.logprobs);
                if p_answerable.is_none() && !r.reply.logprobs.is_empty() {
                    tracing::debug!("no action token found among the check's log probabilities");
                }
                if r.reply.logprobs.is_empty() {
                    warn_no_logprobs(self.opts.check_threshold);
                }
                step.p_answerable = p_answerable;
                let a = r.value;
                let given = check_answer(
                    a.action,
                    &a.answer,
                    &a.reasoning,
                    &text,
                    &run.question,
                    run.multiple_choice,
                );
                let sampled = given.is_ok();
                step.action = Some(if sampled { -2 } else { -1 });
                step.reason = a.reasoning.clone();
                // The verdict: P(answerable) against the threshold when both are there, else
                // the sampled action.
                let verdict = match (self.opts.check_threshold, p_answerable) {
                    (t, Some(p)) if t > 0.0 => p >= t,
                    _ => sampled,
                };
                match &given {
                    Err(why) => step.note = why.clone(),
                    Ok(found) if found.as_str() != a.answer.trim() => {
                        step.note = format!(
                        "action -2; answer field {:?}, answer taken from the reasoning: {found:?}",
                        a.answer
                    )
                    }
                    Ok(_) => {}
                }
                if let Some(p) = p_answerable.filter(|_| self.opts.check_threshold > 0.0) {
                    let t = self.opts.check_threshold;
                    let said = if verdict { ">=" } else { "<" };
                    let mut note = format!("P(answerable) {p:.3} {said} {t}");
                    if !step.note.is_empty() {
                        note = format!("{}; {note}", step.note);
                    }
                    step.note = note;
                }
                Check {
                    answered: verdict && sampled,
                    stop: verdict && !sampled,
                    answer: given.unwrap_or(a.answer),
                    reasoning: a.reasoning,
                }
            }
            Err(e) => {
                // An unparsable check counts as "cannot answer" with that reason; navigation goes on.
                run.failures.push(format!("answerability: {e}"));
                step.action = Some(-1);
                step.reason = "the answerability check failed".into();
                step.note = "check failed".into();
                step.failed = true;
                Check {
                    reasoning: step.reason.clone(),
                    ..Check::default()
                }
            }
        };
        run.push(step);
        Ok(check)
    }

    /// The final answer from `segments` (kept first, in their order) and then `scores` (by
    /// score) while they fit, at most `navigate.answer_segments` of them when that is not 0;
    /// the prompt shows them in the configured answer order.
    pub(crate) async fn final_answer(
        &self,
        run: &mut Run,
        segments: &[usize],
        scores: &[(usize, f32)],
        note: &str,
    ) -> Result<Check, NavigateError> {
        if self.opts.answer_sentence_tokens > 0 {
            let mut order: Vec<usize> = segments.to_vec();
            for &(s, _) in scores {
                if !order.contains(&s) {
                    order.push(s);
                }
            }
            return self.sentence_answer(run, &order, note).await;
        }
        let (text, shown) = self
            .window()
            .at_most(self.opts.answer_segments)
            .fit_ordered(
                self.prompts,
                PromptId::Answer,
                &run.question,
                self.memory,
                segments,
                scores,
                self.opts.answer_order,
            )?;
        let (answer, reasoning) = answer_from(self.llm, self.prompts, &run.question, &text).await?;
        run.push(Step {
            kind: StepKind::Answer,
            segments: shown,
            reason: reasoning.clone(),
            note: note.to_string(),
            ..Step::default()
        });
        Ok(Check {
            answer,
            reasoning,
            ..Check::default()
        })
    }
}

/// Alternatives read at the check's action token.
const CHECK_TOP_LOGPROBS: u8 = 5;

/// Says once per process that the server gave no log probabilities, so the check's verdict is
/// the sampled action (said only when a threshold was asked for).
fn warn_no_logprobs(threshold: f64) {
    use std::sync::atomic::{AtomicBool, Ordering};
    static SAID: AtomicBool = AtomicBool::new(false);
    if threshold > 0.0 && !SAID.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "the LLM server returned no log probabilities: the answerability check's verdict is the sampled action, navigate.check_threshold ({threshold}) is not applied"
        );
    }
}

/// P(answerable) of an answerability reply: at the token that writes the digit of the
/// `verdict_action` value (-2 or -1), the probability of "2" over that of "1" among the top
/// alternatives (renormalised over the two). None when the reply has no log probabilities, the
/// tokens do not spell the reply, or neither digit is among the alternatives.
pub(crate) fn p_answerable(content: &str, logprobs: &[crate::llm::TokenLogprob]) -> Option<f64> {
    if logprobs.is_empty() {
        return None;
    }
    let key = content
        .find("\"verdict_action\"")
        .or_else(|| content.find("\"action\""))?;
    let after = &content[key..];
    let colon = key + after.find(':')?;
    let value = colon + 1 + content[colon + 1..].find(|c: char| !c.is_whitespace())?;
    // The digit after the sign.
    let digit = if content[value..].starts_with('-') {
        value + 1
    } else {
        value
    };
    let mut at = 0usize;
    for t in logprobs {
        let end = at + t.token.len();
        if content.get(at..end) != Some(t.token.as_str()) {
            return None;
        }
        if digit < end {
            let offset = digit - at;
            let (mut p1, mut p2) = (0.0f64, 0.0f64);
            let alternatives: Vec<(&str, f64)> = if t.top.is_empty() {
                vec![(t.token.as_str(), t.logprob)]
            } else {
                t.top.iter().map(|(s, lp)| (s.as_str(), *lp)).collect()
            };
            for (text, lp) in alternatives {
                match text.as_bytes().get(offset) {
                    Some(b'2') => p2 += lp.exp(),
                    Some(b'1') => p1 += lp.exp(),
                    _ => {}
                }
            }
            if t.top.is_empty() {
                // Only the sampled token is known: the other digit has the rest.
                if p2 > 0.0 {
                    p1 = 1.0 - p2;
                } else if p1 > 0.0 {
                    p2 = 1.0 - p1;
                }
            }
            return (p1 + p2 > 0.0).then(|| p2 / (p1 + p2));
        }
        at = end;
    }
    None
}

/// The answer prompt shared by every method (`prompts/answer.txt`) over `segments_text`:
/// (answer, reasoning). A reply that never parses fails the question.
pub async fn answer_from(
    llm: &Service,
    prompts: &Prompts,
    question: &str,
    segments_text: &str,
) -> Result<(String, String), NavigateError> {
    let p = prompts.render(
        PromptId::Answer,
        &[("segments", segments_text), ("question", question)],
    )?;
    let schema = json!({"type": "object", "properties": {
        "reasoning": {"type": "string", "maxLength": 600},
        "answer": {"type": "string", "minLength": 1, "maxLength": 200}
    }, "required": ["reasoning", "answer"]});
    let r = llm
        .chat_json::<FinalAnswer>(
            "answer",
            vec![Message::user(p)],
            Some(JsonSchema {
                name: "answer".into(),
                schema,
            }),
        )
        .await
        .map_err(|source| NavigateError::Step {
            step: "answer".into(),
            source,
        })?;
    Ok((r.value.answer, r.value.reasoning))
}

/// Whether a name is one lowercase word: a common noun, not a name.
fn is_common_word(name: &str) -> bool {
    let t = name.trim();
    !t.is_empty()
        && !t.contains(char::is_whitespace)
        && t.chars().all(|c| !c.is_uppercase())
        && t.chars().any(char::is_alphabetic)
}

/// Whether entity `e` joins E_s because the question names it verbatim (`q_lower` is the
/// question in lowercase): not a number or a date, and one of its mentions named in the question
/// (`named_in`). A generic entity (linked to more than a fifth of the segments) joins only by a
/// capitalised mention, a name: in these documents the question's own topics ("Giacomo
/// Puccini", "New Hampshire") recur in a third of the segments, while a generic phrase ("its
/// headquarters", "the film") names nothing in particular. The ranked, bounded start keeps a
/// frequent name from flooding S_imp: its inverse segment frequency is low.
fn joins_verbatim(e: &Entity, question: &str, q_lower: &str) -> bool {
    if e.kind == "number" || e.kind == "time" {
        return false;
    }
    e.mentions.iter().any(|m| {
        (!e.generic || m.trim().chars().next().is_some_and(char::is_uppercase))
            && named_in(question, q_lower, m)
    })
}

/// Whether mention `m` is named verbatim in `question` (`q_lower` is its lowercase form): a
/// mention of two or more words as a whole-word match in any case; a one-word mention only as
/// written, capitalised, and not as the question's first word (which is capitalised anyway).
fn named_in(question: &str, q_lower: &str, m: &str) -> bool {
    let m = m.trim();
    if m.chars().count() < 3 {
        return false;
    }
    if m.contains(char::is_whitespace) {
        return whole_word(q_lower, &m.to_lowercase());
    }
    if !m.chars().next().is_some_and(char::is_uppercase) {
        return false;
    }
    let first_end = question
        .char_indices()
        .find(|&(i, c)| i > 0 && !c.is_alphanumeric())
        .map_or(question.len(), |(i, _)| i);
    whole_word(&question[first_end..], m)
}

fn whole_word(haystack: &str, needle: &str) -> bool {
    let mut from = 0;
    while let Some(pos) = haystack[from..].find(needle) {
        let s = from + pos;
        let e = s + needle.len();
        let ok_before = haystack[..s]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric());
        let ok_after = haystack[e..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_alphanumeric());
        if ok_before && ok_after {
            return true;
        }
        from = s + needle.chars().next().map(char::len_utf8).unwrap_or(1);
    }
    false
}

/// The question with its options, as QuALITY presents them.
pub fn with_options(question: &str, options: &[String]) -> String {
    if options.is_empty() {
        return question.trim().to_string();
    }
    let mut s = question.trim().to_string();
    s.push_str("\nOptions:");
    for (i, o) in options.iter().enumerate() {
        s.push_str(&format!("\n({}) {}", (b'A' + i as u8) as char, o.trim()));
    }
    s
}

/// The option letter of a multiple-choice reply, or the reply itself when it names no option.
///
/// In order: a reply that starts with a letter ("(B) ...", "B) ...", "B. ...", "B"); a reply
/// that is, contains or begins one option's text (small models often copy the option instead of
/// its letter); a lone letter token ("The answer is B."); the one option whose words the reply
/// shares best (token F1 at least 0.5, strictly ahead of the others).
pub fn option_letter(reply: &str, options: &[String]) -> String {
    let letters: Vec<char> = (0..options.len().min(26))
        .map(|i| (b'A' + i as u8) as char)
        .collect();
    let t = reply.trim();
    for c in &letters {
        if [format!("({c})"), format!("{c})"), format!("{c}.")]
            .iter()
            .any(|p| t.starts_with(p.as_str()))
        {
            return c.to_string();
        }
    }
    if let Some(c) = letters.iter().find(|c| t == c.to_string()) {
        return c.to_string();
    }
    let words = |s: &str| -> Vec<String> {
        s.split(|ch: char| !ch.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let reply_words = words(t);
    let option_words: Vec<Vec<String>> = options.iter().map(|o| words(o)).collect();
    let unique = |hits: Vec<usize>| (hits.len() == 1).then(|| letters[hits[0]].to_string());
    if !reply_words.is_empty() {
        let joined = format!(" {} ", reply_words.join(" "));
        let exact: Vec<usize> = (0..letters.len())
            .filter(|&i| option_words[i] == reply_words)
            .collect();
        if let Some(l) = unique(exact) {
            return l;
        }
        // The reply quotes a whole option: the longest quoted one, if only one is that long.
        let quoted: Vec<usize> = (0..letters.len())
            .filter(|&i| {
                !option_words[i].is_empty()
                    && joined.contains(&format!(" {} ", option_words[i].join(" ")))
            })
            .collect();
        if let Some(longest) = quoted.iter().map(|&i| option_words[i].len()).max() {
            if let Some(l) = unique(
                quoted
                    .into_iter()
                    .filter(|&i| option_words[i].len() == longest)
                    .collect(),
            ) {
                return l;
            }
        }
        // The reply is the beginning of one option (a reply cut short), at least 3 words.
        if reply_words.len() >= 3 {
            let prefix: Vec<usize> = (0..letters.len())
                .filter(|&i| option_words[i].starts_with(&reply_words))
                .collect();
            if let Some(l) = unique(prefix) {
                return l;
            }
        }
    }
    for tok in t.split(|ch: char| !ch.is_alphanumeric()) {
        if tok.len() == 1 {
            if let Some(c) = letters.iter().find(|c| tok.starts_with(**c)) {
                return c.to_string();
            }
        }
    }
    let mut scored: Vec<(f64, usize)> = (0..letters.len())
        .map(|i| (word_f1(&reply_words, &option_words[i]), i))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    match scored.as_slice() {
        [(best, i), rest @ ..] if *best >= 0.5 && rest.iter().all(|(f, _)| f < best) => {
            letters[*i].to_string()
        }
        _ => t.to_string(),
    }
}

/// Token F1 of two word lists (multiset overlap).
fn word_f1(a: &[String], b: &[String]) -> f64 {
    let mut left: Vec<&String> = b.iter().collect();
    let mut common = 0usize;
    for w in a {
        if let Some(k) = left.iter().position(|x| *x == w) {
            left.swap_remove(k);
            common += 1;
        }
    }
    if common == 0 {
        return 0.0;
    }
    let (p, r) = (
        common as f64 / a.len() as f64,
        common as f64 / b.len() as f64,
    );
    2.0 * p * r / (p + r)
}

fn delta(before: &LedgerSnapshot, after: &LedgerSnapshot) -> (u64, u64, u64, u64) {
    let (b, a) = (before.total(), after.total());
    (
        a.requests - b.requests,
        a.cache_hits - b.cache_hits,
        a.prompt_tokens - b.prompt_tokens,
        a.completion_tokens - b.completion_tokens,
    )
}

/// Segment scores as a map, keeping the highest score per segment.
pub(crate) fn add_scored(s_add: &mut BTreeMap<usize, f32>, segment: usize, score: f32) {
    let e = s_add.entry(segment).or_insert(score);
    if score > *e {
        *e = score;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Source;

    fn tokens(pieces: &[(&str, &[(&str, f64)])]) -> Vec<crate::llm::TokenLogprob> {
        pieces
            .iter()
            .map(|(t, top)| crate::llm::TokenLogprob {
                token: t.to_string(),
                logprob: top.first().map_or(0.0, |x| x.1.ln()),
                top: top.iter().map(|(s, p)| (s.to_string(), p.ln())).collect(),
            })
            .collect()
    }

    #[test]
    fn p_answerable_is_read_at_the_action_digit() {
        let content = r#"{"reasoning": "x", "verdict_action": -1, "verdict_answer": ""}"#;
        let split = [
            "{\"", "reason", "ing", "\":", " \"", "x", "\",", " \"", "verdict", "_action", "\":",
            " -", "1", ",", " \"", "verdict", "_answer", "\":", " \"\"", "}",
        ];
        assert_eq!(split.concat(), content);
        let at_digit: &[(&str, f64)] = &[("1", 0.7), ("2", 0.2), ("0", 0.1)];
        let pieces: Vec<(&str, &[(&str, f64)])> = split
            .iter()
            .map(|&t| (t, if t == "1" { at_digit } else { &[][..] }))
            .collect();
        let p = p_answerable(content, &tokens(&pieces)).unwrap();
        assert!((p - 0.2 / 0.9).abs() < 1e-9, "{p}");
        // The sign and the digit as one token.
        let joined = r#"{"verdict_action": -2}"#;
        let lp = tokens(&[
            ("{\"verdict_action\": ", &[]),
            ("-2", &[("-2", 0.6), ("-1", 0.4)]),
            ("}", &[]),
        ]);
        let p = p_answerable(joined, &lp).unwrap();
        assert!((p - 0.6).abs() < 1e-9, "{p}");
        // No log probabilities, or tokens that do not spell the reply: no reading.
        assert_eq!(p_answerable(content, &[]), None);
        assert_eq!(
            p_answerable(content, &tokens(&[("something else", &[("1", 1.0)])])),
            None
        );
    }

    fn step(kind: StepKind, segments: &[usize], action: Option<i32>, note: &str) -> Step {
        Step {
            kind,
            segments: segments.to_vec(),
            action,
            note: note.into(),
            ..Step::default()
        }
    }

    #[test]
    fn diagnostics_count_checks_and_the_expansions_that_changed_the_shown_set() {
        // KN: a check, an expansion that changed nothing (KN skipped the check of the same
        // S_mix), one that added segment 7, a failed check, an expansion with nothing left to
        // expand, then the answer from a set different from the last check's.
        let steps = vec![
            step(StepKind::Start, &[], None, ""),
            step(StepKind::Answerability, &[0, 1], Some(-1), ""),
            step(StepKind::Expand, &[], None, "trial 1"),
            step(StepKind::Expand, &[], None, "trial 2"),
            Step {
                failed: true,
                ..step(StepKind::Answerability, &[0, 1, 7], Some(-1), "")
            },
            step(StepKind::Expand, &[], None, "trial 3"),
            Step {
                ended: true,
                ..step(StepKind::Expand, &[], None, "")
            },
            step(StepKind::Answer, &[0, 1, 9], None, ""),
        ];
        let trace = Trace {
            method: "kn".into(),
            question: "q".into(),
            answer: "a".into(),
            answered: false,
            reasoning: String::new(),
            start_entities: vec!["A".into(), "B".into()],
            steps,
            segments_used: vec![0, 1, 7, 9],
            final_segments: vec![0, 1, 9],
            requests: 0,
            cache_hits: 0,
            prompt_tokens: 0,
            completion_tokens: 0,
            failures: vec![],
            answer_spans: vec![],
            read_spans: vec![],
            s_imp: Some(12),
            s_imp_kept: None,
        };
        let d = trace.diagnostics();
        assert_eq!((d.start_entities, d.s_imp), (2, Some(12)));
        assert_eq!(
            d.checks,
            vec![
                CheckRecord {
                    segments: vec![0, 1],
                    action: Some(-1),
                    failed: false,
                    p_answerable: None,
                },
                CheckRecord {
                    segments: vec![0, 1, 7],
                    action: Some(-1),
                    failed: true,
                    p_answerable: None,
                },
            ]
        );
        // Trials 1-3 (not the "no adjacent" step); trial 2 changed the next check's set and
        // trial 3 the answer's; trial 1 changed nothing.
        assert_eq!((d.expansions, d.expansions_changed), (3, 2));
        // Spans from the units: segments 0 and 1 touch, 9 stands alone.
        let mut t = trace;
        t.set_spans(&[
            (0, 10),
            (10, 20),
            (20, 30),
            (30, 40),
            (40, 50),
            (50, 60),
            (60, 70),
            (70, 80),
            (80, 90),
            (90, 95),
        ]);
        assert_eq!(t.answer_spans, vec![(0, 20), (90, 95)]);
        assert_eq!(t.read_spans, vec![(0, 20), (70, 80), (90, 95)]);
    }

    #[test]
    fn a_check_answer_in_the_wrong_field_is_taken_only_from_the_text() {
        let text = "Delta is the city where Beta has its headquarters. Beta was founded in 1887.";
        let echo = "the final answer, or an empty string for -1";
        let q = "Is Beta in Delta, and where are its headquarters?";
        let ok = |action, answer, reasoning| {
            check_answer(action, answer, reasoning, text, q, false).ok()
        };
        // The answer field itself.
        assert_eq!(
            ok(-2, "Delta", "Beta is in Delta.").as_deref(),
            Some("Delta")
        );
        // -1 keeps its meaning whatever the answer field says.
        assert_eq!(ok(-1, "Delta", ""), None);
        // The answer written into the reasoning: the whole of a short one, or after a cue.
        assert_eq!(ok(-2, echo, "Delta.").as_deref(), Some("Delta"));
        assert_eq!(
            ok(
                -2,
                "",
                "Beta has its headquarters there, so the answer is Delta."
            )
            .as_deref(),
            Some("Delta")
        );
        assert_eq!(ok(-2, " ", "Yes").as_deref(), Some("Yes"));
        // Not written in the text: no answer.
        assert_eq!(ok(-2, echo, "Not sure."), None);
        assert_eq!(ok(-2, "", "The answer is Gamma."), None);
        assert_eq!(
            ok(
                -2,
                "",
                "The text names a city and a company and a year of founding."
            ),
            None
        );
    }

    #[test]
    fn a_minus_2_that_says_the_text_lacks_the_answer_or_copies_the_text_is_minus_1() {
        // Replies of the 0.5B model on the LongBench-style items (runs/navigation-longbench-style).
        let text = "The Thorn in the Heart (French: 'L'épine dans le coeur') is a 2009 French \
                    documentary film directed by Michel Gondry. It was given a special screening.";
        let copied = "The Thorn in the Heart (French: 'L'épine dans le coeur') is a 2009 French documentary film directed by Michel Gondry.";
        let q = "In what city did the \"Prince of tenors\" star in a film based on an opera?";
        let why = check_answer(
            -2,
            "The Thorn in the Heart",
            "The text does not provide any information about the location of the film.",
            text,
            q,
            false,
        )
        .unwrap_err();
        assert!(why.contains("information is missing"), "{why}");
        let why = check_answer(-2, copied, "It is a documentary.", text, q, false).unwrap_err();
        assert!(why.contains("a copy of the text"), "{why}");
        // A long option text is an answer to a multiple-choice question.
        assert_eq!(
            check_answer(-2, copied, "It is a documentary.", text, q, true).as_deref(),
            Ok(copied)
        );
        // "No/no" answers no "which" question, only a yes/no one.
        let which = "Based on a True Story... is an album by which country music star?";
        let why = check_answer(-2, "No/no", "", text, which, false).unwrap_err();
        assert!(why.contains("not a yes/no question"), "{why}");
        assert_eq!(
            check_answer(-2, "No", "", text, "Are both films French?", false).as_deref(),
            Ok("No")
        );
        // A plain -1 needs no note.
        assert_eq!(
            check_answer(-1, "", "Missing.", text, q, false),
            Err(String::new())
        );
    }

    #[test]
    fn one_word_mentions_link_only_as_written_and_capitalised() {
        let q = "Which city did Beta move to from the harbour town of Delta Bay?";
        let l = q.to_lowercase();
        assert!(named_in(q, &l, "Beta"));
        assert!(named_in(q, &l, "delta bay"), "two words: any case");
        assert!(!named_in(q, &l, "city"), "a lowercase word");
        assert!(
            !named_in(q, &l, "Harbour"),
            "written lowercase in the question"
        );
        assert!(!named_in(q, &l, "Which"), "the question's first word");
        assert!(is_common_word("film") && !is_common_word("Film") && !is_common_word("film star"));
    }

    #[test]
    fn a_generic_entity_joins_by_a_name_not_by_a_phrase() {
        let q = "In what city did the \"Prince of tenors\" star in a film based on an opera by Giacomo Puccini?";
        let l = q.to_lowercase();
        let ent = |mention: &str, generic: bool| Entity {
            name: mention.into(),
            kind: "other".into(),
            mentions: [mention.to_string()].into_iter().collect(),
            segments: [1, 3, 4, 8].into_iter().collect(),
            sources: [Source::Schema].into_iter().collect(),
            generic,
        };
        // The second hop's composer recurs in 8 of 24 segments (generic) and is named.
        assert!(joins_verbatim(&ent("Giacomo Puccini", true), q, &l));
        assert!(joins_verbatim(&ent("Puccini", true), q, &l));
        assert!(joins_verbatim(&ent("Prince of tenors", false), q, &l));
        // A generic phrase does not join; the same phrase joins when it is not generic.
        assert!(!joins_verbatim(&ent("a film", true), q, &l));
        assert!(joins_verbatim(&ent("a film", false), q, &l));
        // Numbers and dates never join this way; nor does a name the question lacks.
        let mut year = ent("Prince", false);
        year.kind = "time".into();
        assert!(!joins_verbatim(&year, q, &l));
        assert!(!joins_verbatim(&ent("Tosca", false), q, &l));
    }

    #[test]
    fn template_echoes_are_not_answers() {
        for echo in [
            "the final answer",
            "The final answer, or an empty string for -1",
            "  Final answer. ",
            "",
        ] {
            assert!(is_template_echo(echo), "{echo:?}");
        }
        for real in ["Lucerne", "the final answer is Lucerne", "1887", "no"] {
            assert!(!is_template_echo(real), "{real:?}");
        }
    }

    #[test]
    fn options_and_letters() {
        let opts = vec!["Paris".to_string(), "Rome".to_string()];
        assert_eq!(
            with_options("Capital?", &opts),
            "Capital?\nOptions:\n(A) Paris\n(B) Rome"
        );
        let two = ["Paris".to_string(), "Rome".to_string()];
        assert_eq!(option_letter("(B) Rome", &two), "B");
        assert_eq!(option_letter("B", &two), "B");
        assert_eq!(option_letter("The answer is A.", &two), "A");
        assert_eq!(option_letter("Rome", &two), "B");
        assert_eq!(option_letter("Madrid", &two), "Madrid");
        assert_eq!("kn".parse::<Method>().unwrap(), Method::Kn);
        assert!("bfs".parse::<Method>().is_err());
    }

    #[test]
    fn replies_that_copy_an_option_map_to_its_letter() {
        // Replies of the 0.5B model on QuALITY (eval/runs/quality), with that question's options.
        let o: Vec<String> = [
            "She had access to other space technologies to keep her youthful",
            "She was not youthful on Earth",
            "She painstakingly disciplined herself to keep wrinkles from forming",
            "She had travelled at light speed once before with Robert's dad",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // The option verbatim (with a curly apostrophe), cut short, or quoted in a sentence.
        let curly = "She had travelled at light speed once before with Robert\u{2019}s dad";
        assert_eq!(option_letter(curly, &o), "D");
        assert_eq!(
            option_letter("She painstakingly disciplined herself", &o),
            "C"
        );
        assert_eq!(
            option_letter("I think she was not youthful on Earth.", &o),
            "B"
        );
        // Close wording: the best option by shared words, only when clearly ahead.
        assert_eq!(
            option_letter("She travelled at light speed with Robert's dad", &o),
            "D"
        );
        assert_eq!(option_letter("She", &o), "She");
        assert_eq!(option_letter("Three", &o), "Three");
        // A leading letter wins over the words.
        assert_eq!(option_letter("D. She had access", &o), "D");
    }
}
