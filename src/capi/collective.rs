//! One collective's C arguments ([`Collective`]), checked as far as they can be without the
//! communicator, and how it becomes the same call as the Rust forms build, on the C memory:
//! started once (blocking and nonblocking entry points) or planned once and started again
//! (persistent requests).

use std::ffi::{c_int, c_void};

use crate::comm::{Buffer, Call, Choice, Communicator, Lengths, Memory, Output, Request};
use crate::comm::{Input, Kept, ENGINES};
use crate::plan::{Dtype, ReduceOp, Reduction};

use super::collectives::{
    CIRCULANT_BAND, CIRCULANT_BOR, CIRCULANT_BXOR, CIRCULANT_FLOAT32, CIRCULANT_FLOAT64,
    CIRCULANT_INT32, CIRCULANT_INT64, CIRCULANT_MAX, CIRCULANT_MIN, CIRCULANT_PROD, CIRCULANT_SUM,
    CIRCULANT_UINT32, CIRCULANT_UINT64,
};
use super::handle::{Comm, EndLease};
use super::raw;
use super::status::{Failure, Outcome};

/// The address `CIRCULANT_IN_PLACE` stands for (see the header).
const IN_PLACE: usize = usize::MAX;

fn in_place(ptr: *const c_void) -> bool {
    ptr as usize == IN_PLACE
}

/// Which reduction.
#[derive(Clone, Copy)]
pub(super) enum Reducing {
    All,
    To(usize),
    Scan,
    Exscan,
}

/// One collective's C arguments, checked as far as they can be without the communicator.
pub(super) enum Collective {
    Barrier,
    Bcast {
        buf: *mut c_void,
        bytes: usize,
        root: usize,
    },
    Allgather {
        send: *const c_void,
        block: usize,
        recv: *mut c_void,
    },
    Allgatherv {
        send: *const c_void,
        send_bytes: usize,
        recv: *mut c_void,
        counts: Vec<usize>,
    },
    Reduce {
        which: Reducing,
        send: *const c_void,
        recv: *mut c_void,
        bytes: usize,
        reduction: Reduction,
        /// In place: a copy of the input taken at the start, kept while the operation runs.
        input: Box<[u8]>,
    },
    /// A reduce-scatter (`block`: of equal blocks); `counts` in elements per rank.
    ReduceScatter {
        send: *const c_void,
        recv: *mut c_void,
        counts: Vec<usize>,
        block: bool,
        reduction: Reduction,
        /// In place: a copy of the input taken at the start, kept while the operation runs.
        input: Box<[u8]>,
    },
    Gather {
        send: *const c_void,
        block: usize,
        recv: *mut c_void,
        root: usize,
    },
    Gatherv {
        send: *const c_void,
        send_bytes: usize,
        recv: *mut c_void,
        counts: Vec<usize>,
        root: usize,
    },
    Scatter {
        send: *const c_void,
        recv: *mut c_void,
        block: usize,
        root: usize,
    },
    Scatterv {
        send: *const c_void,
        counts: Vec<usize>,
        recv: *mut c_void,
        recv_bytes: usize,
        root: usize,
    },
    Alltoall {
        send: *const c_void,
        recv: *mut c_void,
        block: usize,
    },
}

