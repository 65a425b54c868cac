//! The system's own (non-LLM) hot paths at realistic sizes, each at n/10 and n so the scaling
//! exponent shows: segmentation, the ROUGE-L question pool, entity disambiguation, the memory
//! build around the LLM (graph + entity-segment index, with instant scripted replies), one KN
//! scoring step over a 10k-edge neighbourhood, BM25 over 10k segments, and the memory file.
//!
//! `cargo bench --bench perf` (full sizes); QRMEM_BENCH_QUICK=1, or a debug build (`cargo test
//! --all-targets` in CI), runs small sizes so the bench cannot rot. Results: eval/perf.md.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use petgraph::stable_graph::StableDiGraph;
use qrmem::config::Config;
use qrmem::embed::{EmbedError, Embedder};
use qrmem::llm::{Policy, Scripted, ScriptedLlm, Service};
use qrmem::memory::{BuildParams, Builder, Entity, Memory, Relation, Source, Vectors};
use qrmem::prompts::Prompts;
use qrmem::text::{count_tokens, segment, Bm25, QuestionPool};

const FIRST: &[&str] = &[
    "Clara", "Jonas", "Marta", "Pieter", "Ilse", "Tomas", "Greta", "Lukas", "Anneke", "Felix",
    "Hanna", "Oskar", "Lotte", "Emil", "Sofie", "Viktor", "Nora", "Bastian", "Elin", "Arvid",
];
const LAST: &[&str] = &[
    "Hoffmann",
    "Berger",
    "Lindqvist",
    "Novak",
    "Dupont",
    "Keller",
    "Moreau",
    "Janssen",
    "Brandt",
    "Olsen",
    "Varga",
    "Richter",
    "Fontaine",
    "Weber",
    "Sorensen",
    "Kowalski",
    "Haas",
    "Lambert",
    "Visser",
    "Engel",
    "Roth",
    "Marchetti",
    "Aalto",
    "Dvorak",
    "Lund",
];
const PLACES: &[&str] = &[
    "Lucerne",
    "Velden",
    "Marlow Heath",
    "Oakridge",
    "Brenner Pass",
    "Kessel",
    "Halden",
    "Norrby",
    "Castelnau",
    "Vinter Bay",
    "Aldmoor",
    "Ravensholm",
    "Sankt Ilgen",
    "Tarnow",
];
const WORDS: &[&str] = &[
    "the", "bridge", "was", "designed", "by", "in", "and", "river", "city", "built", "stone",
    "railway", "company", "opened", "years", "later", "market", "tower", "flood", "council",
    "engineer", "of", "a", "to", "its", "after", "with", "museum", "harbour", "winter",
];

fn quick() -> bool {
    cfg!(debug_assertions) || std::env::var("QRMEM_BENCH_QUICK").is_ok_and(|v| v == "1")
}

fn person(i: usize) -> String {
    format!(
        "{} {}",
        FIRST[i % FIRST.len()],
        LAST[(i / FIRST.len()) % LAST.len()]
    )
}

/// English-like text of about `tokens` cl100k tokens: sentences naming people and places.
fn text(tokens: usize, seed: u64) -> String {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut s = String::new();
    // ~1.3 tokens per word
    let words = tokens * 10 / 13;
    let mut n = 0;
    while n < words {
        let len = rng.usize(8..22);
        let mut sentence: Vec<String> = Vec::with_capacity(len + 4);
        sentence.push(person(rng.usize(..FIRST.len() * LAST.len())));
        for _ in 0..len {
            sentence.push(WORDS[rng.usize(..WORDS.len())].to_string());
        }
        sentence.push(PLACES[rng.usize(..PLACES.len())].to_string());
        n += sentence.len() + 1;
        s.push_str(&sentence.join(" "));
        s.push_str(". ");
        if rng.usize(..8) == 0 {
            s.push_str("\n\n");
        }
    }
    s
}

fn row(name: &str, n: usize, secs: f64, target: Option<f64>) {
    let verdict = match target {
        Some(t) if secs <= t => format!("target <= {t} s: met"),
        Some(t) => format!("target <= {t} s: MISSED"),
        None => String::new(),
    };
    println!("{name:<44} n = {n:>9}  {secs:>9.3} s  {verdict}");
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t = Instant::now();
    let out = f();
    (out, t.elapsed().as_secs_f64())
}

