#!/usr/bin/env bash
# Issue 9's overhead report: the same eval run twice, first with an empty LLM reply cache
# (cold), then with every reply cached (warm), each into its own run directory so the warm run
# redoes all the work except the LLM calls. Each run appends LLM / embedding / other seconds to
# its timing.jsonl. Needs the local LLM, the embedder and ../shared/data; uses a release build.
#   eval/probes/overhead.sh [EXPERIMENT]   (default eval/probes/overhead.toml; results in eval/runs/overhead/)
set -euo pipefail
cd "$(dirname "$0")/../.."
EXP="${1:-eval/probes/overhead.toml}"
PORT=8092
OUT=eval/runs/overhead
CACHE="$(mktemp -d)"
trap 'scripts/llm-server.sh stop --port $PORT >/dev/null 2>&1 || true; rm -rf "$CACHE"' EXIT
rm -rf "$OUT/cold" "$OUT/warm"; mkdir -p "$OUT"
cargo build --release --quiet --bin qrmem
scripts/llm-server.sh start --port "$PORT" >&2
for run in cold warm; do
  echo "== $run" >&2
  target_dir="${CARGO_TARGET_DIR:-target}"
  "$target_dir/release/qrmem" eval --experiment "$EXP" --out "$OUT/$run" --concurrency 1 \
    --cache-dir "$CACHE" --llm-base-url "http://127.0.0.1:$PORT/v1" >/dev/null
  rm -rf "$OUT/$run/memories"
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
t = {r: json.loads(open(f"{out}/{r}/timing.jsonl").read().splitlines()[-1]) for r in ("cold", "warm")}
print("| run | wall s | LLM s | embedding s | other s | LLM % | embedding % | other % | requests | cache hits |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r, x in t.items():
    w = x["wall_secs"]
    print(f"| {r} | {w:.2f} | {x['llm_secs']:.2f} | {x['embed_secs']:.2f} | {x['other_secs']:.2f} | "
          f"{100*x['llm_secs']/w:.2f} | {100*x['embed_secs']/w:.2f} | {100*x['other_secs']/w:.2f} | "
          f"{x['requests']} | {x['cache_hits']} |")
print(f"\nwarm speed-up: {t['cold']['wall_secs'] / t['warm']['wall_secs']:.0f}x; "
      f"other / cold wall: {100 * t['cold']['other_secs'] / t['cold']['wall_secs']:.2f}%")
PY
