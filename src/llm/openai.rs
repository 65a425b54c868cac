//! The OpenAI-compatible chat client (llama.cpp's server, vLLM, Ollama, OpenAI).
//!
//! One client is shared by every caller: it holds the concurrency semaphore, balances several
//! base URLs round-robin (the next attempt of a failed request goes to the next URL), and retries
//! 429, 5xx, timeouts, dropped connections and malformed bodies with exponential backoff and full
//! jitter, honouring `Retry-After`. The API key goes into the `Authorization` header and nowhere
//! else: errors and logs carry URLs, statuses and bodies, never headers.
//!
//! Every HTTP exchange runs on the client's own I/O thread, not the caller's runtime: a caller
//! whose runtime is busy with CPU work (embedding, index building) cannot leave an opened
//! connection without its request past the server's patience (llama.cpp closes a connection
//! that sends nothing for 5 s, and the request then fails as a dropped connection).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::Semaphore;

use super::{
    ChatReply, ChatRequest, InRequiredOrder, Llm, Message, RepeatCut, Sampling, SlotGauge, Usage,
    FINISH_REPEAT,
};
use crate::config::{JsonMode, LlmConfig, Secret};
use crate::error::LlmError;

/// A chat completion request body. A struct, not a `json!` value, so that the schema keeps
/// the property order of `JsonSchema::as_sent` (a `Value` would sort it by name).
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: &'a [Message],
    temperature: f32,
    max_tokens: u32,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    frequency_penalty: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<ResponseFormat<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    logprobs: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_logprobs: Option<u8>,
    /// llama.cpp's server: put the prompt and generated token counts in every streamed
    /// chunk, so a reply stopped early still knows its cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    timings_per_token: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct ResponseFormat<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    json_schema: Option<NamedSchema<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    schema: Option<InRequiredOrder<'a>>,
}

#[derive(Serialize)]
struct NamedSchema<'a> {
    name: &'a str,
    schema: InRequiredOrder<'a>,
    strict: bool,
}

/// Longest slice of an error body kept in an error message.
const BODY_EXCERPT: usize = 400;

/// Transport retry schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Attempts after the first.
    pub max_retries: u32,
    pub base: Duration,
    pub max: Duration,
}

impl RetryPolicy {
    /// Full jitter: a uniform delay in [0, min(max, base * 2^retry)].
    pub fn backoff(&self, retry: u32) -> Duration {
        let exp = self.base.saturating_mul(1u32 << retry.min(16));
        let cap = exp.min(self.max);
        cap.mul_f64(fastrand::f64())
    }
}

/// A pooled connection idle this long is not reused. llama.cpp's server (and uvicorn's, under
/// vLLM) close a kept-alive connection after 5 s idle; reusing one as the server closes it fails
/// the request with "connection closed before message completed" and costs a retry with its
/// backoff. A new loopback connection costs well under a millisecond.
const POOL_IDLE: Duration = Duration::from_secs(2);

/// The OpenAI-compatible client.
pub struct OpenAiClient {
    http: reqwest::Client,
    io: IoThread,
    base_urls: Vec<String>,
    next_url: AtomicUsize,
    model: String,
    api_key: Secret,
    permits: Arc<Semaphore>,
    retry: RetryPolicy,
    timeout: Duration,
    json_mode: JsonMode,
    /// Set once the server has rejected a `json_schema` response format (auto mode).
    schema_rejected: AtomicBool,
}

