#!/usr/bin/env python3
"""Were the answerability checks right? Each check's verdict against its evidence.

    python3 eval/probes/checks.py [run] [--against OTHER_RUN]
        (run default: eval/runs/hotpot-longbench-style)

For every row of the run's graph navigators that recorded its checks (`nav.checks`: the segments
each check showed and its verdict), this asks whether the check's segments held every gold
supporting sentence (a sentence counts when it lies wholly inside one segment, as
src/eval/evidence.rs counts it; segment byte ranges come from the run's graph memories, matched
to the row by question). It prints, per method, the checks by verdict: -2 (answerable), -1 (not
answerable), failed (no usable reply), each split by whether all the gold evidence was shown.
A check that says -1 with all the evidence shown is a missed answer; one that says -2 without
it answered from less than the question needs.

With --against OTHER_RUN (a run of the same methods on the same items with another prompt, such
as eval/probes/check-probe.sh's), both runs are counted on the questions they share only, and each
question's first check, which shows the same segments in both runs when the start is the same,
is paired: the verdicts of the two prompts on the same evidence.
"""
import collections
import sys

from evidence import graph_segments, holds_all, latest_rows


def all_shown(segs, check, gold):
    return holds_all([segs[i] for i in check["segments"] if i < len(segs)], gold)


def verdict(check):
    return "failed" if check.get("failed") else str(check.get("action"))


def table(run, segments, latest):
    """The run's checks by verdict and by whether they showed every gold sentence."""
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
            counts[name][(verdict(c), all_shown(segs, c, r["gold_spans"]))] += 1
    questions = len({r["question"] for r in latest.values()})
    print(f"{run}: answerability checks by verdict, and whether the check showed every gold sentence"
          f" ({questions} questions)")
    print("| method | checks | -2, all shown | -2, not all | -1, all shown | -1, not all | failed |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, c in sorted(counts.items()):
        failed = c[("failed", True)] + c[("failed", False)]
        cells = [c[("-2", True)], c[("-2", False)], c[("-1", True)], c[("-1", False)], failed]
        print(f"| {name} | {sum(c.values())} | " + " | ".join(map(str, cells)) + " |")
    for name, n in unmatched.items():
        print(f"{name}: {n} rows whose graph memory is not in {run}/memories (not counted)")


def first_checks(run, other, segments, latest, other_latest):
    """Each shared question's first check in both runs, paired when they showed the same segments."""
    pairs = collections.Counter()
    different = 0
    for key, r in sorted(latest.items(), key=lambda kv: str(kv[0])):
        a = ((r.get("nav") or {}).get("checks") or [None])[0]
        b = ((other_latest[key].get("nav") or {}).get("checks") or [None])[0]
        segs = segments.get(r["question"])
        if a is None or b is None or segs is None or not r.get("gold_spans"):
            continue
        if sorted(a["segments"]) != sorted(b["segments"]):
            different += 1
            continue
        pairs[(key[1], verdict(a), verdict(b), all_shown(segs, a, r["gold_spans"]))] += 1
    print(f"First checks on the same segments: verdict in {run} / in {other}")
    print("| method | verdicts | all gold shown | questions |")
    print("|---|---|---|---:|")
    for (method, va, vb, every), n in sorted(pairs.items()):
        print(f"| {method} | {va} / {vb} | {'yes' if every else 'no'} | {n} |")
    if different:
        print(f"{different} first checks showed different segments in the two runs (not paired)")


args = sys.argv[1:]
other = None
if "--against" in args:
    i = args.index("--against")
    if i + 1 >= len(args):
        raise SystemExit("checks.py: --against needs a run directory")
    other = args[i + 1]
    del args[i : i + 2]
run = args[0] if args else "eval/runs/hotpot-longbench-style"
segments, latest = graph_segments(run), latest_rows(run)
if other is None:
    table(run, segments, latest)
else:
    other_segments, other_latest = graph_segments(other), latest_rows(other)
    latest = {k: r for k, r in latest.items() if k in other_latest}
    other_latest = {k: r for k, r in other_latest.items() if k in latest}
    table(run, segments, latest)
    print()
    table(other, other_segments, other_latest)
    print()
    first_checks(run, other, segments, latest, other_latest)
