/* circulant-mpi: the MPI profiling-interface layer.
 *
 * Loaded before the MPI library (LD_PRELOAD, or linked ahead of it), it defines the MPI
 * collectives listed in `op_names` below and serves them with circulant where it can and
 * where the thresholds say circulant is faster; every other call, and every call it does not
 * serve, goes to the PMPI_ function unchanged. This file: settings, communicators, the served
 * calls and the blocking entry points; nonblocking.c the nonblocking and persistent ones;
 * requests.c the layer's requests and the MPI calls that take requests.
 *
 * Built once per MPI implementation by ci/mpi-layer:
 *   target/mpi/libcirculant-mpi-mpich.so, target/mpi/libcirculant-mpi-openmpi.so
 *
 * Rules that keep every rank of a call on the same path (circulant or MPI):
 *   - the decision to serve depends only on what every rank of the call knows alike: the
 *     collective, the communicator, the settings (the same environment on every rank), the
 *     bytes of the type signature (equal on every rank by the MPI standard), and for the
 *     reductions the operation and the datatype (the same on every rank by the standard);
 *   - what a rank alone knows — whether its datatype is contiguous, where its displacements
 *     put the blocks — never decides: a rank with a non-contiguous datatype or scattered
 *     blocks packs into a contiguous buffer of its own and unpacks after the call;
 *   - gatherv and scatterv, whose counts only the root knows, first broadcast the root's
 *     decision and counts with circulant (one small broadcast).
 */
#define _GNU_SOURCE
#include "layer.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- collectives, reasons */

const char *const op_names[OP_COUNT] = {
    "barrier", "bcast",    "allgather", "allgatherv", "allreduce", "reduce", "gather",
    "gatherv", "scatter", "scatterv",  "alltoall",   "scan",      "exscan"};

static const char *const mpi_names[OP_COUNT] = {
    "MPI_Barrier", "MPI_Bcast",    "MPI_Allgather", "MPI_Allgatherv", "MPI_Allreduce",
    "MPI_Reduce",  "MPI_Gather",   "MPI_Gatherv",   "MPI_Scatter",    "MPI_Scatterv",
    "MPI_Alltoall", "MPI_Scan",    "MPI_Exscan"};

static const char *const why_names[WHY_COUNT] = {
    "served",          "off",        "thread-multiple",       "intercommunicator",
    "below-threshold", "datatype",   "operation",             "argument",
    "too-large",       "start-failed", "failed-before",       "outside-init",
    "not-mirrored",    "rooted-v"};

/* Calls per collective, form (enum variant) and reason, this rank. */
unsigned long long g_stats[OP_COUNT][VAR_COUNT][WHY_COUNT];

int g_active;              /* between our MPI_Init and MPI_Finalize */
static int g_threads;      /* MPI_THREAD_MULTIPLE was given */
static int g_comm_keyval = MPI_KEYVAL_INVALID;

/* ---------------------------------------------------------------- communicators */

static struct mirror *g_mirrors; /* every live mirror, released at MPI_Finalize */

static int oob_allgather(const void *send, void *recv, size_t bytes, void *ctx) {
  MPI_Comm comm = *(MPI_Comm *)ctx;
  if (bytes > INT_MAX) return -1;
  return PMPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, comm);
}

/* Releases `m` now, or with its last request where requests still use it. */
static void release(struct mirror *m) {
  if (m->requests > 0) {
    m->orphaned = 1;
    return;
  }
  if (m->prev)
    m->prev->next = m->next;
  else if (g_mirrors == m)
    g_mirrors = m->next;
  if (m->next) m->next->prev = m->prev;
  if (m->cc) circulant_finalize(m->cc);
  free(m);
}

void layer_release_mirror(struct mirror *m) {
  if (--m->requests == 0 && m->orphaned) release(m);
}

static int delete_mirror(MPI_Comm comm, int keyval, void *value, void *extra) {
  (void)comm;
  (void)keyval;
  (void)extra;
  release(value);
  return MPI_SUCCESS;
}

/* The circulant communicator of `comm`, started on the first call that needs it (every rank
 * of `comm` is in that call). Whether it started is agreed among the ranks, so that all of
 * them take the same path afterwards. */
