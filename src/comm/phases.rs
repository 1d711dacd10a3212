//! The node-phases engine: hierarchical collectives whose node phases run on the shared
//! segment: on a communicator
//! whose ranks span several nodes, some holding several of them, a small bcast, reduce,
//! allreduce, reduce-scatter(-block), allgather(v) or barrier runs as a collective on the
//! shared segment inside each node (one copy in, flags, one copy out: [`super::segment`]), the
//! fastest plan among one rank per node (each node's first rank, its leader), and the segment
//! inside each node again. A reduce-scatter folds each node's vectors on its leader, the
//! leaders allreduce them, and each leader scatters its node's blocks. An allgather(v) gathers each node's blocks (a segment allgatherv), exchanges the
//! nodes' among the leaders (an allgatherv of the nodes' shares), broadcasts the whole inside
//! each node and puts the blocks in rank order, whatever the placement.
//!
//! The plans' own hierarchical and multi-lane algorithms run their node phases as writes over
//! the node's fabric; for small calls, where a phase costs its latency, one segment operation
//! replaces the rounds of a node phase. Past the limit a forced bcast or allgather(v) runs
//! here too (the segment moves it in chunks), one phase after the other; unforced, such calls
//! take the plans, whose node phases move each block on as it arrives (docs/performance.md,
//! "Several ranks per node: large calls"). Served in the blocking and nonblocking forms, which
//! run the same steps as one task ([`super::steps`]), and by persistent requests, which start
//! the call anew each time.
//! The decision and its pieces: docs/architecture.md, "Node phases on the shared segment".

use std::borrow::Cow;
use std::time::Duration;

use crate::plan::Problem;
use crate::transport::OpStats;

use super::call::{Call, Choice, Entered};
use super::communicator::{Communicator, NodeComms};
use super::engine::{Engine, Engines, Kept, Offer, Task};
use super::error::argument;
use super::error::{CommError, Result};
use super::memory::{Memory, StepBuffers};
use super::segment::{part_bytes, served};
use super::steps::PhasedCall;

/// The names of the hierarchical collectives whose node phases run on the segment, as
/// `Choice::Named` and `CIRCULANT_ALGORITHM` take them.
pub const NODE_PHASE_ALGORITHMS: [&str; 8] = [
    "hier-segment-bcast",
    "hier-segment-reduce",
    "hier-segment-allreduce",
    "hier-segment-reduce-scatter-block",
    "hier-segment-reduce-scatter",
    "hier-segment-allgather",
    "hier-segment-allgatherv",
    "hier-segment-barrier",
];

/// The composition of `problem`, if there is one.
fn phases_name(problem: &Problem) -> Option<&'static str> {
    Some(match problem {
        Problem::Broadcast { .. } => "hier-segment-bcast",
        Problem::Reduce { .. } => "hier-segment-reduce",
        Problem::Allreduce { .. } => "hier-segment-allreduce",
        Problem::ReduceScatterBlock { .. } => "hier-segment-reduce-scatter-block",
        Problem::ReduceScatter { .. } => "hier-segment-reduce-scatter",
        Problem::Allgather { .. } => "hier-segment-allgather",
        Problem::Allgatherv { .. } => "hier-segment-allgatherv",
        Problem::Barrier { .. } => "hier-segment-barrier",
        _ => return None,
    })
}

/// Whether every phase of the composition of `problem` runs on the segment in chunks at any
/// size (a broadcast's, an allgather(v)'s gather and broadcast of the whole), so that a
/// forced name serves it past the limit. The reductions fold, and keep the limit.
fn phases_run_in_chunks(problem: &Problem) -> bool {
    matches!(
        problem,
        Problem::Broadcast { .. } | Problem::Allgather { .. } | Problem::Allgatherv { .. }
    )
}

