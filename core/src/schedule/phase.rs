//! The per-phase receive and send arrays of one rank.
//!
//! Entry i is the block received (sent) in round i of a phase of q rounds: a value b ≥ 0 is block b
//! of the current phase, a value b − q < 0 is block b of the previous phase.

use super::MAX_Q;

/// The q entries of one rank's receive or send array for one phase (inline, no heap).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PhaseBlocks {
    len: u8,
    pub(super) blocks: [i32; MAX_Q],
}

impl PhaseBlocks {
    pub(super) fn new(q: usize) -> PhaseBlocks {
        PhaseBlocks {
            len: q as u8,
            blocks: [0; MAX_Q],
        }
    }

    /// Copies q ≤ 64 entries from a slice (e.g. a row of a [`super::ScheduleTable`]).
    pub fn from_slice(entries: &[i32]) -> Option<PhaseBlocks> {
        if entries.len() > MAX_Q {
            return None;
        }
        let mut out = PhaseBlocks::new(entries.len());
        out.blocks[..entries.len()].copy_from_slice(entries);
        Some(out)
    }

    /// The entries, one per round of a phase.
    pub fn as_slice(&self) -> &[i32] {
        &self.blocks[..self.len as usize]
    }
}

impl std::ops::Deref for PhaseBlocks {
    type Target = [i32];
    fn deref(&self) -> &[i32] {
        self.as_slice()
    }
}

impl std::fmt::Debug for PhaseBlocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_slice().fmt(f)
    }
}
