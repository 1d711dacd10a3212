/* Every collective the circulant MPI layer serves, called through MPI_ (the layer, when it is
 * preloaded) and through PMPI_ (the MPI itself) on the same data, results compared: random
 * sizes (zeros included), roots and counts, MPI_IN_PLACE, scattered displacements, dup and
 * split communicators, a communicator freed and made again, a non-contiguous datatype, a user
 * operation and a datatype circulant has no reduction for. Prints
 * "rank R: N passed, M failed"; exits non-zero on a failure.
 *
 * An intercommunicator's broadcast is checked too.
 *
 *   collectives [ROUNDS [multiple]]   (seeded alike on every rank; `multiple`: start with
 *                                      MPI_Init_thread(MPI_THREAD_MULTIPLE)) */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failures, me;
static uint64_t seed = 12345;

static uint64_t next(void) { /* the same sequence on every rank */
  seed ^= seed << 13;
  seed ^= seed >> 7;
  seed ^= seed << 17;
  return seed;
}
static int pick(int n) { return (int)(next() % (uint64_t)n); }
/* A size: zero one time in five, else up to `max`. */
static int some(int max) { return pick(5) == 0 ? 0 : 1 + pick(max); }

static void check(int ok, const char *what, MPI_Comm comm, int round) {
  int size;
  MPI_Comm_size(comm, &size);
  if (ok) {
    passed++;
  } else {
    failures++;
    fprintf(stderr, "rank %d: %s differs (p=%d, round %d)\n", me, what, size, round);
  }
}

