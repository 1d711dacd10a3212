/* circulant-mpi: the MPI profiling-interface layer.
 *
 * Loaded before the MPI library (LD_PRELOAD, or linked ahead of it), it defines the MPI
 * collectives of collectives.h and serves them with circulant where it can and where the
 * thresholds say circulant is faster; every other call, and every call it does not serve, goes
 * to the PMPI_ function unchanged. This file: communicators and their mirrors, whether a call
 * may be served at all, errors, MPI_Init and MPI_Finalize; serve.c the served calls;
 * datatypes.c the buffers circulant sees; settings.c the settings and thresholds;
 * entry_points.c the entry points; nonblocking.c the nonblocking and persistent calls issued;
 * requests.c the layer's requests and the MPI calls that take requests; point_to_point.c MPI's
 * blocking point-to-point calls while the layer has calls outstanding.
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
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------------------------------------------------------------- collectives, reasons */

const char *const op_names[OP_COUNT] = {
#define COLLECTIVE(Stem, name, OP, SHAPE) [OP] = #name,
#include "collectives.h"
};

static const char *const mpi_names[OP_COUNT] = {
#define COLLECTIVE(Stem, name, OP, SHAPE) [OP] = "MPI_" #Stem,
#include "collectives.h"
};

static const char *const why_names[WHY_COUNT] = {
    "served",          "off",        "thread-multiple",       "intercommunicator",
    "below-threshold", "datatype",   "operation",             "argument",
    "too-large",       "start-failed", "failed-before",       "outside-init",
    "not-mirrored",    "unordered-starts"};

/* Calls per collective, form (enum variant) and reason, this rank. */
unsigned long long g_stats[OP_COUNT][VAR_COUNT][WHY_COUNT];

int g_active;              /* between our MPI_Init and MPI_Finalize */
struct gate g_gate = {.counting = 1}; /* counted until MPI_Init reads the settings */
static int g_threads;      /* MPI_THREAD_MULTIPLE was given */
static int g_comm_keyval = MPI_KEYVAL_INVALID;
static int g_gate_keyval = MPI_KEYVAL_INVALID; /* on a communicator the gate knows */
static int g_world_size;    /* MPI_COMM_WORLD's size, from MPI_Init */

int comm_size(MPI_Comm comm, int *size) {
  if (comm == MPI_COMM_WORLD && g_world_size > 0) {
    *size = g_world_size;
    return 1;
  }
  return PMPI_Comm_size(comm, size) == MPI_SUCCESS;
}

/* ---------------------------------------------------------------- communicators */

static struct mirror *g_mirrors; /* every live mirror, released at MPI_Finalize */
static int g_mirror_count;       /* ... how many */

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
  g_mirror_count--;
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
struct mirror *layer_mirror_of(MPI_Comm comm) {
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
  g_mirror_count++;
  PMPI_Comm_set_attr(comm, g_comm_keyval, m);
  return m;
}

/* A communicator MPI just made: its circulant communicator is made now, while every rank of
 * it is in the call that made it (so that its nonblocking collectives are served from the
 * first), where every rank of it keeps fewer than CIRCULANT_MPI_EAGER circulant
 * communicators besides MPI_COMM_WORLD's (each is an endpoint of its own, which takes
 * milliseconds to make): the ranks agree on that first. Not for MPI_COMM_NULL (a rank outside
 * the new communicator), intercommunicators, or where the layer serves nothing. */
static int mirrored_at_creation(int rc, MPI_Comm *made) {
  if (rc != MPI_SUCCESS || !g_active || g_mode == MODE_OFF || g_threads || !g_eager_comms ||
      !made || *made == MPI_COMM_NULL)
    return rc;
  int inter = 0;
  if (PMPI_Comm_test_inter(*made, &inter) != MPI_SUCCESS || inter) return rc;
  /* MPI_COMM_WORLD's is one of the live ones. */
  int room = g_mirror_count - 1 < g_eager_comms, all = 0;
  if (PMPI_Allreduce(&room, &all, 1, MPI_INT, MPI_MIN, *made) == MPI_SUCCESS && all)
    layer_mirror_of(*made);
  return rc;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *made) {
  return mirrored_at_creation(PMPI_Comm_dup(comm, made), made);
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *made) {
  return mirrored_at_creation(PMPI_Comm_dup_with_info(comm, info, made), made);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *made) {
  return mirrored_at_creation(PMPI_Comm_split(comm, color, key, made), made);
}

int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *made) {
  return mirrored_at_creation(PMPI_Comm_split_type(comm, type, key, info, made), made);
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *made) {
  return mirrored_at_creation(PMPI_Comm_create(comm, group, made), made);
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *made) {
  return mirrored_at_creation(PMPI_Comm_create_group(comm, group, tag, made), made);
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder,
                    MPI_Comm *made) {
  return mirrored_at_creation(PMPI_Cart_create(comm, ndims, dims, periods, reorder, made), made);
}

