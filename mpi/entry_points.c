/* circulant-mpi: the MPI entry points of the collectives, made for every row of
 * collectives.h (the MPI parts of the table of collectives, written by ci/header) from one
 * definition per shape of their arguments.
 *
 * A shape's macro defines a collective's forms with one type of counts: blocking (MPI_Bcast),
 * nonblocking (MPI_Ibcast) and MPI-4's persistent form (MPI_Bcast_init). Every collective has
 * them with `int` counts and, where the MPI declares them (MPI-4), with MPI_Count ones
 * (MPI_Bcast_c, MPI_Ibcast_c, MPI_Bcast_init_c).
 *
 * A blocking call passes to its PMPI_ function where the gate tells so from its arguments
 * alone; else layer_begin and its serve_ function (serve.c) serve it or pass it. A nonblocking
 * call passes where the gate tells so; else it is issued from its arguments (layer_issue,
 * nonblocking.c). A persistent call makes a request that keeps its arguments
 * (layer_persistent).
 */
#define _GNU_SOURCE
#include "layer.h"

/* The bodies of the three forms, in an entry point whose communicator is `comm` (and whose
 * request is `req`, and info `info`). */

/* A blocking call: passed where GATE says so, else served by SERVE (on the call `c`) where
 * layer_begin lets it be, else passed: MPI_CALL. */
#define BLOCKING(OP, VARIANT, GATE, SERVE, MPI_CALL)                                           \
  if (GATE) return MPI_CALL;                                                                   \
  struct call c;                                                                               \
  int rc = layer_begin(&c, OP, VARIANT, comm);                                                 \
  if (rc != PASS) rc = SERVE;                                                                  \
  return rc == PASS ? MPI_CALL : rc

/* A nonblocking call: passed where GATE says so (MPI_CALL), else issued with the arguments
 * (struct args) that follow. */
#define NONBLOCKING(VARIANT, GATE, MPI_CALL, ...)                                              \
  if (GATE) return MPI_CALL;                                                                   \
  struct args a = {__VA_ARGS__};                                                               \
  return layer_issue(&a, VARIANT, MPI_REQUEST_NULL, req)

/* A persistent call with the arguments (struct args) that follow. */
#define PERSISTENT(VARIANT, ...)                                                               \
  struct args a = {__VA_ARGS__};                                                               \
  return layer_persistent(&a, VARIANT, info, req)

/* What MPI-4 added: the persistent forms and the large-count ones. */
#if LAYER_LARGE_COUNT
#define MPI4(...) __VA_ARGS__
#else
#define MPI4(...)
#endif

/* The shapes. Each is a macro of
 *   Stem, name: the names of the forms (MPI_Stem, MPI_Iname, MPI_Stem_init);
 *   OP: the collective (enum op);
 *   L: the suffix of the forms with the counts of COUNT (none for int, _c for MPI_Count), and
 *      DISPL the type of their displacements;
 *   VB, VN, VI: the variants (enum variant) of the blocking, nonblocking and persistent forms.
 */

/* No buffers: MPI_Barrier(comm). It counts nothing, so MPI has it with `int` counts alone
 * (INT_ONLY, not INT_ONLY_c). */
#define INT_ONLY(...) __VA_ARGS__
#define INT_ONLY_c(...)
#define NO_BUFFER(Stem, name, OP, L, COUNT, DISPL, VB, VN, VI)                                 \
  INT_ONLY##L(                                                                                 \
  int MPI_##Stem(MPI_Comm comm) {                                                              \
    BLOCKING(OP, VB, gate_passes(OP, VB, comm, MPI_BYTE, 0), serve_barrier(&c),                \
             PMPI_##Stem(comm));                                                               \
  }                                                                                            \
  int MPI_I##name(MPI_Comm comm, MPI_Request *req) {                                           \
    NONBLOCKING(VN, gate_passes(OP, VN, comm, MPI_BYTE, 0), PMPI_I##name(comm, req),           \
                .op = OP, .comm = comm);                                                       \
  }                                                                                            \
  MPI4(int MPI_##Stem##_init(MPI_Comm comm, MPI_Info info, MPI_Request *req) {                 \
    PERSISTENT(VI, .op = OP, .comm = comm);                                                    \
  }))

