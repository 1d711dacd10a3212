#!/usr/bin/env python3
"""Per operation and size of `circulant bench` tables (switch-pP.txt, fold/*.txt): the shared
segment's minimum against the fastest plan's, and their ratio.

    python3 docs/perf/segment/summary.py docs/perf/segment/switch-p4.txt ...
"""
import sys
unit={'ns':1e-3,'µs':1,'ms':1e3,'s':1e6}
for f in sys.argv[1:]:
    rows={}
    for line in open(f):
        t=line.split()
        if len(t)<8 or t[0] not in ('bcast','allreduce','allgatherv'): continue
        op,dist,b,total,alg,v,u=t[:7]
        x=float(v)*unit[u]
        d=rows.setdefault((op,int(b)),{})
        d[alg]=x
    print('==',f)
    for (op,b),d in sorted(rows.items()):
        seg=[ (v,a) for a,v in d.items() if a.startswith('segment')]
        plan=min((v,a) for a,v in d.items() if not a.startswith('segment'))
        s=seg[0][0] if seg else None
        print(f"{op:10} {b:6}  segment {s if s is None else round(s,1)!s:>6} µs  best plan {plan[0]:7.1f} µs ({plan[1]})  ratio {'-' if s is None else round(s/plan[0],2)}")
