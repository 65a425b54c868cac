//! The corpus (issue 68): add and remove as transactions, the assembly as a function of the
//! records present, the lexical index repaired from the database, and kill -9 during an add.

use std::process::Command;
use std::time::Duration;

use qrmem::corpus::{Added, Corpus, CorpusError, CorpusStore, PassageRef, Retriever};

mod common;

const A: &str = "Passage 1:\nRon Joyce\nRon Joyce helped found Tim Hortons with Tim Horton in Hamilton.\n\nPassage 2:\nHamilton\nHamilton is a port city in Ontario.";
const B: &str = "Passage 1:\nTim Hortons\nTim Hortons is a restaurant chain with 4,613 restaurants in Canada.\n\nPassage 2:\nOntario\nOntario is a province of Canada whose capital is Toronto.";
const C: &str = "Gianni Schicchi is a comic opera by Giacomo Puccini, first performed in New York.";

fn open(dir: &std::path::Path) -> Corpus {
    Corpus::open(dir, 300).unwrap()
}

/// Everything a corpus holds that a reader sees: passages, assembled entities with their
/// provenance, and the documents' names and sizes.
type State = (
    Vec<(String, usize, String, String)>,
    Vec<(String, Vec<PassageRef>)>,
    Vec<(String, String, usize, usize, usize)>,
);

/// A corpus in `dir` of A, B and C, added in that order.
fn abc(dir: &std::path::Path) -> Corpus {
    let mut c = open(dir);
    c.add("a.txt", A).unwrap();
    c.add("b.txt", B).unwrap();
    c.add("c.txt", C).unwrap();
    c
}

/// What a test's runtime borrows: the service over a scripted LLM, the prompts and the default
/// configuration (the embedder is the bag of words).
struct Setup {
    svc: qrmem::llm::Service,
    prompts: qrmem::prompts::Prompts,
    config: qrmem::Config,
}

impl Setup {
    fn new(llm: std::sync::Arc<qrmem::llm::ScriptedLlm>) -> Self {
        Setup {
            svc: qrmem::llm::Service::new(llm, None, common::velden::policy()),
            prompts: qrmem::prompts::Prompts::load().unwrap(),
            config: qrmem::Config::default(),
        }
    }

    fn rt(&self) -> qrmem::methods::Runtime<'_> {
        qrmem::methods::Runtime {
            llm: &self.svc,
            prompts: &self.prompts,
            embedder: &common::bow::Bow,
            config: &self.config,
        }
    }
}

fn state(c: &Corpus) -> State {
    let passages = c
        .all_passages()
        .unwrap()
        .into_iter()
        .map(|p| (p.doc, p.idx, p.title, p.text))
        .collect();
    let docs = c
        .list()
        .unwrap()
        .into_iter()
        .map(|d| (d.id, d.name, d.bytes, d.passages, d.entities))
        .collect();
    (passages, c.entities().unwrap(), docs)
}

#[test]
fn adding_a_and_b_then_removing_a_gives_the_corpus_of_b_alone() {
    let both = tempfile::tempdir().unwrap();
    let mut c = open(both.path());
    let a = match c.add("a.txt", A).unwrap() {
        Added::New { id, passages } => {
            assert_eq!(passages, 2);
            id
        }
        other => panic!("{other:?}"),
    };
    c.add("b.txt", B).unwrap();
    // Entities of both documents, with their provenance: Tim Hortons in A's first passage and
    // in B's first.
    let entities = c.entities().unwrap();
    let tim = entities
        .iter()
        .find(|(k, _)| k == "tim horton")
        .unwrap_or_else(|| panic!("{entities:?}"));
    assert_eq!(tim.1.len(), 2, "{tim:?}");
    assert_eq!(c.remove(&["a.txt".to_string()]).unwrap(), vec![a.clone()]);
    let alone = tempfile::tempdir().unwrap();
    let mut b_only = open(alone.path());
    b_only.add("b.txt", B).unwrap();
    assert_eq!(state(&c), state(&b_only));
    // Nothing of A is found any more, in the database or the index.
    assert!(c.passage(&a, 0).unwrap().is_none());
    let hits = c.search("Ron Joyce Hamilton", 5).unwrap();
    assert!(hits.iter().all(|h| h.doc != a), "{hits:?}");
    assert_eq!(c.indexed(), 2);
    // Reopened, the removal holds.
    drop(c);
    let c = open(both.path());
    assert_eq!(state(&c), state(&b_only));
}

#[test]
fn the_same_text_is_stored_once_and_names_resolve_by_name_or_id_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path());
    let g0 = c.generation().unwrap();
    let id = match c.add("c.txt", C).unwrap() {
        Added::New { id, .. } => id,
        other => panic!("{other:?}"),
    };
    assert_eq!(c.generation().unwrap(), g0 + 1);
    assert_eq!(
        c.add("copy.txt", C).unwrap(),
        Added::Present {
            id: id.clone(),
            name: "c.txt".into()
        }
    );
    assert_eq!(c.generation().unwrap(), g0 + 1);
    assert_eq!(c.resolve(&id[..8]).unwrap(), id);
    assert_eq!(c.resolve(&id[..8].to_uppercase()).unwrap(), id);
    assert_eq!(c.resolve(&id).unwrap(), id);
    assert_eq!(c.resolve("c.txt").unwrap(), id);
    // An empty prefix names every document (ambiguous); part of a name names none.
    c.add("a.txt", A).unwrap();
    assert!(matches!(c.resolve(""), Err(CorpusError::Ambiguous(..))));
    assert!(matches!(
        c.resolve("c.tx"),
        Err(CorpusError::NoDocument(..))
    ));
    c.remove(&["a.txt".into()]).unwrap();
    // An unknown document is refused, naming it, and nothing is removed.
    match c.remove(&["c.txt".into(), "nowhere.txt".into()]) {
        Err(CorpusError::NoDocument(n)) => assert_eq!(n, "nowhere.txt"),
        other => panic!("{other:?}"),
    }
    assert_eq!(c.list().unwrap().len(), 1);
}

