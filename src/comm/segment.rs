//! Which calls the shared segment serves ([`crate::transport::segment`]), its setup at the
//! first of them, and how such a call runs as a [`Request`].
//!
//! A call is served on the segment when every rank of the communicator is on one node, the
//! collective is one the segment has (bcast, reduce, allreduce, allgather(v), gather(v),
//! scatter(v), barrier), the part each rank publishes fits (`CIRCULANT_SEGMENT_LIMIT`; all
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

use super::arguments::{argument, in_call};
use super::call::{digest, Call, Entered};
use super::detached::Detached;
use super::nonblocking::Request;
use super::{Buffer, Choice, CommError, Communicator, Executed, Payload, PayloadMut, Result};

/// The names of the collectives on the segment, as `Choice::Named` and
/// `CIRCULANT_ALGORITHM` take them.
pub const SEGMENT_ALGORITHMS: [&str; 10] = [
    "segment-bcast",
    "segment-reduce",
    "segment-allreduce",
    "segment-allgather",
    "segment-allgatherv",
    "segment-gather",
    "segment-gatherv",
    "segment-scatter",
    "segment-scatterv",
    "segment-barrier",
];

/// Where a communicator's segment stands.
#[derive(Debug, Default)]
pub(super) enum SegmentState {
    /// Not set up yet: the first call it serves sets it up.
    #[default]
    Untried,
    /// Being set up (its own exchanges run as plans).
    SettingUp,
    /// Not to be used: turned off, or the ranks could not map each other's segments.
    Off,
    /// Set up: the transport keeps it (`Transport::segment_mut`), so that every failure that
    /// breaks the transport marks it.
    Ready,
}

/// The digests of the last few calls' arguments: computing one costs more than a small call
/// on the segment, and programs repeat their calls (a ping-pong alternates two roots).
#[derive(Debug, Default)]
pub(super) struct Digests {
    entries: Vec<(&'static str, &'static str, Problem, u64)>,
    next: usize,
}

/// Calls whose digests are kept.
const DIGESTS_KEPT: usize = 8;

impl Digests {
    fn of(&mut self, op: &'static str, name: &'static str, problem: &Problem) -> u64 {
        if let Some(entry) = self
            .entries
            .iter()
            .find(|(o, n, p, _)| *o == op && *n == name && p == problem)
        {
            return entry.3;
        }
        let made = digest(op, name, problem);
        let entry = (op, name, problem.clone(), made);
        if self.entries.len() < DIGESTS_KEPT {
            self.entries.push(entry);
        } else {
            self.entries[self.next] = entry;
            self.next = (self.next + 1) % DIGESTS_KEPT;
        }
        made
    }
}

/// `name` if nothing speaks against it (`why_not`); else no segment algorithm, or where one was
/// `forced`, an argument error that says why.
pub(super) fn served(
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

/// A call served on the segment, as its request holds it.
pub(super) struct SegmentCall<'a> {
    pub run: Run,
    pub send: Source<'a>,
    pub recv: &'a mut [u8],
}

/// How a call chosen for the segment began. Almost every call is on the segment: its variant
/// is not boxed, which would cost an allocation per call.
#[allow(clippy::large_enum_variant)]
enum Begun<'a, S: ?Sized, R: ?Sized> {
    /// On the segment, with its overhead so far.
    OnSegment(SegmentCall<'a>, std::time::Duration),
    /// Not: the ranks could not share memory, and the call runs as a plan on its buffers.
    AsPlan(Option<&'a S>, Option<&'a mut R>),
}