static struct mirror *mirror_of(MPI_Comm comm) {
  void *value;
  int found = 0;
  PMPI_Comm_get_attr(comm, g_comm_keyval, &value, &found);
  if (found) return value;
  struct mirror *m = calloc(1, sizeof *m);
  if (!m) die("out of memory%s%s", "", "");
  m->comm = comm;
  PMPI_Comm_rank(comm, &m->rank);
  PMPI_Comm_size(comm, &m->size);
  /* The node of every rank: the ranks that share memory with it (MPI_COMM_TYPE_SHARED),
   * labelled by the lowest rank among them; with CIRCULANT_NODE_MAP=hosts (ranks a wrapper
   * moved to other hosts than the MPI placed them on) the host names circulant exchanges. */
  int label = m->rank, rc = CIRCULANT_ERR_BOOTSTRAP;
  MPI_Comm ctx = comm;
  const char *source = getenv("CIRCULANT_NODE_MAP");
  if (source && strcmp(source, "hosts") == 0) {
    rc = circulant_init_oob(&m->cc, m->rank, m->size, oob_allgather, &ctx);
  } else {
    MPI_Comm shared;
    if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared) ==
        MPI_SUCCESS) {
      PMPI_Allreduce(&m->rank, &label, 1, MPI_INT, MPI_MIN, shared);
      PMPI_Comm_free(&shared);
    }
    int *nodes = malloc(sizeof(int) * (size_t)m->size);
    if (!nodes) die("out of memory%s%s", "", "");
    PMPI_Allgather(&label, 1, MPI_INT, nodes, 1, MPI_INT, comm);
    rc = circulant_init_oob_nodes(&m->cc, m->rank, m->size, nodes, oob_allgather, &ctx);
    free(nodes);
  }
  int ok = rc == CIRCULANT_SUCCESS, all_ok = 0;
  if (!ok) {
    fprintf(stderr, "circulant-mpi: rank %d: circulant does not start on a communicator of %d: %s: %s\n",
            m->rank, m->size, circulant_strerror(rc), circulant_last_error(NULL));
    m->cc = NULL;
  }
  PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  /* circulant splits a communicator of several nodes at its first call that runs as node
   * phases, and waits for its peers there even in a nonblocking call, which must not: a
   * barrier (which runs so) makes them now, and whether it succeeded is agreed too. */
  if (all_ok) {
    ok = circulant_barrier(m->cc) == CIRCULANT_SUCCESS;
    if (!ok)
      fprintf(stderr, "circulant-mpi: rank %d: circulant's first barrier on a communicator of %d failed: %s\n",
              m->rank, m->size, circulant_last_error(m->cc));
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  }
  if (!all_ok && m->cc) {
    circulant_finalize(m->cc);
    m->cc = NULL;
  }
  m->next = g_mirrors;
  if (g_mirrors) g_mirrors->prev = m;
  g_mirrors = m;
  PMPI_Comm_set_attr(comm, g_comm_keyval, m);
  return m;
}

/* ---------------------------------------------------------------- one call */

static int pass(struct call *c, enum reason why) {
  g_stats[c->op][c->variant][why]++;
  return PASS;
}

int layer_pass(struct call *c, enum reason why) { return pass(c, why); }

/* Whether `comm` may be served at all; PASS (with its reason counted) if not. */
static int begin(struct call *c, enum op op, int variant, MPI_Comm comm) {
  memset(c, 0, sizeof *c);
  c->op = op;
  c->variant = variant;
  c->comm = comm;
  if (!g_active) return pass(c, WHY_INACTIVE);
  if (g_mode == MODE_OFF) return pass(c, WHY_OFF);
  if (g_threads) return pass(c, WHY_THREADS);
  if (comm == MPI_COMM_NULL) return pass(c, WHY_ARGUMENT);
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return pass(c, WHY_ARGUMENT);
  if (inter) return pass(c, WHY_INTER);
  return 0;
}

int layer_begin(struct call *c, enum op op, int variant, MPI_Comm comm) {
  return begin(c, op, variant, comm);
}