/// Bytes the library reads: a registered buffer from `circulant_alloc`, or plain memory.
enum In {
    None,
    Plain(&'static [u8]),
    Registered(&'static Buffer),
}

impl In {
    fn len(&self) -> usize {
        match self {
            In::None => 0,
            In::Plain(bytes) => bytes.len(),
            In::Registered(buffer) => buffer.len(),
        }
    }
}

/// One collective's call on a communicator, and its memory.
struct Described {
    call: Call<'static>,
    send: In,
    recv: Option<Output<'static>>,
}

impl Described {
    /// The call, and its memory as the communicator takes it.
    fn memory(self) -> (Call<'static>, Memory<'static>) {
        let send = match self.send {
            In::None => None,
            In::Plain(bytes) => Some(Input {
                bytes,
                registered: None,
            }),
            In::Registered(buffer) => Some(Input::of(buffer)),
        };
        let memory = Memory {
            send,
            recv: self.recv,
        };
        (self.call, memory)
    }
}

/// The memory of one operation as it is claimed, read and written.
struct Claims<'c> {
    comm: &'c Comm,
    /// Byte ranges handed out so far, to refuse overlapping send and receive buffers.
    ranges: Vec<(usize, usize, &'static str)>,
}

impl Claims<'_> {
    fn claim(&mut self, ptr: *const c_void, len: usize, what: &'static str) -> Outcome {
        if len == 0 {
            return Ok(());
        }
        let (start, end) = (ptr as usize, (ptr as usize).saturating_add(len));
        if let Some((_, _, other)) = self.ranges.iter().find(|(s, e, _)| start < *e && *s < end) {
            return Err(Failure::argument(format!(
                "{what} overlaps {other} (use CIRCULANT_IN_PLACE)"
            )));
        }
        self.ranges.push((start, end, what));
        Ok(())
    }

    fn input(&mut self, ptr: *const c_void, len: usize, what: &'static str) -> Outcome<In> {
        self.claim(ptr, len, what)?;
        Ok(match raw::allocation(self.comm, ptr, len) {
            Some(buffer) => In::Registered(buffer),
            None => In::Plain(raw::bytes(ptr, len, what)?),
        })
    }

    fn output(
        &mut self,
        ptr: *mut c_void,
        len: usize,
        what: &'static str,
    ) -> Outcome<Option<Output<'static>>> {
        self.claim(ptr, len, what)?;
        Ok(Some(match raw::allocation(self.comm, ptr, len) {
            Some(buffer) => Output::Registered(buffer),
            None => Output::Plain(raw::bytes_mut(ptr, len, what)?),
        }))
    }
}

/// The lengths of a call's buffers.
fn lengths(send: &In, recv: &Option<Output<'_>>) -> Lengths {
    Lengths {
        send: send.len(),
        recv: recv.as_ref().map_or(0, |r| r.bytes().len()),
    }
}

