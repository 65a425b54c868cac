#!/usr/bin/env bash
# The test command: installs what the tests need (the local LLM, cached under ~/.cache/qrmem),
# checks formatting and lints, then runs every test. The real-LLM tests start their own
# llama-server on a free port and stop it; QRMEM_REQUIRE_LLM=1 makes them fail, not skip, if
# the install is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
step() { printf '\n[test] %s (t+%ss)\n' "$*" "$(( $(date +%s) - started ))" >&2; }

step "local LLM (llama-server + Qwen2.5-Coder-0.5B GGUF)"
scripts/setup-local-llm.sh --model "${QRMEM_TEST_MODEL:-0.5b}" >/dev/null
step "embedder (libtorch 2.4.0 CPU + all-MiniLM-L6-v2)"
scripts/setup-embedder.sh
step "headless browser for the page tests (Debian's chromium)"
if ! command -v chromium >/dev/null; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
    || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q --no-install-recommends chromium >/dev/null; }
fi

if command -v rustup >/dev/null; then
  rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi
step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy"
cargo clippy --all-targets --locked -- -D warnings
step "cargo test"
QRMEM_REQUIRE_LLM=1 QRMEM_REQUIRE_EMBEDDER=1 QRMEM_REQUIRE_BROWSER=1 cargo test --all-targets --locked 2>&1
step "the committed reports regenerate byte-identical (eval/check-reports.sh)"
eval/check-reports.sh "${CARGO_TARGET_DIR:-target}/debug/qrmem"
step "done"
