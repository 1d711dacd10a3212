/* MPI_Reduce_scatter_block and MPI_Reduce_scatter in every form the MPI has (blocking,
 * nonblocking, with MPI 4 the persistent and the large-count ones) through MPI_ (the layer,
 * when it is preloaded), results compared with the blocking PMPI_ call on the same data:
 * random counts (zeros included, all zeros too), every predefined operation the layer maps,
 * ints and doubles, MPI_IN_PLACE, on the world, a duplicate and a split communicator; and
 * calls the layer passes to the MPI: a user operation, MPI_SHORT, a derived datatype.
 * Prints "rank R: N passed, M failed"; exits non-zero on a failure.
 *
 *   reduce_scatter [ROUNDS]   (seeded alike on every rank)
 *   reduce_scatter sizes      (at p = 3: blocks of 0, 1, 2, 3, 4, 5, 83, 84 and 2000 ints
 *                              per rank, each collective in its blocking and nonblocking
 *                              form, on the world and on a duplicate; the reduce_scatter
 *                              with every element on rank 0) */
#include <mpi.h>

#include "ordered_starts.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MPICH's MPI_STATUSES_IGNORE is the address 1, which GCC takes for an empty array. */
#pragma GCC diagnostic ignored "-Wstringop-overflow"

static int passed, failures, me;
static uint64_t seed = 777;

static uint64_t next(void) { /* the same sequence on every rank */
  seed ^= seed << 13;
  seed ^= seed >> 7;
  seed ^= seed << 17;
  return seed;
}
static int pick(int n) { return (int)(next() % (uint64_t)n); }
/* A count: zero one time in four, else up to `max`. */
static int some(int max) { return pick(4) == 0 ? 0 : 1 + pick(max); }

static void check(int ok, const char *what, int round) {
  if (ok) {
    passed++;
  } else {
    failures++;
    fprintf(stderr, "rank %d: %s differs (round %d)\n", me, what, round);
  }
}

/* Small values, so that a product of a few ranks' stays exact. */
static void fill(int *x, long n, int salt) {
  for (long i = 0; i < n; i++) x[i] = (int)((i * 7 + salt * 131 + me * 1009) % 9) - 4;
}

static int *ints(size_t n) { return calloc(n + 1, sizeof(int)); }

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *type) {
  /* Pairs of ints (the derived type) or ints: the pair's count is twice the ints. */
  int n = *len * (*type == MPI_INT ? 1 : 2);
  for (int i = 0; i < n; i++) ((int *)inout)[i] += ((int *)in)[i];
}

