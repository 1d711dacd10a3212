/* circulant-mpi: the requests of the nonblocking and persistent collectives the layer serves.
 *
 * A nonblocking call circulant serves gives the program a generalized request
 * (MPI_Grequest_start): a handle the MPI knows, which only the layer completes. The MPI calls
 * that take requests (wait and test with their all, any and some forms, MPI_Request_free,
 * MPI_Request_get_status, MPI_Start, MPI_Startall, MPI_Cancel) are defined here: a request
 * of the layer is progressed with circulant_test, the others go to the PMPI_ function. While a
 * call waits for a request of the layer it keeps the MPI progressing too (MPI_Iprobe), as a
 * peer may need this rank's MPI messages before it joins the collective. While some call of
 * the layer is outstanding, a wait for the MPI's own requests alone (and point_to_point.c's
 * blocking calls) keeps the layer's calls moving too: a peer may need them before it sends
 * what the program waits for.
 *
 * circulant runs one call at a time on a communicator, and MPI lets a program start several:
 * the nonblocking calls of a communicator wait in the order they were made, the first one in
 * flight, and each starts as the one before completes (every rank starts them in the same
 * order, as MPI has every rank make them). A blocking call completes them first.
 *
 * A persistent collective (MPI-4's MPI_Bcast_init, ...) of the layer keeps its arguments and
 * the MPI's own persistent request of the call (which keeps the communicator for it); each
 * start issues the nonblocking call, which circulant serves or, where it passes, that request
 * runs.
 */
#define _GNU_SOURCE
#include "layer.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind { NONBLOCKING, PERSISTENT };

struct lreq {
  MPI_Request handle; /* the program's request */
  enum kind kind;
  /* NONBLOCKING: the call, circulant's part of it and its request once started, what it does
   * at completion, and once complete its result; the next call of its communicator. */
  struct call c;
  struct ccall x;
  circulant_request *cr;
  struct later l;
  int started, complete, result;
  char *message; /* the error's message, raised when the program learns of it */
  int raised;
  int told; /* a gatherv's or scatterv's counts are told (struct later): the call itself runs */
  struct lreq *queue_next;
  /* PERSISTENT: the arguments, the variant, the MPI's own persistent request of the call,
   * and the started call (MPI_REQUEST_NULL when inactive; `native` where it passed). */
  struct args a;
  int variant;
  MPI_Request native, inner;
  struct lreq *prev, *next;
};

static struct lreq *g_requests; /* every request of the layer */
static int g_outstanding;       /* its nonblocking calls not complete yet */

static struct lreq *find(MPI_Request r) {
  if (!g_requests || r == MPI_REQUEST_NULL) return NULL;
  for (struct lreq *q = g_requests; q; q = q->next)
    if (q->handle == r) return q;
  return NULL;
}

static int any_of_ours(int n, const MPI_Request *rs) {
  if (!g_requests) return 0;
  for (int i = 0; i < n; i++)
    if (find(rs[i])) return 1;
  return 0;
}

