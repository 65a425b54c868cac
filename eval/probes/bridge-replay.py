#!/usr/bin/env python3
"""The second-hop start replayed on committed kn traces, without the LLM (issue 55, item 4).

    python3 eval/probes/bridge-replay.py [run directory] [data jsonl]
    (defaults: eval/runs/hotpot-longbench-style and a LongBench-style jsonl written by
    `qrmem data longbench-style --limit 30`, whose order numbers the items)

For each kn trace (RUN/traces/*--kn--t4.json) it takes S_imp's ranked order from the start
step's note, the gold segments from the trace's gold spans and the run's graph memories, and
counts the gold segments among the first k segments of (a) that order and (b) the second-hop
order of src/navigate/bridge.rs: the best segment, then every segment of the document by how
many bridge entities it names (the non-generic entities of the best segment whose name or a
mention of at least 4 characters occurs in a paragraph of it that names an E_s entity), ties by
the ranked order, then document order. Items 1-10 chose the setting; 11-30 are the test.
"""
import collections
import glob
import gzip
import json
import re
import sys

run = sys.argv[1] if len(sys.argv) > 1 else "eval/runs/hotpot-longbench-style"
data = sys.argv[2] if len(sys.argv) > 2 else None

memories = {}
for path in glob.glob(f"{run}/memories/*-graph-*.qrm.gz"):
    m = json.load(gzip.open(path))
    memories[m["question"]] = m

RANKED = re.compile(r"ranked \[([^\]]*)\], kept")
LAYOUT = re.compile(r"^passage \d+:$", re.I)


def paragraphs(text):
    """memory::schema::paragraphs: lines, a short line without a full stop joined to the next."""
    out, pending = [], ""
    for line in text.splitlines():
        l = line.strip()
        if not l or LAYOUT.match(l):
            if pending:
                out.append(pending)
                pending = ""
            continue
        pending = f"{pending} {l.lower()}" if pending else l.lower()
        title = len(l.split()) <= 10 and not l.endswith((".", "!", "?", '"'))
        if not title:
            out.append(pending)
            pending = ""
    if pending:
        out.append(pending)
    return out


def occurs(paragraph, name):
    return re.search(r"(?<!\w)" + re.escape(name) + r"(?!\w)", paragraph) is not None


def bridge_order(m, start_names, ranked):
    best = ranked[0]
    nodes = [n for n in m["graph"]["nodes"] if n]
    start = {n["name"] for n in nodes if n["name"] in start_names}
    start_mentions = [x.strip().lower() for n in nodes if n["name"] in start
                      for x in n["mentions"] + [n["name"]] if len(x.strip()) >= 4]
    first_hop = [p for p in paragraphs(m["segments"][best]["text"])
                 if any(occurs(p, x) for x in start_mentions)]
    bridges = [n for n in nodes
               if n["name"] not in start and not n.get("generic") and best in n["segments"]
               and any(occurs(p, x.strip().lower()) for x in n["mentions"] + [n["name"]]
                       if len(x.strip()) >= 4 for p in first_hop)]
    named = collections.Counter(s for n in bridges for s in n["segments"])
    rank = {s: i for i, s in enumerate(ranked)}
    rest = sorted((s for s in range(len(m["segments"])) if s != best),
                  key=lambda s: (-named[s], rank.get(s, len(m["segments"]) + 1), s))
    return [best] + rest


def gold_segments(m, spans):
    return {s["index"] for g in spans for s in m["segments"] if s["start"] <= g[0] < s["end"]}


order = {}
if data:
    with open(data) as f:
        order = {json.loads(line)["input"]: i for i, line in enumerate(f)}

rows = []
for path in sorted(glob.glob(f"{run}/traces/*--kn--t4.json")):
    t = json.load(open(path))
    m = memories.get(t["question"])
    found = RANKED.search(t["steps"][0]["note"]) if t.get("steps") else None
    if not m or not found:
        continue
    ranked = [int(x) for x in found.group(1).split(",") if x.strip()]
    gold = gold_segments(m, t["gold_spans"])
    rows.append((order.get(t["question"]), ranked, bridge_order(m, set(t["start_entities"]), ranked), gold))

splits = [("all", lambda i: True)]
if order:
    splits += [("items 1-10", lambda i: i is not None and i < 10),
               ("items 11-30", lambda i: i is not None and i >= 10)]
for name, keep in splits:
    sub = [r for r in rows if keep(r[0])]
    gold = sum(len(r[3]) for r in sub)
    print(f"{name}: {len(sub)} questions, {gold} gold segments")
    for k in (2, 3, 4, 5):
        a = sum(len(r[3] & set(r[1][:k])) for r in sub)
        b = sum(len(r[3] & set(r[2][:k])) for r in sub)
        qa = sum(r[3] <= set(r[1][:k]) for r in sub)
        qb = sum(r[3] <= set(r[2][:k]) for r in sub)
        print(f"  first {k}: ranked S_imp {a} gold ({qa} questions all), second-hop order {b} ({qb})")
