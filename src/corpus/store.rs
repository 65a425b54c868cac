//! The corpus directory: `corpus.sqlite` (SQLite in WAL mode, the source of truth) and
//! `index/` (the tantivy index derived from it).
//!
//! Why SQLite: one file, transactions that survive kill -9 (the write-ahead log is replayed or
//! discarded whole), readers that go on while one writer commits, and a library (rusqlite,
//! SQLite compiled in) that every platform builds; a corpus is documents, passages and
//! provenance rows, which are tables.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use sha2::{Digest, Sha256};

use super::lexical::Lexical;
use super::record::{DocRecord, Record, RelationRow, RECORD_KIND, RECORD_SETTINGS};
use super::{CorpusError, CorpusStore};
use crate::text::passages::{passages, title_key};

const FORMAT: &str = "qrmem-corpus";
const VERSION: u32 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, bytes INTEGER NOT NULL, text TEXT NOT NULL,
  seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS passages (
  doc TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE, idx INTEGER NOT NULL,
  start INTEGER NOT NULL, end INTEGER NOT NULL, title TEXT NOT NULL, text TEXT NOT NULL,
  PRIMARY KEY (doc, idx));
CREATE INDEX IF NOT EXISTS documents_by_seq ON documents(seq);
CREATE INDEX IF NOT EXISTS documents_by_name ON documents(name);
CREATE INDEX IF NOT EXISTS passages_by_title ON passages(title);
CREATE TABLE IF NOT EXISTS records (
  doc TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE, kind TEXT NOT NULL,
  settings TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (doc, kind, settings));
CREATE TABLE IF NOT EXISTS mentions (
  doc TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE, idx INTEGER NOT NULL,
  entity TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,
  PRIMARY KEY (doc, idx, entity));
CREATE INDEX IF NOT EXISTS mentions_by_entity ON mentions(entity);
CREATE TABLE IF NOT EXISTS relations (
  doc TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE, idx INTEGER NOT NULL,
  head TEXT NOT NULL, tail TEXT NOT NULL, description TEXT NOT NULL,
  PRIMARY KEY (doc, idx, head, tail, description));
CREATE INDEX IF NOT EXISTS relations_by_head ON relations(head);
CREATE INDEX IF NOT EXISTS relations_by_tail ON relations(tail);
CREATE TABLE IF NOT EXISTS vectors (
  doc TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE, idx INTEGER NOT NULL,
  model TEXT NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (doc, idx, model));
";

/// A corpus: its database and its lexical index.
pub struct Corpus {
    dir: PathBuf,
    db: Connection,
    lexical: Lexical,
    passage_tokens: usize,
    /// The passages' vectors of one embedder, read once per generation.
    vectors: std::sync::Mutex<Option<Vectors>>,
    /// The titles by their first word, built once per generation.
    titles: std::sync::Mutex<Option<TitleIndex>>,
}

/// The corpus's titles at database `generation`, by their first word (`text::words`), so that
/// the titles a text names are found from its words.
struct TitleIndex {
    generation: u64,
    by_first_word: std::collections::HashMap<String, Vec<String>>,
    /// Titles without a letter or digit (compared with every text).
    wordless: Vec<String>,
}

impl TitleIndex {
    fn new(generation: u64, titles: Vec<String>) -> Self {
        let mut by_first_word: std::collections::HashMap<String, Vec<String>> =
            std::collections::HashMap::new();
        let mut wordless = Vec::new();
        for t in titles {
            match crate::text::words(&t.trim().to_lowercase()).next() {
                Some(w) => by_first_word.entry(w.to_string()).or_default().push(t),
                None => wordless.push(t),
            }
        }
        TitleIndex {
            generation,
            by_first_word,
            wordless,
        }
    }

    /// The titles occurring in `body_lower` as whole words (`occurs_in`), in title order. A
    /// title occurring as whole words has its first word among the body's words (the run is
    /// bounded in the title by a non-alphanumeric character or its end, and so in the body), so
    /// only the titles keyed by the body's words are compared.
    fn occurring_in(&self, body_lower: &str) -> Vec<String> {
        let words: std::collections::BTreeSet<&str> = crate::text::words(body_lower).collect();
        let mut out: Vec<String> = words
            .into_iter()
            .filter_map(|w| self.by_first_word.get(w))
            .flatten()
            .chain(&self.wordless)
            .filter(|t| crate::text::occurs_in(body_lower, t))
            .cloned()
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// The vectors of `model` at database `generation`.
struct Vectors {
    model: String,
    generation: u64,
    rows: Vec<(PassageRef, Vec<f32>)>,
}

/// A document of the corpus as `qrmem corpus ls` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocInfo {
    /// The SHA-256 of the text, hex (its first 12 characters name it on the command line).
    pub id: String,
    pub name: String,
    pub bytes: usize,
    pub passages: usize,
    pub entities: usize,
}

/// A passage by its document's id and its index in the document.
pub type PassageRef = (String, usize);

/// A passage of the corpus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassageRow {
    pub doc: String,
    pub idx: usize,
    /// The passage's title as the hop compares titles (its `Passage i:` header, else the
    /// document's name).
    pub title: String,
    pub text: String,
}

