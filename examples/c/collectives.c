/* Every collective of the C API on every rank, blocking, nonblocking and persistent (and in
 * place where the collective has it), each result checked. Run it as a job:
 *
 *   cc collectives.c $(pkg-config --cflags --libs circulant) -o collectives
 *   circulant run -n 4 -- ./collectives
 *
 * Prints "rank R: N passed, 0 failed" and exits 0 when every check held. */
#include <circulant.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed, rank, size;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (cond) {                                            \
      passed++;                                            \
    } else {                                               \
      failed++;                                            \
      fprintf(stderr, "rank %d: check failed: ", rank);    \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
    }                                                      \
  } while (0)

/* Stops the job when a call fails: later checks would only repeat it. */
#define CALL(comm, expr)                                                           \
  do {                                                                             \
    int rc_ = (expr);                                                              \
    if (rc_ != CIRCULANT_SUCCESS) {                                                \
      fprintf(stderr, "rank %d: %s: %s (%s)\n", rank, #expr, circulant_strerror(rc_), \
              circulant_last_error(comm));                                         \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

static unsigned char byte_of(int owner, size_t i) { return (unsigned char)(owner * 37 + i * 11 + 1); }

static void bcast(circulant_comm *comm) {
  for (int root = 0; root < size; root++) {
    unsigned char buf[1000];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = rank == root ? byte_of(root, i) : 0;
    CALL(comm, circulant_bcast(comm, buf, sizeof buf, root));
    int ok = 1;
    for (size_t i = 0; i < sizeof buf; i++) ok &= buf[i] == byte_of(root, i);
    CHECK(ok, "bcast from root %d", root);
  }
}

/* Rank r contributes r + 1 bytes (rank 1 none when size > 2, to cover empty parts). */
static size_t count_of(int r) { return (size > 2 && r == 1) ? 0 : (size_t)(r + 1) * 3; }

static void allgathers(circulant_comm *comm) {
  size_t counts[64], total = 0, offset = 0;
  for (int r = 0; r < size; r++) {
    counts[r] = count_of(r);
    if (r < rank) offset += counts[r];
    total += counts[r];
  }
  unsigned char mine[64], *all = calloc(total + 1, 1);
  for (size_t i = 0; i < counts[rank]; i++) mine[i] = byte_of(rank, i);
  CALL(comm, circulant_allgatherv(comm, mine, counts[rank], all, counts));
  int ok = 1;
  for (int r = 0, at = 0; r < size; at += (int)counts[r], r++)
    for (size_t i = 0; i < counts[r]; i++) ok &= all[at + i] == byte_of(r, i);
  CHECK(ok, "allgatherv");

  /* In place: this rank's part is already at its place. */
  memset(all, 0, total);
  memcpy(all + offset, mine, counts[rank]);
  CALL(comm, circulant_allgatherv(comm, CIRCULANT_IN_PLACE, counts[rank], all, counts));
  ok = 1;
  for (int r = 0, at = 0; r < size; at += (int)counts[r], r++)
    for (size_t i = 0; i < counts[r]; i++) ok &= all[at + i] == byte_of(r, i);
  CHECK(ok, "allgatherv in place");
  free(all);

  int32_t block[2] = {rank, -rank}, gathered[128];
  CALL(comm, circulant_allgather(comm, block, sizeof block, gathered));
  ok = 1;
  for (int r = 0; r < size; r++) ok &= gathered[2 * r] == r && gathered[2 * r + 1] == -r;
  CHECK(ok, "allgather");
}

static void reductions(circulant_comm *comm) {
  int32_t si[3] = {rank + 1, 2, rank}, ri[3];
  CALL(comm, circulant_allreduce(comm, si, ri, 3, CIRCULANT_INT32, CIRCULANT_SUM));
  CHECK(ri[0] == size * (size + 1) / 2 && ri[1] == 2 * size && ri[2] == size * (size - 1) / 2,
        "allreduce int32 sum: %d %d %d", ri[0], ri[1], ri[2]);

  double sd = 0.5 * (rank + 1), rd;
  CALL(comm, circulant_allreduce(comm, &sd, &rd, 1, CIRCULANT_FLOAT64, CIRCULANT_MAX));
  CHECK(rd == 0.5 * size, "allreduce float64 max: %g", rd);

  uint64_t bits = 1ull << rank, all_bits = 0;
  CALL(comm, circulant_allreduce(comm, &bits, &all_bits, 1, CIRCULANT_UINT64, CIRCULANT_BOR));
  CHECK(all_bits == (1ull << size) - 1, "allreduce uint64 bor");

  int64_t x = rank + 1;
  CALL(comm, circulant_allreduce(comm, CIRCULANT_IN_PLACE, &x, 1, CIRCULANT_INT64, CIRCULANT_PROD));
  int64_t factorial = 1;
  for (int r = 1; r <= size; r++) factorial *= r;
  CHECK(x == factorial, "allreduce int64 prod in place: %lld", (long long)x);

  for (int root = 0; root < size; root++) {
    float sf = (float)(rank + 1), rf = -1.0f;
    CALL(comm, circulant_reduce(comm, &sf, rank == root ? &rf : NULL, 1, CIRCULANT_FLOAT32,
                                CIRCULANT_SUM, root));
    if (rank == root) CHECK(rf == (float)(size * (size + 1) / 2), "reduce to %d: %g", root, rf);
  }

  int32_t one = rank + 1, prefix = -1;
  CALL(comm, circulant_scan(comm, &one, &prefix, 1, CIRCULANT_INT32, CIRCULANT_SUM));
  CHECK(prefix == (rank + 1) * (rank + 2) / 2, "scan: %d", prefix);
  prefix = -1;
  CALL(comm, circulant_exscan(comm, &one, &prefix, 1, CIRCULANT_INT32, CIRCULANT_SUM));
  if (rank > 0) CHECK(prefix == rank * (rank + 1) / 2, "exscan: %d", prefix);
  else CHECK(prefix == -1, "exscan leaves rank 0's recv untouched");
}

/* Element i of rank r's vector in the reduce-scatters at a step: whole numbers, exact in every
 * type used here. */
static int64_t term(int r, size_t i, int step) {
  return ((int64_t)r * 7919 + (int64_t)i * 104729 + step * 31) % 10007 - 5000;
}

static void fill_int64(int64_t *v, size_t n, int step) {
  for (size_t i = 0; i < n; i++) v[i] = term(rank, i, step);
}

static void fill_float64(double *v, size_t n, int step) {
  for (size_t i = 0; i < n; i++) v[i] = (double)term(rank, i, step);
}

/* Whether got[0..n] holds elements at.. of the sum over all ranks, computed here one rank
 * after the other. */
static int sums_right(const int64_t *got, size_t at, size_t n, int step) {
  int ok = 1;
  for (size_t j = 0; j < n; j++) {
    int64_t sum = 0;
    for (int r = 0; r < size; r++) sum += term(r, at + j, step);
    ok &= got[j] == sum;
  }
  return ok;
}

/* The same for the minimum. */
static int minima_right(const double *got, size_t at, size_t n, int step) {
  int ok = 1;
  for (size_t j = 0; j < n; j++) {
    double min = (double)term(0, at + j, step);
    for (int r = 1; r < size; r++)
      if ((double)term(r, at + j, step) < min) min = (double)term(r, at + j, step);
    ok &= got[j] == min;
  }
  return ok;
}

/* reduce_scatter_block (int64 sums) and reduce_scatter (float64 minima, at the counts of
 * count_of: an empty part among them), blocking, in place, nonblocking and persistent. */
static void reduce_scatters(circulant_comm *comm) {
  enum { BLOCK = 5 };
  size_t counts[64], total = 0, at = 0;
  for (int r = 0; r < size; r++) {
    counts[r] = count_of(r);
    if (r < rank) at += counts[r];
    total += counts[r];
  }
  size_t whole = (size_t)BLOCK * size, mine = counts[rank], block_at = (size_t)rank * BLOCK;
  int64_t *vector = malloc(sizeof(int64_t) * whole), block[BLOCK];
  double *reals = malloc(sizeof(double) * (total + 1)), part[64 * 3];

  fill_int64(vector, whole, 0);
  CALL(comm, circulant_reduce_scatter_block(comm, vector, block, BLOCK, CIRCULANT_INT64,
                                            CIRCULANT_SUM));
  CHECK(sums_right(block, block_at, BLOCK, 0), "reduce_scatter_block");
  fill_float64(reals, total, 0);
  CALL(comm, circulant_reduce_scatter(comm, reals, part, counts, CIRCULANT_FLOAT64, CIRCULANT_MIN));
  CHECK(minima_right(part, at, mine, 0), "reduce_scatter");

  /* In place: the whole vector is in recv, this rank's part lands at its start. */
  fill_int64(vector, whole, 1);
  CALL(comm, circulant_reduce_scatter_block(comm, CIRCULANT_IN_PLACE, vector, BLOCK,
                                            CIRCULANT_INT64, CIRCULANT_SUM));
  CHECK(sums_right(vector, block_at, BLOCK, 1), "reduce_scatter_block in place");
  fill_float64(reals, total, 1);
  CALL(comm, circulant_reduce_scatter(comm, CIRCULANT_IN_PLACE, reals, counts, CIRCULANT_FLOAT64,
                                      CIRCULANT_MIN));
  CHECK(minima_right(reals, at, mine, 1), "reduce_scatter in place");

  /* Nonblocking, progressed by circulant_test. */
  circulant_request *req;
  int done = 0;
  fill_int64(vector, whole, 2);
  CALL(comm, circulant_ireduce_scatter_block(comm, vector, block, BLOCK, CIRCULANT_INT64,
                                             CIRCULANT_SUM, &req));
  while (!done) CALL(comm, circulant_test(req, &done));
  CALL(comm, circulant_request_free(req));
  CHECK(sums_right(block, block_at, BLOCK, 2), "ireduce_scatter_block");
  fill_float64(reals, total, 2);
  CALL(comm, circulant_ireduce_scatter(comm, reals, part, counts, CIRCULANT_FLOAT64, CIRCULANT_MIN,
                                       &req));
  CALL(comm, circulant_wait(req));
  CALL(comm, circulant_request_free(req));
  CHECK(minima_right(part, at, mine, 2), "ireduce_scatter");

  /* Persistent: each start reduces the data then in the buffers; in place, that is the whole
   * vector put back into recv before each start. */
  CALL(comm, circulant_reduce_scatter_block_init(comm, vector, block, BLOCK, CIRCULANT_INT64,
                                                 CIRCULANT_SUM, &req));
  for (int step = 3; step <= 5; step++) {
    fill_int64(vector, whole, step);
    CALL(comm, circulant_start(req));
    CALL(comm, circulant_wait(req));
    CHECK(sums_right(block, block_at, BLOCK, step), "persistent reduce_scatter_block step %d",
          step);
  }
  CALL(comm, circulant_request_free(req));
  CALL(comm, circulant_reduce_scatter_init(comm, CIRCULANT_IN_PLACE, reals, counts,
                                           CIRCULANT_FLOAT64, CIRCULANT_MIN, &req));
  for (int step = 3; step <= 5; step++) {
    fill_float64(reals, total, step);
    CALL(comm, circulant_start(req));
    CALL(comm, circulant_wait(req));
    CHECK(minima_right(reals, at, mine, step), "persistent reduce_scatter in place step %d", step);
  }
  CALL(comm, circulant_request_free(req));
  free(vector);
  free(reals);
}

static void rooted(circulant_comm *comm) {
  int root = size - 1;
  int32_t mine = 100 + rank, all[64] = {0};
  CALL(comm, circulant_gather(comm, &mine, sizeof mine, all, root));
  if (rank == root) {
    int ok = 1;
    for (int r = 0; r < size; r++) ok &= all[r] == 100 + r;
    CHECK(ok, "gather");
  }
  int32_t got = -1;
  CALL(comm, circulant_scatter(comm, all, &got, sizeof got, root));
  CHECK(got == 100 + rank, "scatter: %d", got);

  size_t counts[64], total = 0;
  for (int r = 0; r < size; r++) total += counts[r] = count_of(r);
  unsigned char part[64], *whole = calloc(total + 1, 1);
  for (size_t i = 0; i < counts[rank]; i++) part[i] = byte_of(rank, i);
  CALL(comm, circulant_gatherv(comm, part, counts[rank], whole, counts, 0));
  if (rank == 0) {
    int ok = 1;
    for (int r = 0, at = 0; r < size; at += (int)counts[r], r++)
      for (size_t i = 0; i < counts[r]; i++) ok &= whole[at + i] == byte_of(r, i);
    CHECK(ok, "gatherv");
  }
  memset(part, 0, sizeof part);
  CALL(comm, circulant_scatterv(comm, whole, counts, part, counts[rank], 0));
  int ok = 1;
  for (size_t i = 0; i < counts[rank]; i++) ok &= part[i] == byte_of(rank, i);
  CHECK(ok, "scatterv");
  free(whole);

  int32_t to[64], from[64];
  for (int r = 0; r < size; r++) to[r] = rank * 1000 + r;
  CALL(comm, circulant_alltoall(comm, to, from, sizeof(int32_t)));
  ok = 1;
  for (int r = 0; r < size; r++) ok &= from[r] == r * 1000 + rank;
  CHECK(ok, "alltoall");
}

static void requests(circulant_comm *comm) {
  /* Nonblocking broadcast from registered memory, progressed by circulant_test. */
  size_t bytes = 1 << 16;
  unsigned char *buf;
  CALL(comm, circulant_alloc(comm, bytes, (void **)&buf));
  for (size_t i = 0; i < bytes; i++) buf[i] = rank == 0 ? byte_of(0, i) : 0;
  circulant_request *req;
  uint64_t copied_before, copied_after;
  CALL(comm, circulant_bytes_copied(comm, &copied_before));
  CALL(comm, circulant_ibcast(comm, buf, bytes, 0, &req));
  /* A second operation while one is in flight is refused, not queued. */
  CHECK(circulant_barrier(comm) == CIRCULANT_ERR_BUSY, "a second operation is refused");
  int done = 0, tests = 0;
  while (!done) {
    CALL(comm, circulant_test(req, &done));
    tests++;
  }
  int ok = 1;
  for (size_t i = 0; i < bytes; i++) ok &= buf[i] == byte_of(0, i);
  CHECK(ok, "ibcast after %d tests", tests);
  CALL(comm, circulant_wait(req));
  CALL(comm, circulant_request_free(req));
  CALL(comm, circulant_bytes_copied(comm, &copied_after));
  /* On one node, as under `circulant run`, a broadcast runs on the shared segment: every rank
   * copies the message once (the root in, the others out). On several nodes, or with
   * CIRCULANT_SEGMENT_LIMIT=0, one on circulant_alloc memory copies nothing. */
  CHECK(copied_after - copied_before == bytes, "a broadcast on one node copied %llu bytes, not %zu",
        (unsigned long long)(copied_after - copied_before), bytes);
  CALL(comm, circulant_free(comm, buf));

  /* The other nonblocking forms, each waited for and checked. */
  int32_t block = rank * 3, blocks[64], root_blocks[64], got = -1;
  CALL(comm, circulant_iallgather(comm, &block, sizeof block, blocks, &req));
  CALL(comm, circulant_wait(req));
  CALL(comm, circulant_request_free(req));
  ok = 1;
  for (int r = 0; r < size; r++) ok &= blocks[r] == r * 3;
  CHECK(ok, "iallgather");
  CALL(comm, circulant_igather(comm, &block, sizeof block, root_blocks, 0, &req));
  CALL(comm, circulant_wait(req));
  CALL(comm, circulant_request_free(req));
  CALL(comm, circulant_iscatter(comm, root_blocks, &got, sizeof got, 0, &req));
  CALL(comm, circulant_wait(req));
  CALL(comm, circulant_request_free(req));
  CHECK(got == rank * 3, "igather then iscatter: %d", got);
  int64_t prefix = -1, one = 1;
  CALL(comm, circulant_iscan(comm, &one, &prefix, 1, CIRCULANT_INT64, CIRCULANT_SUM, &req));
  CALL(comm, circulant_wait(req));
  CALL(comm, circulant_request_free(req));
  CHECK(prefix == rank + 1, "iscan: %lld", (long long)prefix);
  CALL(comm, circulant_ibarrier(comm, &req));
  CALL(comm, circulant_wait(req));
  CALL(comm, circulant_request_free(req));

  int32_t v = rank, sum = 0;
  CALL(comm, circulant_iallreduce(comm, &v, &sum, 1, CIRCULANT_INT32, CIRCULANT_SUM, &req));
  CALL(comm, circulant_wait(req));
  CHECK(sum == size * (size - 1) / 2, "iallreduce: %d", sum);
  CALL(comm, circulant_request_free(req));

  size_t counts[64], total = 0;
  for (int r = 0; r < size; r++) total += counts[r] = count_of(r);
  unsigned char mine[64], *all = calloc(total + 1, 1);
  for (size_t i = 0; i < counts[rank]; i++) mine[i] = byte_of(rank, i);
  CALL(comm, circulant_iallgatherv(comm, mine, counts[rank], all, counts, &req));
  CALL(comm, circulant_wait(req));
  ok = 1;
  for (int r = 0, at = 0; r < size; at += (int)counts[r], r++)
    for (size_t i = 0; i < counts[r]; i++) ok &= all[at + i] == byte_of(r, i);
  CHECK(ok, "iallgatherv");
  CALL(comm, circulant_request_free(req));
  free(all);

  /* Persistent: the arguments are kept, each start runs the broadcast again. */
  int32_t value = 0;
  CALL(comm, circulant_bcast_init(comm, &value, sizeof value, 1 % size, &req));
  for (int step = 1; step <= 3; step++) {
    if (rank == 1 % size) value = step * 7;
    CALL(comm, circulant_start(req));
    CALL(comm, circulant_wait(req));
    CHECK(value == step * 7, "persistent bcast step %d: %d", step, value);
  }
  CALL(comm, circulant_request_free(req));

  /* Persistent allreduce in place: each start reduces what is in the buffer then. */
  int64_t acc = 1;
  CALL(comm, circulant_allreduce_init(comm, CIRCULANT_IN_PLACE, &acc, 1, CIRCULANT_INT64,
                                      CIRCULANT_SUM, &req));
  int64_t want = 1;
  for (int step = 0; step < 3; step++) {
    CALL(comm, circulant_start(req));
    CALL(comm, circulant_wait(req));
    want *= size;
    CHECK(acc == want, "persistent allreduce step %d: %lld", step, (long long)acc);
  }
  CALL(comm, circulant_request_free(req));

  /* Persistent reduce to the last rank: the others' receive buffer is not touched. */
  double part = 0.0, most = -1.0;
  CALL(comm, circulant_reduce_init(comm, &part, &most, 1, CIRCULANT_FLOAT64, CIRCULANT_MAX,
                                   size - 1, &req));
  for (int step = 1; step <= 3; step++) {
    part = rank * 0.5 + step;
    CALL(comm, circulant_start(req));
    CALL(comm, circulant_wait(req));
    if (rank == size - 1)
      CHECK(most == (size - 1) * 0.5 + step, "persistent reduce step %d: %g", step, most);
    else
      CHECK(most == -1.0, "persistent reduce step %d wrote a non-root's buffer", step);
  }
  CALL(comm, circulant_request_free(req));

  /* Persistent exclusive scan, gather, scatterv and all-to-all: each start runs the call on
     the data then in the buffers. */
  int32_t term = 0, before = -1;
  CALL(comm, circulant_exscan_init(comm, &term, &before, 1, CIRCULANT_INT32, CIRCULANT_SUM, &req));
  for (int step = 1; step <= 2; step++) {
    term = step;
    CALL(comm, circulant_start(req));
    CALL(comm, circulant_wait(req));
    if (rank > 0) CHECK(before == rank * step, "persistent exscan step %d: %d", step, before);
    else CHECK(before == -1, "persistent exscan step %d wrote rank 0's buffer", step);
  }
  CALL(comm, circulant_request_free(req));

  int32_t mine32 = 0, gathered[64] = {0};
  CALL(comm, circulant_gather_init(comm, &mine32, sizeof mine32, gathered, 0, &req));
  for (int step = 1; step <= 2; step++) {
    mine32 = rank * 10 + step;
    CALL(comm, circulant_start(req));
    CALL(comm, circulant_wait(req));
    if (rank == 0) {
      int ok = 1;
      for (int r = 0; r < size; r++) ok &= gathered[r] == r * 10 + step;
      CHECK(ok, "persistent gather step %d", step);
    }
  }
  CALL(comm, circulant_request_free(req));

  size_t pieces[64], whole_bytes = 0;
  for (int r = 0; r < size; r++) whole_bytes += pieces[r] = count_of(r);
  unsigned char *source = calloc(whole_bytes + 1, 1), piece[64];
  CALL(comm, circulant_scatterv_init(comm, source, pieces, piece, pieces[rank], size - 1, &req));
  for (int step = 1; step <= 2; step++) {
    if (rank == size - 1)
      for (int r = 0, at = 0; r < size; at += (int)pieces[r], r++)
        for (size_t i = 0; i < pieces[r]; i++) source[at + i] = (unsigned char)(byte_of(r, i) + step);
    CALL(comm, circulant_start(req));
    CALL(comm, circulant_wait(req));
    int ok = 1;
    for (size_t i = 0; i < pieces[rank]; i++) ok &= piece[i] == (unsigned char)(byte_of(rank, i) + step);
    CHECK(ok, "persistent scatterv step %d", step);
  }
  CALL(comm, circulant_request_free(req));
  free(source);

  int32_t out[64], in[64];
  CALL(comm, circulant_alltoall_init(comm, out, in, sizeof(int32_t), &req));
  for (int step = 1; step <= 2; step++) {
    for (int r = 0; r < size; r++) out[r] = rank * 1000 + r + step;
    CALL(comm, circulant_start(req));
    CALL(comm, circulant_wait(req));
    int ok = 1;
    for (int r = 0; r < size; r++) ok &= in[r] == r * 1000 + rank + step;
    CHECK(ok, "persistent alltoall step %d", step);
  }
  CALL(comm, circulant_request_free(req));

  /* Persistent allgather in place. */
  int32_t ring[64];
  ring[rank] = 0;
  CALL(comm, circulant_allgather_init(comm, CIRCULANT_IN_PLACE, sizeof(int32_t), ring, &req));
  for (int step = 1; step <= 2; step++) {
    ring[rank] = rank * step;
    CALL(comm, circulant_start(req));
    CALL(comm, circulant_wait(req));
    ok = 1;
    for (int r = 0; r < size; r++) ok &= ring[r] == r * step;
    CHECK(ok, "persistent allgather in place, step %d", step);
  }
  CALL(comm, circulant_request_free(req));
}

static void split(circulant_comm *comm) {
  circulant_comm *half;
  CALL(comm, circulant_split(comm, rank % 2, -rank, &half));
  int hrank, hsize;
  CALL(half, circulant_rank(half, &hrank));
  CALL(half, circulant_size(half, &hsize));
  CHECK(hsize == (size + 1 - rank % 2) / 2, "split size %d", hsize);
  /* Keys -rank reverse the order. */
  CHECK(hrank == (hsize - 1) - rank / 2, "split rank %d", hrank);
  int32_t one = 1, n = 0;
  CALL(half, circulant_allreduce(half, &one, &n, 1, CIRCULANT_INT32, CIRCULANT_SUM));
  CHECK(n == hsize, "allreduce on the split: %d", n);
  CALL(half, circulant_finalize(half));
}

int main(void) {
  circulant_comm *comm;
  int rc = circulant_init(&comm);
  if (rc != CIRCULANT_SUCCESS) {
    fprintf(stderr, "circulant_init: %s (%s)\n", circulant_strerror(rc), circulant_last_error(NULL));
    return 1;
  }
  CALL(comm, circulant_rank(comm, &rank));
  CALL(comm, circulant_size(comm, &size));
  if (size > 64) {
    fprintf(stderr, "this example handles at most 64 ranks\n");
    return 1;
  }
  bcast(comm);
  allgathers(comm);
  reductions(comm);
  reduce_scatters(comm);
  rooted(comm);
  requests(comm);
  split(comm);
  CALL(comm, circulant_barrier(comm));
  printf("rank %d: %d passed, %d failed\n", rank, passed, failed);
  CALL(NULL, circulant_finalize(comm));
  return failed == 0 ? 0 : 1;
}
