//! One question's (or one memory build's) share of a run: what `eval` and `batch` both charge
//! each memory and each answer to.
//!
//! Invariant: a [`Scope`]'s LLM calls go to a ledger of its own that also records into the
//! run's ledger, so a row's cost is exact however many questions are in flight at once.

use std::time::Instant;

use super::{Ctx, MethodError, MethodSpec, Prepared, Runtime};
use crate::answer::Trace;
use crate::config::NavigateConfig;
use crate::llm::{Service, StageStats};

/// A scoped LLM and a clock, started together.
pub struct Scope {
    llm: Service,
    started: Instant,
}

impl Scope {
    /// A new scope of `rt`'s LLM, its clock started now.
    pub fn of(rt: &Runtime<'_>) -> Scope {
        Scope {
            llm: rt.llm.scoped(),
            started: Instant::now(),
        }
    }

    /// The scoped LLM (for watching a build's progress on its ledger).
    pub fn llm(&self) -> &Service {
        &self.llm
    }

    /// `rt` with this scope's LLM: what a memory is prepared with.
    pub fn runtime<'a>(&'a self, rt: &Runtime<'a>) -> Runtime<'a> {
        Runtime {
            llm: &self.llm,
            prompts: rt.prompts,
            embedder: rt.embedder,
            config: rt.config,
        }
    }

    /// What a method answers with on this scope: `rt`'s prompts and embedder, the window of
    /// its configuration, and the question's gold evidence where the harness has it.
    pub fn ctx<'a>(
        &'a self,
        rt: &Runtime<'a>,
        gold: Option<&'a [crate::text::Span]>,
        chain: &'a [super::oracle::GoldHop],
    ) -> Ctx<'a> {
        self.runtime(rt).ctx(gold, chain)
    }

    /// What the scope's calls cost so far, and the seconds since it started.
    pub fn spent(&self) -> (StageStats, f64) {
        (
            self.llm.ledger().snapshot().total(),
            self.started.elapsed().as_secs_f64(),
        )
    }
}

/// A question answered on a scope of its own.
pub struct Asked {
    pub outcome: Result<Trace, MethodError>,
    pub cost: StageStats,
    pub wall_secs: f64,
}

/// Answers `question` with `spec` over `memory` (navigation settings `nav`, which may differ
/// from the configuration's in the trials) on a new scope of `rt`.
#[allow(clippy::too_many_arguments)]
pub async fn ask_scoped(
    rt: &Runtime<'_>,
    spec: &MethodSpec,
    nav: &NavigateConfig,
    memory: &Prepared,
    question: &str,
    options: &[String],
    gold: Option<&[crate::text::Span]>,
    chain: &[super::oracle::GoldHop],
) -> Asked {
    let scope = Scope::of(rt);
    let ctx = scope.ctx(rt, gold, chain);
    let outcome = super::run(spec, &ctx, nav, memory, question, options).await;
    let (cost, wall_secs) = scope.spent();
    Asked {
        outcome,
        cost,
        wall_secs,
    }
}
