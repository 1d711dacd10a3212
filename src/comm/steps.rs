//! A collective run as its node phases (the node-phases engine, `phases.rs`) in steps: each
//! step a call on the communicator of this rank's node or on that of the nodes' first ranks,
//! on registered buffers of that communicator, with the call's data copied into them before
//! the step and out of them after it. One task holds the steps and the task of the step that runs, so
//! that the blocking, nonblocking and persistent forms run the same steps: `wait` drives them
//! to the end, `test` as far as the peers allow. Every progress is given the caller's receive
//! buffer again, as every task is.

use crate::plan::{Layout, Problem, Reduction};

use super::buffer::Buffer;
use super::call::Choice;
use super::calls::Lengths;
use super::communicator::{Communicator, NodeComms};
use super::engine::{Engines, Task};
use super::error::argument;
use super::error::Result;
use super::memory::{Memory, StepBuffers};

/// The communicator a step runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Level {
    /// The ranks of this rank's node.
    Node,
    /// The first rank of every node (only those take such steps).
    Leaders,
}

/// The bytes a step reads or writes: the call's input (copied at the start), two areas of
/// the call's own, or the caller's receive buffer.
#[derive(Clone, Copy, Debug)]
pub(super) enum Area {
    Input,
    /// A node's partial reduction or its blocks.
    Work,
    /// An allgather(v)'s blocks, node after node.
    Whole,
    Out,
}

/// One step of this rank.
#[derive(Debug)]
pub(super) enum Step {
    Barrier(Level),
    /// `len` bytes of `data` from `root` (a rank of the level).
    Bcast {
        level: Level,
        root: usize,
        data: Area,
        len: usize,
    },
    /// `len` bytes of `from` reduced into `into` at `root`, or on every rank (`None`: an
    /// allreduce).
    Reduce {
        level: Level,
        root: Option<usize>,
        reduction: Reduction,
        from: Area,
        into: Area,
        len: usize,
    },
    /// Each rank of the level's `counts` bytes of `from`, all of them into `into`.
    Allgatherv {
        level: Level,
        counts: Vec<usize>,
        from: Area,
        into: Area,
    },
    /// From `root`, each rank of the level its `counts` bytes; the root's blocks lie in `from`
    /// at `offsets` (a reduce-scatter's blocks of the node's ranks, in the whole vector).
    Scatterv {
        level: Level,
        root: usize,
        counts: Vec<usize>,
        offsets: Vec<usize>,
        from: Area,
        into: Area,
    },
    /// Here only: the whole, node after node (ranks in `order`), to each rank's place.
    Place {
        counts: Vec<usize>,
        order: Vec<usize>,
    },
}

impl Step {
    fn level(&self) -> Option<Level> {
        match self {
            Step::Barrier(level)
            | Step::Bcast { level, .. }
            | Step::Reduce { level, .. }
            | Step::Allgatherv { level, .. }
            | Step::Scatterv { level, .. } => Some(*level),
            Step::Place { .. } => None,
        }
    }
}

/// A collective as its steps on this rank, where they stand, and its data but the caller's
/// receive buffer (`out`, given to each progress).
pub(super) struct PhasedCall {
    steps: Vec<Step>,
    at: usize,
    running: Option<Box<dyn Task>>,
    input: Vec<u8>,
    work: Vec<u8>,
    whole: Vec<u8>,
}

impl PhasedCall {
    /// The steps of `problem` on rank `rank` of a communicator laid out as `layout`;
    /// `input` is the rank's data.
    pub(super) fn new(
        problem: &Problem,
        layout: &Layout,
        rank: usize,
        input: Vec<u8>,
    ) -> Result<Self> {
        let (steps, work, whole) = steps(problem, layout, rank)?;
        Ok(PhasedCall {
            steps,
            at: 0,
            running: None,
            input,
            work: vec![0; work],
            whole: vec![0; whole],
        })
    }

    fn area<'s>(&'s self, area: Area, out: &'s [u8]) -> &'s [u8] {
        match area {
            Area::Input => &self.input,
            Area::Work => &self.work,
            Area::Whole => &self.whole,
            Area::Out => out,
        }
    }

