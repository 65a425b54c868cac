//! Knowledge Tree and MemWalker with a scripted LLM: the tree's shape, the documented retry
//! order (max_branch_attempts, leaves_per_branch), partial answers, and MemWalker's revert.

use std::sync::Arc;

use qrmem::answer::Window;
use qrmem::llm::{ChatRequest, Policy, Scripted, ScriptedLlm, Service};
use qrmem::methods::knowledge_tree::{BuildCtx, KnowledgeTree, KtParams, Variant};
use qrmem::prompts::Prompts;

fn prompt(r: &ChatRequest) -> String {
    r.messages.last().unwrap().content.clone()
}

fn policy() -> Policy {
    Policy {
        temperature: 0.0,
        max_tokens: 256,
        frequency_penalty: 0.0,
        json_retries: 1,
        retry_temperature: 0.7,
    }
}

/// 12 one-sentence paragraphs "Fact N ..." -> 12 leaves at 100-character chunks.
fn doc() -> String {
    (0..12)
        .map(|i| {
            format!("Fact {i:02} tells that the old mill number {i:02} stood by the river.\n\n")
        })
        .collect()
}

fn params() -> KtParams {
    KtParams {
        chunk_chars: 100,
        ..KtParams::default()
    }
}

/// Metadata naming the facts a node covers; choices always take option 0; leaf verdicts from
/// `verdict(fact number)`.
fn responder(
    verdict: fn(usize) -> &'static str,
) -> impl Fn(&ChatRequest) -> Scripted + Send + Sync {
    move |r| {
        let p = prompt(r);
        let facts: Vec<String> = p
            .match_indices("Fact ")
            .map(|(i, _)| p[i + 5..i + 7].to_string())
            .collect();
        if p.contains("extract structured metadata") {
            Scripted::Reply(format!(
                r#"{{"Summary": "Facts {}", "Content Types": ["Places & geography"], "Critical Actions": [], "Decisions": "None", "Noteworthy Events": [], "About": ["mill"]}}"#,
                facts.join(" ")
            ))
        } else if p.contains("Summary the segments") {
            Scripted::Reply(format!(r#"{{"summary": "Facts {}"}}"#, facts.join(" ")))
        } else if p.contains("select the option index") {
            Scripted::Reply(
                r#"{"Selected Option Index": 0, "Selection Reason": "the first"}"#.into(),
            )
        } else if p.contains("You are a knowledge assistant") {
            let content = p.split("Context (data").nth(1).unwrap_or("");
            let n: usize = content
                .find("Fact ")
                .and_then(|i| content[i + 5..i + 7].parse().ok())
                .unwrap_or(99);
            Scripted::Reply(verdict(n).into())
        } else {
            Scripted::Fail(format!("unexpected prompt {}", &p[..60.min(p.len())]))
        }
    }
}

const NONE: &str = r#"{"Answer": null, "No Answer": true, "Partial Answer": false}"#;

async fn tree(variant: Variant, llm: Arc<ScriptedLlm>) -> (KnowledgeTree, Service) {
    let svc = Service::new(llm, None, policy());
    let prompts = Prompts::load().unwrap();
    let ctx = BuildCtx {
        llm: &svc,
        prompts: &prompts,
        window: Window::new(4096, 512),
        concurrency: 2,
    };
    let t = KnowledgeTree::build(&ctx, variant, params(), &doc(), "mills")
        .await
        .unwrap();
    (t, svc)
}

#[tokio::test]
async fn knowledge_tree_retries_in_the_documented_order() {
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(responder(|n| match n {
        1 => r#"{"Answer": "the river", "No Answer": false, "Partial Answer": true}"#,
        7 => r#"{"Answer": "mill 07 by the river", "No Answer": false, "Partial Answer": false}"#,
        _ => NONE,
    })));
    let (t, svc) = tree(Variant::KnowledgeTree, llm.clone()).await;
    // 12 leaves -> 2 branches of 6 -> the root; metadata merged from the children.
    assert_eq!(t.nodes.len(), 15);
    let root = &t.nodes[14];
    assert_eq!(
        (root.level.as_str(), root.children.clone()),
        ("Root", vec![12, 13])
    );
    assert_eq!(t.nodes[12].children, (0..6).collect::<Vec<_>>());
    assert!(t.nodes[12]
        .meta
        .content_types
        .contains(&"Places & geography".to_string()));
    assert!(
        t.nodes[0].meta.decisions.is_empty(),
        "\"None\" is no decision"
    );
    let before = llm.received().len();
    let trace = t
        .ask(
            &svc,
            &Prompts::load().unwrap(),
            Window::new(4096, 512),
            "Where was mill 7?",
            &[],
        )
        .await
        .unwrap();
    let notes: Vec<&str> = trace.steps.iter().map(|s| s.note.as_str()).collect();
    // Branch attempt 1: root -> branch 12; 2 leaves (0: no answer, 1: partial), branch removed.
    // Branch attempt 2: branch 13 is the only option left (no call); leaves 6 (none), 7 (done).
    assert_eq!(
        notes,
        vec![
            "node 14: option 0 of 2 -> node 12",
            "node 12: option 0 of 6 -> node 0",
            "leaf 0: No Answer",
            "node 12: option 0 of 5 -> node 1",
            "leaf 1: Partial Answer",
            "node 13: option 0 of 6 -> node 6",
            "leaf 6: No Answer",
            "node 13: option 0 of 5 -> node 7",
            "leaf 7: Answer",
        ]
    );
    assert_eq!(trace.answer, "mill 07 by the river");
    assert!(trace.answered);
    assert_eq!(trace.segments_used, vec![0, 1, 6, 7]);
    // Spans: the chunks of the leaves read, in the document.
    let d = doc();
    let shown: Vec<&str> = trace.read_spans.iter().map(|&(a, b)| &d[a..b]).collect();
    assert_eq!(
        shown.len(),
        2,
        "leaves 0-1 and 6-7 are two ranges: {shown:?}"
    );
    assert_eq!(
        shown.concat(),
        [0, 1, 6, 7]
            .iter()
            .map(|&i| t.nodes[i].content.clone().unwrap())
            .collect::<String>()
    );
    assert!(
        shown[0].starts_with("Fact 00")
            && shown[1].starts_with("Fact ")
            && shown[1].contains("mill number 07")
    );
    assert_eq!(trace.answer_spans, trace.read_spans);
    // 5 choices (the root once, 4 leaves) + 4 leaf answers; branch 13 alone needed no call.
    assert_eq!(llm.received().len() - before, 9);
    // Choices show every option's full metadata.
    let choose = prompt(&llm.received()[before]);
    assert!(
        choose.contains("- Index: 1\nSummary: Facts") && choose.contains("Content Types: Places"),
        "{choose}"
    );
}

#[tokio::test]
async fn the_best_partial_answer_is_returned_when_attempts_run_out() {
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(responder(|n| match n {
        6 => r#"{"Answer": "near a river", "No Answer": false, "Partial Answer": true}"#,
        _ => NONE,
    })));
    let (t, svc) = tree(Variant::KnowledgeTree, llm).await;
    let trace = t
        .ask(
            &svc,
            &Prompts::load().unwrap(),
            Window::new(4096, 512),
            "Q?",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(trace.answer, "near a river");
    assert!(!trace.answered);
    // 2 branch attempts x 2 leaves, then no branch is left (the third attempt finds none).
    assert_eq!(trace.steps.iter().filter(|s| s.kind == "leaf").count(), 4);
}

#[tokio::test]
async fn memwalker_walks_one_path_and_reverts() {
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(responder(|_| NONE)));
    let (mut t, svc) = tree(Variant::MemWalker, llm.clone()).await;
    // Plain summaries only.
    assert!(t
        .nodes
        .iter()
        .all(|n| n.meta.content_types.is_empty() && !n.meta.summary.is_empty()));
    t.params.max_branch_attempts = 4;
    t.params.leaves_per_branch = 2;
    let trace = t
        .ask(
            &svc,
            &Prompts::load().unwrap(),
            Window::new(4096, 512),
            "Q?",
            &[],
        )
        .await
        .unwrap();
    let kinds: Vec<&str> = trace.steps.iter().map(|s| s.kind.as_str()).collect();
    // Branch 12's six leaves, a revert to the root, then branch 13 (the only option left)
    // until 8 leaves have been read.
    assert_eq!(kinds.iter().filter(|k| **k == "leaf").count(), 8);
    let revert = trace.steps.iter().position(|s| s.kind == "revert").unwrap();
    assert_eq!(
        trace.steps[revert].note,
        "node 12 exhausted: back to node 14"
    );
    assert_eq!(trace.segments_used, vec![0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(trace.answer, "no answer");
    let choose = llm
        .received()
        .iter()
        .map(prompt)
        .find(|p| p.contains("select the option index"))
        .unwrap();
    assert!(
        !choose.contains("Content Types:"),
        "MemWalker shows plain summaries"
    );
}