/// The most bytes one rank publishes in a segment operation of the composition: an
/// allgather(v)'s whole result (the last phase broadcasts it), else the call's part.
fn phase_bytes(problem: &Problem) -> usize {
    match problem {
        Problem::Allgather { p, block } => p.saturating_mul(*block),
        // Saturating: the counts are checked after this decision.
        Problem::Allgatherv { counts } => counts.iter().fold(0, |a: usize, &c| a.saturating_add(c)),
        _ => part_bytes(problem),
    }
}

/// The bytes a node's first rank takes in the first node phase: a reduction's vectors from
/// each other rank of the largest node, else the call's bytes.
fn folds(problem: &Problem, layout: &crate::plan::Layout) -> usize {
    let bytes = phase_bytes(problem);
    match problem {
        Problem::Reduce { .. }
        | Problem::Allreduce { .. }
        | Problem::ReduceScatterBlock { .. }
        | Problem::ReduceScatter { .. } => {
            bytes.saturating_mul(layout.max_per_node().saturating_sub(1))
        }
        _ => bytes,
    }
}

/// Each rank's count of an allgather(v), if `problem` is one.
fn counts_of(problem: &Problem) -> Option<Cow<'_, [usize]>> {
    match problem {
        Problem::Allgather { p, block } => Some(Cow::Owned(vec![*block; *p])),
        Problem::Allgatherv { counts } => Some(Cow::Borrowed(counts)),
        _ => None,
    }
}

/// The node-phases engine (see the module documentation); its steps run on the engines
/// `steps`.
pub(crate) struct NodePhases {
    pub steps: Engines,
}

impl Engine for NodePhases {
    fn names(&self) -> Vec<&'static str> {
        NODE_PHASE_ALGORITHMS.to_vec()
    }

    fn offers(&self, comm: &Communicator, problem: &Problem) -> Result<Vec<Offer>> {
        Ok(comm
            .node_phases_for(problem)
            .map(|(name, time)| Offer { name, time })
            .into_iter()
            .collect())
    }

    fn takes(&self, comm: &Communicator, call: &Call<'_>) -> Result<bool> {
        Ok(comm.node_phases_serve(call)?.is_some())
    }

    fn start(
        &self,
        comm: &mut Communicator,
        call: Call<'_>,
        mut memory: Memory<'_>,
        entered: Entered,
    ) -> Result<Box<dyn Task>> {
        let mut task = self.begin(comm, call, &memory, entered)?;
        // The first steps, as far as the peers allow (a failure gives the phases up).
        task.progress(comm, memory.reborrow(), false)?;
        Ok(Box::new(task))
    }

    /// A blocking call goes on to its wait at once, without posting its first steps apart.
    fn run(
        &self,
        comm: &mut Communicator,
        call: Call<'_>,
        memory: Memory<'_>,
        entered: Entered,
    ) -> Result<()> {
        let mut task = self.begin(comm, call, &memory, entered)?;
        task.progress(comm, memory, true)?;
        comm.last = Some(task.executed());
        Ok(())
    }

    fn keep(
        &self,
        comm: &mut Communicator,
        call: Call<'_>,
        _memory: Memory<'_>,
        engines: Engines,
    ) -> Result<Box<dyn Kept>> {
        let name = phases_name(&call.problem).unwrap_or("hier-segment");
        self.anew(comm, call, name, engines)
    }

    /// The phases' communicators too, where peers called otherwise may wait.
    fn refuse(&self, comm: &mut Communicator, op: &'static str, err: &CommError) {
        comm.node_phases_failed(op, err);
    }
}

