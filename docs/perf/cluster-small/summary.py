#!/usr/bin/env python3
"""Per layout, operation and size: the automatic choice (auto:NAME rows) against the fastest
flat algorithm of the same run, as the median and range of the per-round ratios of minima
(below 1 the automatic choice is faster), and the algorithms it took.
python3 summary.py OUT (the CSV files of run.sh)"""
import csv
import glob
import os
import re
import statistics
import sys
from collections import defaultdict

NODE_AWARE = ("hier-", "lane-")
AUTO, FLAT = "auto", "flat"
runs = defaultdict(dict)  # (layout, op, bytes, round) -> {"auto": (s, name), "flat": (s, name)}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*-r*.csv"))):
    layout, rnd = re.match(r"(.*)-r(\d+)\.csv", os.path.basename(path)).groups()
    with open(path) as f:
        for row in csv.DictReader(line for line in f if not line.startswith("#")):
            name, t = row["algorithm"], float(row["min_s"])
            if name.startswith("auto:"):
                kind, name = "auto", name[5:]
            elif name.startswith(NODE_AWARE):
                kind = "node-aware"
            else:
                kind = "flat"
            op = row["op"] if row["distribution"] in ("", "-") else f'{row["op"]} {row["distribution"]}'
            key = (layout, op, int(row["bytes"]), int(rnd))
            if kind not in runs[key] or t < runs[key][kind][0]:
                runs[key][kind] = (t, name)

print("| layout | op | bytes | auto, µs (took) | best flat, µs | auto / best flat, median (range) |")
print("| --- | --- | ---: | --- | --- | --- |")
worst = []
for case in sorted({k[:3] for k in runs}, key=lambda c: (c[0], c[1], c[2])):
    rounds = [runs[k] for k in sorted(runs) if k[:3] == case and "auto" in runs[k] and "flat" in runs[k]]
    if not rounds:
        continue
    ratios = [r["auto"][0] / r["flat"][0] for r in rounds]
    took = sorted({r["auto"][1] for r in rounds})
    flat = sorted({r["flat"][1] for r in rounds})
    med = statistics.median(ratios)
    worst.append((med, case))
    print(f"| {case[0]} | {case[1]} | {case[2]} | "
          f"{' '.join(f'{r[AUTO][0] * 1e6:.0f}' for r in rounds)} ({', '.join(took)}) | "
          f"{' '.join(f'{r[FLAT][0] * 1e6:.0f}' for r in rounds)} ({', '.join(flat)}) | "
          f"{med:.2f} ({min(ratios):.2f}–{max(ratios):.2f}) |")
worst.sort(reverse=True)
print()
print("cases with the median above 1:", sum(1 for m, _ in worst if m > 1), "of", len(worst))
for m, case in worst[:8]:
    print(f"  {m:.2f} {case}")
