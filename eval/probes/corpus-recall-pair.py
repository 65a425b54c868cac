#!/usr/bin/env python3
"""Two `qrmem corpus recall --json` files of the same questions paired, retriever by retriever:
recall@2 and recall@5 of the first, of the second, and the difference with a 95% bootstrap
interval (4,000 resamples, seed 0).

    python3 eval/probes/corpus-recall-pair.py A.json B.json [N]     # N: only the first N questions
"""
import json
import random
import sys


def boot(xs):
    rnd = random.Random(0)
    means = []
    for _ in range(4000):
        s = [xs[rnd.randrange(len(xs))] for _ in xs]
        means.append(sum(s) / len(s))
    means.sort()
    return means[100], means[3899]


def main():
    a, b = (json.load(open(p)) for p in sys.argv[1:3])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else None
    rows_a = {r["retriever"]: r["per_question"] for r in a["rows"]}
    rows_b = {r["retriever"]: r["per_question"] for r in b["rows"]}
    print("| retriever | cut | first | second | first - second |")
    print("|---|---|---:|---:|---:|")
    for r, qa in rows_a.items():
        if r not in rows_b:
            continue
        qa, qb = qa[:n], rows_b[r][:n]
        for k, name in ((0, "R@2"), (1, "R@5")):
            xa = [100 * x[k] / x[2] for x in qa]
            xb = [100 * x[k] / x[2] for x in qb]
            d = [x - y for x, y in zip(xa, xb)]
            lo, hi = boot(d)
            print(
                f"| {r} | {name} | {sum(xa) / len(xa):.1f} | {sum(xb) / len(xb):.1f} "
                f"| {sum(d) / len(d):+.1f} [{lo:+.1f}, {hi:+.1f}] |"
            )


if __name__ == "__main__":
    main()