static void fill(int *x, long n, int salt) {
  for (long i = 0; i < n; i++) x[i] = (int)((i * 7 + salt * 131 + me * 1009) % 1000) - 300;
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

/* One round of every collective on `comm`. */
static void round_on(MPI_Comm comm, int round, int big) {
  int p, r;
  seed = 12345 + 7919 * (uint64_t)round; /* the same on every rank of `comm` */
  MPI_Comm_size(comm, &p);
  MPI_Comm_rank(comm, &r);
  int n = some(big), root = pick(p);
  size_t cap = (size_t)(big + 1) * (size_t)p * 2 + 16;
  int *a = calloc(cap, sizeof(int)), *b = calloc(cap, sizeof(int)), *s = calloc(cap, sizeof(int));
  int *counts = calloc((size_t)p, sizeof(int)), *displs = calloc((size_t)p, sizeof(int));
  int total = 0;
  for (int j = 0; j < p; j++) {
    counts[j] = some(big);
    displs[j] = total + j % 3; /* gaps between the blocks */
    total = displs[j] + counts[j];
  }
  size_t vcap = (size_t)total + 16;
  int *va = calloc(vcap, sizeof(int)), *vb = calloc(vcap, sizeof(int));

  MPI_Barrier(comm);
  passed++;

  fill(a, n, round); memcpy(b, a, (size_t)n * sizeof(int));
  MPI_Bcast(a, n, MPI_INT, root, comm);
  PMPI_Bcast(b, n, MPI_INT, root, comm);
  check(!memcmp(a, b, (size_t)n * sizeof(int)), "bcast", comm, round);

  fill(s, n, round);
  MPI_Allgather(s, n, MPI_INT, a, n, MPI_INT, comm);
  PMPI_Allgather(s, n, MPI_INT, b, n, MPI_INT, comm);
  check(!memcmp(a, b, (size_t)n * p * sizeof(int)), "allgather", comm, round);

  fill(a, (long)n * p, round); memcpy(b, a, (size_t)n * p * sizeof(int));
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, n, MPI_INT, comm);
  PMPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, n, MPI_INT, comm);
  check(!memcmp(a, b, (size_t)n * p * sizeof(int)), "allgather in place", comm, round);

  fill(s, counts[r], round);
  memset(va, 0, vcap * sizeof(int)); memset(vb, 0, vcap * sizeof(int));
  MPI_Allgatherv(s, counts[r], MPI_INT, va, counts, displs, MPI_INT, comm);
  PMPI_Allgatherv(s, counts[r], MPI_INT, vb, counts, displs, MPI_INT, comm);
  check(!memcmp(va, vb, (size_t)total * sizeof(int)), "allgatherv", comm, round);

  fill(va, total, round); memcpy(vb, va, (size_t)total * sizeof(int));
  MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, va, counts, displs, MPI_INT, comm);
  PMPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, vb, counts, displs, MPI_INT, comm);
  check(!memcmp(va, vb, (size_t)total * sizeof(int)), "allgatherv in place", comm, round);

  MPI_Op ops[] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_BXOR, MPI_PROD};
  MPI_Op op = ops[pick(5)];
  fill(s, n, round);
  if (op == MPI_PROD) for (int i = 0; i < n; i++) s[i] = s[i] % 3;
  MPI_Allreduce(s, a, n, MPI_INT, op, comm);
  PMPI_Allreduce(s, b, n, MPI_INT, op, comm);
  check(!memcmp(a, b, (size_t)n * sizeof(int)), "allreduce", comm, round);
  memcpy(a, s, (size_t)n * sizeof(int)); memcpy(b, s, (size_t)n * sizeof(int));
  MPI_Allreduce(MPI_IN_PLACE, a, n, MPI_INT, op, comm);
  PMPI_Allreduce(MPI_IN_PLACE, b, n, MPI_INT, op, comm);
  check(!memcmp(a, b, (size_t)n * sizeof(int)), "allreduce in place", comm, round);

  { /* doubles holding small integers: exact in any order of summation */
    double *d = calloc((size_t)n + 1, sizeof(double)), *e = calloc((size_t)n + 1, sizeof(double)),
           *f = calloc((size_t)n + 1, sizeof(double));
    for (int i = 0; i < n; i++) d[i] = (double)((i + me) % 50);
    MPI_Allreduce(d, e, n, MPI_DOUBLE, MPI_SUM, comm);
    PMPI_Allreduce(d, f, n, MPI_DOUBLE, MPI_SUM, comm);
    check(!memcmp(e, f, (size_t)n * sizeof(double)), "allreduce double", comm, round);
    /* The same at addresses that are not aligned for a double. */
    char *u = calloc((size_t)n * 3 * sizeof(double) + 4, 1);
    memcpy(u + 1, d, (size_t)n * sizeof(double));
    MPI_Allreduce(u + 1, u + 2 + (size_t)n * sizeof(double), n, MPI_DOUBLE, MPI_SUM, comm);
    check(!memcmp(u + 2 + (size_t)n * sizeof(double), f, (size_t)n * sizeof(double)),
          "allreduce double unaligned", comm, round);
    free(u);
    free(d); free(e); free(f);
  }

  fill(s, n, round);
  memset(a, 0, cap * sizeof(int)); memset(b, 0, cap * sizeof(int));
  MPI_Reduce(s, a, n, MPI_INT, MPI_SUM, root, comm);
  PMPI_Reduce(s, b, n, MPI_INT, MPI_SUM, root, comm);
  check(r != root || !memcmp(a, b, (size_t)n * sizeof(int)), "reduce", comm, round);
  memcpy(a, s, (size_t)n * sizeof(int)); memcpy(b, s, (size_t)n * sizeof(int));
  /* (Root 0: MPICH 4.0.2's own in-place reduce crashes at p = 8 with another root and
   * some hundred ints, where the layer passes the call through.) */
  MPI_Reduce(r == 0 ? MPI_IN_PLACE : a, r == 0 ? a : NULL, n, MPI_INT, MPI_MAX, 0, comm);
  PMPI_Reduce(r == 0 ? MPI_IN_PLACE : b, r == 0 ? b : NULL, n, MPI_INT, MPI_MAX, 0, comm);
  check(r != 0 || !memcmp(a, b, (size_t)n * sizeof(int)), "reduce in place", comm, round);

  fill(s, n, round);
  MPI_Scan(s, a, n, MPI_INT, MPI_SUM, comm);
  PMPI_Scan(s, b, n, MPI_INT, MPI_SUM, comm);
  check(!memcmp(a, b, (size_t)n * sizeof(int)), "scan", comm, round);
  memcpy(a, s, (size_t)n * sizeof(int)); memcpy(b, s, (size_t)n * sizeof(int));
  MPI_Scan(MPI_IN_PLACE, a, n, MPI_INT, MPI_BOR, comm);
  PMPI_Scan(MPI_IN_PLACE, b, n, MPI_INT, MPI_BOR, comm);
  check(!memcmp(a, b, (size_t)n * sizeof(int)), "scan in place", comm, round);
  MPI_Exscan(s, a, n, MPI_INT, MPI_SUM, comm);
  PMPI_Exscan(s, b, n, MPI_INT, MPI_SUM, comm);
  check(r == 0 || !memcmp(a, b, (size_t)n * sizeof(int)), "exscan", comm, round);
  memcpy(a, s, (size_t)n * sizeof(int)); memcpy(b, s, (size_t)n * sizeof(int));
  MPI_Exscan(MPI_IN_PLACE, a, n, MPI_INT, MPI_MIN, comm);
  PMPI_Exscan(MPI_IN_PLACE, b, n, MPI_INT, MPI_MIN, comm);
  check(r == 0 || !memcmp(a, b, (size_t)n * sizeof(int)), "exscan in place", comm, round);

  fill(s, n, round);
  memset(a, 0, cap * sizeof(int)); memset(b, 0, cap * sizeof(int));
  MPI_Gather(s, n, MPI_INT, a, n, MPI_INT, root, comm);
  PMPI_Gather(s, n, MPI_INT, b, n, MPI_INT, root, comm);
  check(r != root || !memcmp(a, b, (size_t)n * p * sizeof(int)), "gather", comm, round);
  fill(a, (long)n * p, round); memcpy(b, a, (size_t)n * p * sizeof(int));
  MPI_Gather(r == root ? MPI_IN_PLACE : a, n, MPI_INT, a, n, MPI_INT, root, comm);
  PMPI_Gather(r == root ? MPI_IN_PLACE : b, n, MPI_INT, b, n, MPI_INT, root, comm);
  check(r != root || !memcmp(a, b, (size_t)n * p * sizeof(int)), "gather in place", comm, round);

  fill(s, counts[r], round);
  memset(va, 0, vcap * sizeof(int)); memset(vb, 0, vcap * sizeof(int));
  MPI_Gatherv(s, counts[r], MPI_INT, va, counts, displs, MPI_INT, root, comm);
  PMPI_Gatherv(s, counts[r], MPI_INT, vb, counts, displs, MPI_INT, root, comm);
  check(r != root || !memcmp(va, vb, (size_t)total * sizeof(int)), "gatherv", comm, round);
  fill(va, total, round); memcpy(vb, va, (size_t)total * sizeof(int));
  MPI_Gatherv(r == root ? MPI_IN_PLACE : va, counts[r], MPI_INT, va, counts, displs, MPI_INT, root, comm);
  PMPI_Gatherv(r == root ? MPI_IN_PLACE : vb, counts[r], MPI_INT, vb, counts, displs, MPI_INT, root, comm);
  check(r != root || !memcmp(va, vb, (size_t)total * sizeof(int)), "gatherv in place", comm, round);

  fill(s, (long)n * p, round);
  memset(a, 0, cap * sizeof(int)); memset(b, 0, cap * sizeof(int));
  MPI_Scatter(s, n, MPI_INT, a, n, MPI_INT, root, comm);
  PMPI_Scatter(s, n, MPI_INT, b, n, MPI_INT, root, comm);
  check(!memcmp(a, b, (size_t)n * sizeof(int)), "scatter", comm, round);
  memcpy(a, s, (size_t)n * p * sizeof(int)); memcpy(b, s, (size_t)n * p * sizeof(int));
  MPI_Scatter(a, n, MPI_INT, r == root ? MPI_IN_PLACE : a, n, MPI_INT, root, comm);
  PMPI_Scatter(b, n, MPI_INT, r == root ? MPI_IN_PLACE : b, n, MPI_INT, root, comm);
  check(!memcmp(a, b, (size_t)n * p * sizeof(int)), "scatter in place", comm, round);

  fill(va, total, round);
  memset(a, 0, cap * sizeof(int)); memset(b, 0, cap * sizeof(int));
  MPI_Scatterv(va, counts, displs, MPI_INT, a, counts[r], MPI_INT, root, comm);
  PMPI_Scatterv(va, counts, displs, MPI_INT, b, counts[r], MPI_INT, root, comm);
  check(!memcmp(a, b, (size_t)counts[r] * sizeof(int)), "scatterv", comm, round);
  memcpy(vb, va, (size_t)total * sizeof(int));
  MPI_Scatterv(va, counts, displs, MPI_INT, r == root ? MPI_IN_PLACE : a, counts[r], MPI_INT, root, comm);
  PMPI_Scatterv(vb, counts, displs, MPI_INT, r == root ? MPI_IN_PLACE : b, counts[r], MPI_INT, root, comm);
  check(!memcmp(a, b, (size_t)counts[r] * sizeof(int)) && !memcmp(va, vb, (size_t)total * sizeof(int)),
        "scatterv in place", comm, round);

  fill(s, (long)n * p, round);
  MPI_Alltoall(s, n, MPI_INT, a, n, MPI_INT, comm);
  PMPI_Alltoall(s, n, MPI_INT, b, n, MPI_INT, comm);
  check(!memcmp(a, b, (size_t)n * p * sizeof(int)), "alltoall", comm, round);
  memcpy(a, s, (size_t)n * p * sizeof(int)); memcpy(b, s, (size_t)n * p * sizeof(int));
  MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, n, MPI_INT, comm);
  PMPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, n, MPI_INT, comm);
  check(!memcmp(a, b, (size_t)n * p * sizeof(int)), "alltoall in place", comm, round);

  { /* a non-contiguous datatype: every other int */
    MPI_Datatype every_other;
    MPI_Type_vector(n > 0 ? n : 1, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    int k = n > 0 ? 1 : 0;
    fill(a, 2L * n, round); memcpy(b, a, (size_t)n * 2 * sizeof(int));
    MPI_Bcast(a, k, every_other, root, comm);
    PMPI_Bcast(b, k, every_other, root, comm);
    check(!memcmp(a, b, (size_t)n * 2 * sizeof(int)), "bcast vector type", comm, round);
    fill(s, 2L * n, round);
    memset(a, 0, cap * sizeof(int)); memset(b, 0, cap * sizeof(int));
    MPI_Allgather(s, k, every_other, a, n, MPI_INT, comm);
    PMPI_Allgather(s, k, every_other, b, n, MPI_INT, comm);
    check(!memcmp(a, b, (size_t)n * p * sizeof(int)), "allgather vector type", comm, round);
    MPI_Type_free(&every_other);
  }

  { /* a user operation and a type without a circulant reduction: passed through */
    MPI_Op mine;
    MPI_Op_create(user_sum, 1, &mine);
    fill(s, n, round);
    MPI_Allreduce(s, a, n, MPI_INT, mine, comm);
    PMPI_Allreduce(s, b, n, MPI_INT, MPI_SUM, comm);
    check(!memcmp(a, b, (size_t)n * sizeof(int)), "allreduce user op", comm, round);
    MPI_Op_free(&mine);
    short x[4] = {1, 2, 3, (short)me}, y[4], z[4];
    MPI_Allreduce(x, y, 4, MPI_SHORT, MPI_SUM, comm);
    PMPI_Allreduce(x, z, 4, MPI_SHORT, MPI_SUM, comm);
    check(!memcmp(y, z, sizeof y), "allreduce short", comm, round);
  }

#if MPI_VERSION >= 4
  { /* the large-count forms */
    MPI_Count cn = n;
    MPI_Count *cc = calloc((size_t)p, sizeof(MPI_Count));
    MPI_Aint *cd = calloc((size_t)p, sizeof(MPI_Aint));
    for (int j = 0; j < p; j++) { cc[j] = counts[j]; cd[j] = displs[j]; }
    fill(a, n, round); memcpy(b, a, (size_t)n * sizeof(int));
    MPI_Bcast_c(a, cn, MPI_INT, root, comm);
    PMPI_Bcast_c(b, cn, MPI_INT, root, comm);
    check(!memcmp(a, b, (size_t)n * sizeof(int)), "bcast_c", comm, round);
    fill(s, counts[r], round);
    memset(va, 0, vcap * sizeof(int)); memset(vb, 0, vcap * sizeof(int));
    MPI_Allgatherv_c(s, cc[r], MPI_INT, va, cc, cd, MPI_INT, comm);
    PMPI_Allgatherv_c(s, cc[r], MPI_INT, vb, cc, cd, MPI_INT, comm);
    check(!memcmp(va, vb, (size_t)total * sizeof(int)), "allgatherv_c", comm, round);
    fill(s, n, round);
    MPI_Allgather_c(s, cn, MPI_INT, a, cn, MPI_INT, comm);
    PMPI_Allgather_c(s, cn, MPI_INT, b, cn, MPI_INT, comm);
    check(!memcmp(a, b, (size_t)n * p * sizeof(int)), "allgather_c", comm, round);
    MPI_Allreduce_c(s, a, cn, MPI_INT, MPI_SUM, comm);
    PMPI_Allreduce_c(s, b, cn, MPI_INT, MPI_SUM, comm);
    check(!memcmp(a, b, (size_t)n * sizeof(int)), "allreduce_c", comm, round);
    memset(a, 0, cap * sizeof(int)); memset(b, 0, cap * sizeof(int));
    MPI_Reduce_c(s, a, cn, MPI_INT, MPI_SUM, root, comm);
    PMPI_Reduce_c(s, b, cn, MPI_INT, MPI_SUM, root, comm);
    check(r != root || !memcmp(a, b, (size_t)n * sizeof(int)), "reduce_c", comm, round);
    MPI_Scan_c(s, a, cn, MPI_INT, MPI_SUM, comm);
    PMPI_Scan_c(s, b, cn, MPI_INT, MPI_SUM, comm);
    check(!memcmp(a, b, (size_t)n * sizeof(int)), "scan_c", comm, round);
    MPI_Exscan_c(s, a, cn, MPI_INT, MPI_SUM, comm);
    PMPI_Exscan_c(s, b, cn, MPI_INT, MPI_SUM, comm);
    check(r == 0 || !memcmp(a, b, (size_t)n * sizeof(int)), "exscan_c", comm, round);
    memset(a, 0, cap * sizeof(int)); memset(b, 0, cap * sizeof(int));
    MPI_Gather_c(s, cn, MPI_INT, a, cn, MPI_INT, root, comm);
    PMPI_Gather_c(s, cn, MPI_INT, b, cn, MPI_INT, root, comm);
    check(r != root || !memcmp(a, b, (size_t)n * p * sizeof(int)), "gather_c", comm, round);
    memset(va, 0, vcap * sizeof(int)); memset(vb, 0, vcap * sizeof(int));
    fill(s, counts[r], round);
    MPI_Gatherv_c(s, cc[r], MPI_INT, va, cc, cd, MPI_INT, root, comm);
    PMPI_Gatherv_c(s, cc[r], MPI_INT, vb, cc, cd, MPI_INT, root, comm);
    check(r != root || !memcmp(va, vb, (size_t)total * sizeof(int)), "gatherv_c", comm, round);
    fill(s, (long)n * p, round);
    MPI_Scatter_c(s, cn, MPI_INT, a, cn, MPI_INT, root, comm);
    PMPI_Scatter_c(s, cn, MPI_INT, b, cn, MPI_INT, root, comm);
    check(!memcmp(a, b, (size_t)n * sizeof(int)), "scatter_c", comm, round);
    fill(va, total, round);
    MPI_Scatterv_c(va, cc, cd, MPI_INT, a, cc[r], MPI_INT, root, comm);
    PMPI_Scatterv_c(va, cc, cd, MPI_INT, b, cc[r], MPI_INT, root, comm);
    check(!memcmp(a, b, (size_t)counts[r] * sizeof(int)), "scatterv_c", comm, round);
    MPI_Alltoall_c(s, cn, MPI_INT, a, cn, MPI_INT, comm);
    PMPI_Alltoall_c(s, cn, MPI_INT, b, cn, MPI_INT, comm);
    check(!memcmp(a, b, (size_t)n * p * sizeof(int)), "alltoall_c", comm, round);
    free(cc); free(cd);
  }
#endif
  free(a); free(b); free(s); free(counts); free(displs); free(va); free(vb);
}

