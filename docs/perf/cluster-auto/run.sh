#!/usr/bin/env bash
# The cluster targets on the emulated cluster at 300 Mbit/s: 2 x 4 and 4 x 2 by blocks, bcast
# and allgatherv (broadcast, spike, regular), 100 kB - 2 MB, circulant's automatic choice and
# its flat and node-aware algorithms, Open MPI as it comes and with han; one run per layout.
# Then: python3 docs/perf/cluster-auto/summary.py OUT/blocks4 4 OUT/blocks2 2
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-target/perf/cluster-auto}
ci/cluster up 4 300mbit
trap 'ci/cluster down' EXIT
A=auto,circulant-bcast,binomial-bcast,scatter-allgather-bcast,round-robin-bcast
A+=,hier-circulant-bcast,lane-circulant-bcast,circulant-allgatherv,ring-allgather
A+=,pipelined-ring-allgatherv,hier-circulant-allgatherv,lane-circulant-allgatherv
for k in 4 2; do
  LAYOUT=blocks:$k MIN_BYTES=100000 OPS=bcast,allgatherv DISTS=broadcast,spike,regular \
    ALGORITHMS=$A PEERS="openmpi openmpi-han" benches/compare cluster 8 "$out/blocks$k" 2000000 5
done
