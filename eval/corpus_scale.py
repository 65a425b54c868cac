#!/usr/bin/env python3
"""The parts of eval/corpus-scale.sh that drive processes: prepare, serve, fresh, crash.

  corpus_scale.py prepare DEV OTHER WORK   documents to add (OTHER's paragraphs, which the
                                           corpus does not hold) and 1,000 of DEV's own to remove
  corpus_scale.py serve QRMEM CORPUS WORK  a long-lived `corpus serve`: 20 adds, 200 searches per
                                           retriever (SERVED), 3 single removes; its ms and peak
                                           memory (FRESH and COMPARED set the other two counts)
  corpus_scale.py fresh QRMEM CORPUS WORK  a fresh `corpus search` process per query
  corpus_scale.py steady QRMEM CORPUS DEV N  the first N questions of DEV searched in one
                                           `corpus serve` per retriever: p50 / p99 over all of
                                           them and over those after the first 100 (the process
                                           warm: its pages and caches read in)
  corpus_scale.py crash QRMEM CORPUS WORK  kill -9 during a remove and during an add, then the
                                           integrity check, whole documents, the same command
                                           again, and the rankings against those before

Each prints one JSON object. Paragraph documents are built as the corpus recall builds them
(src/eval/corpus_recall.rs `paragraph_document`): the title, a newline, the sentences joined.
"""
import gzip
import hashlib
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time

RETRIEVERS = ["bm25", "bm25-hop", "graph-start", "graph-hop", "graph-own-hop"]
# Searches per retriever in the long-lived process, fresh processes per retriever, and
# questions whose rankings are compared before and after the kills (each a fresh process).
SERVED = int(os.environ.get("SERVED", "200"))
FRESH = int(os.environ.get("FRESH", "20"))
COMPARED = int(os.environ.get("COMPARED", "20"))
# When the crash part kills the remove and the add (seconds after their start): each must still
# be running then (the report says whether it was; a release build adds 1,000 documents in ~2 s).
KILL_REMOVE = float(os.environ.get("KILL_REMOVE", "3.0"))
KILL_ADD = float(os.environ.get("KILL_ADD", "4.0"))


def load(path):
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)


def document(title, sentences):
    return f"{title}\n{''.join(sentences).strip()}"


def pct(ms, p):
    ms = sorted(ms)
    k = max(1, min(len(ms), -(-int(p * len(ms) * 1000) // 1000)))
    return ms[k - 1]


def summary(ms):
    if not ms:
        return {}
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 0.50), 2),
        "p99_ms": round(pct(ms, 0.99), 2),
        "max_ms": round(max(ms), 2),
        "mean_ms": round(statistics.mean(ms), 2),
    }


def questions(work):
    return json.load(open(os.path.join(work, "questions.json")))


