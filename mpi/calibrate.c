/* circulant-mpi-calibrate: measures, on this machine and at this p, each collective the MPI
 * layer serves through circulant (the MPI_ call, with CIRCULANT_MPI=on) against the MPI's own
 * (the PMPI_ call), in its blocking form and in its nonblocking one (MPI_Ibcast and MPI_Wait
 * against PMPI_Ibcast and PMPI_Wait: the MPI's nonblocking algorithms are others), at sizes
 * from 8 bytes up to --max-bytes (x8 apart, or --step F), and writes the thresholds file the layer reads
 * in auto mode (CIRCULANT_MPI_THRESHOLDS): per collective and form the ranges of measured
 * sizes at which circulant was not slower in any of --rounds rounds (`A-B` from the first to
 * the last size of each run of them; `A-`, open, where the run reaches the largest size
 * measured), or `never`. A round times R calls of circulant and R of the MPI in turn, one by
 * one (the order swapped at each call, and the MPI first in odd rounds), and compares the
 * medians of the two series (with --statistic minimum, their least times: a lucky minimum then
 * serves a size whose typical call loses, which a program sees). On a shared, noisy machine one
 * round alone serves sizes where luck won. Between two measured sizes of a run circulant is
 * taken to be as fast; beyond the last size of a run that ends, not.
 *
 * Run it preloaded, as the programs that are to use the file will run:
 *   mpirun -n 4 -x LD_PRELOAD=target/mpi/libcirculant-mpi-openmpi.so \
 *     target/mpi/circulant-mpi-calibrate-openmpi [--max-bytes N] [--reps R] [--rounds K]
 *     [--forms blocking|nonblocking|both] [--step F] [--statistic median|minimum] [--sized]
 *     [--collectives LIST] FILE
 *
 * --collectives LIST measures only the collectives named (comma-separated, as the file names
 * them without the `i`: `gather,scatterv`), in the forms asked for; the file then holds their
 * lines only, to be put in place of theirs in a whole file.
 *
 * --step F puts the sizes F times apart (2 to 64; 8 by default): a crossover between two
 * measured sizes is not seen, and on links whose behaviour changes within a factor of 8 (a
 * token bucket's burst) a finer grid finds where.
 *
 * --sized writes each line for communicators of this job's p ranks or more (`bcast@8 ...`),
 * so that the files of calibrations at several p, put one after the other, give each
 * communicator the ranges measured at the largest p not above its size (the smallest p is
 * calibrated without it: below the smallest size in a file a communicator has no ranges).
 *
 * Sizes are those the layer compares with a threshold: the buffer of bcast and the
 * reductions (doubles), all p blocks of allgather, gather, scatter and alltoall, the whole
 * vector of the reduce-scatters (p blocks of doubles), the sum of the counts of the v forms
 * (bytes). The v forms and reduce_scatter are measured with equal counts and with every byte
 * on the last rank; the worse of the two counts, as a threshold cannot tell them
 * apart. A measurement is the slowest rank's time of one call from a common start
 * (common_start.h; a barrier before each call instead lets a late rank find a broadcast's data
 * there, and counts nothing of it). Where the ranks' monotonic clocks differ by more than
 * 1 ms (several hosts whose clocks are not one), a common start cannot be set, and each call
 * is timed after a barrier; the file's header says which. */
#define _GNU_SOURCE
#include <mpi.h>
#include "common_start.h"
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { BARRIER, BCAST, ALLGATHER, ALLGATHERV, ALLREDUCE, REDUCE, REDUCE_SCATTER_BLOCK,
       REDUCE_SCATTER, GATHER, GATHERV, SCATTER, SCATTERV, ALLTOALL, SCAN, EXSCAN, OPS };
static const char *const names[OPS] = {
    "barrier", "bcast",   "allgather", "allgatherv", "allreduce", "reduce", "reduce_scatter_block",
    "reduce_scatter", "gather", "gatherv", "scatter", "scatterv", "alltoall", "scan", "exscan"};

static int p, me;
static char *sbuf, *rbuf;
static int *counts, *displs;
static int *elements; /* a reduce_scatter's counts: doubles */
/* The counts of the v forms: equal (0), or every byte on the last rank (1). */
static int skewed;

