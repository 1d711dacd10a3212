/* Calls at sizes on both sides of the edges of a thresholds file's ranges, on MPI_COMM_WORLD
 * (whose passed calls the layer decides from its gate) and on a duplicate of it (which takes
 * the layer's full path): bcast of 0-1025 bytes of MPI_BYTE, allreduce of 0-600 MPI_INTs
 * (MPI_SUM), allgatherv of 0-9 bytes from each rank (the total p times that), and barrier,
 * every result compared with the PMPI_ call's on the same data. Prints
 * "rank R: N passed, M failed"; exits non-zero on a failure.
 *
 *   edges */
#include <mpi.h>
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

static void on(MPI_Comm comm, const char *name) {
  static const int bcast_bytes[] = {0, 1, 4, 5, 8, 9, 511, 512, 1023, 1024, 1025};
  static const int allreduce_ints[] = {0, 1, 2, 3, 255, 256, 257, 511, 512, 600};
  int p, r;
  MPI_Comm_size(comm, &p);
  MPI_Comm_rank(comm, &r);
  unsigned char *a = calloc(2048, 1), *b = calloc(2048, 1);
  for (size_t i = 0; i < sizeof bcast_bytes / sizeof bcast_bytes[0]; i++) {
    int n = bcast_bytes[i];
    for (int k = 0; k < n; k++) a[k] = b[k] = (unsigned char)(r == 1 ? k * 7 + n : 0);
    MPI_Bcast(a, n, MPI_BYTE, 1 % p, comm);
    PMPI_Bcast(b, n, MPI_BYTE, 1 % p, comm);
    check(memcmp(a, b, (size_t)n) == 0, "bcast", n, name);
  }
  int *x = calloc(600, sizeof(int)), *y = calloc(600, sizeof(int)), *z = calloc(600, sizeof(int));
  for (size_t i = 0; i < sizeof allreduce_ints / sizeof allreduce_ints[0]; i++) {
    int n = allreduce_ints[i];
    for (int k = 0; k < n; k++) x[k] = (k * 13 + r * 101 + n) % 1000;
    MPI_Allreduce(x, y, n, MPI_INT, MPI_SUM, comm);
    PMPI_Allreduce(x, z, n, MPI_INT, MPI_SUM, comm);
    check(memcmp(y, z, sizeof(int) * (size_t)n) == 0, "allreduce", n, name);
  }
  int *counts = calloc((size_t)p, sizeof(int)), *displs = calloc((size_t)p, sizeof(int));
  unsigned char *mine = calloc(16, 1), *all1 = calloc((size_t)p * 16, 1),
                *all2 = calloc((size_t)p * 16, 1);
  for (int n = 0; n <= 9; n++) {
    for (int j = 0; j < p; j++) counts[j] = n, displs[j] = j * n;
    for (int k = 0; k < n; k++) mine[k] = (unsigned char)(r * 31 + k + n);
    MPI_Allgatherv(mine, n, MPI_BYTE, all1, counts, displs, MPI_BYTE, comm);
    PMPI_Allgatherv(mine, n, MPI_BYTE, all2, counts, displs, MPI_BYTE, comm);
    check(memcmp(all1, all2, (size_t)(p * n)) == 0, "allgatherv", n, name);
  }
  check(MPI_Barrier(comm) == MPI_SUCCESS, "barrier", 0, name);
  free(a), free(b), free(x), free(y), free(z), free(counts), free(displs), free(mine);
  free(all1), free(all2);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  on(MPI_COMM_WORLD, "the world");
  on(dup, "a duplicate");
  MPI_Comm_free(&dup);
  printf("rank %d: %d passed, %d failed\n", me, passed, failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
