#!/usr/bin/env bash
# Regenerates every committed report with `qrmem eval --report-only` from a copy of its run
# directory (as committed: `git archive HEAD`) and fails if any report.md, report.json,
# backfill.jsonl or figure differs by a byte from the committed one; then the same for the
# committed comparisons of runs (`qrmem compare`). No LLM is reached: the URL given is a
# closed port. Needs ../shared/data (the datasets the backfill reads).
#
# Usage: eval/check-reports.sh [path to the qrmem binary]   (default: target/release/qrmem)
#        eval/check-reports.sh BINARY --write   rewrites every committed report and comparison
#        in place instead (after a change to the report's format), then checks nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/release/qrmem}"
write="${2:-}"
[ -x "$bin" ] || { echo "check-reports: $bin is missing; cargo build --release first" >&2; exit 1; }
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# The copy keeps the repository's layout (the experiment files name ../../shared/data, and the
# backfill's notes name the run's memories directory as given: runs/NAME/memories).
mkdir -p "$tmp/repo"
git archive HEAD eval | tar -x -C "$tmp/repo"
ln -s "$(cd .. && pwd)/shared" "$tmp/shared"
# run directory -> experiment file
runs=(
  "hotpot-longbench-style:hotpot-longbench-style.toml"
  "hotpot-longbench-style-1.5b:hotpot-longbench-style-1.5b.toml"
  "hotpot-distractor:probes/hotpot-distractor.toml"
  "quality:probes/quality.toml"
  "overhead/cold:probes/overhead.toml"
  "overhead/warm:probes/overhead.toml"
  "graph-diagnostics:probes/graph-diagnostics.toml"
  "pages-longbench-style:probes/pages-longbench-style.toml"
  "pages-quality:probes/pages-quality.toml"
  "graphs-longbench-style:probes/graphs-longbench-style.toml"
  "graphs-cooccurrence:probes/graphs-cooccurrence.toml"
  "navigation-longbench-style:probes/navigation-longbench-style.toml"
  "extraction-decoding:probes/extraction-decoding.toml"
  "check-probe:probes/check-probe.toml"
  "check-probe-1.5b:probes/check-probe-1.5b.toml"
  "answers-longbench-style:probes/answers-longbench-style.toml"
  "calibration-1.5b:probes/calibration-1.5b.toml"
  "build-cost-before:probes/build-cost-before.toml"
  "build-cost-paper-cut2:probes/build-cost-paper-cut2.toml"
  "build-cost-paper-cut2-e8:probes/build-cost-paper-cut2-e8.toml"
  "build-cost-paper-cut1-e5:probes/build-cost-paper-cut1-e5.toml"
  "build-cost-compact-cut2:probes/build-cost-compact-cut2.toml"
  "build-cost-compact-v1-cut2:probes/build-cost-compact-v1-cut2.toml"
  "graphs-longbench-style-31-60:probes/graphs-longbench-style-31-60.toml"
  "ablations-longbench-style:probes/ablations-longbench-style.toml"
  "2wiki-longbench-style:2wiki-longbench-style.toml"
  "musique-longbench-style:musique-longbench-style.toml"
  "2wiki-longbench-style-1.5b:2wiki-longbench-style-1.5b.toml"
  "musique-longbench-style-1.5b:musique-longbench-style-1.5b.toml"
  "hotpot-unseen-1.5b:hotpot-unseen-1.5b.toml"
)
# The committed comparisons (qrmem compare): output directory -> its arguments (the runs, in
# order; Table 1's with --datasets and its --methods).
compares=(
  "compare/longbench-style-0.5b-1.5b:runs/hotpot-longbench-style runs/hotpot-longbench-style-1.5b"
  "compare/table1-0.5b:--datasets runs/hotpot-longbench-style runs/2wiki-longbench-style runs/musique-longbench-style --methods gold-passages,gold-sentences,bm25-top3,bm25-top5,contriever-top3,bm25-passages200,bm25-passages400,bm25-passages1200,contriever-passages400,bm25-hop-passages400,bm25-own-hop-passages400,ges,kn,te,kn-cooccurrence,kn-passages400,kn-hop-final-s-mix-passages400@1,kn-hop-final-filled-passages400,ges-own-hop-passages400@4,ges-own-hop-passages400@1,te-own-hop-passages400,kn-cooccurrence-passages400,kn-cooccurrence-hop-final-s-mix-passages400@4,kn-cooccurrence-hop-final-s-mix-passages400@1,kn-cooccurrence-hop-final-filled-passages400,gold-triples,gold-chain,chain-decompose-final-passages400,chain-path-passages400"
  "compare/table1-1.5b:--datasets runs/hotpot-longbench-style-1.5b runs/2wiki-longbench-style-1.5b runs/musique-longbench-style-1.5b --methods gold-passages,gold-sentences,bm25-top3,bm25-top5,contriever-top3,bm25-passages200,bm25-passages400,bm25-passages1200,contriever-passages400,bm25-hop-passages400,bm25-own-hop-passages400,ges,kn,te,kn-cooccurrence,kn-passages400,kn-hop-final-s-mix-passages400@1,kn-hop-final-filled-passages400,ges-own-hop-passages400@1,te-own-hop-passages400,kn-cooccurrence-hop-final-s-mix-passages400,kn-cooccurrence-hop-final-filled-passages400,gold-triples,gold-chain,chain-decompose-passages400,chain-decompose-final-passages400,chain-path-passages400"
)
if [ "$write" = "--write" ]; then
  for pair in "${runs[@]}"; do
    run="${pair%%:*}" exp="${pair##*:}"
    (cd eval && "$bin" --llm-base-url http://127.0.0.1:9/v1 eval --experiment "$exp" \
      --out "runs/$run" --report-only >/dev/null) || { echo "check-reports: eval/runs/$run failed" >&2; exit 1; }
    echo "eval/runs/$run: rewritten"
  done
  for pair in "${compares[@]}"; do
    out="${pair%%:*}" runs_of="${pair##*:}"
    # shellcheck disable=SC2086
    (cd eval && "$bin" compare $runs_of --out "$out" >/dev/null) || exit 1
    echo "eval/$out: rewritten"
  done
  exit 0