static int is_v(int op) {
  return op == ALLGATHERV || op == GATHERV || op == SCATTERV || op == REDUCE_SCATTER;
}

/* `MPI_F(...)` through the layer, or `PMPI_F(...)` where `native`. */
#define EITHER(F, ...) (native ? PMPI_##F(__VA_ARGS__) : MPI_##F(__VA_ARGS__))

/* The counts and displacements of the `v` forms for `bytes` in all (equal, or all on the last
 * rank); this rank's block. */
static int v_layout(uint64_t bytes) {
  int block = (int)(bytes / (uint64_t)p);
  for (int j = 0; j < p; j++) {
    counts[j] = skewed ? (j == p - 1 ? block * p : 0) : block;
    displs[j] = skewed ? 0 : j * block;
    elements[j] = counts[j] / (int)sizeof(double);
  }
  return block;
}

/* One call of `op` on `bytes` (as the layer counts them), through the layer or MPI. */
static void call(int op, uint64_t bytes, int native) {
  int block = v_layout(bytes), elems = (int)(bytes / sizeof(double));
  int mine = counts[me];
  MPI_Comm w = MPI_COMM_WORLD;
  int root = 0;
  switch (op) {
  case BARRIER: EITHER(Barrier, w); break;
  case BCAST: EITHER(Bcast, sbuf, (int)bytes, MPI_BYTE, root, w); break;
  case ALLGATHER: EITHER(Allgather, sbuf, block, MPI_BYTE, rbuf, block, MPI_BYTE, w); break;
  case ALLGATHERV: EITHER(Allgatherv, sbuf, mine, MPI_BYTE, rbuf, counts, displs, MPI_BYTE, w); break;
  case ALLREDUCE: EITHER(Allreduce, sbuf, rbuf, elems, MPI_DOUBLE, MPI_SUM, w); break;
  case REDUCE: EITHER(Reduce, sbuf, rbuf, elems, MPI_DOUBLE, MPI_SUM, root, w); break;
  case REDUCE_SCATTER_BLOCK: EITHER(Reduce_scatter_block, sbuf, rbuf, elems / p, MPI_DOUBLE, MPI_SUM, w); break;
  case REDUCE_SCATTER: EITHER(Reduce_scatter, sbuf, rbuf, elements, MPI_DOUBLE, MPI_SUM, w); break;
  case GATHER: EITHER(Gather, sbuf, block, MPI_BYTE, rbuf, block, MPI_BYTE, root, w); break;
  case GATHERV: EITHER(Gatherv, sbuf, mine, MPI_BYTE, rbuf, counts, displs, MPI_BYTE, root, w); break;
  case SCATTER: EITHER(Scatter, sbuf, block, MPI_BYTE, rbuf, block, MPI_BYTE, root, w); break;
  case SCATTERV: EITHER(Scatterv, sbuf, counts, displs, MPI_BYTE, rbuf, mine, MPI_BYTE, root, w); break;
  case ALLTOALL: EITHER(Alltoall, sbuf, block, MPI_BYTE, rbuf, block, MPI_BYTE, w); break;
  case SCAN: EITHER(Scan, sbuf, rbuf, elems, MPI_DOUBLE, MPI_SUM, w); break;
  default: EITHER(Exscan, sbuf, rbuf, elems, MPI_DOUBLE, MPI_SUM, w); break;
  }
}

/* The nonblocking form of `call`, waited for at once: MPI_Ibcast and MPI_Wait through the
 * layer, or PMPI_Ibcast and PMPI_Wait (not the `v` forms rooted at one rank, which the layer
 * passes). */
