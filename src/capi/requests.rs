//! Requests: nonblocking collectives (`circulant_i*`), persistent ones (`*_init` +
//! `circulant_start`), and `circulant_test`, `circulant_wait`, `circulant_request_free`.
//!
//! One operation is in flight per communicator: starting a second one before the first
//! completed fails with `CIRCULANT_ERR_BUSY`, as does any blocking collective or `*_init`
//! meanwhile.
//!
//! A persistent request is Rust's persistent request over C memory: its call is checked,
//! chosen and planned once when it is made (`Collective::persist`), and each start runs
//! that plan again (`Collective::restart`), staging plain memory as a call started once
//! does.

use std::ffi::{c_int, c_void};

use crate::comm::{Persisted, Request};

use super::collective::{allgather, allgatherv, bcast, gather, gatherv, rank_arg, reducing};
use super::collective::{scatter, scatterv, Collective, Reducing};
use super::handle::{on_comm, Comm};
use super::raw;
use super::status::{guard, Failure, Outcome, CIRCULANT_SUCCESS};

/// An opaque request (`circulant_request` in C).
pub struct Pending {
    /// Declared first: dropped before the description whose memory it may read.
    running: Option<Request<'static>>,
    collective: Collective,
    comm: *const Comm,
    /// A persistent request's call, planned when the request was made.
    persisted: Option<Persisted>,
}

impl Pending {
    fn start(&mut self) -> Outcome {
        if self.running.is_some() {
            return Err(Failure::busy("the request is already started"));
        }
        let comm = raw::handle(self.comm, "the request's comm")?;
        let request = match &self.persisted {
            Some(persisted) => self.collective.restart(comm, persisted)?,
            None => self.collective.start(comm)?,
        };
        self.running = Some(request);
        Ok(())
    }

    /// Ends the running operation's lease after it completed or failed.
    fn finished(&mut self, comm: &Comm) {
        self.running = None;
        comm.end_lease();
    }
}

/// Runs an entry point on the request behind `request`, keeping errors on its communicator.
fn on_request(request: *mut Pending, body: impl FnOnce(&mut Pending, &Comm) -> Outcome) -> c_int {
    let comm = match raw::handle(request.cast_const(), "request") {
        Ok(pending) => pending.comm,
        Err(failure) => return guard(None, || Err(failure)),
    };
    on_comm(comm, |c| body(raw::handle_mut(request, "request")?, c))
}

/// Makes a request for the collective `op` that `describe` builds: started now, or planned
/// now and started by `circulant_start` (`persistent`). Arguments refused here give the call
/// up on every rank ([`Comm::refuse`]), as the communicator does for those it refuses.
fn make(
    comm: *const Comm,
    op: &'static str,
    request: *mut *mut Pending,
    persistent: bool,
    describe: impl FnOnce(&Comm) -> Outcome<Collective>,
) -> c_int {
    on_comm(comm, |c| {
        let made = if request.is_null() {
            Err(Failure::argument("request is NULL"))
        } else {
            describe(c).and_then(|mut collective| {
                let persisted = if persistent {
                    Some(collective.persist(c)?)
                } else {
                    None
                };
                let mut pending = Pending {
                    running: None,
                    collective,
                    comm,
                    persisted,
                };
                if !persistent {
                    pending.start()?;
                }
                Ok(pending)
            })
        };
        let pending = made.map_err(|failure| c.refuse(op, failure))?;
        c.requests.set(c.requests.get() + 1);
        raw::put(request, raw::into_handle(pending), "request")
    })
}

fn nonblocking(
    comm: *const Comm,
    op: &'static str,
    request: *mut *mut Pending,
    describe: impl FnOnce(&Comm) -> Outcome<Collective>,
) -> c_int {
    make(comm, op, request, false, describe)
}

fn persistent(
    comm: *const Comm,
    op: &'static str,
    request: *mut *mut Pending,
    describe: impl FnOnce(&Comm) -> Outcome<Collective>,
) -> c_int {
    make(comm, op, request, true, describe)
}

