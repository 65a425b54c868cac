//! The QRMeM navigators as methods: KN (Algorithm 1), GES and TE over the graph memory, and the
//! paper's ablations (no reflection, no navigation, a memory built without graph update or
//! without open entity recognition).

use async_trait::async_trait;

use super::method::{wrong_memory, Family, Method, MethodSpec, Recorded};
use super::spec::{MemoryKind, MethodError, Prepared};
use super::Ctx;
use crate::answer::Trace;
use crate::config::{FinalContext, NavMethod, NavigateConfig, Order};
use crate::navigate::Navigator;

/// A navigator over a QRMeM memory of `memory` kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Navigate {
    pub method: NavMethod,
    /// Ablation: score edges with [Q; R; E_s] (true) or Q only (false).
    pub reflection: bool,
    /// Ablation: navigate (true) or answer from S_imp only (false).
    pub navigation: bool,
    pub memory: MemoryKind,
    /// The answer prompt shows its segments by relevance (true) or as configured (false).
    pub relevance_order: bool,
    /// KN answers, when its trials are spent, from the last S_mix (true) or as configured.
    pub final_s_mix: bool,
    /// The final answer prompt shows at most this many segments, the best first (0: as
    /// configured).
    pub answer_segments: usize,
    /// The final answer prompt shows at most this many tokens of sentences instead of whole
    /// segments (0: as configured).
    pub answer_sentences: usize,
    /// KN stops when the check's P(answerable) is at least this many hundredths (0: as
    /// configured).
    pub check_percent: u32,
    /// KN and TE order the start set (and KN its final context) for the second hop
    /// (`navigate.start_bridge`).
    pub bridge: bool,
}

pub const FAMILY: Family = Family {
    names: "kn, ges, te, kn-no-reflection, kn-no-navigation, te-no-navigation, kn-relevance-order, kn-final-s-mix, kn-answer-top3, kn-sentencesN (the final answer from N tokens of sentences), kn-checkP (stop when the check's P(answerable) >= P%), no-graph-update, no-open-entity, kn-cooccurrence (any navigator over the co-occurrence memory, built with no LLM call), kn-bridge and te-bridge (the start ordered for the second hop)",
    parse,
};

fn parse(name: &str) -> Option<MethodSpec> {
    // Any navigator with "-relevance-order": its answer prompt shows the segments by relevance.
    let (name, relevance_order) = match name.strip_suffix("-relevance-order") {
        Some(base) => (base, true),
        None => (name, false),
    };
    // "kn-check<P>": KN stops when the check's P(answerable) is at least P% (1..=99).
    let (name, check_percent) = match suffix_number(name, "-check") {
        Some((base, p)) if (1..=99).contains(&p) && base.starts_with("kn") => (base, p as u32),
        Some(_) => return None,
        None => (name, 0),
    };
    // Any navigator with "-sentences<N>": its final answer shows N tokens of sentences.
    let (name, answer_sentences) = match suffix_number(name, "-sentences") {
        Some((base, n)) if n > 0 => (base, n),
        Some(_) => return None,
        None => (name, 0),
    };
    // Any navigator with "-answer-top<N>": its final answer prompt shows at most N segments.
    let (name, answer_segments) = match name.rsplit_once("-answer-top") {
        Some((base, n)) => match n.parse::<usize>() {
            Ok(k) if k > 0 && k.to_string() == n => (base, k),
            _ => return None,
        },
        None => (name, 0),
    };
    // "kn-final-s-mix": KN answers from the last S_mix when its trials are spent.
    let (name, final_s_mix) = match name.strip_suffix("-final-s-mix") {
        Some(base @ ("kn" | "kn-cooccurrence" | "kn-bridge" | "kn-cooccurrence-bridge")) => {
            (base, true)
        }
        Some(_) => return None,
        None => (name, false),
    };
    // "<navigator>-bridge": KN or TE with the second-hop start.
    let (name, bridge) = match name.strip_suffix("-bridge") {
        Some(base) => (base, true),
        None => (name, false),
    };
    // "<navigator>-cooccurrence": over the co-occurrence memory (no LLM call in its build).
    let (name, cooccurrence) = match name.strip_suffix("-cooccurrence") {
        Some(base) => (base, true),
        None => (name, false),
    };
    let nav = |method, reflection, navigation, memory| {
        Some(MethodSpec::new(Navigate {
            method,
            reflection,
            navigation,
            memory,
            relevance_order,
            final_s_mix,
            answer_segments,
            answer_sentences,
            check_percent,
            bridge,
        }))
    };
    match name {
        _ if (cooccurrence || bridge) && name.starts_with("no-") => return None,
        "no-graph-update" => return nav(NavMethod::Kn, true, true, MemoryKind::NoGraphUpdate),
        "no-open-entity" => return nav(NavMethod::Kn, true, true, MemoryKind::NoOpenEntity),
        _ => {}
    }
    // kn, ges, te, each with -no-reflection or -no-navigation.
    let (method, reflection, navigation) = match name.split_once("-no-") {
        None => (name, true, true),
        Some((m, "reflection")) => (m, false, true),
        Some((m, "navigation")) => (m, true, false),
        Some(_) => return None,
    };
    let method = match method {
        "kn" => NavMethod::Kn,
        "ges" => NavMethod::Ges,
        "te" => NavMethod::Te,
        _ => return None,
    };
    // Only ablations that change something are names: GES scores no reflection and has no
    // navigation to turn off (its expansion is its retrieval); TE uses no reflection.
    match (method, reflection, navigation) {
        (NavMethod::Ges, false, _) | (NavMethod::Ges, _, false) | (NavMethod::Te, false, _) => {
            return None
        }
        // GES has no start set to order.
        (NavMethod::Ges, ..) if bridge => return None,
        _ => {}
    }
    let memory = if cooccurrence {
        MemoryKind::Cooccurrence
    } else {
        MemoryKind::Graph
    };
    nav(method, reflection, navigation, memory)
}

