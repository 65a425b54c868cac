#!/usr/bin/env python3
"""Whether a run's memories already hold the question's gold path (issue 88), with no LLM.

  graph-holds-path.py RUN DATA     (2WikiMultihopQA: DATA's items carry `evidences`, the gold
                                    path's triples; RUN's memories/ the memories of its items)

For each memory kind in RUN/memories (the LLM graph `-graph-`, the co-occurrence memory
`-cooccurrence-`), over every gold triple (subject, relation, object) of every item:
  - the subject is an entity of the memory (its name or a mention, normalised);
  - an edge of that entity reaches an entity whose name holds the object;
  - an edge of that entity has a description that names the object.
The item's memory is the one whose document holds the item's first supporting sentence.
A hop the memory holds can be read from the graph; one it does not must be read from passages.
The last row is the text itself: the subject is a paragraph's title among the item's, and
that paragraph names the object (so a hop that reads its subject's own passage can find it).
"""
import glob
import gzip
import json
import re
import sys


def norm(s):
    return re.sub(r"\W+", " ", s.lower()).strip()


def memories(run, kind):
    out = []
    for f in sorted(glob.glob(f"{run}/memories/*-{kind}-*.qrm.gz")):
        d = json.load(gzip.open(f))
        out.append(("".join(s["text"] for s in d["segments"]), d["graph"]))
    return out


def main():
    run, data = sys.argv[1], sys.argv[2]
    items = json.load(open(data))
    print(f"{run}: {len(items)} items of {data}\n")
    print("| memory | triples | subject is an entity | an edge reaches the object | an edge names the object |")
    print("|---|---:|---:|---:|---:|")
    for kind in ("graph", "cooccurrence"):
        mems = memories(run, kind)
        if not mems:
            continue
        total = subject = reaches = names = 0
        for it in items:
            title, k = it["supporting_facts"][0]
            sent = dict(it["context"])[title][k].strip()
            found = [m for m in mems if sent in m[0]]
            if not found:
                continue
            _, g = found[0]
            nodes = g["nodes"]
            for s, _r, o in it["evidences"]:
                total += 1
                ns = {i for i, n in enumerate(nodes)
                      if norm(s) in {norm(x) for x in n["mentions"] + [n["name"]]}}
                subject += bool(ns)
                r_ok = n_ok = False
                for a, b, p in g["edges"]:
                    if a in ns or b in ns:
                        other = b if a in ns else a
                        r_ok |= norm(o) in norm(nodes[other]["name"])
                        n_ok |= norm(o) in norm(p["description"])
                reaches += r_ok
                names += n_ok
        pct = lambda n: f"{n} ({100 * n / total:.1f}%)"
        print(f"| {kind} | {total} | {pct(subject)} | {pct(reaches)} | {pct(names)} |")
    total = titled = names = 0
    for it in items:
        paragraphs = {norm(t): norm(" ".join(ss)) for t, ss in it["context"]}
        for s, _r, o in it["evidences"]:
            total += 1
            own = paragraphs.get(norm(s))
            titled += own is not None
            names += own is not None and norm(o) in own
    pct = lambda n: f"{n} ({100 * n / total:.1f}%)"
    print(f"| the text: the subject's own paragraph | {total} | {pct(titled)} | | {pct(names)} |")


if __name__ == "__main__":
    main()
