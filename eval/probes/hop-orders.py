#!/usr/bin/env python3
"""Orders of a LongBench-style document's passages for a question, compared by fact recall at
a token budget, without the LLM: a sketch to decide whether an order is worth building in Rust.

    qrmem data longbench-style --in ../shared/data/hotpotqa/hotpot_dev_distractor_dev500.json \
      --out /tmp/lb60.jsonl --limit 60          # likewise 2wiki-longbench-style, musique-...
    python3 eval/probes/hop-orders.py /tmp/lb60.jsonl /tmp/w40.jsonl /tmp/m30.jsonl

It approximates the Rust code (`text::passages`, `bm25-own-hop-passagesN`): a plain BM25
without stemming, tokens as bytes / 4.2; its own-hop recall is within 2 points of the Rust
rows (HotpotQA 87.8 against 88.6 at 400 tokens). The orders:

- own-hop: the passages titled with names the question holds (at most 2, BM25 order), else
  the best BM25 passage; then the own passages of at most 2 titles the first one names; then
  BM25 (what bm25-own-hop-passagesN does);
- chain: own-hop, then the own passage of one title the first hop passage names;
- each: own-hop, then one own passage of a title the second start passage names;
- prfK: the start, one hop passage, then BM25 over the question plus the start passage's text
  (pseudo-relevance feedback) up to K passages after the start.
"""
import ast
import collections
import json
import math
import re
import sys

HDR = re.compile(rb"Passage \d+:\n")
WORD = re.compile(r"\w+")
STOP = set(
    "the a an of in on at to for and or is was who what when where which how did does by with "
    "from as that this it be are were his her their its".split()
)


def passages(ctx):
    """(start byte, end byte, title, text) of each `Passage i:` block."""
    b = ctx.encode()
    starts = [m.start() for m in HDR.finditer(b)] + [len(b)]
    out = []
    for s, e in zip(starts, starts[1:]):
        chunk = b[s:e]
        title = chunk.split(b"\n", 2)[1].decode()
        out.append((s, e, title, chunk.decode(errors="ignore")))
    return out


def tkey(t):
    t = t.strip()
    if t.endswith(")") and " (" in t:
        t = t[: t.rfind(" (")]
    return t.strip().lower()


def toks(s):
    return [w for w in WORD.findall(s.lower()) if w not in STOP]


class Bm25:
    def __init__(self, docs, k1=1.2, b=0.75):
        self.d = [collections.Counter(toks(x)) for x in docs]
        self.l = [sum(c.values()) for c in self.d]
        self.avg = sum(self.l) / max(1, len(self.l))
        self.df = collections.Counter(w for c in self.d for w in c)
        self.n, self.k1, self.b = len(docs), k1, b

    def rank(self, q):
        scores = []
        for i, c in enumerate(self.d):
            x = 0.0
            for w in toks(q):
                if w in c:
                    idf = math.log(1 + (self.n - self.df[w] + 0.5) / (self.df[w] + 0.5))
                    x += idf * c[w] * (self.k1 + 1) / (
                        c[w] + self.k1 * (1 - self.b + self.b * self.l[i] / self.avg)
                    )
            scores.append((x, -i))
        return [-j for _, j in sorted(scores, reverse=True)]


def occurs(body, name):
    return re.search(r"(?<!\w)" + re.escape(name) + r"(?!\w)", body) is not None


def homes(ps, by_q, frm, taken, n):
    """At most n passages (in question-BM25 order, not taken) titled with a name passage frm holds."""
    body, own, out = ps[frm][3].lower(), tkey(ps[frm][2]), []
    for u in by_q:
        if len(out) >= n:
            break
        t = tkey(ps[u][2])
        if u not in taken and len(t) >= 4 and t != own and occurs(body, t):
            out.append(u)
    return out


def order(ps, q, mode):
    bm = Bm25([p[3] for p in ps])
    by_q = bm.rank(q)
    own = [u for u in by_q if len(tkey(ps[u][2])) >= 4 and occurs(q.lower(), tkey(ps[u][2]))][:2]
    start = own or [by_q[0]]
    o = list(start)
    if mode.startswith("prf"):
        o += homes(ps, by_q, start[0], set(o), 1)
        query = q + " " + ps[start[0]][3].split("\n", 2)[-1]
        for u in bm.rank(query):
            if len(o) >= len(start) + int(mode[3:]):
                break
            if u not in o:
                o.append(u)
    else:
        hop = homes(ps, by_q, start[0], set(o), 2)
        o += hop
        if mode == "chain" and hop:
            o += homes(ps, by_q, hop[0], set(o), 1)
        if mode == "each" and len(start) > 1:
            o += homes(ps, by_q, start[1], set(o), 1)
    return o + [u for u in by_q if u not in o]


def recall(ps, o, gold, budget):
    shown, used = [], 0.0
    for u in o:
        t = (ps[u][1] - ps[u][0]) / 4.2
        if used + t <= budget:
            shown.append((ps[u][0], ps[u][1]))
            used += t
    return sum(any(a <= g0 and g1 <= b for a, b in shown) for g0, g1 in gold) / len(gold)


MODES = ["own-hop", "chain", "each", "prf2", "prf3"]


def main():
    print("| items | budget | " + " | ".join(MODES) + " | items 1-10: " + " / ".join(MODES) + " |")
    print("|---|---:|" + "---:|" * len(MODES) + "---|")
    for path in sys.argv[1:]:
        items = [json.loads(line) for line in open(path) if line.strip()]
        for budget in (400, 600):
            res = collections.defaultdict(list)
            for r in items:
                ps = passages(r["context"])
                gold = r["supporting_spans"]
                gold = gold if isinstance(gold, list) else ast.literal_eval(gold)
                for m in MODES:
                    res[m].append(recall(ps, order(ps, r["input"], m), gold, budget))
            all_ = " | ".join(f"{100 * sum(res[m]) / len(res[m]):.1f}" for m in MODES)
            first = " / ".join(f"{100 * sum(res[m][:10]) / 10:.1f}" for m in MODES)
            print(f"| {path.split('/')[-1]} ({len(items)}) | {budget} | {all_} | {first} |")


if __name__ == "__main__":
    main()
