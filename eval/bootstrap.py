#!/usr/bin/env python3
"""Paired bootstrap of score differences between methods in a run's results.jsonl.

    python3 eval/bootstrap.py eval/runs/hotpot-longbench-style/results.jsonl [--metric f1] [--ref bm25-top3]

For each other method: the mean difference (ref minus method, in points) on the questions both
have, and a 95% interval from 4,000 resamples of those questions (seed 0, so reproducible).
The numbers in eval/README.md's issue-7 section come from this script.

    python3 eval/bootstrap.py RUN/results.jsonl --before RUN/results-answer-first.jsonl

compares each method with itself instead: the mean difference (results minus before, in points)
on the questions both files hold for that method, with the same interval. This is how a change
to one step (the answer's key order, say) is measured on rows that differ only in that step.
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
ap.add_argument("--before", help="another results file: compare each method with its rows there")
a = ap.parse_args()


def load(path):
    scores = collections.defaultdict(dict)
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                d = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"{path}:{n}: not JSON: {e}")
            # As the report does: a row per (method, max trials), the latest line per question
            # wins, and a failed question keeps the score it was recorded with (0).
            t = d.get("max_trials")
            row = d["method"] if t is None else f"{d['method']}@{t}"
            scores[row][d["item"]] = d[a.metric]
    return scores


def interval(diffs, rng):
    n = len(diffs)
    means = sorted(sum(rng.choice(diffs) for _ in range(n)) / n for _ in range(a.resamples))
    lo, hi = means[int(0.025 * a.resamples)], means[int(0.975 * a.resamples) - 1]
    return f"{100 * sum(diffs) / n:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"


scores = load(a.results)
rng = random.Random(0)
if a.before:
    before = load(a.before)
    pooled = []
    for m, s in scores.items():
        items = sorted(set(s) & set(before.get(m, {})))
        if not items:
            continue
        diffs = [s[i] - before[m][i] for i in items]
        pooled += diffs
        was = 100 * sum(before[m][i] for i in items) / len(items)
        now = 100 * sum(s[i] for i in items) / len(items)
        print(f"{m} ({len(items)} q): {was:.1f} -> {now:.1f}, {interval(diffs, rng)}")
    if not pooled:
        raise SystemExit(f"{a.results} and {a.before} share no (method, question) pair")
    # The pooled interval resamples (method, question) pairs as if independent; the methods of
    # one question share its difficulty, so read it as a little too narrow.
    print(f"all methods ({len(pooled)} pairs): {interval(pooled, rng)}")
    raise SystemExit(0)
if a.ref not in scores:  # a row with max trials is named METHOD@TRIALS, e.g. kn@4
    raise SystemExit(f"{a.results}: no rows for --ref {a.ref} (methods: {', '.join(scores)})")

for m, s in scores.items():
    if m == a.ref:
        continue
    items = sorted(set(s) & set(scores[a.ref]))
    if not items:
        continue
    diffs = [scores[a.ref][i] - s[i] for i in items]
    print(f"{a.ref} - {m} ({len(diffs)} q): {interval(diffs, rng)}")