impl std::fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("base_urls", &self.base_urls)
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("retry", &self.retry)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl OpenAiClient {
    pub fn new(config: &LlmConfig, api_key: Secret) -> Result<Self, LlmError> {
        if config.base_urls.is_empty() {
            return Err(LlmError::Request("no base URL configured".into()));
        }
        let timeout = Duration::from_secs_f64(config.timeout_secs);
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .pool_idle_timeout(POOL_IDLE)
            .build()
            .map_err(|e| LlmError::Request(format!("cannot build the HTTP client: {e}")))?;
        Ok(OpenAiClient {
            http,
            io: IoThread::start()?,
            base_urls: config
                .base_urls
                .iter()
                .map(|u| u.trim_end_matches('/').to_string())
                .collect(),
            next_url: AtomicUsize::new(0),
            model: config.model.clone(),
            api_key,
            permits: Arc::new(Semaphore::new(config.concurrency.max(1))),
            retry: RetryPolicy {
                max_retries: config.max_retries,
                base: Duration::from_millis(config.backoff_base_ms),
                max: Duration::from_millis(config.backoff_max_ms),
            },
            timeout,
            json_mode: config.json_mode,
            schema_rejected: AtomicBool::new(false),
        })
    }

    pub fn base_urls(&self) -> &[String] {
        &self.base_urls
    }

    fn pick_url(&self) -> &str {
        let i = self.next_url.fetch_add(1, Ordering::Relaxed) % self.base_urls.len();
        &self.base_urls[i]
    }

    fn body<'a>(&'a self, request: &'a ChatRequest) -> Body<'a> {
        let response_format = request.schema.as_ref().and_then(|schema| {
            let mode = match self.json_mode {
                JsonMode::Auto if self.schema_rejected.load(Ordering::Relaxed) => {
                    JsonMode::JsonObject
                }
                JsonMode::Auto => JsonMode::JsonSchema,
                other => other,
            };
            match mode {
                JsonMode::JsonSchema | JsonMode::Auto => Some(ResponseFormat {
                    kind: "json_schema",
                    json_schema: Some(NamedSchema {
                        name: &schema.name,
                        schema: schema.as_sent(),
                        strict: true,
                    }),
                    schema: None,
                }),
                // llama.cpp's server also constrains `json_object` by an attached schema.
                JsonMode::JsonObject => Some(ResponseFormat {
                    kind: "json_object",
                    json_schema: None,
                    schema: Some(schema.as_sent()),
                }),
                JsonMode::None => None,
            }
        });
        Body {
            model: &self.model,
            messages: &request.messages,
            temperature: request.sampling.temperature,
            max_tokens: request.sampling.max_tokens,
            stream: request.sampling.cut_repeats > 0,
            frequency_penalty: Some(request.sampling.frequency_penalty).filter(|p| *p != 0.0),
            seed: request.sampling.seed,
            response_format,
            logprobs: (request.sampling.top_logprobs > 0).then_some(true),
            top_logprobs: Some(request.sampling.top_logprobs).filter(|n| *n > 0),
            timings_per_token: (request.sampling.cut_repeats > 0).then_some(true),
            stream_options: (request.sampling.cut_repeats > 0).then_some(StreamOptions {
                include_usage: true,
            }),
        }
    }

    /// One HTTP attempt. An error comes with the server's `Retry-After` (seconds), if it sent one.
    async fn attempt(
        &self,
        url: &str,
        body: &Body<'_>,
        sampling: &Sampling,
        gauge: Option<&dyn SlotGauge>,
    ) -> Result<ChatReply, (LlmError, Option<f64>)> {
        let endpoint = format!("{url}/chat/completions");
        let mut builder = self.http.post(&endpoint).json(body);
        if let Some(key) = self.api_key.expose() {
            builder = builder.bearer_auth(key);
        }
        let response = {
            let _permit = self.permits.acquire().await.map_err(|_| {
                (
                    LlmError::Request("the client is shutting down".into()),
                    None,
                )
            })?;
            // At the server from here until the body is read (or the attempt fails).
            let _slot = gauge.map(|g| SlotGuard(g, g.started()));
            let exchange = exchange(builder, url.to_string(), body.stream, sampling.clone());
            match self.io.run(exchange).await {
                Ok(Exchanged::Body(status, retry_after, text)) => (status, retry_after, text),
                Ok(Exchanged::Streamed(reply)) => return Ok(reply),
                Err((StreamError::Transport(e), retry_after)) => {
                    return Err((self.classify(url, &e), retry_after))
                }
                Err((StreamError::Llm(e), retry_after)) => return Err((e, retry_after)),
            }
        };
        let (status, retry_after, text) = response;
        if !status.is_success() {
            let error = LlmError::Http {
                url: url.to_string(),
                status: status.as_u16(),
                body: self.redact(&excerpt(&text)),
            };
            return Err((error, retry_after));
        }
        parse_completion(url, &text).map_err(|e| (e, None))
    }

    /// Some servers echo the request's credentials in error bodies: never pass them on.
    fn redact(&self, text: &str) -> String {
        match self.api_key.expose() {
            Some(key) if text.contains(key) => text.replace(key, "<redacted>"),
            _ => text.to_string(),
        }
    }

    fn classify(&self, url: &str, e: &reqwest::Error) -> LlmError {
        if e.is_timeout() {
            LlmError::Timeout {
                url: url.to_string(),
                secs: self.timeout.as_secs_f64(),
            }
        } else if e.is_decode() {
            LlmError::Protocol {
                url: url.to_string(),
                message: e.to_string(),
            }
        } else {
            // Refused, reset, closed mid-response: all "dropped connection" to the caller.
            let mut message = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                message.push_str(": ");
                message.push_str(&s.to_string());
                source = s.source();
            }
            // The one server configured is this machine's and refuses: it is not running, and
            // retrying for a quarter of a minute will not start it.
            if e.is_connect()
                && self.base_urls.len() == 1
                && is_loopback(url)
                && message.to_lowercase().contains("refused")
            {
                return LlmError::ServerDown {
                    url: url.to_string(),
                };
            }
            LlmError::Connect {
                url: url.to_string(),
                message,
            }
        }
    }
}

