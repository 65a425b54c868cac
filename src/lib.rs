//! qrmem: long-context question answering over a query-oriented memory (QRMeM) and the memory
//! systems it is compared with. See ARCHITECTURE.md for the code map.

// House rule: library code returns errors; unwrap, expect and panic are for tests and main.rs.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod answer;
pub mod batch;
pub mod config;
pub mod corpus;
pub mod doctor;
pub mod embed;
pub mod error;
pub mod eval;
mod fsutil;
pub mod journal;
pub mod llm;
pub mod memory;
pub mod methods;
pub mod navigate;
pub mod progress;
pub mod prompts;
pub mod text;
pub mod view;

pub use config::Config;
pub use error::{ConfigError, LlmError};
