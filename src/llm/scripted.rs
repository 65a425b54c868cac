//! A scripted LLM: a test implementation of [`Llm`] that returns fixed or recorded replies and
//! keeps every request it received, for unit tests of parsing and control flow.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{cut_repeats, ChatReply, ChatRequest, Llm, TokenLogprob, Usage, FINISH_REPEAT};
use crate::error::LlmError;

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Scripted {
    /// A reply with `finish_reason` "stop".
    Reply(String),
    /// A reply cut off at max_tokens (`finish_reason` "length").
    CutOff(String),
    /// A transport failure (as after the transport's own retries).
    Fail(String),
    /// A reply with the per-token log probabilities a server gives when asked for them
    /// (returned only when the request asks, `Sampling::top_logprobs` > 0).
    WithLogprobs(String, Vec<TokenLogprob>),
}

/// Computes a reply from the request when the queue is empty.
type Responder = Box<dyn Fn(&ChatRequest) -> Scripted + Send + Sync>;

/// Replies come from a queue, in order; when it runs dry, from the responder if one is set.
pub struct ScriptedLlm {
    model: String,
    queue: Mutex<VecDeque<Scripted>>,
    responder: Option<Responder>,
    received: Mutex<Vec<ChatRequest>>,
}

impl ScriptedLlm {
    pub fn new(replies: impl IntoIterator<Item = Scripted>) -> Self {
        ScriptedLlm {
            model: "scripted".to_string(),
            queue: Mutex::new(replies.into_iter().collect()),
            responder: None,
            received: Mutex::new(Vec::new()),
        }
    }

    /// Serves under the model name `name` (default "scripted"), which memory keys carry.
    pub fn with_model(mut self, name: &str) -> Self {
        self.model = name.to_string();
        self
    }

    /// Answers every request (after the queue) with `f(request)`.
    pub fn with_responder(
        mut self,
        f: impl Fn(&ChatRequest) -> Scripted + Send + Sync + 'static,
    ) -> Self {
        self.responder = Some(Box::new(f));
        self
    }

    /// Every request received so far, in order.
    pub fn received(&self) -> Vec<ChatRequest> {
        self.received
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[async_trait]
impl Llm for ScriptedLlm {
    fn model(&self) -> &str {
        &self.model
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatReply, LlmError> {
        self.received
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(request.clone());
        let next = self
            .queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front();
        let scripted = match (next, &self.responder) {
            (Some(s), _) => s,
            (None, Some(f)) => f(request),
            (None, None) => {
                return Err(LlmError::Request(
                    "the scripted LLM has no reply left for this request".into(),
                ))
            }
        };
        let prompt_tokens = request
            .messages
            .iter()
            .map(|m| m.content.split_whitespace().count() as u64)
            .sum();
        let (mut content, mut finish_reason, logprobs) = match scripted {
            Scripted::Reply(c) => (c, "stop", Vec::new()),
            Scripted::CutOff(c) => (c, "length", Vec::new()),
            Scripted::WithLogprobs(c, lp) if request.sampling.top_logprobs > 0 => (c, "stop", lp),
            Scripted::WithLogprobs(c, _) => (c, "stop", Vec::new()),
            Scripted::Fail(message) => {
                return Err(LlmError::Connect {
                    url: "scripted://".into(),
                    message,
                })
            }
        };
        // A request that cuts repeats reads the scripted reply as a stream would.
        if request.sampling.cut_repeats > 0 && finish_reason == "stop" {
            if let Some(kept) = cut_repeats(
                &content,
                usize::from(request.sampling.cut_repeats),
                request.sampling.cut_repeats_in.as_deref(),
            ) {
                content = kept;
                finish_reason = FINISH_REPEAT;
            }
        }
        Ok(ChatReply {
            usage: Usage {
                prompt_tokens,
                completion_tokens: content.split_whitespace().count() as u64,
                ..Usage::default()
            },
            content,
            finish_reason: finish_reason.to_string(),
            attempts: 1,
            cached: false,
            logprobs,
        })
    }
}
