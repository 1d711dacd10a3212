//! The shared-segment engine ([`crate::transport::segment`]): which calls the segment
//! serves, its setup at the first of them, and a call on it as a task.
//!
//! A call is served on the segment when every rank of the communicator is on one node, the
//! collective is one the segment has (bcast, reduce, allreduce, reduce-scatter(-block),
//! allgather(v), gather(v), scatter(v), barrier), the part each rank publishes fits (`CIRCULANT_SEGMENT_LIMIT`; all
//! but the reductions and the barrier at any size, in chunks beyond the segment's area), and
//! no algorithm is forced for it (a forced `segment-…` name forces the segment). Every rank
//! decides alike from the call's arguments. docs/architecture.md, "The shared segment".

use std::time::Duration;

use crate::fabric::peer_memory;
use crate::plan::Problem;
use crate::transport::segment::{
    block_offsets, Address, Kind, Own, Run, Source, ADDRESS_BYTES, AREA,
};
use crate::transport::{OpStats, TransportError};

use super::call::{Call, Choice, Entered};
use super::communicator::{Communicator, SegmentStatus};
use super::engine::{Engine, Engines, Kept, Offer, Task};
use super::error::{argument, in_call};
use super::error::{CommError, Result};
use super::memory::Memory;
use super::plans::Plans;

/// The names of the collectives on the segment, as `Choice::Named` and
/// `CIRCULANT_ALGORITHM` take them.
pub const SEGMENT_ALGORITHMS: [&str; 12] = [
    "segment-bcast",
    "segment-reduce",
    "segment-allreduce",
    "segment-reduce-scatter-block",
    "segment-reduce-scatter",
    "segment-allgather",
    "segment-allgatherv",
    "segment-gather",
    "segment-gatherv",
    "segment-scatter",
    "segment-scatterv",
    "segment-barrier",
];

/// `name` if nothing speaks against it (`why_not`); else no segment algorithm, or where one was
/// `forced`, an argument error that says why.
pub(crate) fn served(
    call: &Call<'_>,
    name: Option<&'static str>,
    forced: Option<&str>,
    why_not: Option<String>,
) -> Result<Option<&'static str>> {
    match (why_not, forced) {
        (None, _) => Ok(name),
        (Some(_), None) => Ok(None),
        (Some(why), Some(forced)) => Err(in_call(
            call.op,
            argument(call.op, format!("{forced}: {why}")),
        )),
    }
}

/// The segment algorithm of `problem`, if the segment has the collective.
fn segment_name(problem: &Problem) -> Option<&'static str> {
    Some(match problem {
        Problem::Broadcast { .. } => "segment-bcast",
        Problem::Reduce { .. } => "segment-reduce",
        Problem::Allreduce { .. } => "segment-allreduce",
        Problem::ReduceScatterBlock { .. } => "segment-reduce-scatter-block",
        Problem::ReduceScatter { .. } => "segment-reduce-scatter",
        Problem::Allgather { .. } => "segment-allgather",
        Problem::Allgatherv { .. } => "segment-allgatherv",
        Problem::Gather { .. } => "segment-gather",
        Problem::Gatherv { .. } => "segment-gatherv",
        Problem::Scatter { .. } => "segment-scatter",
        Problem::Scatterv { .. } => "segment-scatterv",
        Problem::Barrier { .. } => "segment-barrier",
        _ => return None,
    })
}

/// The most bytes one rank publishes for `problem`.
pub(crate) fn part_bytes(problem: &Problem) -> usize {
    match problem {
        Problem::Broadcast { bytes, .. }
        | Problem::Reduce { bytes, .. }
        | Problem::Allreduce { bytes, .. } => *bytes,
        Problem::Allgather { block, .. } | Problem::Gather { block, .. } => *block,
        Problem::Allgatherv { counts } | Problem::Gatherv { counts, .. } => {
            counts.iter().copied().max().unwrap_or(0)
        }
        // The root publishes every rank's block; a reduce-scatter's every rank its vector.
        Problem::Scatter { p, block, .. } | Problem::ReduceScatterBlock { p, block, .. } => {
            p.saturating_mul(*block)
        }
        Problem::Scatterv { counts, .. } | Problem::ReduceScatter { counts, .. } => {
            counts.iter().sum()
        }
        _ => 0,
    }
}

