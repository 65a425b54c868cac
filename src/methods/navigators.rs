//! The QRMeM navigators as methods: KN (Algorithm 1), GES and TE over the graph memory, and the
//! paper's ablations (no reflection, no navigation, a memory built without graph update or
//! without open entity recognition).

use async_trait::async_trait;

use super::method::{wrong_memory, Family, Method, MethodSpec, Recorded, Role};
use super::spec::{MemoryKind, MethodError, Prepared};
use super::Ctx;
use crate::answer::Trace;
use crate::config::{AnswerConfig, FinalContext, NavMethod, NavigateConfig, Order};
use crate::navigate::Navigator;

/// A navigator over a QRMeM memory of `memory` kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Navigate {
    pub method: NavMethod,
    /// Ablation: score edges with [Q; R; E] (true; E the entities reached so far, E_s at the
    /// first expansion) or Q only (false).
    pub reflection: bool,
    /// Ablation: navigate (true) or answer from S_imp only (false).
    pub navigation: bool,
    pub memory: MemoryKind,
    /// The answer prompt shows its segments by relevance (true) or as configured (false).
    pub relevance_order: bool,
    /// KN answers, when its trials are spent, from the last S_mix (true) or as configured.
    pub final_s_mix: bool,
    /// KN answers, when its trials are spent, from the last S_mix filled to the budget with the
    /// start's order and the question's BM25 (`answer.final_context = s-mix-filled`).
    pub final_filled: bool,
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
    /// KN and TE order the start set (and KN its final context) by the hop from the best unit
    /// to the own passages of the entities it names (`navigate.start_hop`).
    pub hop: bool,
    /// With `hop`: the hop starts from E_s's own passages (`navigate.start_own`).
    pub own: bool,
    /// Navigate and answer over the document's passages, every prompt showing at most this
    /// many tokens of them (0: segments, as configured).
    pub passages: usize,
    /// KN's final answer prompt shows the relations its trials followed above its units
    /// (`answer.path`).
    pub path: bool,
}

pub const FAMILY: Family = Family { names, parse };

/// The navigators' names: the bases, then every modifier of [`MODIFIERS`] with its effect.
fn names() -> String {
    let modifiers: Vec<String> = MODIFIERS
        .iter()
        .map(|m| {
            let n = if m.numbered { "N" } else { "" };
            format!("{}{n} ({})", m.suffix, m.effect)
        })
        .collect();
    format!(
        "{}, each with the modifiers in this order: {}; e.g. kn-passages400, kn-sentences1000-check44",
        BASES.join(", "),
        modifiers.join(", ")
    )
}

/// The navigators' bases: the paper's three navigators, their ablations, the ablation memories.
pub const BASES: [&str; 8] = [
    "kn",
    "ges",
    "te",
    "kn-no-reflection",
    "kn-no-navigation",
    "te-no-navigation",
    "no-graph-update",
    "no-open-entity",
];

/// A modifier of a navigator's name: its suffix, whether a number follows it, what it does,
/// and how it is read from and written into a [`Navigate`]. The one table of them: `parse`
/// strips them from the end of a name in the reverse of this order, `name` writes them in it.
pub struct Modifier {
    pub suffix: &'static str,
    /// The suffix takes a number (`-passages400`); 0 is refused.
    pub numbered: bool,
    pub effect: &'static str,
    /// The modifier's value in a navigator (0: absent; 1 for a present plain modifier).
    get: fn(&Navigate) -> usize,
    set: fn(&mut Navigate, usize),
}

