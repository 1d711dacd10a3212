/* circulant-mpi: the MPI profiling-interface layer.
 *
 * Loaded before the MPI library (LD_PRELOAD, or linked ahead of it), it defines the MPI
 * collectives listed in `struct op_name` below and serves them with circulant where it can
 * and where the thresholds say circulant is faster; every other call, and every call it does
 * not serve, goes to the PMPI_ function unchanged.
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
#include <mpi.h>

#include <circulant.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(OPEN_MPI)
#define LAYER_MPI "openmpi"
#elif defined(MPICH)
#define LAYER_MPI "mpich"
#else
#define LAYER_MPI "mpi"
#endif

/* MPI-4 large-count forms (MPI_Bcast_c, ...) where the MPI declares them. */
#if defined(MPI_VERSION) && MPI_VERSION >= 4
#define LAYER_LARGE_COUNT 1
#else
#define LAYER_LARGE_COUNT 0
#endif

/* MPI 3 has no PMPI_Pack_c: packing there is limited to int sizes. */
#define PASS (-1)

/* ---------------------------------------------------------------- collectives, reasons */

enum op {
  OP_BARRIER,
  OP_BCAST,
  OP_ALLGATHER,
  OP_ALLGATHERV,
  OP_ALLREDUCE,
  OP_REDUCE,
  OP_GATHER,
  OP_GATHERV,
  OP_SCATTER,
  OP_SCATTERV,
  OP_ALLTOALL,
  OP_SCAN,
  OP_EXSCAN,
  OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
    "barrier", "bcast",    "allgather", "allgatherv", "allreduce", "reduce", "gather",
    "gatherv", "scatter", "scatterv",  "alltoall",   "scan",      "exscan"};

static const char *const mpi_names[OP_COUNT] = {
    "MPI_Barrier", "MPI_Bcast",    "MPI_Allgather", "MPI_Allgatherv", "MPI_Allreduce",
    "MPI_Reduce",  "MPI_Gather",   "MPI_Gatherv",   "MPI_Scatter",    "MPI_Scatterv",
    "MPI_Alltoall", "MPI_Scan",    "MPI_Exscan"};

enum reason {
  WHY_SERVED,
  WHY_OFF,             /* CIRCULANT_MPI=off */
  WHY_THREADS,         /* MPI_THREAD_MULTIPLE */
  WHY_INTER,           /* an intercommunicator */
  WHY_THRESHOLD,       /* below the threshold (auto) */
  WHY_DATATYPE,        /* a reduction's datatype circulant has no type for */
  WHY_OPERATION,       /* a user-defined operation or one circulant lacks */
  WHY_ARGUMENT,        /* an argument MPI must judge (negative count, bad root, NULL comm) */
  WHY_SIZE,            /* too large to pack with this MPI (int sizes) */
  WHY_START,           /* circulant could not start on this communicator */
  WHY_FAILED,          /* circulant failed on this communicator before */
  WHY_INACTIVE,        /* outside MPI_Init .. MPI_Finalize */
  WHY_COUNT
};

static const char *const why_names[WHY_COUNT] = {
    "served",          "off",        "thread-multiple",       "intercommunicator",
    "below-threshold", "datatype",   "operation",             "argument",
    "too-large",       "start-failed", "failed-before",       "outside-init"};

/* Calls per collective (classic and large-count form) and reason, this rank. */
static unsigned long long g_stats[OP_COUNT][2][WHY_COUNT];

/* ---------------------------------------------------------------- settings */

enum mode { MODE_OFF, MODE_ON, MODE_AUTO };
static enum mode g_mode = MODE_AUTO;
static int g_print_stats;
static int g_active;       /* between our MPI_Init and MPI_Finalize */
static int g_threads;      /* MPI_THREAD_MULTIPLE was given */
static int g_comm_keyval = MPI_KEYVAL_INVALID;

#define NEVER UINT64_MAX
/* Per collective: the byte ranges auto serves, [from, to] each (to NEVER: no end); none: no
 * call. */
enum { MAX_RANGES = 16 };
struct ranges {
  int n;
  uint64_t from[MAX_RANGES], to[MAX_RANGES];
};
static struct ranges g_threshold[OP_COUNT];

/* Whether auto serves a call of `bytes` bytes of collective `op`. */
static int in_ranges(int op, uint64_t bytes) {
  const struct ranges *r = &g_threshold[op];
  for (int i = 0; i < r->n; i++)
    if (bytes >= r->from[i] && bytes <= r->to[i]) return 1;
  return 0;
}
static const char *g_threshold_source = "built-in (mpi/thresholds-" LAYER_MPI ".txt)";

