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

use crate::fabric::RegisteredMemory;
use crate::plan::{Problem, ReduceOp, Reduction};
use crate::transport::{Buffers, Operation, Transport, TransportError, View};

use super::{argument, digest, ensure, expect_len, Choice, Communicator, Executed};
use super::{Element, Payload, PayloadMut, Result};

/// Where the plan's send buffer is.
#[derive(Clone, Copy)]
enum SendSource<'a> {
    /// The plan sends nothing.
    None,
    /// The caller's registered buffer, `len` bytes of it.
    Registered(&'a RegisteredMemory, usize),
    /// The communicator's send staging memory, `len` bytes of it.
    Staged(usize),
    /// (offset, length) within the receive buffer (in place).
    InRecv(usize, usize),
}

/// Where the plan's receive buffer is.
enum RecvTarget<'a> {
    /// The plan receives nothing.
    None,
    Registered(&'a RegisteredMemory),
    /// The communicator's receive staging memory, copied into `user` when complete.
    Staged(&'a mut [u8]),
}

/// Where a request stands.
enum State {
    Running(Box<Operation>),
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
    send: SendSource<'a>,
    recv: RecvTarget<'a>,
    recv_len: usize,
    scratch_len: usize,
    /// Bytes staged in so far; staged out bytes are added at completion.
    copied: usize,
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
    /// Progresses the operation without blocking; `true` once it is complete (the results
    /// are then in the receive buffer). Past the deadline, counted from the start, it fails.
    pub fn test(&mut self) -> Result<bool> {
        let operation = match &mut self.state {
            State::Running(operation) => operation,
            State::Done => return Ok(true),
            State::Failed(why) => return Err(TransportError::Broken(why.clone()).into()),
        };
        let (transport, owned) = split(self.comm);
        let buffers = views(
            self.send,
            &self.recv,
            self.recv_len,
            self.scratch_len,
            owned,
        );
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
        let buffers = views(
            self.send,
            &self.recv,
            self.recv_len,
            self.scratch_len,
            owned,
        );
        let stats = match transport.finish(*operation, buffers) {
            Ok(stats) => stats,
            Err(err) => {
                self.state = State::Failed(err.to_string());
                return Err(err.into());
            }
        };
        let comm = &mut *self.comm;
        if let (RecvTarget::Staged(user), Some(stage)) = (&mut self.recv, &comm.stage_recv) {
            stage.read(0, user)?;
            self.copied += user.len();
        }
        comm.transport.count_copied(self.copied);
        comm.last = Some(Executed {
            algorithm: self.algorithm,
            stats,
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

/// The communicator's own memory an operation may use.
#[derive(Clone, Copy)]
struct Owned<'x> {
    stage_send: Option<&'x RegisteredMemory>,
    stage_recv: Option<&'x RegisteredMemory>,
    scratch: Option<&'x RegisteredMemory>,
}

/// The transport's view of a request's buffers.
fn views<'x>(
    send: SendSource<'x>,
    recv: &RecvTarget<'x>,
    recv_len: usize,
    scratch_len: usize,
    owned: Owned<'x>,
) -> Buffers<'x> {
    let recv_view = match recv {
        RecvTarget::None => None,
        RecvTarget::Registered(mem) => Some(View::prefix(mem, recv_len)),
        RecvTarget::Staged(_) => owned.stage_recv.map(|m| View::prefix(m, recv_len)),
    };
    let send_view = match send {
        SendSource::None => None,
        SendSource::Registered(mem, len) => Some(View::prefix(mem, len)),
        SendSource::Staged(len) => owned.stage_send.map(|m| View::prefix(m, len)),
        SendSource::InRecv(offset, len) => recv_view.map(|v| View {
            mem: v.mem,
            offset: v.offset + offset,
            len,
        }),
    };
    Buffers {
        send: send_view,
        recv: recv_view,
        scratch: owned.scratch.map(|m| View::prefix(m, scratch_len)),
    }
}

/// What a collective call asks for, once its arguments are checked.
pub(super) struct Call<'a, S: ?Sized, R: ?Sized> {
    pub op: &'static str,
    pub problem: Problem,
    pub choice: Choice<'a>,
    pub send: Option<&'a S>,
    pub recv: Option<&'a mut R>,
    /// The receive buffer holds input too (the root's broadcast data, rank 0's exscan).
    pub copy_in_recv: bool,
    /// In place: (offset, length) of this rank's send data within the receive buffer.
    pub send_in_recv: Option<(usize, usize)>,
}

impl<'a, S: ?Sized, R: ?Sized> Call<'a, S, R> {
    fn new(op: &'static str, problem: Problem, choice: Choice<'a>) -> Self {
        Call {
            op,
            problem,
            choice,
            send: None,
            recv: None,
            copy_in_recv: false,
            send_in_recv: None,
        }
    }

    fn send(mut self, send: &'a S) -> Self {
        self.send = Some(send);
        self
    }

    fn recv(mut self, recv: &'a mut R) -> Self {
        self.recv = Some(recv);
        self
    }
}

impl Communicator {
    /// Chooses and plans `call`, stages what is not registered, and starts the operation.
    pub(super) fn start<'a, S, R>(&'a mut self, call: Call<'a, S, R>) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let Call {
            op,
            problem,
            choice,
            send,
            recv,
            copy_in_recv,
            send_in_recv,
        } = call;
        let algorithm = self.choose(&problem, choice)?;
        let plan = algorithm.rank_plan(self.rank())?;
        let need = plan.buffers;
        let digest = digest(op, algorithm.name(), &problem);
        ensure(&self.transport, &mut self.scratch, need.scratch)?;
        let mut copied = 0usize;

        let send_source = match (send, send_in_recv) {
            _ if need.send == 0 => SendSource::None,
            (_, Some((offset, len))) => SendSource::InRecv(offset, len),
            (Some(s), None) if s.registered().is_some() => match s.registered() {
                Some(mem) => SendSource::Registered(mem, s.bytes().len()),
                None => SendSource::None,
            },
            (s, None) => {
                let bytes = s.map_or(&[][..], |s| s.bytes());
                let part = &bytes[..need.send.min(bytes.len())];
                ensure(&self.transport, &mut self.stage_send, need.send)?;
                if let Some(stage) = &self.stage_send {
                    stage.store(0, part)?;
                }
                copied += part.len();
                SendSource::Staged(need.send)
            }
        };

        // Only what the plan receives is staged: a rank that receives nothing (a non-root of
        // reduce or gather) keeps its buffer as it was.
        let recv_len = need.recv;
        let recv_target = match recv {
            _ if recv_len == 0 => RecvTarget::None,
            None => RecvTarget::None,
            Some(r) if r.registered().is_some_and(|m| m.len() >= recv_len) => {
                let r: &'a R = r;
                match r.registered() {
                    Some(mem) => RecvTarget::Registered(mem),
                    None => RecvTarget::None,
                }
            }
            Some(r) => {
                let user = r.bytes_mut();
                let part = recv_len.min(user.len());
                ensure(&self.transport, &mut self.stage_recv, recv_len)?;
                if let Some(stage) = &self.stage_recv {
                    match send_in_recv {
                        // In place: only this rank's part is input, the plan writes the rest.
                        Some((offset, len)) => {
                            let mine = user.get(offset..offset + len).ok_or_else(|| {
                                argument(op, "the in-place part lies outside recv".to_string())
                            })?;
                            stage.store(offset, mine)?;
                            copied += len;
                        }
                        None if copy_in_recv => {
                            stage.store(0, &user[..part])?;
                            copied += part;
                        }
                        None => {}
                    }
                }
                RecvTarget::Staged(&mut user[..part])
            }
        };

        let prepared = self.transport.prepare(op, plan)?;
        let (transport, owned) = split(self);
        let buffers = views(send_source, &recv_target, recv_len, need.scratch, owned);
        let operation = transport.start(op, digest, &prepared, buffers)?;
        Ok(Request {
            comm: self,
            op,
            algorithm: algorithm.name(),
            state: State::Running(Box::new(operation)),
            send: send_source,
            recv: recv_target,
            recv_len,
            scratch_len: need.scratch,
            copied,
        })
    }

    /// Starts a barrier ([`Self::barrier`]).
    pub fn ibarrier(&mut self) -> Result<Request<'_>> {
        let problem = Problem::Barrier { p: self.size() };
        self.start::<[u8], [u8]>(Call::new("barrier", problem, Choice::Auto))
    }

    /// Starts a broadcast ([`Self::bcast`]).
    pub fn ibcast<'a, B>(&'a mut self, buf: &'a mut B, root: usize) -> Result<Request<'a>>
    where
        B: PayloadMut + ?Sized,
    {
        self.ibcast_using(buf, root, Choice::Auto)
    }

    pub fn ibcast_using<'a, B>(
        &'a mut self,
        buf: &'a mut B,
        root: usize,
        choice: Choice<'a>,
    ) -> Result<Request<'a>>
    where
        B: PayloadMut + ?Sized,
    {
        let problem = Problem::Broadcast {
            p: self.size(),
            root,
            bytes: buf.bytes().len(),
        };
        let mut call = Call::<[u8], B>::new("bcast", problem, choice).recv(buf);
        call.copy_in_recv = self.rank() == root;
        self.start(call)
    }

    /// Starts an allgather ([`Self::allgather`]).
    pub fn iallgather<'a, S, R>(&'a mut self, send: &'a S, recv: &'a mut R) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let (p, block) = (self.size(), send.bytes().len());
        let want = p.checked_mul(block);
        expect_len("allgather", "recv", recv.bytes().len(), want)?;
        let problem = Problem::Allgather { p, block };
        self.start(
            Call::new("allgather", problem, Choice::Auto)
                .send(send)
                .recv(recv),
        )
    }

    /// Starts an allgatherv ([`Self::allgatherv`]).
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
        let op = "allgatherv";
        self.check_counts(op, counts, recv.bytes().len())?;
        expect_len(op, "send", send.bytes().len(), Some(counts[self.rank()]))?;
        let problem = Problem::Allgatherv {
            counts: counts.to_vec(),
        };
        self.start(Call::new(op, problem, Choice::Auto).send(send).recv(recv))
    }

    /// Starts an in-place allgatherv ([`Self::allgatherv_in_place`]).
    pub fn iallgatherv_in_place<'a, R>(
        &'a mut self,
        recv: &'a mut R,
        counts: &[usize],
    ) -> Result<Request<'a>>
    where
        R: PayloadMut + ?Sized,
    {
        let op = "allgatherv";
        self.check_counts(op, counts, recv.bytes().len())?;
        let offset: usize = counts[..self.rank()].iter().sum();
        let problem = Problem::Allgatherv {
            counts: counts.to_vec(),
        };
        let mut call = Call::<[u8], R>::new(op, problem, Choice::Auto).recv(recv);
        call.send_in_recv = Some((offset, counts[self.rank()]));
        self.start(call)
    }

    /// Starts an in-place allgather ([`Self::allgather_in_place`]).
    pub fn iallgather_in_place<'a, R>(&'a mut self, recv: &'a mut R) -> Result<Request<'a>>
    where
        R: PayloadMut + ?Sized,
    {
        let p = self.size();
        let len = recv.bytes().len();
        if len % p != 0 {
            return Err(argument(
                "allgather",
                format!("recv of {len} bytes is not {p} equal blocks"),
            ));
        }
        let block = len / p;
        let problem = Problem::Allgather { p, block };
        let mut call = Call::<[u8], R>::new("allgather", problem, Choice::Auto).recv(recv);
        call.send_in_recv = Some((self.rank() * block, block));
        self.start(call)
    }

    /// Starts an allreduce ([`Self::allreduce`]).
    pub fn iallreduce<'a, T: Element>(
        &'a mut self,
        send: &'a [T],
        recv: &'a mut [T],
        op: ReduceOp,
    ) -> Result<Request<'a>> {
        let reduction = Reduction::new(T::DTYPE, op)?;
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.iallreduce_bytes::<[u8], [u8]>(send, recv, reduction)
    }

    /// [`Self::iallreduce`] over raw bytes holding elements of `reduction`'s type.
    pub fn iallreduce_bytes<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        reduction: Reduction,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let bytes = send.bytes().len();
        expect_len("allreduce", "recv", recv.bytes().len(), Some(bytes))?;
        let problem = Problem::Allreduce {
            p: self.size(),
            reduction,
            bytes,
        };
        self.start(
            Call::new("allreduce", problem, Choice::Auto)
                .send(send)
                .recv(recv),
        )
    }

    /// Starts a reduce ([`Self::reduce`]).
    pub fn ireduce<'a, T: Element>(
        &'a mut self,
        send: &'a [T],
        recv: &'a mut [T],
        op: ReduceOp,
        root: usize,
    ) -> Result<Request<'a>> {
        let reduction = Reduction::new(T::DTYPE, op)?;
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.ireduce_bytes::<[u8], [u8]>(send, recv, reduction, root)
    }

    pub fn ireduce_bytes<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        reduction: Reduction,
        root: usize,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let bytes = send.bytes().len();
        if self.rank() == root {
            expect_len("reduce", "recv", recv.bytes().len(), Some(bytes))?;
        }
        let p = self.size();
        let problem = Problem::Reduce {
            p,
            root,
            reduction,
            bytes,
        };
        self.start(
            Call::new("reduce", problem, Choice::Auto)
                .send(send)
                .recv(recv),
        )
    }

    /// Starts an inclusive scan ([`Self::scan`]).
    pub fn iscan<'a, T: Element>(
        &'a mut self,
        send: &'a [T],
        recv: &'a mut [T],
        op: ReduceOp,
    ) -> Result<Request<'a>> {
        let reduction = Reduction::new(T::DTYPE, op)?;
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.iscan_bytes::<[u8], [u8]>(send, recv, reduction, false)
    }

    /// Starts an exclusive scan ([`Self::exscan`]).
    pub fn iexscan<'a, T: Element>(
        &'a mut self,
        send: &'a [T],
        recv: &'a mut [T],
        op: ReduceOp,
    ) -> Result<Request<'a>> {
        let reduction = Reduction::new(T::DTYPE, op)?;
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.iscan_bytes::<[u8], [u8]>(send, recv, reduction, true)
    }

    pub fn iscan_bytes<'a, S, R>(
        &'a mut self,
        send: &'a S,
        recv: &'a mut R,
        reduction: Reduction,
        exclusive: bool,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let name = if exclusive { "exscan" } else { "scan" };
        let bytes = send.bytes().len();
        expect_len(name, "recv", recv.bytes().len(), Some(bytes))?;
        let problem = Problem::Scan {
            p: self.size(),
            reduction,
            bytes,
            exclusive,
        };
        let mut call = Call::new(name, problem, Choice::Auto).send(send).recv(recv);
        call.copy_in_recv = exclusive && self.rank() == 0;
        self.start(call)
    }

    /// Starts a gather ([`Self::gather`]).
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
        let (p, block) = (self.size(), send.bytes().len());
        if self.rank() == root {
            expect_len("gather", "recv", recv.bytes().len(), p.checked_mul(block))?;
        }
        let problem = Problem::Gather { p, root, block };
        self.start(
            Call::new("gather", problem, Choice::Auto)
                .send(send)
                .recv(recv),
        )
    }

    /// Starts a scatter ([`Self::scatter`]).
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
        let (p, block) = (self.size(), recv.bytes().len());
        if self.rank() == root {
            expect_len("scatter", "send", send.bytes().len(), p.checked_mul(block))?;
        }
        let problem = Problem::Scatter { p, root, block };
        self.start(
            Call::new("scatter", problem, Choice::Auto)
                .send(send)
                .recv(recv),
        )
    }

    /// Starts a gatherv ([`Self::gatherv`]).
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
        let op = "gatherv";
        let problem = Problem::Gatherv {
            root,
            counts: counts.to_vec(),
        };
        let total = self.check_rooted(op, &problem, counts)?;
        expect_len(op, "send", send.bytes().len(), Some(counts[self.rank()]))?;
        if self.rank() == root {
            expect_len(op, "recv", recv.bytes().len(), Some(total))?;
        }
        self.start(Call::new(op, problem, Choice::Auto).send(send).recv(recv))
    }

    /// Starts a scatterv ([`Self::scatterv`]).
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
        let op = "scatterv";
        let problem = Problem::Scatterv {
            root,
            counts: counts.to_vec(),
        };
        let total = self.check_rooted(op, &problem, counts)?;
        expect_len(op, "recv", recv.bytes().len(), Some(counts[self.rank()]))?;
        if self.rank() == root {
            expect_len(op, "send", send.bytes().len(), Some(total))?;
        }
        self.start(Call::new(op, problem, Choice::Auto).send(send).recv(recv))
    }

    /// Starts an all-to-all ([`Self::alltoall`]).
    pub fn ialltoall<'a, S, R>(&'a mut self, send: &'a S, recv: &'a mut R) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let p = self.size();
        let len = send.bytes().len();
        if len % p != 0 {
            return Err(argument(
                "alltoall",
                format!("send of {len} bytes is not {p} equal blocks"),
            ));
        }
        expect_len("alltoall", "recv", recv.bytes().len(), Some(len))?;
        let problem = Problem::Alltoall { p, block: len / p };
        self.start(
            Call::new("alltoall", problem, Choice::Auto)
                .send(send)
                .recv(recv),
        )
    }
}

/// The communicator's transport, and beside it the memory it owns.
fn split(comm: &mut Communicator) -> (&mut Transport, Owned<'_>) {
    let Communicator {
        transport,
        stage_send,
        stage_recv,
        scratch,
        ..
    } = comm;
    let owned = Owned {
        stage_send: stage_send.as_ref(),
        stage_recv: stage_recv.as_ref(),
        scratch: scratch.as_ref(),
    };
    (transport, owned)
}