    fn area_mut<'s>(&'s mut self, area: Area, out: &'s mut [u8]) -> &'s mut [u8] {
        match area {
            Area::Input => &mut self.input,
            Area::Work => &mut self.work,
            Area::Whole => &mut self.whole,
            Area::Out => out,
        }
    }

    /// The step taken here only: the whole, node after node, to each rank's place in `out`.
    fn place(&self, step_at: usize, out: &mut [u8]) -> Result<()> {
        let outside = || argument("node phases", "a step's data outside its buffers".into());
        let Step::Place { counts, order } = &self.steps[step_at] else {
            return Ok(());
        };
        let offsets = crate::transport::segment::block_offsets(counts);
        let mut at = 0;
        for &r in order {
            let block = self.whole.get(at..at + counts[r]).ok_or_else(outside)?;
            out.get_mut(offsets[r]..offsets[r] + counts[r])
                .ok_or_else(outside)?
                .copy_from_slice(block);
            at += counts[r];
        }
        Ok(())
    }
}

/// The steps of `problem` on `rank` (see the table in docs/architecture.md, "Node phases on
/// the shared segment"), and the lengths of the work and whole areas.
fn steps(problem: &Problem, layout: &Layout, rank: usize) -> Result<(Vec<Step>, usize, usize)> {
    // Nodes are numbered in the order of their first ranks: node v's leader is rank v of the
    // leaders' communicator, and a rank's index on its node its place there.
    let local = |r: usize| {
        layout
            .ranks_on(layout.node_of(r))
            .iter()
            .position(|&x| x == r)
            .unwrap_or(0)
    };
    let mine = layout.node_of(rank);
    let leads = local(rank) == 0;
    let mut steps = Vec::new();
    let mut work = 0;
    match *problem {
        Problem::Barrier { .. } => {
            steps.push(Step::Barrier(Level::Node));
            if leads {
                steps.push(Step::Barrier(Level::Leaders));
            }
            steps.push(Step::Barrier(Level::Node));
        }
        Problem::Broadcast { root, bytes, .. } => {
            let root_node = layout.node_of(root);
            let on_root_node = mine == root_node;
            // A root that is not its node's first rank hands its data to its node first.
            let root_leads = local(root) == 0;
            let bcast = |level, root| Step::Bcast {
                level,
                root,
                data: Area::Out,
                len: bytes,
            };
            if on_root_node && !root_leads {
                steps.push(bcast(Level::Node, local(root)));
            }
            if leads {
                steps.push(bcast(Level::Leaders, root_node));
            }
            if !on_root_node || root_leads {
                steps.push(bcast(Level::Node, 0));
            }
        }
        Problem::Allreduce {
            reduction, bytes, ..
        } => {
            // The node's vectors folded on its first rank, those folded among the first
            // ranks, the result to every rank of each node.
            work = bytes;
            steps.push(fold_on_node(reduction, bytes));
            if leads {
                steps.push(Step::Reduce {
                    level: Level::Leaders,
                    root: None,
                    reduction,
                    from: Area::Work,
                    into: Area::Out,
                    len: bytes,
                });
            }
            steps.push(Step::Bcast {
                level: Level::Node,
                root: 0,
                data: Area::Out,
                len: bytes,
            });
        }
        Problem::Reduce {
            root,
            reduction,
            bytes,
            ..
        } => {
            let root_node = layout.node_of(root);
            let on_root_node = mine == root_node;
            let root_leads = local(root) == 0;
            // The root's copy of the result is its receive buffer; every other rank's is the
            // work area (the root's node's first rank hands it on from there).
            let result = if rank == root { Area::Out } else { Area::Work };
            work = bytes;
            steps.push(fold_on_node(reduction, bytes));
            if leads {
                steps.push(Step::Reduce {
                    level: Level::Leaders,
                    root: Some(root_node),
                    reduction,
                    from: Area::Work,
                    into: result,
                    len: bytes,
                });
            }
            if on_root_node && !root_leads {
                steps.push(Step::Bcast {
                    level: Level::Node,
                    root: 0,
                    data: result,
                    len: bytes,
                });
            }
        }
        Problem::ReduceScatterBlock {
            p,
            reduction,
            block,
        } => return reduce_scatter_steps(reduction, &vec![block; p], layout, rank),
        Problem::ReduceScatter {
            reduction,
            ref counts,
        } => return reduce_scatter_steps(reduction, counts, layout, rank),
        Problem::Allgather { p, block } => {
            return allgatherv_steps(&vec![block; p], layout, rank);
        }
        Problem::Allgatherv { ref counts } => return allgatherv_steps(counts, layout, rank),
        _ => {
            return Err(argument(
                "node phases",
                "the node phases serve bcast, reduce, allreduce, reduce-scatter(-block), \
                 allgather(v) and barrier"
                    .into(),
            ))
        }
    }
    Ok((steps, work, 0))
}