/* Built-in thresholds: the file mpi/thresholds-MPI.txt that circulant-mpi-calibrate wrote on
 * the 2-core machine of docs/performance.md, compiled in by ci/mpi-layer as the string
 * LAYER_THRESHOLDS (in the same format as a CIRCULANT_MPI_THRESHOLDS file). */
#ifndef LAYER_THRESHOLDS
#error "build with ci/mpi-layer, which defines LAYER_THRESHOLDS from mpi/thresholds-MPI.txt"
#endif

static void die(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "circulant-mpi: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\n");
  PMPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

/* One byte count of a thresholds line; dies naming `where` unless `text` is one. */
static uint64_t parse_bytes(const char *text, const char *where) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || *end || !*text || text[0] == '-' || text[0] == '+' || v == NEVER)
    die("%s: `%s` is not a byte count", where, text);
  return v;
}

/* Thresholds text: lines `COLLECTIVE RANGE...` or `COLLECTIVE never`, `#` comments, where a
 * range is `A-B` (A to B bytes), `A-` or `A` (A bytes and more); each line sets the ranges of
 * its collective. `source` names the text in messages. */
static void parse_thresholds(const char *text, const char *source) {
  int number = 0;
  while (*text) {
    char line[512];
    size_t len = strcspn(text, "\n");
    number++;
    if (len >= sizeof line) {
      char where[600];
      snprintf(where, sizeof where, "%s line %d", source, number);
      die("%s: a line longer than 511 characters%s", where, "");
    }
    memcpy(line, text, len);
    line[len] = 0;
    text += len + (text[len] == '\n');
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char *save = NULL, *name = strtok_r(line, " \t\r", &save);
    if (!name) continue;
    char where[600];
    snprintf(where, sizeof where, "%s line %d", source, number);
    int op = -1;
    for (int i = 0; i < OP_COUNT; i++)
      if (strcmp(name, op_names[i]) == 0) op = i;
    if (op < 0) die("%s: unknown collective `%s`", where, name);
    struct ranges r = {0};
    int never = 0, words = 0;
    for (char *w = strtok_r(NULL, " \t\r", &save); w; w = strtok_r(NULL, " \t\r", &save)) {
      words++;
      if (strcmp(w, "never") == 0) {
        never = 1;
        continue;
      }
      if (r.n == MAX_RANGES) die("%s: more than 16 ranges%s", where, "");
      char range[64];
      snprintf(range, sizeof range, "%s", w);
      char *dash = strchr(w, '-');
      if (dash) *dash = 0;
      r.from[r.n] = parse_bytes(w, where);
      r.to[r.n] = dash && dash[1] ? parse_bytes(dash + 1, where) : NEVER;
      if (r.to[r.n] < r.from[r.n]) die("%s: `%s`, a range that ends before it begins", where, range);
      r.n++;
    }
    if (words == 0 || (never && words != 1))
      die("%s: expected `COLLECTIVE never` or `COLLECTIVE` and byte ranges (`A-B`, `A-`, `A`)%s",
          where, "");
    g_threshold[op] = r;
  }
}

static void read_thresholds(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) die("cannot read CIRCULANT_MPI_THRESHOLDS=%s: %s", path, strerror(errno));
  size_t cap = 4096, len = 0;
  char *text = malloc(cap);
  while (text) {
    size_t got = fread(text + len, 1, cap - len - 1, f);
    len += got;
    if (got == 0) break;
    if (len + 1 == cap) text = realloc(text, cap *= 2);
  }
  int failed = ferror(f);
  fclose(f);
  if (!text || failed) die("cannot read CIRCULANT_MPI_THRESHOLDS=%s%s", path, "");
  text[len] = 0;
  if (strlen(text) != len) die("CIRCULANT_MPI_THRESHOLDS=%s: not a text file%s", path, "");
  parse_thresholds(text, path);
  free(text);
  g_threshold_source = path;
}

static void read_settings(void) {
  const char *mode = getenv("CIRCULANT_MPI");
  if (!mode || !*mode || strcmp(mode, "auto") == 0)
    g_mode = MODE_AUTO;
  else if (strcmp(mode, "on") == 0)
    g_mode = MODE_ON;
  else if (strcmp(mode, "off") == 0)
    g_mode = MODE_OFF;
  else
    die("CIRCULANT_MPI=%s: expected off, on or auto%s", mode, "");
  const char *stats = getenv("CIRCULANT_MPI_STATS");
  if (stats && *stats) {
    if (strcmp(stats, "1") == 0)
      g_print_stats = 1;
    else if (strcmp(stats, "0") != 0)
      die("CIRCULANT_MPI_STATS=%s: expected 0 or 1%s", stats, "");
  }
  for (int i = 0; i < OP_COUNT; i++) g_threshold[i].n = 0;
  parse_thresholds(LAYER_THRESHOLDS, "the built-in thresholds");
  const char *file = getenv("CIRCULANT_MPI_THRESHOLDS");
  if (file && *file) read_thresholds(file);
}