/* One round on `comm`: every form, each against PMPI_Reduce_scatter(_block). */
static void round_on(MPI_Comm comm, int round, int big) {
  int p, r;
  seed = 777 + 7919 * (uint64_t)round;
  MPI_Comm_size(comm, &p);
  MPI_Comm_rank(comm, &r);
  int n = some(big);
  int *counts = ints((size_t)p), total = 0;
  int zeros = pick(6) == 0; /* every count zero */
  for (int j = 0; j < p; j++) {
    counts[j] = zeros ? 0 : some(big);
    total += counts[j];
  }
  int whole = n * p > total ? n * p : total;
  int *in = ints((size_t)whole), *out = ints((size_t)whole), *want = ints((size_t)whole);
  int *io = ints((size_t)whole), *iw = ints((size_t)whole);
  MPI_Op ops[] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_BXOR, MPI_PROD, MPI_BAND, MPI_BOR};
  MPI_Op op = ops[pick(7)];
  fill(in, whole, round);

  /* Blocking: equal blocks, then in place. */
  PMPI_Reduce_scatter_block(in, want, n, MPI_INT, op, comm);
  MPI_Reduce_scatter_block(in, out, n, MPI_INT, op, comm);
  check(!memcmp(out, want, (size_t)n * sizeof(int)), "reduce_scatter_block", round);
  memcpy(io, in, (size_t)n * p * sizeof(int));
  memcpy(iw, in, (size_t)n * p * sizeof(int));
  PMPI_Reduce_scatter_block(MPI_IN_PLACE, iw, n, MPI_INT, op, comm);
  MPI_Reduce_scatter_block(MPI_IN_PLACE, io, n, MPI_INT, op, comm);
  check(!memcmp(io, iw, (size_t)n * sizeof(int)), "reduce_scatter_block in place", round);

  /* Blocking: per-rank counts, then in place. */
  PMPI_Reduce_scatter(in, want, counts, MPI_INT, op, comm);
  MPI_Reduce_scatter(in, out, counts, MPI_INT, op, comm);
  check(!memcmp(out, want, (size_t)counts[r] * sizeof(int)), "reduce_scatter", round);
  memcpy(io, in, (size_t)total * sizeof(int));
  memcpy(iw, in, (size_t)total * sizeof(int));
  PMPI_Reduce_scatter(MPI_IN_PLACE, iw, counts, MPI_INT, op, comm);
  MPI_Reduce_scatter(MPI_IN_PLACE, io, counts, MPI_INT, op, comm);
  check(!memcmp(io, iw, (size_t)counts[r] * sizeof(int)), "reduce_scatter in place", round);

  { /* doubles holding small integers: exact in any order of summation */
    double *d = calloc((size_t)whole + 1, sizeof(double)),
           *e = calloc((size_t)whole + 1, sizeof(double)),
           *f = calloc((size_t)whole + 1, sizeof(double));
    for (int i = 0; i < whole; i++) d[i] = (double)((i + me) % 50);
    PMPI_Reduce_scatter(d, f, counts, MPI_DOUBLE, MPI_SUM, comm);
    MPI_Reduce_scatter(d, e, counts, MPI_DOUBLE, MPI_SUM, comm);
    check(!memcmp(e, f, (size_t)counts[r] * sizeof(double)), "reduce_scatter double", round);
    PMPI_Reduce_scatter_block(d, f, n, MPI_DOUBLE, MPI_MAX, comm);
    MPI_Reduce_scatter_block(d, e, n, MPI_DOUBLE, MPI_MAX, comm);
    check(!memcmp(e, f, (size_t)n * sizeof(double)), "reduce_scatter_block double", round);
    free(d), free(e), free(f);
  }

  /* Nonblocking: the four outstanding at once. */
  int *nb[4], *nw[4];
  for (int k = 0; k < 4; k++) {
    nb[k] = ints((size_t)whole);
    nw[k] = ints((size_t)whole);
  }
  memcpy(nb[1], in, (size_t)n * p * sizeof(int));
  memcpy(nw[1], in, (size_t)n * p * sizeof(int));
  memcpy(nb[3], in, (size_t)total * sizeof(int));
  memcpy(nw[3], in, (size_t)total * sizeof(int));
  PMPI_Reduce_scatter_block(in, nw[0], n, MPI_INT, op, comm);
  PMPI_Reduce_scatter_block(MPI_IN_PLACE, nw[1], n, MPI_INT, MPI_SUM, comm);
  PMPI_Reduce_scatter(in, nw[2], counts, MPI_INT, op, comm);
  PMPI_Reduce_scatter(MPI_IN_PLACE, nw[3], counts, MPI_INT, MPI_MIN, comm);
  MPI_Request rs[4];
  MPI_Ireduce_scatter_block(in, nb[0], n, MPI_INT, op, comm, &rs[0]);
  MPI_Ireduce_scatter_block(MPI_IN_PLACE, nb[1], n, MPI_INT, MPI_SUM, comm, &rs[1]);
  MPI_Ireduce_scatter(in, nb[2], counts, MPI_INT, op, comm, &rs[2]);
  MPI_Ireduce_scatter(MPI_IN_PLACE, nb[3], counts, MPI_INT, MPI_MIN, comm, &rs[3]);
  MPI_Waitall(4, rs, MPI_STATUSES_IGNORE);
  check(!memcmp(nb[0], nw[0], (size_t)n * sizeof(int)), "ireduce_scatter_block", round);
  check(!memcmp(nb[1], nw[1], (size_t)n * sizeof(int)), "ireduce_scatter_block in place", round);
  check(!memcmp(nb[2], nw[2], (size_t)counts[r] * sizeof(int)), "ireduce_scatter", round);
  check(!memcmp(nb[3], nw[3], (size_t)counts[r] * sizeof(int)), "ireduce_scatter in place",
        round);

  { /* Passed to the MPI: a user operation, a type circulant has no reduction for, a derived
     * type (pairs of ints, with the user operation). */
    MPI_Op mine;
    MPI_Op_create(user_sum, 1, &mine);
    PMPI_Reduce_scatter_block(in, want, n, MPI_INT, MPI_SUM, comm);
    MPI_Reduce_scatter_block(in, out, n, MPI_INT, mine, comm);
    check(!memcmp(out, want, (size_t)n * sizeof(int)), "reduce_scatter_block user op", round);
    PMPI_Reduce_scatter(in, want, counts, MPI_INT, MPI_SUM, comm);
    MPI_Ireduce_scatter(in, out, counts, MPI_INT, mine, comm, &rs[0]);
    MPI_Wait(&rs[0], MPI_STATUS_IGNORE);
    check(!memcmp(out, want, (size_t)counts[r] * sizeof(int)), "ireduce_scatter user op", round);
    short x[64], y[16], z[16];
    for (int i = 0; i < 64; i++) x[i] = (short)(i + me);
    int k = 64 / p < 16 ? 64 / p : 16;
    PMPI_Reduce_scatter_block(x, z, k, MPI_SHORT, MPI_SUM, comm);
    MPI_Reduce_scatter_block(x, y, k, MPI_SHORT, MPI_SUM, comm);
    check(!memcmp(y, z, (size_t)k * sizeof(short)), "reduce_scatter_block short", round);
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    int *half = ints((size_t)p);
    for (int j = 0; j < p; j++) half[j] = counts[j] / 2;
    PMPI_Reduce_scatter(in, want, half, pair, mine, comm);
    MPI_Reduce_scatter(in, out, half, pair, mine, comm);
    check(!memcmp(out, want, (size_t)half[r] * 2 * sizeof(int)), "reduce_scatter derived type",
          round);
    MPI_Type_free(&pair);
    MPI_Op_free(&mine);
    free(half);
  }

