#!/usr/bin/env python3
"""A run's methods split by the items that chose the settings and those that did not.

    qrmem data longbench-style --in ../shared/data/hotpotqa/hotpot_dev_distractor_dev500.json \
      --out /tmp/lb60.jsonl --limit 60
    python3 eval/probes/splits.py eval/runs/hotpot-longbench-style /tmp/lb60.jsonl [--methods kn,ges,...]

The items file gives the item order (its `_id`s, as the experiment numbers them). For each
method: F1 on items 1-10 (where the settings were chosen), 11-30 and 31-60 (the tests), and
on all it has; fact recall and the gold share (precision) of the answer context, its tokens, on all it has (a supporting sentence counts
when it lies wholly inside one answer span, as src/eval/evidence.rs counts it); LLM calls per
question. Rows of a max-trials sweep other than the default 4 are left out unless a method is
named with its trials (`kn-passages400@1`); as the report does,
the latest row per (item, method) wins and a failed question keeps the score it was recorded
with. The paired F1 and fact-recall intervals against
the reference are the report's (report.md, "Paired against").
"""
import argparse
import json

from evidence import fact_recall, gold_share, latest_rows

ap = argparse.ArgumentParser()
ap.add_argument("run")
ap.add_argument("items")
ap.add_argument("--methods", help="comma-separated; default: every method of the run")
a = ap.parse_args()

with open(a.items) as f:
    order = {json.loads(line)["_id"]: n for n, line in enumerate(f, 1) if line.strip()}

rows = {}
for (item, method, trials), r in latest_rows(a.run).items():
    if item not in order:
        raise SystemExit(f"{a.run}/results.jsonl: item {item} is not in {a.items}")
    if trials in (None, 4):
        rows[(method, item)] = r
    if trials is not None:
        rows[(f"{method}@{trials}", item)] = r

methods = (
    a.methods.split(",")
    if a.methods
    else list(dict.fromkeys(m for m, _ in rows if "@" not in m))
)


def mean(xs):
    return sum(xs) / len(xs) if xs else None


def fmt(x, pct=True):
    return "-" if x is None else f"{100 * x:.1f}" if pct else f"{x:.2f}"


splits = (("1-10", 1, 10), ("11-30", 11, 30), ("31-60", 31, 60))
print(f"{a.run}: F1 by item split (n); fact recall, the gold share of the answer context, its "
      "tokens and LLM calls per question on all")
print("| method | " + " | ".join(f"F1 {s} (n)" for s, _, _ in splits)
      + " | F1 all (n) | fact recall | gold share | context tok | calls/q |")
print("|---|" + "---:|" * (len(splits) + 5))
for m in methods:
    mine = {i: r for (mm, i), r in rows.items() if mm == m}
    if not mine:
        continue
    cells = []
    for _, lo, hi in splits:
        f1 = [r["f1"] for i, r in mine.items() if lo <= order[i] <= hi]
        cells.append(f"{fmt(mean(f1))} ({len(f1)})" if f1 else "-")
    rec = [x[0] for x in map(fact_recall, mine.values()) if x is not None]
    share = [x for x in map(gold_share, mine.values()) if x is not None]
    tokens = [r["answer_context_tokens"] for r in mine.values()
              if r.get("answer_context_tokens") is not None]
    calls = mean([r.get("requests", 0) + r.get("cache_hits", 0) for r in mine.values()])
    print(f"| {m} | " + " | ".join(cells)
          + f" | {fmt(mean([r['f1'] for r in mine.values()]))} ({len(mine)}) | "
          + f"{fmt(mean(rec))} | {fmt(mean(share))} | "
          + ("-" if not tokens else f"{mean(tokens):.0f}") + f" | {fmt(calls, pct=False)} |")
