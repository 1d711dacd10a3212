//! Nonblocking collectives: every collective has an `i*` form that starts the operation and
//! returns a [`Request`]; [`Request::test`] progresses it without blocking and
//! [`Request::wait`] completes it.
//!
//! A request borrows the communicator and the buffers mutably until it is complete, so the
//! compiler enforces what the transport needs: one operation in flight per communicator, and
//! buffers that are not touched while peers may write into them. Progress happens in `start`
//! (the ready tokens and every write already allowed are posted before the `i*` call returns),
//! in `test` and in `wait`. Plain slices are staged as in the blocking forms: copied in at the
//! start, copied out when the request completes.
//!
//! ```no_run
//! use circulant::comm::Communicator;
//! let mut comm = Communicator::init()?;
//! let mut data = comm.alloc(1 << 20)?;
//! let mut request = comm.ibcast(&mut data, 0)?;
//! while !request.test()? {
//!     // ... work that touches neither `data` nor the communicator ...
//! }
//! request.wait()?;
//! # Ok::<(), circulant::comm::CommError>(())
//! ```
//!
//! How requests map onto the transport: docs/architecture.md, section "Nonblocking
//! collectives".

use crate::transport::TransportError;

use super::call::Call;
use super::communicator::Communicator;
use super::engine::{Engines, Kept, Task};
use super::error::Result;
use super::memory::Memory;

/// Where a request stands.
enum State {
    Running(Box<dyn Task>),
    Done,
    /// Failed in [`Request::test`]: the message of the error returned then.
    Failed(String),
}

/// A started collective (see the module documentation). Dropping a request that is not
/// complete waits for it: peers may still write into its buffers.
pub struct Request<'a> {
    comm: &'a mut Communicator,
    memory: Memory<'a>,
    op: &'static str,
    algorithm: &'static str,
    state: State,
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Running(_) => "running",
            State::Done => "done",
            State::Failed(_) => "failed",
        };
        f.debug_struct("Request")
            .field("op", &self.op)
            .field("algorithm", &self.algorithm)
            .field("state", &state)
            .finish()
    }
}

impl<'a> Request<'a> {
    /// Starts `call` on `memory` with the first of `engines` that takes it.
    pub(crate) fn start(
        comm: &'a mut Communicator,
        engines: Engines,
        call: Call<'_>,
        mut memory: Memory<'a>,
    ) -> Result<Self> {
        let op = call.op;
        let task = engines.start(comm, call, memory.reborrow())?;
        Ok(Request {
            comm,
            memory,
            op,
            algorithm: task.algorithm(),
            state: State::Running(task),
        })
    }

    /// Starts `kept`, a call set up once, again on `memory`.
    pub(crate) fn of_kept(
        comm: &'a mut Communicator,
        kept: &dyn Kept,
        mut memory: Memory<'a>,
    ) -> Result<Self> {
        let task = kept.start(comm, memory.reborrow())?;
        Ok(Request {
            comm,
            memory,
            op: kept.op(),
            algorithm: task.algorithm(),
            state: State::Running(task),
        })
    }

    /// Progresses the operation without blocking; `true` once it is complete (the results
    /// are then in the receive buffer). Past the deadline, counted from the start, it fails.
    pub fn test(&mut self) -> Result<bool> {
        self.progress(false)
    }

    /// Completes the operation.
    pub fn wait(mut self) -> Result<()> {
        self.progress(true).map(|_| ())
    }

    /// The collective's name.
    pub fn op(&self) -> &'static str {
        self.op
    }

    /// The algorithm chosen.
    pub fn algorithm(&self) -> &'static str {
        self.algorithm
    }

    /// Progresses the task (`wait`: to its end) and records it once complete.
    fn progress(&mut self, wait: bool) -> Result<bool> {
        let task = match &mut self.state {
            State::Running(task) => task,
            State::Done => return Ok(true),
            State::Failed(why) => return Err(TransportError::Broken(why.clone()).into()),
        };
        match task.progress(self.comm, self.memory.reborrow(), wait) {
            Ok(false) => Ok(false),
            Ok(true) => {
                self.comm.last = Some(task.executed());
                self.state = State::Done;
                Ok(true)
            }
            Err(err) => {
                self.state = State::Failed(err.to_string());
                Err(err)
            }
        }
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        // Peers may still write into the buffers: finish before the borrows end. An error has
        // already marked the communicator unusable, so there is nothing else to do. Not while
        // a panic unwinds: the operation's state cannot be trusted then.
        if matches!(self.state, State::Running(_)) && !std::thread::panicking() {
            let _ = self.progress(true);
        }
    }
}
