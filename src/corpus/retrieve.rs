//! Ranking the corpus's passages for a question, across documents: BM25 (the lexical index),
//! and the hop (issue 66) from the best passage to the own passages (the passages titled with
//! the name) of at most `HOP_HOMES` names it holds, anywhere in the corpus.

use std::fmt;
use std::str::FromStr;

use crate::methods::method::Form;

use super::{CorpusError, CorpusStore, PassageRef};
use crate::text::passages::{title_key, HOP_HOMES, MIN_NAME, OWN_STARTS};
use crate::text::Bm25;

/// How passages are ranked across the corpus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retriever {
    /// BM25 over every passage (tantivy, English stemming).
    Bm25,
    /// The best BM25 passage, then the own passages of the titles it names (whole words), in
    /// the question's BM25 order, at most `HOP_HOMES`; then the BM25 ranking.
    Bm25Hop,
    /// The embedder's cosine similarity to the question, over every passage's stored vector.
    Dense,
    /// The graph's start over the co-occurrence memory: the passages linked to the entities
    /// the question names (E_s, by the schema extractor and the merge key; an entity linked to
    /// more than `GENERIC_LINKS` passages is generic and left out), in BM25 order, then the
    /// BM25 ranking.
    GraphStart,
    /// The hop through the memory: the best BM25 passage, then the own passages (the passages
    /// whose title entity it is) of the entities the best passage names, in the question's
    /// BM25 order, at most `HOP_HOMES`; then the BM25 ranking.
    GraphHop,
    /// The hop from E_s (issue 66's own start): the own passages of the entities the question
    /// names (E_s as in `GraphStart`), at most `OWN_STARTS`, in BM25 order, then the hop from
    /// the first of them as in `GraphHop`; the best BM25 passage where E_s has no own passage.
    GraphOwnHop,
}

/// Passages an entity may be linked to and still start navigation (more: a generic name).
pub const GENERIC_LINKS: usize = 50;

/// Every retriever's name, with what it ranks and the single-document method that ranks the
/// same way (the one table of them: parse, name and help).
pub const FORMS: &[Form<Retriever>] = &[
    Form {
        pattern: "bm25",
        effect: "BM25 over every passage; in one document: bm25-passagesN",
        make: |_| Retriever::Bm25,
    },
    Form {
        pattern: "bm25-hop",
        effect: "the best passage, then the own passages of the titles it names; in one document: bm25-hop-passagesN",
        make: |_| Retriever::Bm25Hop,
    },
    Form {
        pattern: "dense",
        effect: "the embedder's similarity over every passage; in one document: contriever-passagesN",
        make: |_| Retriever::Dense,
    },
    Form {
        pattern: "graph-start",
        effect: "the passages linked to the question's entities, then BM25",
        make: |_| Retriever::GraphStart,
    },
    Form {
        pattern: "graph-hop",
        effect: "the best passage, then the own passages of the entities it names",
        make: |_| Retriever::GraphHop,
    },
    Form {
        pattern: "graph-own-hop",
        effect: "the own passages of the question's entities, then the hop from them; in one document: bm25-own-hop-passagesN (the question's names found as titles, not as the graph's entities)",
        make: |_| Retriever::GraphOwnHop,
    },
];

impl fmt::Display for Retriever {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&Form::name(FORMS, self, 0).ok_or(fmt::Error)?)
    }
}

impl FromStr for Retriever {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Form::parse(FORMS, s)
            .ok_or_else(|| format!("unknown retriever '{s}' ({})", Form::help(FORMS)))
    }
}

/// Candidates BM25 ranks before the hop reorders them (the hop's own passages come from the
/// whole corpus, not only from these).
const POOL: usize = 50;

/// The `k` best passages of `c` for `question` by `retriever`: (document id, passage index).
/// The dense retriever needs `embedder`.
pub(super) fn rank<C: CorpusStore + ?Sized>(
    c: &C,
    retriever: Retriever,
    question: &str,
    k: usize,
    embedder: Option<&dyn crate::embed::Embedder>,
) -> Result<Vec<(String, usize)>, CorpusError> {
    if retriever == Retriever::Dense {
        let Some(embedder) = embedder else {
            return Err(CorpusError::Invalid {
                path: c.location().to_path_buf(),
                what: "the dense retriever needs the embedder".into(),
            });
        };
        return Ok(c
            .dense(embedder, question, k)?
            .into_iter()
            .map(|(p, _)| p)
            .collect());
    }
    let ranked: Vec<PassageRef> = lexical_ranking(c, question, POOL.max(k))?;
    if retriever == Retriever::GraphStart {
        let mut out = start_passages(c, question)?;
        let rank_of =
            |p: &(String, usize)| ranked.iter().position(|r| r == p).unwrap_or(usize::MAX);
        // Equal ranks by the passage's id: the order never depends on the history of adds.
        out.sort_by(|a, b| rank_of(a).cmp(&rank_of(b)).then_with(|| a.cmp(b)));
        for p in ranked {
            if !out.contains(&p) {
                out.push(p);
            }
        }
        out.truncate(k);
        return Ok(out);
    }
    let mut out = match (retriever, ranked.first()) {
        (Retriever::Bm25 | Retriever::Dense | Retriever::GraphStart, _) | (_, None) => ranked,
        (Retriever::Bm25Hop | Retriever::GraphHop | Retriever::GraphOwnHop, Some(best)) => {
            let mut start = Vec::new();
            if retriever == Retriever::GraphOwnHop {
                start = own_start(c, question)?;
            }
            if start.is_empty() {
                start.push(best.clone());
            }
            let first = start[0].clone();
            let homes = if retriever == Retriever::Bm25Hop {
                own_passages(c, question, &first)?
            } else {
                entity_homes(c, question, &first)?
            };
            let mut order: Vec<(String, usize)> = Vec::new();
            for p in start.into_iter().chain(homes).chain(ranked) {
                if !order.contains(&p) {
                    order.push(p);
                }
            }
            order
        }
    };
    out.truncate(k);
    Ok(out)
}

