//! The items of an experiment: a dataset read by its name, the first `limit` of its items, with
//! the notes a run should carry. The loaders are in `datasets`, the LongBench-style generator in
//! `longbench_style`.

use std::path::Path;

use super::datasets::{
    err, load_hotpot, load_hotpot_raw, load_leval, load_longbench, load_quality_flat, DatasetError,
    QaItem,
};
use super::longbench_style;

/// The items of `dataset` (hotpotqa, longbench, longbench-style, quality, qasper,
/// quality-flat) read from `data`, the first `limit` of them, and the notes the run should
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
            let raw = load_hotpot_raw(data)?;
            let n = limit.unwrap_or(raw.len()).min(raw.len());
            let long = longbench_style::generate(&raw, n, words, seed);
            notes.push(format!(
                "LongBench-style stand-in for LongBench's HotpotQA, built from {} (each item's 10 paragraphs padded with other items' paragraphs to about {words} words, seed {seed}); not LongBench itself.",
                data.display()
            ));
            long.into_iter()
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
                })
                .collect()
        }
        "quality" => load_leval(data, "quality")?,
        "qasper" => load_leval(data, "qasper")?,
        "quality-flat" => load_quality_flat(data)?,
        other => {
            return Err(err(
                data,
                None,
                format!("unknown dataset '{other}' (hotpotqa, longbench, longbench-style, quality, quality-flat, qasper)"),
            ))
        }
    };
    if let Some(n) = limit {
        items.truncate(n);
    }
    Ok((items, notes))
}