/// Progresses `request` without blocking; `*done` = 1 once it is complete (the results are
/// then in place), else 0. A request that is not started counts as complete.
#[no_mangle]
pub extern "C" fn circulant_test(request: *mut Pending, done: *mut c_int) -> c_int {
    on_request(request, |pending, comm| {
        if done.is_null() {
            return Err(Failure::argument("done is NULL"));
        }
        let result = match pending.running.as_mut() {
            None => Ok(true),
            Some(running) => running.test(),
        };
        match result {
            Ok(false) => raw::put(done, 0, "done"),
            Ok(true) => {
                if pending.running.is_some() {
                    pending.finished(comm);
                }
                raw::put(done, 1, "done")
            }
            Err(err) => {
                pending.finished(comm);
                Err(err.into())
            }
        }
    })
}

/// Completes `request` (at once if it is not started). The request stays valid: free it
/// with `circulant_request_free`, or start it again if it is persistent.
#[no_mangle]
pub extern "C" fn circulant_wait(request: *mut Pending) -> c_int {
    on_request(request, |pending, comm| {
        let Some(running) = pending.running.take() else {
            return Ok(());
        };
        let result = running.wait();
        pending.finished(comm);
        Ok(result?)
    })
}

/// Starts a persistent request again (after it completed).
#[no_mangle]
pub extern "C" fn circulant_start(request: *mut Pending) -> c_int {
    on_request(request, |pending, _| {
        if pending.persisted.is_none() {
            return Err(Failure::argument(
                "only persistent requests (*_init) can be started",
            ));
        }
        pending.start()
    })
}

/// Releases a completed request (NULL is ignored). An operation still in flight must be
/// completed first: `CIRCULANT_ERR_BUSY`.
#[no_mangle]
pub extern "C" fn circulant_request_free(request: *mut Pending) -> c_int {
    if request.is_null() {
        return CIRCULANT_SUCCESS;
    }
    let comm = match raw::handle(request.cast_const(), "request") {
        Ok(pending) => pending.comm,
        Err(failure) => return guard(None, || Err(failure)),
    };
    on_comm(comm, |c| {
        if raw::handle(request.cast_const(), "request")?
            .running
            .is_some()
        {
            return Err(Failure::busy(
                "the request is still in flight: wait for it before freeing it",
            ));
        }
        drop(raw::release(request, "request")?);
        c.requests.set(c.requests.get().saturating_sub(1));
        Ok(())
    })
}

/// Starts a barrier.
#[no_mangle]
pub extern "C" fn circulant_ibarrier(comm: *const Comm, request: *mut *mut Pending) -> c_int {
    nonblocking(comm, "ibarrier", request, |_| Ok(Collective::Barrier))
}

/// Starts a broadcast (see `circulant_bcast`).
#[no_mangle]
pub extern "C" fn circulant_ibcast(
    comm: *const Comm,
    buf: *mut c_void,
    bytes: usize,
    root: c_int,
    request: *mut *mut Pending,
) -> c_int {
    nonblocking(comm, "ibcast", request, |_| bcast(buf, bytes, root))
}

/// Starts an allgather (see `circulant_allgather`).
#[no_mangle]
pub extern "C" fn circulant_iallgather(
    comm: *const Comm,
    send: *const c_void,
    send_bytes: usize,
    recv: *mut c_void,
    request: *mut *mut Pending,
) -> c_int {
    nonblocking(comm, "iallgather", request, |_| {
        Ok(allgather(send, send_bytes, recv))
    })
}

/// Starts an allgatherv (see `circulant_allgatherv`).
#[no_mangle]
pub extern "C" fn circulant_iallgatherv(
    comm: *const Comm,
    send: *const c_void,
    send_bytes: usize,
    recv: *mut c_void,
    counts: *const usize,
    request: *mut *mut Pending,
) -> c_int {
    nonblocking(comm, "iallgatherv", request, |c| {
        allgatherv(c, send, send_bytes, recv, counts)
    })
}

/// Starts an allreduce (see `circulant_allreduce`).
#[no_mangle]
pub extern "C" fn circulant_iallreduce(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
    request: *mut *mut Pending,
) -> c_int {
    nonblocking(comm, "iallreduce", request, |_| {
        reducing(Reducing::All, send, recv, count, dtype, op)
    })
}