#[test]
fn the_hop_brings_the_own_passage_of_a_title_the_best_passage_names() {
    let dir = tempfile::tempdir().unwrap();
    let c = abc(dir.path());
    let q = "How many restaurants comprise the chain that Ron Joyce helped found?";
    let plain = c.rank(Retriever::Bm25, q, 2, None).unwrap();
    let hop = c.rank(Retriever::Bm25Hop, q, 2, None).unwrap();
    let a = c.resolve("a.txt").unwrap();
    let b = c.resolve("b.txt").unwrap();
    // The best passage is Ron Joyce's; the hop puts Tim Hortons' own passage next.
    assert_eq!(hop[0], (a.clone(), 0));
    assert_eq!(hop[1], (b.clone(), 0), "plain {plain:?}");
    // The same hop through the memory's entity-passage links (Tim Hortons is the title entity
    // of B's first passage).
    let graph_hop = c.rank(Retriever::GraphHop, q, 2, None).unwrap();
    assert_eq!(graph_hop, hop);
}

#[test]
fn the_titles_a_text_names_are_those_a_comparison_with_every_title_finds() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = abc(dir.path());
    let odd = "Passage 1:\n'Allo 'Allo!\nA sitcom.\n\nPassage 2:\nAC/DC\nA band.\n\nPassage 3:\n--\nA dash.\n\nPassage 4:\nÉcole Normale (France)\nA school.\n\nPassage 5:\nTim\nA name inside a longer title.";
    c.add("odd.txt", odd).unwrap();
    let bodies = [
        "'allo 'allo! met ac/dc at the école normale -- tim hortons in hamilton, ontario",
        "tim hortonsx and hamiltonian ac dc, allo",
        "",
    ];
    let scan = |c: &Corpus, body: &str| -> Vec<String> {
        c.titles()
            .unwrap()
            .into_iter()
            .filter(|t| qrmem::text::occurs_in(body, t))
            .collect()
    };
    for body in bodies {
        assert_eq!(c.titles_in(body).unwrap(), scan(&c, body), "{body}");
    }
    assert!(c
        .titles_in(bodies[0])
        .unwrap()
        .contains(&"école normale".to_string()));
    // A title added since the last lookup is found (the index follows the generation).
    c.add("g.txt", "Passage 1:\nGianni Schicchi\nAn opera.")
        .unwrap();
    let body = "gianni schicchi by puccini";
    assert_eq!(
        c.titles_in(body).unwrap(),
        vec!["gianni schicchi".to_string()]
    );
    assert_eq!(c.titles_in(body).unwrap(), scan(&c, body));
}

#[test]
fn an_index_of_an_older_schema_is_replaced_and_rebuilt_from_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path());
    c.add("a.txt", A).unwrap();
    c.add("c.txt", C).unwrap();
    drop(c);
    // An index whose schema lacks the fast id fields (as corpora made before them have).
    let index = dir.path().join("index");
    std::fs::remove_dir_all(&index).unwrap();
    std::fs::create_dir_all(&index).unwrap();
    let mut sb = tantivy::schema::Schema::builder();
    sb.add_text_field("doc", tantivy::schema::STRING | tantivy::schema::STORED);
    sb.add_u64_field("passage", tantivy::schema::STORED);
    sb.add_text_field("text", tantivy::schema::TEXT);
    tantivy::Index::create_in_dir(&index, sb.build()).unwrap();
    let c = open(dir.path());
    assert_eq!(c.indexed(), 3);
    let hit = &c.search("Puccini opera", 1).unwrap()[0];
    assert_eq!((hit.name.as_str(), hit.idx), ("c.txt", 0));
}

#[test]
fn a_lost_or_lagging_index_is_rebuilt_from_the_database_when_the_corpus_opens() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path());
    c.add("a.txt", A).unwrap();
    c.add("c.txt", C).unwrap();
    drop(c);
    std::fs::remove_dir_all(dir.path().join("index")).unwrap();
    let c = open(dir.path());
    assert_eq!(c.indexed(), 3);
    assert_eq!(c.search("Puccini opera", 1).unwrap()[0].name, "c.txt");
}

#[test]
fn another_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("corpus.sqlite");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO meta VALUES ('format', 'something-else'), ('version', '7'), ('passage_tokens', '300');",
        )
        .unwrap();
    }
    let err = Corpus::open(dir.path(), 300).err().expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("corpus.sqlite") && msg.contains("something-else"),
        "{msg}"
    );
}

