//! The binary end to end against the misbehaving server: chat, doctor, config, errors, and the
//! API key never leaking into output, logs, the cache or the ledger.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::fault_server::{Behaviour, FaultServer};

const KEY: &str = "sk-leak-check-7f3a9c1e5b";

fn qrmem(args: &[&str], url: &str, cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_qrmem"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", cache)
        .env("QRMEM_LLM_API_KEY", KEY)
        .env("QRMEM_LLM_BASE_URL", url)
        .env("QRMEM_LLM_MODEL", "fault-model")
        .env("QRMEM_LLM_BACKOFF_BASE_MS", "10")
        .env("QRMEM_CACHE_DIR", cache.join("llm-cache"))
        .env("RUST_LOG", "trace")
        .current_dir(cache)
        .output()
        .expect("run qrmem")
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if String::from_utf8_lossy(&std::fs::read(&p).unwrap()).contains(needle) {
                hits.push(p.display().to_string());
            }
        }
    }
    hits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_prints_reply_and_ledger_and_never_leaks_the_key() {
    let server = FaultServer::start(
        vec![Behaviour::Status(500, None, "transient".into())],
        Behaviour::Reply("Hello from the fault server".into()),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.json");
    let out = qrmem(
        &[
            "chat",
            "Say hello",
            "--ledger-out",
            ledger.to_str().unwrap(),
        ],
        &server.url,
        dir.path(),
    );
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Hello from the fault server"));
    assert!(all.contains("LLM ledger") && all.contains("chat"), "{all}");
    // The key was really sent ...
    assert!(server.seen().iter().any(|s| s
        .head
        .to_lowercase()
        .contains(&format!("authorization: bearer {}", KEY.to_lowercase()))));
    // ... and appears nowhere else.
    assert!(!all.contains(KEY), "key leaked into output/logs");
    assert!(
        files_containing(dir.path(), KEY).is_empty(),
        "key leaked into files"
    );
    let l: serde_json::Value = serde_json::from_slice(&std::fs::read(&ledger).unwrap()).unwrap();
    assert_eq!(l["stages"]["chat"]["requests"], 1);
    assert_eq!(l["stages"]["chat"]["retries"], 1);

    // The same call again is a cache hit: no request reaches the server.
    let before = server.hits();
    let again = qrmem(
        &[
            "chat",
            "Say hello",
            "--ledger-out",
            ledger.to_str().unwrap(),
        ],
        &server.url,
        dir.path(),
    );
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(server.hits(), before);
    let l: serde_json::Value = serde_json::from_slice(&std::fs::read(&ledger).unwrap()).unwrap();
    assert_eq!(
        (
            l["stages"]["chat"]["cache_hits"].as_u64(),
            l["stages"]["chat"]["requests"].as_u64()
        ),
        (Some(1), Some(0))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_bodies_that_echo_the_key_are_redacted() {
    let body = format!("{{\"error\": \"invalid api key {KEY}\"}}");
    let server = FaultServer::start(vec![], Behaviour::Status(401, None, body)).await;
    let dir = tempfile::tempdir().unwrap();
    let out = qrmem(&["chat", "hi"], &server.url, dir.path());
    let all = text(&out);
    assert!(!out.status.success());
    assert!(all.contains("401") && all.contains("<redacted>"), "{all}");
    assert!(!all.contains(KEY), "{all}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_the_endpoint_and_model() {
    let server = FaultServer::start(vec![], Behaviour::Reply("x".into())).await;
    let dir = tempfile::tempdir().unwrap();
    let out = qrmem(&["doctor"], &server.url, dir.path());
    let all = text(&out);
    assert!(all.contains("serves model 'fault-model'"), "{all}");
    assert!(
        all.contains("embedder model") && all.contains("libtorch"),
        "{all}"
    );
    assert!(!all.contains(KEY));
    // A model the server does not list fails, with the fix.
    let out = Command::new(env!("CARGO_BIN_EXE_qrmem"))
        .args([
            "doctor",
            "--llm-model",
            "no-such-model",
            "--llm-base-url",
            &server.url,
        ])
        .env("HOME", dir.path())
        .output()
        .unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("does not list model 'no-such-model'") && all.contains("fix:"),
        "{all}"
    );
}

#[test]
fn config_prints_effective_values_without_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let out = qrmem(
        &["config", "--concurrency", "3"],
        "http://127.0.0.1:1/v1",
        dir.path(),
    );
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("concurrency = 3") && all.contains("segment_tokens = 600"),
        "{all}"
    );
    assert!(!all.contains(KEY));
}

#[test]
fn a_bad_config_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[llm]\nconcurency = 2\n").unwrap();
    let out = qrmem(
        &["config", "--config", path.to_str().unwrap()],
        "http://127.0.0.1:1/v1",
        dir.path(),
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        all.contains("bad.toml") && all.contains("concurency"),
        "{all}"
    );
}

