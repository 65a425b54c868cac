//! The items of an experiment: a dataset read by its name, the first `limit` of its items, with
//! the notes a run should carry. The loaders are in `datasets`, the LongBench-style generator in
//! `longbench_style`.

use std::path::Path;

use super::datasets::{
    err, load_2wiki_raw, load_hotpot, load_hotpot_raw, load_leval, load_longbench,
    load_musique_raw, load_quality_flat, multihop_items, DatasetError, MultiHopRaw, QaItem,
};
use super::longbench_style;

/// The datasets `load` reads, for help and errors.
pub const DATASETS: &str = "hotpotqa, longbench-style, 2wiki, 2wiki-longbench-style, musique, musique-longbench-style, longbench, quality, quality-flat, qasper";

/// The words of a LongBench-style context when the run names none: LongBench's averages
/// (HotpotQA about 9,000, 2WikiMQA about 4,900, MuSiQue about 11,200).
pub fn default_words(dataset: &str) -> usize {
    match dataset {
        "2wiki-longbench-style" => 4900,
        "musique-longbench-style" => 11200,
        _ => 9000,
    }
}

/// LongBench-style items of `raw` labelled `label` (the first `limit`, padded from all).
fn long_items(
    raw: &[MultiHopRaw],
    limit: Option<usize>,
    words: usize,
    seed: u64,
    label: &str,
) -> Vec<QaItem> {
    let n = limit.unwrap_or(raw.len()).min(raw.len());
    longbench_style::generate_multihop(raw, n, words, seed, label)
        .into_iter()
        .map(|l| QaItem {
            id: l.id,
            dataset: l.dataset,
            context: l.context,
            question: l.input,
            options: vec![],
            answers: l.answers,
            gold_letter: None,
            supporting: l.supporting_titles,
            gold_spans: Some(l.supporting_spans),
            kind: super::datasets::kind_of(&l.kind),
            chain: l.chain,
        })
        .collect()
}

/// The items of `dataset` (see [`DATASETS`]) read from `data`, the first `limit` of them, and the notes the run should
/// carry (the LongBench-style label). `seed` and `words` shape the LongBench-style contexts.
pub fn load(
    dataset: &str,
    data: &Path,
    limit: Option<usize>,
    seed: u64,
    words: usize,
) -> Result<(Vec<QaItem>, Vec<String>), DatasetError> {
    let mut notes = Vec::new();
    let mut items = match dataset {
        "hotpotqa" => load_hotpot(data)?,
        "longbench" => load_longbench(data)?,
        "longbench-style" => {
            let raw: Vec<MultiHopRaw> = load_hotpot_raw(data)?
                .into_iter()
                .map(MultiHopRaw::from)
                .collect();
            notes.push(format!(
                "LongBench-style stand-in for LongBench's HotpotQA, built from {} (each item's 10 paragraphs padded with other items' paragraphs to about {words} words, seed {seed}); not LongBench itself.",
                data.display()
            ));
            long_items(&raw, limit, words, seed, longbench_style::DATASET)
        }
        "2wiki" => multihop_items(load_2wiki_raw(data)?, "2wikimqa"),
        "musique" => multihop_items(load_musique_raw(data)?, "musique"),
        "2wiki-longbench-style" | "musique-longbench-style" => {
            let (raw, label, name, unit) = if dataset == "2wiki-longbench-style" {
                (
                    load_2wiki_raw(data)?,
                    "2wikimqa-longbench-style",
                    "2WikiMultihopQA",
                    "sentences",
                )
            } else {
                (
                    load_musique_raw(data)?,
                    "musique-longbench-style",
                    "MuSiQue",
                    "paragraphs",
                )
            };
            let pool: usize = raw.iter().map(|r| r.paragraphs.len()).sum();
            notes.push(format!(
                "LongBench-style stand-in for LongBench's {name}, built from {} (each item's own paragraphs padded with other items' paragraphs of the same file to about {words} words, seed {seed}; the pool is the file's {pool} paragraphs, so every distractor comes from another question of the same sample, where LongBench drew its padding from the dataset's whole corpus); gold evidence: the supporting {unit}. Not LongBench itself.",
                data.display()
            ));
            long_items(&raw, limit, words, seed, label)
        }
        "quality" => load_leval(data, "quality")?,
        "qasper" => load_leval(data, "qasper")?,
        "quality-flat" => load_quality_flat(data)?,
        other => {
            return Err(err(
                data,
                None,
                format!("unknown dataset '{other}' ({DATASETS})"),
            ))
        }
    };
    if let Some(n) = limit {
        items.truncate(n);
    }
    Ok((items, notes))
}
