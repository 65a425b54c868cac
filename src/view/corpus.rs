//! `qrmem view --corpus`: the page of one question over a corpus, without an LLM call. The
//! units are the passages the retriever ranks best, across documents (each under its
//! document's name; the thick border marks those an answer prompt of the budget shows); the
//! graph is the entities those shown passages name, the question's own entities as the start,
//! each passage drawn as edges from its own (title) entity to the others it names.

use std::collections::{BTreeMap, BTreeSet};

use super::{ViewData, ViewEdge, ViewError, ViewNode, ViewUnit, MAX_NODES};
use crate::corpus::{CorpusStore, DocRecord, Retriever};

/// Passages ranked for the strip (the shown ones among them).
const RANKED: usize = 12;

/// The page data of `question` over `corpus`: the `RANKED` best passages by `retriever`, those
/// an answer prompt of `budget` tokens shows, and the entities they name.
pub fn corpus_data(
    corpus: &dyn CorpusStore,
    question: &str,
    retriever: Retriever,
    budget: usize,
) -> Result<ViewData, ViewError> {
    let ranked = corpus.rank(retriever, question, RANKED, None)?;
    let shown = crate::methods::shown_passages(corpus, ranked.clone(), budget)?;
    let start: BTreeSet<String> = DocRecord::cooccurrence(&[("", question)])
        .passages
        .into_iter()
        .flatten()
        .map(|e| e.key)
        .collect();
    let mut units = Vec::new();
    for (i, (doc, idx)) in ranked.iter().enumerate() {
        let Some(p) = corpus.passage(doc, *idx)? else {
            continue;
        };
        let name = corpus.name_of(doc)?.unwrap_or_default();
        let text = format!("[{name}]\n{}", p.text.trim());
        let answer = shown.passages.contains(&(doc.clone(), *idx));
        units.push(ViewUnit {
            index: i,
            start: 0,
            end: text.len(),
            text,
            first_shown: answer.then_some(0),
            answer,
            gold: Vec::new(),
        });
    }
    // The entities of the shown passages: where each is named, and each passage's own entity.
    let mut named_in: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    let mut edges = Vec::new();
    for ((doc, idx), doc_name) in shown.passages.iter().zip(&shown.names) {
        let here = corpus.entities_of(doc, *idx)?;
        let mut own = None;
        for (key, name) in &here {
            let entry = named_in
                .entry(key.clone())
                .or_insert_with(|| (name.clone(), Vec::new()));
            entry.1.push(format!("{doc_name}#{idx}"));
            if own.is_none() && corpus.homes_of(key)?.contains(&(doc.clone(), *idx)) {
                own = Some(key.clone());
            }
        }
        if let Some(own) = own {
            for (key, _) in here.iter().filter(|(k, _)| *k != own) {
                edges.push(ViewEdge {
                    id: format!("{own}->{key}@{doc}#{idx}"),
                    source: own.clone(),
                    target: key.clone(),
                    label: doc_name.clone(),
                    role: "chosen".into(),
                });
            }
        }
    }
    // The start first, then the entities named in the most shown passages.
    let mut order: Vec<(&String, &(String, Vec<String>))> = named_in.iter().collect();
    order.sort_by_key(|(k, (_, at))| (!start.contains(*k), std::cmp::Reverse(at.len())));
    let nodes: Vec<ViewNode> = order
        .into_iter()
        .take(MAX_NODES)
        .map(|(key, (name, at))| ViewNode {
            id: key.clone(),
            label: name.clone(),
            kind: "entity".into(),
            role: if start.contains(key) {
                "start"
            } else {
                "touched"
            }
            .into(),
            generic: false,
            detail: format!("named in {}", at.join(", ")),
        })
        .collect();
    let kept: BTreeSet<&String> = nodes.iter().map(|n| &n.id).collect();
    edges.retain(|e| kept.contains(&e.source) && kept.contains(&e.target));
    let start_entities: Vec<String> = nodes
        .iter()
        .filter(|n| n.role == "start")
        .map(|n| n.label.clone())
        .collect();
    Ok(ViewData {
        memory: corpus.location().display().to_string(),
        trace: String::new(),
        kind: "corpus".into(),
        method: format!("corpus-{retriever}-passages{budget}"),
        question: question.to_string(),
        answer: String::new(),
        facts: vec![format!(
            "{retriever}: {} of the {} best passages shown within {budget} tokens ({} used), from {} documents",
            shown.passages.len(),
            units.len(),
            shown.used,
            shown
                .passages
                .iter()
                .map(|(d, _)| d)
                .collect::<BTreeSet<_>>()
                .len()
        )],
        tree: false,
        nodes,
        edges,
        units,
        steps: Vec::new(),
        start_entities,
        has_gold: false,
    })
}
