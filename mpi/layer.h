/* circulant-mpi: what the layer's files share (circulant_mpi.c: communicators, errors, init
 * and finalize; serve.c: the served calls; datatypes.c: the buffers circulant sees;
 * settings.c: the settings and thresholds; entry_points.c: the MPI entry points of the
 * collectives of collectives.h; nonblocking.c: nonblocking and persistent calls issued;
 * requests.c: the layer's requests and the MPI request calls; point_to_point.c: MPI's
 * blocking point-to-point calls while the layer has calls outstanding). Nothing here is
 * exported from the library. */
#ifndef CIRCULANT_MPI_LAYER_H
#define CIRCULANT_MPI_LAYER_H

#include <mpi.h>

#include <circulant.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define HIDDEN __attribute__((visibility("hidden")))

/* MPI-4 large-count forms (MPI_Bcast_c, ...) and persistent collectives (MPI_Bcast_init, ...)
 * where the MPI declares them. */
#if defined(MPI_VERSION) && MPI_VERSION >= 4
#define LAYER_LARGE_COUNT 1
#else
#define LAYER_LARGE_COUNT 0
#endif

#if defined(OPEN_MPI)
#define LAYER_MPI "openmpi"
#elif defined(MPICH)
#define LAYER_MPI "mpich"
#else
#define LAYER_MPI "mpi"
#endif

/* A call that goes to the PMPI_ function. */
#define PASS (-1)

/* The collectives, in the order of collectives.h (the table of collectives). */
enum op {
#define COLLECTIVE(Stem, name, OP, SHAPE) OP,
#include "collectives.h"
  OP_COUNT
};

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
  WHY_UNMIRRORED,      /* nonblocking: no collective has started circulant on it yet */
  WHY_UNORDERED,       /* persistent: its starts need not be in one order on every rank */
  WHY_COUNT
};

/* The form of a call: its MPI name and statistics line. */
enum variant {
  VAR_BLOCKING,   /* MPI_Bcast */
  VAR_BLOCKING_C, /* MPI_Bcast_c */
  VAR_NB,         /* MPI_Ibcast */
  VAR_NB_C,       /* MPI_Ibcast_c */
  VAR_INIT,       /* MPI_Bcast_init (each start counts) */
  VAR_INIT_C,     /* MPI_Bcast_init_c */
  VAR_COUNT
};

static inline int variant_large(int variant) { return variant & 1; }
static inline int variant_nonblocking(int variant) { return variant >= VAR_NB; }

struct lreq;

/* A communicator's circulant communicator. */
struct mirror {
  circulant_comm *cc; /* NULL: circulant could not start on this communicator */
  int failed;         /* a call failed on this rank: the communicator is unusable */
  int given_up;       /* ... and every rank knows it (calls pass, reason failed-before) */
  unsigned stepped;   /* requests.c: the turn its nonblocking calls were last progressed */
  int rank, size;
  MPI_Comm comm;
  int requests;       /* requests of the layer still using `cc` */
  /* Its nonblocking calls not complete yet, in the order they were made: circulant runs one
   * call at a time on a communicator, so the first is in flight and the others wait. */
  struct lreq *first, *last;
  int orphaned;       /* the MPI communicator is freed: released with its last request */
  struct mirror *prev, *next;
};

/* One collective call. */
struct call {
  enum op op;
  int variant;
  MPI_Comm comm;
  struct mirror *m;
  MPI_Request *req;      /* nonblocking: where the program's request goes */
};

/* One side of a call: `count` elements of `type` at `buf`, seen by circulant as `bytes`
 * contiguous bytes at `at` (the buffer itself, or a packed copy `tmp`). */
struct side {
  void *buf;
  MPI_Count count;
  MPI_Datatype type;
  uint64_t bytes;
  void *at;
  void *tmp;
};

/* The blocks of an allgatherv to copy out of a packed area into the program's buffer. */
struct vcopy {
  unsigned char *area; /* NULL: nothing to copy */
  uint64_t *bytes;
  int size;
  void *buf;
  MPI_Count *counts;
  MPI_Aint *displs;
  MPI_Datatype type;
  int skip;
};

/* One circulant collective: `op` with the arguments it takes (the others unused). `bytes`:
 * a broadcast's bytes, the block of allgather, gather and alltoall, this rank's bytes of
 * allgatherv and gatherv, the received bytes of scatter and scatterv. `count`: a reduction's
 * elements (a reduce_scatter_block's per rank); `counts`: bytes per rank, but a
 * reduce_scatter's elements per rank. */
