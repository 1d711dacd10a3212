#!/usr/bin/env bash
# The shared segment against the plans and Open MPI on one node (docs/performance.md, "The
# shared segment"). Needs `cargo build --release --examples`.
#
#   docs/perf/segment/run.sh OUT
#
# OUT/pingpong.txt    hot ping-pong, ranks pinned: circulant with the segment, without it
#                     (CIRCULANT_SEGMENT_LIMIT=0), Open MPI (vader), three alternating rounds
# OUT/rounds-*        benches/rounds of the issue's targets (bcast p = 2 of 1 B – 1 kB,
#                     allreduce p = 4 of 8 B), circulant's best against Open MPI per round
# OUT/switch-pP.txt   where the segment stops paying: every algorithm up to 64 KiB with the
#                     limit raised to 65536, p = 4 and 8, bcast, allreduce, allgatherv regular
# OUT/fold/           allreduce of 1 kB – 20 kB with the limit raised, p = 4 and 8, two rounds:
#                     where folding p − 1 vectors stops paying
# `python3 docs/perf/segment/summary.py OUT/switch-p4.txt ...` sums the last two up.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:?usage: run.sh OUT}
mkdir -p "$out"
bin=$root/target/release/circulant
pingpong=$root/target/release/examples/bcast_pingpong
mpicc.openmpi -O2 -o "$root/target/bcast_pingpong_openmpi" "$root/benches/peers/bcast_pingpong.c"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

: > "$out/pingpong.txt"
for round in 1 2 3; do
  for limit in 8192 0; do
    echo -n "round $round, CIRCULANT_SEGMENT_LIMIT=$limit: " >> "$out/pingpong.txt"
    CIRCULANT_SEGMENT_LIMIT=$limit "$bin" run -n 2 -- \
      sh -c "exec taskset -c \$PMI_RANK $pingpong 100000 8" >> "$out/pingpong.txt"
  done
  echo -n "round $round, Open MPI: " >> "$out/pingpong.txt"
  mpiexec.openmpi -n 2 --bind-to core --mca btl vader,self \
    "$root/target/bcast_pingpong_openmpi" 100000 8 >> "$out/pingpong.txt"
done

OPS=bcast PEERS=openmpi "$root/benches/rounds" shm 2 "$out/rounds-bcast-p2" 1 1000 300 7
OPS=allreduce PEERS=openmpi "$root/benches/rounds" shm 4 "$out/rounds-allreduce-p4" 8 8 300 7

for p in 4 8; do
  CIRCULANT_SEGMENT_LIMIT=65536 "$bin" run -n "$p" -- "$bin" bench --op bcast,allreduce,allgatherv \
    --dist regular --min-bytes 8 --max-bytes 65536 --reps 200 > "$out/switch-p$p.txt"
done

mkdir -p "$out/fold"
for round in 1 2; do
  for p in 4 8; do
    CIRCULANT_SEGMENT_LIMIT=65536 "$bin" run -n "$p" -- "$bin" bench --op allreduce \
      --min-bytes 1000 --max-bytes 65536 --reps 200 --no-progress > "$out/fold/fold-p$p-r$round.txt"
  done
done
