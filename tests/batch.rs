//! `qrmem batch`: faults from the LLM server, bad input, kill -9 and resume, and the API key
//! never leaking. The library tests use a bag-of-words embedder; the binary tests need the
//! packaged embedder model (skipped with a message without it unless QRMEM_REQUIRE_EMBEDDER=1).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::bow::Bow;
use common::fault_server::{Behaviour, FaultServer};
use qrmem::batch::{AnswerRecord, BatchOptions, Status};
use qrmem::config::{Config, LlmConfig, Secret};
use qrmem::llm::{OpenAiClient, Policy, Scripted, ScriptedLlm, Service};
use qrmem::methods::Runtime;
use qrmem::prompts::Prompts;

const ANSWER: &str = r#"{"reasoning": "The text names it.", "answer": "Lucerne"}"#;

fn options(dir: &Path, retry_failed: bool) -> BatchOptions {
    BatchOptions {
        method: "bm25-top2".parse().unwrap(),
        memory_dir: dir.join("memories"),
        max_document_bytes: 4 * 1024 * 1024,
        concurrency: 4,
        retry_failed,
        progress: false,
        corpus: None,
    }
}

fn policy() -> Policy {
    Policy {
        temperature: 0.0,
        max_tokens: 64,
        frequency_penalty: 0.0,
        json_retries: 1,
        retry_temperature: 0.7,
    }
}

fn records(path: &Path) -> Vec<AnswerRecord> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("torn or bad line {l:?}: {e}")))
        .collect()
}

fn keys(rs: &[AnswerRecord]) -> Vec<(Option<String>, Option<String>)> {
    rs.iter()
        .map(|r| (r.job.clone(), r.question_id.clone()))
        .collect()
}