/// Starts a reduce (see `circulant_reduce`).
#[no_mangle]
pub extern "C" fn circulant_ireduce(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
    root: c_int,
    request: *mut *mut Pending,
) -> c_int {
    nonblocking(comm, "ireduce", request, |_| {
        let root = rank_arg(root, "root")?;
        reducing(Reducing::To(root), send, recv, count, dtype, op)
    })
}

/// Starts an inclusive scan (see `circulant_scan`).
#[no_mangle]
pub extern "C" fn circulant_iscan(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
    request: *mut *mut Pending,
) -> c_int {
    nonblocking(comm, "iscan", request, |_| {
        reducing(Reducing::Scan, send, recv, count, dtype, op)
    })
}

/// Starts an exclusive scan (see `circulant_exscan`).
#[no_mangle]
pub extern "C" fn circulant_iexscan(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
    request: *mut *mut Pending,
) -> c_int {
    nonblocking(comm, "iexscan", request, |_| {
        reducing(Reducing::Exscan, send, recv, count, dtype, op)
    })
}

/// Starts a gather (see `circulant_gather`).
#[no_mangle]
pub extern "C" fn circulant_igather(
    comm: *const Comm,
    send: *const c_void,
    send_bytes: usize,
    recv: *mut c_void,
    root: c_int,
    request: *mut *mut Pending,
) -> c_int {
    nonblocking(comm, "igather", request, |_| {
        gather(send, send_bytes, recv, root)
    })
}

/// Starts a gatherv (see `circulant_gatherv`).
#[no_mangle]
pub extern "C" fn circulant_igatherv(
    comm: *const Comm,
    send: *const c_void,
    send_bytes: usize,
    recv: *mut c_void,
    counts: *const usize,
    root: c_int,
    request: *mut *mut Pending,
) -> c_int {
    nonblocking(comm, "igatherv", request, |c| {
        gatherv(c, send, send_bytes, recv, counts, root)
    })
}

/// Starts a scatter (see `circulant_scatter`).
#[no_mangle]
pub extern "C" fn circulant_iscatter(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    recv_bytes: usize,
    root: c_int,
    request: *mut *mut Pending,
) -> c_int {
    nonblocking(comm, "iscatter", request, |_| {
        scatter(send, recv, recv_bytes, root)
    })
}

/// Starts a scatterv (see `circulant_scatterv`).
#[no_mangle]
pub extern "C" fn circulant_iscatterv(
    comm: *const Comm,
    send: *const c_void,
    counts: *const usize,
    recv: *mut c_void,
    recv_bytes: usize,
    root: c_int,
    request: *mut *mut Pending,
) -> c_int {
    nonblocking(comm, "iscatterv", request, |c| {
        scatterv(c, send, counts, recv, recv_bytes, root)
    })
}

/// Starts an all-to-all (see `circulant_alltoall`).
#[no_mangle]
pub extern "C" fn circulant_ialltoall(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    block_bytes: usize,
    request: *mut *mut Pending,
) -> c_int {
    nonblocking(comm, "ialltoall", request, |_| {
        Ok(Collective::Alltoall {
            send,
            recv,
            block: block_bytes,
        })
    })
}

/// A persistent barrier: planned now, started by `circulant_start`.
#[no_mangle]
pub extern "C" fn circulant_barrier_init(comm: *const Comm, request: *mut *mut Pending) -> c_int {
    persistent(comm, "barrier_init", request, |_| Ok(Collective::Barrier))
}

/// A persistent broadcast: its arguments are checked and its algorithm chosen and planned
/// now, on this memory; each `circulant_start` runs that plan again (the memory must stay
/// valid until the request is freed).
#[no_mangle]
pub extern "C" fn circulant_bcast_init(
    comm: *const Comm,
    buf: *mut c_void,
    bytes: usize,
    root: c_int,
    request: *mut *mut Pending,
) -> c_int {
    persistent(comm, "bcast_init", request, |_| bcast(buf, bytes, root))
}

/// A persistent allgather.
#[no_mangle]
pub extern "C" fn circulant_allgather_init(
    comm: *const Comm,
    send: *const c_void,
    send_bytes: usize,
    recv: *mut c_void,
    request: *mut *mut Pending,
) -> c_int {
    persistent(comm, "allgather_init", request, |_| {
        Ok(allgather(send, send_bytes, recv))
    })
}

