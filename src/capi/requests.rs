//! Requests: nonblocking collectives (`circulant_i*`), persistent ones (`*_init` +
//! `circulant_start`), and `circulant_test`, `circulant_wait`, `circulant_request_free`.
//!
//! One operation is in flight per communicator: starting a second one before the first
//! completed fails with `CIRCULANT_ERR_BUSY`, as does any blocking collective or `*_init`
//! meanwhile.
//!
//! A persistent request is Rust's persistent request over C memory: its call is checked,
//! chosen and planned once when it is made (`Collective::keep`), and each start runs
//! that plan again (`Collective::restart`), staging plain memory as a call started once
//! does.

use std::ffi::c_int;

use crate::comm::{Kept, Request};

use super::collective::Collective;
use super::handle::{on_comm, Comm};
use super::raw;
use super::status::{guard, Failure, Outcome, CIRCULANT_SUCCESS};

/// An opaque request (`circulant_request` in C).
pub struct Pending {
    /// Declared first: dropped before the description whose memory it may read.
    running: Option<Request<'static>>,
    collective: Collective,
    comm: *const Comm,
    /// A persistent request's call, set up (planned) when the request was made.
    kept: Option<Box<dyn Kept>>,
}

impl Pending {
    fn start(&mut self) -> Outcome {
        if self.running.is_some() {
            return Err(Failure::busy("the request is already started"));
        }
        let comm = raw::handle(self.comm, "the request's comm")?;
        let request = match &self.kept {
            Some(kept) => self.collective.restart(comm, kept.as_ref())?,
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
                let kept = if persistent {
                    Some(collective.keep(c)?)
                } else {
                    None
                };
                let mut pending = Pending {
                    running: None,
                    collective,
                    comm,
                    kept,
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

pub(super) fn nonblocking(
    comm: *const Comm,
    op: &'static str,
    request: *mut *mut Pending,
    describe: impl FnOnce(&Comm) -> Outcome<Collective>,
) -> c_int {
    make(comm, op, request, false, describe)
}

pub(super) fn persistent(
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
        if pending.kept.is_none() {
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
