//! All algorithms by name, and the ones that apply to a problem.

use super::allgather::{BruckAllgather, RecursiveDoublingAllgather, RingAllgather};
use super::allreduce::{CirculantAllreduce, RecursiveDoublingAllreduce, ReduceScatterAllgather};
use super::alltoall::PairwiseAlltoall;
use super::barrier::DisseminationBarrier;
use super::circulant::{
    Blocking, CirculantAllgather, CirculantAllgatherv, CirculantBroadcast, CirculantCensus,
};
use super::circulant_reduce::{CirculantReduce, CirculantReduceBroadcast};
use super::hierarchical::{
    HierAllgatherv, HierAllreduce, HierBarrier, HierBroadcast, HierReduce, HierReduceScatter,
};
use super::intergroup::{IntergroupAllgatherv, RootGathering};
use super::multilane::{
    LaneAllgatherv, LaneAllreduce, LaneBarrier, LaneBroadcast, LaneReduce, LaneReduceScatter,
};
use super::one_source::{as_broadcast, OneSource};
use super::reduce_scatter::{CirculantReduceScatter, RingReduceScatter};
use super::ring::PipelinedRingAllgatherv;
use super::rootedv::{BinomialGatherv, BinomialScatterv, LinearGatherv, LinearScatterv};
use super::roundrobin::RoundRobinBroadcast;
use super::scan::HypercubeScan;
use super::tree::{
    BinomialBroadcast, BinomialGather, BinomialReduce, BinomialScatter, ScatterAllgatherBroadcast,
};
use super::{Algorithm, CostModel, Layout, LevelCosts, PlanError, Problem};

type Make = fn(&Problem, &CostModel) -> Result<Box<dyn Algorithm>, PlanError>;

fn boxed<A: Algorithm + 'static>(a: Result<A, PlanError>) -> Result<Box<dyn Algorithm>, PlanError> {
    a.map(|a| Box::new(a) as Box<dyn Algorithm>)
}

/// Every algorithm: (name, constructor with the block count chosen from the model where the
/// algorithm has one).
pub const ALL: &[(&str, Make)] = &[
    (CirculantBroadcast::NAME, |p, m| {
        boxed(CirculantBroadcast::new(p, Blocking::Model(*m)))
    }),
    (CirculantAllgather::NAME, |p, _| {
        boxed(CirculantAllgather::new(p))
    }),
    (CirculantCensus::NAME, |p, _| boxed(CirculantCensus::new(p))),
    (CirculantAllgatherv::NAME, |p, m| {
        boxed(CirculantAllgatherv::new(p, Blocking::Model(*m)))
    }),
    (CirculantReduce::NAME, |p, m| {
        boxed(CirculantReduce::new(p, Blocking::Model(*m)))
    }),
    (CirculantReduceScatter::NAME, |p, _| {
        boxed(CirculantReduceScatter::new(p))
    }),
    (CirculantAllreduce::NAME, |p, _| {
        boxed(CirculantAllreduce::new(p))
    }),
    (CirculantReduceBroadcast::NAME, |p, m| {
        boxed(CirculantReduceBroadcast::new(p, Blocking::Model(*m)))
    }),
    (BinomialBroadcast::NAME, |p, _| {
        boxed(BinomialBroadcast::new(p))
    }),
    (ScatterAllgatherBroadcast::NAME, |p, _| {
        boxed(ScatterAllgatherBroadcast::new(p))
    }),
    (RoundRobinBroadcast::NAME, |p, m| {
        boxed(RoundRobinBroadcast::new(p, None, m))
    }),
    (BinomialReduce::NAME, |p, _| boxed(BinomialReduce::new(p))),
    (BinomialScatter::NAME, |p, _| boxed(BinomialScatter::new(p))),
    (BinomialGather::NAME, |p, _| boxed(BinomialGather::new(p))),
    (BinomialScatterv::NAME, |p, _| {
        boxed(BinomialScatterv::new(p))
    }),
    (BinomialGatherv::NAME, |p, _| boxed(BinomialGatherv::new(p))),
    (LinearScatterv::NAME, |p, _| boxed(LinearScatterv::new(p))),
    (LinearGatherv::NAME, |p, _| boxed(LinearGatherv::new(p))),
    (RingAllgather::NAME, |p, _| boxed(RingAllgather::new(p))),
    (RecursiveDoublingAllgather::NAME, |p, _| {
        boxed(RecursiveDoublingAllgather::new(p))
    }),
    (BruckAllgather::NAME, |p, _| boxed(BruckAllgather::new(p))),
    (PipelinedRingAllgatherv::NAME, |p, m| {
        boxed(PipelinedRingAllgatherv::new(p, None, m))
    }),
    (RecursiveDoublingAllreduce::NAME, |p, _| {
        boxed(RecursiveDoublingAllreduce::new(p))
    }),
    (ReduceScatterAllgather::NAME, |p, _| {
        boxed(ReduceScatterAllgather::new(p))
    }),
    (RingReduceScatter::NAME, |p, _| {
        boxed(RingReduceScatter::new(p))
    }),
    (HypercubeScan::NAME, |p, _| boxed(HypercubeScan::new(p))),
    (PairwiseAlltoall::NAME, |p, _| {
        boxed(PairwiseAlltoall::new(p))
    }),
    (DisseminationBarrier::NAME, |p, _| {
        boxed(DisseminationBarrier::new(p))
    }),
    (IntergroupAllgatherv::NAME, |p, _| {
        boxed(IntergroupAllgatherv::new(p))
    }),
    (RootGathering::NAME, |p, _| boxed(RootGathering::new(p))),
];

