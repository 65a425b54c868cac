//! The OpenAI-compatible client against a server that misbehaves on purpose.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::fault_server::{Behaviour, FaultServer, ImpatientServer, KeepAliveServer};
use qrmem::config::{LlmConfig, Secret};
use qrmem::llm::{ChatRequest, JsonSchema, Llm, Message, OpenAiClient, Policy, Sampling, Service};
use qrmem::LlmError;
use serde::Deserialize;

fn config(urls: Vec<String>) -> LlmConfig {
    LlmConfig {
        base_urls: urls,
        model: "fault-model".into(),
        timeout_secs: 1.0,
        max_retries: 3,
        backoff_base_ms: 20,
        backoff_max_ms: 200,
        ..LlmConfig::default()
    }
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("Say hi")],
        sampling: Sampling {
            temperature: 0.0,
            max_tokens: 16,
            frequency_penalty: 0.0,
            seed: None,
            top_logprobs: 0,
            cut_repeats: 0,
            cut_repeats_in: None,
        },
        schema: None,
    }
}

fn ok(text: &str) -> Behaviour {
    Behaviour::Reply(text.into())
}

#[tokio::test]
async fn retries_500s_then_succeeds() {
    let server = FaultServer::start(
        vec![
            Behaviour::Status(500, None, "boom".into()),
            Behaviour::Status(503, None, "busy".into()),
        ],
        ok("hi"),
    )
    .await;
    let client = OpenAiClient::new(&config(vec![server.url.clone()]), Secret::default()).unwrap();
    let reply = client.chat(&request()).await.unwrap();
    assert_eq!(reply.content, "hi");
    assert_eq!(reply.attempts, 3);
    assert_eq!(server.hits(), 3);
    assert_eq!(reply.usage.prompt_tokens, 11);
}

#[tokio::test]
async fn honours_retry_after_on_429() {
    let server = FaultServer::start(
        vec![Behaviour::Status(429, Some(1), "slow down".into())],
        ok("hi"),
    )
    .await;
    // Backoff alone would wait at most 20 ms: an elapsed time near 1 s shows Retry-After was used.
    let client = OpenAiClient::new(
        &LlmConfig {
            backoff_max_ms: 5_000,
            ..config(vec![server.url.clone()])
        },
        Secret::default(),
    )
    .unwrap();
    let started = Instant::now();
    let reply = client.chat(&request()).await.unwrap();
    let waited = started.elapsed();
    assert_eq!((reply.content.as_str(), reply.attempts), ("hi", 2));
    assert!(
        waited >= Duration::from_millis(950),
        "waited only {waited:?}"
    );
    assert!(waited < Duration::from_secs(4), "waited {waited:?}");
}

