//! Every method behind one API, used alike by `qrmem ask`, `qrmem build`, the eval harness and
//! batch jobs:
//! - name a method: [`MethodSpec`] (parsed by the families of [`registry::FAMILIES`]);
//! - prepare its memory for a document ([`prepare`]), or open a saved one ([`open`]: the kind is
//!   read from the file's format) and save it ([`save`]);
//! - answer a question from it with a [`Trace`](crate::answer::Trace) ([`run`]).
//!
//! The methods: the QRMeM navigators and ablations ([`navigators`]), the paper's baselines
//! ([`baseline`], [`vanilla_middle`]), the oracle rows of the answer step's ceiling
//! ([`oracle`]) and the seed systems ([`summary_tree`],
//! [`knowledge_tree`], [`garlic`]).

mod across;
pub mod baseline;
pub mod chain;
mod entry;
pub mod garlic;
pub mod knowledge_tree;
pub mod method;
pub mod navigators;
pub mod oracle;
pub mod presets;
mod registry;
mod scope;
mod spec;
mod store;
pub mod summary_tree;
pub mod vanilla_middle;

pub use across::{
    answer_corpus, ask_corpus, navigate_corpus, shown_passages, AcrossError, CorpusAnswer,
    CorpusMethod, Shown, NAVIGATED_CANDIDATES,
};
pub use baseline::{answer, segment_spans, vanilla_span, vanilla_text, Baseline};
pub use entry::{ask, build, read_document, AskOutcome, AskRequest, BuildRequest, Source};
pub use method::{answer as run, Method, MethodSpec, Recorded, Role};
pub use registry::{method_families, method_names};
pub use scope::{ask_scoped, Asked, Scope};
pub use spec::{
    load_prepared, open, prepare, prepare_with, save, MemoryFormat, MemoryKind, MethodError,
    Prepared, Runtime, Tuning,
};
pub use store::{MemoryDir, Origin};

use crate::answer::Window;
use crate::embed::Embedder;
use crate::llm::Service;
use crate::prompts::Prompts;

/// What every method answers with: the LLM, the prompts, the embedder, the window and the
/// `[answer]` settings, and,
/// in the eval harness, the question's gold evidence (read only by the oracle rows).
pub struct Ctx<'a> {
    pub llm: &'a Service,
    pub prompts: &'a Prompts,
    pub embedder: &'a dyn Embedder,
    pub window: Window,
    /// The navigators' final answer step (`[answer]`), before a method name's modifiers.
    pub answer: crate::config::AnswerConfig,
    /// The byte ranges of the question's gold supporting sentences in the document, where the
    /// dataset gives them (`qrmem eval` only; None elsewhere).
    pub gold: Option<&'a [crate::text::Span]>,
    /// The question's gold path hop by hop, where the dataset gives one (`qrmem eval` only;
    /// empty elsewhere): read only by `gold-triples` and `gold-chain`.
    pub chain: &'a [oracle::GoldHop],
}
