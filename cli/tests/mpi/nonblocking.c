/* The nonblocking collectives (and MPI-4's persistent ones, where the MPI has them) through
 * MPI_ (the layer, when it is preloaded), results compared with the blocking PMPI_ call on the
 * same data: several calls outstanding at once on one communicator, with point-to-point
 * requests among them, completed by every wait and test form in turn; a blocking call made
 * while they are outstanding; MPI_IN_PLACE, scattered displacements, a non-contiguous
 * datatype on some ranks (freed before the wait); dup and split communicators (one freed while
 * its call is outstanding); calls on two communicators waited for in opposite orders on
 * different ranks, and a blocking call on one while the other's is outstanding; a
 * nonblocking barrier that returns while a peer still waits for this rank's message;
 * MPI_Testall that frees nothing before all are complete; a rank inside MPI's own blocking
 * point-to-point calls while a call its peers need is outstanding; MPI_Cancel refused (with
 * CIRCULANT_MPI=on); with MPI 4, the large-count forms, and persistent requests started after
 * their communicator was freed.
 * Prints "rank R: N passed, M failed"; exits non-zero on a failure.
 *
 *   nonblocking [ROUNDS]   (seeded alike on every rank) */
#include <mpi.h>

#include "ordered_starts.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MPICH's MPI_STATUSES_IGNORE is the address 1, which GCC takes for an empty array. */
#pragma GCC diagnostic ignored "-Wstringop-overflow"

static int passed, failures, me;
static uint64_t seed = 4242;

static uint64_t next(void) {
  seed ^= seed << 13;
  seed ^= seed >> 7;
  seed ^= seed << 17;
  return seed;
}
static int pick(int n) { return (int)(next() % (uint64_t)n); }
static int some(int max) { return pick(5) == 0 ? 0 : 1 + pick(max); }

static void check(int ok, const char *what, int round) {
  if (ok) {
    passed++;
  } else {
    failures++;
    fprintf(stderr, "rank %d: %s differs (round %d)\n", me, what, round);
  }
}

static void fill(int *x, long n, int salt) {
  for (long i = 0; i < n; i++) x[i] = (int)((i * 7 + salt * 131 + me * 1009) % 1000) - 300;
}

static int *ints(size_t n) { return calloc(n + 1, sizeof(int)); }

enum { OPS = 16, MAXREQ = OPS + 2 };

#if MPI_VERSION >= 4
static void user_sum(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}
#endif

/* Completes `n` requests in the way `style` names. */
static void complete(int style, int n, MPI_Request *rs) {
  switch (style) {
  case 0:
    MPI_Waitall(n, rs, MPI_STATUSES_IGNORE);
    break;
  case 1: {
    /* MPI_Testall frees nothing until everything is complete. */
    int flag = 0;
    MPI_Status st[MAXREQ];
    MPI_Request before[MAXREQ];
    while (!flag) {
      memcpy(before, rs, sizeof *rs * (size_t)n);
      MPI_Testall(n, rs, &flag, st);
      if (!flag && memcmp(before, rs, sizeof *rs * (size_t)n)) {
        failures++;
        fprintf(stderr, "rank %d: MPI_Testall changed requests without completing all\n", me);
      }
    }
    break;
  }
  case 2:
    for (;;) {
      int idx;
      MPI_Status st;
      MPI_Waitany(n, rs, &idx, &st);
      if (idx == MPI_UNDEFINED) break;
      if (rs[idx] != MPI_REQUEST_NULL) failures++, fprintf(stderr, "rank %d: waitany left a request\n", me);
    }
    break;
  case 3:
    for (;;) {
      int out, idx[MAXREQ];
      MPI_Status st[MAXREQ];
      MPI_Waitsome(n, rs, &out, idx, st);
      if (out == MPI_UNDEFINED) break;
    }
    break;
  case 4:
    for (int i = n - 1; i >= 0; i--) MPI_Wait(&rs[i], MPI_STATUS_IGNORE);
    break;
  default:
    for (int left = n; left;) {
      left = 0;
      for (int i = 0; i < n; i++) {
        if (rs[i] == MPI_REQUEST_NULL) continue;
        int flag = 0;
        MPI_Test(&rs[i], &flag, MPI_STATUS_IGNORE);
        if (!flag) left++;
      }
      if (left) {
        int flag, idx;
        MPI_Testany(n, rs, &idx, &flag, MPI_STATUS_IGNORE);
        int out, ids[MAXREQ];
        MPI_Testsome(n, rs, &out, ids, MPI_STATUSES_IGNORE);
      }
    }
    break;
  }
  for (int i = 0; i < n; i++)
    if (rs[i] != MPI_REQUEST_NULL) {
      failures++;
      fprintf(stderr, "rank %d: request %d not freed by style %d\n", me, i, style);
    }
}

