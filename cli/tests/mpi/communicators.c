/* Communicators made by every call that makes one (MPI_Comm_dup, MPI_Comm_dup_with_info,
 * MPI_Comm_split with and without MPI_UNDEFINED, MPI_Comm_split_type, MPI_Comm_create,
 * MPI_Comm_create_group, MPI_Cart_create, MPI_Cart_sub), on which the program calls only
 * nonblocking collectives: MPI_Ibcast, MPI_Iallreduce, MPI_Iallgatherv, MPI_Igatherv and
 * MPI_Iscatterv (random counts, zeros among them, scattered displacements, in place and not)
 * and MPI_Ibarrier, every byte compared with the blocking PMPI_ call on the same data (for the
 * allgatherv with packed displacements: allgatherv_reference).
 * Prints "rank R: N passed, M failed"; exits non-zero on a failure.
 *
 *   communicators check ROUNDS
 *   communicators time N [HELD]   (with HELD communicators made first and kept: N times
 *                                  MPI_Comm_dup and MPI_Comm_free, and N times MPI_Comm_dup,
 *                                  MPI_Ibcast of one int and MPI_Comm_free; rank 0 prints the
 *                                  slowest rank's mean time of each in microseconds) */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MPICH's MPI_STATUSES_IGNORE is the address 1, which GCC takes for an empty array. */
#pragma GCC diagnostic ignored "-Wstringop-overflow"

static int passed, failures, me;
static uint64_t seed = 977;

static uint64_t next(void) {
  seed ^= seed << 13;
  seed ^= seed >> 7;
  seed ^= seed << 17;
  return seed;
}
static int pick(int n) { return (int)(next() % (uint64_t)n); }
/* A count that is zero one time in three. */
static int some(int max) { return pick(3) == 0 ? 0 : 1 + pick(max); }

static void check(int ok, const char *what, const char *where, int round) {
  if (ok) {
    passed++;
  } else {
    failures++;
    fprintf(stderr, "rank %d: %s on %s differs (round %d)\n", me, what, where, round);
  }
}

static int *ints(size_t n) { return calloc(n + 1, sizeof(int)); }

static void fill(int *x, size_t n, int salt) {
  for (size_t i = 0; i < n; i++) x[i] = (int)((i * 7 + (size_t)salt * 131 + (size_t)me * 1009) % 1000) - 300;
}

/* Whether the blocks of `counts` at `displs` agree in `a` and `b`. */
static int blocks_equal(const int *a, const int *b, int p, const int *counts, const int *displs) {
  for (int j = 0; j < p; j++)
    if (memcmp(a + displs[j], b + displs[j], (size_t)counts[j] * sizeof(int))) return 0;
  return 1;
}

/* The allgatherv of `send` into `recv` as MPI defines it: the MPI gathers the blocks one after
 * another, and each goes to its displacement here. MPICH 4.0's own allgatherv on a communicator
 * of one rank puts the block at displacement 0 whatever its displacement (later MPICH releases
 * fixed it). */
static void allgatherv_reference(const int *send, int *recv, int p, int r, const int *counts,
                                 const int *displs, MPI_Comm comm) {
  int *packed_displs = ints((size_t)p), total = 0;
  for (int j = 0; j < p; j++) {
    packed_displs[j] = total;
    total += counts[j];
  }
  int *packed = ints((size_t)total);
  PMPI_Allgatherv(send, counts[r], MPI_INT, packed, counts, packed_displs, MPI_INT, comm);
  for (int j = 0; j < p; j++)
    memcpy(recv + displs[j], packed + packed_displs[j], (size_t)counts[j] * sizeof(int));
  free(packed);
  free(packed_displs);
}

