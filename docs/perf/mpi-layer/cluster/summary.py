#!/usr/bin/env python3
"""Layer / native per size and round, then per operation the range below 100 kB and from
100 kB, for the layouts given (2x2, 4x2): python3 docs/perf/mpi-layer/cluster/summary.py 2x2 4x2"""
import sys, csv, glob, collections
# per layout: for each op,dist: ratios layer/native per round per size; print min/median/max over sizes,
# split into sizes served (>= threshold) and passed through.
def load(path):
    d={}
    for row in csv.reader(open(path)):
        if not row or row[0].startswith('#') or row[0]=='library': continue
        d[(row[1],row[3],int(row[5]))]=float(row[8])
    return d
for lay in sys.argv[1:]:
    print('==',lay)
    rounds=sorted(glob.glob(f'docs/perf/mpi-layer/cluster/r*/{lay}'))
    per=collections.defaultdict(list)
    for r in rounds:
        n=load(r+'/openmpi-native.csv'); l=load(r+'/openmpi-layer.csv')
        for k in n:
            if k in l: per[k].append(l[k]/n[k])
    keys=sorted(per)
    byop=collections.defaultdict(list)
    for k in keys: byop[(k[0],k[1])].append((k[2],per[k]))
    for op,rows in byop.items():
        print(op, ' '.join(f"{b}:{'/'.join(f'{x:.2f}' for x in v)}" for b,v in rows))
print()
for lay in sys.argv[1:]:
    rounds=sorted(glob.glob(f'docs/perf/mpi-layer/cluster/r*/{lay}'))
    per=collections.defaultdict(list)
    for r in rounds:
        n=load(r+'/openmpi-native.csv'); l=load(r+'/openmpi-layer.csv')
        for k in n:
            if k in l: per[k].append(l[k]/n[k])
    for op in sorted(set((k[0],k[1]) for k in per)):
        lo=[x for k,v in per.items() if (k[0],k[1])==op and k[2]<100000 for x in v]
        hi=[x for k,v in per.items() if (k[0],k[1])==op and k[2]>=100000 for x in v]
        import statistics as st
        print(lay, op, f"<100kB {min(lo):.2f}-{max(lo):.2f} (median {st.median(lo):.2f})", f">=100kB {min(hi):.2f}-{max(hi):.2f}")
