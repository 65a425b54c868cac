#!/usr/bin/env python3
"""Where a navigator lost the evidence: each question whose answer context missed a gold sentence.

    python3 eval/misses.py [run] [method]   (defaults: eval/runs/hotpot-longbench-style, kn)

For every row of `method` whose answer context did not hold every gold supporting sentence, this
reads its trace (RUN/traces/ITEM--METHOD--tN.json) and says, for each gold segment the answer did
not show (a gold sentence's segment, from the run's graph memories, as eval/checks.py finds it),
where it was lost:
  - "S_imp rank R, never shown": linked from the question, but ranked below what the start kept
    and no expansion brought it back;
  - "shown, not in the answer": an answerability check showed it, the final answer step did not;
  - "added by an expansion, not shown": an expansion found it and the window dropped it;
  - "never reached": neither the start nor any expansion found it.
"""
import collections
import glob
import gzip
import json
import re
import sys

run = sys.argv[1] if len(sys.argv) > 1 else "eval/runs/hotpot-longbench-style"
method = sys.argv[2] if len(sys.argv) > 2 else "kn"

segments = {}
for path in glob.glob(f"{run}/memories/*-graph-*.qrm.gz"):
    with gzip.open(path) as f:
        m = json.load(f)
    segments[m["question"]] = [(int(s["start"]), int(s["end"])) for s in m["segments"]]

rows = {}
with open(f"{run}/results.jsonl") as f:
    for line in f:
        if line.strip():
            r = json.loads(line)
            if r["method"] == method:
                rows[r["item"]] = r

kinds = collections.Counter()
missed = 0
for item, r in sorted(rows.items()):
    segs = segments.get(r["question"])
    gold = r.get("gold_spans") or []
    if segs is None or not gold:
        continue
    shown = r.get("answer_spans") or []
    if all(any(a <= g0 and g1 <= b for a, b in shown) for g0, g1 in gold):
        continue
    missed += 1
    traces = glob.glob(f"{run}/traces/{item}--{method}--t*.json") + glob.glob(
        f"{run}/traces/{item}--{method}.json"
    )
    if not traces:
        print(f"{item}: no trace in {run}/traces")
        continue
    with open(traces[0]) as f:
        t = json.load(f)
    ranked = []
    for s in t["steps"]:
        m = re.search(r"ranked \[([0-9, ]*)\]", s.get("note") or "")
        if s["kind"] == "start" and m:
            ranked = [int(x) for x in m.group(1).split(",") if x.strip()]
    checked = {i for s in t["steps"] if s["kind"] == "answerability" for i in s["segments"]}
    added = {int(p[0]) for s in t["steps"] for p in (s.get("s_add") or [])}
    dropped = set()
    for s in t["steps"]:
        m = re.search(r"new segments \[([0-9, ]*)\]", s.get("note") or "")
        if m:
            dropped |= {int(x) for x in m.group(1).split(",") if x.strip()}
    final = set(t.get("final_segments") or [])
    where = []
    for g0, g1 in gold:
        holders = [i for i, (a, b) in enumerate(segs) if a <= g0 and g1 <= b]
        if not holders or any(i in final for i in holders):
            continue
        i = holders[0]
        if i in checked:
            kind = "shown, not in the answer"
        elif i in ranked:
            kind = f"S_imp rank {ranked.index(i) + 1} of {len(ranked)}, never shown"
        elif i in added or i in dropped:
            kind = "added by an expansion, not shown"
        else:
            kind = "never reached"
        where.append(f"segment {i}: {kind}")
    where = list(dict.fromkeys(where))
    for w in where:
        kinds[re.sub(r" rank .*, never", ", never", w.split(": ", 1)[1])] += 1
    print(f"{item}: " + "; ".join(where))
print(f"{run}, {method}: {missed} of {len(rows)} questions without every gold sentence; "
      f"their lost gold segments by where: {dict(kinds)}")