/* One buffer, read at the root and written elsewhere: MPI_Bcast(buf, count, type, root,
 * comm). */
#define ROOTED_BUFFER(Stem, name, OP, L, COUNT, DISPL, VB, VN, VI)                             \
  int MPI_##Stem##L(void *buf, COUNT count, MPI_Datatype type, int root, MPI_Comm comm) {      \
    BLOCKING(OP, VB, gate_passes(OP, VB, comm, type, count),                                   \
             serve_bcast(&c, buf, count, type, root),                                          \
             PMPI_##Stem##L(buf, count, type, root, comm));                                    \
  }                                                                                            \
  int MPI_I##name##L(void *buf, COUNT count, MPI_Datatype type, int root, MPI_Comm comm,       \
                     MPI_Request *req) {                                                       \
    NONBLOCKING(VN, gate_passes(OP, VN, comm, type, count),                                    \
                PMPI_I##name##L(buf, count, type, root, comm, req),                            \
                .op = OP, .recv = buf, .rcount = count, .rtype = type, .root = root,           \
                .comm = comm);                                                                 \
  }                                                                                            \
  MPI4(int MPI_##Stem##_init##L(void *buf, COUNT count, MPI_Datatype type, int root,           \
                                MPI_Comm comm, MPI_Info info, MPI_Request *req) {              \
    PERSISTENT(VI, .op = OP, .recv = buf, .rcount = count, .rtype = type, .root = root,        \
               .comm = comm);                                                                  \
  })

/* A send block and size receive blocks: MPI_Allgather(sb, sc, st, rb, rcount, rt, comm). */
#define BLOCKS(Stem, name, OP, L, COUNT, DISPL, VB, VN, VI)                                    \
  int MPI_##Stem##L(const void *sb, COUNT sc, MPI_Datatype st, void *rb, COUNT rcount,         \
                    MPI_Datatype rt, MPI_Comm comm) {                                          \
    BLOCKING(OP, VB, gate_passes_sides(OP, VB, comm, sb, sc, st, rb, rcount, rt, 0),           \
             serve_blocks(&c, sb, sc, st, rb, rcount, rt, 0),                                  \
             PMPI_##Stem##L(sb, sc, st, rb, rcount, rt, comm));                                \
  }                                                                                            \
  int MPI_I##name##L(const void *sb, COUNT sc, MPI_Datatype st, void *rb, COUNT rcount,        \
                     MPI_Datatype rt, MPI_Comm comm, MPI_Request *req) {                       \
    NONBLOCKING(VN, gate_passes_sides(OP, VN, comm, sb, sc, st, rb, rcount, rt, 0),            \
                PMPI_I##name##L(sb, sc, st, rb, rcount, rt, comm, req),                        \
                .op = OP, .send = sb, .scount = sc, .stype = st, .recv = rb, .rcount = rcount, \
                .rtype = rt, .comm = comm);                                                    \
  }                                                                                            \
  MPI4(int MPI_##Stem##_init##L(const void *sb, COUNT sc, MPI_Datatype st, void *rb,           \
                                COUNT rcount, MPI_Datatype rt, MPI_Comm comm, MPI_Info info,   \
                                MPI_Request *req) {                                            \
    PERSISTENT(VI, .op = OP, .send = sb, .scount = sc, .stype = st, .recv = rb,                \
               .rcount = rcount, .rtype = rt, .comm = comm);                                   \
  })

