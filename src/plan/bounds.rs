//! Lower bounds in the α-β model for 1-ported ranks (latency: information needs q = ⌈log₂ p⌉
//! rounds to reach or leave p ranks; bandwidth: the bytes a rank must receive). The forms are
//! those of Chan, Heimlich, Purkayastha, van de Geijn (2007), ignoring computation, except for
//! the broadcast, whose bound is the pipelined one of seed 000 Theorem 2:
//!
//! An n-block broadcast needs at least n − 1 + q rounds of at least α + βm/n each. Minimised
//! over real n ≥ 1, T(n) = (n − 1 + q)(α + βm/n) has its optimum at n* = √((q−1)βm/α), where
//! T = α(q−1) + 2√((q−1)αβm) + βm; when n* < 1 the best is n = 1, T = q(α + βm). It lies
//! between αq + βm (the latency and bandwidth terms, which no algorithm beats either) and the
//! time of every broadcast in the registry (tests/plan_bounds.rs checks both). p = 2 gives
//! α + βm; m = 0 gives 0, since nothing needs to be sent.

use super::{ceil_log2, CostModel, Problem};

/// The α-β lower bound of `problem` in seconds (0 for p = 1).
pub fn lower_bound(problem: &Problem, model: &CostModel) -> f64 {
    let p = problem.p();
    if p <= 1 {
        return 0.0;
    }
    let lat = ceil_log2(p) as f64 * model.alpha;
    let frac = (p - 1) as f64 / p as f64;
    let b = model.beta;
    match problem {
        Problem::Broadcast { bytes, .. } => broadcast(p, *bytes, model),
        Problem::Reduce { bytes, .. } => lat + b * frac * *bytes as f64,
        Problem::Allreduce { bytes, .. } => lat + 2.0 * b * frac * *bytes as f64,
        Problem::Scan { bytes, .. } => lat + b * *bytes as f64,
        Problem::Allgather { block, .. } => lat + b * ((p - 1) * block) as f64,
        Problem::Allgatherv { counts } => {
            // Every rank must receive all it does not contribute.
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

/// The broadcast bound of seed 000 Theorem 2 for `bytes` on `p` ranks (see the module text).
pub fn broadcast(p: usize, bytes: usize, model: &CostModel) -> f64 {
    // An empty message needs no communication at all (the algorithms send nothing).
    if p <= 1 || bytes == 0 {
        return 0.0;
    }
    let (a, b, m) = (model.alpha, model.beta, bytes as f64);
    let q1 = (ceil_log2(p) - 1) as f64;
    let n_best = if a > 0.0 {
        (q1 * b * m / a).sqrt()
    } else {
        f64::INFINITY
    };
    if n_best >= 1.0 {
        a * q1 + 2.0 * (q1 * a * b * m).sqrt() + b * m
    } else {
        (q1 + 1.0) * (a + b * m)
    }
}
