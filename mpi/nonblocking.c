/* circulant-mpi: the nonblocking collectives (MPI_Ibcast, ...) and MPI-4's persistent ones
 * (MPI_Bcast_init, ...) issued, from the arguments their entry points (entry_points.c) keep.
 *
 * A nonblocking call is served as the blocking one is (the same rules; the thresholds of its
 * own form, `ibcast`, ..., as the MPI's nonblocking algorithms are others), with two
 * differences: it never waits for its peers before it returns, so it is served only on a
 * communicator a blocking call has already given a circulant communicator (MPI_COMM_WORLD from
 * MPI_Init; making one is collective), and MPI_Igatherv and MPI_Iscatterv pass (only the root
 * knows their counts, and telling the others would wait for the root). A persistent request
 * keeps its arguments; each start issues the nonblocking call.
 */
#define _GNU_SOURCE
#include "layer.h"

#include <strings.h>

/* The MPI's own nonblocking call. */
static int mpi_nonblocking(const struct args *a, int large, MPI_Request *req) {
  const struct args *x = a;
#if LAYER_LARGE_COUNT
  if (large) switch (x->op) {
    case OP_BARRIER:
      return PMPI_Ibarrier(x->comm, req);
    case OP_BCAST:
      return PMPI_Ibcast_c(x->recv, x->rcount, x->rtype, x->root, x->comm, req);
    case OP_ALLGATHER:
      return PMPI_Iallgather_c(x->send, x->scount, x->stype, x->recv, x->rcount, x->rtype, x->comm, req);
    case OP_ALLGATHERV:
      return PMPI_Iallgatherv_c(x->send, x->scount, x->stype, x->recv, x->counts, x->displs,
                                x->rtype, x->comm, req);
    case OP_ALLREDUCE:
      return PMPI_Iallreduce_c(x->send, x->recv, x->rcount, x->rtype, x->reduction, x->comm, req);
    case OP_REDUCE:
      return PMPI_Ireduce_c(x->send, x->recv, x->rcount, x->rtype, x->reduction, x->root, x->comm,
                            req);
    case OP_REDUCE_SCATTER_BLOCK:
      return PMPI_Ireduce_scatter_block_c(x->send, x->recv, x->rcount, x->rtype, x->reduction,
                                          x->comm, req);
    case OP_REDUCE_SCATTER:
      return PMPI_Ireduce_scatter_c(x->send, x->recv, x->counts, x->rtype, x->reduction, x->comm,
                                    req);
    case OP_GATHER:
      return PMPI_Igather_c(x->send, x->scount, x->stype, x->recv, x->rcount, x->rtype, x->root,
                            x->comm, req);
    case OP_GATHERV:
      return PMPI_Igatherv_c(x->send, x->scount, x->stype, x->recv, x->counts, x->displs,
                             x->rtype, x->root, x->comm, req);
    case OP_SCATTER:
      return PMPI_Iscatter_c(x->send, x->scount, x->stype, x->recv, x->rcount, x->rtype, x->root,
                             x->comm, req);
    case OP_SCATTERV:
      return PMPI_Iscatterv_c(x->send, x->counts, x->displs, x->stype, x->recv, x->rcount,
                              x->rtype, x->root, x->comm, req);
    case OP_ALLTOALL:
      return PMPI_Ialltoall_c(x->send, x->scount, x->stype, x->recv, x->rcount, x->rtype, x->comm, req);
    case OP_SCAN:
      return PMPI_Iscan_c(x->send, x->recv, x->rcount, x->rtype, x->reduction, x->comm, req);
    default:
      return PMPI_Iexscan_c(x->send, x->recv, x->rcount, x->rtype, x->reduction, x->comm, req);
    }
#else
  (void)large;
#endif
  int sc = (int)x->scount, rc = (int)x->rcount;
  switch (x->op) {
  case OP_BARRIER:
    return PMPI_Ibarrier(x->comm, req);
  case OP_BCAST:
    return PMPI_Ibcast(x->recv, rc, x->rtype, x->root, x->comm, req);
  case OP_ALLGATHER:
    return PMPI_Iallgather(x->send, sc, x->stype, x->recv, rc, x->rtype, x->comm, req);
  case OP_ALLGATHERV:
    return PMPI_Iallgatherv(x->send, sc, x->stype, x->recv, x->counts, x->displs, x->rtype, x->comm,
                            req);
  case OP_ALLREDUCE:
    return PMPI_Iallreduce(x->send, x->recv, rc, x->rtype, x->reduction, x->comm, req);
  case OP_REDUCE:
    return PMPI_Ireduce(x->send, x->recv, rc, x->rtype, x->reduction, x->root, x->comm, req);
  case OP_REDUCE_SCATTER_BLOCK:
    return PMPI_Ireduce_scatter_block(x->send, x->recv, rc, x->rtype, x->reduction, x->comm, req);
  case OP_REDUCE_SCATTER:
    return PMPI_Ireduce_scatter(x->send, x->recv, x->counts, x->rtype, x->reduction, x->comm, req);
  case OP_GATHER:
    return PMPI_Igather(x->send, sc, x->stype, x->recv, rc, x->rtype, x->root, x->comm, req);
  case OP_GATHERV:
    return PMPI_Igatherv(x->send, sc, x->stype, x->recv, x->counts, x->displs, x->rtype, x->root,
                         x->comm, req);
  case OP_SCATTER:
    return PMPI_Iscatter(x->send, sc, x->stype, x->recv, rc, x->rtype, x->root, x->comm, req);
  case OP_SCATTERV:
    return PMPI_Iscatterv(x->send, x->counts, x->displs, x->stype, x->recv, rc, x->rtype, x->root,
                          x->comm, req);
  case OP_ALLTOALL:
    return PMPI_Ialltoall(x->send, sc, x->stype, x->recv, rc, x->rtype, x->comm, req);
  case OP_SCAN:
    return PMPI_Iscan(x->send, x->recv, rc, x->rtype, x->reduction, x->comm, req);
  default:
    return PMPI_Iexscan(x->send, x->recv, rc, x->rtype, x->reduction, x->comm, req);
  }
}

