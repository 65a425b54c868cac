//! GARLIC with a scripted LLM: the weighted DAG (edge weights sum to 1, many-to-many), the
//! greedy best-first order (z = E^T a with position normalisation, plus similarity), the stop
//! patience, the growing check prompt and the two-turn answer.

mod common;

use std::sync::Arc;

use common::bow::Bow;
use qrmem::answer::Window;
use qrmem::embed::{EmbedError, Embedder};
use qrmem::llm::{ChatRequest, LedgerSnapshot, Policy, Scripted, ScriptedLlm, Service};
use qrmem::methods::garlic::{GNode, Garlic, GarlicCtx, GarlicParams};
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

#[tokio::test]
async fn the_summary_graph_is_a_weighted_dag() {
    // Summaries: two bullet points per batch, naming the batch's first and last lines.
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(|r| {
        let p = prompt(r);
        let info = p.split("\"\"\"").nth(1).unwrap_or("");
        let lines: Vec<&str> = info.lines().filter(|l| !l.trim().is_empty()).collect();
        Scripted::Reply(format!(
            "* {}\n* {}",
            lines
                .first()
                .unwrap_or(&"none")
                .chars()
                .take(60)
                .collect::<String>(),
            lines
                .last()
                .unwrap_or(&"none")
                .chars()
                .take(60)
                .collect::<String>()
        ))
    }));
    let svc = Service::new(llm, None, policy());
    let prompts = Prompts::load().unwrap();
    let ctx = GarlicCtx {
        llm: &svc,
        prompts: &prompts,
        embedder: &Bow,
        window: Window::new(1200, 256),
        concurrency: 2,
    };
    let doc: String = (0..40)
        .map(|i| format!("Mill {i} stood on the river Aar and ground grain for the town of Velden number {i}. "))
        .collect();
    let params = GarlicParams {
        chunk_tokens: 60,
        ..GarlicParams::default()
    };
    let g = Garlic::build(&ctx, params, &doc, "mills").await.unwrap();
    let chunks = g.nodes.iter().filter(|n| n.level == 1).count();
    assert!(chunks >= 10, "{chunks} chunks");
    let levels = g.nodes.iter().map(|n| n.level).max().unwrap();
    assert!(
        levels >= 3,
        "several batches at level 1, so at least two levels of IPs"
    );
    for n in g.nodes.iter().filter(|n| n.level > 1) {
        let sum: f32 = n.children.iter().map(|c| c.1).sum();
        assert!((sum - 1.0).abs() < 1e-4, "weights sum to {sum}");
        assert!(n
            .children
            .iter()
            .all(|&(c, _)| g.nodes[c].level == n.level - 1));
    }
    // Many-to-many: some lower node has several parents.
    let mut parents = vec![0; g.nodes.len()];
    for n in &g.nodes {
        for &(c, _) in &n.children {
            parents[c] += 1;
        }
    }
    assert!(parents.iter().any(|&p| p >= 2));
    assert!(!g.top.is_empty() && g.top.iter().all(|&t| g.nodes[t].level == levels));
}

/// Axis vectors: "q" along 0, "t0" along 0, "t1" along 1, "half" between them, the rest along 2.
struct Axes;
impl Embedder for Axes {
    fn model_id(&self) -> &str {
        "axes"
    }
    fn dim(&self) -> usize {
        3
    }
    fn normalized(&self) -> bool {
        true
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|_| vec![1.0, 0.0, 0.0]).collect())
    }
}

fn node(level: usize, text: &str, children: Vec<(usize, f32)>, vector: Vec<f32>) -> GNode {
    GNode {
        level,
        text: text.into(),
        children,
        vector,
    }
}

fn graph(nodes: Vec<GNode>, top: Vec<usize>, patience: usize) -> Garlic {
    Garlic {
        format: "qrmem-garlic".into(),
        version: 1,
        model: "scripted".into(),
        embedder: "axes".into(),
        params: GarlicParams {
            patience,
            ..GarlicParams::default()
        },
        nodes,
        top,
        failures: vec![],
        ledger: LedgerSnapshot::default(),
        build_secs: 0.0,
    }
}

async fn search(g: &Garlic, yes_after: usize) -> (qrmem::answer::Trace, Arc<ScriptedLlm>) {
    let count = std::sync::atomic::AtomicUsize::new(0);
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(move |r| {
        if prompt(r).starts_with("Given the above information") {
            return Scripted::Reply("The garden.".into());
        }
        let k = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Scripted::Reply(if k + 1 >= yes_after { "Yes" } else { "No" }.into())
    }));
    let svc = Service::new(llm.clone(), None, policy());
    let t = g
        .ask(
            &svc,
            &Prompts::load().unwrap(),
            &Axes,
            Window::new(4096, 512),
            "Where?",
            &[],
        )
        .await
        .unwrap();
    (t, llm)
}

fn visits(t: &qrmem::answer::Trace) -> Vec<usize> {
    t.steps
        .iter()
        .filter(|s| s.kind == "visit")
        .map(|s| s.segments[0])
        .collect()
}

