//! Navigation with a scripted LLM and a deterministic bag-of-words embedder over a small
//! hand-built memory: Algorithm 1 step by step, the window, GES and TE stopping rules.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use petgraph::stable_graph::StableDiGraph;
use qrmem::answer::{Trace, Window};
use qrmem::config::{
    AnswerConfig as Answer, FinalContext, NavMethod as Method, NavigateConfig as Options, Order,
};
use qrmem::llm::{ChatRequest, LedgerSnapshot, Scripted, ScriptedLlm, Service};
use qrmem::memory::{BuildParams, BuildStats, Entity, Memory, Relation, Source, FORMAT, VERSION};
use qrmem::navigate::Navigator;
use qrmem::prompts::Prompts;
use qrmem::text::{count_tokens, Segment};

mod common;
use common::bow::Bow;

fn entity(name: &str, segments: &[usize]) -> Entity {
    Entity {
        name: name.into(),
        kind: "other".into(),
        mentions: [name.to_string()].into_iter().collect(),
        segments: segments.iter().copied().collect(),
        sources: [Source::Llm].into_iter().collect(),
        generic: false,
    }
}

/// Segments 0..=4 of `filler` words each; Alpha -(founded)- Beta -(..)- Delta; Alpha -(bananas)- Gamma.
fn memory(filler: usize) -> Memory {
    let texts = [
        "Alpha is a person in the story.",
        "Beta is the company that Alpha founded in the harbour town.",
        "Gamma is a fruit stall where Alpha likes bananas.",
        "Delta is the city where Beta has its headquarters.",
        "Epsilon is unrelated.",
    ];
    let mut segments = Vec::new();
    let mut pos = 0;
    for (i, t) in texts.iter().enumerate() {
        let text = format!("{t} {}\n", "word ".repeat(filler));
        let tokens = count_tokens(&text);
        segments.push(Segment {
            index: i,
            start: pos,
            end: pos + text.len(),
            text,
            tokens,
        });
        pos = segments[i].end;
    }
    let mut g: StableDiGraph<Entity, Relation> = StableDiGraph::new();
    let a = g.add_node(entity("Alpha", &[0, 1, 2]));
    let b = g.add_node(entity("Beta", &[1, 3]));
    let c = g.add_node(entity("Gamma", &[2]));
    let d = g.add_node(entity("Delta", &[3]));
    let rel = |d: &str, s: usize| Relation {
        description: d.into(),
        segments: [s].into_iter().collect(),
        merged_from: 1,
        helper_questions: vec![],
    };
    g.add_edge(a, b, rel("Alpha founded the company Beta", 1));
    g.add_edge(a, c, rel("Alpha likes bananas from Gamma", 2));
    g.add_edge(b, d, rel("Beta has its headquarters in Delta", 3));
    // Alpha's own segments are {0}: the others come from navigation.
    g[a].segments = [0].into_iter().collect();
    Memory {
        format: FORMAT.into(),
        version: VERSION,
        params: BuildParams {
            segment_tokens: 600,
            question_rouge_threshold: 0.6,
            entity_similarity: 0.92,
            graph_update: true,
            open_entity: true,
            max_relation_updates: 10,
            summary_input_tokens: 3000,
            extraction_max_tokens: 2048,
            extraction_frequency_penalty: 0.5,
            cooccurrence: false,
            extraction_cut_repeats: 0,
            extraction_format: Default::default(),
            extraction_max_entities: qrmem::config::FORMER_EXTRACTION_MAX_ENTITIES,
        },
        model: "scripted".into(),
        question: None,
        document_sha256: String::new(),
        document_chars: pos,
        summary: String::new(),
        segments,
        graph: g,
        questions: vec![],
        failures: vec![],
        stats: BuildStats::default(),
        ledger: LedgerSnapshot::default(),
        build_secs: 0.0,
        vectors: None,
        kind: None,
    }
}

const QUESTION: &str = "Where does the company that Alpha founded have its headquarters?";

fn prompt_of(r: &ChatRequest) -> String {
    r.messages.last().unwrap().content.clone()
}

/// A responder: answerability replies come from `checks` in order (then -1 forever).
fn responder(checks: Vec<&'static str>) -> impl Fn(&ChatRequest) -> Scripted + Send + Sync {
    let checks = Mutex::new(
        checks
            .into_iter()
            .collect::<std::collections::VecDeque<_>>(),
    );
    move |r: &ChatRequest| {
        let p = prompt_of(r);
        let reply = if p.contains("Extract the key entities named in the question") {
            r#"{"entities": ["Alpha"]}"#.to_string()
        } else if p.contains("If the answer CANNOT be inferred") {
            checks
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(r#"{"reasoning": "The company's headquarters are not mentioned.", "verdict_action": -1, "verdict_answer": ""}"#)
                .to_string()
        } else if p.contains("Write one elaborated search query") {
            r#"{"query": "headquarters of Beta, the company Alpha founded"}"#.to_string()
        } else if p.contains("name the entities") {
            r#"{"entities": ["Alpha", "Beta"]}"#.to_string()
        } else if p.contains("give your best guess") {
            r#"{"reasoning": "From the text.", "answer": "Delta"}"#.to_string()
        } else {
            return Scripted::Fail(format!("unexpected prompt {}", &p[..p.len().min(60)]));
        };
        Scripted::Reply(reply)
    }
}

fn options(method: Method, window: usize, max_trials: usize) -> Options {
    Options {
        method,
        context_window: window,
        reply_tokens: 256,
        max_trials,
        ges_threshold: 0.3,
        ges_max_iterations: 3,
        reflection: true,
        navigation: true,
        start_share: 0.5,
        rank_weights: qrmem::config::NavigateConfig::default().rank_weights,
        check_threshold: 0.0,
        start_bridge: false,
        start_hop: false,
        start_own: false,
        passage_tokens: 0,
        context_tokens: 0,
    }
}

async fn ask(m: &Memory, opts: Options, checks: Vec<&'static str>) -> (Trace, Arc<ScriptedLlm>) {
    ask_answering(m, opts, Answer::default(), checks).await
}

/// `ask` with the final answer step's settings `answer` (`[answer]`).
async fn ask_answering(
    m: &Memory,
    opts: Options,
    answer: Answer,
    checks: Vec<&'static str>,
) -> (Trace, Arc<ScriptedLlm>) {
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(responder(checks)));
    (ask_with(m, opts, answer, llm.clone()).await, llm)
}

