"""The side-by-side build table of eval/perf.md section 7 (issue 56, item 1): the same three
documents built one after the other, alone on the server, once per variant of the extraction
call. Reads each run directory's builds.jsonl and extraction-replies.jsonl.gz (the extraction
replies of its builds, exported from the run's own reply cache by `--export CACHE_DIR RUN`).

    python3 eval/probes/build-cost.py eval/runs/build-cost-before eval/runs/build-cost-compact ...
    python3 eval/probes/build-cost.py --export /tmp/cache-before eval/runs/build-cost-before
    python3 eval/probes/build-cost.py --replay-cut 2 eval/runs/build-cost-before

--replay-cut K replays the repeat cut (src/llm/repeat.rs: a list stops at the element it
already holds K times) on each list of a run's uncut replies: how many replies each list would
be cut in, the distinct triples lost, and the share of the list's text kept (the completion
tokens of a list, in proportion to its characters).
"""
import glob
import gzip
import json
import os
import statistics
import sys


def export(cache, run):
    """Writes RUN/extraction-replies.jsonl.gz from the extraction replies in CACHE."""
    rows = []
    for path in sorted(glob.glob(f"{cache}/*/*.json")):
        with open(path) as f:
            entry = json.load(f)
        request = entry["request"]
        if (request.get("schema") or {}).get("name") != "extract":
            continue
        rows.append({
            "key": entry["key"],
            "segment": request["messages"][-1]["content"][-400:],
            "sampling": request["sampling"],
            "reply": entry["reply"],
        })
    rows.sort(key=lambda r: r["key"])
    with gzip.open(f"{run}/extraction-replies.jsonl.gz", "wt") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    print(f"{len(rows)} extraction replies -> {run}/extraction-replies.jsonl.gz")


def walk(text):
    """Each character of a JSON text with where it stands: "start" and "end" for a string's
    quotes, "in" inside a string, "out" elsewhere."""
    in_string, escaped = False, False
    for at, c in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
                yield at, c, "end"
                continue
            yield at, c, "in"
        elif c == '"':
            in_string = True
            yield at, c, "start"
        else:
            yield at, c, "out"


def cut_at(text, allowed):
    """The offset of the element that makes one copy too many in the list `text` (the rule of
    src/llm/repeat.rs with `cut_repeats_in`: the list's own elements are watched, not the
    arrays inside them, so a triple naming one entity twice is no repeat), or None."""
    stack, string_start = [], 0

    def finish(began, end):
        frame = stack[-1]
        frame["start"] = None
        element = text[began:end].strip()
        frame["copies"][element] = frame["copies"].get(element, 0) + 1
        return frame["copies"][element] > allowed

    def top_start():
        """Where the current element of the watched list began (the list is the outermost
        array; the arrays inside its elements are not watched)."""
        return stack[-1]["start"] if len(stack) == 1 and stack[-1]["array"] else None

    def begin(at):
        if stack and stack[-1]["array"] and stack[-1]["start"] is None:
            stack[-1]["start"] = at

    for at, c, where in walk(text):
        if where == "in":
            continue
        if where == "start":
            begin(at)
            string_start = at
        elif where == "end":
            if top_start() == string_start and finish(string_start, at + 1):
                return string_start
        elif c in "[{":
            begin(at)
            stack.append({"array": c == "[", "start": None, "copies": {}})
        elif c in "]}":
            began = top_start()
            if began is not None and finish(began, at):
                return began
            stack.pop()
            began = top_start()
            if began is not None and finish(began, at + 1):
                return began
        elif c == ",":
            began = top_start()
            if began is not None and finish(began, at):
                return began
        elif not c.isspace() and c != ":":
            begin(at)
    return None


def close(prefix):
    """`prefix` without its trailing comma, its open arrays and objects closed (as
    RepeatCut::reply)."""
    kept = prefix.rstrip()
    if kept.endswith(","):
        kept = kept[:-1]
    stack = []
    for _, c, where in walk(kept):
        if where == "out" and c in "[{":
            stack.append("]" if c == "[" else "}")
        elif where == "out" and c in "]}":
            stack.pop()
    return kept + "".join(reversed(stack))


def replay_cut(run, allowed):
    reps = [r["reply"] for r in replies(run)]
    out = {}
    for key in ("entities", "triples"):
        cut, lost, chars, kept_chars, tokens, kept_tokens = 0, 0, 0, 0, 0.0, 0.0
        for r in reps:
            try:
                value = json.loads(r["content"])
            except json.JSONDecodeError:
                continue
            items = value.get(key, [])
            text = json.dumps(items, ensure_ascii=False)
            share = len(text) / max(len(r["content"]), 1)
            list_tokens = r["usage"]["completion_tokens"] * share
            tokens += list_tokens
            at = cut_at(text, allowed)
            if at is None:
                kept_tokens += list_tokens
                continue
            cut += 1
            kept_tokens += list_tokens * at / len(text)
            kept = json.loads(close(text[:at]))
            lost += len({json.dumps(x) for x in items}) - len({json.dumps(x) for x in kept})
        out[key] = (cut, lost, tokens / max(len(reps), 1), kept_tokens / max(len(reps), 1))
    print(f"{run}: {len(reps)} replies; the cut at copy {allowed + 1}, replayed per list:")
    for key, (cut, lost, tokens, kept) in out.items():
        print(f"  {key}: cut in {cut} replies, distinct items lost {lost}, "
              f"completion tokens per reply {tokens:.0f} -> {kept:.0f}")