struct ccall {
  enum op op;
  const void *send;
  void *recv;
  size_t bytes, count;
  const size_t *counts;
  int dtype, cop, root;
};

/* Runs `x` on `cc`: blocking where `req` is NULL, else started into `*req`. */
HIDDEN int ccall_run(circulant_comm *cc, const struct ccall *x, circulant_request **req);

/* What a call does once circulant completed it: unpack its receive side, copy its blocks
 * out, free its copies. A blocking call does it at once; a nonblocking one at its completion. */
struct later {
  struct side out;
  int unpack;
  struct vcopy v;
  void *owned[3];
  /* A nonblocking gatherv's or scatterv's: the byte counts the root tells first, and last
   * whether it serves the call (enum reason), before the call starts; `counts` the counts
   * circulant takes, made from them (one of `owned`). NULL for every other call. */
  uint64_t *told;
  size_t *counts;
  /* Duplicates of derived datatypes used at completion (a program may free its own before). */
  MPI_Datatype types[2];
  int ntypes;
};

/* settings.c: CIRCULANT_MPI, CIRCULANT_MPI_STATS and the thresholds. */
enum mode { MODE_OFF, MODE_ON, MODE_AUTO };
extern HIDDEN enum mode g_mode;
extern HIDDEN int g_print_stats;
/* CIRCULANT_MPI_EAGER: how many communicators besides MPI_COMM_WORLD a rank keeps circulant
 * communicators for from their creation (0 by default: at their first blocking served call;
 * mpi/README.md, "Start-up", says why). */
extern HIDDEN int g_eager_comms;
#define NEVER UINT64_MAX
/* Per collective: the byte ranges auto serves, [from, to] each (to NEVER: no end); none: no
 * call. */
enum { MAX_RANGES = 16 };
struct ranges {
  int n;
  uint64_t from[MAX_RANGES], to[MAX_RANGES];
};
/* The ranges of one collective and form for each communicator size a thresholds line names
 * (`bcast@8`: 8 ranks or more; no `@`: from 0, every size), the smallest size first. A
 * communicator takes those of the largest size not above its own, and none below the first. */
enum { MAX_SIZES = 8 };
struct sized_ranges {
  int n;
  int ranks[MAX_SIZES];
  struct ranges r[MAX_SIZES];
};
/* The forms a thresholds file tells apart: the blocking calls (`bcast`), and the nonblocking
 * and persistent ones (`ibcast`), which the MPI runs with other algorithms than its blocking
 * ones (Open MPI's libnbc, for one). */
enum form { FORM_BLOCKING, FORM_NONBLOCKING, FORM_COUNT };
extern HIDDEN struct sized_ranges g_threshold[FORM_COUNT][OP_COUNT];
extern HIDDEN const char *g_threshold_source;
/* The ranges of `c`'s collective in `c`'s form, for the size of `c`'s communicator. */
HIDDEN const struct ranges *ranges_of(const struct call *c);
/* Whether auto serves call `c` of `bytes` bytes. */
HIDDEN int in_ranges(const struct call *c, uint64_t bytes);
HIDDEN void read_settings(void);
/* Prints "circulant-mpi: " and the message, and aborts the job. */
HIDDEN void die(const char *fmt, const char *a, const char *b);
/* circulant_mpi.c: PMPI_Abort after removing circulant's files in /dev/shm of every rank on
 * this node (their pids taken at MPI_Init), which the aborted ranks leave otherwise. */
HIDDEN int layer_abort(MPI_Comm comm, int code);

extern HIDDEN const char *const op_names[OP_COUNT]; /* "bcast", ... (thresholds' names) */
extern HIDDEN int g_active;
extern HIDDEN unsigned long long g_stats[OP_COUNT][VAR_COUNT][WHY_COUNT];

/* What a call that auto passes by its size reads of the layer's state. A call of a few
 * microseconds that starts cold (its program waited in between) pays for every line and page
 * of the layer it touches, and most calls of a program pass. A blocking call on
 * MPI_COMM_WORLD reads the first two cache lines (the world, whether the gate is open and the
 * classes; the types); a nonblocking one on the world, or a blocking gatherv or scatterv
 * there (which needs the rank), also the line of the world's nonblocking classes and rank; a
 * call on another communicator the gate knows the first two, the line of the known
 * communicators and the line of its form's classes. Set up at MPI_Init, closed at
 * MPI_Finalize. */
