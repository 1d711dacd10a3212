//! The rounds of an n-block broadcast from any root (Alg. 6).

use std::borrow::Cow;

use super::skips::{add_mod, sub_mod};
use super::{recv_schedule, send_schedule, PhaseBlocks, ScheduleError, ScheduleTable, Skips};

/// Largest number of blocks of a broadcast (2^48).
pub const MAX_BLOCKS: usize = 1 << 48;

/// Number of rounds of an n-block broadcast on p ranks: n − 1 + q, and 0 for p = 1 (nothing
/// to send).
pub fn rounds_count(p: usize, n: usize) -> Result<usize, ScheduleError> {
    let skips = Skips::new(p)?;
    if n == 0 {
        return Err(ScheduleError::ZeroBlocks);
    }
    // Block arithmetic is done in i64 with room for a phase of offsets.
    if n > MAX_BLOCKS {
        return Err(ScheduleError::TooManyBlocks { n });
    }
    Ok(if p == 1 { 0 } else { n - 1 + skips.q() })
}

/// One rank's schedule for a broadcast on p ranks from `root`: its per-phase arrays, computed
/// for its virtual rank `(rank − root) mod p` (the broadcast runs as if from root 0).
#[derive(Clone, Debug)]
pub struct Schedule {
    skips: Skips,
    rank: usize,
    root: usize,
    recv: PhaseBlocks,
    send: PhaseBlocks,
}

impl Schedule {
    /// Computes the arrays of `rank` ([`recv_schedule`], [`send_schedule`]): O(log p) time, no
    /// heap.
    pub fn new(p: usize, rank: usize, root: usize) -> Result<Schedule, ScheduleError> {
        let skips = Skips::new(p)?;
        let v = virtual_rank(p, rank, root)?;
        Ok(Schedule {
            skips,
            rank,
            root,
            recv: recv_schedule(&skips, v),
            send: send_schedule(&skips, v),
        })
    }

    /// Takes the arrays of `rank` from a table of all p virtual ranks (no recomputation), as the
    /// allgatherv plan does for each of its p roots.
    pub fn from_table(
        table: &ScheduleTable,
        rank: usize,
        root: usize,
    ) -> Result<Schedule, ScheduleError> {
        let skips = *table.skips();
        let v = virtual_rank(skips.p(), rank, root)?;
        // Rows have q ≤ 64 entries, so the copies cannot fail.
        let recv = PhaseBlocks::from_slice(table.recv(v)).unwrap_or_else(|| unreachable!());
        let send = PhaseBlocks::from_slice(table.send(v)).unwrap_or_else(|| unreachable!());
        Ok(Schedule {
            skips,
            rank,
            root,
            recv,
            send,
        })
    }

    /// Number of ranks p.
    pub fn p(&self) -> usize {
        self.skips.p()
    }

    /// Number of rounds per phase, q = ⌈log₂ p⌉.
    pub fn q(&self) -> usize {
        self.skips.q()
    }

    /// The skips of the circulant graph.
    pub fn skips(&self) -> &Skips {
        &self.skips
    }

    /// The rank this schedule is for.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The root of the broadcast.
    pub fn root(&self) -> usize {
        self.root
    }

    /// `(rank − root) mod p`: the rank this schedule plays in a broadcast from 0.
    pub fn virtual_rank(&self) -> usize {
        sub_mod(self.rank, self.root, self.p())
    }

    /// The per-phase receive array (q entries).
    pub fn recv(&self) -> &[i32] {
        &self.recv
    }

    /// The per-phase send array (q entries).
    pub fn send(&self) -> &[i32] {
        &self.send
    }

    /// The n − 1 + q rounds of broadcasting n blocks (none for p = 1).
    pub fn rounds(&self, n: usize) -> Result<Rounds<'_>, ScheduleError> {
        Rounds::new(Cow::Borrowed(self), n)
    }

    /// [`Schedule::rounds`] as an iterator that owns the schedule (no borrow to keep alive).
    pub fn into_rounds(self, n: usize) -> Result<Rounds<'static>, ScheduleError> {
        Rounds::new(Cow::Owned(self), n)
    }
}

fn virtual_rank(p: usize, rank: usize, root: usize) -> Result<usize, ScheduleError> {
    if rank >= p {
        return Err(ScheduleError::RankOutOfRange { rank, p });
    }
    if root >= p {
        return Err(ScheduleError::RootOutOfRange { root, p });
    }
    Ok(sub_mod(rank, root, p))
}

/// One round of a broadcast as seen by one rank: in parallel it sends block `send` to `to` and
/// receives block `recv` from `from` (real ranks, root offset applied). `None` means nothing
/// moves in that direction: the block is negative (not yet in play), the target is the root,
/// or this rank is the root (it receives nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Round {
    /// 0-based round, 0 ≤ index < n − 1 + q.
    pub index: usize,
    /// The rank this rank sends to.
    pub to: usize,
    /// The rank this rank receives from.
    pub from: usize,
    /// The block sent, if any.
    pub send: Option<usize>,
    /// The block received, if any.
    pub recv: Option<usize>,
}

/// Iterator over the rounds of an n-block broadcast (Alg. 6).
///
/// Alg. 6 runs x = (q − (n − 1) mod q) mod q dummy rounds first so that the rounds fill whole
/// phases; in (virtual) round i ≥ x, with k = i mod q, the block of entry k is
/// `entry[k] + q·⌊i / q⌋ − x`. Blocks above n − 1 mean block n − 1, so block n − 1 may arrive
/// more than once: count arrivals, not distinct blocks.
#[derive(Clone, Debug)]
pub struct Rounds<'a> {
    schedule: Cow<'a, Schedule>,
    n: usize,
    x: usize,
    next: usize,
    end: usize,
}

impl<'a> Rounds<'a> {
    fn new(schedule: Cow<'a, Schedule>, n: usize) -> Result<Rounds<'a>, ScheduleError> {
        let total = rounds_count(schedule.p(), n)?;
        let q = schedule.q();
        let x = if q == 0 { 0 } else { (q - (n - 1) % q) % q };
        Ok(Rounds {
            schedule,
            n,
            x,
            next: x,
            end: x + total,
        })
    }

    /// The block of entry `entry` in virtual round i, or None if negative.
    fn block(&self, entry: i32, i: usize) -> Option<usize> {
        let q = self.schedule.q() as i64;
        let b = entry as i64 + q * (i as i64 / q) - self.x as i64;
        (b >= 0).then(|| (b as usize).min(self.n - 1))
    }
}

impl Iterator for Rounds<'_> {
    type Item = Round;

    fn next(&mut self) -> Option<Round> {
        if self.next >= self.end {
            return None;
        }
        let i = self.next;
        self.next += 1;
        let s = &*self.schedule;
        let (p, k) = (s.p(), i % s.q());
        let skip = s.skips.get(k);
        let v = s.virtual_rank();
        let to_v = add_mod(v, skip, p);
        let from_v = sub_mod(v, skip, p);
        Some(Round {
            index: i - self.x,
            to: add_mod(to_v, s.root, p),
            from: add_mod(from_v, s.root, p),
            send: if to_v == 0 {
                None
            } else {
                self.block(s.send[k], i)
            },
            recv: if v == 0 {
                None
            } else {
                self.block(s.recv[k], i)
            },
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.end - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Rounds<'_> {}
