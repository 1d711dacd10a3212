//! Checks of a call's arguments on this rank: buffer lengths against sizes and counts,
//! buffers of this communicator.

use crate::fabric::RegisteredMemory;

use super::communicator::Communicator;
use super::error::{argument, expect_len, Result};

impl Communicator {
    /// The buffers of a rooted v-collective: `own` (which, length) holds this rank's count,
    /// and at the root `whole` holds their sum.
    pub(super) fn check_rooted(
        &self,
        op: &'static str,
        counts: &[usize],
        root: usize,
        own: (&str, usize),
        whole: (&str, usize),
    ) -> Result<()> {
        let total = self.counts_total(op, counts)?;
        expect_len(op, own.0, own.1, self.own(counts))?;
        if self.rank() == root {
            expect_len(op, whole.0, whole.1, Some(total))?;
        }
        Ok(())
    }

    /// This rank's count (`None` when there is none: the length check then fails).
    pub(super) fn own(&self, counts: &[usize]) -> Option<usize> {
        counts.get(self.rank()).copied()
    }

    /// (offset, length) of this rank's part of a buffer cut at `counts`; empty when the
    /// counts do not fit (the call is refused then).
    pub(super) fn own_part(&self, counts: &[usize]) -> (usize, usize) {
        let offset = counts
            .get(..self.rank())
            .and_then(|before| crate::plan::checked_sum(before).ok());
        match (offset, self.own(counts)) {
            (Some(offset), Some(len)) => (offset, len),
            _ => (0, 0),
        }
    }

    /// The sum of per-rank `counts`, checking there is one per rank and the sum fits.
    pub(super) fn counts_total(&self, op: &'static str, counts: &[usize]) -> Result<usize> {
        if counts.len() != self.size() {
            return Err(argument(
                op,
                format!("{} counts for {} ranks", counts.len(), self.size()),
            ));
        }
        crate::plan::checked_sum(counts)
            .map_err(|_| argument(op, "the counts overflow".to_string()))
    }

    /// One count per rank, and a receive buffer of exactly their sum.
    pub(super) fn check_counts(
        &self,
        op: &'static str,
        counts: &[usize],
        recv_len: usize,
    ) -> Result<()> {
        let total = self.counts_total(op, counts)?;
        expect_len(op, "recv", recv_len, Some(total))
    }

    /// Refuses registered memory of another communicator: its keys mean nothing to this
    /// one's peers.
    pub(super) fn owns(
        &self,
        op: &'static str,
        which: &str,
        mem: Option<&RegisteredMemory>,
    ) -> Result<()> {
        match mem {
            Some(mem) if !mem.usable_with(self.transport.endpoint()) => Err(argument(
                op,
                format!(
                    "the {which} buffer was allocated by another communicator (use this one's alloc)"
                ),
            )),
            _ => Ok(()),
        }
    }
}