#[test]
fn a_bad_flag_value_is_blamed_on_the_flags() {
    let dir = tempfile::tempdir().unwrap();
    let doc = concat!(env!("CARGO_MANIFEST_DIR"), "/data/sample/velden.txt");
    let out = dir.path().join("m.json");
    let o = qrmem(
        &[
            "build",
            "--doc",
            doc,
            "--out",
            out.to_str().unwrap(),
            "--segment-tokens",
            "5",
        ],
        "http://127.0.0.1:1/v1",
        dir.path(),
    );
    let all = text(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(
        all.contains("command-line flags") && all.contains("segment_tokens"),
        "{all}"
    );
    assert!(!out.exists());
}

/// An empty run directory holding the given notes files, and an experiment file `exp.toml`
/// with the given body, both in `dir`.
fn run_with_notes(
    dir: &Path,
    notes: &[(&str, &str)],
    experiment: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let run = dir.join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("results.jsonl"), "").unwrap();
    std::fs::write(run.join("builds.jsonl"), "").unwrap();
    for (name, body) in notes {
        std::fs::write(run.join(name), body).unwrap();
    }
    let exp = dir.join("exp.toml");
    std::fs::write(&exp, experiment).unwrap();
    (run, exp)
}

/// `qrmem eval --report-only` for that run (no LLM is reached: the URL is a closed port).
fn report_only(dir: &Path, exp: &Path, run: &Path) -> Output {
    report_only_with(dir, exp, run, &[])
}

/// As `report_only`, with more flags.
fn report_only_with(dir: &Path, exp: &Path, run: &Path, flags: &[&str]) -> Output {
    let mut args = vec![
        "eval",
        "--experiment",
        exp.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
        "--report-only",
    ];
    args.extend_from_slice(flags);
    qrmem(&args, "http://127.0.0.1:9/v1", dir)
}

/// A results line for `method` on item "q1".
fn result_line(method: &str, f1: f64) -> String {
    format!(
        r#"{{"item":"q1","dataset":"hotpotqa","method":"{method}","max_trials":null,"question":"Q?","prediction":"a","gold":["a"],"gold_letter":null,"em":{f1},"f1":{f1},"error":null,"requests":1,"cache_hits":0,"prompt_tokens":10,"completion_tokens":2,"wall_secs":1.0,"answered_by_check":false,"steps":1,"segments_used":[0],"step_failures":[]}}"#
    )
}

#[test]
fn report_rows_follow_the_experiments_method_order_when_a_run_names_a_subset() {
    let dir = tempfile::tempdir().unwrap();
    let (run, exp) = run_with_notes(
        dir.path(),
        &[],
        "title = \"t\"\ndataset = \"hotpotqa\"\nmethods = [\"kn\", \"bm25-top3\"]\n",
    );
    let rows = format!(
        "{}\n{}\n",
        result_line("bm25-top3", 1.0),
        result_line("kn", 0.0)
    );
    std::fs::write(run.join("results.jsonl"), rows).unwrap();
    // Resuming only bm25-top3 (as `--methods` does) must not move its row to the top.
    let out = report_only_with(dir.path(), &exp, &run, &["--methods", "bm25-top3"]);
    assert!(out.status.success(), "{}", text(&out));
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    let kn = report.find("| kn |").expect("a kn row");
    let bm25 = report.find("| bm25-top3 |").expect("a bm25-top3 row");
    assert!(kn < bm25, "{report}");
}

