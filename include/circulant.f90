! circulant: collective communication over libfabric, the Fortran 2008 module.
!
! Interfaces (iso_c_binding) to the C API of include/circulant.h for init, finalize, rank,
! size, barrier, bcast, allgatherv and allreduce, in their blocking, nonblocking (i*) and
! persistent (*_init, then circulant_start) forms, and the requests' circulant_test,
! circulant_wait, circulant_start and circulant_request_free (a request is a type(c_ptr);
! the buffers of a request must stay valid, and have the target attribute, until it is
! complete, or freed if it is persistent). Buffers are passed as C addresses
! (c_loc(x) of a variable with the target attribute); sizes are in bytes (c_size_t) except
! the element count of allreduce. Every function returns CIRCULANT_SUCCESS (0) or an error
! code; circulant_error_message(comm) gives the message of the last failed call.
!
! Compile it with your program:
!   gfortran $(pkg-config --cflags circulant) PREFIX/include/circulant.f90 prog.f90 \
!       $(pkg-config --libs circulant)
module circulant
  use, intrinsic :: iso_c_binding, only: c_int, c_size_t, c_ptr, c_char, &
       c_associated, c_f_pointer
  implicit none
  private

  integer(c_int), parameter, public :: CIRCULANT_SUCCESS = 0
  integer(c_int), parameter, public :: CIRCULANT_ERR_ARGUMENT = 1
  integer(c_int), parameter, public :: CIRCULANT_ERR_PEER = 2
  integer(c_int), parameter, public :: CIRCULANT_ERR_TIMEOUT = 3
  integer(c_int), parameter, public :: CIRCULANT_ERR_MISMATCH = 4
  integer(c_int), parameter, public :: CIRCULANT_ERR_BUSY = 5
  integer(c_int), parameter, public :: CIRCULANT_ERR_UNUSABLE = 6
  integer(c_int), parameter, public :: CIRCULANT_ERR_BOOTSTRAP = 7
  integer(c_int), parameter, public :: CIRCULANT_ERR_FABRIC = 8
  integer(c_int), parameter, public :: CIRCULANT_ERR_INTERNAL = 9

  integer(c_int), parameter, public :: CIRCULANT_INT32 = 0
  integer(c_int), parameter, public :: CIRCULANT_INT64 = 1
  integer(c_int), parameter, public :: CIRCULANT_UINT32 = 2
  integer(c_int), parameter, public :: CIRCULANT_UINT64 = 3
  integer(c_int), parameter, public :: CIRCULANT_FLOAT32 = 4
  integer(c_int), parameter, public :: CIRCULANT_FLOAT64 = 5

  integer(c_int), parameter, public :: CIRCULANT_SUM = 0
  integer(c_int), parameter, public :: CIRCULANT_PROD = 1
  integer(c_int), parameter, public :: CIRCULANT_MIN = 2
  integer(c_int), parameter, public :: CIRCULANT_MAX = 3
  integer(c_int), parameter, public :: CIRCULANT_BAND = 4
  integer(c_int), parameter, public :: CIRCULANT_BOR = 5
  integer(c_int), parameter, public :: CIRCULANT_BXOR = 6

  public :: circulant_init, circulant_finalize, circulant_rank, circulant_size
  public :: circulant_barrier, circulant_bcast, circulant_allgatherv, circulant_allreduce
  public :: circulant_error_message
  public :: circulant_ibarrier, circulant_ibcast, circulant_iallgatherv, circulant_iallreduce
  public :: circulant_barrier_init, circulant_bcast_init, circulant_allgatherv_init
  public :: circulant_allreduce_init
  public :: circulant_start, circulant_test, circulant_wait, circulant_request_free

  interface
    integer(c_int) function circulant_init(comm) bind(C, name="circulant_init")
      import :: c_int, c_ptr
      type(c_ptr), intent(out) :: comm
    end function

    integer(c_int) function circulant_finalize(comm) bind(C, name="circulant_finalize")
      import :: c_int, c_ptr
      type(c_ptr), value :: comm
    end function

    integer(c_int) function circulant_rank(comm, rank) bind(C, name="circulant_rank")
      import :: c_int, c_ptr
      type(c_ptr), value :: comm
      integer(c_int), intent(out) :: rank
    end function

    integer(c_int) function circulant_size(comm, size) bind(C, name="circulant_size")
      import :: c_int, c_ptr
      type(c_ptr), value :: comm
      integer(c_int), intent(out) :: size
    end function

    integer(c_int) function circulant_barrier(comm) bind(C, name="circulant_barrier")
      import :: c_int, c_ptr
      type(c_ptr), value :: comm
    end function

    integer(c_int) function circulant_bcast(comm, buf, bytes, root) &
         bind(C, name="circulant_bcast")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: comm, buf
      integer(c_size_t), value :: bytes
      integer(c_int), value :: root
    end function

    integer(c_int) function circulant_allgatherv(comm, send, send_bytes, recv, counts) &
         bind(C, name="circulant_allgatherv")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: comm, send, recv
      integer(c_size_t), value :: send_bytes
      integer(c_size_t), intent(in) :: counts(*)
    end function

    integer(c_int) function circulant_allreduce(comm, send, recv, count, dtype, op) &
         bind(C, name="circulant_allreduce")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: comm, send, recv
      integer(c_size_t), value :: count
      integer(c_int), value :: dtype, op
    end function

    integer(c_int) function circulant_ibarrier(comm, request) bind(C, name="circulant_ibarrier")
      import :: c_int, c_ptr
      type(c_ptr), value :: comm
      type(c_ptr), intent(out) :: request
    end function

    integer(c_int) function circulant_ibcast(comm, buf, bytes, root, request) &
         bind(C, name="circulant_ibcast")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: comm, buf
      integer(c_size_t), value :: bytes
      integer(c_int), value :: root
      type(c_ptr), intent(out) :: request
    end function

    integer(c_int) function circulant_iallgatherv(comm, send, send_bytes, recv, counts, request) &
         bind(C, name="circulant_iallgatherv")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: comm, send, recv
      integer(c_size_t), value :: send_bytes
      integer(c_size_t), intent(in) :: counts(*)
      type(c_ptr), intent(out) :: request
    end function

    integer(c_int) function circulant_iallreduce(comm, send, recv, count, dtype, op, request) &
         bind(C, name="circulant_iallreduce")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: comm, send, recv
      integer(c_size_t), value :: count
      integer(c_int), value :: dtype, op
      type(c_ptr), intent(out) :: request
    end function

    integer(c_int) function circulant_barrier_init(comm, request) &
         bind(C, name="circulant_barrier_init")
      import :: c_int, c_ptr
      type(c_ptr), value :: comm
      type(c_ptr), intent(out) :: request
    end function

    integer(c_int) function circulant_bcast_init(comm, buf, bytes, root, request) &
         bind(C, name="circulant_bcast_init")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: comm, buf
      integer(c_size_t), value :: bytes
      integer(c_int), value :: root
      type(c_ptr), intent(out) :: request
    end function

    integer(c_int) function circulant_allgatherv_init(comm, send, send_bytes, recv, counts, &
         request) bind(C, name="circulant_allgatherv_init")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: comm, send, recv
      integer(c_size_t), value :: send_bytes
      integer(c_size_t), intent(in) :: counts(*)
      type(c_ptr), intent(out) :: request
    end function

    integer(c_int) function circulant_allreduce_init(comm, send, recv, count, dtype, op, &
         request) bind(C, name="circulant_allreduce_init")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: comm, send, recv
      integer(c_size_t), value :: count
      integer(c_int), value :: dtype, op
      type(c_ptr), intent(out) :: request
    end function

    integer(c_int) function circulant_start(request) bind(C, name="circulant_start")
      import :: c_int, c_ptr
      type(c_ptr), value :: request
    end function

    ! done = 1 once the request is complete, else 0.
    integer(c_int) function circulant_test(request, done) bind(C, name="circulant_test")
      import :: c_int, c_ptr
      type(c_ptr), value :: request
      integer(c_int), intent(out) :: done
    end function

    integer(c_int) function circulant_wait(request) bind(C, name="circulant_wait")
      import :: c_int, c_ptr
      type(c_ptr), value :: request
    end function

    integer(c_int) function circulant_request_free(request) &
         bind(C, name="circulant_request_free")
      import :: c_int, c_ptr
      type(c_ptr), value :: request
    end function

    type(c_ptr) function c_last_error(comm) bind(C, name="circulant_last_error")
      import :: c_ptr
      type(c_ptr), value :: comm
    end function

    integer(c_size_t) function c_strlen(text) bind(C, name="strlen")
      import :: c_size_t, c_ptr
      type(c_ptr), value :: text
    end function
  end interface

contains

  ! The message of the last failed call on comm (c_null_ptr: of a call without one).
  function circulant_error_message(comm) result(message)
    type(c_ptr), intent(in) :: comm
    character(len=:), allocatable :: message
    type(c_ptr) :: text
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n

    text = c_last_error(comm)
    if (.not. c_associated(text)) then
      message = ""
      return
    end if
    n = int(c_strlen(text))
    call c_f_pointer(text, chars, [n])
    allocate(character(len=n) :: message)
    do i = 1, n
      message(i:i) = chars(i)
    end do
  end function
end module circulant
