//! The collective problems: what must hold after each operation, checked and measured.

use super::{ceil_log2, PlanError, Reduction};

/// The collective problems (what must hold after the operation; see [`Problem`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Problem {
    /// Root's `recv` (`bytes` long) ends up in every rank's `recv`.
    Broadcast {
        /// Number of ranks.
        p: usize,
        /// The rank whose data is broadcast.
        root: usize,
        /// Bytes broadcast.
        bytes: usize,
    },
    /// Root's `recv` = ⊕ of all `send` buffers.
    Reduce {
        /// Number of ranks.
        p: usize,
        /// The rank that receives the result.
        root: usize,
        /// Element type and operator.
        reduction: Reduction,
        /// Bytes per rank.
        bytes: usize,
    },
    /// Every `recv` = ⊕ of all `send` buffers.
    Allreduce {
        /// Number of ranks.
        p: usize,
        /// Element type and operator.
        reduction: Reduction,
        /// Bytes per rank.
        bytes: usize,
    },
    /// Every rank's `send` holds p blocks of `block` bytes; rank r's `recv` (`block` bytes) =
    /// ⊕ over all ranks of their block r.
    ReduceScatterBlock {
        /// Number of ranks.
        p: usize,
        /// Element type and operator.
        reduction: Reduction,
        /// Bytes of each rank's result.
        block: usize,
    },
    /// Every rank's `send` (the sum of the counts) is cut at the counts; rank r's `recv`
    /// (`counts[r]` bytes) = ⊕ over all ranks of their part r.
    ReduceScatter {
        /// Element type and operator.
        reduction: Reduction,
        /// Bytes of each rank's result.
        counts: Vec<usize>,
    },
    /// `recv` of rank r = ⊕ of the `send` buffers of ranks 0..=r (`exclusive`: 0..r; rank 0's
    /// `recv` is then left alone).
    Scan {
        /// Number of ranks.
        p: usize,
        /// Element type and operator.
        reduction: Reduction,
        /// Bytes per rank.
        bytes: usize,
        /// Exclusive scan (ranks before r only).
        exclusive: bool,
    },
    /// Every `recv` = all `send` buffers (`block` bytes each) in rank order.
    Allgather {
        /// Number of ranks.
        p: usize,
        /// Bytes per rank.
        block: usize,
    },
    /// Every `recv` = all `send` buffers (`counts[r]` bytes) in rank order.
    Allgatherv {
        /// Bytes contributed by each rank.
        counts: Vec<usize>,
    },
    /// Root's `send` (`p * block`) is cut into blocks; block r ends up in rank r's `recv`.
    Scatter {
        /// Number of ranks.
        p: usize,
        /// The rank that holds the data.
        root: usize,
        /// Bytes per rank.
        block: usize,
    },
    /// Rank r's `send` (`block`) ends up at block r of root's `recv`.
    Gather {
        /// Number of ranks.
        p: usize,
        /// The rank that receives the data.
        root: usize,
        /// Bytes per rank.
        block: usize,
    },
    /// Root's `send` (the sum of the counts) is cut at the counts; part r ends up in rank r's
    /// `recv`.
    Scatterv {
        /// The rank that holds the data.
        root: usize,
        /// Bytes for each rank.
        counts: Vec<usize>,
    },
    /// Rank r's `send` (`counts[r]` bytes) ends up in root's `recv` at the sum of the counts
    /// before r.
    Gatherv {
        /// The rank that receives the data.
        root: usize,
        /// Bytes from each rank.
        counts: Vec<usize>,
    },
    /// Block j of rank i's `send` ends up at block i of rank j's `recv`.
    Alltoall {
        /// Number of ranks.
        p: usize,
        /// Bytes per pair of ranks.
        block: usize,
    },
    /// No rank completes before every rank has started.
    Barrier {
        /// Number of ranks.
        p: usize,
    },
    /// Two groups: ranks `0..a.len()` form A, the rest B. Every rank's `recv` = the other
    /// group's `send` buffers in rank order.
    Intergroup {
        /// Bytes contributed by each rank of group A.
        a: Vec<usize>,
        /// Bytes contributed by each rank of group B.
        b: Vec<usize>,
    },
}

/// The name of a collective, for messages and the model command.
pub fn collective_name(problem: &Problem) -> &'static str {
    match problem {
        Problem::Broadcast { .. } => "broadcast",
        Problem::Reduce { .. } => "reduce",
        Problem::Allreduce { .. } => "allreduce",
        Problem::ReduceScatterBlock { .. } => "reduce-scatter-block",
        Problem::ReduceScatter { .. } => "reduce-scatter",
        Problem::Scan {
            exclusive: false, ..
        } => "scan",
        Problem::Scan {
            exclusive: true, ..
        } => "exscan",
        Problem::Allgather { .. } => "allgather",
        Problem::Allgatherv { .. } => "allgatherv",
        Problem::Scatter { .. } => "scatter",
        Problem::Gather { .. } => "gather",
        Problem::Scatterv { .. } => "scatterv",
        Problem::Gatherv { .. } => "gatherv",
        Problem::Alltoall { .. } => "alltoall",
        Problem::Barrier { .. } => "barrier",
        Problem::Intergroup { .. } => "intergroup allgatherv",
    }
}

