//! The LLM's extraction record of a document (issue 68, `corpus add --extract llm`): the
//! QRMeM graph built over the document as the paper builds it (the summary, one joint
//! extraction call per 600-token segment, the merge; every call through the reply cache, so an
//! interrupted add resumes without sending a call twice), read per passage as the entities
//! each passage names. The first phase of construction with the LLM; the assembly is the same
//! as for the co-occurrence record.

use sha2::{Digest, Sha256};

use super::record::{DocRecord, Record};
use super::CorpusError;
use crate::llm::Service;
use crate::memory::{BuildParams, Builder};
use crate::prompts::{PromptId, Prompts};

/// The record kind of the LLM's extraction.
pub const LLM_RECORD_KIND: &str = "llm-graph";

/// The prompts a graph build sends (`memory::build`: the summary, the joint extraction in
/// either reply format, Relation Update).
const BUILD_PROMPTS: [PromptId; 4] = [
    PromptId::Summary,
    PromptId::Extract,
    PromptId::ExtractCompact,
    PromptId::RelationUpdate,
];

/// What an LLM record is made with: the model, the build parameters and the build's prompts
/// (a change to any is another record, never read as this one; a change to another prompt,
/// the answer's say, leaves the records as they are). `v2`: the record keeps the graph's
/// relations (a `v1` record, entities only, is made again from the reply cache).
pub fn llm_settings(model: &str, prompts: &Prompts, params: &BuildParams) -> String {
    let mut h = Sha256::new();
    h.update(serde_json::to_vec(params).unwrap_or_default());
    format!(
        "v2 model={model} prompts={} params={}",
        prompts.fingerprint(&BUILD_PROMPTS),
        &hex::encode(h.finalize())[..16]
    )
}

/// The LLM's record of the document `text` named `name`, over its `passages` (title, text)
/// as the corpus stores them: the graph built with `params`, `concurrency` calls at a time.
pub async fn llm_record(
    llm: &Service,
    prompts: &Prompts,
    params: BuildParams,
    concurrency: usize,
    name: &str,
    text: &str,
    passages: &[(String, String)],
) -> Result<Record, CorpusError> {
    let settings = llm_settings(llm.model(), prompts, &params);
    // The document's own calls: a call that never reached the LLM refuses the record (a build
    // goes on past failed steps, but a record missing the LLM's part would be stored as the
    // LLM's and never extracted again). A reply that never parsed is a failed step, as in any
    // build, and the record keeps the rest.
    let scoped = llm.scoped();
    let memory = Builder::new(&scoped, prompts, params, concurrency)
        .build(text, None, name)
        .await
        .map_err(|e| CorpusError::Invalid {
            path: name.into(),
            what: format!("the LLM's extraction failed: {e}"),
        })?;
    let spent = scoped.ledger().snapshot().total();
    if spent.errors > 0 {
        let first = memory
            .failures
            .first()
            .map(|f| format!(": {}", f.error))
            .unwrap_or_default();
        return Err(CorpusError::Invalid {
            path: name.into(),
            what: format!(
                "{} of its LLM calls failed{first}; nothing was stored for it (add it again once the LLM answers: the calls that did are in the reply cache)",
                spent.errors
            ),
        });
    }
    Ok(Record {
        kind: LLM_RECORD_KIND.to_string(),
        settings,
        record: DocRecord::from_memory(&memory, passages),
    })
}

/// What [`add_with_llm`] did: documents added, present ones given the record, present ones
/// that already had it (a copy of a text met earlier in the same add among them), and the
/// documents refused (each a reason naming it).
#[derive(Debug, Default, Clone)]
pub struct LlmAdded {
    pub new: usize,
    pub updated: usize,
    pub had: usize,
    pub refused: Vec<String>,
}

impl LlmAdded {
    /// The documents seen so far.
    pub fn seen(&self) -> usize {
        self.new + self.updated + self.had + self.refused.len()
    }
}

/// Adds `docs` (each a document's name and text, or the reason it could not be read) to
/// `corpus` with the LLM's record made with `params` (`corpus add --extract llm`, and `corpus
/// recall` / `qa --extract llm`): a document that has a record of these settings is not
/// extracted again. `concurrency` documents are extracted at once (a short document's calls
/// follow one another: summary, extraction, merge), all their calls sharing the client's
/// requests in flight; each is stored, in the given order, as its turn comes, one transaction a
/// document, so an interrupted add keeps every document stored before it. `docs` is read one
/// group at a time (a large directory is never in memory at once). `progress` is called after
/// each group with the counts so far and the documents extracted (not merely skipped) so far.
pub async fn add_with_llm(
    corpus: &mut super::Corpus,
    llm: &Service,
    prompts: &Prompts,
    params: &BuildParams,
    concurrency: usize,
    docs: impl IntoIterator<Item = Result<(String, String), String>>,
    mut progress: impl FnMut(&LlmAdded, usize),
) -> Result<LlmAdded, CorpusError> {
    let settings = llm_settings(llm.model(), prompts, params);
    let mut done = LlmAdded::default();
    let mut extracted = 0;
    let mut docs = docs.into_iter().peekable();
    while docs.peek().is_some() {
        // Each document of the group to extract: its name, its text and its passages.
        type Todo = (String, String, Vec<(String, String)>);
        let mut todo: Vec<Todo> = Vec::new();
        // A text already in the group (two questions sharing a paragraph) is extracted once:
        // the copy waits for its first's outcome (the index into `todo`).
        let mut copies: Vec<(String, usize)> = Vec::new();
        for doc in docs.by_ref().take(concurrency.max(1)) {
            let (name, text) = match doc {
                Ok(doc) => doc,
                Err(reason) => {
                    done.refused.push(reason);
                    continue;
                }
            };
            if !corpus.needs_record(&text, LLM_RECORD_KIND, &settings)? {
                done.had += 1;
                continue;
            }
            if let Some(first) = todo.iter().position(|(_, t, _)| *t == text) {
                copies.push((name, first));
                continue;
            }
            let passages = corpus.passages_of_text(&name, &text)?;
            todo.push((name, text, passages));
        }
        let records = futures::future::join_all(todo.iter().map(|(name, text, passages)| {
            llm_record(
                llm,
                prompts,
                params.clone(),
                concurrency,
                name,
                text,
                passages,
            )
        }))
        .await;
        let mut stored = Vec::with_capacity(todo.len());
        for ((name, text, _), record) in todo.iter().zip(records) {
            match record {
                Ok(record) => {
                    match corpus.add_with_record(name, text, &record)? {
                        super::Added::New { .. } => done.new += 1,
                        super::Added::Present { .. } => done.updated += 1,
                    }
                    stored.push(true);
                }
                Err(e) => {
                    done.refused.push(e.to_string());
                    stored.push(false);
                }
            }
        }
        for (name, first) in copies {
            if stored.get(first).copied().unwrap_or(false) {
                done.had += 1;
            } else {
                let of = todo.get(first).map(|t| t.0.as_str()).unwrap_or("another");
                done.refused.push(format!(
                    "{name}: the same text as {of}, whose extraction failed; nothing was stored for it"
                ));
            }
        }
        extracted += todo.len();
        progress(&done, extracted);
    }
    Ok(done)
}