int MPI_Cart_sub(MPI_Comm comm, const int remain[], MPI_Comm *made) {
  return mirrored_at_creation(PMPI_Cart_sub(comm, remain, made), made);
}

int MPI_Intercomm_merge(MPI_Comm comm, int high, MPI_Comm *made) {
  return mirrored_at_creation(PMPI_Intercomm_merge(comm, high, made), made);
}

/* ---------------------------------------------------------------- one call */

static int pass(struct call *c, enum reason why) {
  count_call(c->op, c->variant, why);
  return PASS;
}

int layer_pass(struct call *c, enum reason why) { return pass(c, why); }

/* Whether `comm` may be served at all; PASS (with its reason counted) if not. */
static int begin(struct call *c, enum op op, int variant, MPI_Comm comm) {
  memset(c, 0, sizeof *c);
  c->op = op;
  c->variant = variant;
  c->comm = comm;
  int size;
  if (gate_classes(comm, variant, &size)) return 0;
  if (!g_active) return pass(c, WHY_INACTIVE);
  if (g_mode == MODE_OFF) return pass(c, WHY_OFF);
  if (g_threads) return pass(c, WHY_THREADS);
  if (comm == MPI_COMM_NULL) return pass(c, WHY_ARGUMENT);
  if (comm == MPI_COMM_WORLD) return 0; /* an intra-communicator: no need to ask */
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return pass(c, WHY_ARGUMENT);
  if (inter) return pass(c, WHY_INTER);
  /* Not from a persistent request's start: the program may have freed its communicator
   * since (MPI lets the request outlive it). MPICH keeps it, and its attributes, for the MPI
   * request the layer's holds; an MPI that ran the delete callbacks at MPI_Comm_free would
   * have the gate learn a handle it could give to another communicator. */
  if (variant < VAR_INIT) gate_learn(comm);
  return 0;
}

/* A communicator the gate knows is being freed: its handle may come back as another. */
static int gate_forget(MPI_Comm comm, int keyval, void *value, void *extra) {
  (void)keyval;
  (void)value;
  (void)extra;
  for (int i = 0; i < GATE_COMMS; i++)
    if (g_gate.comms[i] == comm) g_gate.comms[i] = MPI_COMM_NULL;
  return MPI_SUCCESS;
}

void gate_learn(MPI_Comm comm) {
  int size, at = 0;
  if (!g_gate.open || gate_classes(comm, VAR_BLOCKING, &size)) return;
  while (at < GATE_COMMS && g_gate.comms[at] != MPI_COMM_NULL) at++;
  if (at == GATE_COMMS) return;
  int rank;
  if (PMPI_Comm_size(comm, &size) != MPI_SUCCESS || PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS)
    return;
  /* The attribute tells the gate when the communicator is freed; without it, not learnt. */
  if (PMPI_Comm_set_attr(comm, g_gate_keyval, NULL) != MPI_SUCCESS) return;
  struct gate_comm *k = &g_gate.known[at];
  for (int form = 0; form < FORM_COUNT; form++) {
    k->form[form].size = size;
    k->form[form].rank = rank;
    for (int op = 0; op < OP_COUNT; op++)
      k->form[form].classes[op] = size_classes(form, op, size);
  }
  g_gate.comms[at] = comm;
}

int layer_begin(struct call *c, enum op op, int variant, MPI_Comm comm) {
  return begin(c, op, variant, comm);
}

/* The communicator's mirror, made now for a blocking call. A nonblocking one must not wait
 * for its peers, as making a mirror does: it takes one a blocking call made, else NULL. */
struct mirror *layer_mirror_for(struct call *c) {
  if (!variant_nonblocking(c->variant)) return layer_mirror_of(c->comm);
  void *value;
  int found = 0;
  PMPI_Comm_get_attr(c->comm, g_comm_keyval, &value, &found);
  return found ? value : NULL;
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
    layer_abort(comm, 1);
  }
  PMPI_Comm_call_errhandler(comm, code);
}

/* ---------------------------------------------------------------- abort */

/* The pids of the ranks that share memory with this one (MPI_COMM_TYPE_SHARED of
 * MPI_COMM_WORLD), this one's included, taken at MPI_Init. An aborted job's ranks are killed
 * before they close their endpoints and circulant's shared memory, whose files in /dev/shm
 * carry their pids: the rank that aborts removes them all first. */
static unsigned *g_node_pids;
static int g_node_ranks;

