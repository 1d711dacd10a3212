/* circulant-mpi: the served calls. Each `serve_*` decides (the thresholds, then the
 * communicator's mirror), turns the MPI arguments into one circulant call on contiguous bytes
 * (packing where a rank's datatype or blocks are not), and runs it: a blocking call at once,
 * a nonblocking one as the program's request (requests.c). Every rank of a call decides
 * alike (circulant_mpi.c, the rules at its top). */
#define _GNU_SOURCE
#include "layer.h"

#include <stdlib.h>
#include <string.h>

/* Whether circulant may serve `c` on its mirror (else its reason is counted). A nonblocking
 * call learns of a failure when a test notices it, at a different time on each rank: so the
 * decision takes only the failures all ranks agree on (`given_up`). A blocking call first
 * completes the mirror's nonblocking calls, which gives every rank the same failures. */
static int usable(struct call *c) {
  struct mirror *m = c->m;
  if (!m->cc) return layer_pass(c, WHY_START), 0;
  if (!variant_nonblocking(c->variant)) {
    requests_drain(m);
    if (m->failed) m->given_up = 1;
  }
  if (m->given_up) return layer_pass(c, WHY_FAILED), 0;
  return 1;
}

/* The threshold, then the communicator's mirror: 0 to serve, else PASS. */
static int decide(struct call *c, uint64_t bytes) {
  if (auto_passes(c, bytes))
    return layer_pass(c, WHY_THRESHOLD);
  c->m = layer_mirror_for(c);
  if (!c->m) return layer_pass(c, WHY_UNMIRRORED);
  return usable(c) ? 0 : PASS;
}

static int failed(struct call *c, int rc) {
  char message[1200];
  int code = layer_error(c, rc, message, sizeof message);
  layer_raise(c, code, message);
  return code;
}

static int settle(struct call *c, const struct ccall *x, struct later *l);
static int run_now(struct call *c, const struct ccall *x);

static int done(struct call *c, int rc) {
  if (rc != CIRCULANT_SUCCESS) return failed(c, rc);
  count_call(c->op, c->variant, WHY_SERVED);
  return MPI_SUCCESS;
}

int serve_reduce(struct call *c, const void *send, void *recv, MPI_Count count,
                 MPI_Datatype type, MPI_Op op, int root) {
  uint64_t bytes;
  if (count < 0 || !type_bytes(type, count, &bytes)) return layer_pass(c, WHY_ARGUMENT);
  /* Outside the ranges a call passes before its datatype and operation are looked at. */
  if (auto_passes(c, bytes)) return layer_pass(c, WHY_THRESHOLD);
  int size;
  comm_size(c->comm, &size);
  if (c->op == OP_REDUCE && (root < 0 || root >= size)) return layer_pass(c, WHY_ARGUMENT);
  int dtype = circulant_type(type);
  if (dtype < 0) return layer_pass(c, WHY_DATATYPE);
  int cop = circulant_op(op, dtype);
  if (cop < 0) return layer_pass(c, WHY_OPERATION);
  if (decide(c, bytes)) return PASS;
  const void *s = send == MPI_IN_PLACE ? CIRCULANT_IN_PLACE : (bytes ? send : g_empty);
  void *r = bytes ? recv : g_empty;
  struct ccall x = {.op = c->op, .send = s, .recv = r, .count = (size_t)count, .dtype = dtype,
                    .cop = cop, .root = root};
  if (c->op == OP_REDUCE && c->m->rank != root) x.recv = NULL;
  struct later l = {0};
  return settle(c, &x, &l);
}

/* The count of rank `j` of a reduce-scatter: `count` for each of a reduce_scatter_block's,
 * else the program's `counts[j]` (`int`s, or MPI_Counts where `large`). */
static MPI_Count scattered(const struct call *c, MPI_Count count, const void *counts, int large,
                           int j) {
  if (c->op == OP_REDUCE_SCATTER_BLOCK) return count;
  return large ? ((const MPI_Count *)counts)[j] : ((const int *)counts)[j];
}

