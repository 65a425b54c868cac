#!/usr/bin/env python3
"""Decode and prompt throughput of llama-server with 1 and 4 requests in flight (eval/perf.md s.5).

Usage: scripts/llm-server.sh start --np 4; python3 eval/probes/slots.py [URL]"""
import json, time, sys, urllib.request, concurrent.futures as cf
URL = (sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080/v1") + "/chat/completions"
def req(i, ptoks, gen):
    body = "word%d " % i + " ".join("alpha%d" % (j % 50) for j in range(ptoks))
    d = {"model":"x","messages":[{"role":"user","content":body}],"max_tokens":gen,"ignore_eos":True,"temperature":0,"cache_prompt":False}
    t=time.time()
    r=json.load(urllib.request.urlopen(urllib.request.Request(URL,json.dumps(d).encode(),{"Content-Type":"application/json"})))
    return time.time()-t, r["usage"], r.get("timings",{})
for n in (1,4):
    for (p,g) in ((8,128),(700,1)):
        t=time.time()
        with cf.ThreadPoolExecutor(n) as ex: rs=list(ex.map(lambda i:req(i+int(t),p,g), range(n)))
        w=time.time()-t
        pt=sum(r[1]["prompt_tokens"] for r in rs); ct=sum(r[1]["completion_tokens"] for r in rs)
        print(f"n={n} prompt={pt} completion={ct} wall={w:.1f}s  gen tok/s={ct/w:.1f} prompt tok/s={pt/w:.1f}", flush=True)
