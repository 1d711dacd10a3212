#!/usr/bin/env bash
# Node fabric on (shm between the ranks of a node) against off (tcp;ofi_rxm for every pair),
# alternating within each round, on the emulated cluster at 300 Mbit/s.
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:-target/perf/node-fabric}
B=target/release/circulant
ROUNDS=${ROUNDS:-3}
for layout in blocks:4 blocks:2; do
  dir=$OUT/${layout/:/-}
  mkdir -p $dir
  for r in $(seq 1 $ROUNDS); do
    for mode in on off; do
      if [[ $mode == off ]]; then export CIRCULANT_NODE_PROVIDER=off; else unset CIRCULANT_NODE_PROVIDER; fi
      CLUSTER_LAYOUT=$layout $B run -n 8 --timeout 900 -- ci/cluster rank $B bench \
        --op bcast,allgatherv --dist regular,broadcast \
        --algorithms circulant-bcast,binomial-bcast,hier-circulant-bcast,lane-circulant-bcast,circulant-allgatherv,pipelined-ring-allgatherv,hier-circulant-allgatherv,lane-circulant-allgatherv \
        --min-bytes 1000 --max-bytes 1000000 --reps 5 --no-progress \
        --csv $dir/$mode-r$r.csv > $dir/$mode-r$r.txt 2>&1
      echo "$layout $mode round $r: exit $?"
    done
  done
done
unset CIRCULANT_NODE_PROVIDER