const CANNOT: &str = r#"{"reasoning": "The text does not say which company Alpha founded or where it is.", "verdict_action": -1, "verdict_answer": ""}"#;
const CANNOT_HQ: &str = r#"{"reasoning": "The headquarters of Beta are not in the text.", "verdict_action": -1, "verdict_answer": ""}"#;
const CAN: &str =
    r#"{"reasoning": "Beta is in Delta.", "verdict_action": -2, "verdict_answer": "Delta"}"#;

#[tokio::test]
async fn kn_follows_algorithm_1_and_stops_on_action_minus_2() {
    let m = memory(5);
    let (t, llm) = ask(
        &m,
        options(Method::Kn, 4096, 4),
        vec![CANNOT, CANNOT_HQ, CAN],
    )
    .await;
    let kinds: Vec<&str> = t.steps.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(
        kinds,
        vec![
            "start",
            "answerability",
            "expand",
            "answerability",
            "expand_idle",
            "expand",
            "answerability"
        ]
    );
    assert_eq!(t.start_entities, vec!["Alpha"]);
    // Trial 1: of Alpha's edges, "founded the company" matches [Q; R; E] better than bananas.
    let e1 = &t.steps[2];
    assert!(
        e1.chosen[0].text.contains("Alpha founded the company Beta"),
        "{:?}",
        e1.candidates
    );
    assert_eq!(e1.candidates.len(), 2);
    assert_eq!(
        e1.s_add.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        vec![1, 3],
        "Beta's segments not in S_mix"
    );
    assert_eq!(t.steps[3].segments, vec![0, 1, 3]);
    // Then from {Alpha, Beta}, the remaining adjacent edges are bananas (Gamma) and
    // headquarters (Delta); the reflection R (Beta's headquarters) selects Delta, whose
    // segment 3 is already in S_mix: nothing new is shown, so no trial is spent on it, and
    // trial 2 takes the next neighbour, Gamma.
    let e2 = &t.steps[4];
    assert!(
        e2.chosen[0].text.contains("headquarters in Delta"),
        "{:?}",
        e2.candidates
    );
    assert!(e2.note.contains("no trial spent"), "{}", e2.note);
    assert!(
        t.steps[5].note.starts_with("trial 2:"),
        "{}",
        t.steps[5].note
    );
    assert_eq!(t.steps[6].segments, vec![0, 1, 2, 3]);
    let d = t.diagnostics();
    assert_eq!(
        (d.expansions, d.expansions_changed, d.idle_picks),
        (2, 2, 1),
        "every trial spent changed the shown set"
    );
    assert_eq!((d.s_imp, d.s_imp_kept), (Some(1), Some(1)));
    assert!(t.answered);
    assert_eq!(t.answer, "Delta");
    assert_eq!(
        llm.received().len(),
        1 + 3,
        "question entities + three checks, no final answer call"
    );
    assert_eq!(t.requests, 4);
}

#[tokio::test]
async fn kn_respects_max_trials_then_answers_from_the_final_mix() {
    let m = memory(5);
    let (t, llm) = ask(&m, options(Method::Kn, 4096, 2), vec![]).await;
    let checks = t.steps.iter().filter(|s| s.kind == "answerability").count();
    let expands = t.steps.iter().filter(|s| s.kind == "expand").count();
    assert_eq!(
        (checks, expands),
        (3, 2),
        "max_trials + 1 checks, max_trials expansions"
    );
    assert_eq!(t.steps.last().unwrap().kind, "answer");
    assert!(!t.answered);
    assert_eq!(t.answer, "Delta");
    assert_eq!(llm.received().len(), 1 + 3 + 1);
}

#[tokio::test]
async fn kn_window_keeps_the_best_scored_added_segments() {
    // Segments of ~300 tokens; a window that fits the prompt and two of them.
    let m = memory(300);
    let seg = m.segments[1].tokens;
    let overhead = answerability_overhead();
    let window = overhead + 256 + 16 + 2 * (seg + 1) + 20;
    let (t, _) = ask(&m, options(Method::Kn, window, 2), vec![]).await;
    for s in &t.steps {
        assert!(s.segments.len() <= 2, "{:?}", s.segments);
    }
    // Trial 1 adds Beta's segments 1 and 3 with one score; only one fits beside S_imp: segment
    // 1, which the chosen relation ("Alpha founded the company Beta") was extracted from.
    let e1 = t.steps.iter().find(|s| s.kind == "expand").unwrap();
    assert_eq!(e1.s_add.len(), 1, "{:?}", e1.s_add);
    assert_eq!(e1.s_add[0].0, 1, "{:?}", e1.s_add);
    assert!(e1.note.contains("window dropped"), "{}", e1.note);
    // S_imp (segment 0) is always kept.
    assert!(t
        .steps
        .iter()
        .filter(|s| s.kind == "answerability")
        .all(|s| s.segments.contains(&0)));
    // With the relation stated in segment 3 instead, segment 3 is kept, not the earlier 1: a
    // neighbour's segments are ordered by the chosen relation, not by document order.
    let mut m3 = memory(300);
    let founded = m3
        .graph
        .edge_indices()
        .find(|&e| m3.graph[e].description.contains("founded"))
        .unwrap();
    m3.graph[founded].segments = [3].into_iter().collect();
    let (t, _) = ask(&m3, options(Method::Kn, window, 2), vec![]).await;
    let e1 = t.steps.iter().find(|s| s.kind == "expand").unwrap();
    assert_eq!(
        e1.s_add.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        vec![3],
        "{}",
        e1.note
    );
}

#[tokio::test]
async fn no_navigation_answers_from_s_imp() {
    let m = memory(5);
    let mut o = options(Method::Kn, 4096, 4);
    o.navigation = false;
    let (t, llm) = ask(&m, o, vec![]).await;
    assert_eq!(t.steps.iter().filter(|s| s.kind == "expand").count(), 0);
    assert_eq!(t.final_segments, vec![0]);
    assert_eq!(llm.received().len(), 3);
}

