! A Fortran program (`use mpi`) whose collectives the layer serves where the MPI's Fortran
! bindings call the C functions (MPICH): broadcast, allreduce, allgather, and a nonblocking
! broadcast and allreduce completed together by MPI_Waitall, checked.
! Prints "rank R: N passed, M failed".
program collectives
  use mpi
  implicit none
  integer :: ierr, rank, nprocs, i, passed, failed
  double precision :: x(1000), total(1000)
  integer :: mine(3), reqs(2)
  double precision :: y(500), ysum(500)
  integer, allocatable :: gathered(:)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  passed = 0
  failed = 0
  do i = 1, 1000
    x(i) = dble(mod(i, 17)) + rank
  end do
  call MPI_Allreduce(x, total, 1000, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call tally(all_equal(total, [(nprocs * dble(mod(i, 17)) + nprocs * (nprocs - 1) / 2, i = 1, 1000)]))
  if (rank == 0) x = 42.0d0
  call MPI_Bcast(x, 1000, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  call tally(all(x == 42.0d0) .and. ierr == MPI_SUCCESS)
  allocate(gathered(3 * nprocs))
  mine = [rank, 2 * rank, 3 * rank]
  call MPI_Allgather(mine, 3, MPI_INTEGER, gathered, 3, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call tally(all(gathered(1::3) == [(i, i = 0, nprocs - 1)]) .and. all(gathered(3::3) == [(3 * i, i = 0, nprocs - 1)]))
  x = 0.0d0
  if (rank == nprocs - 1) x = 7.0d0
  y = dble(rank + 1)
  call MPI_Ibcast(x, 1000, MPI_DOUBLE_PRECISION, nprocs - 1, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Iallreduce(y, ysum, 500, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
  call tally(all(x == 7.0d0) .and. all(ysum == dble(nprocs * (nprocs + 1) / 2)) .and. &
             all(reqs == MPI_REQUEST_NULL) .and. ierr == MPI_SUCCESS)
  print '(a, i0, a, i0, a, i0, a)', 'rank ', rank, ': ', passed, ' passed, ', failed, ' failed'
  call MPI_Finalize(ierr)
contains
  subroutine tally(ok)
    logical, intent(in) :: ok
    if (ok) then
      passed = passed + 1
    else
      failed = failed + 1
    end if
  end subroutine tally
  logical function all_equal(a, b)
    double precision, intent(in) :: a(:), b(:)
    all_equal = all(a == b)
  end function all_equal
end program collectives