/* ---------------------------------------------------------------- communicators */

struct mirror {
  circulant_comm *cc; /* NULL: circulant could not start on this communicator */
  int failed;         /* a call failed: the communicator is given up */
  int rank, size;
  MPI_Comm comm;
  struct mirror *prev, *next;
};

static struct mirror *g_mirrors; /* every live mirror, released at MPI_Finalize */

static int oob_allgather(const void *send, void *recv, size_t bytes, void *ctx) {
  MPI_Comm comm = *(MPI_Comm *)ctx;
  if (bytes > INT_MAX) return -1;
  return PMPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, comm);
}

static void release(struct mirror *m) {
  if (m->prev)
    m->prev->next = m->next;
  else if (g_mirrors == m)
    g_mirrors = m->next;
  if (m->next) m->next->prev = m->prev;
  if (m->cc) circulant_finalize(m->cc);
  free(m);
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

struct call {
  enum op op;
  int large;
  MPI_Comm comm;
  struct mirror *m;
};

static int pass(struct call *c, enum reason why) {
  g_stats[c->op][c->large][why]++;
  return PASS;
}

/* Whether `comm` may be served at all; PASS (with its reason counted) if not. */
static int begin(struct call *c, enum op op, int large, MPI_Comm comm) {
  c->op = op;
  c->large = large;
  c->comm = comm;
  c->m = NULL;
  if (!g_active) return pass(c, WHY_INACTIVE);
  if (g_mode == MODE_OFF) return pass(c, WHY_OFF);
  if (g_threads) return pass(c, WHY_THREADS);
  if (comm == MPI_COMM_NULL) return pass(c, WHY_ARGUMENT);
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return pass(c, WHY_ARGUMENT);
  if (inter) return pass(c, WHY_INTER);
  return 0;
}

/* The threshold, then the communicator's mirror: 0 to serve, else PASS. */
static int decide(struct call *c, uint64_t bytes) {
  if (g_mode == MODE_AUTO && !in_ranges(c->op, bytes))
    return pass(c, WHY_THRESHOLD);
  c->m = mirror_of(c->comm);
  if (!c->m->cc) return pass(c, WHY_START);
  if (c->m->failed) return pass(c, WHY_FAILED);
  return 0;
}

static int error_classes[CIRCULANT_ERR_INTERNAL + 1];

/* A failed circulant call, to the communicator's error handler. */
static int failed(struct call *c, int rc) {
  char message[1200];
  snprintf(message, sizeof message, "circulant %s (%s): %s", op_names[c->op],
           circulant_strerror(rc), circulant_last_error(c->m->cc));
  c->m->failed = 1;
  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  PMPI_Comm_get_errhandler(c->comm, &handler);
  int fatal = handler == MPI_ERRORS_ARE_FATAL;
#if LAYER_LARGE_COUNT && defined(MPI_ERRORS_ABORT)
  fatal = fatal || handler == MPI_ERRORS_ABORT;
#endif
  if (handler != MPI_ERRHANDLER_NULL) PMPI_Errhandler_free(&handler);
  if (fatal) {
    fprintf(stderr, "circulant-mpi: rank %d: %s\n", c->m->rank, message);
    fflush(stderr);
    PMPI_Abort(c->comm, 1);
  }
  int slot = rc >= 0 && rc <= CIRCULANT_ERR_INTERNAL ? rc : CIRCULANT_ERR_INTERNAL;
  if (!error_classes[slot] && PMPI_Add_error_class(&error_classes[slot]) != MPI_SUCCESS)
    error_classes[slot] = MPI_ERR_OTHER;
  int code = error_classes[slot];
  if (code != MPI_ERR_OTHER) PMPI_Add_error_string(code, message);
  PMPI_Comm_call_errhandler(c->comm, code);
  return code;
}

static int done(struct call *c, int rc) {
  if (rc != CIRCULANT_SUCCESS) return failed(c, rc);
  g_stats[c->op][c->large][WHY_SERVED]++;
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

/* One side of a call: `count` elements of `type` at `buf`, seen by circulant as `bytes`
 * contiguous bytes at `at` (the buffer itself, or a packed copy). */
struct side {
  void *buf;
  MPI_Count count;
  MPI_Datatype type;
  uint64_t bytes;
  void *at;
  void *tmp;
};

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

enum reducing { RED_ALL, RED_ROOT, RED_SCAN, RED_EXSCAN };

static int serve_reduce(struct call *c, enum reducing which, const void *send, void *recv,
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
  int rc;
  switch (which) {
  case RED_ALL:
    rc = circulant_allreduce(c->m->cc, s, r, (size_t)count, dtype, cop);
    break;
  case RED_ROOT:
    if (c->m->rank != root) r = NULL;
    rc = circulant_reduce(c->m->cc, s, r, (size_t)count, dtype, cop, root);
    break;
  case RED_SCAN:
    rc = circulant_scan(c->m->cc, s, r, (size_t)count, dtype, cop);
    break;
  default:
    rc = circulant_exscan(c->m->cc, s, r, (size_t)count, dtype, cop);
    break;
  }
  return done(c, rc);
}

/* ---------------------------------------------------------------- data movement */

static int serve_barrier(struct call *c) {
  if (decide(c, 0)) return PASS;
  return done(c, circulant_barrier(c->m->cc));
}

static int serve_bcast(struct call *c, void *buf, MPI_Count count, MPI_Datatype type, int root) {
  int size;
  PMPI_Comm_size(c->comm, &size);
  /* Outside the ranges a call passes before its datatype is looked at: a passed call costs
   * next to nothing. */
  uint64_t bytes;
  if (g_mode == MODE_AUTO && type_bytes(type, count, &bytes) && !in_ranges(c->op, bytes))
    return pass(c, WHY_THRESHOLD);
  struct side s;
  if (!side_of(&s, buf, count, type) || root < 0 || root >= size) return pass(c, WHY_ARGUMENT);
  if (!packable(s.bytes)) return pass(c, WHY_SIZE);
  if (decide(c, s.bytes)) return PASS;
  int rank = c->m->rank;
  int rc = side_open(&s, rank == root, c->comm);
  if (rc != MPI_SUCCESS) return side_close(&s, 0, rc, c->comm);
  int crc = circulant_bcast(c->m->cc, s.at, s.bytes, root);
  return side_close(&s, rank != root, done(c, crc), c->comm);
}

/* Allgather, gather, scatter, alltoall: blocks of `block` bytes, `size` of them. */
enum blocks { BL_ALLGATHER, BL_GATHER, BL_SCATTER, BL_ALLTOALL };

static int serve_blocks(struct call *c, enum blocks kind, const void *sendbuf, MPI_Count scount,
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
  int rc = MPI_SUCCESS, crc;
  MPI_Aint rext = type_extent(rtype);
  switch (kind) {
  case BL_ALLGATHER:
    side_of(&r, recvbuf, rcount * size, rtype);
    if (sendbuf == MPI_IN_PLACE) {
      if ((rc = side_open(&r, 1, c->comm)) != MPI_SUCCESS) break;
      crc = circulant_allgather(c->m->cc, CIRCULANT_IN_PLACE, block, r.at);
    } else {
      side_of(&s, sendbuf, scount, stype);
      if ((rc = side_open(&s, 1, c->comm)) != MPI_SUCCESS) break;
      if ((rc = side_open(&r, 0, c->comm)) != MPI_SUCCESS) break;
      crc = circulant_allgather(c->m->cc, s.at, block, r.at);
    }
    rc = side_close(&r, 1, done(c, crc), c->comm);
    break;
  case BL_ALLTOALL:
    side_of(&r, recvbuf, rcount * size, rtype);
    if (sendbuf == MPI_IN_PLACE) {
      /* The input is the receive buffer: a copy of it is the send side. */
      side_of(&s, recvbuf, rcount * size, rtype);
      s.tmp = malloc(total ? total : 1);
      if (!s.tmp) {
        rc = MPI_ERR_NO_MEM;
        break;
      }
      s.at = s.tmp;
      if (total && (rc = pack_into(s.tmp, total, recvbuf, rcount * size, rtype, c->comm)) != MPI_SUCCESS)
        break;
    } else {
      side_of(&s, sendbuf, scount * size, stype);
      if ((rc = side_open(&s, 1, c->comm)) != MPI_SUCCESS) break;
    }
    if ((rc = side_open(&r, 0, c->comm)) != MPI_SUCCESS) break;
    crc = circulant_alltoall(c->m->cc, s.at, r.at, block);
    rc = side_close(&r, 1, done(c, crc), c->comm);
    break;
  case BL_GATHER:
    if (rank == root) {
      side_of(&r, recvbuf, rcount * size, rtype);
      if ((rc = side_open(&r, 0, c->comm)) != MPI_SUCCESS) break;
      if (sendbuf == MPI_IN_PLACE) {
        /* The root's block is in place: circulant takes it from a copy. */
        s.tmp = malloc(block ? block : 1);
        if (!s.tmp) {
          rc = MPI_ERR_NO_MEM;
          break;
        }
        s.at = s.tmp;
        if (block &&
            (rc = pack_into(s.tmp, block, (char *)recvbuf + (MPI_Aint)root * rcount * rext, rcount,
                            rtype, c->comm)) != MPI_SUCCESS)
          break;
      } else {
        side_of(&s, sendbuf, scount, stype);
        if ((rc = side_open(&s, 1, c->comm)) != MPI_SUCCESS) break;
      }
    } else {
      side_of(&s, sendbuf, scount, stype);
      if ((rc = side_open(&s, 1, c->comm)) != MPI_SUCCESS) break;
      r.at = NULL;
    }
    crc = circulant_gather(c->m->cc, s.at, block, rank == root ? r.at : g_empty, root);
    rc = side_close(&r, rank == root, done(c, crc), c->comm);
    break;
  default: /* BL_SCATTER */
    if (rank == root) {
      side_of(&s, sendbuf, scount * size, stype);
      if ((rc = side_open(&s, 1, c->comm)) != MPI_SUCCESS) break;
      if (recvbuf == MPI_IN_PLACE) {
        r.tmp = malloc(block ? block : 1); /* the root's own block stays where it is */
        if (!r.tmp) {
          rc = MPI_ERR_NO_MEM;
          break;
        }
        r.at = r.tmp;
        crc = circulant_scatter(c->m->cc, s.at, r.at, block, root);
        free(r.tmp);
        r.tmp = NULL;
        rc = done(c, crc);
        break;
      }
    } else {
      s.at = g_empty;
    }
    side_of(&r, recvbuf, rcount, rtype);
    if ((rc = side_open(&r, 0, c->comm)) != MPI_SUCCESS) break;
    crc = circulant_scatter(c->m->cc, s.at, r.at, block, root);
    rc = side_close(&r, 1, done(c, crc), c->comm);
    break;
  }
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

enum vkind { V_ALLGATHERV, V_GATHERV, V_SCATTERV };

static int serve_v(struct call *c, enum vkind kind, const void *sendbuf, MPI_Count scount,
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
    if (g_mode == MODE_AUTO && g_threshold[c->op].n == 0) {
      rc = pass(c, WHY_THRESHOLD);
      goto out;
    }
    c->m = mirror_of(c->comm);
    if (!c->m->cc || c->m->failed) {
      rc = pass(c, c->m->cc ? WHY_FAILED : WHY_START);
      goto out;
    }
    if (rank == root) {
      enum reason why = WHY_SERVED;
      if (!valid) why = packable(total) ? WHY_ARGUMENT : WHY_SIZE;
      else if (g_mode == MODE_AUTO && !in_ranges(c->op, total)) why = WHY_THRESHOLD;
      bytes[size] = (uint64_t)why;
    }
    int crc = circulant_bcast(c->m->cc, bytes, ((size_t)size + 1) * sizeof *bytes, root);
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
  case V_ALLGATHERV:
    if (sendbuf == MPI_IN_PLACE) {
      if (!direct && (rc = blocks_copy(1, area, bytes, size, recvbuf, counts, displs, rtype, -1,
                                       c->comm)) != MPI_SUCCESS)
        break;
      crc = circulant_allgatherv(c->m->cc, CIRCULANT_IN_PLACE, cbytes[rank], area, cbytes);
    } else {
      side_of(&own, sendbuf, scount, stype);
      if ((rc = side_open(&own, 1, c->comm)) != MPI_SUCCESS) break;
      crc = circulant_allgatherv(c->m->cc, own.at, own.bytes, area, cbytes);
      side_close(&own, 0, MPI_SUCCESS, c->comm);
    }
    rc = done(c, crc);
    if (rc == MPI_SUCCESS && !direct)
      rc = blocks_copy(0, area, bytes, size, recvbuf, counts, displs, rtype,
                       sendbuf == MPI_IN_PLACE ? rank : -1, c->comm);
    break;
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
      crc = circulant_gatherv(c->m->cc, mine, cbytes[rank], area, cbytes, root);
      free(mine_copy);
    } else {
      side_of(&own, sendbuf, scount, stype);
      if ((rc = side_open(&own, 1, c->comm)) != MPI_SUCCESS) break;
      crc = circulant_gatherv(c->m->cc, own.at, own.bytes, rank == root ? area : g_empty, cbytes,
                              root);
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
      crc = circulant_scatterv(c->m->cc, area, cbytes, scratch, cbytes[rank], root);
      free(scratch);
      rc = done(c, crc);
    } else {
      side_of(&own, recvbuf, rcount, rtype);
      if ((rc = side_open(&own, 0, c->comm)) != MPI_SUCCESS) break;
      crc = circulant_scatterv(c->m->cc, rank == root ? area : g_empty, cbytes, own.at,
                               own.bytes, root);
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

/* int counts and displacements as MPI_Count and MPI_Aint (NULL where not significant). */
struct varrays {
  MPI_Count *counts;
  MPI_Aint *displs;
};

/* In auto mode, whether an allgatherv's bytes (its counts, of `int`s or of `MPI_Count`s where
 * `large`, times the size of `type`) fall outside its ranges: then it passes (counted) before
 * its arrays are copied or checked, so that a passed call costs a sum. Undecided (0) where a
 * count or size is out of the ordinary: the full path checks those. */
static int allgatherv_outside(struct call *c, const void *counts, int large, MPI_Datatype type) {
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
  if (in_ranges(c->op, total)) return 0;
  pass(c, WHY_THRESHOLD);
  return 1;
}

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

static void print_stats(void) {
  unsigned long long total[OP_COUNT][2][WHY_COUNT];
  int rank;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Reduce(g_stats, total, OP_COUNT * 2 * WHY_COUNT, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
              MPI_COMM_WORLD);
  if (rank != 0) return;
  const char *mode = g_mode == MODE_OFF ? "off" : g_mode == MODE_ON ? "on" : "auto";
  fprintf(stderr, "circulant-mpi: stats (%s, CIRCULANT_MPI=%s, thresholds %s; calls summed over the ranks)\n",
          LAYER_MPI, mode, g_threshold_source);
  for (int op = 0; op < OP_COUNT; op++)
    for (int large = 0; large < 2; large++) {
      unsigned long long passed = 0;
      for (int w = 1; w < WHY_COUNT; w++) passed += total[op][large][w];
      if (!passed && !total[op][large][WHY_SERVED]) continue;
      char reasons[512] = "";
      size_t at = 0;
      for (int w = 1; w < WHY_COUNT; w++)
        if (total[op][large][w] && at < sizeof reasons)
          at += (size_t)snprintf(reasons + at, sizeof reasons - at, " %s=%llu", why_names[w],
                                 total[op][large][w]);
      fprintf(stderr, "circulant-mpi: %s%s served %llu passed %llu%s\n", mpi_names[op],
              large ? "_c" : "", total[op][large][WHY_SERVED], passed, reasons);
    }
  fflush(stderr);
}

int MPI_Finalize(void) {
  if (g_active) {
    if (g_print_stats) print_stats();
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

/* ---------------------------------------------------------------- the MPI entry points */

int MPI_Barrier(MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_BARRIER, 0, comm);
  if (rc != PASS) rc = serve_barrier(&c);
  return rc == PASS ? PMPI_Barrier(comm) : rc;
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_BCAST, 0, comm);
  if (rc != PASS) rc = serve_bcast(&c, buf, count, type, root);
  return rc == PASS ? PMPI_Bcast(buf, count, type, root, comm) : rc;
}

int MPI_Allgather(const void *sb, int sc, MPI_Datatype st, void *rb, int rcount,
                  MPI_Datatype rt, MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_ALLGATHER, 0, comm);
  if (rc != PASS) rc = serve_blocks(&c, BL_ALLGATHER, sb, sc, st, rb, rcount, rt, 0);
  return rc == PASS ? PMPI_Allgather(sb, sc, st, rb, rcount, rt, comm) : rc;
}

int MPI_Gather(const void *sb, int sc, MPI_Datatype st, void *rb, int rcount, MPI_Datatype rt,
               int root, MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_GATHER, 0, comm);
  if (rc != PASS) rc = serve_blocks(&c, BL_GATHER, sb, sc, st, rb, rcount, rt, root);
  return rc == PASS ? PMPI_Gather(sb, sc, st, rb, rcount, rt, root, comm) : rc;
}

int MPI_Scatter(const void *sb, int sc, MPI_Datatype st, void *rb, int rcount, MPI_Datatype rt,
                int root, MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_SCATTER, 0, comm);
  if (rc != PASS) rc = serve_blocks(&c, BL_SCATTER, sb, sc, st, rb, rcount, rt, root);
  return rc == PASS ? PMPI_Scatter(sb, sc, st, rb, rcount, rt, root, comm) : rc;
}

int MPI_Alltoall(const void *sb, int sc, MPI_Datatype st, void *rb, int rcount, MPI_Datatype rt,
                 MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_ALLTOALL, 0, comm);
  if (rc != PASS) rc = serve_blocks(&c, BL_ALLTOALL, sb, sc, st, rb, rcount, rt, 0);
  return rc == PASS ? PMPI_Alltoall(sb, sc, st, rb, rcount, rt, comm) : rc;
}