enum { GATE_TYPES = 6, GATE_PRESET_TYPES = 3, GATE_COMMS = 8 };
/* The size classes of one collective and form: bit k set where auto serves some size of class
 * k (size_class). Sixteen bits, so that a line holds the world and every collective's. */
typedef uint16_t classes_t;
/* An intra-communicator other than MPI_COMM_WORLD that the full path has seen: per form, a
 * line with its size, this rank's rank in it and each collective's classes. */
struct gate_comm {
  struct {
    int size, rank;
    classes_t classes[OP_COUNT];
  } __attribute__((aligned(64))) form[FORM_COUNT];
};
struct gate {
  /* MPI_COMM_WORLD (in Open MPI an address the program would otherwise look up). */
  MPI_Comm world;
  /* In auto, between MPI_Init and MPI_Finalize, without MPI_THREAD_MULTIPLE. */
  int open;
  /* Per collective, for MPI_COMM_WORLD's size: the classes of its blocking calls. */
  classes_t classes[OP_COUNT];
  /* Whether calls are counted: until MPI_Init reads the settings, then where
   * CIRCULANT_MPI_STATS=1 prints them. MPI_COMM_WORLD's size. Predefined datatypes and their
   * sizes (MPI_DATATYPE_NULL: none): the three most used from MPI_Init (where this MPI has
   * them), the others taken by the first calls of other predefined types the full path sizes
   * (datatypes.c's list), while an entry is free. A predefined datatype is never freed. */
  int counting;
  int world_size;
  MPI_Datatype types[GATE_TYPES];
  uint8_t type_sizes[GATE_TYPES];
  /* The other communicators known (MPI_COMM_NULL: a free entry; while none is free, no
   * other is learnt), forgotten when they are freed (an attribute's delete callback), and
   * their sizes and classes. */
  MPI_Comm comms[GATE_COMMS] __attribute__((aligned(64)));
  /* MPI_COMM_WORLD's classes for the nonblocking and persistent calls, and this rank's rank
   * in it. */
  classes_t world_nonblocking[OP_COUNT] __attribute__((aligned(64)));
  int world_rank;
  struct gate_comm known[GATE_COMMS];
} __attribute__((aligned(64)));
_Static_assert(offsetof(struct gate, classes) + sizeof(classes_t[OP_COUNT]) <= 64,
               "the gate's first line holds the world and the classes");
_Static_assert(offsetof(struct gate, type_sizes) + sizeof(uint8_t[GATE_TYPES]) <= 128,
               "the gate's second line holds the types");
_Static_assert(offsetof(struct gate, world_rank) / 64 ==
                   offsetof(struct gate, world_nonblocking) / 64,
               "the world's rank is on the line of its nonblocking classes");
_Static_assert(offsetof(struct gate, comms) == 128 && sizeof(MPI_Comm[GATE_COMMS]) <= 64,
               "the known communicators are the gate's third line");
_Static_assert(sizeof(struct gate_comm) == 64 * FORM_COUNT,
               "a known communicator's size and classes are one line per form");
extern HIDDEN struct gate g_gate;

/* Counts a call of `op` in `variant` for CIRCULANT_MPI_STATS (after MPI_Init only where they
 * are printed: the counters are one more line a call that starts cold would touch). */
static inline void count_call(int op, int variant, enum reason why) {
  if (g_gate.counting) g_stats[op][variant][why]++;
}

/* The class of a size: 0 for no bytes, else its bit length (1 B: 1, 2-3 B: 2, 4-7 B: 3, ...),
 * 15 for every size from 16 KiB (a call that large costs the MPI microseconds, against which
 * the full path's decision is small). */
enum { LAST_CLASS = 15 };
static inline int size_class(uint64_t bytes) {
  int k = bytes ? 64 - __builtin_clzll(bytes) : 0;
  return k > LAST_CLASS ? LAST_CLASS : k;
}

/* The classes of the sizes auto serves for collective `op` in `form` on communicators of
 * `size` ranks (struct gate). */
HIDDEN classes_t size_classes(int form, int op, int size);

