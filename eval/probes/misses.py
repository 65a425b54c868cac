#!/usr/bin/env python3
"""Where a navigator lost the evidence: each question whose answer context missed a gold sentence.

    python3 eval/probes/misses.py [run] [method]   (defaults: eval/runs/hotpot-longbench-style, kn)

For every row of `method` whose answer context did not hold every gold supporting sentence, this
reads its trace (RUN/traces/ITEM--METHOD--tN.json) and says, for each gold segment the answer did
not show (a gold sentence's segment, from the run's graph memories, eval/probes/evidence.py),
where it was lost:
  - "S_imp rank R, never shown": linked from the question, but ranked below what the start kept
    and no expansion brought it back;
  - "shown, not in the answer": an answerability check showed it, the final answer step did not;
  - "added by an expansion, not shown": an expansion found it and the window dropped it;
  - "never reached": neither the start nor any expansion found it.
"""
import collections
import glob
import json
import re
import sys

from evidence import graph_segments, holds_all, latest_rows

run = sys.argv[1] if len(sys.argv) > 1 else "eval/runs/hotpot-longbench-style"
method = sys.argv[2] if len(sys.argv) > 2 else "kn"

segments = graph_segments(run)
rows = {item: r for (item, m, _), r in latest_rows(run).items() if m == method}

kinds = collections.Counter()
missed = 0
for item, r in sorted(rows.items()):
    segs = segments.get(r["question"])
    gold = r.get("gold_spans") or []
    if segs is None or not gold:
        continue
    if holds_all(r.get("answer_spans") or [], gold):
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
    ranked, checked, added = [], set(), set()
    for s in t["steps"]:
        note = s.get("note") or ""
        m = re.search(r"ranked \[([0-9, ]*)\]", note)
        if s["kind"] == "start" and m:
            ranked = [int(x) for x in m.group(1).split(",") if x.strip()]
        if s["kind"] == "answerability":
            checked |= set(s["segments"])
        # S_add, and the segments an expansion found, shown or dropped by the window.
        added |= {int(p[0]) for p in (s.get("s_add") or [])}
        m = re.search(r"new segments \[([0-9, ]*)\]", note)
        if m:
            added |= {int(x) for x in m.group(1).split(",") if x.strip()}
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
        elif i in added:
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