/// What one HTTP exchange brought back: a whole body with its status and `Retry-After`, or a
/// streamed reply read to its end (or its repeat cut).
enum Exchanged {
    Body(reqwest::StatusCode, Option<f64>, String),
    Streamed(ChatReply),
}

/// One request sent and its reply read, owning everything it needs so that it can run on the
/// I/O thread. Errors carry the `Retry-After` the server sent with them, if any.
async fn exchange(
    builder: reqwest::RequestBuilder,
    url: String,
    stream: bool,
    sampling: Sampling,
) -> Result<Exchanged, (StreamError, Option<f64>)> {
    let response = builder
        .send()
        .await
        .map_err(|e| (StreamError::Transport(e), None))?;
    let status = response.status();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0);
    if stream && status.is_success() {
        // Dropping the response on a cut closes the connection, which stops the server's
        // generation.
        return read_stream(&url, response, &sampling)
            .await
            .map(Exchanged::Streamed)
            .map_err(|e| (e, None));
    }
    let text = response
        .text()
        .await
        .map_err(|e| (StreamError::Transport(e), retry_after))?;
    Ok(Exchanged::Body(status, retry_after, text))
}

/// A one-thread tokio runtime that runs the client's HTTP exchanges (and so its connections,
/// which hyper spawns on the runtime that opens them).
struct IoThread(Option<tokio::runtime::Runtime>);

impl IoThread {
    fn start() -> Result<Self, LlmError> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("qrmem-llm-io")
            .enable_all()
            .build()
            .map(|rt| IoThread(Some(rt)))
            .map_err(|e| LlmError::Request(format!("cannot start the HTTP I/O thread: {e}")))
    }

    /// Runs `exchange` on the I/O thread; dropping the returned future aborts it.
    async fn run<T: Send + 'static>(
        &self,
        exchange: impl std::future::Future<Output = Result<T, (StreamError, Option<f64>)>>
            + Send
            + 'static,
    ) -> Result<T, (StreamError, Option<f64>)> {
        let Some(rt) = &self.0 else {
            return Err((
                StreamError::Llm(LlmError::Request("the client is shutting down".into())),
                None,
            ));
        };
        let mut task = AbortOnDrop(rt.spawn(exchange));
        match (&mut task.0).await {
            Ok(result) => result,
            Err(e) => Err((
                StreamError::Llm(LlmError::Request(format!(
                    "the HTTP exchange did not finish: {e}"
                ))),
                None,
            )),
        }
    }
}

