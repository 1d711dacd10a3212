#!/usr/bin/env bash
# Large calls on the node phases: the shared segment's composition (hier-segment-bcast,
# -allgatherv, forced past CIRCULANT_SEGMENT_LIMIT: the segment moves them in chunks, one phase
# after the other) against the plans whose node phases are writes (hierarchical, multi-lane,
# flat) and the automatic choice, on the emulated cluster (300 Mbit/s), 2 nodes x 4 ranks and
# 4 x 2 by blocks; bcast at 1 and 2 MB, allgatherv (regular, broadcast, spike) at 1 MB a rank;
# ROUNDS rounds (default 3), 5 repetitions. Brings a 4-node cluster up and down; needs a
# release build.
#
#   docs/perf/large-node-phases/run.sh OUT
#   python3 docs/perf/large-node-phases/summary.py OUT
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:?usage: run.sh OUT}
bin=$root/target/release/circulant
mkdir -p "$out"
"$root/ci/cluster" up 4 300mbit
trap '"$root/ci/cluster" down' EXIT
B=auto,hier-segment-bcast,hier-circulant-bcast,lane-circulant-bcast,binomial-bcast
B+=,circulant-bcast,round-robin-bcast
G=auto,hier-segment-allgatherv,hier-circulant-allgatherv,lane-circulant-allgatherv
G+=,ring-allgather,pipelined-ring-allgatherv,circulant-allgatherv
bench() {
  local layout=$1 name=$2
  shift 2
  CLUSTER_LAYOUT=$layout CIRCULANT_PROVIDER='tcp;ofi_rxm' "$bin" run -n 8 --timeout 900 -- \
    "$root/ci/cluster" rank "$bin" bench "$@" --reps 5 --no-progress \
    --csv "$out/$name.csv" > "$out/$name.txt" 2>&1
  echo "$name: exit $?"
}
for r in $(seq 1 "${ROUNDS:-3}"); do
  for k in 4 2; do
    bench "blocks:$k" "bcast-blocks$k-r$r" --op bcast --algorithms "$B" \
      --min-bytes 1000000 --max-bytes 2000000
    bench "blocks:$k" "allgatherv-blocks$k-r$r" --op allgatherv --dist regular,broadcast,spike \
      --algorithms "$G" --min-bytes 1000000 --max-bytes 1000000
  done
done
