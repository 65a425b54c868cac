#!/usr/bin/env bash
# The main job on the local default: installs the local LLM and the embedder (first run ~12 min,
# cached after),
# builds qrmem, starts the server if it is not running, answers the question in
# data/sample/question.txt over data/sample/velden.txt, prints the reply and the ledger, and stops
# the server again if it started it.
#
# Usage: scripts/quickstart.sh [--model 0.5b|1.5b|135m]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=0.5b
[ "${1:-}" = "--model" ] && MODEL="${2:?--model needs 0.5b, 1.5b or 135m}"

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
prompt=$(python3 - prompts/quickstart.txt data/sample/velden.txt data/sample/question.txt <<'PY'
import sys
template, doc, q = (open(p, encoding="utf-8").read() for p in sys.argv[1:4])
print(template.replace("{document}", doc.strip()).replace("{question}", q.strip()))
PY
)
echo "[quickstart] question: $(cat data/sample/question.txt)" >&2
printf '%s' "$prompt" | "$BIN" --llm-base-url "http://127.0.0.1:$PORT/v1" --llm-model "$NAME" chat --stage answer -