int MPI_Allgatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int rcounts[],
                   const int displs[], MPI_Datatype rt, MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_ALLGATHERV, 0, comm);
  if (rc != PASS && rcounts && displs && allgatherv_outside(&c, rcounts, 0, rt)) rc = PASS;
  if (rc != PASS) {
    struct varrays v;
    if (!rcounts || !displs || !widen(&v, comm, rcounts, displs))
      rc = pass(&c, WHY_ARGUMENT);
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
  struct call c;
  int rc = begin(&c, OP_GATHERV, 0, comm);
  if (rc != PASS) {
    struct varrays v = {NULL, NULL};
    int root_here = is_root(comm, root);
    if (root_here && (!rcounts || !displs || !widen(&v, comm, rcounts, displs)))
      rc = pass(&c, WHY_ARGUMENT); /* (a bad root's arguments: MPI reports it) */
    else
      rc = serve_v(&c, V_GATHERV, sb, sc, st, rb, v.counts, v.displs, 0, rt, root);
    unwiden(&v);
  }
  return rc == PASS ? PMPI_Gatherv(sb, sc, st, rb, rcounts, displs, rt, root, comm) : rc;
}

int MPI_Scatterv(const void *sb, const int scounts[], const int displs[], MPI_Datatype st,
                 void *rb, int rcount, MPI_Datatype rt, int root, MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_SCATTERV, 0, comm);
  if (rc != PASS) {
    struct varrays v = {NULL, NULL};
    int root_here = is_root(comm, root);
    if (root_here && (!scounts || !displs || !widen(&v, comm, scounts, displs)))
      rc = pass(&c, WHY_ARGUMENT);
    else
      rc = serve_v(&c, V_SCATTERV, sb, 0, st, rb, v.counts, v.displs, rcount, rt, root);
    unwiden(&v);
  }
  return rc == PASS ? PMPI_Scatterv(sb, scounts, displs, st, rb, rcount, rt, root, comm) : rc;
}

