//! The collectives of the C API, blocking, and the codes of the reductions: each entry point
//! builds a `Collective` from its C arguments (`collective.rs`), starts it and waits; the
//! nonblocking forms (`requests.rs`) start it, the persistent ones plan it once and start that
//! plan again.

use std::ffi::{c_int, c_void};

use super::collective::{
    allgather, allgatherv, bcast, gather, gatherv, rank_arg, reducing, scatter, scatterv,
    Collective, Reducing,
};
use super::handle::{on_comm, Comm};
use super::status::Outcome;

/// Data types of the reductions (`int dtype`).
pub const CIRCULANT_INT32: c_int = 0;
/// 64-bit signed integers.
pub const CIRCULANT_INT64: c_int = 1;
/// 32-bit unsigned integers.
pub const CIRCULANT_UINT32: c_int = 2;
/// 64-bit unsigned integers.
pub const CIRCULANT_UINT64: c_int = 3;
/// 32-bit IEEE floats.
pub const CIRCULANT_FLOAT32: c_int = 4;
/// 64-bit IEEE floats.
pub const CIRCULANT_FLOAT64: c_int = 5;

/// Operators of the reductions (`int op`); the bitwise ones on integers only.
pub const CIRCULANT_SUM: c_int = 0;
/// Product.
pub const CIRCULANT_PROD: c_int = 1;
/// Minimum.
pub const CIRCULANT_MIN: c_int = 2;
/// Maximum.
pub const CIRCULANT_MAX: c_int = 3;
/// Bitwise and.
pub const CIRCULANT_BAND: c_int = 4;
/// Bitwise or.
pub const CIRCULANT_BOR: c_int = 5;
/// Bitwise exclusive or.
pub const CIRCULANT_BXOR: c_int = 6;

/// Runs a blocking collective `op` built by `describe` on `comm`; a call refused before it
/// reached the communicator is given up on every rank ([`Comm::refuse`]).
fn blocking(
    comm: *const Comm,
    op: &'static str,
    describe: impl FnOnce(&Comm) -> Outcome<Collective>,
) -> c_int {
    on_comm(comm, |c| {
        describe(c)
            .and_then(|collective| collective.run(c))
            .map_err(|failure| c.refuse(op, failure))
    })
}

/// Blocks until every rank of `comm` has called it.
#[no_mangle]
pub extern "C" fn circulant_barrier(comm: *const Comm) -> c_int {
    blocking(comm, "barrier", |_| Ok(Collective::Barrier))
}

/// Root's `bytes` at `buf` into every rank's `buf`.
#[no_mangle]
pub extern "C" fn circulant_bcast(
    comm: *const Comm,
    buf: *mut c_void,
    bytes: usize,
    root: c_int,
) -> c_int {
    blocking(comm, "bcast", |_| bcast(buf, bytes, root))
}

/// Every rank's `send_bytes` at `send` into `recv` (size × `send_bytes`) in rank order.
/// `send` may be `CIRCULANT_IN_PLACE`: this rank's block is already at its place in `recv`.
#[no_mangle]
pub extern "C" fn circulant_allgather(
    comm: *const Comm,
    send: *const c_void,
    send_bytes: usize,
    recv: *mut c_void,
) -> c_int {
    blocking(comm, "allgather", |_| Ok(allgather(send, send_bytes, recv)))
}

/// Rank r's `counts[r]` bytes into `recv` at the sum of the counts before r. `counts` has one
/// entry per rank and `send_bytes` must equal `counts[rank]`; `send` may be
/// `CIRCULANT_IN_PLACE`.
#[no_mangle]
pub extern "C" fn circulant_allgatherv(
    comm: *const Comm,
    send: *const c_void,
    send_bytes: usize,
    recv: *mut c_void,
    counts: *const usize,
) -> c_int {
    blocking(comm, "allgatherv", |c| {
        allgatherv(c, send, send_bytes, recv, counts)
    })
}

/// Every rank's `recv` = `op` over all ranks' `send`, `count` elements of `dtype`. `send` may
/// be `CIRCULANT_IN_PLACE` (the input is in `recv`).
#[no_mangle]
pub extern "C" fn circulant_allreduce(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
) -> c_int {
    blocking(comm, "allreduce", |_| {
        reducing(Reducing::All, send, recv, count, dtype, op)
    })
}

/// Root's `recv` = `op` over all ranks' `send`; `recv` may be NULL on the other ranks.
#[no_mangle]
pub extern "C" fn circulant_reduce(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
    root: c_int,
) -> c_int {
    blocking(comm, "reduce", |_| {
        let root = rank_arg(root, "root")?;
        reducing(Reducing::To(root), send, recv, count, dtype, op)
    })
}

/// Rank r's `recv` = `op` over the `send` of ranks 0..=r.
#[no_mangle]
pub extern "C" fn circulant_scan(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
) -> c_int {
    blocking(comm, "scan", |_| {
        reducing(Reducing::Scan, send, recv, count, dtype, op)
    })
}

/// Rank r's `recv` = `op` over the `send` of ranks 0..r; rank 0's `recv` is not touched.
#[no_mangle]
pub extern "C" fn circulant_exscan(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
) -> c_int {
    blocking(comm, "exscan", |_| {
        reducing(Reducing::Exscan, send, recv, count, dtype, op)
    })
}

/// Every rank's `send_bytes` into root's `recv` (size × `send_bytes`) in rank order.
#[no_mangle]
pub extern "C" fn circulant_gather(
    comm: *const Comm,
    send: *const c_void,
    send_bytes: usize,
    recv: *mut c_void,
    root: c_int,
) -> c_int {
    blocking(comm, "gather", |_| gather(send, send_bytes, recv, root))
}

/// Rank r's `counts[r]` bytes into root's `recv` at the sum of the counts before r.
#[no_mangle]
pub extern "C" fn circulant_gatherv(
    comm: *const Comm,
    send: *const c_void,
    send_bytes: usize,
    recv: *mut c_void,
    counts: *const usize,
    root: c_int,
) -> c_int {
    blocking(comm, "gatherv", |c| {
        gatherv(c, send, send_bytes, recv, counts, root)
    })
}

/// Block r of root's `send` (size × `recv_bytes`) into rank r's `recv`.
#[no_mangle]
pub extern "C" fn circulant_scatter(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    recv_bytes: usize,
    root: c_int,
) -> c_int {
    blocking(comm, "scatter", |_| scatter(send, recv, recv_bytes, root))
}

/// Part r of root's `send` (cut at the counts) into rank r's `recv` (`counts[r]` bytes).
#[no_mangle]
pub extern "C" fn circulant_scatterv(
    comm: *const Comm,
    send: *const c_void,
    counts: *const usize,
    recv: *mut c_void,
    recv_bytes: usize,
    root: c_int,
) -> c_int {
    blocking(comm, "scatterv", |c| {
        scatterv(c, send, counts, recv, recv_bytes, root)
    })
}

/// Block j of rank i's `send` into block i of rank j's `recv` (size blocks of `block_bytes`).
#[no_mangle]
pub extern "C" fn circulant_alltoall(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    block_bytes: usize,
) -> c_int {
    blocking(comm, "alltoall", |_| {
        Ok(Collective::Alltoall {
            send,
            recv,
            block: block_bytes,
        })
    })
}
