//! What the pipeline calls: cache in front of the transport, a ledger entry for every call, and
//! the QRMeM paper's policy for structured output.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::de::DeserializeOwned;

use super::{
    extract_json, CacheKey, ChatReply, ChatRequest, JsonSchema, Ledger, Llm, Message, ReplyCache,
    Sampling,
};
use crate::config::LlmConfig;
use crate::error::LlmError;

/// Sampling and retry settings of the structured-output policy.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub temperature: f32,
    pub max_tokens: u32,
    pub frequency_penalty: f32,
    /// Retries of an unparsable reply after the first attempt (the paper: 4).
    pub json_retries: u32,
    /// Temperature of those retries (the paper: 0.7).
    pub retry_temperature: f32,
}

impl From<&LlmConfig> for Policy {
    fn from(c: &LlmConfig) -> Self {
        Policy {
            temperature: c.temperature,
            max_tokens: c.max_tokens,
            frequency_penalty: c.frequency_penalty,
            json_retries: c.json_retries,
            retry_temperature: c.retry_temperature,
        }
    }
}

/// A stage's own reply budget, frequency penalty and repeat cut (see
/// [`Service::chat_json_with`] and `Sampling::cut_repeats`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decoding {
    pub max_tokens: u32,
    pub frequency_penalty: f32,
    pub cut_repeats: u8,
    /// The key of the array the cut watches (None: every array).
    pub cut_repeats_in: Option<&'static str>,
}

/// A parsed structured reply with the raw reply it came from.
#[derive(Clone, Debug)]
pub struct Structured<T> {
    pub value: T,
    pub reply: ChatReply,
    /// Attempts the policy needed (1 when the first reply parsed).
    pub attempts: u32,
}

/// The cache keys whose request is at the transport now, each with the lock its first caller
/// holds until the reply is in the cache.
type InFlight = Arc<Mutex<HashMap<CacheKey, Arc<tokio::sync::Mutex<()>>>>>;

/// The LLM service: transport + cache + ledger + policy. Cheap to clone; clones share all four.
#[derive(Clone)]
pub struct Service {
    backend: Arc<dyn Llm>,
    cache: Option<ReplyCache>,
    ledger: Arc<Ledger>,
    policy: Policy,
    /// Single flight: a request identical to one already sent waits for that one's reply (from
    /// the cache) instead of sending it again. Two methods navigating the same question at once
    /// (kn and kn-answer-top3 share every navigation prompt) pay for each prompt once.
    in_flight: InFlight,
}

impl Service {
    /// The service a configuration describes: its OpenAI-compatible server(s), the reply cache
    /// unless it is off, and its retry and sampling policy.
    pub fn from_config(config: &crate::config::Config) -> Result<Self, LlmError> {
        let client = super::OpenAiClient::new(&config.llm, config.api_key.clone())?;
        let cache = if config.cache.enabled {
            Some(ReplyCache::open(&config.cache.dir)?)
        } else {
            None
        };
        Ok(Service::new(
            Arc::new(client),
            cache,
            Policy::from(&config.llm),
        ))
    }

