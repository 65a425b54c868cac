//! The LLM boundary.
//!
//! - [`Llm`]: the transport trait, one chat completion per call. [`OpenAiClient`] speaks the
//!   OpenAI-compatible HTTP API (llama.cpp's server, vLLM, Ollama, OpenAI); tests implement it
//!   with scripted replies.
//! - [`Service`]: what the pipeline calls. It puts the content-addressed [`ReplyCache`] in front
//!   of the transport, records every call in the [`Ledger`] under a pipeline stage, and applies
//!   the QRMeM paper's policy for structured output ([`Service::chat_json`]).

mod cache;
mod json;
mod ledger;
mod openai;
mod repeat;
mod scripted;
mod service;

pub use cache::{CacheKey, ReplyCache};
pub use json::extract_json;
pub use ledger::{InFlight, Ledger, LedgerSnapshot, StageStats};
pub use openai::{OpenAiClient, RetryPolicy};
pub use repeat::{cut_repeats, RepeatCut};
pub use scripted::{Scripted, ScriptedLlm};
pub use service::{Decoding, Policy, Service, Structured};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::LlmError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Message {
            role: Role::System,
            content: content.into(),
        }
    }
    pub fn user(content: impl Into<String>) -> Self {
        Message {
            role: Role::User,
            content: content.into(),
        }
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Message {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// Sampling parameters; part of the cache key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    pub temperature: f32,
    pub max_tokens: u32,
    pub frequency_penalty: f32,
    /// Distinguishes the retries of one structured step (and seeds the server's sampler).
    pub seed: Option<u64>,
    /// Ask for each generated token's log probability and this many alternatives (0: none).
    /// Absent from the cache key when 0, so the keys of requests that ask for none are those
    /// of before the field.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub top_logprobs: u8,
    /// Stop the reply once one of its JSON arrays receives an element it already holds this
    /// many times, and keep the text before that copy, closed ([`RepeatCut`]; 0: never). The
    /// transport streams the reply to do it. Absent from the cache key when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cut_repeats: u8,
    /// With `cut_repeats`: watch only the array under this key (None: every array). Absent from
    /// the cache key when None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_repeats_in: Option<String>,
}

fn is_zero(n: &u8) -> bool {
    *n == 0
}

/// One generated token with its log probability and the most likely alternatives at its
/// position (the OpenAI `logprobs.content` entries).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    pub token: String,
    pub logprob: f64,
    /// (token, log probability), most likely first; the generated token is among them when it
    /// was among the most likely.
    #[serde(default)]
    pub top: Vec<(String, f64)>,
}

/// A JSON Schema the reply must follow.
///
/// A server that turns the schema into a grammar (llama.cpp's) makes the reply write an
/// object's keys in the order the schema lists its properties, and `serde_json::Value` keeps
/// maps sorted by name. The order that counts is therefore the `required` list's: the schema is
/// sent with [`JsonSchema::as_sent`], which lists each object's properties in that order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JsonSchema {
    /// A short identifier (`[a-zA-Z0-9_-]`), required by OpenAI's `json_schema` format.
    pub name: String,
    pub schema: serde_json::Value,
}

impl JsonSchema {
    /// The schema as it goes to the server: every object's `properties` in the order of its
    /// `required` list, then any other property by name; every other map by name.
    pub fn as_sent(&self) -> InRequiredOrder<'_> {
        InRequiredOrder(&self.schema)
    }

    /// The sent text when its property order is not the name order (`None` when it is): the
    /// part of the cache key that tells apart a request whose reply's key order changed.
    pub fn sent_order(&self) -> Option<String> {
        let sent = serde_json::to_string(&self.as_sent()).ok()?;
        let by_name = serde_json::to_string(&self.schema).ok()?;
        (sent != by_name).then_some(sent)
    }
}

/// A schema value serialised with each object's properties in `required` order (see
/// [`JsonSchema`]).
pub struct InRequiredOrder<'a>(&'a serde_json::Value);