/// Every navigator modifier, in the order a name carries them.
pub const MODIFIERS: &[Modifier] = &[
    Modifier {
        suffix: "-cooccurrence",
        numbered: false,
        effect: "reads the co-occurrence memory (no LLM call in its build) instead of the paper's graph",
        get: |n| usize::from(n.memory == MemoryKind::Cooccurrence),
        set: |n, _| n.memory = MemoryKind::Cooccurrence,
    },
    Modifier {
        suffix: "-bridge",
        numbered: false,
        effect: "KN and TE: the start ordered for the second hop (navigate.start_bridge)",
        get: |n| usize::from(n.bridge),
        set: |n, _| n.bridge = true,
    },
    Modifier {
        suffix: "-own",
        numbered: false,
        effect: "with -hop: the hop starts from the own passages of the question's entities E_s, not the best unit (navigate.start_own)",
        get: |n| usize::from(n.own),
        set: |n, _| n.own = true,
    },
    Modifier {
        suffix: "-hop",
        numbered: false,
        effect: "KN and TE: the start's best unit, then the own passages of the entities it names; GES: its ranking in the same order (navigate.start_hop)",
        get: |n| usize::from(n.hop),
        set: |n, _| n.hop = true,
    },
    Modifier {
        suffix: "-final-s-mix",
        numbered: false,
        effect: "KN: answers from the last S_mix when its trials are spent (answer.final_context = s-mix)",
        get: |n| usize::from(n.final_s_mix),
        set: |n, _| n.final_s_mix = true,
    },
    Modifier {
        suffix: "-final-filled",
        numbered: false,
        effect: "KN: answers from the last S_mix when its trials are spent, filled to the budget with the rest of the start's order, then the document's units by the question's BM25 (answer.final_context = s-mix-filled)",
        get: |n| usize::from(n.final_filled),
        set: |n, _| n.final_filled = true,
    },
    Modifier {
        suffix: "-answer-top",
        numbered: true,
        effect: "the final answer prompt shows at most N segments (answer.max_units)",
        get: |n| n.answer_segments,
        set: |n, k| n.answer_segments = k,
    },
    Modifier {
        suffix: "-passages",
        numbered: true,
        effect: "navigates and answers over the document's passages, every prompt showing at most N tokens of them (navigate.passage_tokens, navigate.context_tokens)",
        get: |n| n.passages,
        set: |n, k| n.passages = k,
    },
    Modifier {
        suffix: "-sentences",
        numbered: true,
        effect: "the final answer shows N tokens of sentences instead of whole units (answer.sentence_tokens)",
        get: |n| n.answer_sentences,
        set: |n, k| n.answer_sentences = k,
    },
    Modifier {
        suffix: "-check",
        numbered: true,
        effect: "KN stops when the check's P(answerable) is at least N% (1-99; navigate.check_threshold)",
        get: |n| n.check_percent as usize,
        set: |n, k| n.check_percent = k as u32,
    },
    Modifier {
        suffix: "-relevance-order",
        numbered: false,
        effect: "the answer prompt shows its units by relevance (answer.order = relevance)",
        get: |n| usize::from(n.relevance_order),
        set: |n, _| n.relevance_order = true,
    },
    Modifier {
        suffix: "-path",
        numbered: false,
        effect: "KN: the final answer prompt shows the relations its trials followed above its units (answer.path)",
        get: |n| usize::from(n.path),
        set: |n, _| n.path = true,
    },
];

