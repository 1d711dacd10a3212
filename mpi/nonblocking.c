/* circulant-mpi: the nonblocking collectives (MPI_Ibcast, ...) and MPI-4's persistent ones
 * (MPI_Bcast_init, ...), with their large-count forms where the MPI has them.
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

#include <stdlib.h>

static int serve_allgatherv(struct call *c, const struct args *a, int large) {
  if (!a->counts || !a->displs) return layer_pass(c, WHY_ARGUMENT);
  if (allgatherv_outside(c, a->counts, large, a->rtype)) return PASS;
  if (large)
    return serve_v(c, V_ALLGATHERV, a->send, a->scount, a->stype, a->recv, a->counts, a->displs,
                   0, a->rtype, 0);
  struct varrays v;
  int rc = widen(&v, c->comm, a->counts, a->displs)
               ? serve_v(c, V_ALLGATHERV, a->send, a->scount, a->stype, a->recv, v.counts,
                         v.displs, 0, a->rtype, 0)
               : layer_pass(c, WHY_ARGUMENT);
  unwiden(&v);
  return rc;
}

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
      rc = serve_blocks(&c, BL_ALLGATHER, a->send, a->scount, a->stype, a->recv, a->rcount,
                        a->rtype, 0);
      break;
    case OP_GATHER:
      rc = serve_blocks(&c, BL_GATHER, a->send, a->scount, a->stype, a->recv, a->rcount, a->rtype,
                        a->root);
      break;
    case OP_SCATTER:
      rc = serve_blocks(&c, BL_SCATTER, a->send, a->scount, a->stype, a->recv, a->rcount, a->rtype,
                        a->root);
      break;
    case OP_ALLTOALL:
      rc = serve_blocks(&c, BL_ALLTOALL, a->send, a->scount, a->stype, a->recv, a->rcount,
                        a->rtype, 0);
      break;
    case OP_ALLGATHERV:
      rc = serve_allgatherv(&c, a, large);
      break;
    case OP_GATHERV:
    case OP_SCATTERV:
      rc = layer_pass(&c, WHY_ROOTED_V);
      break;
    case OP_ALLREDUCE:
      rc = serve_reduce(&c, RED_ALL, a->send, a->recv, a->rcount, a->rtype, a->reduction, 0);
      break;
    case OP_REDUCE:
      rc = serve_reduce(&c, RED_ROOT, a->send, a->recv, a->rcount, a->rtype, a->reduction, a->root);
      break;
    case OP_SCAN:
      rc = serve_reduce(&c, RED_SCAN, a->send, a->recv, a->rcount, a->rtype, a->reduction, 0);
      break;
    default:
      rc = serve_reduce(&c, RED_EXSCAN, a->send, a->recv, a->rcount, a->rtype, a->reduction, 0);
      break;
    }
  if (rc != PASS) return rc;
  if (native == MPI_REQUEST_NULL) return mpi_nonblocking(a, large, req);
  /* `*req` names the started call only once it started (else the request stays inactive). */
  rc = PMPI_Start(&native);
  if (rc == MPI_SUCCESS) *req = native;
  return rc;
}

/* ---------------------------------------------------------------- MPI_I... */

#define ISSUE(VARIANT, ...)                                                                        \
  do {                                                                                             \
    struct args a = {__VA_ARGS__};                                                                 \
    return layer_issue(&a, VARIANT, MPI_REQUEST_NULL, req);                                        \
  } while (0)

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req) {
  if (gate_passes(OP_BARRIER, VAR_NB, comm, MPI_BYTE, 0)) return PMPI_Ibarrier(comm, req);
  ISSUE(VAR_NB, .op = OP_BARRIER, .comm = comm);
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *req) {
  if (gate_passes(OP_BCAST, VAR_NB, comm, type, count))
    return PMPI_Ibcast(buf, count, type, root, comm, req);
  ISSUE(VAR_NB, .op = OP_BCAST, .recv = buf, .rcount = count, .rtype = type, .root = root,
        .comm = comm);
}

