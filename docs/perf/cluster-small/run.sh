#!/usr/bin/env bash
# Below 100 kB on the emulated cluster (300 Mbit/s): circulant's automatic choice against every
# flat and node-aware algorithm, bcast and allgatherv (broadcast, spike, regular), 1 B - 100 kB,
# 2 nodes x 4 ranks and 4 x 2 by blocks, ROUNDS rounds (default 3), 20 repetitions.
# Brings a 4-node cluster up and down; needs a release build. LAYOUTS (default
# "blocks:4 blocks:2"), MIN_BYTES and MAX_BYTES (1 and 100000) narrow the run; CLUSTER_BURST
# sets the links' token bucket (ci/cluster; default 32kb).
#
#   docs/perf/cluster-small/run.sh OUT
#   python3 docs/perf/cluster-small/summary.py OUT
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:?usage: run.sh OUT}
bin=$root/target/release/circulant
mkdir -p "$out"
"$root/ci/cluster" up 4 300mbit
trap '"$root/ci/cluster" down' EXIT
A=auto,binomial-bcast,circulant-bcast,scatter-allgather-bcast,round-robin-bcast
A+=,hier-circulant-bcast,lane-circulant-bcast,recursive-doubling-allgather,bruck-allgather
A+=,circulant-allgather,circulant-allgatherv,ring-allgather,pipelined-ring-allgatherv
A+=,hier-circulant-allgatherv,lane-circulant-allgatherv
for r in $(seq 1 "${ROUNDS:-3}"); do
  for layout in ${LAYOUTS:-blocks:4 blocks:2}; do
    CLUSTER_LAYOUT=$layout CIRCULANT_PROVIDER='tcp;ofi_rxm' "$bin" run -n 8 --timeout 900 -- \
      "$root/ci/cluster" rank "$bin" bench --op bcast,allgatherv --dist broadcast,spike,regular \
      --min-bytes "${MIN_BYTES:-1}" --max-bytes "${MAX_BYTES:-100000}" --reps 20 --algorithms "$A" --no-progress \
      --csv "$out/${layout/:/-}-r$r.csv" > "$out/${layout/:/-}-r$r.txt" 2>&1
    echo "$layout round $r: exit $?"
  done
done
