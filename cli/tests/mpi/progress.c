/* A call of the layer is outstanding while the last rank is in a collective that MPI runs (an
 * allreduce with a user's operation, which the layer passes), and the other ranks wait for the
 * call before they join that collective. The argument says who waits when:
 *   first  every rank completes the call before the allreduce (what the README advises): the
 *          program completes;
 *   after  the last rank joins the allreduce first: nothing moves its part of the call, so the
 *          others' call fails at its deadline (CIRCULANT_TIMEOUT) and the job ends with
 *          circulant's message (MPI_ERRORS_ARE_FATAL).
 * Each rank prints "rank R: completed" once both calls are done and right. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, p;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  if (argc != 2 || (strcmp(argv[1], "first") && strcmp(argv[1], "after")) || p < 3) {
    if (me == 0) fprintf(stderr, "usage: progress first|after (at least 3 ranks)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int after = !strcmp(argv[1], "after"), last = p - 1;
  const int n = 300000;
  int *x = calloc(n, sizeof *x);
  for (int i = 0; i < n; i++) x[i] = me == 0 ? 3 * i + 1 : -1;
  MPI_Op sum;
  MPI_Op_create(user_sum, 1, &sum);
  MPI_Request r;
  MPI_Ibcast(x, n, MPI_INT, 0, MPI_COMM_WORLD, &r);
  int mine = me + 1, all = 0;
  if (after && me == last) {
    MPI_Allreduce(&mine, &all, 1, MPI_INT, sum, MPI_COMM_WORLD);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  } else {
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Allreduce(&mine, &all, 1, MPI_INT, sum, MPI_COMM_WORLD);
  }
  int ok = all == p * (p + 1) / 2;
  for (int i = 0; i < n; i++) ok = ok && x[i] == 3 * i + 1;
  if (ok) printf("rank %d: completed\n", me);
  fflush(stdout);
  MPI_Op_free(&sum);
  free(x);
  MPI_Finalize();
  return ok ? 0 : 1;
}
