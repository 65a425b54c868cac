//! The one method API with a scripted LLM: a saved memory of every kind opens by its file's
//! format and names its own method; a method refuses a memory of another kind; `ask` answers
//! through the same `run` as the harness; vanilla-middle (the method added to check that adding
//! one is a module and a line) keeps the head and tail of a long document.

mod common;

use std::sync::{Arc, Mutex};

use common::bow::Bow;
use qrmem::answer::{Trace, Window};
use qrmem::config::Config;
use qrmem::llm::{LedgerSnapshot, Policy, Scripted, ScriptedLlm, Service};
use qrmem::memory::{BuildParams, Memory};
use qrmem::methods::garlic::{Garlic, GarlicParams};
use qrmem::methods::knowledge_tree::{KnowledgeTree, KtParams, Variant};
use qrmem::methods::summary_tree::{SummaryTree, TreeParams};
use qrmem::methods::{
    self, AskRequest, Ctx, MemoryKind, MethodError, MethodSpec, Prepared, Runtime, Source, Tuning,
};
use qrmem::prompts::Prompts;

fn policy() -> Policy {
    Policy {
        temperature: 0.0,
        max_tokens: 256,
        frequency_penalty: 0.0,
        json_retries: 1,
        retry_temperature: 0.7,
    }
}

fn kt(variant: Variant) -> KnowledgeTree {
    KnowledgeTree {
        format: methods::knowledge_tree::FORMAT.into(),
        version: methods::knowledge_tree::VERSION,
        variant,
        model: "scripted".into(),
        params: KtParams::default(),
        nodes: vec![],
        failures: vec![],
        ledger: LedgerSnapshot::default(),
        build_secs: 0.0,
    }
}

fn garlic() -> Garlic {
    Garlic {
        format: methods::garlic::FORMAT.into(),
        version: methods::garlic::VERSION,
        model: "scripted".into(),
        embedder: "bow".into(),
        params: GarlicParams::default(),
        nodes: vec![],
        top: vec![],
        failures: vec![],
        ledger: LedgerSnapshot::default(),
        build_secs: 0.0,
    }
}

/// Sentences "Line N of the long record." joined: about 8 tokens each.
fn long_doc(n: usize) -> String {
    (0..n)
        .map(|i| format!("Line {i} of the long record.\n"))
        .collect()
}