int MPI_Iallgather(const void *sb, int sc, MPI_Datatype st, void *rb, int rcount, MPI_Datatype rt,
                   MPI_Comm comm, MPI_Request *req) {
  if (gate_passes_sides(OP_ALLGATHER, VAR_NB, comm, sb, sc, st, rb, rcount, rt, 0))
    return PMPI_Iallgather(sb, sc, st, rb, rcount, rt, comm, req);
  ISSUE(VAR_NB, .op = OP_ALLGATHER, .send = sb, .scount = sc, .stype = st, .recv = rb,
        .rcount = rcount, .rtype = rt, .comm = comm);
}

int MPI_Igather(const void *sb, int sc, MPI_Datatype st, void *rb, int rcount, MPI_Datatype rt,
                int root, MPI_Comm comm, MPI_Request *req) {
  if (gate_passes_sides(OP_GATHER, VAR_NB, comm, sb, sc, st, rb, rcount, rt, root))
    return PMPI_Igather(sb, sc, st, rb, rcount, rt, root, comm, req);
  ISSUE(VAR_NB, .op = OP_GATHER, .send = sb, .scount = sc, .stype = st, .recv = rb,
        .rcount = rcount, .rtype = rt, .root = root, .comm = comm);
}

int MPI_Iscatter(const void *sb, int sc, MPI_Datatype st, void *rb, int rcount, MPI_Datatype rt,
                 int root, MPI_Comm comm, MPI_Request *req) {
  if (gate_passes_sides(OP_SCATTER, VAR_NB, comm, sb, sc, st, rb, rcount, rt, root))
    return PMPI_Iscatter(sb, sc, st, rb, rcount, rt, root, comm, req);
  ISSUE(VAR_NB, .op = OP_SCATTER, .send = sb, .scount = sc, .stype = st, .recv = rb,
        .rcount = rcount, .rtype = rt, .root = root, .comm = comm);
}

int MPI_Ialltoall(const void *sb, int sc, MPI_Datatype st, void *rb, int rcount, MPI_Datatype rt,
                  MPI_Comm comm, MPI_Request *req) {
  if (gate_passes_sides(OP_ALLTOALL, VAR_NB, comm, sb, sc, st, rb, rcount, rt, 0))
    return PMPI_Ialltoall(sb, sc, st, rb, rcount, rt, comm, req);
  ISSUE(VAR_NB, .op = OP_ALLTOALL, .send = sb, .scount = sc, .stype = st, .recv = rb,
        .rcount = rcount, .rtype = rt, .comm = comm);
}

int MPI_Iallgatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int rcounts[],
                    const int displs[], MPI_Datatype rt, MPI_Comm comm, MPI_Request *req) {
  if (gate_passes_v(VAR_NB, comm, rcounts, displs, 0, rt))
    return PMPI_Iallgatherv(sb, sc, st, rb, rcounts, displs, rt, comm, req);
  ISSUE(VAR_NB, .op = OP_ALLGATHERV, .send = sb, .scount = sc, .stype = st, .recv = rb,
        .counts = rcounts, .displs = displs, .rtype = rt, .comm = comm);
}

int MPI_Igatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int rcounts[],
                 const int displs[], MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *req) {
  if (gate_passes_nonblocking_v(OP_GATHERV, VAR_NB, comm))
    return PMPI_Igatherv(sb, sc, st, rb, rcounts, displs, rt, root, comm, req);
  ISSUE(VAR_NB, .op = OP_GATHERV, .send = sb, .scount = sc, .stype = st, .recv = rb,
        .counts = rcounts, .displs = displs, .rtype = rt, .root = root, .comm = comm);
}

int MPI_Iscatterv(const void *sb, const int scounts[], const int displs[], MPI_Datatype st,
                  void *rb, int rcount, MPI_Datatype rt, int root, MPI_Comm comm,
                  MPI_Request *req) {
  if (gate_passes_nonblocking_v(OP_SCATTERV, VAR_NB, comm))
    return PMPI_Iscatterv(sb, scounts, displs, st, rb, rcount, rt, root, comm, req);
  ISSUE(VAR_NB, .op = OP_SCATTERV, .send = sb, .counts = scounts, .displs = displs, .stype = st,
        .recv = rb, .rcount = rcount, .rtype = rt, .root = root, .comm = comm);
}

int MPI_Iallreduce(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                   MPI_Request *req) {
  if (gate_passes(OP_ALLREDUCE, VAR_NB, comm, t, count))
    return PMPI_Iallreduce(sb, rb, count, t, op, comm, req);
  ISSUE(VAR_NB, .op = OP_ALLREDUCE, .send = sb, .recv = rb, .rcount = count, .rtype = t,
        .reduction = op, .comm = comm);
}

