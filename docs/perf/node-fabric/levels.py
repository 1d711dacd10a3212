#!/usr/bin/env python3
"""Per-round ratios of the levels `circulant bench` measured on 2 x 4 and 4 x 2 to the two-rank
probes of the same round (the output of levels.sh): python3 levels.py levels-pair.txt"""
import re
import statistics
import sys


def seconds(value, unit):
    return float(value) * {"µs": 1e-6, "ns": 1e-9}[unit]


rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) r(\d+): ", line)
    if not m:
        continue
    case, r = m.group(1), int(m.group(2))
    if "inside a node" in line:
        a, au, b = re.search(r"inside a node α = ([\d.]+) (µs|ns), β = ([\d.]+)", line).groups()
        rows[(case, "inside", r)] = (seconds(a, au), float(b))
    else:
        a, au, b = re.search(r"α = ([\d.]+) (µs|ns), β = ([\d.]+)", line).groups()
        key = (case, "across", r) if case.startswith("blocks") else ("probe", case, r)
        rows[key] = (seconds(a, au), float(b))

rounds = sorted({k[2] for k in rows})
print("| layout | level | α per-round ratios | median | β median |")
print("| --- | --- | --- | ---: | ---: |")
for layout in ("blocks:4", "blocks:2"):
    for level in ("inside", "across"):
        alpha = [rows[(layout, level, r)][0] / rows[("probe", level, r)][0] for r in rounds]
        beta = [rows[(layout, level, r)][1] / rows[("probe", level, r)][1] for r in rounds]
        print(f"| {layout} | {level} | {' '.join(f'{x:.2f}' for x in alpha)} | "
              f"{statistics.median(alpha):.2f} | {statistics.median(beta):.2f} |")
