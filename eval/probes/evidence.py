"""What the eval scripts read from a run directory and how they count evidence, as
src/eval/evidence.rs does (a gold sentence counts when it lies wholly inside one shown span):
each graph memory's segment byte ranges (by question) and the run's latest row per pair for
checks.py, misses.py and calibrate.py; one row's fact recall and gold share for held-out.py and splits.py."""
import glob
import gzip
import json
import os


def graph_segments(run):
    """Question -> the (start, end) byte ranges of its graph memory's segments, from RUN/memories."""
    segments = {}
    for path in glob.glob(f"{run}/memories/*-graph-*.qrm.gz"):
        with gzip.open(path) as f:
            m = json.load(f)
        segments[m["question"]] = [(int(s["start"]), int(s["end"])) for s in m["segments"]]
    return segments


def latest_rows(run):
    """(item, method, max_trials) -> the last row of RUN/results.jsonl for that pair; in a
    directory of `qrmem eval --contexts-only` (no results.jsonl), its contexts.jsonl rows, which
    have the spans and no answer."""
    latest = {}
    name = "results.jsonl"
    if not os.path.exists(f"{run}/{name}") and os.path.exists(f"{run}/contexts.jsonl"):
        name = "contexts.jsonl"
    with open(f"{run}/{name}") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"{run}/{name}:{n}: not JSON: {e}")
            latest[(r["item"], r["method"], r.get("max_trials"))] = r
    return latest


def shown(spans, gold_span):
    """Whether one gold span lies wholly inside one of the shown spans."""
    g0, g1 = gold_span
    return any(a <= g0 and g1 <= b for a, b in spans)


def holds_all(spans, gold):
    """Whether every gold span lies wholly inside one of the shown spans."""
    return all(shown(spans, g) for g in gold)


def fact_recall(row):
    """(share of the gold supporting sentences lying wholly inside one answer span, whether all
    do), or None when the row has no gold spans or no answer spans."""
    gold, spans = row.get("gold_spans"), row.get("answer_spans")
    if not gold or spans is None:
        return None
    hits = sum(shown(spans, g) for g in gold)
    return hits / len(gold), hits == len(gold)


def gold_share(row):
    """The share of the answer context's document bytes inside the gold spans (its precision,
    as src/eval/evidence.rs counts it), or None without gold spans or answer spans."""
    gold, spans = row.get("gold_spans"), row.get("answer_spans")
    if not gold or not spans:
        return None
    total = sum(b - a for a, b in spans)
    if total == 0:
        return None
    inside = sum(max(0, min(b, g1) - max(a, g0)) for a, b in spans for g0, g1 in gold)
    return inside / total


def item_kinds(data):
    """Each item's kind in a dev file, as the report's "By question kind" table reads it: HotpotQA's
    and 2WikiMultihopQA's question type (JSON list, `type`), MuSiQue's hop count (jsonl, from the
    id: "3hop1__..." is "3hop")."""
    import json
    if data.endswith(".jsonl"):
        with open(data) as f:
            items = [json.loads(line) for line in f if line.strip()]
        return {i["id"]: i["id"].split("hop")[0] + "hop" for i in items}
    with open(data) as f:
        return {i["_id"]: i["type"] for i in json.load(f)}
