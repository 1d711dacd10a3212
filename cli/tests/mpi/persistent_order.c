/* MPI-4's persistent collectives match by the order of their inits, not of their starts: a
 * persistent bcast (root 0) and barrier made in that order on every rank, started bcast first
 * on even ranks and barrier first on odd ones, 10 times; then the same two made with an info that
 * asserts mpi_assert_strict_persistent_collective_ordering, started in the same order on every
 * rank. Every rank checks the broadcast values. Prints "rank R: N
 * passed, M failed"; exits non-zero on a failure.
 *
 *   persistent_order */
#include <mpi.h>
#include <stdio.h>

static int passed, failures, me;

/* Starts `bcast` and `barrier` 10 times, bcast first where `bcast_first`, and checks the value
 * rank 0 broadcast. */
static void rounds(MPI_Request bcast, MPI_Request barrier, int *value, int bcast_first,
                   const char *what) {
  for (int round = 0; round < 10; round++) {
    *value = me == 0 ? 1000 + round : -1;
    MPI_Request both[2] = {bcast_first ? bcast : barrier, bcast_first ? barrier : bcast};
    MPI_Start(&both[0]);
    MPI_Start(&both[1]);
    MPI_Status statuses[2];
    MPI_Waitall(2, both, statuses);
    if (*value == 1000 + round) {
      passed++;
    } else {
      failures++;
      fprintf(stderr, "rank %d: %s round %d: %d\n", me, what, round, *value);
    }
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  int value = 0;
  MPI_Request bcast, barrier;
  MPI_Bcast_init(&value, 1, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &bcast);
  MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &barrier);
  rounds(bcast, barrier, &value, me % 2 == 0, "in opposite orders");
  MPI_Request_free(&bcast);
  MPI_Request_free(&barrier);

  MPI_Info ordered;
  MPI_Info_create(&ordered);
  MPI_Info_set(ordered, "mpi_assert_strict_persistent_collective_ordering", "true");
  MPI_Bcast_init(&value, 1, MPI_INT, 0, MPI_COMM_WORLD, ordered, &bcast);
  MPI_Barrier_init(MPI_COMM_WORLD, ordered, &barrier);
  rounds(bcast, barrier, &value, 1, "in one order");
  MPI_Request_free(&bcast);
  MPI_Request_free(&barrier);
  MPI_Info_free(&ordered);
  printf("rank %d: %d passed, %d failed\n", me, passed, failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
