//! selftest's `persistent` check: the persistent request of every collective, with every
//! algorithm that applies, started several times on new data beside ranks that call the
//! blocking form.

use circulant::comm::{Buffer, Choice, CommError, Communicator, Persistent};
use circulant::plan::distribution::Distribution;
use circulant::plan::{Dtype, Problem, ReduceOp, Reduction};
use circulant_cli::cases::{self, CaseData, RankData};

use super::{check, verdict, Outcome};

/// Persistent requests of every kind with every algorithm that applies, the shared
/// segment's and the node phases' included: several starts, each with data of another
/// generation; at some starts of the requests on separate buffers the odd ranks call the
/// blocking form instead, which the persistent one must match. A rank that sees wrong data
/// goes on with the same calls as its peers and reports the first it saw at the end.
pub(super) fn persistent(comm: &mut Communicator) -> Outcome {
    let p = comm.size();
    let mut first = persistent_barrier(comm)?;
    first = first.or(persistent_bcast(comm)?);
    let allgather = Problem::Allgather { p, block: 333 };
    let allgatherv = Problem::Allgatherv {
        counts: Distribution::Mod3.counts(p, 1000),
    };
    let separate = [
        allgather.clone(),
        allgatherv.clone(),
        Problem::Allreduce {
            p,
            reduction: Reduction {
                dtype: Dtype::I64,
                op: ReduceOp::Sum,
            },
            bytes: 8 * 131,
        },
        Problem::Reduce {
            p,
            root: p - 1,
            reduction: Reduction {
                dtype: Dtype::U32,
                op: ReduceOp::Max,
            },
            bytes: 4 * 1001,
        },
        Problem::Scan {
            p,
            reduction: Reduction {
                dtype: Dtype::F64,
                op: ReduceOp::Min,
            },
            bytes: 8 * 77,
            exclusive: false,
        },
        Problem::Scan {
            p,
            reduction: Reduction {
                dtype: Dtype::I32,
                op: ReduceOp::Sum,
            },
            bytes: 4 * 77,
            exclusive: true,
        },
        Problem::Gather {
            p,
            root: p / 2,
            block: 101,
        },
        Problem::Scatter {
            p,
            root: p - 1,
            block: 101,
        },
        Problem::Gatherv {
            root: 0,
            counts: Distribution::Mod3.counts(p, 500),
        },
        Problem::Scatterv {
            root: p / 2,
            counts: Distribution::Mod3.counts(p, 500),
        },
        Problem::Alltoall { p, block: 57 },
    ];
    for problem in separate {
        first = first.or(persistent_separate(comm, problem)?);
    }
    for problem in [allgather, allgatherv] {
        first = first.or(persistent_in_place(comm, problem)?);
    }
    Ok(first)
}

/// The algorithms a persistent request of `problem` can use: every one that applies.
fn persistent_algorithms(
    comm: &Communicator,
    problem: &Problem,
) -> Result<Vec<&'static str>, CommError> {
    Ok(comm
        .algorithms(problem)?
        .into_iter()
        .map(|(name, _)| name)
        .collect())
}

/// Whether this rank calls the blocking form instead at `step`: the odd ranks at odd steps.
fn blocking_instead(rank: usize, step: u64) -> bool {
    step % 2 == 1 && rank % 2 == 1
}

fn persistent_barrier(comm: &mut Communicator) -> Outcome {
    let rank = comm.rank();
    let mut request = comm.barrier_init()?;
    for step in 0..4 {
        if blocking_instead(rank, step) {
            request.comm()?.barrier()?;
        } else {
            request.run()?;
        }
    }
    Ok(request
        .buffer()
        .is_ok()
        .then(|| "a persistent barrier lends a buffer".into()))
}

fn persistent_bcast(comm: &mut Communicator) -> Outcome {
    let (rank, p) = (comm.rank(), comm.size());
    let bytes = 4096 + 3;
    let root = p / 2;
    let problem = Problem::Broadcast { p, root, bytes };
    let mut first = None;
    for name in persistent_algorithms(comm, &problem)? {
        let mut buf = comm.alloc(bytes)?;
        let mut request = comm
            .choosing(Choice::Named(name))
            .bcast_init(&mut buf, root)?;
        for step in 0..4 {
            let data = CaseData::generation(problem.clone(), step);
            let wrong = if blocking_instead(rank, step) {
                // The blocking form of the same call, beside the others' persistent starts.
                let mut plain = data.recv_initial(rank);
                let comm = request.comm()?;
                comm.choosing(Choice::Named(name))
                    .bcast(&mut plain[..], root)?;
                verdict(&data.for_rank(rank), &plain)
                    .map(|w| format!("bcast [{name}] blocking at {step}: {w}"))
            } else {
                if rank == root {
                    request
                        .buffer_mut()?
                        .copy_from_slice(&data.recv_initial(rank));
                }
                request.start()?;
                request.wait()?;
                verdict(&data.for_rank(rank), request.buffer()?)
                    .map(|w| format!("bcast [{name}] start {step}: {w}"))
            };
            first = first.or(wrong);
        }
    }
    Ok(first)
}

