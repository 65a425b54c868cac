//! Shared test fixtures: a misbehaving OpenAI-compatible server and the real local llama-server.
#![allow(dead_code)]

pub mod bow;
pub mod fault_server;
pub mod local_llm;
pub mod velden;

/// The embedder model directory (`QRMEM_EMBED_MODEL_DIR`, else the one
/// scripts/setup-embedder.sh installs), or None, with a message, when it is missing and
/// `QRMEM_REQUIRE_EMBEDDER` is not 1 (CI sets it, and then a missing model fails the test).
pub fn embedder_model_dir() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("QRMEM_EMBED_MODEL_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| qrmem::config::qrmem_home().join("models/all-MiniLM-L6-v2"));
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    let msg = format!(
        "no embedder model at {}; run scripts/setup-embedder.sh",
        dir.display()
    );
    if std::env::var("QRMEM_REQUIRE_EMBEDDER").as_deref() == Ok("1") {
        panic!("{msg} (QRMEM_REQUIRE_EMBEDDER=1)");
    }
    eprintln!("SKIPPED: {msg}");
    None
}

/// A file of the evaluation data (`QRMEM_DATA_DIR`, else `../shared/data` beside the
/// repository), or None, with a message, when it is missing and `QRMEM_REQUIRE_LLM` is not 1
/// (CI sets it, and then missing data fails the test instead of skipping it silently).
pub fn shared_data(rel: &str) -> Option<std::path::PathBuf> {
    let base = std::env::var_os("QRMEM_DATA_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data")
        });
    let p = base.join(rel);
    if p.is_file() {
        return Some(p);
    }
    let msg = format!("no evaluation data at {}", p.display());
    if std::env::var("QRMEM_REQUIRE_LLM").as_deref() == Ok("1") {
        panic!("{msg} (QRMEM_REQUIRE_LLM=1: CI needs ../shared/data)");
    }
    eprintln!("SKIPPED: {msg}");
    None
}

/// Every line of a jsonl file the program wrote (results.jsonl, contexts.jsonl), parsed; a
/// missing file or a line that is not JSON fails the test.
pub fn jsonl(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}: not JSON: {e}: {l}", path.display()))
        })
        .collect()
}