// A part within the limit runs whole: the area holds the largest limit.
const _: () = assert!(super::config::MAX_SEGMENT_LIMIT <= AREA);

/// Whether `problem` may run on the segment in chunks, its parts larger than the limit: a
/// collective that copies what it takes (a reduction folds, and beyond the limit a plan's
/// reduction is faster: [`Communicator::folds_within_limit`]).
fn runs_in_chunks(problem: &Problem) -> bool {
    matches!(
        problem,
        Problem::Broadcast { .. }
            | Problem::Allgather { .. }
            | Problem::Allgatherv { .. }
            | Problem::Gather { .. }
            | Problem::Gatherv { .. }
            | Problem::Scatter { .. }
            | Problem::Scatterv { .. }
    )
}

/// What the segment does for `problem`.
fn kind_of(problem: &Problem) -> Option<Kind> {
    Some(match problem {
        Problem::Broadcast { root, .. } => Kind::Broadcast { root: *root },
        Problem::Reduce {
            root, reduction, ..
        } => Kind::Reduce {
            root: *root,
            reduction: *reduction,
        },
        Problem::Allreduce { reduction, .. } => Kind::Allreduce {
            reduction: *reduction,
        },
        Problem::ReduceScatterBlock {
            p,
            reduction,
            block,
        } => Kind::ReduceScatter {
            reduction: *reduction,
            bounds: (0..=*p).map(|r| r * block).collect(),
        },
        Problem::ReduceScatter { reduction, counts } => Kind::ReduceScatter {
            reduction: *reduction,
            bounds: block_bounds(counts),
        },
        Problem::Allgather { p, block } => Kind::Allgatherv {
            offsets: (0..*p).map(|r| r * block).collect(),
        },
        Problem::Allgatherv { counts } => Kind::Allgatherv {
            offsets: block_offsets(counts),
        },
        Problem::Gather { p, root, block } => Kind::Gatherv {
            root: *root,
            bounds: (0..=*p).map(|r| r * block).collect(),
        },
        Problem::Gatherv { root, counts } => Kind::Gatherv {
            root: *root,
            bounds: block_bounds(counts),
        },
        Problem::Scatter { p, root, block } => Kind::Scatterv {
            root: *root,
            bounds: (0..=*p).map(|r| r * block).collect(),
        },
        Problem::Scatterv { root, counts } => Kind::Scatterv {
            root: *root,
            bounds: block_bounds(counts),
        },
        Problem::Barrier { .. } => Kind::Barrier,
        _ => return None,
    })
}

/// Where each rank's block of a gatherv or scatterv begins in the root's buffer, then the
/// total.
fn block_bounds(counts: &[usize]) -> Vec<usize> {
    let mut bounds = block_offsets(counts);
    bounds.push(counts.iter().sum());
    bounds
}

/// The shared-segment engine (see the module documentation).
pub(crate) struct Segment;

