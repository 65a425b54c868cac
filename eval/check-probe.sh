#!/usr/bin/env bash
# Issue 39's check probe (eval/check-probe.toml): kn with the evidence-first answerability prompt
# on the first N LongBench-style items (default: the toml's 30), over the 0.5B graphs, then the
# checks of the probe and of the shipped prompt's run side by side. Needs the 0.5B server
# (scripts/llm-server.sh start --np 4 --model 0.5b) and target/release/qrmem.
#   bash eval/check-probe.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
out=eval/runs/check-probe
prompts=$(mktemp -d)
trap 'rm -rf "$prompts"' EXIT
cp prompts/*.txt "$prompts/"
cp eval/check-probe-answerability.txt "$prompts/answerability.txt"
mkdir -p "$out/memories"
bash eval/sync-graphs.sh "$out"
QRMEM_PROMPTS_DIR="$prompts" ./target/release/qrmem eval --experiment eval/check-probe.toml \
  --out "$out" --trace-dir "$out/traces" --concurrency 2 --timeout 900 ${1:+--limit "$1"}
python3 eval/checks.py "$out" --against eval/runs/hotpot-longbench-style