/// The first step of a reduction: the node's vectors folded into its first rank's work area.
fn fold_on_node(reduction: Reduction, len: usize) -> Step {
    Step::Reduce {
        level: Level::Node,
        root: Some(0),
        reduction,
        from: Area::Input,
        into: Area::Work,
        len,
    }
}

/// A reduce-scatter of `counts` bytes per rank as its steps: the node's vectors folded on its
/// first rank, the nodes' folded among the first ranks (an allreduce: every placement's
/// blocks of a node lie anywhere in the vector), and each first rank's node's blocks
/// scattered to their ranks.
fn reduce_scatter_steps(
    reduction: Reduction,
    counts: &[usize],
    layout: &Layout,
    rank: usize,
) -> Result<(Vec<Step>, usize, usize)> {
    let total = crate::plan::checked_sum(counts)
        .map_err(|_| argument("node phases", "the counts overflow".into()))?;
    let offsets = crate::transport::segment::block_offsets(counts);
    let members = layout.ranks_on(layout.node_of(rank));
    let mut steps = vec![fold_on_node(reduction, total)];
    if members.first() == Some(&rank) {
        steps.push(Step::Reduce {
            level: Level::Leaders,
            root: None,
            reduction,
            from: Area::Work,
            into: Area::Work,
            len: total,
        });
    }
    steps.push(Step::Scatterv {
        level: Level::Node,
        root: 0,
        counts: members.iter().map(|&r| counts[r]).collect(),
        offsets: members.iter().map(|&r| offsets[r]).collect(),
        from: Area::Work,
        into: Area::Out,
    });
    Ok((steps, total, 0))
}

/// An allgatherv of `counts` as its steps: the node's blocks gathered on every rank of the
/// node (where a rank other than its first has a block), the nodes' shares exchanged among
/// the leaders (node by node, in the order of the leaders), the whole broadcast inside each
/// node, then every block put at its rank's place.
fn allgatherv_steps(
    counts: &[usize],
    layout: &Layout,
    rank: usize,
) -> Result<(Vec<Step>, usize, usize)> {
    let mine = layout.node_of(rank);
    let leads = layout.ranks_on(mine).first() == Some(&rank);
    let share = |v: usize| -> usize { layout.ranks_on(v).iter().map(|&r| counts[r]).sum() };
    let node_counts: Vec<usize> = layout.ranks_on(mine).iter().map(|&r| counts[r]).collect();
    let shares: Vec<usize> = (0..layout.nodes()).map(share).collect();
    let total: usize = shares.iter().sum();
    let mut steps = Vec::new();
    // Where only the first rank of a node has a block (as in a broadcast-like distribution),
    // it has its node's blocks already: every rank of the node sees that from the counts and
    // skips the gather.
    let gathers = node_counts.iter().skip(1).any(|&c| c > 0);
    if gathers {
        steps.push(Step::Allgatherv {
            level: Level::Node,
            counts: node_counts,
            from: Area::Input,
            into: Area::Work,
        });
    }
    if leads {
        steps.push(Step::Allgatherv {
            level: Level::Leaders,
            counts: shares.clone(),
            from: if gathers { Area::Work } else { Area::Input },
            into: Area::Whole,
        });
    }
    steps.push(Step::Bcast {
        level: Level::Node,
        root: 0,
        data: Area::Whole,
        len: total,
    });
    let order = (0..layout.nodes())
        .flat_map(|v| layout.ranks_on(v).iter().copied())
        .collect();
    steps.push(Step::Place {
        counts: counts.to_vec(),
        order,
    });
    Ok((steps, if gathers { shares[mine] } else { 0 }, total))
}