int MPI_Ireduce(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request *req) {
  if (gate_passes(OP_REDUCE, VAR_NB, comm, t, count))
    return PMPI_Ireduce(sb, rb, count, t, op, root, comm, req);
  ISSUE(VAR_NB, .op = OP_REDUCE, .send = sb, .recv = rb, .rcount = count, .rtype = t,
        .reduction = op, .root = root, .comm = comm);
}

int MPI_Iscan(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
              MPI_Request *req) {
  if (gate_passes(OP_SCAN, VAR_NB, comm, t, count))
    return PMPI_Iscan(sb, rb, count, t, op, comm, req);
  ISSUE(VAR_NB, .op = OP_SCAN, .send = sb, .recv = rb, .rcount = count, .rtype = t,
        .reduction = op, .comm = comm);
}

int MPI_Iexscan(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                MPI_Request *req) {
  if (gate_passes(OP_EXSCAN, VAR_NB, comm, t, count))
    return PMPI_Iexscan(sb, rb, count, t, op, comm, req);
  ISSUE(VAR_NB, .op = OP_EXSCAN, .send = sb, .recv = rb, .rcount = count, .rtype = t,
        .reduction = op, .comm = comm);
}

#if LAYER_LARGE_COUNT
/* ---------------------------------------------------------------- MPI_I..._c */

int MPI_Ibcast_c(void *buf, MPI_Count count, MPI_Datatype type, int root, MPI_Comm comm,
                 MPI_Request *req) {
  if (gate_passes(OP_BCAST, VAR_NB_C, comm, type, count))
    return PMPI_Ibcast_c(buf, count, type, root, comm, req);
  ISSUE(VAR_NB_C, .op = OP_BCAST, .recv = buf, .rcount = count, .rtype = type, .root = root,
        .comm = comm);
}

int MPI_Iallgather_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb, MPI_Count rcount,
                     MPI_Datatype rt, MPI_Comm comm, MPI_Request *req) {
  if (gate_passes_sides(OP_ALLGATHER, VAR_NB_C, comm, sb, sc, st, rb, rcount, rt, 0))
    return PMPI_Iallgather_c(sb, sc, st, rb, rcount, rt, comm, req);
  ISSUE(VAR_NB_C, .op = OP_ALLGATHER, .send = sb, .scount = sc, .stype = st, .recv = rb,
        .rcount = rcount, .rtype = rt, .comm = comm);
}

int MPI_Igather_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb, MPI_Count rcount,
                  MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *req) {
  if (gate_passes_sides(OP_GATHER, VAR_NB_C, comm, sb, sc, st, rb, rcount, rt, root))
    return PMPI_Igather_c(sb, sc, st, rb, rcount, rt, root, comm, req);
  ISSUE(VAR_NB_C, .op = OP_GATHER, .send = sb, .scount = sc, .stype = st, .recv = rb,
        .rcount = rcount, .rtype = rt, .root = root, .comm = comm);
}

int MPI_Iscatter_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb, MPI_Count rcount,
                   MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *req) {
  if (gate_passes_sides(OP_SCATTER, VAR_NB_C, comm, sb, sc, st, rb, rcount, rt, root))
    return PMPI_Iscatter_c(sb, sc, st, rb, rcount, rt, root, comm, req);
  ISSUE(VAR_NB_C, .op = OP_SCATTER, .send = sb, .scount = sc, .stype = st, .recv = rb,
        .rcount = rcount, .rtype = rt, .root = root, .comm = comm);
}

int MPI_Ialltoall_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb, MPI_Count rcount,
                    MPI_Datatype rt, MPI_Comm comm, MPI_Request *req) {
  if (gate_passes_sides(OP_ALLTOALL, VAR_NB_C, comm, sb, sc, st, rb, rcount, rt, 0))
    return PMPI_Ialltoall_c(sb, sc, st, rb, rcount, rt, comm, req);
  ISSUE(VAR_NB_C, .op = OP_ALLTOALL, .send = sb, .scount = sc, .stype = st, .recv = rb,
        .rcount = rcount, .rtype = rt, .comm = comm);
}