/// `name` as `base` + `marker` + a number written plainly (no sign, no leading zero).
fn suffix_number<'a>(name: &'a str, marker: &str) -> Option<(&'a str, usize)> {
    let (base, n) = name.rsplit_once(marker)?;
    let k = n.parse::<usize>().ok()?;
    (k.to_string() == n).then_some((base, k))
}

impl Navigate {
    /// The navigation settings of this navigator: the configuration's `[navigate]` with this
    /// name's choices (method, ablations, answer order and context, check threshold) applied.
    pub fn settings(&self, base: &NavigateConfig) -> NavigateConfig {
        let mut opts = base.clone();
        opts.method = self.method;
        opts.reflection = self.reflection;
        opts.navigation = self.navigation;
        if self.relevance_order {
            opts.answer_order = Order::Relevance;
        }
        if self.final_s_mix {
            opts.final_context = FinalContext::SMix;
        }
        if self.answer_segments > 0 {
            opts.answer_segments = self.answer_segments;
        }
        if self.answer_sentences > 0 {
            opts.answer_sentence_tokens = self.answer_sentences;
        }
        if self.check_percent > 0 {
            opts.check_threshold = f64::from(self.check_percent) / 100.0;
        }
        if self.bridge {
            opts.start_bridge = true;
        }
        opts
    }
}

#[async_trait]
impl Method for Navigate {
    fn name(&self) -> String {
        let base = match (self.memory, self.reflection, self.navigation) {
            (MemoryKind::NoGraphUpdate, ..) => "no-graph-update".into(),
            (MemoryKind::NoOpenEntity, ..) => "no-open-entity".into(),
            (_, false, _) => format!("{}-no-reflection", self.method),
            (_, _, false) => format!("{}-no-navigation", self.method),
            _ => self.method.to_string(),
        };
        let base = if self.memory == MemoryKind::Cooccurrence {
            format!("{base}-cooccurrence")
        } else {
            base
        };
        let base = if self.bridge {
            format!("{base}-bridge")
        } else {
            base
        };
        let base = if self.final_s_mix {
            format!("{base}-final-s-mix")
        } else {
            base
        };
        let base = if self.answer_segments > 0 {
            format!("{base}-answer-top{}", self.answer_segments)
        } else {
            base
        };
        let base = if self.answer_sentences > 0 {
            format!("{base}-sentences{}", self.answer_sentences)
        } else {
            base
        };
        let base = if self.check_percent > 0 {
            format!("{base}-check{}", self.check_percent)
        } else {
            base
        };
        if self.relevance_order {
            format!("{base}-relevance-order")
        } else {
            base
        }
    }

    fn memory_kind(&self) -> MemoryKind {
        self.memory
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
        let Prepared::Graph(m) = prepared else {
            return Err(wrong_memory(self, prepared));
        };
        let opts = self.settings(nav);
        Ok(
            Navigator::new(ctx.llm, ctx.prompts, ctx.embedder, m, opts, ctx.window)
                .ask(question, options)
                .await?,
        )
    }

    fn recorded_context(&self) -> Recorded {
        // GES's only prompt with segments is its answer; KN and TE recorded every segment
        // shown, not the answer prompt's.
        Recorded::Segments {
            answer: self.method == NavMethod::Ges,
        }
    }
}