/* One round of nonblocking collectives on `comm`, all outstanding together. */
static void round_on(MPI_Comm comm, const char *where, int round, int big) {
  int p, r;
  MPI_Comm_size(comm, &p);
  MPI_Comm_rank(comm, &r);
  seed = 977 + 7919 * (uint64_t)round + (uint64_t)p;
  int root = pick(p), n = some(big);
  int *counts = ints((size_t)p), *displs = ints((size_t)p), total = 0;
  for (int j = 0; j < p; j++) {
    counts[j] = some(big);
    displs[j] = total + pick(3);
    total = displs[j] + counts[j];
  }
  enum { K = 8 };
  size_t cap = (size_t)total + (size_t)big + 8;
  int *in[K], *out[K], *want[K];
  for (int k = 0; k < K; k++) {
    in[k] = ints(cap);
    out[k] = ints(cap);
    want[k] = ints(cap);
    fill(in[k], cap, round * 17 + k);
  }
  /* The references. */
  memcpy(want[0], in[0], (size_t)n * sizeof(int));
  PMPI_Bcast(want[0], n, MPI_INT, root, comm);
  PMPI_Allreduce(in[1], want[1], n, MPI_INT, MPI_SUM, comm);
  allgatherv_reference(in[2], want[2], p, r, counts, displs, comm);
  PMPI_Gatherv(in[3], counts[r], MPI_INT, want[3], counts, displs, MPI_INT, root, comm);
  PMPI_Scatterv(in[4], counts, displs, MPI_INT, want[4], counts[r], MPI_INT, root, comm);
  /* In place at the root: its own block is in the receive (gatherv) or send (scatterv) buffer. */
  memcpy(want[5], in[5], cap * sizeof(int));
  if (r == root)
    PMPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, want[5], counts, displs, MPI_INT, root, comm);
  else
    PMPI_Gatherv(in[5], counts[r], MPI_INT, NULL, NULL, NULL, MPI_INT, root, comm);
  memcpy(want[6], in[6], cap * sizeof(int));
  if (r == root)
    PMPI_Scatterv(in[6], counts, displs, MPI_INT, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, comm);
  else
    PMPI_Scatterv(NULL, NULL, NULL, MPI_INT, want[6], counts[r], MPI_INT, root, comm);

  if (r == root) memcpy(out[0], in[0], (size_t)n * sizeof(int));
  memcpy(out[5], in[5], cap * sizeof(int));
  memcpy(out[6], in[6], cap * sizeof(int));
  MPI_Request rs[K];
  MPI_Ibcast(out[0], n, MPI_INT, root, comm, &rs[0]);
  MPI_Iallreduce(in[1], out[1], n, MPI_INT, MPI_SUM, comm, &rs[1]);
  MPI_Iallgatherv(in[2], counts[r], MPI_INT, out[2], counts, displs, MPI_INT, comm, &rs[2]);
  MPI_Igatherv(in[3], counts[r], MPI_INT, out[3], counts, displs, MPI_INT, root, comm, &rs[3]);
  MPI_Iscatterv(in[4], counts, displs, MPI_INT, out[4], counts[r], MPI_INT, root, comm, &rs[4]);
  if (r == root) {
    MPI_Igatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out[5], counts, displs, MPI_INT, root, comm,
                 &rs[5]);
    MPI_Iscatterv(in[6], counts, displs, MPI_INT, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, comm,
                  &rs[6]);
  } else {
    MPI_Igatherv(in[5], counts[r], MPI_INT, NULL, NULL, NULL, MPI_INT, root, comm, &rs[5]);
    MPI_Iscatterv(NULL, NULL, NULL, MPI_INT, out[6], counts[r], MPI_INT, root, comm, &rs[6]);
  }
  MPI_Ibarrier(comm, &rs[7]);
  MPI_Waitall(K, rs, MPI_STATUSES_IGNORE);

  check(!memcmp(out[0], want[0], (size_t)n * sizeof(int)), "ibcast", where, round);
  check(!memcmp(out[1], want[1], (size_t)n * sizeof(int)), "iallreduce", where, round);
  check(blocks_equal(out[2], want[2], p, counts, displs), "iallgatherv", where, round);
  check(r != root || blocks_equal(out[3], want[3], p, counts, displs), "igatherv", where, round);
  check(!memcmp(out[4], want[4], (size_t)counts[r] * sizeof(int)), "iscatterv", where, round);
  check(r != root || !memcmp(out[5], want[5], cap * sizeof(int)), "igatherv in place", where,
        round);
  check(!memcmp(out[6], want[6], (r == root ? cap : (size_t)counts[r]) * sizeof(int)),
        "iscatterv in place", where, round);
  for (int k = 0; k < K; k++) {
    free(in[k]);
    free(out[k]);
    free(want[k]);
  }
  free(counts);
  free(displs);
}

