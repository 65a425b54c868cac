#!/usr/bin/env bash
# Runs reading rows over the graphs of items 31-60 while runs/graphs-longbench-style-31-60 is
# still building them: copies the graphs built so far into the run (sync-graphs.sh), answers
# every item that has its graph, and goes round again after each pass until the build run has
# ended and a last pass is done. Items without a graph are left for the next pass (a reading run
# builds nothing).
#   bash eval/probes/follow-graphs.sh METHODS [experiment] [run directory] [qrmem binary]
# e.g. bash eval/probes/follow-graphs.sh kn,kn-sentences1000,te,ges
# (default experiment eval/hotpot-longbench-style.toml, run eval/runs/hotpot-longbench-style,
# binary qrmem on PATH; 2 requests at a time, the other two slots being the builds').
set -euo pipefail
cd "$(dirname "$0")/.."
methods=${1:?"follow-graphs: give the methods, e.g. kn,te"}
experiment=${2:-hotpot-longbench-style.toml}
run=${3:-runs/hotpot-longbench-style}
qrmem=${4:-qrmem}
while true; do
  building=0
  pgrep -f "graphs-longbench-style-31-60.toml" >/dev/null && building=1
  bash probes/sync-graphs.sh "eval/$run"
  "$qrmem" eval --experiment "$experiment" --out "$run" \
    --memories-built-by qwen2.5-coder-0.5b-instruct --trace-dir "$run/traces" \
    --methods "$methods" --skip 30 --concurrency 2 --timeout 900
  [ "$building" = 1 ] || break
  sleep 60
done
echo "follow-graphs: the graph builds have ended and the last pass is done"
