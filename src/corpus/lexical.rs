//! The passages' BM25 index (tantivy, English stemming), derived from the database: every
//! commit carries the database generation it reflects.

use std::path::{Path, PathBuf};

use tantivy::collector::TopDocs;
use tantivy::directory::MmapDirectory;
use tantivy::query::QueryParser;
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST, STORED, STRING,
};
use tantivy::{doc, Index, IndexReader, IndexWriter, ReloadPolicy, Term};

use super::CorpusError;

/// The writer's memory budget (tantivy's minimum is 15 MB).
const WRITER_BYTES: usize = 50_000_000;

pub(crate) struct Lexical {
    path: PathBuf,
    index: Index,
    reader: IndexReader,
    doc: Field,
    passage: Field,
    text: Field,
}

impl Lexical {
    /// Opens (or creates) the index in `dir`. An index of another schema (an older corpus's:
    /// its ids were not fast fields) is deleted and created empty: it is derived data, and the
    /// corpus rebuilds it from the database when it opens (its generation is then unknown).
    pub(crate) fn open(dir: &Path) -> Result<Self, CorpusError> {
        std::fs::create_dir_all(dir).map_err(|source| CorpusError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let e = |source| CorpusError::Index {
            path: dir.to_path_buf(),
            source,
        };
        let mut sb = Schema::builder();
        // Fast fields: a hit's document id and passage index are read from columns, not from
        // the compressed document store (at 65,000 passages those reads were most of a search).
        let doc = sb.add_text_field("doc", STRING | STORED | FAST);
        let passage = sb.add_u64_field("passage", STORED | FAST);
        let indexing = TextFieldIndexing::default()
            .set_tokenizer("en_stem")
            .set_index_option(IndexRecordOption::WithFreqsAndPositions);
        let text = sb.add_text_field(
            "text",
            TextOptions::default().set_indexing_options(indexing),
        );
        let schema = sb.build();
        let open = || -> Result<Index, tantivy::TantivyError> {
            let directory = MmapDirectory::open(dir)?;
            Index::open_or_create(directory, schema.clone())
        };
        let index = match open() {
            Err(tantivy::TantivyError::SchemaError(_)) => {
                std::fs::remove_dir_all(dir)
                    .and_then(|()| std::fs::create_dir_all(dir))
                    .map_err(|source| CorpusError::Io {
                        path: dir.to_path_buf(),
                        source,
                    })?;
                open().map_err(e)?
            }
            r => r.map_err(e)?,
        };
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(e)?;
        Ok(Lexical {
            path: dir.to_path_buf(),
            index,
            reader,
            doc,
            passage,
            text,
        })
    }

    fn err(&self, source: tantivy::TantivyError) -> CorpusError {
        CorpusError::Index {
            path: self.path.clone(),
            source,
        }
    }

    /// The database generation the last commit reflects (None: never committed).
    pub(crate) fn generation(&self) -> Result<Option<u64>, CorpusError> {
        let metas = self.index.load_metas().map_err(|x| self.err(x))?;
        Ok(metas.payload.and_then(|p| p.parse().ok()))
    }

    /// Applies one change and commits it as `generation`: removes every passage of the
    /// documents `remove`, then adds `add` (document id, passage index, text); `clear` empties
    /// the index first (a rebuild).
    pub(crate) fn apply(
        &mut self,
        clear: bool,
        remove: &[String],
        add: &[(String, usize, String)],
        generation: u64,
    ) -> Result<(), CorpusError> {
        let mut writer: IndexWriter = self.index.writer(WRITER_BYTES).map_err(|x| self.err(x))?;
        if clear {
            writer.delete_all_documents().map_err(|x| self.err(x))?;
        }
        for id in remove {
            writer.delete_term(Term::from_field_text(self.doc, id));
        }
        for (id, i, text) in add {
            writer
                .add_document(doc!(self.doc => id.as_str(), self.passage => *i as u64, self.text => text.as_str()))
                .map_err(|x| self.err(x))?;
        }
        let mut prepared = writer.prepare_commit().map_err(|x| self.err(x))?;
        prepared.set_payload(&generation.to_string());
        prepared.commit().map_err(|x| self.err(x))?;
        writer.wait_merging_threads().map_err(|x| self.err(x))?;
        self.reader.reload().map_err(|x| self.err(x))?;
        Ok(())
    }

    /// The `k` best passages for `query` by BM25: (document id, passage index, score), best
    /// first, equal scores by document id and passage (so the order does not depend on how the
    /// passages happen to lie in the index's segments).
    pub(crate) fn search(
        &self,
        query: &str,
        k: usize,
    ) -> Result<Vec<(String, usize, f32)>, CorpusError> {
        if k == 0 {
            return Ok(Vec::new());
        }
        let searcher = self.reader.searcher();
        let parser = QueryParser::for_index(&self.index, vec![self.text]);
        // Lenient: a question's quotes, colons and parentheses are words, not query syntax.
        let (q, _) = parser.parse_query_lenient(&escape(query));
        // Twice k, so that passages tied at the k-th score are all seen before the cut.
        let top = searcher
            .search(&q, &TopDocs::with_limit(k.saturating_mul(2)))
            .map_err(|x| self.err(x))?;
        let mut out = Vec::with_capacity(top.len());
        let mut id = String::new();
        for (score, addr) in top {
            let columns = searcher.segment_reader(addr.segment_ord).fast_fields();
            let passage = columns.u64("passage").map_err(|x| self.err(x))?;
            let ids = columns.str("doc").map_err(|x| self.err(x))?;
            id.clear();
            if let Some(ids) = ids {
                if let Some(ord) = ids.term_ords(addr.doc_id).next() {
                    ids.ord_to_str(ord, &mut id)
                        .map_err(|x| self.err(x.into()))?;
                }
            }
            let i = passage.first(addr.doc_id).unwrap_or(0);
            // Rounded to 1e-4: the same passages score alike whatever the index's segment
            // layout (tantivy sums its statistics per segment, so a corpus rebuilt after a
            // removal and one built fresh differ in the seventh digit), and ties then fall by id.
            out.push((id.clone(), i as usize, (score * 1e4).round() / 1e4));
        }
        out.sort_by(|a, b| {
            b.2.total_cmp(&a.2)
                .then_with(|| (&a.0, a.1).cmp(&(&b.0, b.1)))
        });
        out.truncate(k);
        Ok(out)
    }

    /// Passages in the index (for the corpus's consistency check).
    pub(crate) fn len(&self) -> u64 {
        self.reader.searcher().num_docs()
    }
}

/// The query as plain lowercase words: tantivy's query syntax (its characters, and AND / OR /
/// NOT, which are operators only in capitals) becomes plain text.
fn escape(query: &str) -> String {
    query
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect::<String>()
        .to_lowercase()
}