impl Drop for IoThread {
    fn drop(&mut self) {
        // A runtime dropped inside another one's task would panic; this one may be.
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// Aborts the exchange when the attempt that waits for it is dropped (a caller's timeout or
/// cancellation), so that nothing runs on for a reply nobody reads.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn excerpt(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(BODY_EXCERPT) {
        Some((i, _)) => format!("{}...", &t[..i]),
        None => t.to_string(),
    }
}

/// Whether `url` names this machine (localhost, 127.0.0.0/8 or [::1]).
fn is_loopback(url: &str) -> bool {
    let rest = url
        .split_once("://")
        .map_or(url, |(_, r)| r)
        .split(['/', '?'])
        .next()
        .unwrap_or("");
    let host = match rest.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => rest.rsplit_once(':').map_or(rest, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost")
        || host == "::1"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

enum StreamError {
    Transport(reqwest::Error),
    Llm(LlmError),
}

/// Reads a streamed chat completion (server-sent events, one `data:` line per chunk), stopping
/// at the first repeat `sampling.cut_repeats` allows ([`RepeatCut`]). A stopped reply has
/// `finish_reason` "repeat" and the usage of the last chunk's llama.cpp timings (prompt and
/// generated tokens so far); a server that sends none leaves the prompt count at 0 and counts
/// the content chunks as generated tokens.
async fn read_stream(
    url: &str,
    mut response: reqwest::Response,
    sampling: &Sampling,
) -> Result<ChatReply, StreamError> {
    let bad = |message: String| {
        StreamError::Llm(LlmError::Protocol {
            url: url.to_string(),
            message,
        })
    };
    let mut reader = RepeatCut::new(
        usize::from(sampling.cut_repeats),
        sampling.cut_repeats_in.as_deref(),
    );
    let mut pending: Vec<u8> = Vec::new();
    let mut finish_reason: Option<String> = None;
    let mut usage: Option<Usage> = None;
    let mut timed: Option<Usage> = None;
    let mut pieces = 0u64;
    'read: while let Some(bytes) = response.chunk().await.map_err(StreamError::Transport)? {
        pending.extend_from_slice(&bytes);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let Some(data) = line.trim().strip_prefix("data:").map(str::trim) else {
                continue;
            };
            if data == "[DONE]" {
                break 'read;
            }
            let chunk: Value = serde_json::from_str(data).map_err(|e| {
                bad(format!(
                    "a streamed chunk is not JSON ({e}): {}",
                    excerpt(data)
                ))
            })?;
            if let Some(error) = chunk.get("error") {
                return Err(bad(format!(
                    "the server ended the stream with an error: {}",
                    excerpt(&error.to_string())
                )));
            }
            if let Some(t) = chunk.get("timings") {
                let n = |k: &str| t.get(k).and_then(Value::as_u64).unwrap_or(0);
                timed = Some(Usage {
                    prompt_tokens: n("cache_n") + n("prompt_n"),
                    completion_tokens: n("predicted_n"),
                    cached_prompt_tokens: n("cache_n"),
                });
            }
            if chunk.get("usage").is_some_and(Value::is_object) {
                usage = Some(usage_of(&chunk));
            }
            let Some(choice) = chunk.pointer("/choices/0") else {
                continue;
            };
            if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
                finish_reason = Some(f.to_string());
            }
            if let Some(piece) = choice.pointer("/delta/content").and_then(Value::as_str) {
                pieces += 1;
                if reader.push(piece) {
                    break 'read;
                }
            }
        }
    }
    drop(response);
    let cut = reader.was_cut();
    let content = reader.reply();
    if content.trim().is_empty() && finish_reason.as_deref() != Some("length") {
        return Err(bad("the streamed reply is empty".into()));
    }
    let usage = usage.or(timed).unwrap_or(Usage {
        completion_tokens: pieces,
        ..Usage::default()
    });
    Ok(ChatReply {
        content,
        finish_reason: if cut {
            FINISH_REPEAT.to_string()
        } else {
            finish_reason.unwrap_or_else(|| "unknown".to_string())
        },
        usage,
        attempts: 1,
        cached: false,
        logprobs: Vec::new(),
    })
}

