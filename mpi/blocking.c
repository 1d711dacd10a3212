/* circulant-mpi: the blocking collectives (MPI_Bcast, ...) and their MPI-4 large-count forms
 * (MPI_Bcast_c, ...) where the MPI has them. */
#define _GNU_SOURCE
#include "layer.h"

#include <stdlib.h>

int widen(struct varrays *v, MPI_Comm comm, const int *counts, const int *displs) {
  v->counts = NULL;
  v->displs = NULL;
  if (!counts || !displs) return 1;
  int size;
  PMPI_Comm_size(comm, &size);
  v->counts = malloc(sizeof *v->counts * (size_t)size);
  v->displs = malloc(sizeof *v->displs * (size_t)size);
  if (!v->counts || !v->displs) return 0;
  for (int j = 0; j < size; j++) {
    v->counts[j] = counts[j];
    v->displs[j] = displs[j];
  }
  return 1;
}

void unwiden(struct varrays *v) {
  free(v->counts);
  free(v->displs);
}

int MPI_Barrier(MPI_Comm comm) {
  if (gate_passes(OP_BARRIER, VAR_BLOCKING, comm, MPI_BYTE, 0)) return PMPI_Barrier(comm);
  struct call c;
  int rc = layer_begin(&c, OP_BARRIER, VAR_BLOCKING, comm);
  if (rc != PASS) rc = serve_barrier(&c);
  return rc == PASS ? PMPI_Barrier(comm) : rc;
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  if (gate_passes(OP_BCAST, VAR_BLOCKING, comm, type, count))
    return PMPI_Bcast(buf, count, type, root, comm);
  struct call c;
  int rc = layer_begin(&c, OP_BCAST, VAR_BLOCKING, comm);
  if (rc != PASS) rc = serve_bcast(&c, buf, count, type, root);
  return rc == PASS ? PMPI_Bcast(buf, count, type, root, comm) : rc;
}

int MPI_Allgather(const void *sb, int sc, MPI_Datatype st, void *rb, int rcount,
                  MPI_Datatype rt, MPI_Comm comm) {
  if (gate_passes_sides(OP_ALLGATHER, VAR_BLOCKING, comm, sb, sc, st, rb, rcount, rt, 0))
    return PMPI_Allgather(sb, sc, st, rb, rcount, rt, comm);
  struct call c;
  int rc = layer_begin(&c, OP_ALLGATHER, VAR_BLOCKING, comm);
  if (rc != PASS) rc = serve_blocks(&c, BL_ALLGATHER, sb, sc, st, rb, rcount, rt, 0);
  return rc == PASS ? PMPI_Allgather(sb, sc, st, rb, rcount, rt, comm) : rc;
}

int MPI_Gather(const void *sb, int sc, MPI_Datatype st, void *rb, int rcount, MPI_Datatype rt,
               int root, MPI_Comm comm) {
  if (gate_passes_sides(OP_GATHER, VAR_BLOCKING, comm, sb, sc, st, rb, rcount, rt, root))
    return PMPI_Gather(sb, sc, st, rb, rcount, rt, root, comm);
  struct call c;
  int rc = layer_begin(&c, OP_GATHER, VAR_BLOCKING, comm);
  if (rc != PASS) rc = serve_blocks(&c, BL_GATHER, sb, sc, st, rb, rcount, rt, root);
  return rc == PASS ? PMPI_Gather(sb, sc, st, rb, rcount, rt, root, comm) : rc;
}

int MPI_Scatter(const void *sb, int sc, MPI_Datatype st, void *rb, int rcount, MPI_Datatype rt,
                int root, MPI_Comm comm) {
  if (gate_passes_sides(OP_SCATTER, VAR_BLOCKING, comm, sb, sc, st, rb, rcount, rt, root))
    return PMPI_Scatter(sb, sc, st, rb, rcount, rt, root, comm);
  struct call c;
  int rc = layer_begin(&c, OP_SCATTER, VAR_BLOCKING, comm);
  if (rc != PASS) rc = serve_blocks(&c, BL_SCATTER, sb, sc, st, rb, rcount, rt, root);
  return rc == PASS ? PMPI_Scatter(sb, sc, st, rb, rcount, rt, root, comm) : rc;
}

