//! `qrmem view` pages, checked in a real headless browser (Debian's chromium; `scripts/test.sh`
//! installs it when missing, and `QRMEM_REQUIRE_BROWSER=1` makes a missing browser fail the
//! test instead of skipping it): the page loads without script errors, the graph drawn in the
//! DOM has the nodes and edges the page data says (the trace's neighbourhood, not the whole
//! memory), a screenshot is produced; HTML in a memory is shown, never run; a trace of another
//! memory, or a missing one, is an error naming both files.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use qrmem::answer::{ScoredEdge, Step, StepKind, Trace};
use qrmem::memory::{Entity, Memory, Source};
use qrmem::methods::summary_tree::{SummaryTree, TreeParams};
use qrmem::methods::{self, Prepared};

/// The browser, or None (with a message) when it is missing and not required.
fn chromium() -> Option<PathBuf> {
    for c in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(c).exists() {
            return Some(PathBuf::from(c));
        }
    }
    if std::env::var("QRMEM_REQUIRE_BROWSER").as_deref() == Ok("1") {
        panic!("chromium is missing and QRMEM_REQUIRE_BROWSER=1: apt-get install chromium");
    }
    eprintln!("skipping: chromium is not installed (scripts/test.sh installs it)");
    None
}

/// What the browser made of a page: the DOM after the scripts ran, its stderr (console
/// messages), and a screenshot.
struct Loaded {
    dom: String,
    console: String,
    screenshot: PathBuf,
}

fn load(browser: &Path, page: &Path) -> Loaded {
    let profile = tempfile::tempdir().unwrap();
    let base = |cmd: &mut Command| {
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()));
    };
    let url = format!("file://{}", page.display());
    let mut dump = Command::new(browser);
    base(&mut dump);
    let out = dump.arg("--dump-dom").arg(&url).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let screenshot = page.with_extension("png");
    let mut shot = Command::new(browser);
    base(&mut shot);
    let s = shot
        .arg(format!("--screenshot={}", screenshot.display()))
        .arg("--window-size=1400,1100")
        .arg(&url)
        .output()
        .unwrap();
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    Loaded {
        dom: String::from_utf8_lossy(&out.stdout).into_owned(),
        console: String::from_utf8_lossy(&out.stderr).into_owned(),
        screenshot,
    }
}

/// The value of `attr` on the element with `id` in a dumped DOM.
fn attr(dom: &str, id: &str, attr: &str) -> Option<String> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let open = dom[..at].rfind('<')?;
    let close = at + dom[at..].find('>')?;
    let tag = &dom[open..close];
    let key = format!("{attr}=\"");
    let from = tag.find(&key)? + key.len();
    Some(tag[from..from + tag[from..].find('"')?].to_string())
}

fn assert_clean(l: &Loaded) {
    assert!(
        attr(&l.dom, "graph", "data-nodes").is_some(),
        "the page script ran"
    );
    assert!(
        l.dom.contains("data-ready=\"1\""),
        "the page script finished"
    );
    assert!(l.dom.contains("data-errors=\"0\""), "no script error");
    assert!(
        !l.console.contains("Uncaught"),
        "console errors: {}",
        l.console
    );
    let png = std::fs::read(&l.screenshot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "a screenshot"
    );
}

/// The page drew every node and edge of its data.
fn assert_draws(loaded: &Loaded, data: &qrmem::view::ViewData) {
    assert_eq!(
        attr(&loaded.dom, "graph", "data-nodes").unwrap(),
        data.nodes.len().to_string()
    );
    assert_eq!(
        attr(&loaded.dom, "graph", "data-edges").unwrap(),
        data.edges.len().to_string()
    );
}

/// A trace of KN over the velden memory: E_s, one check, one expansion over a real edge.
fn velden_trace(m: &Memory) -> Trace {
    let edge = m
        .graph
        .edge_indices()
        .next()
        .expect("the velden memory has an edge");
    let (h, t) = m.graph.edge_endpoints(edge).unwrap();
    let text = m.edge_text(edge).unwrap();
    let start = vec![m.graph[h].name.clone()];
    Trace {
        method: "kn".into(),
        question: common::velden::QUESTION.into(),
        answer: "Lucerne".into(),
        start_entities: start.clone(),
        steps: vec![
            Step {
                kind: StepKind::Answerability,
                entities: start,
                segments: vec![0],
                action: Some(-1),
                reason: "The birthplace is not given.".into(),
                ..Step::default()
            },
            Step {
                kind: StepKind::Expand,
                entities: vec![m.graph[h].name.clone(), m.graph[t].name.clone()],
                candidates: vec![ScoredEdge {
                    text: text.clone(),
                    score: 0.8,
                }],
                chosen: vec![ScoredEdge { text, score: 0.8 }],
                s_add: vec![(1, 0.8)],
                ..Step::default()
            },
            Step {
                kind: StepKind::Answer,
                segments: vec![0, 1],
                ..Step::default()
            },
        ],
        segments_used: vec![0, 1],
        final_segments: vec![0, 1],
        ..Trace::default()
    }
}