/// The name of every algorithm, flat ones first, in registry order.
pub fn names() -> impl Iterator<Item = &'static str> {
    ALL.iter()
        .map(|(n, _)| *n)
        .chain(NODE_AWARE.iter().map(|(n, _)| *n))
}

/// The algorithm called `name` for `problem`.
pub fn by_name(
    name: &str,
    problem: &Problem,
    model: &CostModel,
) -> Result<Box<dyn Algorithm>, PlanError> {
    let (_, make) = ALL
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| PlanError::UnknownAlgorithm(name.to_string()))?;
    made(problem, |p| make(p, model))
}

/// `make` for `problem`, or, where it is a broadcast's algorithm and `problem` an allgatherv
/// that one rank's broadcast solves ([`as_broadcast`]), that broadcast as the allgatherv.
fn made(
    problem: &Problem,
    make: impl Fn(&Problem) -> Result<Box<dyn Algorithm>, PlanError>,
) -> Result<Box<dyn Algorithm>, PlanError> {
    match (make(problem), as_broadcast(problem)) {
        (Err(PlanError::WrongCollective { .. }), Some(broadcast)) => {
            boxed(OneSource::new(problem, make(&broadcast)?))
        }
        (made, _) => made,
    }
}

/// Keeps the algorithms `made` returns, skipping those that do not solve the problem.
fn keep(
    out: &mut Vec<Box<dyn Algorithm>>,
    made: Result<Box<dyn Algorithm>, PlanError>,
) -> Result<(), PlanError> {
    match made {
        Ok(a) => out.push(a),
        Err(PlanError::WrongCollective { .. } | PlanError::Unsupported { .. }) => {}
        Err(e) => return Err(e),
    }
    Ok(())
}

/// The algorithm for `problem` that `model` prices fastest (of equal prices, the first in the
/// registry); for `name`, unsupported where none applies.
pub fn fastest(
    problem: &Problem,
    model: &CostModel,
    name: &'static str,
) -> Result<Box<dyn Algorithm>, PlanError> {
    applicable(problem, model)?
        .into_iter()
        .map(|a| (a.predict(model).time, a))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, a)| a)
        .ok_or(PlanError::Unsupported {
            algorithm: name,
            reason: format!("no algorithm for its {}", super::collective_name(problem)),
        })
}

/// Every algorithm that solves `problem`, with model-chosen block counts (for an allgatherv
/// whose bytes all come from one rank, the broadcasts too, run as it: [`OneSource`]). Errors
/// only if the problem itself is invalid.
pub fn applicable(
    problem: &Problem,
    model: &CostModel,
) -> Result<Vec<Box<dyn Algorithm>>, PlanError> {
    problem.validate()?;
    let mut out = Vec::new();
    for (_, make) in ALL {
        keep(&mut out, made(problem, |p| make(p, model)))?;
    }
    Ok(out)
}