int MPI_Allreduce(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_ALLREDUCE, 0, comm);
  if (rc != PASS) rc = serve_reduce(&c, RED_ALL, sb, rb, count, t, op, 0);
  return rc == PASS ? PMPI_Allreduce(sb, rb, count, t, op, comm) : rc;
}

int MPI_Reduce(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, int root,
               MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_REDUCE, 0, comm);
  if (rc != PASS) rc = serve_reduce(&c, RED_ROOT, sb, rb, count, t, op, root);
  return rc == PASS ? PMPI_Reduce(sb, rb, count, t, op, root, comm) : rc;
}

int MPI_Scan(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_SCAN, 0, comm);
  if (rc != PASS) rc = serve_reduce(&c, RED_SCAN, sb, rb, count, t, op, 0);
  return rc == PASS ? PMPI_Scan(sb, rb, count, t, op, comm) : rc;
}

int MPI_Exscan(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_EXSCAN, 0, comm);
  if (rc != PASS) rc = serve_reduce(&c, RED_EXSCAN, sb, rb, count, t, op, 0);
  return rc == PASS ? PMPI_Exscan(sb, rb, count, t, op, comm) : rc;
}

#if LAYER_LARGE_COUNT
/* ---------------------------------------------------------------- MPI-4 large counts */