/// A passage ranked for a question.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    pub doc: String,
    pub name: String,
    pub idx: usize,
    pub score: f32,
    pub text: String,
}

/// What adding one document did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Added {
    /// Stored, with this many passages.
    New { id: String, passages: usize },
    /// Its text was already in the corpus (under this name): nothing changed.
    Present { id: String, name: String },
}

/// Where the time of adding documents went: their extraction (the passages and the
/// co-occurrence record; an LLM record is made before the add and is not in it), the assembly
/// (the transaction that stores the passages, the record and the provenance rows the entities
/// are read from) and the index commit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddCost {
    pub extract: Duration,
    pub assemble: Duration,
    pub index: Duration,
}

impl Corpus {
    /// Opens the corpus in `dir`, creating it (passages of at most `passage_tokens` tokens,
    /// fixed at creation) when it does not exist; repairs a lexical index that lags the
    /// database.
    pub fn open(dir: &Path, passage_tokens: usize) -> Result<Self, CorpusError> {
        std::fs::create_dir_all(dir).map_err(|source| CorpusError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join("corpus.sqlite");
        let e = |source| CorpusError::Db {
            path: path.clone(),
            source,
        };
        let db = Connection::open(&path).map_err(e)?;
        db.pragma_update(None, "journal_mode", "WAL").map_err(e)?;
        db.pragma_update(None, "synchronous", "FULL").map_err(e)?;
        db.pragma_update(None, "foreign_keys", "ON").map_err(e)?;
        db.busy_timeout(std::time::Duration::from_secs(30))
            .map_err(e)?;
        db.execute_batch(SCHEMA).map_err(e)?;
        let meta = |k: &str| -> Result<Option<String>, CorpusError> {
            db.query_row("SELECT value FROM meta WHERE key = ?1", [k], |r| r.get(0))
                .optional()
                .map_err(e)
        };
        let passage_tokens = match (meta("format")?, meta("version")?, meta("passage_tokens")?) {
            (None, None, None) => {
                for (k, v) in [
                    ("format", FORMAT.to_string()),
                    ("version", VERSION.to_string()),
                    ("passage_tokens", passage_tokens.to_string()),
                    ("generation", "0".to_string()),
                ] {
                    db.execute("INSERT INTO meta (key, value) VALUES (?1, ?2)", [k, &v])
                        .map_err(e)?;
                }
                passage_tokens
            }
            (Some(f), Some(v), Some(t)) if f == FORMAT && v == VERSION.to_string() => {
                t.parse().map_err(|_| CorpusError::Invalid {
                    path: path.clone(),
                    what: format!("passage_tokens '{t}' is not a number"),
                })?
            }
            (f, v, _) => {
                return Err(CorpusError::Invalid {
                    path,
                    what: format!(
                        "not a {FORMAT} database of version {VERSION} (format {f:?}, version {v:?})"
                    ),
                })
            }
        };
        let lexical = Lexical::open(&dir.join("index"))?;
        let mut corpus = Corpus {
            dir: dir.to_path_buf(),
            db,
            lexical,
            passage_tokens,
            vectors: std::sync::Mutex::new(None),
            titles: std::sync::Mutex::new(None),
        };
        match corpus.repair_index() {
            // Another process holds the index's writer: it is adding or removing, and commits
            // the index when it is done; this one reads what is committed.
            Err(CorpusError::Index {
                source: tantivy::TantivyError::LockFailure(..),
                ..
            }) => {}
            r => {
                r?;
            }
        }
        Ok(corpus)
    }

    /// Opens the corpus in `dir`, which must exist (reading commands: a mistyped directory is
    /// an error, not a new empty corpus).
    pub fn open_existing(dir: &Path) -> Result<Self, CorpusError> {
        if !dir.join("corpus.sqlite").is_file() {
            return Err(CorpusError::Invalid {
                path: dir.to_path_buf(),
                what: format!(
                    "no corpus here (create one with `qrmem corpus --corpus {} add PATH...`)",
                    dir.display()
                ),
            });
        }
        Corpus::open(dir, crate::text::passages::DEFAULT_PASSAGE_TOKENS)
    }

    fn db_err(&self, source: rusqlite::Error) -> CorpusError {
        CorpusError::Db {
            path: self.dir.join("corpus.sqlite"),
            source,
        }
    }

    /// The database's generation: one more with every add or remove of a document (what the
    /// lexical index and the stored vectors reflect; a record extracted again leaves it).
    pub fn generation(&self) -> Result<u64, CorpusError> {
        let g: String = self
            .db
            .query_row("SELECT value FROM meta WHERE key = 'generation'", [], |r| {
                r.get(0)
            })
            .map_err(|x| self.db_err(x))?;
        Ok(g.parse().unwrap_or(0))
    }

    /// Rebuilds the lexical index from the database when it reflects another generation (a
    /// crash between the database's commit and the index's).
    fn repair_index(&mut self) -> Result<bool, CorpusError> {
        let generation = self.generation()?;
        if self.lexical.generation()? == Some(generation) {
            return Ok(false);
        }
        let all: Vec<(String, usize, String)> = self
            .all_passages()?
            .into_iter()
            .map(|p| (p.doc, p.idx, p.text))
            .collect();
        self.lexical.apply(true, &[], &all, generation)?;
        Ok(true)
    }

    /// Adds several documents, each in its own transaction (an interrupted call keeps the
    /// documents it finished, and a second call skips them), then indexes all their passages in
    /// one commit; `progress` is called after each document with its name and outcome.
    /// Returns each document's outcome and where the time went (reading the documents, which
    /// `docs` does as it is iterated, is in none of it).
    pub fn add_all(
        &mut self,
        docs: impl IntoIterator<Item = (String, String)>,
        mut progress: impl FnMut(&str, &Added),
    ) -> Result<(Vec<Added>, AddCost), CorpusError> {
        let mut out = Vec::new();
        let mut rows = Vec::new();
        let mut cost = AddCost::default();
        for (name, text) in docs {
            let (added, mut r) = self.store(&name, &text, None, &mut cost)?;
            progress(&name, &added);
            rows.append(&mut r);
            out.push(added);
        }
        if !rows.is_empty() {
            let clock = Instant::now();
            let generation = self.generation()?;
            self.lexical.apply(false, &[], &rows, generation)?;
            cost.index += clock.elapsed();
        }
        Ok((out, cost))
    }

    /// The passages a document of `name` and `text` is stored as, each with its title (its
    /// `Passage i:` title, else the document's name): what an extraction record is made over.
    /// A document already in the corpus keeps the name it was stored under (its passages'
    /// titles come from it), whatever `name` a later add gives it, so that a record made for
    /// it names the passages' own titles.
    pub fn passages_of_text(
        &self,
        name: &str,
        text: &str,
    ) -> Result<Vec<(String, String)>, CorpusError> {
        let stored = self.name_of(&doc_id(text))?;
        Ok(self
            .units(stored.as_deref().unwrap_or(name), text)
            .into_iter()
            .map(|(_, _, _, title, text)| (title, text))
            .collect())
    }

    /// Whether adding `text` would store a record of `kind` and `settings`: false when the
    /// document is present with one (so an extraction can be skipped).
    pub fn needs_record(
        &self,
        text: &str,
        kind: &str,
        settings: &str,
    ) -> Result<bool, CorpusError> {
        Ok(!self.has_record(&doc_id(text), kind, Some(settings))?)
    }

    /// Whether the document `id` has a record of `kind` and `settings` (of any settings when
    /// None).
    fn has_record(
        &self,
        id: &str,
        kind: &str,
        settings: Option<&str>,
    ) -> Result<bool, CorpusError> {
        self.db
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM records WHERE doc = ?1 AND kind = ?2 AND (?3 IS NULL OR settings = ?3))",
                params![id, kind, settings],
                |r| r.get(0),
            )
            .map_err(|x| self.db_err(x))
    }

    /// Adds one document with an extraction record made outside the store (the LLM's:
    /// `corpus::extract`), of `kind` and `settings`, in one transaction, and indexes it. A
    /// document already present keeps its passages and gets this record, which the assembly
    /// then follows.
    pub fn add_with_record(
        &mut self,
        name: &str,
        text: &str,
        record: &Record,
    ) -> Result<Added, CorpusError> {
        let (added, rows) = self.store(name, text, Some(record), &mut AddCost::default())?;
        if !rows.is_empty() {
            let generation = self.generation()?;
            self.lexical.apply(false, &[], &rows, generation)?;
        }
        Ok(added)
    }

    /// A document's passages: (index, start, end, title, text).
    fn units(&self, name: &str, text: &str) -> Vec<(usize, usize, usize, String, String)> {
        let doc_title = title_key(name);
        passages(text, self.passage_tokens)
            .iter()
            .map(|u| {
                let title = crate::text::passages::unit_titles(std::slice::from_ref(u))
                    .into_iter()
                    .flatten()
                    .next()
                    .unwrap_or_else(|| doc_title.clone());
                (u.index, u.start, u.end, title, u.text.clone())
            })
            .collect()
    }

    /// The database half of an add: one transaction; returns the passages to index. The
    /// record is `given`, or the co-occurrence pass's; the time of each part is added to `cost`.
    #[allow(clippy::type_complexity)]
    fn store(
        &mut self,
        name: &str,
        text: &str,
        given: Option<&Record>,
        cost: &mut AddCost,
    ) -> Result<(Added, Vec<(String, usize, String)>), CorpusError> {
        let id = doc_id(text);
        let present: Option<String> = self
            .db
            .query_row("SELECT name FROM documents WHERE id = ?1", [&id], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|x| self.db_err(x))?;
        let clock = Instant::now();
        let rows = self.units(name, text);
        let cooccurrence;
        let record = match given {
            Some(r) => r,
            None => {
                cooccurrence = Record {
                    kind: RECORD_KIND.to_string(),
                    settings: RECORD_SETTINGS.to_string(),
                    record: DocRecord::cooccurrence(
                        &rows
                            .iter()
                            .map(|(_, _, _, title, text)| (title.as_str(), text.as_str()))
                            .collect::<Vec<_>>(),
                    ),
                };
                &cooccurrence
            }
        };
        cost.extract += clock.elapsed();
        let clock = Instant::now();
        let result = self.assemble(&id, name, text, present, rows, record);
        cost.assemble += clock.elapsed();
        result
    }

    /// The transaction of [`Corpus::store`]: the document's passages, its record and the
    /// provenance rows read from it (a present document gets only a record of new settings).
    #[allow(clippy::type_complexity)]
    fn assemble(
        &mut self,
        id: &str,
        name: &str,
        text: &str,
        present: Option<String>,
        rows: Vec<(usize, usize, usize, String, String)>,
        given: &Record,
    ) -> Result<(Added, Vec<(String, usize, String)>), CorpusError> {
        let id = id.to_string();
        let Record {
            kind: record_kind,
            settings: record_settings,
            record,
        } = given;
        let body = serde_json::to_string(&record).map_err(|x| CorpusError::Invalid {
            path: self.dir.clone(),
            what: format!("record of {name}: {x}"),
        })?;
        if let Some(name) = present {
            // Present: its record of these settings is kept; a record of other settings (an
            // older extraction) gets this one beside it, and the assembly follows the new one,
            // except that the co-occurrence pass never replaces the assembly of an LLM record
            // (a plain `corpus add` of a document that `--extract llm` gave the LLM's record
            // would silently drop its entities and relations).
            let keeps_llm =
                record_kind == RECORD_KIND && self.has_record(&id, super::LLM_RECORD_KIND, None)?;
            if !keeps_llm && !self.has_record(&id, record_kind, Some(record_settings))? {
                let path = self.dir.join("corpus.sqlite");
                let e = |source| CorpusError::Db {
                    path: path.clone(),
                    source,
                };
                let tx = self
                    .db
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(e)?;
                tx.execute(
                    "INSERT INTO records (doc, kind, settings, body) VALUES (?1, ?2, ?3, ?4)",
                    params![id, record_kind, record_settings, body],
                )
                .map_err(e)?;
                tx.execute("DELETE FROM mentions WHERE doc = ?1", [&id])
                    .map_err(e)?;
                tx.execute("DELETE FROM relations WHERE doc = ?1", [&id])
                    .map_err(e)?;
                insert_mentions(&tx, &id, record).map_err(e)?;
                // The passages did not change: the generation (what the index and the
                // vectors reflect) stays.
                tx.commit().map_err(e)?;
            }
            return Ok((Added::Present { id, name }, Vec::new()));
        }
        let generation = self.generation()? + 1;
        let tx = self
            .db
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|x| CorpusError::Db {
                path: self.dir.join("corpus.sqlite"),
                source: x,
            })?;
        let e = |source| CorpusError::Db {
            path: self.dir.join("corpus.sqlite"),
            source,
        };
        let seq: i64 = tx
            .query_row("SELECT COALESCE(MAX(seq), 0) + 1 FROM documents", [], |r| {
                r.get(0)
            })
            .map_err(e)?;
        tx.execute(
            "INSERT INTO documents (id, name, bytes, text, seq) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, name, text.len() as i64, text, seq],
        )
        .map_err(e)?;
        for (idx, start, end, title, text) in &rows {
            tx.execute(
                "INSERT INTO passages (doc, idx, start, end, title, text) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![id, *idx as i64, *start as i64, *end as i64, title, text],
            )
            .map_err(e)?;
        }
        tx.execute(
            "INSERT INTO records (doc, kind, settings, body) VALUES (?1, ?2, ?3, ?4)",
            params![id, record_kind, record_settings, body],
        )
        .map_err(e)?;
        insert_mentions(&tx, &id, record).map_err(e)?;
        tx.execute(
            "UPDATE meta SET value = ?1 WHERE key = 'generation'",
            [generation.to_string()],
        )
        .map_err(e)?;
        tx.commit().map_err(e)?;
        let add: Vec<(String, usize, String)> = rows
            .into_iter()
            .map(|(idx, _, _, _, text)| (id.clone(), idx, text))
            .collect();
        let passages = add.len();
        Ok((Added::New { id, passages }, add))
    }

    fn passages_where(
        &self,
        condition: &str,
        args: &[&dyn rusqlite::ToSql],
    ) -> Result<Vec<PassageRow>, CorpusError> {
        let sql = format!(
            "SELECT p.doc, p.idx, p.title, p.text FROM passages p JOIN documents d ON d.id = p.doc
             WHERE {condition} ORDER BY d.seq, p.idx"
        );
        let mut stmt = self.db.prepare_cached(&sql).map_err(|x| self.db_err(x))?;
        let rows = stmt
            .query_map(args, |r| {
                Ok(PassageRow {
                    doc: r.get(0)?,
                    idx: r.get::<_, i64>(1)? as usize,
                    title: r.get(2)?,
                    text: r.get(3)?,
                })
            })
            .and_then(|rows| rows.collect())
            .map_err(|x| self.db_err(x))?;
        Ok(rows)
    }

    /// The passages of the provenance rows meeting `condition` (on `mentions m`, with `key` as
    /// ?1), each once, in document order.
    fn mentions_where(&self, condition: &str, key: &str) -> Result<Vec<PassageRef>, CorpusError> {
        let sql = format!(
            "SELECT m.doc, m.idx FROM mentions m JOIN documents d ON d.id = m.doc
             WHERE {condition} ORDER BY d.seq, m.idx"
        );
        let mut stmt = self.db.prepare_cached(&sql).map_err(|x| self.db_err(x))?;
        let rows = stmt
            .query_map([key], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as usize)))
            .and_then(|rows| rows.collect())
            .map_err(|x| self.db_err(x))?;
        Ok(rows)
    }

    /// The assembled entities: each key with the passages naming it (document id, passage),
    /// in key order: the graph's entity-passage links with their provenance.
    pub fn entities(&self) -> Result<Vec<(String, Vec<PassageRef>)>, CorpusError> {
        let mut stmt = self
            .db
            .prepare("SELECT entity, doc, idx FROM mentions ORDER BY entity, doc, idx")
            .map_err(|x| self.db_err(x))?;
        let rows: Vec<(String, String, i64)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .and_then(|rows| rows.collect())
            .map_err(|x| self.db_err(x))?;
        let mut out: Vec<(String, Vec<PassageRef>)> = Vec::new();
        for (key, doc, idx) in rows {
            match out.last_mut() {
                Some((k, v)) if *k == key => v.push((doc, idx as usize)),
                _ => out.push((key, vec![(doc, idx as usize)])),
            }
        }
        Ok(out)
    }

    /// Embeds, with `embedder`, every passage that has no vector of its model yet (once per
    /// passage: the vectors are stored), in batches of `batch`, each batch one transaction;
    /// `progress` gets (done, total). Returns how many were embedded.
    pub fn embed_missing(
        &mut self,
        embedder: &dyn crate::embed::Embedder,
        batch: usize,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<usize, CorpusError> {
        let model = embedder.model_id().to_string();
        let missing = self.passages_where(
            "NOT EXISTS (SELECT 1 FROM vectors v WHERE v.doc = p.doc AND v.idx = p.idx AND v.model = ?1)",
            params![model],
        )?;
        let total = missing.len();
        if total > 0 {
            // The vectors read so far lack the new ones.
            *self.vectors.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
        for (n, chunk) in missing.chunks(batch.max(1)).enumerate() {
            let texts: Vec<&str> = chunk.iter().map(|p| p.text.as_str()).collect();
            let vecs =
                crate::embed::embed_exact(embedder, &texts).map_err(|x| CorpusError::Invalid {
                    path: self.dir.clone(),
                    what: format!("embedding passages: {x}"),
                })?;
            let path = self.dir.join("corpus.sqlite");
            let e = |source| CorpusError::Db {
                path: path.clone(),
                source,
            };
            let tx = self.db.transaction().map_err(e)?;
            for (p, v) in chunk.iter().zip(vecs) {
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                tx.execute(
                    "INSERT OR REPLACE INTO vectors (doc, idx, model, vec) VALUES (?1, ?2, ?3, ?4)",
                    params![p.doc, p.idx as i64, model, bytes],
                )
                .map_err(e)?;
            }
            tx.commit().map_err(e)?;
            progress((n * batch.max(1) + chunk.len()).min(total), total);
        }
        Ok(total)
    }

    /// What `qrmem inspect DIR` prints: the counts, the index's state and the `top` entities
    /// linked to the most passages, with how many documents name them.
    pub fn describe(&self, top: usize) -> Result<String, CorpusError> {
        let docs = self.list()?;
        let passages: usize = docs.iter().map(|d| d.passages).sum();
        let bytes: usize = docs.iter().map(|d| d.bytes).sum();
        let entities = self.entities()?;
        let generation = self.generation()?;
        let relations: i64 = self
            .db
            .query_row("SELECT COUNT(*) FROM relations", [], |r| r.get(0))
            .map_err(|x| self.db_err(x))?;
        let mut stmt = self
            .db
            .prepare("SELECT kind, settings, COUNT(*) FROM records GROUP BY kind, settings ORDER BY kind, settings")
            .map_err(|x| self.db_err(x))?;
        let records: Vec<String> = stmt
            .query_map([], |r| {
                Ok(format!(
                    "{} {} ({})",
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?
                ))
            })
            .and_then(|rows| rows.collect())
            .map_err(|x| self.db_err(x))?;
        let mut out = format!(
            "corpus {}\n  documents {}, passages {passages}, {bytes} bytes; entities {}, relations {relations} (records: {})\n  generation {generation}; lexical index: {} passages{}\n",
            self.dir.display(),
            docs.len(),
            entities.len(),
            records.join("; "),
            self.indexed(),
            if self.indexed() as usize == passages { "" } else { " (lags: repaired when the writer opens the corpus)" }
        );
        let mut by_links: Vec<&(String, Vec<PassageRef>)> = entities.iter().collect();
        by_links.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
        out.push_str(&format!("top {top} entities by passages (documents):\n"));
        for (key, links) in by_links.into_iter().take(top) {
            let docs: std::collections::BTreeSet<&String> = links.iter().map(|(d, _)| d).collect();
            out.push_str(&format!("  {key}: {} ({})\n", links.len(), docs.len()));
        }
        Ok(out)
    }

    /// Passages in the lexical index (equal to the database's once the corpus is open).
    pub fn indexed(&self) -> u64 {
        self.lexical.len()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl CorpusStore for Corpus {
    fn location(&self) -> &Path {
        &self.dir
    }

    /// Adds a document named `name` (its passages, its extraction record and the provenance
    /// rows assembled from it) in one transaction, then indexes its passages. A text already
    /// in the corpus changes nothing.
    fn add(&mut self, name: &str, text: &str) -> Result<Added, CorpusError> {
        let (added, rows) = self.store(name, text, None, &mut AddCost::default())?;
        if !rows.is_empty() {
            let generation = self.generation()?;
            self.lexical.apply(false, &[], &rows, generation)?;
        }
        Ok(added)
    }

    /// Removes the documents `which` names (a name, or a prefix of an id), each with its
    /// passages, record and provenance rows, in one transaction; nothing is re-extracted.
    /// Returns the ids removed. An unknown or ambiguous name removes nothing.
    fn remove(&mut self, which: &[String]) -> Result<Vec<String>, CorpusError> {
        let mut ids = Vec::new();
        for w in which {
            let id = self.resolve(w)?;
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        if ids.is_empty() {
            return Ok(ids);
        }
        let generation = self.generation()? + 1;
        let path = self.dir.join("corpus.sqlite");
        let e = |source| CorpusError::Db {
            path: path.clone(),
            source,
        };
        let tx = self
            .db
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(e)?;
        for id in &ids {
            tx.execute("DELETE FROM documents WHERE id = ?1", [id])
                .map_err(e)?;
        }
        tx.execute(
            "UPDATE meta SET value = ?1 WHERE key = 'generation'",
            [generation.to_string()],
        )
        .map_err(e)?;
        tx.commit().map_err(e)?;
        // Deleted in place: BM25 is scored with the live passages' statistics only
        // (`lexical.rs`), so the index answers as one built from the rest alone.
        self.lexical.apply(false, &ids, &[], generation)?;
        Ok(ids)
    }

    /// The id of the one document named `which` (its name, or a prefix of its id).
    fn resolve(&self, which: &str) -> Result<String, CorpusError> {
        let mut stmt = self
            .db
            .prepare_cached(
                "SELECT id, name, seq FROM documents WHERE name = ?1
                 UNION SELECT id, name, seq FROM documents WHERE id >= ?2 AND id < ?2 || char(1114111)
                 ORDER BY seq",
            )
            .map_err(|x| self.db_err(x))?;
        // An id prefix, case-blind (ids are lowercase hex), as a range of the primary key: a
        // scan of every document per name made removing 1,000 of 65,000 take 29 s.
        let prefix = which.replace(['%', '_'], "").to_lowercase();
        let found: Vec<(String, String)> = stmt
            .query_map(params![which, prefix], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect())
            .map_err(|x| self.db_err(x))?;
        match found.as_slice() {
            [] => Err(CorpusError::NoDocument(which.to_string())),
            [(id, _)] => Ok(id.clone()),
            many => Err(CorpusError::Ambiguous(
                which.to_string(),
                many.iter()
                    .map(|(id, n)| format!("{} ({n})", &id[..12.min(id.len())]))
                    .collect::<Vec<_>>()
                    .join(", "),
            )),
        }
    }

    /// Every document, in the order added.
    fn list(&self) -> Result<Vec<DocInfo>, CorpusError> {
        let mut stmt = self
            .db
            .prepare(
                "SELECT d.id, d.name, d.bytes,
                   (SELECT COUNT(*) FROM passages p WHERE p.doc = d.id),
                   (SELECT COUNT(DISTINCT entity) FROM mentions m WHERE m.doc = d.id)
                 FROM documents d ORDER BY d.seq",
            )
            .map_err(|x| self.db_err(x))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(DocInfo {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    bytes: r.get::<_, i64>(2)? as usize,
                    passages: r.get::<_, i64>(3)? as usize,
                    entities: r.get::<_, i64>(4)? as usize,
                })
            })
            .and_then(|rows| rows.collect())
            .map_err(|x| self.db_err(x))?;
        Ok(rows)
    }

    /// Every passage, by document (in the order added) and index.
    fn all_passages(&self) -> Result<Vec<PassageRow>, CorpusError> {
        self.passages_where("1 = 1", params![])
    }

    /// The passages titled `title` (as `title_key` writes titles).
    fn titled(&self, title: &str) -> Result<Vec<PassageRow>, CorpusError> {
        self.passages_where("p.title = ?1", params![title])
    }

    /// Every distinct passage title.
    fn titles(&self) -> Result<Vec<String>, CorpusError> {
        let mut stmt = self
            .db
            .prepare("SELECT DISTINCT title FROM passages ORDER BY title")
            .map_err(|x| self.db_err(x))?;
        let rows = stmt
            .query_map([], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(|x| self.db_err(x))?;
        Ok(rows)
    }

    /// The titles that occur in `body_lower` as whole words, from an index of the titles by
    /// their first word (built once per generation): at 65,000 passages comparing the body
    /// with every title was most of bm25-hop's search.
    fn titles_in(&self, body_lower: &str) -> Result<Vec<String>, CorpusError> {
        let generation = self.generation()?;
        let mut cache = self.titles.lock().unwrap_or_else(|p| p.into_inner());
        let index = match &mut *cache {
            Some(t) if t.generation == generation => t,
            stale => stale.insert(TitleIndex::new(generation, self.titles()?)),
        };
        Ok(index.occurring_in(body_lower))
    }

    /// One passage.
    fn passage(&self, doc: &str, idx: usize) -> Result<Option<PassageRow>, CorpusError> {
        Ok(self
            .passages_where("p.doc = ?1 AND p.idx = ?2", params![doc, idx as i64])?
            .into_iter()
            .next())
    }

    /// The entity keys a passage names (its provenance rows).
    fn entities_of(&self, doc: &str, idx: usize) -> Result<Vec<(String, String)>, CorpusError> {
        let mut stmt = self
            .db
            .prepare_cached(
                "SELECT entity, name FROM mentions WHERE doc = ?1 AND idx = ?2 ORDER BY entity",
            )
            .map_err(|x| self.db_err(x))?;
        let rows = stmt
            .query_map(params![doc, idx as i64], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect())
            .map_err(|x| self.db_err(x))?;
        Ok(rows)
    }

    /// The relations a passage holds (its record's, with their provenance).
    fn relations_of(&self, doc: &str, idx: usize) -> Result<Vec<RelationRow>, CorpusError> {
        let mut stmt = self
            .db
            .prepare_cached(
                "SELECT head, tail, description FROM relations WHERE doc = ?1 AND idx = ?2 ORDER BY head, tail, description",
            )
            .map_err(|x| self.db_err(x))?;
        let rows = stmt
            .query_map(params![doc, idx as i64], |r| {
                Ok(RelationRow {
                    head: r.get(0)?,
                    tail: r.get(1)?,
                    description: r.get(2)?,
                })
            })
            .and_then(|rows| rows.collect())
            .map_err(|x| self.db_err(x))?;
        Ok(rows)
    }

    /// The passages that name the entity `key` (its provenance rows), in document order.
    fn passages_of(&self, key: &str) -> Result<Vec<PassageRef>, CorpusError> {
        self.mentions_where("m.entity = ?1", key)
    }

    /// Whether more than `n` passages name `key`: its provenance rows counted up to `n + 1`
    /// (a generic name such as a country is named by thousands).
    fn names_more_than(&self, key: &str, n: usize) -> Result<bool, CorpusError> {
        let count: i64 = self
            .db
            .prepare_cached(
                "SELECT COUNT(*) FROM (SELECT 1 FROM mentions WHERE entity = ?1 LIMIT ?2)",
            )
            .and_then(|mut stmt| stmt.query_row(params![key, n as i64 + 1], |r| r.get(0)))
            .map_err(|x| self.db_err(x))?;
        Ok(count as usize > n)
    }

    /// The passages whose own entity (their title, as the record names it) is `key`.
    fn homes_of(&self, key: &str) -> Result<Vec<PassageRef>, CorpusError> {
        self.mentions_where("m.entity = ?1 AND m.kind = 'title'", key)
    }

    /// A document's name (None: no such document).
    fn name_of(&self, doc: &str) -> Result<Option<String>, CorpusError> {
        self.db
            .prepare_cached("SELECT name FROM documents WHERE id = ?1")
            .and_then(|mut stmt| stmt.query_row([doc], |r| r.get(0)).optional())
            .map_err(|x| self.db_err(x))
    }

    /// The `k` best passages for `query` by BM25 over the whole corpus.
    fn search(&self, query: &str, k: usize) -> Result<Vec<Hit>, CorpusError> {
        let mut out = Vec::new();
        for (doc, idx, score) in self.lexical.search(query, k)? {
            let name = self.name_of(&doc)?.unwrap_or_default();
            // A passage removed since the index's last commit is not shown.
            let Some(text) = self.passage(&doc, idx)?.map(|p| p.text) else {
                continue;
            };
            out.push(Hit {
                doc,
                name,
                idx,
                score,
                text,
            });
        }
        Ok(out)
    }

    /// [`CorpusStore::search`]'s passages, ids only: one indexed lookup a hit (is the passage
    /// still in the database?), where `search` reads its document's name and its text.
    fn search_ids(&self, query: &str, k: usize) -> Result<Vec<PassageRef>, CorpusError> {
        let mut stmt = self
            .db
            .prepare_cached("SELECT 1 FROM passages WHERE doc = ?1 AND idx = ?2")
            .map_err(|x| self.db_err(x))?;
        let mut out = Vec::new();
        for (doc, idx, _) in self.lexical.search(query, k)? {
            // A passage removed since the index's last commit is not ranked.
            let live = stmt
                .exists(params![doc, idx as i64])
                .map_err(|x| self.db_err(x))?;
            if live {
                out.push((doc, idx));
            }
        }
        Ok(out)
    }

    /// The `k` passages whose stored vectors of `embedder`'s model are most similar (cosine)
    /// to the query's; passages without a vector are not ranked (see [`Corpus::embed_missing`]).
    fn dense(
        &self,
        embedder: &dyn crate::embed::Embedder,
        query: &str,
        k: usize,
    ) -> Result<Vec<(PassageRef, f32)>, CorpusError> {
        let model = embedder.model_id().to_string();
        let generation = self.generation()?;
        let q = crate::embed::embed_exact(embedder, &[query])
            .map_err(|x| CorpusError::Invalid {
                path: self.dir.clone(),
                what: format!("embedding the query: {x}"),
            })?
            .pop()
            .unwrap_or_default();
        let mut cache = self.vectors.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = matches!(&*cache, Some(v) if v.model == model && v.generation == generation);
        if !fresh {
            let mut stmt = self
                .db
                .prepare("SELECT doc, idx, vec FROM vectors WHERE model = ?1 ORDER BY doc, idx")
                .map_err(|x| self.db_err(x))?;
            let rows: Vec<(PassageRef, Vec<f32>)> = stmt
                .query_map([&model], |r| {
                    let bytes: Vec<u8> = r.get(2)?;
                    let v = bytes
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect();
                    Ok(((r.get(0)?, r.get::<_, i64>(1)? as usize), v))
                })
                .and_then(|rows| rows.collect())
                .map_err(|x| self.db_err(x))?;
            *cache = Some(Vectors {
                model,
                generation,
                rows,
            });
        }
        let rows = cache
            .as_ref()
            .map(|v| v.rows.as_slice())
            .unwrap_or_default();
        let mut scored: Vec<(PassageRef, f32)> = rows
            .iter()
            .map(|(p, v)| (p.clone(), cosine(&q, v)))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        scored.truncate(k);
        Ok(scored)
    }
}

/// A document's id: the SHA-256 of its text, hex.
pub fn doc_id(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

/// The provenance rows of `record` (document `id`): the second phase, the assembly, as rows.
fn insert_mentions(
    tx: &rusqlite::Transaction<'_>,
    id: &str,
    record: &DocRecord,
) -> Result<(), rusqlite::Error> {
    for (idx, entities) in record.passages.iter().enumerate() {
        for r in entities {
            tx.execute(
                "INSERT OR IGNORE INTO mentions (doc, idx, entity, name, kind) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![id, idx as i64, r.key, r.name, r.kind],
            )?;
        }
        for r in record.relations_of(idx) {
            tx.execute(
                "INSERT OR IGNORE INTO relations (doc, idx, head, tail, description) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![id, idx as i64, r.head, r.tail, r.description],
            )?;
        }
    }
    Ok(())
}
