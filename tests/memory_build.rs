//! Memory construction with a scripted LLM: graph shape, segment links, the question pool, the
//! relation merge, failures recorded instead of aborting, and the memory file.

mod common;

use std::sync::Arc;

use common::velden::{build, build_with, conversation_of, params, prompt_of};
use qrmem::llm::{Scripted, ScriptedLlm, Service};
use qrmem::memory::{self, store, Builder, Memory, StoreError};
use qrmem::prompts::Prompts;

fn node<'a>(m: &'a Memory, name: &str) -> &'a memory::Entity {
    let n = m
        .find_entity(name)
        .unwrap_or_else(|| panic!("no entity {name}"));
    &m.graph[n]
}

#[tokio::test]
async fn builds_the_expected_graph() {
    let (m, _) = build(false, params()).await;
    assert_eq!(m.segments.len(), 2, "the sample splits at its paragraph");
    assert!(m.segments[1].text.starts_with("Clara Hoffmann (1851-1923)"));
    // The bridge entity links to both paragraphs: extracted in one, found by mention in both.
    let clara = node(&m, "Clara Hoffmann");
    assert_eq!(
        clara.segments.iter().copied().collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert!(clara.mentions.contains("Clara Hoffmann"));
    assert!(
        clara.mentions.contains("Hoffmann"),
        "the bare surname joins the one Hoffmann: {:?}",
        clara.mentions
    );
    assert_eq!(clara.kind, "person");
    assert_eq!(
        node(&m, "Lucerne")
            .segments
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        vec![1]
    );
    assert_eq!(
        node(&m, "Velden Bridge")
            .segments
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        vec![0]
    );
    assert!(
        node(&m, "Marlow Heath")
            .sources
            .contains(&memory::Source::Update),
        "an admitted question's entities join the graph"
    );
    // An end that is no entity but is written in its segment becomes one.
    let society = node(&m, "Swiss society of engineers");
    assert!(society.sources.contains(&memory::Source::Relation));
    assert_eq!(
        society.segments.iter().copied().collect::<Vec<_>>(),
        vec![1]
    );
    assert!(
        m.find_entity("Atlantis").is_none(),
        "a name not in its segment is dropped"
    );
    assert!(m.stats.dropped_entities >= 1);
    // Schema extractor entities are there too.
    assert!(m.find_entity("1887").is_some() && m.find_entity("Aare").is_some());

    // Edges: Clara-engineer merged from two segments by Relation Update ("Hoffmann" in segment
    // 1 resolves to Clara Hoffmann, "engineer" is an end made entity in both); Clara-Velden;
    // Clara-Lucerne; Velden-Marlow Heath (brought by an admitted question); Clara-the society
    // ("Hoffmann's"). Segment 1's "Hoffmann -> Velden Bridge" is dropped: segment 1 never
    // names the bridge.
    let clara_n = m.find_entity("Clara Hoffmann").unwrap();
    let engineer = m.find_entity("engineer").unwrap();
    let e = m
        .graph
        .find_edge(clara_n, engineer)
        .or_else(|| m.graph.find_edge(engineer, clara_n))
        .expect("Clara-engineer edge");
    let rel = &m.graph[e];
    assert_eq!(
        rel.description,
        "Clara Hoffmann designed the Velden Bridge, one of her bridges."
    );
    assert_eq!(rel.segments.iter().copied().collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(
        rel.helper_questions,
        vec!["Did Hoffmann design other bridges?"]
    );
    assert_eq!(m.stats.relation_updates, 1);
    assert_eq!(
        m.relation_count(),
        5,
        "{:?}",
        m.graph
            .edge_weights()
            .map(|r| &r.description)
            .collect::<Vec<_>>()
    );
    // Dropped: "Nobody" (in no segment, no entity), the bridge that segment 1 never names, and
    // the self-loop; the rejected question's relation (Velden Bridge crosses the Aare) was
    // never kept.
    assert_eq!(m.stats.raw_relations, 9);
    assert_eq!(m.stats.dropped_relations, 3);
    let drops = m.stats.relation_drops.unwrap();
    assert_eq!(
        (
            drops.unresolved_end,
            drops.self_loop,
            drops.empty_description
        ),
        (2, 1, 0)
    );
    let aare = m.find_entity("Aare").unwrap();
    assert!(
        m.neighbours(aare).is_empty(),
        "a rejected question brings nothing"
    );
    assert_eq!(m.edge_text(e).unwrap().matches(" | ").count(), 2);

    // The question pool: the near-duplicate is rejected by ROUGE-L >= 0.6.
    let qs: Vec<&str> = m.questions.iter().map(|q| q.text.as_str()).collect();
    assert_eq!(
        qs,
        vec![
            "Who designed the Velden Bridge?",
            "Where was Clara Hoffmann born?"
        ]
    );
    assert_eq!(m.stats.rejected_questions, 1);

    assert!(m.failures.is_empty(), "{:?}", m.failures);
    let l = &m.ledger.stages;
    // One joint call per segment: 2 + the summary + one Relation Update.
    for (stage, n) in [("summary", 1), ("extract", 2), ("merge", 1)] {
        assert_eq!(l[stage].requests, n, "stage {stage}");
    }
}

/// The ablations send the paper graph's extraction calls and leave out what they ablate: the
/// questions and what they bring (no-graph-update), the LLM's entities (no-open-entity).
#[tokio::test]
async fn ablations_leave_out_their_parts_of_the_same_replies() {
    let extraction = |llm: &ScriptedLlm| {
        let mut prompts: Vec<String> = llm
            .received()
            .iter()
            .filter(|r| conversation_of(r).contains("You build the knowledge graph"))
            .map(conversation_of)
            .collect();
        prompts.sort();
        prompts
    };
    let stands_in = |m: &Memory| {
        m.graph
            .edge_weights()
            .any(|r| r.description.contains("stands in Marlow Heath"))
    };
    let (graph, graph_llm) = build(false, params()).await;
    assert!(!graph.questions.is_empty());
    assert!(stands_in(&graph), "an admitted question brings its triple");
    let mut p = params();
    p.graph_update = false;
    p.open_entity = false;
    let (m, llm) = build(false, p).await;
    assert_eq!(extraction(&llm), extraction(&graph_llm), "the same calls");
    assert!(m.questions.is_empty(), "no graph update");
    assert!(!stands_in(&m), "the triple a question brought is left out");
    assert_eq!(
        m.stats.raw_relations + 1,
        graph.stats.raw_relations,
        "the extraction's triples are kept"
    );
    assert!(m
        .graph
        .node_weights()
        .all(|e| e.sources.iter().all(|s| *s == memory::Source::Schema)));
    // The schema extractor alone still links the bridge entity to both paragraphs.
    assert_eq!(node(&m, "Clara Hoffmann").segments.len(), 2);
}

#[tokio::test]
async fn a_step_that_never_parses_is_recorded_and_the_build_finishes() {
    let (m, llm) = build(true, params()).await;
    assert_eq!(m.failures.len(), 1, "{:?}", m.failures);
    let f = &m.failures[0];
    assert_eq!((f.segment, f.step.as_str()), (Some(1), "extract"));
    assert!(
        f.error.contains("no parsable reply after 5 attempts"),
        "{}",
        f.error
    );
    let entity_calls = llm
        .received()
        .iter()
        .filter(|r| conversation_of(r).contains("You build the knowledge graph"))
        .count();
    assert_eq!(
        entity_calls,
        1 + 5,
        "segment 0 once, segment 1 five times (0 + 4 retries at 0.7)"
    );
    assert_eq!(m.ledger.stages["extract"].failed_steps, 1);
    // The schema extractor kept that segment's entities.
    assert!(node(&m, "Clara Hoffmann").segments.contains(&1));
    assert!(m.find_entity("Lucerne").is_some());

    // `qrmem inspect` reports the failure.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.json");
    memory::save(&m, &path).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_qrmem"))
        .arg("inspect")
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("failures:   1") && text.contains("segment 1, step extract"),
        "{text}"
    );
    assert!(
        text.contains("segments:   2") && text.contains("Clara Hoffmann"),
        "{text}"
    );
}

#[tokio::test]
async fn the_memory_file_round_trips_and_bad_files_are_clear_errors() {
    let (m, _) = build(false, params()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("velden.qrmem.json");
    memory::save(&m, &path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let loaded = memory::load(&path).unwrap();
    let again = store::to_bytes(&loaded).unwrap();
    assert!(
        again == bytes,
        "not bit-for-bit:\n{}\n{}",
        String::from_utf8_lossy(&again),
        String::from_utf8_lossy(&bytes)
    );
    assert_eq!(loaded.entity_count(), m.entity_count());

    let truncated = dir.path().join("truncated.json");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let err = memory::load(&truncated).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(
        err.to_string().contains("truncated.json") && err.to_string().contains("ends early"),
        "{err}"
    );

    let foreign = dir.path().join("foreign.json");
    std::fs::write(&foreign, r#"{"nodes": [], "edges": []}"#).unwrap();
    assert!(matches!(
        memory::load(&foreign).unwrap_err(),
        StoreError::Foreign { .. }
    ));

    let old = dir.path().join("old.json");
    let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    v["version"] = 99.into();
    std::fs::write(&old, serde_json::to_vec(&v).unwrap()).unwrap();
    let err = memory::load(&old).unwrap_err().to_string();
    assert!(
        err.contains("version 99") && err.contains("rebuild"),
        "{err}"
    );

    assert!(matches!(
        memory::load(&dir.path().join("missing.json")).unwrap_err(),
        StoreError::Read { .. }
    ));

    // Export: GraphML and JSON name every entity.
    let xml = memory::export::graphml(&m);
    assert!(
        xml.contains("<graphml")
            && xml.contains("Clara Hoffmann")
            && xml.matches("<node ").count() == m.entity_count()
    );
    let json: serde_json::Value = serde_json::from_str(&memory::export::json(&m).unwrap()).unwrap();
    assert_eq!(json["nodes"].as_array().unwrap().len(), m.entity_count());
    assert_eq!(json["edges"].as_array().unwrap().len(), m.relation_count());
}

/// Each segment gets one joint call: a system turn with the task, the one-shot example as a
/// user/assistant exchange, then the summary, the question and the segment.
#[tokio::test]
async fn each_segment_gets_one_joint_call_as_a_conversation() {
    use qrmem::llm::Role;
    let (_, llm) = build(false, params()).await;
    let mut per_segment = [0usize; 2];
    for r in llm.received() {
        if !conversation_of(&r).contains("You build the knowledge graph of a text segment") {
            continue;
        }
        let roles: Vec<Role> = r.messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            vec![Role::System, Role::User, Role::Assistant, Role::User]
        );
        let p = prompt_of(&r);
        assert!(p.starts_with("# Document summary\n"), "{p}");
        assert!(
            !p.contains(common::velden::QUESTION),
            "the question is not shown to the extraction: {p}"
        );
        assert!(p.trim_end().ends_with("\"\"\""), "the segment ends it: {p}");
        let seg = usize::from(p.contains("born in the city of Lucerne"));
        per_segment[seg] += 1;
    }
    assert_eq!(per_segment, [1, 1]);
}

/// A memory's file name carries the fingerprint of the prompts its build sends: edited
/// construction prompts give another memory, an edited prompt the build does not send does not.
#[test]
fn a_memory_built_with_other_prompts_lives_in_another_file() {
    use qrmem::config::Config;
    use qrmem::llm::{ScriptedLlm, Service};
    use qrmem::methods::{MemoryDir, MemoryKind, Runtime};
    use qrmem::prompts::{PromptId, Prompts};
    use std::sync::Arc;

    let svc = Service::new(
        Arc::new(ScriptedLlm::new([])),
        None,
        common::velden::policy(),
    );
    let config = Config::default();
    let dir = tempfile::tempdir().unwrap();
    let store = MemoryDir::new(dir.path());
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let copy = |edit: Option<(&str, &str)>| {
        let d = tempfile::tempdir().unwrap();
        for id in PromptId::ALL {
            std::fs::copy(src.join(id.file()), d.path().join(id.file())).unwrap();
        }
        if let Some((file, extra)) = edit {
            let mut text = std::fs::read_to_string(d.path().join(file)).unwrap();
            text.push_str(extra);
            std::fs::write(d.path().join(file), text).unwrap();
        }
        let p = Prompts::load_dir(d.path()).unwrap();
        drop(d);
        p
    };
    let path = |prompts: &Prompts, kind: MemoryKind| {
        let ctx = Runtime {
            llm: &svc,
            prompts,
            embedder: &common::bow::Bow,
            config: &config,
        };
        store.path_for(kind, &ctx, common::velden::DOC, None)
    };
    let base = copy(None);
    assert_eq!(
        path(&base, MemoryKind::Graph),
        path(&Prompts::load().unwrap(), MemoryKind::Graph),
        "copies of the compiled-in prompts are the same prompts"
    );
    let entities = copy(Some(("extract.txt", "Be brief.\n")));
    assert_ne!(
        path(&base, MemoryKind::Graph),
        path(&entities, MemoryKind::Graph)
    );
    let context = copy(Some(("extract_no_questions.txt", "\n")));
    assert_ne!(
        path(&base, MemoryKind::NoOpenEntity),
        path(&context, MemoryKind::NoOpenEntity)
    );
    // The answer prompt is read when answering, not when building.
    let answer = copy(Some(("answer.txt", "Be brief.\n")));
    for kind in [
        MemoryKind::Graph,
        MemoryKind::SummaryTree,
        MemoryKind::KnowledgeTree,
        MemoryKind::MemWalker,
        MemoryKind::Garlic,
    ] {
        assert_eq!(path(&base, kind), path(&answer, kind), "{kind:?}");
    }
    let tree = copy(Some(("tree_summary.txt", "Be brief.\n")));
    assert_ne!(
        path(&base, MemoryKind::SummaryTree),
        path(&tree, MemoryKind::SummaryTree)
    );
    assert_eq!(
        path(&base, MemoryKind::Garlic),
        path(&tree, MemoryKind::Garlic)
    );
}

/// Builds the sample with velden's replies, except that prompts containing `marker` get
/// `bad` (a reply that never parses, or a transport failure).
async fn build_failing(marker: &'static str, bad: Scripted) -> Memory {
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(move |r| {
        if common::velden::conversation_of(r).contains(marker) {
            bad.clone()
        } else {
            common::velden::reply(r, false)
        }
    }));
    let svc = Service::new(llm, None, common::velden::policy());
    build_with(&svc, params(), 2).await
}

#[tokio::test]
async fn a_failure_in_each_stage_is_recorded_and_the_build_goes_on() {
    let unparsable = || Scripted::Reply("no JSON at all".into());
    for (marker, step, bad) in [
        ("Summary the context", "summary", unparsable()),
        ("You build the knowledge graph", "extract", unparsable()),
        (
            "merge the corresponding relationships",
            "merge",
            unparsable(),
        ),
        // A transport failure (after the transport's own retries) is recorded the same way.
        (
            "You build the knowledge graph",
            "extract",
            Scripted::Fail("connection refused".into()),
        ),
    ] {
        let m = build_failing(marker, bad.clone()).await;
        let steps: Vec<&str> = m.failures.iter().map(|f| f.step.as_str()).collect();
        assert!(steps.contains(&step), "{marker}: {steps:?}");
        assert!(
            steps.iter().all(|s| *s == step),
            "{marker}: only that stage failed: {steps:?}"
        );
        if let Scripted::Fail(_) = bad {
            assert!(
                m.failures
                    .iter()
                    .any(|f| f.error.contains("connection refused")),
                "{:?}",
                m.failures
            );
        }
        // The build went on: both segments, the schema extractor's entities, the graph.
        assert_eq!(m.segments.len(), 2, "{marker}");
        assert!(m.find_entity("Lucerne").is_some(), "{marker}");
        assert!(m.entity_count() > 5, "{marker}");
    }
}

#[tokio::test]
async fn an_empty_document_aborts_with_its_error() {
    let llm = Arc::new(ScriptedLlm::new([]));
    let svc = Service::new(llm.clone(), None, common::velden::policy());
    let prompts = Prompts::load().unwrap();
    let err = Builder::new(&svc, &prompts, params(), 2)
        .build("  \n\n ", None, "blank.txt")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("blank.txt"), "{err}");
    assert!(llm.received().is_empty(), "nothing was sent");
}

/// velden's scripted LLM, answering after a delay that depends on the prompt, so that
/// concurrent calls finish in another order than they were sent.
struct Jittered(ScriptedLlm);

#[async_trait::async_trait]
impl qrmem::llm::Llm for Jittered {
    fn model(&self) -> &str {
        qrmem::llm::Llm::model(&self.0)
    }
    async fn chat(
        &self,
        r: &qrmem::llm::ChatRequest,
    ) -> Result<qrmem::llm::ChatReply, qrmem::LlmError> {
        let p = common::velden::prompt_of(r);
        // The first segment's replies come last (after the second's), the rest jittered.
        let first = p.contains("The Velden Bridge is a stone arch bridge")
            && !p.contains("born in the city of Lucerne");
        let jitter = p
            .bytes()
            .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64))
            % 10;
        let ms = if first { 40 + jitter } else { jitter };
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        self.0.chat(r).await
    }
}