int MPI_Bcast_c(void *buf, MPI_Count count, MPI_Datatype type, int root, MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_BCAST, 1, comm);
  if (rc != PASS) rc = serve_bcast(&c, buf, count, type, root);
  return rc == PASS ? PMPI_Bcast_c(buf, count, type, root, comm) : rc;
}

int MPI_Allgather_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb, MPI_Count rcount,
                    MPI_Datatype rt, MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_ALLGATHER, 1, comm);
  if (rc != PASS) rc = serve_blocks(&c, BL_ALLGATHER, sb, sc, st, rb, rcount, rt, 0);
  return rc == PASS ? PMPI_Allgather_c(sb, sc, st, rb, rcount, rt, comm) : rc;
}

int MPI_Gather_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb, MPI_Count rcount,
                 MPI_Datatype rt, int root, MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_GATHER, 1, comm);
  if (rc != PASS) rc = serve_blocks(&c, BL_GATHER, sb, sc, st, rb, rcount, rt, root);
  return rc == PASS ? PMPI_Gather_c(sb, sc, st, rb, rcount, rt, root, comm) : rc;
}

int MPI_Scatter_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb, MPI_Count rcount,
                  MPI_Datatype rt, int root, MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_SCATTER, 1, comm);
  if (rc != PASS) rc = serve_blocks(&c, BL_SCATTER, sb, sc, st, rb, rcount, rt, root);
  return rc == PASS ? PMPI_Scatter_c(sb, sc, st, rb, rcount, rt, root, comm) : rc;
}