#[test]
fn a_report_only_rewrite_takes_the_experiments_notes_as_they_are_now() {
    let dir = tempfile::tempdir().unwrap();
    let (run, exp) = run_with_notes(
        dir.path(),
        &[
            ("run-notes.json", r#"["The run's label."]"#),
            // An older run's merged notes, with a note's old wording: run-notes.json supersedes it.
            (
                "notes.json",
                r#"["The run's label.", "Old wording of the note."]"#,
            ),
        ],
        "title = \"t\"\ndataset = \"hotpotqa\"\nmethods = [\"bm25-top3\"]\nnotes = [\"New wording of the note.\"]\n",
    );
    let out = report_only(dir.path(), &exp, &run);
    assert!(out.status.success(), "{}", text(&out));
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert_eq!(report.matches("The run's label.").count(), 1, "{report}");
    assert_eq!(
        report.matches("New wording of the note.").count(),
        1,
        "{report}"
    );
    assert!(!report.contains("Old wording"), "{report}");
}

#[test]
fn a_report_only_rewrite_keeps_the_runs_notes_and_adds_the_experiments() {
    let dir = tempfile::tempdir().unwrap();
    let (run, exp) = run_with_notes(
        dir.path(),
        &[(
            "notes.json",
            r#"["LongBench-style stand-in, not LongBench itself.", "Shared note."]"#,
        )],
        "title = \"t\"\ndataset = \"longbench-style\"\nmethods = [\"bm25-top3\"]\nnotes = [\"Shared note.\", \"Experiment note.\"]\n",
    );
    let out = report_only(dir.path(), &exp, &run);
    assert!(out.status.success(), "{}", text(&out));
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    for note in [
        "LongBench-style stand-in, not LongBench itself.",
        "Shared note.",
        "Experiment note.",
    ] {
        assert_eq!(report.matches(note).count(), 1, "{note}\n{report}");
    }
    // A notes file that is not a list of notes is an error naming it.
    std::fs::write(run.join("notes.json"), "{\"oops\": 1}").unwrap();
    let out = report_only(dir.path(), &exp, &run);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("notes.json is not a JSON list of notes"),
        "{}",
        text(&out)
    );
}

// The papercuts a new user meets (issue 58).

#[test]
fn a_blank_question_is_refused_before_any_call_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("doc.txt");
    std::fs::write(&doc, "Alpha lives in Beta. Beta is a town.").unwrap();
    // Nothing listens at this URL: a call would fail differently.
    let o = qrmem(
        &["ask", "--doc", doc.to_str().unwrap(), "--question", "   "],
        "http://127.0.0.1:9/v1",
        dir.path(),
    );
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("--question is empty"), "{t}");
    // No ledger for a command that made no call.
    assert!(!t.contains("wall time") && !t.contains("requests"), "{t}");
}

#[test]
fn a_command_that_fails_before_any_call_prints_no_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let o = qrmem(
        &["ask", "--doc", "no-such-file.txt", "--question", "Where?"],
        "http://127.0.0.1:9/v1",
        dir.path(),
    );
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("no-such-file.txt"), "{t}");
    assert!(!t.contains("wall time"), "{t}");
    let doc = dir.path().join("doc.txt");
    std::fs::write(&doc, "Alpha lives in Beta.").unwrap();
    let o = qrmem(
        &[
            "ask",
            "--doc",
            doc.to_str().unwrap(),
            "--question",
            "Where?",
            "--method",
            "no-such-method",
        ],
        "http://127.0.0.1:9/v1",
        dir.path(),
    );
    let t = text(&o);
    assert!(t.contains("unknown method"), "{t}");
    assert!(!t.contains("wall time"), "{t}");
}

