/* Collectives whose insignificant arguments are junk (NULL, -1, MPI_DATATYPE_NULL), as MPI
 * allows: the receive side of a gather and gatherv on a non-root, the send side of a scatter
 * and scatterv on a non-root, the receive buffer of a reduce on a non-root, the receive side
 * of a scatter and scatterv root in place, and the send side of every call in place (gather,
 * gatherv at the root; allgather, allgatherv, alltoall anywhere). Each in every form the MPI
 * has: blocking, nonblocking and, with MPI-4, persistent (started twice, in one order on
 * every rank, as their info asserts) and large-count. Root 1
 * where there are several ranks. Prints "rank R: N passed, M failed"; exits non-zero on a
 * failure.
 *
 *   insignificant */
#include <mpi.h>

#include "ordered_starts.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum form { BLOCKING, NONBLOCKING, PERSISTENT, LARGE };
static const char *const form_names[] = {"blocking", "nonblocking", "persistent", "large-count"};
#if MPI_VERSION >= 4
enum { FORMS = 4 };
#else
enum { FORMS = 2 };
#endif

static int passed, failures, me, p;

static void check(int ok, const char *what, int form) {
  if (ok) {
    passed++;
  } else {
    failures++;
    fprintf(stderr, "rank %d: %s (%s) differs\n", me, what, form_names[form]);
  }
}

/* Calls MPI_Stem in `form`: blocking with ARGS, large-count with ARGS_C, nonblocking with
 * NB_ARGS and persistent with ARGS_INIT (macros each call defines around it, WITH_REQ and
 * WITH_INIT of its arguments). */
#if MPI_VERSION >= 4
#define MPI4_FORMS(Stem, ARGS_C)                                                               \
  case PERSISTENT:                                                                             \
    MPI_##Stem##_init ARGS_INIT;                                                               \
    for (int k = 0; k < 2; k++) {                                                              \
      MPI_Start(&rq);                                                                          \
      MPI_Wait(&rq, MPI_STATUS_IGNORE);                                                        \
    }                                                                                          \
    MPI_Request_free(&rq);                                                                     \
    break;                                                                                     \
  case LARGE:                                                                                  \
    MPI_##Stem##_c ARGS_C;                                                                     \
    break;
#else
#define MPI4_FORMS(Stem, ARGS_C)
#endif
#define CALL(form, Stem, name, ARGS, ARGS_C)                                                   \
  do {                                                                                         \
    MPI_Request rq;                                                                            \
    switch (form) {                                                                            \
    case BLOCKING:                                                                             \
      MPI_##Stem ARGS;                                                                         \
      break;                                                                                   \
    case NONBLOCKING:                                                                          \
      MPI_I##name NB_ARGS;                                                                     \
      MPI_Wait(&rq, MPI_STATUS_IGNORE);                                                        \
      break;                                                                                   \
      MPI4_FORMS(Stem, ARGS_C)                                                                 \
    }                                                                                          \
  } while (0)

/* The argument lists of one call: as given, with the request, and with the info and request. */
#define WITH_REQ(...) (__VA_ARGS__, &rq)
#define WITH_INIT(...) (__VA_ARGS__, ordered_starts(), &rq)

/* The counts and displacements of the v forms: 2 elements from each rank, one after the
 * other, as ints and as the large-count forms take them. */
struct blocks {
  int counts[64], displs[64];
  MPI_Count ccounts[64];
  MPI_Aint cdispls[64];
};

static struct blocks blocks_of_two(void) {
  struct blocks b;
  for (int j = 0; j < p; j++) {
    b.counts[j] = 2, b.displs[j] = 2 * j;
    b.ccounts[j] = 2, b.cdispls[j] = 2 * j;
  }
  return b;
}

