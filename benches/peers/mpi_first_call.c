/*
 * What a program pays for circulant on a new communicator under the MPI layer: MPI_COMM_WORLD
 * duplicated DUPS times (default 10), on each two broadcasts of 4 bytes after a barrier; rank
 * 0 prints the mean time of the first broadcast (which, with the layer preloaded in `on`
 * mode, makes the communicator's circulant communicator) and of the second.
 *
 *   mpicc.openmpi -O2 -o target/mpi_first_call_openmpi benches/peers/mpi_first_call.c
 *   mpiexec.openmpi -n 4 -x LD_PRELOAD=target/mpi/libcirculant-mpi-openmpi.so \
 *     -x CIRCULANT_MPI=on target/mpi_first_call_openmpi [DUPS]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int dups = argc > 1 ? atoi(argv[1]) : 10, rank;
    if (dups < 1) dups = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double first = 0, second = 0;
    for (int i = 0; i < dups; i++) {
        MPI_Comm comm;
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        int value = rank == 0 ? i : -1;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Bcast(&value, 1, MPI_INT, 0, comm);
        double t1 = MPI_Wtime();
        MPI_Bcast(&value, 1, MPI_INT, 0, comm);
        double t2 = MPI_Wtime();
        if (value != i) {
            fprintf(stderr, "mpi_first_call: rank %d got %d, not %d\n", rank, value, i);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        first += t1 - t0;
        second += t2 - t1;
        MPI_Comm_free(&comm);
    }
    if (rank == 0)
        printf("first call %.2f ms, second %.1f us (mean of %d communicators)\n",
               first / dups * 1e3, second / dups * 1e6, dups);
    MPI_Finalize();
    return 0;
}
