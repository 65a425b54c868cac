#!/usr/bin/env bash
# Issue 9's throughput check: a llama.cpp server with 4 slots (-np 4) and a batch job with
# 4 requests in flight; the batch's ledger reports the achieved concurrency (mean requests in
# flight). Needs the local LLM (scripts/setup-local-llm.sh), the embedder and ../shared/data.
#   eval/probes/throughput.sh [QUESTIONS]   (default 24: 6 HotpotQA documents x 4 questions)
# Uses a release build (cargo build --release).
set -euo pipefail
cd "$(dirname "$0")/../.."
N="${1:-24}"
PORT=8091
DATA="${QRMEM_DATA_DIR:-../shared/data}/hotpotqa/hotpot_dev_distractor_dev500.json"
OUT="$(mktemp -d)"
trap 'scripts/llm-server.sh stop --port $PORT >/dev/null 2>&1 || true; rm -rf "$OUT"' EXIT
python3 - "$DATA" "$N" > "$OUT/jobs.jsonl" <<'PY'
import json, sys
items = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
# 4 questions per document: the item's own and three about its other paragraphs' titles.
for i, it in enumerate(items[: (n + 3) // 4]):
    doc = "\n\n".join(t + "\n" + "".join(s) for t, s in it["context"])
    qs = [{"id": "q0", "question": it["question"]}]
    for k, (title, _) in enumerate(it["context"][1:4], 1):
        qs.append({"id": f"q{k}", "question": f"What does the text say about {title}?"})
    print(json.dumps({"id": it["_id"], "doc": doc, "questions": qs}))
PY
cargo build --release --quiet --bin qrmem
scripts/llm-server.sh start --port "$PORT" --np 4 >&2
"${CARGO_TARGET_DIR:-target}/release/qrmem" batch --input "$OUT/jobs.jsonl" --output "$OUT/answers.jsonl" \
  --method bm25-top1 --memory-dir "$OUT/mem" --no-cache --concurrency 4 \
  --llm-base-url "http://127.0.0.1:$PORT/v1" 2>&1 | tail -12