static void gather(int form, int root) {
  int mine[2] = {me * 10, me * 10 + 1};
  int *all = calloc((size_t)p * 2, sizeof(int));
  struct blocks b = blocks_of_two();
  int at_root = me == root;
  /* gather: the receive side only at the root */
#define ARGS_INIT WITH_INIT(mine, 2, MPI_INT, at_root ? all : NULL, at_root ? 2 : -1, at_root ? MPI_INT : MPI_DATATYPE_NULL, root, MPI_COMM_WORLD)
#define NB_ARGS WITH_REQ(mine, 2, MPI_INT, at_root ? all : NULL, at_root ? 2 : -1, at_root ? MPI_INT : MPI_DATATYPE_NULL, root, MPI_COMM_WORLD)
  CALL(form, Gather, gather,
       (mine, 2, MPI_INT, at_root ? all : NULL, at_root ? 2 : -1, at_root ? MPI_INT : MPI_DATATYPE_NULL, root, MPI_COMM_WORLD),
       (mine, 2, MPI_INT, at_root ? all : NULL, at_root ? 2 : -1, at_root ? MPI_INT : MPI_DATATYPE_NULL, root, MPI_COMM_WORLD));
#undef ARGS_INIT
#undef NB_ARGS
  int ok = 1;
  for (int j = 0; at_root && j < p; j++) ok &= all[2 * j] == j * 10 && all[2 * j + 1] == j * 10 + 1;
  check(ok, "gather", form);

  /* gather in place at the root: its send side is junk */
  memset(all, 0, sizeof(int) * (size_t)p * 2);
  if (at_root) all[2 * root] = root * 10, all[2 * root + 1] = root * 10 + 1;
  const void *sb = at_root ? MPI_IN_PLACE : mine;
  int sc = at_root ? -1 : 2;
  MPI_Datatype st = at_root ? MPI_DATATYPE_NULL : MPI_INT;
#define ARGS_INIT WITH_INIT(sb, sc, st, at_root ? all : NULL, at_root ? 2 : -1, at_root ? MPI_INT : MPI_DATATYPE_NULL, root, MPI_COMM_WORLD)
#define NB_ARGS WITH_REQ(sb, sc, st, at_root ? all : NULL, at_root ? 2 : -1, at_root ? MPI_INT : MPI_DATATYPE_NULL, root, MPI_COMM_WORLD)
  CALL(form, Gather, gather,
       (sb, sc, st, at_root ? all : NULL, at_root ? 2 : -1, at_root ? MPI_INT : MPI_DATATYPE_NULL, root, MPI_COMM_WORLD),
       (sb, sc, st, at_root ? all : NULL, at_root ? 2 : -1, at_root ? MPI_INT : MPI_DATATYPE_NULL, root, MPI_COMM_WORLD));
#undef ARGS_INIT
#undef NB_ARGS
  ok = 1;
  for (int j = 0; at_root && j < p; j++) ok &= all[2 * j] == j * 10 && all[2 * j + 1] == j * 10 + 1;
  check(ok, "gather in place", form);

  /* gatherv: the receive side only at the root, and in place there */
  for (int inplace = 0; inplace < 2; inplace++) {
    memset(all, 0, sizeof(int) * (size_t)p * 2);
    if (at_root) all[2 * root] = root * 10, all[2 * root + 1] = root * 10 + 1;
    sb = inplace && at_root ? MPI_IN_PLACE : mine;
    sc = inplace && at_root ? -1 : 2;
    st = inplace && at_root ? MPI_DATATYPE_NULL : MPI_INT;
#define ARGS_INIT WITH_INIT(sb, sc, st, at_root ? all : NULL, at_root ? b.counts : NULL, at_root ? b.displs : NULL, at_root ? MPI_INT : MPI_DATATYPE_NULL, root, MPI_COMM_WORLD)
#define NB_ARGS WITH_REQ(sb, sc, st, at_root ? all : NULL, at_root ? b.counts : NULL, at_root ? b.displs : NULL, at_root ? MPI_INT : MPI_DATATYPE_NULL, root, MPI_COMM_WORLD)
    CALL(form, Gatherv, gatherv,
         (sb, sc, st, at_root ? all : NULL, at_root ? b.counts : NULL, at_root ? b.displs : NULL, at_root ? MPI_INT : MPI_DATATYPE_NULL, root, MPI_COMM_WORLD),
         (sb, sc, st, at_root ? all : NULL, at_root ? b.ccounts : NULL, at_root ? b.cdispls : NULL, at_root ? MPI_INT : MPI_DATATYPE_NULL, root, MPI_COMM_WORLD));
#undef ARGS_INIT
#undef NB_ARGS
    ok = 1;
    for (int j = 0; at_root && j < p; j++) ok &= all[2 * j] == j * 10 && all[2 * j + 1] == j * 10 + 1;
    check(ok, inplace ? "gatherv in place" : "gatherv", form);
  }
  free(all);
}

