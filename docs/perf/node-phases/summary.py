#!/usr/bin/env python3
"""Per layout, operation and size: the node phases on the shared segment (hier-segment-*)
against the fastest flat plan and the fastest node-aware plan (hier-*, lane-*) of the same
run, as the median (and range) of the per-round ratios of minima; below 1 the node phases are
faster. python3 summary.py OUT (the CSV files of run.sh)"""
import csv
import glob
import os
import re
import statistics
import sys
from collections import defaultdict

best = defaultdict(dict)  # (layout, op, bytes, round) -> {kind: (seconds, name)}
# op: the operation, with its distribution for an allgatherv ("allgatherv regular").
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*-r*.csv"))):
    layout, rnd = re.match(r"(.*)-r(\d+)\.csv", os.path.basename(path)).groups()
    with open(path) as f:
        for row in csv.DictReader(line for line in f if not line.startswith("#")):
            name, t = row["algorithm"], float(row["min_s"])
            kind = ("segment" if name.startswith("hier-segment-")
                    else "node-aware" if name.startswith(("hier-", "lane-")) else "flat")
            op = row["op"] if row["distribution"] in ("", "-") else f'{row["op"]} {row["distribution"]}'
            key = (layout, op, int(row["bytes"]), int(rnd))
            if kind not in best[key] or t < best[key][kind][0]:
                best[key][kind] = (t, name)

cases = sorted({k[:3] for k in best})
print("| layout | op | bytes | hier-segment, µs (min) | best flat, µs | best node-aware plan, µs | "
      "segment / flat, median (range) | segment / node-aware, median (range) |")
print("| --- | --- | ---: | ---: | --- | --- | --- | --- |")
for layout, op, size in cases:
    rounds = [best[k] for k in sorted(best) if k[:3] == (layout, op, size)]
    rounds = [r for r in rounds if {"segment", "flat", "node-aware"} <= r.keys()]
    if not rounds:
        continue

    def ratio(other):
        v = [r["segment"][0] / r[other][0] for r in rounds]
        return f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})"

    def fastest(kind):
        t, name = min(r[kind] for r in rounds)
        return f"{t * 1e6:.1f} ({name})"

    seg = min(r["segment"][0] for r in rounds) * 1e6
    print(f"| {layout.replace('blocks-', 'blocks:')} | {op} | {size} | {seg:.1f} | {fastest('flat')} | "
          f"{fastest('node-aware')} | {ratio('flat')} | {ratio('node-aware')} |")
