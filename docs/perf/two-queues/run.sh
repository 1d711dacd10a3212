#!/usr/bin/env bash
# Broadcasts on the emulated cluster, 2 nodes x 4 ranks by blocks at 300 Mbit/s, 100 kB - 2 MB:
# two builds of circulant (OLD and NEW, release binaries) and Open MPI with han, in turn, for
# ROUNDS rounds (default 3), 9 repetitions each. Then: python3 docs/perf/two-queues/summary.py OUT
#   OLD=/path/to/old/circulant NEW=target/release/circulant docs/perf/two-queues/run.sh OUT
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${1:?usage: OLD=BIN NEW=BIN run.sh OUT}
mkdir -p "$out"
export CLUSTER_LAYOUT=blocks:4 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ci/cluster up 2 300mbit
trap 'ci/cluster down' EXIT
algs=binomial-bcast,hier-circulant-bcast,lane-circulant-bcast
sizes=(--min-bytes 100000 --max-bytes 2000000 --reps 9)
for ((round = 1; round <= ${ROUNDS:-3}; round++)); do
  for build in old new; do
    bin=$OLD; [[ $build == new ]] && bin=$NEW
    CIRCULANT_PROVIDER='tcp;ofi_rxm' timeout 900 "$bin" run -n 8 --timeout 800 -- ci/cluster rank \
      "$bin" bench --op bcast "${sizes[@]}" --algorithms "$algs" \
      --csv "$out/$build-$round.csv" > "$out/$build-$round.txt" 2>/dev/null
  done
  timeout 600 ci/cluster openmpi 8 --mca btl tcp,self --mca coll_han_priority 100 \
    target/peers/mpi_coll_openmpi --op bcast "${sizes[@]}" 2>/dev/null | grep -E '^(library,|openmpi,)' \
    > "$out/han-$round.csv"
done
