#!/usr/bin/env python3
"""Per p, operation and size: the shared segment (segment-*) and the automatic choice against
the fastest plan of the same run, as the median (and range) of the per-round ratios of minima;
below 1 the segment is faster. python3 summary.py OUT (the CSV files of run.sh)"""
import csv
import glob
import os
import re
import statistics
import sys
from collections import defaultdict

best = defaultdict(dict)  # (p, op, bytes, round) -> {kind: (seconds, name)}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "p*-r*.csv"))):
    p, rnd = map(int, re.match(r"p(\d+)-r(\d+)\.csv", os.path.basename(path)).groups())
    with open(path) as f:
        for row in csv.DictReader(line for line in f if not line.startswith("#")):
            name, t = row["algorithm"], float(row["min_s"])
            kind = ("auto" if name.startswith("auto:")
                    else "segment" if name.startswith("segment-") else "plan")
            op = row["op"] if row["distribution"] in ("", "-") else f'{row["op"]} {row["distribution"]}'
            key = (p, op, int(row["bytes"]), rnd)
            if kind not in best[key] or t < best[key][kind][0]:
                best[key][kind] = (t, name)

print("| p | op | bytes | segment, µs (min) | best plan, µs (min) | segment / best plan, median (range) | auto (took) / best plan, median |")
print("| ---: | --- | ---: | ---: | --- | --- | --- |")
for p, op, size in sorted({k[:3] for k in best}):
    rounds = [best[k] for k in sorted(best) if k[:3] == (p, op, size)]
    rounds = [r for r in rounds if {"segment", "plan"} <= r.keys()]
    if not rounds:
        continue
    v = [r["segment"][0] / r["plan"][0] for r in rounds]
    seg = min(r["segment"][0] for r in rounds) * 1e6
    t, name = min(r["plan"] for r in rounds)
    autos = [r["auto"][0] / r["plan"][0] for r in rounds if "auto" in r]
    took = sorted({r["auto"][1][5:] for r in rounds if "auto" in r})
    auto = f'{statistics.median(autos):.2f} ({", ".join(took)})' if autos else "-"
    print(f"| {p} | {op} | {size} | {seg:.1f} | {t * 1e6:.1f} ({name}) | "
          f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f}) | {auto} |")
