#!/usr/bin/env bash
# Two builds of the layer in turn, each paired (benches/mpi-layer PAIRED=1: the same program's
# calls through MPI_ and through PMPI_, in turn, with the layer preloaded, and the control
# without it) on shared memory, Open MPI (or MPI=mpich), the small sizes where a call passes:
#
#   OLD=DIR NEW=DIR ROUNDS=4 [OPS=bcast,allreduce] [MPI=mpich] [FORM=persistent] \
#     docs/perf/mpi-layer/gate/run.sh P OUT [MAX_BYTES] [REPS]
#
# OLD and NEW: directories holding libcirculant-mpi-MPI.so (ci/mpi-layer's target/mpi, or
# a copy of it). FORM and COMM go to benches/mpi-layer. OUT/old-rR/ and OUT/new-rR/ get benches/mpi-layer's files for round R (the two
# builds in the other order in every other round); summary.py prints the table.
set -euo pipefail
p=${1:?usage: OLD=DIR NEW=DIR docs/perf/mpi-layer/gate/run.sh P OUT [MAX_BYTES] [REPS]}
out=${2:?OUT}
max=${3:-200}
reps=${4:-300}
root=$(cd "$(dirname "$0")/../../../.." && pwd)
old=$(realpath "${OLD:?OLD=DIR}")
new=$(realpath "${NEW:?NEW=DIR}")
mkdir -p "$out"
for round in $(seq 1 "${ROUNDS:-4}"); do
  for build in $( ((round % 2)) && echo old new || echo new old); do
    dir=$old
    [[ $build == new ]] && dir=$new
    echo "== round $round: $build ($dir)" >&2
    PAIRED=1 MPIS=${MPI:-openmpi} ROUNDS=1 LAYERS=$dir OPS=${OPS:-bcast,allgatherv,allreduce} \
      "$root/benches/mpi-layer" "$p" "$out/$build-r$round" "$max" "$reps" > /dev/null
  done
done
python3 "$(dirname "$0")/summary.py" "$out" "${MPI:-openmpi}"