int serve_reduce_scatter(struct call *c, const void *send, void *recv, MPI_Count count,
                         const void *counts, int large, MPI_Datatype type, MPI_Op op) {
  int size;
  if (!comm_size(c->comm, &size) || (c->op == OP_REDUCE_SCATTER && !counts))
    return layer_pass(c, WHY_ARGUMENT);
  /* The whole vector's elements and bytes, which a threshold compares. */
  MPI_Count total = 0;
  for (int j = 0; j < size; j++) {
    MPI_Count n = scattered(c, count, counts, large, j);
    if (n < 0 || n > INT64_MAX - total) return layer_pass(c, WHY_ARGUMENT);
    total += n;
  }
  uint64_t bytes;
  if (!type_bytes(type, total, &bytes)) return layer_pass(c, WHY_ARGUMENT);
  /* Outside the ranges a call passes before its datatype and operation are looked at. */
  if (auto_passes(c, bytes)) return layer_pass(c, WHY_THRESHOLD);
  int dtype = circulant_type(type);
  if (dtype < 0) return layer_pass(c, WHY_DATATYPE);
  int cop = circulant_op(op, dtype);
  if (cop < 0) return layer_pass(c, WHY_OPERATION);
  if (decide(c, bytes)) return PASS;
  MPI_Count own = scattered(c, count, counts, large, c->m->rank);
  struct ccall x = {.op = c->op, .count = (size_t)own, .dtype = dtype, .cop = cop};
  struct later l = {0};
  if (c->op == OP_REDUCE_SCATTER) {
    /* circulant's counts, kept until the call is complete. */
    size_t *elements = malloc(sizeof *elements * (size_t)size);
    if (!elements) return MPI_ERR_NO_MEM;
    for (int j = 0; j < size; j++) elements[j] = (size_t)scattered(c, count, counts, large, j);
    x.counts = elements;
    l.owned[0] = elements;
  }
  /* In place, the whole vector is in `recv` and this rank's part lands at its start. */
  if (send == MPI_IN_PLACE) {
    x.send = CIRCULANT_IN_PLACE;
    x.recv = bytes ? recv : g_empty;
  } else {
    x.send = bytes ? send : g_empty;
    x.recv = own ? recv : g_empty;
  }
  return settle(c, &x, &l);
}

/* ---------------------------------------------------------------- data movement */

int serve_barrier(struct call *c) {
  if (decide(c, 0)) return PASS;
  struct later l = {0};
  struct ccall x = {.op = OP_BARRIER};
  return settle(c, &x, &l);
}

int serve_bcast(struct call *c, void *buf, MPI_Count count, MPI_Datatype type, int root) {
  int size;
  comm_size(c->comm, &size);
  /* Outside the ranges a call passes before its datatype is looked at: a passed call costs
   * next to nothing. */
  uint64_t bytes;
  if (type_bytes(type, count, &bytes) && auto_passes(c, bytes))
    return layer_pass(c, WHY_THRESHOLD);
  struct side s;
  if (!side_of(&s, buf, count, type) || root < 0 || root >= size) return layer_pass(c, WHY_ARGUMENT);
  if (!packable(s.bytes)) return layer_pass(c, WHY_SIZE);
  if (decide(c, s.bytes)) return PASS;
  int rank = c->m->rank;
  int rc = side_open(&s, rank == root, c->comm);
  if (rc != MPI_SUCCESS) return side_close(&s, 0, rc, c->comm);
  struct later l = {0};
  l.out = s;
  l.unpack = rank != root;
  struct ccall x = {.op = OP_BCAST, .recv = s.at, .bytes = s.bytes, .root = root};
  return settle(c, &x, &l);
}

/* Allgather, gather, scatter, alltoall: blocks of `block` bytes, `size` of them. An argument
 * is looked at only where MPI says it is significant: a gather's receive side and a scatter's
 * send side at the root alone, and no side MPI_IN_PLACE stands for (a program may pass NULL,
 * -1 and MPI_DATATYPE_NULL there). */
