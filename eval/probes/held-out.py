#!/usr/bin/env python3
"""Evidence and F1 of a run's methods on the items that did not choose the settings.

    python3 eval/probes/held-out.py [run] [tuning run] [reference method]
    (defaults: eval/runs/hotpot-longbench-style, eval/runs/navigation-longbench-style, bm25-top5)

KN's final-context rule and the start ranking were chosen on the items of the tuning run (the
navigation probe, items 1-10). This prints, for the items of `run` that the tuning run does not
hold, and only for the items every graph method answered (so the rows are paired): fact recall
of the answer context (a supporting sentence counts when it lies wholly inside one answer span,
as src/eval/evidence.rs counts it; rows recorded before rows carried spans take backfill.jsonl's), the all-facts count, answer-context tokens and F1; then each
method's fact recall against the reference method, question by question (higher / same / lower).
The same table for the tuning items is printed first, for comparison.
"""
import json
import sys

from evidence import fact_recall

run = sys.argv[1] if len(sys.argv) > 1 else "eval/runs/hotpot-longbench-style"
tuning = sys.argv[2] if len(sys.argv) > 2 else "eval/runs/navigation-longbench-style"
reference = sys.argv[3] if len(sys.argv) > 3 else "bm25-top5"
GRAPH = ("kn", "kn-final-s-mix", "kn-answer-top3", "ges", "te", "kn-sentences1000",
         "kn-sentences1000-check44")


def rows(path):
    with open(f"{path}/results.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]


def backfill(path):
    try:
        with open(f"{path}/backfill.jsonl") as f:
            return {(b["item"], b["method"]): b for b in map(json.loads, filter(str.strip, f))}
    except FileNotFoundError:
        return {}


spans = ("answer_spans", "answer_context_tokens", "gold_spans")
table, filled = {}, backfill(run)
for r in rows(run):
    if r.get("error") is None:
        # Rows recorded before rows carried their spans take the backfill's (a row's own win).
        b = filled.get((r["item"], r["method"]), {})
        for k in spans:
            if r.get(k) is None and b.get(k) is not None:
                r[k] = b[k]
        table[(r["item"], r["method"])] = r
tuned = {r["item"] for r in rows(tuning)}
methods = [m for m in dict.fromkeys(m for _, m in table)]
graph = [m for m in methods if m in GRAPH]
items = sorted({i for i, _ in table})
paired = [i for i in items if all((i, m) in table for m in graph)]

for label, subset in (("tuning items", [i for i in paired if i in tuned]),
                      ("held-out items", [i for i in paired if i not in tuned])):
    print(f"{label}: {len(subset)} (answered by {', '.join(graph)})")
    print("| method | fact recall | all facts | answer-context tok/q | F1 | recall vs "
          f"{reference}: higher / same / lower |")
    print("|---|---:|---:|---:|---:|---:|")
    for m in methods:
        rs = [table[(i, m)] for i in subset if (i, m) in table]
        rec = [fact_recall(r) for r in rs]
        rec = [x for x in rec if x]
        if not rs or not rec:
            continue
        toks = [r["answer_context_tokens"] for r in rs if r.get("answer_context_tokens")]
        cmp = [0, 0, 0]
        for i in subset:
            a, b = table.get((i, m)), table.get((i, reference))
            ra, rb = a and fact_recall(a), b and fact_recall(b)
            if ra and rb:
                cmp[0 if ra[0] > rb[0] else 1 if ra[0] == rb[0] else 2] += 1
        tok = f"{sum(toks) / len(toks):,.0f}" if toks else "0"
        print(f"| {m} | {100 * sum(x for x, _ in rec) / len(rec):.1f}% | "
              f"{sum(all_ for _, all_ in rec)}/{len(rec)} | {tok} | "
              f"{100 * sum(r['f1'] for r in rs) / len(rs):.1f} | {cmp[0]} / {cmp[1]} / {cmp[2]} |")
    print()
