/* Calls at sizes on both sides of the edges of a thresholds file's ranges, each result
 * compared with the PMPI_ call's on the same data: bcast of 0-1025 bytes, allreduce of 0-600
 * ints (MPI_SUM), allgatherv and allgather of 0-9 bytes from each rank (the total p times
 * that; allgather also in place, with send arguments MPI ignores then, and with 4n bytes
 * sent as n ints received), gather, scatter (both also in place at the root), gatherv,
 * scatterv (the counts at the root only) and alltoall of 0-9 bytes per rank, and barrier,
 * blocking and nonblocking. The layer decides a passed call on a communicator it knows from
 * its gate, and on one it does not know, or of a type the gate has no size of, by the ranges
 * themselves; so the calls run on
 *   - MPI_COMM_WORLD (the gate from MPI_Init),
 *   - a duplicate of it (the full path at its first call, then the gate),
 *   - the duplicate with other types of the same sizes (a contiguous type of one byte: always
 *     the full path; MPI_UNSIGNED: the full path until the gate takes it), and
 *   - after the duplicate is freed, a communicator of ranks 0 and 1 (other ranges at p = 2; its
 *     handle may be the freed one's, whose classes the gate must have forgotten: rank 0 prints
 *     "the pair's handle was the duplicate's: yes" or "no").
 * Where the MPI has MPI-4's persistent collectives, persistent bcasts of the same sizes, each
 * started twice, on the world (which the gate knows at the init) and on a new duplicate (which
 * it learns between the inits and the starts).
 * Prints "rank R: N passed, M failed"; exits non-zero on a failure.
 *
 *   edges */
#include <mpi.h>

#include "ordered_starts.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failures, me;

static void check(int ok, const char *what, int n, const char *comm) {
  if (ok) {
    passed++;
  } else {
    failures++;
    fprintf(stderr, "rank %d: %s of %d on %s differs\n", me, what, n, comm);
  }
}

static const int bcast_bytes[] = {0, 1, 4, 5, 8, 9, 511, 512, 1023, 1024, 1025};
static const int allreduce_ints[] = {0, 1, 2, 3, 255, 256, 257, 511, 512, 600};
enum {
  BCASTS = sizeof bcast_bytes / sizeof bcast_bytes[0],
  ALLREDUCES = sizeof allreduce_ints / sizeof allreduce_ints[0]
};

/* Completes a nonblocking call at once; blocking calls pass NULL. */
static void complete(MPI_Request *req) {
  if (req) MPI_Wait(req, MPI_STATUS_IGNORE);
}

/* Every call once on `comm`, with `byte` for the bytes and `ints` for the allreduce's ints;
 * nonblocking where `nonblocking`. */