/// kill -9 while `qrmem corpus add` adds 1,000 documents: the corpus opens whole (every document
/// with its passages and record, the index repaired to the database), and the same add run
/// again finishes the rest.
#[test]
fn kill_9_during_an_add_leaves_whole_documents_and_the_add_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    for i in 0..1000 {
        std::fs::write(
            docs.join(format!("d{i:03}.txt")),
            format!("Passage 1:\nTown {i}\nTown {i} lies on river {i} in Province {}.\n\nPassage 2:\nRiver {i}\nRiver {i} is long.", i % 7),
        )
        .unwrap();
    }
    let corpus = dir.path().join("corpus");
    let add = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_qrmem"));
        c.args(["corpus", "--corpus"])
            .arg(&corpus)
            .arg("add")
            .arg(&docs)
            .env("QRMEM_CACHE", dir.path());
        c
    };
    // Killed at several points: early, midway, and about when the last document is in (the
    // index commit may be running then, or the add may have finished).
    let db = corpus.join("corpus.sqlite");
    for at in [20, 400, 1000] {
        let mut child = add().spawn().unwrap();
        let started = std::time::Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(5));
            let n: i64 = rusqlite::Connection::open(&db)
                .and_then(|c| c.query_row("SELECT COUNT(*) FROM documents", [], |r| r.get(0)))
                .unwrap_or(0);
            if n >= at || started.elapsed() > Duration::from_secs(60) {
                break;
            }
        }
        child.kill().unwrap();
        let status = child.wait().unwrap();
        let c = open(&corpus);
        let listed = c.list().unwrap();
        if at < 1000 {
            // Killed part-way: some documents in, not all.
            assert!(!status.success(), "killed at {at}");
            assert!(
                !listed.is_empty() && listed.len() < 1000,
                "killed at {at}: {}",
                listed.len()
            );
        }
        for d in &listed {
            assert_eq!(d.passages, 2, "{d:?}");
            assert!(d.entities > 0, "{d:?}");
        }
        // Whole documents, and the index (repaired when the corpus opened) holds them all.
        assert_eq!(c.indexed() as usize, 2 * listed.len(), "killed at {at}");
    }
    let out = add().output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = open(&corpus);
    assert_eq!(c.list().unwrap().len(), 1000);
    assert_eq!(c.indexed(), 2000);
}

/// HippoRAG's protocol on the real HotpotQA dev file: one document per distinct paragraph, each
/// question's two gold paragraphs among them, recall in [0, 100] and the per-question counts
/// adding up.
#[test]
fn the_recall_protocol_reads_real_hotpotqa_items() {
    let Some(path) = common::shared_data("hotpotqa/hotpot_dev_distractor_dev500.json") else {
        return;
    };
    let mut items = qrmem::eval::datasets::load_multihop_raw("hotpotqa", &path).unwrap();
    items.truncate(10);
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path());
    let report = qrmem::eval::corpus_recall::corpus_recall(
        "hotpotqa",
        &items,
        &mut c,
        &[Retriever::Bm25, Retriever::Bm25Hop],
        None,
        |_, _, _| {},
    )
    .unwrap();
    let distinct: std::collections::BTreeSet<String> = items
        .iter()
        .flat_map(|i| {
            i.paragraphs
                .iter()
                .map(|(t, s)| qrmem::eval::corpus_recall::paragraph_id(t, s))
        })
        .collect();
    assert_eq!(report.documents, distinct.len());
    assert_eq!(report.rows.len(), 2);
    for row in &report.rows {
        assert_eq!(row.per_question.len(), 10);
        assert!(row
            .per_question
            .iter()
            .all(|&(at2, at5, gold)| gold == 2 && at2 <= at5 && at5 <= gold));
        assert!((0.0..=100.0).contains(&row.recall_at_5));
    }
}

/// The dense retriever: each passage embedded once (stored; a second call embeds nothing),
/// ranked by cosine to the question; a removed document's vectors go with it.
#[test]
fn passages_are_embedded_once_and_ranked_by_similarity() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path());
    c.add("a.txt", A).unwrap();
    c.add("c.txt", C).unwrap();
    let bow = common::bow::Bow;
    assert_eq!(c.embed_missing(&bow, 2, |_, _| {}).unwrap(), 3);
    assert_eq!(c.embed_missing(&bow, 2, |_, _| {}).unwrap(), 0);
    let top = c
        .rank(Retriever::Dense, "comic opera by Puccini", 1, Some(&bow))
        .unwrap();
    assert_eq!(top[0].0, c.resolve("c.txt").unwrap());
    assert!(matches!(
        c.rank(Retriever::Dense, "opera", 1, None),
        Err(CorpusError::Invalid { .. })
    ));
    c.remove(&["c.txt".into()]).unwrap();
    let top = c
        .rank(Retriever::Dense, "comic opera by Puccini", 5, Some(&bow))
        .unwrap();
    assert_eq!(top.len(), 2, "{top:?}");
    c.add("c.txt", C).unwrap();
    assert_eq!(c.embed_missing(&bow, 2, |_, _| {}).unwrap(), 1);
}

/// `ask --corpus`: the answer prompt shows the passages the hop ranks best, each under its
/// document's name, within the budget, and the trace names them.
#[tokio::test]
async fn a_question_is_answered_across_documents_naming_each_passages_document() {
    use qrmem::llm::{Scripted, ScriptedLlm};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let c = abc(dir.path());
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(|_| {
        Scripted::Reply(r#"{"reasoning": "Tim Hortons has 4,613.", "answer": "4,613"}"#.into())
    }));
    let setup = Setup::new(llm.clone());
    let ctx = setup.rt();
    let q = "How many restaurants comprise the chain that Ron Joyce helped found?";
    let answered = qrmem::methods::ask_corpus(&ctx, &c, q, &[], Retriever::Bm25Hop, 60)
        .await
        .unwrap();
    let trace = answered.trace;
    let (a_id, b_id) = (c.resolve("a.txt").unwrap(), c.resolve("b.txt").unwrap());
    assert_eq!(answered.passages, [(a_id, 0), (b_id, 0)]);
    assert_eq!(trace.answer, "4,613");
    assert_eq!(trace.method, "corpus-bm25-hop-passages60");
    let prompt = llm.received()[0].messages.last().unwrap().content.clone();
    let quoted = prompt.split("\"\"\"").nth(1).unwrap();
    // Ron Joyce's passage, then Tim Hortons' own passage, each under its document's name;
    // nothing else fits 60 tokens.
    let a = quoted
        .find("[a.txt]\nPassage 1:\nRon Joyce")
        .unwrap_or_else(|| panic!("{quoted}"));
    let b = quoted
        .find("[b.txt]\nPassage 1:\nTim Hortons")
        .unwrap_or_else(|| panic!("{quoted}"));
    assert!(a < b);
    assert!(!quoted.contains("Puccini"), "{quoted}");
    assert!(qrmem::text::count_tokens(quoted.trim()) <= 60);
    assert!(
        trace.steps[0].note.contains("a.txt#0, b.txt#0"),
        "{}",
        trace.steps[0].note
    );
    // An empty corpus says so.
    let empty = tempfile::tempdir().unwrap();
    let e = open(empty.path());
    let err = qrmem::methods::ask_corpus(&ctx, &e, q, &[], Retriever::Bm25, 60)
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("no passages"), "{err}");
}