static void scatter(int form, int root) {
  int at_root = me == root;
  int *all = calloc((size_t)p * 2, sizeof(int));
  for (int j = 0; j < 2 * p; j++) all[j] = 100 + j;
  struct blocks b = blocks_of_two();
  for (int inplace = 0; inplace < 2; inplace++) {
    int mine[2] = {-1, -1};
    /* the send side only at the root; its receive side junk in place */
    void *rb = inplace && at_root ? MPI_IN_PLACE : mine;
    int rc = inplace && at_root ? -1 : 2;
    MPI_Datatype rt = inplace && at_root ? MPI_DATATYPE_NULL : MPI_INT;
#define ARGS_INIT WITH_INIT(at_root ? all : NULL, at_root ? 2 : -1, at_root ? MPI_INT : MPI_DATATYPE_NULL, rb, rc, rt, root, MPI_COMM_WORLD)
#define NB_ARGS WITH_REQ(at_root ? all : NULL, at_root ? 2 : -1, at_root ? MPI_INT : MPI_DATATYPE_NULL, rb, rc, rt, root, MPI_COMM_WORLD)
    CALL(form, Scatter, scatter,
         (at_root ? all : NULL, at_root ? 2 : -1, at_root ? MPI_INT : MPI_DATATYPE_NULL, rb, rc, rt, root, MPI_COMM_WORLD),
         (at_root ? all : NULL, at_root ? 2 : -1, at_root ? MPI_INT : MPI_DATATYPE_NULL, rb, rc, rt, root, MPI_COMM_WORLD));
#undef ARGS_INIT
#undef NB_ARGS
    int ok = inplace && at_root ? all[2 * root] == 100 + 2 * root
                                : mine[0] == 100 + 2 * me && mine[1] == 101 + 2 * me;
    check(ok, inplace ? "scatter in place" : "scatter", form);

    mine[0] = mine[1] = -1;
#define ARGS_INIT WITH_INIT(at_root ? all : NULL, at_root ? b.counts : NULL, at_root ? b.displs : NULL, at_root ? MPI_INT : MPI_DATATYPE_NULL, rb, rc, rt, root, MPI_COMM_WORLD)
#define NB_ARGS WITH_REQ(at_root ? all : NULL, at_root ? b.counts : NULL, at_root ? b.displs : NULL, at_root ? MPI_INT : MPI_DATATYPE_NULL, rb, rc, rt, root, MPI_COMM_WORLD)
    CALL(form, Scatterv, scatterv,
         (at_root ? all : NULL, at_root ? b.counts : NULL, at_root ? b.displs : NULL, at_root ? MPI_INT : MPI_DATATYPE_NULL, rb, rc, rt, root, MPI_COMM_WORLD),
         (at_root ? all : NULL, at_root ? b.ccounts : NULL, at_root ? b.cdispls : NULL, at_root ? MPI_INT : MPI_DATATYPE_NULL, rb, rc, rt, root, MPI_COMM_WORLD));
#undef ARGS_INIT
#undef NB_ARGS
    ok = inplace && at_root ? all[2 * root] == 100 + 2 * root
                            : mine[0] == 100 + 2 * me && mine[1] == 101 + 2 * me;
    check(ok, inplace ? "scatterv in place" : "scatterv", form);
  }
  free(all);
}

