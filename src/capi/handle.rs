//! Communicator handles: init (PMI or singleton), finalize, rank, size, split, registered
//! memory, and the last error message.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::ffi::{c_char, c_int, c_void, CString};

use crate::comm::{Buffer, Communicator};

use super::raw;
use super::status::{guard, thread_error, Failure, Outcome};

/// An opaque communicator (`circulant_comm` in C).
pub struct Comm {
    pub(super) inner: UnsafeCell<Communicator>,
    /// The communicator is lent to a running operation ([`raw::lease`]).
    pub(super) leased: Cell<bool>,
    /// Requests created on it and not freed.
    pub(super) requests: Cell<usize>,
    /// Memory from `circulant_alloc`, boxed: a running operation holds a reference to a
    /// buffer while the list may grow.
    #[allow(clippy::vec_box)]
    pub(super) allocations: RefCell<Vec<Box<Buffer>>>,
    rank: usize,
    size: usize,
    error: RefCell<CString>,
}

impl Comm {
    pub(super) fn new(communicator: Communicator) -> Self {
        Comm {
            rank: communicator.rank(),
            size: communicator.size(),
            inner: UnsafeCell::new(communicator),
            leased: Cell::new(false),
            requests: Cell::new(0),
            allocations: RefCell::new(Vec::new()),
            error: RefCell::new(CString::default()),
        }
    }

    pub(super) fn rank(&self) -> usize {
        self.rank
    }

    pub(super) fn size(&self) -> usize {
        self.size
    }

    pub(super) fn set_error(&self, message: CString) {
        *self.error.borrow_mut() = message;
    }

    /// Ends the lease [`raw::lease`] gave (its reference must be gone).
    pub(super) fn end_lease(&self) {
        self.leased.set(false);
    }

    /// Runs `body` with the communicator lent to it.
    pub(super) fn with<T>(&self, body: impl FnOnce(&mut Communicator) -> Outcome<T>) -> Outcome<T> {
        let communicator = raw::lease(self)?;
        let _end = EndLease(self);
        body(communicator)
    }

    /// A collective call `op` that failed before or in the communicator: as in the Rust API,
    /// the call is still given up on every rank ([`Communicator::refuse`]; nothing more
    /// happens where the communicator gave it up already), so that no rank pairs it with
    /// another. While an operation holds the communicator the call is refused as busy
    /// instead, on this rank only.
    pub(super) fn refuse(&self, op: &'static str, failure: Failure) -> Failure {
        let refused = self.with(|communicator| {
            communicator.refuse(op, &failure.message);
            Ok(())
        });
        match refused {
            Ok(()) => failure,
            Err(busy) => busy,
        }
    }
}

/// Ends a lease when dropped, also when a panic unwinds (the entry point then returns
/// `CIRCULANT_ERR_INTERNAL` and the communicator is not left busy for ever). Declared after
/// whatever holds the lent communicator, so that it is dropped after it.
pub(super) struct EndLease<'a>(pub &'a Comm);

impl Drop for EndLease<'_> {
    fn drop(&mut self) {
        self.0.end_lease();
    }
}

/// Runs an entry point on the communicator behind `comm`.
pub(super) fn on_comm(comm: *const Comm, body: impl FnOnce(&Comm) -> Outcome) -> c_int {
    match raw::handle(comm, "comm") {
        Ok(comm) => guard(Some(comm), || body(comm)),
        Err(failure) => guard(None, || Err(failure)),
    }
}

pub(super) fn hand_out(communicator: Communicator, out: *mut *mut Comm) -> Outcome {
    raw::put(out, raw::into_handle(Comm::new(communicator)), "comm")
}

/// Joins the job this process was started in (PMI-1 from `circulant run` or Hydra), or becomes
/// rank 0 of 1 when started alone. `*comm` receives the world communicator.
#[no_mangle]
pub extern "C" fn circulant_init(comm: *mut *mut Comm) -> c_int {
    guard(None, || {
        if comm.is_null() {
            return Err(Failure::argument("comm is NULL"));
        }
        hand_out(Communicator::init()?, comm)
    })
}

/// Releases a communicator (the world one or one from `circulant_split`) and the memory
/// `circulant_alloc` gave on it. Refused with `CIRCULANT_ERR_BUSY` while requests on it are not
/// freed. The job is left when the last communicator of the process is released.
#[no_mangle]
pub extern "C" fn circulant_finalize(comm: *mut Comm) -> c_int {
    guard(None, || {
        let handle = raw::handle(comm.cast_const(), "comm")?;
        let requests = handle.requests.get();
        if handle.leased.get() || requests > 0 {
            return Err(Failure::busy(format!(
                "{requests} request(s) on this communicator are not freed (circulant_request_free)"
            )));
        }
        drop(raw::release(comm, "comm")?);
        Ok(())
    })
}