impl Collective {
    /// Starts the operation on `comm`'s communicator, which stays lent to the request until
    /// it completes ([`Comm::end_lease`]). An in-place reduction's input is copied into the
    /// description, which must outlive the request.
    pub(super) fn start(&mut self, comm: &Comm) -> Outcome<Request<'static>> {
        let communicator = raw::lease(comm)?;
        let started = self.describe(communicator, comm).and_then(|d| {
            let (call, memory) = d.memory();
            Ok(Request::start(communicator, ENGINES, call, memory)?)
        });
        if started.is_err() {
            comm.end_lease();
        }
        started
    }

    /// Sets the call up once for a persistent request, as Rust's persistent requests are:
    /// its arguments are checked and its algorithm chosen (and planned) now, on this memory.
    pub(super) fn keep(&mut self, comm: &Comm) -> Outcome<Box<dyn Kept>> {
        comm.with(|communicator| {
            let (call, memory) = self.describe(communicator, comm)?.memory();
            Ok(ENGINES.keep(communicator, call, memory)?)
        })
    }

    /// Starts a persistent request's call again, as [`Self::start`] starts a call: the
    /// memory is looked at anew (registered or staged; an in-place reduction's input copied
    /// again), the call as it was set up.
    pub(super) fn restart(&mut self, comm: &Comm, kept: &dyn Kept) -> Outcome<Request<'static>> {
        let communicator = raw::lease(comm)?;
        let started = self.describe(communicator, comm).and_then(|d| {
            let (_, memory) = d.memory();
            Ok(Request::of_kept(communicator, kept, memory)?)
        });
        if started.is_err() {
            comm.end_lease();
        }
        started
    }

    /// The call of this collective on `c` and its memory.
    fn describe(&mut self, c: &Communicator, comm: &Comm) -> Outcome<Described> {
        let (rank, p) = (comm.rank(), comm.size());
        let mut mem = Claims {
            comm,
            ranges: Vec::new(),
        };
        let both = |call, send, recv| Described { call, send, recv };
        let in_recv = |call, recv| Described {
            call,
            send: In::None,
            recv,
        };
        let described = match self {
            Collective::Barrier => Described {
                call: c.barrier_call(Choice::Auto),
                send: In::None,
                recv: None,
            },
            Collective::Bcast { buf, bytes, root } => {
                let buf = mem.output(*buf, *bytes, "buf")?;
                in_recv(c.bcast_call(*bytes, *root, Choice::Auto), buf)
            }
            Collective::Allgather { send, block, recv } => {
                let total = times(*block, p, "recv")?;
                if in_place(*send) {
                    let recv = mem.output(*recv, total, "recv")?;
                    in_recv(c.allgather_in_place_call(total, Choice::Auto), recv)
                } else {
                    let send = mem.input(*send, *block, "send")?;
                    let recv = mem.output(*recv, total, "recv")?;
                    both(
                        c.allgather_call(lengths(&send, &recv), Choice::Auto),
                        send,
                        recv,
                    )
                }
            }
            Collective::Allgatherv {
                send,
                send_bytes,
                recv,
                counts,
            } => {
                let total = sum(counts)?;
                if in_place(*send) {
                    let recv = mem.output(*recv, total, "recv")?;
                    in_recv(
                        c.allgatherv_in_place_call(total, counts, Choice::Auto),
                        recv,
                    )
                } else {
                    let send = mem.input(*send, *send_bytes, "send")?;
                    let recv = mem.output(*recv, total, "recv")?;
                    let len = lengths(&send, &recv);
                    both(c.allgatherv_call(len, counts, Choice::Auto), send, recv)
                }
            }
            Collective::Reduce {
                which,
                send,
                recv,
                bytes,
                reduction,
                input,
            } => {
                // A non-root of reduce and rank 0 of exscan receive nothing: their recv may
                // be NULL.
                let receives = match which {
                    Reducing::To(root) => rank == *root,
                    Reducing::Exscan => rank != 0,
                    Reducing::All | Reducing::Scan => true,
                };
                let recv_len = if receives || !recv.is_null() {
                    *bytes
                } else {
                    0
                };
                let recv = mem.output(*recv, recv_len, "recv")?;
                let send = if in_place(*send) {
                    let current = recv.as_ref().map_or(&[][..], |r| r.bytes());
                    if current.len() != *bytes {
                        return Err(Failure::argument("CIRCULANT_IN_PLACE needs recv"));
                    }
                    *input = current.into();
                    In::Plain(raw::bytes(input.as_ptr().cast(), input.len(), "input")?)
                } else {
                    mem.input(*send, *bytes, "send")?
                };
                let (len, reduction) = (lengths(&send, &recv), *reduction);
                let call = match *which {
                    Reducing::All => c.allreduce_call(len, reduction, Choice::Auto),
                    Reducing::To(root) => c.reduce_call(len, reduction, root, Choice::Auto),
                    Reducing::Scan => c.scan_call(len, reduction, false, Choice::Auto),
                    Reducing::Exscan => c.scan_call(len, reduction, true, Choice::Auto),
                };
                both(call, send, recv)
            }
            Collective::ReduceScatter {
                send,
                recv,
                counts,
                block,
                reduction,
                input,
            } => {
                let size = reduction.dtype.size();
                let bytes = |count: usize| {
                    count
                        .checked_mul(size)
                        .ok_or_else(|| Failure::argument(format!("count {count} overflows")))
                };
                let total = bytes(sum(counts)?)?;
                let own = bytes(counts.get(rank).copied().unwrap_or(0))?;
                let send = if in_place(*send) {
                    // The whole vector is in recv; this rank's part lands at its start.
                    *input = raw::bytes(recv.cast_const(), total, "recv")?.into();
                    In::Plain(raw::bytes(input.as_ptr().cast(), input.len(), "input")?)
                } else {
                    mem.input(*send, total, "send")?
                };
                let recv = mem.output(*recv, own, "recv")?;
                let (len, reduction) = (lengths(&send, &recv), *reduction);
                let call = if *block {
                    c.reduce_scatter_block_call(len, reduction, Choice::Auto)
                } else {
                    c.reduce_scatter_call(len, reduction, counts, Choice::Auto)
                };
                both(call, send, recv)
            }
            Collective::Gather {
                send,
                block,
                recv,
                root,
            } => {
                let recv_len = if rank == *root {
                    times(*block, p, "recv")?
                } else {
                    0
                };
                let send = mem.input(*send, *block, "send")?;
                let recv = mem.output(*recv, recv_len, "recv")?;
                both(
                    c.gather_call(lengths(&send, &recv), *root, Choice::Auto),
                    send,
                    recv,
                )
            }
            Collective::Gatherv {
                send,
                send_bytes,
                recv,
                counts,
                root,
            } => {
                let recv_len = if rank == *root { sum(counts)? } else { 0 };
                let send = mem.input(*send, *send_bytes, "send")?;
                let recv = mem.output(*recv, recv_len, "recv")?;
                let len = lengths(&send, &recv);
                both(c.gatherv_call(len, counts, *root, Choice::Auto), send, recv)
            }
            Collective::Scatter {
                send,
                recv,
                block,
                root,
            } => {
                let send_len = if rank == *root {
                    times(*block, p, "send")?
                } else {
                    0
                };
                let send = mem.input(*send, send_len, "send")?;
                let recv = mem.output(*recv, *block, "recv")?;
                both(
                    c.scatter_call(lengths(&send, &recv), *root, Choice::Auto),
                    send,
                    recv,
                )
            }
            Collective::Scatterv {
                send,
                counts,
                recv,
                recv_bytes,
                root,
            } => {
                let send_len = if rank == *root { sum(counts)? } else { 0 };
                let send = mem.input(*send, send_len, "send")?;
                let recv = mem.output(*recv, *recv_bytes, "recv")?;
                let len = lengths(&send, &recv);
                both(
                    c.scatterv_call(len, counts, *root, Choice::Auto),
                    send,
                    recv,
                )
            }
            Collective::Alltoall { send, recv, block } => {
                let total = times(*block, p, "send")?;
                let send = mem.input(*send, total, "send")?;
                let recv = mem.output(*recv, total, "recv")?;
                both(
                    c.alltoall_call(lengths(&send, &recv), Choice::Auto),
                    send,
                    recv,
                )
            }
        };
        Ok(described)
    }

    /// Starts the operation and waits for it.
    pub(super) fn run(mut self, comm: &Comm) -> Outcome {
        let communicator = raw::lease(comm)?;
        let _end = EndLease(comm);
        let (call, memory) = self.describe(communicator, comm)?.memory();
        Ok(ENGINES.run(communicator, call, memory)?)
    }
}