def replies(run):
    path = f"{run}/extraction-replies.jsonl.gz"
    if not os.path.exists(path):
        return []
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def loops(reply, copies=3):
    """Whether a reply's triple or entity list holds one element `copies` or more times."""
    try:
        value = json.loads(reply["content"])
    except json.JSONDecodeError:
        return False
    for key in ("triples", "entities"):
        seen = {}
        for item in value.get(key, []):
            k = json.dumps(item, sort_keys=True)
            seen[k] = seen.get(k, 0) + 1
            if seen[k] >= copies:
                return True
    return False


def triples(reply):
    try:
        value = json.loads(reply["content"])
    except json.JSONDecodeError:
        return 0, 0
    t = value.get("triples", [])
    return len(t), len({json.dumps(x) for x in t})


def row(run):
    builds = []
    with open(f"{run}/builds.jsonl") as f:
        for line in f:
            if line.strip():
                builds.append(json.loads(line))
    graph = [b for b in builds if b.get("kind") == "graph" and not b.get("error")]
    seg = sum(b["segments"] for b in graph)
    per_seg_completion = [b["completion_tokens"] / b["segments"] for b in graph]
    g = [b["graph"] for b in graph]
    reps = [r["reply"] for r in replies(run)]
    written = [triples(r) for r in reps]
    return {
        "run": os.path.basename(run.rstrip("/")),
        "documents": len(graph),
        "segments": seg,
        "wall": [round(b["wall_secs"]) for b in graph],
        "wall_total": sum(b["wall_secs"] for b in graph),
        "requests": sum(b["requests"] for b in graph),
        "cache_hits": sum(b["cache_hits"] for b in graph),
        "completion_per_segment_median": statistics.median(per_seg_completion) if graph else 0,
        "completion_per_segment": sum(b["completion_tokens"] for b in graph) / max(seg, 1),
        "prompt_per_segment": sum(b["prompt_tokens"] for b in graph) / max(seg, 1),
        "extraction_replies": len(reps),
        "extraction_completion_mean": statistics.mean(r["usage"]["completion_tokens"] for r in reps) if reps else 0,
        "looping_replies": sum(loops(r) for r in reps),
        "cut_replies": sum(r["finish_reason"] == "repeat" for r in reps),
        "triples_written_per_reply": statistics.mean(w for w, _ in written) if reps else 0,
        "distinct_triples_per_reply": statistics.mean(d for _, d in written) if reps else 0,
        "raw_relations": sum(x["raw_relations"] for x in g),
        "relations_kept": sum(x["relations_kept"] for x in g),
        "edges": sum(x["edges"] for x in g),
        "edges_per_segment": sum(x["edges"] for x in g) / max(seg, 1),
        "entities_per_segment": sum(x["entities"] for x in g) / max(seg, 1),
        "llm_entities_per_segment": sum(x["entities_per_segment_by_source"]["llm"] * x["segments"] for x in g) / max(seg, 1),
        "entities_with_edge": statistics.mean(x["entities_with_edge"] for x in g) if g else 0,
        "failures": sum(b["step_failures"] for b in graph),
    }


def table(rows):
    lines = [
        "| figure | " + " | ".join(r["run"] for r in rows) + " |",
        "|---|" + "---:|" * len(rows),
    ]

    def line(name, f):
        lines.append(f"| {name} | " + " | ".join(f(r) for r in rows) + " |")

    line("documents (segments)", lambda r: f"{r['documents']} ({r['segments']})")
    line("build wall per document, s", lambda r: ", ".join(str(w) for w in r["wall"]))
    line("build wall, all three, s", lambda r: f"{r['wall_total']:,.0f}")
    line("requests sent (cache hits)", lambda r: f"{r['requests']} ({r['cache_hits']})")
    line("completion tokens per segment, median over builds", lambda r: f"{r['completion_per_segment_median']:.0f}")
    line("completion tokens per segment, all", lambda r: f"{r['completion_per_segment']:.0f}")
    line("prompt tokens per segment", lambda r: f"{r['prompt_per_segment']:,.0f}")
    line("extraction replies: mean completion tokens", lambda r: f"{r['extraction_completion_mean']:.0f}")
    line("extraction replies holding one element 3+ times", lambda r: f"{r['looping_replies']} of {r['extraction_replies']}")
    line("extraction replies stopped at a repeat", lambda r: f"{r['cut_replies']} of {r['extraction_replies']}")
    line("triples written per reply (distinct)", lambda r: f"{r['triples_written_per_reply']:.1f} ({r['distinct_triples_per_reply']:.1f})")
    line("relations kept / extracted", lambda r: f"{r['relations_kept']} / {r['raw_relations']} ({100 * r['relations_kept'] / max(r['raw_relations'], 1):.0f}%)")
    line("edges per segment", lambda r: f"{r['edges_per_segment']:.2f}")
    line("entities per segment (LLM)", lambda r: f"{r['entities_per_segment']:.1f} ({r['llm_entities_per_segment']:.1f})")
    line("entities with an edge", lambda r: f"{100 * r['entities_with_edge']:.1f}%")
    line("failed steps", lambda r: str(r["failures"]))
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--export":
        export(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "--replay-cut":
        replay_cut(sys.argv[3], int(sys.argv[2]))
    else:
        print(table([row(run) for run in sys.argv[1:]]))