int serve_blocks(struct call *c, const void *sendbuf, MPI_Count scount, MPI_Datatype stype,
                 void *recvbuf, MPI_Count rcount, MPI_Datatype rtype, int root) {
  int size, rank;
  comm_size(c->comm, &size);
  PMPI_Comm_rank(c->comm, &rank);
  int rooted = c->op == OP_GATHER || c->op == OP_SCATTER;
  if (rooted && (root < 0 || root >= size)) return layer_pass(c, WHY_ARGUMENT);
  /* The block size from the side every rank has: the receive side where the send side is
   * MPI_IN_PLACE or not significant. */
  int from_recv;
  switch (c->op) {
  case OP_ALLGATHER:
  case OP_ALLTOALL:
    from_recv = sendbuf == MPI_IN_PLACE;
    break;
  case OP_GATHER:
    from_recv = rank == root && sendbuf == MPI_IN_PLACE;
    break;
  default: /* scatter: every rank but an in-place root has its receive side */
    from_recv = !(rank == root && recvbuf == MPI_IN_PLACE);
    break;
  }
  uint64_t block;
  if (!type_bytes(from_recv ? rtype : stype, from_recv ? rcount : scount, &block))
    return layer_pass(c, WHY_ARGUMENT);
  if (block > INT64_MAX / (uint64_t)size) return layer_pass(c, WHY_ARGUMENT);
  uint64_t total = block * (uint64_t)size;
  if (!packable(total)) return layer_pass(c, WHY_SIZE);
  if (decide(c, total)) return PASS;

  struct side s, r;
  memset(&s, 0, sizeof s);
  memset(&r, 0, sizeof r);
  struct later l = {0};
  int rc = MPI_SUCCESS;
  struct ccall x = {.op = c->op, .bytes = block, .root = root};
  const void *sat; /* the send side as circulant takes it */
  switch (c->op) {
  case OP_ALLGATHER:
    side_of(&r, recvbuf, rcount * size, rtype);
    if (sendbuf == MPI_IN_PLACE) {
      if ((rc = side_open(&r, 1, c->comm)) != MPI_SUCCESS) goto fail;
      sat = CIRCULANT_IN_PLACE;
    } else {
      side_of(&s, sendbuf, scount, stype);
      if ((rc = side_open(&s, 1, c->comm)) != MPI_SUCCESS) goto fail;
      if ((rc = side_open(&r, 0, c->comm)) != MPI_SUCCESS) goto fail;
      sat = s.at;
    }
    x.send = sat;
    l.unpack = 1;
    break;
  case OP_ALLTOALL:
    side_of(&r, recvbuf, rcount * size, rtype);
    if (sendbuf == MPI_IN_PLACE) {
      /* The input is the receive buffer: a copy of it is the send side. */
      side_of(&s, recvbuf, rcount * size, rtype);
      s.tmp = malloc(total ? total : 1);
      if (!s.tmp) {
        rc = MPI_ERR_NO_MEM;
        goto fail;
      }
      s.at = s.tmp;
      if (total && (rc = pack_into(s.tmp, total, recvbuf, rcount * size, rtype, c->comm)) != MPI_SUCCESS)
        goto fail;
    } else {
      side_of(&s, sendbuf, scount * size, stype);
      if ((rc = side_open(&s, 1, c->comm)) != MPI_SUCCESS) goto fail;
    }
    if ((rc = side_open(&r, 0, c->comm)) != MPI_SUCCESS) goto fail;
    x.send = s.at;
    l.unpack = 1;
    break;
  case OP_GATHER:
    if (rank == root) {
      side_of(&r, recvbuf, rcount * size, rtype);
      if ((rc = side_open(&r, 0, c->comm)) != MPI_SUCCESS) goto fail;
      if (sendbuf == MPI_IN_PLACE) {
        /* The root's block is in place: circulant takes it from a copy. */
        s.tmp = malloc(block ? block : 1);
        if (!s.tmp) {
          rc = MPI_ERR_NO_MEM;
          goto fail;
        }
        s.at = s.tmp;
        if (block && (rc = pack_into(s.tmp, block,
                                     (char *)recvbuf + (MPI_Aint)root * rcount * type_extent(rtype),
                                     rcount, rtype, c->comm)) != MPI_SUCCESS)
          goto fail;
      } else {
        side_of(&s, sendbuf, scount, stype);
        if ((rc = side_open(&s, 1, c->comm)) != MPI_SUCCESS) goto fail;
      }
    } else {
      side_of(&s, sendbuf, scount, stype);
      if ((rc = side_open(&s, 1, c->comm)) != MPI_SUCCESS) goto fail;
      r.at = g_empty;
    }
    x.send = s.at;
    l.unpack = rank == root;
    break;
  default: /* OP_SCATTER */
    if (rank == root) {
      side_of(&s, sendbuf, scount * size, stype);
      if ((rc = side_open(&s, 1, c->comm)) != MPI_SUCCESS) goto fail;
    } else {
      s.at = g_empty;
    }
    if (rank == root && recvbuf == MPI_IN_PLACE) {
      r.tmp = malloc(block ? block : 1); /* the root's own block stays where it is */
      if (!r.tmp) {
        rc = MPI_ERR_NO_MEM;
        goto fail;
      }
      r.at = r.tmp;
      l.unpack = 0;
    } else {
      side_of(&r, recvbuf, rcount, rtype);
      if ((rc = side_open(&r, 0, c->comm)) != MPI_SUCCESS) goto fail;
      l.unpack = 1;
    }
    x.send = s.at;
    break;
  }
  x.recv = r.at;
  l.out = r;
  l.owned[0] = s.tmp;
  return settle(c, &x, &l);
fail:
  free(s.tmp);
  free(r.tmp);
  return rc;
}
/* What a call does once circulant completed it; `rc` the call's result so far. */
int layer_finish(struct later *l, int rc, MPI_Comm comm) {
  if (l->unpack)
    rc = side_close(&l->out, 1, rc, comm);
  else
    free(l->out.tmp);
  struct vcopy *v = &l->v;
  if (v->area && rc == MPI_SUCCESS)
    rc = blocks_copy(0, v->area, v->bytes, v->size, v->buf, v->counts, v->displs, v->type,
                     v->skip, comm);
  free(v->bytes);
  free(v->counts);
  free(v->displs);
  for (int i = 0; i < 3; i++) free(l->owned[i]);
  free(l->told);
  for (int i = 0; i < l->ntypes; i++) PMPI_Type_free(&l->types[i]);
  memset(l, 0, sizeof *l);
  return rc;
}

