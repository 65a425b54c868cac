#!/usr/bin/env python3
"""Two rows of a run paired question by question: fact recall, gold share (precision) and F1.

    python3 eval/pair.py eval/runs/hotpot-longbench-style kn-passages400 bm25-passages400
    python3 eval/pair.py RUN A B --kind comparison ../shared/data/hotpotqa/hotpot_dev_distractor_dev500.json

Differences (first minus second, in points) on the questions both rows answered, each with a
95% interval from 4,000 bootstrap resamples (seed 0). Rows of a max-trials sweep other than 4
are left out unless the name asks for them (`kn-passages400@1`: the rows of max trials 1); the
latest row per (item, method) wins, as in the report. `--kind K DATA` pairs only the questions of
kind K (the question type, or MuSiQue's hop count) read from the dev file DATA.

RUN may name several runs joined by commas (and DATA several files): their questions are pooled
(where two runs hold the same item and method, the first named wins),
as when a row's lead on one dataset is tested on the questions of the others. A directory of
`qrmem eval --contexts-only` pairs by its contexts.jsonl (recall and gold share, no F1):

    python3 eval/pair.py eval/runs/2wiki-longbench-style-1.5b,eval/runs/musique-longbench-style-1.5b \
        kn-hop-final-s-mix-passages400@1 bm25-own-hop-passages400
    python3 eval/pair.py eval/runs/2wiki-longbench-style,eval/runs/contexts-longbench-style/2wiki-kn-budget \
        kn-cooccurrence bm25-top6
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from evidence import fact_recall, item_kinds, latest_rows, gold_share
if len(sys.argv) not in (4, 7) or (len(sys.argv) == 7 and sys.argv[4] != '--kind'):
    raise SystemExit(__doc__)
run=sys.argv[1]; a,b=sys.argv[2],sys.argv[3]
kinds=None
if len(sys.argv)==7:
    kinds={}
    for data in sys.argv[6].split(','):
        kinds.update(item_kinds(data))
rows={}
for one in run.split(','):
    for k,r in latest_rows(one).items():
        rows.setdefault(k,r)
def get(m):
    trials=(None,4)
    if '@' in m:
        m,t=m.rsplit('@',1); trials=(int(t),)
    out={}
    for (i,mm,t),r in rows.items():
        if mm==m and t in trials: out[i]=r
    return out
A,B=get(a),get(b)
common=[i for i in A if i in B and (kinds is None or kinds.get(i)==sys.argv[5])]
if not common:
    raise SystemExit(f"no question both rows answered{' of kind '+sys.argv[5] if kinds else ''}")
def boot(xs):
    rnd=random.Random(0); n=len(xs); ms=[]
    for _ in range(4000):
        s=[xs[rnd.randrange(n)] for _ in range(n)]; ms.append(sum(s)/n)
    ms.sort(); return sum(xs)/n, ms[100], ms[3899]
for name,f in [('recall',lambda r: fact_recall(r)[0] if fact_recall(r) else None),('gold share',gold_share),('f1',lambda r:r.get('f1'))]:
    xs=[100*(f(A[i])-f(B[i])) for i in common if f(A[i]) is not None and f(B[i]) is not None]
    if not xs:
        print(f"{a} - {b} {name}: no question with it in both rows"
              " (a context measured without the LLM has no F1)")
        continue
    m,lo,hi=boot(xs); print(f"{a} - {b} {name} ({len(xs)} q): {m:+.1f} [{lo:+.1f}, {hi:+.1f}]")
