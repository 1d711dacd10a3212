/* Timing one collective call across the ranks of MPI_COMM_WORLD from a common start, the
 * method of `circulant bench` (seed 000 §3, seed 001 §3), for the
 * programs that time MPI calls: circulant-mpi-calibrate (mpi/calibrate.c) and the peer
 * benchmark (benches/peers/mpi_coll.c).
 *
 * Rank 0 broadcasts an instant of CLOCK_MONOTONIC a window ahead, every rank waits for it
 * (sleeping, then yielding: no core is spun while ranks outnumber cores), calls the operation
 * and takes its time from the common start to its return; the call's time is the maximum over
 * the ranks. Timing between barriers instead lets a rank that leaves the barrier late find a
 * broadcast's data already there, and then counts nothing of the broadcast (Open MPI's small
 * broadcasts "took" 190 ns so; MPICH's took 3.5 µs at p = 8 on two cores, where a common start
 * shows milliseconds). The clock is common to all ranks of one machine, the emulated cluster
 * included; `common_clock_shared` tells whether the ranks' clocks agree (on several hosts
 * they count from each host's boot). A rank that learns the start only after it passed makes
 * the repetition late: it is repeated with the window doubled. After a repetition on time the
 * window shrinks to four times the longest any rank took to learn the start, where that is
 * less (never below 200 µs): one stall of
 * the machine would otherwise keep every later repetition waiting for the window it needed
 * (on the emulated cluster calls went from a few to 350 ms each so). The synchronisation uses
 * the PMPI_ calls, which a profiling layer does not see: point-to-point and nonblocking ones,
 * completed without spinning (common_exchange). MPICH polls inside its blocking calls without
 * yielding, so a rank that returned early from the timed call held a core in the reduction
 * while a rank still in the call waited a scheduler slice for it (every call the MPI layer
 * served took 3.6 ms so at p = 4 on two cores, as long as MPICH's own). */
#ifndef CIRCULANT_COMMON_START_H
#define CIRCULANT_COMMON_START_H

#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* The monotonic clock (common to all processes of one kernel) in ns. */
static inline uint64_t common_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Sleeps, then yields, until the clock reaches `t`. */
static inline void common_wait_until(uint64_t t) {
  for (;;) {
    uint64_t now = common_now_ns();
    if (now >= t) return;
    uint64_t left = t - now;
    if (left > 300000) {
      uint64_t ns = left - 200000;
      struct timespec d = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
      nanosleep(&d, NULL);
    } else {
      sched_yield();
    }
  }
}

/* Completes `req` without holding a core: tests it, yielding in between, for 50 µs, then
 * sleeps 20 µs between tests. Only the synchronisation around a timed call waits here, never
 * the call itself. */
static inline void common_complete(MPI_Request *req) {
  const uint64_t yielding = 50000;
  uint64_t since = common_now_ns();
  for (;;) {
    int done = 0;
    PMPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (common_now_ns() - since < yielding) {
      sched_yield();
    } else {
      struct timespec d = {0, 20000};
      nanosleep(&d, NULL);
    }
  }
}

/* Whether every rank's monotonic clock agrees with rank 0's within `tolerance_ns`, the same
 * answer on every rank. Rank 0 sends its clock (a broadcast) and every rank reads its own on
 * receipt (d1 = delay + offset), then every rank sends its clock and rank 0 reads its own once
 * all arrived (d2 = delay − offset): the offset lies between −d2 and d1, and the least of
 * eight tries bounds it. Clocks agree where the offset may be within the tolerance. */
