/* Bad input gives an error code and a message, never a crash: each call below is wrong in
 * one way and must fail with the expected code and a non-empty message. Wrong collective
 * calls leave their communicator unusable on every rank (they run on fresh ones); the
 * others leave it working. Run alone or as a job (every rank makes the same calls):
 *
 *   circulant run -n 2 -- ./bad_input
 *
 * Prints "rank R: N passed, 0 failed". */
#include <circulant.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int passed, failed, rank;

static void expect(circulant_comm *comm, const char *what, int rc, int want) {
  const char *message = circulant_last_error(comm);
  if (rc == want && message && strlen(message) > 0) {
    passed++;
    printf("rank %d: %s -> %s: %s\n", rank, what, circulant_strerror(rc), message);
  } else {
    failed++;
    fprintf(stderr, "rank %d: %s returned %d (%s), %d expected; message \"%s\"\n", rank, what, rc,
            circulant_strerror(rc), want, message ? message : "(null)");
  }
}

#define EXPECT(comm, call, want) expect(comm, #call, call, want)

/* A new communicator of the same ranks, for a call that will make it unusable. */
static circulant_comm *fresh(circulant_comm *comm) {
  circulant_comm *c = NULL;
  if (circulant_split(comm, 0, rank, &c) != CIRCULANT_SUCCESS) {
    fprintf(stderr, "rank %d: split: %s\n", rank, circulant_last_error(comm));
    failed++;
    return NULL;
  }
  return c;
}

