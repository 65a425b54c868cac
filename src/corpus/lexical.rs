//! The passages' BM25 index (tantivy, English stemming), derived from the database: every
//! commit carries the database generation it reflects.
//!
//! BM25 is scored with the statistics of the live passages only ([`Live`]): tantivy's own count
//! a deleted passage's terms and length until its segment is merged (and a merge only
//! estimates the lengths), so a removal would leave the removed text weighing in every score.
//! With live statistics a passage deleted in place scores nothing and counts for nothing, and
//! the index answers as one built from the remaining passages alone.

use std::path::{Path, PathBuf};

use tantivy::collector::TopDocs;
use tantivy::directory::MmapDirectory;
use tantivy::query::{Bm25StatisticsProvider, QueryParser};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST, STORED, STRING,
};
use tantivy::tokenizer::MAX_TOKEN_LEN;
use tantivy::{
    doc, DocSet, Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, Term, TERMINATED,
};

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
    /// Each passage's token count (what tantivy adds to the field's total for it).
    tokens: Field,
    /// The live passages' total tokens, for the searcher generation that counted them.
    live_tokens: std::sync::Mutex<Option<(u64, u64)>>,
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
        let tokens = sb.add_u64_field("tokens", FAST);
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
            tokens,
            live_tokens: std::sync::Mutex::new(None),
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
        let mut analyzer = self
            .index
            .tokenizer_for_field(self.text)
            .map_err(|x| self.err(x))?;
        for (id, i, text) in add {
            // Counted as tantivy counts the field's tokens (a token over MAX_TOKEN_LEN is
            // dropped from the index and from its total).
            let mut n = 0u64;
            analyzer.token_stream(text).process(&mut |t| {
                if t.text.len() <= MAX_TOKEN_LEN {
                    n += 1;
                }
            });
            writer
                .add_document(doc!(
                    self.doc => id.as_str(),
                    self.passage => *i as u64,
                    self.text => text.as_str(),
                    self.tokens => n,
                ))
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
        let live = Live {
            searcher: &searcher,
            total_tokens: self.live_tokens(&searcher)?,
        };
        // Twice k, so that passages tied at the k-th score are all seen before the cut.
        let top = searcher
            .search_with_statistics_provider(&q, &TopDocs::with_limit(k.saturating_mul(2)), &live)
            .map_err(|x| self.err(x))?;
        let mut out = Vec::with_capacity(top.len());
        let mut id = String::new();
        // Each segment's two id columns, opened once per search.
        let columns = searcher
            .segment_readers()
            .iter()
            .map(|segment| {
                let fast = segment.fast_fields();
                Ok((fast.u64("passage")?, fast.str("doc")?))
            })
            .collect::<tantivy::Result<Vec<_>>>()
            .map_err(|x| self.err(x))?;
        for (score, addr) in top {
            let Some((passage, ids)) = columns.get(addr.segment_ord as usize) else {
                continue;
            };
            id.clear();
            if let Some(ids) = ids {
                if let Some(ord) = ids.term_ords(addr.doc_id).next() {
                    ids.ord_to_str(ord, &mut id)
                        .map_err(|x| self.err(x.into()))?;
                }
            }
            let i = passage.first(addr.doc_id).unwrap_or(0);
            // Rounded to 1e-4: the same passages score alike whatever the index's segment
            // layout (sums taken in another order differ in the seventh digit), and ties then
            // fall by id.
            out.push((id.clone(), i as usize, (score * 1e4).round() / 1e4));
        }
        out.sort_by(|a, b| {
            b.2.total_cmp(&a.2)
                .then_with(|| (&a.0, a.1).cmp(&(&b.0, b.1)))
        });
        out.truncate(k);
        Ok(out)
    }

    /// The live passages' total tokens in `searcher`'s view (counted once per searcher
    /// generation: a reload after each commit).
    fn live_tokens(&self, searcher: &Searcher) -> Result<u64, CorpusError> {
        let generation = searcher.generation().generation_id();
        let mut cache = self.live_tokens.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((g, total)) = *cache {
            if g == generation {
                return Ok(total);
            }
        }
        let mut total = 0u64;
        for segment in searcher.segment_readers() {
            let column = segment
                .fast_fields()
                .u64("tokens")
                .map_err(|x| self.err(x))?;
            for doc in segment.doc_ids_alive() {
                total += column.first(doc).unwrap_or(0);
            }
        }
        *cache = Some((generation, total));
        Ok(total)
    }

    /// Passages in the index (for the corpus's consistency check).
    pub(crate) fn len(&self) -> u64 {
        self.reader.searcher().num_docs()
    }
}

/// BM25's statistics over the live passages only: their number, their total tokens, and for a
/// term the live passages holding it (a segment with deletions has its postings walked).
struct Live<'a> {
    searcher: &'a Searcher,
    total_tokens: u64,
}

impl Bm25StatisticsProvider for Live<'_> {
    fn total_num_tokens(&self, _field: Field) -> tantivy::Result<u64> {
        Ok(self.total_tokens)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.searcher.num_docs())
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let mut n = 0u64;
        for segment in self.searcher.segment_readers() {
            let index = segment.inverted_index(term.field())?;
            let Some(alive) = segment.alive_bitset() else {
                n += u64::from(index.doc_freq(term)?);
                continue;
            };
            if let Some(mut postings) = index.read_postings(term, IndexRecordOption::Basic)? {
                let mut doc = postings.doc();
                while doc != TERMINATED {
                    n += u64::from(alive.is_alive(doc));
                    doc = postings.advance();
                }
            }
        }
        Ok(n)
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
