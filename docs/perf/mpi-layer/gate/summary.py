"""Per operation, distribution and size: the layer's MPI_ / PMPI_ ratio of medians in each
run of each build (docs/perf/mpi-layer/gate/run.sh), as median (range) over the rounds, and
the control's (the MPI against itself, without the layer).

    python3 docs/perf/mpi-layer/gate/summary.py OUT [MPI]     (MPI: openmpi, or mpich)
"""
import csv
import glob
import os
import re
import statistics
import sys
from collections import defaultdict

out = sys.argv[1]
mpi = sys.argv[2] if len(sys.argv) > 2 else "openmpi"
# (op, dist, bytes) -> {(build, series): [ratio per round]}
ratios = defaultdict(lambda: defaultdict(list))
for path in sorted(glob.glob(os.path.join(out, "*-r*", f"{mpi}-*-r1.csv"))):
    build = re.match(r"(old|new)-r\d+", os.path.basename(os.path.dirname(path))).group(1)
    series = re.match(rf"{mpi}-(control|layer)-r1\.csv", os.path.basename(path)).group(1)
    medians = defaultdict(dict)
    for row in csv.reader(open(path)):
        if row[0].startswith("#") or len(row) < 10:
            continue
        medians[(row[1], row[3], int(row[5]))][row[2].split("-")[0]] = float(row[9])
    for case, m in medians.items():
        if "mpi" in m and "pmpi" in m:
            ratios[case][(build, series)].append(m["mpi"] / m["pmpi"])


def show(values):
    if not values:
        return "–"
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


print("| op | distribution | bytes | old: layer | new: layer | old: control | new: control |")
print("| --- | --- | ---: | --- | --- | --- | --- |")
for case in sorted(ratios):
    r = ratios[case]
    print(f"| {case[0]} | {case[1]} | {case[2]} | {show(r[('old', 'layer')])} | "
          f"{show(r[('new', 'layer')])} | {show(r[('old', 'control')])} | "
          f"{show(r[('new', 'control')])} |")