fn times(block: usize, p: usize, what: &str) -> Outcome<usize> {
    block
        .checked_mul(p)
        .ok_or_else(|| Failure::argument(format!("{what}: {block} bytes × {p} ranks overflow")))
}

fn sum(counts: &[usize]) -> Outcome<usize> {
    crate::plan::checked_sum(counts).map_err(|_| Failure::argument("the counts overflow"))
}

/// A rank argument (root) as an index.
pub(super) fn rank_arg(value: c_int, what: &str) -> Outcome<usize> {
    usize::try_from(value).map_err(|_| Failure::argument(format!("{what} {value} is negative")))
}

/// A counts array: one `size_t` per rank of `comm`.
pub(super) fn counts_arg(comm: &Comm, counts: *const usize) -> Outcome<Vec<usize>> {
    Ok(raw::values(counts, comm.size(), "counts")?.to_vec())
}

/// A reduction from its C codes.
pub(super) fn reduction_arg(dtype: c_int, op: c_int) -> Outcome<Reduction> {
    let dtype = match dtype {
        CIRCULANT_INT32 => Dtype::I32,
        CIRCULANT_INT64 => Dtype::I64,
        CIRCULANT_UINT32 => Dtype::U32,
        CIRCULANT_UINT64 => Dtype::U64,
        CIRCULANT_FLOAT32 => Dtype::F32,
        CIRCULANT_FLOAT64 => Dtype::F64,
        other => return Err(Failure::argument(format!("unknown dtype {other}"))),
    };
    let op = match op {
        CIRCULANT_SUM => ReduceOp::Sum,
        CIRCULANT_PROD => ReduceOp::Prod,
        CIRCULANT_MIN => ReduceOp::Min,
        CIRCULANT_MAX => ReduceOp::Max,
        CIRCULANT_BAND => ReduceOp::Band,
        CIRCULANT_BOR => ReduceOp::Bor,
        CIRCULANT_BXOR => ReduceOp::Bxor,
        other => return Err(Failure::argument(format!("unknown op {other}"))),
    };
    Reduction::new(dtype, op).map_err(|e| Failure::argument(e.to_string()))
}

