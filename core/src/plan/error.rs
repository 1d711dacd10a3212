//! Bad input to a plan.

use super::{Dtype, ReduceOp};

/// Bad input to a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the number of ranks must be at least 1")]
    /// The problem has no ranks.
    NoRanks,
    #[error("root {root} is out of range for {p} ranks")]
    /// The root is not a rank.
    RootOutOfRange {
        /// The root given.
        root: usize,
        /// The number of ranks.
        p: usize,
    },
    #[error("rank {rank} is out of range for {p} ranks")]
    /// A rank is not in the job.
    RankOutOfRange {
        /// The rank given.
        rank: usize,
        /// The number of ranks.
        p: usize,
    },
    #[error("expected {expected} counts, got {got}")]
    /// A counts array does not have one entry per rank.
    CountsLength {
        /// Its required length.
        expected: usize,
        /// Its length.
        got: usize,
    },
    #[error("sizes overflow the address space")]
    /// A size or offset does not fit in `usize`.
    Overflow,
    #[error("operator {op} is not defined for {dtype}")]
    /// The operator is not defined for the element type (bitwise on floats).
    OpNotDefined {
        /// The operator.
        op: ReduceOp,
        /// The element type.
        dtype: Dtype,
    },
    #[error("{bytes} bytes is not a whole number of {dtype} elements")]
    /// The byte count is not a whole number of elements.
    Misaligned {
        /// The byte count.
        bytes: usize,
        /// The element type.
        dtype: Dtype,
    },
    #[error("{algorithm} implements {collective}, not this collective")]
    /// The algorithm solves another collective than the problem.
    WrongCollective {
        /// The algorithm.
        algorithm: &'static str,
        /// The collective it solves.
        collective: &'static str,
    },
    #[error("{algorithm}: {reason}")]
    /// The algorithm cannot solve this instance.
    Unsupported {
        /// The algorithm.
        algorithm: &'static str,
        /// Why not.
        reason: String,
    },
    #[error("block count must be at least 1")]
    /// A block count of 0.
    NoBlocks,
    #[error("a write needs at least one local and one remote segment (iov limit {iov}, rma iov limit {rma_iov})")]
    /// Provider limits that allow no write at all.
    IovLimit {
        /// Local segments per write.
        iov: usize,
        /// Remote segments per write.
        rma_iov: usize,
    },
    #[error("unknown algorithm {0:?}")]
    /// No algorithm has this name.
    UnknownAlgorithm(String),
    #[error("schedule: {0}")]
    /// The circulant schedule cannot be built.
    Schedule(#[from] crate::schedule::ScheduleError),
}
