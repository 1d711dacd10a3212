/* Replays a plan written by `circulant plan` with MPI point-to-point calls, for SimGrid's
 * smpirun (built with smpicc; benches/simgrid/README.md).
 *
 *   smpirun -np P -platform PLATFORM.xml -hostfile HOSTS replay PLAN [--copy-rate B/s]
 *           [--reduce-rate B/s] [--one-port]
 *
 * Each rank reads its own section of the plan (the offsets at the end of the file), then, from
 * a common start:
 * - posts a receive for every message it gets (source and tag = round index), all at once,
 *   as the one-sided transport exposes its buffers from the start of an operation;
 * - sends each transfer (one MPI_Isend of its bytes) once the rounds its data waits for are
 *   complete and the previous transfer to the same target has completed: the messages to one
 *   target go in plan order, one after the other, as over one connection or queue pair (SMPI
 *   would otherwise run them as parallel flows sharing the link); with --one-port a transfer
 *   also waits for the rank's previous transfer to any target (one send at a time in plan
 *   order, as the model's ranks send);
 * - completes its rounds in order: a round is complete when its messages have arrived and the
 *   earlier rounds are complete; its local steps then cost bytes / rate of simulated time
 *   (--copy-rate, --reduce-rate; without them they cost nothing, as SMPI's own collectives
 *   apply reduction operators at no simulated cost);
 * - is done when every round is complete and every send has completed.
 * Rank 0 prints the slowest rank's time from the common start: `time_s <seconds>`.
 *
 * Buffers come from SMPI_SHARED_MALLOC (one allocation that all ranks share; the bytes moved
 * are not looked at), so large runs need little memory. The program keeps no global state and
 * runs with smpirun -no-privatize. */
#include <mpi.h>
#include <simgrid/actor.h>
#include <smpi/smpi.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct send {
  int to;
  int round; /* the tag: the receiver matches per (source, round) */
  long long bytes;
  int ready_at;  /* rounds that must be complete: the rank's rounds with index <= after */
  int prev_same; /* the previous transfer to the same target, or -1 */
  int next_same;
  int ready;
  int done;
};

struct round {
  long long index;
  int first_recv, recvs;
  long long copy, combine;
};

struct plan {
  int rounds_n, sends_n, recvs_n;
  struct round *rounds;
  struct send *sends;
  int *recv_from;
  long long *recv_bytes;
  int *recv_round;
  long long setup_copy, setup_combine;
};

static void die(int rank, const char *what, const char *detail) {
  fprintf(stderr, "replay: rank %d: %s%s%s\n", rank, what, detail ? ": " : "",
          detail ? detail : "");
  MPI_Abort(MPI_COMM_WORLD, 2);
  exit(2);
}

static void *alloc(int rank, size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p)
    die(rank, "out of memory", NULL);
  return p;
}

static long long number(int rank, char **cursor, const char *what) {
  char *end;
  errno = 0;
  long long v = strtoll(*cursor, &end, 10);
  if (end == *cursor || errno)
    die(rank, "malformed plan, expected a number", what);
  *cursor = end;
  return v;
}

/* The next word (skipping blanks), or NULL at the end of the line. */
static char *word(char **cursor, char *out, size_t size) {
  char *c = *cursor;
  while (*c == ' ')
    c++;
  if (!*c || *c == '\n')
    return NULL;
  size_t n = 0;
  while (c[n] && c[n] != ' ' && c[n] != '\n')
    n++;
  if (n + 1 > size)
    n = size - 1;
  memcpy(out, c, n);
  out[n] = 0;
  *cursor = c + n;
  while (**cursor && **cursor != ' ' && **cursor != '\n')
    (*cursor)++;
  return out;
}

static void expect_word(int rank, char **cursor, const char *want) {
  char w[32];
  if (!word(cursor, w, sizeof w) || strcmp(w, want) != 0)
    die(rank, "malformed plan, expected", want);
}

