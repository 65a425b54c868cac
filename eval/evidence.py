"""What eval/checks.py and eval/misses.py both read from a run directory: each graph memory's
segment byte ranges (by question) and the run's latest row per pair, and the containment test
of src/eval/evidence.rs (a gold sentence counts when it lies wholly inside one shown span)."""
import glob
import gzip
import json


def graph_segments(run):
    """Question -> the (start, end) byte ranges of its graph memory's segments, from RUN/memories."""
    segments = {}
    for path in glob.glob(f"{run}/memories/*-graph-*.qrm.gz"):
        with gzip.open(path) as f:
            m = json.load(f)
        segments[m["question"]] = [(int(s["start"]), int(s["end"])) for s in m["segments"]]
    return segments


def latest_rows(run):
    """(item, method, max_trials) -> the last row of RUN/results.jsonl for that pair."""
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
    return latest


def holds_all(shown, gold):
    """Whether every gold span lies wholly inside one of the shown spans."""
    return all(any(a <= g0 and g1 <= b for a, b in shown) for g0, g1 in gold)