impl NodeComms {
    /// The communicator and buffers of `level`.
    fn level(&mut self, level: Level) -> Result<(&mut Communicator, &mut StepBuffers)> {
        let (comm, buffers) = match level {
            Level::Node => (Some(&mut self.node), &mut self.node_buffers),
            Level::Leaders => (self.leaders.as_mut(), &mut self.leader_buffers),
        };
        let comm = comm.ok_or_else(|| {
            argument(
                "node phases",
                "a step among the nodes' first ranks on another rank".into(),
            )
        })?;
        Ok((comm, buffers))
    }

    /// Starts `step` of `call` on the engines `steps`: its data into the level's buffers,
    /// then the call there.
    fn begin(
        &mut self,
        call: &PhasedCall,
        out: &[u8],
        step: &Step,
        steps: Engines,
    ) -> Result<Box<dyn Task>> {
        let Some(level) = step.level() else {
            return Err(argument("node phases", "a local step started".into()));
        };
        let (comm, buffers) = self.level(level)?;
        let me = comm.rank();
        let auto = Choice::Auto;
        match step {
            Step::Barrier(_) => {
                let barrier = comm.barrier_call(auto);
                steps.start(comm, barrier, Memory::default())
            }
            Step::Bcast {
                root, data, len, ..
            } => {
                buffers.fit(|n| comm.alloc(n), 0, *len)?;
                let recv = recv_of(buffers)?;
                if me == *root {
                    recv.copy_from_slice(slice(call.area(*data, out), *len)?);
                }
                let bcast = comm.bcast_call(*len, *root, auto);
                steps.start(comm, bcast, Memory::of_buffers(None, buffers.recv.as_mut()))
            }
            Step::Reduce {
                root,
                reduction,
                from,
                len,
                ..
            } => {
                buffers.fit(|n| comm.alloc(n), *len, *len)?;
                fill(buffers, slice(call.area(*from, out), *len)?)?;
                let lengths = Lengths {
                    send: *len,
                    recv: *len,
                };
                let reduction = match root {
                    Some(root) => comm.reduce_call(lengths, *reduction, *root, auto),
                    None => comm.allreduce_call(lengths, *reduction, auto),
                };
                steps.start(comm, reduction, buffers.memory())
            }
            Step::Allgatherv { counts, from, .. } => {
                let own = counts.get(me).copied().unwrap_or(0);
                let total = counts.iter().sum();
                buffers.fit(|n| comm.alloc(n), own, total)?;
                fill(buffers, slice(call.area(*from, out), own)?)?;
                let lengths = Lengths {
                    send: own,
                    recv: total,
                };
                let allgatherv = comm.allgatherv_call(lengths, counts, auto);
                steps.start(comm, allgatherv, buffers.memory())
            }
            Step::Scatterv {
                root,
                counts,
                offsets,
                from,
                ..
            } => {
                let own = counts.get(me).copied().unwrap_or(0);
                let whole = if me == *root { counts.iter().sum() } else { 0 };
                buffers.fit(|n| comm.alloc(n), whole, own)?;
                if me == *root {
                    let blocks = scattered_blocks(call.area(*from, out), counts, offsets)?;
                    fill(buffers, &blocks)?;
                }
                let lengths = Lengths {
                    send: whole,
                    recv: own,
                };
                let scatterv = comm.scatterv_call(lengths, counts, *root, auto);
                steps.start(comm, scatterv, buffers.memory())
            }
            Step::Place { .. } => Err(argument("node phases", "a local step started".into())),
        }
    }

