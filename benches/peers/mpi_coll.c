/*
 * Peer benchmark: the MPI library's own collectives, measured with the method of
 * `circulant bench` so that both produce comparable CSV rows.
 *
 * Method (seed 000 §3, seed 001 §3, as `circulant bench`): per size one warm-up call (its
 * received data are checked), then REPS repetitions, each timed as the slowest rank's time from
 * a common start (mpi/common_start.h: rank 0 broadcasts an instant a window ahead, all ranks
 * wait for it and call the operation, and the repetition's time is the MAX over the ranks of
 * return − start). The minimum and the median over the repetitions are reported.
 *
 * Build with either MPI (both come from Debian and coexist):
 *   mpicc.mpich   -O2 -o target/mpi_coll_mpich   benches/peers/mpi_coll.c
 *   mpicc.openmpi -O2 -o target/mpi_coll_openmpi benches/peers/mpi_coll.c
 * Run:
 *   mpiexec.mpich -n 4 target/mpi_coll_mpich --op bcast --max-bytes 1048576
 *   mpi_coll --print-counts --dist spike -p 5 --bytes 1000     (no MPI job needed)
 *
 * --comm dup makes the measured calls on a duplicate of MPI_COMM_WORLD (same ranks, made once
 * after MPI_Init) instead of on the world itself.
 *
 * --nonblocking measures the nonblocking forms instead (MPI_Ibcast, ..., each call started and
 * then completed by MPI_Wait; the algorithm column says "nonblocking"). --persistent measures
 * MPI-4's persistent forms (an MPI 4 only, such as MPICH 4): per size one request made
 * (MPI_Bcast_init, ...) and then started and completed by MPI_Start and MPI_Wait at every
 * call; the algorithm column says "persistent".
 *
 * --paired measures every size twice in one run, repetition by repetition in turn (the order
 * swapped at every repetition): the call through its MPI_ name (which a profiling layer
 * preloaded before the MPI intercepts) and through its PMPI_ name (the MPI's own, which no
 * layer sees). Two rows per size, algorithm "mpi" and "pmpi" (with --nonblocking
 * "mpi-nonblocking" and "pmpi-nonblocking", with --persistent "mpi-persistent" and
 * "pmpi-persistent"; the init, start, wait and free go by the same names).
 * Both series see the same moments of a noisy machine, so their ratio shows what the layer
 * adds or saves; without a layer both are the MPI's, and the ratio shows the method's floor.
 *
 * --overlap measures overlap as `circulant bench --overlap` does (and the OSU micro-benchmarks):
 * per size the nonblocking call alone (started, then MPI_Wait), a computation alone as long as
 * the call's least time, and the call started, the computation, then MPI_Wait; overlap =
 * 100·(1 − (both − computation) / alone), minima, at least 0. The row's times are those of
 * both together (algorithm "overlap"); three more columns: alone_s, compute_s, overlap_pct.
 *
 * Sizes go from --min-bytes to --max-bytes multiplying alternately by 2 and 5 (1, 2, 10, 20,
 * 100, ...). For bcast the size is the message; for allgather it is each rank's contribution;
 * for allgatherv it is the base count c of the distribution (the total follows from it, see
 * distribution_counts); for allreduce and reduce (to --root) it is the vector of int32
 * elements (size/4 of them); for reduce-scatter-block the vector every rank contributes (p
 * blocks of size/4/p int32 elements, as circulant bench); for reduce-scatter the base count c of the
 * distribution (each rank's part of the result its count, rounded down to whole int32
 * elements); for gather and scatter it is each rank's block (from --root, to it), for
 * alltoall the block each rank sends to each rank. The reductions sum int32 elements.
 *
 * CSV columns (header printed once by rank 0):
 *   library,op,algorithm,distribution,p,bytes,total_bytes,reps,min_s,median_s
 */
#define _GNU_SOURCE
#include <mpi.h>
#include "../../mpi/common_start.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if MPI_VERSION >= 4
#define HAVE_PERSISTENT 1
#else
#define HAVE_PERSISTENT 0
#endif

enum op { OP_BCAST, OP_ALLGATHER, OP_ALLGATHERV, OP_ALLREDUCE, OP_GATHER, OP_SCATTER, OP_ALLTOALL,
         OP_REDUCE, OP_REDUCE_SCATTER_BLOCK, OP_REDUCE_SCATTER };

static const char *op_names[] = {"bcast",     "allgather", "allgatherv", "allreduce",
                                 "gather",    "scatter",   "alltoall",   "reduce",
                                 "reduce-scatter-block",   "reduce-scatter"};
enum { N_OPS = sizeof op_names / sizeof op_names[0] };

static const char *dist_names[] = {"regular", "broadcast", "spike", "half-full",
                                   "decreasing", "geometric", "mod3"};
enum { N_DISTS = sizeof dist_names / sizeof dist_names[0] };