    pub fn new(backend: Arc<dyn Llm>, cache: Option<ReplyCache>, policy: Policy) -> Self {
        let ledger = Arc::new(Ledger::new(backend.model()));
        Service {
            backend,
            cache,
            ledger,
            policy,
            in_flight: InFlight::default(),
        }
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The same transport, cache and policy with a fresh ledger that also records into this
    /// one: what a concurrent task uses so its own cost can be read off exactly.
    pub fn scoped(&self) -> Service {
        Service {
            backend: self.backend.clone(),
            cache: self.cache.clone(),
            ledger: Arc::new(Ledger::child(self.ledger.clone())),
            policy: self.policy.clone(),
            in_flight: self.in_flight.clone(),
        }
    }

    pub fn model(&self) -> &str {
        self.backend.model()
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The sampling of a first attempt.
    pub fn sampling(&self) -> Sampling {
        Sampling {
            temperature: self.policy.temperature,
            max_tokens: self.policy.max_tokens,
            frequency_penalty: self.policy.frequency_penalty,
            seed: None,
            top_logprobs: 0,
            cut_repeats: 0,
            cut_repeats_in: None,
        }
    }

    /// One chat completion, from the cache when the same request was answered before. With the
    /// cache on, an identical request already at the transport is waited for, not sent again:
    /// its reply is then a cache hit here (a failed one leaves the wait to send its own).
    pub async fn chat(&self, stage: &str, request: &ChatRequest) -> Result<ChatReply, LlmError> {
        let started = Instant::now();
        let key = self
            .cache
            .as_ref()
            .map(|_| CacheKey::for_request(self.backend.model(), request));
        let Some(key) = key else {
            return self.send(stage, request, None, started).await;
        };
        if let Some(reply) = self.cached(stage, &key, started) {
            return Ok(reply);
        }
        let flight = {
            let mut map = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
            map.entry(key.clone()).or_default().clone()
        };
        let out = {
            let _turn = flight.lock().await;
            // The request this one waited for may have put its reply in the cache.
            match self.cached(stage, &key, started) {
                Some(reply) => Ok(reply),
                None => self.send(stage, request, Some(&key), started).await,
            }
        };
        {
            let mut map = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
            // The map's own handle and this one: nobody else waits on the key.
            if Arc::strong_count(&flight) <= 2 {
                map.remove(&key);
            }
        }
        out
    }

    /// The cached reply to `key`, recorded as a cache hit of `stage`.
    fn cached(&self, stage: &str, key: &CacheKey, started: Instant) -> Option<ChatReply> {
        let mut reply = self.cache.as_ref()?.get(key)?;
        reply.cached = true;
        reply.attempts = 0;
        self.ledger
            .record_cache_hit(stage, &reply.usage, started.elapsed());
        Some(reply)
    }

    /// Sends the request to the transport, records it, and caches the reply under `key`.
    async fn send(
        &self,
        stage: &str,
        request: &ChatRequest,
        key: Option<&CacheKey>,
        started: Instant,
    ) -> Result<ChatReply, LlmError> {
        let outcome = self.backend.chat_gauged(request, &*self.ledger).await;
        match outcome {
            Ok(reply) => {
                self.ledger
                    .record_request(stage, reply.usage, reply.attempts, started.elapsed());
                if let (Some(cache), Some(key)) = (&self.cache, key) {
                    // A cache that cannot be written costs a re-run, never this answer.
                    if let Err(e) = cache.put(key, self.backend.model(), request, &reply) {
                        tracing::warn!("{e}");
                    }
                }
                Ok(reply)
            }
            Err(e) => {
                let attempts = match &e {
                    LlmError::RetriesExhausted { attempts, .. } => *attempts,
                    _ => 1,
                };
                self.ledger.record_error(stage, attempts, started.elapsed());
                Err(e)
            }
        }
    }

    /// A structured reply parsed into `T`, following the QRMeM paper's policy: the first attempt
    /// at `policy.temperature` (0), then up to `policy.json_retries` (4) more at
    /// `policy.retry_temperature` (0.7), each with its own seed so the retries differ and each is
    /// cached on its own. A reply cut off at `max_tokens` counts as a failed attempt, never as a
    /// parsed result. When no attempt parses, the step fails with [`LlmError::Unparsable`]
    /// (recorded in the ledger); transport errors end the step at once.
    pub async fn chat_json<T: DeserializeOwned>(
        &self,
        stage: &str,
        messages: Vec<Message>,
        schema: Option<JsonSchema>,
    ) -> Result<Structured<T>, LlmError> {
        self.chat_json_with(stage, messages, schema, None).await
    }

    /// One round trip as `qrmem chat` makes it: `prompt` (after an optional `system` turn),
    /// parsed against `schema` with the structured-output policy when one is given (the reply
    /// is the parsed JSON, pretty-printed), else sent with the configured sampling and the
    /// given temperature and reply budget. Returns the reply's text and whether it was cut off
    /// at `max_tokens`.
    pub async fn chat_once(
        &self,
        stage: &str,
        system: Option<&str>,
        prompt: &str,
        schema: Option<serde_json::Value>,
        temperature: Option<f32>,
        max_tokens: Option<u32>,
    ) -> Result<(String, bool), LlmError> {
        let mut messages = Vec::new();
        if let Some(s) = system {
            messages.push(Message::system(s.to_string()));
        }
        messages.push(Message::user(prompt.to_string()));
        if let Some(schema) = schema {
            let name = "reply".to_string();
            let s = self
                .chat_json::<serde_json::Value>(stage, messages, Some(JsonSchema { name, schema }))
                .await?;
            let text = serde_json::to_string_pretty(&s.value).unwrap_or(s.reply.content);
            return Ok((text, false));
        }
        let mut sampling = self.sampling();
        if let Some(t) = temperature {
            sampling.temperature = t;
        }
        if let Some(m) = max_tokens {
            sampling.max_tokens = m;
        }
        let request = ChatRequest {
            messages,
            sampling,
            schema: None,
        };
        let r = self.chat(stage, &request).await?;
        let cut = r.was_cut_off();
        Ok((r.content, cut))
    }

    /// [`Self::chat_json`] with the reply budget and frequency penalty of `decoding` instead of
    /// the policy's (the extraction stages, whose replies are long lists, set their own).
    pub async fn chat_json_with<T: DeserializeOwned>(
        &self,
        stage: &str,
        messages: Vec<Message>,
        schema: Option<JsonSchema>,
        decoding: Option<Decoding>,
    ) -> Result<Structured<T>, LlmError> {
        self.structured(stage, messages, schema, decoding, 0).await
    }

    /// [`Self::chat_json`], asking for every generated token's log probability and its
    /// `top_logprobs` most likely alternatives (in `Structured::reply.logprobs`, empty when the
    /// server gives none).
    pub async fn chat_json_logprobs<T: DeserializeOwned>(
        &self,
        stage: &str,
        messages: Vec<Message>,
        schema: Option<JsonSchema>,
        top_logprobs: u8,
    ) -> Result<Structured<T>, LlmError> {
        self.structured(stage, messages, schema, None, top_logprobs)
            .await
    }

    async fn structured<T: DeserializeOwned>(
        &self,
        stage: &str,
        messages: Vec<Message>,
        schema: Option<JsonSchema>,
        decoding: Option<Decoding>,
        top_logprobs: u8,
    ) -> Result<Structured<T>, LlmError> {
        let total = 1 + self.policy.json_retries;
        let mut last_reply = String::new();
        let mut reason = String::new();
        for attempt in 0..total {
            let mut sampling = self.sampling();
            sampling.top_logprobs = top_logprobs;
            if let Some(d) = decoding {
                sampling.max_tokens = d.max_tokens;
                sampling.frequency_penalty = d.frequency_penalty;
                sampling.cut_repeats = d.cut_repeats;
                sampling.cut_repeats_in = d.cut_repeats_in.map(str::to_string);
            }
            if attempt > 0 {
                sampling.temperature = self.policy.retry_temperature;
                sampling.seed = Some(u64::from(attempt));
            }
            let request = ChatRequest {
                messages: messages.clone(),
                sampling,
                schema: schema.clone(),
            };
            let reply = self.chat(stage, &request).await?;
            let parsed = if reply.was_cut_off() {
                Err(format!(
                    "the reply was cut off at max_tokens={}",
                    request.sampling.max_tokens
                ))
            } else {
                extract_json(&reply.content).and_then(|v| {
                    serde_json::from_value::<T>(v).map_err(|e| format!("wrong shape: {e}"))
                })
            };
            match parsed {
                Ok(value) => {
                    return Ok(Structured {
                        value,
                        reply,
                        attempts: attempt + 1,
                    })
                }
                Err(why) => {
                    tracing::debug!(stage, attempt, "unparsable reply: {why}");
                    self.ledger.record_unparsable(stage);
                    reason = why;
                    last_reply = reply.content;
                }
            }
        }
        self.ledger.record_failed_step(stage);
        Err(LlmError::Unparsable {
            stage: stage.to_string(),
            attempts: total,
            reason,
            last_reply: truncate(&last_reply, 500),
        })
    }
}

fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Scripted, ScriptedLlm};
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Entities {
        entities: Vec<String>,
    }