impl Engine for Segment {
    fn names(&self) -> Vec<&'static str> {
        SEGMENT_ALGORITHMS.to_vec()
    }

    fn offers(&self, comm: &Communicator, problem: &Problem) -> Result<Vec<Offer>> {
        Ok(comm
            .segment_for(problem)
            .map(|(name, time)| Offer { name, time })
            .into_iter()
            .collect())
    }

    fn takes(&self, comm: &Communicator, call: &Call<'_>) -> Result<bool> {
        Ok(comm.segment_serves(call)?.is_some())
    }

    fn start(
        &self,
        comm: &mut Communicator,
        mut call: Call<'_>,
        mut memory: Memory<'_>,
        entered: Entered,
    ) -> Result<Box<dyn Task>> {
        match comm.begin_on_segment(entered, &mut call, &mut memory)? {
            Some(task) => Ok(Box::new(task)),
            None => Plans.start(comm, call, memory, entered),
        }
    }

    /// A blocking call runs to its end without a task of its own on the heap: a small call
    /// costs about as much as an allocation.
    fn run(
        &self,
        comm: &mut Communicator,
        mut call: Call<'_>,
        mut memory: Memory<'_>,
        entered: Entered,
    ) -> Result<()> {
        match comm.begin_on_segment(entered, &mut call, &mut memory)? {
            Some(mut task) => {
                task.progress(comm, memory, true)?;
                comm.last = Some(task.executed());
                Ok(())
            }
            None => Plans.run(comm, call, memory, entered),
        }
    }

    fn keep(
        &self,
        comm: &mut Communicator,
        call: Call<'_>,
        _memory: Memory<'_>,
        engines: Engines,
    ) -> Result<Box<dyn Kept>> {
        let name = segment_name(&call.problem).unwrap_or("segment");
        self.anew(comm, call, name, engines)
    }
}

/// How far one progress of a call on the segment goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Once, as far as the peers allow: the start's pass, which publishes this rank's part.
    First,
    /// Once, and where the call waits for a peer, whether its deadline passed or the peer's
    /// process ended (a caller that only tests never waits).
    Test,
    /// To the end.
    Wait,
}

/// Where a call on the segment takes this rank's part from.
#[derive(Clone, Copy)]
enum SendPart {
    None,
    Send,
    InRecv(usize, usize),
}

/// A call on the segment.
pub(crate) struct SegmentTask {
    run: Run,
    send: SendPart,
    algorithm: &'static str,
    op: &'static str,
    overhead: Duration,
    stats: OpStats,
    done: bool,
}

impl SegmentTask {
    /// Progresses the call on `memory` by `pass`; true once complete.
    fn pass(
        &mut self,
        comm: &mut Communicator,
        mut memory: Memory<'_>,
        pass: Pass,
    ) -> Result<bool> {
        if self.done {
            return Ok(true);
        }
        let send = match self.send {
            SendPart::None => Source::None,
            SendPart::Send => Source::Send(memory.send.map_or(&[][..], |s| s.bytes)),
            SendPart::InRecv(at, len) => Source::InRecv(at, len),
        };
        let recv = memory.recv_bytes_mut();
        if !comm.segment_progress(self.op, &mut self.run, send, recv, pass)? {
            return Ok(false);
        }
        self.done = true;
        self.stats = comm.segment_done(&self.run);
        Ok(true)
    }
}

impl Task for SegmentTask {
    fn algorithm(&self) -> &'static str {
        self.algorithm
    }

    fn overhead(&self) -> Duration {
        self.overhead
    }

    fn progress(
        &mut self,
        comm: &mut Communicator,
        memory: Memory<'_>,
        wait: bool,
    ) -> Result<bool> {
        self.pass(comm, memory, if wait { Pass::Wait } else { Pass::Test })
    }

    fn stats(&self) -> OpStats {
        self.stats
    }
}