#[test]
fn output_to_a_closed_pipe_ends_quietly_with_status_0() {
    use std::io::Read;
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    // A memory to export: the segments of a long document (no LLM needed).
    let doc = dir.path().join("doc.txt");
    let text_of_doc: String = (0..3000)
        .map(|i| format!("Sentence {i} names Entity{i} of Place{i}. "))
        .collect();
    std::fs::write(&doc, text_of_doc).unwrap();
    let memory = dir.path().join("m.qrm");
    let o = qrmem(
        &[
            "build",
            "--kind",
            "segments",
            "--doc",
            doc.to_str().unwrap(),
            "--out",
            memory.to_str().unwrap(),
            "--no-vectors",
        ],
        "http://127.0.0.1:9/v1",
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    // `qrmem export ... | head -c 10`: read 10 bytes, then close the pipe.
    let mut child = Command::new(env!("CARGO_BIN_EXE_qrmem"))
        .args(["export", memory.to_str().unwrap(), "--format", "json"])
        .env("HOME", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 10];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{err}"
    );
}

#[test]
fn a_refused_local_server_fails_fast_with_the_command_that_starts_it() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let o = qrmem(&["chat", "Say hi"], &url, dir.path());
    assert!(!o.status.success());
    let t = text(&o);
    assert!(
        t.contains(&url) && t.contains("scripts/llm-server.sh start"),
        "{t}"
    );
    // The client logs every retry (RUST_LOG=trace): there is none.
    assert!(!t.contains("retrying"), "{t}");
}

/// The corpus commands from the command line: add a directory, list, remove by name, and
/// clear errors for a missing corpus or document.
#[test]
fn corpus_commands_add_list_remove_and_name_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(docs.join("a.txt"), "Alpha founded Beta in Delta.").unwrap();
    std::fs::write(docs.join("b.md"), "Gamma sells bananas.").unwrap();
    std::fs::write(docs.join("skip.bin"), "not a document").unwrap();
    let corpus = dir.path().join("corpus");
    let c = corpus.to_str().unwrap();
    let url = "http://127.0.0.1:9/v1";
    let out = qrmem(
        &["corpus", "--corpus", c, "add", docs.to_str().unwrap()],
        url,
        dir.path(),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("added 2 documents"), "{}", text(&out));
    // Where the add's time went, part by part.
    for part in ["extraction ", "assembly ", "index "] {
        assert!(text(&out).contains(part), "{}", text(&out));
    }
    let ls = qrmem(&["corpus", "--corpus", c, "ls"], url, dir.path());
    let listed = String::from_utf8_lossy(&ls.stdout).to_string();
    assert_eq!(listed.lines().count(), 3, "{listed}");
    assert!(listed.contains("a.txt") && listed.contains("b.md") && !listed.contains("skip.bin"));
    let a = docs.join("a.txt");
    let rm = qrmem(
        &["corpus", "--corpus", c, "remove", a.to_str().unwrap()],
        url,
        dir.path(),
    );
    assert!(rm.status.success(), "{}", text(&rm));
    let inspect = qrmem(&["inspect", c], url, dir.path());
    assert!(inspect.status.success(), "{}", text(&inspect));
    assert!(
        text(&inspect).contains("documents 1, passages 1"),
        "{}",
        text(&inspect)
    );
    let gone = qrmem(
        &["corpus", "--corpus", c, "remove", "nothing.txt"],
        url,
        dir.path(),
    );
    assert!(!gone.status.success());
    assert!(
        text(&gone).contains("no document in the corpus matches 'nothing.txt'"),
        "{}",
        text(&gone)
    );
    // A file that is not UTF-8 text, and an empty one, are named and left out; the others
    // are added, and the command fails.
    std::fs::write(docs.join("c.txt"), b"\xff\xfe not text").unwrap();
    std::fs::write(docs.join("d.txt"), "  \n").unwrap();
    std::fs::write(docs.join("e.txt"), "Epsilon writes about Beta.").unwrap();
    let bad = qrmem(
        &["corpus", "--corpus", c, "add", docs.to_str().unwrap()],
        url,
        dir.path(),
    );
    assert!(!bad.status.success(), "{}", text(&bad));
    let t = text(&bad);
    assert!(
        t.contains("2 of 5 files were not added")
            && t.contains("c.txt is not UTF-8 text")
            && t.contains("d.txt is empty"),
        "{t}"
    );
    assert!(t.contains("added 2 documents (1 already present)"), "{t}");
    let missing = dir.path().join("nowhere");
    let ask = qrmem(
        &[
            "ask",
            "--corpus",
            missing.to_str().unwrap(),
            "--question",
            "Who founded Beta?",
        ],
        url,
        dir.path(),
    );
    assert!(!ask.status.success());
    assert!(text(&ask).contains("no corpus here"), "{}", text(&ask));
}