int layer_issue(const struct args *a, int variant, MPI_Request native, MPI_Request *req) {
  struct call c;
  int large = variant_large(variant);
  int rc = layer_begin(&c, a->op, variant, a->comm);
  c.req = req;
  if (rc != PASS) switch (a->op) {
    case OP_BARRIER:
      rc = serve_barrier(&c);
      break;
    case OP_BCAST:
      rc = serve_bcast(&c, a->recv, a->rcount, a->rtype, a->root);
      break;
    case OP_ALLGATHER:
    case OP_GATHER:
    case OP_SCATTER:
    case OP_ALLTOALL:
      rc = serve_blocks(&c, a->send, a->scount, a->stype, a->recv, a->rcount, a->rtype, a->root);
      break;
    case OP_ALLGATHERV:
      rc = serve_allgatherv(&c, a->send, a->scount, a->stype, a->recv, a->counts, a->displs,
                            a->rtype, large);
      break;
    case OP_GATHERV:
    case OP_SCATTERV:
      rc = serve_rooted_v(&c, a->send, a->scount, a->stype, a->recv, a->counts, a->displs,
                          a->rcount, a->rtype, a->root, large);
      break;
    case OP_REDUCE_SCATTER_BLOCK:
    case OP_REDUCE_SCATTER:
      rc = serve_reduce_scatter(&c, a->send, a->recv, a->rcount, a->counts, large, a->rtype,
                                a->reduction);
      break;
    default: /* allreduce, reduce, scan, exscan */
      rc = serve_reduce(&c, a->send, a->recv, a->rcount, a->rtype, a->reduction, a->root);
      break;
    }
  if (rc != PASS) return rc;
  if (native == MPI_REQUEST_NULL) return mpi_nonblocking(a, large, req);
  /* `*req` names the started call only once it started (else the request stays inactive). */
  rc = PMPI_Start(&native);
  if (rc == MPI_SUCCESS) *req = native;
  return rc;
}