/* One round on `comm`: every nonblocking collective started, then completed together. */
static void round_on(MPI_Comm comm, int round, int big) {
  int p, r;
  seed = 4242 + 7919 * (uint64_t)round;
  MPI_Comm_size(comm, &p);
  MPI_Comm_rank(comm, &r);
  int n = some(big), root = pick(p), style = round % 6;
  size_t cap = (size_t)(big + 1) * (size_t)p * 2 + 16;
  int *counts = ints((size_t)p), *displs = ints((size_t)p), total = 0;
  for (int j = 0; j < p; j++) {
    counts[j] = some(big);
    displs[j] = total + j % 3;
    total = displs[j] + counts[j];
  }
  int *in[OPS], *out[OPS], *want[OPS];
  for (int k = 0; k < OPS; k++) {
    in[k] = ints(cap + (size_t)total);
    out[k] = ints(cap + (size_t)total);
    want[k] = ints(cap + (size_t)total);
    fill(in[k], (long)cap + total, round * 31 + k);
  }
  MPI_Op ops[] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_BXOR};
  MPI_Op op = ops[pick(4)];
  MPI_Datatype strided; /* n ints, every other one: the same signature as n MPI_INTs */
  MPI_Type_vector(n ? n : 1, 1, 2, MPI_INT, &strided);
  MPI_Type_commit(&strided);

  /* The references, from the MPI itself. */
  memcpy(want[0], in[0], (size_t)n * sizeof(int));
  PMPI_Bcast(want[0], n, MPI_INT, root, comm);
  PMPI_Allgather(in[1], n, MPI_INT, want[1], n, MPI_INT, comm);
  PMPI_Allgatherv(in[2], counts[r], MPI_INT, want[2], counts, displs, MPI_INT, comm);
  memcpy(want[3], in[3], (size_t)total * sizeof(int));
  PMPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, want[3], counts, displs, MPI_INT, comm);
  PMPI_Allreduce(in[4], want[4], n, MPI_INT, op, comm);
  memcpy(want[5], in[5], (size_t)n * sizeof(int));
  PMPI_Allreduce(MPI_IN_PLACE, want[5], n, MPI_INT, MPI_SUM, comm);
  PMPI_Reduce(in[6], want[6], n, MPI_INT, MPI_SUM, root, comm);
  PMPI_Scan(in[7], want[7], n, MPI_INT, op, comm);
  PMPI_Exscan(in[8], want[8], n, MPI_INT, MPI_SUM, comm);
  PMPI_Gather(in[9], n, MPI_INT, want[9], n, MPI_INT, root, comm);
  PMPI_Scatter(in[10], n, MPI_INT, want[10], n, MPI_INT, root, comm);
  PMPI_Alltoall(in[11], n, MPI_INT, want[11], n, MPI_INT, comm);
  PMPI_Gatherv(in[12], counts[r], MPI_INT, want[12], counts, displs, MPI_INT, root, comm);
  PMPI_Scatterv(in[13], counts, displs, MPI_INT, want[13], counts[r], MPI_INT, root, comm);
  /* 14: a barrier. 15: a broadcast received into a strided buffer on odd ranks. */
  memcpy(want[15], in[15], (size_t)n * sizeof(int));
  PMPI_Bcast(want[15], n, MPI_INT, root, comm);
  if (r == root) memcpy(out[0], in[0], (size_t)n * sizeof(int));
  memcpy(out[3], in[3], (size_t)total * sizeof(int));
  memcpy(out[5], in[5], (size_t)n * sizeof(int));
  int odd = r % 2 == 1;
  if (r == root) {
    if (odd)
      for (int i = 0; i < n; i++) out[15][2 * i] = in[15][i];
    else
      memcpy(out[15], in[15], (size_t)n * sizeof(int));
  }

  MPI_Request rs[MAXREQ];
  MPI_Ibcast(out[0], n, MPI_INT, root, comm, &rs[0]);
  MPI_Iallgather(in[1], n, MPI_INT, out[1], n, MPI_INT, comm, &rs[1]);
  MPI_Iallgatherv(in[2], counts[r], MPI_INT, out[2], counts, displs, MPI_INT, comm, &rs[2]);
  MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out[3], counts, displs, MPI_INT, comm, &rs[3]);
  MPI_Iallreduce(in[4], out[4], n, MPI_INT, op, comm, &rs[4]);
  MPI_Iallreduce(MPI_IN_PLACE, out[5], n, MPI_INT, MPI_SUM, comm, &rs[5]);
  MPI_Ireduce(in[6], out[6], n, MPI_INT, MPI_SUM, root, comm, &rs[6]);
  MPI_Iscan(in[7], out[7], n, MPI_INT, op, comm, &rs[7]);
  MPI_Iexscan(in[8], out[8], n, MPI_INT, MPI_SUM, comm, &rs[8]);
  MPI_Igather(in[9], n, MPI_INT, out[9], n, MPI_INT, root, comm, &rs[9]);
  MPI_Iscatter(in[10], n, MPI_INT, out[10], n, MPI_INT, root, comm, &rs[10]);
  MPI_Ialltoall(in[11], n, MPI_INT, out[11], n, MPI_INT, comm, &rs[11]);
  MPI_Igatherv(in[12], counts[r], MPI_INT, out[12], counts, displs, MPI_INT, root, comm, &rs[12]);
  MPI_Iscatterv(in[13], counts, displs, MPI_INT, out[13], counts[r], MPI_INT, root, comm, &rs[13]);
  MPI_Ibarrier(comm, &rs[14]);
  if (odd)
    MPI_Ibcast(out[15], n ? 1 : 0, strided, root, comm, &rs[15]);
  else
    MPI_Ibcast(out[15], n, MPI_INT, root, comm, &rs[15]);
  /* A ring of point-to-point messages among them. */
  int token = round * 1000 + r, got = -1;
  MPI_Irecv(&got, 1, MPI_INT, (r + p - 1) % p, 77, comm, &rs[OPS]);
  MPI_Isend(&token, 1, MPI_INT, (r + 1) % p, 77, comm, &rs[OPS + 1]);

  /* A blocking call while they are outstanding. */
  int sum = 0;
  MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, comm);
  check(sum == p * (p - 1) / 2, "blocking allreduce among nonblocking calls", round);

  complete(style, MAXREQ, rs);

  check(!memcmp(out[0], want[0], (size_t)n * sizeof(int)), "ibcast", round);
  check(!memcmp(out[1], want[1], (size_t)n * p * sizeof(int)), "iallgather", round);
  int ok2 = 1, ok3 = 1, ok12 = 1;
  for (int j = 0; j < p; j++) {
    size_t at = (size_t)displs[j], len = (size_t)counts[j] * sizeof(int);
    ok2 = ok2 && !memcmp(out[2] + at, want[2] + at, len);
    ok3 = ok3 && !memcmp(out[3] + at, want[3] + at, len);
    ok12 = ok12 && !memcmp(out[12] + at, want[12] + at, len);
  }
  check(ok2, "iallgatherv", round);
  check(ok3, "iallgatherv in place", round);
  check(!memcmp(out[4], want[4], (size_t)n * sizeof(int)), "iallreduce", round);
  check(!memcmp(out[5], want[5], (size_t)n * sizeof(int)), "iallreduce in place", round);
  check(r != root || !memcmp(out[6], want[6], (size_t)n * sizeof(int)), "ireduce", round);
  check(!memcmp(out[7], want[7], (size_t)n * sizeof(int)), "iscan", round);
  check(r == 0 || !memcmp(out[8], want[8], (size_t)n * sizeof(int)), "iexscan", round);
  check(r != root || !memcmp(out[9], want[9], (size_t)n * p * sizeof(int)), "igather", round);
  check(!memcmp(out[10], want[10], (size_t)n * sizeof(int)), "iscatter", round);
  check(!memcmp(out[11], want[11], (size_t)n * p * sizeof(int)), "ialltoall", round);
  check(r != root || ok12, "igatherv", round);
  check(!memcmp(out[13], want[13], (size_t)counts[r] * sizeof(int)), "iscatterv", round);
  int ok15 = 1;
  for (int i = 0; i < n; i++) ok15 = ok15 && out[15][odd ? 2 * i : i] == want[15][i];
  check(ok15, "ibcast, strided on odd ranks", round);
  check(got == round * 1000 + (r + p - 1) % p, "point-to-point among them", round);

  MPI_Type_free(&strided);
  for (int k = 0; k < OPS; k++) {
    free(in[k]);
    free(out[k]);
    free(want[k]);
  }
  free(counts);
  free(displs);
}