/* The classes of the collectives in the form of `variant` on `comm` (and its size; with
 * `rank`, this rank's rank in it), where the gate is open and knows `comm`; else NULL. */
static inline const classes_t *gate_classes_rank(MPI_Comm comm, int variant, int *size,
                                                int *rank) {
  if (!g_gate.open) return NULL;
  int form = variant_nonblocking(variant) ? FORM_NONBLOCKING : FORM_BLOCKING;
  if (comm == g_gate.world) {
    *size = g_gate.world_size;
    if (rank) *rank = g_gate.world_rank;
    return form == FORM_BLOCKING ? g_gate.classes : g_gate.world_nonblocking;
  }
  if (comm == MPI_COMM_NULL) return NULL;
  for (int i = 0; i < GATE_COMMS; i++)
    if (g_gate.comms[i] == comm) {
      *size = g_gate.known[i].form[form].size;
      if (rank) *rank = g_gate.known[i].form[form].rank;
      return g_gate.known[i].form[form].classes;
    }
  return NULL;
}

static inline const classes_t *gate_classes(MPI_Comm comm, int variant, int *size) {
  return gate_classes_rank(comm, variant, size, NULL);
}

/* Learns intra-communicator `comm` (not MPI_COMM_WORLD), which the full path found fit to
 * serve, where the gate is open, does not know it yet and has a free entry. */
HIDDEN void gate_learn(MPI_Comm comm);

/* Whether auto passes call `c` of `bytes` bytes by its size (outside the ranges of its
 * collective). A call on a communicator the gate knows is told from the gate alone. */
static inline int auto_passes(const struct call *c, uint64_t bytes) {
  int size;
  const classes_t *classes = gate_classes(c->comm, c->variant, &size);
  if (classes && !(classes[c->op] >> size_class(bytes) & 1)) return 1;
  return g_mode == MODE_AUTO && !in_ranges(c, bytes);
}

/* The size of `type` from the gate's types; 0 where it is not one of them. */
static inline int64_t gate_type_size(MPI_Datatype type) {
  for (int i = 0; i < GATE_TYPES; i++)
    if (g_gate.types[i] == type) return type == MPI_DATATYPE_NULL ? 0 : g_gate.type_sizes[i];
  return 0;
}

/* Whether a call of `op` in `variant` on `comm`, of `count` elements of `type` on every rank
 * (bcast, the reductions; a barrier: none of MPI_BYTE), passes by its size, as the full path
 * would decide, from the gate alone: then it is counted and goes to the MPI at once. Where
 * the gate cannot tell (a communicator it does not know, another type, a negative count),
 * the full path decides. */
static inline int gate_passes(enum op op, int variant, MPI_Comm comm, MPI_Datatype type,
                              int64_t count) {
  int ranks;
  const classes_t *classes = gate_classes(comm, variant, &ranks);
  if (!classes || count < 0) return 0;
  int64_t size = gate_type_size(type);
  if (size <= 0 || (uint64_t)count > (uint64_t)INT64_MAX / (uint64_t)size) return 0;
  if (classes[op] >> size_class((uint64_t)count * (uint64_t)size) & 1) return 0;
  count_call(op, variant, WHY_THRESHOLD);
  return 1;
}

/* The bytes of `ranks` `counts` (`int`s, or MPI_Counts where `large`) of elements of `size`
 * bytes into `*total`, where the gate can tell them (no count negative, the sum ordinary). */
static inline int gate_sum(const void *counts, int large, int ranks, int64_t size,
                           uint64_t *total) {
  *total = 0;
  for (int j = 0; j < ranks; j++) {
    int64_t count = large ? (int64_t)((const MPI_Count *)counts)[j] : ((const int *)counts)[j];
    if (count < 0 || (uint64_t)count > (UINT64_MAX / 2 - *total) / (uint64_t)size) return 0;
    *total += (uint64_t)count * (uint64_t)size;
  }
  return 1;
}

/* The same for an allgatherv, whose bytes are the sum of its `counts` (`int`s, or MPI_Counts
 * where `large`) times the size of `type`. */
static inline int gate_passes_v(int variant, MPI_Comm comm, const void *counts,
                                const void *displs, int large, MPI_Datatype type) {
  int ranks;
  const classes_t *classes = gate_classes(comm, variant, &ranks);
  if (!classes || !counts || !displs) return 0;
  int64_t size = gate_type_size(type);
  uint64_t total;
  if (size <= 0 || !gate_sum(counts, large, ranks, size, &total)) return 0;
  if (classes[OP_ALLGATHERV] >> size_class(total) & 1) return 0;
  count_call(OP_ALLGATHERV, variant, WHY_THRESHOLD);
  return 1;
}