#if LAYER_LARGE_COUNT
/* ---------------------------------------------------------------- MPI-4 persistent */

/* The MPI's own persistent request. */
static int mpi_init(const struct args *x, int large, MPI_Info info, MPI_Request *req) {
  int sc = (int)x->scount, rc = (int)x->rcount;
  if (large) switch (x->op) {
    case OP_BCAST:
      return PMPI_Bcast_init_c(x->recv, x->rcount, x->rtype, x->root, x->comm, info, req);
    case OP_ALLGATHER:
      return PMPI_Allgather_init_c(x->send, x->scount, x->stype, x->recv, x->rcount, x->rtype,
                                   x->comm, info, req);
    case OP_ALLGATHERV:
      return PMPI_Allgatherv_init_c(x->send, x->scount, x->stype, x->recv, x->counts, x->displs,
                                    x->rtype, x->comm, info, req);
    case OP_ALLREDUCE:
      return PMPI_Allreduce_init_c(x->send, x->recv, x->rcount, x->rtype, x->reduction, x->comm,
                                   info, req);
    case OP_REDUCE:
      return PMPI_Reduce_init_c(x->send, x->recv, x->rcount, x->rtype, x->reduction, x->root,
                                x->comm, info, req);
    case OP_REDUCE_SCATTER_BLOCK:
      return PMPI_Reduce_scatter_block_init_c(x->send, x->recv, x->rcount, x->rtype,
                                              x->reduction, x->comm, info, req);
    case OP_REDUCE_SCATTER:
      return PMPI_Reduce_scatter_init_c(x->send, x->recv, x->counts, x->rtype, x->reduction,
                                        x->comm, info, req);
    case OP_GATHER:
      return PMPI_Gather_init_c(x->send, x->scount, x->stype, x->recv, x->rcount, x->rtype,
                                x->root, x->comm, info, req);
    case OP_GATHERV:
      return PMPI_Gatherv_init_c(x->send, x->scount, x->stype, x->recv, x->counts, x->displs,
                                 x->rtype, x->root, x->comm, info, req);
    case OP_SCATTER:
      return PMPI_Scatter_init_c(x->send, x->scount, x->stype, x->recv, x->rcount, x->rtype,
                                 x->root, x->comm, info, req);
    case OP_SCATTERV:
      return PMPI_Scatterv_init_c(x->send, x->counts, x->displs, x->stype, x->recv, x->rcount,
                                  x->rtype, x->root, x->comm, info, req);
    case OP_ALLTOALL:
      return PMPI_Alltoall_init_c(x->send, x->scount, x->stype, x->recv, x->rcount, x->rtype,
                                  x->comm, info, req);
    case OP_SCAN:
      return PMPI_Scan_init_c(x->send, x->recv, x->rcount, x->rtype, x->reduction, x->comm, info,
                              req);
    case OP_EXSCAN:
      return PMPI_Exscan_init_c(x->send, x->recv, x->rcount, x->rtype, x->reduction, x->comm,
                                info, req);
    default:
      break;
    }
  switch (x->op) {
  case OP_BARRIER:
    return PMPI_Barrier_init(x->comm, info, req);
  case OP_BCAST:
    return PMPI_Bcast_init(x->recv, rc, x->rtype, x->root, x->comm, info, req);
  case OP_ALLGATHER:
    return PMPI_Allgather_init(x->send, sc, x->stype, x->recv, rc, x->rtype, x->comm, info, req);
  case OP_ALLGATHERV:
    return PMPI_Allgatherv_init(x->send, sc, x->stype, x->recv, x->counts, x->displs, x->rtype,
                                x->comm, info, req);
  case OP_ALLREDUCE:
    return PMPI_Allreduce_init(x->send, x->recv, rc, x->rtype, x->reduction, x->comm, info, req);
  case OP_REDUCE:
    return PMPI_Reduce_init(x->send, x->recv, rc, x->rtype, x->reduction, x->root, x->comm, info,
                            req);
  case OP_REDUCE_SCATTER_BLOCK:
    return PMPI_Reduce_scatter_block_init(x->send, x->recv, rc, x->rtype, x->reduction, x->comm,
                                          info, req);
  case OP_REDUCE_SCATTER:
    return PMPI_Reduce_scatter_init(x->send, x->recv, x->counts, x->rtype, x->reduction, x->comm,
                                    info, req);
  case OP_GATHER:
    return PMPI_Gather_init(x->send, sc, x->stype, x->recv, rc, x->rtype, x->root, x->comm, info,
                            req);
  case OP_GATHERV:
    return PMPI_Gatherv_init(x->send, sc, x->stype, x->recv, x->counts, x->displs, x->rtype,
                             x->root, x->comm, info, req);
  case OP_SCATTER:
    return PMPI_Scatter_init(x->send, sc, x->stype, x->recv, rc, x->rtype, x->root, x->comm, info,
                             req);
  case OP_SCATTERV:
    return PMPI_Scatterv_init(x->send, x->counts, x->displs, x->stype, x->recv, rc, x->rtype,
                              x->root, x->comm, info, req);
  case OP_ALLTOALL:
    return PMPI_Alltoall_init(x->send, sc, x->stype, x->recv, rc, x->rtype, x->comm, info, req);
  case OP_SCAN:
    return PMPI_Scan_init(x->send, x->recv, rc, x->rtype, x->reduction, x->comm, info, req);
  default:
    return PMPI_Exscan_init(x->send, x->recv, rc, x->rtype, x->reduction, x->comm, info, req);
  }
}

