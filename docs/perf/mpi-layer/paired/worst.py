"""Per case of two paired runs of benches/mpi-layer (PAIRED=1), the range of the layer's
medians MPI_ / PMPI_ over the sizes and the worst of them, and the control's range: each size
from the first run where it has it (many repetitions, small sizes), else from the second.

    python3 worst.py small-p8-sized/summary.md p8-sized/summary.md
"""
import re, sys
# rows of a paired summary.md: case -> [(bytes, layer_med, layer_range, control_med, control_range)]
def read(path):
    cases, case = {}, None
    for line in open(path):
        m = re.match(r"\*\*(\S+) (\S+) (\S+)\*\*", line)
        if m:
            case = (m.group(1), m.group(2), m.group(3)); cases[case] = []; continue
        m = re.match(r"\| (\d+) \| [^|]+ \| ([\d.]+)(?: \(([\d.]+)–([\d.]+)\))? \| [^|]+ \| ([\d.]+)(?: \(([\d.]+)–([\d.]+)\))? \|", line)
        if m and case:
            g = m.groups()
            cases[case].append((int(g[0]), float(g[1]), float(g[2] or g[1]), float(g[3] or g[1]), float(g[4]), float(g[5] or g[4]), float(g[6] or g[4])))
    return cases
small, large = read(sys.argv[1]), read(sys.argv[2])
for case in sorted(large):
    have = {r[0] for r in small.get(case, [])}
    rows = sorted(small.get(case, []) + [r for r in large[case] if r[0] not in have])
    lay = [r[1] for r in rows]; ctl = [r[4] for r in rows]
    worst = max(rows, key=lambda r: r[1])
    print(f"{case[0]} {case[1]} {case[2]}: layer medians {min(lay):.2f}-{max(lay):.2f} (worst {worst[1]:.2f} at {worst[0]} B, rounds {worst[2]:.2f}-{worst[3]:.2f}); control medians {min(ctl):.2f}-{max(ctl):.2f}; sizes {rows[0][0]}-{rows[-1][0]}")
