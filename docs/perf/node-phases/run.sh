#!/usr/bin/env bash
# The node phases on the shared segment (hier-segment-*) against every plan, small bcast and
# allreduce on the emulated cluster: 2 nodes x 4 ranks and 4 x 2, by blocks, ROUNDS rounds.
# Needs `ci/cluster up 4 300mbit` and a release build. OPS, DIST, MAX_BYTES and TAG choose other
# operations (e.g. OPS=allgatherv DIST=regular,broadcast,spike MAX_BYTES=1000 TAG=ag-: files
# ag-blocks-4-r1.csv, ...).
#
#   docs/perf/node-phases/run.sh OUT
#   python3 docs/perf/node-phases/summary.py OUT
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:?usage: run.sh OUT}
bin=$root/target/release/circulant
mkdir -p "$out"
for r in $(seq 1 "${ROUNDS:-3}"); do
  for layout in blocks:4 blocks:2; do
    CLUSTER_LAYOUT=$layout "$bin" run -n 8 --timeout 900 -- "$root/ci/cluster" rank "$bin" bench \
      --op "${OPS:-bcast,allreduce}" ${DIST:+--dist "$DIST"} --min-bytes 8 \
      --max-bytes "${MAX_BYTES:-8000}" --reps 50 --no-progress \
      --csv "$out/${TAG:-}${layout/:/-}-r$r.csv" > "$out/${TAG:-}${layout/:/-}-r$r.txt" 2>&1
    echo "$layout round $r: exit $?"
  done
done