/// The usage a completion body (or a streamed chunk) reports: its `usage` counts, the cached
/// prompt tokens from OpenAI's `prompt_tokens_details` or llama.cpp's `timings.cache_n`; 0 for
/// what it does not say.
fn usage_of(body: &Value) -> Usage {
    let usage = body.get("usage");
    let count = |k: &str| {
        usage
            .and_then(|u| u.get(k))
            .and_then(|v| v.as_u64())
            .unwrap_or(0)
    };
    Usage {
        prompt_tokens: count("prompt_tokens"),
        completion_tokens: count("completion_tokens"),
        cached_prompt_tokens: usage
            .and_then(|u| u.pointer("/prompt_tokens_details/cached_tokens"))
            .or_else(|| body.pointer("/timings/cache_n"))
            .and_then(|v| v.as_u64())
            .unwrap_or(0),
    }
}

/// Parses an OpenAI chat completion body.
fn parse_completion(url: &str, text: &str) -> Result<ChatReply, LlmError> {
    let bad = |message: String| LlmError::Protocol {
        url: url.to_string(),
        message,
    };
    let value: Value = serde_json::from_str(text)
        .map_err(|e| bad(format!("body is not JSON ({e}): {}", excerpt(text))))?;
    let choice = value
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| bad(format!("no choices in {}", excerpt(text))))?;
    let content = choice
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(|c| c.as_str())
        .unwrap_or_default()
        .to_string();
    let finish_reason = choice
        .get("finish_reason")
        .and_then(|f| f.as_str())
        .unwrap_or("unknown")
        .to_string();
    if content.trim().is_empty() && finish_reason != "length" {
        return Err(bad("the reply is empty".into()));
    }
    Ok(ChatReply {
        content,
        finish_reason,
        usage: usage_of(&value),
        attempts: 1,
        cached: false,
        logprobs: token_logprobs(choice),
    })
}

/// The `logprobs.content` of a choice (empty when the server sent none).
fn token_logprobs(choice: &Value) -> Vec<crate::llm::TokenLogprob> {
    let Some(content) = choice
        .pointer("/logprobs/content")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    content
        .iter()
        .filter_map(|t| {
            let token = t.get("token")?.as_str()?.to_string();
            let logprob = t.get("logprob")?.as_f64()?;
            let top = t
                .get("top_logprobs")
                .and_then(Value::as_array)
                .map(|alts| {
                    alts.iter()
                        .filter_map(|a| {
                            Some((
                                a.get("token")?.as_str()?.to_string(),
                                a.get("logprob")?.as_f64()?,
                            ))
                        })
                        .collect()
                })
                .unwrap_or_default();
            Some(crate::llm::TokenLogprob {
                token,
                logprob,
                top,
            })
        })
        .collect()
}

/// Whether a 400 says the server does not know the `json_schema` response format.
fn rejects_json_schema(error: &LlmError) -> bool {
    match error {
        LlmError::Http { status, body, .. } if *status == 400 || *status == 422 => {
            let b = body.to_ascii_lowercase();
            b.contains("response_format") || b.contains("json_schema")
        }
        _ => false,
    }
}

#[async_trait]
impl Llm for OpenAiClient {
    fn model(&self) -> &str {
        &self.model
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatReply, LlmError> {
        self.send(request, None).await
    }

    async fn chat_gauged(
        &self,
        request: &ChatRequest,
        gauge: &dyn SlotGauge,
    ) -> Result<ChatReply, LlmError> {
        self.send(request, Some(gauge)).await
    }
}

/// Ends a gauge's interval when an attempt ends, however it ends.
struct SlotGuard<'a>(&'a dyn SlotGauge, std::time::Instant);

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        self.0.ended(self.1);
    }
}