struct options {
    enum op op;
    int dist;
    int root;
    int reps;
    uint64_t min_bytes;
    uint64_t max_bytes;
    int header;
    int nonblocking;
    int persistent;
    int paired;
    int overlap;
    int print_counts;
    MPI_Comm comm; /* the communicator of the measured calls: the world or its duplicate */
    int dup;
    int counts_p;
    uint64_t counts_bytes;
};

static void usage_exit(const char *msg) {
    fprintf(stderr,
            "mpi_coll: %s\n"
            "usage: mpi_coll --op bcast|allgather|allgatherv|allreduce|gather|scatter|alltoall|\n"
            "                     reduce|reduce-scatter-block|reduce-scatter\n"
            "                [--dist NAME] [--root R]\n"
            "                [--reps N] [--min-bytes B] [--max-bytes B] [--no-header]\n"
            "                [--nonblocking | --persistent | --overlap] [--paired]\n"
            "                [--comm world|dup]\n"
            "       mpi_coll --print-counts --dist NAME -p P --bytes C\n"
            "distributions: regular broadcast spike half-full decreasing geometric mod3\n",
            msg);
    exit(2);
}

static uint64_t parse_u64(const char *s, const char *what) {
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (s[0] == '\0' || s[0] == '-' || *end != '\0') {
        char msg[256];
        snprintf(msg, sizeof msg, "%s must be a non-negative integer, got '%s'", what, s);
        usage_exit(msg);
    }
    return (uint64_t)v;
}

static void parse_args(int argc, char **argv, struct options *o) {
    memset(o, 0, sizeof *o);
    o->op = OP_BCAST;
    o->reps = 10;
    o->min_bytes = 1;
    o->max_bytes = 256u << 20;
    o->header = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-header")) { o->header = 0; continue; }
        if (!strcmp(a, "--print-counts")) { o->print_counts = 1; continue; }
        if (!strcmp(a, "--nonblocking")) { o->nonblocking = 1; continue; }
        if (!strcmp(a, "--persistent")) { o->persistent = 1; continue; }
        if (!strcmp(a, "--paired")) { o->paired = 1; continue; }
        if (!strcmp(a, "--overlap")) { o->overlap = 1; continue; }
        if (!v) usage_exit("missing value after an option");
        i++;
        if (!strcmp(a, "--op")) {
            int found = 0;
            for (int k = 0; k < N_OPS; k++)
                if (!strcmp(v, op_names[k])) { o->op = (enum op)k; found = 1; }
            if (!found) usage_exit("unknown --op");
        } else if (!strcmp(a, "--dist")) {
            o->dist = -1;
            for (int k = 0; k < N_DISTS; k++)
                if (!strcmp(v, dist_names[k])) o->dist = k;
            if (o->dist < 0) usage_exit("unknown --dist");
        } else if (!strcmp(a, "--comm")) {
            if (!strcmp(v, "dup")) o->dup = 1;
            else if (strcmp(v, "world")) usage_exit("--comm is world or dup");
        } else if (!strcmp(a, "--root")) {
            o->root = (int)parse_u64(v, "--root");
        } else if (!strcmp(a, "--reps")) {
            o->reps = (int)parse_u64(v, "--reps");
            if (o->reps < 1) usage_exit("--reps must be at least 1");
        } else if (!strcmp(a, "--min-bytes")) {
            o->min_bytes = parse_u64(v, "--min-bytes");
        } else if (!strcmp(a, "--max-bytes")) {
            o->max_bytes = parse_u64(v, "--max-bytes");
        } else if (!strcmp(a, "-p")) {
            o->counts_p = (int)parse_u64(v, "-p");
        } else if (!strcmp(a, "--bytes")) {
            o->counts_bytes = parse_u64(v, "--bytes");
        } else {
            usage_exit("unknown option");
        }
    }
    if (o->nonblocking && o->persistent) usage_exit("--nonblocking and --persistent exclude each other");
    if (o->overlap && (o->nonblocking || o->persistent || o->paired))
        usage_exit("--overlap excludes --nonblocking, --persistent and --paired");
    /* The overlap's calls are the nonblocking ones. */
    if (o->overlap) o->nonblocking = 1;
    if (o->persistent && !HAVE_PERSISTENT)
        usage_exit("--persistent needs MPI-4's persistent collectives, which this MPI has not");
}

/* ⌊log2 x⌋ for x >= 1. */
static uint64_t floor_log2(uint64_t x) {
    uint64_t q = 0;
    while (x >> (q + 1)) q++;
    return q;
}

/*
 * Per-rank byte counts of the seed-001 distributions with base count c, plus seed 000's
 * (r mod 3)·c, exactly as circulant::plan::distribution::Distribution::counts computes them
 * (tests/bench_peer.rs compares the two). Integer division rounds down; what a formula leaves
 * over is not redistributed.
 *   regular     m_i = c
 *   broadcast   m_0 = c, m_i = 0
 *   spike       m_0 = c/2, m_i = c / (2(p-1))                      (p = 1: m_0 = c/2)
 *   half-full   m_i = 2c for even i, 0 for odd i
 *   decreasing  m_i = 2c(p-1-i) / (p-1)                            (p = 1: m_0 = c)
 *   geometric   m_{g-1+j} = c·p / (g·L) for g = 1, 2, 4, ... and j < g,
 *               L = max(1, ⌊log2 max(p, 2)⌋)
 *   mod3        m_i = (i mod 3)·c
 * Intermediates are 128-bit, as in the plan.
 */