/* The communicator's mirror, made now for a blocking call. A nonblocking one must not wait
 * for its peers, as making a mirror does: it takes one a blocking call made, else NULL. */
static struct mirror *mirror_for(struct call *c) {
  if (!variant_nonblocking(c->variant)) return mirror_of(c->comm);
  void *value;
  int found = 0;
  PMPI_Comm_get_attr(c->comm, g_comm_keyval, &value, &found);
  return found ? value : NULL;
}

/* Whether circulant may serve `c` on its mirror (else its reason is counted). A nonblocking
 * call learns of a failure when a test notices it, at a different time on each rank: so the
 * decision takes only the failures all ranks agree on (`given_up`). A blocking call first
 * completes the mirror's nonblocking calls, which gives every rank the same failures. */
static int usable(struct call *c) {
  struct mirror *m = c->m;
  if (!m->cc) return pass(c, WHY_START), 0;
  if (!variant_nonblocking(c->variant)) {
    requests_drain(m);
    if (m->failed) m->given_up = 1;
  }
  if (m->given_up) return pass(c, WHY_FAILED), 0;
  return 1;
}

/* The threshold, then the communicator's mirror: 0 to serve, else PASS. */
static int decide(struct call *c, uint64_t bytes) {
  if (g_mode == MODE_AUTO && !in_ranges(c, bytes))
    return pass(c, WHY_THRESHOLD);
  c->m = mirror_for(c);
  if (!c->m) return pass(c, WHY_UNMIRRORED);
  return usable(c) ? 0 : PASS;
}

static int error_classes[CIRCULANT_ERR_INTERNAL + 1];

/* A failed circulant call: the communicator marked failed (given up at once after a blocking
 * call, which fails on every rank alike), and an error class whose string is the message,
 * which `message` (of `cap` bytes) gets too. The error class is returned. */
int layer_error(struct call *c, int rc, char *message, size_t cap) {
  snprintf(message, cap, "circulant %s (%s): %s", op_names[c->op], circulant_strerror(rc),
           circulant_last_error(c->m->cc));
  c->m->failed = 1;
  if (!variant_nonblocking(c->variant)) c->m->given_up = 1;
  int slot = rc >= 0 && rc <= CIRCULANT_ERR_INTERNAL ? rc : CIRCULANT_ERR_INTERNAL;
  if (!error_classes[slot] && PMPI_Add_error_class(&error_classes[slot]) != MPI_SUCCESS)
    error_classes[slot] = MPI_ERR_OTHER;
  /* A code of its own for each failure, so that its string stays this call's message. */
  int code = error_classes[slot];
  if (code != MPI_ERR_OTHER && PMPI_Add_error_code(error_classes[slot], &code) == MPI_SUCCESS)
    PMPI_Add_error_string(code, message);
  else
    code = error_classes[slot];
  return code;
}

/* Error `code` of call `c` to its communicator's error handler: a fatal one aborts the job
 * with `message`. A request completed after its communicator was freed reports on
 * MPI_COMM_WORLD. */
void layer_raise(struct call *c, int code, const char *message) {
  MPI_Comm comm = c->m->orphaned ? MPI_COMM_WORLD : c->comm;
  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  PMPI_Comm_get_errhandler(comm, &handler);
  int fatal = handler == MPI_ERRORS_ARE_FATAL;
#if LAYER_LARGE_COUNT && defined(MPI_ERRORS_ABORT)
  fatal = fatal || handler == MPI_ERRORS_ABORT;
#endif
  if (handler != MPI_ERRHANDLER_NULL) PMPI_Errhandler_free(&handler);
  if (fatal) {
    fprintf(stderr, "circulant-mpi: rank %d: %s\n", c->m->rank, message);
    fflush(stderr);
    PMPI_Abort(comm, 1);
  }
  PMPI_Comm_call_errhandler(comm, code);
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
  g_stats[c->op][c->variant][WHY_SERVED]++;
  return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- datatypes and buffers */

static unsigned char g_empty[1]; /* a valid address for zero bytes */

/* Whether `count` elements of `type` are `count * size` bytes one after another from the
 * buffer's address: a predefined type without gaps, or duplicates and contiguous runs of one. */
static int contiguous(MPI_Datatype type) {
  int ni, na, nd, combiner;
  if (PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner) != MPI_SUCCESS) return 0;
  if (combiner == MPI_COMBINER_NAMED) {
    MPI_Count size, lb, extent;
    if (PMPI_Type_size_x(type, &size) != MPI_SUCCESS) return 0;
    if (PMPI_Type_get_extent_x(type, &lb, &extent) != MPI_SUCCESS) return 0;
    return lb == 0 && extent == size;
  }
  if ((combiner != MPI_COMBINER_DUP && combiner != MPI_COMBINER_CONTIGUOUS) || nd != 1 ||
      ni > 1 || na > 0)
    return 0;
  int ints[1];
  MPI_Aint addrs[1];
  MPI_Datatype inner;
  if (PMPI_Type_get_contents(type, ni, na, nd, ints, addrs, &inner) != MPI_SUCCESS) return 0;
  int yes = contiguous(inner);
  int ci, ca, cd, cc;
  if (PMPI_Type_get_envelope(inner, &ci, &ca, &cd, &cc) == MPI_SUCCESS && cc != MPI_COMBINER_NAMED)
    PMPI_Type_free(&inner);
  return yes;
}

