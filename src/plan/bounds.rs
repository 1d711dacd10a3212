//! Lower bounds in the α-β model for 1-ported ranks (latency: information needs ⌈log₂ p⌉ rounds
//! to reach or leave p ranks; bandwidth: the bytes a rank must receive). The forms are those of
//! Chan, Heimlich, Purkayastha, van de Geijn (2007), ignoring computation.

use super::{ceil_log2, CostModel, Problem};

/// The α-β lower bound of `problem` in seconds.
pub fn lower_bound(problem: &Problem, model: &CostModel) -> f64 {
    let p = problem.p();
    if p <= 1 {
        return 0.0;
    }
    let lat = ceil_log2(p) as f64 * model.alpha;
    let frac = (p - 1) as f64 / p as f64;
    let b = model.beta;
    match problem {
        Problem::Broadcast { bytes, .. } => lat + b * *bytes as f64,
        Problem::Reduce { bytes, .. } => lat + b * frac * *bytes as f64,
        Problem::Allreduce { bytes, .. } => lat + 2.0 * b * frac * *bytes as f64,
        Problem::Scan { bytes, .. } => lat + b * *bytes as f64,
        Problem::Allgather { block, .. } => lat + b * ((p - 1) * block) as f64,
        Problem::Allgatherv { counts } => {
            let total: f64 = counts.iter().map(|&c| c as f64).sum();
            let min = counts.iter().copied().min().unwrap_or(0) as f64;
            lat + b * (total - min)
        }
        Problem::Scatter { block, .. } | Problem::Gather { block, .. } => {
            lat + b * ((p - 1) * block) as f64
        }
        Problem::Scatterv { root, counts } | Problem::Gatherv { root, counts } => {
            // The root sends or receives everything but its own part.
            let total: f64 = counts.iter().map(|&c| c as f64).sum();
            lat + b * (total - counts[*root] as f64)
        }
        Problem::Alltoall { block, .. } => lat + b * ((p - 1) * block) as f64,
        Problem::Barrier { .. } => lat,
        Problem::Intergroup { a, b: bg } => {
            let ka: f64 = a.iter().map(|&c| c as f64).sum();
            let kb: f64 = bg.iter().map(|&c| c as f64).sum();
            model.alpha + b * ka.max(kb)
        }
    }
}