#if MPI_VERSION >= 4
  { /* The large-count forms. */
    MPI_Count cn = n, *cc = calloc((size_t)p, sizeof(MPI_Count));
    for (int j = 0; j < p; j++) cc[j] = counts[j];
    PMPI_Reduce_scatter_block(in, want, n, MPI_INT, op, comm);
    MPI_Reduce_scatter_block_c(in, out, cn, MPI_INT, op, comm);
    check(!memcmp(out, want, (size_t)n * sizeof(int)), "reduce_scatter_block_c", round);
    PMPI_Reduce_scatter(in, want, counts, MPI_INT, op, comm);
    MPI_Reduce_scatter_c(in, out, cc, MPI_INT, op, comm);
    check(!memcmp(out, want, (size_t)counts[r] * sizeof(int)), "reduce_scatter_c", round);
    MPI_Ireduce_scatter_block_c(in, nb[0], cn, MPI_INT, MPI_SUM, comm, &rs[0]);
    MPI_Ireduce_scatter_c(in, nb[2], cc, MPI_INT, MPI_SUM, comm, &rs[1]);
    MPI_Waitall(2, rs, MPI_STATUSES_IGNORE);
    PMPI_Reduce_scatter_block(in, nw[0], n, MPI_INT, MPI_SUM, comm);
    PMPI_Reduce_scatter(in, nw[2], counts, MPI_INT, MPI_SUM, comm);
    check(!memcmp(nb[0], nw[0], (size_t)n * sizeof(int)), "ireduce_scatter_block_c", round);
    check(!memcmp(nb[2], nw[2], (size_t)counts[r] * sizeof(int)), "ireduce_scatter_c", round);

    /* Persistent, each started twice with new data; the _c ones in place. */
    MPI_Request q[4];
    MPI_Reduce_scatter_block_init(in, nb[0], n, MPI_INT, op, comm, ordered_starts(), &q[0]);
    MPI_Reduce_scatter_init(in, nb[2], counts, MPI_INT, op, comm, ordered_starts(), &q[1]);
    MPI_Reduce_scatter_block_init_c(MPI_IN_PLACE, nb[1], cn, MPI_INT, MPI_SUM, comm,
                                    ordered_starts(), &q[2]);
    MPI_Reduce_scatter_init_c(MPI_IN_PLACE, nb[3], cc, MPI_INT, MPI_MAX, comm, ordered_starts(),
                              &q[3]);
    for (int start = 0; start < 2; start++) {
      fill(in, whole, round * 10 + start);
      memcpy(nb[1], in, (size_t)n * p * sizeof(int));
      memcpy(nw[1], in, (size_t)n * p * sizeof(int));
      memcpy(nb[3], in, (size_t)total * sizeof(int));
      memcpy(nw[3], in, (size_t)total * sizeof(int));
      PMPI_Reduce_scatter_block(in, nw[0], n, MPI_INT, op, comm);
      PMPI_Reduce_scatter(in, nw[2], counts, MPI_INT, op, comm);
      PMPI_Reduce_scatter_block(MPI_IN_PLACE, nw[1], n, MPI_INT, MPI_SUM, comm);
      PMPI_Reduce_scatter(MPI_IN_PLACE, nw[3], counts, MPI_INT, MPI_MAX, comm);
      MPI_Startall(4, q);
      MPI_Waitall(4, q, MPI_STATUSES_IGNORE);
      check(!memcmp(nb[0], nw[0], (size_t)n * sizeof(int)), "persistent reduce_scatter_block",
            start);
      check(!memcmp(nb[2], nw[2], (size_t)counts[r] * sizeof(int)), "persistent reduce_scatter",
            start);
      check(!memcmp(nb[1], nw[1], (size_t)n * sizeof(int)),
            "persistent reduce_scatter_block_c in place", start);
      check(!memcmp(nb[3], nw[3], (size_t)counts[r] * sizeof(int)),
            "persistent reduce_scatter_c in place", start);
    }
    for (int k = 0; k < 4; k++) MPI_Request_free(&q[k]);
    { /* A persistent one of a user's operation: the MPI's own request. */
      MPI_Op mine;
      MPI_Op_create(user_sum, 1, &mine);
      MPI_Reduce_scatter_block_init(in, nb[0], n, MPI_INT, mine, comm, ordered_starts(), &q[0]);
      MPI_Op_free(&mine);
      PMPI_Reduce_scatter_block(in, nw[0], n, MPI_INT, MPI_SUM, comm);
      MPI_Start(&q[0]);
      MPI_Wait(&q[0], MPI_STATUS_IGNORE);
      check(!memcmp(nb[0], nw[0], (size_t)n * sizeof(int)),
            "persistent reduce_scatter_block of a user's operation", round);
      MPI_Request_free(&q[0]);
    }
    free(cc);
  }