fn parse(name: &str) -> Option<MethodSpec> {
    let mut nav = Navigate {
        method: NavMethod::Kn,
        reflection: true,
        navigation: true,
        memory: MemoryKind::Graph,
        relevance_order: false,
        final_s_mix: false,
        final_filled: false,
        answer_segments: 0,
        answer_sentences: 0,
        check_percent: 0,
        bridge: false,
        hop: false,
        own: false,
        passages: 0,
        path: false,
    };
    // Strip the modifiers from the end, each at most once, in the reverse of the table's order.
    let mut base = name;
    for m in MODIFIERS.iter().rev() {
        if m.numbered {
            if let Some((rest, k)) = suffix_number(base, m.suffix) {
                if k == 0 {
                    return None;
                }
                (m.set)(&mut nav, k);
                base = rest;
            }
        } else if let Some(rest) = base.strip_suffix(m.suffix) {
            (m.set)(&mut nav, 1);
            base = rest;
        }
    }
    // The base: an ablation memory, or kn / ges / te with -no-reflection or -no-navigation.
    match base {
        // The ablation memories are memories of their own: no -cooccurrence on them.
        "no-graph-update" | "no-open-entity" if nav.memory == MemoryKind::Cooccurrence => {
            return None
        }
        "no-graph-update" => nav.memory = MemoryKind::NoGraphUpdate,
        "no-open-entity" => nav.memory = MemoryKind::NoOpenEntity,
        _ => {
            let (method, reflection, navigation) = match base.split_once("-no-") {
                None => (base, true, true),
                Some((m, "reflection")) => (m, false, true),
                Some((m, "navigation")) => (m, true, false),
                Some(_) => return None,
            };
            nav.method = match method {
                "kn" => NavMethod::Kn,
                "ges" => NavMethod::Ges,
                "te" => NavMethod::Te,
                _ => return None,
            };
            nav.reflection = reflection;
            nav.navigation = navigation;
        }
    }
    nav.valid().then(|| MethodSpec::new(nav))
}

/// `name` as `base` + `marker` + a number written plainly (no sign, no leading zero).
fn suffix_number<'a>(name: &'a str, marker: &str) -> Option<(&'a str, usize)> {
    let (base, n) = name.rsplit_once(marker)?;
    let k = n.parse::<usize>().ok()?;
    (k.to_string() == n).then_some((base, k))
}

impl Navigate {
    /// Whether this combination is a method: only ablations and modifiers that change
    /// something are names (GES scores no reflection and has no navigation to turn off and no
    /// start set to order; TE uses no reflection; the check threshold and the final S_mix are
    /// KN's; the ablation memories take no other memory or start).
    fn valid(&self) -> bool {
        let ablation_memory = matches!(
            self.memory,
            MemoryKind::NoGraphUpdate | MemoryKind::NoOpenEntity
        );
        let ges = self.method == NavMethod::Ges;
        let kn = self.method == NavMethod::Kn;
        !(ges && (!self.reflection || !self.navigation || self.bridge)
            || self.method == NavMethod::Te && !self.reflection
            || !kn
                && (self.final_s_mix || self.final_filled || self.check_percent > 0 || self.path)
            || self.final_s_mix && self.final_filled
            || self.check_percent > 99
            || self.bridge && self.hop
            || self.own && !self.hop
            || ablation_memory && (self.bridge || self.hop))
    }

    /// The final answer settings of this navigator: the configuration's `[answer]` with this
    /// name's choices (final context, order, units, sentences, path) applied.
    pub fn answer_settings(&self, base: &AnswerConfig) -> AnswerConfig {
        let mut a = *base;
        if self.relevance_order {
            a.order = Order::Relevance;
        }
        if self.final_s_mix {
            a.final_context = FinalContext::SMix;
        }
        if self.final_filled {
            a.final_context = FinalContext::SMixFilled;
        }
        if self.answer_segments > 0 {
            a.max_units = self.answer_segments;
        }
        if self.answer_sentences > 0 {
            a.sentence_tokens = self.answer_sentences;
        }
        if self.path {
            a.path = true;
        }
        a
    }

    /// The navigation settings of this navigator: the configuration's `[navigate]` with this
    /// name's choices (method, ablations, start, check threshold, passages) applied.
    pub fn settings(&self, base: &NavigateConfig) -> NavigateConfig {
        let mut opts = base.clone();
        opts.method = self.method;
        opts.reflection = self.reflection;
        opts.navigation = self.navigation;
        if self.check_percent > 0 {
            opts.check_threshold = f64::from(self.check_percent) / 100.0;
        }
        if self.bridge {
            opts.start_bridge = true;
        }
        if self.hop {
            opts.start_hop = true;
        }
        if self.own {
            opts.start_own = true;
        }
        if self.passages > 0 {
            opts.passage_tokens = crate::text::passages::cap(opts.passage_tokens);
            opts.context_tokens = self.passages;
        }
        opts
    }
}