#[tokio::test]
async fn ges_stops_when_no_edge_passes_the_threshold() {
    let m = memory(5);
    let mut o = options(Method::Ges, 4096, 4);
    o.ges_threshold = 0.99;
    let (t, llm) = ask(&m, o, vec![]).await;
    let kinds: Vec<&str> = t.steps.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(kinds, vec!["start", "ges_expand", "elaborate", "answer"]);
    assert!(t.steps[1].chosen.is_empty() && t.steps[1].candidates.len() == 2);
    assert_eq!(t.steps[1].entities, vec!["Alpha"]);
    assert_eq!(llm.received().len(), 3, "entities, elaborate, answer");
    // A low threshold expands until nothing new is adjacent.
    let mut o = options(Method::Ges, 4096, 4);
    o.ges_threshold = -1.0;
    let (t, _) = ask(&m, o, vec![]).await;
    let expands: Vec<_> = t.steps.iter().filter(|s| s.kind == "ges_expand").collect();
    // Iteration 1 reaches Beta and Gamma, 2 reaches Delta (through Beta), 3 finds nothing new.
    assert_eq!(expands.len(), 3);
    assert_eq!(expands[0].entities, vec!["Alpha", "Beta", "Gamma"]);
    assert_eq!(expands[1].entities, vec!["Alpha", "Beta", "Gamma", "Delta"]);
    assert_eq!(expands[2].note, "no adjacent entities left");
}

#[tokio::test]
async fn te_updates_entities_and_stops_at_the_window_limit() {
    let m = memory(5);
    let (t, _) = ask(&m, options(Method::Te, 4096, 4), vec![CANNOT, CAN]).await;
    let kinds: Vec<&str> = t.steps.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(
        kinds,
        vec!["start", "answerability", "te_update", "answerability"]
    );
    assert_eq!(
        t.steps[3].segments,
        vec![0, 1, 3],
        "Alpha's and Beta's segments"
    );
    assert!(t.answered);

    // Window for one 300-token segment: Alpha + Beta's segments do not fit -> stop, answer.
    let m = memory(300);
    let overhead = answerability_overhead();
    let window = overhead + 256 + 16 + m.segments[0].tokens + 30;
    let (t, llm) = ask(&m, options(Method::Te, window, 4), vec![]).await;
    let kinds: Vec<&str> = t.steps.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(
        kinds,
        vec![
            "start",
            "answerability",
            "te_update",
            "answerability",
            "answer"
        ]
    );
    assert!(
        t.steps[3].note.contains("window full"),
        "{}",
        t.steps[3].note
    );
    let te_calls = llm
        .received()
        .iter()
        .filter(|r| prompt_of(r).contains("name the entities"))
        .count();
    assert_eq!(te_calls, 1);
    let used: BTreeSet<usize> = t.segments_used.iter().copied().collect();
    assert!(used.contains(&0));
}

#[tokio::test]
async fn kn_falls_back_on_co_occurring_entities_when_no_relation_edge_leaves_e() {
    let mut m = memory(5);
    m.graph.clear_edges();
    let beta = m.find_entity("Beta").unwrap();
    m.graph[beta].segments.insert(0);
    let (t, _) = ask(&m, options(Method::Kn, 4096, 4), vec![CANNOT, CAN]).await;
    let e = t.steps.iter().find(|s| s.kind == "expand").unwrap();
    assert!(e.note.contains("co-occurring Beta"), "{}", e.note);
    assert_eq!(
        t.steps
            .iter()
            .rfind(|s| s.kind == "answerability")
            .unwrap()
            .segments,
        vec![0, 1, 3]
    );
    assert!(t.answered);
}

async fn baseline(m: &Memory, name: &str, window: usize) -> (Trace, Arc<ScriptedLlm>) {
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(responder(vec![])));
    let svc = Service::new(llm.clone(), None, common::velden::policy());
    let prompts = Prompts::load().unwrap();
    let ctx = qrmem::methods::Ctx {
        llm: &svc,
        prompts: &prompts,
        embedder: &Bow,
        window: qrmem::answer::Window::new(window, 256),
        answer: Default::default(),
        gold: None,
        chain: &[],
    };
    let t = qrmem::methods::answer(name.parse().unwrap(), &ctx, m, QUESTION, &[])
        .await
        .unwrap();
    (t, llm)
}

#[tokio::test]
async fn baselines_share_the_answer_prompt_and_the_window() {
    let m = memory(5);
    let (t, llm) = baseline(&m, "bm25-top1", 4096).await;
    assert_eq!(t.method, "bm25-top1");
    // "company that Alpha founded" (4 shared terms) outranks "where ... its headquarters" (3).
    assert_eq!(t.final_segments, vec![1]);
    assert_eq!((t.requests, t.answer.as_str()), (1, "Delta"));
    let p = prompt_of(&llm.received()[0]);
    assert!(p.contains("Alpha founded in the harbour") && !p.contains("Epsilon is unrelated"));
    let (t, _) = baseline(&m, "bm25-top2", 4096).await;
    assert_eq!(
        t.final_segments,
        vec![1, 3],
        "the top two, in document order"
    );

    let (t, _) = baseline(&m, "contriever-top2", 4096).await;
    assert_eq!(t.final_segments.len(), 2);

    let (t, llm) = baseline(&m, "full", 4096).await;
    assert_eq!(t.final_segments, vec![0, 1, 2, 3, 4]);
    assert!(prompt_of(&llm.received()[0]).contains("Epsilon is unrelated"));

    // The shared answer prompt: every baseline's prompt, and KN's final answer, is
    // prompts/answer.txt around its segments and the question.
    let prompts = Prompts::load().unwrap();
    let template = prompts
        .render(
            qrmem::prompts::PromptId::Answer,
            &[("segments", "\u{0}"), ("question", QUESTION)],
        )
        .unwrap();
    let (head, tail) = template.split_once('\u{0}').unwrap();
    let shares = |p: &str| p.starts_with(head) && p.ends_with(tail);
    for b in [
        "bm25-top1",
        "contriever-top2",
        "vanilla-left",
        "vanilla-right",
        "full",
    ] {
        let (_, llm) = baseline(&m, b, 4096).await;
        let p = prompt_of(&llm.received()[0]);
        assert!(shares(&p), "{b} does not use the answer prompt:\n{p}");
    }
    let (t, llm) = ask(&m, options(Method::Kn, 4096, 1), vec![CANNOT, CANNOT]).await;
    assert_eq!(t.steps.last().unwrap().kind, "answer");
    let last = prompt_of(llm.received().last().unwrap());
    assert!(shares(&last), "KN's final answer prompt:\n{last}");

    // Truncation: with 300-word segments only about one fits; left keeps the start, right the end.
    let m = memory(300);
    let prompts = Prompts::load().unwrap();
    let overhead = count_tokens(
        &prompts
            .render(
                qrmem::prompts::PromptId::Answer,
                &[("segments", ""), ("question", QUESTION)],
            )
            .unwrap(),
    );
    let window = overhead + 256 + 16 + m.segments[0].tokens;
    let (_, llm) = baseline(&m, "vanilla-left", window).await;
    let p = prompt_of(&llm.received()[0]);
    assert!(p.contains("Alpha is a person") && !p.contains("Epsilon is unrelated"));
    assert!(count_tokens(&p) + 256 <= window);
    let (_, llm) = baseline(&m, "vanilla-right", window).await;
    let p = prompt_of(&llm.received()[0]);
    assert!(!p.contains("Alpha is a person") && p.contains("Epsilon is unrelated"));
    assert!(count_tokens(&p) + 256 <= window);
}