    fn policy() -> Policy {
        Policy {
            temperature: 0.0,
            max_tokens: 64,
            frequency_penalty: 0.5,
            json_retries: 4,
            retry_temperature: 0.7,
        }
    }

    fn service(llm: Arc<ScriptedLlm>, cache: Option<ReplyCache>) -> Service {
        Service::new(llm, cache, policy())
    }

    /// A transport that takes a while to answer, so that identical requests overlap.
    struct Slow(ScriptedLlm);

    #[async_trait::async_trait]
    impl Llm for Slow {
        fn model(&self) -> &str {
            self.0.model()
        }
        async fn chat(&self, request: &ChatRequest) -> Result<ChatReply, LlmError> {
            let out = self.0.chat(request).await;
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            out
        }
    }

    /// A one-message request with the service's first-attempt sampling.
    fn request(svc: &Service, text: &str) -> ChatRequest {
        ChatRequest {
            messages: vec![Message::user(text)],
            sampling: svc.sampling(),
            schema: None,
        }
    }

    #[tokio::test]
    async fn identical_requests_in_flight_at_once_reach_the_llm_once() {
        let dir = tempfile::tempdir().unwrap();
        let slow =
            Arc::new(Slow(ScriptedLlm::new([]).with_responder(|r| {
                Scripted::Reply(r.messages[0].content.clone())
            })));
        let svc = Service::new(
            slow.clone(),
            Some(ReplyCache::open(dir.path()).unwrap()),
            policy(),
        );
        let (a, b) = (svc.scoped(), svc.scoped());
        let (same, other) = (request(&svc, "same"), request(&svc, "other"));
        let (r1, r2, r3, r4) = tokio::join!(
            a.chat("check", &same),
            b.chat("check", &same),
            svc.chat("check", &same),
            b.chat("check", &other),
        );
        let replies = [r1.unwrap(), r2.unwrap(), r3.unwrap(), r4.unwrap()];
        assert_eq!(
            replies
                .iter()
                .map(|r| r.content.as_str())
                .collect::<Vec<_>>(),
            ["same", "same", "same", "other"]
        );
        assert_eq!(
            replies.iter().filter(|r| r.cached).count(),
            2,
            "two of the three identical calls wait for the first"
        );
        let sent: Vec<String> = slow
            .0
            .received()
            .iter()
            .map(|r| r.messages[0].content.clone())
            .collect();
        assert_eq!(sent.len(), 2, "one request per distinct prompt: {sent:?}");
        let s = svc.ledger().snapshot();
        assert_eq!(
            (s.stages["check"].requests, s.stages["check"].cache_hits),
            (2, 2)
        );
        assert!(
            svc.in_flight.lock().unwrap().is_empty(),
            "no key is left behind"
        );
    }