static void reduce(int form, int root) {
  int mine[2] = {me, 2 * me}, sum[2] = {0, 0};
  int at_root = me == root;
#define ARGS_INIT WITH_INIT(mine, at_root ? sum : NULL, 2, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD)
#define NB_ARGS WITH_REQ(mine, at_root ? sum : NULL, 2, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD)
  CALL(form, Reduce, reduce, (mine, at_root ? sum : NULL, 2, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD),
       (mine, at_root ? sum : NULL, 2, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
#undef ARGS_INIT
#undef NB_ARGS
  int total = p * (p - 1) / 2;
  check(!at_root || (sum[0] == total && sum[1] == 2 * total), "reduce", form);
}

/* Allgather, allgatherv and alltoall in place: their send sides are junk everywhere. */
static void in_place(int form) {
  int *all = calloc((size_t)p * 2, sizeof(int));
  struct blocks b = blocks_of_two();
  for (int j = 0; j < 2 * p; j++) all[j] = -1;
  all[2 * me] = me * 10, all[2 * me + 1] = me * 10 + 1;
#define ARGS_INIT WITH_INIT(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, all, 2, MPI_INT, MPI_COMM_WORLD)
#define NB_ARGS WITH_REQ(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, all, 2, MPI_INT, MPI_COMM_WORLD)
  CALL(form, Allgather, allgather, (MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, all, 2, MPI_INT, MPI_COMM_WORLD),
       (MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, all, 2, MPI_INT, MPI_COMM_WORLD));
#undef ARGS_INIT
#undef NB_ARGS
  int ok = 1;
  for (int j = 0; j < p; j++) ok &= all[2 * j] == j * 10 && all[2 * j + 1] == j * 10 + 1;
  check(ok, "allgather in place", form);

  for (int j = 0; j < 2 * p; j++) all[j] = -1;
  all[2 * me] = me * 10, all[2 * me + 1] = me * 10 + 1;
#define ARGS_INIT WITH_INIT(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, all, b.counts, b.displs, MPI_INT, MPI_COMM_WORLD)
#define NB_ARGS WITH_REQ(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, all, b.counts, b.displs, MPI_INT, MPI_COMM_WORLD)
  CALL(form, Allgatherv, allgatherv,
       (MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, all, b.counts, b.displs, MPI_INT, MPI_COMM_WORLD),
       (MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, all, b.ccounts, b.cdispls, MPI_INT, MPI_COMM_WORLD));
#undef ARGS_INIT
#undef NB_ARGS
  ok = 1;
  for (int j = 0; j < p; j++) ok &= all[2 * j] == j * 10 && all[2 * j + 1] == j * 10 + 1;
  check(ok, "allgatherv in place", form);

  /* alltoall: block j of rank r is 100 r + j */
  for (int j = 0; j < p; j++) all[2 * j] = 100 * me + j, all[2 * j + 1] = -(100 * me + j);
#define ARGS_INIT WITH_INIT(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, all, 2, MPI_INT, MPI_COMM_WORLD)
#define NB_ARGS WITH_REQ(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, all, 2, MPI_INT, MPI_COMM_WORLD)
  /* A persistent request is started twice: the second exchange puts the blocks back. */
  CALL(form, Alltoall, alltoall, (MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, all, 2, MPI_INT, MPI_COMM_WORLD),
         (MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, all, 2, MPI_INT, MPI_COMM_WORLD));
#undef ARGS_INIT
#undef NB_ARGS
  ok = 1;
  for (int j = 0; j < p; j++) {
    int v = form == PERSISTENT ? 100 * me + j : 100 * j + me;
    ok &= all[2 * j] == v && all[2 * j + 1] == -v;
  }
  check(ok, "alltoall in place", form);
  free(all);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  if (p > 64) MPI_Abort(MPI_COMM_WORLD, 2);
  int root = p > 1 ? 1 : 0;
  for (int form = 0; form < FORMS; form++) {
    gather(form, root);
    scatter(form, root);
    reduce(form, root);
    in_place(form);
  }
  printf("rank %d: %d passed, %d failed\n", me, passed, failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
