! bcast, allgatherv, allreduce, reduce_scatter_block, reduce_scatter and barrier from Fortran
! through the circulant module, blocking, nonblocking, persistent and in place:
!   gfortran $(pkg-config --cflags circulant) PREFIX/include/circulant.f90 collectives.f90 \
!       $(pkg-config --libs circulant) -o collectives
!   circulant run -n 4 -- ./collectives
! Prints "rank R: N passed, 0 failed" and stops with an error when a check fails.
program collectives
  use, intrinsic :: iso_c_binding
  use circulant
  implicit none
  type(c_ptr) :: comm
  integer(c_int) :: rank, nranks, rc, r
  integer(c_int), target :: data(100), mine(8), expect
  integer(c_int), allocatable, target :: gathered(:)
  integer(c_size_t), allocatable :: counts(:)
  real(c_double), target :: x, total
  type(c_ptr) :: request
  integer(c_int) :: done
  integer(c_int), target :: part, partial
  integer(c_int64_t), allocatable, target :: vector(:), block(:)
  real(c_double), allocatable, target :: reals(:), piece(:)
  integer :: passed = 0, failed = 0, i, at, step

  call check_rc(circulant_init(comm), "circulant_init")
  call check_rc(circulant_rank(comm, rank), "circulant_rank")
  call check_rc(circulant_size(comm, nranks), "circulant_size")

  ! bcast of 100 integers from the last rank
  data = 0
  if (rank == nranks - 1) data = [(i * 3, i = 1, 100)]
  call check_rc(circulant_bcast(comm, c_loc(data), int(size(data) * 4, c_size_t), nranks - 1), &
       "circulant_bcast")
  call check(all(data == [(i * 3, i = 1, 100)]), "bcast")

  ! allgatherv: rank r contributes r + 1 integers of value r
  allocate(counts(nranks))
  counts = [((r + 1) * 4, r = 0, nranks - 1)]
  allocate(gathered(sum(counts) / 4))
  mine = rank
  call check_rc(circulant_allgatherv(comm, c_loc(mine), counts(rank + 1), c_loc(gathered), counts), &
       "circulant_allgatherv")
  at = 0
  do r = 0, nranks - 1
    call check(all(gathered(at + 1:at + r + 1) == r), "allgatherv part")
    at = at + r + 1
  end do

  ! allreduce: sum of doubles, max of integers
  x = 0.5d0 * (rank + 1)
  call check_rc(circulant_allreduce(comm, c_loc(x), c_loc(total), 1_c_size_t, CIRCULANT_FLOAT64, &
       CIRCULANT_SUM), "circulant_allreduce")
  call check(abs(total - 0.25d0 * nranks * (nranks + 1)) < 1d-12, "allreduce sum")
  mine(1) = rank * 10
  call check_rc(circulant_allreduce(comm, c_loc(mine), c_loc(expect), 1_c_size_t, CIRCULANT_INT32, &
       CIRCULANT_MAX), "circulant_allreduce")
  call check(expect == (nranks - 1) * 10, "allreduce max")

  call check_rc(circulant_barrier(comm), "circulant_barrier")

  ! reduce_scatter_block: int64 sums of 3 elements per rank, blocking and in place
  allocate(vector(3 * nranks), block(3))
  vector = [(term(rank, i, 0), i = 0, 3 * nranks - 1)]
  call check_rc(circulant_reduce_scatter_block(comm, c_loc(vector), c_loc(block), 3_c_size_t, &
       CIRCULANT_INT64, CIRCULANT_SUM), "circulant_reduce_scatter_block")
  call check(all(block == [(sum_of(3 * rank + i, 0), i = 0, 2)]), "reduce_scatter_block")
  vector = [(term(rank, i, 1), i = 0, 3 * nranks - 1)]
  call check_rc(circulant_reduce_scatter_block(comm, circulant_in_place(), c_loc(vector), &
       3_c_size_t, CIRCULANT_INT64, CIRCULANT_SUM), "circulant_reduce_scatter_block")
  call check(all(vector(1:3) == [(sum_of(3 * rank + i, 1), i = 0, 2)]), &
       "reduce_scatter_block in place")

  ! reduce_scatter: float64 maxima at the counts of allgatherv above (in elements here),
  ! nonblocking and persistent in place
  counts = counts / 4
  allocate(reals(sum(counts)), piece(counts(rank + 1)))
  at = int(sum(counts(1:rank)))
  reals = [(real(term(rank, i, 2), c_double), i = 0, size(reals) - 1)]
  call check_rc(circulant_ireduce_scatter(comm, c_loc(reals), c_loc(piece), counts, &
       CIRCULANT_FLOAT64, CIRCULANT_MAX, request), "circulant_ireduce_scatter")
  call check_rc(circulant_wait(request), "circulant_wait")
  call check_rc(circulant_request_free(request), "circulant_request_free")
  call check(all(piece == [(max_of(at + i, 2), i = 0, size(piece) - 1)]), "ireduce_scatter")
  call check_rc(circulant_reduce_scatter_init(comm, circulant_in_place(), c_loc(reals), counts, &
       CIRCULANT_FLOAT64, CIRCULANT_MAX, request), "circulant_reduce_scatter_init")
  do step = 3, 4
    reals = [(real(term(rank, i, step), c_double), i = 0, size(reals) - 1)]
    call check_rc(circulant_start(request), "circulant_start")
    call check_rc(circulant_wait(request), "circulant_wait")
    call check(all(reals(1:size(piece)) == [(max_of(at + i, step), i = 0, size(piece) - 1)]), &
         "persistent reduce_scatter in place")
  end do
  call check_rc(circulant_request_free(request), "circulant_request_free")

  ! nonblocking bcast from rank 0, progressed by circulant_test
  data = 0
  if (rank == 0) data = [(i * 7, i = 1, 100)]
  call check_rc(circulant_ibcast(comm, c_loc(data), int(size(data) * 4, c_size_t), 0_c_int, &
       request), "circulant_ibcast")
  done = 0
  do while (done == 0)
    call check_rc(circulant_test(request, done), "circulant_test")
  end do
  call check_rc(circulant_request_free(request), "circulant_request_free")
  call check(all(data == [(i * 7, i = 1, 100)]), "ibcast")

  ! persistent allreduce, started three times on new data
  call check_rc(circulant_allreduce_init(comm, c_loc(part), c_loc(partial), 1_c_size_t, &
       CIRCULANT_INT32, CIRCULANT_SUM, request), "circulant_allreduce_init")
  do step = 1, 3
    part = rank * step
    call check_rc(circulant_start(request), "circulant_start")
    call check_rc(circulant_wait(request), "circulant_wait")
    call check(partial == step * nranks * (nranks - 1) / 2, "persistent allreduce")
  end do
  call check_rc(circulant_request_free(request), "circulant_request_free")

  ! persistent barrier, and a nonblocking one
  call check_rc(circulant_barrier_init(comm, request), "circulant_barrier_init")
  do step = 1, 2
    call check_rc(circulant_start(request), "circulant_start")
    call check_rc(circulant_wait(request), "circulant_wait")
  end do
  call check_rc(circulant_request_free(request), "circulant_request_free")
  call check_rc(circulant_ibarrier(comm, request), "circulant_ibarrier")
  call check_rc(circulant_wait(request), "circulant_wait")
  call check_rc(circulant_request_free(request), "circulant_request_free")

  ! bad input gives a code and a message; the call is given up on every rank, and the
  ! communicator is unusable afterwards
  rc = circulant_allreduce(comm, c_loc(x), c_loc(total), 1_c_size_t, 77_c_int, CIRCULANT_SUM)
  call check(rc == CIRCULANT_ERR_ARGUMENT .and. len(circulant_error_message(comm)) > 0, &
       "unknown dtype refused")
  call check(circulant_barrier(comm) == CIRCULANT_ERR_UNUSABLE, "unusable after a refused call")
  print '("rank ", i0, ": ", i0, " passed, ", i0, " failed")', rank, passed, failed
  call check_rc(circulant_finalize(comm), "circulant_finalize")
  if (failed > 0) error stop 1

