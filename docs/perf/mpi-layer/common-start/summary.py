#!/usr/bin/env python3
"""Summary of run.sh's files: per MPI, build and size, the median over the rounds of each
series' median time (µs). Under MPICH the `mpi` series is circulant's (the layer serves every
call) and `pmpi` MPICH's own; under Open MPI both are Open MPI's.

    python3 docs/perf/mpi-layer/common-start/summary.py OUT
"""
import csv
import glob
import os
import statistics
import sys

out = sys.argv[1]
rows = {}  # (mpi, build, algorithm, bytes) -> [median_s per round]
for path in glob.glob(os.path.join(out, "*-r*.csv")):
    mpi, build, _ = os.path.basename(path).split("-")
    with open(path) as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            key = (mpi, build, r["algorithm"], int(r["bytes"]))
            rows.setdefault(key, []).append(float(r["median_s"]) * 1e6)

sizes = sorted({k[3] for k in rows})
med = lambda k: statistics.median(rows[k]) if k in rows else float("nan")
print("| bytes | MPICH, before: circulant / MPICH | MPICH, after | Open MPI, before: MPI_ / PMPI_ | Open MPI, after |")
print("| ---: | ---: | ---: | ---: | ---: |")
for b in sizes:
    cells = []
    for mpi in ("mpich", "openmpi"):
        for build in ("old", "new"):
            cells.append("%.1f / %.1f" % (med((mpi, build, "mpi", b)), med((mpi, build, "pmpi", b))))
    print("| %d | %s |" % (b, " | ".join(cells)))
n = max(len(v) for v in rows.values())
print("\n(medians of %d repetitions, µs; the median over %d rounds)" % (
    int(next(iter(csv.DictReader(open(glob.glob(os.path.join(out, "*-r1.csv"))[0]))))["reps"]), n))
