"""Per case, the median over the rounds of each series' minimum, and the medians of the
per-round ratios new-blocking / old-blocking and new-nonblocking / plans-nonblocking.
Usage: python3 docs/perf/phased/summary.py OUT"""
import csv
import glob
import os
import re
import statistics
import sys
from collections import defaultdict

out = sys.argv[1]
times = defaultdict(dict)  # (op, bytes) -> {(series, round): (seconds, algorithm)}
for path in glob.glob(os.path.join(out, "*-*.csv")):
    m = re.match(r"(.*)-(\d+)\.csv", os.path.basename(path))
    if not m:
        continue
    series, rnd = m.groups()
    rows = [r for r in csv.reader(open(path)) if r and not r[0].startswith("#")]
    for row in rows[1:]:
        times[(row[1], int(row[5]))][(series, rnd)] = (float(row[8]), row[2])


def ratio(case, a, b):
    t = times[case]
    rounds = sorted({r for (s, r) in t if s == a} & {r for (s, r) in t if s == b})
    values = [t[(a, r)][0] / t[(b, r)][0] for r in rounds]
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def median_us(case, series):
    values = [v[0] for (s, _), v in times[case].items() if s == series]
    took = sorted({v[1] for (s, _), v in times[case].items() if s == series})
    if not values:
        return "-"
    return f"{statistics.median(values) * 1e6:.0f} ({', '.join(took)})"


series = ["old-blocking", "new-blocking", "new-nonblocking", "plans-nonblocking"]
print("| op | bytes | " + " | ".join(f"{s}, µs" for s in series)
      + " | new / old blocking | nonblocking: node phases / plans |")
print("| --- | ---: |" + " --- |" * len(series) + " --- | --- |")
for case in sorted(times):
    cells = " | ".join(median_us(case, s) for s in series)
    print(f"| {case[0]} | {case[1]} | {cells} | {ratio(case, 'new-blocking', 'old-blocking')} "
          f"| {ratio(case, 'new-nonblocking', 'plans-nonblocking')} |")