static int type_bytes(MPI_Datatype type, MPI_Count count, uint64_t *bytes) {
  MPI_Count size;
  if (count < 0 || PMPI_Type_size_x(type, &size) != MPI_SUCCESS || size < 0) return 0;
  if (size != 0 && (uint64_t)count > (uint64_t)INT64_MAX / (uint64_t)size) return 0;
  *bytes = (uint64_t)count * (uint64_t)size;
  return 1;
}

static MPI_Aint type_extent(MPI_Datatype type) {
  MPI_Count lb, extent;
  PMPI_Type_get_extent_x(type, &lb, &extent);
  return (MPI_Aint)extent;
}

static int pack_into(void *dst, uint64_t bytes, const void *buf, MPI_Count count,
                     MPI_Datatype type, MPI_Comm comm) {
#if LAYER_LARGE_COUNT
  MPI_Count pos = 0;
  int rc = PMPI_Pack_c(buf, count, type, dst, (MPI_Count)bytes, &pos, comm);
#else
  int pos = 0;
  if (count > INT_MAX || bytes > INT_MAX) return MPI_ERR_COUNT;
  int rc = PMPI_Pack(buf, (int)count, type, dst, (int)bytes, &pos, comm);
#endif
  if (rc == MPI_SUCCESS && (uint64_t)pos != bytes) rc = MPI_ERR_TYPE;
  return rc;
}

static int unpack_from(const void *src, uint64_t bytes, void *buf, MPI_Count count,
                       MPI_Datatype type, MPI_Comm comm) {
#if LAYER_LARGE_COUNT
  MPI_Count pos = 0;
  int rc = PMPI_Unpack_c(src, (MPI_Count)bytes, &pos, buf, count, type, comm);
#else
  int pos = 0;
  if (count > INT_MAX || bytes > INT_MAX) return MPI_ERR_COUNT;
  int rc = PMPI_Unpack(src, (int)bytes, &pos, buf, (int)count, type, comm);
#endif
  if (rc == MPI_SUCCESS && (uint64_t)pos != bytes) rc = MPI_ERR_TYPE;
  return rc;
}

static int side_of(struct side *s, const void *buf, MPI_Count count, MPI_Datatype type) {
  memset(s, 0, sizeof *s);
  s->buf = (void *)buf;
  s->count = count;
  s->type = type;
  return type_bytes(type, count, &s->bytes);
}

/* Makes `s->at` point at its bytes; `fill`: pack the current content. */
static int side_open(struct side *s, int fill, MPI_Comm comm) {
  if (s->bytes == 0) {
    s->at = g_empty;
    return MPI_SUCCESS;
  }
  if (contiguous(s->type)) {
    s->at = s->buf;
    return MPI_SUCCESS;
  }
  s->tmp = malloc(s->bytes);
  if (!s->tmp) return MPI_ERR_NO_MEM;
  s->at = s->tmp;
  return fill ? pack_into(s->tmp, s->bytes, s->buf, s->count, s->type, comm) : MPI_SUCCESS;
}