int ccall_run(circulant_comm *cc, const struct ccall *x, circulant_request **req) {
  const void *s = x->send;
  void *r = x->recv;
  switch (x->op) {
  case OP_BARRIER:
    return req ? circulant_ibarrier(cc, req) : circulant_barrier(cc);
  case OP_BCAST:
    return req ? circulant_ibcast(cc, r, x->bytes, x->root, req)
               : circulant_bcast(cc, r, x->bytes, x->root);
  case OP_ALLGATHER:
    return req ? circulant_iallgather(cc, s, x->bytes, r, req) : circulant_allgather(cc, s, x->bytes, r);
  case OP_ALLGATHERV:
    return req ? circulant_iallgatherv(cc, s, x->bytes, r, x->counts, req)
               : circulant_allgatherv(cc, s, x->bytes, r, x->counts);
  case OP_ALLREDUCE:
    return req ? circulant_iallreduce(cc, s, r, x->count, x->dtype, x->cop, req)
               : circulant_allreduce(cc, s, r, x->count, x->dtype, x->cop);
  case OP_REDUCE:
    return req ? circulant_ireduce(cc, s, r, x->count, x->dtype, x->cop, x->root, req)
               : circulant_reduce(cc, s, r, x->count, x->dtype, x->cop, x->root);
  case OP_REDUCE_SCATTER_BLOCK:
    return req ? circulant_ireduce_scatter_block(cc, s, r, x->count, x->dtype, x->cop, req)
               : circulant_reduce_scatter_block(cc, s, r, x->count, x->dtype, x->cop);
  case OP_REDUCE_SCATTER:
    return req ? circulant_ireduce_scatter(cc, s, r, x->counts, x->dtype, x->cop, req)
               : circulant_reduce_scatter(cc, s, r, x->counts, x->dtype, x->cop);
  case OP_SCAN:
    return req ? circulant_iscan(cc, s, r, x->count, x->dtype, x->cop, req)
               : circulant_scan(cc, s, r, x->count, x->dtype, x->cop);
  case OP_EXSCAN:
    return req ? circulant_iexscan(cc, s, r, x->count, x->dtype, x->cop, req)
               : circulant_exscan(cc, s, r, x->count, x->dtype, x->cop);
  case OP_GATHER:
    return req ? circulant_igather(cc, s, x->bytes, r, x->root, req)
               : circulant_gather(cc, s, x->bytes, r, x->root);
  case OP_GATHERV:
    return req ? circulant_igatherv(cc, s, x->bytes, r, x->counts, x->root, req)
               : circulant_gatherv(cc, s, x->bytes, r, x->counts, x->root);
  case OP_SCATTER:
    return req ? circulant_iscatter(cc, s, r, x->bytes, x->root, req)
               : circulant_scatter(cc, s, r, x->bytes, x->root);
  case OP_SCATTERV:
    return req ? circulant_iscatterv(cc, s, x->counts, r, x->bytes, x->root, req)
               : circulant_scatterv(cc, s, x->counts, r, x->bytes, x->root);
  default:
    return req ? circulant_ialltoall(cc, s, r, x->bytes, req) : circulant_alltoall(cc, s, r, x->bytes);
  }
}

/* A blocking circulant call on `c`'s communicator, after the layer's nonblocking ones there.
 * Where the layer has calls outstanding on other communicators, the call is started and
 * waited for by the layer, which keeps those going: a peer may wait for one of them. */
static int run_now(struct call *c, const struct ccall *x) {
  requests_drain(c->m);
  return requests_pending() ? requests_run(c->m, x) : ccall_run(c->m->cc, x, NULL);
}
/* A circulant call made. A blocking one runs now, and what it does after is done now. A
 * nonblocking one becomes the program's request, which does that at its completion. */