static void on(MPI_Comm comm, const char *name, MPI_Datatype byte, MPI_Datatype ints,
               int nonblocking) {
  int p, r;
  MPI_Comm_size(comm, &p);
  MPI_Comm_rank(comm, &r);
  MPI_Request request, *req = nonblocking ? &request : NULL;
  unsigned char *a = calloc(2048, 1), *b = calloc(2048, 1);
  for (int i = 0; i < BCASTS; i++) {
    int n = bcast_bytes[i];
    for (int k = 0; k < n; k++) a[k] = b[k] = (unsigned char)(r == 1 ? k * 7 + n : 0);
    if (req) MPI_Ibcast(a, n, byte, 1 % p, comm, req);
    else MPI_Bcast(a, n, byte, 1 % p, comm);
    complete(req);
    PMPI_Bcast(b, n, MPI_BYTE, 1 % p, comm);
    check(memcmp(a, b, (size_t)n) == 0, "bcast", n, name);
  }
  int *x = calloc(600, sizeof(int)), *y = calloc(600, sizeof(int)), *z = calloc(600, sizeof(int));
  for (int i = 0; i < ALLREDUCES; i++) {
    int n = allreduce_ints[i];
    for (int k = 0; k < n; k++) x[k] = (k * 13 + r * 101 + n) % 1000;
    if (req) MPI_Iallreduce(x, y, n, ints, MPI_SUM, comm, req);
    else MPI_Allreduce(x, y, n, ints, MPI_SUM, comm);
    complete(req);
    PMPI_Allreduce(x, z, n, MPI_INT, MPI_SUM, comm);
    check(memcmp(y, z, sizeof(int) * (size_t)n) == 0, "allreduce", n, name);
  }
  int *counts = calloc((size_t)p, sizeof(int)), *displs = calloc((size_t)p, sizeof(int));
  unsigned char *mine = calloc(16, 1), *all1 = calloc((size_t)p * 16, 1),
                *all2 = calloc((size_t)p * 16, 1);
  for (int n = 0; n <= 9; n++) {
    for (int j = 0; j < p; j++) counts[j] = n, displs[j] = j * n;
    for (int k = 0; k < n; k++) mine[k] = (unsigned char)(r * 31 + k + n);
    if (req) MPI_Iallgatherv(mine, n, byte, all1, counts, displs, byte, comm, req);
    else MPI_Allgatherv(mine, n, byte, all1, counts, displs, byte, comm);
    complete(req);
    PMPI_Allgatherv(mine, n, MPI_BYTE, all2, counts, displs, MPI_BYTE, comm);
    check(memcmp(all1, all2, (size_t)(p * n)) == 0, "allgatherv", n, name);
  }
  unsigned char *all3 = calloc((size_t)p * 40, 1), *all4 = calloc((size_t)p * 40, 1);
  for (int n = 0; n <= 9; n++) {
    for (int k = 0; k < n; k++) mine[k] = (unsigned char)(r * 17 + k + n);
    memset(all1, 0, (size_t)p * 16);
    if (req) MPI_Iallgather(mine, n, byte, all1, n, byte, comm, req);
    else MPI_Allgather(mine, n, byte, all1, n, byte, comm);
    complete(req);
    PMPI_Allgather(mine, n, MPI_BYTE, all2, n, MPI_BYTE, comm);
    check(memcmp(all1, all2, (size_t)(p * n)) == 0, "allgather", n, name);
    /* In place: the block from the receive side; the send arguments (no ints) are ignored. */
    memset(all1, 0, (size_t)p * 16);
    memcpy(all1 + r * n, mine, (size_t)n);
    if (req) MPI_Iallgather(MPI_IN_PLACE, 0, MPI_INT, all1, n, byte, comm, req);
    else MPI_Allgather(MPI_IN_PLACE, 0, MPI_INT, all1, n, byte, comm);
    complete(req);
    check(memcmp(all1, all2, (size_t)(p * n)) == 0, "allgather in place", n, name);
    /* 4n bytes sent as n ints received. */
    for (int k = 0; k < 4 * n; k++) all3[r * 4 * n + k] = (unsigned char)(r * 5 + k + n);
    if (req) MPI_Iallgather(all3 + r * 4 * n, 4 * n, byte, all4, n, ints, comm, req);
    else MPI_Allgather(all3 + r * 4 * n, 4 * n, byte, all4, n, ints, comm);
    complete(req);
    PMPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all3, 4 * n, MPI_BYTE, comm);
    check(memcmp(all3, all4, (size_t)(p * 4 * n)) == 0, "allgather of bytes as ints", n, name);
  }
  free(all3), free(all4);
  /* Gather and scatter of n bytes per rank (each also in place at the root), alltoall of n
   * bytes to each rank, gatherv and scatterv of n bytes per rank (the counts given at the
   * root only). */
  int root = 1 % p;
  unsigned char *blocks = calloc((size_t)p * 16, 1), *got = calloc(16, 1), *want = calloc(16, 1);
  for (int n = 0; n <= 9; n++) {
    for (int k = 0; k < n; k++) mine[k] = (unsigned char)(r * 13 + k + n);
    for (int k = 0; k < p * n; k++) blocks[k] = (unsigned char)(r * 11 + k + n);
    for (int j = 0; j < p; j++) counts[j] = n, displs[j] = j * n;
    int *vcounts = r == root ? counts : NULL, *vdispls = r == root ? displs : NULL;
    PMPI_Gather(mine, n, MPI_BYTE, all2, n, MPI_BYTE, root, comm);
    /* The arguments MPI ignores (a gather's receive side and a scatter's send side off the
     * root, the other side of an in-place root) say no bytes: n of `byte` at the root only,
     * or off the root only. */
    int root_n = r == root ? n : 0, others_n = r == root ? 0 : n;
    MPI_Datatype root_t = r == root ? byte : MPI_INT, others_t = r == root ? MPI_INT : byte;
    memset(all1, 0, (size_t)p * 16);
    if (req) MPI_Igather(mine, n, byte, all1, root_n, root_t, root, comm, req);
    else MPI_Gather(mine, n, byte, all1, root_n, root_t, root, comm);
    complete(req);
    check(r != root || memcmp(all1, all2, (size_t)(p * n)) == 0, "gather", n, name);
    memset(all1, 0, (size_t)p * 16);
    memcpy(all1 + r * n, mine, (size_t)n);
    const void *send = r == root ? MPI_IN_PLACE : mine;
    if (req) MPI_Igather(send, others_n, others_t, all1, n, byte, root, comm, req);
    else MPI_Gather(send, others_n, others_t, all1, n, byte, root, comm);
    complete(req);
    check(r != root || memcmp(all1, all2, (size_t)(p * n)) == 0, "gather in place", n, name);
    memset(all1, 0, (size_t)p * 16);
    if (req) MPI_Igatherv(mine, n, byte, all1, vcounts, vdispls, byte, root, comm, req);
    else MPI_Gatherv(mine, n, byte, all1, vcounts, vdispls, byte, root, comm);
    complete(req);
    check(r != root || memcmp(all1, all2, (size_t)(p * n)) == 0, "gatherv", n, name);

    PMPI_Scatter(blocks, n, MPI_BYTE, want, n, MPI_BYTE, root, comm);
    memset(got, 0, 16);
    if (req) MPI_Iscatter(blocks, root_n, root_t, got, n, byte, root, comm, req);
    else MPI_Scatter(blocks, root_n, root_t, got, n, byte, root, comm);
    complete(req);
    check(memcmp(got, want, (size_t)n) == 0, "scatter", n, name);
    memset(got, 0, 16);
    void *into = r == root ? MPI_IN_PLACE : got;
    if (req) MPI_Iscatter(blocks, n, byte, into, others_n, others_t, root, comm, req);
    else MPI_Scatter(blocks, n, byte, into, others_n, others_t, root, comm);
    complete(req);
    check(r == root || memcmp(got, want, (size_t)n) == 0, "scatter in place", n, name);
    memset(got, 0, 16);
    if (req) MPI_Iscatterv(blocks, vcounts, vdispls, byte, got, n, byte, root, comm, req);
    else MPI_Scatterv(blocks, vcounts, vdispls, byte, got, n, byte, root, comm);
    complete(req);
    check(memcmp(got, want, (size_t)n) == 0, "scatterv", n, name);

    PMPI_Alltoall(blocks, n, MPI_BYTE, all2, n, MPI_BYTE, comm);
    memset(all1, 0, (size_t)p * 16);
    if (req) MPI_Ialltoall(blocks, n, byte, all1, n, byte, comm, req);
    else MPI_Alltoall(blocks, n, byte, all1, n, byte, comm);
    complete(req);
    check(memcmp(all1, all2, (size_t)(p * n)) == 0, "alltoall", n, name);
  }
  free(blocks), free(got), free(want);
  int rc = req ? MPI_Ibarrier(comm, req) : MPI_Barrier(comm);
  complete(req);
  check(rc == MPI_SUCCESS, "barrier", 0, name);
  free(a), free(b), free(x), free(y), free(z), free(counts), free(displs), free(mine);
  free(all1), free(all2);
}

