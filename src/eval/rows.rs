//! The rows a run writes and its report reads: one `results.jsonl` line per answered
//! (item, method, max trials) pair ([`ResultRecord`]), one `builds.jsonl` line per memory built
//! ([`BuildRecord`]), and what each cost at the LLM ([`RowCost`]).
//!
//! Invariant: rows are only ever added to; a field added later is optional with a default, so
//! every committed run directory still reads and reports byte-identical.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::evidence::ContextSpans;
use super::EvalError;
use crate::journal::Journal;
use crate::llm::StageStats;
use crate::memory::GraphDiagnostics;
use crate::methods::MemoryKind;
use crate::navigate::NavDiagnostics;

/// What one build or one answered question cost at the LLM, read off its scoped ledger. Both
/// row kinds flatten it, so its fields are top-level keys of every `results.jsonl` and
/// `builds.jsonl` line (the layout rows had before the struct existed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RowCost {
    /// Requests sent to the server.
    pub requests: u64,
    /// Calls answered by the reply cache.
    pub cache_hits: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens of the calls answered by the reply cache, as they cost when first sent
    /// (absent in rows written before it was recorded).
    #[serde(default)]
    pub replayed_prompt_tokens: u64,
    #[serde(default)]
    pub replayed_completion_tokens: u64,
    /// Of `prompt_tokens`, those the server reused from its prompt cache (OpenAI
    /// `prompt_tokens_details.cached_tokens`; 0 where the server does not say, and in rows
    /// recorded before it was).
    #[serde(default)]
    pub cached_prompt_tokens: u64,
}

impl RowCost {
    /// The cost recorded in a ledger's totals.
    pub fn of(total: &StageStats) -> Self {
        RowCost {
            requests: total.requests,
            cache_hits: total.cache_hits,
            prompt_tokens: total.prompt_tokens,
            completion_tokens: total.completion_tokens,
            replayed_prompt_tokens: total.replayed_prompt_tokens,
            replayed_completion_tokens: total.replayed_completion_tokens,
            cached_prompt_tokens: total.cached_prompt_tokens,
        }
    }

    /// Every call, sent or answered by the reply cache.
    pub fn calls(&self) -> u64 {
        self.requests + self.cache_hits
    }

    /// Prompt tokens of every call, whatever the reply cache answered.
    pub fn all_prompt_tokens(&self) -> u64 {
        self.prompt_tokens + self.replayed_prompt_tokens
    }

    /// Completion tokens of every call, whatever the reply cache answered.
    pub fn all_completion_tokens(&self) -> u64 {
        self.completion_tokens + self.replayed_completion_tokens
    }
}

/// One finished (item, method, max_trials) pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultRecord {
    pub item: String,
    pub dataset: String,
    pub method: String,
    /// The navigators' max trials; None for the one-shot baselines.
    pub max_trials: Option<usize>,
    pub question: String,
    pub prediction: String,
    pub gold: Vec<String>,
    pub gold_letter: Option<String>,
    /// Exact match (accuracy for multiple choice), 0 or 1.
    pub em: f64,
    /// F1 (accuracy for multiple choice), 0..1.
    pub f1: f64,
    /// The method failed: the error says why; the scores are 0.
    pub error: Option<String>,
    /// What answering cost at the LLM (its fields sit at the row's top level).
    #[serde(flatten)]
    pub cost: RowCost,
    pub wall_secs: f64,
    pub answered_by_check: bool,
    pub steps: usize,
    pub segments_used: Vec<usize>,
    /// Steps that failed without stopping the answer.
    pub step_failures: Vec<String>,
    /// The segment (leaf, chunk) indices of the final answer prompt (absent in rows recorded
    /// before it was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_segments: Option<Vec<usize>>,
    /// What the answerer was shown and the gold evidence (its fields sit at the row's top
    /// level; absent in rows recorded before spans were: see `backfill`).
    #[serde(flatten)]
    pub spans: ContextSpans,
    /// The graph navigators' diagnostics (|E_s|, |S_imp|, checks, expansions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nav: Option<NavDiagnostics>,
    /// The model that answered, as the server names it (absent in rows recorded before rows
    /// carried it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The question's kind (type or hop count) where the dataset gives one (absent in rows
    /// recorded before rows carried it: the report then reads it off the dataset's items).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