int MPI_Iallgatherv_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb,
                      const MPI_Count rcounts[], const MPI_Aint displs[], MPI_Datatype rt,
                      MPI_Comm comm, MPI_Request *req) {
  if (gate_passes_v(VAR_NB_C, comm, rcounts, displs, 1, rt))
    return PMPI_Iallgatherv_c(sb, sc, st, rb, rcounts, displs, rt, comm, req);
  ISSUE(VAR_NB_C, .op = OP_ALLGATHERV, .send = sb, .scount = sc, .stype = st, .recv = rb,
        .counts = rcounts, .displs = displs, .rtype = rt, .comm = comm);
}

int MPI_Igatherv_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb,
                   const MPI_Count rcounts[], const MPI_Aint displs[], MPI_Datatype rt, int root,
                   MPI_Comm comm, MPI_Request *req) {
  if (gate_passes_nonblocking_v(OP_GATHERV, VAR_NB_C, comm))
    return PMPI_Igatherv_c(sb, sc, st, rb, rcounts, displs, rt, root, comm, req);
  ISSUE(VAR_NB_C, .op = OP_GATHERV, .send = sb, .scount = sc, .stype = st, .recv = rb,
        .counts = rcounts, .displs = displs, .rtype = rt, .root = root, .comm = comm);
}

int MPI_Iscatterv_c(const void *sb, const MPI_Count scounts[], const MPI_Aint displs[],
                    MPI_Datatype st, void *rb, MPI_Count rcount, MPI_Datatype rt, int root,
                    MPI_Comm comm, MPI_Request *req) {
  if (gate_passes_nonblocking_v(OP_SCATTERV, VAR_NB_C, comm))
    return PMPI_Iscatterv_c(sb, scounts, displs, st, rb, rcount, rt, root, comm, req);
  ISSUE(VAR_NB_C, .op = OP_SCATTERV, .send = sb, .counts = scounts, .displs = displs, .stype = st,
        .recv = rb, .rcount = rcount, .rtype = rt, .root = root, .comm = comm);
}

int MPI_Iallreduce_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype t, MPI_Op op,
                     MPI_Comm comm, MPI_Request *req) {
  if (gate_passes(OP_ALLREDUCE, VAR_NB_C, comm, t, count))
    return PMPI_Iallreduce_c(sb, rb, count, t, op, comm, req);
  ISSUE(VAR_NB_C, .op = OP_ALLREDUCE, .send = sb, .recv = rb, .rcount = count, .rtype = t,
        .reduction = op, .comm = comm);
}

int MPI_Ireduce_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype t, MPI_Op op, int root,
                  MPI_Comm comm, MPI_Request *req) {
  if (gate_passes(OP_REDUCE, VAR_NB_C, comm, t, count))
    return PMPI_Ireduce_c(sb, rb, count, t, op, root, comm, req);
  ISSUE(VAR_NB_C, .op = OP_REDUCE, .send = sb, .recv = rb, .rcount = count, .rtype = t,
        .reduction = op, .root = root, .comm = comm);
}

int MPI_Iscan_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype t, MPI_Op op,
                MPI_Comm comm, MPI_Request *req) {
  if (gate_passes(OP_SCAN, VAR_NB_C, comm, t, count))
    return PMPI_Iscan_c(sb, rb, count, t, op, comm, req);
  ISSUE(VAR_NB_C, .op = OP_SCAN, .send = sb, .recv = rb, .rcount = count, .rtype = t,
        .reduction = op, .comm = comm);
}

int MPI_Iexscan_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype t, MPI_Op op,
                  MPI_Comm comm, MPI_Request *req) {
  if (gate_passes(OP_EXSCAN, VAR_NB_C, comm, t, count))
    return PMPI_Iexscan_c(sb, rb, count, t, op, comm, req);
  ISSUE(VAR_NB_C, .op = OP_EXSCAN, .send = sb, .recv = rb, .rcount = count, .rtype = t,
        .reduction = op, .comm = comm);
}

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
    return gate_passes_nonblocking_v(a->op, variant, a->comm);
  default: /* bcast and the reductions */
    return gate_passes(a->op, variant, a->comm, a->rtype, a->rcount);
  }
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
static int persistent(const struct args *a, int variant, MPI_Info info, MPI_Request *req) {
  struct call c;
  int reduction = a->op == OP_ALLREDUCE || a->op == OP_REDUCE || a->op == OP_SCAN ||
                  a->op == OP_EXSCAN;
  /* Every start of a call the gate passes by its size would pass: the thresholds and the
   * communicator's size stay. */
  if (gate_passes_args(a, variant) || layer_begin(&c, a->op, variant, a->comm) == PASS)
    return mpi_init(a, variant_large(variant), info, req);
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

#define INIT(VARIANT, ...)                                                                         \
  do {                                                                                             \
    struct args a = {__VA_ARGS__};                                                                 \
    return persistent(&a, VARIANT, info, req);                                                     \
  } while (0)

int MPI_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT, .op = OP_BARRIER, .comm = comm);
}