int MPI_Alltoall(const void *sb, int sc, MPI_Datatype st, void *rb, int rcount, MPI_Datatype rt,
                 MPI_Comm comm) {
  if (gate_passes_sides(OP_ALLTOALL, VAR_BLOCKING, comm, sb, sc, st, rb, rcount, rt, 0))
    return PMPI_Alltoall(sb, sc, st, rb, rcount, rt, comm);
  struct call c;
  int rc = layer_begin(&c, OP_ALLTOALL, VAR_BLOCKING, comm);
  if (rc != PASS) rc = serve_blocks(&c, BL_ALLTOALL, sb, sc, st, rb, rcount, rt, 0);
  return rc == PASS ? PMPI_Alltoall(sb, sc, st, rb, rcount, rt, comm) : rc;
}

int MPI_Allgatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int rcounts[],
                   const int displs[], MPI_Datatype rt, MPI_Comm comm) {
  if (gate_passes_v(VAR_BLOCKING, comm, rcounts, displs, 0, rt))
    return PMPI_Allgatherv(sb, sc, st, rb, rcounts, displs, rt, comm);
  struct call c;
  int rc = layer_begin(&c, OP_ALLGATHERV, VAR_BLOCKING, comm);
  if (rc != PASS && rcounts && displs && allgatherv_outside(&c, rcounts, 0, rt)) rc = PASS;
  if (rc != PASS) {
    struct varrays v;
    if (!rcounts || !displs || !widen(&v, comm, rcounts, displs))
      rc = layer_pass(&c, WHY_ARGUMENT);
    else
      rc = serve_v(&c, V_ALLGATHERV, sb, sc, st, rb, v.counts, v.displs, 0, rt, 0);
    if (rcounts && displs) unwiden(&v);
  }
  return rc == PASS ? PMPI_Allgatherv(sb, sc, st, rb, rcounts, displs, rt, comm) : rc;
}

static int is_root(MPI_Comm comm, int root) {
  int rank;
  return PMPI_Comm_rank(comm, &rank) == MPI_SUCCESS && rank == root;
}

int MPI_Gatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int rcounts[],
                const int displs[], MPI_Datatype rt, int root, MPI_Comm comm) {
  if (gate_passes_rooted_v(OP_GATHERV, VAR_BLOCKING, comm, root, rcounts, displs))
    return PMPI_Gatherv(sb, sc, st, rb, rcounts, displs, rt, root, comm);
  struct call c;
  int rc = layer_begin(&c, OP_GATHERV, VAR_BLOCKING, comm);
  if (rc != PASS) {
    struct varrays v = {NULL, NULL};
    int root_here = is_root(comm, root);
    if (root_here && (!rcounts || !displs || !widen(&v, comm, rcounts, displs)))
      rc = layer_pass(&c, WHY_ARGUMENT); /* (a bad root's arguments: MPI reports it) */
    else
      rc = serve_v(&c, V_GATHERV, sb, sc, st, rb, v.counts, v.displs, 0, rt, root);
    unwiden(&v);
  }
  return rc == PASS ? PMPI_Gatherv(sb, sc, st, rb, rcounts, displs, rt, root, comm) : rc;
}

int MPI_Scatterv(const void *sb, const int scounts[], const int displs[], MPI_Datatype st,
                 void *rb, int rcount, MPI_Datatype rt, int root, MPI_Comm comm) {
  if (gate_passes_rooted_v(OP_SCATTERV, VAR_BLOCKING, comm, root, scounts, displs))
    return PMPI_Scatterv(sb, scounts, displs, st, rb, rcount, rt, root, comm);
  struct call c;
  int rc = layer_begin(&c, OP_SCATTERV, VAR_BLOCKING, comm);
  if (rc != PASS) {
    struct varrays v = {NULL, NULL};
    int root_here = is_root(comm, root);
    if (root_here && (!scounts || !displs || !widen(&v, comm, scounts, displs)))
      rc = layer_pass(&c, WHY_ARGUMENT);
    else
      rc = serve_v(&c, V_SCATTERV, sb, 0, st, rb, v.counts, v.displs, rcount, rt, root);
    unwiden(&v);
  }
  return rc == PASS ? PMPI_Scatterv(sb, scounts, displs, st, rb, rcount, rt, root, comm) : rc;
}