/// The paper's -2 with the prompt's own description as its answer (in the keys of the prompt's
/// first wording, "action" and "answer", which are still read).
const ECHO: &str = r#"{"reasoning": "Not sure.", "action": -2, "answer": "the final answer, or an empty string for -1"}"#;

#[tokio::test]
async fn an_unparsable_check_and_an_echoed_template_count_as_minus_1_and_navigation_goes_on() {
    let m = memory(5);
    // The first check never parses (its try and all 4 retries of velden's policy); the second
    // says -2 but answers with the template's placeholder.
    let bad = vec!["no JSON"; 5];
    let checks: Vec<&'static str> = bad.into_iter().chain([ECHO]).collect();
    let (t, _) = ask(&m, options(Method::Kn, 4096, 2), checks).await;
    let checks: Vec<_> = t
        .steps
        .iter()
        .filter(|s| s.kind == "answerability")
        .collect();
    assert!(checks.len() >= 2, "{:?}", t.steps);
    assert_eq!(
        (checks[0].action, checks[0].note.as_str()),
        (Some(-1), "check failed")
    );
    assert!(
        t.failures.iter().any(|f| f.starts_with("answerability")),
        "{:?}",
        t.failures
    );
    assert_eq!(checks[1].action, Some(-1));
    assert!(checks[1].note.contains("placeholder"), "{}", checks[1].note);
    // Navigation went on: it expanded, and answered from the final S_mix.
    assert!(!t.answered);
    assert!(t.steps.iter().any(|s| s.kind == "expand"));
    assert_eq!(t.steps.last().unwrap().kind, "answer");
    assert_eq!(t.answer, "Delta");
    let d = t.diagnostics();
    assert_eq!(d.checks.iter().filter(|c| c.failed).count(), 1);
}

#[tokio::test]
async fn a_final_answer_that_never_parses_fails_the_question() {
    let m = memory(5);
    let inner = responder(vec![]);
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(move |r| {
        if prompt_of(r).contains("give your best guess") {
            Scripted::Reply("I think it is Delta.".into())
        } else {
            inner(r)
        }
    }));
    let svc = Service::new(llm, None, common::velden::policy());
    let prompts = Prompts::load().unwrap();
    let err = Navigator::new(
        &svc,
        &prompts,
        &Bow,
        &m,
        options(Method::Kn, 4096, 1),
        Window::new(4096, 256),
    )
    .ask(QUESTION, &[])
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("'answer' failed"), "{err}");
}

/// The answerability prompt's tokens around its segments, for QUESTION.
fn answerability_overhead() -> usize {
    let prompts = Prompts::load().unwrap();
    count_tokens(
        &prompts
            .render(
                qrmem::prompts::PromptId::Answerability,
                &[("segments", ""), ("question", QUESTION)],
            )
            .unwrap(),
    )
}

/// A window that fits the answerability prompt and `n` segments of `m`'s length plus `slack`.
fn window_for(m: &Memory, n: usize, slack: usize) -> usize {
    answerability_overhead() + 256 + 16 + n * (m.segments[1].tokens + 1) + slack
}

#[tokio::test]
async fn an_s_imp_larger_than_the_window_is_ranked_and_cut_and_an_expansion_reaches_the_answer() {
    // Alpha is named in every segment: S_imp is all five, and the window holds three.
    let mut m = memory(300);
    let alpha = m.find_entity("Alpha").unwrap();
    m.graph[alpha].segments = (0..5).collect();
    let window = window_for(&m, 3, 10);
    let paper = options(Method::Kn, window, 1);
    let s_mix = Answer {
        final_context: FinalContext::SMix,
        ..Answer::default()
    };
    let (t, llm) = ask_answering(&m, paper.clone(), s_mix, vec![]).await;
    let d = t.diagnostics();
    // Ranked for the question ("the company that Alpha founded" is segment 1), and cut to half
    // of the window's room: one segment, not the first five in document order.
    assert_eq!((d.s_imp, d.s_imp_kept), (Some(5), Some(1)));
    assert_eq!(d.checks[0].segments, vec![1]);
    assert!(t.steps[0].note.contains("kept [1]"), "{}", t.steps[0].note);
    // The note shows each signal's own order (BM25 puts segment 1 first; Alpha is in all five,
    // so the entity weight ties them).
    assert!(
        t.steps[0].note.contains("by BM25 [1,") && t.steps[0].note.contains("by entity weight ["),
        "{}",
        t.steps[0].note
    );
    // The one trial follows "Alpha founded the company Beta" and adds Beta's segment 3, which
    // the answer prompt (the last S_mix) shows: the headquarters are in Delta.
    assert_eq!(t.steps.last().unwrap().kind, "answer");
    assert_eq!(t.final_segments, vec![1, 3]);
    let answer_prompt = prompt_of(llm.received().last().unwrap());
    assert!(answer_prompt.contains("Delta is the city where Beta has its headquarters"));
    assert!(!answer_prompt.contains("Alpha is a person"));
    assert_eq!((d.expansions, d.expansions_changed), (1, 1));

    // The relevance order puts S_imp's best segment first in the answer prompt; the default
    // (the paper's document order) does not change which segments are shown.
    let relevance = Answer {
        order: Order::Relevance,
        ..s_mix
    };
    let m2 = {
        let mut m2 = m.clone();
        // Beta's segment 0 comes before S_imp's segment 1 in the document.
        let beta = m2.find_entity("Beta").unwrap();
        m2.graph[beta].segments = [0, 1].into_iter().collect();
        m2
    };
    let (t2, llm2) = ask_answering(&m2, paper, relevance, vec![]).await;
    assert_eq!(t2.final_segments, vec![0, 1]);
    let p = prompt_of(llm2.received().last().unwrap());
    let (at_company, at_person) = (
        p.find("Beta is the company").unwrap(),
        p.find("Alpha is a person").unwrap(),
    );
    assert!(at_company < at_person, "S_imp's segment 1 first");
}

