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

use super::buffer::{Buffer, Payload};
use super::call::Call;
use super::communicator::Communicator;
use super::engine::{Engines, Kept, Task};
use super::error::{CommError, Result};
use super::memory::Memory;

/// A collective set up once and run many times. It borrows the communicator, so no other
/// collective can run while it exists; [`Self::comm`] lends the communicator back between
/// operations.
pub struct Persistent<'c, 'b> {
    comm: &'c mut Communicator,
    /// The call as it was set up once, by the choice of every call.
    kept: Box<dyn Kept>,
    /// The broadcast buffer or the receive buffer; `None` for a barrier.
    recv: Option<&'b mut Buffer>,
    /// The separate send buffer; `None` for a broadcast, a barrier and in place.
    send: Option<&'b mut Buffer>,
    /// The started operation.
    active: Option<Box<dyn Task>>,
    starts: u64,
}

impl std::fmt::Debug for Persistent<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persistent")
            .field("op", &self.kept.op())
            .field("algorithm", &self.kept.algorithm())
            .field("active", &self.active.is_some())
            .field("starts", &self.starts)
            .finish()
    }
}

impl<'c, 'b> Persistent<'c, 'b> {
    /// Sets up `call` on `recv` (and `send`) with the first of `engines` that takes it, as
    /// every call is set up; a planned call's scratch memory is made large enough now (it
    /// only grows, so no start registers memory). A request refused here gives up the first
    /// start on every rank, as a refused call does
    /// ([`crate::transport::Transport::abandon`]): the peers count on it.
    pub(crate) fn new(
        comm: &'c mut Communicator,
        engines: Engines,
        call: Call<'_>,
        recv: Option<&'b mut Buffer>,
        send: Option<&'b mut Buffer>,
    ) -> Result<Self> {
        let mut recv = recv;
        let memory = Memory::of_buffers(send.as_deref(), recv.as_deref_mut());
        let kept = engines.keep(comm, call, memory)?;
        Ok(Persistent {
            kept,
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
        let memory = Memory::of_buffers(self.send.as_deref(), self.recv.as_deref_mut());
        self.active = Some(self.kept.start(self.comm, memory)?);
        self.starts += 1;
        Ok(())
    }

    /// Drives the started operation to completion.
    pub fn wait(&mut self) -> Result<()> {
        let Some(mut task) = self.active.take() else {
            return Err(self.misuse("wait without start"));
        };
        let memory = Memory::of_buffers(self.send.as_deref(), self.recv.as_deref_mut());
        task.progress(self.comm, memory, true)?;
        self.comm.last = Some(task.executed());
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
        self.kept.algorithm()
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
        let op = self.kept.op();
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
        let op = self.kept.op();
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
            op: self.kept.op(),
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
