#!/usr/bin/env bash
# Small calls on the emulated cluster (2 nodes x 4 ranks by blocks, 300 Mbit/s), the automatic
# choice, 1 B - 2 kB, bcast, allreduce and the regular allgatherv: the build before (OLD, a
# release binary; its node phases blocking only), this build blocking, this build's
# nonblocking forms (node phases), and the nonblocking forms with CIRCULANT_SEGMENT_LIMIT=0
# (plans, as the nonblocking forms ran before). ROUNDS rounds (default 4) of each in turn, each
# round beginning with the next series (this machine favours or slows a place in the order).
# Then: python3 docs/perf/phased/summary.py OUT
#   OLD=/path/to/old/circulant NEW=target/release/circulant docs/perf/phased/run.sh OUT
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${1:?usage: OLD=BIN NEW=BIN run.sh OUT}
mkdir -p "$out"
export CLUSTER_LAYOUT=blocks:4
ci/cluster up 2 300mbit
trap 'ci/cluster down' EXIT
bench=(bench --op bcast,allreduce,allgatherv --dist regular --max-bytes 2000 --reps 50
  --algorithms auto --no-progress)
all=(old-blocking new-blocking new-nonblocking plans-nonblocking)
for ((round = 1; round <= ${ROUNDS:-4}; round++)); do
  for ((i = 0; i < 4; i++)); do
    series=${all[(round - 1 + i) % 4]}
    bin=$NEW; extra=(); limit=8192
    [[ $series == old-* ]] && bin=$OLD
    [[ $series == *-nonblocking ]] && extra=(--nonblocking)
    [[ $series == plans-* ]] && limit=0
    CIRCULANT_SEGMENT_LIMIT=$limit CIRCULANT_PROVIDER='tcp;ofi_rxm' timeout 900 \
      "$bin" run -n 8 --timeout 800 -- ci/cluster rank "$bin" "${bench[@]}" "${extra[@]}" \
      --csv "$out/$series-$round.csv" > "$out/$series-$round.txt" 2>&1
  done
done