impl OpenAiClient {
    /// One chat completion with retries; `gauge` sees each attempt while it holds a permit.
    async fn send(
        &self,
        request: &ChatRequest,
        gauge: Option<&dyn SlotGauge>,
    ) -> Result<ChatReply, LlmError> {
        if request.messages.is_empty() {
            return Err(LlmError::Request(
                "a chat request needs at least one message".into(),
            ));
        }
        let mut body = self.body(request);
        let mut attempts = 0u32;
        let mut retries = 0u32;
        let mut last_url;
        loop {
            let url = self.pick_url().to_string();
            last_url = url.clone();
            attempts += 1;
            let (error, retry_after) =
                match self.attempt(&url, &body, &request.sampling, gauge).await {
                    Ok(mut reply) => {
                        reply.attempts = attempts;
                        return Ok(reply);
                    }
                    Err(e) => e,
                };
            if request.schema.is_some()
                && self.json_mode == JsonMode::Auto
                && !self.schema_rejected.load(Ordering::Relaxed)
                && rejects_json_schema(&error)
            {
                tracing::info!(url = %url, "server rejects json_schema; using json_object from now on");
                self.schema_rejected.store(true, Ordering::Relaxed);
                body = self.body(request);
                continue;
            }
            if !error.is_retryable() {
                return Err(error);
            }
            if retries >= self.retry.max_retries {
                return Err(LlmError::RetriesExhausted {
                    url: last_url,
                    attempts,
                    last: Box::new(error),
                });
            }
            let delay = match retry_after {
                Some(secs) => Duration::from_secs_f64(secs).min(self.retry.max),
                None => self.retry.backoff(retries),
            };
            tracing::warn!(url = %url, attempt = attempts, delay_ms = delay.as_millis() as u64, "LLM request failed, retrying: {error}");
            retries += 1;
            tokio::time::sleep(delay).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_urls() {
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://localhost:8080/v1",
            "http://[::1]:8080/v1",
            "http://127.0.0.2/v1",
        ] {
            assert!(is_loopback(url), "{url}");
        }
        for url in ["http://10.0.0.1:8080/v1", "https://api.example.com/v1"] {
            assert!(!is_loopback(url), "{url}");
        }
    }

    #[test]
    fn backoff_is_bounded_by_the_cap() {
        let p = RetryPolicy {
            max_retries: 5,
            base: Duration::from_millis(100),
            max: Duration::from_millis(250),
        };
        for retry in 0..20 {
            assert!(p.backoff(retry) <= Duration::from_millis(250));
        }
        assert!(p.backoff(0) <= Duration::from_millis(100));
    }

    #[test]
    fn completion_parsing() {
        let ok = r#"{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":1}}"#;
        let r = parse_completion("u", ok).unwrap();
        assert_eq!(
            (r.content.as_str(), r.finish_reason.as_str()),
            ("hi", "stop")
        );
        assert_eq!(r.usage.prompt_tokens, 7);
        for bad in [
            "not json",
            r#"{"choices":[]}"#,
            r#"{"choices":[{"message":{"content":""},"finish_reason":"stop"}]}"#,
        ] {
            let e = parse_completion("u", bad).unwrap_err();
            assert!(matches!(e, LlmError::Protocol { .. }), "{bad}: {e}");
        }
    }

    #[test]
    fn schema_rejection_detection() {
        let e = LlmError::Http {
            url: "u".into(),
            status: 400,
            body: "Unsupported response_format type json_schema".into(),
        };
        assert!(rejects_json_schema(&e));
        let e = LlmError::Http {
            url: "u".into(),
            status: 400,
            body: "context too long".into(),
        };
        assert!(!rejects_json_schema(&e));
    }
}