static int settle(struct call *c, const struct ccall *x, struct later *l) {
  if (variant_nonblocking(c->variant)) {
    /* The datatypes used at completion stay valid if the program frees its own. */
    if (l->unpack && l->out.tmp && type_kept(l->out.type, &l->types[l->ntypes]))
      l->out.type = l->types[l->ntypes++];
    if (l->v.area && type_kept(l->v.type, &l->types[l->ntypes])) l->v.type = l->types[l->ntypes++];
    return request_started(c, x, l);
  }
  return layer_finish(l, done(c, run_now(c, x)), c->comm);
}

/* A nonblocking gatherv or scatterv, whose counts only the root knows. The root cannot tell
 * them without waiting for its peers, which the call's start must not: its request first
 * broadcasts them (`told`: the byte counts, and last whether the root's arguments let the call
 * be served, which every rank learns at once), and the call itself starts when that broadcast
 * completes (requests.c), with `counts` made from them. So a call that starts is served at any
 * size (the others do not know its size); a root whose counts are not valid fails the call on
 * every rank. What each rank gives and gets is prepared now. `told` and `counts` (of the
 * communicator's size + 1 and size) go to the request. */
static int rooted_v_started(struct call *c, const void *sendbuf, MPI_Count scount,
                            MPI_Datatype stype, void *recvbuf, const MPI_Count *counts,
                            const MPI_Aint *displs, MPI_Count rcount, MPI_Datatype rtype,
                            int root, uint64_t *told, size_t *cbytes, int valid, uint64_t total) {
  int size = c->m->size, rank = c->m->rank, gather = c->op == OP_GATHERV;
  int is_root = rank == root, in_place = is_root && (gather ? sendbuf : recvbuf) == MPI_IN_PLACE;
  struct later l = {0};
  l.told = told;
  l.counts = cbytes;
  l.owned[0] = cbytes;
  struct ccall x = {.op = c->op, .counts = cbytes, .root = root, .send = g_empty, .recv = g_empty};
  if (is_root && !valid) return settle(c, &x, &l); /* the call fails once told */
  MPI_Datatype vtype = gather ? rtype : stype;
  int direct = is_root && contiguous(vtype) && packed_layout(size, counts, displs);
  unsigned char *area = g_empty; /* the root's blocks in rank order */
  int rc = MPI_SUCCESS;
  if (is_root && total) {
    area = direct ? (gather ? recvbuf : (void *)sendbuf) : (l.owned[1] = malloc(total));
    if (!area) {
      rc = MPI_ERR_NO_MEM;
      goto fail;
    }
  }
  if (gather) {
    x.recv = area;
    if (in_place) {
      /* The root's own block, from its place in the receive buffer. */
      uint64_t mine = told[rank];
      if (!(x.send = l.owned[2] = malloc(mine ? mine : 1))) {
        rc = MPI_ERR_NO_MEM;
        goto fail;
      }
      if (mine && (rc = pack_into(l.owned[2], mine,
                                  (char *)recvbuf + displs[rank] * type_extent(rtype),
                                  counts[rank], rtype, c->comm)) != MPI_SUCCESS)
        goto fail;
      x.bytes = mine;
    } else {
      struct side own;
      side_of(&own, sendbuf, scount, stype);
      if ((rc = side_open(&own, 1, c->comm)) != MPI_SUCCESS) goto fail;
      l.owned[2] = own.tmp;
      x.send = own.at;
      x.bytes = own.bytes;
    }
    if (is_root && !direct) {
      /* The blocks go from the packed area to their places once the call is complete. */
      MPI_Count *vcounts = malloc(sizeof *vcounts * (size_t)size);
      MPI_Aint *vdispls = malloc(sizeof *vdispls * (size_t)size);
      uint64_t *vbytes = malloc(sizeof *vbytes * (size_t)size);
      if (!vcounts || !vdispls || !vbytes) die("out of memory%s%s", "", "");
      memcpy(vcounts, counts, sizeof *vcounts * (size_t)size);
      memcpy(vdispls, displs, sizeof *vdispls * (size_t)size);
      memcpy(vbytes, told, sizeof *vbytes * (size_t)size);
      l.v = (struct vcopy){total ? area : g_empty, vbytes, size, recvbuf, vcounts, vdispls,
                           rtype, in_place ? rank : -1};
    }
  } else {
    x.send = area;
    if (is_root && !direct && total &&
        (rc = blocks_copy(1, area, told, size, (void *)sendbuf, counts, displs, stype,
                          in_place ? rank : -1, c->comm)) != MPI_SUCCESS)
      goto fail;
    if (in_place) {
      /* The root's own block stays where it is. */
      uint64_t mine = told[rank];
      if (!(x.recv = l.owned[2] = malloc(mine ? mine : 1))) {
        rc = MPI_ERR_NO_MEM;
        goto fail;
      }
      x.bytes = mine;
    } else {
      side_of(&l.out, recvbuf, rcount, rtype);
      if ((rc = side_open(&l.out, 0, c->comm)) != MPI_SUCCESS) goto fail;
      l.unpack = 1;
      x.recv = l.out.at;
      x.bytes = l.out.bytes;
    }
  }
  return settle(c, &x, &l);
fail:
  free(l.out.tmp);
  l.out.tmp = NULL;
  l.unpack = 0;
  layer_finish(&l, rc, c->comm);
  return rc;
}

