/* A job that aborts: every rank writes its pid to DIR/rank-R.pid, runs a few collectives
 * (which the layer serves with CIRCULANT_MPI=on) on MPI_COMM_WORLD and on a duplicate, then
 * rank 1 calls MPI_Abort (or, with `kill`, is killed by SIGKILL, as `kill -9` would) while the
 * others wait in a receive from it that never comes.
 *
 *   abort DIR [kill] */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, p;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  if (argc < 2) MPI_Abort(MPI_COMM_WORLD, 2);
  char path[4096];
  snprintf(path, sizeof path, "%s/rank-%d.pid", argv[1], me);
  FILE *f = fopen(path, "w");
  if (!f) MPI_Abort(MPI_COMM_WORLD, 2);
  fprintf(f, "%ld\n", (long)getpid());
  fclose(f);
  int v = me, sum = 0;
  char bytes[4096] = {0};
  MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Bcast(bytes, (int)sizeof bytes, MPI_CHAR, 0, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Bcast(bytes, (int)sizeof bytes, MPI_CHAR, 0, dup);
  if (me == 1 % p) {
    if (argc > 2 && !strcmp(argv[2], "kill")) raise(SIGKILL);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  MPI_Recv(&v, 1, MPI_INT, 1 % p, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Finalize();
  return 0;
}