fn exponent(n1: usize, t1: f64, n2: usize, t2: f64) -> String {
    if t1 <= 0.0 || t2 <= 0.0 {
        return "-".into();
    }
    format!("{:.2}", (t2 / t1).ln() / (n2 as f64 / n1 as f64).ln())
}

/// Deterministic unit vectors from a hash of the text.
struct HashEmbedder;
impl Embedder for HashEmbedder {
    fn model_id(&self) -> &str {
        "hash-384"
    }
    fn dim(&self) -> usize {
        384
    }
    fn normalized(&self) -> bool {
        true
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| unit(t.len() as u64 ^ 0x5eed))
            .collect())
    }
}

fn unit(seed: u64) -> Vec<f32> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let v: Vec<f32> = (0..384).map(|_| rng.f32() - 0.5).collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-9);
    v.into_iter().map(|x| x / n).collect()
}

fn bench_segment(full: usize) {
    let mut pts = Vec::new();
    for n in [full / 10, full] {
        let doc = text(n, 1);
        let tokens = count_tokens(&doc);
        let (segs, secs) = timed(|| segment(&doc, 600));
        assert!(!segs.is_empty());
        row("segment (600-token segments)", tokens, secs, None);
        pts.push((tokens, secs));
    }
    println!(
        "  scaling exponent {}",
        exponent(pts[0].0, pts[0].1, pts[1].0, pts[1].1)
    );
}

fn questions(n: usize, seed: u64) -> Vec<String> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let templates = [
        "Who designed the bridge in {p}?",
        "Where was {x} born?",
        "When did {x} move to {p}?",
        "What did {x} build in {p} after the flood?",
        "Which company employed {x}?",
        "How many years did {x} spend in {p}?",
        "Why did {x} leave {p} for {q}?",
        "What is the relation between {x} and {y}?",
    ];
    // Generated questions vary: a template, its names, and a clause of free words (an LLM's
    // questions are about as diverse; most survive the 0.6 threshold).
    (0..n)
        .map(|_| {
            let clause: Vec<&str> = (0..rng.usize(3..9))
                .map(|_| WORDS[rng.usize(..WORDS.len())])
                .collect();
            let t = templates[rng.usize(..templates.len())]
                .replace("{x}", &person(rng.usize(..500)))
                .replace("{y}", &person(rng.usize(..500)))
                .replace("{p}", PLACES[rng.usize(..PLACES.len())])
                .replace("{q}", PLACES[rng.usize(..PLACES.len())]);
            format!("{} {}?", t.trim_end_matches('?'), clause.join(" "))
        })
        .collect()
}

fn bench_pool(full: usize) {
    let mut pts = Vec::new();
    for n in [full / 10, full] {
        let qs = questions(n, 2);
        let (kept, secs) = timed(|| {
            let mut pool = QuestionPool::new(0.6);
            qs.iter().filter(|q| pool.offer(q)).count()
        });
        row(
            &format!("ROUGE-L question pool ({kept} kept)"),
            n,
            secs,
            (n == full).then_some(5.0),
        );
        pts.push((n, secs));
    }
    println!(
        "  scaling exponent {}",
        exponent(pts[0].0, pts[0].1, pts[1].0, pts[1].1)
    );
}

fn mentions(n: usize, seed: u64) -> Vec<String> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..n)
        .map(|_| {
            let p = person(rng.usize(..FIRST.len() * LAST.len()));
            match rng.usize(..10) {
                0 => p.split(' ').nth(1).unwrap_or("").to_string(),
                1 => p.to_uppercase(),
                2 => format!("{p}'s"),
                3 => PLACES[rng.usize(..PLACES.len())].to_string(),
                4 => format!(
                    "the {} {}",
                    WORDS[rng.usize(..WORDS.len())],
                    PLACES[rng.usize(..PLACES.len())]
                ),
                5 => format!(
                    "{} {}",
                    1800 + rng.usize(..200),
                    WORDS[rng.usize(..WORDS.len())]
                ),
                _ => p,
            }
        })
        .collect()
}