    #[tokio::test]
    async fn a_failed_request_in_flight_leaves_the_waiter_to_send_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let slow = Arc::new(Slow(ScriptedLlm::new([
            Scripted::Fail("connection reset".into()),
            Scripted::Reply("second".into()),
        ])));
        let svc = Service::new(
            slow.clone(),
            Some(ReplyCache::open(dir.path()).unwrap()),
            policy(),
        );
        let same = request(&svc, "same");
        let (r1, r2) = tokio::join!(svc.chat("check", &same), svc.chat("check", &same));
        assert!(r1.is_err());
        let r2 = r2.unwrap();
        assert_eq!((r2.content.as_str(), r2.cached), ("second", false));
        assert_eq!(slow.0.received().len(), 2);
    }

    #[tokio::test]
    async fn first_parsable_reply_wins_after_retries_at_higher_temperature() {
        let llm = Arc::new(ScriptedLlm::new([
            Scripted::Reply("no json here".into()),
            Scripted::CutOff(r#"{"entities": ["a"]}"#.into()),
            Scripted::Reply("```json\n{\"entities\": [\"Paris\", \"Kyiv\"]}\n```".into()),
        ]));
        let svc = service(llm.clone(), None);
        let got: Structured<Entities> = svc
            .chat_json("entities", vec![Message::user("x")], None)
            .await
            .unwrap();
        assert_eq!(got.value.entities, vec!["Paris", "Kyiv"]);
        assert_eq!(got.attempts, 3);
        let temps: Vec<(f32, Option<u64>)> = llm
            .received()
            .iter()
            .map(|r| (r.sampling.temperature, r.sampling.seed))
            .collect();
        assert_eq!(temps, vec![(0.0, None), (0.7, Some(1)), (0.7, Some(2))]);
        let s = svc.ledger().snapshot();
        assert_eq!(s.stages["entities"].requests, 3);
        assert_eq!(s.stages["entities"].unparsable, 2);
        assert_eq!(s.stages["entities"].failed_steps, 0);
    }

    #[tokio::test]
    async fn never_parsable_is_a_typed_failure_after_five_attempts() {
        let llm = Arc::new(
            ScriptedLlm::new([]).with_responder(|_| Scripted::Reply("{\"entities\": 3}".into())),
        );
        let svc = service(llm.clone(), None);
        let err = svc
            .chat_json::<Entities>("relations", vec![Message::user("x")], None)
            .await
            .unwrap_err();
        match &err {
            LlmError::Unparsable {
                stage,
                attempts,
                reason,
                last_reply,
            } => {
                assert_eq!(stage, "relations");
                assert_eq!(*attempts, 5);
                assert!(reason.contains("wrong shape"), "{reason}");
                assert!(last_reply.contains("entities"));
            }
            other => panic!("expected Unparsable, got {other:?}"),
        }
        assert_eq!(llm.received().len(), 5);
        let s = svc.ledger().snapshot();
        assert_eq!(s.stages["relations"].failed_steps, 1);
        assert_eq!(s.stages["relations"].unparsable, 5);
    }

    #[tokio::test]
    async fn transport_errors_end_the_step_and_are_counted() {
        let llm = Arc::new(ScriptedLlm::new([Scripted::Fail(
            "connection reset".into(),
        )]));
        let svc = service(llm, None);
        let err = svc
            .chat_json::<Entities>("entities", vec![Message::user("x")], None)
            .await
            .unwrap_err();
        assert!(matches!(err, LlmError::Connect { .. }), "{err}");
        assert_eq!(svc.ledger().snapshot().stages["entities"].errors, 1);
    }

    #[tokio::test]
    async fn identical_call_is_served_from_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let llm = Arc::new(ScriptedLlm::new([Scripted::Reply(
            r#"{"entities": ["x"]}"#.into(),
        )]));
        let svc = service(llm.clone(), Some(ReplyCache::open(dir.path()).unwrap()));
        let a: Structured<Entities> = svc
            .chat_json("entities", vec![Message::user("same")], None)
            .await
            .unwrap();
        let b: Structured<Entities> = svc
            .chat_json("entities", vec![Message::user("same")], None)
            .await
            .unwrap();
        assert_eq!(a.value, b.value);
        assert!(!a.reply.cached && b.reply.cached);
        assert_eq!(
            llm.received().len(),
            1,
            "the second call must not reach the LLM"
        );
        let s = svc.ledger().snapshot();
        assert_eq!(
            (
                s.stages["entities"].requests,
                s.stages["entities"].cache_hits
            ),
            (1, 1)
        );
        // A fresh service over the same directory (a re-run) makes no call either.
        let llm2 = Arc::new(ScriptedLlm::new([]));
        let svc2 = service(llm2.clone(), Some(ReplyCache::open(dir.path()).unwrap()));
        let c: Structured<Entities> = svc2
            .chat_json("entities", vec![Message::user("same")], None)
            .await
            .unwrap();
        assert_eq!(c.value.entities, vec!["x"]);
        assert!(llm2.received().is_empty());
    }
}