impl Communicator {
    /// The segment algorithm that serves `call`, if one does (see the module documentation).
    /// A forced `segment-…` name that cannot serve the call is an error.
    fn segment_serves(&self, call: &Call<'_>) -> Result<Option<&'static str>> {
        if matches!(self.node.segment, SegmentStatus::SettingUp) {
            return Ok(None);
        }
        let name = segment_name(&call.problem);
        let Some(forced) = self.forced_on_segment(call, "segment-", name) else {
            return Ok(None);
        };
        let why_not = if name.is_none() || (forced.is_some() && forced != name) {
            Some(format!(
                "the shared segment does not serve {}",
                crate::plan::collective_name(&call.problem)
            ))
        } else if self.size() < 2 || self.nodes.nodes() != 1 {
            Some("the shared segment needs two or more ranks, all on one node".to_string())
        } else if part_bytes(&call.problem) > self.config.segment_limit.max(1)
            && !runs_in_chunks(&call.problem)
        {
            Some(format!(
                "a rank's part of {} bytes exceeds the segment's {} (CIRCULANT_SEGMENT_LIMIT)",
                part_bytes(&call.problem),
                self.config.segment_limit
            ))
        } else if matches!(
            self.node.segment,
            SegmentStatus::Off | SegmentStatus::SettingUp
        ) {
            Some("the shared segment is not available on this communicator".to_string())
        } else if forced.is_none() && !self.folds_within_limit(&call.problem) {
            Some("a reduction folds more than the limit".to_string())
        } else {
            None
        };
        served(call, name, forced, why_not)
    }

    /// Whether a call may run on the segment (`Some`), and the name of those starting with
    /// `prefix` (the segment's, the node phases') it forces, if it does (`Some(Some)`); `None`
    /// where another algorithm is forced, or a plan's, or the segment is off
    /// (`CIRCULANT_SEGMENT_LIMIT=0`) and nothing is forced. `name`: the one that would serve.
    pub(crate) fn forced_on_segment<'c>(
        &'c self,
        call: &Call<'c>,
        prefix: &str,
        name: Option<&'static str>,
    ) -> Option<Option<&'c str>> {
        let forced = match call.choice {
            Choice::Named(forced) if forced.starts_with(prefix) => Some(forced),
            Choice::Named(_) => return None,
            Choice::Auto => self
                .config
                .algorithms
                .iter()
                .find(|a| name == Some(a.as_str()))
                .map(String::as_str),
        };
        if forced.is_none() && (self.config.segment_limit == 0 || self.forces_a_plan(call)) {
            return None;
        }
        Some(forced)
    }

    /// The segment algorithm that would serve `problem` on this communicator, with the time
    /// the model inside a node gives it, if the segment serves it: unforced within the limit,
    /// or in chunks ([`Self::segment_time`]).
    fn segment_for(&self, problem: &Problem) -> Option<(&'static str, f64)> {
        let name = segment_name(problem)?;
        let part = part_bytes(problem);
        let serves = self.config.segment_limit > 0
            && self.size() >= 2
            && self.nodes.nodes() == 1
            && (part <= self.config.segment_limit || runs_in_chunks(problem))
            && self.folds_within_limit(problem)
            && !matches!(self.node.segment, SegmentStatus::Off);
        serves.then(|| (name, self.segment_time(problem)))
    }

    /// The model's time of `problem` on the segment: the copies on its critical path at the
    /// model's β inside a node — the first chunk of the largest part copied in, then every
    /// byte a rank takes copied out (the other chunks go in while earlier ones are taken). No
    /// α: no message, a flag in memory every rank maps. It lists the segment among the
    /// algorithms; the segment serves by rule, not by this price (docs/performance.md, "One
    /// node: shared memory", has the measurements).
    fn segment_time(&self, problem: &Problem) -> f64 {
        let part = part_bytes(problem);
        let taken = match problem {
            Problem::Broadcast { bytes, .. } => *bytes,
            Problem::Barrier { .. } => 0,
            Problem::Allgatherv { counts } => {
                counts.iter().sum::<usize>() - counts.iter().copied().min().unwrap_or(0)
            }
            // The root copies every block out (its own from its send buffer).
            Problem::Gather { p, block, .. } => p * block,
            Problem::Gatherv { counts, .. } => counts.iter().sum(),
            // The root copies every block in: the rest of its buffer after the first chunk,
            // then its own block out, while the others copy theirs out.
            Problem::Scatter { block, .. } => part - part.min(AREA) + block,
            Problem::Scatterv { counts, root } => {
                part - part.min(AREA) + counts.get(*root).copied().unwrap_or(0)
            }
            // Every rank folds its block of the p − 1 others' vectors.
            Problem::ReduceScatterBlock { p, block, .. } => block * p.saturating_sub(1),
            Problem::ReduceScatter { counts, .. } => {
                counts.iter().copied().max().unwrap_or(0) * self.size().saturating_sub(1)
            }
            _ => part * self.size().saturating_sub(1),
        };
        let first = part.min(AREA);
        (first + taken) as f64 * self.levels.inside.beta
    }

    /// Whether a reduction's p − 1 vectors that each rank folds total at most the limit:
    /// beyond that a plan's reduction, which folds about log₂ p of them, is faster
    /// (docs/performance.md, "One node: shared memory"). Other collectives copy what they take
    /// and always fit.
    fn folds_within_limit(&self, problem: &Problem) -> bool {
        match problem {
            Problem::Reduce { bytes, .. } | Problem::Allreduce { bytes, .. } => {
                bytes.saturating_mul(self.size().saturating_sub(1)) <= self.config.segment_limit
            }
            _ => true,
        }
    }

    /// Sets the segment up if it is not yet: every rank creates its segment, the ranks
    /// exchange their names (an allgather over the fabric), map every peer's, and agree (an
    /// allreduce) that all of them could; otherwise the segment stays off on every rank.
    pub(crate) fn segment_ready(&mut self) -> Result<bool> {
        if matches!(self.node.segment, SegmentStatus::Untried) {
            self.node.segment = SegmentStatus::SettingUp;
            let status = self.set_up_segment();
            self.node.segment = match status {
                Ok(status) => status,
                Err(err) => {
                    self.node.segment = SegmentStatus::Off;
                    return Err(err);
                }
            };
        }
        Ok(matches!(self.node.segment, SegmentStatus::Ready))
    }

    /// Creates this rank's segment and joins the peers' (see [`Self::segment_ready`]). The
    /// record each rank sends: its segment's address, whether it made one (a byte), and where
    /// its probe word is ([`peer_memory::probe_address`]).
    fn set_up_segment(&mut self) -> Result<SegmentStatus> {
        const MADE: usize = ADDRESS_BYTES;
        const PROBE: usize = ADDRESS_BYTES + 8;
        let own = Own::create(AREA);
        let mut record = [0u8; PROBE + 8];
        if let Ok(own) = &own {
            record[..ADDRESS_BYTES].copy_from_slice(&own.address().to_bytes());
            record[MADE] = 1;
        }
        record[PROBE..].copy_from_slice(&peer_memory::probe_address().to_le_bytes());
        let mut all = vec![0u8; record.len() * self.size()];
        self.exchange(&record[..], &mut all[..])?;
        let addresses: Option<Vec<Address>> = all
            .chunks_exact(record.len())
            .map(|r| (r[MADE] == 1).then(|| Address::from_bytes(r)).flatten())
            .collect();
        let probes: Vec<u64> = all
            .chunks_exact(record.len())
            .map(|r| {
                let mut word = [0u8; 8];
                word.copy_from_slice(&r[PROBE..]);
                u64::from_le_bytes(word)
            })
            .collect();
        let joined = match (own, addresses) {
            (Ok(own), Some(addresses)) => own.join(self.rank(), &addresses).ok(),
            _ => None,
        };
        let readable =
            self.config.single_copy && joined.as_ref().is_some_and(|s| s.can_read_peers(&probes));
        let mut everyone = [0u32; 2];
        self.allreduce(
            &[u32::from(joined.is_some()), u32::from(readable)],
            &mut everyone,
            crate::plan::ReduceOp::Min,
        )?;
        Ok(match joined {
            Some(mut segment) if everyone[0] == 1 => {
                segment.remove_name();
                if everyone[1] == 1 {
                    segment.read_parts_in_place();
                }
                self.transport.set_segment(segment);
                SegmentStatus::Ready
            }
            _ => SegmentStatus::Off,
        })
    }

    /// Begins `call` on the segment: this rank's part published as far as the peers allow;
    /// or `None` where the ranks could not share memory and the call runs as a plan.
    fn begin_on_segment(
        &mut self,
        entered: Entered,
        call: &mut Call<'_>,
        memory: &mut Memory<'_>,
    ) -> Result<Option<SegmentTask>> {
        let op = call.op;
        let Some(name) = segment_name(&call.problem) else {
            return Err(argument(
                op,
                "the shared segment does not serve this call".into(),
            ));
        };
        if !self.segment_ready()? {
            // The ranks could not share memory: the call runs as a plan, unless the segment
            // was forced.
            if matches!(call.choice, Choice::Named(_))
                || self.config.algorithms.iter().any(|a| a == name)
            {
                let err = argument(
                    op,
                    format!("{name}: the ranks could not map each other's shared segments"),
                );
                self.comm_refused(op, &err);
                return Err(err);
            }
            return Ok(None);
        }
        let checked = self.checks_agreed(call, name)?;
        let number = self.transport.take_seq(op)?;
        if let Err(err) = checked {
            self.comm_refused(op, &err);
            return Err(err);
        }
        let Some(kind) = kind_of(&call.problem) else {
            return Err(argument(op, format!("{name} does not serve this call")));
        };
        let send = match (memory.send, call.send_in_recv) {
            (_, Some((at, len))) => SendPart::InRecv(at, len),
            (Some(_), None) => SendPart::Send,
            (None, None) if call.copy_in_recv => {
                SendPart::InRecv(0, memory.recv.as_ref().map_or(0, |r| r.bytes().len()))
            }
            (None, None) => SendPart::None,
        };
        let digest = self.node.digests.of(op, name, &call.problem);
        let deadline = self.transport.deadline();
        let Some(segment) = self.transport.segment_mut() else {
            return Err(TransportError::Broken("the shared segment is gone".into()).into());
        };
        let largest = part_bytes(&call.problem);
        let run = Run::new(segment, op, number, digest, kind, deadline).chunked(segment, largest);
        let mut task = SegmentTask {
            run,
            send,
            algorithm: name,
            op,
            overhead: Duration::ZERO,
            stats: OpStats::default(),
            done: false,
        };
        // As far as the peers allow now: publishing this rank's part.
        task.pass(self, memory.reborrow(), Pass::First)?;
        task.overhead = entered.elapsed();
        Ok(Some(task))
    }

    /// Progresses a call on the segment by `pass`; true once complete.
    fn segment_progress(
        &mut self,
        op: &'static str,
        run: &mut Run,
        send: Source<'_>,
        recv: &mut [u8],
        pass: Pass,
    ) -> Result<bool> {
        let Some(segment) = self.transport.segment_mut() else {
            return Err(TransportError::Broken("the shared segment is gone".into()).into());
        };
        let result = match pass {
            Pass::Wait => run.wait(segment, send, recv).map(|()| true),
            Pass::First => run.test(segment, send, recv),
            Pass::Test => match run.test(segment, send, recv) {
                Ok(false) => run.test_within_deadline(segment, send, recv),
                other => other,
            },
        };
        result.map_err(|err| self.segment_failed(op, err))
    }

    /// What a completed call on the segment did.
    fn segment_done(&mut self, run: &Run) -> OpStats {
        if run.parts_published > 0 {
            self.transport
                .count_published(run.parts_published as usize, run.bytes_published as usize);
        }
        self.transport.count_copied(run.bytes_copied as usize);
        OpStats {
            bytes_copied: run.bytes_copied,
            ..OpStats::default()
        }
    }

    /// A call on the segment failed on this rank with `err`: the transport is given up as for
    /// a failed operation, which marks the segment (the peers that need this rank there fail
    /// at once; those in a plan hear of it through the fabric).
    fn segment_failed(&mut self, op: &'static str, err: TransportError) -> CommError {
        self.transport.abandon_after(op, &err);
        err.into()
    }
}
