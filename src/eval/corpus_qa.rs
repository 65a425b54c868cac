//! QA over a corpus (issue 68): the questions of a multi-hop dev file asked against the corpus
//! of all its paragraphs (as `corpus_recall` builds it), each answered by the LLM from the
//! passages a retriever ranks best within a token budget (`methods::ask_corpus`), and scored by
//! the dataset's official metric. Beside F1: how many of the question's gold paragraphs the
//! answer prompt showed.
//!
//! Invariants: one journal line per (question, retriever) as soon as it is known, so a killed
//! run loses nothing and a second run answers only what is missing; a failed answer is a line
//! with its error, never a panic or a silent zero.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

use futures::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};

use super::corpus_recall::gold_paragraphs;
use super::datasets::MultiHopRaw;
use super::metrics::answer_scores;
use super::paired::{interval, Interval};
use crate::corpus::{CorpusStore, PassageRef};
use crate::journal::{Journal, JournalError};
use crate::methods::{CorpusMethod, Runtime, Scope};

/// One question answered with one retriever.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QaLine {
    pub item: String,
    pub retriever: String,
    pub question: String,
    pub prediction: String,
    pub answers: Vec<String>,
    pub em: f64,
    pub f1: f64,
    /// The passages the answer prompt showed, in order.
    pub passages: Vec<PassageRef>,
    /// Of the question's gold paragraphs, how many the prompt showed, and how many it has.
    pub gold_shown: usize,
    pub gold: usize,
    /// The calls, and their tokens whether sent or answered by the reply cache (a cached reply
    /// at what it cost when first sent).
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub wall_secs: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One retriever's scores over the questions answered.
#[derive(Clone, Debug, Serialize)]
pub struct QaRow {
    pub retriever: String,
    pub questions: usize,
    pub failures: usize,
    pub em: f64,
    pub f1: f64,
    /// The mean share of gold paragraphs in the answer prompt, in percent.
    pub gold_recall: f64,
    pub prompt_tokens: f64,
    /// F1 against the first retriever, paired per question (none for the first).
    pub f1_against_first: Option<Interval>,
}

/// What a QA run over a corpus measured.
#[derive(Clone, Debug, Serialize)]
pub struct CorpusQa {
    pub dataset: String,
    pub model: String,
    pub context_tokens: usize,
    pub rows: Vec<QaRow>,
}

#[derive(Debug, thiserror::Error)]
pub enum CorpusQaError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Corpus(#[from] crate::corpus::CorpusError),
}

/// Asks every question of `items` with every retriever against `corpus` (which must hold the
/// paragraphs: `qrmem corpus recall` or `corpus add` puts them there), `concurrency` at a
/// time, each line into the journal `journal_path` (lines already there are kept and not asked
/// again); then scores every line the journal holds for these items and retrievers.
#[allow(clippy::too_many_arguments)]
pub async fn corpus_qa(
    rt: &Runtime<'_>,
    dataset: &str,
    items: &[MultiHopRaw],
    corpus: &dyn CorpusStore,
    retrievers: &[CorpusMethod],
    context_tokens: usize,
    concurrency: usize,
    journal_path: &Path,
    mut progress: impl FnMut(&QaLine, usize, usize),
) -> Result<CorpusQa, CorpusQaError> {
    let (journal, old) = Journal::open::<QaLine>(journal_path, |l| l.error.is_none())?;
    let done: HashSet<(String, String)> = old
        .iter()
        .map(|l| (l.item.clone(), l.retriever.clone()))
        .collect();
    let todo: Vec<(&MultiHopRaw, &CorpusMethod)> = retrievers
        .iter()
        .flat_map(|r| items.iter().map(move |i| (i, r)))
        .filter(|(i, r)| !done.contains(&(i.id.clone(), r.to_string())))
        .collect();
    let total = todo.len();
    let mut lines = old;
    let mut answered = stream::iter(todo)
        .map(|(item, retriever)| {
            let journal = &journal;
            async move {
                let line = ask_one(rt, dataset, item, corpus, retriever, context_tokens).await;
                journal.append(&line).map(|_| line)
            }
        })
        .buffer_unordered(concurrency.max(1));
    let mut n = 0;
    while let Some(line) = answered.next().await {
        let line = line?;
        n += 1;
        progress(&line, n, total);
        lines.push(line);
    }
    Ok(CorpusQa {
        dataset: dataset.to_string(),
        model: rt.llm.model().to_string(),
        context_tokens,
        rows: rows(items, retrievers, &lines),
    })
}