impl NodePhases {
    /// Begins `call` as its composition (see the module documentation): its steps
    /// ([`super::steps`]) as one task. The overhead recorded is the time to the first step.
    fn begin(
        &self,
        comm: &mut Communicator,
        mut call: Call<'_>,
        memory: &Memory<'_>,
        entered: Entered,
    ) -> Result<PhasesTask> {
        let op = call.op;
        let Some(name) = phases_name(&call.problem) else {
            return Err(argument(
                op,
                "the node phases do not serve this call".into(),
            ));
        };
        // Compared with every rank's before the phases, as the other engines do before their
        // first message.
        let checked = comm.checks_agreed(&mut call, name)?;
        if let Err(err) = checked {
            comm.node_phases_failed(op, &err);
            return Err(err);
        }
        if comm.node.phases.is_none() {
            // The splits' own exchanges take the engines without node phases.
            let phases = comm.split_phases()?;
            comm.node.phases = Some(Box::new(phases));
        }
        // The input: the send buffer, or an allgather(v)'s own block in place (the C API
        // copies an in-place reduction's input into a send buffer).
        let out = memory.recv.as_ref().map_or(&[][..], |r| r.bytes());
        let input = match call.send_in_recv {
            None => memory.send_bytes().to_vec(),
            Some((at, len))
                if matches!(
                    call.problem,
                    Problem::Allgather { .. } | Problem::Allgatherv { .. }
                ) =>
            {
                out.get(at..at + len).unwrap_or_default().to_vec()
            }
            Some(_) => {
                let err = argument(op, format!("{name} does not serve calls in place"));
                comm.node_phases_failed(op, &err);
                return Err(err);
            }
        };
        let rank = comm.rank();
        let phased = match &comm.node.phases {
            Some(phases) => PhasedCall::new(&call.problem, &phases.layout, rank, input),
            None => Err(argument(op, "the node phases are not set up".into())),
        };
        let call = match phased {
            Ok(phased) => phased,
            Err(err) => {
                comm.node_phases_failed(op, &err);
                return Err(err);
            }
        };
        Ok(PhasesTask {
            call,
            op,
            algorithm: name,
            steps: self.steps,
            overhead: entered.elapsed(),
        })
    }
}

/// A call run as its node phases.
struct PhasesTask {
    call: PhasedCall,
    op: &'static str,
    algorithm: &'static str,
    steps: Engines,
    overhead: Duration,
}

impl Task for PhasesTask {
    fn algorithm(&self) -> &'static str {
        self.algorithm
    }

    fn overhead(&self) -> Duration {
        self.overhead
    }

    fn progress(
        &mut self,
        comm: &mut Communicator,
        mut memory: Memory<'_>,
        wait: bool,
    ) -> Result<bool> {
        let out = memory.recv_bytes_mut();
        comm.phases_progress(self.op, &mut self.call, out, self.steps, wait)
    }

    /// The steps count theirs on the phases' communicators.
    fn stats(&self) -> OpStats {
        OpStats::default()
    }
}