#[tokio::test]
async fn retry_after_is_capped_by_backoff_max() {
    let server = FaultServer::start(
        vec![Behaviour::Status(429, Some(3600), "later".into())],
        ok("hi"),
    )
    .await;
    let client = OpenAiClient::new(&config(vec![server.url.clone()]), Secret::default()).unwrap();
    let started = Instant::now();
    client.chat(&request()).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_connection_idle_past_the_pool_limit_is_not_reused() {
    // llama.cpp closes a kept-alive connection after 5 s idle; a client that reuses one as the
    // server closes it sees "connection closed before message completed" and must retry. The
    // client drops connections idle for 2 s, so the request after a pause opens a new one.
    let server = KeepAliveServer::start(Duration::from_millis(500), "hi").await;
    let client = OpenAiClient::new(&config(vec![server.url.clone()]), Secret::default()).unwrap();
    let first = client.chat(&request()).await.unwrap();
    let again = client.chat(&request()).await.unwrap();
    assert_eq!((first.attempts, again.attempts), (1, 1));
    let before = server.connections();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let after_pause = client.chat(&request()).await.unwrap();
    assert_eq!(after_pause.content, "hi");
    assert_eq!(
        (after_pause.attempts, server.closed_on_arrival()),
        (1, 0),
        "the stale connection was reused"
    );
    assert_eq!(server.connections(), before + 1);
}

#[tokio::test]
async fn a_caller_that_blocks_its_runtime_does_not_stall_its_request() {
    // llama.cpp closes a connection on which no request starts within 5 s. A caller whose
    // runtime thread is busy with CPU work (here: its only thread, for 1.5 s) must not leave an
    // opened connection silent that long: the exchange runs on the client's own I/O thread.
    let server = ImpatientServer::start(Duration::from_millis(500), "hi");
    let client = OpenAiClient::new(&config(vec![server.url.clone()]), Secret::default()).unwrap();
    let req = request();
    let chat = client.chat(&req);
    tokio::pin!(chat);
    assert!(futures::poll!(chat.as_mut()).is_pending());
    std::thread::sleep(Duration::from_millis(1500));
    let reply = chat.await.unwrap();
    assert_eq!((reply.content.as_str(), reply.attempts), ("hi", 1));
    assert_eq!(server.gave_up(), 0);
}

#[tokio::test]
async fn a_hang_past_the_timeout_is_retried() {
    let server = FaultServer::start(
        vec![Behaviour::Hang(Duration::from_secs(5), "late".into())],
        ok("on time"),
    )
    .await;
    let client = OpenAiClient::new(&config(vec![server.url.clone()]), Secret::default()).unwrap();
    let reply = client.chat(&request()).await.unwrap();
    assert_eq!((reply.content.as_str(), reply.attempts), ("on time", 2));
}

#[tokio::test]
async fn malformed_body_dropped_connection_and_empty_reply_are_retried() {
    let server = FaultServer::start(
        vec![
            Behaviour::Malformed("{\"choices\": [".into()),
            Behaviour::Drop,
            Behaviour::Empty,
            Behaviour::Malformed("<html>proxy error</html>".into()),
        ],
        ok("finally"),
    )
    .await;
    let client = OpenAiClient::new(
        &LlmConfig {
            max_retries: 4,
            ..config(vec![server.url.clone()])
        },
        Secret::default(),
    )
    .unwrap();
    let reply = client.chat(&request()).await.unwrap();
    assert_eq!((reply.content.as_str(), reply.attempts), ("finally", 5));
}

#[tokio::test]
async fn gives_a_typed_error_after_the_retry_budget() {
    let server =
        FaultServer::start(vec![], Behaviour::Status(500, None, "always down".into())).await;
    let client = OpenAiClient::new(&config(vec![server.url.clone()]), Secret::default()).unwrap();
    let err = client.chat(&request()).await.unwrap_err();
    match &err {
        LlmError::RetriesExhausted { attempts, last, .. } => {
            assert_eq!(*attempts, 4);
            assert!(
                matches!(**last, LlmError::Http { status: 500, .. }),
                "{last}"
            );
        }
        other => panic!("expected RetriesExhausted, got {other}"),
    }
    assert_eq!(server.hits(), 4);
    assert!(err.to_string().contains("always down"));
}

#[tokio::test]
async fn timeouts_exhaust_to_a_timeout_error() {
    let server = FaultServer::start(
        vec![],
        Behaviour::Hang(Duration::from_secs(5), "late".into()),
    )
    .await;
    let client = OpenAiClient::new(
        &LlmConfig {
            max_retries: 1,
            timeout_secs: 0.3,
            ..config(vec![server.url.clone()])
        },
        Secret::default(),
    )
    .unwrap();
    let err = client.chat(&request()).await.unwrap_err();
    match err {
        LlmError::RetriesExhausted {
            attempts: 2, last, ..
        } => {
            assert!(matches!(*last, LlmError::Timeout { .. }), "{last}")
        }
        other => panic!("expected timeouts, got {other}"),
    }
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = FaultServer::start(
        vec![],
        Behaviour::Status(400, None, "context length exceeded".into()),
    )
    .await;
    let client = OpenAiClient::new(&config(vec![server.url.clone()]), Secret::default()).unwrap();
    let err = client.chat(&request()).await.unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 400, .. }), "{err}");
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn a_local_server_that_is_not_running_fails_at_once_saying_how_to_start_it() {
    // Bind and drop: nothing listens on that port any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let client = OpenAiClient::new(
        &LlmConfig {
            max_retries: 3,
            backoff_base_ms: 2_000,
            ..config(vec![url.clone()])
        },
        Secret::default(),
    )
    .unwrap();
    // Not RetriesExhausted: the first refusal ends the call.
    let err = client.chat(&request()).await.unwrap_err();
    assert!(matches!(err, LlmError::ServerDown { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&url) && text.contains("scripts/llm-server.sh start"),
        "{text}"
    );
    assert!(!err.is_retryable());

    // With another server to go to, a refused one is a connection error, retried elsewhere.
    let client = OpenAiClient::new(
        &LlmConfig {
            max_retries: 1,
            ..config(vec![url.clone(), url])
        },
        Secret::default(),
    )
    .unwrap();
    match client.chat(&request()).await.unwrap_err() {
        LlmError::RetriesExhausted { last, .. } => {
            assert!(matches!(*last, LlmError::Connect { .. }), "{last}")
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn falls_back_to_json_object_when_json_schema_is_rejected() {
    let server = FaultServer::start(vec![], Behaviour::RejectJsonSchema("{\"n\": 3}".into())).await;
    let client = OpenAiClient::new(&config(vec![server.url.clone()]), Secret::default()).unwrap();
    let mut req = request();
    req.schema = Some(JsonSchema {
        name: "n".into(),
        schema: serde_json::json!({"type": "object"}),
    });
    let reply = client.chat(&req).await.unwrap();
    assert_eq!(reply.content, "{\"n\": 3}");
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].body.contains("\"json_schema\""));
    assert!(seen[1].body.contains("\"json_object\"") && !seen[1].body.contains("\"json_schema\""));
    // Remembered: the next structured call goes straight to json_object.
    client.chat(&req).await.unwrap();
    assert_eq!(server.hits(), 3);
}

#[tokio::test]
async fn a_schema_goes_out_with_its_properties_in_required_order() {
    // A grammar-constrained server writes the reply's keys in the schema's order: "reasoning"
    // must come before "answer" in both response formats, not in name order.
    let server = FaultServer::start(
        vec![],
        Behaviour::RejectJsonSchema("{\"reasoning\": \"r\", \"answer\": \"a\"}".into()),
    )
    .await;
    let client = OpenAiClient::new(&config(vec![server.url.clone()]), Secret::default()).unwrap();
    let mut req = request();
    req.schema = Some(JsonSchema {
        name: "answer".into(),
        schema: serde_json::json!({"type": "object", "properties": {
            "reasoning": {"type": "string"},
            "answer": {"type": "string"},
            "extra": {"type": "object", "properties": {"z": {}, "b": {}}, "required": ["z", "b"]}
        }, "required": ["reasoning", "answer"]}),
    });
    client.chat(&req).await.unwrap();
    let seen = server.seen();
    assert_eq!(seen.len(), 2, "json_schema, then json_object");
    for s in &seen {
        let at = |key: &str| s.body.find(&format!("\"{key}\":{{")).unwrap();
        assert!(at("reasoning") < at("answer"), "{}", s.body);
        // Properties outside `required` follow; nested objects keep their own order.
        assert!(
            at("answer") < at("extra") && at("z") < at("b"),
            "{}",
            s.body
        );
    }
}

#[tokio::test]
async fn round_robin_over_base_urls_and_failover() {
    let a = FaultServer::start(vec![], ok("a")).await;
    let b = FaultServer::start(vec![Behaviour::Status(503, None, "down".into())], ok("b")).await;
    let client = OpenAiClient::new(
        &config(vec![a.url.clone(), b.url.clone()]),
        Secret::default(),
    )
    .unwrap();
    let mut answers = Vec::new();
    for _ in 0..4 {
        answers.push(client.chat(&request()).await.unwrap().content);
    }
    // Attempts alternate a, b, a, b, ...: call 2 meets b's 503 and fails over to a, so calls
    // 3 and 4 land on b and a.
    assert_eq!(answers, vec!["a", "a", "b", "a"]);
    assert_eq!((a.hits(), b.hits()), (3, 2));
}

#[tokio::test]
async fn concurrency_limit_is_shared_by_all_callers() {
    let server = FaultServer::start(
        vec![],
        Behaviour::Hang(Duration::from_millis(200), "ok".into()),
    )
    .await;
    let client = Arc::new(
        OpenAiClient::new(
            &LlmConfig {
                concurrency: 2,
                ..config(vec![server.url.clone()])
            },
            Secret::default(),
        )
        .unwrap(),
    );
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let c = client.clone();
        tasks.push(tokio::spawn(async move { c.chat(&request()).await }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(server.hits(), 6);
    assert_eq!(server.max_in_flight(), 2);
}

#[tokio::test]
async fn the_ledger_counts_requests_at_the_server_not_those_queued_for_a_permit() {
    // 6 callers, 2 permits, 200 ms per request: 3 waves. The server never sees more than 2,
    // and the ledger's in-flight gauge must say the same (mean close to 2, max exactly 2).
    let server = FaultServer::start(
        vec![],
        Behaviour::Hang(Duration::from_millis(200), "ok".into()),
    )
    .await;
    let client = OpenAiClient::new(
        &LlmConfig {
            concurrency: 2,
            ..config(vec![server.url.clone()])
        },
        Secret::default(),
    )
    .unwrap();
    let policy = Policy {
        temperature: 0.0,
        max_tokens: 32,
        frequency_penalty: 0.0,
        json_retries: 0,
        retry_temperature: 0.7,
    };
    let svc = Service::new(Arc::new(client), None, policy);
    let req = request();
    let calls = (0..6).map(|_| svc.chat("t", &req));
    for r in futures::future::join_all(calls).await {
        r.unwrap();
    }
    let f = svc.ledger().snapshot().in_flight;
    assert_eq!(server.max_in_flight(), 2);
    assert_eq!(f.max, 2, "{f:?}");
    assert!(f.mean() > 1.5 && f.mean() <= 2.0 + 1e-9, "{f:?}");
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct Answer {
    answer: String,
}

#[tokio::test]
async fn unparsable_model_output_fails_the_step_after_the_paper_budget() {
    let server = FaultServer::start(
        vec![Behaviour::CutOff("{\"answer\": \"Par".into())],
        ok("I think it is Paris."),
    )
    .await;
    let client = OpenAiClient::new(&config(vec![server.url.clone()]), Secret::default()).unwrap();
    let policy = Policy {
        temperature: 0.0,
        max_tokens: 32,
        frequency_penalty: 0.5,
        json_retries: 4,
        retry_temperature: 0.7,
    };
    let svc = Service::new(Arc::new(client), None, policy);
    let err = svc
        .chat_json::<Answer>("answer", vec![Message::user("Capital of France?")], None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, LlmError::Unparsable { attempts: 5, .. }),
        "{err}"
    );
    assert_eq!(server.hits(), 5);
    let bodies: Vec<serde_json::Value> = server
        .seen()
        .iter()
        .map(|s| serde_json::from_str(&s.body).unwrap())
        .collect();
    assert_eq!(bodies[0]["temperature"], 0.0);
    for b in &bodies[1..] {
        assert!((b["temperature"].as_f64().unwrap() - 0.7).abs() < 1e-6);
    }
    let ledger = svc.ledger().snapshot();
    assert_eq!(ledger.stages["answer"].failed_steps, 1);
    assert_eq!(ledger.stages["answer"].requests, 5);
}

#[tokio::test]
async fn server_cached_prompt_tokens_are_read_from_openai_and_llama_cpp_usage() {
    let body = |extra: &str| {
        format!(
            r#"{{"id": "x", "object": "chat.completion", "choices": [{{"index": 0, "message": {{"role": "assistant", "content": "hi"}}, "finish_reason": "stop"}}], "usage": {{"prompt_tokens": 40, "completion_tokens": 2{extra}}}{}}}"#,
            if extra.is_empty() {
                r#", "timings": {"cache_n": 31, "prompt_n": 9}"#
            } else {
                ""
            }
        )
    };
    let server = FaultServer::start(
        vec![
            // OpenAI: usage.prompt_tokens_details.cached_tokens.
            Behaviour::Body(body(r#", "prompt_tokens_details": {"cached_tokens": 24}"#)),
            // llama.cpp: timings.cache_n.
            Behaviour::Body(body("")),
        ],
        // Neither: nothing cached.
        ok("hi"),
    )
    .await;
    let client = OpenAiClient::new(&config(vec![server.url.clone()]), Secret::default()).unwrap();
    let openai = client.chat(&request()).await.unwrap().usage;
    assert_eq!(
        (openai.prompt_tokens, openai.cached_prompt_tokens),
        (40, 24)
    );
    let llama = client.chat(&request()).await.unwrap().usage;
    assert_eq!((llama.prompt_tokens, llama.cached_prompt_tokens), (40, 31));
    let plain = client.chat(&request()).await.unwrap().usage;
    assert_eq!((plain.prompt_tokens, plain.cached_prompt_tokens), (11, 0));
}

/// A server-sent-events body: one chunk per piece with llama.cpp's per-token timings, then the
/// finish chunk, the usage chunk and `[DONE]`.
fn event_stream(pieces: &[&str]) -> String {
    let mut body = String::new();
    for (i, piece) in pieces.iter().enumerate() {
        let chunk = serde_json::json!({
            "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}],
            "timings": {"cache_n": 5, "prompt_n": 20, "predicted_n": i + 1}
        });
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    body.push_str(
        "data: {\"choices\": [{\"index\": 0, \"delta\": {}, \"finish_reason\": \"stop\"}]}\n\n",
    );
    let usage = serde_json::json!({"choices": [], "usage": {"prompt_tokens": 25, "completion_tokens": pieces.len(), "prompt_tokens_details": {"cached_tokens": 5}}});
    body.push_str(&format!("data: {usage}\n\ndata: [DONE]\n\n"));
    body
}

#[tokio::test]
async fn a_streamed_reply_that_repeats_an_element_is_cut_and_closed() {
    let looping = [
        "{\"triples\": [",
        "[\"A\", \"b\", \"C\"]",
        ", [\"D\", \"e\", \"F\"]",
        ", [\"A\", \"b\", \"C\"]",
        ", [\"A\", \"b\", \"C\"]",
        "]}",
    ];
    let whole = ["{\"triples\": [", "[\"A\", \"b\", \"C\"]", "]}"];
    let server = FaultServer::start(
        vec![
            Behaviour::Body(event_stream(&looping)),
            Behaviour::Body(event_stream(&whole)),
        ],
        ok("hi"),
    )
    .await;
    let client = OpenAiClient::new(&config(vec![server.url.clone()]), Secret::default()).unwrap();
    let mut req = request();
    req.sampling.cut_repeats = 1;
    let cut = client.chat(&req).await.unwrap();
    assert_eq!(
        cut.content,
        r#"{"triples": [["A", "b", "C"], ["D", "e", "F"]]}"#
    );
    assert!(cut.was_cut_at_repeat(), "{}", cut.finish_reason);
    // The cost so far, from the last chunk read (the fourth piece closed the repeat).
    assert_eq!(
        (
            cut.usage.prompt_tokens,
            cut.usage.completion_tokens,
            cut.usage.cached_prompt_tokens
        ),
        (25, 4, 5)
    );
    let sent: serde_json::Value = serde_json::from_str(&server.seen()[0].body).unwrap();
    assert_eq!(sent["stream"], true, "{sent}");
    assert_eq!(sent["timings_per_token"], true, "{sent}");

    let full = client.chat(&req).await.unwrap();
    assert_eq!(full.content, r#"{"triples": [["A", "b", "C"]]}"#);
    assert_eq!(full.finish_reason, "stop");
    assert_eq!(
        (full.usage.prompt_tokens, full.usage.completion_tokens),
        (25, 3)
    );

    // A request that does not ask for the cut is not streamed.
    let plain = client.chat(&request()).await.unwrap();
    assert_eq!(plain.content, "hi");
    let sent: serde_json::Value = serde_json::from_str(&server.seen()[2].body).unwrap();
    assert_eq!(sent["stream"], false, "{sent}");
    assert!(sent.get("timings_per_token").is_none(), "{sent}");
}
