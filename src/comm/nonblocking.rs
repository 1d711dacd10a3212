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

use crate::plan::{ReduceOp, Reduction};
use crate::transport::{Operation, TransportError};

use super::arguments::typed;
use super::calls::Lengths;
use super::detached::Detached;
use super::phased::PhasedCall;
use super::segment::SegmentCall;
use super::staging::Placement as Placed;
use super::staging::{split, Placement};
use super::start::Started;
use super::{Choice, Communicator, Element, Executed, Payload, PayloadMut, Result};

/// Where a request stands.
// The running operation is kept inline: a box would cost an allocation on every call.
#[allow(clippy::large_enum_variant)]
enum State<'a> {
    Running(Operation),
    /// On the shared segment, with the buffers.
    Segment(SegmentCall<'a>),
    /// As node phases: steps on other communicators, and the receive buffer.
    Phases(Box<PhasedCall>, &'a mut [u8]),
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
    state: State<'a>,
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
            State::Running(_) | State::Segment(_) | State::Phases(..) => "running",
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

    /// The request of a call served on the shared segment.
    pub(super) fn on_segment(
        comm: &'a mut Communicator,
        op: &'static str,
        algorithm: &'static str,
        call: SegmentCall<'a>,
        overhead: std::time::Duration,
    ) -> Self {
        Self::without_plan(comm, op, algorithm, State::Segment(call), overhead)
    }

    /// The request of a call served as its node phases.
    pub(super) fn phased(
        comm: &'a mut Communicator,
        op: &'static str,
        algorithm: &'static str,
        call: PhasedCall,
        out: &'a mut [u8],
        overhead: std::time::Duration,
    ) -> Self {
        let state = State::Phases(Box::new(call), out);
        Self::without_plan(comm, op, algorithm, state, overhead)
    }

    /// A request whose call holds its buffers itself: nothing placed, nothing staged.
    fn without_plan(
        comm: &'a mut Communicator,
        op: &'static str,
        algorithm: &'static str,
        state: State<'a>,
        overhead: std::time::Duration,
    ) -> Self {
        Request {
            comm,
            op,
            algorithm,
            state,
            placement: Placed::empty(),
            copy_out: false,
            overhead,
        }
    }

    /// This request's started call without its buffers ([`Detached`]); one whose buffers
    /// were staged completes first.
    pub(super) fn detach(mut self) -> Result<Detached> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Running(operation) => match self.placement.shape() {
                Some(shape) => Ok(Detached::plan(operation, shape)),
                // Staged buffers cannot be given again: the call completes here (the node
                // phases' steps run on registered buffers and never take this way).
                None => {
                    self.state = State::Running(operation);
                    self.complete()?;
                    let stats = self.comm.last.as_ref().map(|e| e.stats);
                    Ok(Detached::completed(stats.unwrap_or_default()))
                }
            },
            State::Segment(call) => Ok(Detached::segment(call)),
            State::Phases(call, _) => Ok(Detached::phases(call)),
            State::Done => Ok(Detached::done()),
            State::Failed(why) => Err(TransportError::Broken(why).into()),
        }
    }

    /// Progresses the operation without blocking; `true` once it is complete (the results
    /// are then in the receive buffer). Past the deadline, counted from the start, it fails.
    pub fn test(&mut self) -> Result<bool> {
        let operation = match &mut self.state {
            State::Running(operation) => operation,
            State::Segment(call) => {
                return match self.comm.segment_progress(self.op, call, false) {
                    Ok(false) => Ok(false),
                    Ok(true) => self.complete().map(|()| true),
                    Err(err) => {
                        self.state = State::Failed(err.to_string());
                        Err(err)
                    }
                };
            }
            State::Phases(call, out) => {
                return match self.comm.phases_progress(self.op, call, out, false) {
                    Ok(false) => Ok(false),
                    Ok(true) => self.complete().map(|()| true),
                    Err(err) => {
                        self.state = State::Failed(err.to_string());
                        Err(err)
                    }
                };
            }
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

    /// [`Executed::overhead`] of the call.
    pub(super) fn overhead(&self) -> std::time::Duration {
        self.overhead
    }

    /// Drives the operation to its end, copies staged results out and records the run.
    fn complete(&mut self) -> Result<()> {
        let operation = match std::mem::replace(&mut self.state, State::Done) {
            State::Running(operation) => operation,
            State::Segment(mut call) => {
                if let Err(err) = self.comm.segment_progress(self.op, &mut call, true) {
                    self.state = State::Failed(err.to_string());
                    return Err(err);
                }
                let stats = self.comm.segment_done(&call);
                self.comm.last = Some(Executed {
                    algorithm: self.algorithm,
                    stats,
                    overhead: self.overhead,
                });
                return Ok(());
            }
            State::Phases(mut call, out) => {
                if let Err(err) = self.comm.phases_progress(self.op, &mut call, out, true) {
                    self.state = State::Failed(err.to_string());
                    return Err(err);
                }
                self.comm.last = Some(Executed {
                    algorithm: self.algorithm,
                    stats: crate::transport::OpStats::default(),
                    overhead: self.overhead,
                });
                return Ok(());
            }
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
        if matches!(
            self.state,
            State::Running(_) | State::Segment(_) | State::Phases(..)
        ) && !std::thread::panicking()
        {
            let _ = self.complete();
        }
    }
}

impl Communicator {
    /// Starts [`Self::barrier`] and returns its [`Request`].
    pub fn ibarrier(&mut self) -> Result<Request<'_>> {
        let call = self.barrier_call();
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
        let call = self.bcast_call(buf.bytes().len(), root, choice);
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
        let call = self.allgather_call(lengths(send, recv), choice);
        self.start(call, Some(send), Some(recv))
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
        let call = self.allgatherv_call(lengths(send, recv), counts, choice);
        self.start(call, Some(send), Some(recv))
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
        let call = self.allgatherv_in_place_call(recv.bytes().len(), counts, choice);
        self.start::<[u8], R>(call, None, Some(recv))
    }

    /// Starts [`Self::allgather_in_place`] and returns its [`Request`].
    pub fn iallgather_in_place<'a, R>(&'a mut self, recv: &'a mut R) -> Result<Request<'a>>
    where
        R: PayloadMut + ?Sized,
    {
        let call = self.allgather_in_place_call(recv.bytes().len());
        self.start::<[u8], R>(call, None, Some(recv))
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
        let call = self.allreduce_call(lengths(send, recv), reduction, choice);
        self.start(call, Some(send), Some(recv))
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
        let call = self.reduce_call(lengths(send, recv), reduction, root, choice);
        self.start(call, Some(send), Some(recv))
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
        let call = self.scan_call(lengths(send, recv), reduction, exclusive, choice);
        self.start(call, Some(send), Some(recv))
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
        let call = self.gather_call(lengths(send, recv), root, choice);
        self.start(call, Some(send), Some(recv))
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
        let call = self.scatter_call(lengths(send, recv), root, choice);
        self.start(call, Some(send), Some(recv))
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
        let call = self.gatherv_call(lengths(send, recv), counts, root, choice);
        self.start(call, Some(send), Some(recv))
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
        let call = self.scatterv_call(lengths(send, recv), counts, root, choice);
        self.start(call, Some(send), Some(recv))
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
        let call = self.alltoall_call(lengths(send, recv), choice);
        self.start(call, Some(send), Some(recv))
    }
}

/// The lengths of a call's buffers.
pub(super) fn lengths<S, R>(send: &S, recv: &R) -> Lengths
where
    S: Payload + ?Sized,
    R: Payload + ?Sized,
{
    Lengths {
        send: send.bytes().len(),
        recv: recv.bytes().len(),
    }
}