/* The same for a reduce-scatter, whose bytes are the whole vector's: the communicator's size
 * times `count` elements of `type` (OP_REDUCE_SCATTER_BLOCK), or the sum of `counts` (`int`s,
 * or MPI_Counts where `large`) of them (OP_REDUCE_SCATTER). */
static inline int gate_passes_scattered(enum op op, int variant, MPI_Comm comm,
                                        MPI_Datatype type, int64_t count, const void *counts,
                                        int large) {
  int ranks;
  const classes_t *classes = gate_classes(comm, variant, &ranks);
  if (!classes || ranks < 1) return 0;
  int64_t size = gate_type_size(type);
  if (size <= 0) return 0;
  uint64_t total;
  if (op == OP_REDUCE_SCATTER_BLOCK) {
    if (count < 0 || (uint64_t)count > (uint64_t)INT64_MAX / (uint64_t)size / (uint64_t)ranks)
      return 0;
    total = (uint64_t)count * (uint64_t)size * (uint64_t)ranks;
  } else if (!counts || !gate_sum(counts, large, ranks, size, &total)) {
    return 0;
  }
  if (classes[op] >> size_class(total) & 1) return 0;
  count_call(op, variant, WHY_THRESHOLD);
  return 1;
}

/* The same for an allgather, gather, scatter or alltoall, whose bytes are the communicator's
 * size times a block of `count` elements of `type`: the block of the side every rank has (an
 * allgather's or alltoall's receive side where the send side is MPI_IN_PLACE, else its send
 * side; a gather's send side, a scatter's receive side; gate_passes_sides picks it, and
 * leaves an in-place gather or scatter undecided with a count of -1, as only the root may be
 * in place). A gather's or scatter's `root` must be a rank, as the full path checks first.
 * Only totals up to INT_MAX, which every build can pack, are told here. */
static inline int gate_passes_blocks(enum op op, int variant, MPI_Comm comm, MPI_Datatype type,
                                     int64_t count, int root) {
  int ranks;
  const classes_t *classes = gate_classes(comm, variant, &ranks);
  if (!classes || count < 0 || ranks < 1) return 0;
  if ((op == OP_GATHER || op == OP_SCATTER) && (root < 0 || root >= ranks)) return 0;
  int64_t size = gate_type_size(type);
  if (size <= 0 || (uint64_t)count > (uint64_t)INT_MAX / (uint64_t)size / (uint64_t)ranks)
    return 0;
  if (classes[op] >> size_class((uint64_t)count * (uint64_t)size * (uint64_t)ranks) & 1) return 0;
  count_call(op, variant, WHY_THRESHOLD);
  return 1;
}

/* gate_passes_blocks for an allgather, gather, scatter or alltoall with both of its sides as
 * the program gave them: the side every rank has is picked here, once for every entry point. */
static inline int gate_passes_sides(enum op op, int variant, MPI_Comm comm, const void *sb,
                                    int64_t scount, MPI_Datatype stype, const void *rb,
                                    int64_t rcount, MPI_Datatype rtype, int root) {
  switch (op) {
  case OP_GATHER:
    return gate_passes_blocks(op, variant, comm, stype, sb == MPI_IN_PLACE ? -1 : scount, root);
  case OP_SCATTER:
    return gate_passes_blocks(op, variant, comm, rtype, rb == MPI_IN_PLACE ? -1 : rcount, root);
  default: /* allgather, alltoall */
    return sb == MPI_IN_PLACE ? gate_passes_blocks(op, variant, comm, rtype, rcount, root)
                              : gate_passes_blocks(op, variant, comm, stype, scount, root);
  }
}

/* Whether a gatherv or scatterv on `comm` passes because auto serves no size of it in its
 * form there (the full path passes it so before the root tells its counts): `root` a rank, and
 * at the root `counts` and `displs` given, as the full path checks first. */
