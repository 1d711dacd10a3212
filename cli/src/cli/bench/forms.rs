//! The forms of the calls `circulant bench` measures (blocking, nonblocking, persistent, and
//! nonblocking calls overlapped with a computation) and the repetitions of one algorithm on one
//! cell in a form: the first call checked, the warm-up calls, then the timed repetitions
//! through the common-start [`Window`].

use std::time::{Duration, Instant};

use circulant::comm::{Buffer, Choice, CommError, Communicator, Persistent};
use circulant_cli::cases::CaseData;

use super::measure::{int32_sum, Op, AUTO};
use super::timing::{OnComm, Window};
use super::Args;

/// Which form of the collectives a bench measures.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Form {
    /// The blocking calls.
    Blocking,
    /// The nonblocking ones, started and then waited for.
    Nonblocking,
    /// A persistent request per algorithm and size, made once and run at each repetition.
    Persistent,
    /// The nonblocking ones alone, a computation alone, then both: started, the
    /// computation, then waited for.
    Overlap,
}

impl Form {
    pub(super) fn of(args: &Args) -> Self {
        if args.persistent {
            Form::Persistent
        } else if args.overlap {
            Form::Overlap
        } else if args.nonblocking {
            Form::Nonblocking
        } else {
            Form::Blocking
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Form::Blocking => "blocking",
            Form::Nonblocking => "nonblocking",
            Form::Persistent => "persistent",
            Form::Overlap => "overlap",
        }
    }

    /// Where the planning time is.
    pub(super) fn plan(self) -> &'static str {
        match self {
            Form::Persistent => "made once per request, before the repetitions",
            _ => "included in the time",
        }
    }
}

/// The repetitions of one algorithm on one cell.
pub(super) struct Repeated<'a> {
    pub op: Op,
    pub counts: &'a [usize],
    pub root: usize,
    pub name: &'static str,
    pub warmup: u32,
    pub reps: u32,
}

/// What the repetitions of one algorithm gave on this rank.
pub(super) struct Timed {
    /// Wrong bytes (or elements) of the first call.
    pub wrong: u64,
    /// The algorithm the call took (the automatic choice's, where it was asked for).
    pub taken: &'static str,
    pub times: Vec<f64>,
    pub overheads: Vec<f64>,
    /// With [`Form::Overlap`] (`times` are then those of both together): the call alone and
    /// the computation alone.
    pub overlap: Option<Overlapped>,
}

/// The other two series of an overlap measurement, each the slowest rank's per repetition.
pub(super) struct Overlapped {
    pub alone: Vec<f64>,
    pub compute: Vec<f64>,
}

/// What one repetition runs: a call of each form, on the communicator or a persistent
/// request.
trait Target: OnComm {
    /// One call (or start and wait).
    fn call(&mut self, cell: &Repeated<'_>) -> Result<(), CommError>;
    /// The receive buffer (the broadcast's buffer).
    fn received(&self) -> Result<&[u8], CommError>;
}

/// The blocking or nonblocking calls on the communicator.
struct Calls<'a> {
    comm: &'a mut Communicator,
    send: &'a Buffer,
    recv: &'a mut Buffer,
    nonblocking: bool,
    /// A computation this long between the start of a nonblocking call and its wait.
    compute: Option<Duration>,
}

impl OnComm for Calls<'_> {
    fn on_comm(&mut self) -> Result<&mut Communicator, CommError> {
        Ok(self.comm)
    }
}

impl Target for Calls<'_> {
    fn call(&mut self, cell: &Repeated<'_>) -> Result<(), CommError> {
        let (comm, send, recv) = (&mut *self.comm, self.send, &mut *self.recv);
        let (root, counts, choice) = (cell.root, cell.counts, cell.choice());
        if self.nonblocking {
            let request = match cell.op {
                Op::Bcast => comm.choosing(choice).ibcast(recv, root),
                Op::Allgather => comm.choosing(choice).iallgather(send, recv),
                Op::Allgatherv => comm.choosing(choice).iallgatherv(send, recv, counts),
                Op::Allreduce => comm
                    .choosing(choice)
                    .iallreduce_bytes(send, recv, int32_sum()),
                Op::Reduce => comm
                    .choosing(choice)
                    .ireduce_bytes(send, recv, int32_sum(), root),
                Op::ReduceScatterBlock => {
                    comm.choosing(choice)
                        .ireduce_scatter_block_bytes(send, recv, int32_sum())
                }
                Op::ReduceScatter => {
                    comm.choosing(choice)
                        .ireduce_scatter_bytes(send, recv, int32_sum(), counts)
                }
            };
            let request = request?;
            if let Some(length) = self.compute {
                compute(length);
            }
            return request.wait();
        }
        match cell.op {
            Op::Bcast => comm.choosing(choice).bcast(recv, root),
            Op::Allgather => comm.choosing(choice).allgather(send, recv),
            Op::Allgatherv => comm.choosing(choice).allgatherv(send, recv, counts),
            Op::Allreduce => comm
                .choosing(choice)
                .allreduce_bytes(send, recv, int32_sum()),
            Op::Reduce => comm
                .choosing(choice)
                .reduce_bytes(send, recv, int32_sum(), root),
            Op::ReduceScatterBlock => {
                comm.choosing(choice)
                    .reduce_scatter_block_bytes(send, recv, int32_sum())
            }
            Op::ReduceScatter => {
                comm.choosing(choice)
                    .reduce_scatter_bytes(send, recv, int32_sum(), counts)
            }
        }
    }

    fn received(&self) -> Result<&[u8], CommError> {
        Ok(self.recv)
    }
}