static void icall(int op, uint64_t bytes, int native) {
  int block = v_layout(bytes), elems = (int)(bytes / sizeof(double));
  int mine = counts[me];
  MPI_Comm w = MPI_COMM_WORLD;
  MPI_Request r = MPI_REQUEST_NULL;
  int root = 0;
  switch (op) {
  case BARRIER: EITHER(Ibarrier, w, &r); break;
  case BCAST: EITHER(Ibcast, sbuf, (int)bytes, MPI_BYTE, root, w, &r); break;
  case ALLGATHER: EITHER(Iallgather, sbuf, block, MPI_BYTE, rbuf, block, MPI_BYTE, w, &r); break;
  case ALLGATHERV: EITHER(Iallgatherv, sbuf, mine, MPI_BYTE, rbuf, counts, displs, MPI_BYTE, w, &r); break;
  case ALLREDUCE: EITHER(Iallreduce, sbuf, rbuf, elems, MPI_DOUBLE, MPI_SUM, w, &r); break;
  case REDUCE: EITHER(Ireduce, sbuf, rbuf, elems, MPI_DOUBLE, MPI_SUM, root, w, &r); break;
  case REDUCE_SCATTER_BLOCK: EITHER(Ireduce_scatter_block, sbuf, rbuf, elems / p, MPI_DOUBLE, MPI_SUM, w, &r); break;
  case REDUCE_SCATTER: EITHER(Ireduce_scatter, sbuf, rbuf, elements, MPI_DOUBLE, MPI_SUM, w, &r); break;
  case GATHER: EITHER(Igather, sbuf, block, MPI_BYTE, rbuf, block, MPI_BYTE, root, w, &r); break;
  case SCATTER: EITHER(Iscatter, sbuf, block, MPI_BYTE, rbuf, block, MPI_BYTE, root, w, &r); break;
  case ALLTOALL: EITHER(Ialltoall, sbuf, block, MPI_BYTE, rbuf, block, MPI_BYTE, w, &r); break;
  case SCAN: EITHER(Iscan, sbuf, rbuf, elems, MPI_DOUBLE, MPI_SUM, w, &r); break;
  case EXSCAN: EITHER(Iexscan, sbuf, rbuf, elems, MPI_DOUBLE, MPI_SUM, w, &r); break;
  default: return;
  }
  EITHER(Wait, &r, MPI_STATUS_IGNORE);
}

/* Whether the layer can serve the nonblocking form of `op`. */
static int nonblocking_served(int op) { return op != GATHERV && op != SCATTERV; }

