#!/usr/bin/env bash
# Calibrates the built-in Open MPI thresholds again with sizes twice apart (--step 2; the
# built-in method otherwise: 10 repetitions, medians, 5 rounds, both forms, p = 2 to 16 MiB,
# and with --sized p = 3 and 4 to 16 MiB and p = 8 to 2 MiB) on shared memory, and writes
# mpi/thresholds-openmpi.txt from the four files (the p = 2 lines first, for communicators of
# 1 and 2 ranks; then the `@3`, `@4` and `@8` lines). Usage: run.sh OUT (a directory for the
# files and their logs).
set -euo pipefail
out=${1:?usage: run.sh OUT}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/../../../.." && pwd)
cd "$root"
ci/mpi-layer
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
calibrate() { # P FILE ARGS...
  local p=$1 file=$2
  shift 2
  mpirun.openmpi --oversubscribe -n "$p" --mca btl vader,self \
    -x LD_PRELOAD="$PWD/target/mpi/libcirculant-mpi-openmpi.so" \
    target/mpi/circulant-mpi-calibrate-openmpi --reps 10 --rounds 5 --step 2 "$@" \
    "$out/$file" > "$out/${file%.txt}.log"
}
calibrate 2 openmpi-p2.txt --max-bytes 16777216
calibrate 3 openmpi-p3.txt --max-bytes 16777216 --sized
calibrate 4 openmpi-p4.txt --max-bytes 16777216 --sized
calibrate 8 openmpi-p8.txt --max-bytes 2097152 --sized
{
  cat "$out/openmpi-p2.txt"
  echo
  echo "# Communicators of 3 ranks (--sized), calibrated apart:"
  cat "$out/openmpi-p3.txt"
  echo
  echo "# Communicators of 4 to 7 ranks (--sized), calibrated apart:"
  cat "$out/openmpi-p4.txt"
  echo
  echo "# Communicators of 8 ranks or more (--sized), calibrated apart:"
  cat "$out/openmpi-p8.txt"
} > mpi/thresholds-openmpi.txt
ci/mpi-layer