/// `qrmem eval --contexts-only` over real 2WikiMultihopQA items: every question's context under
/// every method lands in contexts.jsonl with its spans, and the table's fact recall and tokens
/// are those records' means (what `qrmem pair` pairs with a run's rows).
#[test]
fn contexts_only_writes_each_questions_spans_beside_the_table() {
    let Some(data) = common::shared_data("2wikimultihopqa/2wiki_dev40.json") else {
        return;
    };
    let Some(model) = common::embedder_model_dir() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let exp = dir.path().join("exp.toml");
    std::fs::write(
        &exp,
        format!(
            "title = \"t\"\ndataset = \"2wiki-longbench-style\"\ndata = {:?}\nmethods = [\"bm25-top3\", \"bm25-passages400\"]\n",
            data.to_str().unwrap()
        ),
    )
    .unwrap();
    let out = dir.path().join("ctx");
    let o = Command::new(env!("CARGO_BIN_EXE_qrmem"))
        .args(["eval", "--experiment", exp.to_str().unwrap(), "--out"])
        .arg(&out)
        .args(["--contexts-only", "--limit", "3"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("QRMEM_EMBED_MODEL_DIR", &model)
        .env("QRMEM_CACHE_DIR", dir.path().join("cache"))
        .env("QRMEM_LLM_BASE_URL", "http://127.0.0.1:9/v1")
        .current_dir(dir.path())
        .output()
        .expect("run qrmem");
    assert!(o.status.success(), "{}", text(&o));
    let records = common::jsonl(&out.join("contexts.jsonl"));
    assert_eq!(records.len(), 6, "3 items x 2 methods");
    let table = std::fs::read_to_string(out.join("contexts.md")).unwrap();
    for method in ["bm25-top3", "bm25-passages400"] {
        let rows: Vec<&serde_json::Value> =
            records.iter().filter(|r| r["method"] == method).collect();
        assert_eq!(rows.len(), 3, "{method}");
        let spans = |v: &serde_json::Value| -> Vec<(u64, u64)> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|s| (s[0].as_u64().unwrap(), s[1].as_u64().unwrap()))
                .collect()
        };
        let (mut recall, mut tokens) = (0.0, 0.0);
        for r in &rows {
            let gold = spans(&r["gold_spans"]);
            let shown = spans(&r["answer_spans"]);
            assert!(!gold.is_empty() && !shown.is_empty(), "{r}");
            let hits = gold
                .iter()
                .filter(|g| shown.iter().any(|s| s.0 <= g.0 && g.1 <= s.1))
                .count();
            recall += hits as f64 / gold.len() as f64 / 3.0;
            tokens += r["answer_context_tokens"].as_f64().unwrap() / 3.0;
        }
        let line = format!("| {method} | {:.1} |", 100.0 * recall);
        assert!(table.contains(&line), "{line} not in\n{table}");
        assert!(
            table.contains(&format!("| {tokens:.0} |")),
            "{tokens:.0} tokens not in\n{table}"
        );
    }
}

