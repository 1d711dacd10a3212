/* One MPI collective under SimGrid's smpirun, timed as benches/simgrid/replay.c times a plan
 * (built with smpicc; benches/simgrid/README.md).
 *
 *   smpirun ... coll --op bcast|allgatherv|allreduce|reduce --bytes M [--dist D] [--root R]
 *
 * M is what `circulant model --bytes` means: the broadcast, the int32 vector of allreduce and
 * reduce (M rounded down to whole elements), the whole gathered buffer of allgatherv, whose
 * counts follow distribution D (regular: M/p each; broadcast: M from rank 0; spike: M/2 from
 * rank 0 and M/(2(p-1)) from each other rank; src/plan/distribution.rs). SMPI picks the
 * algorithm (--cfg=smpi/coll-selector:mpich|ompi, or --cfg=smpi/bcast:NAME ...). From a common
 * start, rank 0 prints the slowest rank's time: `time_s <seconds>`. Buffers come from
 * SMPI_SHARED_MALLOC; the program keeps no global state (smpirun -no-privatize). */
#include <mpi.h>
#include <simgrid/actor.h>
#include <smpi/smpi.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *detail) {
  fprintf(stderr, "coll: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  MPI_Abort(MPI_COMM_WORLD, 2);
  exit(2);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, p;
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &p);
  const char *op = NULL, *dist = "regular";
  long long m = -1;
  int root = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--op") == 0)
      op = argv[i + 1];
    else if (strcmp(argv[i], "--bytes") == 0)
      m = atoll(argv[i + 1]);
    else if (strcmp(argv[i], "--dist") == 0)
      dist = argv[i + 1];
    else if (strcmp(argv[i], "--root") == 0)
      root = atoi(argv[i + 1]);
    else
      die("unknown option", argv[i]);
  }
  if (!op || m < 0 || m > INT_MAX || root < 0 || root >= p)
    die("usage: coll --op bcast|allgatherv|allreduce|reduce --bytes M [--dist D] [--root R]",
        NULL);
  int *counts = calloc((size_t)p, sizeof *counts), *displs = calloc((size_t)p, sizeof *displs);
  if (!counts || !displs)
    die("out of memory", NULL);
  long long total = 0;
  for (int r = 0; r < p; r++) {
    long long c;
    if (strcmp(dist, "regular") == 0)
      c = m / p;
    else if (strcmp(dist, "broadcast") == 0)
      c = r == 0 ? m : 0;
    else if (strcmp(dist, "spike") == 0)
      c = (r == 0 || p == 1) ? m / 2 : m / (2LL * (p - 1));
    else
      die("unknown distribution (regular, broadcast, spike)", dist);
    counts[r] = (int)c;
    displs[r] = (int)total;
    total += c;
  }
  long long need = strcmp(op, "allgatherv") == 0 ? total : m;
  char *sbuf = SMPI_SHARED_MALLOC((size_t)(need > 0 ? need : 1));
  char *rbuf = SMPI_SHARED_MALLOC((size_t)(need > 0 ? need : 1));
  int elements = (int)(m / 4);

  MPI_Barrier(comm);
  double now = MPI_Wtime(), latest;
  MPI_Allreduce(&now, &latest, 1, MPI_DOUBLE, MPI_MAX, comm);
  double start = latest + 0.1;
  if (MPI_Wtime() >= start)
    die("reached the common start late", NULL);
  sg_actor_sleep_until(start);
  if (strcmp(op, "bcast") == 0)
    MPI_Bcast(sbuf, (int)m, MPI_BYTE, root, comm);
  else if (strcmp(op, "allgatherv") == 0)
    MPI_Allgatherv(sbuf, counts[rank], MPI_BYTE, rbuf, counts, displs, MPI_BYTE, comm);
  else if (strcmp(op, "allreduce") == 0)
    MPI_Allreduce(sbuf, rbuf, elements, MPI_INT, MPI_SUM, comm);
  else if (strcmp(op, "reduce") == 0)
    MPI_Reduce(sbuf, rbuf, elements, MPI_INT, MPI_SUM, root, comm);
  else
    die("unknown collective", op);
  double mine = MPI_Wtime() - start, slowest;
  MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
  if (rank == 0)
    printf("time_s %.9e\n", slowest);
  SMPI_SHARED_FREE(sbuf);
  SMPI_SHARED_FREE(rbuf);
  free(counts);
  free(displs);
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return 0;
}
