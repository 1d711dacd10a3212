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

use crate::plan::{Problem, ReduceOp, Reduction};
use crate::transport::{Operation, TransportError};

use super::arguments::{argument, expect_len, typed};
use super::call::Call;
use super::staging::{split, Placement};
use super::start::Started;
use super::{Choice, Communicator, Element, Executed, Payload, PayloadMut, Result};

/// Where a request stands.
// The running operation is kept inline: a box would cost an allocation on every call.
#[allow(clippy::large_enum_variant)]
enum State {
    Running(Operation),
    Done,
    /// Failed in [`Request::test`]: the message of the error returned then.
    Failed(String),
}

/// A started collective (see the module documentation). Dropping a request that is not
/// complete waits for it: peers may still write into its buffers.
pub struct Request<'a> {
    comm: &'a mut Communicator,
    op: &'static str,
    algorithm: &'static str,
    state: State,
    /// Where the buffers are; its count of bytes staged in grows by those staged out at
    /// completion.
    placement: Placement<'a>,
    /// Whether a staged receive buffer is copied out at completion (not where the call leaves
    /// it unchanged, as at the broadcast root).
    copy_out: bool,
    /// [`Executed::overhead`] of the call.
    overhead: std::time::Duration,
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
    /// The request of an operation `started` for call `op` (`copy_out`: whether a staged
    /// receive buffer is copied out at completion).
    pub(super) fn new(
        comm: &'a mut Communicator,
        op: &'static str,
        started: Started<'a>,
        copy_out: bool,
    ) -> Self {
        Request {
            comm,
            op,
            algorithm: started.algorithm,
            state: State::Running(started.operation),
            placement: started.placement,
            copy_out,
            overhead: started.overhead,
        }
    }

    /// Progresses the operation without blocking; `true` once it is complete (the results
    /// are then in the receive buffer). Past the deadline, counted from the start, it fails.
    pub fn test(&mut self) -> Result<bool> {
        let operation = match &mut self.state {
            State::Running(operation) => operation,
            State::Done => return Ok(true),
            State::Failed(why) => return Err(TransportError::Broken(why.clone()).into()),
        };
        let (transport, owned) = split(self.comm);
        let buffers = self.placement.views(owned);
        match transport.test(operation, buffers) {
            Ok(false) => Ok(false),
            Ok(true) => self.complete().map(|()| true),
            Err(err) => {
                self.state = State::Failed(err.to_string());
                Err(err.into())
            }
        }
    }

    /// Completes the operation.
    pub fn wait(mut self) -> Result<()> {
        self.complete()
    }

    /// The collective's name.
    pub fn op(&self) -> &'static str {
        self.op
    }

    /// The algorithm chosen.
    pub fn algorithm(&self) -> &'static str {
        self.algorithm
    }

    /// Drives the operation to its end, copies staged results out and records the run.
    fn complete(&mut self) -> Result<()> {
        let operation = match std::mem::replace(&mut self.state, State::Done) {
            State::Running(operation) => operation,
            State::Done => return Ok(()),
            State::Failed(why) => {
                self.state = State::Failed(why.clone());
                return Err(TransportError::Broken(why).into());
            }
        };
        let (transport, owned) = split(self.comm);
        let buffers = self.placement.views(owned);
        let stats = match transport.finish(operation, buffers) {
            Ok(stats) => stats,
            Err(err) => {
                self.state = State::Failed(err.to_string());
                return Err(err.into());
            }
        };
        if self.copy_out {
            self.placement.copied += self.placement.stage_out(self.comm)?;
        }
        let comm = &mut *self.comm;
        comm.transport.count_copied(self.placement.copied);
        comm.last = Some(Executed {
            algorithm: self.algorithm,
            stats,
            overhead: self.overhead,
        });
        Ok(())
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        // Peers may still write into the buffers: finish before the borrows end. An error has
        // already marked the communicator unusable, so there is nothing else to do. Not while
        // a panic unwinds: the operation's state cannot be trusted then.
        if matches!(self.state, State::Running(_)) && !std::thread::panicking() {
            let _ = self.complete();
        }
    }
}