/* Unpacks a packed receive side (if `rc` is success) and frees its copy. */
static int side_close(struct side *s, int unpack, int rc, MPI_Comm comm) {
  if (s->tmp && unpack && rc == MPI_SUCCESS)
    rc = unpack_from(s->tmp, s->bytes, s->buf, s->count, s->type, comm);
  free(s->tmp);
  s->tmp = NULL;
  return rc;
}

/* Without MPI_Pack_c, packing is limited to int sizes: such calls are not served. */
static int packable(uint64_t bytes) {
#if LAYER_LARGE_COUNT
  (void)bytes;
  return 1;
#else
  return bytes <= INT_MAX;
#endif
}

/* ---------------------------------------------------------------- reductions */

static int circulant_type(MPI_Datatype t) {
  int ni, na, nd, combiner;
  if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS ||
      combiner != MPI_COMBINER_NAMED)
    return -1;
  int sz;
  if (PMPI_Type_size(t, &sz) != MPI_SUCCESS) return -1;
  if (t == MPI_INT || t == MPI_LONG || t == MPI_LONG_LONG_INT || t == MPI_LONG_LONG ||
      t == MPI_INT32_T || t == MPI_INT64_T || t == MPI_INTEGER || t == MPI_AINT ||
      t == MPI_OFFSET || t == MPI_COUNT || t == MPI_INTEGER4 || t == MPI_INTEGER8)
    return sz == 4 ? CIRCULANT_INT32 : sz == 8 ? CIRCULANT_INT64 : -1;
  if (t == MPI_UNSIGNED || t == MPI_UNSIGNED_LONG || t == MPI_UNSIGNED_LONG_LONG ||
      t == MPI_UINT32_T || t == MPI_UINT64_T)
    return sz == 4 ? CIRCULANT_UINT32 : sz == 8 ? CIRCULANT_UINT64 : -1;
  if (t == MPI_FLOAT || t == MPI_REAL || t == MPI_REAL4 || t == MPI_DOUBLE ||
      t == MPI_DOUBLE_PRECISION || t == MPI_REAL8)
    return sz == 4 ? CIRCULANT_FLOAT32 : sz == 8 ? CIRCULANT_FLOAT64 : -1;
  return -1;
}

static int circulant_op(MPI_Op op, int dtype) {
  int integer = dtype != CIRCULANT_FLOAT32 && dtype != CIRCULANT_FLOAT64;
  if (op == MPI_SUM) return CIRCULANT_SUM;
  if (op == MPI_PROD) return CIRCULANT_PROD;
  if (op == MPI_MIN) return CIRCULANT_MIN;
  if (op == MPI_MAX) return CIRCULANT_MAX;
  if (integer && op == MPI_BAND) return CIRCULANT_BAND;
  if (integer && op == MPI_BOR) return CIRCULANT_BOR;
  if (integer && op == MPI_BXOR) return CIRCULANT_BXOR;
  return -1;
}

