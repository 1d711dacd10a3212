#!/usr/bin/env bash
# The shared segment in chunks against every plan on one node: bcast and allgatherv (regular,
# spike, broadcast) of 10 kB - 2 MB over shm at p = 2, 4 and 8 (P="2 4 8"), ROUNDS rounds
# (default 3), every algorithm and the automatic choice in each run. Needs a release build.
#
#   docs/perf/segment-chunks/run.sh OUT
#   python3 docs/perf/segment-chunks/summary.py OUT
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:?usage: run.sh OUT}
bin=$root/target/release/circulant
mkdir -p "$out"
# Every algorithm of the two collectives (names that do not apply to a call are skipped) and
# the automatic choice.
algorithms=auto,segment-bcast,segment-allgatherv,circulant-bcast,binomial-bcast
algorithms+=,scatter-allgather-bcast,round-robin-bcast,circulant-allgather,circulant-allgatherv
algorithms+=,ring-allgather,recursive-doubling-allgather,bruck-allgather,pipelined-ring-allgatherv
for r in $(seq 1 "${ROUNDS:-3}"); do
  for p in ${P:-2 4 8}; do
    "$bin" run -n "$p" --provider shm --timeout 900 -- "$bin" bench \
      --op bcast,allgatherv --dist regular,spike,broadcast --algorithms "$algorithms" \
      --min-bytes 10000 --max-bytes 2000000 --reps "${REPS:-20}" --no-progress \
      --csv "$out/p$p-r$r.csv" > "$out/p$p-r$r.txt" 2>&1
    echo "p = $p round $r: exit $?"
  done
done