/// The persistent request of `problem` on separate send and receive buffers.
fn separate_request<'c, 'b>(
    comm: &'c mut Communicator,
    problem: &Problem,
    send: &'b mut Buffer,
    recv: &'b mut Buffer,
    choice: Choice<'_>,
) -> Result<Persistent<'c, 'b>, CommError> {
    match problem {
        Problem::Allgather { .. } => comm.choosing(choice).allgather_init(send, recv),
        Problem::Allgatherv { counts } => comm.choosing(choice).allgatherv_init(send, recv, counts),
        Problem::Allreduce { reduction, .. } => comm
            .choosing(choice)
            .allreduce_init_bytes(send, recv, *reduction),
        Problem::Reduce {
            reduction, root, ..
        } => comm
            .choosing(choice)
            .reduce_init_bytes(send, recv, *reduction, *root),
        Problem::Scan {
            reduction,
            exclusive,
            ..
        } if *exclusive => comm
            .choosing(choice)
            .exscan_init_bytes(send, recv, *reduction),
        Problem::Scan { reduction, .. } => comm
            .choosing(choice)
            .scan_init_bytes(send, recv, *reduction),
        Problem::Gather { root, .. } => comm.choosing(choice).gather_init(send, recv, *root),
        Problem::Scatter { root, .. } => comm.choosing(choice).scatter_init(send, recv, *root),
        Problem::Gatherv { root, counts } => comm
            .choosing(choice)
            .gatherv_init(send, recv, counts, *root),
        Problem::Scatterv { root, counts } => comm
            .choosing(choice)
            .scatterv_init(send, recv, counts, *root),
        Problem::Alltoall { .. } => comm.choosing(choice).alltoall_init(send, recv),
        _ => Err(CommError::Request {
            op: "selftest",
            what: "no persistent request on separate buffers for this problem",
        }),
    }
}

/// The blocking form of [`separate_request`]'s call: one call, as [`check`] makes of
/// every collective but the allgatherv (which it also runs in place).
fn blocking_separate(
    comm: &mut Communicator,
    problem: &Problem,
    me: &RankData,
    name: &'static str,
) -> Outcome {
    let Problem::Allgatherv { counts } = problem else {
        return check(comm, problem, me, name);
    };
    let mut recv = me.recv_initial.clone();
    comm.choosing(Choice::Named(name))
        .allgatherv(&me.send[..], &mut recv[..], counts)?;
    Ok(verdict(me, &recv))
}

/// Every rank's receive buffer starts with the case's initial bytes (the non-roots of a
/// reduce or gather and rank 0 of an exclusive scan must leave theirs alone), so each start
/// refills it.
fn persistent_separate(comm: &mut Communicator, problem: Problem) -> Outcome {
    let rank = comm.rank();
    let op = cases::collective(&problem);
    let mut first = None;
    for name in persistent_algorithms(comm, &problem)? {
        let initial = CaseData::new(problem.clone());
        let mut send = comm.alloc(initial.send(rank).len())?;
        let mut recv = comm.alloc(initial.recv_len(rank))?;
        let choice = Choice::Named(name);
        let mut request = separate_request(comm, &problem, &mut send, &mut recv, choice)?;
        for step in 0..4 {
            let data = CaseData::generation(problem.clone(), step);
            let me = data.for_rank(rank);
            let wrong = if blocking_instead(rank, step) {
                blocking_separate(request.comm()?, &problem, &me, name)?
                    .map(|w| format!("{op} [{name}] blocking at {step}: {w}"))
            } else {
                request.send_buffer_mut()?.copy_from_slice(&me.send);
                request.buffer_mut()?.copy_from_slice(&me.recv_initial);
                request.run()?;
                verdict(&me, request.buffer()?).map(|w| format!("{op} [{name}] start {step}: {w}"))
            };
            first = first.or(wrong);
        }
    }
    Ok(first)
}

/// A persistent allgather or allgatherv in place: this rank's part written to its place in
/// the receive buffer before each start (every rank starts the request each time).
fn persistent_in_place(comm: &mut Communicator, problem: Problem) -> Outcome {
    let rank = comm.rank();
    let op = cases::collective(&problem);
    let names = match &problem {
        // The in-place allgather has no forced form: the automatic choice.
        Problem::Allgather { .. } => vec!["auto"],
        _ => persistent_algorithms(comm, &problem)?,
    };
    let mut first = None;
    for name in names {
        let initial = CaseData::new(problem.clone());
        let mut recv = comm.alloc(initial.recv_len(rank))?;
        let mut request = match &problem {
            Problem::Allgatherv { counts } => comm
                .choosing(Choice::Named(name))
                .allgatherv_in_place_init(&mut recv, counts)?,
            _ => comm.allgather_in_place_init(&mut recv)?,
        };
        for step in 0..3 {
            // Generations after those of the separate buffers: stale data shows.
            let data = CaseData::generation(problem.clone(), 4 + step);
            let me = data.for_rank(rank);
            if let Some(initial) = &me.in_place_initial {
                request.buffer_mut()?.copy_from_slice(initial);
            }
            request.start()?;
            request.wait()?;
            let wrong = match &me.in_place_initial {
                None => Some("the case has no in-place data".to_string()),
                Some(_) => verdict(&me, request.buffer()?),
            };
            first = first.or(wrong.map(|w| format!("{op} in place [{name}] start {step}: {w}")));
        }
    }
    Ok(first)
}