static inline int gate_passes_rooted_v(enum op op, int variant, MPI_Comm comm, int root,
                                       const void *counts, const void *displs) {
  int ranks, rank;
  const classes_t *classes = gate_classes_rank(comm, variant, &ranks, &rank);
  if (!classes || classes[op] || root < 0 || root >= ranks) return 0;
  if (rank == root && (!counts || !displs)) return 0;
  count_call(op, variant, WHY_THRESHOLD);
  return 1;
}

HIDDEN int layer_begin(struct call *c, enum op op, int variant, MPI_Comm comm);
HIDDEN int layer_pass(struct call *c, enum reason why);
HIDDEN int layer_error(struct call *c, int rc, char *message, size_t cap);
HIDDEN void layer_raise(struct call *c, int code, const char *message);
HIDDEN int layer_finish(struct later *l, int rc, MPI_Comm comm);
/* A nonblocking gatherv's or scatterv's told counts (of a communicator of `size` ranks) into
 * `l->counts`: what the root decided (WHY_SERVED: the call starts). */
HIDDEN enum reason layer_told(struct later *l, int size);
HIDDEN void layer_release_mirror(struct mirror *m);
/* The communicator's mirror; made (which waits for every rank of `comm`) at its first use. */
HIDDEN struct mirror *layer_mirror_of(MPI_Comm comm);
/* `c`'s communicator's mirror: made now for a blocking call; a nonblocking one, which must
 * not wait for its peers, takes one a blocking call made, else NULL. */
HIDDEN struct mirror *layer_mirror_for(struct call *c);

/* datatypes.c: buffers as circulant sees them, and the reductions' types and operations. */
extern HIDDEN unsigned char g_empty[1]; /* a valid address for zero bytes */
HIDDEN int contiguous(MPI_Datatype type);
/* `count` elements of `type` in bytes; 0 where that is not a valid size. */
HIDDEN int type_bytes(MPI_Datatype type, MPI_Count count, uint64_t *bytes);
/* The predefined datatypes' sizes, asked once at MPI_Init: a call that passes then asks the
 * MPI nothing about its type (each question costs a call that starts cold a good part of a
 * microsecond). */
HIDDEN void types_start(void);
/* The size of `type` in bytes into `*size`; returns 0 where the MPI refuses the type. */
HIDDEN int type_size(MPI_Datatype type, MPI_Count *size);
/* The size of `comm`: MPI_COMM_WORLD's from MPI_Init, others from the MPI. */
HIDDEN int comm_size(MPI_Comm comm, int *size);
HIDDEN MPI_Aint type_extent(MPI_Datatype type);
HIDDEN int pack_into(void *dst, uint64_t bytes, const void *buf, MPI_Count count,
                     MPI_Datatype type, MPI_Comm comm);
HIDDEN int unpack_from(const void *src, uint64_t bytes, void *buf, MPI_Count count,
                       MPI_Datatype type, MPI_Comm comm);
HIDDEN int side_of(struct side *s, const void *buf, MPI_Count count, MPI_Datatype type);
HIDDEN int side_open(struct side *s, int fill, MPI_Comm comm);
HIDDEN int side_close(struct side *s, int unpack, int rc, MPI_Comm comm);
HIDDEN int packable(uint64_t bytes);
/* circulant's datatype and operation for an MPI one; -1 where circulant has none. */
HIDDEN int circulant_type(MPI_Datatype t);
HIDDEN int circulant_op(MPI_Op op, int dtype);
HIDDEN int packed_layout(int size, const MPI_Count *counts, const MPI_Aint *displs);
HIDDEN int blocks_copy(int into_packed, unsigned char *packed, const uint64_t *bytes, int size,
                       void *buf, const MPI_Count *counts, const MPI_Aint *displs,
                       MPI_Datatype type, int skip, MPI_Comm comm);
/* Whether `type` is derived (a program may free it); `*owned` a duplicate of it. */
HIDDEN int type_kept(MPI_Datatype type, MPI_Datatype *owned);

/* serve.c: call `c` (of the collective `c->op`) served, or PASS. */
HIDDEN int serve_barrier(struct call *c);
HIDDEN int serve_bcast(struct call *c, void *buf, MPI_Count count, MPI_Datatype type, int root);
/* Allgather, gather, scatter, alltoall (`root` 0 where there is none). */
HIDDEN int serve_blocks(struct call *c, const void *sendbuf, MPI_Count scount, MPI_Datatype stype,
                        void *recvbuf, MPI_Count rcount, MPI_Datatype rtype, int root);