/* An intercommunicator between the even and the odd ranks: a broadcast from the even group's
 * first rank to the odd group (the layer passes it through). */
static void intercomm_bcast(void) {
  int p;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  if (p < 2) return;
  MPI_Comm local, inter;
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &local);
  MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, me % 2 == 0 ? 1 : 0, 77, &inter);
  int v[4] = {0, 0, 0, 0};
  if (me == 0)
    for (int i = 0; i < 4; i++) v[i] = 10 + i;
  int root = me % 2 == 1 ? 0 : me == 0 ? MPI_ROOT : MPI_PROC_NULL;
  MPI_Bcast(v, 4, MPI_INT, root, inter);
  int ok = 1;
  for (int i = 0; i < 4; i++) ok = ok && v[i] == (me % 2 == 1 || me == 0 ? 10 + i : 0);
  check(ok, "intercommunicator bcast", MPI_COMM_WORLD, 0);
  MPI_Comm_free(&inter);
  MPI_Comm_free(&local);
}

int main(int argc, char **argv) {
  if (argc > 2 && strcmp(argv[2], "multiple") == 0) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (me == 0) printf("thread level %s\n", provided == MPI_THREAD_MULTIPLE ? "multiple" : "lower");
  } else {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
  }
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  intercomm_bcast();
  for (int round = 0; round < rounds; round++) round_on(MPI_COMM_WORLD, round, round == 0 ? 3 : 700);

  MPI_Comm dup, half;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  round_on(dup, 100, 300);
  int p;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, p - me, &half); /* reversed order */
  round_on(half, 200, 300);
  MPI_Comm_free(&half);
  MPI_Comm_free(&dup);
  /* Made again after the free: a new communicator, a new circulant one. */
  MPI_Comm_split(MPI_COMM_WORLD, me < p / 2, me, &half);
  round_on(half, 300, 50);
  MPI_Comm_free(&half);
  { /* MPI_Comm_create over the even ranks */
    MPI_Group world, evens;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int k = (p + 1) / 2, *ranks = malloc(sizeof(int) * (size_t)k);
    for (int i = 0; i < k; i++) ranks[i] = 2 * i;
    MPI_Group_incl(world, k, ranks, &evens);
    MPI_Comm made;
    MPI_Comm_create(MPI_COMM_WORLD, evens, &made);
    if (made != MPI_COMM_NULL) {
      round_on(made, 400, 100);
      MPI_Comm_free(&made);
    }
    MPI_Group_free(&evens);
    MPI_Group_free(&world);
    free(ranks);
  }
  printf("rank %d: %d passed, %d failed\n", me, passed, failures);
  fflush(stdout);
  MPI_Finalize();
  return failures ? 1 : 0;
}