/* The median (or, with --statistic minimum, the least) of `n` times; sorts them. */
static int by_minimum;
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double statistic(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  if (by_minimum) return t[0];
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* The slowest rank's time of one call (nonblocking where `nb`) from a common start. */
struct one_call {
  int op, native, nb;
  uint64_t bytes;
};
static void one_call(void *arg) {
  struct one_call *c = arg;
  (c->nb ? icall : call)(c->op, c->bytes, c->native);
}
static struct common_window window = COMMON_WINDOW_START;
/* Whether the ranks' clocks agree (one host): else each call is timed after a barrier, the
 * slowest rank's time from its own exit of it. */
static int clock_shared;
static double timed(int op, uint64_t bytes, int native, int nb) {
  struct one_call c = {op, native, nb, bytes};
  if (clock_shared) return common_start_timed(one_call, &c, &window);
  PMPI_Barrier(MPI_COMM_WORLD);
  uint64_t t0 = common_now_ns();
  one_call(&c);
  double slowest = (double)(common_now_ns() - t0) * 1e-9;
  common_exchange(&slowest, 1, 1);
  return slowest;
}

/* Circulant's time (`*ours`) and the MPI's (`*theirs`) of `reps` calls each, measured in turn
 * in one loop (the MPI first where `mpi_first`, the order swapped at each repetition), so that
 * a slow stretch of the machine falls on both; each the statistic of its series. */
static double *series_ours, *series_theirs;
static void measure_pair(int op, uint64_t bytes, int reps, int nb, int mpi_first, double *ours,
                         double *theirs) {
  /* Warm-up: plans, registrations, the first touch. */
  (nb ? icall : call)(op, bytes, 0);
  (nb ? icall : call)(op, bytes, 1);
  for (int r = 0; r < reps; r++) {
    int native_first = (r % 2) ^ mpi_first ? 1 : 0;
    double a = timed(op, bytes, native_first, nb);
    double b = timed(op, bytes, !native_first, nb);
    series_theirs[r] = native_first ? a : b;
    series_ours[r] = native_first ? b : a;
  }
  *ours = statistic(series_ours, reps);
  *theirs = statistic(series_theirs, reps);
}

static void usage(const char *why) {
  if (me == 0)
    fprintf(stderr,
            "circulant-mpi-calibrate: %s\nusage: circulant-mpi-calibrate [--max-bytes N] [--reps R] [--rounds K] [--forms blocking|nonblocking|both] [--step F] [--statistic median|minimum] [--sized] [--collectives LIST] FILE\n",
            why);
  PMPI_Finalize();
  exit(2);
}

int main(int argc, char **argv) {
  /* Through the layer every call it can serve is served: the comparison is circulant's. */
  setenv("CIRCULANT_MPI", "on", 1);
  unsetenv("CIRCULANT_MPI_THRESHOLDS");
  MPI_Init(&argc, &argv);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  uint64_t max_bytes = 1 << 20;
  int reps = 10;
  int rounds = 3;
  int forms = 3; /* bit 0: blocking, bit 1: nonblocking */
  int sized = 0;  /* lines `NAME@p`: for communicators of p ranks or more */
  uint64_t step = 8; /* the factor between measured sizes */
  const char *file = NULL;
  int chosen[OPS]; /* the collectives to measure */
  for (int op = 0; op < OPS; op++) chosen[op] = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc) {
      char *end;
      errno = 0;
      max_bytes = strtoull(argv[++i], &end, 10);
      if (errno || *end || max_bytes < 8 || max_bytes > (1u << 30)) usage("--max-bytes: 8 to 1073741824");
    } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = atoi(argv[++i]);
      if (reps < 1 || reps > 100000) usage("--reps: 1 to 100000");
    } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = atoi(argv[++i]);
      if (rounds < 1 || rounds > 1000) usage("--rounds: 1 to 1000");
    } else if (!strcmp(argv[i], "--forms") && i + 1 < argc) {
      const char *f = argv[++i];
      forms = !strcmp(f, "blocking") ? 1 : !strcmp(f, "nonblocking") ? 2 : !strcmp(f, "both") ? 3 : 0;
      if (!forms) usage("--forms: blocking, nonblocking or both");
    } else if (!strcmp(argv[i], "--step") && i + 1 < argc) {
      char *end;
      errno = 0;
      step = strtoull(argv[++i], &end, 10);
      if (errno || *end || step < 2 || step > 64) usage("--step: 2 to 64");
    } else if (!strcmp(argv[i], "--statistic") && i + 1 < argc) {
      const char *f = argv[++i];
      if (strcmp(f, "median") && strcmp(f, "minimum")) usage("--statistic: median or minimum");
      by_minimum = !strcmp(f, "minimum");
    } else if (!strcmp(argv[i], "--sized")) {
      sized = 1;
    } else if (!strcmp(argv[i], "--collectives") && i + 1 < argc) {
      char list[256];
      snprintf(list, sizeof list, "%s", argv[++i]);
      for (int op = 0; op < OPS; op++) chosen[op] = 0;
      for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
           name = strtok_r(NULL, ",", &save)) {
        int op = 0;
        while (op < OPS && strcmp(names[op], name)) op++;
        if (op == OPS) usage("--collectives: names among barrier, bcast, allgather, allgatherv, allreduce, reduce, reduce_scatter_block, reduce_scatter, gather, gatherv, scatter, scatterv, alltoall, scan, exscan");
        chosen[op] = 1;
      }
    } else if (argv[i][0] == '-' || file) {
      usage("unknown argument");
    } else {
      file = argv[i];
    }
  }
  if (!file) usage("no output file");
  if (!dlsym(RTLD_DEFAULT, "circulant_init_oob_nodes"))
    usage("the circulant MPI layer is not loaded: run with LD_PRELOAD=.../libcirculant-mpi-*.so");
  uint64_t top = max_bytes * (uint64_t)p + 64;
  sbuf = calloc(top, 1);
  rbuf = calloc(top, 1);
  counts = calloc((size_t)p, sizeof(int));
  displs = calloc((size_t)p, sizeof(int));
  elements = calloc((size_t)p, sizeof(int));
  series_ours = calloc((size_t)reps, sizeof(double));
  series_theirs = calloc((size_t)reps, sizeof(double));
  if (!sbuf || !rbuf || !counts || !displs || !elements || !series_ours || !series_theirs)
    usage("out of memory");

  clock_shared = common_clock_shared(1000000);
  FILE *out = NULL;
  if (me == 0) {
    out = fopen(file, "w");
    if (!out) {
      fprintf(stderr, "circulant-mpi-calibrate: cannot write %s: %s\n", file, strerror(errno));
      PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    time_t t = time(NULL);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
#if defined(OPEN_MPI)
    const char *mpi = "Open MPI";
#else
    const char *mpi = "MPICH";
#endif
    fprintf(out, "# circulant-mpi-calibrate on %s, %s, p = %d, %d repetitions (%s), %d rounds, %s",
            host, mpi, p, reps, by_minimum ? "minimum" : "median", rounds, ctime(&t));
    fprintf(out, "# each call timed %s\n",
            clock_shared ? "from a common start"
                         : "after a barrier (the ranks' clocks differ by more than 1 ms)");
    fprintf(out, "# per size: circulant / MPI time (the largest of the rounds), then the collective "
                 "and its byte ranges\n");
    if (forms & 2)
      fprintf(out, "# `ibcast`, ...: the nonblocking forms, each call waited for at once; igatherv "
                   "and iscatterv are not timed (the layer serves them at every size where "
                   "their line has a range)\n");
    printf("%-21s %10s %12s %12s\n", "collective", "bytes", "circulant_s", "mpi_s");
  }
  for (int task = 0; task < 2 * OPS; task++) {
    int nb = task >= OPS, op = task % OPS;
    if (!chosen[op] || !(forms & (nb ? 2 : 1)) || (nb && !nonblocking_served(op))) continue;
    char name[32]; /* "ireduce_scatter_block" */
    snprintf(name, sizeof name, "%s%s", nb ? "i" : "", names[op]);
    uint64_t sizes[32];
    double worst[32];
    int n = 0;
    for (uint64_t b = 8; b <= max_bytes && n < 32; b *= step) {
      uint64_t bytes = op == BARRIER ? 0 : b;
      if (op == ALLGATHER || op == ALLGATHERV || op == GATHER || op == GATHERV ||
          op == SCATTER || op == SCATTERV || op == ALLTOALL)
        bytes = (b / (uint64_t)p) * (uint64_t)p; /* whole blocks */
      if (op == REDUCE_SCATTER_BLOCK || op == REDUCE_SCATTER) /* whole blocks of doubles */
        bytes = (b / (sizeof(double) * (uint64_t)p)) * sizeof(double) * (uint64_t)p;
      sizes[n] = bytes;
      worst[n] = 0;
      for (int round = 0; round < rounds; round++) {
        for (skewed = 0; skewed <= is_v(op); skewed++) {
          /* Each round in the other order, so that neither side always runs second. */
          double ours, theirs;
          measure_pair(op, bytes, reps, nb, round % 2, &ours, &theirs);
          double ratio = theirs > 0 ? ours / theirs : INFINITY;
          if (ratio > worst[n]) worst[n] = ratio;
          if (me == 0)
            printf("%-21s %10llu %12.3e %12.3e%s\n", name, (unsigned long long)bytes, ours,
                   theirs, skewed ? " (one rank's)" : "");
        }
      }
      skewed = 0;
      n++;
      if (op == BARRIER) break;
    }
    if (me == 0) {
      fprintf(out, "#");
      for (int i = 0; i < n; i++)
        fprintf(out, " %llu:%.3f", (unsigned long long)sizes[i], worst[i]);
      fprintf(out, "\n%s", name);
      if (sized) fprintf(out, "@%d", p);
      /* Each run of sizes at which circulant was not slower: a range. */
      int ranges = 0;
      for (int i = 0; i < n; i++) {
        if (!(worst[i] <= 1.0)) continue;
        int j = i;
        while (j + 1 < n && worst[j + 1] <= 1.0) j++;
        if (j == n - 1)
          fprintf(out, " %llu-", (unsigned long long)sizes[i]);
        else
          fprintf(out, " %llu-%llu", (unsigned long long)sizes[i], (unsigned long long)sizes[j]);
        ranges++;
        i = j;
      }
      fprintf(out, "%s\n", ranges ? "" : " never");
    }
  }
  if (me == 0) {
    if (clock_shared)
      fprintf(out, "# repetitions still late with a start 2 s ahead: %llu\n",
              (unsigned long long)window.late);
    fclose(out);
    printf("circulant-mpi-calibrate: wrote %s\n", file);
  }
  MPI_Finalize();
  return 0;
}