/* Whether a persistent call of `variant` with arguments `a` passes from the gate alone
 * (counted there), as the entry point of its nonblocking form would ask. */
static int gate_passes_args(const struct args *a, int variant) {
  switch (a->op) {
  case OP_BARRIER:
    return gate_passes(OP_BARRIER, variant, a->comm, MPI_BYTE, 0);
  case OP_ALLGATHER:
  case OP_GATHER:
  case OP_SCATTER:
  case OP_ALLTOALL:
    return gate_passes_sides(a->op, variant, a->comm, a->send, a->scount, a->stype, a->recv,
                             a->rcount, a->rtype, a->root);
  case OP_ALLGATHERV:
    return gate_passes_v(variant, a->comm, a->counts, a->displs, variant_large(variant),
                         a->rtype);
  case OP_GATHERV:
  case OP_SCATTERV:
    return gate_passes_rooted_v(a->op, variant, a->comm, a->root, a->counts, a->displs);
  case OP_REDUCE_SCATTER_BLOCK:
  case OP_REDUCE_SCATTER:
    return gate_passes_scattered(a->op, variant, a->comm, a->rtype, a->rcount, a->counts,
                                 variant_large(variant));
  default: /* bcast, allreduce, reduce, scan, exscan */
    return gate_passes(a->op, variant, a->comm, a->rtype, a->rcount);
  }
}

/* Whether `info` holds `key` set to true. */
static int info_true(MPI_Info info, const char *key) {
  if (info == MPI_INFO_NULL) return 0;
  char value[8];
  int length = (int)sizeof value, flag = 0;
  if (PMPI_Info_get_string(info, key, &length, value, &flag) != MPI_SUCCESS) return 0;
  return flag && strcasecmp(value, "true") == 0;
}

/* Whether the program asserts that it starts its persistent collectives on `comm` in the same
 * order on every rank: MPI-4's info key mpi_assert_strict_persistent_collective_ordering,
 * given to the init or set on the communicator (equal on every rank, as MPI requires). */
static int starts_ordered(MPI_Comm comm, MPI_Info info) {
  static const char key[] = "mpi_assert_strict_persistent_collective_ordering";
  if (info_true(info, key)) return 1;
  MPI_Info own;
  if (PMPI_Comm_get_info(comm, &own) != MPI_SUCCESS) return 0;
  int ordered = info_true(own, key);
  PMPI_Info_free(&own);
  return ordered;
}