int main(void) {
  circulant_comm *comm = NULL;
  EXPECT(NULL, circulant_init(NULL), CIRCULANT_ERR_ARGUMENT);
  if (circulant_init(&comm) != CIRCULANT_SUCCESS) {
    fprintf(stderr, "circulant_init: %s\n", circulant_last_error(NULL));
    return 1;
  }
  int size = 0;
  circulant_rank(comm, &rank);
  circulant_size(comm, &size);

  int32_t a[4] = {1, 2, 3, 4}, b[4];
  size_t counts[64];
  for (int r = 0; r < size && r < 64; r++) counts[r] = 4;

  /* Calls that are not collective: refused here, the communicator is untouched. */
  EXPECT(NULL, circulant_barrier(NULL), CIRCULANT_ERR_ARGUMENT);
  EXPECT(NULL, circulant_rank(NULL, &rank), CIRCULANT_ERR_ARGUMENT);
  EXPECT(comm, circulant_rank(comm, NULL), CIRCULANT_ERR_ARGUMENT);
  EXPECT(NULL, circulant_wait(NULL), CIRCULANT_ERR_ARGUMENT);
  EXPECT(NULL, circulant_test(NULL, NULL), CIRCULANT_ERR_ARGUMENT);
  EXPECT(comm, circulant_free(comm, a), CIRCULANT_ERR_ARGUMENT);

  /* A collective call with wrong arguments is still consumed on every rank, so that no rank
   * pairs it with another call: it fails, and its communicator is unusable afterwards. Each
   * one runs on a fresh communicator split from this one. */
#define REFUSED(call)                                                                     \
  do {                                                                                    \
    circulant_comm *c = fresh(comm);                                                      \
    if (c) {                                                                              \
      expect(c, #call, call, CIRCULANT_ERR_ARGUMENT);                                     \
      expect(c, "circulant_barrier(c) after " #call, circulant_barrier(c),                 \
             CIRCULANT_ERR_UNUSABLE);                                                     \
      circulant_finalize(c);                                                              \
    }                                                                                     \
  } while (0)
  REFUSED(circulant_bcast(c, NULL, 16, 0));
  REFUSED(circulant_allgatherv(c, a, 4, b, NULL));
  REFUSED(circulant_allreduce(c, NULL, b, 4, CIRCULANT_INT32, CIRCULANT_SUM));
  counts[rank] = 3; /* counts that do not fit this rank's send size */
  REFUSED(circulant_allgatherv(c, a, 4, b, counts));
  counts[rank] = 4;
  REFUSED(circulant_allreduce(c, a, b, 4, 42, CIRCULANT_SUM));
  REFUSED(circulant_allreduce(c, a, b, 4, CIRCULANT_INT32, 99));
  REFUSED(circulant_allreduce(c, a, b, 1, CIRCULANT_FLOAT32, CIRCULANT_BXOR));
  REFUSED(circulant_bcast(c, a, sizeof a, size));
  REFUSED(circulant_bcast(c, a, sizeof a, -1));
  REFUSED(circulant_reduce(c, a, b, 4, CIRCULANT_INT32, CIRCULANT_SUM, size + 5));
  REFUSED(circulant_allreduce(c, a, a + 1, 2, CIRCULANT_INT32, CIRCULANT_SUM)); /* overlap */
  circulant_comm *other;
  REFUSED(circulant_split(c, -7, 0, &other));
  /* Reduce-scatters: no counts, no send buffer, counts whose bytes overflow, in every form. */
  circulant_request *refused;
  REFUSED(circulant_reduce_scatter(c, a, b, NULL, CIRCULANT_INT32, CIRCULANT_SUM));
  REFUSED(circulant_reduce_scatter_block(c, NULL, b, 1, CIRCULANT_INT32, CIRCULANT_SUM));
  REFUSED(circulant_ireduce_scatter_block(c, a, b, SIZE_MAX / 2, CIRCULANT_INT32, CIRCULANT_SUM,
                                          &refused));
  counts[0] = SIZE_MAX / 2;
  REFUSED(circulant_reduce_scatter_init(c, a, b, counts, CIRCULANT_INT32, CIRCULANT_SUM, &refused));
  counts[0] = 4;

  /* Only rank 0 passes a NULL buffer: it gets the argument error, every other rank an error
   * from its peer for the same call, at once. */
  if (size > 1) {
    circulant_comm *c = fresh(comm);
    if (c) {
      if (rank == 0) {
        EXPECT(c, circulant_bcast(c, NULL, sizeof a, 0), CIRCULANT_ERR_ARGUMENT);
      } else {
        EXPECT(c, circulant_bcast(c, a, sizeof a, 0), CIRCULANT_ERR_PEER);
      }
      circulant_finalize(c);
    }
  }

  /* Request misuse: a second operation or a persistent request made while one is in
   * flight, freeing or finalizing too early, starting a request that is not persistent. */
  circulant_request *req;
  if (circulant_iallreduce(comm, a, b, 4, CIRCULANT_INT32, CIRCULANT_SUM, &req) != CIRCULANT_SUCCESS) {
    fprintf(stderr, "rank %d: iallreduce: %s\n", rank, circulant_last_error(comm));
    return 1;
  }
  EXPECT(comm, circulant_bcast(comm, a, sizeof a, 0), CIRCULANT_ERR_BUSY);
  circulant_request *second;
  EXPECT(comm, circulant_ibarrier(comm, &second), CIRCULANT_ERR_BUSY);
  /* A persistent request is planned when it is made: that needs the communicator too. */
  EXPECT(comm, circulant_barrier_init(comm, &second), CIRCULANT_ERR_BUSY);
  EXPECT(comm, circulant_request_free(req), CIRCULANT_ERR_BUSY);
  EXPECT(NULL, circulant_finalize(comm), CIRCULANT_ERR_BUSY);
  EXPECT(comm, circulant_start(req), CIRCULANT_ERR_ARGUMENT);
  if (circulant_wait(req) != CIRCULANT_SUCCESS || b[0] != size || b[3] != 4 * size) {
    fprintf(stderr, "rank %d: iallreduce after the refused calls: %s\n", rank, circulant_last_error(comm));
    failed++;
  }
  circulant_request_free(req);

  /* Every code has a text. */
  for (int code = 0; code <= 10; code++) {
    if (!circulant_strerror(code) || !strlen(circulant_strerror(code))) failed++;
  }

  /* The communicator still works. */
  int32_t one = 1, n = 0;
  if (circulant_allreduce(comm, &one, &n, 1, CIRCULANT_INT32, CIRCULANT_SUM) != CIRCULANT_SUCCESS ||
      n != size) {
    fprintf(stderr, "rank %d: allreduce after the bad calls: %s\n", rank, circulant_last_error(comm));
    failed++;
  }
  printf("rank %d: %d passed, %d failed\n", rank, passed, failed);
  if (circulant_finalize(comm) != CIRCULANT_SUCCESS) return 1;
  return failed == 0 ? 0 : 1;
}