#[tokio::test]
async fn the_filled_final_context_keeps_the_last_s_mix_and_fills_the_room_it_leaves() {
    // As above: S_imp is cut to segment 1, the trial adds Beta's segment 3, and the last S_mix
    // [1, 3] leaves room for one more segment, which the start's order gives (the next of
    // S_imp's ranking): the answer shows three segments, the last S_mix among them.
    let mut m = memory(300);
    let alpha = m.find_entity("Alpha").unwrap();
    m.graph[alpha].segments = (0..5).collect();
    let window = window_for(&m, 3, 10);
    let filled = Answer {
        final_context: FinalContext::SMixFilled,
        ..Answer::default()
    };
    let (t, llm) = ask_answering(&m, options(Method::Kn, window, 1), filled, vec![]).await;
    let d = t.diagnostics();
    assert_eq!(d.checks.last().unwrap().segments, vec![1, 3]);
    assert_eq!(t.final_segments.len(), 3, "{:?}", t.final_segments);
    assert!(t.final_segments.contains(&1) && t.final_segments.contains(&3));
    let answer = t.steps.last().unwrap();
    assert!(
        answer.note.contains("final S_mix (2 units), filled"),
        "{}",
        answer.note
    );
    let p = prompt_of(llm.received().last().unwrap());
    assert!(p.contains("Delta is the city where Beta has its headquarters"));
    // The checks are those of the plain last S_mix: only the answer prompt differs.
    let s_mix = Answer {
        final_context: FinalContext::SMix,
        ..Answer::default()
    };
    let (t2, _) = ask_answering(&m, options(Method::Kn, window, 1), s_mix, vec![]).await;
    assert_eq!(t2.final_segments, vec![1, 3]);
    assert_eq!(t2.diagnostics().checks, d.checks);
}

#[tokio::test]
async fn the_ranked_final_context_shows_a_segment_the_window_dropped_during_navigation() {
    // The window holds two segments beside the prompt. Trial 1 brings Beta's segments 1 and 3;
    // only segment 1 fits beside S_imp (segment 0), so 3, the headquarters, is dropped.
    let m = memory(300);
    let window = window_for(&m, 2, 20);
    let paper = options(Method::Kn, window, 1);
    let s_mix = Answer {
        final_context: FinalContext::SMix,
        ..Answer::default()
    };
    let (t, llm) = ask_answering(&m, paper, s_mix, vec![]).await;
    let e1 = t.steps.iter().find(|s| s.kind == "expand").unwrap();
    assert!(e1.note.contains("window dropped [3]"), "{}", e1.note);
    // The paper's last S_mix never shows it.
    assert_eq!(t.final_segments, vec![0, 1]);
    let p = prompt_of(llm.received().last().unwrap());
    assert!(!p.contains("Beta has its headquarters"));
    // The ranked final context (the default) weighs every segment met for the question: the
    // company Alpha founded (1) and its headquarters (3), not Alpha's own segment 0.
    let (t, llm) = ask(&m, options(Method::Kn, window, 1), vec![]).await;
    assert_eq!(t.final_segments, vec![1, 3]);
    let answer = t.steps.last().unwrap();
    assert!(answer.note.contains("best of S_imp"), "{}", answer.note);
    let p = prompt_of(llm.received().last().unwrap());
    assert!(p.contains("Delta is the city where Beta has its headquarters"));
    // The checks were the same: only the answer prompt differs.
    assert_eq!(
        t.steps
            .iter()
            .filter(|s| s.kind == "answerability")
            .map(|s| s.segments.clone())
            .collect::<Vec<_>>(),
        vec![vec![0], vec![0, 1]]
    );
}

#[tokio::test]
async fn the_ranked_final_context_ranks_for_the_question_and_the_entities_its_trials_reached() {
    // The headquarters segment shares no word with the question: ranked for the question alone
    // it loses to Alpha's own segment 0. Trial 1 reaches Beta through "Alpha founded the
    // company Beta", so Beta's name joins the ranking query and its segments weigh: 3 is shown.
    let mut m = memory(300);
    for (i, t) in [
        (0, "Alpha is a person."),
        (3, "Delta: Beta keeps a main office in this city."),
    ] {
        let text = format!("{t} {}\n", "word ".repeat(300));
        m.segments[i].tokens = count_tokens(&text);
        m.segments[i].text = text;
    }
    let window = window_for(&m, 2, 20);
    let (t, llm) = ask(&m, options(Method::Kn, window, 1), vec![]).await;
    let e1 = t.steps.iter().find(|s| s.kind == "expand").unwrap();
    assert!(e1.note.contains("trial 1: added Beta"), "{}", e1.note);
    assert_eq!(t.final_segments, vec![1, 3]);
    let answer = t.steps.last().unwrap();
    assert!(answer.note.contains("path [\"Beta\"]"), "{}", answer.note);
    let p = prompt_of(llm.received().last().unwrap());
    assert!(p.contains("Beta keeps a main office"));
    assert!(!p.contains("Alpha is a person"));
    // With the answer capped at one segment, the prompt shows the best-ranked one alone:
    // segment 1, which names both Alpha and Beta.
    let capped = Answer {
        max_units: 1,
        ..Answer::default()
    };
    let (t, llm) = ask_answering(&m, options(Method::Kn, window, 1), capped, vec![]).await;
    assert_eq!(t.final_segments, vec![1]);
    let answer = t.steps.last().unwrap();
    assert_eq!(answer.segments, vec![1]);
    assert!(answer.note.contains("(2 of "), "{}", answer.note);
    let p = prompt_of(llm.received().last().unwrap());
    assert!(!p.contains("Beta keeps a main office"));
}

