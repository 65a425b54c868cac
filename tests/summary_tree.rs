//! Summary trees with a scripted LLM: summaries only for new spans on append, prior context,
//! cut refinement replacing exactly the named entry, and the stopping rules.

use std::sync::Arc;

use qrmem::answer::Window;
use qrmem::llm::{ChatRequest, Policy, Scripted, ScriptedLlm, Service};
use qrmem::methods::summary_tree::{self, SummaryTree, TreeParams};
use qrmem::prompts::Prompts;

fn prompt(r: &ChatRequest) -> String {
    r.messages.last().unwrap().content.clone()
}

/// Summaries name the parts they cover ("S[...]"), so prior context can be checked.
fn summarise(r: &ChatRequest) -> Scripted {
    let p = prompt(r);
    let entries = p.split("Here are the specific parts").nth(1).unwrap_or("");
    let mut names: Vec<String> = entries
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.starts_with('P') && w.len() > 1 && w[1..].chars().all(|c| c.is_ascii_digit()))
        .map(str::to_string)
        .collect();
    names.dedup();
    Scripted::Reply(format!("S[{}]", names.join(" ")))
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

/// A document of `n` paragraphs "P<i>. ...", each its own leaf at 20-token leaves.
fn doc(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| {
            format!(
                "P{i}. Paragraph number {i} tells of the stone bridge at Velden and its river.\n\n"
            )
        })
        .collect()
}

fn params() -> TreeParams {
    TreeParams {
        leaf_tokens: 20,
        prior_context_tokens: 200,
        max_refinements: 6,
    }
}

#[tokio::test]
async fn appending_summarises_only_the_new_spans_with_prior_context() {
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(summarise));
    let svc = Service::new(llm.clone(), None, policy());
    let prompts = Prompts::load().unwrap();
    let window = Window::new(4096, 512);
    let mut tree = SummaryTree::new(params(), "scripted");
    let n = tree
        .append(&svc, &prompts, window, &doc(0, 4), "a")
        .await
        .unwrap();
    assert_eq!(tree.leaves.len(), 4, "{:?}", tree.leaves);
    assert_eq!(n, 3);
    assert_eq!(
        tree.text(summary_tree::Span { start: 0, len: 4 }),
        "S[P0 P1 P2 P3]"
    );
    let sums_before = tree.summaries.clone();
    // One more leaf: only the new root [0,5) is written; [0,4) and below are kept as they were.
    let n = tree
        .append(&svc, &prompts, window, &doc(4, 1), "b")
        .await
        .unwrap();
    assert_eq!(n, 1);
    for (k, v) in &sums_before {
        assert_eq!(tree.summaries.get(k), Some(v), "{k} was re-summarised");
    }
    assert_eq!(llm.received().len(), 4);
    // Three more: n = 8 needs [4,2], [6,2], [4,4] and the root [0,8); [0,4) stays.
    let n = tree
        .append(&svc, &prompts, window, &doc(5, 3), "c")
        .await
        .unwrap();
    assert_eq!(n, 4);
    assert_eq!(
        tree.summaries.len(),
        7 + 1,
        "7 internal nodes of 8 leaves + the old root [0,5)"
    );
    // The summary of [4,2] had the top-level summary of [0,4) as prior context.
    let p = llm
        .received()
        .iter()
        .map(prompt)
        .find(|p| p.contains("P4.") && p.contains("P5.") && !p.contains("P6."))
        .unwrap();
    let prior = p.split("Here are the specific parts").next().unwrap();
    assert!(prior.contains("S[P0 P1 P2 P3]"), "{prior}");
    // Saved and loaded unchanged; a foreign file is refused.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.qst");
    summary_tree::save(&tree, &path).unwrap();
    let back = summary_tree::load(&path).unwrap();
    assert_eq!(back.summaries, tree.summaries);
    std::fs::write(&path, "{\"nodes\": []}").unwrap();
    let err = summary_tree::load(&path).unwrap_err().to_string();
    assert!(err.contains("not a summary tree"), "{err}");
    // A tree of another version is refused, naming both versions.
    let mut old = serde_json::to_value(&tree).unwrap();
    old["version"] = serde_json::json!(1);
    std::fs::write(&path, old.to_string()).unwrap();
    let err = summary_tree::load(&path).unwrap_err().to_string();
    assert!(
        err.contains("version 1") && err.contains(&format!("version {}", summary_tree::VERSION)),
        "{err}"
    );
}