/// `n_jobs` jobs of `per_job` questions over short inline documents.
fn jobs_file(dir: &Path, n_jobs: usize, per_job: usize) -> PathBuf {
    let mut text = String::new();
    for j in 0..n_jobs {
        let questions: Vec<serde_json::Value> = (0..per_job)
            .map(|q| serde_json::json!({"id": format!("q{q}"), "question": format!("Where was designer {q} of bridge {j} born?")}))
            .collect();
        let job = serde_json::json!({
            "id": format!("job-{j}"),
            "doc": format!("Bridge {j} was designed by Clara Hoffmann. Clara Hoffmann was born in Lucerne. The bridge has {j} arches."),
            "questions": questions,
        });
        text.push_str(&job.to_string());
        text.push('\n');
    }
    let path = dir.join("jobs.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_questions_under_faults_lose_and_duplicate_nothing() {
    // A 429 storm first (Retry-After honoured, capped at 200 ms). At most 16 questions are in
    // flight (4 jobs x 4 questions) and none can finish inside the storm except by failing its
    // 3 attempts, so 33 refusals must fail at least one question. Then every other fault once.
    let mut script = vec![Behaviour::Status(429, Some(1), "slow down".into()); 33];
    script.extend([
        Behaviour::Status(500, None, "boom".into()),
        Behaviour::Hang(Duration::from_secs(3), ANSWER.into()),
        Behaviour::Malformed("<html>proxy error</html>".into()),
        Behaviour::Drop,
        Behaviour::Empty,
        Behaviour::CutOff(r#"{"reasoning": "The text na"#.into()),
        Behaviour::Reply("I think it is Lucerne.".into()),
        Behaviour::Reply("not JSON either".into()),
        Behaviour::Status(503, Some(0), "busy".into()),
    ]);
    let server = FaultServer::start(script, Behaviour::Reply(ANSWER.into())).await;
    let config = LlmConfig {
        base_urls: vec![server.url.clone()],
        model: "fault-model".into(),
        timeout_secs: 1.0,
        max_retries: 2,
        backoff_base_ms: 10,
        backoff_max_ms: 200,
        concurrency: 4,
        ..LlmConfig::default()
    };
    let client = OpenAiClient::new(&config, Secret::default()).unwrap();
    let svc = Service::new(Arc::new(client), None, policy());
    let prompts = Prompts::load().unwrap();
    let cfg = Config::default();
    let ctx = Runtime {
        llm: &svc,
        prompts: &prompts,
        embedder: &Bow,
        config: &cfg,
    };
    let dir = tempfile::tempdir().unwrap();
    let input = jobs_file(dir.path(), 4, 5);
    let output = dir.path().join("answers.jsonl");
    let s = qrmem::batch::run(&ctx, &input, &output, &options(dir.path(), false))
        .await
        .unwrap();
    let rs = records(&output);
    let unique: BTreeSet<_> = keys(&rs).into_iter().collect();
    let (answered, failed) = (
        rs.iter().filter(|r| r.status == Status::Answered).count(),
        rs.iter().filter(|r| r.status == Status::Failed).count(),
    );
    let t = s.ledger.total();
    eprintln!(
        "fault batch: server hits {}, at most {} at once, requests {}, retries {}, errors {}, unparsable {}, answered {}, failed {}, lines {}",
        server.hits(), server.max_in_flight(), t.requests, t.retries, t.errors, t.unparsable, answered, failed, rs.len()
    );
    assert_eq!(rs.len(), 20, "one line per question");
    assert_eq!(unique.len(), 20, "no question twice");
    assert_eq!((s.answered, s.failed, s.invalid), (answered, failed, 0));
    assert_eq!(answered + failed, 20);
    assert!(
        failed >= 1 && t.errors >= 1,
        "the 429 storm must fail a question"
    );
    // 33 refusals fail at most 11 questions, 3 unparsable replies at most 1 more.
    assert!(answered >= 8, "{answered}");
    for r in &rs {
        match r.status {
            Status::Answered => assert_eq!(r.answer.as_deref(), Some("Lucerne"), "{r:?}"),
            _ => assert!(
                r.error.as_deref().unwrap_or("").contains("question 'q"),
                "{r:?}"
            ),
        }
    }
    // The ledger's totals and the per-question costs agree, and every attempt the server saw
    // is accounted for: requests + failed calls + retries.
    assert_eq!(rs.iter().map(|r| r.requests).sum::<u64>(), t.requests);
    assert_eq!(server.hits() as u64, t.requests + t.errors + t.retries);
    assert!(server.max_in_flight() <= 4, "{}", server.max_in_flight());

    // Re-run: nothing to do. With --retry-failed the failures (and only they) run again.
    let again = qrmem::batch::run(&ctx, &input, &output, &options(dir.path(), false))
        .await
        .unwrap();
    assert_eq!((again.answered + again.failed, again.skipped), (0, 20));
    let retried = qrmem::batch::run(&ctx, &input, &output, &options(dir.path(), true))
        .await
        .unwrap();
    assert_eq!(
        (retried.answered, retried.failed, retried.skipped),
        (failed, 0, answered)
    );
    let rs = records(&output);
    assert_eq!(rs.len(), 20);
    assert!(rs.iter().all(|r| r.status == Status::Answered));
}

fn scripted_ctx_parts() -> (Service, Arc<ScriptedLlm>) {
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(|_| Scripted::Reply(ANSWER.into())));
    (Service::new(llm.clone(), None, policy()), llm)
}

#[tokio::test]
async fn bad_input_gets_one_clear_error_each_and_the_rest_completes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("latin1.txt"), b"Caf\xe9 au lait in Z\xfcrich").unwrap();
    std::fs::write(d.join("empty.txt"), "  \n").unwrap();
    std::fs::write(d.join("good.txt"), "Clara Hoffmann was born in Lucerne.").unwrap();
    let big = std::fs::File::create(d.join("big.txt")).unwrap();
    big.set_len(10 * 1024 * 1024).unwrap();
    let lines: Vec<Vec<u8>> = vec![
        br#"{"id": "broken", "doc": "unterminated"#.to_vec(),
        br#"{"id": "missing", "doc_path": "nope.txt", "questions": [{"id": "q", "question": "Where?"}]}"#.to_vec(),
        br#"{"id": "latin1", "doc_path": "latin1.txt", "questions": [{"id": "q", "question": "Where?"}]}"#.to_vec(),
        br#"{"id": "emptydoc", "doc_path": "empty.txt", "questions": [{"id": "q", "question": "Where?"}]}"#.to_vec(),
        br#"{"id": "emptyq", "doc": "Some text.", "questions": [{"id": "q", "question": "  "}]}"#.to_vec(),
        br#"{"id": "big", "doc_path": "big.txt", "questions": [{"id": "q", "question": "Where?"}]}"#.to_vec(),
        br#"{"id": "good", "doc_path": "good.txt", "questions": [{"id": "q1", "question": "Where was Clara Hoffmann born?"}, {"id": "q2", "question": "Who was born in Lucerne?"}, {"id": "q1", "question": "Again?"}]}"#.to_vec(),
        br#"{"id": "good", "doc": "Another document.", "questions": [{"id": "q9", "question": "Where?"}]}"#.to_vec(),
        b"{\"id\": \"bytes\", \"doc\": \"\xff\xfe\", \"questions\": []}".to_vec(),
        br#"{"id": "both", "doc": "x", "doc_path": "good.txt", "questions": [{"id": "q", "question": "Where?"}]}"#.to_vec(),
        br#"{"id": "noq", "doc": "x", "questions": []}"#.to_vec(),
        br#"{"id": "typo", "doc": "x", "qustions": []}"#.to_vec(),
    ];
    let mut text = Vec::new();
    for l in &lines {
        text.extend_from_slice(l);
        text.push(b'\n');
    }
    std::fs::write(d.join("jobs.jsonl"), text).unwrap();
    let (svc, _llm) = scripted_ctx_parts();
    let prompts = Prompts::load().unwrap();
    let cfg = Config::default();
    let ctx = Runtime {
        llm: &svc,
        prompts: &prompts,
        embedder: &Bow,
        config: &cfg,
    };
    let output = d.join("answers.jsonl");
    let s = qrmem::batch::run(&ctx, &d.join("jobs.jsonl"), &output, &options(d, false))
        .await
        .unwrap();
    let rs = records(&output);
    let error_of = |line: usize| -> String {
        let hits: Vec<&AnswerRecord> = rs
            .iter()
            .filter(|r| r.line == line && r.status == Status::Invalid)
            .collect();
        assert!(!hits.is_empty(), "no error for line {line}: {rs:#?}");
        let e = hits[0].error.clone().unwrap();
        assert!(
            e.contains(&format!("jobs.jsonl:{line}")),
            "line {line} not named: {e}"
        );
        e
    };
    let expect = [
        (1, "not a job"),
        (2, "cannot read the document"),
        (3, "not UTF-8"),
        (4, "the document is empty"),
        (5, "question 'q' is empty"),
        (6, "over the limit of 4194304"),
        (7, "duplicated question id 'q1'"),
        (8, "duplicated job id 'good' (first on line 7)"),
        (9, "not UTF-8"),
        (10, "not both"),
        (11, "no questions"),
        (12, "unknown field `qustions`"),
    ];
    for (line, needle) in expect {
        let e = error_of(line);
        assert!(e.contains(needle), "line {line}: {e}");
    }
    assert!(error_of(2).contains("job 'missing'"));
    let answered: Vec<_> = rs.iter().filter(|r| r.status == Status::Answered).collect();
    assert_eq!(answered.len(), 2, "{rs:#?}");
    assert!(answered
        .iter()
        .all(|r| r.job.as_deref() == Some("good") && r.line == 7));
    assert_eq!((s.answered, s.invalid, s.failed), (2, 12, 0));

    // A re-run writes nothing new; the jobs file itself missing is an error of the run.
    qrmem::batch::run(&ctx, &d.join("jobs.jsonl"), &output, &options(d, false))
        .await
        .unwrap();
    assert_eq!(records(&output).len(), rs.len());
    let err = qrmem::batch::run(&ctx, &d.join("absent.jsonl"), &output, &options(d, false))
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("absent.jsonl"), "{err}");
}

