//! Hierarchical collectives whose node phases run on the shared segment: on a communicator
//! whose ranks span several nodes, some holding several of them, a small bcast, reduce,
//! allreduce, allgather(v) or barrier runs as a collective on the shared segment inside each
//! node (one copy in, flags, one copy out: [`super::segment`]), the fastest plan among one
//! rank per node (each node's first rank, its leader), and the segment inside each node
//! again. An allgather(v) gathers each node's blocks (a segment allgatherv), exchanges the
//! nodes' among the leaders (an allgatherv of the nodes' shares), broadcasts the whole inside
//! each node and puts the blocks in rank order, whatever the placement.
//!
//! The plans' own hierarchical and multi-lane algorithms run their node phases as writes over
//! the node's fabric; for small calls, where a phase costs its latency, one segment operation
//! replaces the rounds of a node phase. Served in the blocking forms (the composition waits
//! for each phase before the next); the nonblocking and persistent forms run the plans. The
//! decision and its pieces: docs/architecture.md, "Node phases on the shared segment".

use std::borrow::Cow;
use std::time::Instant;

use crate::plan::Problem;

use super::arguments::argument;
use super::call::Call;
use super::segment::{block_offsets, part_bytes, served};
use super::{Choice, CommError, Communicator, Executed, Payload, PayloadMut, Result};
use crate::transport::OpStats;

/// The names of the hierarchical collectives whose node phases run on the segment, as
/// `Choice::Named` and `CIRCULANT_ALGORITHM` take them.
pub const NODE_PHASE_ALGORITHMS: [&str; 6] = [
    "hier-segment-bcast",
    "hier-segment-reduce",
    "hier-segment-allreduce",
    "hier-segment-allgather",
    "hier-segment-allgatherv",
    "hier-segment-barrier",
];

/// The communicators of the phases: the ranks of this rank's node, and (on each node's first
/// rank) the first ranks of all nodes.
pub(super) struct Phases {
    node: Communicator,
    leaders: Option<Communicator>,
    /// The parent's node map, kept so that a call need not copy it.
    layout: crate::plan::Layout,
}

/// Where a communicator's node phases stand.
#[derive(Default)]
pub(super) enum PhaseState {
    /// Not set up yet: the first call they serve splits the communicators.
    #[default]
    Untried,
    Ready(Box<Phases>),
}

impl PhaseState {
    /// The phases' communicators, once set up.
    pub(super) fn communicators(&self) -> impl Iterator<Item = &Communicator> {
        let phases = match self {
            PhaseState::Ready(phases) => Some(phases.as_ref()),
            PhaseState::Untried => None,
        };
        phases
            .into_iter()
            .flat_map(|p| std::iter::once(&p.node).chain(p.leaders.as_ref()))
    }

    /// The same, to change: they follow their parent's models and deadline.
    pub(super) fn communicators_mut(&mut self) -> impl Iterator<Item = &mut Communicator> {
        let phases = match self {
            PhaseState::Ready(phases) => Some(phases.as_mut()),
            PhaseState::Untried => None,
        };
        phases
            .into_iter()
            .flat_map(|p| std::iter::once(&mut p.node).chain(p.leaders.as_mut()))
    }
}

