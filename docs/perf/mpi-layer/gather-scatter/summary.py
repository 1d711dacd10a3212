#!/usr/bin/env python3
"""Tables of compare.sh's runs: per MPI, collective and size, circulant's median time (the
largest over rounds and distributions) as plans, through the segment and read in place, and
the worst ratio to the MPI's own in the same run. Usage: summary.py OUT"""
import collections
import sys

out = sys.argv[1]
ways = ["plans", "two-copies", "single-copy"]
for mpi in ["mpich", "openmpi"]:
    times = collections.defaultdict(dict)
    ratios = collections.defaultdict(dict)
    for way in ways:
        for line in open(f"{out}/{mpi}-{way}.log"):
            f = line.split()
            if len(f) < 4 or f[0] == "collective":
                continue
            key = (f[0], int(f[1]))
            ours, theirs = float(f[2]), float(f[3])
            times[key][way] = max(times[key].get(way, 0), ours)
            ratios[key][way] = max(ratios[key].get(way, 0), ours / theirs)
    print(f"\n{mpi}: circulant's time, µs (worst ratio to {mpi}'s own in the same run)\n")
    print("| collective | bytes | " + " | ".join(ways) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in ways) + " |")
    for key in sorted(times, key=lambda k: (k[0], k[1])):
        cells = [f"{times[key][w] * 1e6:.0f} ({ratios[key][w]:.2f})" for w in ways]
        print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