#[tokio::test]
async fn gbfs_follows_z_then_similarity_and_stops_on_patience() {
    let off = vec![0.0, 0.0, 1.0];
    // Chunks 0..3 (not similar to the question); t0 (similar) -> 0 (0.9), 1 (0.1); t1 -> 2.
    let nodes = vec![
        node(1, "chunk zero", vec![], off.clone()),
        node(1, "chunk one", vec![], off.clone()),
        node(1, "chunk two", vec![], off.clone()),
        node(2, "ip t0", vec![(0, 0.9), (1, 0.1)], vec![1.0, 0.0, 0.0]),
        node(2, "ip t1", vec![(2, 1.0)], vec![0.0, 1.0, 0.0]),
    ];
    let g = graph(nodes, vec![3, 4], 1);
    // "No" until the 4th check: the visits follow z: 0 (0.9), 1 (0.1), then 2.
    let (t, llm) = search(&g, 4).await;
    assert_eq!(visits(&t), vec![0, 1, 2]);
    assert_eq!(t.answer, "The garden.");
    assert!(t.answered);
    assert_eq!(t.segments_used, vec![0, 1, 2]);
    // Spans: the visited level-1 chunks in the document they concatenate to; the IPs are not
    // document text.
    assert_eq!(
        t.answer_spans,
        vec![(0, "chunk zerochunk onechunk two".len())]
    );
    assert_eq!(t.read_spans, t.answer_spans);
    // Each check prompt is a prefix of the next (llama.cpp reuses it); the answer is the
    // second turn of the last check's conversation.
    let received = llm.received();
    let checks: Vec<String> = received[..4].iter().map(prompt).collect();
    for w in checks.windows(2) {
        assert!(w[1].starts_with(w[0].trim_end()), "not a growing prefix");
    }
    let last = &received[4];
    assert_eq!(last.messages.len(), 3);
    assert_eq!(last.messages[1].content, "Yes");
    assert_eq!(last.messages[0].content, checks[3]);

    // Patience 2: the first "Yes" does not stop the search.
    let g2 = graph(g.nodes.clone(), vec![3, 4], 2);
    let (t2, _) = search(&g2, 1).await;
    assert_eq!(visits(&t2), vec![0]);
    assert_eq!(t2.steps.iter().filter(|s| s.kind == "check").count(), 2);
}

#[tokio::test]
async fn later_visited_nodes_weigh_more_by_position() {
    let off = vec![0.0, 0.0, 1.0];
    let half = vec![
        std::f32::consts::FRAC_1_SQRT_2,
        std::f32::consts::FRAC_1_SQRT_2,
        0.0,
    ];
    // Two equally similar top nodes with one child each: the second (position 3) beats the
    // first (position 2) by the paper's position normalisation.
    let nodes = vec![
        node(1, "chunk zero", vec![], off.clone()),
        node(1, "chunk one", vec![], off),
        node(2, "ip a", vec![(0, 1.0)], half.clone()),
        node(2, "ip b", vec![(1, 1.0)], half),
    ];
    let g = graph(nodes, vec![2, 3], 1);
    let (t, _) = search(&g, 3).await;
    assert_eq!(visits(&t), vec![1, 0]);
}

#[tokio::test]
async fn a_search_without_yes_answers_with_the_shared_prompt() {
    let off = vec![0.0, 0.0, 1.0];
    let nodes = vec![
        node(1, "chunk zero", vec![], off.clone()),
        node(1, "chunk one", vec![], off),
        node(2, "ip t0", vec![(0, 0.5), (1, 0.5)], vec![1.0, 0.0, 0.0]),
    ];
    let g = graph(nodes, vec![2], 1);
    // Every check says "No": the search visits every node, then must not ask for the answer as
    // a second turn after "No" (a small model repeats the refusal) but with the answer prompt.
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(|r| {
        let p = prompt(r);
        if p.starts_with("Read the text in triple quotes") {
            assert!(p.contains("chunk zero") && p.contains("chunk one") && p.contains("ip t0"));
            return Scripted::Reply(
                r#"{"reasoning": "chunk one", "answer": "The garden."}"#.into(),
            );
        }
        assert!(
            p.starts_with("Can this question"),
            "unexpected request: {p}"
        );
        Scripted::Reply("No".into())
    }));
    let svc = Service::new(llm.clone(), None, policy());
    let t = g
        .ask(
            &svc,
            &Prompts::load().unwrap(),
            &Axes,
            Window::new(4096, 512),
            "Where?",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(visits(&t), vec![0, 1]);
    assert_eq!(t.answer, "The garden.");
    assert!(!t.answered, "no Yes was given");
    let received = llm.received();
    assert_eq!(received.len(), 4, "three checks and one answer");
    assert_eq!(received[3].messages.len(), 1);
    let last = t.steps.last().unwrap();
    assert!(last.note.contains("shared answer prompt"), "{}", last.note);
}