/* An allgatherv with the program's counts and displacements: `int`s (widened here), or
 * MPI_Counts and MPI_Aints where `large`. */
HIDDEN int serve_allgatherv(struct call *c, const void *sendbuf, MPI_Count scount,
                            MPI_Datatype stype, void *recvbuf, const void *counts,
                            const void *displs, MPI_Datatype rtype, int large);
/* A gatherv (the counts of the receive side) or scatterv (of the send side), blocking or not,
 * with the program's counts and displacements as for serve_allgatherv, significant at the
 * root alone: the root tells the others. */
HIDDEN int serve_rooted_v(struct call *c, const void *sendbuf, MPI_Count scount,
                          MPI_Datatype stype, void *recvbuf, const void *counts,
                          const void *displs, MPI_Count rcount, MPI_Datatype rtype, int root,
                          int large);
/* Allreduce, reduce, scan, exscan (`root` 0 but for reduce). */
HIDDEN int serve_reduce(struct call *c, const void *send, void *recv, MPI_Count count,
                        MPI_Datatype type, MPI_Op op, int root);
/* Reduce_scatter_block (`count` elements per rank) and reduce_scatter (the program's
 * `counts`: `int`s, or MPI_Counts where `large`). */
HIDDEN int serve_reduce_scatter(struct call *c, const void *send, void *recv, MPI_Count count,
                                const void *counts, int large, MPI_Datatype type, MPI_Op op);

/* The arguments of a nonblocking or persistent call, kept by a persistent request. Buffers,
 * counts and types as the program gave them; `counts` and `displs` are `int`s, or `MPI_Count`s
 * and `MPI_Aint`s in the large-count forms. A broadcast's buffer is `recv`; a reduction's
 * element count `rcount` (a reduce_scatter_block's per rank; a reduce_scatter's `counts`)
 * and type `rtype`; a scatterv's counts are its send counts. */
struct args {
  enum op op;
  const void *send;
  MPI_Count scount;
  MPI_Datatype stype;
  void *recv;
  MPI_Count rcount;
  MPI_Datatype rtype;
  const void *counts, *displs;
  int root;
  MPI_Op reduction;
  MPI_Comm comm;
  /* A persistent request's duplicates of derived datatypes, freed with it. */
  MPI_Datatype types[2];
  int ntypes;
};

/* nonblocking.c: a nonblocking call of `variant` (an `I` or `_init` variant), served by
 * circulant or given to the MPI: a persistent request's start to the MPI's own persistent
 * request `native` of the same call, any other to the PMPI_ nonblocking function (`native`
 * MPI_REQUEST_NULL); `*req` the program's request (the started `native` where it passes). */
HIDDEN int layer_issue(const struct args *a, int variant, MPI_Request native, MPI_Request *req);
/* A persistent call of `variant` (an `_init` variant) with arguments `a`: the layer's request,
 * or the MPI's own where the layer never serves it (nonblocking.c says when). */
HIDDEN int layer_persistent(const struct args *a, int variant, MPI_Info info, MPI_Request *req);

/* requests.c: a nonblocking call circulant started, as the program's request; a persistent
 * request of the layer; the requests left at MPI_Finalize. */
HIDDEN int request_started(struct call *c, const struct ccall *x, struct later *l);
/* Completes the layer's nonblocking calls on `m` (a blocking call runs after them). */
HIDDEN void requests_drain(struct mirror *m);
/* Whether some nonblocking call of the layer is not complete. */
HIDDEN int requests_pending(void);
/* One turn of a wait: the layer's calls on every communicator are stepped, every 32nd turn
 * the MPI's too, and with `yield` the core goes to another process. */
HIDDEN void keep_progressing(int yield);
/* Waits for the MPI's own request `*r`, keeping the layer's calls moving while some are
 * outstanding (the rest of the wait is PMPI_Wait). */
HIDDEN int wait_moving(MPI_Request *r, MPI_Status *st);
/* `x` run on `m` as a started call waited for by the layer (which progresses the others
 * meanwhile). */
HIDDEN int requests_run(struct mirror *m, const struct ccall *x);
/* A persistent request of the layer for the call of `a`, holding `native`, the MPI's own
 * persistent request of that call (never started where circulant serves each start). */
HIDDEN int request_persistent(const struct args *a, int variant, MPI_Request native,
                              MPI_Request *req);
HIDDEN void requests_finalize(void);

#endif