#[tokio::test]
async fn a_document_is_built_once_and_an_unreadable_memory_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut o = options(d, false);
    o.method = "kn".parse().unwrap();
    let doc = common::velden::DOC;
    let job = |id: &str, q: &str| {
        serde_json::json!({"id": id, "doc": doc, "questions": [{"id": "q", "question": q}]})
            .to_string()
    };
    std::fs::write(d.join("a.jsonl"), job("a", common::velden::QUESTION) + "\n").unwrap();
    std::fs::write(
        d.join("b.jsonl"),
        job("b", "Who designed the Velden Bridge?") + "\n",
    )
    .unwrap();
    let llm = Arc::new(ScriptedLlm::new([]).with_responder(|r| {
        let p = common::velden::prompt_of(r);
        if p.contains("Extract the key entities named in the question") {
            Scripted::Reply(r#"{"entities": ["Velden Bridge"]}"#.into())
        } else if p.contains("If the answer CANNOT be inferred") {
            Scripted::Reply(
                r#"{"reasoning": "It says so.", "action": -2, "answer": "Lucerne"}"#.into(),
            )
        } else if p.contains("give your best guess") {
            Scripted::Reply(ANSWER.into())
        } else {
            common::velden::reply(r, false)
        }
    }));
    let svc = Service::new(llm.clone(), None, policy());
    let prompts = Prompts::load().unwrap();
    let mut cfg = Config::default();
    cfg.memory.segment_tokens = 150;
    let ctx = Runtime {
        llm: &svc,
        prompts: &prompts,
        embedder: &Bow,
        config: &cfg,
    };
    let s = qrmem::batch::run(&ctx, &d.join("a.jsonl"), &d.join("a.out"), &o)
        .await
        .unwrap();
    assert_eq!((s.answered, s.memories_built), (1, 1));
    let builds = llm
        .received()
        .iter()
        .filter(|r| common::velden::conversation_of(r).contains("You build the knowledge graph"))
        .count();
    assert!(builds > 0);
    // The same document in another job: loaded, no build call.
    let s = qrmem::batch::run(&ctx, &d.join("b.jsonl"), &d.join("b.out"), &o)
        .await
        .unwrap();
    assert_eq!((s.answered, s.memories_built, s.memories_loaded), (1, 0, 1));
    let after = llm
        .received()
        .iter()
        .filter(|r| common::velden::conversation_of(r).contains("You build the knowledge graph"))
        .count();
    assert_eq!(after, builds);
    // A truncated memory file is reported and rebuilt, never trusted.
    let files: Vec<PathBuf> = std::fs::read_dir(d.join("memories"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1);
    let bytes = std::fs::read(&files[0]).unwrap();
    std::fs::write(&files[0], &bytes[..bytes.len() / 2]).unwrap();
    let err = qrmem::memory::load(&files[0]).err().unwrap().to_string();
    assert!(err.contains("corrupt or truncated"), "{err}");
    std::fs::remove_file(d.join("b.out")).unwrap();
    let s = qrmem::batch::run(&ctx, &d.join("b.jsonl"), &d.join("b.out"), &o)
        .await
        .unwrap();
    assert_eq!((s.answered, s.memories_built), (1, 1));
    assert!(qrmem::memory::load(&files[0]).is_ok());
}

/// The binary against the fault server, with the packaged embedder.
fn batch_command(home: &Path, url: &str, model_dir: &Path, input: &Path, output: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_qrmem"));
    c.args(["batch", "--method", "bm25-top1", "--input"])
        .arg(input)
        .arg("--output")
        .arg(output)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("QRMEM_LLM_BASE_URL", url)
        .env("QRMEM_LLM_MODEL", "fault-model")
        .env("QRMEM_LLM_BACKOFF_BASE_MS", "10")
        .env("QRMEM_EMBED_MODEL_DIR", model_dir)
        .env("QRMEM_CACHE_DIR", home.join("llm-cache"))
        .current_dir(home)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_run_then_resume_matches_an_uninterrupted_run() {
    let Some(model_dir) = common::embedder_model_dir() else {
        return;
    };
    // Slow replies (0.3 s each), so the kill lands mid-run.
    let server = FaultServer::start(
        vec![],
        Behaviour::Hang(Duration::from_millis(300), ANSWER.into()),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = jobs_file(d, 3, 4);
    let reference = d.join("reference.jsonl");
    let out = batch_command(d, &server.url, &model_dir, &input, &reference)
        .arg("--no-cache")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = records(&reference);
    assert_eq!(expected.len(), 12);

    let output = d.join("answers.jsonl");
    let mut child = batch_command(d, &server.url, &model_dir, &input, &output)
        .arg("--no-cache")
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        let n = std::fs::read_to_string(&output)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if n >= 3 || started.elapsed() > Duration::from_secs(60) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = std::fs::read_to_string(&output).unwrap().lines().count();
    assert!((3..12).contains(&before), "killed after {before} answers");
    let out = batch_command(d, &server.url, &model_dir, &input, &output)
        .arg("--no-cache")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("skipped (already in the output) {before}")),
        "{stderr}"
    );
    let got = records(&output);
    assert_eq!(got.len(), 12, "nothing lost, nothing duplicated");
    let mut a: Vec<_> = got
        .iter()
        .map(|r| {
            (
                r.job.clone(),
                r.question_id.clone(),
                r.answer.clone(),
                r.status,
            )
        })
        .collect();
    let mut b: Vec<_> = expected
        .iter()
        .map(|r| {
            (
                r.job.clone(),
                r.question_id.clone(),
                r.answer.clone(),
                r.status,
            )
        })
        .collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_never_reaches_output_logs_cache_or_memories() {
    let Some(model_dir) = common::embedder_model_dir() else {
        return;
    };
    const KEY: &str = "sk-batch-leak-check-91c2e";
    // The first request is refused with a body that echoes the key, as some proxies do.
    let server = FaultServer::start(
        vec![Behaviour::Status(
            401,
            None,
            format!("invalid api key {KEY}"),
        )],
        Behaviour::Reply(ANSWER.into()),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = jobs_file(d, 2, 2);
    let output = d.join("answers.jsonl");
    let out = batch_command(d, &server.url, &model_dir, &input, &output)
        .env("QRMEM_LLM_API_KEY", KEY)
        .env("QRMEM_LLM_CONCURRENCY", "1")
        .env("RUST_LOG", "trace")
        .args(["--memory-dir", "mem"])
        .output()
        .unwrap();
    let all = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains(KEY), "the key leaked into the output");
    assert_eq!(
        out.status.code(),
        Some(2),
        "one question failed on the 401: {all}"
    );
    // The key was sent, as a bearer token.
    assert!(server
        .seen()
        .iter()
        .any(|s| s.head.contains(&format!("Bearer {KEY}"))));
    let rs = records(&output);
    assert_eq!(rs.len(), 4);
    assert_eq!(rs.iter().filter(|r| r.status == Status::Failed).count(), 1);
    let mut stack = vec![d.to_path_buf()];
    while let Some(p) = stack.pop() {
        for e in std::fs::read_dir(&p).unwrap().flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).to_string();
                assert!(
                    !text.contains(KEY),
                    "the key leaked into {}",
                    path.display()
                );
            }
        }
    }
}