static inline int common_clock_shared(uint64_t tolerance_ns) {
  int rank, size;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  double there = 1e300, back = 1e300; /* the least d1 of this rank; on rank 0 the least d2 */
  double *clocks = rank == 0 ? (double *)malloc(sizeof(double) * (size_t)size) : NULL;
  double *least_back = rank == 0 ? (double *)malloc(sizeof(double) * (size_t)size) : NULL;
  if (rank == 0 && (!clocks || !least_back)) PMPI_Abort(MPI_COMM_WORLD, 1);
  for (int r = 0; rank == 0 && r < size; r++) least_back[r] = 1e300;
  for (int k = 0; k < 8; k++) {
    double t0 = (double)common_now_ns();
    PMPI_Bcast(&t0, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    double d1 = (double)common_now_ns() - t0;
    if (d1 < there) there = d1;
    double mine = (double)common_now_ns();
    PMPI_Gather(&mine, 1, MPI_DOUBLE, clocks, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      double now = (double)common_now_ns();
      for (int r = 0; r < size; r++)
        if (now - clocks[r] < least_back[r]) least_back[r] = now - clocks[r];
    }
  }
  PMPI_Scatter(least_back, 1, MPI_DOUBLE, &back, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  free(clocks);
  free(least_back);
  /* The offset is within [-back, there]: the clocks agree where that meets
   * [-tolerance, tolerance]. */
  double tol = (double)tolerance_ns;
  int ok = -back <= tol && there >= -tol;
  int all = 0;
  PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all;
}

/* How far ahead rank 0 sets the common start (doubled after a late repetition, up to 2 s;
 * shrunk after one on time), and how many repetitions were late even at 2 s. */
struct common_window {
  uint64_t ahead_ns;
  uint64_t late;
};
#define COMMON_WINDOW_START {200000, 0}

/* The communicator of the synchronisation's messages, apart from the program's (kept until
 * MPI_Finalize). */
static MPI_Comm common_comm = MPI_COMM_NULL;

/* Rank 0's `n` values (at most 8) on every rank where `reduce` is 0, else the maximum of every
 * rank's, by point-to-point messages to and from rank 0, completed without spinning. Not a
 * nonblocking collective: under Open MPI one of those made the MPI's own next calls slower
 * (medians of its bcast of 1 B – 2 kB at p = 4 up by 10–40 %), point-to-point ones did not. */
static inline void common_exchange(double *v, int n, int reduce) {
  int rank, size;
  if (n > 8) PMPI_Abort(MPI_COMM_WORLD, 1);
  if (common_comm == MPI_COMM_NULL) PMPI_Comm_dup(MPI_COMM_WORLD, &common_comm);
  PMPI_Comm_rank(common_comm, &rank);
  PMPI_Comm_size(common_comm, &size);
  MPI_Request req;
  if (rank == 0) {
    double got[8];
    for (int r = 1; reduce && r < size; r++) {
      PMPI_Irecv(got, n, MPI_DOUBLE, MPI_ANY_SOURCE, 1, common_comm, &req);
      common_complete(&req);
      for (int i = 0; i < n; i++)
        if (got[i] > v[i]) v[i] = got[i];
    }
    for (int r = 1; r < size; r++) {
      PMPI_Isend(v, n, MPI_DOUBLE, r, 2, common_comm, &req);
      common_complete(&req);
    }
  } else {
    if (reduce) {
      PMPI_Isend(v, n, MPI_DOUBLE, 0, 1, common_comm, &req);
      common_complete(&req);
    }
    PMPI_Irecv(v, n, MPI_DOUBLE, 0, 2, common_comm, &req);
    common_complete(&req);
  }
}

/* The slowest rank's time, in seconds, of one `call(arg)` from a common start. */
static inline double common_start_timed(void (*call)(void *), void *arg,
                                        struct common_window *w) {
  const uint64_t least = 200000, most = 2000000000ull;
  int rank;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  /* The synchronisation's communicator before the first start is set, not while it runs. */
  if (common_comm == MPI_COMM_NULL) PMPI_Comm_dup(MPI_COMM_WORLD, &common_comm);
  for (;;) {
    double s = rank == 0 ? (double)(common_now_ns() + w->ahead_ns) : 0;
    common_exchange(&s, 1, 0);
    uint64_t start = (uint64_t)s;
    uint64_t learned = common_now_ns();
    int late = learned > start;
    /* How long after rank 0 set the start this rank learned it. */
    uint64_t sent = start - w->ahead_ns;
    double delay = learned > sent ? (double)(learned - sent) : 0.0;
    common_wait_until(start);
    call(arg);
    uint64_t end = common_now_ns();
    double all[3] = {end > start ? (double)(end - start) * 1e-9 : 0.0, late, delay};
    common_exchange(all, 3, 1);
    if (all[1] == 0.0) {
      double fit = 4.0 * all[2];
      if (fit < (double)w->ahead_ns) w->ahead_ns = fit > (double)least ? (uint64_t)fit : least;
      return all[0];
    }
    if (w->ahead_ns >= most) {
      w->late++;
      return all[0];
    }
    w->ahead_ns = w->ahead_ns * 2 < most ? w->ahead_ns * 2 : most;
  }
}

#endif