fn bench_cluster(full: usize) {
    let mut pts = Vec::new();
    for n in [full / 10, full] {
        let names = mentions(n, 3);
        let ((_, merges), secs) = timed(|| qrmem::memory::merge::cluster(&names, 0.92));
        row(
            &format!("entity disambiguation ({merges} merges)"),
            n,
            secs,
            (n == full).then_some(10.0),
        );
        pts.push((n, secs));
    }
    println!(
        "  scaling exponent {}",
        exponent(pts[0].0, pts[0].1, pts[1].0, pts[1].1)
    );
}

/// Scripted replies: the joint extraction gives the entities of the segment (the people it
/// names) and a relation between each two consecutive ones, no questions.
fn reply(prompt: &str) -> Scripted {
    let body = prompt.rsplit("\"\"\"").nth(1).unwrap_or(prompt);
    if prompt.contains("Summary the context") {
        return Scripted::Reply(r#"{"summary": "People and places."}"#.into());
    }
    let mut names: Vec<String> = Vec::new();
    for f in FIRST {
        for (pos, _) in body.match_indices(f) {
            let rest = &body[pos..];
            let name: String = rest.split(' ').take(2).collect::<Vec<_>>().join(" ");
            if !names.contains(&name) && names.len() < 12 {
                names.push(name);
            }
        }
    }
    let ents: Vec<String> = names
        .iter()
        .map(|n| format!(r#"{{"name": "{n}", "type": "person"}}"#))
        .collect();
    if prompt.contains("You build the knowledge graph of a text segment") {
        let rels: Vec<String> = names
            .windows(2)
            .map(|w| {
                format!(
                    r#"{{"head": "{}", "tail": "{}", "description": "{} worked with {}."}}"#,
                    w[0], w[1], w[0], w[1]
                )
            })
            .collect();
        Scripted::Reply(format!(
            r#"{{"entities": [{}], "relations": [{}], "questions": []}}"#,
            ents.join(", "),
            rels.join(", ")
        ))
    } else if prompt.contains("merge the corresponding relationships") {
        Scripted::Reply(r#"{"questions": [], "description": "They worked together."}"#.into())
    } else {
        Scripted::Reply("{}".into())
    }
}

fn bench_build_and_store(full: usize, runtime: &tokio::runtime::Runtime) -> Memory {
    let mut memory = None;
    let mut pts = Vec::new();
    for n in [full / 10, full] {
        let doc = text(n, 4);
        let llm = Arc::new(ScriptedLlm::new([]).with_responder(|r| {
            // The task is told by the whole conversation (the joint call's system turn), the
            // segment by its last message.
            let all: Vec<&str> = r.messages.iter().map(|m| m.content.as_str()).collect();
            reply(&all.join("\n"))
        }));
        let svc = Service::new(
            llm,
            None,
            Policy {
                temperature: 0.0,
                max_tokens: 256,
                frequency_penalty: 0.0,
                json_retries: 0,
                retry_temperature: 0.7,
            },
        );
        let prompts = Prompts::load().expect("prompts");
        let params = BuildParams::from_config(&Config::default());
        let (m, secs) = timed(|| {
            runtime
                .block_on(Builder::new(&svc, &prompts, params, 8).build(&doc, None, "bench"))
                .expect("build")
        });
        row(
            &format!(
                "build around the LLM ({} segs, {} ents, {} rels)",
                m.segments.len(),
                m.entity_count(),
                m.relation_count()
            ),
            n,
            secs,
            None,
        );
        pts.push((n, secs));
        memory = Some(m);
    }
    println!(
        "  scaling exponent {}",
        exponent(pts[0].0, pts[0].1, pts[1].0, pts[1].1)
    );
    let mut m = memory.expect("built");
    // Vectors as index_memory would store them (384-d, one per segment and edge).
    let edges: Vec<usize> = m.graph.edge_indices().map(|e| e.index()).collect();
    m.vectors = Some(Vectors {
        model: "hash-384".into(),
        dim: 384,
        normalized: true,
        segments: (0..m.segments.len()).map(|i| unit(i as u64)).collect(),
        edges: edges
            .iter()
            .map(|&e| (e, unit(e as u64 + 1_000_000)))
            .collect(),
    });
    let dir = std::env::temp_dir().join(format!("qrmem-perf-{}", std::process::id()));
    let path = dir.join("big.qrm");
    let (_, save) = timed(|| qrmem::memory::save(&m, &path).expect("save"));
    let size = std::fs::metadata(&path).map(|x| x.len()).unwrap_or(0);
    let (loaded, load) = timed(|| qrmem::memory::load(&path).expect("load"));
    assert_eq!(loaded.segments.len(), m.segments.len());
    row(
        &format!(
            "memory file save ({:.1} MB, with vectors)",
            size as f64 / 1e6
        ),
        full,
        save,
        None,
    );
    row("memory file load", full, load, None);
    let _ = std::fs::remove_dir_all(&dir);
    m
}

fn bench_kn_step(edges: usize) {
    // A hub entity with `edges` relations, vectors stored: the scoring of one KN step.
    let mut g: StableDiGraph<Entity, Relation> = StableDiGraph::new();
    let entity = |name: String| Entity {
        name: name.clone(),
        kind: "person".into(),
        mentions: BTreeSet::from([name]),
        segments: BTreeSet::from([0]),
        sources: BTreeSet::from([Source::Llm]),
        generic: false,
    };
    let hub = g.add_node(entity("Clara Hoffmann".into()));
    for i in 0..edges {
        let n = g.add_node(entity(format!("Entity {i}")));
        g.add_edge(
            hub,
            n,
            Relation {
                description: format!(
                    "Clara Hoffmann met Entity {i} in {}.",
                    PLACES[i % PLACES.len()]
                ),
                segments: BTreeSet::from([0]),
                merged_from: 1,
                helper_questions: vec![],
            },
        );
    }
    let mut m = Memory::segments_only(
        "Clara Hoffmann was born in Lucerne.",
        BuildParams::from_config(&Config::default()),
        "bench",
    );
    m.graph = g;
    let ids: Vec<_> = m.graph.edge_indices().collect();
    m.vectors = Some(Vectors {
        model: "hash-384".into(),
        dim: 384,
        normalized: true,
        segments: vec![unit(0)],
        edges: ids
            .iter()
            .map(|e| (e.index(), unit(e.index() as u64)))
            .collect(),
    });
    let neighbours = m.neighbours(hub);
    let edge_ids: Vec<_> = neighbours.iter().map(|(_, e)| *e).collect();
    let (scored, secs) = timed(|| {
        qrmem::embed::score_edges(
            &HashEmbedder,
            &m,
            "Where was the designer born? Reflection: missing birthplace. Entities: Clara Hoffmann",
            &edge_ids,
        )
        .expect("score")
    });
    assert_eq!(scored.len(), edges);
    row("KN step: neighbours + score edges", edges, secs, None);
}

fn bench_bm25(full: usize) {
    let mut pts = Vec::new();
    for n in [full / 10, full] {
        let doc = text(n * 600, 5);
        let segs = segment(&doc, 600);
        let texts: Vec<&str> = segs.iter().map(|s| s.text.as_str()).collect();
        let (ranked, secs) = timed(|| {
            let bm = Bm25::new(&texts);
            bm.rank("Where was Clara Hoffmann born after the flood in Lucerne?")
        });
        assert!(!ranked.is_empty());
        row("BM25 index + one query (segments)", texts.len(), secs, None);
        pts.push((texts.len(), secs));
    }
    println!(
        "  scaling exponent {}",
        exponent(pts[0].0, pts[0].1, pts[1].0, pts[1].1)
    );
}

fn main() {
    let q = quick();
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    println!(
        "perf bench ({} mode, {} profile, {cpus} CPUs)",
        if q { "quick" } else { "full" },
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let s = |full: usize, quick: usize| if q { quick } else { full };
    bench_segment(s(1_000_000, 20_000));
    bench_pool(s(10_000, 500));
    bench_cluster(s(100_000, 2_000));
    bench_build_and_store(s(1_000_000, 10_000), &runtime);
    bench_kn_step(s(10_000, 500));
    bench_bm25(s(10_000, 50));
}