/// A persistent allgatherv (the counts are copied).
#[no_mangle]
pub extern "C" fn circulant_allgatherv_init(
    comm: *const Comm,
    send: *const c_void,
    send_bytes: usize,
    recv: *mut c_void,
    counts: *const usize,
    request: *mut *mut Pending,
) -> c_int {
    persistent(comm, "allgatherv_init", request, |c| {
        allgatherv(c, send, send_bytes, recv, counts)
    })
}

/// A persistent allreduce.
#[no_mangle]
pub extern "C" fn circulant_allreduce_init(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
    request: *mut *mut Pending,
) -> c_int {
    persistent(comm, "allreduce_init", request, |_| {
        reducing(Reducing::All, send, recv, count, dtype, op)
    })
}

/// A persistent reduce to `root` (see `circulant_reduce`).
#[no_mangle]
pub extern "C" fn circulant_reduce_init(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
    root: c_int,
    request: *mut *mut Pending,
) -> c_int {
    persistent(comm, "reduce_init", request, |_| {
        let root = rank_arg(root, "root")?;
        reducing(Reducing::To(root), send, recv, count, dtype, op)
    })
}

/// A persistent inclusive scan (see `circulant_scan`).
#[no_mangle]
pub extern "C" fn circulant_scan_init(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
    request: *mut *mut Pending,
) -> c_int {
    persistent(comm, "scan_init", request, |_| {
        reducing(Reducing::Scan, send, recv, count, dtype, op)
    })
}

/// A persistent exclusive scan (see `circulant_exscan`).
#[no_mangle]
pub extern "C" fn circulant_exscan_init(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
    request: *mut *mut Pending,
) -> c_int {
    persistent(comm, "exscan_init", request, |_| {
        reducing(Reducing::Exscan, send, recv, count, dtype, op)
    })
}

/// A persistent gather (see `circulant_gather`).
#[no_mangle]
pub extern "C" fn circulant_gather_init(
    comm: *const Comm,
    send: *const c_void,
    send_bytes: usize,
    recv: *mut c_void,
    root: c_int,
    request: *mut *mut Pending,
) -> c_int {
    persistent(comm, "gather_init", request, |_| {
        gather(send, send_bytes, recv, root)
    })
}

/// A persistent gatherv (see `circulant_gatherv`; the counts are copied).
#[no_mangle]
pub extern "C" fn circulant_gatherv_init(
    comm: *const Comm,
    send: *const c_void,
    send_bytes: usize,
    recv: *mut c_void,
    counts: *const usize,
    root: c_int,
    request: *mut *mut Pending,
) -> c_int {
    persistent(comm, "gatherv_init", request, |c| {
        gatherv(c, send, send_bytes, recv, counts, root)
    })
}

/// A persistent scatter (see `circulant_scatter`).
#[no_mangle]
pub extern "C" fn circulant_scatter_init(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    recv_bytes: usize,
    root: c_int,
    request: *mut *mut Pending,
) -> c_int {
    persistent(comm, "scatter_init", request, |_| {
        scatter(send, recv, recv_bytes, root)
    })
}

/// A persistent scatterv (see `circulant_scatterv`; the counts are copied).
#[no_mangle]
pub extern "C" fn circulant_scatterv_init(
    comm: *const Comm,
    send: *const c_void,
    counts: *const usize,
    recv: *mut c_void,
    recv_bytes: usize,
    root: c_int,
    request: *mut *mut Pending,
) -> c_int {
    persistent(comm, "scatterv_init", request, |c| {
        scatterv(c, send, counts, recv, recv_bytes, root)
    })
}

/// A persistent all-to-all (see `circulant_alltoall`).
#[no_mangle]
pub extern "C" fn circulant_alltoall_init(
    comm: *const Comm,
    send: *const c_void,
    recv: *mut c_void,
    block_bytes: usize,
    request: *mut *mut Pending,
) -> c_int {
    persistent(comm, "alltoall_init", request, |_| {
        Ok(Collective::Alltoall {
            send,
            recv,
            block: block_bytes,
        })
    })
}