#[tokio::test]
async fn generic_phrases_and_common_words_do_not_join_e_s_by_verbatim_match() {
    let mut m = memory(5);
    let mut hq = entity("its headquarters", &[0, 1, 2, 3, 4]);
    hq.kind = "other".into();
    let hq = m.graph.add_node(hq);
    m.graph.add_node(entity("company", &[1]));
    // Not generic: "its headquarters" is named in the question and joins E_s.
    let (t, _) = ask(&m, options(Method::Kn, 4096, 0), vec![]).await;
    assert_eq!(t.start_entities, vec!["Alpha", "its headquarters"]);
    // Generic (linked to more than a fifth of the segments) and no name: it does not; nor does
    // the lowercase one-word "company". (A generic name joins: `joins_verbatim`'s unit test.)
    m.graph[hq].generic = true;
    let (t, _) = ask(&m, options(Method::Kn, 4096, 0), vec![]).await;
    assert_eq!(t.start_entities, vec!["Alpha"]);
    assert_eq!(t.diagnostics().start_entities, 1);
}

/// -2 with the answer in the reasoning and the prompt's placeholder in the answer field.
const IN_REASONING: &str = r#"{"reasoning": "Beta has its headquarters in Delta, so the answer is Delta.", "verdict_action": -2, "verdict_answer": "the final answer"}"#;

#[tokio::test]
async fn a_check_with_the_answer_in_the_wrong_field_answers() {
    let m = memory(5);
    let (t, llm) = ask(&m, options(Method::Kn, 4096, 4), vec![CANNOT, IN_REASONING]).await;
    assert!(t.answered);
    assert_eq!(t.answer, "Delta");
    let check = t.steps.iter().rfind(|s| s.kind == "answerability").unwrap();
    assert_eq!(check.action, Some(-2));
    assert!(
        check.note.contains("taken from the reasoning"),
        "{}",
        check.note
    );
    // No final answer call: the check answered.
    assert_eq!(llm.received().len(), 1 + 2);
}

/// A responder whose answerability replies are `CANNOT` with log probabilities that give the
/// action -2 the probability `p2`; everything else as `responder`.
fn responder_with_p(p2: f64) -> impl Fn(&ChatRequest) -> Scripted + Send + Sync {
    let plain = responder(vec![]);
    move |r: &ChatRequest| {
        if !prompt_of(r).contains("If the answer CANNOT be inferred") {
            return plain(r);
        }
        let digit = CANNOT.find("-1").unwrap() + 1;
        let lp = |t: &str, top: Vec<(&str, f64)>| qrmem::llm::TokenLogprob {
            token: t.to_string(),
            logprob: top.first().map_or(0.0, |x| x.1.ln()),
            top: top
                .into_iter()
                .map(|(s, p)| (s.to_string(), p.ln()))
                .collect(),
        };
        Scripted::WithLogprobs(
            CANNOT.to_string(),
            vec![
                lp(&CANNOT[..digit], vec![]),
                lp("1", vec![("1", 1.0 - p2), ("2", p2)]),
                lp(&CANNOT[digit + 1..], vec![]),
            ],
        )
    }
}

/// Navigates `m` with `llm` and checks the window: no prompt sent exceeds L with the reply
/// budget.
async fn ask_with(m: &Memory, opts: Options, answer: Answer, llm: Arc<ScriptedLlm>) -> Trace {
    let svc = Service::new(llm.clone(), None, common::velden::policy());
    let prompts = Prompts::load().unwrap();
    let trace = Navigator::new(&svc, &prompts, &Bow, m, opts.clone(), Window::of(&opts))
        .answering(answer)
        .ask(QUESTION, &[])
        .await
        .unwrap();
    for r in llm.received() {
        let t = count_tokens(&prompt_of(&r));
        assert!(
            t + opts.reply_tokens <= opts.context_window,
            "a prompt of {t} tokens exceeds L={}",
            opts.context_window
        );
    }
    trace
}

#[tokio::test]
async fn kn_stops_when_the_checks_p_answerable_passes_the_threshold() {
    let m = memory(5);
    let mut opts = options(Method::Kn, 4096, 4);
    opts.check_threshold = 0.5;
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(responder_with_p(0.6)));
    let t = ask_with(&m, opts.clone(), Answer::default(), llm.clone()).await;
    let kinds: Vec<&str> = t.steps.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(kinds, ["start", "answerability", "answer"]);
    let check = &t.steps[1];
    assert!((check.p_answerable.unwrap() - 0.6).abs() < 1e-9);
    // The sampled action was -1; the probability decided.
    assert_eq!(check.action, Some(-1));
    assert!(
        check.note.contains("P(answerable) 0.600 >= 0.5"),
        "{}",
        check.note
    );
    assert_eq!(
        t.steps[2].segments, check.segments,
        "answered from what the check showed"
    );
    assert_eq!(
        llm.received().len(),
        3,
        "question entities, one check, the answer"
    );
    assert!(llm.received().iter().any(|r| r.sampling.top_logprobs > 0));
    let d = t.diagnostics();
    assert_eq!(d.checks.len(), 1);
    assert!((d.checks[0].p_answerable.unwrap() - 0.6).abs() < 1e-9);

    // Below the threshold, navigation goes on as without one.
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(responder_with_p(0.3)));
    let below = ask_with(&m, opts, Answer::default(), llm).await;
    let checks = below
        .steps
        .iter()
        .filter(|s| s.kind == "answerability")
        .count();
    assert!(checks > 1, "{:?}", below.steps);
    assert!(below
        .steps
        .iter()
        .filter(|s| s.kind == "answerability")
        .all(|s| (s.p_answerable.unwrap() - 0.3).abs() < 1e-9));
}

