#!/usr/bin/env bash
# Copies the graphs built so far by runs/graphs-longbench-style into a run that reads them
# (--memories-built-by), with their build rows, so the run's report shows the builds of the very
# memories it read. The run's own graph build rows are replaced; its other rows are kept.
#   bash eval/sync-graphs.sh [run directory]   (default: eval/runs/hotpot-longbench-style)
set -euo pipefail
cd "$(dirname "$0")/.."
src=eval/runs/graphs-longbench-style
dst=${1:-eval/runs/hotpot-longbench-style}
[ -d "$dst/memories" ] || { echo "sync-graphs: $dst/memories is not a directory" >&2; exit 1; }
cp -n "$src"/memories/*-graph-*.qrm.gz "$dst/memories/"
tmp=$(mktemp)
{ [ ! -f "$dst/builds.jsonl" ] || grep -v '"kind":"graph"' "$dst/builds.jsonl" || true; cat "$src/builds.jsonl"; } > "$tmp"
mv "$tmp" "$dst/builds.jsonl"
echo "sync-graphs: $(ls "$dst"/memories/*-graph-*.qrm.gz | wc -l) graphs in $dst/memories, $(grep -c '"kind":"graph"' "$dst/builds.jsonl") graph build rows"
