//! Hierarchical collectives whose node phases run on the shared segment: on a communicator
//! whose ranks span several nodes, some holding several of them, a small bcast, reduce,
//! allreduce or barrier runs as a collective on the shared segment inside each node (one copy
//! in, flags, one copy out: [`super::segment`]), the fastest plan among one rank per node
//! (each node's first rank, its leader), and the segment inside each node again.
//!
//! The plans' own hierarchical and multi-lane algorithms run their node phases as writes over
//! the node's fabric; for small calls, where a phase costs its latency, one segment operation
//! replaces the rounds of a node phase. Served in the blocking forms (the composition waits
//! for each phase before the next); the nonblocking and persistent forms run the plans. The
//! decision and its pieces: docs/architecture.md, "Node phases on the shared segment".

use std::time::Instant;

use crate::plan::Problem;

use super::arguments::argument;
use super::call::Call;
use super::segment::{part_bytes, served};
use super::{Choice, CommError, Communicator, Executed, Payload, PayloadMut, Result};
use crate::transport::OpStats;

/// The names of the hierarchical collectives whose node phases run on the segment, as
/// `Choice::Named` and `CIRCULANT_ALGORITHM` take them.
pub const NODE_PHASE_ALGORITHMS: [&str; 4] = [
    "hier-segment-bcast",
    "hier-segment-reduce",
    "hier-segment-allreduce",
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
        Problem::Barrier { .. } => "hier-segment-barrier",
        _ => return None,
    })
}

/// The bytes a node's first rank takes in the first node phase: a reduction's vectors from
/// each other rank of the largest node, else the call's bytes.
fn folds(problem: &Problem, layout: &crate::plan::Layout) -> usize {
    let bytes = part_bytes(problem);
    match problem {
        Problem::Reduce { .. } | Problem::Allreduce { .. } => {
            bytes.saturating_mul(layout.max_per_node().saturating_sub(1))
        }
        _ => bytes,
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
        let (bytes, folds) = (part_bytes(&call.problem), folds(&call.problem, layout));
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
        let (bytes, folds) = (part_bytes(problem), folds(problem, layout));
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
            let phases = self.split_phases()?;
            self.phases = PhaseState::Ready(Box::new(phases));
        }
        // The input of a reduction: the send buffer (the C API copies an in-place input into
        // one; no reduction of the Rust API is in place).
        if call.send_in_recv.is_some() {
            let err = argument(op, format!("{name} does not serve calls in place"));
            self.node_phases_failed(op, &err);
            return Err(err);
        }
        let source: &[u8] = send.map_or(&[], |send| send.bytes());
        let mut empty: [u8; 0] = [];
        let out: &mut [u8] = match recv {
            Some(recv) => recv.bytes_mut(),
            None => &mut empty,
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
    /// uses gives it up, so that the peers waiting in any phase fail at once.
    pub(super) fn node_phases_failed(&mut self, op: &'static str, err: &CommError) {
        self.comm_refused(op, err);
        if let PhaseState::Ready(phases) = &mut self.phases {
            phases.node.comm_refused(op, err);
            if let Some(leaders) = phases.leaders.as_mut() {
                leaders.comm_refused(op, err);
            }
        }
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
            _ => Err(argument(
                "node phases",
                "the node phases serve bcast, reduce, allreduce and barrier".into(),
            )),
        }
    }
}
