#!/usr/bin/env bash
# 4 nodes x 2 ranks by blocks at 300 Mbit/s: bcast and allgatherv (broadcast, regular, spike) of
# 1 and 2 MB per rank, the automatic choice beside the node-aware plans, ROUNDS rounds (5).
# Brings a 4-node cluster up and down; needs a release build.
#
#   OUT=dir docs/perf/cluster-auto/one-source-4x2/run.sh
#   python3 docs/perf/cluster-auto/one-source-4x2/summary.py dir
set -euo pipefail
root=$(cd "$(dirname "$0")/../../../.." && pwd)
out=${OUT:?set OUT}
bin=$root/target/release/circulant
mkdir -p "$out"
"$root/ci/cluster" up 4 300mbit
trap '"$root/ci/cluster" down' EXIT
for r in $(seq 1 "${ROUNDS:-5}"); do
  CLUSTER_LAYOUT=blocks:2 "$bin" run -n 8 --timeout 900 -- "$root/ci/cluster" rank "$bin" bench \
    --op bcast,allgatherv --dist broadcast,regular,spike --min-bytes 1000000 --max-bytes 2000000 \
    --algorithms auto,hier-circulant-bcast,lane-circulant-bcast,hier-circulant-allgatherv,lane-circulant-allgatherv \
    --reps 10 --no-progress --csv "$out/round$r.csv" > "$out/round$r.txt" 2>&1
  echo "round $r: $?"
done
