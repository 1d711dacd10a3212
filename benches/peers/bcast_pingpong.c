/*
 * One-way latency of a small MPI_Bcast between two ranks, as examples/bcast_pingpong.rs
 * measures circulant's: ranks 0 and 1 broadcast in turn (root 0, then root 1), warm caches,
 * no common start; prints the mean time of one broadcast on rank 0.
 *
 *   mpicc.openmpi -O2 -o target/bcast_pingpong_openmpi benches/peers/bcast_pingpong.c
 *   mpiexec.openmpi -n 2 --bind-to core target/bcast_pingpong_openmpi [ROUNDS] [BYTES]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long rounds = argc > 1 ? atol(argv[1]) : 10000;
    int bytes = argc > 2 ? atoi(argv[2]) : 8;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char *buf = calloc(bytes > 0 ? bytes : 1, 1);
    long warm = rounds < 1000 ? rounds : 1000;
    for (long i = 0; i < warm; i++) {
        MPI_Bcast(buf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        MPI_Bcast(buf, bytes, MPI_BYTE, 1, MPI_COMM_WORLD);
    }
    double t0 = MPI_Wtime();
    for (long i = 0; i < rounds; i++) {
        MPI_Bcast(buf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        MPI_Bcast(buf, bytes, MPI_BYTE, 1, MPI_COMM_WORLD);
    }
    double each = (MPI_Wtime() - t0) / (2.0 * (double)(rounds > 0 ? rounds : 1));
    if (rank == 0)
        printf("openmpi bcast of %d B, p = %d: %.3f us per broadcast (%ld round trips)\n", bytes,
               size, each * 1e6, rounds);
    free(buf);
    MPI_Finalize();
    return 0;
}
