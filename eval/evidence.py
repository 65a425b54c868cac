"""Fact recall of one results.jsonl row, as src/eval/evidence.rs counts it, for the eval scripts
(held-out.py, splits.py)."""


def fact_recall(row):
    """(share of the gold supporting sentences lying wholly inside one answer span, whether all
    do), or None when the row has no gold spans or no answer spans."""
    gold, shown = row.get("gold_spans"), row.get("answer_spans")
    if not gold or shown is None:
        return None
    hits = sum(any(a <= g0 and g1 <= b for a, b in shown) for g0, g1 in gold)
    return hits / len(gold), hits == len(gold)