/* Blocks to or from a root: MPI_Gather(sb, sc, st, rb, rcount, rt, root, comm). */
#define ROOTED_BLOCKS(Stem, name, OP, L, COUNT, DISPL, VB, VN, VI)                             \
  int MPI_##Stem##L(const void *sb, COUNT sc, MPI_Datatype st, void *rb, COUNT rcount,         \
                    MPI_Datatype rt, int root, MPI_Comm comm) {                                \
    BLOCKING(OP, VB, gate_passes_sides(OP, VB, comm, sb, sc, st, rb, rcount, rt, root),        \
             serve_blocks(&c, sb, sc, st, rb, rcount, rt, root),                               \
             PMPI_##Stem##L(sb, sc, st, rb, rcount, rt, root, comm));                          \
  }                                                                                            \
  int MPI_I##name##L(const void *sb, COUNT sc, MPI_Datatype st, void *rb, COUNT rcount,        \
                     MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *req) {             \
    NONBLOCKING(VN, gate_passes_sides(OP, VN, comm, sb, sc, st, rb, rcount, rt, root),         \
                PMPI_I##name##L(sb, sc, st, rb, rcount, rt, root, comm, req),                  \
                .op = OP, .send = sb, .scount = sc, .stype = st, .recv = rb, .rcount = rcount, \
                .rtype = rt, .root = root, .comm = comm);                                      \
  }                                                                                            \
  MPI4(int MPI_##Stem##_init##L(const void *sb, COUNT sc, MPI_Datatype st, void *rb,           \
                                COUNT rcount, MPI_Datatype rt, int root, MPI_Comm comm,        \
                                MPI_Info info, MPI_Request *req) {                             \
    PERSISTENT(VI, .op = OP, .send = sb, .scount = sc, .stype = st, .recv = rb,                \
               .rcount = rcount, .rtype = rt, .root = root, .comm = comm);                     \
  })

/* Counts and displacements of the receive side: MPI_Allgatherv(sb, sc, st, rb, rcounts,
 * displs, rt, comm). */
#define RECV_V(Stem, name, OP, L, COUNT, DISPL, VB, VN, VI)                                    \
  int MPI_##Stem##L(const void *sb, COUNT sc, MPI_Datatype st, void *rb, const COUNT rcounts[], \
                    const DISPL displs[], MPI_Datatype rt, MPI_Comm comm) {                    \
    BLOCKING(OP, VB, gate_passes_v(VB, comm, rcounts, displs, variant_large(VB), rt),          \
             serve_allgatherv(&c, sb, sc, st, rb, rcounts, displs, rt, variant_large(VB)),     \
             PMPI_##Stem##L(sb, sc, st, rb, rcounts, displs, rt, comm));                       \
  }                                                                                            \
  int MPI_I##name##L(const void *sb, COUNT sc, MPI_Datatype st, void *rb,                      \
                     const COUNT rcounts[], const DISPL displs[], MPI_Datatype rt,             \
                     MPI_Comm comm, MPI_Request *req) {                                        \
    NONBLOCKING(VN, gate_passes_v(VN, comm, rcounts, displs, variant_large(VN), rt),           \
                PMPI_I##name##L(sb, sc, st, rb, rcounts, displs, rt, comm, req),               \
                .op = OP, .send = sb, .scount = sc, .stype = st, .recv = rb,                   \
                .counts = rcounts, .displs = displs, .rtype = rt, .comm = comm);               \
  }                                                                                            \
  MPI4(int MPI_##Stem##_init##L(const void *sb, COUNT sc, MPI_Datatype st, void *rb,           \
                                const COUNT rcounts[], const DISPL displs[], MPI_Datatype rt,  \
                                MPI_Comm comm, MPI_Info info, MPI_Request *req) {              \
    PERSISTENT(VI, .op = OP, .send = sb, .scount = sc, .stype = st, .recv = rb,                \
               .counts = rcounts, .displs = displs, .rtype = rt, .comm = comm);                \
  })