async fn tree_of(n: usize) -> SummaryTree {
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(summarise));
    tree_by(llm, n).await.1
}

/// A tree of `n` leaves built by `llm`, with the service that built it (for its ledger).
async fn tree_by(llm: Arc<ScriptedLlm>, n: usize) -> (Service, SummaryTree) {
    let svc = Service::new(llm, None, policy());
    let mut tree = SummaryTree::new(params(), "scripted");
    tree.append(
        &svc,
        &Prompts::load().unwrap(),
        Window::new(4096, 512),
        &doc(0, n),
        "d",
    )
    .await
    .unwrap();
    (svc, tree)
}

#[tokio::test]
async fn a_cut_refines_exactly_the_named_entry_then_answers_from_it() {
    let tree = tree_of(5).await;
    // Cut: [0,5) -> refine 1 -> [0,4) [4,1] -> refine 1 -> [0,2) [2,2) [4] -> "3" names the
    // ineligible leaf, so the first eligible number that follows ("2") is taken -> [0,2) [2] [3] [4].
    let replies = vec![
        Scripted::Reply("I need the details. INSUFFICIENT DETAIL 1".into()),
        Scripted::Reply("INSUFFICIENT DETAIL 1".into()),
        Scripted::Reply("INSUFFICIENT DETAIL 3, or maybe INSUFFICIENT DETAIL 2".into()),
        Scripted::Reply("Enough. No more detail needed.".into()),
        Scripted::Reply(r#"{"reasoning": "P3 says so.", "answer": "the river"}"#.into()),
    ];
    let llm = Arc::new(ScriptedLlm::new(replies));
    let svc = Service::new(llm.clone(), None, policy());
    let t = tree
        .ask(
            &svc,
            &Prompts::load().unwrap(),
            Window::new(4096, 512),
            "What does P3 tell of?",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(t.answer, "the river");
    let notes: Vec<&str> = t.steps.iter().map(|s| s.note.as_str()).collect();
    assert_eq!(notes[0], "INSUFFICIENT DETAIL 1: span 0+5 -> 0+4 + 4+1");
    assert_eq!(notes[1], "INSUFFICIENT DETAIL 1: span 0+4 -> 0+2 + 2+2");
    assert_eq!(notes[2], "INSUFFICIENT DETAIL 2: span 2+2 -> 2+1 + 3+1");
    assert!(notes[3].contains("names no eligible entry"), "{notes:?}");
    assert_eq!(notes[4], "final cut: 0+2, 2+1, 3+1, 4+1");
    assert_eq!(t.segments_used, vec![2, 3, 4]);
    // Spans: the final cut's verbatim leaves 2..5 (one merged range), not the summary [0,2).
    let d = doc(0, 5);
    assert_eq!(t.answer_spans.len(), 1, "{:?}", t.answer_spans);
    let (a, b) = t.answer_spans[0];
    assert!(d[a..b].starts_with("P2. ") && d[a..b].ends_with("its river.\n\n"));
    assert_eq!(&d[a..b], tree.leaves[2..5].concat());
    assert_eq!(t.read_spans, t.answer_spans);
    // The cut prompt marked the leaf ineligible, and the answer saw the leaves' own text.
    let received = llm.received();
    assert!(
        prompt(&received[2]).contains("3. INELIGIBLE DOCUMENT\nP4."),
        "{}",
        prompt(&received[2])
    );
    assert!(prompt(&received[4]).contains("P3. Paragraph number 3"));
    assert_eq!(t.requests, 5);
}

#[tokio::test]
async fn refinements_stop_at_the_cap_and_at_the_window() {
    let tree = tree_of(8).await;
    let mut p = params();
    p.max_refinements = 2;
    let mut capped = tree.clone();
    capped.params = p;
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(|r| {
        if prompt(r).contains("INSUFFICIENT DETAIL <NUMBER>") {
            Scripted::Reply("INSUFFICIENT DETAIL 1".into())
        } else {
            Scripted::Reply(r#"{"reasoning": "r", "answer": "a"}"#.into())
        }
    }));
    let svc = Service::new(llm.clone(), None, policy());
    let prompts = Prompts::load().unwrap();
    let t = capped
        .ask(&svc, &prompts, Window::new(4096, 512), "Q?", &[])
        .await
        .unwrap();
    assert_eq!(t.steps.iter().filter(|s| s.kind == "cut").count(), 2);
    assert_eq!(llm.received().len(), 3, "2 cut prompts + the answer");
    // A window too small for the children: the cut stands at the root.
    let overhead = qrmem::text::count_tokens(
        &prompts
            .render(
                qrmem::prompts::PromptId::TreeCut,
                &[("question", "Q?"), ("entries", "")],
            )
            .unwrap(),
    );
    let small = tree
        .ask(
            &svc,
            &prompts,
            Window::new(512 + overhead + 12, 512),
            "Q?",
            &[],
        )
        .await
        .unwrap();
    assert!(
        small.steps[0].note.contains("over the window"),
        "{:?}",
        small.steps
    );
    assert_eq!(small.steps.len(), 2, "the refusal, then the answer");
}

/// The prior context of a summary prompt (between the first pair of triple quotes).
fn prior_of(p: &str) -> String {
    p.split("\"\"\"").nth(1).unwrap_or("").trim().to_string()
}

#[tokio::test]
async fn a_summary_that_repeats_the_prior_context_is_asked_again_without_it() {
    // A model that copies the prior context whenever there is one (what qwen2.5 0.5B did on
    // LongBench-style contexts: every node of the tree held the first summary's text).
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(|r| {
        let prior = prior_of(&prompt(r));
        if prior.is_empty() {
            summarise(r)
        } else {
            Scripted::Reply(prior)
        }
    }));
    let (svc, tree) = tree_by(llm.clone(), 4).await;
    // [2,2) had [0,2)'s summary as prior context, was copied, and was asked again without it.
    assert_eq!(
        tree.text(summary_tree::Span { start: 2, len: 2 }),
        "S[P2 P3]"
    );
    assert_eq!(
        tree.text(summary_tree::Span { start: 0, len: 4 }),
        "S[P0 P1 P2 P3]"
    );
    let prompts: Vec<String> = llm.received().iter().map(prompt).collect();
    assert_eq!(prompts.len(), 4, "[0,2), [2,2) twice, [0,4)");
    assert_eq!(prior_of(&prompts[1]), "S[P0 P1]");
    assert_eq!(prior_of(&prompts[2]), "");
    assert_eq!(tree.failures.len(), 1, "{:?}", tree.failures);
    assert!(
        tree.failures[0].error.contains("span 2+2")
            && tree.failures[0].error.contains("repeats the prior context"),
        "{:?}",
        tree.failures
    );
    assert_eq!(svc.ledger().snapshot().total().failed_steps, 1);

    // A summary that ties back to the prior context in a few words is kept as it is.
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(|r| {
        let p = prompt(r);
        let prior = prior_of(&p);
        match summarise(r) {
            Scripted::Reply(s) if !prior.is_empty() => {
                Scripted::Reply(format!("{s}, after {prior}"))
            }
            other => other,
        }
    }));
    let (_, tree) = tree_by(llm.clone(), 4).await;
    assert!(tree.failures.is_empty(), "{:?}", tree.failures);
    assert_eq!(llm.received().len(), 3);
    assert_eq!(
        tree.text(summary_tree::Span { start: 2, len: 2 }),
        "S[P2 P3], after S[P0 P1]"
    );
}

