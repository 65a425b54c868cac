#!/usr/bin/env bash
# Issue 39's check probe (eval/probes/check-probe.toml, eval/probes/check-probe-1.5b.toml): kn with the
# evidence-first answerability prompt on the first N LongBench-style items (default: the toml's
# 30), over the 0.5B graphs, then the checks of the probe and of the shipped prompt's run side
# by side. Needs the server of the model that navigates (scripts/llm-server.sh start --np 4
# --model 0.5b, or 1.5b) and target/release/qrmem.
#   bash eval/probes/check-probe.sh [0.5b|1.5b] [N]
#     0.5b (default): check-probe.toml into eval/runs/check-probe, against
#       eval/runs/hotpot-longbench-style
#     1.5b: check-probe-1.5b.toml into eval/runs/check-probe-1.5b, against
#       eval/runs/hotpot-longbench-style-1.5b
set -euo pipefail
cd "$(dirname "$0")/../.."
case "${1:-0.5b}" in
  0.5b) exp=eval/probes/check-probe.toml out=eval/runs/check-probe base=eval/runs/hotpot-longbench-style ;;
  1.5b) exp=eval/probes/check-probe-1.5b.toml out=eval/runs/check-probe-1.5b base=eval/runs/hotpot-longbench-style-1.5b ;;
  *) echo "check-probe: the model is 0.5b or 1.5b, not '$1'" >&2; exit 2 ;;
esac
prompts=$(mktemp -d)
trap 'rm -rf "$prompts"' EXIT
cp prompts/*.txt "$prompts/"
cp prompts/probes/answerability-evidence-first.txt "$prompts/answerability.txt"
mkdir -p "$out/memories"
bash eval/probes/sync-graphs.sh "$out"
QRMEM_PROMPTS_DIR="$prompts" ./target/release/qrmem eval --experiment "$exp" \
  --out "$out" --trace-dir "$out/traces" --concurrency 2 --timeout 900 ${2:+--limit "$2"}
python3 eval/probes/checks.py "$out" --against "$base"