/// The own passages of the entities `best` names (the memory's entity-passage links: a
/// passage whose title entity it is), not `best` itself, best for `question` by BM25 first,
/// at most `HOP_HOMES`.
fn entity_homes<C: CorpusStore + ?Sized>(
    c: &C,
    question: &str,
    best: &(String, usize),
) -> Result<Vec<(String, usize)>, CorpusError> {
    let mut keys = Vec::new();
    for (key, _) in c.entities_of(&best.0, best.1)? {
        if key.chars().count() >= MIN_NAME {
            keys.push(key);
        }
    }
    best_homes(c, &keys, Some(best), question, HOP_HOMES)
}

/// The own passages of E_s (the passages whose title entity is one the question names, not
/// generic), best for `question` by BM25 first, at most `OWN_STARTS`.
fn own_start<C: CorpusStore + ?Sized>(
    c: &C,
    question: &str,
) -> Result<Vec<(String, usize)>, CorpusError> {
    let record = super::DocRecord::cooccurrence(&[("", question)]);
    let mut keys = Vec::new();
    for e in record.passages.iter().flatten() {
        if e.key.chars().count() >= MIN_NAME && !c.names_more_than(&e.key, GENERIC_LINKS)? {
            keys.push(e.key.clone());
        }
    }
    best_homes(c, &keys, None, question, OWN_STARTS)
}

/// The own passages of the entities `keys` (each once, not `except`), best for `question` by
/// BM25 over their texts first, at most `n`.
fn best_homes<C: CorpusStore + ?Sized>(
    c: &C,
    keys: &[String],
    except: Option<&PassageRef>,
    question: &str,
    n: usize,
) -> Result<Vec<PassageRef>, CorpusError> {
    let mut candidates: Vec<PassageRef> = Vec::new();
    for key in keys {
        for p in c.homes_of(key)? {
            if Some(&p) != except && !candidates.contains(&p) {
                candidates.push(p);
            }
        }
    }
    // By id, so BM25's ties fall the same way whatever order the documents were added in.
    candidates.sort();
    let mut texts = Vec::with_capacity(candidates.len());
    for (doc, idx) in &candidates {
        texts.push(c.passage(doc, *idx)?.map(|p| p.text).unwrap_or_default());
    }
    let order = Bm25::new(&texts).rank(question);
    Ok(order
        .into_iter()
        .take(n)
        .filter_map(|(i, _)| candidates.get(i).cloned())
        .collect())
}

/// The passages of E_s: the entities the question names (by the co-occurrence pass's
/// extractor and merge key) that are not generic, each passage once, in document order.
fn start_passages<C: CorpusStore + ?Sized>(
    c: &C,
    question: &str,
) -> Result<Vec<(String, usize)>, CorpusError> {
    let record = super::DocRecord::cooccurrence(&[("", question)]);
    let mut out: Vec<(String, usize)> = Vec::new();
    for e in record.passages.iter().flatten() {
        if c.names_more_than(&e.key, GENERIC_LINKS)? {
            continue;
        }
        for p in c.passages_of(&e.key)? {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    Ok(out)
}

fn lexical_ranking<C: CorpusStore + ?Sized>(
    c: &C,
    question: &str,
    k: usize,
) -> Result<Vec<(String, usize)>, CorpusError> {
    c.search_ids(question, k)
}

/// The own passages of the titles `best` names as whole words (titles of at least
/// `MIN_NAME` characters, not its own), best for `question` by BM25 first, at most
/// `HOP_HOMES`.
fn own_passages<C: CorpusStore + ?Sized>(
    c: &C,
    question: &str,
    best: &(String, usize),
) -> Result<Vec<(String, usize)>, CorpusError> {
    let Some(passage) = c.passage(&best.0, best.1)? else {
        return Ok(Vec::new());
    };
    let body = passage.text.to_lowercase();
    let own = title_key(&passage.title);
    let mut candidates = Vec::new();
    for title in c.titles_in(&body)? {
        if title == own || title.chars().count() < MIN_NAME {
            continue;
        }
        candidates.extend(c.titled(&title)?);
    }
    candidates.retain(|p| (p.doc.as_str(), p.idx) != (best.0.as_str(), best.1));
    // By id, so BM25's ties fall the same way whatever order the documents were added in.
    candidates.sort_by(|a, b| (&a.doc, a.idx).cmp(&(&b.doc, b.idx)));
    let texts: Vec<&str> = candidates.iter().map(|p| p.text.as_str()).collect();
    let order = Bm25::new(&texts).rank(question);
    Ok(order
        .into_iter()
        .take(HOP_HOMES)
        .filter_map(|(i, _)| candidates.get(i).map(|p| (p.doc.clone(), p.idx)))
        .collect())
}