/// `ask --corpus --retriever kn-...`: KN navigates the co-occurrence memory of the question's
/// candidate passages as one document; its checks and answer show them under their titles, and
/// the answer's passages are mapped back to their documents.
#[tokio::test]
async fn a_navigator_answers_across_documents_over_its_candidates_memory() {
    use qrmem::llm::{Scripted, ScriptedLlm};
    use qrmem::methods::CorpusMethod;
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let c = abc(dir.path());
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(|r| {
        let p = r.messages.last().unwrap().content.clone();
        Scripted::Reply(if p.contains("Extract the key entities named in the question") {
            r#"{"entities": ["Ron Joyce"]}"#.into()
        } else if p.contains("If the answer CANNOT be inferred") {
            r#"{"reasoning": "The number of restaurants is not given.", "verdict_action": -1, "verdict_answer": ""}"#.into()
        } else {
            r#"{"reasoning": "Tim Hortons has 4,613.", "answer": "4,613"}"#.into()
        })
    }));
    let setup = Setup::new(llm.clone());
    let ctx = setup.rt();
    let q = "How many restaurants comprise the chain that Ron Joyce helped found?";
    let method: CorpusMethod = "kn-cooccurrence-hop-final-filled-passages400"
        .parse()
        .unwrap();
    assert!(method.needs_embedder());
    let answered = qrmem::methods::answer_corpus(&ctx, &c, q, &[], &method, 0)
        .await
        .unwrap();
    let trace = answered.trace;
    assert_eq!(trace.answer, "4,613");
    assert_eq!(
        trace.method,
        "corpus-kn-cooccurrence-hop-final-filled-passages400"
    );
    let (a_id, b_id) = (c.resolve("a.txt").unwrap(), c.resolve("b.txt").unwrap());
    // Ron Joyce's own passage and Tim Hortons' own passage (the hop) are among those shown.
    assert!(
        answered.passages.contains(&(a_id.clone(), 0)) && answered.passages.contains(&(b_id, 0)),
        "{:?}",
        answered.passages
    );
    let answer_prompt = llm
        .received()
        .last()
        .unwrap()
        .messages
        .last()
        .unwrap()
        .content
        .clone();
    assert!(answer_prompt.contains("Tim Hortons is a restaurant chain with 4,613 restaurants"));
    let note = &trace.steps.last().unwrap().note;
    assert!(
        note.contains("across the corpus") && note.contains("a.txt#0"),
        "{note}"
    );
    assert!(!note.contains("relations from the LLM's records"), "{note}");
    // A record with the LLM's relations for A (written here as `corpus add --extract llm`
    // stores one): the question's memory gains the relation, and the trace says so.
    let mut c = c;
    let mut record =
        qrmem::corpus::DocRecord::cooccurrence(&c.passages_of_text("a.txt", A).unwrap());
    record.relations = vec![
        vec![qrmem::corpus::RelationRow {
            head: "ron joyc".into(),
            tail: "tim horton".into(),
            description: "Ron Joyce helped found Tim Hortons.".into(),
        }],
        Vec::new(),
    ];
    let record = qrmem::corpus::Record {
        kind: "llm-graph".into(),
        settings: "by hand".into(),
        record,
    };
    c.add_with_record("a.txt", A, &record).unwrap();
    assert_eq!(c.relations_of(&a_id, 0).unwrap().len(), 1);
    let answered = qrmem::methods::answer_corpus(&ctx, &c, q, &[], &method, 0)
        .await
        .unwrap();
    let note = &answered.trace.steps.last().unwrap().note;
    assert!(
        note.contains("relations from the LLM's records: 1"),
        "{note}"
    );
    // Only co-occurrence navigators and passage readers answer across a corpus; others (an
    // LLM-graph navigator, an oracle row) are refused naming why.
    for name in ["kn-passages400", "gold-passages"] {
        let err = name.parse::<CorpusMethod>().unwrap_err();
        assert!(err.contains("-cooccurrence"), "{err}");
    }
    let err = "bm26".parse::<CorpusMethod>().unwrap_err();
    assert!(err.contains("unknown corpus method 'bm26'"), "{err}");
    assert_eq!(
        "graph-own-hop".parse::<CorpusMethod>().unwrap(),
        CorpusMethod::Retrieve(Retriever::GraphOwnHop)
    );
}

