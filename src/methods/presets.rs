//! Presets: named configurations a user picks instead of spelling a method of the grammar
//! (`qrmem ask --preset NAME`, `batch --preset NAME`, `qrmem methods`). Each is one method
//! name plus the trials it runs with, what it is for and what it costs. Their measured F1 is
//! in the README's results table, regenerated from the committed runs (`eval/README.md`).
//!
//! The default ([`DEFAULT`]) was chosen by measurement: over every dev item of the three
//! datasets at 1.5B (130 questions) and the 200 unseen HotpotQA items, BM25 with the own start
//! and the hop over the document's passages answered best for its cost (one call, no LLM
//! build), not below the paper's KN with its interval anywhere (`eval/notebook/presets.md`).

use super::method::MethodSpec;

/// A named configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preset {
    pub name: &'static str,
    /// The method of the grammar it runs.
    pub method: &'static str,
    /// KN's trials, where the preset fixes them (None: the configuration's `max_trials`).
    pub trials: Option<usize>,
    /// LLM calls per question, as measured (a range where it depends on the question).
    pub calls: &'static str,
    /// Whether its memory needs LLM calls to build (minutes a document on this machine).
    pub llm_build: bool,
    pub purpose: &'static str,
}

/// Every preset, the default first.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "fast",
        method: "bm25-own-hop-passages400",
        trials: None,
        calls: "1",
        llm_build: false,
        purpose: "the default: the passages titled with the question's names, then the passages of the names they hold, 400 tokens, one answer call; the best measured answers for their cost",
    },
    Preset {
        name: "qrmem-paper",
        method: "kn",
        trials: Some(4),
        calls: "~6",
        llm_build: true,
        purpose: "the QRMeM paper's KN as published (its LLM graph over 600-token segments, four trials): for reproduction",
    },
    Preset {
        name: "qrmem-best",
        method: "kn-hop-final-filled-passages400",
        trials: Some(1),
        calls: "~4",
        llm_build: true,
        purpose: "QRMeM at its best measured configuration: KN over the LLM graph's passage view, the start's hop, one trial, the last context filled to 400 tokens",
    },
    Preset {
        name: "qrmem-no-build",
        method: "kn-cooccurrence-hop-final-filled-passages400",
        trials: Some(1),
        calls: "~4",
        llm_build: false,
        purpose: "the same navigation over the co-occurrence memory (no LLM call to build)",
    },
    Preset {
        name: "chain",
        method: "chain-decompose-final-passages400",
        trials: Some(4),
        calls: "2-5",
        llm_build: false,
        purpose: "experimental, for multi-hop questions: the question's sub-questions answered one at a time, each over its own 400 tokens of passages, then the question itself from the answers found (see eval/notebook/chain.md)",
    },
];

/// The preset `ask` and `batch` run when neither `--method` nor `--preset` is given.
pub const DEFAULT: &str = "fast";

/// The preset named `name`, or an error listing them.
pub fn preset(name: &str) -> Result<&'static Preset, String> {
    PRESETS.iter().find(|p| p.name == name).ok_or_else(|| {
        format!(
            "unknown preset '{name}' (one of: {})",
            PRESETS
                .iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

impl Preset {
    /// The method it runs.
    pub fn spec(&self) -> Result<MethodSpec, String> {
        self.method.parse()
    }
}

/// The presets as a table for `qrmem methods`.
pub fn table() -> String {
    let mut out = String::from(
        "PRESET          METHOD (trials)                                      CALLS  LLM BUILD\n",
    );
    for p in PRESETS {
        let method = match p.trials {
            Some(t) => format!("{} ({t})", p.method),
            None => p.method.to_string(),
        };
        out.push_str(&format!(
            "{:<15} {:<52} {:<6} {}\n  {}\n",
            p.name,
            method,
            p.calls,
            if p.llm_build { "yes" } else { "no" },
            p.purpose
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_names_a_method_of_the_grammar() {
        for p in PRESETS {
            let spec = p.spec().unwrap_or_else(|e| panic!("{}: {e}", p.name));
            assert_eq!(spec.name(), p.method, "{}", p.name);
            assert_eq!(p.trials.is_some(), spec.uses_trials(), "{}", p.name);
        }
        assert_eq!(PRESETS[0].name, DEFAULT);
        assert!(preset("nope").unwrap_err().contains("fast, qrmem-paper"));
    }

    #[test]
    fn the_llm_build_column_follows_the_memory() {
        for p in PRESETS {
            let spec = p.spec().unwrap();
            assert_eq!(spec.memory_kind().needs_llm(), p.llm_build, "{}", p.name);
        }
    }
}