enum reason layer_told(struct later *l, int size) {
  for (int j = 0; j < size; j++) l->counts[j] = (size_t)l->told[j];
  return l->told[size] < WHY_COUNT ? (enum reason)l->told[size] : WHY_ARGUMENT;
}

/* Allgatherv, gatherv, scatterv: `counts` and `displs` where this rank has them (every rank of
 * an allgatherv, the root of a gatherv or scatterv). */
static int serve_v(struct call *c, const void *sendbuf, MPI_Count scount, MPI_Datatype stype,
                   void *recvbuf, const MPI_Count *counts, const MPI_Aint *displs,
                   MPI_Count rcount, MPI_Datatype rtype, int root) {
  int size, rank;
  comm_size(c->comm, &size);
  PMPI_Comm_rank(c->comm, &rank);
  if (c->op != OP_ALLGATHERV && (root < 0 || root >= size)) return layer_pass(c, WHY_ARGUMENT);
  /* The counts array's type: the receive type (allgatherv, gatherv) or send type (scatterv). */
  MPI_Datatype vtype = c->op == OP_SCATTERV ? stype : rtype;
  int knows = c->op == OP_ALLGATHERV || rank == root; /* this rank has the counts */
  uint64_t *bytes = calloc((size_t)size + 1, sizeof *bytes);
  size_t *cbytes = calloc((size_t)size, sizeof *cbytes);
  if (!bytes || !cbytes) {
    free(bytes);
    free(cbytes);
    return layer_pass(c, WHY_ARGUMENT);
  }
  /* (A root without counts: MPI judges it.) */
  int valid = 1;
  uint64_t total = 0;
  if (knows) {
    valid = counts && displs;
    for (int j = 0; j < size && valid; j++) {
      valid = type_bytes(vtype, counts[j], &bytes[j]) && bytes[j] <= INT64_MAX - total;
      if (valid) total += bytes[j];
    }
    valid = valid && packable(total);
  }
  int rc;
  if (c->op == OP_ALLGATHERV) {
    if (!valid) {
      rc = layer_pass(c, packable(total) ? WHY_ARGUMENT : WHY_SIZE);
      goto out;
    }
    if (decide(c, total)) {
      rc = PASS;
      goto out;
    }
  } else {
    /* Only the root knows the counts: it decides and broadcasts its decision and the byte
     * counts with circulant, wherever the settings let the collective be served at all. */
    if (g_mode == MODE_AUTO && ranges_of(c)->n == 0) {
      rc = layer_pass(c, WHY_THRESHOLD);
      goto out;
    }
    c->m = layer_mirror_for(c);
    if (!c->m) {
      rc = layer_pass(c, WHY_UNMIRRORED);
      goto out;
    }
    if (!usable(c)) {
      rc = PASS;
      goto out;
    }
    int nonblocking = variant_nonblocking(c->variant);
    if (rank == root) {
      enum reason why = WHY_SERVED;
      if (!valid) why = packable(total) ? WHY_ARGUMENT : WHY_SIZE;
      else if (!nonblocking && auto_passes(c, total)) why = WHY_THRESHOLD;
      bytes[size] = (uint64_t)why;
    }
    if (nonblocking) {
      rc = rooted_v_started(c, sendbuf, scount, stype, recvbuf, counts, displs, rcount, rtype,
                            root, bytes, cbytes, valid, total);
      bytes = NULL;
      cbytes = NULL;
      goto out;
    }
    struct ccall decision = {.op = OP_BCAST, .recv = bytes,
                             .bytes = ((size_t)size + 1) * sizeof *bytes, .root = root};
    int crc = run_now(c, &decision);
    if (crc != CIRCULANT_SUCCESS) {
      rc = failed(c, crc);
      goto out;
    }
    if (bytes[size] != WHY_SERVED) {
      rc = layer_pass(c, bytes[size] < WHY_COUNT ? (enum reason)bytes[size] : WHY_ARGUMENT);
      goto out;
    }
    total = 0;
    for (int j = 0; j < size; j++) total += bytes[j];
  }
  for (int j = 0; j < size; j++) cbytes[j] = (size_t)bytes[j];

  /* This rank's own part. */
  struct side own;
  int crc;
  rc = MPI_SUCCESS;
  unsigned char *packed = NULL;
  int direct = knows && contiguous(vtype) && packed_layout(size, counts, displs);
  if (knows && !direct && total) {
    packed = malloc(total);
    if (!packed) {
      rc = MPI_ERR_NO_MEM;
      goto out;
    }
  }
  unsigned char *area = direct ? (total ? (unsigned char *)(c->op == OP_SCATTERV ? (void *)sendbuf : recvbuf) : g_empty)
                               : (packed ? packed : g_empty);
  switch (c->op) {
  case OP_ALLGATHERV: {
    struct later l = {0};
    const void *own_at = CIRCULANT_IN_PLACE;
    size_t own_bytes = cbytes[rank];
    if (sendbuf == MPI_IN_PLACE) {
      if (!direct && (rc = blocks_copy(1, area, bytes, size, recvbuf, counts, displs, rtype, -1,
                                       c->comm)) != MPI_SUCCESS)
        break;
    } else {
      side_of(&own, sendbuf, scount, stype);
      if ((rc = side_open(&own, 1, c->comm)) != MPI_SUCCESS) {
        free(own.tmp);
        break;
      }
      own_at = own.at;
      own_bytes = own.bytes;
      l.owned[0] = own.tmp;
    }
    if (!direct) {
      /* The blocks go from the packed area to their places once the call is complete. */
      MPI_Count *vcounts = malloc(sizeof *vcounts * (size_t)size);
      MPI_Aint *vdispls = malloc(sizeof *vdispls * (size_t)size);
      if (!vcounts || !vdispls) die("out of memory%s%s", "", "");
      memcpy(vcounts, counts, sizeof *vcounts * (size_t)size);
      memcpy(vdispls, displs, sizeof *vdispls * (size_t)size);
      l.v = (struct vcopy){area, bytes, size, recvbuf, vcounts, vdispls, rtype,
                           sendbuf == MPI_IN_PLACE ? rank : -1};
      bytes = NULL;
    }
    l.owned[1] = packed;
    l.owned[2] = cbytes; /* circulant's counts, kept until the call is complete */
    packed = NULL;
    cbytes = NULL;
    struct ccall x = {.op = OP_ALLGATHERV, .send = own_at, .bytes = own_bytes, .recv = area,
                      .counts = l.owned[2]};
    rc = settle(c, &x, &l);
    break;
  }
  case OP_GATHERV: {
    unsigned char *mine_copy = NULL;
    const void *mine;
    if (rank == root && sendbuf == MPI_IN_PLACE) {
      mine_copy = malloc(bytes[rank] ? bytes[rank] : 1);
      if (!mine_copy) {
        rc = MPI_ERR_NO_MEM;
        break;
      }
      MPI_Aint ext = type_extent(rtype);
      if (bytes[rank] &&
          (rc = pack_into(mine_copy, bytes[rank], (char *)recvbuf + displs[rank] * ext, counts[rank],
                          rtype, c->comm)) != MPI_SUCCESS) {
        free(mine_copy);
        break;
      }
      mine = mine_copy;
      struct ccall x = {.op = OP_GATHERV, .send = mine, .bytes = cbytes[rank], .recv = area,
                        .counts = cbytes, .root = root};
      crc = run_now(c, &x);
      free(mine_copy);
    } else {
      side_of(&own, sendbuf, scount, stype);
      if ((rc = side_open(&own, 1, c->comm)) != MPI_SUCCESS) break;
      struct ccall x = {.op = OP_GATHERV, .send = own.at, .bytes = own.bytes,
                        .recv = rank == root ? area : g_empty, .counts = cbytes, .root = root};
      crc = run_now(c, &x);
      side_close(&own, 0, MPI_SUCCESS, c->comm);
    }
    rc = done(c, crc);
    if (rc == MPI_SUCCESS && rank == root && !direct)
      rc = blocks_copy(0, area, bytes, size, recvbuf, counts, displs, rtype,
                       sendbuf == MPI_IN_PLACE ? rank : -1, c->comm);
    break;
  }
  default: /* OP_SCATTERV */
    if (rank == root && !direct &&
        (rc = blocks_copy(1, area, bytes, size, (void *)sendbuf, counts, displs, stype,
                          recvbuf == MPI_IN_PLACE ? rank : -1, c->comm)) != MPI_SUCCESS)
      break;
    if (rank == root && recvbuf == MPI_IN_PLACE) {
      unsigned char *scratch = malloc(bytes[rank] ? bytes[rank] : 1);
      if (!scratch) {
        rc = MPI_ERR_NO_MEM;
        break;
      }
      struct ccall x = {.op = OP_SCATTERV, .send = area, .counts = cbytes, .recv = scratch,
                        .bytes = cbytes[rank], .root = root};
      crc = run_now(c, &x);
      free(scratch);
      rc = done(c, crc);
    } else {
      side_of(&own, recvbuf, rcount, rtype);
      if ((rc = side_open(&own, 0, c->comm)) != MPI_SUCCESS) break;
      struct ccall x = {.op = OP_SCATTERV, .send = rank == root ? area : g_empty,
                        .counts = cbytes, .recv = own.at, .bytes = own.bytes, .root = root};
      crc = run_now(c, &x);
      rc = side_close(&own, 1, done(c, crc), c->comm);
    }
    break;
  }
  free(packed);
out:
  free(bytes);
  free(cbytes);
  return rc;
}