int MPI_Allreduce(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
  if (gate_passes(OP_ALLREDUCE, VAR_BLOCKING, comm, t, count))
    return PMPI_Allreduce(sb, rb, count, t, op, comm);
  struct call c;
  int rc = layer_begin(&c, OP_ALLREDUCE, VAR_BLOCKING, comm);
  if (rc != PASS) rc = serve_reduce(&c, RED_ALL, sb, rb, count, t, op, 0);
  return rc == PASS ? PMPI_Allreduce(sb, rb, count, t, op, comm) : rc;
}

int MPI_Reduce(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, int root,
               MPI_Comm comm) {
  if (gate_passes(OP_REDUCE, VAR_BLOCKING, comm, t, count))
    return PMPI_Reduce(sb, rb, count, t, op, root, comm);
  struct call c;
  int rc = layer_begin(&c, OP_REDUCE, VAR_BLOCKING, comm);
  if (rc != PASS) rc = serve_reduce(&c, RED_ROOT, sb, rb, count, t, op, root);
  return rc == PASS ? PMPI_Reduce(sb, rb, count, t, op, root, comm) : rc;
}

int MPI_Scan(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
  if (gate_passes(OP_SCAN, VAR_BLOCKING, comm, t, count)) return PMPI_Scan(sb, rb, count, t, op, comm);
  struct call c;
  int rc = layer_begin(&c, OP_SCAN, VAR_BLOCKING, comm);
  if (rc != PASS) rc = serve_reduce(&c, RED_SCAN, sb, rb, count, t, op, 0);
  return rc == PASS ? PMPI_Scan(sb, rb, count, t, op, comm) : rc;
}

int MPI_Exscan(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
  if (gate_passes(OP_EXSCAN, VAR_BLOCKING, comm, t, count))
    return PMPI_Exscan(sb, rb, count, t, op, comm);
  struct call c;
  int rc = layer_begin(&c, OP_EXSCAN, VAR_BLOCKING, comm);
  if (rc != PASS) rc = serve_reduce(&c, RED_EXSCAN, sb, rb, count, t, op, 0);
  return rc == PASS ? PMPI_Exscan(sb, rb, count, t, op, comm) : rc;
}

#if LAYER_LARGE_COUNT
/* ---------------------------------------------------------------- MPI-4 large counts */

int MPI_Bcast_c(void *buf, MPI_Count count, MPI_Datatype type, int root, MPI_Comm comm) {
  if (gate_passes(OP_BCAST, VAR_BLOCKING_C, comm, type, count))
    return PMPI_Bcast_c(buf, count, type, root, comm);
  struct call c;
  int rc = layer_begin(&c, OP_BCAST, VAR_BLOCKING_C, comm);
  if (rc != PASS) rc = serve_bcast(&c, buf, count, type, root);
  return rc == PASS ? PMPI_Bcast_c(buf, count, type, root, comm) : rc;
}

int MPI_Allgather_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb, MPI_Count rcount,
                    MPI_Datatype rt, MPI_Comm comm) {
  if (gate_passes_sides(OP_ALLGATHER, VAR_BLOCKING_C, comm, sb, sc, st, rb, rcount, rt, 0))
    return PMPI_Allgather_c(sb, sc, st, rb, rcount, rt, comm);
  struct call c;
  int rc = layer_begin(&c, OP_ALLGATHER, VAR_BLOCKING_C, comm);
  if (rc != PASS) rc = serve_blocks(&c, BL_ALLGATHER, sb, sc, st, rb, rcount, rt, 0);
  return rc == PASS ? PMPI_Allgather_c(sb, sc, st, rb, rcount, rt, comm) : rc;
}