#[tokio::test]
async fn without_log_probabilities_kn_behaves_as_without_a_threshold() {
    let m = memory(5);
    let (plain, _) = ask(&m, options(Method::Kn, 4096, 2), vec![]).await;
    let mut opts = options(Method::Kn, 4096, 2);
    opts.check_threshold = 0.5;
    let (thresholded, _) = ask(&m, opts, vec![]).await;
    assert_eq!(plain.steps, thresholded.steps);
    assert_eq!(plain.answer, thresholded.answer);
    assert!(thresholded.steps.iter().all(|s| s.p_answerable.is_none()));
}

#[tokio::test]
async fn the_sentence_context_shows_the_path_sentences_in_document_order_within_its_budget() {
    let m = memory(5);
    let sentences = Answer {
        sentence_tokens: 70,
        ..Answer::default()
    };
    let (t, llm) = ask_answering(&m, options(Method::Kn, 4096, 2), sentences, vec![]).await;
    let answer_prompt = prompt_of(llm.received().last().unwrap());
    assert!(
        answer_prompt.contains("give your best guess"),
        "{answer_prompt}"
    );
    let shown = answer_prompt
        .split("\"\"\"")
        .nth(1)
        .expect("the answer prompt quotes its text");
    assert!(count_tokens(shown.trim()) <= 70, "{shown}");
    // The path's sentences: Beta (reached through "founded") and Delta, in document order.
    let beta = shown
        .find("Beta is the company that Alpha founded")
        .unwrap_or_else(|| panic!("no Beta sentence in {shown:?}\n{:#?}", t.steps));
    let delta = shown
        .find("Delta is the city where Beta has its headquarters")
        .unwrap_or_else(|| panic!("no Delta sentence in {shown:?}"));
    assert!(beta < delta, "{shown}");
    assert!(!shown.contains("Epsilon"), "{shown}");
    // The answer spans are the sentences shown, not whole segments.
    let doc: String = m.segments.iter().map(|s| s.text.as_str()).collect();
    let hq = doc.find("Delta is the city").unwrap();
    assert!(t.answer_spans.iter().any(|&(a, b)| a <= hq && hq < b));
    let total: usize = t.answer_spans.iter().map(|(a, b)| b - a).sum();
    assert!(total < doc.len(), "{total} bytes shown of {}", doc.len());
    // The answer step names the segments its sentences come from: not Epsilon's.
    assert!(!t.final_segments.contains(&4), "{:?}", t.final_segments);
}

/// The second-hop start (`start_bridge`): the question names Alpha, whose one segment (1) says
/// Alpha founded Beta; Beta is the bridge, and its other segment (3, the headquarters) comes
/// right after the best one, though no entity of E_s links it. Without the option, S_imp is
/// Alpha's segment alone.
#[tokio::test]
async fn the_second_hop_start_puts_the_bridge_entitys_segment_next() {
    let mut m = memory(5);
    let alpha = m.find_entity("Alpha").unwrap();
    m.graph[alpha].segments = [1].into_iter().collect();
    let (plain, _) = ask(&m, options(Method::Kn, 4096, 1), vec![]).await;
    assert!(
        plain.steps[0].note.contains("kept [1];"),
        "{}",
        plain.steps[0].note
    );
    let mut opts = options(Method::Kn, 4096, 1);
    opts.start_bridge = true;
    let (bridged, _) = ask(&m, opts, vec![]).await;
    let note = &bridged.steps[0].note;
    assert!(note.contains("kept [1, 3,"), "{note}");
    assert!(note.contains(r#"bridge entities ["Beta"]"#), "{note}");
    // A generic entity is no bridge.
    let beta = m.find_entity("Beta").unwrap();
    m.graph[beta].generic = true;
    let mut opts = options(Method::Kn, 4096, 1);
    opts.start_bridge = true;
    let (generic, _) = ask(&m, opts, vec![]).await;
    assert!(
        generic.steps[0].note.contains("bridge entities []"),
        "{}",
        generic.steps[0].note
    );
}

/// The test memory with `texts` as its units (LongBench passages, in order) and each named
/// entity linked to the units given.
fn titled(texts: &[&str], links: &[(&str, &[usize])]) -> Memory {
    let mut m = memory(5);
    let mut pos = 0;
    m.segments = texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let s = Segment {
                index: i,
                start: pos,
                end: pos + t.len(),
                text: t.to_string(),
                tokens: count_tokens(t),
            };
            pos = s.end;
            s
        })
        .collect();
    for (name, segs) in links {
        let n = m.find_entity(name).unwrap();
        m.graph[n].segments = segs.iter().copied().collect();
    }
    m
}