/* In auto mode, whether an allgatherv's bytes (its counts, of `int`s or of `MPI_Count`s where
 * `large`, times the size of `type`) fall outside its ranges: then it passes (counted) before
 * its arrays are copied or checked, so that a passed call costs a sum. Undecided (0) where a
 * count or size is out of the ordinary: the full path checks those. */
static int allgatherv_outside(struct call *c, const void *counts, int large, MPI_Datatype type) {
  MPI_Count size;
  int n;
  if (g_mode != MODE_AUTO || !type_size(type, &size) || size < 0 || !comm_size(c->comm, &n))
    return 0;
  uint64_t total = 0;
  for (int j = 0; j < n; j++) {
    MPI_Count count = large ? ((const MPI_Count *)counts)[j] : ((const int *)counts)[j];
    if (count < 0 || (size && (uint64_t)count > (UINT64_MAX / 2 - total) / (uint64_t)size)) return 0;
    total += (uint64_t)count * (uint64_t)size;
  }
  if (!auto_passes(c, total)) return 0;
  layer_pass(c, WHY_THRESHOLD);
  return 1;
}

/* The program's `int` counts and displacements as MPI_Count and MPI_Aint (NULL where `counts`
 * or `displs` is NULL); 0 when out of memory (unwiden frees what was made). */