fn write(dir: &Path, name: &str, page: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, page).unwrap();
    path
}

#[tokio::test]
async fn a_graph_page_loads_clean_and_draws_the_traces_neighbourhood() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (memory, _) = common::velden::build(false, common::velden::params()).await;
    let trace = velden_trace(&memory);
    let mpath = dir.path().join("velden.qrm");
    let tpath = dir.path().join("trace.json");
    let mut value = serde_json::to_value(&trace).unwrap();
    value["gold_spans"] = serde_json::json!([[10, 60]]);
    std::fs::write(&tpath, serde_json::to_vec(&value).unwrap()).unwrap();
    methods::save(&Prepared::Graph(Box::new(memory.clone())), &mpath).unwrap();
    let (page, data) = qrmem::view::page_of_files(&mpath, Some(&tpath)).unwrap();
    // The neighbourhood: E_s and the touched entities are drawn, and nothing beyond their
    // first-order neighbours.
    let ids: BTreeSet<&str> = data.nodes.iter().map(|n| n.label.as_str()).collect();
    for e in &trace.start_entities {
        assert!(ids.contains(e.as_str()), "{e} drawn");
    }
    assert!(data.nodes.iter().any(|n| n.role == "start"));
    assert!(data.edges.iter().any(|e| e.role == "chosen"));
    assert!(data.nodes.len() <= memory.entity_count());
    assert!(data.units.iter().any(|u| !u.gold.is_empty()), "gold marked");
    let loaded = load(&browser, &write(dir.path(), "velden.html", &page));
    assert_clean(&loaded);
    assert_draws(&loaded, &data);
    // The timeline has one entry per step, the strip one box per segment.
    assert_eq!(
        loaded.dom.matches("data-step=\"").count(),
        trace.steps.len()
    );
    assert_eq!(
        loaded.dom.matches("class=\"unit").count(),
        memory.segments.len()
    );
}

#[tokio::test]
async fn html_in_a_memory_is_shown_never_run() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let evil = "<img src=x onerror=\"document.title='HACKED'\">";
    let doc = format!(
        "Plain words first. <script>document.title='HACKED'</script> {evil} and more plain words.\n"
    );
    let mut memory = Memory::segments_only(&doc, common::velden::params(), "m");
    memory.graph.add_node(Entity {
        name: evil.into(),
        kind: "other".into(),
        mentions: [evil.to_string()].into(),
        segments: [0].into(),
        sources: [Source::Schema].into(),
        generic: false,
    });
    let trace = Trace {
        method: "kn".into(),
        question: format!("What is {evil}?"),
        answer: "</script><script>document.title='HACKED'</script>".into(),
        start_entities: vec![evil.into()],
        steps: vec![Step {
            kind: StepKind::Answer,
            segments: vec![0],
            reason: evil.into(),
            ..Step::default()
        }],
        segments_used: vec![0],
        final_segments: vec![0],
        ..Trace::default()
    };
    let labels = qrmem::view::Labels {
        memory: "evil.qrm".into(),
        trace: "evil.json".into(),
        ..Default::default()
    };
    let data =
        qrmem::view::data(&Prepared::Graph(Box::new(memory)), Some(&trace), &labels).unwrap();
    let page = qrmem::view::render(&data).unwrap();
    assert!(
        !page.contains("<img"),
        "the page source holds no markup of the memory"
    );
    let loaded = load(&browser, &write(dir.path(), "evil.html", &page));
    assert_clean(&loaded);
    assert!(
        !loaded.dom.contains("HACKED</title>"),
        "no script of the memory ran"
    );
    assert!(
        !loaded.dom.contains("<img"),
        "no element of the memory was made"
    );
    // The text is there, as text.
    assert!(
        loaded.dom.contains("What is &lt;img src=x"),
        "{}",
        &loaded.dom[..2000.min(loaded.dom.len())]
    );
}

#[tokio::test]
async fn a_tree_page_draws_the_tree_and_the_path() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut tree = SummaryTree::new(TreeParams::default(), "m");
    tree.leaves = (0..5).map(|i| format!("Leaf {i} text. ")).collect();
    let trace = Trace {
        method: "summary-tree".into(),
        question: "Q?".into(),
        answer: "A".into(),
        steps: vec![Step {
            kind: StepKind::Answer,
            segments: vec![3],
            ..Step::default()
        }],
        segments_used: vec![3],
        final_segments: vec![3],
        ..Trace::default()
    };
    let labels = qrmem::view::Labels::default();
    let data = qrmem::view::data(&Prepared::Tree(Box::new(tree)), Some(&trace), &labels).unwrap();
    // A binary tree over 5 leaves: 9 nodes, 8 edges; the path runs root -> leaf 3.
    assert_eq!((data.nodes.len(), data.edges.len()), (9, 8));
    let path: Vec<&str> = data
        .nodes
        .iter()
        .filter(|n| n.role == "path")
        .map(|n| n.label.as_str())
        .collect();
    assert!(
        path.contains(&"leaf 3") && path.contains(&"0..4"),
        "{path:?}"
    );
    let loaded = load(
        &browser,
        &write(
            dir.path(),
            "tree.html",
            &qrmem::view::render(&data).unwrap(),
        ),
    );
    assert_clean(&loaded);
    assert_eq!(attr(&loaded.dom, "graph", "data-nodes").unwrap(), "9");
    assert_eq!(attr(&loaded.dom, "graph", "data-edges").unwrap(), "8");
}

