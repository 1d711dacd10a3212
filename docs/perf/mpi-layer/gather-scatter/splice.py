#!/usr/bin/env python3
"""Puts the lines of a partial calibration (circulant-mpi-calibrate --collectives ...) in place
of the same collectives' lines of a whole thresholds file: each `NAME ranges` line (`NAME@P`
for --sized files) with the `# size:ratio` comment before it. Usage: splice.py PARTIAL WHOLE"""
import sys


def entries(lines):
    """{name: (comment, line)} of a thresholds file's collective lines."""
    out = {}
    for i, line in enumerate(lines):
        if line.startswith("#") or not line.strip():
            continue
        name = line.split()[0]
        comment = lines[i - 1] if i > 0 and lines[i - 1].startswith("# ") and ":" in lines[i - 1] else None
        out[name] = (comment, line)
    return out


partial_path, whole_path = sys.argv[1], sys.argv[2]
new = entries(open(partial_path).read().splitlines())
lines = open(whole_path).read().splitlines()
replaced = set()
out = []
for i, line in enumerate(lines):
    name = line.split()[0] if line.strip() and not line.startswith("#") else None
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    nxt_name = nxt.split()[0] if nxt.strip() and not nxt.startswith("#") else None
    if line.startswith("# ") and nxt_name in new:
        continue  # the comment of a replaced line
    if name in new:
        comment, fresh = new[name]
        if comment:
            out.append(comment)
        out.append(fresh)
        replaced.add(name)
        continue
    out.append(line)
missing = set(new) - replaced
if missing:
    sys.exit(f"splice.py: {whole_path} has no line of {sorted(missing)}")
open(whole_path, "w").write("\n".join(out) + "\n")
print(f"{whole_path}: replaced {', '.join(sorted(replaced))}")
