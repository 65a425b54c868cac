//! HippoRAG's retrieval protocol over a corpus (issue 68): the corpus is the union of the
//! paragraphs of a multi-hop dev file's questions (each paragraph one document, deduplicated
//! by its text); every question is asked against the whole corpus; a method's passage recall@k
//! is the share of a question's gold paragraphs among the first k documents it ranks, averaged
//! over the questions.

use std::collections::BTreeSet;
use std::time::Instant;

use serde::Serialize;

use super::datasets::MultiHopRaw;
use super::paired::{interval, Interval};
use crate::corpus::{Corpus, CorpusError, CorpusStore, Retriever};

/// What the protocol measured.
#[derive(Clone, Debug, Serialize)]
pub struct CorpusRecall {
    pub dataset: String,
    pub questions: usize,
    pub documents: usize,
    pub passages: usize,
    /// Wall seconds of the add (every paragraph; a second run adds nothing) and of embedding
    /// the passages for the dense row (none without it).
    pub add_secs: f64,
    pub embed_secs: Option<f64>,
    pub rows: Vec<RecallRow>,
}

/// Milliseconds a query took to rank, over every question (one long-lived process).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Latency {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

impl Latency {
    /// The summary of `ms` (any order); all zero for none.
    pub fn of(mut ms: Vec<f64>) -> Latency {
        if ms.is_empty() {
            return Latency::default();
        }
        ms.sort_by(f64::total_cmp);
        // The nearest-rank percentile.
        let at = |p: f64| ms[((p * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1];
        Latency {
            p50_ms: at(0.50),
            p99_ms: at(0.99),
            max_ms: ms[ms.len() - 1],
            mean_ms: ms.iter().sum::<f64>() / ms.len() as f64,
        }
    }
}

/// One retriever's recall, in percent.
#[derive(Clone, Debug, Serialize)]
pub struct RecallRow {
    pub retriever: String,
    pub recall_at_2: f64,
    pub recall_at_5: f64,
    /// Per question (in the file's order): the gold paragraphs among the first 2 and 5, and
    /// how many gold paragraphs it has.
    pub per_question: Vec<(usize, usize, usize)>,
    /// Against the first retriever (none for the first): recall@2 and @5 paired per question,
    /// with 95% bootstrap intervals.
    pub against_first: Option<(Interval, Interval)>,
    /// How long each question's ranking took (top 20, in this process).
    pub latency: Latency,
}

impl CorpusRecall {
    pub fn to_markdown(&self) -> String {
        let first = self.rows.first().map_or("", |r| r.retriever.as_str());
        let mut s = format!(
            "{}: {} questions against one corpus of {} documents ({} passages); add {:.1} s{}\n\n| retriever | recall@2 | recall@5 | recall@2 - {first} | recall@5 - {first} | ms p50 / p99 |\n|---|---:|---:|---:|---:|---:|\n",
            self.dataset,
            self.questions,
            self.documents,
            self.passages,
            self.add_secs,
            self.embed_secs
                .map(|e| format!(", embedding {e:.1} s"))
                .unwrap_or_default()
        );
        let show = |i: &Interval| format!("{:+.1} [{:+.1}, {:+.1}]", i.mean, i.low, i.high);
        for r in &self.rows {
            let (a, b) = match &r.against_first {
                Some((a, b)) => (show(a), show(b)),
                None => (String::new(), String::new()),
            };
            s.push_str(&format!(
                "| {} | {:.1} | {:.1} | {a} | {b} | {:.1} / {:.1} |\n",
                r.retriever, r.recall_at_2, r.recall_at_5, r.latency.p50_ms, r.latency.p99_ms
            ));
        }
        s
    }
}

/// A paragraph as one corpus document: its title on the first line, then its sentences.
pub fn paragraph_document(title: &str, sentences: &[String]) -> String {
    format!("{title}\n{}", sentences.concat().trim())
}

/// Every paragraph of `items` as a document: its title as the name, [`paragraph_document`] as
/// the text, in the items' order (a paragraph two items share comes twice; the corpus keeps it
/// once).
pub fn paragraph_documents(items: &[MultiHopRaw]) -> Vec<(String, String)> {
    items
        .iter()
        .flat_map(|item| item.paragraphs.iter())
        .map(|(title, sentences)| (title.clone(), paragraph_document(title, sentences)))
        .collect()
}

/// Adds every paragraph of `items` to `corpus`, each one document (already present ones are
/// skipped, so a second call adds nothing), calling `progress` every hundred.
pub fn add_paragraphs(
    items: &[MultiHopRaw],
    corpus: &mut Corpus,
    mut progress: impl FnMut(&str, usize, usize),
) -> Result<(), CorpusError> {
    let docs = paragraph_documents(items);
    let total = docs.len();
    let mut done = 0;
    corpus.add_all(docs, |_, _| {
        done += 1;
        if done % 100 == 0 || done == total {
            progress("adding paragraphs", done, total);
        }
    })?;
    Ok(())
}

/// The ids of a question's gold paragraphs (as the corpus names them).
pub fn gold_paragraphs(item: &MultiHopRaw) -> BTreeSet<String> {
    let gold: BTreeSet<usize> = item.gold.iter().map(|&(p, _)| p).collect();
    gold.into_iter()
        .filter_map(|p| item.paragraphs.get(p))
        .map(|(title, sentences)| paragraph_id(title, sentences))
        .collect()
}

/// Adds every paragraph of `items` to `corpus` ([`add_paragraphs`]); then ranks every
/// question with each retriever and measures recall@2 and @5 at document grain.
pub fn corpus_recall(
    dataset: &str,
    items: &[MultiHopRaw],
    corpus: &mut Corpus,
    retrievers: &[Retriever],
    embedder: Option<&dyn crate::embed::Embedder>,
    mut progress: impl FnMut(&str, usize, usize),
) -> Result<CorpusRecall, CorpusError> {
    let started = Instant::now();
    add_paragraphs(items, corpus, &mut progress)?;
    let add_secs = started.elapsed().as_secs_f64();
    let golds: Vec<BTreeSet<String>> = items.iter().map(gold_paragraphs).collect();
    let mut embed_secs = None;
    if let (true, Some(embedder)) = (retrievers.contains(&Retriever::Dense), embedder) {
        let started = Instant::now();
        corpus.embed_missing(embedder, 64, |done, total| {
            progress("embedding passages", done, total)
        })?;
        embed_secs = Some(started.elapsed().as_secs_f64());
    }
    let mut rows = Vec::new();
    for &retriever in retrievers {
        let mut per_question = Vec::with_capacity(items.len());
        let mut took = Vec::with_capacity(items.len());
        for (n, (item, gold)) in items.iter().zip(&golds).enumerate() {
            // Documents in rank order, each once.
            let mut docs: Vec<String> = Vec::new();
            let started = Instant::now();
            let ranked = corpus.rank(retriever, &item.question, 20, embedder)?;
            took.push(started.elapsed().as_secs_f64() * 1000.0);
            for (doc, _) in ranked {
                if !docs.contains(&doc) {
                    docs.push(doc);
                }
            }
            let within = |k: usize| docs.iter().take(k).filter(|d| gold.contains(*d)).count();
            per_question.push((within(2), within(5), gold.len()));
            progress(&format!("ranking ({retriever})"), n + 1, items.len());
        }
        let mean = |f: &dyn Fn(&(usize, usize, usize)) -> usize| {
            let scored: Vec<f64> = per_question
                .iter()
                .filter(|q| q.2 > 0)
                .map(|q| f(q) as f64 / q.2 as f64)
                .collect();
            100.0 * scored.iter().sum::<f64>() / scored.len().max(1) as f64
        };
        let against_first = rows.first().and_then(|first: &RecallRow| {
            let pairs = |k: fn(&(usize, usize, usize)) -> usize| -> Vec<(f64, f64)> {
                per_question
                    .iter()
                    .zip(&first.per_question)
                    .filter(|(q, _)| q.2 > 0)
                    .map(|(q, f)| {
                        (
                            100.0 * k(q) as f64 / q.2 as f64,
                            100.0 * k(f) as f64 / f.2 as f64,
                        )
                    })
                    .collect()
            };
            Some((interval(&pairs(|q| q.0))?, interval(&pairs(|q| q.1))?))
        });
        rows.push(RecallRow {
            retriever: retriever.to_string(),
            recall_at_2: mean(&|q| q.0),
            recall_at_5: mean(&|q| q.1),
            per_question,
            against_first,
            latency: Latency::of(took),
        });
    }
    let documents = corpus.list()?.len();
    let passages = corpus.all_passages()?.len();
    Ok(CorpusRecall {
        dataset: dataset.to_string(),
        questions: items.len(),
        documents,
        passages,
        add_secs,
        embed_secs,
        rows,
    })
}

/// The id a paragraph has in the corpus (the SHA-256 of its document text, hex).
pub fn paragraph_id(title: &str, sentences: &[String]) -> String {
    crate::corpus::doc_id(&paragraph_document(title, sentences))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_is_the_nearest_rank_percentile() {
        let l = Latency::of((1..=100).rev().map(f64::from).collect());
        assert_eq!((l.p50_ms, l.p99_ms, l.max_ms), (50.0, 99.0, 100.0));
        assert!((l.mean_ms - 50.5).abs() < 1e-9);
        let one = Latency::of(vec![7.0]);
        assert_eq!((one.p50_ms, one.p99_ms), (7.0, 7.0));
        assert_eq!(Latency::of(Vec::new()).max_ms, 0.0);
    }
}
