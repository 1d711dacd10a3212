#!/usr/bin/env bash
# The levels `circulant bench` measures on 2 x 4 and 4 x 2 against two-rank probes of each
# level, alternating within each round, on the emulated cluster (`ci/cluster up 4 300mbit`).
# Prints one line per model: "<case> r<round>: <bench's line>".
set -u
cd "$(dirname "$0")/../../.."
B=target/release/circulant
ROUNDS=${ROUNDS:-5}
bench() { $B run -n "$1" --timeout 300 -- ci/cluster rank $B bench --op bcast --max-bytes 1 --reps 1 --no-progress 2>&1; }
for r in $(seq 1 "$ROUNDS"); do
  CIRCULANT_PROVIDER=shm CLUSTER_LAYOUT=blocks:2 bench 2 | grep -m1 'α =' | sed "s/^/inside r$r: /"
  CLUSTER_LAYOUT=blocks:1 bench 2 | grep -m1 'α =' | sed "s/^/across r$r: /"
  for layout in blocks:4 blocks:2; do
    CLUSTER_LAYOUT=$layout bench 8 | grep 'α =' | sed "s/^/$layout r$r: /"
  done
done