/* Rank `rank`'s section of the plan at `path`, checked against `size` ranks. */
static void read_plan(const char *path, int rank, int size, struct plan *pl) {
  FILE *f = fopen(path, "r");
  if (!f)
    die(rank, "cannot open the plan", strerror(errno));
  char *line = NULL;
  size_t cap = 0;
  char *c;
  if (getline(&line, &cap, f) < 0)
    die(rank, "empty plan", path);
  c = line;
  expect_word(rank, &c, "circulant-plan");
  if (number(rank, &c, "version") != 1)
    die(rank, "plan format version is not 1", path);
  expect_word(rank, &c, "p");
  if (number(rank, &c, "p") != size)
    die(rank, "the plan is for another number of ranks than this job's", path);
  /* The offset table: its start is the last line, each entry 21 bytes. */
  char entry[32];
  if (fseek(f, -21, SEEK_END) != 0 || !fgets(entry, sizeof entry, f))
    die(rank, "plan without its offset table", path);
  long long table = strtoll(entry, NULL, 10);
  if (fseek(f, table + 21LL * rank, SEEK_SET) != 0 || !fgets(entry, sizeof entry, f))
    die(rank, "plan without an offset for this rank", path);
  if (fseek(f, strtoll(entry, NULL, 10), SEEK_SET) != 0 || getline(&line, &cap, f) < 0)
    die(rank, "plan without this rank's section", path);
  c = line;
  expect_word(rank, &c, "rank");
  if (number(rank, &c, "rank") != rank)
    die(rank, "the offset table points at another rank", path);
  expect_word(rank, &c, "rounds");
  pl->rounds_n = (int)number(rank, &c, "rounds");
  expect_word(rank, &c, "sends");
  pl->sends_n = (int)number(rank, &c, "sends");
  expect_word(rank, &c, "recvs");
  pl->recvs_n = (int)number(rank, &c, "recvs");
  expect_word(rank, &c, "buffers");
  for (int i = 0; i < 3; i++)
    number(rank, &c, "buffer size");
  expect_word(rank, &c, "setup");
  pl->setup_copy = number(rank, &c, "setup copy");
  pl->setup_combine = number(rank, &c, "setup combine");
  pl->rounds = alloc(rank, pl->rounds_n, sizeof *pl->rounds);
  pl->sends = alloc(rank, pl->sends_n, sizeof *pl->sends);
  pl->recv_from = alloc(rank, pl->recvs_n, sizeof *pl->recv_from);
  pl->recv_bytes = alloc(rank, pl->recvs_n, sizeof *pl->recv_bytes);
  pl->recv_round = alloc(rank, pl->recvs_n, sizeof *pl->recv_round);
  long long *after = alloc(rank, pl->sends_n, sizeof *after);
  int s = 0, r = 0;
  for (int k = 0; k < pl->rounds_n; k++) {
    if (getline(&line, &cap, f) < 0)
      die(rank, "plan ends inside this rank's section", path);
    c = line;
    struct round *rd = &pl->rounds[k];
    rd->index = number(rank, &c, "round index");
    if (rd->index > INT_MAX)
      die(rank, "a round index is beyond MPI's tags", path);
    rd->first_recv = r;
    char w[32];
    while (word(&c, w, sizeof w)) {
      if (strcmp(w, "s") == 0) {
        if (s >= pl->sends_n)
          die(rank, "more sends than the section says", path);
        struct send *sd = &pl->sends[s];
        sd->round = (int)rd->index;
        sd->to = (int)number(rank, &c, "send target");
        sd->bytes = number(rank, &c, "send bytes");
        number(rank, &c, "send pieces");
        char a[32];
        if (!word(&c, a, sizeof a))
          die(rank, "malformed plan, expected", "after");
        after[s] = strcmp(a, "-") == 0 ? -1 : strtoll(a, NULL, 10);
        if (sd->to < 0 || sd->to >= size || sd->bytes < 0 || sd->bytes > INT_MAX)
          die(rank, "a send out of range", path);
        s++;
      } else if (strcmp(w, "r") == 0) {
        if (r >= pl->recvs_n)
          die(rank, "more receives than the section says", path);
        pl->recv_from[r] = (int)number(rank, &c, "receive source");
        pl->recv_bytes[r] = number(rank, &c, "receive bytes");
        pl->recv_round[r] = (int)rd->index;
        if (pl->recv_from[r] < 0 || pl->recv_from[r] >= size || pl->recv_bytes[r] < 0 ||
            pl->recv_bytes[r] > INT_MAX)
          die(rank, "a receive out of range", path);
        r++;
      } else if (strcmp(w, "l") == 0) {
        rd->copy = number(rank, &c, "local copy");
        rd->combine = number(rank, &c, "local combine");
      } else {
        die(rank, "malformed plan, unknown field", w);
      }
    }
    rd->recvs = r - rd->first_recv;
  }
  if (s != pl->sends_n || r != pl->recvs_n)
    die(rank, "the section's counts do not match its rounds", path);
  /* A transfer waits for the rank's rounds with index <= after (binary search). */
  for (int i = 0; i < pl->sends_n; i++) {
    int lo = 0, hi = pl->rounds_n;
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      if (pl->rounds[mid].index <= after[i])
        lo = mid + 1;
      else
        hi = mid;
    }
    pl->sends[i].ready_at = after[i] < 0 ? 0 : lo;
  }
  free(after);
  free(line);
  fclose(f);
}