impl Communicator {
    /// Starts [`Self::barrier`] and returns its [`Request`].
    pub fn ibarrier(&mut self) -> Result<Request<'_>> {
        let problem = Problem::Barrier { p: self.size() };
        let call = Call::new("barrier", problem, Choice::Auto);
        self.start::<[u8], [u8]>(call, None, None)
    }

    /// Starts [`Self::bcast`] and returns its [`Request`].
    pub fn ibcast<'a, B: PayloadMut + ?Sized>(
        &'a mut self,
        buf: &'a mut B,
        root: usize,
    ) -> Result<Request<'a>> {
        self.ibcast_using(buf, root, Choice::Auto)
    }

    /// Starts [`Self::bcast_using`] and returns its [`Request`].
    pub fn ibcast_using<'a, B: PayloadMut + ?Sized>(
        &'a mut self,
        buf: &'a mut B,
        root: usize,
        choice: Choice<'a>,
    ) -> Result<Request<'a>> {
        let problem = Problem::Broadcast {
            p: self.size(),
            root,
            bytes: buf.bytes().len(),
        };
        // The root's buffer is input, and the call leaves it as it is.
        let is_root = self.rank() == root;
        let call = Call::new("bcast", problem, choice)
            .copy_in(is_root)
            .unchanged(is_root);
        self.start::<[u8], B>(call, None, Some(buf))
    }

    /// Starts [`Self::allgather`] and returns its [`Request`].
    pub fn iallgather<'a, S, R>(&'a mut self, send: &'a S, recv: &'a mut R) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.iallgather_using(send, recv, Choice::Auto)
    }

    /// Starts [`Self::allgather_using`] and returns its [`Request`].
    pub fn iallgather_using<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        choice: Choice<'a>,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let (p, block) = (self.size(), send.bytes().len());
        let checked = expect_len(
            "allgather",
            "recv",
            recv.bytes().len(),
            p.checked_mul(block),
        );
        let problem = Problem::Allgather { p, block };
        let call = Call::new("allgather", problem, choice);
        self.start(call.checked(checked), Some(send), Some(recv))
    }

    /// Starts [`Self::allgatherv`] and returns its [`Request`].
    pub fn iallgatherv<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        counts: &[usize],
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.iallgatherv_using(send, recv, counts, Choice::Auto)
    }

    /// Starts [`Self::allgatherv_using`] and returns its [`Request`].
    pub fn iallgatherv_using<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        counts: &[usize],
        choice: Choice<'a>,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let op = "allgatherv";
        let checked = self
            .check_counts(op, counts, recv.bytes().len())
            .and_then(|()| expect_len(op, "send", send.bytes().len(), self.own(counts)));
        let problem = Problem::Allgatherv {
            counts: counts.to_vec(),
        };
        self.start(
            Call::new(op, problem, choice).checked(checked),
            Some(send),
            Some(recv),
        )
    }

    /// Starts [`Self::allgatherv_in_place`] and returns its [`Request`].
    pub fn iallgatherv_in_place<'a, R>(
        &'a mut self,
        recv: &'a mut R,
        counts: &[usize],
    ) -> Result<Request<'a>>
    where
        R: PayloadMut + ?Sized,
    {
        self.iallgatherv_in_place_using(recv, counts, Choice::Auto)
    }

    /// Starts [`Self::allgatherv_in_place_using`] and returns its [`Request`].
    pub fn iallgatherv_in_place_using<'a, R>(
        &'a mut self,
        recv: &'a mut R,
        counts: &[usize],
        choice: Choice<'a>,
    ) -> Result<Request<'a>>
    where
        R: PayloadMut + ?Sized,
    {
        let op = "allgatherv";
        let checked = self.check_counts(op, counts, recv.bytes().len());
        let mine = self.own_part(counts);
        let problem = Problem::Allgatherv {
            counts: counts.to_vec(),
        };
        let call = Call::new(op, problem, choice).in_place(mine);
        self.start::<[u8], R>(call.checked(checked), None, Some(recv))
    }

    /// Starts [`Self::allgather_in_place`] and returns its [`Request`].
    pub fn iallgather_in_place<'a, R>(&'a mut self, recv: &'a mut R) -> Result<Request<'a>>
    where
        R: PayloadMut + ?Sized,
    {
        let p = self.size();
        let len = recv.bytes().len();
        let checked = if len % p != 0 {
            Err(argument(
                "allgather",
                format!("recv of {len} bytes is not {p} equal blocks"),
            ))
        } else {
            Ok(())
        };
        let block = len / p;
        let problem = Problem::Allgather { p, block };
        let mine = (self.rank() * block, block);
        let call = Call::new("allgather", problem, Choice::Auto).in_place(mine);
        self.start::<[u8], R>(call.checked(checked), None, Some(recv))
    }

    /// Starts [`Self::allreduce`] and returns its [`Request`].
    pub fn iallreduce<'a, T: Element>(
        &'a mut self,
        send: &'a [T],
        recv: &'a mut [T],
        op: ReduceOp,
    ) -> Result<Request<'a>> {
        self.iallreduce_using(send, recv, op, Choice::Auto)
    }

    /// Starts [`Self::allreduce_using`] and returns its [`Request`].
    pub fn iallreduce_using<'a, T: Element>(
        &'a mut self,
        send: &'a [T],
        recv: &'a mut [T],
        op: ReduceOp,
        choice: Choice<'a>,
    ) -> Result<Request<'a>> {
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.iallreduce_bytes::<[u8], [u8]>(send, recv, typed::<T>(op), choice)
    }

    /// Starts [`Self::allreduce_bytes`] and returns its [`Request`].
    pub fn iallreduce_bytes<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        reduction: Reduction,
        choice: Choice<'a>,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let bytes = send.bytes().len();
        let checked = expect_len("allreduce", "recv", recv.bytes().len(), Some(bytes));
        let problem = Problem::Allreduce {
            p: self.size(),
            reduction,
            bytes,
        };
        let call = Call::new("allreduce", problem, choice);
        self.start(call.checked(checked), Some(send), Some(recv))
    }

    /// Starts [`Self::reduce`] and returns its [`Request`].
    pub fn ireduce<'a, T: Element>(
        &'a mut self,
        send: &'a [T],
        recv: &'a mut [T],
        op: ReduceOp,
        root: usize,
    ) -> Result<Request<'a>> {
        self.ireduce_using(send, recv, op, root, Choice::Auto)
    }

    /// Starts [`Self::reduce_using`] and returns its [`Request`].
    pub fn ireduce_using<'a, T: Element>(
        &'a mut self,
        send: &'a [T],
        recv: &'a mut [T],
        op: ReduceOp,
        root: usize,
        choice: Choice<'a>,
    ) -> Result<Request<'a>> {
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.ireduce_bytes::<[u8], [u8]>(send, recv, typed::<T>(op), root, choice)
    }

    /// Starts [`Self::reduce_bytes`] and returns its [`Request`].
    pub fn ireduce_bytes<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        reduction: Reduction,
        root: usize,
        choice: Choice<'a>,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let bytes = send.bytes().len();
        let checked = if self.rank() == root {
            expect_len("reduce", "recv", recv.bytes().len(), Some(bytes))
        } else {
            Ok(())
        };
        let problem = Problem::Reduce {
            p: self.size(),
            root,
            reduction,
            bytes,
        };
        let call = Call::new("reduce", problem, choice);
        self.start(call.checked(checked), Some(send), Some(recv))
    }

    /// Starts [`Self::scan`] and returns its [`Request`].
    pub fn iscan<'a, T: Element>(
        &'a mut self,
        send: &'a [T],
        recv: &'a mut [T],
        op: ReduceOp,
    ) -> Result<Request<'a>> {
        self.iscan_using(send, recv, op, Choice::Auto)
    }

    /// Starts [`Self::scan_using`] and returns its [`Request`].
    pub fn iscan_using<'a, T: Element>(
        &'a mut self,
        send: &'a [T],
        recv: &'a mut [T],
        op: ReduceOp,
        choice: Choice<'a>,
    ) -> Result<Request<'a>> {
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.iscan_bytes::<[u8], [u8]>(send, recv, typed::<T>(op), false, choice)
    }

    /// Starts [`Self::exscan`] and returns its [`Request`].
    pub fn iexscan<'a, T: Element>(
        &'a mut self,
        send: &'a [T],
        recv: &'a mut [T],
        op: ReduceOp,
    ) -> Result<Request<'a>> {
        self.iexscan_using(send, recv, op, Choice::Auto)
    }

    /// Starts [`Self::exscan_using`] and returns its [`Request`].
    pub fn iexscan_using<'a, T: Element>(
        &'a mut self,
        send: &'a [T],
        recv: &'a mut [T],
        op: ReduceOp,
        choice: Choice<'a>,
    ) -> Result<Request<'a>> {
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.iscan_bytes::<[u8], [u8]>(send, recv, typed::<T>(op), true, choice)
    }

    /// Starts [`Self::scan_bytes`] and returns its [`Request`].
    pub fn iscan_bytes<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        reduction: Reduction,
        exclusive: bool,
        choice: Choice<'a>,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let name = if exclusive { "exscan" } else { "scan" };
        let bytes = send.bytes().len();
        let checked = expect_len(name, "recv", recv.bytes().len(), Some(bytes));
        let problem = Problem::Scan {
            p: self.size(),
            reduction,
            bytes,
            exclusive,
        };
        let copy_in = exclusive && self.rank() == 0;
        let call = Call::new(name, problem, choice).copy_in(copy_in);
        self.start(call.checked(checked), Some(send), Some(recv))
    }

    /// Starts [`Self::gather`] and returns its [`Request`].
    pub fn igather<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        root: usize,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.igather_using(send, recv, root, Choice::Auto)
    }

    /// Starts [`Self::gather_using`] and returns its [`Request`].
    pub fn igather_using<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        root: usize,
        choice: Choice<'a>,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let (p, block) = (self.size(), send.bytes().len());
        let checked = if self.rank() == root {
            expect_len("gather", "recv", recv.bytes().len(), p.checked_mul(block))
        } else {
            Ok(())
        };
        let problem = Problem::Gather { p, root, block };
        let call = Call::new("gather", problem, choice);
        self.start(call.checked(checked), Some(send), Some(recv))
    }

    /// Starts [`Self::scatter`] and returns its [`Request`].
    pub fn iscatter<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        root: usize,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.iscatter_using(send, recv, root, Choice::Auto)
    }

    /// Starts [`Self::scatter_using`] and returns its [`Request`].
    pub fn iscatter_using<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        root: usize,
        choice: Choice<'a>,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let (p, block) = (self.size(), recv.bytes().len());
        let checked = if self.rank() == root {
            expect_len("scatter", "send", send.bytes().len(), p.checked_mul(block))
        } else {
            Ok(())
        };
        let problem = Problem::Scatter { p, root, block };
        let call = Call::new("scatter", problem, choice);
        self.start(call.checked(checked), Some(send), Some(recv))
    }

    /// Starts [`Self::gatherv`] and returns its [`Request`].
    pub fn igatherv<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        counts: &[usize],
        root: usize,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.igatherv_using(send, recv, counts, root, Choice::Auto)
    }

    /// Starts [`Self::gatherv_using`] and returns its [`Request`].
    pub fn igatherv_using<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        counts: &[usize],
        root: usize,
        choice: Choice<'a>,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let op = "gatherv";
        let problem = Problem::Gatherv {
            root,
            counts: counts.to_vec(),
        };
        let own = ("send", send.bytes().len());
        let whole = ("recv", recv.bytes().len());
        let checked = self.check_rooted(op, counts, root, own, whole);
        self.start(
            Call::new(op, problem, choice).checked(checked),
            Some(send),
            Some(recv),
        )
    }

    /// Starts [`Self::scatterv`] and returns its [`Request`].
    pub fn iscatterv<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        counts: &[usize],
        root: usize,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.iscatterv_using(send, recv, counts, root, Choice::Auto)
    }

    /// Starts [`Self::scatterv_using`] and returns its [`Request`].
    pub fn iscatterv_using<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        counts: &[usize],
        root: usize,
        choice: Choice<'a>,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let op = "scatterv";
        let problem = Problem::Scatterv {
            root,
            counts: counts.to_vec(),
        };
        let own = ("recv", recv.bytes().len());
        let whole = ("send", send.bytes().len());
        let checked = self.check_rooted(op, counts, root, own, whole);
        self.start(
            Call::new(op, problem, choice).checked(checked),
            Some(send),
            Some(recv),
        )
    }

    /// Starts [`Self::alltoall`] and returns its [`Request`].
    pub fn ialltoall<'a, S, R>(&'a mut self, send: &'a S, recv: &'a mut R) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.ialltoall_using(send, recv, Choice::Auto)
    }

    /// Starts [`Self::alltoall_using`] and returns its [`Request`].
    pub fn ialltoall_using<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        choice: Choice<'a>,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let p = self.size();
        let len = send.bytes().len();
        let checked = if len % p != 0 {
            Err(argument(
                "alltoall",
                format!("send of {len} bytes is not {p} equal blocks"),
            ))
        } else {
            expect_len("alltoall", "recv", recv.bytes().len(), Some(len))
        };
        let problem = Problem::Alltoall { p, block: len / p };
        let call = Call::new("alltoall", problem, choice);
        self.start(call.checked(checked), Some(send), Some(recv))
    }
}
