//! Circulant n-block broadcast schedules (seed 000, Alg. 1–6).
//!
//! Every rank computes, alone and without communication, which block it receives from whom and
//! which it sends to whom in every round of a round-optimal broadcast of n blocks
//! (n − 1 + q rounds, q = ⌈log₂ p⌉), in O(log p) steps (Träff 2024a). The module is pure: no I/O,
//! no allocation proportional to p except in [`ScheduleTable`], which holds the schedules of all
//! p ranks.
//!
//! - [`Skips`]: the jumps of the circulant graph (Alg. 1).
//! - [`baseblock`]: the first block a rank receives (Alg. 2).
//! - [`range_blocks`]: the set of baseblocks in a cyclic range of ranks in O(log p) (Alg. 3).
//! - [`recv_schedule`], [`send_schedule`]: the per-phase arrays of one rank in O(log p), by a
//!   search over sums of skips (Träff 2024a); [`greedy`]: the same arrays by seed 000's Alg. 4
//!   and 5 in O(log³ p), kept as their oracle.
//! - [`Schedule`] and [`Rounds`]: the rounds of an n-block broadcast from any root (Alg. 6).
//! - [`ScheduleTable`]: the per-phase arrays of all p ranks (for allgatherv, Alg. 9).
//! - [`verify`]: an independent checker of per-phase arrays produced by anyone.

mod baseblock;
pub mod greedy;
mod phase;
mod range_blocks;
mod rounds;
mod skip_sums;
mod skips;
mod table;
pub mod verify;

pub use baseblock::baseblock;
pub use phase::PhaseBlocks;
pub use range_blocks::{range_blocks, BlockSet};
pub use rounds::{rounds_count, Round, Rounds, Schedule, MAX_BLOCKS};
pub use skip_sums::{recv_schedule, send_schedule};
pub(crate) use skips::{add_mod, ceil_log2, sub_mod};
pub use skips::{Skips, MAX_Q};
pub use table::ScheduleTable;

/// Invalid parameters of a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("the number of ranks must be at least 1")]
    /// p = 0.
    ZeroRanks,
    #[error("rank {rank} is out of range for {p} ranks")]
    /// A rank is not in 0..p.
    RankOutOfRange {
        /// The rank given.
        rank: usize,
        /// The number of ranks.
        p: usize,
    },
    #[error("root {root} is out of range for {p} ranks")]
    /// The root is not in 0..p.
    RootOutOfRange {
        /// The root given.
        root: usize,
        /// The number of ranks.
        p: usize,
    },
    #[error("the number of blocks must be at least 1")]
    /// n = 0.
    ZeroBlocks,
    #[error("{n} blocks are more than a schedule can count")]
    /// More blocks than round indices can count.
    TooManyBlocks {
        /// The number of blocks.
        n: usize,
    },
    #[error("the schedule table for {p} ranks does not fit in memory")]
    /// The table of all ranks' arrays would not fit in memory.
    TableTooLarge {
        /// The number of ranks.
        p: usize,
    },
}
