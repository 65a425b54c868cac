//! LongBench-style long contexts from HotpotQA: each item's 10 paragraphs padded with paragraphs
//! of other items (no repeated titles) to about N words, shuffled, rendered as
//! `Passage i:\n{title}\n{text}`. Deterministic for a seed. This is the stand-in for LongBench's
//! HotpotQA (which is not available offline) and is labelled so in its `dataset` field.

use std::collections::HashSet;

use serde::Serialize;

use super::datasets::{
    gold_ranges, placed_chain, render_sentences, GoldHop, HotpotRaw, MultiHopRaw,
};
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
    /// The source's question type (HotpotQA, 2Wiki) or hop count (MuSiQue); none when empty.
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The gold path in `context` (MuSiQue's decomposition, 2Wiki's triples); not written to
    /// the jsonl, whose fields are LongBench's.
    #[serde(skip)]
    pub chain: Vec<GoldHop>,
}

fn words(s: &str) -> usize {
    s.split_whitespace().count()
}

/// The words of a paragraph as rendered (its sentences concatenated), as the padding always
/// counted them.
fn words_of(sentences: &[String]) -> usize {
    words(&sentences.concat())
}

/// Builds the long contexts of the first `count` HotpotQA items (padding drawn from all of
/// `items`). `seed` fixes every choice; items keep their order.
pub fn generate(
    items: &[HotpotRaw],
    count: usize,
    target_words: usize,
    seed: u64,
) -> Vec<LongItem> {
    let raw: Vec<MultiHopRaw> = items.iter().cloned().map(MultiHopRaw::from).collect();
    generate_multihop(&raw, count, target_words, seed, DATASET)
}

/// Builds the long contexts of the first `count` multi-hop items, labelled `dataset`: each
/// item's own paragraphs (all of them: MuSiQue repeats titles within a question) padded with
/// paragraphs of the other items whose titles the context does not hold yet, to about
/// `target_words` words, shuffled. `seed` fixes every choice; items keep their order. The
/// padding can only draw on the file's own paragraphs (a 40-item file has 400), so a large
/// target on a small file stops short of it (see `LongItem::length`).
pub fn generate_multihop(
    items: &[MultiHopRaw],
    count: usize,
    target_words: usize,
    seed: u64,
    dataset: &str,
) -> Vec<LongItem> {
    // The pool: every paragraph of every item, tagged with its item.
    let pool: Vec<(usize, &String, &Vec<String>)> = items
        .iter()
        .enumerate()
        .flat_map(|(i, it)| it.paragraphs.iter().map(move |p| (i, &p.0, &p.1)))
        .collect();
    items
        .iter()
        .take(count)
        .enumerate()
        .map(|(i, it)| {
            let mut rng =
                fastrand::Rng::with_seed(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut titles: HashSet<String> = HashSet::new();
            // (title, sentences, the item's own paragraph index).
            let mut paragraphs: Vec<(String, Vec<String>, Option<usize>)> = Vec::new();
            for (k, p) in it.paragraphs.iter().enumerate() {
                titles.insert(p.0.clone());
                paragraphs.push((p.0.clone(), p.1.clone(), Some(k)));
            }
            let mut total: usize = paragraphs
                .iter()
                .map(|(t, x, _)| words(t) + words_of(x))
                .sum();
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
                paragraphs.push((title.clone(), sentences.clone(), None));
            }
            rng.shuffle(&mut paragraphs);
            let mut at = vec![0usize; it.paragraphs.len()];
            for (pos, p) in paragraphs.iter().enumerate() {
                if let Some(k) = p.2 {
                    at[k] = pos;
                }
            }
            let rendered: Vec<(String, Vec<String>)> =
                paragraphs.into_iter().map(|(t, x, _)| (t, x)).collect();
            let (context, ranges) = render_sentences(&rendered);
            let spans = gold_ranges(&it.gold, &at, &ranges);
            let chain = placed_chain(&it.chain, &at, &ranges);
            LongItem {
                input: it.question.clone(),
                context,
                answers: it.answers.clone(),
                length: total,
                dataset: dataset.to_string(),
                language: "en".to_string(),
                id: it.id.clone(),
                supporting_titles: it.supporting_titles.clone(),
                supporting_spans: spans,
                kind: it.kind.clone(),
                chain,
            }
        })
        .collect()
}
/// `qrmem data longbench-style`: generates the first `limit` items (all by default) of
/// `dataset` (hotpotqa, 2wiki or musique) from the dev file `input` into the jsonl file
/// `output` (written whole: a temporary file, then a rename). Padding draws on every item's
/// paragraphs; `limit` only cuts the output. Returns the number of items written.
pub fn write_jsonl(
    dataset: &str,
    input: &std::path::Path,
    output: &std::path::Path,
    words: usize,
    seed: u64,
    limit: Option<usize>,
) -> Result<usize, super::datasets::DatasetError> {
    let raw = super::datasets::load_multihop_raw(dataset, input)?;
    let label = match dataset {
        "2wiki" => "2wikimqa-longbench-style",
        "musique" => "musique-longbench-style",
        _ => DATASET,
    };
    let n = limit.unwrap_or(raw.len()).min(raw.len());
    let items = generate_multihop(&raw, n, words, seed, label);
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