impl Target for Persistent<'_, '_> {
    fn call(&mut self, _: &Repeated<'_>) -> Result<(), CommError> {
        self.run()
    }

    fn received(&self) -> Result<&[u8], CommError> {
        self.buffer()
    }
}

impl Repeated<'_> {
    fn choice(&self) -> Choice<'static> {
        if self.name == AUTO {
            Choice::Auto
        } else {
            Choice::Named(self.name)
        }
    }

    /// Every repetition in `form`: a persistent request is made first (outside the timing,
    /// as a program makes it before its loop), then run at each repetition.
    pub(super) fn measure(
        &self,
        comm: &mut Communicator,
        window: &mut Window,
        (send, recv): (&mut Buffer, &mut Buffer),
        data: &CaseData,
        form: Form,
    ) -> Result<Timed, CommError> {
        let nonblocking = match form {
            Form::Persistent => {
                let choice = self.choice();
                let mut request = match self.op {
                    Op::Bcast => comm.choosing(choice).bcast_init(recv, self.root),
                    Op::Allgather => comm.choosing(choice).allgather_init(send, recv),
                    Op::Allgatherv => {
                        comm.choosing(choice)
                            .allgatherv_init(send, recv, self.counts)
                    }
                    Op::Allreduce => {
                        comm.choosing(choice)
                            .allreduce_init_bytes(send, recv, int32_sum())
                    }
                    Op::Reduce => {
                        comm.choosing(choice)
                            .reduce_init_bytes(send, recv, int32_sum(), self.root)
                    }
                    Op::ReduceScatterBlock => comm
                        .choosing(choice)
                        .reduce_scatter_block_init_bytes(send, recv, int32_sum()),
                    Op::ReduceScatter => comm.choosing(choice).reduce_scatter_init_bytes(
                        send,
                        recv,
                        int32_sum(),
                        self.counts,
                    ),
                }?;
                return self.repeat(&mut request, window, data);
            }
            Form::Blocking => false,
            Form::Nonblocking | Form::Overlap => true,
        };
        let mut calls = Calls {
            comm,
            send,
            recv,
            nonblocking,
            compute: None,
        };
        let alone = self.repeat(&mut calls, window, data)?;
        if form != Form::Overlap {
            return Ok(alone);
        }
        // The computation as long as the call's least time alone (the same on every rank: each
        // repetition's time is the slowest rank's).
        let least = alone.times.iter().copied().fold(f64::INFINITY, f64::min);
        let length = Duration::from_secs_f64(if least.is_finite() { least } else { 0.0 });
        let mut computed = Vec::with_capacity(self.reps as usize);
        for _ in 0..self.reps {
            computed.push(window.time(&mut calls, &mut |_| {
                compute(length);
                Ok(())
            })?);
        }
        calls.compute = Some(length);
        let both = self.repeat(&mut calls, window, data)?;
        Ok(Timed {
            wrong: alone.wrong + both.wrong,
            overlap: Some(Overlapped {
                alone: alone.times,
                compute: computed,
            }),
            ..both
        })
    }

    /// The first call (its data checked, the algorithm it took read), the warm-up calls,
    /// then the timed repetitions.
    fn repeat<X: Target>(
        &self,
        target: &mut X,
        window: &mut Window,
        data: &CaseData,
    ) -> Result<Timed, CommError> {
        target.call(self)?;
        let comm = target.on_comm()?;
        let me = comm.rank();
        // The automatic choice is named by what it took (alike on every rank).
        let taken = match comm.last() {
            Some(executed) if self.name == AUTO => executed.algorithm,
            _ => self.name,
        };
        let wrong = data.wrong(me, target.received()?);
        for _ in 1..self.warmup {
            target.call(self)?;
        }
        let mut times = Vec::with_capacity(self.reps as usize);
        let mut overheads = Vec::with_capacity(self.reps as usize);
        for _ in 0..self.reps {
            // The window's own collectives run before and after the call: its overhead is
            // read as soon as it returns.
            let mut timed = |x: &mut X| {
                x.call(self)?;
                overheads.extend(x.on_comm()?.last().map(|e| e.overhead.as_secs_f64()));
                Ok(())
            };
            times.push(window.time(target, &mut timed)?);
        }
        Ok(Timed {
            wrong,
            taken,
            times,
            overheads,
            overlap: None,
        })
    }
}

/// A computation that keeps this core busy for `length` (sums over a small array, the clock
/// read between rounds of them), as a program computes between starting a collective and
/// waiting for it.
fn compute(length: Duration) {
    let start = Instant::now();
    let mut data = [1.0f64; 256];
    while start.elapsed() < length {
        for _ in 0..16 {
            let mut carry = 0.0;
            for x in data.iter_mut() {
                carry = *x * 0.5 + carry * 0.25;
                *x = carry + 1.0;
            }
        }
        std::hint::black_box(&mut data);
    }
}