impl ResultRecord {
    pub fn key(&self) -> (String, String, Option<usize>) {
        (self.item.clone(), self.method.clone(), self.max_trials)
    }
}

/// The cost of preparing one memory (written when it was built, not when it was loaded).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BuildRecord {
    /// SHA-256 of the document, first 16 hex digits.
    pub document: String,
    pub kind: MemoryKind,
    pub items: Vec<String>,
    pub document_tokens: usize,
    pub segments: usize,
    pub entities: usize,
    pub relations: usize,
    pub step_failures: usize,
    /// What building cost at the LLM (its fields sit at the row's top level).
    #[serde(flatten)]
    pub cost: RowCost,
    pub wall_secs: f64,
    pub error: Option<String>,
    /// The graph's diagnostics (QRMeM graph builds; absent in rows recorded before them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<GraphDiagnostics>,
}

/// A document's key in the rows: SHA-256 of its text, first 16 hex digits.
pub(crate) fn doc_key(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))[..16].to_string()
}

/// The last record of each (item, method, max trials) key: there is one per key unless a
/// file was edited or a failed pair was run again.
pub fn latest(
    results: &[ResultRecord],
) -> BTreeMap<(String, String, Option<usize>), &ResultRecord> {
    results.iter().map(|r| (r.key(), r)).collect()
}

/// The file name (without extension) of a row's trace and page.
pub fn trace_stem(rec: &ResultRecord) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let trials = rec
        .max_trials
        .map(|t| format!("--t{t}"))
        .unwrap_or_default();
    format!("{}--{}{trials}", clean(&rec.item), clean(&rec.method))
}

/// Reads a run directory's results and builds (for the report).
pub fn read_run(dir: &Path) -> Result<(Vec<ResultRecord>, Vec<BuildRecord>), EvalError> {
    let (_, results) = Journal::open::<ResultRecord>(&dir.join("results.jsonl"), |_| true)?;
    let (_, builds) = Journal::open::<BuildRecord>(&dir.join("builds.jsonl"), |_| true)?;
    Ok((results, builds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_fields_stay_top_level_keys_in_their_old_places() {
        // A result row from before the replayed and server-cached counts were recorded.
        let old = r#"{"item":"a","dataset":"hotpotqa","method":"kn","max_trials":4,"question":"q","prediction":"p","gold":["g"],"gold_letter":null,"em":0.0,"f1":0.0,"error":null,"requests":3,"cache_hits":1,"prompt_tokens":3372,"completion_tokens":164,"wall_secs":32.5,"answered_by_check":false,"steps":7,"segments_used":[0,1,2],"step_failures":[]}"#;
        let r: ResultRecord = serde_json::from_str(old).unwrap();
        let want = RowCost {
            requests: 3,
            cache_hits: 1,
            prompt_tokens: 3372,
            completion_tokens: 164,
            ..RowCost::default()
        };
        assert_eq!((r.cost, r.cost.calls()), (want, 4));
        let new_keys = r#""completion_tokens":164,"replayed_prompt_tokens":0,"replayed_completion_tokens":0,"cached_prompt_tokens":0,"#;
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            old.replace(r#""completion_tokens":164,"#, new_keys)
        );
        // A build row as the runner writes it now.
        let build = r#"{"document":"d","kind":"summary-tree","items":["a"],"document_tokens":9000,"segments":15,"entities":0,"relations":0,"step_failures":2,"requests":20,"cache_hits":0,"prompt_tokens":40000,"completion_tokens":9000,"replayed_prompt_tokens":5,"replayed_completion_tokens":6,"cached_prompt_tokens":7,"wall_secs":2988.0,"error":null}"#;
        let b: BuildRecord = serde_json::from_str(build).unwrap();
        assert_eq!(
            (b.cost.all_prompt_tokens(), b.cost.all_completion_tokens()),
            (40005, 9006)
        );
        assert_eq!(serde_json::to_string(&b).unwrap(), build);
    }
}
