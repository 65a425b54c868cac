//! Typed errors of the library. Each names the input it concerns and what is wrong with it.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read the configuration file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("configuration {source_name}: {message}")]
    Parse {
        source_name: String,
        message: String,
    },
    #[error("configuration {source_name}: {key} {message}")]
    Invalid {
        source_name: String,
        key: String,
        message: String,
    },
    #[error("environment variable {var}='{value}' is not {expected}")]
    Env {
        var: String,
        value: String,
        expected: String,
    },
    #[error(
        "configuration {source_name}: [llm] api_key is not accepted in a file; \
         set the environment variable QRMEM_LLM_API_KEY instead"
    )]
    KeyInFile { source_name: String },
}

/// What went wrong talking to an LLM, or with what it said.
#[derive(Debug, Error)]
pub enum LlmError {
    /// The server answered with an HTTP error that retrying does not fix (4xx other than 429),
    /// or a retryable one after the retry budget.
    #[error("LLM server {url} answered HTTP {status}: {body}")]
    Http {
        url: String,
        status: u16,
        body: String,
    },
    #[error("LLM request to {url} timed out after {secs:.1} s")]
    Timeout { url: String, secs: f64 },
    #[error("cannot reach the LLM server at {url}: {message}")]
    Connect { url: String, message: String },
    /// Nothing listens at the one local URL configured: not retried, since waiting does not
    /// start a server.
    #[error("nothing is listening at {url} (connection refused): start the local server with `scripts/llm-server.sh start` (`--model 1.5b` for the larger model), or point --llm-base-url at a running server")]
    ServerDown { url: String },
    /// The server answered 200 with a body that is not an OpenAI chat completion.
    #[error("LLM server {url} sent a malformed response: {message}")]
    Protocol { url: String, message: String },
    #[error("gave up on {url} after {attempts} attempts; last error: {last}")]
    RetriesExhausted {
        url: String,
        attempts: u32,
        last: Box<LlmError>,
    },
    /// A structured step never produced a reply that parses (the paper's policy: one try at
    /// temperature 0, then `json_retries` at 0.7). The last reply is kept for the record.
    #[error("stage '{stage}': no parsable reply after {attempts} attempts ({reason}); last reply: {last_reply:?}")]
    Unparsable {
        stage: String,
        attempts: u32,
        reason: String,
        last_reply: String,
    },
    #[error("LLM reply cache at {path}: {message}")]
    Cache { path: PathBuf, message: String },
    #[error("invalid LLM request: {0}")]
    Request(String),
}

impl LlmError {
    /// Whether the transport layer should try the same request again.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Http { status, .. } => *status == 429 || *status >= 500,
            LlmError::Timeout { .. } | LlmError::Connect { .. } | LlmError::Protocol { .. } => true,
            _ => false,
        }
    }
}
