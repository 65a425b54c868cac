#!/usr/bin/env python3
"""Which gold supporting sentences the question's verbatim-named entities reach, per QRMeM graph.

    python3 eval/probes/start-entities.py eval/runs/graphs-longbench-style/memories

For each graph of a LongBench-style item (matched to its row in
runs/hotpot-longbench-style/results.jsonl by the question): the gold segments, the segments of
the non-generic entities named in the question (the old rule), how many segments the new rule
reaches (generic entities join through a capitalised mention), and the generic names. Mirrors
`navigate::named_in` and `joins_verbatim`; the LLM-named question entities are not included.
The counts in ARCHITECTURE.md's "Verbatim entity linking" deviation come from this script.
"""
import json,gzip,glob,re,sys
rows={}
for l in open('eval/runs/hotpot-longbench-style/results.jsonl'):
    d=json.loads(l)
    if d.get('gold_spans'): rows[d['question']]=d
def ww(h,n): return re.search(r'(?<![^\W_])'+re.escape(n)+r'(?![^\W_])',h) is not None
def named_in(q,m):
    m=m.strip()
    if len(m)<3: return False
    if re.search(r'\s',m): return ww(q.lower(),m.lower())
    if not m[0].isupper(): return False
    fe=next((i for i,c in enumerate(q) if i>0 and not c.isalnum()),len(q))
    return ww(q[fe:],m)
tot=[0,0,0,0]
for f in sorted(glob.glob(sys.argv[1]+'/*-graph-*.qrm.gz')):
    m=json.load(gzip.open(f)); q=m['question']; d=rows.get(q)
    if not d: continue
    segs=m['segments']
    gold=[]
    for g in d['gold_spans']:
        for s in segs:
            if s['start']<=g[0]<s['end']: gold.append(s['index'])
    nodes=[x for x in m['graph']['nodes'] if x and x['kind'] not in('number','time')]
    old=[x for x in nodes if not x.get('generic') and any(named_in(q,mm) for mm in x['mentions'])]
    new=[x for x in nodes if any((not x.get('generic') or mm.strip()[:1].isupper()) and named_in(q,mm) for mm in x['mentions'])]
    so=set().union(*[set(x['segments']) for x in old]) if old else set()
    sn=set().union(*[set(x['segments']) for x in new]) if new else set()
    gen=[x['name'] for x in new if x.get('generic')]
    tot[0]+=sum(g in so for g in gold); tot[1]+=sum(g in sn for g in gold); tot[2]+=len(gold); tot[3]+=bool(gen)
    print(d['item'][:8],'gold',gold,'old',sorted(so)[:30],'new |S|',len(sn),'generic named',gen)
print('facts in old E_s segments %d, new %d, of %d; questions naming a generic name %d'%tuple(tot))
