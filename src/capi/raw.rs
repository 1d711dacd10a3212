//! The C boundary's raw pointers: the only `unsafe` code of the C API, each block with the
//! part of the C contract (include/circulant.h) that makes it sound.
//!
//! These functions are safe to call only with pointers that came from C through an entry
//! point, under that contract: a buffer pointer is valid for its stated length and not used
//! by the program while an operation on it runs, a handle is one this library returned and
//! has not released, and a communicator is used by one thread at a time. They are visible to
//! the `capi` module only, and every check that can be made (null pointers, lengths that fit,
//! the exclusive lease of a communicator) is made here.

use std::ffi::{c_int, c_void};

use crate::comm::{Buffer, Communicator};

use super::handle::Comm;
use super::status::{Failure, Outcome};

/// `len` bytes at `ptr` (a null pointer is allowed for length 0).
pub(super) fn bytes<'a>(ptr: *const c_void, len: usize, what: &str) -> Outcome<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    check(ptr, len, what)?;
    // SAFETY: the caller's contract makes `ptr` valid for reads of `len` bytes, unchanged
    // while the operation that reads it runs; it is not null and `len` fits (checked above).
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// `len` writable bytes at `ptr` (a null pointer is allowed for length 0).
pub(super) fn bytes_mut<'a>(ptr: *mut c_void, len: usize, what: &str) -> Outcome<&'a mut [u8]> {
    if len == 0 {
        return Ok(&mut []);
    }
    check(ptr, len, what)?;
    // SAFETY: the caller's contract makes `ptr` valid for writes of `len` bytes that nothing
    // else reads or writes while the operation runs (send and receive ranges are checked
    // apart by the caller of this function); not null and `len` fits (checked above).
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<u8>(), len) })
}

/// `n` values of `T` at `ptr` (counts arrays; copied by the callers).
pub(super) fn values<'a, T>(ptr: *const T, n: usize, what: &str) -> Outcome<&'a [T]> {
    let len = n
        .checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| Failure::argument(format!("{what}: {n} entries overflow")))?;
    check(ptr.cast(), len, what)?;
    if ptr.align_offset(std::mem::align_of::<T>()) != 0 {
        return Err(Failure::argument(format!("{what} is not aligned")));
    }
    // SAFETY: the contract makes `ptr` valid for reads of `n` values of `T`; it is not null,
    // aligned, and the size fits (checked above).
    Ok(unsafe { std::slice::from_raw_parts(ptr, n) })
}

fn check(ptr: *const c_void, len: usize, what: &str) -> Outcome {
    if ptr.is_null() {
        return Err(Failure::argument(format!("{what} is NULL")));
    }
    if len > isize::MAX as usize || (ptr as usize).checked_add(len).is_none() {
        return Err(Failure::argument(format!("{what}: {len} bytes do not fit")));
    }
    Ok(())
}

/// Stores `value` through a C output pointer.
pub(super) fn put<T>(out: *mut T, value: T, what: &str) -> Outcome {
    if out.is_null() {
        return Err(Failure::argument(format!("{what} is NULL")));
    }
    if out.align_offset(std::mem::align_of::<T>()) != 0 {
        return Err(Failure::argument(format!("{what} is not aligned")));
    }
    // SAFETY: the contract makes a non-null output pointer valid for one write of `T`;
    // aligned (checked above). The old value is plain data (int, size_t, pointers): nothing to
    // drop.
    unsafe { out.write(value) };
    Ok(())
}

/// A handle this library returned (a `Box` turned into a raw pointer), borrowed for a call.
pub(super) fn handle<'a, T>(ptr: *const T, what: &str) -> Outcome<&'a T> {
    if ptr.is_null() {
        return Err(Failure::argument(format!("{what} is NULL")));
    }
    // SAFETY: the contract: a handle comes from `into_handle` and is not released yet. It is
    // only ever shared (`&`): its mutable state sits in cells.
    Ok(unsafe { &*ptr })
}

/// A handle this library returned, borrowed exclusively for a call.
pub(super) fn handle_mut<'a, T>(ptr: *mut T, what: &str) -> Outcome<&'a mut T> {
    if ptr.is_null() {
        return Err(Failure::argument(format!("{what} is NULL")));
    }
    // SAFETY: the contract: a handle comes from `into_handle`, is not released yet, and is
    // used by one thread at a time; no other reference to it lives during the call.
    Ok(unsafe { &mut *ptr })
}

/// A new handle for C.
pub(super) fn into_handle<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Takes a handle back from C to release it.
pub(super) fn release<T>(ptr: *mut T, what: &str) -> Outcome<Box<T>> {
    if ptr.is_null() {
        return Err(Failure::argument(format!("{what} is NULL")));
    }
    // SAFETY: the contract: the handle comes from `into_handle` and is released once; the
    // callers check first that nothing borrows it (no lease, no request).
    Ok(unsafe { Box::from_raw(ptr) })
}

/// Lends `comm`'s communicator out exclusively, until [`Comm::end_lease`].
pub(super) fn lease<'a>(comm: &Comm) -> Outcome<&'a mut Communicator> {
    if comm.leased.replace(true) {
        return Err(Failure::busy(
            "an operation is in flight on this communicator (one at a time: wait for it)",
        ));
    }
    // SAFETY: the `leased` flag makes this the only reference to the communicator until the
    // lease ends, which its holder does only after dropping it; the handle outlives the lease
    // because finalize refuses while a lease or a request exists.
    Ok(unsafe { &mut *comm.inner.get() })
}

/// The registered buffer that starts at `ptr` and holds `len` bytes, if `ptr` came from
/// `circulant_alloc` on `comm`: the zero-copy path.
pub(super) fn allocation<'a>(
    comm: &Comm,
    ptr: *const c_void,
    len: usize,
) -> Option<&'a mut Buffer> {
    let found: *mut Buffer = comm
        .allocations
        .borrow_mut()
        .iter_mut()
        .find(|b| b.capacity() >= len && b.as_ptr() == ptr.cast::<u8>())
        .map(|b| &mut **b as *mut Buffer)?;
    // SAFETY: the buffer lives in a `Box` owned by `comm`, which `circulant_free` and finalize
    // drop only while no lease is out; one operation (the lease holder) uses it at a time, and
    // the caller checks that send and receive do not overlap.
    let buffer = unsafe { &mut *found };
    buffer.set_len(len).ok()?;
    Some(buffer)
}

/// The caller's context pointer of `circulant_init_oob`.
pub(super) struct Context(pub *mut c_void);

// SAFETY: the pointer is only passed back to the caller's function, and only during
// `circulant_init_oob`, on the thread that called it; the bootstrap that keeps it afterwards
// never calls the function again.
unsafe impl Send for Context {}

/// Calls the caller's out-of-band allgather.
pub(super) fn call_allgather(
    function: unsafe extern "C" fn(*const c_void, *mut c_void, usize, *mut c_void) -> c_int,
    send: &[u8],
    recv: &mut [u8],
    ctx: &Context,
) -> c_int {
    // SAFETY: the function pointer comes from the caller of `circulant_init_oob`, with the
    // signature of `circulant_oob_allgather_fn`; `send` and `recv` are valid for the lengths
    // it is told (`recv` holds size × `send.len()` bytes), and `ctx` is passed back unchanged.
    unsafe {
        function(
            send.as_ptr().cast(),
            recv.as_mut_ptr().cast(),
            send.len(),
            ctx.0,
        )
    }
}