/// `qrmem corpus serve`: one process, one JSON reply a line per request, in order; a bad
/// request is answered with its error and the next one is served; the corpus it leaves is the
/// one the same adds and removes make from the command line.
#[test]
fn corpus_serve_answers_a_json_line_per_request_and_survives_bad_ones() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    let requests = [
        r#"{"op": "add", "name": "a.txt", "text": "Passage 1:\nRon Joyce\nRon Joyce helped found Tim Hortons in Hamilton."}"#,
        r#"{"op": "add", "name": "b.txt", "text": "Passage 1:\nHamilton\nHamilton is a port city in Ontario."}"#,
        r#"{"op": "add", "name": "b-again.txt", "text": "Passage 1:\nHamilton\nHamilton is a port city in Ontario."}"#,
        r#"{"op": "search", "query": "Where is Hamilton?", "k": 1}"#,
        r#"not json"#,
        r#"{"op": "search", "query": "  "}"#,
        r#"{"op": "remove", "docs": ["no-such-doc"]}"#,
        r#"{"op": "add", "name": "empty.txt", "text": "   "}"#,
        r#"{"op": "remove", "docs": ["a.txt"]}"#,
        r#"{"op": "search", "query": "Ron Joyce", "k": 5, "retriever": "graph-own-hop"}"#,
        r#"{"op": "ls"}"#,
    ];
    let mut child = Command::new(env!("CARGO_BIN_EXE_qrmem"))
        .args(["corpus", "--corpus", corpus.to_str().unwrap(), "serve"])
        .env("HOME", dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all((requests.join("\n") + "\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replies: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), requests.len());
    assert_eq!(replies[0]["passages"], 1);
    assert_eq!(
        replies[2]["name"], "b.txt",
        "the same text is present under its first name"
    );
    assert_eq!(replies[3]["hits"][0]["name"], "b.txt");
    for (i, what) in [
        (4, "not a request"),
        (5, "query is empty"),
        (6, "no-such-doc"),
        (7, "is empty"),
    ] {
        assert_eq!(replies[i]["ok"], false, "{i}");
        assert!(
            replies[i]["error"].as_str().unwrap().contains(what),
            "{}",
            replies[i]
        );
    }
    assert_eq!(replies[8]["removed"].as_array().unwrap().len(), 1);
    let hits = replies[9]["hits"].as_array().unwrap();
    assert!(hits.iter().all(|h| h["name"] == "b.txt"), "{hits:?}");
    let docs = replies[10]["documents"].as_array().unwrap();
    assert_eq!(docs.len(), 1);
    assert!(replies.iter().all(|r| r["ms"].as_f64().is_some()));
}

/// Bad input to the corpus commands is named and changes nothing: a directory without text,
/// an empty query.
#[test]
fn corpus_refuses_a_directory_without_text_and_an_empty_query() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    let empty = dir.path().join("nothing-here");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("image.png"), [0u8, 1, 2]).unwrap();
    let url = "http://127.0.0.1:9/v1";
    let c = corpus.to_str().unwrap();
    let add = qrmem(
        &["corpus", "--corpus", c, "add", empty.to_str().unwrap()],
        url,
        dir.path(),
    );
    assert!(!add.status.success());
    assert!(
        text(&add).contains("holds no .txt or .md file"),
        "{}",
        text(&add)
    );
    std::fs::write(dir.path().join("a.txt"), "Alpha is a town.").unwrap();
    let a = dir.path().join("a.txt");
    assert!(qrmem(
        &["corpus", "--corpus", c, "add", a.to_str().unwrap()],
        url,
        dir.path()
    )
    .status
    .success());
    let search = qrmem(&["corpus", "--corpus", c, "search", "   "], url, dir.path());
    assert!(!search.status.success());
    assert!(
        text(&search).contains("the query is empty"),
        "{}",
        text(&search)
    );
}
