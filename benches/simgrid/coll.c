/* MPI collectives under SimGrid's smpirun, timed as benches/simgrid/replay.c times a plan
 * (built with smpicc; benches/simgrid/README.md).
 *
 *   smpirun ... coll --op OP[:DIST][,...] --bytes M[,...] [--dist D] [--root R]
 *
 * OP is bcast, allgatherv, allreduce or reduce; every OP runs at every M, one after the other,
 * each from a common start on an idle network, in one simulation (so that what SMPI sets up
 * for a communicator is paid once). M is what `circulant model --bytes` means: the broadcast,
 * the int32 vector of allreduce and reduce (M rounded down to whole elements), the whole
 * gathered buffer of allgatherv, whose counts follow distribution DIST (default D, regular:
 * M/p each; broadcast: M from rank 0; spike: M/2 from rank 0 and M/(2(p-1)) from each other
 * rank; src/plan/distribution.rs). SMPI picks the algorithm (--cfg=smpi/coll-selector:mpich|ompi,
 * or --cfg=smpi/bcast:NAME ...). Rank 0 prints each call's slowest rank's time from its start as
 * the call ends: `time_s SECONDS OP DIST M` (DIST "-" but for allgatherv). Buffers come from
 * SMPI_SHARED_MALLOC; the program keeps no global state (smpirun -no-privatize).
 *
 * The program creates no communicator and agrees on the start with point-to-point messages:
 * under a selector (mpich, ompi) SMPI builds a communicator's node map at its creation and at
 * its first node-aware collective with a ring allgather, p (p - 1) messages, which at 4096
 * ranks takes longer than the collective. Each collective runs once on one element before the
 * timed calls, so that such setup (a real MPI does it when the communicator is made) falls
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

/* The count of each rank under distribution DIST of M bytes in all (p entries). */
static void distribute(const char *dist, long long m, int p, int *counts, int *displs) {
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
}

/* One collective of the list: OP with DIST (allgatherv) at BYTES. */
struct call {
  char op[16];
  char dist[16];
  long long bytes;
};

/* The list OPS x SIZES: OPS "op[:dist],...", SIZES "m,...", DIST the default distribution. */
static struct call *calls_of(const char *ops, const char *sizes, const char *dist, int *n) {
  int nops = 1, nsizes = 1;
  for (const char *c = ops; *c; c++)
    nops += *c == ',';
  for (const char *c = sizes; *c; c++)
    nsizes += *c == ',';
  struct call *calls = calloc((size_t)nops * (size_t)nsizes, sizeof *calls);
  if (!calls)
    die("out of memory", NULL);
  *n = 0;
  for (const char *o = ops; o;) {
    const char *end = strchr(o, ',');
    size_t len = end ? (size_t)(end - o) : strlen(o);
    char spec[40];
    if (len == 0 || len >= sizeof spec)
      die("bad collective in --op", ops);
    memcpy(spec, o, len);
    spec[len] = 0;
    char *colon = strchr(spec, ':');
    if (colon)
      *colon = 0;
    if (strlen(spec) >= sizeof calls->op || (colon && strlen(colon + 1) >= sizeof calls->dist))
      die("bad collective in --op", ops);
    for (const char *b = sizes; b;) {
      char *after;
      long long m = strtoll(b, &after, 10);
      if (after == b || (*after && *after != ',') || m < 0 || m > INT_MAX)
        die("bad size in --bytes", sizes);
      struct call *c = &calls[(*n)++];
      strcpy(c->op, spec);
      strcpy(c->dist, colon ? colon + 1 : dist);
      c->bytes = m;
      b = *after ? after + 1 : NULL;
    }
    o = end ? end + 1 : NULL;
  }
  return calls;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, p;
  MPI_Comm comm = MPI_COMM_WORLD;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &p);
  const char *ops = NULL, *sizes = NULL, *dist = "regular";
  int root = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--op") == 0)
      ops = argv[i + 1];
    else if (strcmp(argv[i], "--bytes") == 0)
      sizes = argv[i + 1];
    else if (strcmp(argv[i], "--dist") == 0)
      dist = argv[i + 1];
    else if (strcmp(argv[i], "--root") == 0)
      root = atoi(argv[i + 1]);
    else
      die("unknown option", argv[i]);
  }
  if (!ops || !sizes || root < 0 || root >= p)
    die("usage: coll --op OP[:DIST][,...] --bytes M[,...] [--dist D] [--root R]", NULL);
  int ncalls;
  struct call *calls = calls_of(ops, sizes, dist, &ncalls);
  int *counts = calloc((size_t)p, sizeof *counts), *displs = calloc((size_t)p, sizeof *displs);
  if (!counts || !displs)
    die("out of memory", NULL);

  /* Untimed, on one element, each collective once: whatever the selected algorithms set up
   * on first use. */
  int *ones = calloc((size_t)p, sizeof *ones), *steps = calloc((size_t)p, sizeof *steps);
  if (!ones || !steps)
    die("out of memory", NULL);
  for (int r = 0; r < p; r++) {
    ones[r] = 1;
    steps[r] = r;
  }
  char *warm = SMPI_SHARED_MALLOC((size_t)p * 8);
  for (int i = 0; i < ncalls; i++)
    if (i == 0 || strcmp(calls[i].op, calls[i - 1].op) != 0)
      collective(calls[i].op, warm, warm + (size_t)p * 4, 1, 1, ones, steps, root, rank, comm);

  for (int i = 0; i < ncalls; i++) {
    const struct call *c = &calls[i];
    long long need = c->bytes;
    if (strcmp(c->op, "allgatherv") == 0) {
      distribute(c->dist, c->bytes, p, counts, displs);
      need = (long long)displs[p - 1] + counts[p - 1];
    }
    char *sbuf = SMPI_SHARED_MALLOC((size_t)(need > 0 ? need : 1));
    char *rbuf = SMPI_SHARED_MALLOC((size_t)(need > 0 ? need : 1));
    double start = largest(MPI_Wtime(), comm, rank, p) + 0.1;
    if (MPI_Wtime() >= start)
      die("reached the common start late", NULL);
    sg_actor_sleep_until(start);
    collective(c->op, sbuf, rbuf, c->bytes, (int)(c->bytes / 4), counts, displs, root, rank,
               comm);
    double slowest = largest(MPI_Wtime() - start, comm, rank, p);
    if (rank == 0) {
      /* One line a call as it ends, so that a simulation stopped later keeps it. */
      printf("time_s %.9e %s %s %lld\n", slowest, c->op,
             strcmp(c->op, "allgatherv") == 0 ? c->dist : "-", c->bytes);
      fflush(stdout);
    }
    SMPI_SHARED_FREE(sbuf);
    SMPI_SHARED_FREE(rbuf);
  }
  SMPI_SHARED_FREE(warm);
  free(calls);
  free(ones);
  free(steps);
  free(counts);
  free(displs);
  MPI_Finalize();
  return 0;
}
