//! Persistent collectives: the algorithm chosen, the plan materialised and the buffers
//! registered once, then started many times (`*_init` → [`Persistent::start`] /
//! [`Persistent::wait`]).
//!
//! Each start is still a full operation of the one-sided protocol (its own sequence number and
//! ready tokens), so a fast rank never writes into a buffer a slow one still forwards from.
//! What a start saves is the algorithm choice, the schedule and plan construction, and the
//! staging and registration of plain memory: persistent requests work on registered
//! [`Buffer`]s only. (A blocking call repeated with the same arguments takes its plan from
//! the plan cache, so the saving over it is small: docs/performance.md, "Persistent
//! requests".) A call that the shared segment or the node phases serve has no plan: its
//! request starts it anew each time, as the `i*` form would, so that ranks that call one
//! form and ranks that call another still run it alike.
//!
//! ```no_run
//! use circulant::comm::Communicator;
//! let mut comm = Communicator::init()?;
//! let mut data = comm.alloc(1 << 20)?;
//! let root = 0;
//! let mut bcast = comm.bcast_init(&mut data, root)?;
//! for step in 0..10u8 {
//!     if bcast.rank() == root {
//!         bcast.buffer_mut()?.fill(step);
//!     }
//!     bcast.start()?;
//!     // ... work that does not touch the buffer or the communicator ...
//!     bcast.wait()?;
//!     assert!(bcast.buffer()?.iter().all(|&x| x == step));
//! }
//! # Ok::<(), circulant::comm::CommError>(())
//! ```

use std::sync::Arc;
use std::time::Duration;

use crate::fabric::Access;
use crate::transport::Operation;

use super::call::{Call, Entered};
use super::detached::Detached;
use super::plan_cache::Planned;
use super::staging::ensure;
use super::start::{Kept, Persisted};
use super::{Buffer, CommError, Communicator, Executed, Payload, Result};

/// A collective set up once and run many times. It borrows the communicator, so no other
/// collective can run while it exists; [`Self::comm`] lends the communicator back between
/// operations.
pub struct Persistent<'c, 'b> {
    comm: &'c mut Communicator,
    /// The call and its plan, made once by the pipeline of every call.
    persisted: Persisted,
    /// The broadcast buffer or the receive buffer; `None` for a barrier.
    recv: Option<&'b mut Buffer>,
    /// The separate send buffer; `None` for a broadcast, a barrier and in place.
    send: Option<&'b mut Buffer>,
    /// The started operation and its [`Executed::overhead`].
    active: Option<(Active, Duration)>,
    starts: u64,
}

/// A started operation of a persistent request.
// Kept inline, as a request keeps its operation: a box would cost an allocation per start.
#[allow(clippy::large_enum_variant)]
enum Active {
    /// Its plan's, and the plan.
    Plan(Operation, Arc<Planned>),
    /// The call started anew, detached from the request's buffers, and its algorithm.
    Call(Detached, &'static str),
}

impl std::fmt::Debug for Persistent<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persistent")
            .field("op", &self.persisted.op())
            .field("algorithm", &self.persisted.algorithm())
            .field("active", &self.active.is_some())
            .field("starts", &self.starts)
            .finish()
    }
}

impl<'c, 'b> Persistent<'c, 'b> {
    /// Sets up `call` on `recv` (and `send`) through the pipeline of every call
    /// ([`Communicator::persist`]), and makes sure the communicator's scratch memory is large
    /// enough for the plan (it only grows, so no start registers memory). A request refused
    /// here gives up the first start on every rank, as a refused call does
    /// ([`crate::transport::Transport::abandon`]): the peers count on it.
    pub(super) fn new(
        comm: &'c mut Communicator,
        call: Call<'_>,
        recv: Option<&'b mut Buffer>,
        send: Option<&'b mut Buffer>,
    ) -> Result<Self> {
        let persisted = comm.persist(call, send.as_deref(), recv.as_deref())?;
        if let Kept::Plan(planned) = persisted.kept() {
            let need = planned.prepared.buffers;
            let Communicator {
                transport, scratch, ..
            } = &mut *comm;
            if let Err(err) = ensure(transport, scratch, need.scratch, Access::RemoteWrite) {
                comm.comm_refused(persisted.op(), &err);
                return Err(err);
            }
        }
        Ok(Persistent {
            persisted,
            recv,
            send,
            active: None,
            starts: 0,
            comm,
        })
    }