static void distribution_counts(int dist, int p, uint64_t c, uint64_t *counts) {
    typedef unsigned __int128 u128;
    uint64_t logp = floor_log2(p < 2 ? 2 : (uint64_t)p);
    if (logp < 1) logp = 1;
    for (int i = 0; i < p; i++) {
        u128 m = 0;
        switch (dist) {
        case 0: m = c; break;
        case 1: m = i == 0 ? c : 0; break;
        case 2: m = (i == 0 || p == 1) ? c / 2 : (u128)c / (2 * (u128)(p - 1)); break;
        case 3: m = i % 2 == 0 ? 2 * (u128)c : 0; break;
        case 4: m = p == 1 ? c : 2 * (u128)c * (u128)(p - 1 - i) / (u128)(p - 1); break;
        case 5: {
            u128 group = (u128)1 << floor_log2((uint64_t)i + 1); /* i in [group-1, 2group-1) */
            m = (u128)c * (u128)p / (group * logp);
            break;
        }
        case 6: m = (u128)(i % 3) * c; break;
        }
        counts[i] = m > UINT64_MAX ? UINT64_MAX : (uint64_t)m;
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The byte every rank writes at position k of its contribution: checkable at any receiver. */
static unsigned char pattern(int rank, uint64_t k) {
    return (unsigned char)(rank * 131 + k * 7 + 1);
}

struct buffers {
    unsigned char *send;
    unsigned char *recv;
    int *counts;
    int *displs;
    uint64_t send_len, recv_len, total;
    int rank; /* this rank in MPI_COMM_WORLD: its count of an allgatherv */
    uint64_t compute_ns; /* --overlap: the computation between a call's start and its wait */
    MPI_Request persistent[2]; /* --persistent: each series' request of the current size */
};

static int fits_int(uint64_t v) { return v <= (uint64_t)INT32_MAX; }

/* The operations that sum int32 elements. */
static int reduces(enum op op) {
    return op == OP_ALLREDUCE || op == OP_REDUCE || op == OP_REDUCE_SCATTER_BLOCK ||
           op == OP_REDUCE_SCATTER;
}

/* The operations whose counts follow --dist. */
static int distributed(enum op op) { return op == OP_ALLGATHERV || op == OP_REDUCE_SCATTER; }

/* Element k of the sum over p ranks, each contributing rank + k mod 17 (fill). */
static int32_t summed(int p, uint64_t k) {
    return (int32_t)((int64_t)p * (p - 1) / 2 + (int64_t)p * (int64_t)(k % 17));
}

/* The entry points a call goes through: the MPI_ names or the PMPI_ names (--paired). */
struct entries {
    const char *name;
    int (*bcast)(void *, int, MPI_Datatype, int, MPI_Comm);
    int (*allgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
    int (*allgatherv)(const void *, int, MPI_Datatype, void *, const int *, const int *,
                      MPI_Datatype, MPI_Comm);
    int (*allreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
    int (*gather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm);
    int (*scatter)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm);
    int (*alltoall)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
    int (*reduce)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm);
    int (*reduce_scatter_block)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
    int (*reduce_scatter)(const void *, void *, const int *, MPI_Datatype, MPI_Op, MPI_Comm);
    int (*ibcast)(void *, int, MPI_Datatype, int, MPI_Comm, MPI_Request *);
    int (*iallgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm,
                      MPI_Request *);
    int (*iallgatherv)(const void *, int, MPI_Datatype, void *, const int *, const int *,
                       MPI_Datatype, MPI_Comm, MPI_Request *);
    int (*iallreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *);
    int (*igather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm,
                   MPI_Request *);
    int (*iscatter)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm,
                    MPI_Request *);
    int (*ialltoall)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm,
                     MPI_Request *);
    int (*ireduce)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm, MPI_Request *);
    int (*ireduce_scatter_block)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm,
                                 MPI_Request *);
    int (*ireduce_scatter)(const void *, void *, const int *, MPI_Datatype, MPI_Op, MPI_Comm,
                           MPI_Request *);
    int (*wait)(MPI_Request *, MPI_Status *);
    int (*request_free)(MPI_Request *);
    int series; /* the index of this series' persistent request in struct buffers */