/// `ask --corpus --retriever chain-path-passages400`: the chain walks the question's candidate
/// passages across documents: the first hop reads its subject's own passage (Ron Joyce's, in
/// a.txt), the second its bridge's, found by title in another document (Tim Hortons', in b.txt),
/// and the passages the last call showed map back to their documents.
#[tokio::test]
async fn a_chain_answers_across_documents_hop_by_hop_over_its_candidates() {
    use qrmem::llm::{Scripted, ScriptedLlm};
    use qrmem::methods::CorpusMethod;
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let c = abc(dir.path());
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(|r| {
        let p = r.messages.last().unwrap().content.clone();
        Scripted::Reply(if p.starts_with("Write the path of facts") {
            r##"{"path": [["Ron Joyce", "chain founded", "#1"], ["#1", "number of restaurants", "#2"]]}"##
                .into()
        } else if p.contains("Question: What is the chain founded of Ron Joyce?") {
            r#"{"reasoning": "r", "answer": "Tim Hortons"}"#.into()
        } else {
            r#"{"reasoning": "r", "answer": "4,613"}"#.into()
        })
    }));
    let setup = Setup::new(llm.clone());
    let ctx = setup.rt();
    let q = "How many restaurants comprise the chain that Ron Joyce helped found?";
    let method: CorpusMethod = "chain-path-passages400".parse().unwrap();
    let answered = qrmem::methods::answer_corpus(&ctx, &c, q, &[], &method, 0)
        .await
        .unwrap();
    let trace = answered.trace;
    assert_eq!(trace.answer, "4,613");
    assert_eq!(trace.method, "corpus-chain-path-passages400");
    let prompts: Vec<String> = llm
        .received()
        .iter()
        .map(|r| r.messages.last().unwrap().content.clone())
        .collect();
    assert_eq!(prompts.len(), 4, "the path, two hops, the answer");
    let second = &prompts[2];
    assert!(
        second.contains("Question: What is the number of restaurants of Tim Hortons?"),
        "{second}"
    );
    // The bridge's own passage, from the other document, is read in its hop (found by its
    // title among the candidates, so it is taken before the sub-question's passages).
    assert!(
        second.contains("Tim Hortons is a restaurant chain"),
        "{second}"
    );
    assert!(prompts[1].contains("Ron Joyce helped found Tim Hortons"));
    assert!(
        trace.steps[2].note.contains("the subject's own passages"),
        "{}",
        trace.steps[2].note
    );
    let b_id = c.resolve("b.txt").unwrap();
    assert!(
        answered.passages.contains(&(b_id, 0)),
        "{:?}",
        answered.passages
    );
    assert!(trace.steps[1].note.contains("the subject's own passages"));
}

/// The graph's start over the co-occurrence memory: the passages linked to the entities the
/// question names come first, though BM25 ranks another passage higher.
#[test]
fn the_graph_start_puts_the_passages_of_the_questions_entities_first() {
    let dir = tempfile::tempdir().unwrap();
    let c = abc(dir.path());
    // "restaurant chain" pulls Tim Hortons' passage up for BM25; the question names Ontario.
    let q = "Which restaurant chain restaurant chain is in Ontario?";
    let bm25 = c.rank(Retriever::Bm25, q, 3, None).unwrap();
    let start = c.rank(Retriever::GraphStart, q, 3, None).unwrap();
    let b = c.resolve("b.txt").unwrap();
    let a = c.resolve("a.txt").unwrap();
    assert_eq!(bm25[0], (b.clone(), 0), "{bm25:?}");
    // Ontario's passages: A's second (Hamilton is in Ontario) and B's second (Ontario's own).
    let linked: std::collections::BTreeSet<_> = start[..2].iter().cloned().collect();
    assert_eq!(linked, [(a, 1), (b, 1)].into_iter().collect(), "{start:?}");
}

/// graph-own-hop: the path starts at the own passage of the entity the question names
/// (Hamilton's), not at BM25's best, and hops to the own passages of the names it holds.
#[test]
fn the_own_hop_starts_at_the_question_entitys_own_passage() {
    let dir = tempfile::tempdir().unwrap();
    let c = abc(dir.path());
    let q = "Which restaurant chain restaurant chain is in Hamilton?";
    let a = c.resolve("a.txt").unwrap();
    let b = c.resolve("b.txt").unwrap();
    let hop = c.rank(Retriever::GraphHop, q, 2, None).unwrap();
    assert_eq!(hop[0], (b.clone(), 0), "BM25's best: {hop:?}");
    let own = c.rank(Retriever::GraphOwnHop, q, 2, None).unwrap();
    // Hamilton's own passage, then Ontario's (a name it holds).
    assert_eq!(own, [(a, 1), (b, 1)], "{own:?}");
    // A question naming no entity with an own passage hops from BM25's best, as graph-hop.
    let q = "How many restaurants comprise the chain?";
    assert_eq!(
        c.rank(Retriever::GraphOwnHop, q, 2, None).unwrap(),
        c.rank(Retriever::GraphHop, q, 2, None).unwrap()
    );
}

/// A document whose record was made with other extraction settings gets a record of the
/// current ones when it is added again (nothing else is rebuilt), and the assembly follows it.
#[test]
fn a_record_of_older_settings_is_extracted_again_when_its_document_is_added_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path());
    c.add("a.txt", A).unwrap();
    let before = state(&c);
    drop(c);
    {
        let db = rusqlite::Connection::open(dir.path().join("corpus.sqlite")).unwrap();
        db.execute_batch("UPDATE records SET settings = 'older'; DELETE FROM mentions;")
            .unwrap();
    }
    let mut c = open(dir.path());
    assert!(c.entities().unwrap().is_empty());
    assert!(matches!(c.add("a.txt", A).unwrap(), Added::Present { .. }));
    assert_eq!(state(&c), before);
    let db = rusqlite::Connection::open(dir.path().join("corpus.sqlite")).unwrap();
    let records: i64 = db
        .query_row("SELECT COUNT(*) FROM records", [], |r| r.get(0))
        .unwrap();
    assert_eq!(records, 2);
}