/* Links each transfer to the previous and next one to the same target (with ONE_PORT to any
 * target), in plan order. */
static int cmp_target(const void *a, const void *b, void *sends) {
  const struct send *s = sends;
  int x = *(const int *)a, y = *(const int *)b;
  if (s[x].to != s[y].to)
    return s[x].to < s[y].to ? -1 : 1;
  return x < y ? -1 : (x > y);
}

static void chain_targets(int rank, struct plan *pl, int one_port) {
  int n = pl->sends_n;
  int *order = alloc(rank, n, sizeof *order);
  for (int i = 0; i < n; i++)
    order[i] = i;
  if (!one_port)
    qsort_r(order, n, sizeof *order, cmp_target, pl->sends);
  for (int k = 0; k < n; k++) {
    struct send *sd = &pl->sends[order[k]];
    int same_prev = k > 0 && (one_port || pl->sends[order[k - 1]].to == sd->to);
    int same_next = k + 1 < n && (one_port || pl->sends[order[k + 1]].to == sd->to);
    sd->prev_same = same_prev ? order[k - 1] : -1;
    sd->next_same = same_next ? order[k + 1] : -1;
  }
  free(order);
}

static double local_cost(long long copy, long long combine, double copy_rate,
                         double reduce_rate) {
  double t = 0;
  if (copy_rate > 0)
    t += (double)copy / copy_rate;
  if (reduce_rate > 0)
    t += (double)combine / reduce_rate;
  return t;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const char *path = NULL;
  double copy_rate = 0, reduce_rate = 0;
  int one_port = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--copy-rate") == 0 && i + 1 < argc)
      copy_rate = atof(argv[++i]);
    else if (strcmp(argv[i], "--reduce-rate") == 0 && i + 1 < argc)
      reduce_rate = atof(argv[++i]);
    else if (strcmp(argv[i], "--one-port") == 0)
      one_port = 1;
    else if (argv[i][0] != '-' && !path)
      path = argv[i];
    else
      die(rank, "usage: replay PLAN [--copy-rate B/s] [--reduce-rate B/s] [--one-port]", argv[i]);
  }
  if (!path)
    die(rank, "usage: replay PLAN [--copy-rate B/s] [--reduce-rate B/s] [--one-port]", NULL);
  struct plan pl = {0};
  read_plan(path, rank, size, &pl);
  chain_targets(rank, &pl, one_port);

  /* Transfers by the number of complete rounds they wait for. */
  int *bucket_start = alloc(rank, pl.rounds_n + 2, sizeof *bucket_start);
  int *by_ready = alloc(rank, pl.sends_n, sizeof *by_ready);
  for (int i = 0; i < pl.sends_n; i++)
    bucket_start[pl.sends[i].ready_at + 1]++;
  for (int k = 0; k <= pl.rounds_n; k++)
    bucket_start[k + 1] += bucket_start[k];
  {
    int *fill = alloc(rank, pl.rounds_n + 1, sizeof *fill);
    for (int i = 0; i < pl.sends_n; i++) {
      int k = pl.sends[i].ready_at;
      by_ready[bucket_start[k] + fill[k]++] = i;
    }
    free(fill);
  }

  /* One shared buffer of the largest message any rank sends or receives. */
  long long mine = 1, largest;
  for (int i = 0; i < pl.sends_n; i++)
    mine = pl.sends[i].bytes > mine ? pl.sends[i].bytes : mine;
  for (int i = 0; i < pl.recvs_n; i++)
    mine = pl.recv_bytes[i] > mine ? pl.recv_bytes[i] : mine;
  MPI_Allreduce(&mine, &largest, 1, MPI_LONG_LONG, MPI_MAX, comm);
  char *sbuf = SMPI_SHARED_MALLOC((size_t)largest);
  char *rbuf = SMPI_SHARED_MALLOC((size_t)largest);
  MPI_Request *send_req = alloc(rank, pl.sends_n, sizeof *send_req);
  MPI_Request *recv_req = alloc(rank, pl.recvs_n, sizeof *recv_req);

  /* A common start: every rank sleeps until an instant past the slowest one's arrival. */
  MPI_Barrier(comm);
  double now = MPI_Wtime(), latest;
  MPI_Allreduce(&now, &latest, 1, MPI_DOUBLE, MPI_MAX, comm);
  double start = latest + 0.1;
  if (MPI_Wtime() >= start)
    die(rank, "reached the common start late", NULL);
  sg_actor_sleep_until(start);

  if (pl.setup_copy + pl.setup_combine > 0) {
    double t = local_cost(pl.setup_copy, pl.setup_combine, copy_rate, reduce_rate);
    if (t > 0)
      smpi_execute(t);
  }
  for (int i = 0; i < pl.recvs_n; i++)
    MPI_Irecv(rbuf, (int)pl.recv_bytes[i], MPI_BYTE, pl.recv_from[i], pl.recv_round[i], comm,
              &recv_req[i]);
  /* The requests waited for: the current round's receives, then the sends in flight (at
   * most one per target). */
  MPI_Request *wait = alloc(rank, (size_t)pl.recvs_n + pl.sends_n, sizeof *wait);
  int *wait_send = alloc(rank, (size_t)pl.recvs_n + pl.sends_n, sizeof *wait_send);
  int *in_flight = alloc(rank, pl.sends_n, sizeof *in_flight);
  int flying = 0, k = 0, sent = 0;
  for (;;) {
    /* Rounds 0..k-1 are complete: the transfers waiting for them become ready. */
    for (int b = bucket_start[k]; b < bucket_start[k + 1]; b++) {
      struct send *sd = &pl.sends[by_ready[b]];
      sd->ready = 1;
      if (sd->prev_same < 0 || pl.sends[sd->prev_same].done) {
        MPI_Issend(sbuf, (int)sd->bytes, MPI_BYTE, sd->to, sd->round, comm,
                  &send_req[by_ready[b]]);
        in_flight[flying++] = by_ready[b];
      }
    }
    /* Round k completes once its receives are in; meanwhile sends complete, and each lets
     * the next transfer to its target go if that one is ready. */
    struct round *rd = k < pl.rounds_n ? &pl.rounds[k] : NULL;
    int pending = 0;
    if (rd)
      for (int i = 0; i < rd->recvs; i++)
        pending += recv_req[rd->first_recv + i] != MPI_REQUEST_NULL;
    while (rd ? pending > 0 : flying > 0) {
      int n = 0;
      if (rd)
        for (int i = 0; i < rd->recvs; i++)
          if (recv_req[rd->first_recv + i] != MPI_REQUEST_NULL) {
            wait[n] = recv_req[rd->first_recv + i];
            wait_send[n++] = -1 - (rd->first_recv + i);
          }
      for (int f = 0; f < flying; f++) {
        wait[n] = send_req[in_flight[f]];
        wait_send[n++] = in_flight[f];
      }
      int which;
      MPI_Waitany(n, wait, &which, MPI_STATUS_IGNORE);
      int w = wait_send[which];
      if (w < 0) {
        recv_req[-1 - w] = MPI_REQUEST_NULL;
        pending--;
        continue;
      }
      pl.sends[w].done = 1;
      sent++;
      for (int f = 0; f < flying; f++)
        if (in_flight[f] == w) {
          in_flight[f] = in_flight[--flying];
          break;
        }
      int next = pl.sends[w].next_same;
      if (next >= 0 && pl.sends[next].ready) {
        MPI_Issend(sbuf, (int)pl.sends[next].bytes, MPI_BYTE, pl.sends[next].to,
                  pl.sends[next].round, comm, &send_req[next]);
        in_flight[flying++] = next;
      }
    }
    if (!rd)
      break;
    double t = local_cost(rd->copy, rd->combine, copy_rate, reduce_rate);
    if (t > 0)
      smpi_execute(t);
    k++;
  }
  if (sent != pl.sends_n)
    die(rank, "transfers left unsent (a transfer waits for a round after its own)", path);
  double mine_t = MPI_Wtime() - start, slowest;
  MPI_Reduce(&mine_t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
  if (rank == 0)
    printf("time_s %.9e\n", slowest);
  SMPI_SHARED_FREE(sbuf);
  SMPI_SHARED_FREE(rbuf);
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return 0;
}