    /// Ends `step` of `call`: the result, where this rank has one, out of the level's
    /// buffers.
    fn end(&mut self, call: &mut PhasedCall, out: &mut [u8], step_at: usize) -> Result<()> {
        let (into, len, receives) = match &call.steps[step_at] {
            Step::Barrier(_) | Step::Place { .. } => return Ok(()),
            Step::Bcast {
                level,
                root,
                data,
                len,
            } => (*data, *len, self.level(*level)?.0.rank() != *root),
            Step::Reduce {
                level,
                root,
                into,
                len,
                ..
            } => {
                let me = self.level(*level)?.0.rank();
                (*into, *len, root.map_or(true, |root| me == root))
            }
            Step::Allgatherv { counts, into, .. } => (*into, counts.iter().sum(), true),
            Step::Scatterv {
                level,
                counts,
                into,
                ..
            } => {
                let me = self.level(*level)?.0.rank();
                (*into, counts.get(me).copied().unwrap_or(0), true)
            }
        };
        if !receives {
            return Ok(());
        }
        let Some(level) = call.steps[step_at].level() else {
            return Ok(());
        };
        let (_, buffers) = self.level(level)?;
        let result = slice(recv_of(buffers)?, len)?;
        call.area_mut(into, out)
            .get_mut(..len)
            .ok_or_else(|| argument("node phases", "a step's result outside its area".into()))?
            .copy_from_slice(result);
        Ok(())
    }
}

fn slice(bytes: &[u8], len: usize) -> Result<&[u8]> {
    bytes
        .get(..len)
        .ok_or_else(|| argument("node phases", "a step's data outside its area".into()))
}

fn recv_of(buffers: &mut StepBuffers) -> Result<&mut Buffer> {
    buffers
        .recv
        .as_mut()
        .ok_or_else(|| argument("node phases", "a step without its buffer".into()))
}

/// The blocks at `offsets` of `from`, `counts` bytes each, one after the other.
fn scattered_blocks(from: &[u8], counts: &[usize], offsets: &[usize]) -> Result<Vec<u8>> {
    let mut blocks = Vec::with_capacity(counts.iter().sum());
    for (&at, &len) in offsets.iter().zip(counts) {
        let block = from
            .get(at..at + len)
            .ok_or_else(|| argument("node phases", "a step's data outside its area".into()))?;
        blocks.extend_from_slice(block);
    }
    Ok(blocks)
}

/// The level's send buffer filled with `data`.
fn fill(buffers: &mut StepBuffers, data: &[u8]) -> Result<()> {
    let send = buffers
        .send
        .as_mut()
        .ok_or_else(|| argument("node phases", "a step without its buffer".into()))?;
    send.get_mut(..data.len())
        .ok_or_else(|| argument("node phases", "a step's data outside its buffer".into()))?
        .copy_from_slice(data);
    Ok(())
}

impl Communicator {
    /// Progresses the steps of `call` on the caller's receive buffer `out`, the same at
    /// every progress (`wait`: to their end), the steps on the engines `steps`; true once
    /// complete. A failure gives up the phases' communicators and this one
    /// ([`Communicator::node_phases_failed`]).
    pub(super) fn phases_progress(
        &mut self,
        op: &'static str,
        call: &mut PhasedCall,
        out: &mut [u8],
        steps: Engines,
        wait: bool,
    ) -> Result<bool> {
        let progressed = self.phases_step(call, out, steps, wait);
        if let Err(err) = &progressed {
            self.node_phases_failed(op, err);
        }
        progressed
    }

    fn phases_step(
        &mut self,
        call: &mut PhasedCall,
        out: &mut [u8],
        steps: Engines,
        wait: bool,
    ) -> Result<bool> {
        let Some(phases) = self.node.phases.as_mut() else {
            return Err(argument(
                "node phases",
                "the node phases are not set up".into(),
            ));
        };
        while call.at < call.steps.len() {
            let at = call.at;
            let Some(level) = call.steps[at].level() else {
                call.place(at, out)?;
                call.at += 1;
                continue;
            };
            let mut running = match call.running.take() {
                Some(running) => running,
                None => phases.begin(call, out, &call.steps[at], steps)?,
            };
            let (comm, buffers) = phases.level(level)?;
            let done = running.progress(comm, buffers.memory(), wait)?;
            if !done {
                call.running = Some(running);
                return Ok(false);
            }
            phases.end(call, out, at)?;
            call.at += 1;
        }
        Ok(true)
    }
}
