#!/usr/bin/env python3
"""Per layout, case and size: the node phases on the segment (hier-segment-*) against the
fastest plan of the same run (its node phases writes: hier-*, lane-*, or flat), and the
automatic choice against the same, as the median and range of the per-round ratios of minima
(above 1: slower than that plan), and the automatic choice's time against the node bound (the
bytes that must cross one node's 300 Mbit/s link: m for a bcast, the whole for the broadcast
distribution, the other nodes' share for the regular one; "–" for the spike).
python3 summary.py OUT (the CSV files of run.sh)"""
import csv
import glob
import os
import re
import statistics
import sys
from collections import defaultdict

SEG, PLAN = "segment", "plan"
LINK_S_PER_BYTE = 8 / 300e6
bound = {}  # (layout, case, bytes) -> the node bound in seconds
runs = defaultdict(dict)  # (layout, case, bytes, round) -> {"segment"|"auto"|"plan": (s, name)}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*-r*.csv"))):
    _, layout, rnd = re.match(r"(\w+)-blocks(\d)-r(\d+)\.csv", os.path.basename(path)).groups()
    with open(path) as f:
        for row in csv.DictReader(line for line in f if not line.startswith("#")):
            name, t = row["algorithm"], float(row["min_s"])
            if name.startswith("auto:"):
                kind, name = "auto", name[5:]
            elif name.startswith("hier-segment-"):
                kind = "segment"
            else:
                kind = "plan"
            case = row["op"] if row["distribution"] in ("", "-") else f'{row["op"]} {row["distribution"]}'
            key = (f"{8 // int(layout)} × {layout}", case, int(row["bytes"]), int(rnd))
            total, share = int(row["total_bytes"]), int(layout) / 8
            into_node = {"bcast": total, "allgatherv broadcast": total,
                         "allgatherv regular": total * (1 - share)}.get(case)
            if into_node is not None:
                bound[key[:3]] = into_node * LINK_S_PER_BYTE
            if kind not in runs[key] or t < runs[key][kind][0]:
                runs[key][kind] = (t, name)

print("| layout | case | bytes | node phases on the segment, ms | fastest plan, ms (which) "
      "| segment / plan, median (range) | auto / plan, median (took) | auto / node bound, median |")
print("| --- | --- | ---: | --- | --- | --- | --- | --- |")
for case in sorted({k[:3] for k in runs}):
    rounds = [runs[k] for k in sorted(runs) if k[:3] == case and len(runs[k]) == 3]
    if not rounds:
        continue
    seg = [r["segment"][0] / r["plan"][0] for r in rounds]
    auto = [r["auto"][0] / r["plan"][0] for r in rounds]
    plans = sorted({r["plan"][1] for r in rounds})
    took = sorted({r["auto"][1] for r in rounds})
    to_bound = "–"
    if case in bound:
        to_bound = f'{statistics.median(r["auto"][0] for r in rounds) / bound[case]:.2f}'
    print(f"| {case[0]} | {case[1]} | {case[2]} | "
          f"{' '.join(f'{r[SEG][0] * 1e3:.1f}' for r in rounds)} | "
          f"{' '.join(f'{r[PLAN][0] * 1e3:.1f}' for r in rounds)} ({', '.join(plans)}) | "
          f"{statistics.median(seg):.2f} ({min(seg):.2f}–{max(seg):.2f}) | "
          f"{statistics.median(auto):.2f} ({', '.join(took)}) | {to_bound} |")
