#!/usr/bin/env python3
"""Layer / native per size and round, then per operation the range below 100 kB and from
100 kB, for the layouts given (2x2, 4x2): python3 docs/perf/mpi-layer/cluster/summary.py 2x2 4x2"""
import collections
import csv
import glob
import statistics
import sys


def load(path):
    """(op, distribution, bytes) -> minimum time of one CSV file of mpi_coll."""
    d = {}
    for row in csv.reader(open(path)):
        if not row or row[0].startswith('#') or row[0] == 'library':
            continue
        d[(row[1], row[3], int(row[5]))] = float(row[8])
    return d


def ratios(layout):
    """(op, distribution, bytes) -> layer / native of every round."""
    per = collections.defaultdict(list)
    for r in sorted(glob.glob(f'docs/perf/mpi-layer/cluster/r*/{layout}')):
        native, layer = load(r + '/openmpi-native.csv'), load(r + '/openmpi-layer.csv')
        for k in native:
            if k in layer:
                per[k].append(layer[k] / native[k])
    return per


all_ratios = {layout: ratios(layout) for layout in sys.argv[1:]}
for layout, per in all_ratios.items():
    print('==', layout)
    byop = collections.defaultdict(list)
    for k in sorted(per):
        byop[k[:2]].append((k[2], per[k]))
    for op, rows in byop.items():
        print(op, ' '.join(f"{b}:{'/'.join(f'{x:.2f}' for x in v)}" for b, v in rows))
print()
for layout, per in all_ratios.items():
    for op in sorted({k[:2] for k in per}):
        lo = [x for k, v in per.items() if k[:2] == op and k[2] < 100000 for x in v]
        hi = [x for k, v in per.items() if k[:2] == op and k[2] >= 100000 for x in v]
        print(layout, op, f"<100kB {min(lo):.2f}-{max(lo):.2f} (median {statistics.median(lo):.2f})",
              f">=100kB {min(hi):.2f}-{max(hi):.2f}")