int serve_reduce(struct call *c, enum reducing which, const void *send, void *recv,
                        MPI_Count count, MPI_Datatype type, MPI_Op op, int root) {
  int size;
  PMPI_Comm_size(c->comm, &size);
  uint64_t bytes;
  if (count < 0 || !type_bytes(type, count, &bytes)) return pass(c, WHY_ARGUMENT);
  if (which == RED_ROOT && (root < 0 || root >= size)) return pass(c, WHY_ARGUMENT);
  int dtype = circulant_type(type);
  if (dtype < 0) return pass(c, WHY_DATATYPE);
  int cop = circulant_op(op, dtype);
  if (cop < 0) return pass(c, WHY_OPERATION);
  if (decide(c, bytes)) return PASS;
  const void *s = send == MPI_IN_PLACE ? CIRCULANT_IN_PLACE : (bytes ? send : g_empty);
  void *r = bytes ? recv : g_empty;
  struct ccall x = {.op = c->op, .send = s, .recv = r, .count = (size_t)count, .dtype = dtype,
                    .cop = cop, .root = root};
  if (which == RED_ROOT && c->m->rank != root) x.recv = NULL;
  struct later l = {0};
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
  PMPI_Comm_size(c->comm, &size);
  /* Outside the ranges a call passes before its datatype is looked at: a passed call costs
   * next to nothing. */
  uint64_t bytes;
  if (g_mode == MODE_AUTO && type_bytes(type, count, &bytes) && !in_ranges(c, bytes))
    return pass(c, WHY_THRESHOLD);
  struct side s;
  if (!side_of(&s, buf, count, type) || root < 0 || root >= size) return pass(c, WHY_ARGUMENT);
  if (!packable(s.bytes)) return pass(c, WHY_SIZE);
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

/* Allgather, gather, scatter, alltoall: blocks of `block` bytes, `size` of them. */
int serve_blocks(struct call *c, enum blocks kind, const void *sendbuf, MPI_Count scount,
                        MPI_Datatype stype, void *recvbuf, MPI_Count rcount, MPI_Datatype rtype,
                        int root) {
  int size, rank;
  PMPI_Comm_size(c->comm, &size);
  PMPI_Comm_rank(c->comm, &rank);
  int rooted = kind == BL_GATHER || kind == BL_SCATTER;
  if (rooted && (root < 0 || root >= size)) return pass(c, WHY_ARGUMENT);
  /* The block size from the side every rank has: the receive side where the send side is
   * MPI_IN_PLACE or not significant. */
  int from_recv;
  switch (kind) {
  case BL_ALLGATHER:
  case BL_ALLTOALL:
    from_recv = sendbuf == MPI_IN_PLACE;
    break;
  case BL_GATHER:
    from_recv = rank == root && sendbuf == MPI_IN_PLACE;
    break;
  default: /* scatter: every rank but an in-place root has its receive side */
    from_recv = !(rank == root && recvbuf == MPI_IN_PLACE);
    break;
  }
  uint64_t block;
  if (!type_bytes(from_recv ? rtype : stype, from_recv ? rcount : scount, &block))
    return pass(c, WHY_ARGUMENT);
  if (block > INT64_MAX / (uint64_t)size) return pass(c, WHY_ARGUMENT);
  uint64_t total = block * (uint64_t)size;
  if (!packable(total)) return pass(c, WHY_SIZE);
  if (decide(c, total)) return PASS;

  struct side s, r;
  memset(&s, 0, sizeof s);
  memset(&r, 0, sizeof r);
  struct later l = {0};
  int rc = MPI_SUCCESS;
  struct ccall x = {.op = c->op, .bytes = block, .root = root};
  const void *sat; /* the send side as circulant takes it */
  MPI_Aint rext = type_extent(rtype);
  switch (kind) {
  case BL_ALLGATHER:
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
  case BL_ALLTOALL:
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
  case BL_GATHER:
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
        if (block &&
            (rc = pack_into(s.tmp, block, (char *)recvbuf + (MPI_Aint)root * rcount * rext, rcount,
                            rtype, c->comm)) != MPI_SUCCESS)
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
  default: /* BL_SCATTER */
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

/* The `v` collectives: per rank a count of elements of the receive (gatherv, allgatherv) or
 * send (scatterv) type and a displacement in its extents. */
static int packed_layout(int size, const MPI_Count *counts, const MPI_Aint *displs) {
  MPI_Aint at = 0;
  for (int j = 0; j < size; j++) {
    if (displs[j] != at) return 0;
    at += (MPI_Aint)counts[j];
  }
  return 1;
}

/* Copies between the blocks of `buf` (at `displs`, in `type`) and a packed buffer. */
static int blocks_copy(int into_packed, unsigned char *packed, const uint64_t *bytes, int size,
                       void *buf, const MPI_Count *counts, const MPI_Aint *displs,
                       MPI_Datatype type, int skip, MPI_Comm comm) {
  MPI_Aint ext = type_extent(type);
  int contig = contiguous(type);
  uint64_t at = 0;
  for (int j = 0; j < size; j++) {
    char *block = (char *)buf + displs[j] * ext;
    if (j != skip && bytes[j]) {
      int rc = MPI_SUCCESS;
      if (contig)
        memcpy(into_packed ? (void *)(packed + at) : (void *)block,
               into_packed ? (void *)block : (void *)(packed + at), bytes[j]);
      else if (into_packed)
        rc = pack_into(packed + at, bytes[j], block, counts[j], type, comm);
      else
        rc = unpack_from(packed + at, bytes[j], block, counts[j], type, comm);
      if (rc != MPI_SUCCESS) return rc;
    }
    at += bytes[j];
  }
  return MPI_SUCCESS;
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

int type_kept(MPI_Datatype type, MPI_Datatype *owned) {
  int ni, na, nd, combiner;
  if (type == MPI_DATATYPE_NULL || PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner) != MPI_SUCCESS ||
      combiner == MPI_COMBINER_NAMED)
    return 0;
  return PMPI_Type_dup(type, owned) == MPI_SUCCESS;
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

int serve_v(struct call *c, enum vkind kind, const void *sendbuf, MPI_Count scount,
                   MPI_Datatype stype, void *recvbuf, const MPI_Count *counts,
                   const MPI_Aint *displs, MPI_Count rcount, MPI_Datatype rtype, int root) {
  int size, rank;
  PMPI_Comm_size(c->comm, &size);
  PMPI_Comm_rank(c->comm, &rank);
  if (kind != V_ALLGATHERV && (root < 0 || root >= size)) return pass(c, WHY_ARGUMENT);
  /* The counts array's type: the receive type (allgatherv, gatherv) or send type (scatterv). */
  MPI_Datatype vtype = kind == V_SCATTERV ? stype : rtype;
  int knows = kind == V_ALLGATHERV || rank == root; /* this rank has the counts */
  uint64_t *bytes = calloc((size_t)size + 1, sizeof *bytes);
  size_t *cbytes = calloc((size_t)size, sizeof *cbytes);
  if (!bytes || !cbytes) {
    free(bytes);
    free(cbytes);
    return pass(c, WHY_ARGUMENT);
  }
  int valid = 1;
  uint64_t total = 0;
  if (knows) {
    for (int j = 0; j < size && valid; j++) {
      valid = type_bytes(vtype, counts[j], &bytes[j]) && bytes[j] <= INT64_MAX - total;
      if (valid) total += bytes[j];
    }
    valid = valid && packable(total);
  }
  int rc;
  if (kind == V_ALLGATHERV) {
    if (!valid) {
      rc = pass(c, packable(total) ? WHY_ARGUMENT : WHY_SIZE);
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
      rc = pass(c, WHY_THRESHOLD);
      goto out;
    }
    c->m = mirror_of(c->comm);
    if (!usable(c)) {
      rc = PASS;
      goto out;
    }
    if (rank == root) {
      enum reason why = WHY_SERVED;
      if (!valid) why = packable(total) ? WHY_ARGUMENT : WHY_SIZE;
      else if (g_mode == MODE_AUTO && !in_ranges(c, total)) why = WHY_THRESHOLD;
      bytes[size] = (uint64_t)why;
    }
    struct ccall decision = {.op = OP_BCAST, .recv = bytes,
                             .bytes = ((size_t)size + 1) * sizeof *bytes, .root = root};
    int crc = run_now(c, &decision);
    if (crc != CIRCULANT_SUCCESS) {
      rc = failed(c, crc);
      goto out;
    }
    if (bytes[size] != WHY_SERVED) {
      rc = pass(c, bytes[size] < WHY_COUNT ? (enum reason)bytes[size] : WHY_ARGUMENT);
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
  unsigned char *area = direct ? (total ? (unsigned char *)(kind == V_SCATTERV ? (void *)sendbuf : recvbuf) : g_empty)
                               : (packed ? packed : g_empty);
  switch (kind) {
  case V_ALLGATHERV: {
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
  case V_GATHERV: {
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
  default: /* V_SCATTERV */
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
int allgatherv_outside(struct call *c, const void *counts, int large, MPI_Datatype type) {
  MPI_Count size;
  int n;
  if (g_mode != MODE_AUTO || PMPI_Type_size_x(type, &size) != MPI_SUCCESS || size < 0 ||
      PMPI_Comm_size(c->comm, &n) != MPI_SUCCESS)
    return 0;
  uint64_t total = 0;
  for (int j = 0; j < n; j++) {
    MPI_Count count = large ? ((const MPI_Count *)counts)[j] : ((const int *)counts)[j];
    if (count < 0 || (size && (uint64_t)count > (UINT64_MAX / 2 - total) / (uint64_t)size)) return 0;
    total += (uint64_t)count * (uint64_t)size;
  }
  if (in_ranges(c, total)) return 0;
  pass(c, WHY_THRESHOLD);
  return 1;
}

/* ---------------------------------------------------------------- init and finalize */

static void start(int provided) {
  read_settings();
  g_threads = provided == MPI_THREAD_MULTIPLE;
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_mirror, &g_comm_keyval, NULL);
  g_active = 1;
  /* circulant starts with the job: MPI_COMM_WORLD's communicator is made now. */
  if (g_mode != MODE_OFF && !g_threads) {
    struct mirror *w = mirror_of(MPI_COMM_WORLD);
    if (!w->cc && w->rank == 0)
      fprintf(stderr, "circulant-mpi: circulant did not start; every collective goes to MPI\n");
  }
}

int MPI_Init(int *argc, char ***argv) {
  int rc = PMPI_Init(argc, argv);
  if (rc != MPI_SUCCESS) return rc;
  int provided = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&provided);
  start(provided);
  return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc != MPI_SUCCESS) return rc;
  start(*provided);
  return rc;
}

/* The MPI name of collective `op` in `variant`: MPI_Bcast, MPI_Ibcast_c, MPI_Bcast_init, ... */
static void variant_name(char *out, size_t cap, int op, int variant) {
  const char *name = mpi_names[op] + 4; /* after "MPI_" */
  const char *large = variant_large(variant) ? "_c" : "";
  if (variant == VAR_NB || variant == VAR_NB_C)
    snprintf(out, cap, "MPI_I%c%s%s", name[0] - 'A' + 'a', name + 1, large);
  else
    snprintf(out, cap, "MPI_%s%s%s", name, variant >= VAR_INIT ? "_init" : "", large);
}

static void print_stats(void) {
  unsigned long long total[OP_COUNT][VAR_COUNT][WHY_COUNT];
  int rank;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Reduce(g_stats, total, OP_COUNT * VAR_COUNT * WHY_COUNT, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
              MPI_COMM_WORLD);
  if (rank != 0) return;
  const char *mode = g_mode == MODE_OFF ? "off" : g_mode == MODE_ON ? "on" : "auto";
  fprintf(stderr, "circulant-mpi: stats (%s, CIRCULANT_MPI=%s, thresholds %s; calls summed over the ranks)\n",
          LAYER_MPI, mode, g_threshold_source);
  for (int op = 0; op < OP_COUNT; op++)
    for (int v = 0; v < VAR_COUNT; v++) {
      unsigned long long passed = 0;
      for (int w = 1; w < WHY_COUNT; w++) passed += total[op][v][w];
      if (!passed && !total[op][v][WHY_SERVED]) continue;
      char reasons[512] = "";
      size_t at = 0;
      for (int w = 1; w < WHY_COUNT; w++)
        if (total[op][v][w] && at < sizeof reasons)
          at += (size_t)snprintf(reasons + at, sizeof reasons - at, " %s=%llu", why_names[w],
                                 total[op][v][w]);
      char name[64];
      variant_name(name, sizeof name, op, v);
      fprintf(stderr, "circulant-mpi: %s served %llu passed %llu%s\n", name,
              total[op][v][WHY_SERVED], passed, reasons);
    }
  fflush(stderr);
}

int MPI_Finalize(void) {
  if (g_active) {
    if (g_print_stats) print_stats();
    /* Requests the program left: completed, then released before their communicators. */
    requests_finalize();
    g_active = 0;
    /* Releases what the program did not free, MPI_COMM_WORLD's communicator included. */
    while (g_mirrors) {
      struct mirror *m = g_mirrors;
      if (PMPI_Comm_delete_attr(m->comm, g_comm_keyval) != MPI_SUCCESS || g_mirrors == m)
        release(m);
    }
    PMPI_Comm_free_keyval(&g_comm_keyval);
  }
  return PMPI_Finalize();
}
