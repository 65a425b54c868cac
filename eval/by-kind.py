#!/usr/bin/env python3
"""A run's rows split by question kind: 2WikiMultihopQA's question type (comparison,
bridge_comparison, compositional, inference) or MuSiQue's hop count (2hop, 3hop, 4hop, from the
question id), read from the dev file the run was made from (issue 67, item 4).

    python3 eval/by-kind.py eval/runs/2wiki-longbench-style ../shared/data/2wikimultihopqa/2wiki_dev40.json
    python3 eval/by-kind.py eval/runs/musique-longbench-style ../shared/data/musique/musique_dev30.jsonl

For each method and max trials (one-trial rows named m@1; the latest row per pair, as the report
takes it): F1 and fact recall per kind, with the number of questions.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from evidence import fact_recall, latest_rows

if len(sys.argv) != 3:
    raise SystemExit(__doc__)
run, data = sys.argv[1], sys.argv[2]
kinds = {}
if data.endswith(".jsonl"):
    with open(data) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                item = json.loads(line)
                # "3hop1__..." is a 3-hop question (the digit after "hop" is its shape).
                kinds[item["id"]] = item["id"].split("hop")[0] + "hop"
else:
    with open(data) as f:
        for item in json.load(f):
            kinds[item["_id"]] = item["type"]
rows = latest_rows(run)
# Each (method, max trials) once; rows of a sweep other than the default 4 are named m@t, as
# eval/pair.py names them.
methods = []
for (_, m, t) in rows:
    if (m, t) not in methods:
        methods.append((m, t))
order = sorted(set(kinds.values()))
print(f"{run}: F1 / fact recall % by kind (questions)")
print("| method | " + " | ".join(f"{k} ({sum(1 for v in kinds.values() if v == k)})" for k in order) + " |")
print("|---|" + "---:|" * len(order))
for m, trials in methods:
    cells = []
    for k in order:
        rs = [r for (i, mm, t), r in rows.items() if mm == m and t == trials and kinds.get(i) == k]
        if not rs:
            cells.append("")
            continue
        f1 = 100 * sum(r["f1"] for r in rs) / len(rs)
        rec = [fact_recall(r)[0] for r in rs if fact_recall(r)]
        recall = f"{100 * sum(rec) / len(rec):.0f}" if rec else "n/a"
        cells.append(f"{f1:.1f} / {recall} ({len(rs)})")
    name = m if trials in (None, 4) else f"{m}@{trials}"
    print(f"| {name} | " + " | ".join(cells) + " |")