fi
failed=0
for pair in "${runs[@]}"; do
  run="${pair%%:*}" exp="${pair##*:}"
  dir="$tmp/repo/eval/runs/$run"
  [ -d "$dir" ] || { echo "check-reports: eval/runs/$run is not committed" >&2; failed=1; continue; }
  if ! (cd "$tmp/repo/eval" && "$bin" --llm-base-url http://127.0.0.1:9/v1 eval \
        --experiment "$exp" --out "runs/$run" --report-only >/dev/null 2>"$tmp/stderr"); then
    echo "check-reports: eval/runs/$run: the report could not be written:" >&2
    cat "$tmp/stderr" >&2
    failed=1
    continue
  fi
  run_failed=0
  for f in report.md report.json backfill.jsonl cost-quality.png budget.png trials.png; do
    git cat-file -e "HEAD:eval/runs/$run/$f" 2>/dev/null || continue
    if ! git show "HEAD:eval/runs/$run/$f" | cmp -s - "$dir/$f"; then
      echo "check-reports: eval/runs/$run/$f differs from the committed one:" >&2
      diff <(git show "HEAD:eval/runs/$run/$f") "$dir/$f" | head -20 >&2 || true
      failed=1 run_failed=1
    fi
  done
  [ "$run_failed" = 1 ] || echo "eval/runs/$run: report.md, report.json, backfill.jsonl and the figures regenerate identical"
done
for pair in "${compares[@]}"; do
  out="${pair%%:*}" runs_of="${pair##*:}"
  [ -d "$tmp/repo/eval/$out" ] || { echo "check-reports: eval/$out is not committed" >&2; failed=1; continue; }
  # shellcheck disable=SC2086
  if ! (cd "$tmp/repo/eval" && "$bin" compare $runs_of --out "$out" >/dev/null 2>"$tmp/stderr"); then
    echo "check-reports: eval/$out: the comparison could not be written:" >&2
    cat "$tmp/stderr" >&2
    failed=1
    continue
  fi
  for f in compare.md compare.json compare.png table1.md table1.json; do
    git cat-file -e "HEAD:eval/$out/$f" 2>/dev/null || continue
    if ! git show "HEAD:eval/$out/$f" | cmp -s - "$tmp/repo/eval/$out/$f"; then
      echo "check-reports: eval/$out/$f differs from the committed one" >&2
      failed=1
    fi
  done
  echo "eval/$out: its comparison files regenerate identical"
done
# The analysis scripts share eval/probes/evidence.py: each must still run on the committed runs (their
# output is read in eval/README.md, not compared here).
scripts=(
  "probes/checks.py"
  "probes/misses.py"
  "probes/calibrate.py eval/runs/calibration-1.5b kn-sentences1000"
  "probes/held-out.py"
  "probes/splits.py eval/runs/hotpot-longbench-style $tmp/items.jsonl"
)
"$bin" data longbench-style --in ../shared/data/hotpotqa/hotpot_dev_distractor_dev500.json \
  --out "$tmp/items.jsonl" --limit 60 >/dev/null 2>&1
for s in "${scripts[@]}"; do
  # shellcheck disable=SC2086
  if ! (cd "$tmp/repo" && python3 eval/$s >/dev/null 2>"$tmp/stderr"); then
    echo "check-reports: eval/$s failed:" >&2
    cat "$tmp/stderr" >&2
    failed=1
    continue
  fi
  echo "eval/${s%% *}: runs on the committed runs"
done
exit "$failed"
