#!/usr/bin/env python3
"""Does showing only the first sentences of a passage put more gold in 400 tokens? A sketch
without the LLM (issue 66's recall target: >= 90% of the gold sentences at ~400 tokens).

    python3 eval/probes/lead-sentences.py /tmp/lb60.jsonl /tmp/w40.jsonl /tmp/m30.jsonl

The order is own-hop (`eval/probes/hop-orders.py`, BM25 with the own start and the hop); the first W
passages of it are shown whole, every later one as its title and first K sentences (sentences
split at ., ! or ? before a capital, digit or quote), while they fit the budget. 60% of
HotpotQA's gold sentences (first 60 dev items) are a paragraph's first sentence and 80% one of
its first two, so a shorter passage could make room for more passages' gold.
"""
import ast
import collections
import importlib.util
import json
import os
import re
import sys

_spec = importlib.util.spec_from_file_location(
    "hop_orders", os.path.join(os.path.dirname(os.path.abspath(__file__)), "hop-orders.py")
)
hop = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hop)

SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def lead_end(p, k):
    """The byte offset where passage p's first k sentences end (its end if it has fewer)."""
    s, e, _, txt = p
    b = txt.encode()
    head, title, _ = b.split(b"\n", 2)
    off = len(head) + 1 + len(title) + 1
    body = b[off:].decode(errors="ignore")
    ends = [s + off + len(body[: m.start()].encode()) for m in SENT.finditer(body)] + [e]
    return ends[min(k, len(ends)) - 1]


def recall(ps, o, gold, budget, whole, k):
    shown, used = [], 0.0
    for i, u in enumerate(o):
        end = ps[u][1] if i < whole else lead_end(ps[u], k)
        t = (end - ps[u][0]) / 4.2
        if used + t <= budget:
            shown.append((ps[u][0], end))
            used += t
    return sum(any(a <= g0 and g1 <= b for a, b in shown) for g0, g1 in gold) / len(gold)


VARIANTS = [(99, 0)] + [(w, k) for w in (0, 1, 2, 3) for k in (1, 2, 3)]


def main():
    names = ["whole" if w == 99 else f"W{w} K{k}" for w, k in VARIANTS]
    print("| items | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for path in sys.argv[1:]:
        items = [json.loads(line) for line in open(path) if line.strip()]
        res = collections.defaultdict(list)
        for r in items:
            ps = hop.passages(r["context"])
            gold = r["supporting_spans"]
            gold = gold if isinstance(gold, list) else ast.literal_eval(gold)
            o = hop.order(ps, r["input"], "own-hop")
            for v in VARIANTS:
                res[v].append(recall(ps, o, gold, 400, *v))
        cells = " | ".join(
            f"{100 * sum(res[v]) / len(res[v]):.1f} ({100 * sum(res[v][:10]) / 10:.0f})"
            for v in VARIANTS
        )
        print(f"| {path.split('/')[-1]} ({len(items)}) | {cells} |")


if __name__ == "__main__":
    main()