/// One question with one retriever, its cost on a scope of its own.
async fn ask_one(
    rt: &Runtime<'_>,
    dataset: &str,
    item: &MultiHopRaw,
    corpus: &dyn CorpusStore,
    retriever: &CorpusMethod,
    context_tokens: usize,
) -> QaLine {
    let gold = gold_paragraphs(item);
    let scope = Scope::of(rt);
    let outcome = crate::methods::answer_corpus(
        &scope.runtime(rt),
        corpus,
        &item.question,
        &[],
        retriever,
        context_tokens,
    )
    .await;
    let (cost, wall_secs) = scope.spent();
    let mut line = QaLine {
        item: item.id.clone(),
        retriever: retriever.to_string(),
        question: item.question.clone(),
        prediction: String::new(),
        answers: item.answers.clone(),
        em: 0.0,
        f1: 0.0,
        passages: Vec::new(),
        gold_shown: 0,
        gold: gold.len(),
        requests: cost.requests + cost.cache_hits,
        prompt_tokens: cost.prompt_tokens + cost.replayed_prompt_tokens,
        completion_tokens: cost.completion_tokens + cost.replayed_completion_tokens,
        wall_secs,
        error: None,
    };
    match outcome {
        Ok(a) => {
            let (em, f1) = answer_scores(dataset, &item.answers, None, &a.trace.answer);
            let docs: BTreeSet<&String> = a.passages.iter().map(|(d, _)| d).collect();
            line.gold_shown = gold.iter().filter(|g| docs.contains(g)).count();
            line.prediction = a.trace.answer;
            line.passages = a.passages;
            line.em = em;
            line.f1 = f1;
        }
        Err(e) => line.error = Some(e.to_string()),
    }
    line
}

/// Each retriever's means over the items it answered, its F1 paired with the first's.
fn rows(items: &[MultiHopRaw], retrievers: &[CorpusMethod], lines: &[QaLine]) -> Vec<QaRow> {
    let wanted: BTreeSet<&str> = items.iter().map(|i| i.id.as_str()).collect();
    let mut by: BTreeMap<(String, String), &QaLine> = BTreeMap::new();
    for l in lines {
        if wanted.contains(l.item.as_str()) {
            // The last line of a pair wins (a retried failure).
            by.insert((l.retriever.clone(), l.item.clone()), l);
        }
    }
    let first = retrievers.first().map(|r| r.to_string());
    let mut out = Vec::new();
    for r in retrievers {
        let name = r.to_string();
        let mine: Vec<&QaLine> = items
            .iter()
            .filter_map(|i| by.get(&(name.clone(), i.id.clone())).copied())
            .collect();
        let n = mine.len().max(1) as f64;
        let mean = |f: &dyn Fn(&QaLine) -> f64| mine.iter().map(|l| f(l)).sum::<f64>() / n;
        let against = first.as_ref().filter(|f| **f != name).and_then(|f| {
            let pairs: Vec<(f64, f64)> = items
                .iter()
                .filter_map(|i| {
                    let a = by.get(&(name.clone(), i.id.clone()))?;
                    let b = by.get(&(f.clone(), i.id.clone()))?;
                    Some((100.0 * a.f1, 100.0 * b.f1))
                })
                .collect();
            interval(&pairs)
        });
        out.push(QaRow {
            retriever: name,
            questions: mine.len(),
            failures: mine.iter().filter(|l| l.error.is_some()).count(),
            em: 100.0 * mean(&|l| l.em),
            f1: 100.0 * mean(&|l| l.f1),
            gold_recall: 100.0
                * mean(&|l| {
                    if l.gold == 0 {
                        0.0
                    } else {
                        l.gold_shown as f64 / l.gold as f64
                    }
                }),
            prompt_tokens: mean(&|l| l.prompt_tokens as f64),
            f1_against_first: against,
        });
    }
    out
}

impl CorpusQa {
    pub fn to_markdown(&self) -> String {
        let first = self.rows.first().map_or("", |r| r.retriever.as_str());
        let mut s = format!(
            "{}: questions answered across the corpus by {}, from at most {} tokens of passages\n\n| retriever | questions | failures | EM | F1 | gold paragraphs shown % | prompt tok/q | F1 - {first} |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
            self.dataset, self.model, self.context_tokens
        );
        for r in &self.rows {
            let against = r
                .f1_against_first
                .as_ref()
                .map(|i| format!("{:+.1} [{:+.1}, {:+.1}]", i.mean, i.low, i.high))
                .unwrap_or_default();
            s.push_str(&format!(
                "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.0} | {against} |\n",
                r.retriever, r.questions, r.failures, r.em, r.f1, r.gold_recall, r.prompt_tokens
            ));
        }
        s
    }
}