/// `corpus qa` over real HotpotQA items with a scripted answerer that always answers the first
/// item's gold answer: every (question, retriever) pair gets one journal line with its F1 by
/// HotpotQA's metric and the gold paragraphs its prompt showed; a second run asks nothing.
#[tokio::test]
async fn corpus_qa_scores_every_pair_once_and_resumes() {
    use qrmem::llm::{Scripted, ScriptedLlm};
    use std::sync::Arc;
    let Some(path) = common::shared_data("hotpotqa/hotpot_dev_distractor_dev500.json") else {
        return;
    };
    let mut items = qrmem::eval::datasets::load_multihop_raw("hotpotqa", &path).unwrap();
    items.truncate(3);
    let gold = items[0].answers[0].clone();
    let reply = format!(r#"{{"reasoning": "r", "answer": "{gold}"}}"#);
    let llm =
        Arc::new(ScriptedLlm::new([]).with_responder(move |_| Scripted::Reply(reply.clone())));
    let setup = Setup::new(llm.clone());
    let rt = setup.rt();
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(&dir.path().join("corpus"));
    qrmem::eval::corpus_recall::add_paragraphs(&items, &mut c, |_, _, _| {}).unwrap();
    let journal = dir.path().join("results.jsonl");
    let retrievers = [
        qrmem::methods::CorpusMethod::Retrieve(Retriever::Bm25),
        qrmem::methods::CorpusMethod::Retrieve(Retriever::GraphOwnHop),
    ];
    let run = || {
        qrmem::eval::corpus_qa::corpus_qa(
            &rt,
            "hotpotqa",
            &items,
            &c,
            &retrievers,
            400,
            2,
            &journal,
            |_, _, _| {},
        )
    };
    let report = run().await.unwrap();
    assert_eq!(llm.received().len(), 6);
    assert_eq!(
        std::fs::read_to_string(&journal).unwrap().lines().count(),
        6
    );
    for row in &report.rows {
        assert_eq!((row.questions, row.failures), (3, 0));
        // The first item's answer is right for it alone (the others' answers differ).
        assert!(row.f1 >= 100.0 / 3.0 - 1e-9 && row.f1 < 100.0, "{row:?}");
        assert!((0.0..=100.0).contains(&row.gold_recall));
    }
    assert!(report.rows[0].f1_against_first.is_none());
    assert!(report.rows[1].f1_against_first.is_some());
    let again = run().await.unwrap();
    assert_eq!(llm.received().len(), 6, "a second run asks nothing");
    assert_eq!(again.rows[1].f1, report.rows[1].f1);
    assert!(again.to_markdown().contains("| graph-own-hop | 3 | 0 |"));
}

/// `view --corpus`: the page of a question over a corpus shows the passages ranked best across
/// documents (the shown ones marked), the question's entity as the start, and each shown
/// passage's own entity linked to the others it names; no LLM call.
#[test]
fn a_corpus_page_shows_the_ranked_passages_and_their_entities() {
    let dir = tempfile::tempdir().unwrap();
    let c = abc(dir.path());
    let q = "How many restaurants comprise the chain that Ron Joyce helped found?";
    let data = qrmem::view::corpus_data(&c, q, Retriever::GraphOwnHop, 60).unwrap();
    assert_eq!(data.kind, "corpus");
    assert!(data.units[0]
        .text
        .starts_with("[a.txt]\nPassage 1:\nRon Joyce"));
    assert!(data.units[0].answer && data.units[1].answer);
    assert!(data.units[1]
        .text
        .starts_with("[b.txt]\nPassage 1:\nTim Hortons"));
    assert!(
        data.units.iter().skip(2).all(|u| !u.answer),
        "60 tokens hold two"
    );
    assert_eq!(data.start_entities.len(), 1, "{:?}", data.start_entities);
    let ron = data.nodes.iter().find(|n| n.role == "start").unwrap();
    assert!(data
        .edges
        .iter()
        .any(|e| e.source == ron.id && e.label == "a.txt"));
    let page = qrmem::view::render(&data).unwrap();
    assert!(page.contains("Tim Hortons"));
}

/// The LLM's record (`corpus add --extract llm`): the QRMeM graph the (scripted) LLM builds over
/// the document, read per passage; stored once (a document that has it is not extracted
/// again), its entities assembled like the co-occurrence record's, and removed with nothing
/// left.
#[tokio::test]
async fn an_llm_record_is_built_once_and_assembled_like_any_record() {
    use qrmem::llm::{ScriptedLlm, Service};
    use std::sync::Arc;
    let (llm, svc) = common::velden::service(false);
    let prompts = qrmem::prompts::Prompts::load().unwrap();
    let params = common::velden::params();
    let settings = qrmem::corpus::llm_settings(svc.model(), &prompts, &params);
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path());
    let text = common::velden::DOC;
    let kind = qrmem::corpus::LLM_RECORD_KIND;
    assert!(c.needs_record(text, kind, &settings).unwrap());
    let passages = c.passages_of_text("velden.txt", text).unwrap();
    let record = qrmem::corpus::llm_record(
        &svc,
        &prompts,
        params.clone(),
        2,
        "velden.txt",
        text,
        &passages,
    )
    .await
    .unwrap();
    assert!(!llm.received().is_empty());
    assert_eq!(record.kind, "llm-graph");
    assert_eq!(record.record.passages.len(), passages.len());
    // The LLM's typed entities, not the schema extractor's.
    assert!(record
        .record
        .passages
        .iter()
        .flatten()
        .any(|e| e.kind == "person" && e.name.contains("Hoffmann")));
    assert!(matches!(
        c.add_with_record("velden.txt", text, &record).unwrap(),
        Added::New { .. }
    ));
    assert!(!c.needs_record(text, kind, &settings).unwrap());
    // A plain add of the same text afterwards (the co-occurrence pass) keeps the LLM's
    // assembly: its typed entities and its relations stay.
    c.add("velden.txt", text).unwrap();
    // The graph's relations, each kept with the passage that names both its ends.
    let id = qrmem::corpus::doc_id(text);
    let designed = c.relations_of(&id, 0).unwrap();
    assert!(
        designed.iter().any(|r| r.head.starts_with("clara hoffmann")
            && r.tail == "velden bridg"
            && r.description.contains("designed the Velden Bridge")),
        "{designed:?}"
    );
    // The second passage never names the bridge: none of its relations ends there.
    let second = c.relations_of(&id, 1).unwrap();
    assert!(!second.is_empty());
    assert!(
        second
            .iter()
            .all(|r| r.head != "velden bridg" && r.tail != "velden bridg"),
        "{second:?}"
    );
    assert!(c.describe(3).unwrap().contains("relations "));
    let hoffmann: Vec<_> = c
        .entities()
        .unwrap()
        .into_iter()
        .filter(|(k, _)| k.contains("hoffmann"))
        .collect();
    assert!(!hoffmann.is_empty());
    // Other settings are another record: needed again.
    assert!(c.needs_record(text, kind, "v0 another model").unwrap());
    // An LLM that cannot be reached gives no record (an error naming the document), not a
    // record without the LLM's part.
    let down = Arc::new(
        ScriptedLlm::new([])
            .with_responder(|_| qrmem::llm::Scripted::Fail("connection refused".into())),
    );
    let svc_down = Service::new(down, None, common::velden::policy());
    let err = qrmem::corpus::llm_record(
        &svc_down,
        &prompts,
        params.clone(),
        2,
        "other.txt",
        "Passage 1:\nAlpha\nAlpha founded Beta in Delta.",
        &c.passages_of_text(
            "other.txt",
            "Passage 1:\nAlpha\nAlpha founded Beta in Delta.",
        )
        .unwrap(),
    )
    .await
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains("other.txt")
            && err.contains("connection refused")
            && err.contains("nothing was stored"),
        "{err}"
    );
    c.remove(&["velden.txt".into()]).unwrap();
    assert!(c.entities().unwrap().is_empty());
    assert!(c.relations_of(&id, 0).unwrap().is_empty());
    assert!(c.needs_record(text, kind, &settings).unwrap());
}