/// `batch --corpus`: every question of a job that names no document is asked across the
/// corpus, its line naming the passages read; a job that names a document is refused.
#[tokio::test]
async fn with_a_corpus_the_questions_are_asked_across_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    use qrmem::corpus::CorpusStore;
    let mut corpus = qrmem::corpus::Corpus::open(&d.join("corpus"), 300).unwrap();
    corpus
        .add(
            "clara.txt",
            "Clara Hoffmann was born in Lucerne. She designed the Velden Bridge.",
        )
        .unwrap();
    corpus
        .add("other.txt", "The harbour of Genoa is old.")
        .unwrap();
    drop(corpus);
    let jobs = d.join("jobs.jsonl");
    std::fs::write(
        &jobs,
        concat!(
            r#"{"id": "j", "questions": [{"id": "q1", "question": "Where was Clara Hoffmann born?"}, {"id": "q2", "question": "Who designed the Velden Bridge?"}]}"#,
            "\n",
            r#"{"id": "withdoc", "doc": "x", "questions": [{"id": "q", "question": "Where?"}]}"#,
            "\n"
        ),
    )
    .unwrap();
    let (svc, llm) = scripted_ctx_parts();
    let prompts = Prompts::load().unwrap();
    let config = Config::default();
    let ctx = Runtime {
        llm: &svc,
        prompts: &prompts,
        embedder: &Bow,
        config: &config,
    };
    let mut opts = options(d, false);
    opts.corpus = Some(qrmem::batch::CorpusJobs {
        dir: d.join("corpus"),
        retriever: qrmem::methods::CorpusMethod::Retrieve(qrmem::corpus::Retriever::Bm25),
        context_tokens: 200,
    });
    let out = d.join("answers.jsonl");
    let summary = qrmem::batch::run(&ctx, &jobs, &out, &opts).await.unwrap();
    assert_eq!((summary.answered, summary.invalid), (2, 1), "{summary}");
    let rs = records(&out);
    let answered: Vec<&AnswerRecord> = rs.iter().filter(|r| r.status == Status::Answered).collect();
    for r in &answered {
        assert_eq!(r.method, "corpus-bm25-passages200");
        assert_eq!(r.answer.as_deref(), Some("Lucerne"));
        assert!(
            r.sources.as_deref().unwrap_or("").contains("clara.txt#0"),
            "{r:?}"
        );
    }
    let bad = rs.iter().find(|r| r.status == Status::Invalid).unwrap();
    assert!(bad
        .error
        .as_deref()
        .unwrap()
        .contains("with --corpus a job names no document"));
    assert!(llm.received()[0]
        .messages
        .last()
        .unwrap()
        .content
        .contains("[clara.txt]"));
    // Resumed: nothing is asked again.
    let again = qrmem::batch::run(&ctx, &jobs, &out, &opts).await.unwrap();
    assert_eq!(again.skipped, 3);
}