int MPI_Bcast_init(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Info info,
                   MPI_Request *req) {
  INIT(VAR_INIT, .op = OP_BCAST, .recv = buf, .rcount = count, .rtype = type, .root = root,
       .comm = comm);
}

int MPI_Allgather_init(const void *sb, int sc, MPI_Datatype st, void *rb, int rcount,
                       MPI_Datatype rt, MPI_Comm comm, MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT, .op = OP_ALLGATHER, .send = sb, .scount = sc, .stype = st, .recv = rb,
       .rcount = rcount, .rtype = rt, .comm = comm);
}

int MPI_Gather_init(const void *sb, int sc, MPI_Datatype st, void *rb, int rcount,
                    MPI_Datatype rt, int root, MPI_Comm comm, MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT, .op = OP_GATHER, .send = sb, .scount = sc, .stype = st, .recv = rb,
       .rcount = rcount, .rtype = rt, .root = root, .comm = comm);
}

int MPI_Scatter_init(const void *sb, int sc, MPI_Datatype st, void *rb, int rcount,
                     MPI_Datatype rt, int root, MPI_Comm comm, MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT, .op = OP_SCATTER, .send = sb, .scount = sc, .stype = st, .recv = rb,
       .rcount = rcount, .rtype = rt, .root = root, .comm = comm);
}

int MPI_Alltoall_init(const void *sb, int sc, MPI_Datatype st, void *rb, int rcount,
                      MPI_Datatype rt, MPI_Comm comm, MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT, .op = OP_ALLTOALL, .send = sb, .scount = sc, .stype = st, .recv = rb,
       .rcount = rcount, .rtype = rt, .comm = comm);
}

int MPI_Allgatherv_init(const void *sb, int sc, MPI_Datatype st, void *rb, const int rcounts[],
                        const int displs[], MPI_Datatype rt, MPI_Comm comm, MPI_Info info,
                        MPI_Request *req) {
  INIT(VAR_INIT, .op = OP_ALLGATHERV, .send = sb, .scount = sc, .stype = st, .recv = rb,
       .counts = rcounts, .displs = displs, .rtype = rt, .comm = comm);
}

int MPI_Gatherv_init(const void *sb, int sc, MPI_Datatype st, void *rb, const int rcounts[],
                     const int displs[], MPI_Datatype rt, int root, MPI_Comm comm, MPI_Info info,
                     MPI_Request *req) {
  INIT(VAR_INIT, .op = OP_GATHERV, .send = sb, .scount = sc, .stype = st, .recv = rb,
       .counts = rcounts, .displs = displs, .rtype = rt, .root = root, .comm = comm);
}

int MPI_Scatterv_init(const void *sb, const int scounts[], const int displs[], MPI_Datatype st,
                      void *rb, int rcount, MPI_Datatype rt, int root, MPI_Comm comm,
                      MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT, .op = OP_SCATTERV, .send = sb, .counts = scounts, .displs = displs, .stype = st,
       .recv = rb, .rcount = rcount, .rtype = rt, .root = root, .comm = comm);
}

int MPI_Allreduce_init(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op,
                       MPI_Comm comm, MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT, .op = OP_ALLREDUCE, .send = sb, .recv = rb, .rcount = count, .rtype = t,
       .reduction = op, .comm = comm);
}

int MPI_Reduce_init(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, int root,
                    MPI_Comm comm, MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT, .op = OP_REDUCE, .send = sb, .recv = rb, .rcount = count, .rtype = t,
       .reduction = op, .root = root, .comm = comm);
}

int MPI_Scan_init(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                  MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT, .op = OP_SCAN, .send = sb, .recv = rb, .rcount = count, .rtype = t,
       .reduction = op, .comm = comm);
}

