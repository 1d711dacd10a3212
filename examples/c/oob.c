/* Joining a job without a PMI launcher: circulant_init_oob with an allgather that this
 * program does itself, over files in a shared directory (any transport the program already
 * has would do: MPI, a TCP store, its own launcher).
 *
 *   cc oob.c $(pkg-config --cflags --libs circulant) -o oob
 *   for r in 0 1 2; do ./oob /tmp/exchange $r 3 & done; wait
 *
 * Each rank checks an allreduce and an allgatherv and prints "oob rank R of N: ok". */
#include <circulant.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct exchange {
  const char *dir;
  int rank, size, calls;
};

/* Writes this rank's record as DIR/CALL-RANK (atomically: write, then rename), then reads
 * every rank's record of the same call, waiting up to 60 s for the slowest. */
static int file_allgather(const void *send, void *recv, size_t bytes, void *ctx) {
  struct exchange *ex = ctx;
  int call = ex->calls++;
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/%d-%d", ex->dir, call, ex->rank);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "wb");
  if (!f || fwrite(send, 1, bytes, f) != bytes || fclose(f) != 0 || rename(tmp, path) != 0) {
    fprintf(stderr, "oob: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  for (int r = 0; r < ex->size; r++) {
    snprintf(path, sizeof path, "%s/%d-%d", ex->dir, call, r);
    for (int waited_ms = 0;; waited_ms++) {
      f = fopen(path, "rb");
      if (f) break;
      if (waited_ms > 60000) {
        fprintf(stderr, "oob: rank %d never wrote %s\n", r, path);
        return -1;
      }
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
    size_t got = fread((char *)recv + (size_t)r * bytes, 1, bytes, f);
    fclose(f);
    if (got != bytes) {
      fprintf(stderr, "oob: %s holds %zu bytes, %zu expected\n", path, got, bytes);
      return -1;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: oob DIR RANK SIZE\n");
    return 2;
  }
  struct exchange ex = {argv[1], atoi(argv[2]), atoi(argv[3]), 0};
  circulant_comm *comm;
  int rc = circulant_init_oob(&comm, ex.rank, ex.size, file_allgather, &ex);
  if (rc != CIRCULANT_SUCCESS) {
    fprintf(stderr, "circulant_init_oob: %s (%s)\n", circulant_strerror(rc), circulant_last_error(NULL));
    return 1;
  }
  int rank, size;
  circulant_rank(comm, &rank);
  circulant_size(comm, &size);

  int64_t mine = 10 + rank, sum = 0;
  rc = circulant_allreduce(comm, &mine, &sum, 1, CIRCULANT_INT64, CIRCULANT_SUM);
  int ok = rc == CIRCULANT_SUCCESS && sum == 10 * size + size * (size - 1) / 2;

  size_t counts[64];
  char all[64 * 8] = {0}, part[8];
  size_t total = 0;
  for (int r = 0; r < size && r < 64; r++) total += counts[r] = (size_t)(r % 3) + 1;
  for (size_t i = 0; i < counts[rank]; i++) part[i] = (char)('a' + rank);
  rc = circulant_allgatherv(comm, part, counts[rank], all, counts);
  ok = ok && rc == CIRCULANT_SUCCESS;
  for (int r = 0, at = 0; ok && r < size; at += (int)counts[r], r++)
    for (size_t i = 0; i < counts[r]; i++) ok = ok && all[at + i] == 'a' + r;

  if (rc != CIRCULANT_SUCCESS) fprintf(stderr, "rank %d: %s\n", rank, circulant_last_error(comm));
  printf("oob rank %d of %d (%d exchanges): %s\n", rank, size, ex.calls, ok ? "ok" : "FAILED");
  if (circulant_finalize(comm) != CIRCULANT_SUCCESS) return 1;
  return ok ? 0 : 1;
}