/* Calls on two communicators: the ranks wait for them in opposite orders, or make a blocking
 * call on the second before they wait for the first, so each rank needs the others to keep
 * the call it is not waiting for going. */
static void two_communicators(int n) {
  MPI_Comm a, b;
  MPI_Comm_dup(MPI_COMM_WORLD, &a);
  MPI_Comm_dup(MPI_COMM_WORLD, &b);
  MPI_Barrier(a);
  MPI_Barrier(b);
  int p;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  int *x = ints((size_t)n), *y = ints((size_t)n), *u = ints((size_t)n), *v = ints((size_t)n);
  for (int i = 0; i < n; i++) x[i] = u[i] = me + i;
  MPI_Request rs[2];
  MPI_Iallreduce(x, y, n, MPI_INT, MPI_SUM, a, &rs[0]);
  MPI_Iallreduce(u, v, n, MPI_INT, MPI_SUM, b, &rs[1]);
  if (me % 2) {
    MPI_Wait(&rs[0], MPI_STATUS_IGNORE);
    MPI_Wait(&rs[1], MPI_STATUS_IGNORE);
  } else {
    MPI_Wait(&rs[1], MPI_STATUS_IGNORE);
    MPI_Wait(&rs[0], MPI_STATUS_IGNORE);
  }
  int ok = 1;
  for (int i = 0; i < n; i++) ok = ok && y[i] == p * (p - 1) / 2 + p * i && v[i] == y[i];
  check(ok, "iallreduce on two communicators, waited in opposite orders", 0);

  for (int i = 0; i < n; i++) u[i] = me == 0 ? 7 * i : -1;
  MPI_Iallreduce(x, y, n, MPI_INT, MPI_MAX, a, &rs[0]);
  if (me % 2) {
    MPI_Wait(&rs[0], MPI_STATUS_IGNORE);
    MPI_Bcast(u, n, MPI_INT, 0, b);
  } else {
    MPI_Bcast(u, n, MPI_INT, 0, b);
    MPI_Wait(&rs[0], MPI_STATUS_IGNORE);
  }
  ok = 1;
  for (int i = 0; i < n; i++) ok = ok && y[i] == p - 1 + i && u[i] == 7 * i;
  check(ok, "a blocking bcast on one communicator while another's call is outstanding", 0);
  free(x), free(y), free(u), free(v);
  MPI_Comm_free(&a);
  MPI_Comm_free(&b);
}