#endif
  for (int k = 0; k < 4; k++) free(nb[k]), free(nw[k]);
  free(in), free(out), free(want), free(io), free(iw), free(counts);
}

/* `sizes`: the blocks of the thresholds check on `comm`, each against the PMPI_ call. */
static void sizes_on(MPI_Comm comm) {
  static const int blocks[] = {0, 1, 2, 3, 4, 5, 83, 84, 2000};
  int p, r;
  MPI_Comm_size(comm, &p);
  MPI_Comm_rank(comm, &r);
  int *counts = ints((size_t)p);
  for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
    int n = blocks[b], whole = n * p;
    int *in = ints((size_t)whole), *out = ints((size_t)whole), *want = ints((size_t)whole);
    fill(in, whole, n);
    for (int j = 0; j < p; j++) counts[j] = j == 0 ? whole : 0;
    for (int nonblocking = 0; nonblocking < 2; nonblocking++) {
      MPI_Request q[2];
      PMPI_Reduce_scatter_block(in, want, n, MPI_INT, MPI_SUM, comm);
      if (nonblocking) {
        MPI_Ireduce_scatter_block(in, out, n, MPI_INT, MPI_SUM, comm, &q[0]);
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
      } else {
        MPI_Reduce_scatter_block(in, out, n, MPI_INT, MPI_SUM, comm);
      }
      check(!memcmp(out, want, (size_t)n * sizeof(int)), "reduce_scatter_block of a size", n);
      PMPI_Reduce_scatter(in, want, counts, MPI_INT, MPI_SUM, comm);
      if (nonblocking) {
        MPI_Ireduce_scatter(in, out, counts, MPI_INT, MPI_SUM, comm, &q[1]);
        MPI_Wait(&q[1], MPI_STATUS_IGNORE);
      } else {
        MPI_Reduce_scatter(in, out, counts, MPI_INT, MPI_SUM, comm);
      }
      check(!memcmp(out, want, (size_t)counts[r] * sizeof(int)), "reduce_scatter of a size", n);
    }
    free(in), free(out), free(want);
  }
  free(counts);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  int p;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  if (argc > 1 && strcmp(argv[1], "sizes") == 0) {
    sizes_on(MPI_COMM_WORLD);
    sizes_on(dup);
  } else {
    int rounds = argc > 1 ? atoi(argv[1]) : 4;
    for (int round = 0; round < rounds; round++)
      round_on(MPI_COMM_WORLD, round, round % 3 == 2 ? 3000 : 200);
    MPI_Barrier(dup); /* circulant on it, so that its nonblocking calls may be served */
    round_on(dup, 100, 300);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, me % 2, p - me, &half); /* reversed order */
    MPI_Barrier(half);
    round_on(half, 200, 300);
    MPI_Comm_free(&half);
  }
  MPI_Comm_free(&dup);
  printf("rank %d: %d passed, %d failed\n", me, passed, failures);
  fflush(stdout);
  MPI_Finalize();
  return failures ? 1 : 0;
}