/// A record made for a document already in the corpus is made over the passages as stored: a
/// later add under another name (`corpus add --extract llm FILE` of a paragraph that `corpus
/// recall` stored under its title) still titles them with the stored name, so the title stays
/// the passage's own entity in the record.
#[test]
fn a_present_documents_passages_keep_the_name_it_was_stored_under() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path());
    let text =
        "Christy Sutherland\nChristy Sutherland is a country singer who signed with Epic Records.";
    let fresh = c.passages_of_text("/tmp/in/001.txt", text).unwrap();
    assert!(
        fresh
            .iter()
            .all(|(title, _)| !title.to_lowercase().contains("christy")),
        "{fresh:?}"
    );
    c.add("Christy Sutherland", text).unwrap();
    let stored = c.passages_of_text("/tmp/in/001.txt", text).unwrap();
    assert!(!stored.is_empty());
    assert!(
        stored
            .iter()
            .all(|(title, _)| title.eq_ignore_ascii_case("Christy Sutherland")),
        "{stored:?}"
    );
    // The record made over them has the title as the passage's own entity.
    let record = qrmem::corpus::DocRecord::cooccurrence(&stored);
    assert!(record.passages[0]
        .iter()
        .any(|e| e.kind == "title" && e.name.eq_ignore_ascii_case("Christy Sutherland")));
}

/// `corpus::add_with_llm`: documents extracted a group at a time and stored in order; one that
/// could not be read is refused by its reason and the others are added; a second add of the
/// same text sends no call.
#[tokio::test]
async fn add_with_llm_stores_each_document_once_and_keeps_the_refused() {
    let (llm, svc) = common::velden::service(false);
    let prompts = qrmem::prompts::Prompts::load().unwrap();
    let params = common::velden::params();
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path());
    let docs = vec![
        Ok(("velden.txt".to_string(), common::velden::DOC.to_string())),
        Err("the document gone.txt is empty".to_string()),
    ];
    let mut groups = Vec::new();
    let done = qrmem::corpus::add_with_llm(&mut c, &svc, &prompts, &params, 2, docs, |d, n| {
        groups.push((d.seen(), n))
    })
    .await
    .unwrap();
    assert_eq!((done.new, done.updated, done.had), (1, 0, 0));
    assert_eq!(
        done.refused,
        vec!["the document gone.txt is empty".to_string()]
    );
    assert_eq!(groups, vec![(2, 1)]);
    assert_eq!(c.list().unwrap().len(), 1);
    let sent = llm.received().len();
    assert!(sent > 0);
    let again = vec![Ok((
        "velden.txt".to_string(),
        common::velden::DOC.to_string(),
    ))];
    let done = qrmem::corpus::add_with_llm(&mut c, &svc, &prompts, &params, 2, again, |_, _| {})
        .await
        .unwrap();
    assert_eq!((done.new, done.updated, done.had), (0, 0, 1));
    assert_eq!(llm.received().len(), sent);
}