    /// Starts one operation: posts the ready tokens and every write already allowed, and
    /// returns. Every rank must start its request in the same order relative to its other
    /// collectives. Until [`Self::wait`] returns, the buffers must not be touched (the
    /// accessors refuse).
    pub fn start(&mut self) -> Result<()> {
        if self.active.is_some() {
            return Err(self.misuse("started again before wait"));
        }
        let active = match self.persisted.kept() {
            Kept::Plan(planned) => {
                let entered = Entered::now(self.comm.measures_overhead);
                let (operation, overhead) = self.comm.restart_kept(
                    entered,
                    &self.persisted,
                    planned,
                    self.send.as_deref(),
                    self.recv.as_deref_mut(),
                )?;
                (Active::Plan(operation, Arc::clone(planned)), overhead)
            }
            Kept::Call(_) => {
                let call = self.persisted.call();
                let (detached, algorithm, overhead) = self.comm.start_detached_as(
                    call,
                    self.send.as_deref(),
                    self.recv.as_deref_mut(),
                )?;
                (Active::Call(detached, algorithm), overhead)
            }
        };
        self.active = Some(active);
        self.starts += 1;
        Ok(())
    }

    /// Drives the started operation to completion.
    pub fn wait(&mut self) -> Result<()> {
        let Some((active, overhead)) = self.active.take() else {
            return Err(self.misuse("wait without start"));
        };
        let (algorithm, stats) = match active {
            Active::Plan(operation, planned) => {
                let stats = self.comm.finish_kept(
                    &self.persisted,
                    &planned,
                    operation,
                    self.send.as_deref(),
                    self.recv.as_deref_mut(),
                )?;
                (self.persisted.algorithm(), stats)
            }
            Active::Call(mut detached, algorithm) => {
                let op = self.persisted.op();
                self.comm.progress_detached(
                    op,
                    &mut detached,
                    self.send.as_deref(),
                    self.recv.as_deref_mut(),
                    true,
                )?;
                (algorithm, detached.stats())
            }
        };
        self.comm.last = Some(Executed {
            algorithm,
            stats,
            overhead,
        });
        Ok(())
    }

    /// [`Self::start`] then [`Self::wait`].
    pub fn run(&mut self) -> Result<()> {
        self.start()?;
        self.wait()
    }

    /// Whether an operation was started and not waited for.
    pub fn is_active(&self) -> bool {
        self.active.is_some()
    }

    /// Operations started so far.
    pub fn starts(&self) -> u64 {
        self.starts
    }

    /// The algorithm chosen at setup.
    pub fn algorithm(&self) -> &'static str {
        self.persisted.algorithm()
    }

    /// The rank of the communicator this request runs on.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// The size of the communicator this request runs on.
    pub fn size(&self) -> usize {
        self.comm.size()
    }

    /// The broadcast buffer, or the receive buffer (not while active; a barrier has none).
    pub fn buffer(&self) -> Result<&[u8]> {
        if self.active.is_some() {
            return Err(self.misuse("the buffer is in use until wait returns"));
        }
        match self.recv.as_deref() {
            Some(recv) => Ok(recv.bytes()),
            None => Err(self.misuse("this operation has no buffer")),
        }
    }

    /// The broadcast buffer (the root writes its data here before a start), or the receive
    /// buffer (in place: this rank's contribution goes to its place here); an error while
    /// active, and for a barrier, which has none.
    pub fn buffer_mut(&mut self) -> Result<&mut [u8]> {
        if self.active.is_some() {
            return Err(self.misuse("the buffer is in use until wait returns"));
        }
        let op = self.persisted.op();
        match self.recv.as_deref_mut() {
            Some(recv) => Ok(&mut recv[..]),
            None => Err(CommError::Request {
                op,
                what: "this operation has no buffer",
            }),
        }
    }

    /// The send buffer of an allgather, allgatherv, allreduce or reduce that is not in place.
    pub fn send_buffer_mut(&mut self) -> Result<&mut [u8]> {
        if self.active.is_some() {
            return Err(self.misuse("the buffer is in use until wait returns"));
        }
        let op = self.persisted.op();
        match self.send.as_deref_mut() {
            Some(send) => Ok(&mut send[..]),
            None => Err(CommError::Request {
                op,
                what: "this operation has no separate send buffer",
            }),
        }
    }

    /// The communicator, for other collectives between operations (not while active).
    pub fn comm(&mut self) -> Result<&mut Communicator> {
        if self.active.is_some() {
            return Err(self.misuse("the communicator is busy until wait returns"));
        }
        Ok(self.comm)
    }

    fn misuse(&self, what: &'static str) -> CommError {
        CommError::Request {
            op: self.persisted.op(),
            what,
        }
    }
}

impl Drop for Persistent<'_, '_> {
    fn drop(&mut self) {
        // Peers may still write into the buffers: finish before the borrow ends. An error
        // has already marked the communicator unusable, so there is nothing else to do.
        if self.active.is_some() {
            let _ = self.wait();
        }
    }
}
