#!/usr/bin/env python3
"""Per size and algorithm: the minimum of each round for the OLD and NEW builds and han, and the
median over the rounds of new/old and new/han (docs/perf/two-queues/run.sh's output)."""
import csv, glob, statistics, sys

out = sys.argv[1]
rows = {}  # (series, round) -> {(alg, bytes): min_s}
for path in glob.glob(f"{out}/*-*.csv"):
    series, rnd = path.rsplit("/", 1)[1][:-4].rsplit("-", 1)
    got = {}
    with open(path) as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            got[(r["algorithm"], int(r["bytes"]))] = float(r["min_s"])
    rows[(series, int(rnd))] = got
rounds = sorted({r for (_, r) in rows})
sizes = sorted({b for got in rows.values() for (_, b) in got})
algs = sorted({a for (s, _), got in rows.items() if s == "new" for (a, _) in got})
print(f"{'bytes':>8} {'algorithm':24} {'old (ms)':>22} {'new (ms)':>22} {'new/old':>8} {'new/han':>8}")
for b in sizes:
    han = [rows[("han", r)].get(("native", b)) for r in rounds]
    print(f"{b:>8} {'han':24} {'':>22} {' '.join(f'{x*1e3:.2f}' for x in han if x):>22}")
    for a in algs:
        old = [rows[("old", r)][(a, b)] for r in rounds]
        new = [rows[("new", r)][(a, b)] for r in rounds]
        vs_old = statistics.median(n / o for n, o in zip(new, old))
        vs_han = statistics.median(n / h for n, h in zip(new, han) if h)
        print(f"{b:>8} {a:24} {' '.join(f'{x*1e3:.2f}' for x in old):>22} "
              f"{' '.join(f'{x*1e3:.2f}' for x in new):>22} {vs_old:8.2f} {vs_han:8.2f}")
