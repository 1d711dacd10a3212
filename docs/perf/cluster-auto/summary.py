#!/usr/bin/env python3
"""Per layout, case and size: circulant's automatic choice against the node bound, circulant's
fastest flat and node-aware algorithms, and Open MPI as it comes and with han (minimum over
the repetitions; the emulated cluster's links at 300 Mbit/s).

    summary.py DIR K [DIR K ...]   # DIR from benches/compare, K ranks per node (blocks:K)
"""
import csv
import sys

LINK_S_PER_BYTE = 8 / 300e6
P = 8


def counts(dist, c):
    if dist in ("-", "regular"):
        return [c] * P
    if dist == "broadcast":
        return [c] + [0] * (P - 1)
    if dist == "spike":
        return [c // 2] + [c // (2 * (P - 1))] * (P - 1)
    raise ValueError(dist)


def node_bound(op, dist, c, k):
    if op == "bcast":
        return c * LINK_S_PER_BYTE
    n = counts(dist, c)
    total = sum(n)
    into = max(total - sum(n[v * k:(v + 1) * k]) for v in range(P // k))
    return into * LINK_S_PER_BYTE


def rows(path):
    with open(path) as f:
        lines = [l for l in f if not l.startswith("#")]
    return list(csv.DictReader(lines))


def node_aware(name):
    return name.startswith(("hier-", "lane-"))


def main(args):
    print(f"{'layout':7} {'case':22} {'bytes':>8} {'auto (ms)':>30} {'bound':>7} "
          f"{'auto/bnd':>8} {'best flat':>30} {'best node-aware':>32} {'ompi':>7} {'han':>7} "
          f"{'auto/best':>9} {'auto/ompi':>9} {'auto/han':>8}")
    for d, k in zip(args[0::2], args[1::2]):
        k = int(k)
        circ = rows(f"{d}/circulant.csv")
        peers = {}
        for series in ("openmpi", "openmpi-han"):
            for r in rows(f"{d}/{series}.csv"):
                if r.get("library") != "openmpi":
                    continue
                peers[(series, r["op"], r["distribution"], int(r["bytes"]))] = float(r["min_s"])
        cases = sorted({(r["op"], r["distribution"], int(r["bytes"])) for r in circ})
        for op, dist, c in cases:
            mine = [r for r in circ if (r["op"], r["distribution"], int(r["bytes"])) == (op, dist, c)]
            auto = [r for r in mine if r["algorithm"].startswith("auto:")]
            others = [r for r in mine if not r["algorithm"].startswith("auto:")]
            best = lambda rs: min(rs, key=lambda r: float(r["min_s"])) if rs else None
            flat = best([r for r in others if not node_aware(r["algorithm"])])
            aware = best([r for r in others if node_aware(r["algorithm"])])
            a = auto[0] if auto else None
            bound = node_bound(op, dist, c, k)
            ompi = peers.get(("openmpi", op, dist, c))
            han = peers.get(("openmpi-han", op, dist, c))
            fmt = lambda r: f"{float(r['min_s']) * 1e3:.2f} {r['algorithm'].removeprefix('auto:')}" if r else "-"
            t = float(a["min_s"]) if a else float("nan")
            fastest = min(float(r["min_s"]) for r in others)
            ratio = lambda x: f"{t / x:.2f}" if x else "-"
            print(f"{P // k}x{k:<5} {op + ' ' + dist:22} {c:>8} {fmt(a):>30} {bound * 1e3:>7.2f} "
                  f"{t / bound:>8.2f} {fmt(flat):>30} {fmt(aware):>32} "
                  f"{(ompi or 0) * 1e3:>7.2f} {(han or 0) * 1e3:>7.2f} {t / fastest:>9.2f} "
                  f"{ratio(ompi):>9} {ratio(han):>8}")


if __name__ == "__main__":
    main(sys.argv[1:])