#[tokio::test]
async fn a_summary_that_repeats_one_part_gives_way_to_the_childrens_text() {
    // A model that, given two summaries, returns the first (what qwen2.5 0.5B did on QuALITY:
    // with no prior context to copy, the parent of [0,2) and [2,2) repeated [0,2), and so on up to
    // the root, so the tree's top said nothing of the later parts).
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(|r| {
        let p = prompt(r);
        let entries = p.split("Here are the specific parts").nth(1).unwrap_or("");
        match entries.split("Part 1:\n").nth(1) {
            Some(first) if first.starts_with("S[") => {
                Scripted::Reply(first.split("\n\nPart 2:").next().unwrap().to_string())
            }
            _ => summarise(r),
        }
    }));
    let (svc, tree) = tree_by(llm.clone(), 4).await;
    let root = tree.text(summary_tree::Span { start: 0, len: 4 });
    assert!(
        root.contains("S[P0 P1]") && root.contains("S[P2 P3]"),
        "the root keeps both parts: {root}"
    );
    assert_eq!(llm.received().len(), 3, "no request is added");
    assert_eq!(tree.failures.len(), 1, "{:?}", tree.failures);
    assert!(
        tree.failures[0].error.contains("span 0+4")
            && tree.failures[0].error.contains("repeats part 1"),
        "{:?}",
        tree.failures
    );
    assert_eq!(svc.ledger().snapshot().total().failed_steps, 1);
}