/* A completed collective's status: no source, no tag, no elements. */
static void empty_status(MPI_Status *st, int error) {
  if (st == MPI_STATUS_IGNORE) return;
  st->MPI_SOURCE = MPI_ANY_SOURCE;
  st->MPI_TAG = MPI_ANY_TAG;
  st->MPI_ERROR = error;
  PMPI_Status_set_elements(st, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(st, 0);
}

static int query_fn(void *extra, MPI_Status *st) {
  (void)extra;
  empty_status(st, MPI_SUCCESS);
  return MPI_SUCCESS;
}
static int free_fn(void *extra) {
  (void)extra;
  return MPI_SUCCESS;
}
static int cancel_fn(void *extra, int complete) {
  (void)extra;
  (void)complete;
  return MPI_SUCCESS;
}

/* Between tests while waiting: the layer's calls on every communicator progress, the core
 * goes to the other ranks, and every 32nd time the MPI progresses (a peer may wait for this rank's messages; a probe each time cost Open MPI 4 µs
 * a turn, twice a served call's time). */
static void step_all(void);

void keep_progressing(int yield) {
  static unsigned turns;
  step_all();
  if (++turns % 32 == 0) {
    int flag;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
  }
  if (yield) sched_yield();
}

static struct lreq *made(enum kind kind) {
  struct lreq *q = calloc(1, sizeof *q);
  if (!q || PMPI_Grequest_start(query_fn, free_fn, cancel_fn, q, &q->handle) != MPI_SUCCESS) {
    fprintf(stderr, "circulant-mpi: cannot make a request\n");
    layer_abort(MPI_COMM_WORLD, 1);
  }
  q->kind = kind;
  q->native = q->inner = MPI_REQUEST_NULL;
  q->next = g_requests;
  if (g_requests) g_requests->prev = q;
  g_requests = q;
  return q;
}

static void drop(struct lreq *q) {
  if (q->prev)
    q->prev->next = q->next;
  else
    g_requests = q->next;
  if (q->next) q->next->prev = q->prev;
  MPI_Request h = q->handle;
  PMPI_Grequest_complete(h);
  PMPI_Request_free(&h);
  if (q->kind == NONBLOCKING) layer_release_mirror(q->c.m);
  if (q->native != MPI_REQUEST_NULL) PMPI_Request_free(&q->native);
  for (int i = 0; i < q->a.ntypes; i++) PMPI_Type_free(&q->a.types[i]);
  free(q->message);
  free(q);
}

static void step(struct mirror *m);

int request_started(struct call *c, const struct ccall *x, struct later *l) {
  struct lreq *q = made(NONBLOCKING);
  struct mirror *m = c->m;
  q->c = *c;
  q->x = *x;
  q->l = *l;
  g_outstanding++;
  m->requests++;
  if (m->last)
    m->last->queue_next = q;
  else
    m->first = q;
  m->last = q;
  *c->req = q->handle;
  step(m);
  return MPI_SUCCESS;
}

int request_persistent(const struct args *a, int variant, MPI_Request native, MPI_Request *req) {
  struct lreq *q = made(PERSISTENT);
  q->a = *a;
  q->variant = variant;
  q->native = native;
  *req = q->handle;
  return MPI_SUCCESS;
}

/* Completes `q` with circulant's status `rc`: the call's work after circulant is done. An
 * error goes to the error handler only when the program learns of it (`raise_once`), so no
 * program code runs while the layer progresses its calls. */
static void complete(struct lreq *q, int rc) {
  q->complete = 1;
  g_outstanding--;
  if (q->cr) circulant_request_free(q->cr);
  q->cr = NULL;
  MPI_Comm comm = q->c.m->orphaned ? MPI_COMM_WORLD : q->c.comm;
  int result = MPI_SUCCESS;
  if (rc != CIRCULANT_SUCCESS) {
    char message[1200];
    result = layer_error(&q->c, rc, message, sizeof message);
    q->message = strdup(message);
  }
  q->result = layer_finish(&q->l, result, comm);
  if (rc == CIRCULANT_SUCCESS) count_call(q->c.op, q->c.variant, WHY_SERVED);
}

/* Completes `q`, a nonblocking gatherv or scatterv whose root told that it does not serve it
 * (`why`: its counts are not valid, or too large to pack): an error on every rank. */
static void refuse(struct lreq *q, enum reason why) {
  q->complete = 1;
  g_outstanding--;
  char message[200];
  snprintf(message, sizeof message, "circulant-mpi: rank %d: %s: the root's counts %s",
           q->c.m->rank, op_names[q->c.op],
           why == WHY_SIZE ? "are too large to pack with this MPI" : "or displacements are not valid");
  q->message = strdup(message);
  q->result = layer_finish(&q->l, MPI_ERR_COUNT, q->c.m->orphaned ? MPI_COMM_WORLD : q->c.comm);
}

static void raise_once(struct lreq *q) {
  if (q->result == MPI_SUCCESS || q->raised) return;
  q->raised = 1;
  layer_raise(&q->c, q->result, q->message ? q->message : "circulant-mpi: a nonblocking call failed");
}

/* Progresses the nonblocking calls of `m` without blocking: the one in flight is tested, and
 * as each completes the next starts. A gatherv or scatterv runs the broadcast of its root's
 * counts first, then itself, before the next. (Each request holds `m` until it is freed.) */
static void step(struct mirror *m) {
  while (m->first) {
    struct lreq *q = m->first;
    int telling = q->l.told && !q->told;
    if (!q->started) {
      q->started = 1;
      struct ccall counts = {.op = OP_BCAST, .recv = q->l.told,
                             .bytes = ((size_t)m->size + 1) * sizeof *q->l.told, .root = q->x.root};
      int rc = ccall_run(m->cc, telling ? &counts : &q->x, &q->cr);
      if (rc != CIRCULANT_SUCCESS) complete(q, rc);
    }
    if (!q->complete) {
      int done = 0, rc = circulant_test(q->cr, &done);
      if (rc == CIRCULANT_SUCCESS && !done) return;
      if (rc == CIRCULANT_SUCCESS && telling) {
        circulant_request_free(q->cr);
        q->cr = NULL;
        q->told = 1;
        enum reason why = layer_told(&q->l, m->size);
        if (why == WHY_SERVED) {
          q->started = 0; /* the call itself starts now */
          continue;
        }
        refuse(q, why);
      } else {
        complete(q, rc);
      }
    }
    m->first = q->queue_next;
    if (!m->first) m->last = NULL;
  }
}

/* Progresses the nonblocking calls of every communicator once: a rank that waits for one call
 * keeps its others going, which its peers may be waiting for. */
static void step_all(void) {
  static unsigned turn;
  turn++;
  for (struct lreq *q = g_requests; q; q = q->next)
    if (q->kind == NONBLOCKING && !q->complete && q->c.m->stepped != turn) {
      q->c.m->stepped = turn;
      step(q->c.m);
    }
}

int requests_pending(void) { return g_outstanding > 0; }

/* After a test of the MPI's own requests that found nothing: a program polling them moves
 * the layer's calls too. */
static void tested(int flag) {
  if (!flag && g_outstanding) keep_progressing(0);
}

int requests_run(struct mirror *m, const struct ccall *x) {
  circulant_request *req = NULL;
  int rc = ccall_run(m->cc, x, &req);
  for (int done = 0; rc == CIRCULANT_SUCCESS && !done;) {
    rc = circulant_test(req, &done);
    if (rc == CIRCULANT_SUCCESS && !done) keep_progressing(1);
  }
  if (req) circulant_request_free(req);
  return rc;
}

static void progress(struct lreq *q) {
  if (!q->complete) step(q->c.m);
}

void requests_drain(struct mirror *m) {
  while (m->first) {
    step(m);
    if (m->first) keep_progressing(1);
  }
}

/* Tests `*r` (any request). `consume`: as MPI_Test (a completed nonblocking request is freed,
 * a persistent one made inactive); else as MPI_Request_get_status. */
static int test_one(MPI_Request *r, int *flag, MPI_Status *st, int consume) {
  struct lreq *q = find(*r);
  if (!q) return consume ? PMPI_Test(r, flag, st) : PMPI_Request_get_status(*r, flag, st);
  if (q->kind == NONBLOCKING) {
    progress(q);
    *flag = q->complete;
    if (!q->complete) return MPI_SUCCESS;
    int rc = q->result;
    empty_status(st, rc);
    if (consume) {
      raise_once(q);
      drop(q);
      *r = MPI_REQUEST_NULL;
    }
    return rc;
  }
  if (q->inner == MPI_REQUEST_NULL) { /* inactive */
    *flag = 1;
    empty_status(st, MPI_SUCCESS);
    return MPI_SUCCESS;
  }
  int rc = test_one(&q->inner, flag, st, consume);
  if (*flag && consume) q->inner = MPI_REQUEST_NULL;
  return rc;
}

/* Whether `r` is a request of the layer that is not complete yet or is an active
 * persistent one (one that wait, any and some forms must still wait for). */
static int active_of_ours(MPI_Request r) {
  struct lreq *q = find(r);
  return q && (q->kind == NONBLOCKING || q->inner != MPI_REQUEST_NULL);
}

int wait_moving(MPI_Request *r, MPI_Status *st) {
  for (;;) {
    if (!requests_pending()) return PMPI_Wait(r, st);
    int flag = 0, rc = PMPI_Test(r, &flag, st);
    if (flag || rc != MPI_SUCCESS) return rc;
    keep_progressing(1);
  }
}

int MPI_Wait(MPI_Request *r, MPI_Status *st) {
  if (!find(*r)) return wait_moving(r, st);
  for (;;) {
    int flag = 0, rc = test_one(r, &flag, st, 1);
    if (flag || rc != MPI_SUCCESS) return rc;
    keep_progressing(1);
  }
}

int MPI_Test(MPI_Request *r, int *flag, MPI_Status *st) {
  if (!find(*r)) {
    int rc = PMPI_Test(r, flag, st);
    tested(rc != MPI_SUCCESS || *flag);
    return rc;
  }
  int rc = test_one(r, flag, st, 1);
  if (!*flag) keep_progressing(0);
  return rc;
}

int MPI_Request_get_status(MPI_Request r, int *flag, MPI_Status *st) {
  if (!find(r)) {
    int rc = PMPI_Request_get_status(r, flag, st);
    tested(rc != MPI_SUCCESS || *flag);
    return rc;
  }
  int rc = test_one(&r, flag, st, 0);
  if (!*flag) keep_progressing(0);
  return rc;
}

static MPI_Status *status_at(MPI_Status *sts, int i) {
  return sts == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &sts[i];
}

int MPI_Waitall(int n, MPI_Request rs[], MPI_Status sts[]) {
  if (!any_of_ours(n, rs) && !requests_pending()) return PMPI_Waitall(n, rs, sts);
  char *done = calloc(n > 0 ? (size_t)n : 1, 1);
  if (!done) return MPI_ERR_NO_MEM;
  int left = n, first_error = MPI_SUCCESS;
  while (left) {
    for (int i = 0; i < n; i++) {
      if (done[i]) continue;
      int flag = 0, rc = test_one(&rs[i], &flag, status_at(sts, i), 1);
      if (!flag && rc == MPI_SUCCESS) continue;
      done[i] = 1;
      left--;
      if (sts != MPI_STATUSES_IGNORE) sts[i].MPI_ERROR = rc;
      if (rc != MPI_SUCCESS && first_error == MPI_SUCCESS) first_error = rc;
    }
    if (left) keep_progressing(1);
  }
  free(done);
  if (first_error == MPI_SUCCESS) return MPI_SUCCESS;
  return sts == MPI_STATUSES_IGNORE ? first_error : MPI_ERR_IN_STATUS;
}

int MPI_Testall(int n, MPI_Request rs[], int *flag, MPI_Status sts[]) {
  if (!any_of_ours(n, rs)) {
    int rc = PMPI_Testall(n, rs, flag, sts);
    tested(rc != MPI_SUCCESS || *flag);
    return rc;
  }
  /* Nothing is freed unless everything is complete. */
  for (int i = 0; i < n; i++) {
    int f = 0;
    test_one(&rs[i], &f, MPI_STATUS_IGNORE, 0);
    if (!f) {
      *flag = 0;
      keep_progressing(0);
      return MPI_SUCCESS;
    }
  }
  *flag = 1;
  return MPI_Waitall(n, rs, sts);
}

/* The MPI's own requests of `rs`, with those of the layer as MPI_REQUEST_NULL. */
static MPI_Request *theirs(int n, const MPI_Request *rs) {
  MPI_Request *copy = malloc(sizeof *copy * (size_t)(n ? n : 1));
  if (!copy) return NULL;
  for (int i = 0; i < n; i++) copy[i] = find(rs[i]) ? MPI_REQUEST_NULL : rs[i];
  return copy;
}

static int testany(int n, MPI_Request rs[], int *idx, int *flag, MPI_Status *st) {
  int ours = 0;
  for (int i = 0; i < n; i++) {
    if (!active_of_ours(rs[i])) continue;
    ours++;
    int f = 0, rc = test_one(&rs[i], &f, st, 1);
    if (f) {
      *idx = i;
      *flag = 1;
      return rc;
    }
  }
  MPI_Request *copy = theirs(n, rs);
  if (!copy) return MPI_ERR_NO_MEM;
  int rc = PMPI_Testany(n, copy, idx, flag, st);
  if (*flag && *idx != MPI_UNDEFINED)
    rs[*idx] = copy[*idx];
  else if (*flag && ours)
    *flag = 0; /* none of the MPI's is active, but some of the layer's are */
  free(copy);
  return rc;
}

int MPI_Testany(int n, MPI_Request rs[], int *idx, int *flag, MPI_Status *st) {
  if (!any_of_ours(n, rs)) {
    int rc = PMPI_Testany(n, rs, idx, flag, st);
    tested(rc != MPI_SUCCESS || *flag);
    return rc;
  }
  return testany(n, rs, idx, flag, st);
}

int MPI_Waitany(int n, MPI_Request rs[], int *idx, MPI_Status *st) {
  if (!any_of_ours(n, rs) && !requests_pending()) return PMPI_Waitany(n, rs, idx, st);
  for (;;) {
    int flag = 0, rc = testany(n, rs, idx, &flag, st);
    if (flag || rc != MPI_SUCCESS) return rc;
    keep_progressing(1);
  }
}

static int testsome(int n, MPI_Request rs[], int *outcount, int indices[], MPI_Status sts[]) {
  int out = 0, ours = 0, error = 0;
  for (int i = 0; i < n; i++) {
    if (!active_of_ours(rs[i])) continue;
    ours++;
    int f = 0, rc = test_one(&rs[i], &f, status_at(sts, out), 1);
    if (!f) continue;
    if (rc != MPI_SUCCESS) error = rc;
    indices[out++] = i;
  }
  MPI_Request *copy = theirs(n, rs);
  if (!copy) return MPI_ERR_NO_MEM;
  int more = 0;
  int rc = PMPI_Testsome(n, copy, &more, indices + out,
                         sts == MPI_STATUSES_IGNORE ? MPI_STATUSES_IGNORE : sts + out);
  int none_active = more == MPI_UNDEFINED && !ours; /* neither the MPI's nor the layer's */
  if (error && rc == MPI_SUCCESS && sts != MPI_STATUSES_IGNORE)
    for (int k = 0; k < (more == MPI_UNDEFINED ? 0 : more); k++) sts[out + k].MPI_ERROR = MPI_SUCCESS;
  if (more == MPI_UNDEFINED) more = 0;
  for (int k = 0; k < more; k++) rs[indices[out + k]] = copy[indices[out + k]];
  free(copy);
  *outcount = none_active ? MPI_UNDEFINED : out + more;
  if (error) return sts == MPI_STATUSES_IGNORE ? error : MPI_ERR_IN_STATUS;
  return rc;
}

int MPI_Testsome(int n, MPI_Request rs[], int *outcount, int indices[], MPI_Status sts[]) {
  if (!any_of_ours(n, rs)) {
    int rc = PMPI_Testsome(n, rs, outcount, indices, sts);
    tested(rc != MPI_SUCCESS || *outcount != 0);
    return rc;
  }
  return testsome(n, rs, outcount, indices, sts);
}

int MPI_Waitsome(int n, MPI_Request rs[], int *outcount, int indices[], MPI_Status sts[]) {
  if (!any_of_ours(n, rs) && !requests_pending()) return PMPI_Waitsome(n, rs, outcount, indices, sts);
  for (;;) {
    int rc = testsome(n, rs, outcount, indices, sts);
    if (*outcount != 0 || rc != MPI_SUCCESS) return rc;
    keep_progressing(1);
  }
}

int MPI_Request_free(MPI_Request *r) {
  struct lreq *q = find(*r);
  if (!q) return PMPI_Request_free(r);
  /* A started call still runs on the peers: it is completed before it is let go. */
  int rc = MPI_SUCCESS;
  if (q->kind == PERSISTENT && q->inner != MPI_REQUEST_NULL)
    rc = MPI_Wait(&q->inner, MPI_STATUS_IGNORE);
  if (q->kind == NONBLOCKING) {
    while (!q->complete) {
      progress(q);
      if (!q->complete) keep_progressing(1);
    }
  }
  drop(q);
  *r = MPI_REQUEST_NULL;
  return rc;
}

static int start_one(MPI_Request *r) {
  struct lreq *q = find(*r);
  if (!q) return PMPI_Start(r);
  if (q->kind != PERSISTENT || q->inner != MPI_REQUEST_NULL) return MPI_ERR_REQUEST;
  return layer_issue(&q->a, q->variant, q->native, &q->inner);
}

int MPI_Start(MPI_Request *r) { return start_one(r); }

int MPI_Startall(int n, MPI_Request rs[]) {
  if (!any_of_ours(n, rs)) return PMPI_Startall(n, rs);
  for (int i = 0; i < n; i++) {
    int rc = start_one(&rs[i]);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

int MPI_Cancel(MPI_Request *r) {
  if (!find(*r)) return PMPI_Cancel(r);
  return MPI_ERR_REQUEST; /* a collective cannot be cancelled */
}

void requests_finalize(void) {
  /* The persistent ones first: each completes the call it started, which may be one of ours. */
  for (int kind = PERSISTENT; kind >= NONBLOCKING; kind--)
    for (struct lreq *q = g_requests, *next; q; q = next) {
      next = q->next;
      if ((int)q->kind != kind) continue;
      MPI_Request r = q->handle;
      MPI_Request_free(&r);
      next = g_requests; /* freeing may have dropped others: start over */
    }
}
