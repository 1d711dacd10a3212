//! `circulant_init_oob`: joining a job through the caller's out-of-band allgather.

use std::ffi::{c_int, c_void};

use crate::bootstrap::Bootstrap;
use crate::comm::{CommError, Communicator, Config};

use super::handle::{hand_out, Comm};
use super::raw;
use super::status::{guard, Failure};

/// The caller's allgather: every rank passes `bytes` bytes at `send` and receives every
/// rank's bytes in rank order at `recv` (size × `bytes`); returns 0 on success. `ctx` is the
/// pointer given to `circulant_init_oob`.
pub type OobAllgatherFn = Option<
    unsafe extern "C" fn(
        send: *const c_void,
        recv: *mut c_void,
        bytes: usize,
        ctx: *mut c_void,
    ) -> c_int,
>;

/// The function an [`OobAllgatherFn`] holds.
type RawAllgather = unsafe extern "C" fn(
    send: *const c_void,
    recv: *mut c_void,
    bytes: usize,
    ctx: *mut c_void,
) -> c_int;

/// Joins a job of `size` processes as `rank`, exchanging addresses through `allgather`
/// (called during this call only, with the same sizes on every rank). For programs that
/// already have MPI, a TCP store or their own launcher. Every rank must call it.
#[no_mangle]
pub extern "C" fn circulant_init_oob(
    comm: *mut *mut Comm,
    rank: c_int,
    size: c_int,
    allgather: OobAllgatherFn,
    ctx: *mut c_void,
) -> c_int {
    guard(None, || {
        let (function, rank, size) = arguments(comm, rank, size, allgather)?;
        let communicator = Communicator::init_oob(rank, size, exchange(function, ctx))?;
        hand_out(communicator, comm)
    })
}

/// `circulant_init_oob` where the caller knows the node of every rank: `nodes` has `size`
/// entries, `nodes[r]` rank r's node under any non-negative labels (equal labels, one node;
/// e.g. from `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`), the same on every rank. Start-up
/// then skips the exchange of host names. Every rank must call it.
#[no_mangle]
pub extern "C" fn circulant_init_oob_nodes(
    comm: *mut *mut Comm,
    rank: c_int,
    size: c_int,
    nodes: *const c_int,
    allgather: OobAllgatherFn,
    ctx: *mut c_void,
) -> c_int {
    guard(None, || {
        let (function, rank, size) = arguments(comm, rank, size, allgather)?;
        let labels = raw::values(nodes, size, "nodes")?
            .iter()
            .map(|&label| {
                usize::try_from(label)
                    .map_err(|_| Failure::argument(format!("node label {label} is negative")))
            })
            .collect::<Result<Vec<usize>, Failure>>()?;
        let bootstrap =
            Bootstrap::oob_on_nodes(rank, size, labels, Box::new(exchange(function, ctx)))?;
        let config = Config::from_env().map_err(CommError::from)?;
        let communicator = Communicator::init_over(bootstrap, config)?;
        hand_out(communicator, comm)
    })
}

/// The checks both starts make: a place for the handle, an allgather, 0 <= rank < size.
fn arguments(
    comm: *mut *mut Comm,
    rank: c_int,
    size: c_int,
    allgather: OobAllgatherFn,
) -> Result<(RawAllgather, usize, usize), Failure> {
    if comm.is_null() {
        return Err(Failure::argument("comm is NULL"));
    }
    let function = allgather.ok_or_else(|| Failure::argument("allgather is NULL"))?;
    match (usize::try_from(rank), usize::try_from(size)) {
        (Ok(r), Ok(s)) if r < s => Ok((function, r, s)),
        _ => Err(Failure::argument(format!(
            "rank {rank} and size {size}: need 0 <= rank < size"
        ))),
    }
}

/// The caller's allgather with its context, as the bootstrap calls it.
fn exchange(
    function: RawAllgather,
    ctx: *mut c_void,
) -> impl FnMut(&[u8], &mut [u8]) -> Result<(), String> + Send + 'static {
    let ctx = raw::Context(ctx);
    move |send, recv| match raw::call_allgather(function, send, recv, &ctx) {
        0 => Ok(()),
        code => Err(format!("the caller's allgather returned {code}")),
    }
}