contains

  ! Element i (from 0) of rank r's vector in the reduce-scatters at a step.
  integer(c_int64_t) function term(r, i, step)
    integer(c_int), intent(in) :: r
    integer, intent(in) :: i, step
    term = mod(int(r, c_int64_t) * 7919 + int(i, c_int64_t) * 104729 + step * 31, 10007_c_int64_t) &
         - 5000
  end function

  ! The sum and the maximum over all ranks of element i, one rank after the other.
  integer(c_int64_t) function sum_of(i, step)
    integer, intent(in) :: i, step
    integer(c_int) :: r
    sum_of = 0
    do r = 0, nranks - 1
      sum_of = sum_of + term(r, i, step)
    end do
  end function

  real(c_double) function max_of(i, step)
    integer, intent(in) :: i, step
    integer(c_int) :: r
    max_of = real(term(0, i, step), c_double)
    do r = 1, nranks - 1
      max_of = max(max_of, real(term(r, i, step), c_double))
    end do
  end function

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    if (ok) then
      passed = passed + 1
    else
      failed = failed + 1
      print '("rank ", i0, ": check failed: ", a)', rank, what
    end if
  end subroutine

  subroutine check_rc(code, what)
    integer(c_int), intent(in) :: code
    character(*), intent(in) :: what
    if (code /= CIRCULANT_SUCCESS) then
      print '(a, ": ", a)', what, circulant_error_message(comm)
      error stop 1
    end if
  end subroutine
end program collectives