#[tokio::test]
async fn a_trace_of_another_memory_or_a_missing_one_names_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, _) = common::velden::build(false, common::velden::params()).await;
    let mpath = dir.path().join("velden.qrm");
    methods::save(&Prepared::Graph(Box::new(memory.clone())), &mpath).unwrap();
    let mut trace = velden_trace(&memory);
    trace.start_entities = vec!["Nobody Of This Memory".into()];
    let tpath = dir.path().join("other.json");
    std::fs::write(&tpath, serde_json::to_vec(&trace).unwrap()).unwrap();
    let err = qrmem::view::page_of_files(&mpath, Some(&tpath))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("other.json")
            && err.contains("velden.qrm")
            && err.contains("Nobody Of This Memory"),
        "{err}"
    );
    // Units beyond the memory's.
    let mut trace = velden_trace(&memory);
    trace.final_segments = vec![99];
    std::fs::write(&tpath, serde_json::to_vec(&trace).unwrap()).unwrap();
    let err = qrmem::view::page_of_files(&mpath, Some(&tpath))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("other.json") && err.contains("velden.qrm") && err.contains("unit 99"),
        "{err}"
    );
    // Another kind's method.
    let mut trace = velden_trace(&memory);
    trace.method = "garlic".into();
    std::fs::write(&tpath, serde_json::to_vec(&trace).unwrap()).unwrap();
    let err = qrmem::view::page_of_files(&mpath, Some(&tpath))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("garlic") && err.contains("velden.qrm"),
        "{err}"
    );
    // A missing trace.
    let missing = dir.path().join("missing.json");
    let err = qrmem::view::page_of_files(&mpath, Some(&missing))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("missing.json") && err.contains("velden.qrm"),
        "{err}"
    );
}

/// Copies a directory tree.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

#[test]
fn report_only_with_html_rewrites_the_committed_pages_from_their_traces() {
    let Some(data) = common::shared_data("quality/quality_dev5.jsonl") else {
        return;
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    copy_dir(&repo.join("eval/runs/pages-quality"), &run);
    let page = run.join("traces/quality-1-0--memwalker.html");
    let committed = std::fs::read(&page).unwrap();
    std::fs::remove_file(&page).unwrap();
    std::fs::remove_file(run.join("traces/index.html")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_qrmem"))
        .args([
            "--llm-base-url",
            "http://127.0.0.1:9/v1",
            "eval",
            "--experiment",
        ])
        .arg(repo.join("eval/probes/pages-quality.toml"))
        .arg("--data")
        .arg(&data)
        .arg("--out")
        .arg(&run)
        .args(["--report-only", "--html"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("rewrote 1 question pages"), "{stderr}");
    // No LLM, and the same page, byte for byte, as the run wrote.
    assert_eq!(std::fs::read(&page).unwrap(), committed);
    let index = std::fs::read_to_string(run.join("traces/index.html")).unwrap();
    assert!(index.contains("quality-1-0--memwalker.html"), "{index}");
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains("(traces/index.html)"),
        "the report links the index"
    );
}

/// `view --corpus`: a question's page over a corpus loads clean in the browser and draws its
/// entities, links and ranked passages.
#[test]
fn a_corpus_page_loads_clean_and_draws_its_passages() {
    use qrmem::corpus::{Corpus, CorpusStore, Retriever};
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut c = Corpus::open(&dir.path().join("corpus"), 300).unwrap();
    c.add("a.txt", "Passage 1:\nRon Joyce\nRon Joyce helped found Tim Hortons with Tim Horton in Hamilton.\n\nPassage 2:\nHamilton\nHamilton is a port city in Ontario.").unwrap();
    c.add("b.txt", "Passage 1:\nTim Hortons\nTim Hortons is a restaurant chain with 4,613 restaurants in Canada.").unwrap();
    let q = "How many restaurants comprise the chain that Ron Joyce helped found?";
    let data = qrmem::view::corpus_data(&c, q, Retriever::GraphOwnHop, 400).unwrap();
    assert!(!data.nodes.is_empty() && !data.edges.is_empty());
    let page = qrmem::view::render(&data).unwrap();
    let loaded = load(&browser, &write(dir.path(), "corpus.html", &page));
    assert_clean(&loaded);
    assert_draws(&loaded, &data);
    assert_eq!(loaded.dom.matches("class=\"unit").count(), data.units.len());
}
