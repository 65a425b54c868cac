//! LongBench-style long contexts from HotpotQA: each item's 10 paragraphs padded with paragraphs
//! of other items (no repeated titles) to about N words, shuffled, rendered as
//! `Passage i:\n{title}\n{text}`. Deterministic for a seed. This is the stand-in for LongBench's
//! HotpotQA (which is not available offline) and is labelled so in its `dataset` field.

use std::collections::HashSet;

use serde::Serialize;

use super::datasets::{render_sentences, supporting_spans, HotpotRaw};
use crate::text::Span;

/// The `dataset` label of generated items.
pub const DATASET: &str = "hotpotqa-longbench-style";

/// One generated item, in LongBench's jsonl fields (plus the supporting titles).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LongItem {
    pub input: String,
    pub context: String,
    pub answers: Vec<String>,
    pub length: usize,
    pub dataset: String,
    pub language: String,
    #[serde(rename = "_id")]
    pub id: String,
    pub supporting_titles: Vec<String>,
    /// The byte ranges of the supporting sentences (HotpotQA's `supporting_facts`) in `context`.
    pub supporting_spans: Vec<Span>,
}

fn words(s: &str) -> usize {
    s.split_whitespace().count()
}

/// The words of a paragraph as rendered (its sentences concatenated), as the padding always
/// counted them.
fn words_of(sentences: &[String]) -> usize {
    words(&sentences.concat())
}

/// Builds the long contexts of the first `count` items (padding drawn from all of `items`).
/// `seed` fixes every choice; items keep their order.
pub fn generate(
    items: &[HotpotRaw],
    count: usize,
    target_words: usize,
    seed: u64,
) -> Vec<LongItem> {
    // The pool: every paragraph of every item, tagged with its item.
    let pool: Vec<(usize, &String, &Vec<String>)> = items
        .iter()
        .enumerate()
        .flat_map(|(i, it)| it.context.iter().map(move |p| (i, &p.0, &p.1)))
        .collect();
    items
        .iter()
        .take(count)
        .enumerate()
        .map(|(i, it)| {
            let mut rng =
                fastrand::Rng::with_seed(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut titles: HashSet<String> = HashSet::new();
            let mut paragraphs: Vec<(String, Vec<String>)> = Vec::new();
            for p in &it.context {
                if titles.insert(p.0.clone()) {
                    paragraphs.push((p.0.clone(), p.1.clone()));
                }
            }
            let mut total: usize = paragraphs.iter().map(|(t, x)| words(t) + words_of(x)).sum();
            let mut order: Vec<usize> = (0..pool.len()).collect();
            rng.shuffle(&mut order);
            for k in order {
                if total >= target_words {
                    break;
                }
                let (owner, title, sentences) = pool[k];
                if owner == i || !titles.insert(title.clone()) {
                    continue;
                }
                total += words(title) + words_of(sentences);
                paragraphs.push((title.clone(), sentences.clone()));
            }
            rng.shuffle(&mut paragraphs);
            let (context, ranges) = render_sentences(&paragraphs);
            let order: Vec<&str> = paragraphs.iter().map(|p| p.0.as_str()).collect();
            let (spans, _) = supporting_spans(&order, &ranges, &it.supporting_facts);
            let mut supporting: Vec<String> =
                it.supporting_facts.iter().map(|(t, _)| t.clone()).collect();
            supporting.dedup();
            LongItem {
                input: it.question.clone(),
                context,
                answers: vec![it.answer.clone()],
                length: total,
                dataset: DATASET.to_string(),
                language: "en".to_string(),
                id: it.id.clone(),
                supporting_titles: supporting,
                supporting_spans: spans,
            }
        })
        .collect()
}
/// `qrmem data longbench-style`: generates the first `limit` items (all by default) from the
/// HotpotQA distractor file `input` into the jsonl file `output` (written whole: a temporary
/// file, then a rename). Padding draws on every item's paragraphs; `limit` only cuts the output.
/// Returns the number of items written.
pub fn write_jsonl(
    input: &std::path::Path,
    output: &std::path::Path,
    words: usize,
    seed: u64,
    limit: Option<usize>,
) -> Result<usize, super::datasets::DatasetError> {
    let raw = super::datasets::load_hotpot_raw(input)?;
    let n = limit.unwrap_or(raw.len()).min(raw.len());
    let items = generate(&raw, n, words, seed);
    let fail = |message: String| super::datasets::DatasetError {
        path: output.display().to_string(),
        line: None,
        message,
    };
    let mut text = String::new();
    for it in &items[..n] {
        text.push_str(&serde_json::to_string(it).map_err(|e| fail(e.to_string()))?);
        text.push('\n');
    }
    let tmp = output.with_extension("jsonl.tmp");
    std::fs::write(&tmp, text).map_err(|e| fail(format!("cannot write {}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, output).map_err(|e| fail(format!("cannot write: {e}")))?;
    Ok(n)
}