int MPI_Alltoall_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb, MPI_Count rcount,
                   MPI_Datatype rt, MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_ALLTOALL, 1, comm);
  if (rc != PASS) rc = serve_blocks(&c, BL_ALLTOALL, sb, sc, st, rb, rcount, rt, 0);
  return rc == PASS ? PMPI_Alltoall_c(sb, sc, st, rb, rcount, rt, comm) : rc;
}

int MPI_Allgatherv_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb,
                     const MPI_Count rcounts[], const MPI_Aint displs[], MPI_Datatype rt,
                     MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_ALLGATHERV, 1, comm);
  if (rc != PASS && rcounts && displs && allgatherv_outside(&c, rcounts, 1, rt)) rc = PASS;
  if (rc != PASS) {
    if (!rcounts || !displs)
      rc = pass(&c, WHY_ARGUMENT);
    else
      rc = serve_v(&c, V_ALLGATHERV, sb, sc, st, rb, rcounts, displs, 0, rt, 0);
  }
  return rc == PASS ? PMPI_Allgatherv_c(sb, sc, st, rb, rcounts, displs, rt, comm) : rc;
}

int MPI_Gatherv_c(const void *sb, MPI_Count sc, MPI_Datatype st, void *rb,
                  const MPI_Count rcounts[], const MPI_Aint displs[], MPI_Datatype rt, int root,
                  MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_GATHERV, 1, comm);
  if (rc != PASS) {
    if (is_root(comm, root) && (!rcounts || !displs))
      rc = pass(&c, WHY_ARGUMENT);
    else
      rc = serve_v(&c, V_GATHERV, sb, sc, st, rb, rcounts, displs, 0, rt, root);
  }
  return rc == PASS ? PMPI_Gatherv_c(sb, sc, st, rb, rcounts, displs, rt, root, comm) : rc;
}