#if HAVE_PERSISTENT
    int (*bcast_init)(void *, int, MPI_Datatype, int, MPI_Comm, MPI_Info, MPI_Request *);
    int (*allgather_init)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm,
                          MPI_Info, MPI_Request *);
    int (*allgatherv_init)(const void *, int, MPI_Datatype, void *, const int *, const int *,
                           MPI_Datatype, MPI_Comm, MPI_Info, MPI_Request *);
    int (*allreduce_init)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info,
                          MPI_Request *);
    int (*gather_init)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm,
                       MPI_Info, MPI_Request *);
    int (*scatter_init)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int,
                        MPI_Comm, MPI_Info, MPI_Request *);
    int (*alltoall_init)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm,
                         MPI_Info, MPI_Request *);
    int (*reduce_init)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm, MPI_Info,
                       MPI_Request *);
    int (*reduce_scatter_block_init)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm,
                                     MPI_Info, MPI_Request *);
    int (*reduce_scatter_init)(const void *, void *, const int *, MPI_Datatype, MPI_Op, MPI_Comm,
                               MPI_Info, MPI_Request *);
    int (*start)(MPI_Request *);
#endif
};

/* The entry points with prefix P (nothing: the MPI_ names; P: the PMPI_ names). */
#if HAVE_PERSISTENT
#define PERSISTENT_ENTRIES(P)                                                                    \
    .bcast_init = P##MPI_Bcast_init, .allgather_init = P##MPI_Allgather_init,                    \
    .allgatherv_init = P##MPI_Allgatherv_init, .allreduce_init = P##MPI_Allreduce_init,          \
    .gather_init = P##MPI_Gather_init, .scatter_init = P##MPI_Scatter_init,                      \
    .alltoall_init = P##MPI_Alltoall_init, .reduce_init = P##MPI_Reduce_init,                    \
    .reduce_scatter_block_init = P##MPI_Reduce_scatter_block_init,                               \
    .reduce_scatter_init = P##MPI_Reduce_scatter_init, .start = P##MPI_Start,
#else
#define PERSISTENT_ENTRIES(P)
#endif
#define ENTRIES(P, NAME, SERIES)                                                                 \
    {                                                                                            \
        .name = NAME, .bcast = P##MPI_Bcast, .allgather = P##MPI_Allgather,                      \
        .allgatherv = P##MPI_Allgatherv, .allreduce = P##MPI_Allreduce,                          \
        .gather = P##MPI_Gather, .scatter = P##MPI_Scatter, .alltoall = P##MPI_Alltoall,         \
        .reduce = P##MPI_Reduce, .reduce_scatter_block = P##MPI_Reduce_scatter_block,            \
        .reduce_scatter = P##MPI_Reduce_scatter, .ireduce = P##MPI_Ireduce,                      \
        .ireduce_scatter_block = P##MPI_Ireduce_scatter_block,                                   \
        .ireduce_scatter = P##MPI_Ireduce_scatter,                                               \
        .ibcast = P##MPI_Ibcast, .iallgather = P##MPI_Iallgather,                                \
        .iallgatherv = P##MPI_Iallgatherv, .iallreduce = P##MPI_Iallreduce,                      \
        .igather = P##MPI_Igather, .iscatter = P##MPI_Iscatter, .ialltoall = P##MPI_Ialltoall,   \
        .wait = P##MPI_Wait, .request_free = P##MPI_Request_free, .series = SERIES,              \
        PERSISTENT_ENTRIES(P)                                                                    \
    }
static const struct entries through_mpi = ENTRIES(, "mpi", 0);
static const struct entries through_pmpi = ENTRIES(P, "pmpi", 1);

/* --persistent: series `e`'s request of the operation on the current buffers. */
static void make_persistent(const struct options *o, const struct entries *e, struct buffers *b,
                            uint64_t bytes) {
#if HAVE_PERSISTENT
    MPI_Request *req = &b->persistent[e->series];
    int rank = b->rank, n = (int)bytes;
    /* Every rank starts its requests in the order it made them, as the info asserts (the
     * layer serves persistent collectives only so). */
    static MPI_Info none = MPI_INFO_NULL;
    if (none == MPI_INFO_NULL) {
        MPI_Info_create(&none);
        MPI_Info_set(none, "mpi_assert_strict_persistent_collective_ordering", "true");
    }
    switch (o->op) {
    case OP_BCAST:
        e->bcast_init(b->recv, n, MPI_BYTE, o->root, o->comm, none, req);
        break;
    case OP_ALLGATHER:
        e->allgather_init(b->send, n, MPI_BYTE, b->recv, n, MPI_BYTE, o->comm, none, req);
        break;
    case OP_ALLGATHERV:
        e->allgatherv_init(b->send, b->counts[rank], MPI_BYTE, b->recv, b->counts, b->displs,
                           MPI_BYTE, o->comm, none, req);
        break;
    case OP_ALLREDUCE:
        e->allreduce_init(b->send, b->recv, n / 4, MPI_INT32_T, MPI_SUM, o->comm, none, req);
        break;
    case OP_GATHER:
        e->gather_init(b->send, n, MPI_BYTE, b->recv, n, MPI_BYTE, o->root, o->comm, none, req);
        break;
    case OP_SCATTER:
        e->scatter_init(b->send, n, MPI_BYTE, b->recv, n, MPI_BYTE, o->root, o->comm, none, req);
        break;
    case OP_ALLTOALL:
        e->alltoall_init(b->send, n, MPI_BYTE, b->recv, n, MPI_BYTE, o->comm, none, req);
        break;
    case OP_REDUCE:
        e->reduce_init(b->send, b->recv, n / 4, MPI_INT32_T, MPI_SUM, o->root, o->comm, none, req);
        break;
    case OP_REDUCE_SCATTER_BLOCK:
        e->reduce_scatter_block_init(b->send, b->recv, (int)(b->recv_len / 4), MPI_INT32_T,
                                     MPI_SUM, o->comm, none, req);
        break;
    case OP_REDUCE_SCATTER:
        e->reduce_scatter_init(b->send, b->recv, b->counts, MPI_INT32_T, MPI_SUM, o->comm, none,
                               req);
        break;
    }
#else
    (void)o, (void)e, (void)b, (void)bytes;
#endif
}

