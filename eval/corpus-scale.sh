#!/usr/bin/env bash
# The corpus at scale: every paragraph of a HotpotQA dev-distractor file added to one corpus,
# then what a user feels at that size. Needs no LLM; needs the CPU to itself (no llama-server
# answering beside it, no compile). The lexical and graph retrievers only: the dense row embeds
# every passage first (about 25 minutes for 5,088 passages here, eval/runs/corpus-recall). Writes OUT/<size>/: recall.md and recall.json (HippoRAG's
# recall@2 / @5 of every question, each retriever's per-query latency in one long-lived
# process, the add's wall time), time-*.txt (/usr/bin/time -v of each command), serve.json
# (one more document added and searches in a long-lived `corpus serve`), fresh.json (a fresh
# `corpus search` per query), remove.json (1,000 documents removed in one transaction, then
# added back), crash.json (kill -9 during an add and during a remove, then the integrity check
# and the same command again), disk.txt.
#
#   eval/corpus-scale.sh QRMEM OUT NAME DEV_FILE [WORK]
#   e.g. eval/corpus-scale.sh target/debug/qrmem eval/runs/corpus-scale 65k \
#          ../shared/data/hotpotqa/hotpot_dev_distractor_rest7205.json.gz
# SERVED, FRESH and COMPARED (eval/corpus_scale.py) set how many searches each part makes;
# KILL_REMOVE and KILL_ADD when the crash part kills (seconds; defaults 3 and 4, for a debug build).
# WORK (default /tmp/corpus-scale) holds the corpus; it is removed first, unless KEEP_CORPUS=1
# (a corpus an earlier run of this script added: its add is then skipped, document by
# document). RECALL_LIMIT=N ranks only the first N questions (their paragraphs are in the
# corpus already when it is kept; on a fresh corpus only theirs would be added).
set -euo pipefail
Q=$(realpath "$1"); OUT=$2/$3; DEV=$(realpath "$4"); WORK=${5:-/tmp/corpus-scale}/$3
here=$(cd "$(dirname "$0")" && pwd)
[ "${KEEP_CORPUS:-0}" = 1 ] || rm -rf "$WORK"
mkdir -p "$WORK" "$OUT"
C=$WORK/corpus
timed() { local name=$1; shift; /usr/bin/time -v -o "$OUT/time-$name.txt" "$@"; }
wall() { grep 'Elapsed (wall' "$OUT/time-$1.txt" | awk '{print $NF}'; }
rss() { grep 'Maximum resident' "$OUT/time-$1.txt" | awk '{print $NF}'; }

echo "[scale] $(date +%T) recall: add every paragraph, rank every question" >&2
timed recall "$Q" corpus --corpus "$C" recall --in "$DEV" --json "$OUT/recall.json" \
  --retrievers bm25,bm25-hop,graph-start,graph-hop,graph-own-hop \
  ${RECALL_LIMIT:+--limit "$RECALL_LIMIT"} >"$OUT/recall.md"
du -sk "$C" "$C"/* >"$OUT/disk.txt"

# Documents the corpus does not hold (2WikiMultihopQA paragraphs) for the adds, and 1,000 of
# its own paragraphs (ids and texts) for the remove.
python3 "$here/corpus_scale.py" prepare "$DEV" "$here/../../shared/data/2wikimultihopqa/2wiki_dev40.json" "$WORK"

echo "[scale] $(date +%T) one more document, fresh processes" >&2
for i in 1 2 3; do
  timed "add-one-$i" "$Q" corpus --corpus "$C" add "$WORK/new/$i.txt" >/dev/null
done

echo "[scale] $(date +%T) a long-lived process: 20 adds, 200 searches per retriever" >&2
python3 "$here/corpus_scale.py" serve "$Q" "$C" "$WORK" >"$OUT/serve.json"

echo "[scale] $(date +%T) a fresh corpus search per query" >&2
python3 "$here/corpus_scale.py" fresh "$Q" "$C" "$WORK" >"$OUT/fresh.json"

echo "[scale] $(date +%T) remove 1,000 documents, add them back" >&2
timed remove-1000 "$Q" corpus --corpus "$C" remove $(cat "$WORK/remove.ids") >/dev/null
timed add-back-1000 "$Q" corpus --corpus "$C" add "$WORK/removed" >/dev/null
printf '{"remove_wall": "%s", "remove_rss_kb": %s, "add_back_wall": "%s", "add_back_rss_kb": %s}\n' \
  "$(wall remove-1000)" "$(rss remove-1000)" "$(wall add-back-1000)" "$(rss add-back-1000)" >"$OUT/remove.json"

echo "[scale] $(date +%T) kill -9 during a remove and during an add" >&2
python3 "$here/corpus_scale.py" crash "$Q" "$C" "$WORK" >"$OUT/crash.json"
du -sk "$C" >>"$OUT/disk.txt"
echo "[scale] $(date +%T) done: $OUT" >&2
