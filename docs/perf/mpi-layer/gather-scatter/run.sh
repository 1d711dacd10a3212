#!/usr/bin/env bash
# Calibrates gather, gatherv, scatter and scatterv (both forms) again under each MPI on shared
# memory, p = 4 to 16 MiB and p = 8 to 2 MiB (--sized), with the built-in files' method (10
# repetitions, medians, MPICH 3 rounds, Open MPI 5), and puts their lines into
# mpi/thresholds-*.txt. Usage: run.sh OUT (a directory for the partial files and logs).
set -euo pipefail
out=${1:?usage: run.sh OUT}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/../../../.." && pwd)
cd "$root"
ci/mpi-layer
ops=gather,gatherv,scatter,scatterv
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpiexec.hydra -n 4 env LD_PRELOAD=$PWD/target/mpi/libcirculant-mpi-mpich.so \
  target/mpi/circulant-mpi-calibrate-mpich --max-bytes 16777216 --reps 10 --rounds 3 \
  --collectives $ops "$out/mpich-p4.txt" > "$out/mpich-p4.log"
mpiexec.hydra -n 8 env LD_PRELOAD=$PWD/target/mpi/libcirculant-mpi-mpich.so \
  target/mpi/circulant-mpi-calibrate-mpich --max-bytes 2097152 --reps 10 --rounds 3 --sized \
  --collectives $ops "$out/mpich-p8.txt" > "$out/mpich-p8.log"
mpirun.openmpi --oversubscribe -n 4 --mca btl vader,self \
  -x LD_PRELOAD=$PWD/target/mpi/libcirculant-mpi-openmpi.so \
  target/mpi/circulant-mpi-calibrate-openmpi --max-bytes 16777216 --reps 10 --rounds 5 \
  --collectives $ops "$out/openmpi-p4.txt" > "$out/openmpi-p4.log"
mpirun.openmpi --oversubscribe -n 8 --mca btl vader,self \
  -x LD_PRELOAD=$PWD/target/mpi/libcirculant-mpi-openmpi.so \
  target/mpi/circulant-mpi-calibrate-openmpi --max-bytes 2097152 --reps 10 --rounds 5 --sized \
  --collectives $ops "$out/openmpi-p8.txt" > "$out/openmpi-p8.log"
for mpi in mpich openmpi; do
  for p in 4 8; do
    python3 docs/perf/mpi-layer/gather-scatter/splice.py "$out/$mpi-p$p.txt" mpi/thresholds-$mpi.txt
  done
done
