#!/usr/bin/env bash
# Copies the graphs built so far by runs/graphs-longbench-style (items 1-30) and
# runs/graphs-longbench-style-31-60 (items 31-60, issue 56) into a run that reads them
# (--memories-built-by), with their build rows, so the run's report shows the builds of the very
# memories it read. The run's own graph build rows are replaced; its other rows are kept.
#   bash eval/probes/sync-graphs.sh [run directory]   (default: eval/runs/hotpot-longbench-style)
set -euo pipefail
cd "$(dirname "$0")/../.."
dst=${1:-eval/runs/hotpot-longbench-style}
[ -d "$dst/memories" ] || { echo "sync-graphs: $dst/memories is not a directory" >&2; exit 1; }
srcs=()
for src in eval/runs/graphs-longbench-style eval/runs/graphs-longbench-style-31-60; do
  [ -f "$src/builds.jsonl" ] || continue
  srcs+=("$src")
  ls "$src"/memories/*-graph-*.qrm.gz >/dev/null 2>&1 && cp -n "$src"/memories/*-graph-*.qrm.gz "$dst/memories/"
done
tmp=$(mktemp)
{ [ ! -f "$dst/builds.jsonl" ] || grep -v '"kind":"graph"' "$dst/builds.jsonl" || true
  for src in "${srcs[@]}"; do grep '"kind":"graph"' "$src/builds.jsonl" || true; done; } > "$tmp"
mv "$tmp" "$dst/builds.jsonl"
echo "sync-graphs: $(ls "$dst"/memories/*-graph-*.qrm.gz | wc -l) graphs in $dst/memories, $(grep -c '"kind":"graph"' "$dst/builds.jsonl") graph build rows"
