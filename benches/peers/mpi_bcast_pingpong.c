/*
 * Peer of examples/bcast_pingpong.rs: one-way latency of a small MPI_Bcast between two ranks,
 * as a ping-pong (root 0, then root 1, each broadcast starting as soon as the previous one
 * arrived, with warm caches and no common start). Prints the mean time of one broadcast on
 * rank 0.
 *
 *   mpicc.openmpi -O2 -o target/mpi_bcast_pingpong benches/peers/mpi_bcast_pingpong.c
 *   mpirun -n 2 --bind-to core --mca btl vader,self target/mpi_bcast_pingpong [ROUNDS] [BYTES]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rounds = argc > 1 ? atoi(argv[1]) : 200000, bytes = argc > 2 ? atoi(argv[2]) : 8, me, p;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  if (p < 2 || rounds < 1 || bytes < 0 || bytes > 4096) {
    if (me == 0) fprintf(stderr, "usage: two ranks or more, ROUNDS >= 1, 0 <= BYTES <= 4096\n");
    MPI_Finalize();
    return 2;
  }
  static char buf[4096];
  for (int i = 0; i < 1000; i++) {
    MPI_Bcast(buf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    MPI_Bcast(buf, bytes, MPI_BYTE, 1, MPI_COMM_WORLD);
  }
  double t = MPI_Wtime();
  for (int i = 0; i < rounds; i++) {
    MPI_Bcast(buf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    MPI_Bcast(buf, bytes, MPI_BYTE, 1, MPI_COMM_WORLD);
  }
  t = MPI_Wtime() - t;
  if (me == 0)
    printf("MPI_Bcast of %d B, p = %d: %.3f us per broadcast (%d round trips)\n", bytes, p,
           t / (2.0 * rounds) * 1e6, rounds);
  MPI_Finalize();
  return 0;
}