struct varrays {
  MPI_Count *counts;
  MPI_Aint *displs;
};

static int widen(struct varrays *v, MPI_Comm comm, const int *counts, const int *displs) {
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

static void unwiden(struct varrays *v) {
  free(v->counts);
  free(v->displs);
}

int serve_allgatherv(struct call *c, const void *sendbuf, MPI_Count scount, MPI_Datatype stype,
                     void *recvbuf, const void *counts, const void *displs, MPI_Datatype rtype,
                     int large) {
  if (!counts || !displs) return layer_pass(c, WHY_ARGUMENT);
  if (allgatherv_outside(c, counts, large, rtype)) return PASS;
  if (large) return serve_v(c, sendbuf, scount, stype, recvbuf, counts, displs, 0, rtype, 0);
  struct varrays v;
  int rc = widen(&v, c->comm, counts, displs)
               ? serve_v(c, sendbuf, scount, stype, recvbuf, v.counts, v.displs, 0, rtype, 0)
               : layer_pass(c, WHY_ARGUMENT);
  unwiden(&v);
  return rc;
}

static int is_root(MPI_Comm comm, int root) {
  int rank;
  return PMPI_Comm_rank(comm, &rank) == MPI_SUCCESS && rank == root;
}

int serve_rooted_v(struct call *c, const void *sendbuf, MPI_Count scount, MPI_Datatype stype,
                   void *recvbuf, const void *counts, const void *displs, MPI_Count rcount,
                   MPI_Datatype rtype, int root, int large) {
  int root_here = is_root(c->comm, root);
  if (large)
    return serve_v(c, sendbuf, scount, stype, recvbuf, counts, displs, rcount, rtype, root);
  struct varrays v = {NULL, NULL};
  int rc = root_here && !widen(&v, c->comm, counts, displs)
               ? layer_pass(c, WHY_ARGUMENT)
               : serve_v(c, sendbuf, scount, stype, recvbuf, v.counts, v.displs, rcount, rtype,
                         root);
  unwiden(&v);
  return rc;
}
