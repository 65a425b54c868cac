//! Shared test fixtures: a misbehaving OpenAI-compatible server and the real local llama-server.
#![allow(dead_code)]

pub mod bow;
pub mod fault_server;
pub mod local_llm;
pub mod velden;
