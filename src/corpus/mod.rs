//! A memory over many documents (issue 68): documents are added and removed one transaction at
//! a time, each keeping what its construction produced, and questions are answered across
//! them.
//!
//! - `store.rs`: the corpus directory's SQLite database (WAL), the source of truth: documents,
//!   their passages, their extraction records and the provenance rows assembled from them.
//!   Every add or remove of a document is one transaction.
//! - `lexical.rs`: the passages' BM25 index in tantivy, derived from the database: each commit
//!   carries the database's generation, and an index that lags (a crash between the two
//!   commits) is rebuilt from the database when the corpus opens.
//! - `record.rs`: the extraction record of one document (per passage, the entities the
//!   co-occurrence pass finds, no LLM call; or the LLM graph's entities and the relations
//!   whose two ends the passage names), immutable and keyed by the document's content and
//!   the extraction settings; the assembly of the records present into entities and
//!   relations with their provenance (which document's which passage names or states them).
//! - `retrieve.rs`: ranking passages across documents for a question (BM25, and the hop from
//!   the best passage to the own passages of the names it holds). HippoRAG's retrieval
//!   protocol over a corpus is `eval::corpus_recall`.
//!
//! **Boundary:** the corpus reads documents as text and knows no method; methods and commands
//! reach it through [`CorpusStore`] (opened as a [`Corpus`]). **Invariants:** a document is in the database whole or not at
//! all; the assembled entities are a function of the records present (adding A and B and
//! removing A gives what adding B alone gives); the lexical index answers for the database's
//! current generation.

mod extract;
mod lexical;
mod record;
pub mod retrieve;
mod store;

pub use extract::{add_with_llm, llm_record, llm_settings, LlmAdded, LLM_RECORD_KIND};
pub use record::{DocRecord, EntityRow, Record, RelationRow, RECORD_KIND};
pub use retrieve::Retriever;
pub use store::{doc_id, AddCost, Added, Corpus, DocInfo, Hit, PassageRef, PassageRow};

use std::path::{Path, PathBuf};

/// A corpus as its writers and readers see it: documents added and removed whole, their
/// passages, the entities' provenance, BM25 and stored vectors. [`Corpus`] (SQLite and tantivy
/// in one directory) is the implementation today; a server database (ARCHITECTURE.md, "Past one
/// host") would be another. Ranking ([`CorpusStore::rank`]) and answering
/// (`methods::ask_corpus`) reach a corpus only through this trait.
pub trait CorpusStore {
    /// Where the corpus lives (for messages).
    fn location(&self) -> &Path;
    /// Adds one document in one transaction (a document already present is left as it is).
    fn add(&mut self, name: &str, text: &str) -> Result<Added, CorpusError>;
    /// Removes the documents `which` names (a name or an id prefix) in one transaction,
    /// re-extracting nothing; returns their ids.
    fn remove(&mut self, which: &[String]) -> Result<Vec<String>, CorpusError>;
    /// The id of the one document `which` names.
    fn resolve(&self, which: &str) -> Result<String, CorpusError>;
    /// Every document, in the order added.
    fn list(&self) -> Result<Vec<DocInfo>, CorpusError>;
    /// Every passage, by document (in the order added) and index.
    fn all_passages(&self) -> Result<Vec<PassageRow>, CorpusError>;
    /// One passage.
    fn passage(&self, doc: &str, idx: usize) -> Result<Option<PassageRow>, CorpusError>;
    /// Every distinct passage title (as `title_key` writes titles).
    fn titles(&self) -> Result<Vec<String>, CorpusError>;
    /// The titles (as [`CorpusStore::titles`] lists them) that occur in `body_lower` (a
    /// lowercase text) as whole words, in title order.
    fn titles_in(&self, body_lower: &str) -> Result<Vec<String>, CorpusError> {
        Ok(self
            .titles()?
            .into_iter()
            .filter(|t| crate::text::occurs_in(body_lower, t))
            .collect())
    }
    /// The passages titled `title`.
    fn titled(&self, title: &str) -> Result<Vec<PassageRow>, CorpusError>;
    /// The entity keys (and names) a passage names.
    fn entities_of(&self, doc: &str, idx: usize) -> Result<Vec<(String, String)>, CorpusError>;
    /// The relations a passage holds (the LLM's record's; none for the co-occurrence record).
    fn relations_of(&self, doc: &str, idx: usize) -> Result<Vec<RelationRow>, CorpusError>;
    /// The passages that name the entity `key`, in document order.
    fn passages_of(&self, key: &str) -> Result<Vec<PassageRef>, CorpusError>;
    /// Whether more than `n` passages name the entity `key` (a generic name), without reading
    /// them all.
    fn names_more_than(&self, key: &str, n: usize) -> Result<bool, CorpusError> {
        Ok(self.passages_of(key)?.len() > n)
    }
    /// The passages whose own (title) entity is `key`.
    fn homes_of(&self, key: &str) -> Result<Vec<PassageRef>, CorpusError>;
    /// A document's name (None: no such document).
    fn name_of(&self, doc: &str) -> Result<Option<String>, CorpusError>;
    /// The `k` best passages for `query` by BM25 over the whole corpus.
    fn search(&self, query: &str, k: usize) -> Result<Vec<Hit>, CorpusError>;
    /// [`CorpusStore::search`]'s passages, ids only: what a ranking needs, without reading
    /// each hit's name and text.
    fn search_ids(&self, query: &str, k: usize) -> Result<Vec<PassageRef>, CorpusError> {
        Ok(self
            .search(query, k)?
            .into_iter()
            .map(|h| (h.doc, h.idx))
            .collect())
    }
    /// The `k` passages whose stored vectors of `embedder`'s model are most similar to the
    /// query's.
    fn dense(
        &self,
        embedder: &dyn crate::embed::Embedder,
        query: &str,
        k: usize,
    ) -> Result<Vec<(PassageRef, f32)>, CorpusError>;

    /// The `k` best passages for `question` by `retriever` (`retrieve.rs`): (document id,
    /// passage index). The dense retriever needs `embedder`.
    fn rank(
        &self,
        retriever: Retriever,
        question: &str,
        k: usize,
        embedder: Option<&dyn crate::embed::Embedder>,
    ) -> Result<Vec<PassageRef>, CorpusError> {
        retrieve::rank(self, retriever, question, k, embedder)
    }
}

use thiserror::Error;

/// Why a corpus operation failed; each names the corpus directory or the input.
#[derive(Debug, Error)]
pub enum CorpusError {
    #[error("corpus database {path}: {source}")]
    Db {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("corpus index {path}: {source}")]
    Index {
        path: PathBuf,
        #[source]
        source: tantivy::TantivyError,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {what}")]
    Invalid { path: PathBuf, what: String },
    #[error("no document in the corpus matches '{0}' (give a name or an id prefix; `qrmem corpus ls` lists them)")]
    NoDocument(String),
    #[error("'{0}' matches several documents: {1}")]
    Ambiguous(String, String),
}