int MPI_Gather_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb, MPI_Count rcount,
                 MPI_Datatype rt, int root, MPI_Comm comm) {
  if (gate_passes_sides(OP_GATHER, VAR_BLOCKING_C, comm, sb, sc, st, rb, rcount, rt, root))
    return PMPI_Gather_c(sb, sc, st, rb, rcount, rt, root, comm);
  struct call c;
  int rc = layer_begin(&c, OP_GATHER, VAR_BLOCKING_C, comm);
  if (rc != PASS) rc = serve_blocks(&c, BL_GATHER, sb, sc, st, rb, rcount, rt, root);
  return rc == PASS ? PMPI_Gather_c(sb, sc, st, rb, rcount, rt, root, comm) : rc;
}

int MPI_Scatter_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb, MPI_Count rcount,
                  MPI_Datatype rt, int root, MPI_Comm comm) {
  if (gate_passes_sides(OP_SCATTER, VAR_BLOCKING_C, comm, sb, sc, st, rb, rcount, rt, root))
    return PMPI_Scatter_c(sb, sc, st, rb, rcount, rt, root, comm);
  struct call c;
  int rc = layer_begin(&c, OP_SCATTER, VAR_BLOCKING_C, comm);
  if (rc != PASS) rc = serve_blocks(&c, BL_SCATTER, sb, sc, st, rb, rcount, rt, root);
  return rc == PASS ? PMPI_Scatter_c(sb, sc, st, rb, rcount, rt, root, comm) : rc;
}

int MPI_Alltoall_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb, MPI_Count rcount,
                   MPI_Datatype rt, MPI_Comm comm) {
  if (gate_passes_sides(OP_ALLTOALL, VAR_BLOCKING_C, comm, sb, sc, st, rb, rcount, rt, 0))
    return PMPI_Alltoall_c(sb, sc, st, rb, rcount, rt, comm);
  struct call c;
  int rc = layer_begin(&c, OP_ALLTOALL, VAR_BLOCKING_C, comm);
  if (rc != PASS) rc = serve_blocks(&c, BL_ALLTOALL, sb, sc, st, rb, rcount, rt, 0);
  return rc == PASS ? PMPI_Alltoall_c(sb, sc, st, rb, rcount, rt, comm) : rc;
}

int MPI_Allgatherv_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb,
                     const MPI_Count rcounts[], const MPI_Aint displs[], MPI_Datatype rt,
                     MPI_Comm comm) {
  if (gate_passes_v(VAR_BLOCKING_C, comm, rcounts, displs, 1, rt))
    return PMPI_Allgatherv_c(sb, sc, st, rb, rcounts, displs, rt, comm);
  struct call c;
  int rc = layer_begin(&c, OP_ALLGATHERV, VAR_BLOCKING_C, comm);
  if (rc != PASS && rcounts && displs && allgatherv_outside(&c, rcounts, 1, rt)) rc = PASS;
  if (rc != PASS) {
    if (!rcounts || !displs)
      rc = layer_pass(&c, WHY_ARGUMENT);
    else
      rc = serve_v(&c, V_ALLGATHERV, sb, sc, st, rb, rcounts, displs, 0, rt, 0);
  }
  return rc == PASS ? PMPI_Allgatherv_c(sb, sc, st, rb, rcounts, displs, rt, comm) : rc;
}

int MPI_Gatherv_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb,
                  const MPI_Count rcounts[], const MPI_Aint displs[], MPI_Datatype rt, int root,
                  MPI_Comm comm) {
  if (gate_passes_rooted_v(OP_GATHERV, VAR_BLOCKING_C, comm, root, rcounts, displs))
    return PMPI_Gatherv_c(sb, sc, st, rb, rcounts, displs, rt, root, comm);
  struct call c;
  int rc = layer_begin(&c, OP_GATHERV, VAR_BLOCKING_C, comm);
  if (rc != PASS) {
    if (is_root(comm, root) && (!rcounts || !displs))
      rc = layer_pass(&c, WHY_ARGUMENT);
    else
      rc = serve_v(&c, V_GATHERV, sb, sc, st, rb, rcounts, displs, 0, rt, root);
  }
  return rc == PASS ? PMPI_Gatherv_c(sb, sc, st, rb, rcounts, displs, rt, root, comm) : rc;
}