/* Counts and displacements of the root's receive side: MPI_Gatherv(sb, sc, st, rb, rcounts,
 * displs, rt, root, comm). */
#define ROOTED_RECV_V(Stem, name, OP, L, COUNT, DISPL, VB, VN, VI)                             \
  int MPI_##Stem##L(const void *sb, COUNT sc, MPI_Datatype st, void *rb, const COUNT rcounts[], \
                    const DISPL displs[], MPI_Datatype rt, int root, MPI_Comm comm) {          \
    BLOCKING(OP, VB, gate_passes_rooted_v(OP, VB, comm, root, rcounts, displs),                \
             serve_rooted_v(&c, sb, sc, st, rb, rcounts, displs, 0, rt, root,                  \
                            variant_large(VB)),                                                \
             PMPI_##Stem##L(sb, sc, st, rb, rcounts, displs, rt, root, comm));                 \
  }                                                                                            \
  int MPI_I##name##L(const void *sb, COUNT sc, MPI_Datatype st, void *rb,                      \
                     const COUNT rcounts[], const DISPL displs[], MPI_Datatype rt, int root,   \
                     MPI_Comm comm, MPI_Request *req) {                                        \
    NONBLOCKING(VN, gate_passes_rooted_v(OP, VN, comm, root, rcounts, displs),                                   \
                PMPI_I##name##L(sb, sc, st, rb, rcounts, displs, rt, root, comm, req),         \
                .op = OP, .send = sb, .scount = sc, .stype = st, .recv = rb,                   \
                .counts = rcounts, .displs = displs, .rtype = rt, .root = root, .comm = comm); \
  }                                                                                            \
  MPI4(int MPI_##Stem##_init##L(const void *sb, COUNT sc, MPI_Datatype st, void *rb,           \
                                const COUNT rcounts[], const DISPL displs[], MPI_Datatype rt,  \
                                int root, MPI_Comm comm, MPI_Info info, MPI_Request *req) {    \
    PERSISTENT(VI, .op = OP, .send = sb, .scount = sc, .stype = st, .recv = rb,                \
               .counts = rcounts, .displs = displs, .rtype = rt, .root = root, .comm = comm);  \
  })

/* Counts and displacements of the root's send side: MPI_Scatterv(sb, scounts, displs, st, rb,
 * rcount, rt, root, comm). */
#define ROOTED_SEND_V(Stem, name, OP, L, COUNT, DISPL, VB, VN, VI)                             \
  int MPI_##Stem##L(const void *sb, const COUNT scounts[], const DISPL displs[],               \
                    MPI_Datatype st, void *rb, COUNT rcount, MPI_Datatype rt, int root,        \
                    MPI_Comm comm) {                                                           \
    BLOCKING(OP, VB, gate_passes_rooted_v(OP, VB, comm, root, scounts, displs),                \
             serve_rooted_v(&c, sb, 0, st, rb, scounts, displs, rcount, rt, root,              \
                            variant_large(VB)),                                                \
             PMPI_##Stem##L(sb, scounts, displs, st, rb, rcount, rt, root, comm));             \
  }                                                                                            \
  int MPI_I##name##L(const void *sb, const COUNT scounts[], const DISPL displs[],              \
                     MPI_Datatype st, void *rb, COUNT rcount, MPI_Datatype rt, int root,       \
                     MPI_Comm comm, MPI_Request *req) {                                        \
    NONBLOCKING(VN, gate_passes_rooted_v(OP, VN, comm, root, scounts, displs),                                   \
                PMPI_I##name##L(sb, scounts, displs, st, rb, rcount, rt, root, comm, req),     \
                .op = OP, .send = sb, .counts = scounts, .displs = displs, .stype = st,        \
                .recv = rb, .rcount = rcount, .rtype = rt, .root = root, .comm = comm);        \
  }                                                                                            \
  MPI4(int MPI_##Stem##_init##L(const void *sb, const COUNT scounts[], const DISPL displs[],   \
                                MPI_Datatype st, void *rb, COUNT rcount, MPI_Datatype rt,      \
                                int root, MPI_Comm comm, MPI_Info info, MPI_Request *req) {    \
    PERSISTENT(VI, .op = OP, .send = sb, .counts = scounts, .displs = displs, .stype = st,     \
               .recv = rb, .rcount = rcount, .rtype = rt, .root = root, .comm = comm);         \
  })

