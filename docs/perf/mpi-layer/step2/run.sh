#!/usr/bin/env bash
# Calibrates the built-in Open MPI thresholds again with sizes twice apart (--step 2; the
# built-in method otherwise: 10 repetitions, medians, 5 rounds, both forms, p = 4 to 16 MiB and
# p = 8 to 2 MiB with --sized) on shared memory, and writes mpi/thresholds-openmpi.txt from the
# two files (the p = 8 lines after the others, as before). Usage: run.sh OUT (a directory for
# the two files and their logs).
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
calibrate 4 openmpi-p4.txt --max-bytes 16777216
calibrate 8 openmpi-p8.txt --max-bytes 2097152 --sized
{
  cat "$out/openmpi-p4.txt"
  echo "# Communicators of 8 ranks or more (--sized), calibrated apart:"
  cat "$out/openmpi-p8.txt"
} > mpi/thresholds-openmpi.txt
ci/mpi-layer