/// Two questions sharing a paragraph: the same text twice in one group is extracted once (the
/// copy counted as had), not twice.
#[tokio::test]
async fn add_with_llm_extracts_a_text_met_twice_in_a_group_once() {
    let (llm, svc) = common::velden::service(false);
    let prompts = qrmem::prompts::Prompts::load().unwrap();
    let params = common::velden::params();
    let once = {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(dir.path());
        let docs = vec![Ok(("a.txt".to_string(), common::velden::DOC.to_string()))];
        qrmem::corpus::add_with_llm(&mut c, &svc, &prompts, &params, 2, docs, |_, _| {})
            .await
            .unwrap();
        llm.received().len()
    };
    assert!(once > 0);
    let (llm, svc) = common::velden::service(false);
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path());
    let docs = vec![
        Ok(("a.txt".to_string(), common::velden::DOC.to_string())),
        Ok(("b.txt".to_string(), common::velden::DOC.to_string())),
    ];
    let done = qrmem::corpus::add_with_llm(&mut c, &svc, &prompts, &params, 2, docs, |_, _| {})
        .await
        .unwrap();
    assert_eq!((done.new, done.updated, done.had), (1, 0, 1));
    assert!(done.refused.is_empty(), "{:?}", done.refused);
    assert_eq!(llm.received().len(), once);
    assert_eq!(c.list().unwrap().len(), 1);
}

/// A document of the property test: two titled passages about people, places and works drawn
/// from small shared vocabularies, so documents share titles, entities and words.
fn random_doc(rng: &mut fastrand::Rng, n: usize) -> String {
    const PEOPLE: [&str; 6] = [
        "Ron Joyce",
        "Tim Horton",
        "Ada Lovelace",
        "Giacomo Puccini",
        "Marie Curie",
        "Alan Turing",
    ];
    const PLACES: [&str; 5] = ["Hamilton", "Ontario", "London", "Paris", "Lucca"];
    const WORKS: [&str; 4] = [
        "Gianni Schicchi",
        "Tim Hortons",
        "the Analytical Engine",
        "radium",
    ];
    let p = PEOPLE[rng.usize(..PEOPLE.len())];
    let q = PLACES[rng.usize(..PLACES.len())];
    let w = WORKS[rng.usize(..WORKS.len())];
    let r = PLACES[rng.usize(..PLACES.len())];
    format!(
        "Passage 1:\n{p}\n{p} was born in {q} and is known for {w}, first shown in {r} (note {n}).\n\nPassage 2:\n{q}\n{q} is a city where {w} was made; {p} lived there {} years.",
        rng.usize(2..40)
    )
}

/// What every retriever returns for `queries` (the passages in order), and BM25's scores.
fn rankings(c: &Corpus, queries: &[&str]) -> Vec<String> {
    let bow = common::bow::Bow;
    let mut out = Vec::new();
    for q in queries {
        let hits: Vec<(String, usize, String)> = c
            .search(q, 5)
            .unwrap()
            .into_iter()
            .map(|h| (h.doc, h.idx, format!("{:.6}", h.score)))
            .collect();
        out.push(format!("{q} search {hits:?}"));
        for r in [
            Retriever::Bm25,
            Retriever::Bm25Hop,
            Retriever::Dense,
            Retriever::GraphStart,
            Retriever::GraphHop,
            Retriever::GraphOwnHop,
        ] {
            let ranked = c.rank(r, q, 5, Some(&bow)).unwrap();
            out.push(format!("{q} {r} {ranked:?}"));
        }
    }
    out
}

/// Remove means never added: after any sequence of adds and removes, every retriever's top 5
/// (and BM25's scores) for every query, the passages and the assembled entities equal those of
/// a corpus built from the remaining documents alone, added in another order.
#[test]
fn after_random_adds_and_removes_every_ranking_equals_a_fresh_build_of_what_remains() {
    let queries = [
        "Where was Ron Joyce born?",
        "Which city made Gianni Schicchi?",
        "Who lived in Lucca?",
        "radium Paris Marie Curie",
        "Ontario Tim Hortons",
        "Analytical Engine London",
    ];
    let bow = common::bow::Bow;
    for seed in 0..4u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let docs: Vec<(String, String)> = (0..10)
            .map(|i| (format!("d{i}.txt"), random_doc(&mut rng, i)))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(dir.path());
        let mut present: Vec<usize> = Vec::new();
        for _ in 0..16 {
            let i = rng.usize(..docs.len());
            if present.contains(&i) && rng.bool() {
                c.remove(std::slice::from_ref(&docs[i].0)).unwrap();
                present.retain(|&x| x != i);
            } else if !present.contains(&i) {
                c.add(&docs[i].0, &docs[i].1).unwrap();
                present.push(i);
            }
        }
        // Removed last, so the corpus's final step is a removal.
        if let Some(&i) = present.first() {
            c.remove(std::slice::from_ref(&docs[i].0)).unwrap();
            present.remove(0);
        }
        c.embed_missing(&bow, 4, |_, _| {}).unwrap();
        let fresh_dir = tempfile::tempdir().unwrap();
        let mut fresh = open(fresh_dir.path());
        let mut order = present.clone();
        order.sort_unstable_by(|a, b| b.cmp(a));
        for &i in &order {
            fresh.add(&docs[i].0, &docs[i].1).unwrap();
        }
        fresh.embed_missing(&bow, 4, |_, _| {}).unwrap();
        assert_eq!(
            c.entities().unwrap(),
            fresh.entities().unwrap(),
            "seed {seed}"
        );
        let (got, want) = (rankings(&c, &queries), rankings(&fresh, &queries));
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "seed {seed}, documents {present:?}");
        }
    }
}
