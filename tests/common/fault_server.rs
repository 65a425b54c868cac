//! A small in-test HTTP server that speaks just enough of the OpenAI chat API and misbehaves on
//! purpose: one scripted behaviour per request, in order, then a fallback behaviour.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Clone, Debug)]
pub enum Behaviour {
    /// 200 with a valid completion whose content is this text.
    Reply(String),
    /// 200 with a completion cut off at max_tokens.
    CutOff(String),
    /// This status, an optional Retry-After (seconds), this body.
    Status(u16, Option<u32>, String),
    /// Wait this long, then answer like `Reply` (past the client's timeout: a hang).
    Hang(Duration, String),
    /// 200 with a body that is not JSON.
    Malformed(String),
    /// Close the connection without answering.
    Drop,
    /// 200 with an empty content string.
    Empty,
    /// Answer 400 if the request asks for `json_schema`, else like `Reply`.
    RejectJsonSchema(String),
    /// 200 with exactly this body (a completion with the usage fields a server reports).
    Body(String),
}

/// What the server saw of one request.
#[derive(Clone, Debug)]
pub struct Seen {
    pub head: String,
    pub body: String,
}

/// A server's accept loop, stopped when the server is dropped.
struct AcceptLoop(tokio::task::JoinHandle<()>);

impl Drop for AcceptLoop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub struct FaultServer {
    pub url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    max_in_flight: Arc<AtomicUsize>,
    _accept: AcceptLoop,
}

impl FaultServer {
    pub async fn start(script: Vec<Behaviour>, fallback: Behaviour) -> FaultServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let max_in_flight = Arc::new(AtomicUsize::new(0));
        let (s2, seen2, inf2, max2) = (
            script.clone(),
            seen.clone(),
            in_flight.clone(),
            max_in_flight.clone(),
        );
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (script, seen, in_flight, max_in_flight, fallback) = (
                    s2.clone(),
                    seen2.clone(),
                    inf2.clone(),
                    max2.clone(),
                    fallback.clone(),
                );
                tokio::spawn(handle(
                    stream,
                    script,
                    seen,
                    fallback,
                    Gauge(in_flight, max_in_flight),
                ));
            }
        });
        FaultServer {
            url: format!("http://{addr}/v1"),
            seen,
            max_in_flight,
            _accept: AcceptLoop(task),
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn hits(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }
}

pub fn completion(content: &str, finish: &str) -> String {
    serde_json::json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "fault-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}
    })
    .to_string()
}

/// Counts requests the server is working on: from the moment a request has been read in full
/// until its reply starts, or until the client is seen to have given up on it. Counting
/// connections instead (accept to close) overcounts a client that respects its limit: a hang
/// the client has timed out on, or a reply it has read while the server's task has not yet
/// closed the socket, would still count while the client's next request arrives.
struct Gauge(Arc<AtomicUsize>, Arc<AtomicUsize>);

impl Gauge {
    fn enter(&self) -> InFlight<'_> {
        let now = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        self.1.fetch_max(now, Ordering::SeqCst);
        InFlight(&self.0)
    }
}

struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Resolves when the client closes its end of the connection (it has timed out or gone).
async fn client_gone(stream: &mut TcpStream) {
    let mut byte = [0u8; 1];
    loop {
        match stream.read(&mut byte).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Reads one request (head and body) from the stream; `None` if the client closes first.
pub async fn read_request(stream: &mut TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let length = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    while buf.len() < header_end + length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = String::from_utf8_lossy(&buf[header_end..header_end + length]).to_string();
    Some(Seen { head, body })
}

async fn handle(
    mut stream: TcpStream,
    script: Arc<Mutex<VecDeque<Behaviour>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
    fallback: Behaviour,
    gauge: Gauge,
) {
    let Some(Seen { head, body }) = read_request(&mut stream).await else {
        return;
    };
    let path_is_models = head.starts_with("GET ") && head.contains("/models");
    seen.lock().unwrap().push(Seen {
        head: head.clone(),
        body: body.clone(),
    });
    if path_is_models {
        let models = serde_json::json!({"object": "list", "data": [{"id": "fault-model", "object": "model"}]}).to_string();
        respond(&mut stream, 200, None, &models).await;
        return;
    }
    let working = gauge.enter();
    let behaviour = script.lock().unwrap().pop_front().unwrap_or(fallback);
    if let Behaviour::Hang(d, _) = &behaviour {
        // Hang, but stop counting the request once the client has given up on it.
        let slept = tokio::select! {
            _ = tokio::time::sleep(*d) => true,
            _ = client_gone(&mut stream) => false,
        };
        if !slept {
            return;
        }
    }
    drop(working);
    match behaviour {
        Behaviour::Reply(c) => respond(&mut stream, 200, None, &completion(&c, "stop")).await,
        Behaviour::Body(b) => respond(&mut stream, 200, None, &b).await,
        Behaviour::CutOff(c) => respond(&mut stream, 200, None, &completion(&c, "length")).await,
        Behaviour::Status(code, retry_after, b) => {
            respond(&mut stream, code, retry_after, &b).await
        }
        Behaviour::Hang(_, c) => respond(&mut stream, 200, None, &completion(&c, "stop")).await,
        Behaviour::Malformed(b) => respond(&mut stream, 200, None, &b).await,
        Behaviour::Drop => drop(stream),
        Behaviour::Empty => respond(&mut stream, 200, None, &completion("", "stop")).await,
        Behaviour::RejectJsonSchema(c) => {
            if body.contains("\"json_schema\"") {
                let err = r#"{"error":{"message":"response_format type json_schema is not supported","type":"invalid_request_error"}}"#;
                respond(&mut stream, 400, None, err).await
            } else {
                respond(&mut stream, 200, None, &completion(&c, "stop")).await
            }
        }
    }
}

async fn respond(stream: &mut TcpStream, code: u16, retry_after: Option<u32>, body: &str) {
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    };
    let mut head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(s) = retry_after {
        head.push_str(&format!("Retry-After: {s}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// A server that keeps connections alive, as llama.cpp's does (`Keep-Alive: timeout=5`), and
/// whose keep-alive runs out exactly as a request arrives: a request that reaches a connection
/// idle for longer than `stale_after` finds it closed (no answer), which is what a client sees
/// when it reuses a pooled connection at the moment the server gives up on it.
pub struct KeepAliveServer {
    pub url: String,
    connections: Arc<AtomicUsize>,
    closed_on_arrival: Arc<AtomicUsize>,
    _accept: AcceptLoop,
}

impl KeepAliveServer {
    pub async fn start(stale_after: Duration, content: &str) -> KeepAliveServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let connections = Arc::new(AtomicUsize::new(0));
        let closed_on_arrival = Arc::new(AtomicUsize::new(0));
        let (conns, closed, body) = (
            connections.clone(),
            closed_on_arrival.clone(),
            completion(content, "stop"),
        );
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                conns.fetch_add(1, Ordering::SeqCst);
                let (closed, body) = (closed.clone(), body.clone());
                tokio::spawn(async move {
                    let mut idle_since = std::time::Instant::now();
                    while read_request(&mut stream).await.is_some() {
                        if idle_since.elapsed() > stale_after {
                            closed.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                        let head = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nKeep-Alive: timeout=5, max=100\r\n\r\n",
                            body.len()
                        );
                        if stream.write_all(head.as_bytes()).await.is_err()
                            || stream.write_all(body.as_bytes()).await.is_err()
                        {
                            return;
                        }
                        idle_since = std::time::Instant::now();
                    }
                });
            }
        });
        KeepAliveServer {
            url: format!("http://{addr}/v1"),
            connections,
            closed_on_arrival,
            _accept: AcceptLoop(task),
        }
    }

    /// Connections the server accepted.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Requests that found their connection closed.
    pub fn closed_on_arrival(&self) -> usize {
        self.closed_on_arrival.load(Ordering::SeqCst)
    }
}

/// A server on its own thread and runtime (so that a test may block its own runtime) that, like
/// llama.cpp's, closes a connection on which no request arrives within `patience`, and answers
/// every request that does arrive in time.
pub struct ImpatientServer {
    pub url: String,
    gave_up: Arc<AtomicUsize>,
}

impl ImpatientServer {
    pub fn start(patience: Duration, content: &str) -> ImpatientServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("local addr");
        let gave_up = Arc::new(AtomicUsize::new(0));
        let (counter, body) = (gave_up.clone(), completion(content, "stop"));
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the server's runtime");
            rt.block_on(async move {
                let listener = TcpListener::from_std(listener).expect("tokio listener");
                loop {
                    let Ok((mut stream, _)) = listener.accept().await else {
                        return;
                    };
                    let (counter, body) = (counter.clone(), body.clone());
                    tokio::spawn(async move {
                        match tokio::time::timeout(patience, read_request(&mut stream)).await {
                            Ok(Some(_)) => respond(&mut stream, 200, None, &body).await,
                            Ok(None) => {}
                            // Dropping the stream closes the connection.
                            Err(_) => {
                                counter.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    });
                }
            });
        });
        ImpatientServer {
            url: format!("http://{addr}/v1"),
            gave_up,
        }
    }

    /// Connections closed because no request arrived on them in time.
    pub fn gave_up(&self) -> usize {
        self.gave_up.load(Ordering::SeqCst)
    }
}
