#!/usr/bin/env bash
# The MPI programs' synchronisation before and after it stopped spinning (mpi/common_start.h):
# benches/peers/mpi_coll.c built from OLD_REV and from the working tree, run in turn ROUNDS
# times, paired (--paired: the MPI_ and PMPI_ names in turn), bcast of 1 B - 2 kB at p = 4 on
# shared memory: under MPICH with the layer serving every call (CIRCULANT_MPI=on; `mpi` rows
# are circulant's, `pmpi` rows MPICH's), and under Open MPI without the layer (both rows Open
# MPI's own). Needs `ci/mpi-layer` first. One CSV per build, MPI and round in OUT.
#
#   OLD_REV=0a68ad0 ROUNDS=3 docs/perf/mpi-layer/common-start/run.sh OUT
set -euo pipefail
out=${1:?usage: run.sh OUT}
root=$(cd "$(dirname "$0")/../../../.." && pwd)
old_rev=${OLD_REV:-0a68ad0}
rounds=${ROUNDS:-3}
reps=${REPS:-20}
mkdir -p "$out/old/mpi" "$out/old/benches/peers" "$out/new"
git -C "$root" show "$old_rev:mpi/common_start.h" > "$out/old/mpi/common_start.h"
git -C "$root" show "$old_rev:benches/peers/mpi_coll.c" > "$out/old/benches/peers/mpi_coll.c"
for mpi in mpich openmpi; do
  mpicc.$mpi -O2 -o "$out/old/mpi_coll_$mpi" "$out/old/benches/peers/mpi_coll.c"
  mpicc.$mpi -O2 -o "$out/new/mpi_coll_$mpi" "$root/benches/peers/mpi_coll.c"
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
args=(--op bcast --max-bytes 2000 --reps "$reps" --paired)
for round in $(seq 1 "$rounds"); do
  for build in old new; do
    timeout 600 mpiexec.hydra -n 4 env CIRCULANT_MPI=on \
      LD_PRELOAD="$root/target/mpi/libcirculant-mpi-mpich.so" \
      "$out/$build/mpi_coll_mpich" "${args[@]}" > "$out/mpich-$build-r$round.csv"
    timeout 600 mpiexec.openmpi --oversubscribe -n 4 --mca btl vader,self \
      "$out/$build/mpi_coll_openmpi" "${args[@]}" > "$out/openmpi-$build-r$round.csv"
  done
done