int MPI_Scatterv_c(const void *sb, const MPI_Count scounts[], const MPI_Aint displs[],
                   MPI_Datatype st, void *rb, MPI_Count rcount, MPI_Datatype rt, int root,
                   MPI_Comm comm) {
  if (gate_passes_rooted_v(OP_SCATTERV, VAR_BLOCKING_C, comm, root, scounts, displs))
    return PMPI_Scatterv_c(sb, scounts, displs, st, rb, rcount, rt, root, comm);
  struct call c;
  int rc = layer_begin(&c, OP_SCATTERV, VAR_BLOCKING_C, comm);
  if (rc != PASS) {
    if (is_root(comm, root) && (!scounts || !displs))
      rc = layer_pass(&c, WHY_ARGUMENT);
    else
      rc = serve_v(&c, V_SCATTERV, sb, 0, st, rb, scounts, displs, rcount, rt, root);
  }
  return rc == PASS ? PMPI_Scatterv_c(sb, scounts, displs, st, rb, rcount, rt, root, comm) : rc;
}

int MPI_Allreduce_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype t, MPI_Op op,
                    MPI_Comm comm) {
  if (gate_passes(OP_ALLREDUCE, VAR_BLOCKING_C, comm, t, count))
    return PMPI_Allreduce_c(sb, rb, count, t, op, comm);
  struct call c;
  int rc = layer_begin(&c, OP_ALLREDUCE, VAR_BLOCKING_C, comm);
  if (rc != PASS) rc = serve_reduce(&c, RED_ALL, sb, rb, count, t, op, 0);
  return rc == PASS ? PMPI_Allreduce_c(sb, rb, count, t, op, comm) : rc;
}

int MPI_Reduce_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype t, MPI_Op op, int root,
                 MPI_Comm comm) {
  if (gate_passes(OP_REDUCE, VAR_BLOCKING_C, comm, t, count))
    return PMPI_Reduce_c(sb, rb, count, t, op, root, comm);
  struct call c;
  int rc = layer_begin(&c, OP_REDUCE, VAR_BLOCKING_C, comm);
  if (rc != PASS) rc = serve_reduce(&c, RED_ROOT, sb, rb, count, t, op, root);
  return rc == PASS ? PMPI_Reduce_c(sb, rb, count, t, op, root, comm) : rc;
}

int MPI_Scan_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype t, MPI_Op op,
               MPI_Comm comm) {
  if (gate_passes(OP_SCAN, VAR_BLOCKING_C, comm, t, count))
    return PMPI_Scan_c(sb, rb, count, t, op, comm);
  struct call c;
  int rc = layer_begin(&c, OP_SCAN, VAR_BLOCKING_C, comm);
  if (rc != PASS) rc = serve_reduce(&c, RED_SCAN, sb, rb, count, t, op, 0);
  return rc == PASS ? PMPI_Scan_c(sb, rb, count, t, op, comm) : rc;
}

int MPI_Exscan_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype t, MPI_Op op,
                 MPI_Comm comm) {
  if (gate_passes(OP_EXSCAN, VAR_BLOCKING_C, comm, t, count))
    return PMPI_Exscan_c(sb, rb, count, t, op, comm);
  struct call c;
  int rc = layer_begin(&c, OP_EXSCAN, VAR_BLOCKING_C, comm);
  if (rc != PASS) rc = serve_reduce(&c, RED_EXSCAN, sb, rb, count, t, op, 0);
  return rc == PASS ? PMPI_Exscan_c(sb, rb, count, t, op, comm) : rc;
}
#endif