type MakeOn = fn(&Problem, &Layout, &LevelCosts) -> Result<Box<dyn Algorithm>, PlanError>;

/// The node-aware algorithms ([`super::hierarchical`], [`super::multilane`]): planned for a layout of ranks on nodes,
/// applicable where several nodes hold several ranks.
pub const NODE_AWARE: &[(&str, MakeOn)] = &[
    (HierBroadcast::NAME, |p, l, c| {
        boxed(HierBroadcast::plan(p, l, c))
    }),
    (HierAllgatherv::NAME, |p, l, c| match p {
        Problem::Allgatherv { .. } => boxed(HierAllgatherv::plan(p, l, c)),
        _ => Err(PlanError::WrongCollective {
            algorithm: HierAllgatherv::NAME,
            collective: "allgatherv",
        }),
    }),
    (HierAllgatherv::ALLGATHER, |p, l, c| match p {
        Problem::Allgather { .. } => boxed(HierAllgatherv::plan(p, l, c)),
        _ => Err(PlanError::WrongCollective {
            algorithm: HierAllgatherv::ALLGATHER,
            collective: "allgather",
        }),
    }),
    (LaneBroadcast::NAME, |p, l, c| {
        boxed(LaneBroadcast::plan(p, l, c))
    }),
    (LaneAllgatherv::NAME, |p, l, c| match p {
        Problem::Allgatherv { .. } => boxed(LaneAllgatherv::plan(p, l, c)),
        _ => Err(PlanError::WrongCollective {
            algorithm: LaneAllgatherv::NAME,
            collective: "allgatherv",
        }),
    }),
    (LaneAllgatherv::ALLGATHER, |p, l, c| match p {
        Problem::Allgather { .. } => boxed(LaneAllgatherv::plan(p, l, c)),
        _ => Err(PlanError::WrongCollective {
            algorithm: LaneAllgatherv::ALLGATHER,
            collective: "allgather",
        }),
    }),
    (HierReduce::NAME, |p, l, c| boxed(HierReduce::plan(p, l, c))),
    (HierAllreduce::NAME, |p, l, c| {
        boxed(HierAllreduce::plan(p, l, c))
    }),
    (HierReduceScatter::NAME, |p, l, c| {
        boxed(HierReduceScatter::plan(p, l, c))
    }),
    (HierBarrier::NAME, |p, l, c| {
        boxed(HierBarrier::plan(p, l, c))
    }),
    (LaneReduce::NAME, |p, l, c| boxed(LaneReduce::plan(p, l, c))),
    (LaneAllreduce::NAME, |p, l, c| {
        boxed(LaneAllreduce::plan(p, l, c))
    }),
    (LaneReduceScatter::NAME, |p, l, c| {
        boxed(LaneReduceScatter::plan(p, l, c))
    }),
    (LaneBarrier::NAME, |p, l, c| {
        boxed(LaneBarrier::plan(p, l, c))
    }),
];

/// The algorithm called `name` for `problem` on `layout`: a flat one (planned with the model
/// across nodes) or a node-aware one.
pub fn by_name_on(
    name: &str,
    problem: &Problem,
    layout: &Layout,
    costs: &LevelCosts,
) -> Result<Box<dyn Algorithm>, PlanError> {
    match NODE_AWARE.iter().find(|(n, _)| *n == name) {
        Some((_, make)) => made(problem, |p| make(p, layout, costs)),
        None => by_name(name, problem, &costs.across),
    }
}

/// Every algorithm that solves `problem` on `layout`: the flat ones (block counts from the
/// model across nodes where the layout has several nodes, else inside) and the node-aware
/// ones. Errors only if the problem itself is invalid.
pub fn applicable_on(
    problem: &Problem,
    layout: &Layout,
    costs: &LevelCosts,
) -> Result<Vec<Box<dyn Algorithm>>, PlanError> {
    let flat = if layout.nodes() > 1 {
        &costs.across
    } else {
        &costs.inside
    };
    let mut out = applicable(problem, flat)?;
    for (_, make) in NODE_AWARE {
        keep(&mut out, made(problem, |p| make(p, layout, costs)))?;
    }
    Ok(out)
}