/* A reduction: MPI_Allreduce(sb, rb, count, t, op, comm). */
#define REDUCTION(Stem, name, OP, L, COUNT, DISPL, VB, VN, VI)                                 \
  int MPI_##Stem##L(const void *sb, void *rb, COUNT count, MPI_Datatype t, MPI_Op op,          \
                    MPI_Comm comm) {                                                           \
    BLOCKING(OP, VB, gate_passes(OP, VB, comm, t, count),                                      \
             serve_reduce(&c, sb, rb, count, t, op, 0),                                        \
             PMPI_##Stem##L(sb, rb, count, t, op, comm));                                      \
  }                                                                                            \
  int MPI_I##name##L(const void *sb, void *rb, COUNT count, MPI_Datatype t, MPI_Op op,         \
                     MPI_Comm comm, MPI_Request *req) {                                        \
    NONBLOCKING(VN, gate_passes(OP, VN, comm, t, count),                                       \
                PMPI_I##name##L(sb, rb, count, t, op, comm, req),                              \
                .op = OP, .send = sb, .recv = rb, .rcount = count, .rtype = t,                 \
                .reduction = op, .comm = comm);                                                \
  }                                                                                            \
  MPI4(int MPI_##Stem##_init##L(const void *sb, void *rb, COUNT count, MPI_Datatype t,         \
                                MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *req) {   \
    PERSISTENT(VI, .op = OP, .send = sb, .recv = rb, .rcount = count, .rtype = t,              \
               .reduction = op, .comm = comm);                                                 \
  })

/* A reduction to a root: MPI_Reduce(sb, rb, count, t, op, root, comm). */
#define ROOTED_REDUCTION(Stem, name, OP, L, COUNT, DISPL, VB, VN, VI)                          \
  int MPI_##Stem##L(const void *sb, void *rb, COUNT count, MPI_Datatype t, MPI_Op op,          \
                    int root, MPI_Comm comm) {                                                 \
    BLOCKING(OP, VB, gate_passes(OP, VB, comm, t, count),                                      \
             serve_reduce(&c, sb, rb, count, t, op, root),                                     \
             PMPI_##Stem##L(sb, rb, count, t, op, root, comm));                                \
  }                                                                                            \
  int MPI_I##name##L(const void *sb, void *rb, COUNT count, MPI_Datatype t, MPI_Op op,         \
                     int root, MPI_Comm comm, MPI_Request *req) {                              \
    NONBLOCKING(VN, gate_passes(OP, VN, comm, t, count),                                       \
                PMPI_I##name##L(sb, rb, count, t, op, root, comm, req),                        \
                .op = OP, .send = sb, .recv = rb, .rcount = count, .rtype = t,                 \
                .reduction = op, .root = root, .comm = comm);                                  \
  }                                                                                            \
  MPI4(int MPI_##Stem##_init##L(const void *sb, void *rb, COUNT count, MPI_Datatype t,         \
                                MPI_Op op, int root, MPI_Comm comm, MPI_Info info,             \
                                MPI_Request *req) {                                            \
    PERSISTENT(VI, .op = OP, .send = sb, .recv = rb, .rcount = count, .rtype = t,              \
               .reduction = op, .root = root, .comm = comm);                                   \
  })

/* A reduction scattered in equal blocks: MPI_Reduce_scatter_block(sb, rb, rcount, t, op,
 * comm). */
