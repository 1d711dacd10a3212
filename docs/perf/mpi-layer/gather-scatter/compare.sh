#!/usr/bin/env bash
# gather, gatherv, scatter and scatterv (blocking) at p = 4 on shared memory, each against the
# MPI's own in one run, three ways: as plans (CIRCULANT_SEGMENT_LIMIT=0), on the shared segment
# copying through it (CIRCULANT_SINGLE_COPY=0), and on the segment reading large parts where
# they are (the default). Usage: compare.sh OUT; then summary.py OUT.
set -euo pipefail
out=${1:?usage: compare.sh OUT}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/../../../.." && pwd)
cd "$root"
ci/mpi-layer
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
args=(--max-bytes 16777216 --reps 10 --rounds 3 --forms blocking --collectives gather,gatherv,scatter,scatterv)
for way in plans two-copies single-copy; do
  case $way in
    plans) env=(CIRCULANT_SEGMENT_LIMIT=0) ;;
    two-copies) env=(CIRCULANT_SINGLE_COPY=0) ;;
    single-copy) env=(CIRCULANT_SINGLE_COPY=1) ;;
  esac
  mpiexec.hydra -n 4 env "${env[@]}" LD_PRELOAD=$PWD/target/mpi/libcirculant-mpi-mpich.so \
    target/mpi/circulant-mpi-calibrate-mpich "${args[@]}" "$out/mpich-$way.txt" > "$out/mpich-$way.log"
  mpirun.openmpi --oversubscribe -n 4 --mca btl vader,self -x "${env[0]}" \
    -x LD_PRELOAD=$PWD/target/mpi/libcirculant-mpi-openmpi.so \
    target/mpi/circulant-mpi-calibrate-openmpi "${args[@]}" "$out/openmpi-$way.txt" > "$out/openmpi-$way.log"
done
