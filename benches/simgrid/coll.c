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
 * SMPI_SHARED_MALLOC; the program keeps no global state (smpirun -no-privatize).
 *
 * The program creates no communicator and agrees on the start with point-to-point messages:
 * under a selector (mpich, ompi) SMPI builds a communicator's node map at its creation and at
 * its first node-aware collective with a ring allgather, p (p - 1) messages, which at 4096
 * ranks takes longer than the collective. The collective runs once on one element before the
 * timed call, so that such setup (a real MPI does it when the communicator is made) falls
 * outside the time. */
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

/* The largest of every rank's x, on every rank: a binomial tree of point-to-point messages
 * to rank 0 and back (no collective, so no algorithm of a selector runs). */
static double largest(double x, MPI_Comm comm, int rank, int p) {
  int mask = 1;
  for (; mask < p; mask <<= 1) {
    if (rank & mask) {
      MPI_Send(&x, 1, MPI_DOUBLE, rank - mask, 0, comm);
      break;
    }
    if (rank + mask < p) {
      double y;
      MPI_Recv(&y, 1, MPI_DOUBLE, rank + mask, 0, comm, MPI_STATUS_IGNORE);
      x = y > x ? y : x;
    }
  }
  if (rank != 0)
    MPI_Recv(&x, 1, MPI_DOUBLE, rank - mask, 1, comm, MPI_STATUS_IGNORE);
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (rank + mask < p)
      MPI_Send(&x, 1, MPI_DOUBLE, rank + mask, 1, comm);
  return x;
}

/* The collective OP on the buffers: COUNTS/DISPLS for allgatherv, ELEMENTS int32 for the
 * reductions, M bytes for bcast. */
static void collective(const char *op, char *sbuf, char *rbuf, long long m, int elements,
                       const int *counts, const int *displs, int root, int rank, MPI_Comm comm) {
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
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, p;
  MPI_Comm comm = MPI_COMM_WORLD;
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

  /* Untimed, on one element: whatever the selected algorithms set up on first use. */
  int *ones = calloc((size_t)p, sizeof *ones), *steps = calloc((size_t)p, sizeof *steps);
  if (!ones || !steps)
    die("out of memory", NULL);
  for (int r = 0; r < p; r++) {
    ones[r] = 1;
    steps[r] = r;
  }
  char *warm = SMPI_SHARED_MALLOC((size_t)p * 8);
  collective(op, warm, warm + (size_t)p * 4, 1, 1, ones, steps, root, rank, comm);

  double start = largest(MPI_Wtime(), comm, rank, p) + 0.1;
  if (MPI_Wtime() >= start)
    die("reached the common start late", NULL);
  sg_actor_sleep_until(start);
  collective(op, sbuf, rbuf, m, elements, counts, displs, root, rank, comm);
  double slowest = largest(MPI_Wtime() - start, comm, rank, p);
  if (rank == 0)
    printf("time_s %.9e\n", slowest);
  SMPI_SHARED_FREE(warm);
  free(ones);
  free(steps);
  SMPI_SHARED_FREE(sbuf);
  SMPI_SHARED_FREE(rbuf);
  free(counts);
  free(displs);
  MPI_Finalize();
  return 0;
}