#define REDUCTION_SCATTER_BLOCK(Stem, name, OP, L, COUNT, DISPL, VB, VN, VI)                   \
  int MPI_##Stem##L(const void *sb, void *rb, COUNT rcount, MPI_Datatype t, MPI_Op op,         \
                    MPI_Comm comm) {                                                           \
    BLOCKING(OP, VB, gate_passes_scattered(OP, VB, comm, t, rcount, NULL, 0),                  \
             serve_reduce_scatter(&c, sb, rb, rcount, NULL, 0, t, op),                         \
             PMPI_##Stem##L(sb, rb, rcount, t, op, comm));                                     \
  }                                                                                            \
  int MPI_I##name##L(const void *sb, void *rb, COUNT rcount, MPI_Datatype t, MPI_Op op,        \
                     MPI_Comm comm, MPI_Request *req) {                                        \
    NONBLOCKING(VN, gate_passes_scattered(OP, VN, comm, t, rcount, NULL, 0),                   \
                PMPI_I##name##L(sb, rb, rcount, t, op, comm, req),                             \
                .op = OP, .send = sb, .recv = rb, .rcount = rcount, .rtype = t,                \
                .reduction = op, .comm = comm);                                                \
  }                                                                                            \
  MPI4(int MPI_##Stem##_init##L(const void *sb, void *rb, COUNT rcount, MPI_Datatype t,        \
                                MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *req) {   \
    PERSISTENT(VI, .op = OP, .send = sb, .recv = rb, .rcount = rcount, .rtype = t,             \
               .reduction = op, .comm = comm);                                                 \
  })

/* A reduction scattered at per-rank counts: MPI_Reduce_scatter(sb, rb, rcounts, t, op,
 * comm). */
#define REDUCTION_SCATTER_V(Stem, name, OP, L, COUNT, DISPL, VB, VN, VI)                       \
  int MPI_##Stem##L(const void *sb, void *rb, const COUNT rcounts[], MPI_Datatype t,           \
                    MPI_Op op, MPI_Comm comm) {                                                \
    BLOCKING(OP, VB, gate_passes_scattered(OP, VB, comm, t, 0, rcounts, variant_large(VB)),    \
             serve_reduce_scatter(&c, sb, rb, 0, rcounts, variant_large(VB), t, op),           \
             PMPI_##Stem##L(sb, rb, rcounts, t, op, comm));                                    \
  }                                                                                            \
  int MPI_I##name##L(const void *sb, void *rb, const COUNT rcounts[], MPI_Datatype t,          \
                     MPI_Op op, MPI_Comm comm, MPI_Request *req) {                             \
    NONBLOCKING(VN, gate_passes_scattered(OP, VN, comm, t, 0, rcounts, variant_large(VN)),     \
                PMPI_I##name##L(sb, rb, rcounts, t, op, comm, req),                            \
                .op = OP, .send = sb, .recv = rb, .counts = rcounts, .rtype = t,               \
                .reduction = op, .comm = comm);                                                \
  }                                                                                            \
  MPI4(int MPI_##Stem##_init##L(const void *sb, void *rb, const COUNT rcounts[],               \
                                MPI_Datatype t, MPI_Op op, MPI_Comm comm, MPI_Info info,       \
                                MPI_Request *req) {                                            \
    PERSISTENT(VI, .op = OP, .send = sb, .recv = rb, .counts = rcounts, .rtype = t,            \
               .reduction = op, .comm = comm);                                                 \
  })

/* Every collective's forms with `int` counts, and with MPI_Count ones where MPI has them. */
#define COLLECTIVE(Stem, name, OP, SHAPE)                                                      \
  SHAPE(Stem, name, OP, , int, int, VAR_BLOCKING, VAR_NB, VAR_INIT)                            \
  MPI4(SHAPE(Stem, name, OP, _c, MPI_Count, MPI_Aint, VAR_BLOCKING_C, VAR_NB_C, VAR_INIT_C))
#include "collectives.h"
