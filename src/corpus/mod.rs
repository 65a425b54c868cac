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
//!   co-occurrence pass finds; no LLM call), immutable and keyed by the document's content and
//!   the extraction settings; the assembly of the records present into entities with their
//!   provenance (which document's which passage names them).
//! - `retrieve.rs`: ranking passages across documents for a question (BM25, and the hop from
//!   the best passage to the own passages of the names it holds). HippoRAG's retrieval
//!   protocol over a corpus is `eval::corpus_recall`.
//!
//! **Boundary:** the corpus reads documents as text and knows no method; methods and commands
//! reach it through [`Corpus`]. **Invariants:** a document is in the database whole or not at
//! all; the assembled entities are a function of the records present (adding A and B and
//! removing A gives what adding B alone gives); the lexical index answers for the database's
//! current generation.

mod lexical;
mod record;
mod retrieve;
mod store;

pub use record::{DocRecord, EntityRow, RECORD_KIND};
pub use retrieve::Retriever;
pub use store::{Added, Corpus, DocInfo, Hit, PassageRef, PassageRow};

use std::path::PathBuf;

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
