//! LongBench-style long contexts from HotpotQA: each item's 10 paragraphs padded with paragraphs
//! of other items (no repeated titles) to about N words, shuffled, rendered as
//! `Passage i:\n{title}\n{text}`. Deterministic for a seed. This is the stand-in for LongBench's
//! HotpotQA (which is not available offline) and is labelled so in its `dataset` field.

use std::collections::HashSet;

use serde::Serialize;

use super::datasets::{render_passages, HotpotRaw};

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
}

fn words(s: &str) -> usize {
    s.split_whitespace().count()
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
    let pool: Vec<(usize, String, String)> = items
        .iter()
        .enumerate()
        .flat_map(|(i, it)| {
            it.context
                .iter()
                .map(move |p| (i, p.0.clone(), p.1.concat()))
        })
        .collect();
    items
        .iter()
        .take(count)
        .enumerate()
        .map(|(i, it)| {
            let mut rng =
                fastrand::Rng::with_seed(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut titles: HashSet<String> = HashSet::new();
            let mut paragraphs: Vec<(String, String)> = Vec::new();
            for p in &it.context {
                if titles.insert(p.0.clone()) {
                    paragraphs.push((p.0.clone(), p.1.concat()));
                }
            }
            let mut total: usize = paragraphs.iter().map(|(t, x)| words(t) + words(x)).sum();
            let mut order: Vec<usize> = (0..pool.len()).collect();
            rng.shuffle(&mut order);
            for k in order {
                if total >= target_words {
                    break;
                }
                let (owner, title, text) = &pool[k];
                if *owner == i || !titles.insert(title.clone()) {
                    continue;
                }
                total += words(title) + words(text);
                paragraphs.push((title.clone(), text.clone()));
            }
            rng.shuffle(&mut paragraphs);
            let mut supporting: Vec<String> =
                it.supporting_facts.iter().map(|(t, _)| t.clone()).collect();
            supporting.dedup();
            LongItem {
                input: it.question.clone(),
                context: render_passages(&paragraphs),
                answers: vec![it.answer.clone()],
                length: total,
                dataset: DATASET.to_string(),
                language: "en".to_string(),
                id: it.id.clone(),
                supporting_titles: supporting,
            }
        })
        .collect()
}
