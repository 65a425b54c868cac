#!/usr/bin/env python3
"""Where should KN's answerability check stop? A threshold on P(answerable), chosen on items 1-10.

    python3 eval/probes/calibrate.py RUN METHOD [--tuning RUN] [--thresholds 0.05,0.1,...]

METHOD is a KN row of RUN that ran every trial and recorded each check's P(answerable)
(`nav.checks[].p_answerable`, read from the action token's log probabilities; the `-checkP`
rows stop early, so calibrate on the row without the suffix). Stopping at a threshold t only
cuts a navigation short: the checks before the first with P >= t are the same prompts, so this
replays the recorded checks. For each t it prints, on the calibration items (those of the
tuning run, default eval/runs/navigation-longbench-style: items 1-10, where every setting of
the navigators was chosen) and on the rest (the test), how many questions stop early, the LLM calls per
question (question entities, the checks made, the answer), and how many of the stopping checks
showed every gold sentence (segment ranges from RUN's graph memories, as eval/probes/checks.py reads
them). The answer context after a stop is the stopping check's segments, or their sentences for
a -sentencesN row; its recall and F1 come from running the `-checkP` row.

It also prints P(answerable) for the checks that showed every gold sentence and those that did
not: how well the probability separates them.
"""
import argparse
import statistics

from evidence import graph_segments, holds_all, latest_rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("method")
    ap.add_argument("--tuning", default="eval/runs/navigation-longbench-style")
    ap.add_argument(
        "--thresholds",
        default="0.02,0.05,0.1,0.15,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9",
    )
    a = ap.parse_args()
    latest = latest_rows(a.run)
    segments = graph_segments(a.run)
    tuning = {k[0] for k in latest_rows(a.tuning)}
    rows = {k[0]: r for k, r in latest.items() if k[1] == a.method and not r.get("error")}
    if not rows:
        raise SystemExit(f"no rows of {a.method} in {a.run}")
    calib = sorted(i for i in rows if i in tuning)
    test = sorted(i for i in rows if i not in tuning)

    def checks_of(r):
        return (r.get("nav") or {}).get("checks") or []

    def evidence(r, check):
        segs = segments.get(r["question"])
        gold = r.get("gold_spans") or []
        if segs is None or not gold:
            return None
        return holds_all([segs[i] for i in check["segments"] if i < len(segs)], gold)

    missing = sum(1 for r in rows.values() for c in checks_of(r) if c.get("p_answerable") is None)
    if missing:
        print(f"note: {missing} checks recorded no P(answerable)")

    print(f"# {a.method} in {a.run}: calibration items (those of {a.tuning}, n = {len(calib)}), "
          f"test (n = {len(test)})\n")
    print("P(answerable) by whether the check showed every gold sentence:")
    for name, items in (("calibration", calib), ("test", test)):
        yes, no = [], []
        for i in items:
            for c in checks_of(rows[i]):
                p = c.get("p_answerable")
                e = evidence(rows[i], c)
                if p is None or e is None:
                    continue
                (yes if e else no).append(p)
        fmt = lambda xs: (f"n {len(xs)}, median {statistics.median(xs):.3f}, "
                          f"max {max(xs):.3f}") if xs else "n 0"
        print(f"  {name}: all gold shown: {fmt(yes)}; not: {fmt(no)}")
    print()
    print("| t | split | stop early | LLM calls/q | stopping checks with all gold | calls/q without |")
    print("|---:|---|---:|---:|---:|---:|")
    for t in [float(x) for x in a.thresholds.split(",")]:
        for name, items in (("calibration", calib), ("test", test)):
            if not items:
                continue
            stops, calls, full, base = 0, [], 0, []
            for i in items:
                r = rows[i]
                cs = checks_of(r)
                # Calls of the row as it ran: question entities + checks + the final answer
                # (unless a check answered).
                made = 1 + len(cs) + (0 if r.get("answered_by_check") else 1)
                base.append(made)
                k = next((j for j, c in enumerate(cs)
                          if c.get("p_answerable") is not None and c["p_answerable"] >= t), None)
                if k is None or k == len(cs) - 1 and made == 1 + len(cs):
                    calls.append(made)
                    continue
                stops += 1
                calls.append(1 + (k + 1) + 1)
                if evidence(r, cs[k]):
                    full += 1
            print(f"| {t:g} | {name} | {stops}/{len(items)} | {statistics.mean(calls):.2f} "
                  f"| {full}/{stops} | {statistics.mean(base):.2f} |")


if __name__ == "__main__":
    main()
