#!/usr/bin/env python3
"""Paired bootstrap of score differences between methods in a run's results.jsonl.

    python3 eval/bootstrap.py eval/runs/hotpot-longbench-style/results.jsonl [--metric f1] [--ref bm25-top3]

For each other method: the mean difference (ref minus method, in points) on the questions both
have, and a 95% interval from 4,000 resamples of those questions (seed 0, so reproducible).
The numbers in eval/README.md's issue-7 section come from this script.
"""
import argparse
import collections
import json
import random

ap = argparse.ArgumentParser()
ap.add_argument("results")
ap.add_argument("--metric", default="f1")
ap.add_argument("--ref", default="bm25-top3")
ap.add_argument("--resamples", type=int, default=4000)
a = ap.parse_args()

scores = collections.defaultdict(dict)
with open(a.results) as f:
    for n, line in enumerate(f, 1):
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise SystemExit(f"{a.results}:{n}: not JSON: {e}")
        # As the report does: a row per (method, max trials), the latest line per question
        # wins, and a failed question keeps the score it was recorded with (0).
        t = d.get("max_trials")
        row = d["method"] if t is None else f"{d['method']}@{t}"
        scores[row][d["item"]] = d[a.metric]
if a.ref not in scores:  # a row with max trials is named METHOD@TRIALS, e.g. kn@4
    raise SystemExit(f"{a.results}: no rows for --ref {a.ref} (methods: {', '.join(scores)})")

rng = random.Random(0)
for m, s in scores.items():
    if m == a.ref:
        continue
    items = sorted(set(s) & set(scores[a.ref]))
    if not items:
        continue
    diffs = [scores[a.ref][i] - s[i] for i in items]
    n = len(diffs)
    means = sorted(sum(rng.choice(diffs) for _ in range(n)) / n for _ in range(a.resamples))
    lo, hi = means[int(0.025 * a.resamples)], means[int(0.975 * a.resamples) - 1]
    print(f"{a.ref} - {m} ({n} q): {100 * sum(diffs) / n:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]")
