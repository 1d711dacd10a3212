/* The info the test programs give their persistent collectives: it asserts that every rank
 * starts them in the same order (MPI-4's mpi_assert_strict_persistent_collective_ordering),
 * which the layer needs to serve them. Made at the first use, kept until MPI_Finalize. */
#ifndef ORDERED_STARTS_H
#define ORDERED_STARTS_H

#include <mpi.h>

static inline MPI_Info ordered_starts(void) {
  static MPI_Info info = MPI_INFO_NULL;
  if (info == MPI_INFO_NULL) {
    MPI_Info_create(&info);
    MPI_Info_set(info, "mpi_assert_strict_persistent_collective_ordering", "true");
  }
  return info;
}

#endif