impl Serialize for InRequiredOrder<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        use serde_json::Value;
        match self.0 {
            Value::Object(map) => {
                let mut m = s.serialize_map(Some(map.len()))?;
                for (key, value) in map {
                    match (key.as_str(), value, map.get("required")) {
                        ("properties", Value::Object(props), Some(Value::Array(required))) => {
                            m.serialize_entry(key, &Properties(props, required))?
                        }
                        _ => m.serialize_entry(key, &InRequiredOrder(value))?,
                    }
                }
                m.end()
            }
            Value::Array(items) => s.collect_seq(items.iter().map(InRequiredOrder)),
            other => other.serialize(s),
        }
    }
}

/// An object schema's properties: the required ones in `required` order, then the rest.
struct Properties<'a>(
    &'a serde_json::Map<String, serde_json::Value>,
    &'a [serde_json::Value],
);

impl Serialize for Properties<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (props, required) = (self.0, self.1);
        let mut first: Vec<&str> = Vec::new();
        for name in required.iter().filter_map(|r| r.as_str()) {
            if props.contains_key(name) && !first.contains(&name) {
                first.push(name);
            }
        }
        let rest = props
            .keys()
            .map(String::as_str)
            .filter(|k| !first.contains(k));
        let mut m = s.serialize_map(Some(props.len()))?;
        for name in first.iter().copied().chain(rest) {
            if let Some(value) = props.get(name) {
                m.serialize_entry(name, &InRequiredOrder(value))?;
            }
        }
        m.end()
    }
}

/// One chat completion request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub sampling: Sampling,
    /// Ask for JSON following this schema (how depends on `llm.json_mode`).
    pub schema: Option<JsonSchema>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens the server took from its prompt cache (llama.cpp `timings.cache_n`,
    /// OpenAI `prompt_tokens_details.cached_tokens`); 0 where the server does not say.
    #[serde(default)]
    pub cached_prompt_tokens: u64,
}

/// One chat completion reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatReply {
    pub content: String,
    /// `stop`, `length`, ... as the server said; `length` means the reply was cut off.
    pub finish_reason: String,
    pub usage: Usage,
    /// HTTP attempts this reply took (1 when nothing was retried; 0 for a cache hit).
    #[serde(default)]
    pub attempts: u32,
    /// Whether the reply came from the cache.
    #[serde(default)]
    pub cached: bool,
    /// Per generated token, its log probability and the alternatives, when the request asked
    /// for them (`Sampling::top_logprobs`) and the server gave them; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logprobs: Vec<TokenLogprob>,
}

impl ChatReply {
    pub fn was_cut_off(&self) -> bool {
        self.finish_reason == "length"
    }

    /// Whether the reply was stopped at a repeated JSON element (`Sampling::cut_repeats`):
    /// its content is the text before the repeat, closed, and parses.
    pub fn was_cut_at_repeat(&self) -> bool {
        self.finish_reason == FINISH_REPEAT
    }
}

/// The `finish_reason` of a reply stopped at a repeated JSON element.
pub const FINISH_REPEAT: &str = "repeat";

/// The transport: one chat completion per call. Implementations retry transport faults
/// themselves and report how many attempts a reply took.
#[async_trait]
pub trait Llm: Send + Sync {
    /// The model name sent to the server; part of every cache key.
    fn model(&self) -> &str;
    async fn chat(&self, request: &ChatRequest) -> Result<ChatReply, LlmError>;

    /// `chat`, telling `gauge` when each request is at the server. The default brackets the
    /// whole call; a transport that queues requests (a concurrency limit) or retries overrides
    /// it to bracket only the time an attempt holds a slot, so the gauge measures the server's
    /// occupancy, not the client's queue.
    async fn chat_gauged(
        &self,
        request: &ChatRequest,
        gauge: &dyn SlotGauge,
    ) -> Result<ChatReply, LlmError> {
        let started = gauge.started();
        let out = self.chat(request).await;
        gauge.ended(started);
        out
    }
}

/// Counts requests in flight at the server (see `Ledger`'s in-flight figures).
pub trait SlotGauge: Send + Sync {
    /// A request has been sent; returns its start, to pass to `ended`.
    fn started(&self) -> std::time::Instant;
    fn ended(&self, started: std::time::Instant);
}
