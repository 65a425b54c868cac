#!/usr/bin/env bash
# The main job on the local default: installs the local LLM and the embedder (first run about
# 12-21 minutes on 2 cores, 8-13 of them compiling llama.cpp's server; cached after), builds qrmem,
# starts the server if it is not running, answers the question in data/sample/question.txt over
# data/sample/velden.txt with `qrmem ask --doc` and the default preset (`fast`: no LLM build, one
# call), prints the answer, the trace summary and the ledger, and stops the server again if it
# started it.
#
# Usage: scripts/quickstart.sh [--model 0.5b|1.5b|135m] [more qrmem ask flags, e.g. --preset qrmem-paper]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=0.5b
if [ "${1:-}" = "--model" ]; then MODEL="${2:?--model needs 0.5b, 1.5b or 135m}"; shift 2; fi

scripts/setup-local-llm.sh --model "$MODEL" >/dev/null
scripts/setup-embedder.sh
echo "[quickstart] building qrmem" >&2
cargo build --quiet --bin qrmem
BIN="${CARGO_TARGET_DIR:-target}/debug/qrmem"

PORT="${QRMEM_QUICKSTART_PORT:-8080}"
started=0
if ! scripts/llm-server.sh status --port "$PORT" >/dev/null 2>&1; then
  scripts/llm-server.sh start --model "$MODEL" --port "$PORT" >&2
  started=1
fi
cleanup() { [ "$started" = 1 ] && scripts/llm-server.sh stop --port "$PORT" >&2 || true; }
trap cleanup EXIT

case "$MODEL" in
  0.5b) NAME=qwen2.5-coder-0.5b-instruct ;; 1.5b) NAME=qwen2.5-coder-1.5b-instruct ;; 135m) NAME=smollm2-135m-instruct ;;
esac
echo "[quickstart] question: $(cat data/sample/question.txt)" >&2
# 150-token segments: the two-paragraph sample becomes two segments, so the answer needs a hop.
"$BIN" --llm-base-url "http://127.0.0.1:$PORT/v1" --llm-model "$NAME" ask \
  --doc data/sample/velden.txt --question "$(cat data/sample/question.txt)" --segment-tokens 150 "$@"
