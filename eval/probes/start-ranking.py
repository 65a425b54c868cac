#!/usr/bin/env python3
"""How many gold segments the top N of E_s's segments hold under other fusion weights.

    python3 eval/probes/start-ranking.py [run directory]   (default: eval/runs/navigation-longbench-style)

Reads the start step of each navigator trace (traces*/ of the run directory; one per question)
whose note lists each signal's order ("by BM25 [...], by the embedder [...], by entity weight
[...]"), finds the gold segments from the trace's gold spans and the run's memories, and fuses
the three orders by reciprocal rank (k = 60) under several weights (BM25, embedder, entity
rarity), as `Navigator::rank_segments` does. The counts in ARCHITECTURE.md's "S_imp's order
and size" deviation come from this script.
"""
import glob
import gzip
import json
import re
import sys

run = sys.argv[1] if len(sys.argv) > 1 else "eval/runs/navigation-longbench-style"
memories = {}
for f in glob.glob(f"{run}/memories/*.qrm.gz"):
    m = json.load(gzip.open(f))
    memories[m["question"]] = m


def gold_segments(m, spans):
    return {s["index"] for g in spans for s in m["segments"] if s["start"] <= g[0] < s["end"]}


def fuse(lists, weights, k=60):
    score = {}
    for order, w in zip(lists, weights):
        for r, s in enumerate(order):
            score[s] = score.get(s, 0) + w / (k + r + 1)
    return sorted(score, key=lambda s: (-score[s], s))


NOTE = re.compile(r"by BM25 \[([^\]]*)\], by the embedder \[([^\]]*)\], by entity weight \[([^\]]*)\]")
starts = {}
for f in sorted(glob.glob(f"{run}/traces*/*.json")):
    t = json.load(open(f))
    m = memories.get(t.get("question"))
    if not m or t["question"] in starts or not t.get("steps"):
        continue
    found = NOTE.search(t["steps"][0]["note"])
    if found:
        orders = [[int(x) for x in g.split(",") if x.strip()] for g in found.groups()]
        starts[t["question"]] = (orders, gold_segments(m, t["gold_spans"]))

weights = {"equal": (1, 1, 1), "bm25 2, embedder 1, rarity 1": (2, 1, 1),
           "bm25 2, rarity 1": (2, 0, 1), "bm25 alone": (1, 0, 0), "bm25 2, embedder 1": (2, 1, 0)}
reach = sum(len(g & set(o[0])) for o, g in starts.values())
gold = sum(len(g) for _, g in starts.values())
print(f"{len(starts)} questions, {gold} gold segments, {reach} of them among E_s's segments")
for n in (2, 3, 5):
    cells = [f"{name}: {sum(len(g & set(fuse(o, w)[:n])) for o, g in starts.values())}"
             for name, w in weights.items()]
    print(f"top {n}: " + "; ".join(cells))