static int predefined_op(MPI_Op op) {
  return op == MPI_SUM || op == MPI_PROD || op == MPI_MIN || op == MPI_MAX || op == MPI_LAND ||
         op == MPI_LOR || op == MPI_LXOR || op == MPI_BAND || op == MPI_BOR || op == MPI_BXOR ||
         op == MPI_MINLOC || op == MPI_MAXLOC || op == MPI_REPLACE || op == MPI_NO_OP;
}

/* A persistent request: the layer's own where the layer may serve on the communicator at all
 * (each start then decides as a nonblocking call does), else the MPI's. A reduction with a
 * user's operation is the MPI's (the layer never serves it, and the program may free the
 * operation while the request lives); a derived datatype is kept as a duplicate. The layer's
 * request holds the MPI's own of the same call: MPI keeps a communicator while a persistent
 * request uses it, so a start after the program freed the communicator still finds it (and,
 * under MPICH, which runs the delete callbacks only when it lets the communicator go, its
 * circulant communicator; an MPI that runs them at MPI_Comm_free leaves the start none, and
 * it passes as a nonblocking call on a communicator without one does), and a start that
 * passes starts that request. A call the gate passes by its size is the MPI's alone, counted once
 * at its init. */
int layer_persistent(const struct args *a, int variant, MPI_Info info, MPI_Request *req) {
  struct call c;
  int reduction = a->op == OP_ALLREDUCE || a->op == OP_REDUCE || a->op == OP_SCAN ||
                  a->op == OP_EXSCAN || a->op == OP_REDUCE_SCATTER_BLOCK ||
                  a->op == OP_REDUCE_SCATTER;
  /* Every start of a call the gate passes by its size would pass: the thresholds and the
   * communicator's size stay. */
  if (gate_passes_args(a, variant) || layer_begin(&c, a->op, variant, a->comm) == PASS)
    return mpi_init(a, variant_large(variant), info, req);
  /* MPI matches persistent collectives by the order of their inits, and lets each rank start
   * them in any order; circulant runs a communicator's calls in the order they start. */
  if (!starts_ordered(a->comm, info)) {
    layer_pass(&c, WHY_UNORDERED);
    return mpi_init(a, variant_large(variant), info, req);
  }
  if (reduction && !predefined_op(a->reduction)) {
    layer_pass(&c, WHY_OPERATION);
    return mpi_init(a, variant_large(variant), info, req);
  }
  /* Only the datatypes MPI says are significant on this rank are looked at. */
  int rank;
  PMPI_Comm_rank(a->comm, &rank);
  int root = rank == a->root, sends = 0, receives = 0;
  switch (a->op) {
  case OP_BARRIER:
    break;
  case OP_ALLGATHER:
  case OP_ALLGATHERV:
  case OP_ALLTOALL:
    sends = a->send != MPI_IN_PLACE;
    receives = 1;
    break;
  case OP_GATHER:
  case OP_GATHERV:
    sends = !(root && a->send == MPI_IN_PLACE);
    receives = root;
    break;
  case OP_SCATTER:
  case OP_SCATTERV:
    sends = root;
    receives = !(root && a->recv == MPI_IN_PLACE);
    break;
  default: /* bcast and the reductions: one datatype */
    receives = 1;
    break;
  }
  MPI_Request native;
  int rc = mpi_init(a, variant_large(variant), info, &native);
  if (rc != MPI_SUCCESS) return rc;
  struct args kept = *a;
  if (sends && type_kept(a->stype, &kept.types[kept.ntypes])) kept.stype = kept.types[kept.ntypes++];
  if (receives && type_kept(a->rtype, &kept.types[kept.ntypes])) kept.rtype = kept.types[kept.ntypes++];
  return request_persistent(&kept, variant, native, req);
}
#endif
