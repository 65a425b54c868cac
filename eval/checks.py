#!/usr/bin/env python3
"""Were the answerability checks right? Each check's verdict against its evidence.

    python3 eval/checks.py [run]     (default: eval/runs/hotpot-longbench-style)

For every row of the run's graph navigators that recorded its checks (`nav.checks`: the segments
each check showed and its verdict), this asks whether the check's segments held every gold
supporting sentence (a sentence counts when it lies wholly inside one segment, as
src/eval/evidence.rs counts it; segment byte ranges come from the run's graph memories, matched
to the row by question). It prints, per method, the checks by verdict: -2 (answerable), -1 (not
answerable), failed (no usable reply), each split by whether all the gold evidence was shown.
A check that says -1 with all the evidence shown is a missed answer; one that says -2 without
it answered from less than the question needs.
"""
import collections
import glob
import gzip
import json
import sys

run = sys.argv[1] if len(sys.argv) > 1 else "eval/runs/hotpot-longbench-style"

segments = {}
for path in glob.glob(f"{run}/memories/*-graph-*.qrm.gz"):
    with gzip.open(path) as f:
        m = json.load(f)
    segments[m["question"]] = [(int(s["start"]), int(s["end"])) for s in m["segments"]]

latest = {}
with open(f"{run}/results.jsonl") as f:
    for n, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            raise SystemExit(f"{run}/results.jsonl:{n}: not JSON: {e}")
        latest[(r["item"], r["method"], r.get("max_trials"))] = r

counts = collections.defaultdict(collections.Counter)
unmatched = collections.Counter()
for (_, method, trials), r in latest.items():
    checks = (r.get("nav") or {}).get("checks") or []
    if not checks or not r.get("gold_spans"):
        continue
    segs = segments.get(r["question"])
    name = method if trials is None else f"{method}@{trials}"
    if segs is None:
        unmatched[name] += 1
        continue
    for c in checks:
        shown = [segs[i] for i in c["segments"] if i < len(segs)]
        every = all(any(a <= g0 and g1 <= b for a, b in shown) for g0, g1 in r["gold_spans"])
        verdict = "failed" if c.get("failed") else str(c.get("action"))
        counts[name][(verdict, every)] += 1

print(f"{run}: answerability checks by verdict, and whether the check showed every gold sentence")
print("| method | checks | -2, all shown | -2, not all | -1, all shown | -1, not all | failed |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name, c in sorted(counts.items()):
    failed = c[("failed", True)] + c[("failed", False)]
    cells = [c[("-2", True)], c[("-2", False)], c[("-1", True)], c[("-1", False)], failed]
    print(f"| {name} | {sum(c.values())} | " + " | ".join(map(str, cells)) + " |")
for name, n in unmatched.items():
    print(f"{name}: {n} rows whose graph memory is not in {run}/memories (not counted)")