#[tokio::test]
async fn every_memory_kind_opens_by_its_files_format_and_names_its_method() {
    let dir = tempfile::tempdir().unwrap();
    let segments = Memory::segments_only(
        &long_doc(50),
        BuildParams::from_config(&Config::default()),
        "m",
    );
    let (graph, _) = common::velden::build(false, common::velden::params()).await;
    let mut no_update_params = common::velden::params();
    no_update_params.graph_update = false;
    let (no_update, _) = common::velden::build(false, no_update_params).await;
    let cases: Vec<(Prepared, MemoryKind, &str)> = vec![
        (
            Prepared::Graph(Box::new(segments)),
            MemoryKind::Segments,
            "ges",
        ),
        (Prepared::Graph(Box::new(graph)), MemoryKind::Graph, "ges"),
        (
            Prepared::Graph(Box::new(no_update)),
            MemoryKind::NoGraphUpdate,
            "ges",
        ),
        (
            Prepared::Tree(Box::new(SummaryTree::new(
                TreeParams::default(),
                "scripted",
            ))),
            MemoryKind::SummaryTree,
            "summary-tree",
        ),
        (
            Prepared::Kt(Box::new(kt(Variant::KnowledgeTree))),
            MemoryKind::KnowledgeTree,
            "knowledge-tree",
        ),
        (
            Prepared::Kt(Box::new(kt(Variant::MemWalker))),
            MemoryKind::MemWalker,
            "memwalker",
        ),
        (
            Prepared::Garlic(Box::new(garlic())),
            MemoryKind::Garlic,
            "garlic",
        ),
    ];
    for (i, (prepared, kind, method)) in cases.into_iter().enumerate() {
        // No extension gives the kind away: only the file's format does.
        let path = dir.path().join(format!("memory-{i}"));
        methods::save(&prepared, &path).unwrap();
        let opened = methods::open(&path).unwrap();
        assert_eq!(opened.kind(), kind, "{}", path.display());
        // A QRMeM or segments memory answers with the configured navigator ("ges" here).
        let spec = opened.default_method("ges").unwrap();
        assert_eq!(spec.to_string(), method, "{kind:?}");
    }
    // A file that is no memory, and one cut short, are errors naming the file.
    let foreign = dir.path().join("foreign.json");
    std::fs::write(&foreign, r#"{"format": "something-else", "x": 1}"#).unwrap();
    let err = methods::open(&foreign).unwrap_err().to_string();
    assert!(
        err.contains("foreign.json") && err.contains("not a qrmem memory"),
        "{err}"
    );
    let cut = dir.path().join("cut.qrm");
    let whole = std::fs::read(dir.path().join("memory-4")).unwrap();
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let err = methods::open(&cut).unwrap_err().to_string();
    assert!(err.contains("cut.qrm"), "{err}");
    let err = methods::open(&dir.path().join("missing.qrm"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing.qrm"), "{err}");
    // The kind written in a graph memory decides, not its contents: a segments-only memory
    // written as `graph` opens as a graph; one of a kind this version does not know is refused.
    let mut written = Memory::segments_only(
        &long_doc(50),
        BuildParams::from_config(&Config::default()),
        "m",
    );
    written.kind = Some("graph".into());
    let path = dir.path().join("written");
    methods::save(&Prepared::Graph(Box::new(written.clone())), &path).unwrap();
    assert_eq!(methods::open(&path).unwrap().kind(), MemoryKind::Graph);
    written.kind = Some("hypergraph".into());
    let newer = dir.path().join("newer");
    methods::save(&Prepared::Graph(Box::new(written)), &newer).unwrap();
    let err = methods::open(&newer).unwrap_err().to_string();
    assert!(
        err.contains("newer") && err.contains("'hypergraph'"),
        "{err}"
    );
}

/// `methods::prepare` writes the kind it built into the memory.
#[tokio::test]
async fn a_prepared_memory_carries_its_kind() {
    let llm = Arc::new(ScriptedLlm::new([]));
    let svc = Service::new(llm.clone(), None, policy());
    let prompts = Prompts::load().unwrap();
    let config = Config::default();
    let rt = methods::Runtime {
        llm: &svc,
        prompts: &prompts,
        embedder: &Bow,
        config: &config,
    };
    for kind in [MemoryKind::Segments, MemoryKind::Cooccurrence] {
        let m = methods::prepare(kind, &rt, &long_doc(50), None, "doc", None)
            .await
            .unwrap();
        let Prepared::Graph(g) = &m else {
            panic!("{kind:?} is a graph memory")
        };
        assert_eq!(g.kind.as_deref(), Some(kind.name()));
        assert_eq!(m.kind(), kind);
    }
    assert!(llm.received().is_empty());
}

#[tokio::test]
async fn a_method_refuses_a_memory_of_another_kind_without_calling_the_llm() {
    let llm = Arc::new(ScriptedLlm::new([]));
    let svc = Service::new(llm.clone(), None, policy());
    let prompts = Prompts::load().unwrap();
    let ctx = Ctx {
        llm: &svc,
        prompts: &prompts,
        embedder: &Bow,
        window: Window::new(4096, 256),
        answer: Default::default(),
        gold: None,
        chain: &[],
    };
    let nav = Config::default().navigate;
    let memwalker = Prepared::Kt(Box::new(kt(Variant::MemWalker)));
    let segments = Prepared::Graph(Box::new(Memory::segments_only(
        &long_doc(5),
        BuildParams::from_config(&Config::default()),
        "m",
    )));
    for (method, prepared, kind) in [
        ("knowledge-tree", &memwalker, "memwalker"),
        ("bm25-top1", &memwalker, "memwalker"),
        ("garlic", &segments, "graph"),
        ("summary-tree", &segments, "graph"),
        ("kn", &memwalker, "memwalker"),
    ] {
        let spec: MethodSpec = method.parse().unwrap();
        let err = methods::run(&spec, &ctx, &nav, prepared, "Q?", &[])
            .await
            .unwrap_err();
        assert!(matches!(err, MethodError::WrongMemory { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            format!("the method {method} cannot read a memory of kind {kind}")
        );
    }
    assert_eq!(llm.received().len(), 0);
}

/// A scripted LLM that answers "yes" and keeps the prompts it was sent.
fn recording() -> (Arc<ScriptedLlm>, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    let llm = ScriptedLlm::new([]).with_responder(move |r| {
        keep.lock()
            .unwrap()
            .push(r.messages.last().unwrap().content.clone());
        Scripted::Reply(r#"{"reasoning": "it says so", "answer": "yes"}"#.into())
    });
    (Arc::new(llm), seen)
}

#[tokio::test]
async fn vanilla_middle_keeps_the_head_and_tail_and_records_both_spans() {
    let prompts = Prompts::load().unwrap();
    let nav = Config::default().navigate;
    let spec: MethodSpec = "vanilla-middle".parse().unwrap();
    assert_eq!(spec.memory_kind(), MemoryKind::Segments);
    assert!(!spec.uses_trials());
    // 400 lines (~3,200 tokens) into a 1,024-token window: the middle must go.
    let doc = long_doc(400);
    let memory = Prepared::Graph(Box::new(Memory::segments_only(
        &doc,
        BuildParams::from_config(&Config::default()),
        "m",
    )));
    let (llm, seen) = recording();
    let svc = Service::new(llm, None, policy());
    let ctx = Ctx {
        llm: &svc,
        prompts: &prompts,
        embedder: &Bow,
        window: Window::new(1024, 128),
        answer: Default::default(),
        gold: None,
        chain: &[],
    };
    let trace = methods::run(&spec, &ctx, &nav, &memory, "Is it long?", &[])
        .await
        .unwrap();
    assert_eq!(trace.method, "vanilla-middle");
    assert_eq!(trace.answer, "yes");
    assert_eq!(trace.requests, 1);
    let spans = &trace.answer_spans;
    assert_eq!(spans.len(), 2, "{spans:?}");
    assert_eq!(spans[0].0, 0);
    assert_eq!(spans[1].1, doc.len());
    assert!(spans[0].1 < spans[1].0, "a gap in the middle: {spans:?}");
    // About half the room each side.
    let (head, tail) = (spans[0].1, doc.len() - spans[1].0);
    assert!(head.abs_diff(tail) < head / 5, "{head} vs {tail}");
    assert_eq!(trace.read_spans, trace.answer_spans);
    let prompt = seen.lock().unwrap()[0].clone();
    assert!(prompt.contains("Line 0 of") && prompt.contains("Line 399 of"));
    assert!(!prompt.contains("Line 200 of") && prompt.contains("[...]"));
    assert!(
        qrmem::text::count_tokens(&prompt) <= 1024 - 128,
        "the prompt fits the window"
    );

    // A document that fits is shown whole: one span, no cut.
    let short = long_doc(10);
    let memory = Prepared::Graph(Box::new(Memory::segments_only(
        &short,
        BuildParams::from_config(&Config::default()),
        "m",
    )));
    let trace = methods::run(&spec, &ctx, &nav, &memory, "Is it long?", &[])
        .await
        .unwrap();
    assert_eq!(trace.answer_spans, vec![(0, short.len())]);
    assert!(!seen.lock().unwrap()[1].contains("[...]"));
}

#[tokio::test]
async fn ask_opens_a_saved_memory_and_answers_with_the_method_its_kind_or_the_flags_name() {
    let dir = tempfile::tempdir().unwrap();
    // ~2,400 tokens: four 600-token segments.
    let doc = long_doc(300);
    let path = dir.path().join("segments.qrm");
    let memory = Memory::segments_only(&doc, BuildParams::from_config(&Config::default()), "m");
    methods::save(&Prepared::Graph(Box::new(memory)), &path).unwrap();
    let prompts = Prompts::load().unwrap();
    let mut config = Config::default();
    config.navigate.method = qrmem::config::NavMethod::Ges;
    let (llm, seen) = recording();
    let svc = Service::new(llm, None, policy());
    let ctx = Runtime {
        llm: &svc,
        prompts: &prompts,
        embedder: &Bow,
        config: &config,
    };
    let mut request = AskRequest {
        source: Source::Memory(path.clone()),
        question: "Which line is 42?".into(),
        options: vec![],
        method: None,
        no_reflection: false,
        no_navigation: false,
        tuning: Tuning::default(),
    };
    // No method named: a segments memory answers with the configured navigator.
    let outcome = methods::ask(&ctx, &request, None).await.unwrap();
    assert_eq!(outcome.trace.method, "ges");
    assert!(outcome.built.is_none());
    let before = seen.lock().unwrap().len();
    request.method = Some("bm25-top2".into());
    let outcome = methods::ask(&ctx, &request, None).await.unwrap();
    assert_eq!(outcome.trace.method, "bm25-top2");
    assert_eq!(outcome.trace.final_segments.len(), 2);
    request.method = Some("vanilla-middle".into());
    let outcome = methods::ask(&ctx, &request, None).await.unwrap();
    assert_eq!(outcome.trace.method, "vanilla-middle");
    assert_eq!(seen.lock().unwrap().len(), before + 2, "one request each");
    // The ablation flags name a navigator's ablation, and refuse a method that has none.
    request.method = Some("kn".into());
    request.no_reflection = true;
    let spec_err = methods::ask(&ctx, &request, None).await;
    // kn-no-reflection over a segments memory: a real navigator run, no graph to expand.
    assert_eq!(spec_err.unwrap().trace.method, "kn-no-reflection");
    // GES scores no reflection: ges-no-reflection would change nothing, so it is no name.
    request.method = Some("ges".into());
    let err = methods::ask(&ctx, &request, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown method 'ges-no-reflection'"), "{err}");
    request.method = Some("bm25-top2".into());
    let err = methods::ask(&ctx, &request, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown method 'bm25-top2-no-reflection'") && err.contains("--no-reflection"),
        "{err}"
    );
    // A document source prepares the method's memory and saves it where asked.
    let doc_path = dir.path().join("doc.txt");
    std::fs::write(&doc_path, &doc).unwrap();
    let saved = dir.path().join("saved.qrm");
    let request = AskRequest {
        source: Source::Document {
            path: doc_path,
            save: Some(saved.clone()),
        },
        method: Some("contriever-top1".into()),
        no_reflection: false,
        ..request
    };
    let outcome = methods::ask(&ctx, &request, None).await.unwrap();
    assert_eq!(outcome.trace.method, "contriever-top1");
    assert!(outcome.built.unwrap().contains("segments"));
    assert_eq!(methods::open(&saved).unwrap().kind(), MemoryKind::Segments);
}

/// A LongBench-style document: passages under their headers, one gold sentence in each of two.
fn passages_doc() -> (String, Vec<(usize, usize)>) {
    let kinds = [
        "amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "harbor", "indigo",
        "jade", "krill", "lilac",
    ];
    let mut doc = String::new();
    for (k, kind) in kinds.iter().enumerate() {
        let i = k + 1;
        if i > 1 {
            doc.push_str("\n\n");
        }
        doc.push_str(&format!(
            "Passage {i}:\nTitle {i}\nTitle {i} is a thing of the {kind} kind. It has the colour number {i}. It is long enough to be a sentence."
        ));
    }
    let span = |needle: &str| {
        let s = doc.find(needle).unwrap();
        (s, s + needle.len())
    };
    let gold = vec![
        span("It has the colour number 3."),
        span("It has the colour number 9."),
    ];
    (doc, gold)
}

/// The segments-only memory of `doc`.
fn segments_memory(doc: &str) -> Prepared {
    Prepared::Graph(Box::new(Memory::segments_only(
        doc,
        BuildParams::from_config(&Config::default()),
        "m",
    )))
}

/// The trace, and the text between the answer prompt's quotes, when the one-prompt method
/// `name` answers `question` over `memory` (default configuration, a 4,096-token window).
async fn shown_by(name: &str, memory: &Prepared, question: &str) -> (Trace, String) {
    let prompts = Prompts::load().unwrap();
    let nav = Config::default().navigate;
    let (llm, seen) = recording();
    let svc = Service::new(llm, None, policy());
    let ctx = Ctx {
        llm: &svc,
        prompts: &prompts,
        embedder: &Bow,
        window: Window::new(4096, 256),
        answer: Default::default(),
        gold: None,
        chain: &[],
    };
    let spec: MethodSpec = name.parse().unwrap();
    let t = methods::run(&spec, &ctx, &nav, memory, question, &[])
        .await
        .unwrap();
    let prompt = seen.lock().unwrap()[0].clone();
    (t, prompt.split("\"\"\"").nth(1).unwrap().to_string())
}

#[tokio::test]
async fn the_oracle_rows_show_only_the_gold_evidence_and_need_it() {
    let prompts = Prompts::load().unwrap();
    let nav = Config::default().navigate;
    let (doc, gold) = passages_doc();
    let memory = segments_memory(&doc);
    let (llm, seen) = recording();
    let svc = Service::new(llm, None, policy());
    let ctx = Ctx {
        llm: &svc,
        prompts: &prompts,
        embedder: &Bow,
        window: Window::new(4096, 256),
        answer: Default::default(),
        gold: Some(&gold),
        chain: &[],
    };
    let sentences: MethodSpec = "gold-sentences".parse().unwrap();
    let t = methods::run(&sentences, &ctx, &nav, &memory, "Which colour?", &[])
        .await
        .unwrap();
    assert_eq!(t.method, "gold-sentences");
    let prompt = seen.lock().unwrap()[0].clone();
    assert!(prompt.contains(
        "Passage 3:\nTitle 3\nIt has the colour number 3.\n\nPassage 9:\nTitle 9\nIt has the colour number 9."
    ));
    assert!(!prompt.contains("is a thing of") && !prompt.contains("Passage 4:"));
    let recall = qrmem::eval::evidence::recall(&gold, &t.answer_spans);
    assert_eq!(recall, Some((2, 2)));

    let passages: MethodSpec = "gold-passages".parse().unwrap();
    methods::run(&passages, &ctx, &nav, &memory, "Which colour?", &[])
        .await
        .unwrap();
    let prompt = seen.lock().unwrap()[1].clone();
    assert!(prompt.contains(
        "Passage 3:\nTitle 3\nTitle 3 is a thing of the cobalt kind. It has the colour number 3. It is long enough to be a sentence."
    ));
    assert!(prompt.contains("Passage 9:") && !prompt.contains("Passage 4:"));

    // Without gold evidence (qrmem ask, batch, a dataset without supporting facts): a clear
    // error and no LLM call.
    let no_gold = Ctx { gold: None, ..ctx };
    let err = methods::run(&sentences, &no_gold, &nav, &memory, "Which colour?", &[])
        .await
        .unwrap_err();
    assert!(matches!(err, MethodError::NoGoldEvidence { .. }), "{err}");
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn bm25_sentences_shows_the_best_sentences_within_its_budget() {
    let (doc, _) = passages_doc();
    let memory = segments_memory(&doc);
    let (t, shown) = shown_by(
        "bm25-sentences40",
        &memory,
        "Which thing is of the garnet kind?",
    )
    .await;
    let shown = shown.trim();
    assert!(qrmem::text::count_tokens(shown) <= 40, "{shown}");
    // The best sentence is there under its title; the rest are other "thing ... kind"
    // sentences and neighbours, in document order.
    assert!(
        shown.contains("Passage 7:\nTitle 7\nTitle 7 is a thing of the garnet kind."),
        "{shown}"
    );
    assert!(!shown.contains("Passage 12:"), "{shown}");
    assert!(!t.answer_spans.is_empty());
}

/// The co-occurrence memory (no LLM call): its edges are the sentences that name two entities,
/// and it opens, inspects, exports and navigates like any other graph.
#[tokio::test]
async fn the_cooccurrence_memory_is_a_graph_like_any_other() {
    let mut params = BuildParams::from_config(&Config::default());
    params.cooccurrence = true;
    let m = qrmem::memory::build_cooccurrence(common::velden::DOC, "velden.txt", params, "none")
        .unwrap();
    assert_eq!(m.ledger.total().requests, 0);
    let node = |name: &str| {
        m.graph
            .node_indices()
            .find(|&n| m.graph[n].name == name)
            .unwrap_or_else(|| panic!("no entity {name}"))
    };
    let (clara, lucerne) = (node("Clara Hoffmann"), node("Lucerne"));
    let e = m
        .graph
        .find_edge(clara, lucerne)
        .expect("one sentence names both");
    assert!(
        m.graph[e].description.starts_with(
            "Clara Hoffmann (1851-1923) was a civil engineer born in the city of Lucerne"
        ),
        "{}",
        m.graph[e].description
    );
    // Opens as its own kind, inspects and exports.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cooc.qrm");
    let prepared = Prepared::Graph(Box::new(m));
    methods::save(&prepared, &path).unwrap();
    let opened = methods::open(&path).unwrap();
    assert_eq!(opened.kind(), MemoryKind::Cooccurrence);
    let Prepared::Graph(g) = &opened else {
        panic!("not a graph")
    };
    let described = qrmem::memory::describe(g, 5);
    assert!(
        described.contains("Clara Hoffmann") && described.contains("the co-occurrence memory"),
        "{described}"
    );
    assert!(qrmem::memory::export::graphml(g).contains("Lucerne"));
    // Navigates: kn-cooccurrence over it, with a scripted LLM.
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(|r| {
        let name = r.schema.as_ref().map(|s| s.name.as_str()).unwrap_or("");
        Scripted::Reply(match name {
            "entities" => r#"{"entities": ["Velden Bridge"]}"#.into(),
            "answerability" => r#"{"reasoning": "Clara Hoffmann designed it and was born in Lucerne.", "verdict_action": -2, "verdict_answer": "Lucerne"}"#.into(),
            _ => r#"{"reasoning": "Lucerne.", "answer": "Lucerne"}"#.into(),
        })
    }));
    let svc = Service::new(llm.clone(), None, policy());
    let prompts = Prompts::load().unwrap();
    let ctx = Ctx {
        llm: &svc,
        prompts: &prompts,
        embedder: &Bow,
        window: Window::new(4096, 256),
        answer: Default::default(),
        gold: None,
        chain: &[],
    };
    let spec: MethodSpec = "kn-cooccurrence".parse().unwrap();
    assert_eq!(spec.memory_kind(), MemoryKind::Cooccurrence);
    let nav = Config::default().navigate;
    let t = methods::run(&spec, &ctx, &nav, &opened, common::velden::QUESTION, &[])
        .await
        .unwrap();
    assert_eq!(t.method, "kn-cooccurrence");
    assert_eq!(t.answer, "Lucerne");
    assert!(
        t.start_entities.iter().any(|e| e == "Velden Bridge"),
        "{:?}",
        t.start_entities
    );
    // A seed system refuses it before any call.
    let calls = llm.received().len();
    let err = methods::run(&"garlic".parse().unwrap(), &ctx, &nav, &opened, "Q?", &[])
        .await
        .unwrap_err();
    assert!(matches!(err, MethodError::WrongMemory { .. }), "{err}");
    assert_eq!(llm.received().len(), calls);
}

/// The passage rows (issue 66): bm25-passagesN shows whole passages, the best first, in
/// document order within N tokens; a navigator with -passagesN navigates the passage view of
/// a saved graph (no rebuild) and every prompt it sends shows at most N tokens of passages,
/// its answer spans whole passages.
#[tokio::test]
async fn passage_rows_show_whole_passages_within_their_budget() {
    let prompts = Prompts::load().unwrap();
    let nav = Config::default().navigate;
    let (doc, _) = passages_doc();
    let memory = segments_memory(&doc);
    let (t, shown) = shown_by(
        "bm25-passages60",
        &memory,
        "Which thing is of the garnet kind?",
    )
    .await;
    let shown = shown.trim();
    assert!(qrmem::text::count_tokens(shown) <= 60, "{shown}");
    assert!(
        shown.contains("Passage 7:\nTitle 7\nTitle 7 is a thing of the garnet kind. It has the colour number 7. It is long enough to be a sentence."),
        "{shown}"
    );
    let passages = qrmem::text::passages::passages(&doc, 300);
    let starts: Vec<usize> = passages.iter().map(|p| p.start).collect();
    assert!(!t.answer_spans.is_empty());
    for s in &t.answer_spans {
        assert!(starts.contains(&s.0), "a span begins at a passage: {s:?}");
    }

    // kn over the passage view of a co-occurrence memory (built with no LLM call).
    let mut params = BuildParams::from_config(&Config::default());
    params.cooccurrence = true;
    let m = qrmem::memory::build_cooccurrence(&doc, "passages.txt", params, "none").unwrap();
    let segments = m.segments.len();
    let graph = Prepared::Graph(Box::new(m));
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(|r| {
        let name = r.schema.as_ref().map(|s| s.name.as_str()).unwrap_or("");
        Scripted::Reply(match name {
            "entities" => r#"{"entities": ["Title 7"]}"#.into(),
            "answerability" => r#"{"reasoning": "The colour of the garnet thing is not given.", "verdict_action": -1, "verdict_answer": ""}"#.into(),
            _ => r#"{"reasoning": "Title 7.", "answer": "Title 7"}"#.into(),
        })
    }));
    let svc = Service::new(llm.clone(), None, policy());
    let ctx = Ctx {
        llm: &svc,
        prompts: &prompts,
        embedder: &Bow,
        window: Window::new(4096, 256),
        answer: Default::default(),
        gold: None,
        chain: &[],
    };
    let spec: MethodSpec = "kn-cooccurrence-passages80".parse().unwrap();
    let t = methods::run(
        &spec,
        &ctx,
        &nav,
        &graph,
        "Which thing is of the garnet kind?",
        &[],
    )
    .await
    .unwrap();
    assert_eq!(t.answer, "Title 7");
    let with_text: Vec<String> = llm
        .received()
        .iter()
        .map(|r| r.messages.last().unwrap().content.clone())
        .filter(|p| p.contains("\"\"\""))
        .collect();
    assert!(with_text.len() >= 2, "checks and the answer");
    for p in &with_text {
        let shown = p.split("\"\"\"").nth(1).unwrap().trim();
        assert!(qrmem::text::count_tokens(shown) <= 80 + 4, "{shown}");
    }
    // Its units are passages: more of them than the memory's segments, spans on their starts.
    assert!(passages.len() > segments);
    for s in &t.answer_spans {
        assert!(starts.contains(&s.0), "a span begins at a passage: {s:?}");
    }
}

/// bm25-hop-passagesN (issue 66): the best passage, then the own passage (by its title) of a
/// name the best passage holds, though the question shares no word with it; bm25-passagesN at
/// the same budget shows the distractor that shares the question's words instead.
#[tokio::test]
async fn the_hop_baseline_shows_the_own_passage_of_a_name_the_best_passage_holds() {
    let doc = "Passage 1:\nRon Joyce\nRon Joyce was a Canadian businessman who helped found Tim Hortons.\n\nPassage 2:\nBurger Palace\nBurger Palace has restaurants in Ohio.\n\nPassage 3:\nTim Hortons (company)\nTim Hortons has 4,846 outlets.\n\nPassage 4:\nOttawa\nOttawa is the capital city of Canada.";
    let memory = segments_memory(doc);
    let question = "How many restaurants comprise the chain that Ron Joyce helped found?";
    let (_, plain) = shown_by("bm25-passages50", &memory, question).await;
    assert!(
        plain.contains("Ron Joyce was") && plain.contains("Burger Palace has"),
        "{plain}"
    );
    assert!(!plain.contains("4,846"), "{plain}");
    let (_, hop) = shown_by("bm25-hop-passages50", &memory, question).await;
    assert!(
        hop.contains("Ron Joyce was") && hop.contains("4,846"),
        "{hop}"
    );
    assert!(!hop.contains("Burger Palace has"), "{hop}");
}

/// `bm25-own-hop-passagesN`: the passage titled with the question's name comes first even
/// where another passage has more of the question's words, and the hop follows its names.
#[tokio::test]
async fn the_own_hop_baseline_starts_from_the_passage_titled_with_the_question_name() {
    let doc = "Passage 1:\nRon Joyce\nRon Joyce was a Canadian businessman who helped found Tim Hortons.\n\nPassage 2:\nBurger Palace\nBurger Palace is a chain of restaurants; how many restaurants comprise the chain is unknown, said Ohio Joyce.\n\nPassage 3:\nTim Hortons (company)\nTim Hortons has 4,846 outlets.\n\nPassage 4:\nOhio Joyce\nOhio Joyce sells burgers.";
    let memory = segments_memory(doc);
    let question = "How many restaurants comprise the chain that Ron Joyce helped found?";
    let (_, hop) = shown_by("bm25-hop-passages50", &memory, question).await;
    assert!(
        hop.contains("Burger Palace is") && hop.contains("Ohio Joyce sells"),
        "{hop}"
    );
    assert!(!hop.contains("4,846"), "{hop}");
    let (_, own) = shown_by("bm25-own-hop-passages50", &memory, question).await;
    assert!(
        own.contains("Ron Joyce was") && own.contains("4,846"),
        "{own}"
    );
    assert!(!own.contains("Burger Palace is"), "{own}");
}

/// A four-passage document: the question names Lothair II, whose passage names his mother,
/// whose own passage holds the answer; two distractors.
const CHAIN_DOC: &str = "Passage 1:\nLothair II\nLothair II was a king. His mother was Ermengarde of Tours.\n\nPassage 2:\nPiano\nThe piano is an instrument played in many halls.\n\nPassage 3:\nErmengarde of Tours\nErmengarde of Tours died on 20 March 851 in Italy.\n\nPassage 4:\nRiver Po\nThe Po is a river in Italy that floods in spring.";

/// Where `needle` stands in [`CHAIN_DOC`], as a gold span.
fn chain_span(needle: &str) -> (usize, usize) {
    let s = CHAIN_DOC.find(needle).unwrap();
    (s, s + needle.len())
}

/// The chain tests' memory: [`CHAIN_DOC`]'s segments.
fn chain_memory() -> Prepared {
    Prepared::Graph(Box::new(Memory::segments_only(
        CHAIN_DOC,
        BuildParams::from_config(&Config::default()),
        "m",
    )))
}

/// The chain tests' context: `svc`, the bag-of-words embedder, a 4,096-token window, and the
/// gold path `chain` (empty outside the path rows).
fn chain_ctx<'a>(
    svc: &'a Service,
    prompts: &'a Prompts,
    chain: &'a [qrmem::methods::oracle::GoldHop],
) -> Ctx<'a> {
    Ctx {
        llm: svc,
        prompts,
        embedder: &Bow,
        window: Window::new(4096, 256),
        answer: Default::default(),
        gold: None,
        chain,
    }
}

/// A scripted LLM answering each prompt by what it is: a hop prompt by the passage it shows
/// (the fact there, `next` left empty as small models do), an answer prompt with "851"; every
/// prompt kept.
fn chain_llm() -> (Arc<ScriptedLlm>, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    let llm = ScriptedLlm::new([]).with_responder(move |r| {
        let p = r.messages.last().unwrap().content.clone();
        keep.lock().unwrap().push(p.clone());
        let reply = if p.starts_with("Answer the question below one fact at a time") {
            if p.contains("died on 20 March 851") && !p.contains("His mother") {
                r#"{"subject": "Ermengarde of Tours", "relation": "date of death", "object": "20 March 851", "next": ""}"#
            } else {
                r#"{"subject": "Lothair II", "relation": "mother", "object": "Ermengarde of Tours", "next": ""}"#
            }
        } else {
            r#"{"reasoning": "the facts say so", "answer": "20 March 851"}"#
        };
        Scripted::Reply(reply.into())
    });
    (Arc::new(llm), seen)
}

#[tokio::test]
async fn the_chain_follows_the_facts_object_to_its_own_passage_and_answers_from_the_triples() {
    let prompts = Prompts::load().unwrap();
    let nav = Config::default().navigate;
    let memory = chain_memory();
    let (llm, seen) = chain_llm();
    let svc = Service::new(llm, None, policy());
    let ctx = chain_ctx(&svc, &prompts, &[]);
    let spec: MethodSpec = "chain-passages400".parse().unwrap();
    assert!(spec.uses_trials());
    let q = "When did Lothair II's mother die?";
    let trace = methods::run(&spec, &ctx, &nav, &memory, q, &[])
        .await
        .unwrap();
    assert_eq!(trace.answer, "20 March 851");
    let kinds: Vec<String> = trace.steps.iter().map(|s| s.kind.to_string()).collect();
    // Hop 1 reads Lothair II's own passage; the object's own passage is hop 2; hop 2's
    // object (a date) has no passage of its own, so the chain ends and answers.
    assert_eq!(kinds, ["hop", "hop", "answer"], "{:#?}", trace.steps);
    assert_eq!(trace.steps[0].segments, vec![0]);
    assert_eq!(trace.steps[1].segments, vec![2]);
    assert!(trace.steps[1].ended);
    let prompts_sent = seen.lock().unwrap().clone();
    assert_eq!(prompts_sent.len(), 3);
    // The second hop is shown the first fact; the answer, both triples above the passages.
    assert!(prompts_sent[1].contains("1. Lothair II | mother | Ermengarde of Tours"));
    assert!(prompts_sent[2].contains(
        "Facts found, one hop at a time:\n1. Lothair II | mother | Ermengarde of Tours\n2. Ermengarde of Tours | date of death | 20 March 851"
    ));
    assert!(prompts_sent[2].contains("died on 20 March 851"));
    assert_eq!(trace.requests + trace.cache_hits, 3);
    // The facts-only row shows the triples and no passage text.
    let (llm, seen) = chain_llm();
    let svc = Service::new(llm, None, policy());
    let ctx = Ctx { llm: &svc, ..ctx };
    let spec: MethodSpec = "chain-facts-passages400".parse().unwrap();
    let trace = methods::run(&spec, &ctx, &nav, &memory, q, &[])
        .await
        .unwrap();
    let last = seen.lock().unwrap().last().unwrap().clone();
    assert!(last.contains("2. Ermengarde of Tours | date of death | 20 March 851"));
    assert!(
        !last.contains("Piano") && !last.contains("His mother was"),
        "{last}"
    );
    assert!(trace.final_segments.is_empty());
    // At most max_trials hops: with one, the chain stops after the first fact.
    let (llm, seen) = chain_llm();
    let svc = Service::new(llm, None, policy());
    let ctx = Ctx { llm: &svc, ..ctx };
    let mut one = nav.clone();
    one.max_trials = 1;
    let spec: MethodSpec = "chain-passages400".parse().unwrap();
    methods::run(&spec, &ctx, &one, &memory, q, &[])
        .await
        .unwrap();
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_chain_that_finds_no_fact_answers_once_from_the_own_hop_context() {
    let prompts = Prompts::load().unwrap();
    let nav = Config::default().navigate;
    let memory = chain_memory();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    let llm = ScriptedLlm::new([]).with_responder(move |r| {
        let p = r.messages.last().unwrap().content.clone();
        keep.lock().unwrap().push(p.clone());
        Scripted::Reply(
            if p.starts_with("Answer the question below one fact at a time") {
                r#"{"subject": "", "relation": "", "object": "", "next": ""}"#.into()
            } else {
                r#"{"reasoning": "r", "answer": "851"}"#.into()
            },
        )
    });
    let svc = Service::new(Arc::new(llm), None, policy());
    let ctx = chain_ctx(&svc, &prompts, &[]);
    let spec: MethodSpec = "chain-passages400".parse().unwrap();
    let trace = methods::run(
        &spec,
        &ctx,
        &nav,
        &memory,
        "When did Lothair II's mother die?",
        &[],
    )
    .await
    .unwrap();
    assert_eq!(trace.answer, "851");
    assert_eq!(trace.steps.len(), 2);
    assert!(
        trace.steps[1].note.contains("the chain found no fact"),
        "{}",
        trace.steps[1].note
    );
    let last = seen.lock().unwrap().last().unwrap().clone();
    assert!(!last.contains("Facts found"), "{last}");
}

#[tokio::test]
async fn the_gold_path_rows_read_the_triples_or_answer_hop_by_hop_with_the_models_answers() {
    use qrmem::methods::oracle::GoldHop;
    let prompts = Prompts::load().unwrap();
    let nav = Config::default().navigate;
    let memory = chain_memory();
    let path = [
        GoldHop {
            subject: "Lothair II".into(),
            relation: "mother".into(),
            answer: "Ermengarde of Tours".into(),
            span: Some(chain_span(
                "Lothair II was a king. His mother was Ermengarde of Tours.",
            )),
            ..GoldHop::default()
        },
        GoldHop {
            subject: "Ermengarde of Tours".into(),
            relation: "date of death".into(),
            answer: "20 March 851".into(),
            span: Some(chain_span(
                "Ermengarde of Tours died on 20 March 851 in Italy.",
            )),
            ..GoldHop::default()
        },
    ];
    let (llm, seen) = recording();
    let svc = Service::new(llm, None, policy());
    let ctx = chain_ctx(&svc, &prompts, &path);
    let q = "When did Lothair II's mother die?";
    let triples: MethodSpec = "gold-triples".parse().unwrap();
    methods::run(&triples, &ctx, &nav, &memory, q, &[])
        .await
        .unwrap();
    let sent = seen.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    assert!(sent[0].contains(
        "Lothair II | mother | Ermengarde of Tours\nErmengarde of Tours | date of death | 20 March 851"
    ));
    assert!(!sent[0].contains("Passage"));
    seen.lock().unwrap().clear();
    let chain: MethodSpec = "gold-chain".parse().unwrap();
    let trace = methods::run(&chain, &ctx, &nav, &memory, q, &[])
        .await
        .unwrap();
    let sent = seen.lock().unwrap().clone();
    assert_eq!(sent.len(), 3, "two hops and the answer");
    assert!(sent[0].contains("Question: What is the mother of Lothair II?"));
    assert!(sent[0].contains("His mother was") && !sent[0].contains("died on"));
    // The second hop's subject is the first hop's object, replaced by the model's answer.
    assert!(
        sent[1].contains("Question: What is the date of death of yes?"),
        "{}",
        sent[1]
    );
    assert!(sent[1].contains("died on") && !sent[1].contains("His mother"));
    assert!(sent[2].contains("Sub-question 2: What is the date of death of yes?\nAnswer: yes"));
    assert_eq!(trace.steps.len(), 3);
    // Without a path (another dataset, or outside the harness) both refuse before any call.
    seen.lock().unwrap().clear();
    let none = Ctx { chain: &[], ..ctx };
    for spec in [&triples, &chain] {
        let err = methods::run(spec, &none, &nav, &memory, q, &[])
            .await
            .unwrap_err();
        assert!(matches!(err, MethodError::NoGoldEvidence { .. }), "{err}");
    }
    assert!(seen.lock().unwrap().is_empty());
}

#[test]
fn a_musique_sub_question_takes_the_models_earlier_answers() {
    use qrmem::methods::oracle::GoldHop;
    let hop = GoldHop {
        question: "When was #1 signed by #2?".into(),
        answer: "June 1982".into(),
        ..GoldHop::default()
    };
    assert_eq!(
        hop.sub_question(&[], &["Diego Maradona".into(), "Barcelona".into()]),
        "When was Diego Maradona signed by Barcelona?"
    );
}

/// A scripted LLM for the chain tests: each prompt (the last message) answered by `reply`, and
/// the prompts it was sent, in order.
fn scripted_chain(
    reply: impl Fn(&str) -> String + Send + Sync + 'static,
) -> (Service, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    let llm = ScriptedLlm::new([]).with_responder(move |r| {
        let p = r.messages.last().unwrap().content.clone();
        keep.lock().unwrap().push(p.clone());
        Scripted::Reply(reply(&p))
    });
    (Service::new(Arc::new(llm), None, policy()), seen)
}

/// [`scripted_chain`] for a decomposition of "When did Lothair II's mother die?": the
/// decomposition replies `decomposition`, the mother's sub-question Ermengarde of Tours, every
/// other prompt 20 March 851.
fn lothair_decomposed(decomposition: &'static str) -> (Service, Arc<Mutex<Vec<String>>>) {
    scripted_chain(move |p| {
        if p.starts_with("Break the question") {
            decomposition.into()
        } else if p.contains("Question: Who is the mother of Lothair II?") {
            r#"{"reasoning": "r", "answer": "Ermengarde of Tours"}"#.into()
        } else {
            r#"{"reasoning": "r", "answer": "20 March 851"}"#.into()
        }
    })
}

#[tokio::test]
async fn the_decomposed_chain_answers_each_sub_question_with_the_answers_so_far() {
    let prompts = Prompts::load().unwrap();
    let nav = Config::default().navigate;
    let memory = chain_memory();
    let (svc, seen) = lothair_decomposed(
        r#"{"questions": ["Who is the mother of Lothair II?", "When did #1 die?"]}"#,
    );
    let ctx = chain_ctx(&svc, &prompts, &[]);
    let spec: MethodSpec = "chain-decompose-passages400".parse().unwrap();
    let trace = methods::run(
        &spec,
        &ctx,
        &nav,
        &memory,
        "When did Lothair II's mother die?",
        &[],
    )
    .await
    .unwrap();
    assert_eq!(trace.answer, "20 March 851");
    let sent = seen.lock().unwrap().clone();
    assert_eq!(sent.len(), 3, "the decomposition and two sub-questions");
    // The second sub-question names the first answer, sees it above its passages, and its
    // context is its own: Ermengarde's passage, found by the title its question now holds.
    assert!(
        sent[2].contains("Question: When did Ermengarde of Tours die?"),
        "{}",
        sent[2]
    );
    assert!(sent[2].contains(
        "Answers found so far:\n1. Who is the mother of Lothair II? Ermengarde of Tours"
    ));
    assert!(sent[2].contains("died on 20 March 851"));
    let kinds: Vec<String> = trace.steps.iter().map(|s| s.kind.to_string()).collect();
    assert_eq!(kinds, ["hop", "hop", "answer"]);
    assert_eq!(trace.requests + trace.cache_hits, 3);
}

/// `gold-decompose`: the model's sub-questions, each over the gold paragraphs only (not the
/// distractors, not a retrieval of its own); it refuses without gold evidence.
#[tokio::test]
async fn the_gold_decomposition_answers_each_sub_question_over_the_gold_paragraphs() {
    let prompts = Prompts::load().unwrap();
    let nav = Config::default().navigate;
    let memory = chain_memory();
    let gold = [
        chain_span("His mother was Ermengarde of Tours."),
        chain_span("Ermengarde of Tours died on 20 March 851 in Italy."),
    ];
    let (svc, seen) = lothair_decomposed(
        r#"{"questions": ["Who is the mother of Lothair II?", "When did #1 die?"]}"#,
    );
    let ctx = Ctx {
        gold: Some(&gold),
        ..chain_ctx(&svc, &prompts, &[])
    };
    let spec: MethodSpec = "gold-decompose".parse().unwrap();
    let q = "When did Lothair II's mother die?";
    let trace = methods::run(&spec, &ctx, &nav, &memory, q, &[])
        .await
        .unwrap();
    assert_eq!(trace.method, "gold-decompose");
    assert_eq!(trace.answer, "20 March 851");
    let sent = seen.lock().unwrap().clone();
    assert_eq!(sent.len(), 3, "the decomposition and two sub-questions");
    for hop in &sent[1..] {
        assert!(hop.contains("His mother was") && hop.contains("died on 20 March 851"));
        assert!(!hop.contains("piano") && !hop.contains("floods"), "{hop}");
    }
    assert!(sent[2].contains("Question: When did Ermengarde of Tours die?"));
    seen.lock().unwrap().clear();
    let none = Ctx { gold: None, ..ctx };
    let err = methods::run(&spec, &none, &nav, &memory, q, &[])
        .await
        .unwrap_err();
    assert!(matches!(err, MethodError::NoGoldEvidence { .. }), "{err}");
    assert!(seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn the_final_chain_asks_the_question_itself_last_and_skips_what_names_no_answer() {
    let prompts = Prompts::load().unwrap();
    let nav = Config::default().navigate;
    let memory = chain_memory();
    // "#2" names an answer never found: that sub-question is skipped.
    let (svc, seen) = lothair_decomposed(
        r#"{"questions": ["Who is the mother of Lothair II?", "Who is the son of #2?", "When did #1 die?"]}"#,
    );
    let ctx = chain_ctx(&svc, &prompts, &[]);
    let spec: MethodSpec = "chain-decompose-final-passages400".parse().unwrap();
    let question = "When did Lothair II's mother die?";
    let trace = methods::run(&spec, &ctx, &nav, &memory, question, &[])
        .await
        .unwrap();
    assert_eq!(trace.answer, "20 March 851");
    let sent = seen.lock().unwrap().clone();
    assert_eq!(
        sent.len(),
        3,
        "the decomposition, one hop, the final answer"
    );
    // The last sub-question is not asked: the question itself is, the answer found stated
    // above the last sub-question's passages (Ermengarde's, by the title it now names).
    let last = &sent[2];
    assert!(last.contains(&format!("Question: {question}")), "{last}");
    assert!(last.contains(
        "Answers found, one question at a time:\n1. Who is the mother of Lothair II? Ermengarde of Tours"
    ));
    assert!(last.contains("died on 20 March 851"));
    assert!(trace
        .steps
        .last()
        .unwrap()
        .note
        .contains("skipped \"Who is the son of #2?\""));
    assert_eq!(trace.requests + trace.cache_hits, 3);
}

#[tokio::test]
async fn the_final_chain_ends_at_a_hop_that_found_nothing_and_answers_from_the_question() {
    let prompts = Prompts::load().unwrap();
    let nav = Config::default().navigate;
    let memory = chain_memory();
    let (svc, seen) = scripted_chain(|p| {
        if p.starts_with("Break the question") {
            r#"{"questions": ["Who is the mother of Lothair II?", "Who is the father of #1?", "When did #2 die?"]}"#.into()
        } else if p.contains("Question: Who is the mother of Lothair II?") {
            r#"{"reasoning": "The text does not mention his mother.", "answer": "No information"}"#
                .into()
        } else {
            r#"{"reasoning": "r", "answer": "20 March 851"}"#.into()
        }
    });
    let ctx = chain_ctx(&svc, &prompts, &[]);
    let spec: MethodSpec = "chain-decompose-final-passages400".parse().unwrap();
    let question = "When did Lothair II's mother die?";
    let trace = methods::run(&spec, &ctx, &nav, &memory, question, &[])
        .await
        .unwrap();
    let sent = seen.lock().unwrap().clone();
    assert_eq!(
        sent.len(),
        3,
        "the decomposition, the hop that found nothing, the answer"
    );
    let last = &sent[2];
    assert!(last.contains(&format!("Question: {question}")), "{last}");
    assert!(
        !last.contains("Answers found"),
        "nothing found is stated: {last}"
    );
    let hop = &trace.steps[1];
    assert!(
        hop.ended && hop.note.contains("no answer found"),
        "{}",
        hop.note
    );
    assert_eq!(trace.answer, "20 March 851");
}

#[tokio::test]
async fn the_path_chain_asks_each_triple_of_its_subject_and_states_the_facts_last() {
    let prompts = Prompts::load().unwrap();
    let nav = Config::default().navigate;
    let memory = chain_memory();
    let (svc, seen) = scripted_chain(|p| {
        if p.starts_with("Write the path") {
            // The third triple relates two objects found: the final call's comparison, no hop.
            r##"{"path": [["Lothair II", "mother", "#1"], ["#1", "date of death", "#2"], ["#1", "same as", "#2"]]}"##.into()
        } else if p.contains("Question: What is the mother of Lothair II?") {
            r#"{"reasoning": "r", "answer": "Ermengarde of Tours"}"#.into()
        } else {
            r#"{"reasoning": "r", "answer": "20 March 851"}"#.into()
        }
    });
    let ctx = chain_ctx(&svc, &prompts, &[]);
    let spec: MethodSpec = "chain-path-passages400".parse().unwrap();
    let question = "When did Lothair II's mother die?";
    let trace = methods::run(&spec, &ctx, &nav, &memory, question, &[])
        .await
        .unwrap();
    assert_eq!(trace.answer, "20 March 851");
    let sent = seen.lock().unwrap().clone();
    assert_eq!(sent.len(), 4, "the path, two hops, the final answer");
    // The second hop asks of the object the first found, over that subject's own passage,
    // the fact found above it.
    let second = &sent[2];
    assert!(
        second.contains("Question: What is the date of death of Ermengarde of Tours?"),
        "{second}"
    );
    assert!(second.contains("Facts found so far:\n1. Lothair II | mother | Ermengarde of Tours"));
    assert!(second.contains("died on 20 March 851"));
    let last = &sent[3];
    assert!(last.contains(&format!("Question: {question}")), "{last}");
    assert!(last.contains(
        "Facts found, one hop at a time:\n1. The mother of Lothair II is Ermengarde of Tours.\n2. The date of death of Ermengarde of Tours is 20 March 851."
    ));
    let hops: Vec<&str> = trace.steps[1..3]
        .iter()
        .map(|s| s.chosen[0].text.as_str())
        .collect();
    assert_eq!(
        hops,
        [
            "Lothair II | mother | Ermengarde of Tours",
            "Ermengarde of Tours | date of death | 20 March 851"
        ]
    );
    assert!(trace.steps.last().unwrap().note.contains("not a hop"));
    assert_eq!(trace.requests + trace.cache_hits, 4);
}

#[tokio::test]
async fn a_path_that_does_not_parse_answers_once_from_the_fast_context() {
    let prompts = Prompts::load().unwrap();
    let nav = Config::default().navigate;
    let memory = chain_memory();
    let (svc, seen) = scripted_chain(|p| {
        if p.starts_with("Write the path") {
            r#"{"path": [["Lothair II", "mother"]]}"#.into()
        } else {
            r#"{"reasoning": "r", "answer": "20 March 851"}"#.into()
        }
    });
    let ctx = chain_ctx(&svc, &prompts, &[]);
    let spec: MethodSpec = "chain-path-passages400".parse().unwrap();
    let trace = methods::run(
        &spec,
        &ctx,
        &nav,
        &memory,
        "When did Lothair II's mother die?",
        &[],
    )
    .await
    .unwrap();
    assert_eq!(seen.lock().unwrap().len(), 2, "the path, one answer");
    assert_eq!(trace.steps[0].note, "path: 0 triple(s)");
    assert!(trace.steps[1].note.contains("no path: one-shot answer"));
    assert_eq!(trace.answer, "20 March 851");
}
