import csv, glob, os, statistics, sys
base = sys.argv[1]
for layout in sorted(os.listdir(base)):
    d = os.path.join(base, layout)
    if not os.path.isdir(d): continue
    rows = {}  # (mode, round) -> {(op,dist,bytes,alg): min}
    for f in glob.glob(os.path.join(d, '*-r*.csv')):
        mode, r = os.path.basename(f)[:-4].split('-r')
        t = {}
        for row in csv.DictReader(l for l in open(f) if not l.startswith('#')):
            t[(row['op'], row['distribution'], int(row['bytes']), row['algorithm'])] = float(row['min_s'])
        rows[(mode, int(r))] = t
    rounds = sorted({r for (_, r) in rows})
    keys = sorted({k for t in rows.values() for k in t})
    cases = sorted({k[:3] for k in keys})
    print(f"## {layout}: rounds {rounds}")
    print("op dist bytes | best on (alg) | best off (alg) | on/off per round median (min-max) | best node-aware on / best flat on (median)")
    for case in cases:
        algs = sorted({k[3] for k in keys if k[:3] == case})
        ratios, na_flat = [], []
        bon = boff = None
        for r in rounds:
            on = {a: rows.get(('on', r), {}).get(case + (a,)) for a in algs}
            off = {a: rows.get(('off', r), {}).get(case + (a,)) for a in algs}
            on = {a: v for a, v in on.items() if v}
            off = {a: v for a, v in off.items() if v}
            if not on or not off: continue
            a_on = min(on, key=on.get); a_off = min(off, key=off.get)
            ratios.append(on[a_on] / off[a_off])
            na = [v for a, v in on.items() if a.startswith(('hier-', 'lane-'))]
            fl = [v for a, v in on.items() if not a.startswith(('hier-', 'lane-'))]
            if na and fl: na_flat.append(min(na) / min(fl))
            if bon is None or on[a_on] < bon[0]: bon = (on[a_on], a_on)
            if boff is None or off[a_off] < boff[0]: boff = (off[a_off], a_off)
        fmt = lambda x: f"{x[0]*1e3:.3f} ms ({x[1]})"
        print(f"{case[0]} {case[1]} {case[2]} | {fmt(bon)} | {fmt(boff)} | {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | {statistics.median(na_flat):.2f}" if na_flat else "")