/* A computation that keeps this core busy for `ns` (sums over a small array, the clock read
 * between rounds of them), as a program computes between starting a collective and waiting. */
static volatile double compute_result;
static void compute(uint64_t ns) {
    double data[256];
    for (int i = 0; i < 256; i++) data[i] = 1.0;
    uint64_t start = common_now_ns();
    while (common_now_ns() - start < ns) {
        for (int k = 0; k < 16; k++) {
            double carry = 0.0;
            for (int i = 0; i < 256; i++) {
                carry = data[i] * 0.5 + carry * 0.25;
                data[i] = carry + 1.0;
            }
        }
        compute_result = data[255];
    }
}

/* One call of the operation under test, through entry points `e`. */
static void run_op(const struct options *o, const struct entries *e, struct buffers *b,
                   uint64_t bytes) {
    int rank = b->rank;
#if HAVE_PERSISTENT
    if (o->persistent) {
        e->start(&b->persistent[e->series]);
        e->wait(&b->persistent[e->series], MPI_STATUS_IGNORE);
        return;
    }
#endif
    if (o->nonblocking) {
        MPI_Request req;
        switch (o->op) {
        case OP_BCAST:
            e->ibcast(b->recv, (int)bytes, MPI_BYTE, o->root, o->comm, &req);
            break;
        case OP_ALLGATHER:
            e->iallgather(b->send, (int)bytes, MPI_BYTE, b->recv, (int)bytes, MPI_BYTE,
                          o->comm, &req);
            break;
        case OP_ALLGATHERV:
            e->iallgatherv(b->send, b->counts[rank], MPI_BYTE, b->recv, b->counts, b->displs,
                           MPI_BYTE, o->comm, &req);
            break;
        case OP_GATHER:
            e->igather(b->send, (int)bytes, MPI_BYTE, b->recv, (int)bytes, MPI_BYTE, o->root,
                       o->comm, &req);
            break;
        case OP_SCATTER:
            e->iscatter(b->send, (int)bytes, MPI_BYTE, b->recv, (int)bytes, MPI_BYTE, o->root,
                        o->comm, &req);
            break;
        case OP_ALLTOALL:
            e->ialltoall(b->send, (int)bytes, MPI_BYTE, b->recv, (int)bytes, MPI_BYTE, o->comm,
                         &req);
            break;
        case OP_REDUCE:
            e->ireduce(b->send, b->recv, (int)(bytes / 4), MPI_INT32_T, MPI_SUM, o->root, o->comm,
                       &req);
            break;
        case OP_REDUCE_SCATTER_BLOCK:
            e->ireduce_scatter_block(b->send, b->recv, (int)(b->recv_len / 4), MPI_INT32_T, MPI_SUM,
                                     o->comm, &req);
            break;
        case OP_REDUCE_SCATTER:
            e->ireduce_scatter(b->send, b->recv, b->counts, MPI_INT32_T, MPI_SUM, o->comm, &req);
            break;
        default:
            e->iallreduce(b->send, b->recv, (int)(bytes / 4), MPI_INT32_T, MPI_SUM,
                          o->comm, &req);
            break;
        }
        if (b->compute_ns) compute(b->compute_ns);
        e->wait(&req, MPI_STATUS_IGNORE);
        return;
    }
    switch (o->op) {
    case OP_BCAST:
        e->bcast(b->recv, (int)bytes, MPI_BYTE, o->root, o->comm);
        break;
    case OP_ALLGATHER:
        e->allgather(b->send, (int)bytes, MPI_BYTE, b->recv, (int)bytes, MPI_BYTE, o->comm);
        break;
    case OP_ALLGATHERV:
        e->allgatherv(b->send, b->counts[rank], MPI_BYTE, b->recv, b->counts, b->displs, MPI_BYTE,
                      o->comm);
        break;
    case OP_ALLREDUCE:
        e->allreduce(b->send, b->recv, (int)(bytes / 4), MPI_INT32_T, MPI_SUM, o->comm);
        break;
    case OP_GATHER:
        e->gather(b->send, (int)bytes, MPI_BYTE, b->recv, (int)bytes, MPI_BYTE, o->root, o->comm);
        break;
    case OP_SCATTER:
        e->scatter(b->send, (int)bytes, MPI_BYTE, b->recv, (int)bytes, MPI_BYTE, o->root, o->comm);
        break;
    case OP_ALLTOALL:
        e->alltoall(b->send, (int)bytes, MPI_BYTE, b->recv, (int)bytes, MPI_BYTE, o->comm);
        break;
    case OP_REDUCE:
        e->reduce(b->send, b->recv, (int)(bytes / 4), MPI_INT32_T, MPI_SUM, o->root, o->comm);
        break;
    case OP_REDUCE_SCATTER_BLOCK:
        e->reduce_scatter_block(b->send, b->recv, (int)(b->recv_len / 4), MPI_INT32_T, MPI_SUM,
                                o->comm);
        break;
    case OP_REDUCE_SCATTER:
        e->reduce_scatter(b->send, b->recv, b->counts, MPI_INT32_T, MPI_SUM, o->comm);
        break;
    }
}