/// The segment algorithm of `problem`, if the segment has the collective.
fn segment_name(problem: &Problem) -> Option<&'static str> {
    Some(match problem {
        Problem::Broadcast { .. } => "segment-bcast",
        Problem::Reduce { .. } => "segment-reduce",
        Problem::Allreduce { .. } => "segment-allreduce",
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
pub(super) fn part_bytes(problem: &Problem) -> usize {
    match problem {
        Problem::Broadcast { bytes, .. }
        | Problem::Reduce { bytes, .. }
        | Problem::Allreduce { bytes, .. } => *bytes,
        Problem::Allgather { block, .. } | Problem::Gather { block, .. } => *block,
        Problem::Allgatherv { counts } | Problem::Gatherv { counts, .. } => {
            counts.iter().copied().max().unwrap_or(0)
        }
        // The root publishes every rank's block.
        Problem::Scatter { p, block, .. } => p.saturating_mul(*block),
        Problem::Scatterv { counts, .. } => counts.iter().sum(),
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

impl Communicator {
    /// The segment algorithm that serves `call`, if one does (see the module documentation).
    /// A forced `segment-…` name that cannot serve the call is an error.
    pub(super) fn segment_serves(&self, call: &Call<'_>) -> Result<Option<&'static str>> {
        if matches!(self.segment, SegmentState::SettingUp) {
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
        } else if matches!(self.segment, SegmentState::Off | SegmentState::SettingUp) {
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
    pub(super) fn forced_on_segment<'c>(
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
    pub(super) fn segment_for(&self, problem: &Problem) -> Option<(&'static str, f64)> {
        let name = segment_name(problem)?;
        let part = part_bytes(problem);
        let serves = self.config.segment_limit > 0
            && self.size() >= 2
            && self.nodes.nodes() == 1
            && (part <= self.config.segment_limit || runs_in_chunks(problem))
            && self.folds_within_limit(problem)
            && !matches!(self.segment, SegmentState::Off);
        serves.then(|| (name, self.segment_time(problem)))
    }

    /// The model's time of `problem` on the segment: the copies on its critical path at the
    /// model's β inside a node — the first chunk of the largest part copied in, then every
    /// byte a rank takes copied out (the other chunks go in while earlier ones are taken). No
    /// α: no message, a flag in memory every rank maps. It lists the segment among the
    /// algorithms; the segment serves by rule, not by this price (docs/performance.md, "The
    /// shared segment in chunks", has the measurements).
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
            _ => part * self.size().saturating_sub(1),
        };
        let first = part.min(AREA);
        (first + taken) as f64 * self.levels.inside.beta
    }

    /// Whether a reduction's p − 1 vectors that each rank folds total at most the limit:
    /// beyond that a plan's reduction, which folds about log₂ p of them, is faster
    /// (docs/performance.md, "The shared segment"). Other collectives copy what they take
    /// and always fit.
    fn folds_within_limit(&self, problem: &Problem) -> bool {
        match problem {
            Problem::Reduce { bytes, .. } | Problem::Allreduce { bytes, .. } => {
                bytes.saturating_mul(self.size().saturating_sub(1)) <= self.config.segment_limit
            }
            _ => true,
        }
    }

    /// Whether `CIRCULANT_ALGORITHM` forces a plan algorithm that applies to `call`.
    pub(super) fn forces_a_plan(&self, call: &Call<'_>) -> bool {
        !self.config.algorithms.is_empty()
            && self.config.algorithms.iter().any(|name| {
                !name.starts_with("segment-")
                    && !name.starts_with("hier-segment-")
                    && self.choose(&call.problem, Choice::Named(name)).is_ok()
            })
    }

    /// Sets the segment up if it is not yet: every rank creates its segment, the ranks
    /// exchange their names (an allgather over the fabric), map every peer's, and agree (an
    /// allreduce) that all of them could; otherwise the segment stays off on every rank.
    pub(super) fn segment_ready(&mut self) -> Result<bool> {
        if matches!(self.segment, SegmentState::Untried) {
            self.segment = SegmentState::SettingUp;
            let state = self.set_up_segment();
            self.segment = match state {
                Ok(state) => state,
                Err(err) => {
                    self.segment = SegmentState::Off;
                    return Err(err);
                }
            };
        }
        Ok(matches!(self.segment, SegmentState::Ready))
    }

    /// Creates this rank's segment and joins the peers' (see [`Self::segment_ready`]). The
    /// record each rank sends: its segment's address, whether it made one (a byte), and where
    /// its probe word is ([`peer_memory::probe_address`]).
    fn set_up_segment(&mut self) -> Result<SegmentState> {
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
                SegmentState::Ready
            }
            _ => SegmentState::Off,
        })
    }

    /// Starts `call` on the segment as algorithm `name`.
    pub(super) fn start_on_segment<'a, S, R>(
        &'a mut self,
        entered: Entered,
        mut call: Call<'_>,
        name: &'static str,
        send: Option<&'a S>,
        recv: Option<&'a mut R>,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        match self.begin_on_segment(entered, &mut call, name, send, recv)? {
            Begun::OnSegment(segment_call, overhead) => Ok(Request::on_segment(
                self,
                call.op,
                name,
                segment_call,
                overhead,
            )),
            Begun::AsPlan(send, recv) => self.start_planned(entered, call, send, recv),
        }
    }

    /// Starts `call` on registered buffers as [`Self::start`] does and detaches it from them,
    /// with its algorithm and overhead ([`Self::start_detached`]). On the segment no request
    /// is made: the caller keeps the buffers, so the call's state is all it needs, and a small
    /// call's cost is mostly moving such state.
    pub(super) fn start_detached_as(
        &mut self,
        mut call: Call<'_>,
        send: Option<&Buffer>,
        recv: Option<&mut Buffer>,
    ) -> Result<(Detached, &'static str, Duration)> {
        let request = if let Some(name) = self.on_node_phases(&call)? {
            self.start_node_phases(call, name, send, recv, true)?
        } else {
            // The call's software overhead counts from here (see `Executed::overhead`).
            let entered = Entered::now(self.measures_overhead);
            match self.on_segment(&call)? {
                Some(name) => match self.begin_on_segment(entered, &mut call, name, send, recv)? {
                    Begun::OnSegment(segment_call, overhead) => {
                        return Ok((Detached::segment(segment_call), name, overhead));
                    }
                    Begun::AsPlan(send, recv) => self.start_planned(entered, call, send, recv)?,
                },
                None => self.start_planned(entered, call, send, recv)?,
            }
        };
        let (name, overhead) = (request.algorithm(), request.overhead());
        Ok((request.detach()?, name, overhead))
    }

    /// Runs `call` on the segment as algorithm `name` to its end.
    pub(super) fn run_on_segment<S, R>(
        &mut self,
        entered: Entered,
        mut call: Call<'_>,
        name: &'static str,
        send: Option<&S>,
        recv: Option<&mut R>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        match self.begin_on_segment(entered, &mut call, name, send, recv)? {
            Begun::OnSegment(mut segment_call, overhead) => {
                self.segment_progress(call.op, &mut segment_call, true)?;
                let stats = self.segment_done(&segment_call);
                self.last = Some(Executed {
                    algorithm: name,
                    stats,
                    overhead,
                });
                Ok(())
            }
            Begun::AsPlan(send, recv) => self.start_planned(entered, call, send, recv)?.wait(),
        }
    }

    /// Begins `call` on the segment as algorithm `name`: this rank's part published as far as
    /// the peers allow, and the call's overhead; or the buffers back where the ranks could not
    /// share memory and the call runs as a plan.
    fn begin_on_segment<'a, S, R>(
        &mut self,
        entered: Entered,
        call: &mut Call<'_>,
        name: &'static str,
        send: Option<&'a S>,
        recv: Option<&'a mut R>,
    ) -> Result<Begun<'a, S, R>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let op = call.op;
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
            return Ok(Begun::AsPlan(send, recv));
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
        let send = match (send, call.send_in_recv) {
            (_, Some((at, len))) => Source::InRecv(at, len),
            (Some(send), None) => Source::Send(send.bytes()),
            (None, None) if call.copy_in_recv => {
                Source::InRecv(0, recv.as_ref().map_or(0, |r| r.bytes().len()))
            }
            (None, None) => Source::None,
        };
        let recv: &'a mut [u8] = match recv {
            Some(recv) => recv.bytes_mut(),
            None => Default::default(),
        };
        let digest = self.segment_digests.of(op, name, &call.problem);
        let deadline = self.transport.deadline();
        let Some(segment) = self.transport.segment_mut() else {
            return Err(TransportError::Broken("the shared segment is gone".into()).into());
        };
        let largest = part_bytes(&call.problem);
        let mut run =
            Run::new(segment, op, number, digest, kind, deadline).chunked(segment, largest);
        // As far as the peers allow now: publishing this rank's part.
        if let Err(err) = run.test(segment, send, recv) {
            return Err(self.segment_failed(op, err));
        }
        let overhead = entered.elapsed();
        Ok(Begun::OnSegment(SegmentCall { run, send, recv }, overhead))
    }

    /// This rank's checks of a call that runs without a plan of its own (the call's, and
    /// those of the problem a plan's choice makes: a root in range, a reduction defined for
    /// its type), compared with every rank's under `CIRCULANT_CHECK` as `name`: an error if
    /// the comparison failed, else this rank's outcome, which the caller refuses or runs.
    pub(super) fn checks_agreed(&mut self, call: &mut Call<'_>, name: &str) -> Result<Result<()>> {
        let op = call.op;
        let checked = self.checks_alone(call);
        if self.config.check {
            self.agree(
                op,
                &call.problem,
                checked.as_ref().map(|_| name).map_err(|e| e.to_string()),
            )?;
        }
        Ok(checked)
    }

    /// This rank's checks of a call that runs without a plan (see [`Self::checks_agreed`]),
    /// taken out of `call`.
    pub(super) fn checks_alone(&self, call: &mut Call<'_>) -> Result<()> {
        let op = call.op;
        std::mem::replace(&mut call.checked, Ok(())).and_then(|()| {
            call.problem
                .validate()
                .map_err(|e| in_call(op, CommError::Plan(e)))
        })
    }

    /// Progresses a call on the segment; true once complete. `wait` drives it to the end.
    pub(super) fn segment_progress(
        &mut self,
        op: &'static str,
        call: &mut SegmentCall<'_>,
        wait: bool,
    ) -> Result<bool> {
        let Some(segment) = self.transport.segment_mut() else {
            return Err(TransportError::Broken("the shared segment is gone".into()).into());
        };
        let result = if wait {
            call.run.wait(segment, call.send, call.recv).map(|()| true)
        } else {
            match call.run.test(segment, call.send, call.recv) {
                Ok(false) => call.run.test_within_deadline(segment, call.send, call.recv),
                other => other,
            }
        };
        result.map_err(|err| self.segment_failed(op, err))
    }

    /// What a completed call on the segment did.
    pub(super) fn segment_done(&mut self, call: &SegmentCall<'_>) -> OpStats {
        if call.run.parts_published > 0 {
            self.transport.count_published(
                call.run.parts_published as usize,
                call.run.bytes_published as usize,
            );
        }
        self.transport.count_copied(call.run.bytes_copied as usize);
        OpStats {
            bytes_copied: call.run.bytes_copied,
            ..OpStats::default()
        }
    }

    /// A call on the segment failed on this rank with `err`: the transport is given up as for
    /// a failed operation, which marks the segment (the peers that need this rank there fail
    /// at once; those in a plan hear of it through the fabric).
    pub(super) fn segment_failed(&mut self, op: &'static str, err: TransportError) -> CommError {
        self.transport.abandon_after(op, &err);
        err.into()
    }
}