#if MPI_VERSION >= 4
/* Persistent bcasts of every size of bcast_bytes on `comm`: all made, then each started twice
 * and compared with the PMPI_ call's. With `fresh`, `comm` is a duplicate no call has used
 * yet, so the layer does not know it at the inits, and a blocking barrier between the inits
 * and the starts makes it known. */
static void persistent_bcasts(MPI_Comm comm, const char *name, int fresh) {
  int r;
  MPI_Comm_rank(comm, &r);
  MPI_Request reqs[BCASTS];
  unsigned char *a = calloc((size_t)BCASTS * 1025, 1), *b = calloc(1025, 1);
  for (int i = 0; i < BCASTS; i++)
    MPI_Bcast_init(a + i * 1025, bcast_bytes[i], MPI_BYTE, 1, comm, ordered_starts(), &reqs[i]);
  if (fresh) MPI_Barrier(comm);
  for (int round = 0; round < 2; round++)
    for (int i = 0; i < BCASTS; i++) {
      int n = bcast_bytes[i];
      unsigned char *mine = a + i * 1025;
      for (int k = 0; k < n; k++) mine[k] = b[k] = (unsigned char)(r == 1 ? k * 3 + n + round : 0);
      MPI_Start(&reqs[i]);
      MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
      PMPI_Bcast(b, n, MPI_BYTE, 1, comm);
      check(memcmp(mine, b, (size_t)n) == 0, "persistent bcast", n, name);
    }
  for (int i = 0; i < BCASTS; i++) MPI_Request_free(&reqs[i]);
  free(a), free(b);
}
#endif

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Datatype one_byte;
  MPI_Type_contiguous(1, MPI_BYTE, &one_byte);
  MPI_Type_commit(&one_byte);
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  on(MPI_COMM_WORLD, "the world", MPI_BYTE, MPI_INT, 0);
  on(dup, "a duplicate", MPI_BYTE, MPI_INT, 0);
  on(dup, "a duplicate, other types", one_byte, MPI_UNSIGNED, 0);
  on(MPI_COMM_WORLD, "the world, nonblocking", MPI_BYTE, MPI_INT, 1);
  on(dup, "a duplicate, nonblocking", MPI_BYTE, MPI_INT, 1);
#if MPI_VERSION >= 4
  persistent_bcasts(MPI_COMM_WORLD, "the world, persistent", 0);
  MPI_Comm fresh;
  MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
  persistent_bcasts(fresh, "a new duplicate, persistent", 1);
  MPI_Comm_free(&fresh);
#endif
  MPI_Comm freed = dup;
  MPI_Comm_free(&dup);
  MPI_Comm pair;
  MPI_Comm_split(MPI_COMM_WORLD, me < 2 ? 0 : MPI_UNDEFINED, me, &pair);
  if (me == 0) printf("the pair's handle was the duplicate's: %s\n", pair == freed ? "yes" : "no");
  if (pair != MPI_COMM_NULL) {
    on(pair, "a pair", MPI_BYTE, MPI_INT, 0);
    MPI_Comm_free(&pair);
  }
  MPI_Type_free(&one_byte);
  printf("rank %d: %d passed, %d failed\n", me, passed, failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