impl Problem {
    /// Number of ranks.
    pub fn p(&self) -> usize {
        match self {
            Problem::Broadcast { p, .. }
            | Problem::Reduce { p, .. }
            | Problem::Allreduce { p, .. }
            | Problem::ReduceScatterBlock { p, .. }
            | Problem::Scan { p, .. }
            | Problem::Allgather { p, .. }
            | Problem::Scatter { p, .. }
            | Problem::Gather { p, .. }
            | Problem::Alltoall { p, .. }
            | Problem::Barrier { p } => *p,
            Problem::Allgatherv { counts }
            | Problem::ReduceScatter { counts, .. }
            | Problem::Scatterv { counts, .. }
            | Problem::Gatherv { counts, .. } => counts.len(),
            Problem::Intergroup { a, b } => a.len() + b.len(),
        }
    }

    /// Checks the problem: at least one rank, roots in range, sizes without overflow, whole
    /// elements and defined operators for reductions.
    pub fn validate(&self) -> Result<(), PlanError> {
        let p = self.p();
        if p == 0 {
            return Err(PlanError::NoRanks);
        }
        match self {
            Problem::Broadcast { root, .. }
            | Problem::Scatter { root, .. }
            | Problem::Gather { root, .. }
            | Problem::Reduce { root, .. }
            | Problem::Scatterv { root, .. }
            | Problem::Gatherv { root, .. }
                if *root >= p =>
            {
                return Err(PlanError::RootOutOfRange { root: *root, p });
            }
            _ => {}
        }
        match self {
            Problem::Reduce {
                reduction, bytes, ..
            }
            | Problem::Allreduce {
                reduction, bytes, ..
            }
            | Problem::Scan {
                reduction, bytes, ..
            } => {
                reduction.validate()?;
                aligned(*bytes, reduction)?;
                scratch_fits(*bytes, p)?;
            }
            Problem::ReduceScatterBlock {
                reduction, block, ..
            } => {
                reduction.validate()?;
                aligned(*block, reduction)?;
                scratch_fits(block.checked_mul(p).ok_or(PlanError::Overflow)?, p)?;
            }
            Problem::ReduceScatter { reduction, counts } => {
                reduction.validate()?;
                for &c in counts {
                    aligned(c, reduction)?;
                }
                scratch_fits(checked_sum(counts)?, p)?;
            }
            Problem::Allgather { block, .. }
            | Problem::Scatter { block, .. }
            | Problem::Gather { block, .. } => {
                block.checked_mul(p).ok_or(PlanError::Overflow)?;
            }
            Problem::Alltoall { block, .. } => {
                block
                    .checked_mul(p)
                    .and_then(|x| x.checked_mul(2))
                    .ok_or(PlanError::Overflow)?;
            }
            Problem::Allgatherv { counts }
            | Problem::Scatterv { counts, .. }
            | Problem::Gatherv { counts, .. } => {
                checked_sum(counts)?;
            }
            Problem::Intergroup { a, b } => {
                if a.is_empty() || b.is_empty() {
                    return Err(PlanError::NoRanks);
                }
                checked_sum(a)?;
                checked_sum(b)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// The `m` of the α-β formulas: the bytes each rank must end up with (the broadcast or
    /// vector size, the total of an allgather(v), a whole row for scatter/gather/alltoall), or
    /// for a reduce-scatter the whole vector each rank contributes.
    pub fn total_bytes(&self) -> usize {
        match self {
            Problem::Broadcast { bytes, .. }
            | Problem::Reduce { bytes, .. }
            | Problem::Allreduce { bytes, .. }
            | Problem::Scan { bytes, .. } => *bytes,
            Problem::Allgather { p, block }
            | Problem::ReduceScatterBlock { p, block, .. }
            | Problem::Scatter { p, block, .. }
            | Problem::Gather { p, block, .. }
            | Problem::Alltoall { p, block } => p.saturating_mul(*block),
            Problem::Allgatherv { counts }
            | Problem::ReduceScatter { counts, .. }
            | Problem::Scatterv { counts, .. }
            | Problem::Gatherv { counts, .. } => {
                counts.iter().fold(0usize, |a, &c| a.saturating_add(c))
            }
            Problem::Barrier { .. } => 0,
            Problem::Intergroup { a, b } => {
                let sa = a.iter().fold(0usize, |x, &c| x.saturating_add(c));
                let sb = b.iter().fold(0usize, |x, &c| x.saturating_add(c));
                sa.max(sb)
            }
        }
    }
}

/// [`PlanError::Misaligned`] unless `bytes` is a whole number of the reduction's elements.
fn aligned(bytes: usize, reduction: &Reduction) -> Result<(), PlanError> {
    if bytes % reduction.dtype.size() != 0 {
        return Err(PlanError::Misaligned {
            bytes,
            dtype: reduction.dtype,
        });
    }
    Ok(())
}

/// [`PlanError::Overflow`] unless the scratch memory of the reductions, a few multiples of the
/// vector of `bytes` per ⌈log₂ p⌉, can be addressed.
fn scratch_fits(bytes: usize, p: usize) -> Result<(), PlanError> {
    bytes
        .checked_mul(4 * (ceil_log2(p) + 3))
        .map(drop)
        .ok_or(PlanError::Overflow)
}

/// Sum of counts, or [`PlanError::Overflow`].
pub fn checked_sum(counts: &[usize]) -> Result<usize, PlanError> {
    counts
        .iter()
        .try_fold(0usize, |a, &c| a.checked_add(c))
        .ok_or(PlanError::Overflow)
}

/// Exclusive prefix sums (displacements); the caller has checked the total.
pub fn displacements(counts: &[usize]) -> Vec<usize> {
    let mut d = Vec::with_capacity(counts.len());
    let mut acc = 0usize;
    for &c in counts {
        d.push(acc);
        acc = acc.saturating_add(c);
    }
    d
}