/* A rank inside MPI's own point-to-point calls keeps the layer's calls going. The last rank
 * sends to each other rank only after its broadcast completed, which needs those ranks (the
 * root's later blocks, the forwarding): they wait for its message first, in turn in MPI_Recv,
 * MPI_Probe, MPI_Sendrecv, MPI_Mprobe, MPI_Sendrecv_replace, and on a receive in MPI_Wait,
 * MPI_Waitall (beside MPI_REQUEST_NULL), MPI_Waitany, MPI_Waitsome, an MPI_Test loop and an
 * MPI_Iprobe loop, and with MPI 4 in MPI_Recv_c, MPI_Sendrecv_c, MPI_Sendrecv_replace_c and
 * MPI_Mrecv_c. Then the other way: the others send to the last rank (MPI_Ssend, a large
 * MPI_Send, with MPI 4 MPI_Ssend_c) before they wait, and it receives only after its wait. */
#if MPI_VERSION >= 4
enum { FROM_LAST = 15, TO_LAST = 3 }; /* with the large-count forms (11-14) */
#else
enum { FROM_LAST = 11, TO_LAST = 3 };
#endif

/* The forms in which the waiting rank sends too, so the last rank answers with MPI_Sendrecv. */
static int answered(int form) { return form == 2 || form == 4 || form == 12 || form == 13; }

static void wait_for_last(int form, int *token, MPI_Status *st) {
  const int tag = 77;
  int last;
  MPI_Comm_size(MPI_COMM_WORLD, &last);
  last--;
  int mine = 1000 * form + me, flag = 0, idx = -1, n = 0;
  MPI_Request rr, pair[2];
  MPI_Message msg;
  switch (form) {
  case 0:
    MPI_Recv(token, 1, MPI_INT, last, tag, MPI_COMM_WORLD, st);
    break;
  case 1:
    MPI_Probe(last, tag, MPI_COMM_WORLD, st);
    MPI_Recv(token, 1, MPI_INT, last, tag, MPI_COMM_WORLD, st);
    break;
  case 2:
    MPI_Sendrecv(&mine, 1, MPI_INT, last, tag, token, 1, MPI_INT, last, tag, MPI_COMM_WORLD, st);
    break;
  case 3:
    MPI_Mprobe(last, tag, MPI_COMM_WORLD, &msg, st);
    MPI_Mrecv(token, 1, MPI_INT, &msg, st);
    break;
  case 4:
    *token = mine;
    MPI_Sendrecv_replace(token, 1, MPI_INT, last, tag, last, tag, MPI_COMM_WORLD, st);
    break;
  case 5:
    MPI_Irecv(token, 1, MPI_INT, last, tag, MPI_COMM_WORLD, &rr);
    MPI_Wait(&rr, st);
    break;
  case 6:
    MPI_Irecv(token, 1, MPI_INT, last, tag, MPI_COMM_WORLD, &pair[0]);
    pair[1] = MPI_REQUEST_NULL;
    {
      MPI_Status sts[2];
      MPI_Waitall(2, pair, sts);
      *st = sts[0];
    }
    break;
  case 7:
    MPI_Irecv(token, 1, MPI_INT, last, tag, MPI_COMM_WORLD, &rr);
    MPI_Waitany(1, &rr, &idx, st);
    check(idx == 0, "MPI_Waitany's index", form);
    break;
  case 8:
    MPI_Irecv(token, 1, MPI_INT, last, tag, MPI_COMM_WORLD, &rr);
    MPI_Waitsome(1, &rr, &n, &idx, st);
    check(n == 1 && idx == 0, "MPI_Waitsome's count", form);
    break;
  case 9:
    MPI_Irecv(token, 1, MPI_INT, last, tag, MPI_COMM_WORLD, &rr);
    while (!flag) MPI_Test(&rr, &flag, st);
    break;
  case 10:
    while (!flag) MPI_Iprobe(last, tag, MPI_COMM_WORLD, &flag, st);
    MPI_Recv(token, 1, MPI_INT, last, tag, MPI_COMM_WORLD, st);
    break;
#if MPI_VERSION >= 4
  case 11:
    MPI_Recv_c(token, 1, MPI_INT, last, tag, MPI_COMM_WORLD, st);
    break;
  case 12:
    MPI_Sendrecv_c(&mine, 1, MPI_INT, last, tag, token, 1, MPI_INT, last, tag, MPI_COMM_WORLD,
                   st);
    break;
  case 13:
    *token = mine;
    MPI_Sendrecv_replace_c(token, 1, MPI_INT, last, tag, last, tag, MPI_COMM_WORLD, st);
    break;
  case 14:
    MPI_Mprobe(last, tag, MPI_COMM_WORLD, &msg, st);
    MPI_Mrecv_c(token, 1, MPI_INT, &msg, st);
    break;
#endif
  }
}