def prepare(dev, other, work):
    items = load(dev)
    seen, removed = set(), []
    for item in items:
        for title, sentences in item["context"]:
            text = document(title, sentences)
            if text in seen:
                continue
            seen.add(text)
            if len(removed) < 1000:
                removed.append(text)
    os.makedirs(os.path.join(work, "removed"), exist_ok=True)
    ids = []
    for i, text in enumerate(removed):
        with open(os.path.join(work, "removed", f"{i:04}.txt"), "w") as f:
            f.write(text)
        ids.append(hashlib.sha256(text.encode()).hexdigest())
    with open(os.path.join(work, "remove.ids"), "w") as f:
        f.write("\n".join(ids) + "\n")
    new = []
    for item in load(other):
        for title, sentences in item["context"]:
            text = document(title, sentences)
            if text not in seen and text not in new:
                new.append(text)
    os.makedirs(os.path.join(work, "new"), exist_ok=True)
    for i, text in enumerate(new[:40], 1):
        with open(os.path.join(work, "new", f"{i}.txt"), "w") as f:
            f.write(text)
    # 200 questions spread over the file, for the searches.
    step = max(1, len(items) // 200)
    qs = [it["question"] for it in items[::step]][:200]
    json.dump(qs, open(os.path.join(work, "questions.json"), "w"))
    print(json.dumps({"removed": len(removed), "new": min(40, len(new)), "questions": len(qs)}))


def peak_kb(pid):
    out = {}
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(("VmHWM", "VmRSS")):
            k, v = line.split(":")
            out[k] = int(v.split()[0])
    return out


def served(qrmem, corpus):
    """A `corpus serve` process and a function sending it one request: (reply, wall ms)."""
    p = subprocess.Popen(
        [qrmem, "corpus", "--corpus", corpus, "serve"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )

    def ask(req):
        t = time.perf_counter()
        p.stdin.write(json.dumps(req) + "\n")
        p.stdin.flush()
        reply = json.loads(p.stdout.readline())
        if not reply.get("ok"):
            raise SystemExit(f"serve refused {req}: {reply}")
        return reply, (time.perf_counter() - t) * 1000

    return p, ask


def serve(qrmem, corpus, work):
    p, ask = served(qrmem, corpus)
    t = time.perf_counter()
    ask({"op": "ls"})
    opened_ms = (time.perf_counter() - t) * 1000
    open_mem = peak_kb(p.pid)
    adds, adds_wall, added = [], [], []
    for i in range(4, 24):
        text = open(os.path.join(work, "new", f"{i}.txt")).read()
        reply, wall = ask({"op": "add", "name": f"new-{i}", "text": text})
        adds.append(reply["ms"])
        adds_wall.append(wall)
        added.append(reply.get("added") or reply.get("present"))
    searches = {}
    for r in RETRIEVERS:
        ms = []
        for q in questions(work)[:SERVED]:
            reply, _ = ask({"op": "search", "query": q, "k": 5, "retriever": r})
            ms.append(reply["ms"])
        searches[r] = summary(ms)
    removes = []
    for doc in added[:3]:
        reply, _ = ask({"op": "remove", "docs": [doc]})
        removes.append(reply["ms"])
    mem = peak_kb(p.pid)
    p.stdin.close()
    p.wait()
    print(json.dumps({
        "first_reply_ms": round(opened_ms, 1),
        "memory_after_open_kb": open_mem,
        "add_one": summary(adds),
        "add_one_wall": summary(adds_wall),
        "search_top5": searches,
        "remove_one_ms": [round(x, 1) for x in removes],
        "memory_kb": mem,
    }, indent=1))


def steady(qrmem, corpus, dev, n):
    qs = [it["question"] for it in load(dev)[: int(n)]]
    out = {"questions": len(qs), "warm_after": 100}
    for r in RETRIEVERS:
        p, ask = served(qrmem, corpus)
        ms = []
        for q in qs:
            reply, _ = ask({"op": "search", "query": q, "k": 5, "retriever": r})
            ms.append(reply["ms"])
        p.stdin.close()
        p.wait()
        out[r] = {"all": summary(ms), "warm": summary(ms[100:])}
    print(json.dumps(out, indent=1))


def fresh(qrmem, corpus, work):
    out = {}
    for r in ["bm25", "graph-own-hop"]:
        ms = []
        for q in questions(work)[:FRESH]:
            t = time.perf_counter()
            subprocess.run([qrmem, "corpus", "--corpus", corpus, "search", q, "--k", "5",
                            "--retriever", r], check=True, capture_output=True)
            ms.append((time.perf_counter() - t) * 1000)
        out[r] = summary(ms)
    print(json.dumps(out, indent=1))


def listing(qrmem, corpus):
    out = subprocess.run([qrmem, "corpus", "--corpus", corpus, "ls"], check=True,
                         capture_output=True, text=True).stdout
    return [l for l in out.splitlines() if l.strip()]


def integrity(corpus):
    db = sqlite3.connect(os.path.join(corpus, "corpus.sqlite"))
    ok = db.execute("PRAGMA integrity_check").fetchone()[0]
    db.close()
    return ok


def rankings(qrmem, corpus, work):
    out = []
    for q in questions(work)[:COMPARED]:
        for r in ["bm25", "graph-own-hop"]:
            res = subprocess.run([qrmem, "corpus", "--corpus", corpus, "search", q, "--k", "5",
                                  "--retriever", r], capture_output=True, text=True)
            out.append(res.stdout if res.returncode == 0 else f"error: {res.stderr.strip()}")
    return out


def killed(cmd, after):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(after)
    alive = p.poll() is None
    if alive:
        os.kill(p.pid, signal.SIGKILL)
    p.wait()
    return alive


def crash(qrmem, corpus, work):
    ids = open(os.path.join(work, "remove.ids")).read().split()
    base = [qrmem, "corpus", "--corpus", corpus]
    before_docs = len(listing(qrmem, corpus))
    before = rankings(qrmem, corpus, work)
    report = {"documents_before": before_docs}
    for what, cmd, after in [
        ("remove", base + ["remove"] + ids, KILL_REMOVE),
        ("add", base + ["add", os.path.join(work, "removed")], KILL_ADD),
    ]:
        t = time.perf_counter()
        was_running = killed(cmd, after)
        step = {"killed_after_s": after, "was_running": was_running,
                "integrity": integrity(corpus)}
        try:
            docs = listing(qrmem, corpus)
            step["documents_after_kill"] = len(docs)
            step["opens"] = True
        except subprocess.CalledProcessError as e:
            step["opens"] = False
            step["open_error"] = e.stderr.strip()[-400:] if e.stderr else str(e)
        t = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True)
        step["rerun_exit"] = res.returncode
        step["rerun_s"] = round(time.perf_counter() - t, 1)
        step["rerun_error"] = res.stderr.strip()[-400:] if res.returncode else ""
        step["documents_after_rerun"] = len(listing(qrmem, corpus))
        step["integrity_after_rerun"] = integrity(corpus)
        report[what] = step
    after_rankings = rankings(qrmem, corpus, work)
    report["documents_after"] = len(listing(qrmem, corpus))
    report["rankings_equal_before"] = sum(a == b for a, b in zip(before, after_rankings))
    report["rankings_compared"] = len(before)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"prepare": prepare, "serve": serve, "steady": steady, "fresh": fresh, "crash": crash}[cmd](*args)