/// The composition of `problem`, if there is one.
fn phases_name(problem: &Problem) -> Option<&'static str> {
    Some(match problem {
        Problem::Broadcast { .. } => "hier-segment-bcast",
        Problem::Reduce { .. } => "hier-segment-reduce",
        Problem::Allreduce { .. } => "hier-segment-allreduce",
        Problem::Allgather { .. } => "hier-segment-allgather",
        Problem::Allgatherv { .. } => "hier-segment-allgatherv",
        Problem::Barrier { .. } => "hier-segment-barrier",
        _ => return None,
    })
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
        Problem::Reduce { .. } | Problem::Allreduce { .. } => {
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

impl Communicator {
    /// The composition that serves `call` in a blocking form, if one does: every rank
    /// decides alike from the call's arguments, the layout and the configuration. A forced
    /// `hier-segment-…` name that cannot serve the call is an error.
    pub(super) fn node_phases_serve(&self, call: &Call<'_>) -> Result<Option<&'static str>> {
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
        } else if bytes > self.config.segment_limit.max(1) {
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

    /// The composition that would serve `problem` unforced, with the time the models give it
    /// (a segment operation inside the nodes, the fastest plan among the nodes' first ranks,
    /// a segment operation again).
    pub(super) fn node_phases_for(&self, problem: &Problem) -> Option<(&'static str, f64)> {
        let name = phases_name(problem)?;
        let layout = self.nodes.layout();
        let (bytes, folds) = (phase_bytes(problem), folds(problem, layout));
        let serves = self.config.segment_limit > 0
            && problem.p() == layout.p()
            && layout.is_hierarchical()
            && folds <= self.config.segment_limit;
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

    /// Runs `call` as its composition `name` (see the module documentation), blocking.
    pub(super) fn run_node_phases<S, R>(
        &mut self,
        mut call: Call<'_>,
        name: &'static str,
        send: Option<&S>,
        recv: Option<&mut R>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let entered = Instant::now();
        let op = call.op;
        // Compared with every rank's before the phases, as the other paths do before their
        // first message.
        let checked = self.checks_agreed(&mut call, name)?;
        if let Err(err) = checked {
            self.node_phases_failed(op, &err);
            return Err(err);
        }
        if matches!(self.phases, PhaseState::Untried) {
            // The splits' own exchanges take the nonblocking path, never the node phases.
            let phases = self.split_phases()?;
            self.phases = PhaseState::Ready(Box::new(phases));
        }
        let mut empty: [u8; 0] = [];
        let out: &mut [u8] = match recv {
            Some(recv) => recv.bytes_mut(),
            None => &mut empty,
        };
        // The input: the send buffer, or an allgather(v)'s own block in place (the C API
        // copies an in-place reduction's input into a send buffer).
        let in_place: Vec<u8>;
        let source: &[u8] = match call.send_in_recv {
            None => send.map_or(&[], |send| send.bytes()),
            Some((at, len))
                if matches!(
                    call.problem,
                    Problem::Allgather { .. } | Problem::Allgatherv { .. }
                ) =>
            {
                in_place = out.get(at..at + len).unwrap_or_default().to_vec();
                &in_place
            }
            Some(_) => {
                let err = argument(op, format!("{name} does not serve calls in place"));
                self.node_phases_failed(op, &err);
                return Err(err);
            }
        };
        let rank = self.rank();
        let PhaseState::Ready(phases) = &mut self.phases else {
            return Err(argument(op, "the node phases are not set up".into()));
        };
        let overhead = Instant::now().saturating_duration_since(entered);
        let ran = phases.run(&call.problem, rank, source, out);
        if let Err(err) = ran {
            self.node_phases_failed(op, &err);
            return Err(err);
        }
        self.last = Some(Executed {
            algorithm: name,
            stats: OpStats::default(),
            overhead,
        });
        Ok(())
    }

    /// Splits the phases' communicators (collective over this one): the ranks of each node,
    /// and each node's first rank. They take this communicator's configuration, without
    /// forced algorithms (they choose for themselves).
    fn split_phases(&mut self) -> Result<Phases> {
        let mut node = self.split_by_node()?;
        let first = self.local_ranks().first() == Some(&self.rank());
        let mut leaders = self.split(first.then_some(0), self.rank() as i64)?;
        for comm in std::iter::once(&mut node).chain(leaders.as_mut()) {
            comm.config.algorithms.clear();
        }
        let layout = self.nodes.layout().clone();
        Ok(Phases {
            node,
            leaders,
            layout,
        })
    }

    /// A call of the composition failed or was refused on this rank: every communicator it
    /// uses gives it up, so that the peers waiting in any phase fail at once. The phases'
    /// first, where the peers wait: telling the parent's peers may take its whole drain
    /// (they do not progress the parent's fabric while they wait in a phase).
    pub(super) fn node_phases_failed(&mut self, op: &'static str, err: &CommError) {
        if let PhaseState::Ready(phases) = &mut self.phases {
            phases.node.comm_refused(op, err);
            if let Some(leaders) = phases.leaders.as_mut() {
                leaders.comm_refused(op, err);
            }
        }
        self.comm_refused(op, err);
    }
}

impl Phases {
    /// The phases of `problem` on this rank (`rank` of the parent): `source` its input where
    /// it has one, `out` its receive buffer.
    fn run(&mut self, problem: &Problem, rank: usize, source: &[u8], out: &mut [u8]) -> Result<()> {
        let layout = &self.layout;
        // Nodes are numbered in the order of their first ranks: node v's leader is rank v of
        // the leaders' communicator, and a rank's index on its node its place there.
        let local = |r: usize| {
            layout
                .ranks_on(layout.node_of(r))
                .iter()
                .position(|&x| x == r)
                .unwrap_or(0)
        };
        let node = &mut self.node;
        match *problem {
            Problem::Barrier { .. } => {
                node.barrier()?;
                if let Some(leaders) = self.leaders.as_mut() {
                    leaders.barrier()?;
                }
                node.barrier()
            }
            Problem::Broadcast { root, .. } => {
                let root_node = layout.node_of(root);
                let on_root_node = layout.node_of(rank) == root_node;
                // A root that is not its node's first rank hands its data to its node first.
                let root_leads = local(root) == 0;
                if on_root_node && !root_leads {
                    node.bcast_using(out, local(root), Choice::Auto)?;
                }
                if let Some(leaders) = self.leaders.as_mut() {
                    leaders.bcast_using(out, root_node, Choice::Auto)?;
                }
                if !on_root_node || root_leads {
                    node.bcast_using(out, 0, Choice::Auto)?;
                }
                Ok(())
            }
            Problem::Allreduce { reduction, .. } => {
                // The node's vectors folded on its first rank, those folded among the first
                // ranks, the result to every rank of each node.
                node.reduce_bytes(source, out, reduction, 0, Choice::Auto)?;
                if let Some(leaders) = self.leaders.as_mut() {
                    let partial = out.to_vec();
                    leaders.allreduce_bytes(&partial[..], out, reduction, Choice::Auto)?;
                }
                node.bcast_using(out, 0, Choice::Auto)
            }
            Problem::Reduce {
                root,
                reduction,
                bytes,
                ..
            } => {
                let root_node = layout.node_of(root);
                let on_root_node = layout.node_of(rank) == root_node;
                let root_leads = local(root) == 0;
                let mut partial = vec![0u8; if self.leaders.is_some() { bytes } else { 0 }];
                node.reduce_bytes(source, &mut partial[..], reduction, 0, Choice::Auto)?;
                if let Some(leaders) = self.leaders.as_mut() {
                    // The root's node's first rank gets the result: into the root's buffer
                    // where it is the root, else to hand on.
                    if rank == root {
                        leaders.reduce_bytes(
                            &partial[..],
                            out,
                            reduction,
                            root_node,
                            Choice::Auto,
                        )?;
                        return Ok(());
                    }
                    let mut result = vec![0u8; if on_root_node { bytes } else { 0 }];
                    leaders.reduce_bytes(
                        &partial[..],
                        &mut result[..],
                        reduction,
                        root_node,
                        Choice::Auto,
                    )?;
                    if on_root_node && !root_leads {
                        node.bcast_using(&mut result[..], 0, Choice::Auto)?;
                    }
                    return Ok(());
                }
                if on_root_node && !root_leads {
                    // The root's node's first rank broadcasts the result inside the node.
                    if rank == root {
                        node.bcast_using(out, 0, Choice::Auto)?;
                    } else {
                        let mut passing = vec![0u8; bytes];
                        node.bcast_using(&mut passing[..], 0, Choice::Auto)?;
                    }
                }
                Ok(())
            }
            Problem::Allgather { .. } | Problem::Allgatherv { .. } => {
                let counts = counts_of(problem).unwrap_or_default();
                self.allgatherv(&counts, rank, source, out)
            }
            _ => Err(argument(
                "node phases",
                "the node phases serve bcast, reduce, allreduce, allgather(v) and barrier".into(),
            )),
        }
    }

    /// An allgatherv of `counts` as its phases: the node's blocks gathered on every rank of
    /// the node (where a rank other than its first has a block), the nodes' shares exchanged among the leaders (node by node, in the order
    /// of the leaders), the whole broadcast inside each node, then every block put at its
    /// rank's place in `out`.
    fn allgatherv(
        &mut self,
        counts: &[usize],
        rank: usize,
        source: &[u8],
        out: &mut [u8],
    ) -> Result<()> {
        let layout = &self.layout;
        let share = |v: usize| -> usize { layout.ranks_on(v).iter().map(|&r| counts[r]).sum() };
        let mine = layout.node_of(rank);
        let node_counts: Vec<usize> = layout.ranks_on(mine).iter().map(|&r| counts[r]).collect();
        let shares: Vec<usize> = (0..layout.nodes()).map(share).collect();
        let total: usize = shares.iter().sum();
        // Where only the first rank of a node has a block (as in a broadcast-like
        // distribution), it has its node's blocks already: every rank of the node sees that
        // from the counts and skips the gather.
        let node_blocks = if node_counts.iter().skip(1).all(|&c| c == 0) {
            source.to_vec()
        } else {
            let mut blocks = vec![0u8; shares[mine]];
            self.node
                .allgatherv_using(source, &mut blocks[..], &node_counts, Choice::Auto)?;
            blocks
        };
        // The nodes' blocks, node after node.
        let mut by_node = vec![0u8; total];
        if let Some(leaders) = self.leaders.as_mut() {
            leaders.allgatherv_using(&node_blocks[..], &mut by_node[..], &shares, Choice::Auto)?;
        }
        self.node.bcast_using(&mut by_node[..], 0, Choice::Auto)?;
        let offsets = block_offsets(counts);
        let mut at = 0;
        for v in 0..layout.nodes() {
            for &r in layout.ranks_on(v) {
                let block = by_node.get(at..at + counts[r]);
                let place = out.get_mut(offsets[r]..offsets[r] + counts[r]);
                match (block, place) {
                    (Some(block), Some(place)) => place.copy_from_slice(block),
                    _ => {
                        return Err(argument(
                            "allgatherv",
                            format!("rank {r}'s block outside the buffers"),
                        ))
                    }
                }
                at += counts[r];
            }
        }
        Ok(())
    }
}