static void fill(const struct options *o, struct buffers *b, uint64_t bytes, int rank);

/* Makes and fills the buffers for one size; returns 0, or -1 when the size does not fit MPI's
 * int counts. */
static int prepare(const struct options *o, struct buffers *b, uint64_t bytes, int p, int rank) {
    uint64_t send_len = 0, recv_len = 0;
    switch (o->op) {
    case OP_BCAST: recv_len = bytes; b->total = bytes; break;
    case OP_ALLGATHER: send_len = bytes; recv_len = bytes * (uint64_t)p; b->total = recv_len; break;
    case OP_ALLGATHERV:
    case OP_REDUCE_SCATTER: {
        /* Allgatherv: counts and displacements in bytes; reduce-scatter: in int32 elements. */
        uint64_t unit = o->op == OP_REDUCE_SCATTER ? 4 : 1;
        uint64_t *c = malloc(sizeof *c * (size_t)p);
        if (!c) return -1;
        distribution_counts(o->dist, p, bytes, c);
        uint64_t off = 0;
        for (int i = 0; i < p; i++) {
            c[i] /= unit;
            if (!fits_int(c[i]) || !fits_int(off) || !fits_int(off * unit)) { free(c); return -1; }
            b->counts[i] = (int)c[i];
            b->displs[i] = (int)off;
            off += c[i];
        }
        if (o->op == OP_REDUCE_SCATTER) {
            send_len = off * unit;
            recv_len = c[rank] * unit;
        } else {
            send_len = c[rank];
            recv_len = off;
        }
        b->total = off * unit;
        free(c);
        break;
    }
    case OP_ALLREDUCE:
    case OP_REDUCE: send_len = recv_len = bytes / 4 * 4; b->total = recv_len; break;
    case OP_REDUCE_SCATTER_BLOCK:
        recv_len = bytes / 4 / (uint64_t)p * 4;
        send_len = recv_len * (uint64_t)p;
        b->total = send_len;
        for (int i = 0; i < p; i++) b->displs[i] = (int)((uint64_t)i * (recv_len / 4));
        break;
    case OP_GATHER: send_len = bytes; recv_len = bytes * (uint64_t)p; b->total = recv_len; break;
    case OP_SCATTER: send_len = bytes * (uint64_t)p; recv_len = bytes; b->total = send_len; break;
    case OP_ALLTOALL: send_len = recv_len = bytes * (uint64_t)p; b->total = recv_len; break;
    }
    if (!fits_int(send_len) || !fits_int(recv_len)) return -1;
    free(b->send);
    free(b->recv);
    b->send = malloc(send_len ? send_len : 1);
    b->recv = malloc(recv_len ? recv_len : 1);
    if (!b->send || !b->recv) {
        fprintf(stderr, "mpi_coll: out of memory for %llu bytes\n", (unsigned long long)recv_len);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    b->send_len = send_len;
    b->recv_len = recv_len;
    fill(o, b, bytes, rank);
    return 0;
}

/* Fills the buffers prepare made for `bytes`: the inputs, and the outputs cleared. */
static void fill(const struct options *o, struct buffers *b, uint64_t bytes, int rank) {
    uint64_t send_len = b->send_len, recv_len = b->recv_len;
    if (reduces(o->op)) {
        for (uint64_t k = 0; k < send_len / 4; k++) ((int32_t *)b->send)[k] = (int32_t)(rank + k % 17);
    } else {
        for (uint64_t k = 0; k < send_len; k++) b->send[k] = pattern(rank, k);
    }
    memset(b->recv, 0, recv_len);
    if (o->op == OP_BCAST && rank == o->root)
        for (uint64_t k = 0; k < bytes; k++) b->recv[k] = pattern(o->root, k);
}

/* Returns the number of wrong bytes (or elements) this rank received. */
static uint64_t check(const struct options *o, const struct buffers *b, uint64_t bytes, int p) {
    uint64_t bad = 0;
    switch (o->op) {
    case OP_BCAST:
        for (uint64_t k = 0; k < bytes; k++) bad += b->recv[k] != pattern(o->root, k);
        break;
    case OP_ALLGATHER:
        for (int r = 0; r < p; r++)
            for (uint64_t k = 0; k < bytes; k++) bad += b->recv[(uint64_t)r * bytes + k] != pattern(r, k);
        break;
    case OP_ALLGATHERV:
        for (int r = 0; r < p; r++)
            for (uint64_t k = 0; k < (uint64_t)b->counts[r]; k++)
                bad += b->recv[(uint64_t)b->displs[r] + k] != pattern(r, k);
        break;
    case OP_ALLREDUCE:
        for (uint64_t k = 0; k < bytes / 4; k++) bad += ((const int32_t *)b->recv)[k] != summed(p, k);
        break;
    case OP_REDUCE: /* at the root */
        for (uint64_t k = 0; b->rank == o->root && k < bytes / 4; k++)
            bad += ((const int32_t *)b->recv)[k] != summed(p, k);
        break;
    case OP_REDUCE_SCATTER_BLOCK:
    case OP_REDUCE_SCATTER: /* this rank's part, from its displacement in the vector */
        for (uint64_t k = 0; k < b->recv_len / 4; k++)
            bad += ((const int32_t *)b->recv)[k] != summed(p, (uint64_t)b->displs[b->rank] + k);
        break;
    case OP_GATHER: /* the root's blocks, each rank's pattern */
        for (int r = 0; b->rank == o->root && r < p; r++)
            for (uint64_t k = 0; k < bytes; k++) bad += b->recv[(uint64_t)r * bytes + k] != pattern(r, k);
        break;
    case OP_SCATTER: /* this rank's block of the root's pattern */
        for (uint64_t k = 0; k < bytes; k++)
            bad += b->recv[k] != pattern(o->root, (uint64_t)b->rank * bytes + k);
        break;
    case OP_ALLTOALL: /* from each rank r, r's block for this rank */
        for (int r = 0; r < p; r++)
            for (uint64_t k = 0; k < bytes; k++)
                bad += b->recv[(uint64_t)r * bytes + k] != pattern(r, (uint64_t)b->rank * bytes + k);
        break;
    }
    return bad;
}

/* One repetition of the operation, from a common start (mpi/common_start.h). */
struct repetition {
    const struct options *o;
    const struct entries *e;
    struct buffers *b;
    uint64_t bytes;
};
static void repeat_op(void *arg) {
    struct repetition *r = arg;
    run_op(r->o, r->e, r->b, r->bytes);
}
static double timed_call(const struct options *o, const struct entries *e, struct buffers *b,
                         uint64_t bytes, struct common_window *w) {
    struct repetition r = {o, e, b, bytes};
    return common_start_timed(repeat_op, &r, w);
}
static void compute_only(void *arg) { compute(*(const uint64_t *)arg); }

/* Sorts the n times of `t` and returns their median (their minimum is then t[0]). */
static double median_of(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static const char *library_name(void) {
    static char name[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(name, &len);
    if (strstr(name, "Open MPI")) return "openmpi";
    if (strstr(name, "MPICH")) return "mpich";
    return "mpi";
}

int main(int argc, char **argv) {
    struct options o;
    parse_args(argc, argv, &o);

    if (o.print_counts) {
        if (o.counts_p < 1) usage_exit("--print-counts needs -p P with P >= 1");
        uint64_t *c = malloc(sizeof *c * (size_t)o.counts_p);
        if (!c) return 1;
        distribution_counts(o.dist, o.counts_p, o.counts_bytes, c);
        for (int i = 0; i < o.counts_p; i++) printf("%s%llu", i ? " " : "", (unsigned long long)c[i]);
        printf("\n");
        free(c);
        return 0;
    }

    MPI_Init(&argc, &argv);
    o.comm = MPI_COMM_WORLD;
    if (o.dup) MPI_Comm_dup(MPI_COMM_WORLD, &o.comm);
    int rank, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (o.root >= p) {
        if (rank == 0) fprintf(stderr, "mpi_coll: --root %d is not below p = %d\n", o.root, p);
        MPI_Finalize();
        return 2;
    }

    struct buffers b = {0};
    b.rank = rank;
    b.counts = calloc((size_t)p, sizeof *b.counts);
    b.displs = calloc((size_t)p, sizeof *b.displs);
    /* One series, or with --paired two: through the MPI_ names and through the PMPI_ names. */
    const struct entries *series[2] = {&through_mpi, &through_pmpi};
    int n_series = o.paired ? 2 : 1;
    double *times[2] = {calloc((size_t)o.reps, sizeof(double)),
                        calloc((size_t)o.reps, sizeof(double))};
    /* --overlap: the call alone and the computation alone. */
    double *alone = calloc((size_t)o.reps, sizeof(double));
    double *computed = calloc((size_t)o.reps, sizeof(double));
    if (!b.counts || !b.displs || !times[0] || !times[1] || !alone || !computed)
        MPI_Abort(MPI_COMM_WORLD, 1);

    const char *lib = library_name();
    const char *dist = distributed(o.op) ? dist_names[o.dist] : "-";
    if (rank == 0 && o.header)
        printf("library,op,algorithm,distribution,p,bytes,total_bytes,reps,min_s,median_s%s\n",
               o.overlap ? ",alone_s,compute_s,overlap_pct" : "");

    /* A common start needs one clock: ranks on several hosts whose clocks differ are refused,
     * not timed wrongly (or kept waiting for another host's clock). */
    if (!common_clock_shared(1000000)) {
        if (rank == 0)
            fprintf(stderr, "mpi_coll: the ranks' monotonic clocks differ by more than 1 ms; "
                            "the common-start timing needs one clock (one host)\n");
        MPI_Finalize();
        return 2;
    }
    int failed = 0;
    struct common_window window = COMMON_WINDOW_START;
    for (uint64_t bytes = o.min_bytes, step = 0; bytes <= o.max_bytes;
         bytes *= (step++ % 2 == 0) ? 2 : 5) {
        if (reduces(o.op) && bytes < 4) {
            if (bytes == 0) break;
            continue;
        }
        if (prepare(&o, &b, bytes, p, rank) != 0) {
            if (rank == 0) fprintf(stderr, "mpi_coll: %llu bytes exceed MPI int counts; stopping\n",
                                   (unsigned long long)bytes);
            break;
        }
        /* --persistent: each series' request, on the buffers every call of this size uses. */
        for (int k = 0; o.persistent && k < n_series; k++) make_persistent(&o, series[k], &b, bytes);
        for (int k = 0; k < n_series; k++) {
            /* Each series checks a call of its own, into a cleared buffer. */
            if (k > 0) fill(&o, &b, bytes, rank);
            run_op(&o, series[k], &b, bytes); /* warm-up, also the checked call */
            uint64_t bad = check(&o, &b, bytes, p), all_bad = 0;
            MPI_Allreduce(&bad, &all_bad, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
            if (all_bad) {
                if (rank == 0)
                    fprintf(stderr, "mpi_coll: %s of %llu bytes%s%s: %llu wrong bytes\n",
                            op_names[o.op], (unsigned long long)bytes,
                            o.paired ? " through " : "", o.paired ? series[k]->name : "",
                            (unsigned long long)all_bad);
                failed = 1;
            }
        }
        double alone_s = 0, compute_s = 0;
        if (o.overlap) {
            /* The call alone, then a computation as long as its least time (the same on every
             * rank: each repetition's time is the slowest rank's), then both; minima, as on a
             * busy machine a median mixes the computation's preemptions into the figure. */
            b.compute_ns = 0;
            for (int r = 0; r < o.reps; r++) alone[r] = timed_call(&o, series[0], &b, bytes, &window);
            median_of(alone, o.reps);
            alone_s = alone[0];
            uint64_t ns = (uint64_t)(alone_s * 1e9);
            for (int r = 0; r < o.reps; r++) computed[r] = common_start_timed(compute_only, &ns, &window);
            median_of(computed, o.reps);
            compute_s = computed[0];
            b.compute_ns = ns;
        }
        /* Paired: the checks left the buffers warm for the last series only. */
        for (int k = 0; k + 1 < n_series; k++) run_op(&o, series[k], &b, bytes);
        /* Paired: the series in turn, the first one swapped at every repetition. */
        for (int r = 0; r < o.reps; r++)
            for (int j = 0; j < n_series; j++) {
                int k = (j + r) % n_series;
                times[k][r] = timed_call(&o, series[k], &b, bytes, &window);
            }
        for (int k = 0; rank == 0 && k < n_series; k++) {
            double *t = times[k];
            double median = median_of(t, o.reps);
            char algorithm[64];
            const char *form = o.overlap       ? "overlap"
                               : o.nonblocking ? "nonblocking"
                               : o.persistent  ? "persistent"
                                               : "";
            snprintf(algorithm, sizeof algorithm, "%s%s%s", o.paired ? series[k]->name : "",
                     o.paired && *form ? "-" : "", *form ? form : o.paired ? "" : "native");
            printf("%s,%s,%s,%s,%d,%llu,%llu,%d,%.9f,%.9f", lib, op_names[o.op], algorithm, dist,
                   p, (unsigned long long)bytes, (unsigned long long)b.total, o.reps, t[0], median);
            if (o.overlap) {
                double pct = alone_s > 0 ? 100.0 * (1.0 - (t[0] - compute_s) / alone_s) : 0.0;
                printf(",%.9f,%.9f,%.1f", alone_s, compute_s, pct < 0 ? 0.0 : pct > 100 ? 100.0 : pct);
            }
            printf("\n");
            fflush(stdout);
        }
        for (int k = 0; o.persistent && k < n_series; k++)
            series[k]->request_free(&b.persistent[series[k]->series]);
        if (bytes == 0) break;
    }
    if (rank == 0)
        printf("# %s: method common start, slowest rank; late repetitions %llu\n", lib,
               (unsigned long long)window.late);
    free(b.send);
    free(b.recv);
    free(b.counts);
    free(b.displs);
    free(times[0]);
    free(times[1]);
    free(alone);
    free(computed);
    if (o.dup) MPI_Comm_free(&o.comm);
    MPI_Finalize();
    return failed;
}