#[tokio::test]
async fn results_do_not_depend_on_timing_or_concurrency() {
    let build_at = |concurrency: usize| async move {
        let llm = Arc::new(Jittered(
            ScriptedLlm::new([]).with_responder(|r| common::velden::reply(r, false)),
        ));
        let svc = Service::new(llm, None, common::velden::policy());
        let mut m = build_with(&svc, params(), concurrency).await;
        // Wall times are the only thing allowed to differ.
        m.build_secs = 0.0;
        m.ledger = Default::default();
        store::to_bytes(&m).unwrap()
    };
    let one = build_at(1).await;
    assert_eq!(build_at(4).await, one);
    assert_eq!(build_at(8).await, one);
}

/// The compact extraction with the repeat cut: segment 1's reply loops on one triple; the
/// request asks for the cut on its triple list, the reply is cut at the third copy (the triple
/// counted once, the entities and questions before it kept, the triple after the loop never
/// read) and the build goes on.
#[tokio::test]
async fn a_looping_reply_is_cut_its_triple_counted_once_and_the_build_goes_on() {
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(|r| {
        let all = conversation_of(r);
        if !all.contains("You build the knowledge graph") {
            return common::velden::reply(r, false);
        }
        if prompt_of(r).contains("born in the city of Lucerne") {
            Scripted::Reply(
                r#"{"entities": [["Clara Hoffmann", "person"], ["Lucerne", "location"],
                                 ["Swiss society of engineers", "organization"]],
                    "questions": ["Where was Clara Hoffmann born?"],
                    "triples": [["Clara Hoffmann", "was born in", "Lucerne"],
                                ["Clara Hoffmann", "was born in", "Lucerne"],
                                ["Clara Hoffmann", "was born in", "Lucerne"],
                                ["Clara Hoffmann", "was", "engineer"]]}"#
                    .into(),
            )
        } else {
            Scripted::Reply(
                r#"{"entities": [["Velden Bridge", "work"], ["Clara Hoffmann", "person"]],
                    "questions": ["Who designed the Velden Bridge?"],
                    "triples": [["Clara Hoffmann", "designed", "Velden Bridge"]]}"#
                    .into(),
            )
        }
    }));
    let svc = Service::new(llm.clone(), None, common::velden::policy());
    let mut p = params();
    p.extraction_cut_repeats = 2;
    p.extraction_format = qrmem::config::ExtractionFormat::Compact;
    let m = build_with(&svc, p, 2).await;

    let extractions: Vec<_> = llm
        .received()
        .into_iter()
        .filter(|r| conversation_of(r).contains("You build the knowledge graph"))
        .collect();
    assert_eq!(extractions.len(), 2, "no retry");
    for r in &extractions {
        assert_eq!(r.sampling.cut_repeats, 2);
        assert_eq!(r.sampling.cut_repeats_in.as_deref(), Some("triples"));
        let sent = serde_json::to_string(&r.schema.as_ref().unwrap().as_sent()).unwrap();
        let at = |k: &str| {
            sent.find(&format!("\"{k}\":{{"))
                .unwrap_or_else(|| panic!("{k}: {sent}"))
        };
        assert!(
            at("entities") < at("questions") && at("questions") < at("triples"),
            "entities, questions, then the triples: {sent}"
        );
    }
    assert!(m.failures.is_empty(), "{:?}", m.failures);
    assert_eq!(m.stats.cut_replies, 1);
    // One triple per segment: the loop's once, the one after it never read.
    assert_eq!(m.stats.raw_relations, 2);
    let clara = m.find_entity("Clara Hoffmann").unwrap();
    let lucerne = m.find_entity("Lucerne").unwrap();
    assert!(m.graph.find_edge(clara, lucerne).is_some());
    assert!(
        m.find_entity("engineer").is_none(),
        "the triple after the loop was cut off"
    );
    assert_eq!(node(&m, "Clara Hoffmann").kind, "person", "an entity pair");
    assert_eq!(node(&m, "Swiss society of engineers").kind, "organization");
    let qs: Vec<&str> = m.questions.iter().map(|q| q.text.as_str()).collect();
    assert!(qs.contains(&"Where was Clara Hoffmann born?"), "{qs:?}");
    assert_eq!(m.segments.len(), 2);
}