impl Collective {
    /// A reduction of `count` elements.
    pub(super) fn reducing(
        which: Reducing,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dtype: c_int,
        op: c_int,
    ) -> Outcome<Self> {
        let reduction = reduction_arg(dtype, op)?;
        let bytes = count
            .checked_mul(reduction.dtype.size())
            .ok_or_else(|| Failure::argument(format!("count {count} overflows")))?;
        Ok(Collective::Reduce {
            which,
            send,
            recv,
            bytes,
            reduction,
            input: Box::default(),
        })
    }

    /// A reduce-scatter of `recv_count` elements per rank.
    pub(super) fn reduce_scatter_block(
        comm: &Comm,
        send: *const c_void,
        recv: *mut c_void,
        recv_count: usize,
        dtype: c_int,
        op: c_int,
    ) -> Outcome<Self> {
        Ok(Collective::ReduceScatter {
            send,
            recv,
            counts: vec![recv_count; comm.size()],
            block: true,
            reduction: reduction_arg(dtype, op)?,
            input: Box::default(),
        })
    }

    /// A reduce-scatter of `recv_counts[r]` elements to rank r.
    pub(super) fn reduce_scatter(
        comm: &Comm,
        send: *const c_void,
        recv: *mut c_void,
        recv_counts: *const usize,
        dtype: c_int,
        op: c_int,
    ) -> Outcome<Self> {
        Ok(Collective::ReduceScatter {
            send,
            recv,
            counts: counts_arg(comm, recv_counts)?,
            block: false,
            reduction: reduction_arg(dtype, op)?,
            input: Box::default(),
        })
    }

    pub(super) fn bcast(buf: *mut c_void, bytes: usize, root: c_int) -> Outcome<Self> {
        Ok(Collective::Bcast {
            buf,
            bytes,
            root: rank_arg(root, "root")?,
        })
    }

    pub(super) fn allgather(send: *const c_void, block: usize, recv: *mut c_void) -> Self {
        Collective::Allgather { send, block, recv }
    }

    pub(super) fn allgatherv(
        comm: &Comm,
        send: *const c_void,
        send_bytes: usize,
        recv: *mut c_void,
        counts: *const usize,
    ) -> Outcome<Self> {
        Ok(Collective::Allgatherv {
            send,
            send_bytes,
            recv,
            counts: counts_arg(comm, counts)?,
        })
    }

    pub(super) fn gather(
        send: *const c_void,
        block: usize,
        recv: *mut c_void,
        root: c_int,
    ) -> Outcome<Self> {
        let root = rank_arg(root, "root")?;
        Ok(Collective::Gather {
            send,
            block,
            recv,
            root,
        })
    }

    pub(super) fn gatherv(
        comm: &Comm,
        send: *const c_void,
        send_bytes: usize,
        recv: *mut c_void,
        counts: *const usize,
        root: c_int,
    ) -> Outcome<Self> {
        let root = rank_arg(root, "root")?;
        let counts = counts_arg(comm, counts)?;
        Ok(Collective::Gatherv {
            send,
            send_bytes,
            recv,
            counts,
            root,
        })
    }

    pub(super) fn scatter(
        send: *const c_void,
        recv: *mut c_void,
        block: usize,
        root: c_int,
    ) -> Outcome<Self> {
        let root = rank_arg(root, "root")?;
        Ok(Collective::Scatter {
            send,
            recv,
            block,
            root,
        })
    }

    pub(super) fn scatterv(
        comm: &Comm,
        send: *const c_void,
        counts: *const usize,
        recv: *mut c_void,
        recv_bytes: usize,
        root: c_int,
    ) -> Outcome<Self> {
        let root = rank_arg(root, "root")?;
        let counts = counts_arg(comm, counts)?;
        Ok(Collective::Scatterv {
            send,
            counts,
            recv,
            recv_bytes,
            root,
        })
    }

    pub(super) fn alltoall(send: *const c_void, recv: *mut c_void, block: usize) -> Self {
        Collective::Alltoall { send, recv, block }
    }
}
