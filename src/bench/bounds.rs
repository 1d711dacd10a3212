//! Lower bounds in the α-β model for p 1-ported ranks, against which measured times are drawn.
//!
//! With q = ⌈log₂ p⌉ (information needs q rounds to reach all p ranks, each round costs at least
//! α) and the bytes a rank must receive (each costs at least β):
//!
//! - broadcast of m bytes: the best n-block (pipelined) broadcast time, seed 000 Theorem 2,
//!   minimised over real n ≥ 1: T(n) = (n − 1 + q)(α + βm/n). Its minimum for
//!   n* = √((q−1)βm/α) ≥ 1 is α(q−1) + 2√((q−1)αβm) + βm; when n* < 1 it is T(1) = q(α + βm).
//!   p = 1 gives 0, p = 2 gives α + βm.
//! - allgather with m bytes per rank: αq + β(p−1)m.
//! - allgatherv with counts m_r, total M: αq + β·max_r (M − m_r) = αq + β(M − min_r m_r), since
//!   every rank must receive everything it does not contribute.
//! - allreduce of m bytes: αq + 2βm(p−1)/p, the bandwidth term of reduce-scatter + allgather.
//!
//! All bounds are 0 for p = 1. The allgather, allgatherv and allreduce bounds are those of
//! [`crate::plan::bounds`]; the broadcast bound here is the pipelined one, tighter than its
//! αq + βm for the n-block algorithms the benchmarks run.

use super::csv::AlphaBeta;
use super::distribution;
use crate::plan::bounds::lower_bound;
use crate::plan::{CostModel, Dtype, Problem, ReduceOp, Reduction};

/// ⌈log₂ p⌉, 0 for p ≤ 1.
pub fn ceil_log2(p: u64) -> u64 {
    if p <= 1 {
        0
    } else {
        u64::from(64 - (p - 1).leading_zeros())
    }
}

/// Broadcast of `m` bytes to `p` ranks.
pub fn broadcast(p: u64, m: u64, ab: AlphaBeta) -> f64 {
    if p <= 1 {
        return 0.0;
    }
    let (a, b, m) = (ab.alpha_s, ab.beta_s_per_byte, m as f64);
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

/// Regular allgather, `m` bytes from each of `p` ranks; `None` if a size exceeds `usize`.
pub fn allgather(p: u64, m: u64, ab: AlphaBeta) -> Option<f64> {
    let problem = Problem::Allgather {
        p: usize::try_from(p).ok()?,
        block: usize::try_from(m).ok()?,
    };
    Some(lower_bound(&problem, &cost_model(ab)))
}

/// Irregular allgather with rank r contributing `counts[r]` bytes.
pub fn allgatherv(counts: &[u64], ab: AlphaBeta) -> Option<f64> {
    let counts = counts
        .iter()
        .map(|&c| usize::try_from(c).ok())
        .collect::<Option<Vec<usize>>>()?;
    Some(lower_bound(
        &Problem::Allgatherv { counts },
        &cost_model(ab),
    ))
}

/// Allreduce of `m` bytes on `p` ranks (the element type does not enter the bound).
pub fn allreduce(p: u64, m: u64, ab: AlphaBeta) -> Option<f64> {
    let problem = Problem::Allreduce {
        p: usize::try_from(p).ok()?,
        reduction: Reduction {
            dtype: Dtype::I32,
            op: ReduceOp::Sum,
        },
        bytes: usize::try_from(m).ok()?,
    };
    Some(lower_bound(&problem, &cost_model(ab)))
}

fn cost_model(ab: AlphaBeta) -> CostModel {
    CostModel {
        alpha: ab.alpha_s,
        beta: ab.beta_s_per_byte,
    }
}

/// The bound for a CSV row's operation, or `None` for an operation or distribution without one.
///
/// `bytes` and `total_bytes` mean what the benchmark CSV columns mean: for bcast the message,
/// for allgather each rank's contribution, for allgatherv the base count of `distribution`, for
/// allreduce the vector (whose exact size is `total_bytes`).
pub fn for_row(
    op: &str,
    distribution: &str,
    p: u64,
    bytes: u64,
    total_bytes: u64,
    ab: AlphaBeta,
) -> Option<f64> {
    match op {
        "bcast" | "broadcast" => Some(broadcast(p, bytes, ab)),
        "allgather" => allgather(p, bytes, ab),
        "allgatherv" => allgatherv(&distribution::counts(distribution, p, bytes)?, ab),
        "allreduce" => allreduce(p, total_bytes, ab),
        _ => None,
    }
}