int MPI_Scatterv_c(const void *sb, const MPI_Count scounts[], const MPI_Aint displs[],
                   MPI_Datatype st, void *rb, MPI_Count rcount, MPI_Datatype rt, int root,
                   MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_SCATTERV, 1, comm);
  if (rc != PASS) {
    if (is_root(comm, root) && (!scounts || !displs))
      rc = pass(&c, WHY_ARGUMENT);
    else
      rc = serve_v(&c, V_SCATTERV, sb, 0, st, rb, scounts, displs, rcount, rt, root);
  }
  return rc == PASS ? PMPI_Scatterv_c(sb, scounts, displs, st, rb, rcount, rt, root, comm) : rc;
}

int MPI_Allreduce_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype t, MPI_Op op,
                    MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_ALLREDUCE, 1, comm);
  if (rc != PASS) rc = serve_reduce(&c, RED_ALL, sb, rb, count, t, op, 0);
  return rc == PASS ? PMPI_Allreduce_c(sb, rb, count, t, op, comm) : rc;
}

int MPI_Reduce_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype t, MPI_Op op, int root,
                 MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_REDUCE, 1, comm);
  if (rc != PASS) rc = serve_reduce(&c, RED_ROOT, sb, rb, count, t, op, root);
  return rc == PASS ? PMPI_Reduce_c(sb, rb, count, t, op, root, comm) : rc;
}

int MPI_Scan_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype t, MPI_Op op,
               MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_SCAN, 1, comm);
  if (rc != PASS) rc = serve_reduce(&c, RED_SCAN, sb, rb, count, t, op, 0);
  return rc == PASS ? PMPI_Scan_c(sb, rb, count, t, op, comm) : rc;
}

int MPI_Exscan_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype t, MPI_Op op,
                 MPI_Comm comm) {
  struct call c;
  int rc = begin(&c, OP_EXSCAN, 1, comm);
  if (rc != PASS) rc = serve_reduce(&c, RED_EXSCAN, sb, rb, count, t, op, 0);
  return rc == PASS ? PMPI_Exscan_c(sb, rb, count, t, op, comm) : rc;
}
#endif
