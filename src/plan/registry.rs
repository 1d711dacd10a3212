//! All algorithms by name, and the ones that apply to a problem.

use super::allgather::{BruckAllgather, RecursiveDoublingAllgather, RingAllgather};
use super::allreduce::{RecursiveDoublingAllreduce, ReduceScatterAllgather};
use super::alltoall::PairwiseAlltoall;
use super::barrier::DisseminationBarrier;
use super::circulant::{
    Blocking, CirculantAllgather, CirculantAllgatherv, CirculantBroadcast, CirculantCensus,
};
use super::intergroup::{IntergroupAllgatherv, RootGathering};
use super::ring::PipelinedRingAllgatherv;
use super::rootedv::{BinomialGatherv, BinomialScatterv, LinearGatherv, LinearScatterv};
use super::roundrobin::RoundRobinBroadcast;
use super::scan::HypercubeScan;
use super::tree::{
    BinomialBroadcast, BinomialGather, BinomialReduce, BinomialScatter, ScatterAllgatherBroadcast,
};
use super::{Algorithm, CostModel, PlanError, Problem};

type Make = fn(&Problem, &CostModel) -> Result<Box<dyn Algorithm>, PlanError>;

fn boxed<A: Algorithm + 'static>(a: Result<A, PlanError>) -> Result<Box<dyn Algorithm>, PlanError> {
    a.map(|a| Box::new(a) as Box<dyn Algorithm>)
}

/// Every algorithm: (name, whether it is one of seed 000's circulant algorithms, constructor
/// with the block count chosen from the model where the algorithm has one).
pub const ALL: &[(&str, bool, Make)] = &[
    (CirculantBroadcast::NAME, true, |p, m| {
        boxed(CirculantBroadcast::new(p, Blocking::Model(*m)))
    }),
    (CirculantAllgather::NAME, true, |p, _| {
        boxed(CirculantAllgather::new(p))
    }),
    (CirculantCensus::NAME, true, |p, _| {
        boxed(CirculantCensus::new(p))
    }),
    (CirculantAllgatherv::NAME, true, |p, m| {
        boxed(CirculantAllgatherv::new(p, Blocking::Model(*m)))
    }),
    (BinomialBroadcast::NAME, false, |p, _| {
        boxed(BinomialBroadcast::new(p))
    }),
    (ScatterAllgatherBroadcast::NAME, false, |p, _| {
        boxed(ScatterAllgatherBroadcast::new(p))
    }),
    (RoundRobinBroadcast::NAME, false, |p, m| {
        boxed(RoundRobinBroadcast::new(p, None, m))
    }),
    (BinomialReduce::NAME, false, |p, _| {
        boxed(BinomialReduce::new(p))
    }),
    (BinomialScatter::NAME, false, |p, _| {
        boxed(BinomialScatter::new(p))
    }),
    (BinomialGather::NAME, false, |p, _| {
        boxed(BinomialGather::new(p))
    }),
    (BinomialScatterv::NAME, false, |p, _| {
        boxed(BinomialScatterv::new(p))
    }),
    (BinomialGatherv::NAME, false, |p, _| {
        boxed(BinomialGatherv::new(p))
    }),
    (LinearScatterv::NAME, false, |p, _| {
        boxed(LinearScatterv::new(p))
    }),
    (LinearGatherv::NAME, false, |p, _| {
        boxed(LinearGatherv::new(p))
    }),
    (RingAllgather::NAME, false, |p, _| {
        boxed(RingAllgather::new(p))
    }),
    (RecursiveDoublingAllgather::NAME, false, |p, _| {
        boxed(RecursiveDoublingAllgather::new(p))
    }),
    (BruckAllgather::NAME, false, |p, _| {
        boxed(BruckAllgather::new(p))
    }),
    (PipelinedRingAllgatherv::NAME, false, |p, m| {
        boxed(PipelinedRingAllgatherv::new(p, None, m))
    }),
    (RecursiveDoublingAllreduce::NAME, false, |p, _| {
        boxed(RecursiveDoublingAllreduce::new(p))
    }),
    (ReduceScatterAllgather::NAME, false, |p, _| {
        boxed(ReduceScatterAllgather::new(p))
    }),
    (HypercubeScan::NAME, false, |p, _| {
        boxed(HypercubeScan::new(p))
    }),
    (PairwiseAlltoall::NAME, false, |p, _| {
        boxed(PairwiseAlltoall::new(p))
    }),
    (DisseminationBarrier::NAME, false, |p, _| {
        boxed(DisseminationBarrier::new(p))
    }),
    (IntergroupAllgatherv::NAME, false, |p, _| {
        boxed(IntergroupAllgatherv::new(p))
    }),
    (RootGathering::NAME, false, |p, _| {
        boxed(RootGathering::new(p))
    }),
];

/// The algorithm called `name` for `problem`.
pub fn by_name(
    name: &str,
    problem: &Problem,
    model: &CostModel,
) -> Result<Box<dyn Algorithm>, PlanError> {
    let (_, _, make) = ALL
        .iter()
        .find(|(n, _, _)| *n == name)
        .ok_or_else(|| PlanError::UnknownAlgorithm(name.to_string()))?;
    make(problem, model)
}

/// Every algorithm that solves `problem`, with model-chosen block counts. Errors only if the
/// problem itself is invalid.
pub fn applicable(
    problem: &Problem,
    model: &CostModel,
) -> Result<Vec<Box<dyn Algorithm>>, PlanError> {
    problem.validate()?;
    let mut out = Vec::new();
    for (_, _, make) in ALL {
        match make(problem, model) {
            Ok(a) => out.push(a),
            Err(PlanError::WrongCollective { .. } | PlanError::Unsupported { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Whether `name` is one of the circulant algorithms of seed 000.
pub fn is_circulant(name: &str) -> bool {
    ALL.iter().any(|(n, c, _)| *n == name && *c)
}
