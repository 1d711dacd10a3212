import csv, sys, glob, re, collections
LINK = 8/300e6; P = 8
def counts(dist, c):
    if dist in ("-", "regular"): return [c]*P
    if dist == "broadcast": return [c]+[0]*(P-1)
    if dist == "spike": return [c//2]+[c//(2*(P-1))]*(P-1)
def bound(op, dist, c, k):
    if op == "bcast": return c*LINK
    n = counts(dist, c); t = sum(n)
    return max(t - sum(n[v*k:(v+1)*k]) for v in range(P//k))*LINK
res = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + "/blocks*-round*.csv")):
    k = int(re.search(r"blocks(\d)", f).group(1))
    rows = list(csv.DictReader(l for l in open(f) if not l.startswith("#")))
    cases = {(r["op"], r["distribution"], int(r["bytes"])) for r in rows}
    for op, dist, c in sorted(cases):
        mine = [r for r in rows if (r["op"], r["distribution"], int(r["bytes"])) == (op, dist, c)]
        auto = [r for r in mine if r["algorithm"].startswith("auto:")][0]
        best = min((r for r in mine if not r["algorithm"].startswith("auto:")), key=lambda r: float(r["min_s"]))
        a = float(auto["min_s"])
        res[(k, op, dist, c)].append((a/bound(op, dist, c, k), a/float(best["min_s"]), auto["algorithm"][5:], best["algorithm"], a*1e3))
print("layout case bytes | auto/node bound per round | auto/fastest per round | took")
for key in sorted(res):
    k, op, dist, c = key
    v = res[key]
    print(f"{8//k}x{k} {op} {dist} {c} | " + ", ".join(f"{x[0]:.2f}" for x in v) + " | " + ", ".join(f"{x[1]:.2f}" for x in v) + " | " + ", ".join(f"{x[2]} {x[4]:.1f}ms" for x in v))