#[async_trait]
impl Method for Navigate {
    fn name(&self) -> String {
        let mut name = match (self.memory, self.reflection, self.navigation) {
            (MemoryKind::NoGraphUpdate, ..) => "no-graph-update".to_string(),
            (MemoryKind::NoOpenEntity, ..) => "no-open-entity".to_string(),
            (_, false, _) => format!("{}-no-reflection", self.method),
            (_, _, false) => format!("{}-no-navigation", self.method),
            _ => self.method.to_string(),
        };
        for m in MODIFIERS {
            match (m.get)(self) {
                0 => {}
                k if m.numbered => name.push_str(&format!("{}{k}", m.suffix)),
                _ => name.push_str(m.suffix),
            }
        }
        name
    }

    fn memory_kind(&self) -> MemoryKind {
        self.memory
    }

    fn uses_trials(&self) -> bool {
        true
    }

    fn role(&self) -> Role {
        let qrmem = matches!(self.memory, MemoryKind::Graph | MemoryKind::Cooccurrence);
        if self.method == NavMethod::Kn && qrmem {
            Role::Kn
        } else {
            Role::Other
        }
    }

    fn reads_passages(&self) -> bool {
        self.passages > 0
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
        let answer = self.answer_settings(&ctx.answer);
        let window = ctx.window.within(opts.context_tokens);
        if opts.passage_tokens > 0 {
            let view = passage_view(m, opts.passage_tokens, Some(ctx.embedder))?;
            return Ok(
                Navigator::new(ctx.llm, ctx.prompts, ctx.embedder, &view, opts, window)
                    .answering(answer)
                    .ask(question, options)
                    .await?,
            );
        }
        Ok(
            Navigator::new(ctx.llm, ctx.prompts, ctx.embedder, m, opts, window)
                .answering(answer)
                .ask(question, options)
                .await?,
        )
    }

    fn recorded_context(&self) -> Recorded {
        if self.passages > 0 {
            return Recorded::Unknown;
        }
        // GES's only prompt with segments is its answer; KN and TE recorded every segment
        // shown, not the answer prompt's.
        Recorded::Segments {
            answer: self.method == NavMethod::Ges,
        }
    }
}

/// `memory` over its passages of at most `max_tokens` tokens, with the passages' vectors when
/// an `embedder` is given (the methods that score passages by it; BM25 needs none).
pub(crate) fn passage_view(
    memory: &crate::memory::Memory,
    max_tokens: usize,
    embedder: Option<&dyn crate::embed::Embedder>,
) -> Result<crate::memory::Memory, MethodError> {
    let mut view = memory.passage_view(max_tokens);
    if let Some(embedder) = embedder {
        crate::embed::index_segments(&mut view, embedder)?;
    }
    Ok(view)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The help is the table: every base and every modifier it lists parses (the modifier on
    /// a base it applies to) and names itself back.
    #[test]
    fn every_base_and_modifier_of_the_help_is_a_name() {
        let help = names();
        for base in BASES {
            assert!(help.contains(base), "{base}");
            let spec = parse(base).unwrap_or_else(|| panic!("{base} does not parse"));
            assert_eq!(spec.name(), base);
        }
        for m in MODIFIERS {
            let suffix = if m.numbered {
                format!("{}40", m.suffix)
            } else {
                m.suffix.to_string()
            };
            assert!(help.contains(m.suffix), "{}", m.suffix);
            // -own needs -hop; the others stand on kn alone.
            let name = match m.suffix {
                "-own" => "kn-own-hop".to_string(),
                _ => format!("kn{suffix}"),
            };
            let spec = parse(&name).unwrap_or_else(|| panic!("{name} does not parse"));
            assert_eq!(spec.name(), name);
        }
        assert!(parse("kn-passages0").is_none());
        assert!(parse("kn-own").is_none(), "-own without -hop");
    }
}