/// The hop (`navigate.start_hop`) puts the own passage of an entity the best passage names
/// (the passage titled with its name, a parenthesis aside) right after the best one, though no
/// entity of E_s links it; a passage that only names the entity does not count as its own.
#[tokio::test]
async fn the_hop_puts_the_own_passage_of_an_entity_the_best_passage_names_next() {
    let mut m = titled(
        &[
            "Passage 1:\nAlpha\nAlpha founded the company Beta in the harbour town.\n\n",
            "Passage 2:\nGamma\nGamma is a fruit stall where Alpha likes bananas.\n\n",
            "Passage 3:\nBeta (company)\nBeta has its headquarters in Delta.\n\n",
            "Passage 4:\nEpsilon\nEpsilon once wrote about Beta and its headquarters.\n\n",
        ],
        &[
            ("Alpha", &[0, 1]),
            ("Beta", &[0, 2, 3]),
            ("Gamma", &[1]),
            ("Delta", &[2]),
        ],
    );
    let (plain, _) = ask(&m, options(Method::Kn, 4096, 1), vec![]).await;
    assert!(
        plain.steps[0].note.contains("kept [0, 1]"),
        "{}",
        plain.steps[0].note
    );
    let mut opts = options(Method::Kn, 4096, 1);
    opts.start_hop = true;
    let (hopped, _) = ask(&m, opts, vec![]).await;
    let note = &hopped.steps[0].note;
    assert!(note.contains("kept [0, 2, 1]"), "{note}");
    assert!(note.contains(r#"own passages of ["beta"]"#), "{note}");
    // Without passage titles there are no own passages: the order is the plain one.
    for s in &mut m.segments {
        s.text = s.text.replace("Passage ", "Section ");
    }
    let mut opts = options(Method::Kn, 4096, 1);
    opts.start_hop = true;
    let (untitled, _) = ask(&m, opts, vec![]).await;
    assert!(
        untitled.steps[0].note.contains("kept [0, 1]"),
        "{}",
        untitled.steps[0].note
    );
}

#[tokio::test]
async fn ges_with_the_own_hop_answers_from_the_question_entitys_passage_and_its_hop() {
    let m = own_start_memory();
    let two = Answer {
        max_units: 2,
        ..Answer::default()
    };
    let mut opts = options(Method::Ges, 4096, 1);
    let (plain, _) = ask_answering(&m, opts.clone(), two, vec![]).await;
    let answer = plain.steps.last().unwrap();
    assert!(!answer.note.contains("hop"), "{}", answer.note);
    opts.start_hop = true;
    opts.start_own = true;
    let (own, llm) = ask_answering(&m, opts, two, vec![]).await;
    let answer = own.steps.last().unwrap();
    // Alpha's own passage (unit 0), then Beta's (unit 2), the name it holds: the two shown.
    assert!(
        answer
            .note
            .contains(r#"in the hop's order (own passages of ["beta"])"#),
        "{}",
        answer.note
    );
    assert_eq!(own.final_segments, vec![0, 2]);
    let p = prompt_of(llm.received().last().unwrap());
    assert!(p.contains("Beta has its headquarters in Delta"));
}

/// Four titled passages: Alpha's own names Beta, whose own passage has the headquarters;
/// Epsilon's shares the question's words and names Alpha and Gamma.
fn own_start_memory() -> Memory {
    titled(
        &[
            "Passage 1:\nAlpha\nAlpha founded the company Beta in the harbour town.\n\n",
            "Passage 2:\nGamma\nGamma is a fruit stall in the harbour town.\n\n",
            "Passage 3:\nBeta (company)\nBeta has its headquarters in Delta.\n\n",
            "Passage 4:\nEpsilon\nEpsilon says the company Alpha founded does have its headquarters where Gamma sells fruit.\n\n",
        ],
        &[
            ("Alpha", &[0, 3]),
            ("Beta", &[0, 2]),
            ("Gamma", &[1, 3]),
            ("Delta", &[2]),
        ],
    )
}

/// The own start (`navigate.start_own`, `-own`): the hop starts from the own passage of the
/// question's entity (E_s = Alpha), not from the best-ranked unit, and follows its names.
#[tokio::test]
async fn the_own_start_hops_from_the_question_entitys_own_passage() {
    let m = own_start_memory();
    let mut opts = options(Method::Kn, 4096, 1);
    opts.start_hop = true;
    let (hopped, _) = ask(&m, opts.clone(), vec![]).await;
    let note = &hopped.steps[0].note;
    // The best unit is Epsilon's (it has the question's words); the hop follows its names,
    // Alpha and Gamma, and never reaches Beta's passage.
    assert!(note.contains("ranked [3, 0, 1]"), "{note}");
    assert!(
        note.contains(r#"own passages of ["alpha", "gamma"]"#),
        "{note}"
    );
    opts.start_own = true;
    let (own, _) = ask(&m, opts, vec![]).await;
    let note = &own.steps[0].note;
    // From Alpha's own passage (unit 0) to Beta's (unit 2), then the rest as ranked.
    assert!(note.contains("ranked [0, 2, 3"), "{note}");
    assert!(note.contains(r#"own passages of ["beta"]"#), "{note}");
}

/// The path (`answer.path`): KN's final answer prompt shows, above its units, the
/// relation edges its trials followed, in order; without the option the prompt holds none.
#[tokio::test]
async fn the_path_shows_the_relations_the_trials_followed_above_the_answer_context() {
    let m = memory(5);
    let (plain, llm) = ask(&m, options(Method::Kn, 4096, 2), vec![]).await;
    let plain_prompt = prompt_of(llm.received().last().unwrap());
    assert!(
        plain_prompt.contains("give your best guess"),
        "{plain_prompt}"
    );
    assert!(
        !plain_prompt.contains("Relations that lead"),
        "{plain_prompt}"
    );
    let path = Answer {
        path: true,
        ..Answer::default()
    };
    let (pathed, llm) = ask_answering(&m, options(Method::Kn, 4096, 2), path, vec![]).await;
    let prompt = prompt_of(llm.received().last().unwrap());
    let quoted = prompt
        .split("\"\"\"")
        .nth(1)
        .expect("the answer prompt quotes its text");
    // The relations of the trials, in the order followed: Beta first (the question's words),
    // then Gamma (Alpha's other edge).
    let followed: Vec<String> = pathed
        .steps
        .iter()
        .filter(|s| s.kind == qrmem::answer::StepKind::Expand && !s.chosen.is_empty())
        .map(|s| s.chosen[0].text.clone())
        .collect();
    assert_eq!(
        followed,
        [
            "Alpha | Alpha founded the company Beta | Beta",
            "Alpha | Alpha likes bananas from Gamma | Gamma"
        ]
    );
    let founded = quoted.find(&followed[0]).unwrap();
    let hq = quoted.find(&followed[1]).unwrap();
    assert!(founded < hq, "{quoted}");
    // Above the units, which are the same as without the path.
    assert!(hq < quoted.find("Alpha is a person").unwrap(), "{quoted}");
    assert_eq!(plain.final_segments, pathed.final_segments);
    let last = pathed.steps.last().unwrap();
    assert!(last.note.contains("path shown"), "{}", last.note);
}