static void note_node_pids(void) {
  MPI_Comm shared;
  if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared) !=
      MPI_SUCCESS)
    return;
  int n = 0;
  PMPI_Comm_size(shared, &n);
  unsigned mine = (unsigned)getpid();
  unsigned *pids = malloc(sizeof *pids * (size_t)(n > 0 ? n : 1));
  if (pids && PMPI_Allgather(&mine, 1, MPI_UNSIGNED, pids, 1, MPI_UNSIGNED, shared) == MPI_SUCCESS) {
    g_node_pids = pids;
    g_node_ranks = n;
  } else {
    free(pids);
  }
  PMPI_Comm_free(&shared);
}

int layer_abort(MPI_Comm comm, int code) {
  for (int i = 0; i < g_node_ranks; i++) circulant_remove_shared_files(g_node_pids[i]);
  return PMPI_Abort(comm, code);
}

/* MPI_Abort ends every rank of the job (MPICH and Open MPI both do), none of which closes
 * what circulant keeps in /dev/shm. */
int MPI_Abort(MPI_Comm comm, int code) { return layer_abort(comm, code); }

/* A rank killed from outside (kill -9, a launcher's time limit) closes nothing either: a
 * watcher process removes its files once it is gone, however it ends. The watcher holds the
 * read end of a pipe whose write end the rank alone holds (the kernel closes it when the rank
 * ends), so its read returns when the rank has ended. It is forked before the MPI starts (no
 * MPI state to copy), twice, so that it is no child of the program (whose waits for its own
 * children would see it), and runs in a session of its own (a launcher that ends the rank's
 * process group must not end it first), holding no other file of the rank's (the launcher
 * waits for the ends of the rank's output). */
static void watch_shared_files(void) {
  const char *mode = getenv("CIRCULANT_MPI");
  if (mode && strcmp(mode, "off") == 0) return;
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) != 0) return;
  pid_t rank = getpid(), child = fork();
  if (child == 0) {
    if (fork() != 0) _exit(0);
    setsid();
    int ignored[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++) signal(ignored[i], SIG_IGN);
    int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3 && null >= 0; fd++) dup2(null, fd);
    if (null > 2) close(null);
    if (ends[0] > 3) close_range(3, (unsigned)ends[0] - 1, 0);
    close_range((unsigned)ends[0] + 1, ~0U, 0);
    char byte;
    while (read(ends[0], &byte, 1) < 0 && errno == EINTR) continue;
    circulant_remove_shared_files((uint32_t)rank);
    _exit(0);
  }
  close(ends[0]);
  if (child < 0) {
    close(ends[1]);
    return;
  }
  while (waitpid(child, NULL, 0) < 0 && errno == EINTR) continue;
  /* ends[1] stays open until the rank ends. */
}

/* ---------------------------------------------------------------- init and finalize */

static void start(int provided) {
  read_settings();
  g_threads = provided == MPI_THREAD_MULTIPLE;
  PMPI_Comm_size(MPI_COMM_WORLD, &g_world_size);
  types_start();
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_mirror, &g_comm_keyval, NULL);
  g_active = 1;
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, gate_forget, &g_gate_keyval, NULL);
  for (int op = 0; op < OP_COUNT; op++) {
    g_gate.classes[op] = size_classes(FORM_BLOCKING, op, g_world_size);
    g_gate.world_nonblocking[op] = size_classes(FORM_NONBLOCKING, op, g_world_size);
  }
  for (int i = 0; i < GATE_COMMS; i++) g_gate.comms[i] = MPI_COMM_NULL;
  g_gate.world = MPI_COMM_WORLD;
  g_gate.world_size = g_world_size;
  PMPI_Comm_rank(MPI_COMM_WORLD, &g_gate.world_rank);
  g_gate.open = g_mode == MODE_AUTO && !g_threads;
  /* circulant starts with the job: MPI_COMM_WORLD's communicator is made now. */
  if (g_mode != MODE_OFF && !g_threads) {
    note_node_pids();
    struct mirror *w = layer_mirror_of(MPI_COMM_WORLD);
    if (!w->cc && w->rank == 0)
      fprintf(stderr, "circulant-mpi: circulant did not start; every collective goes to MPI\n");
  }
}

int MPI_Init(int *argc, char ***argv) {
  watch_shared_files();
  int rc = PMPI_Init(argc, argv);
  if (rc != MPI_SUCCESS) return rc;
  int provided = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&provided);
  start(provided);
  return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  watch_shared_files();
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
    g_gate.open = 0;
    /* Releases what the program did not free, MPI_COMM_WORLD's communicator included. */
    while (g_mirrors) {
      struct mirror *m = g_mirrors;
      if (PMPI_Comm_delete_attr(m->comm, g_comm_keyval) != MPI_SUCCESS || g_mirrors == m)
        release(m);
    }
    PMPI_Comm_free_keyval(&g_comm_keyval);
    PMPI_Comm_free_keyval(&g_gate_keyval);
  }
  return PMPI_Finalize();
}