/* The rounds on `comm` (MPI_COMM_NULL on a rank outside it), which is then freed. */
static void rounds_on(MPI_Comm *comm, const char *where, int rounds) {
  if (*comm == MPI_COMM_NULL) return;
  for (int round = 0; round < rounds; round++) round_on(*comm, where, round, round % 3 == 2 ? 5000 : 40);
  MPI_Comm_free(comm);
}

static void checks(int rounds) {
  int p;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  rounds_on(&c, "MPI_Comm_dup", rounds);
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c);
  MPI_Info_free(&info);
  rounds_on(&c, "MPI_Comm_dup_with_info", rounds);
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, -me, &c);
  rounds_on(&c, "MPI_Comm_split", rounds);
  /* Rank 0 is in no communicator of this split. */
  MPI_Comm_split(MPI_COMM_WORLD, me == 0 ? MPI_UNDEFINED : 1, me, &c);
  check((me == 0) == (c == MPI_COMM_NULL), "MPI_UNDEFINED", "MPI_Comm_split", 0);
  rounds_on(&c, "MPI_Comm_split with MPI_UNDEFINED", rounds);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &c);
  rounds_on(&c, "MPI_Comm_split_type", rounds);
  /* The even ranks with MPI_Comm_create, the odd ones with MPI_Comm_create_group. */
  MPI_Group world, even, odd;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int range_even[1][3] = {{0, p - 1, 2}}, range_odd[1][3] = {{1, p - 1, 2}};
  MPI_Group_range_incl(world, 1, range_even, &even);
  MPI_Comm_create(MPI_COMM_WORLD, even, &c);
  check((me % 2 == 0) == (c != MPI_COMM_NULL), "membership", "MPI_Comm_create", 0);
  rounds_on(&c, "MPI_Comm_create", rounds);
  if (p > 1) {
    MPI_Group_range_incl(world, 1, range_odd, &odd);
    if (me % 2) {
      MPI_Comm_create_group(MPI_COMM_WORLD, odd, 7, &c);
      rounds_on(&c, "MPI_Comm_create_group", rounds);
    }
    MPI_Group_free(&odd);
  }
  MPI_Group_free(&even);
  MPI_Group_free(&world);
  /* A grid of p/2 x 2 (p x 1 for odd p), and its rows. */
  int dims[2] = {p % 2 ? p : p / 2, p % 2 ? 1 : 2}, periods[2] = {0, 0}, remain[2] = {0, 1};
  MPI_Comm grid;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
  MPI_Cart_sub(grid, remain, &c);
  rounds_on(&c, "MPI_Cart_sub", rounds);
  rounds_on(&grid, "MPI_Cart_create", rounds);
}

static void times(int n, int held) {
  MPI_Comm *kept = calloc((size_t)held + 1, sizeof *kept);
  for (int i = 0; i < held; i++) MPI_Comm_dup(MPI_COMM_WORLD, &kept[i]);
  double t0 = MPI_Wtime();
  for (int i = 0; i < n; i++) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_free(&c);
  }
  double t1 = MPI_Wtime();
  for (int i = 0; i < n; i++) {
    MPI_Comm c;
    MPI_Request q;
    int x = me;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Ibcast(&x, 1, MPI_INT, 0, c, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    check(x == 0, "ibcast", "a new communicator", i);
    MPI_Comm_free(&c);
  }
  double t2 = MPI_Wtime();
  double mine[2] = {(t1 - t0) / n * 1e6, (t2 - t1) / n * 1e6}, slowest[2];
  PMPI_Reduce(mine, slowest, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (me == 0)
    printf("MPI_Comm_dup and MPI_Comm_free (%d held): %.1f us; with an MPI_Ibcast between: "
           "%.1f us\n", held, slowest[0], slowest[1]);
  for (int i = 0; i < held; i++) MPI_Comm_free(&kept[i]);
  free(kept);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (argc == 3 && !strcmp(argv[1], "check")) {
    checks(atoi(argv[2]));
  } else if ((argc == 3 || argc == 4) && !strcmp(argv[1], "time")) {
    times(atoi(argv[2]), argc == 4 ? atoi(argv[3]) : 0);
  } else {
    if (me == 0) fprintf(stderr, "usage: communicators check ROUNDS | time N [HELD]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  printf("rank %d: %d passed, %d failed\n", me, passed, failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