int MPI_Exscan_init(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                    MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT, .op = OP_EXSCAN, .send = sb, .recv = rb, .rcount = count, .rtype = t,
       .reduction = op, .comm = comm);
}

int MPI_Bcast_init_c(void *buf, MPI_Count count, MPI_Datatype type, int root, MPI_Comm comm,
                     MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT_C, .op = OP_BCAST, .recv = buf, .rcount = count, .rtype = type, .root = root,
       .comm = comm);
}

int MPI_Allgather_init_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb,
                         MPI_Count rcount, MPI_Datatype rt, MPI_Comm comm, MPI_Info info,
                         MPI_Request *req) {
  INIT(VAR_INIT_C, .op = OP_ALLGATHER, .send = sb, .scount = sc, .stype = st, .recv = rb,
       .rcount = rcount, .rtype = rt, .comm = comm);
}

int MPI_Gather_init_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb, MPI_Count rcount,
                      MPI_Datatype rt, int root, MPI_Comm comm, MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT_C, .op = OP_GATHER, .send = sb, .scount = sc, .stype = st, .recv = rb,
       .rcount = rcount, .rtype = rt, .root = root, .comm = comm);
}

int MPI_Scatter_init_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb, MPI_Count rcount,
                       MPI_Datatype rt, int root, MPI_Comm comm, MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT_C, .op = OP_SCATTER, .send = sb, .scount = sc, .stype = st, .recv = rb,
       .rcount = rcount, .rtype = rt, .root = root, .comm = comm);
}

int MPI_Alltoall_init_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb,
                        MPI_Count rcount, MPI_Datatype rt, MPI_Comm comm, MPI_Info info,
                        MPI_Request *req) {
  INIT(VAR_INIT_C, .op = OP_ALLTOALL, .send = sb, .scount = sc, .stype = st, .recv = rb,
       .rcount = rcount, .rtype = rt, .comm = comm);
}

int MPI_Allgatherv_init_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb,
                          const MPI_Count rcounts[], const MPI_Aint displs[], MPI_Datatype rt,
                          MPI_Comm comm, MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT_C, .op = OP_ALLGATHERV, .send = sb, .scount = sc, .stype = st, .recv = rb,
       .counts = rcounts, .displs = displs, .rtype = rt, .comm = comm);
}

int MPI_Gatherv_init_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb,
                       const MPI_Count rcounts[], const MPI_Aint displs[], MPI_Datatype rt,
                       int root, MPI_Comm comm, MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT_C, .op = OP_GATHERV, .send = sb, .scount = sc, .stype = st, .recv = rb,
       .counts = rcounts, .displs = displs, .rtype = rt, .root = root, .comm = comm);
}

int MPI_Scatterv_init_c(const void *sb, const MPI_Count scounts[], const MPI_Aint displs[],
                        MPI_Datatype st, void *rb, MPI_Count rcount, MPI_Datatype rt, int root,
                        MPI_Comm comm, MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT_C, .op = OP_SCATTERV, .send = sb, .counts = scounts, .displs = displs,
       .stype = st, .recv = rb, .rcount = rcount, .rtype = rt, .root = root, .comm = comm);
}

int MPI_Allreduce_init_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype t, MPI_Op op,
                         MPI_Comm comm, MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT_C, .op = OP_ALLREDUCE, .send = sb, .recv = rb, .rcount = count, .rtype = t,
       .reduction = op, .comm = comm);
}

int MPI_Reduce_init_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype t, MPI_Op op,
                      int root, MPI_Comm comm, MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT_C, .op = OP_REDUCE, .send = sb, .recv = rb, .rcount = count, .rtype = t,
       .reduction = op, .root = root, .comm = comm);
}

int MPI_Scan_init_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype t, MPI_Op op,
                    MPI_Comm comm, MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT_C, .op = OP_SCAN, .send = sb, .recv = rb, .rcount = count, .rtype = t,
       .reduction = op, .comm = comm);
}

int MPI_Exscan_init_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype t, MPI_Op op,
                      MPI_Comm comm, MPI_Info info, MPI_Request *req) {
  INIT(VAR_INIT_C, .op = OP_EXSCAN, .send = sb, .recv = rb, .rcount = count, .rtype = t,
       .reduction = op, .comm = comm);
}
#endif
