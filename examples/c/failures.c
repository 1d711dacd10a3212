/* What a C program sees when peers fail: ranks that disagree get CIRCULANT_ERR_MISMATCH (the
 * rank that noticed) or CIRCULANT_ERR_PEER (the ranks it told), the communicator is
 * CIRCULANT_ERR_UNUSABLE afterwards, and a rank that is gone makes the others fail with
 * CIRCULANT_ERR_TIMEOUT or CIRCULANT_ERR_PEER within the deadline instead of hanging:
 *
 *   CIRCULANT_TIMEOUT=2 circulant run -n 3 --keep-going -- ./failures
 *
 * Rank 1 leaves before the last collective. Each other rank prints what it got. */
#include <circulant.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int rank;

static void report(const char *phase, circulant_comm *comm, int rc) {
  printf("rank %d: %s: code %d (%s): %s\n", rank, phase, rc, circulant_strerror(rc),
         rc == CIRCULANT_SUCCESS ? "" : circulant_last_error(comm));
  fflush(stdout);
}

int main(void) {
  circulant_comm *comm, *second;
  if (circulant_init(&comm) != CIRCULANT_SUCCESS) {
    fprintf(stderr, "circulant_init: %s\n", circulant_last_error(NULL));
    return 1;
  }
  circulant_rank(comm, &rank);
  /* A second communicator for the last phase: the first one breaks in the next. */
  if (circulant_split(comm, 0, rank, &second) != CIRCULANT_SUCCESS) {
    fprintf(stderr, "circulant_split: %s\n", circulant_last_error(comm));
    return 1;
  }

  /* Rank 0 broadcasts 8 bytes, the others expect 16. */
  char buf[16] = {0};
  report("mismatch", comm, circulant_bcast(comm, buf, rank == 0 ? 8 : 16, 0));
  report("after", comm, circulant_barrier(comm));

  if (rank == 1) _exit(0); /* gone without a word */
  int one = 1, sum = 0;
  report("peer gone", second,
         circulant_allreduce(second, &one, &sum, 1, CIRCULANT_INT32, CIRCULANT_SUM));
  return 0;
}