/// Removes the files process `pid` (this process or a peer on this host) keeps in `/dev/shm`
/// and that are this user's: libfabric's shm regions (`PID:N:M`) and circulant's shared memory
/// (`circulant-PID-NAME`). For a job that is ending without closing its communicators, as
/// `MPI_Abort` ends one: the mappings stay, but a process of `pid` that later opens one of
/// these files by its name fails, so the job must not go on.
#[no_mangle]
pub extern "C" fn circulant_remove_shared_files(pid: u32) {
    crate::fabric::shm::remove_regions_of(pid);
}

/// This process's rank in `comm`.
#[no_mangle]
pub extern "C" fn circulant_rank(comm: *const Comm, rank: *mut c_int) -> c_int {
    on_comm(comm, |c| raw::put(rank, to_int(c.rank(), "rank")?, "rank"))
}

/// The number of ranks of `comm`.
#[no_mangle]
pub extern "C" fn circulant_size(comm: *const Comm, size: *mut c_int) -> c_int {
    on_comm(comm, |c| raw::put(size, to_int(c.size(), "size")?, "size"))
}

/// Marks a rank that takes part in `circulant_split` without joining a new communicator.
pub const CIRCULANT_UNDEFINED: c_int = -1;

/// Splits `comm` as `MPI_Comm_split`: ranks with the same `color` (>= 0) form a communicator,
/// ordered by `key`, then by rank in `comm`. A rank passing `CIRCULANT_UNDEFINED` gets NULL.
/// Every rank of `comm` must call it.
#[no_mangle]
pub extern "C" fn circulant_split(
    comm: *const Comm,
    color: c_int,
    key: c_int,
    newcomm: *mut *mut Comm,
) -> c_int {
    on_comm(comm, |c| {
        let color = match color {
            _ if newcomm.is_null() => Err(Failure::argument("newcomm is NULL")),
            CIRCULANT_UNDEFINED => Ok(None),
            c if c >= 0 => Ok(Some(c as u32)),
            other => Err(Failure::argument(format!(
                "color {other} is negative (use CIRCULANT_UNDEFINED)"
            ))),
        };
        // The split is collective: a call refused here is given up on every rank.
        let color = color.map_err(|failure| c.refuse("split", failure))?;
        match c.with(|inner| Ok(inner.split(color, i64::from(key))?))? {
            Some(split) => hand_out(split, newcomm),
            None => raw::put(newcomm, std::ptr::null_mut(), "newcomm"),
        }
    })
}

/// `bytes` of memory registered with `comm`'s fabric domain, zeroed: collectives on a buffer
/// that starts at `*ptr` copy nothing. Released by `circulant_free` or with `comm`.
#[no_mangle]
pub extern "C" fn circulant_alloc(comm: *const Comm, bytes: usize, ptr: *mut *mut c_void) -> c_int {
    on_comm(comm, |c| {
        if ptr.is_null() {
            return Err(Failure::argument("ptr is NULL"));
        }
        let mut buffer = Box::new(c.with(|inner| Ok(inner.alloc(bytes)?))?);
        let base = buffer.as_mut_ptr().cast::<c_void>();
        c.allocations.borrow_mut().push(buffer);
        raw::put(ptr, base, "ptr")
    })
}

/// Bytes `comm` copied locally so far (staging of memory that is not from `circulant_alloc`,
/// the plans' copy steps, and operations up to `CIRCULANT_EAGER_LIMIT` bytes, whose data go
/// through receive slots): larger broadcasts and in-place allgathervs on memory from
/// `circulant_alloc` add nothing.
#[no_mangle]
pub extern "C" fn circulant_bytes_copied(comm: *const Comm, bytes: *mut u64) -> c_int {
    on_comm(comm, |c| {
        let copied = c.with(|inner| Ok(inner.bytes_copied()))?;
        raw::put(bytes, copied, "bytes")
    })
}

/// Releases memory from `circulant_alloc` (NULL is ignored).
#[no_mangle]
pub extern "C" fn circulant_free(comm: *const Comm, ptr: *mut c_void) -> c_int {
    on_comm(comm, |c| {
        if ptr.is_null() {
            return Ok(());
        }
        if c.leased.get() {
            return Err(Failure::busy(
                "an operation is in flight on this communicator",
            ));
        }
        let mut allocations = c.allocations.borrow_mut();
        let at = allocations
            .iter()
            .position(|b| b.as_ptr() == ptr.cast::<u8>().cast_const())
            .ok_or_else(|| {
                Failure::argument("ptr was not returned by circulant_alloc on this communicator")
            })?;
        allocations.swap_remove(at);
        Ok(())
    })
}

/// The message of the last failed call on `comm` ("" if none), or with `comm` NULL of the
/// last failed call of this thread that had no communicator (init, a NULL handle). Valid until
/// the next failing call that sets it.
#[no_mangle]
pub extern "C" fn circulant_last_error(comm: *const Comm) -> *const c_char {
    match raw::handle(comm, "comm") {
        Ok(comm) => comm.error.borrow().as_ptr(),
        Err(_) => thread_error(),
    }
}

pub(super) fn to_int(value: usize, what: &str) -> Outcome<c_int> {
    c_int::try_from(value).map_err(|_| Failure::argument(format!("{what} {value} exceeds int")))
}
