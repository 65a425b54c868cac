#!/usr/bin/env python3
"""How often a chain's hops find the gold path's answers (issue 88), from a run's traces.

  hop-answers.py RUN DATA METHOD...   (MuSiQue: each item's question_decomposition answers;
                                       2Wiki: the objects of its evidences)

For each method, the share of questions whose first hop answer matches the gold path's first
answer, whose found answers cover the gold path's bridges (every answer but the last), and
whose found answers and final answer cover every answer of the gold path, the last too
(for a compositional question: the bridge found and the answer right) (token F1 >= 0.5,
the answers normalised as the metrics do). Reads the traces only: no LLM.
"""
import glob
import json
import re
import string
import sys
from collections import Counter


def norm(s):
    s = s.lower()
    s = "".join(c for c in s if c not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return s.split()


def f1(a, b):
    a, b = norm(a), norm(b)
    common = Counter(a) & Counter(b)
    same = sum(common.values())
    if not a or not b or same == 0:
        return 0.0
    p, r = same / len(a), same / len(b)
    return 2 * p * r / (p + r)


def gold_path(item):
    if "question_decomposition" in item:
        return [h["answer"] for h in item["question_decomposition"]]
    return [e[2] for e in item.get("evidences", [])]


def hop_answers(trace):
    out = []
    for s in trace["steps"]:
        # The plan step (the path or the decomposition) holds no answer.
        if s["kind"] != "hop" or s.get("note", "").startswith(("path:", "decomposition:")):
            continue
        r = s["reason"]
        if " -> " in r:
            out.append(r.split(" -> ", 1)[1])
        elif r.count(" | ") == 2:
            out.append(r.split(" | ")[2])
    return out


def load(path):
    if path.endswith(".jsonl"):
        return [json.loads(l) for l in open(path) if l.strip()]
    return json.load(open(path))


def main(run, data, methods):
    items = {str(it.get("id", it.get("_id"))): it for it in load(data)}
    for m in methods:
        first = every = whole = n = 0
        for f in sorted(glob.glob(f"{run}/traces/*--{m}*.json")):
            name = f.split("/")[-1][: -len(".json")].split("--")
            item = items.get(name[0])
            if not item or name[1] != m:
                continue
            gold = gold_path(item)
            trace = json.load(open(f))
            found = [a for a in hop_answers(trace) if a and a != "(not found)"]
            n += 1
            first += bool(found) and f1(found[0], gold[0]) >= 0.5
            # Every gold answer but the last (the question's own answer) found by some hop.
            bridge = gold[:-1]
            every += all(any(f1(a, g) >= 0.5 for a in found) for g in bridge)
            # The last gold answer too, by a hop or as the answer: the whole path read right.
            said = found + [trace.get("answer", "")]
            whole += all(any(f1(a, g) >= 0.5 for a in said) for g in gold)
        print(f"{m}: {n} questions; first hop right {first} ({100 * first / max(n, 1):.0f}%), "
              f"every bridge found {every} ({100 * every / max(n, 1):.0f}%), "
              f"the whole path {whole} ({100 * whole / max(n, 1):.0f}%)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