static void inside_point_to_point(int n) {
  int p;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  if (p < 3) return;
  const int last = p - 1, tag = 77, big = 1 << 18;
  int *large = ints(big);
  for (int form = 0; form < FROM_LAST + TO_LAST; form++) {
    int *x = ints((size_t)n);
    for (int i = 0; i < n; i++) x[i] = me == 0 ? form * n + i : -1;
    MPI_Request r;
    MPI_Ibcast(x, n, MPI_INT, 0, MPI_COMM_WORLD, &r);
    int token = -1, mine = 1000 * form + me;
    if (form < FROM_LAST && me == last) {
      MPI_Wait(&r, MPI_STATUS_IGNORE);
      for (int j = 0; j < last; j++) {
        int back = -1;
        if (form == 1)
          MPI_Ssend(&mine, 1, MPI_INT, j, tag, MPI_COMM_WORLD);
        else if (answered(form))
          MPI_Sendrecv(&mine, 1, MPI_INT, j, tag, &back, 1, MPI_INT, j, tag, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE);
        else
          MPI_Send(&mine, 1, MPI_INT, j, tag, MPI_COMM_WORLD);
        check(!answered(form) || back == 1000 * form + j, "reply to the last rank", form);
      }
    } else if (form < FROM_LAST) {
      MPI_Status st;
      wait_for_last(form, &token, &st);
      check(token == 1000 * form + last && st.MPI_SOURCE == last, "message from the last rank",
            form);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else if (me == last) {
      MPI_Wait(&r, MPI_STATUS_IGNORE);
      for (int j = 0; j < last; j++) {
        int *into = form == FROM_LAST + 1 ? large : &token;
        int count = form == FROM_LAST + 1 ? big : 1;
        MPI_Recv(into, count, MPI_INT, j, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        check(into[0] == 1000 * form + j && into[count - 1] == 1000 * form + j,
              "message to the last rank", form);
      }
    } else {
      if (form == FROM_LAST) {
        MPI_Ssend(&mine, 1, MPI_INT, last, tag, MPI_COMM_WORLD);
      } else if (form == FROM_LAST + 1) {
        large[0] = large[big - 1] = mine;
        MPI_Send(large, big, MPI_INT, last, tag, MPI_COMM_WORLD);
      } else {
#if MPI_VERSION >= 4
        MPI_Ssend_c(&mine, 1, MPI_INT, last, tag, MPI_COMM_WORLD);
#else
        MPI_Ssend(&mine, 1, MPI_INT, last, tag, MPI_COMM_WORLD);
#endif
      }
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    int ok = 1;
    for (int i = 0; i < n; i++) ok = ok && x[i] == form * n + i;
    check(ok, "ibcast completed around point-to-point calls", form);
    free(x);
  }
  free(large);
}

/* A derived datatype freed right after the call that uses it, before the call completes. */
static void freed_datatype(int n) {
  MPI_Datatype strided;
  MPI_Type_vector(n, 1, 2, MPI_INT, &strided);
  MPI_Type_commit(&strided);
  int *buf = ints(2 * (size_t)n);
  for (int i = 0; i < n; i++) buf[2 * i] = me == 0 ? 3 * i + 1 : 0;
  MPI_Request r;
  MPI_Ibcast(buf, 1, strided, 0, MPI_COMM_WORLD, &r);
  MPI_Type_free(&strided);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  int ok = 1;
  for (int i = 0; i < n; i++) ok = ok && buf[2 * i] == 3 * i + 1 && buf[2 * i + 1] == 0;
  check(ok, "ibcast of a datatype freed before its wait", 0);
#if MPI_VERSION >= 4
  MPI_Type_vector(n, 1, 2, MPI_INT, &strided);
  MPI_Type_commit(&strided);
  MPI_Bcast_init(buf, 1, strided, 0, MPI_COMM_WORLD, ordered_starts(), &r);
  MPI_Type_free(&strided);
  for (int start = 0; start < 2; start++) {
    for (int i = 0; i < n; i++) buf[2 * i] = me == 0 ? 5 * i + start : 0;
    MPI_Start(&r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    ok = 1;
    for (int i = 0; i < n; i++) ok = ok && buf[2 * i] == 5 * i + start && buf[2 * i + 1] == 0;
    check(ok, "persistent bcast of a datatype freed after its init", start);
  }
  MPI_Request_free(&r);
#endif
  free(buf);
}

#if MPI_VERSION >= 4
/* The large-count forms: MPI_Ibcast_c, MPI_Iallgatherv_c, MPI_Iallreduce_c and a persistent
 * MPI_Bcast_init_c, against the PMPI_ calls on the same data. */
static void large_count_forms(int n) {
  int p, r;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Count *counts = calloc((size_t)p, sizeof *counts);
  MPI_Aint *displs = calloc((size_t)p, sizeof *displs);
  int *icounts = ints((size_t)p), *idispls = ints((size_t)p), total = 0;
  for (int j = 0; j < p; j++) {
    icounts[j] = (int)(counts[j] = (j * 37 + n) % (n + 1));
    idispls[j] = (int)(displs[j] = total + j % 2);
    total = idispls[j] + icounts[j];
  }
  int *b = ints((size_t)n), *bw = ints((size_t)n), *s = ints((size_t)n), *a = ints((size_t)n),
      *aw = ints((size_t)n), *v = ints((size_t)total), *vw = ints((size_t)total);
  fill(b, n, 11);
  memcpy(bw, b, (size_t)n * sizeof(int));
  fill(s, n, 12);
  PMPI_Bcast(bw, n, MPI_INT, p - 1, MPI_COMM_WORLD);
  PMPI_Allreduce(s, aw, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  PMPI_Allgatherv(s, icounts[r], MPI_INT, vw, icounts, idispls, MPI_INT, MPI_COMM_WORLD);
  /* A gatherv to rank 1 % p and a scatterv from it, of the same blocks. */
  int *g = ints((size_t)total), *gw = ints((size_t)total), *t = ints((size_t)n),
      *tw = ints((size_t)n), groot = 1 % p;
  PMPI_Gatherv(s, icounts[r], MPI_INT, gw, icounts, idispls, MPI_INT, groot, MPI_COMM_WORLD);
  PMPI_Scatterv(vw, icounts, idispls, MPI_INT, tw, icounts[r], MPI_INT, groot, MPI_COMM_WORLD);
  MPI_Request rs[5];
  MPI_Ibcast_c(b, n, MPI_INT, p - 1, MPI_COMM_WORLD, &rs[0]);
  MPI_Iallreduce_c(s, a, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rs[1]);
  MPI_Iallgatherv_c(s, counts[r], MPI_INT, v, counts, displs, MPI_INT, MPI_COMM_WORLD, &rs[2]);
  MPI_Igatherv_c(s, counts[r], MPI_INT, g, counts, displs, MPI_INT, groot, MPI_COMM_WORLD, &rs[3]);
  MPI_Iscatterv_c(vw, counts, displs, MPI_INT, t, counts[r], MPI_INT, groot, MPI_COMM_WORLD,
                  &rs[4]);
  MPI_Waitall(5, rs, MPI_STATUSES_IGNORE);
  int ok = 1, gok = 1;
  for (int j = 0; j < p; j++) {
    ok = ok && !memcmp(v + idispls[j], vw + idispls[j], (size_t)icounts[j] * sizeof(int));
    gok = gok && !memcmp(g + idispls[j], gw + idispls[j], (size_t)icounts[j] * sizeof(int));
  }
  check(!memcmp(b, bw, (size_t)n * sizeof(int)), "ibcast_c", 0);
  check(!memcmp(a, aw, (size_t)n * sizeof(int)), "iallreduce_c", 0);
  check(ok, "iallgatherv_c", 0);
  check(r != groot || gok, "igatherv_c", 0);
  check(!memcmp(t, tw, (size_t)icounts[r] * sizeof(int)), "iscatterv_c", 0);
  free(g), free(gw), free(t), free(tw);
  MPI_Request q;
  MPI_Bcast_init_c(b, n, MPI_INT, 0, MPI_COMM_WORLD, ordered_starts(), &q);
  for (int start = 0; start < 2; start++) {
    fill(b, n, 20 + start);
    memcpy(bw, b, (size_t)n * sizeof(int));
    PMPI_Bcast(bw, n, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Start(&q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    check(!memcmp(b, bw, (size_t)n * sizeof(int)), "persistent bcast_c", start);
  }
  MPI_Request_free(&q);
  free(b), free(bw), free(s), free(a), free(aw), free(v), free(vw);
  free(counts), free(displs), free(icounts), free(idispls);
}

/* Persistent requests started three times with new data, by MPI_Start and MPI_Startall. */
static void persistent_on(MPI_Comm comm, int big) {
  int p, r;
  MPI_Comm_size(comm, &p);
  MPI_Comm_rank(comm, &r);
  seed = 99;
  int n = 1 + pick(big), root = pick(p);
  int *counts = ints((size_t)p), *displs = ints((size_t)p), total = 0;
  for (int j = 0; j < p; j++) {
    counts[j] = some(big);
    displs[j] = total + j % 2;
    total = displs[j] + counts[j];
  }
  int *b = ints((size_t)n), *bw = ints((size_t)n), *s = ints((size_t)n), *a = ints((size_t)n),
      *aw = ints((size_t)n), *v = ints((size_t)total), *vs = ints((size_t)counts[r]),
      *vw = ints((size_t)total);
  MPI_Request rs[4];
  MPI_Bcast_init(b, n, MPI_INT, root, comm, ordered_starts(), &rs[0]);
  MPI_Allreduce_init(s, a, n, MPI_INT, MPI_SUM, comm, ordered_starts(), &rs[1]);
  MPI_Allgatherv_init(vs, counts[r], MPI_INT, v, counts, displs, MPI_INT, comm, ordered_starts(),
                      &rs[2]);
  MPI_Barrier_init(comm, ordered_starts(), &rs[3]);
  for (int start = 0; start < 3; start++) {
    fill(b, n, 50 + start);
    memcpy(bw, b, (size_t)n * sizeof(int));
    fill(s, n, 60 + start);
    fill(vs, counts[r], 70 + start);
    PMPI_Bcast(bw, n, MPI_INT, root, comm);
    PMPI_Allreduce(s, aw, n, MPI_INT, MPI_SUM, comm);
    PMPI_Allgatherv(vs, counts[r], MPI_INT, vw, counts, displs, MPI_INT, comm);
    if (start == 1) {
      for (int i = 0; i < 4; i++) MPI_Start(&rs[i]);
      for (int i = 0; i < 4; i++) MPI_Wait(&rs[i], MPI_STATUS_IGNORE);
    } else {
      MPI_Startall(4, rs);
      MPI_Waitall(4, rs, MPI_STATUSES_IGNORE);
    }
    int ok = 1;
    for (int j = 0; j < p; j++)
      ok = ok && !memcmp(v + displs[j], vw + displs[j], (size_t)counts[j] * sizeof(int));
    check(!memcmp(b, bw, (size_t)n * sizeof(int)), "persistent bcast", start);
    check(!memcmp(a, aw, (size_t)n * sizeof(int)), "persistent allreduce", start);
    check(ok, "persistent allgatherv", start);
    int flag = 0;
    MPI_Request_get_status(rs[0], &flag, MPI_STATUS_IGNORE);
    check(flag && rs[0] != MPI_REQUEST_NULL, "persistent request stays, inactive", start);
  }
  for (int i = 0; i < 4; i++) MPI_Request_free(&rs[i]);
  check(rs[0] == MPI_REQUEST_NULL, "persistent request freed", 0);
  free(b), free(bw), free(s), free(a), free(aw), free(v), free(vs), free(vw);
  free(counts);
  free(displs);
}

/* Persistent requests started after the program freed their communicator, which MPI keeps
 * for them, and made a communicator of another size meanwhile (which may take the freed
 * one's handle): every start runs on the freed one's ranks and root. */
static void persistent_after_free(int n) {
  int p;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm gone, other;
  MPI_Comm_dup(MPI_COMM_WORLD, &gone);
  MPI_Barrier(gone); /* its circulant communicator, so that its starts may be served */
  int root = p - 1;
  int *b = ints((size_t)n), *bw = ints((size_t)n), s[3], a[3], aw[3];
  MPI_Request rs[2];
  MPI_Bcast_init(b, n, MPI_INT, root, gone, ordered_starts(), &rs[0]);
  MPI_Allreduce_init(s, a, 3, MPI_INT, MPI_SUM, gone, ordered_starts(), &rs[1]);
  MPI_Comm freed = gone;
  MPI_Comm_free(&gone);
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &other);
  MPI_Barrier(other);
  if (me == 0) printf("persistent after free: the new communicator %s the freed one's handle\n",
                      other == freed ? "took" : "did not take");
  for (int start = 0; start < 2; start++) {
    fill(b, n, 80 + start);
    memcpy(bw, b, (size_t)n * sizeof(int));
    fill(s, 3, 90 + start);
    PMPI_Bcast(bw, n, MPI_INT, root, MPI_COMM_WORLD);
    PMPI_Allreduce(s, aw, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Startall(2, rs);
    MPI_Waitall(2, rs, MPI_STATUSES_IGNORE);
    check(!memcmp(b, bw, (size_t)n * sizeof(int)), "persistent bcast after its free", start);
    check(!memcmp(a, aw, sizeof a), "persistent allreduce after its free", start);
  }
  for (int i = 0; i < 2; i++) MPI_Request_free(&rs[i]);
  MPI_Barrier(other);
  MPI_Comm_free(&other);
  free(b), free(bw);
}
#endif

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 6;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* The first collective: a nonblocking barrier that rank 0 starts before it sends to rank 1,
   * and rank 1 after it received: the barrier's start must not wait for rank 1. */
  {
    int token = 0;
    MPI_Request b;
    if (me == 1) MPI_Recv(&token, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Ibarrier(MPI_COMM_WORLD, &b);
    if (me == 0 && size > 1) MPI_Send(&(int){42}, 1, MPI_INT, 1, 5, MPI_COMM_WORLD);
    MPI_Wait(&b, MPI_STATUS_IGNORE);
    check(me != 1 || token == 42, "ibarrier started before a send its peer waits for", 0);
  }
  for (int round = 0; round < rounds; round++)
    round_on(MPI_COMM_WORLD, round, round % 4 == 3 ? 20000 : 300);

  /* A new communicator: its first call is nonblocking, served (with the layer and
   * CIRCULANT_MPI_EAGER, circulant starts on it in MPI_Comm_dup). */
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  int x = me, y = -1;
  MPI_Request q;
  MPI_Ibcast(&x, 1, MPI_INT, 0, dup, &q);
  MPI_Wait(&q, MPI_STATUS_IGNORE);
  check(x == 0, "ibcast on a new communicator", 0);
  MPI_Barrier(dup);
  for (int round = 0; round < 3; round++) round_on(dup, 100 + round, 300);

  MPI_Comm split;
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, -me, &split);
  MPI_Barrier(split);
  round_on(split, 200, 300);
  MPI_Comm_free(&split);

  two_communicators(30000);
  inside_point_to_point(300000);
  freed_datatype(5000);

  /* A served call cannot be cancelled (with CIRCULANT_MPI=on, where the layer serves it). */
  const char *mode = getenv("CIRCULANT_MPI");
  if (mode && !strcmp(mode, "on")) {
    int v = me;
    MPI_Request c;
    MPI_Ibcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD, &c);
    int rc = MPI_Cancel(&c), cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    check(cls == MPI_ERR_REQUEST && c != MPI_REQUEST_NULL, "MPI_Cancel refused", 0);
    MPI_Wait(&c, MPI_STATUS_IGNORE);
    check(v == 0, "ibcast after a refused cancel", 0);
  }

  /* Freed while a call on it is outstanding. MPICH 4.0.2 itself fails this on a communicator
   * of one rank, Open MPI 4.1 (its libnbc) on any: only where the MPI's own call works. */
#if defined(OPEN_MPI)
  int freed_pending = 0;
#else
  int freed_pending = size > 1;
#endif
  if (freed_pending) {
    MPI_Comm other;
    MPI_Comm_dup(MPI_COMM_WORLD, &other);
    MPI_Barrier(other);
    MPI_Iallreduce(&me, &y, 1, MPI_INT, MPI_MAX, other, &q);
    MPI_Comm_free(&other);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    check(y == size - 1, "iallreduce on a communicator freed before its wait", 0);
  }

#if MPI_VERSION >= 4
  large_count_forms(3000);
  { /* A persistent reduction with a user's operation: MPI's own request. */
    MPI_Op mine;
    MPI_Op_create(user_sum, 1, &mine);
    int in[4] = {me, 1, 2 * me, 3}, out[4] = {0}, want[4];
    PMPI_Allreduce(in, want, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Request q;
    MPI_Allreduce_init(in, out, 4, MPI_INT, mine, MPI_COMM_WORLD, ordered_starts(), &q);
    MPI_Op_free(&mine);
    MPI_Start(&q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    check(!memcmp(out, want, sizeof out), "persistent allreduce of a user's operation", 0);
    MPI_Request_free(&q);
  }
  persistent_on(MPI_COMM_WORLD, 300);
  persistent_on(dup, 5000);
  persistent_after_free(3000);
#endif
  MPI_Comm_free(&dup);

  printf("rank %d: %d passed, %d failed\n", me, passed, failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