impl Communicator {
    /// The composition that serves `call` (blocking or nonblocking), if one does: every rank
    /// decides alike from the call's arguments, the layout and the configuration. A forced
    /// `hier-segment-…` name that cannot serve the call is an error.
    fn node_phases_serve(&self, call: &Call<'_>) -> Result<Option<&'static str>> {
        let name = phases_name(&call.problem);
        let layout = self.nodes.layout();
        if !layout.is_hierarchical() && matches!(call.choice, Choice::Auto) {
            // One node, or one rank per node: nothing to compose, decided at once. A name
            // from CIRCULANT_ALGORITHM is for the communicators it can serve (the job's), not
            // for every one split from it, the phases' own among them.
            return Ok(None);
        }
        let Some(forced) = self.forced_on_segment(call, "hier-segment-", name) else {
            return Ok(None);
        };
        let (bytes, folds) = (phase_bytes(&call.problem), folds(&call.problem, layout));
        let why_not = if name.is_none() || (forced.is_some() && forced != name) {
            Some(format!(
                "the node phases on the shared segment do not serve {}",
                crate::plan::collective_name(&call.problem)
            ))
        } else if call.problem.p() != layout.p() || !layout.is_hierarchical() {
            Some("node phases need several nodes, one of them with several ranks".to_string())
        } else if bytes > self.config.segment_limit.max(1)
            && !(forced.is_some()
                && self.config.segment_limit > 0
                && phases_run_in_chunks(&call.problem))
        {
            Some(format!(
                "{bytes} bytes exceed the segment's {} (CIRCULANT_SEGMENT_LIMIT)",
                self.config.segment_limit
            ))
        } else if forced.is_none() && folds > self.config.segment_limit {
            Some("a reduction folds more than the limit".to_string())
        } else {
            None
        };
        served(call, name, forced, why_not)
    }

    /// The composition that would serve `problem`, unforced or (past the limit, for the
    /// collectives whose phases run in chunks) forced, with the time the models give it (a
    /// segment operation inside the nodes, the fastest plan among the nodes' first ranks, a
    /// segment operation again, one after the other).
    fn node_phases_for(&self, problem: &Problem) -> Option<(&'static str, f64)> {
        let name = phases_name(problem)?;
        let layout = self.nodes.layout();
        let (bytes, folds) = (phase_bytes(problem), folds(problem, layout));
        let serves = self.config.segment_limit > 0
            && problem.p() == layout.p()
            && layout.is_hierarchical()
            && (folds <= self.config.segment_limit || phases_run_in_chunks(problem));
        if !serves {
            return None;
        }
        let (inside, across) = (self.levels.inside, self.levels.across);
        let nodes = layout.nodes();
        let rounds = (usize::BITS - (nodes - 1).leading_zeros()) as f64;
        if let Some(counts) = counts_of(problem) {
            // The node's blocks gathered, the others' taken among the leaders (log₂ of the
            // nodes rounds and at most the whole), the whole broadcast inside the node.
            let node_bytes = (0..nodes)
                .map(|v| {
                    (layout.ranks_on(v).iter()).fold(0, |a: usize, &r| a.saturating_add(counts[r]))
                })
                .max()
                .unwrap_or(0);
            let gathers =
                (0..nodes).any(|v| layout.ranks_on(v).iter().skip(1).any(|&r| counts[r] > 0));
            let time = (1.0 + f64::from(u8::from(gathers))) * inside.alpha
                + (node_bytes + bytes) as f64 * inside.beta
                + rounds * across.alpha
                + bytes as f64 * across.beta;
            return Some((name, time));
        }
        let node_op = inside.alpha + (folds as f64) * inside.beta;
        Some((
            name,
            2.0 * node_op + rounds * (across.alpha + bytes as f64 * across.beta),
        ))
    }

    /// Splits the phases' communicators (collective over this one): the ranks of each node,
    /// and each node's first rank. They take this communicator's configuration, without
    /// forced algorithms (they choose for themselves), without the full argument check and
    /// without measuring their steps' overhead (the call's own covers them).
    fn split_phases(&mut self) -> Result<NodeComms> {
        let mut node = self.split_by_node()?;
        let first = self.local_ranks().first() == Some(&self.rank());
        let mut leaders = self.split(first.then_some(0), self.rank() as i64)?;
        // The parent's check compares the whole call and every step follows from it; a
        // check per step would make a nonblocking step wait for its peers in `test`.
        for comm in std::iter::once(&mut node).chain(leaders.as_mut()) {
            comm.config.algorithms.clear();
            comm.config.check = false;
            comm.measures_overhead = false;
        }
        // The node's segment now, not in its first step (its setup is an exchange that
        // waits for the node's ranks). Where it cannot be set up the steps run plans.
        if node.size() > 1 {
            node.segment_ready()?;
        }
        let layout = self.nodes.layout().clone();
        Ok(NodeComms {
            node_buffers: StepBuffers::default(),
            leader_buffers: StepBuffers::default(),
            node,
            leaders,
            layout,
        })
    }

    /// A call of the composition failed or was refused on this rank: every communicator it
    /// uses gives it up, so that the peers waiting in any phase fail at once. The phases'
    /// first, where the peers wait: telling the parent's peers may take its whole drain
    /// (they do not progress the parent's fabric while they wait in a phase).
    pub(crate) fn node_phases_failed(&mut self, op: &'static str, err: &CommError) {
        if let Some(phases) = self.node.phases.as_mut() {
            for comm in phases.communicators_mut() {
                comm.comm_refused(op, err);
            }
        }
        self.comm_refused(op, err);
    }
}
