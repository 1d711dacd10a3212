"""Per round: the automatic choice against the node bound (the bytes that must cross a node's
link at 300 Mbit/s: m for bcast and the broadcast distribution, the other nodes' share for the
others, 4 nodes x 2 ranks by blocks), and the fastest broadcast run as the allgatherv
against the fastest allgatherv plan of the same round.

    python3 summary.py DIR"""
import csv, glob, sys
from collections import defaultdict

RATE = 300e6 / 8  # bytes per second
rows = defaultdict(dict)  # (round, op, dist, bytes) -> algorithm -> min seconds
totals = {}
for path in sorted(glob.glob(sys.argv[1] + "/round*.csv")):
    rnd = path.split("round")[-1].split(".")[0]
    with open(path) as f:
        for r in csv.reader(l for l in f if not l.startswith("#")):
            if r[0] != "circulant":
                continue
            key = (int(rnd), r[1], r[3], int(r[5]))
            rows[key][r[2]] = float(r[8])
            totals[key] = int(r[6])


def bound(op, dist, base, total):
    if op == "bcast" or dist == "broadcast":
        return base / RATE
    if dist == "regular":  # 8 equal blocks, a node holds 2
        return total * 6 / 8 / RATE
    return None  # spike: printed without a bound


print("| case | bytes | auto (took) / node bound, rounds 1-5 | broadcast as allgatherv / fastest allgatherv plan |")
print("| --- | ---: | --- | --- |")
cases = sorted({k[1:] for k in rows})
for op, dist, base in cases:
    auto, versus = [], []
    for rnd in sorted({k[0] for k in rows}):
        algs = rows.get((rnd, op, dist, base), {})
        if not algs:
            continue
        name, t = next((a, t) for a, t in algs.items() if a.startswith("auto:"))
        b = bound(op, dist, base, totals[(rnd, op, dist, base)])
        auto.append(f"{t / b:.2f}" if b else f"{t * 1e3:.1f} ms")
        if op == "allgatherv" and dist == "broadcast":
            bc = min(t for a, t in algs.items() if a.endswith("-bcast"))
            ag = min(t for a, t in algs.items() if a.endswith("-allgatherv"))
            versus.append(f"{bc / ag:.2f}")
    took = {a for (r, o, d, s), algs in rows.items() if (o, d, s) == (op, dist, base) for a in algs if a.startswith("auto:")}
    print(f"| {op} {dist} | {base} | {', '.join(auto)} ({', '.join(sorted(x[5:] for x in took))}) | {', '.join(versus) or '-'} |")
