//! Sub-communicators ([`Communicator::split`]) and inter-communicators between two groups
//! ([`Communicator::intercomm`], seed 003).
//!
//! A sub-communicator has its own endpoint, completion queue and control region, so its
//! operations never mix with the parent's; the addresses are exchanged over the parent (no PMI
//! traffic). It shares the parent's membership in the job, which is left when the last
//! communicator is dropped.

use std::sync::Arc;

use crate::plan::Problem;
use crate::transport::{Card, Opened};

use super::buffer::{Payload, PayloadMut};
use super::call::{Call, Choice};
use super::calls::Lengths;
use super::communicator::Communicator;
use super::error::{argument, expect_len};
use super::error::{CommError, Result};
use super::memory::Memory;
use super::registry::{ALL, ONE_LEVEL_ENGINES};

/// The two groups of an inter-communicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The first group (its ranks are numbered first in the parent).
    A,
    /// The second group.
    B,
}

impl Side {
    fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// Colors are `u32`; this marks a rank without one on the wire.
const NO_COLOR: u64 = u64::MAX;

impl Communicator {
    /// Splits the communicator like `MPI_Comm_split`: the ranks that pass the same `color`
    /// form a new communicator, ordered by `key` and then by rank here. A rank that passes
    /// `None` takes part in the call and gets `None`. Every rank must call it.
    pub fn split(&mut self, color: Option<u32>, key: i64) -> Result<Option<Communicator>> {
        let p = self.size();
        let mut mine = [0u8; 16];
        mine[..8].copy_from_slice(&color.map_or(NO_COLOR, u64::from).to_le_bytes());
        mine[8..].copy_from_slice(&key.to_le_bytes());
        let mut all = vec![0u8; 16 * p];
        self.exchange(&mine[..], &mut all[..])?;
        let entry = |r: usize| {
            let word = |at: usize| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&all[16 * r + at..16 * r + at + 8]);
                b
            };
            (u64::from_le_bytes(word(0)), i64::from_le_bytes(word(8)))
        };
        // The new group in its order, if this rank has a color.
        let group: Option<Vec<usize>> = color.map(|c| {
            let mut members: Vec<usize> = (0..p).filter(|&r| entry(r).0 == u64::from(c)).collect();
            members.sort_by_key(|&r| (entry(r).1, r));
            members
        });
        let place = group.as_ref().and_then(|g| {
            let rank = self.rank();
            g.iter().position(|&r| r == rank).map(|i| (i, g.len()))
        });

        // Every rank opens its new endpoint (if any) and publishes its card; all ranks of the
        // parent take part in the exchange. A rank that failed to open publishes nothing, so
        // that its group fails too instead of waiting for it.
        // A card that cannot be read is that rank's failure, reported after the exchange.
        let opened = place.map(|(rank, size)| {
            Opened::open(
                self.transport.info(),
                self.transport.node_info(),
                rank,
                size,
            )
            .map(|o| o.cap_iov(Some(self.transport.iov_limits())))
            .and_then(|o| o.card().map(|card| (o, card.to_bytes())))
        });
        let card = match &opened {
            Some(Ok((_, card))) => card.clone(),
            _ => Vec::new(),
        };
        let lengths = {
            let mine = (card.len() as u64).to_le_bytes();
            let mut all = vec![0u8; 8 * p];
            self.exchange(&mine[..], &mut all[..])?;
            all.chunks_exact(8)
                .map(|c| {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(c);
                    usize::try_from(u64::from_le_bytes(b)).unwrap_or(usize::MAX)
                })
                .collect::<Vec<usize>>()
        };
        let total = crate::plan::checked_sum(&lengths)
            .map_err(|_| argument("split", "address cards too long".into()))?;
        let mut cards = vec![0u8; total];
        let len = Lengths {
            send: card.len(),
            recv: cards.len(),
        };
        let call = self.allgatherv_call(len, &lengths, Choice::Auto);
        let memory = Memory::of::<[u8], [u8]>(Some(&card[..]), Some(&mut cards[..]));
        ONE_LEVEL_ENGINES.run(self, call, memory)?;

        let built: Result<Option<Communicator>> = (|| {
            let (Some(group), Some(opened)) = (group, opened) else {
                return Ok(None);
            };
            let (opened, _) = opened?;
            let offsets = crate::plan::displacements(&lengths);
            let cards = group
                .iter()
                .map(|&r| Card::from_bytes(&cards[offsets[r]..offsets[r] + lengths[r]]))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            // The group's ranks are ranks here and this rank is one of them (`place`).
            let nodes = place
                .and_then(|(rank, _)| self.nodes.restrict(&group, rank))
                .ok_or_else(|| argument("split", "the new group's node map".into()))?;
            let mates = super::provider::on_this_node(&nodes);
            let transport = opened.connect(&cards, &mates, self.transport.deadline())?;
            let mut comm = Communicator::new(
                transport,
                Arc::clone(&self.job),
                self.config.clone(),
                self.levels,
                nodes,
            );
            comm.measures_overhead = self.measures_overhead;
            Ok(Some(comm))
        })();
        // Every rank learns whether all others joined their new communicator, so that none
        // waits for a member that failed.
        let joined = [u8::from(built.is_ok())];
        let mut all = vec![0u8; p];
        self.exchange(&joined[..], &mut all[..])?;
        let mut comm = built?;
        if let Some(r) = all.iter().position(|&j| j == 0) {
            return Err(argument(
                "split",
                format!("rank {r} could not join its new communicator"),
            ));
        }
        if let Some(comm) = comm.as_mut() {
            // Every endpoint of the group is up before its first collective.
            comm.plain_barrier()?;
        }
        Ok(comm)
    }

    /// An allgather of the library's own (the splits'): on the engines of one level, without
    /// node phases, so that a `hier-segment-*` name in `CIRCULANT_ALGORITHM` that cannot serve
    /// it does not refuse a split, and splitting the phases' communicators does not start them.
    pub(super) fn exchange(&mut self, mine: &[u8], all: &mut [u8]) -> Result<()> {
        let len = Lengths {
            send: mine.len(),
            recv: all.len(),
        };
        let call = self.allgather_call(len, Choice::Auto);
        ONE_LEVEL_ENGINES.run(self, call, Memory::of::<[u8], [u8]>(Some(mine), Some(all)))
    }

    /// A barrier of the library's own, on the engines of one level as [`Self::exchange`].
    pub(super) fn plain_barrier(&mut self) -> Result<()> {
        let call = self.barrier_call(Choice::Auto);
        ONE_LEVEL_ENGINES.run(self, call, Memory::default())
    }

    /// An inter-communicator between the ranks that pass [`Side::A`] and those that pass
    /// [`Side::B`] (each group in rank order here). Every rank must call it; both groups must
    /// be non-empty.
    pub fn intercomm(&mut self, side: Side) -> Result<InterCommunicator> {
        let p = self.size();
        let mine = [u8::from(side == Side::B)];
        let mut sides = vec![0u8; p];
        self.exchange(&mine[..], &mut sides[..])?;
        let a = sides.iter().filter(|&&s| s == 0).count();
        if a == 0 || a == p {
            return Err(argument(
                "intercomm",
                format!("group A has {a} of {p} ranks: both groups need at least one"),
            ));
        }
        // Group A first, then B, each in parent rank order.
        let key = (i64::from(mine[0]) << 32) + self.rank() as i64;
        let comm = self
            .split(Some(0), key)?
            .ok_or_else(|| argument("intercomm", "the split returned no communicator".into()))?;
        Ok(InterCommunicator {
            comm,
            side,
            a,
            b: p - a,
        })
    }

    /// Intergroup allgatherv on a communicator whose ranks `0..counts_a.len()` form group A
    /// and the rest group B: every rank's `recv` gets the other group's contributions in rank
    /// order (seed 003). `side` is this rank's group (checked against its rank).
    pub fn intergroup_allgatherv<S, R>(
        &mut self,
        side: Side,
        send: &S,
        recv: &mut R,
        counts_a: &[usize],
        counts_b: &[usize],
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.intergroup_allgatherv_using(side, send, recv, counts_a, counts_b, Choice::Auto)
    }

    /// [`Communicator::intergroup_allgatherv`] with a forced or configured algorithm choice.
    pub fn intergroup_allgatherv_using<S, R>(
        &mut self,
        side: Side,
        send: &S,
        recv: &mut R,
        counts_a: &[usize],
        counts_b: &[usize],
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let op = "intergroup allgatherv";
        let (rank, p) = (self.rank(), self.size());
        let checked = (|| {
            if counts_a.len().checked_add(counts_b.len()) != Some(p) {
                return Err(argument(
                    op,
                    format!(
                        "{} + {} counts for {p} ranks",
                        counts_a.len(),
                        counts_b.len()
                    ),
                ));
            }
            let in_a = rank < counts_a.len();
            if in_a != (side == Side::A) {
                return Err(argument(
                    op,
                    format!(
                        "rank {rank} is not in group {side:?} of {} + {}",
                        counts_a.len(),
                        counts_b.len()
                    ),
                ));
            }
            let (own, other) = if in_a {
                (counts_a[rank], counts_b)
            } else {
                (counts_b[rank - counts_a.len()], counts_a)
            };
            expect_len(op, "send", send.bytes().len(), Some(own))?;
            let total = crate::plan::checked_sum(other).ok();
            expect_len(op, "recv", recv.bytes().len(), total)
        })();
        let problem = Problem::Intergroup {
            a: counts_a.to_vec(),
            b: counts_b.to_vec(),
        };
        let call = Call::new(op, problem, choice).checked(checked);
        ALL.run(self, call, Memory::of(Some(send), Some(recv)))
    }
}

/// Two groups A and B connected for intergroup collectives, as MPI's inter-communicators: in
/// an allgather(v) every rank receives the other group's data.
#[derive(Debug)]
pub struct InterCommunicator {
    /// Both groups, A's ranks first.
    comm: Communicator,
    side: Side,
    a: usize,
    b: usize,
}

impl InterCommunicator {
    /// This rank's group.
    pub fn side(&self) -> Side {
        self.side
    }

    /// Rank within the local group.
    pub fn local_rank(&self) -> usize {
        match self.side {
            Side::A => self.comm.rank(),
            Side::B => self.comm.rank() - self.a,
        }
    }

    /// The number of ranks in this rank's own group.
    pub fn local_size(&self) -> usize {
        self.size_of(self.side)
    }

    /// The number of ranks in the other group.
    pub fn remote_size(&self) -> usize {
        self.size_of(self.side.other())
    }

    fn size_of(&self, side: Side) -> usize {
        match side {
            Side::A => self.a,
            Side::B => self.b,
        }
    }

    /// The communicator of both groups (A's ranks first), for intragroup-wide collectives.
    pub fn comm(&mut self) -> &mut Communicator {
        &mut self.comm
    }

    /// Every rank's `recv` = the remote group's `send` buffers in their rank order. The local
    /// group's sends are all `send.len()` bytes, the remote group's `recv.len() / remote_size`.
    pub fn allgather<S, R>(&mut self, send: &S, recv: &mut R) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.allgather_using(send, recv, Choice::Auto)
    }

    /// [`InterCommunicator::allgather`] with a forced or configured algorithm choice.
    pub fn allgather_using<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let remote = self.remote_size();
        let len = recv.bytes().len();
        if len % remote != 0 {
            return Err(argument(
                "intergroup allgather",
                format!("recv of {len} bytes is not {remote} equal blocks"),
            ));
        }
        let local = vec![send.bytes().len(); self.local_size()];
        let remote = vec![len / remote; remote];
        self.allgatherv_using(send, recv, &local, &remote, choice)
    }

    /// Every rank's `recv` = the remote group's `send` buffers in rank order; `local_counts`
    /// are the local group's sizes (this rank's is `send.len()`), `remote_counts` the remote
    /// group's.
    pub fn allgatherv<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        local_counts: &[usize],
        remote_counts: &[usize],
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.allgatherv_using(send, recv, local_counts, remote_counts, Choice::Auto)
    }

    /// [`InterCommunicator::allgatherv`] with a forced or configured algorithm choice.
    pub fn allgatherv_using<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        local_counts: &[usize],
        remote_counts: &[usize],
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let op = "intergroup allgatherv";
        for (which, counts, want) in [
            ("local", local_counts, self.local_size()),
            ("remote", remote_counts, self.remote_size()),
        ] {
            if counts.len() != want {
                return Err(CommError::Argument {
                    op,
                    what: format!("{} {which} counts for {want} ranks", counts.len()),
                });
            }
        }
        let (a, b) = match self.side {
            Side::A => (local_counts, remote_counts),
            Side::B => (remote_counts, local_counts),
        };
        self.comm
            .intergroup_allgatherv_using(self.side, send, recv, a, b, choice)
    }
}

// A communicator moves to the thread that uses it (ranks as threads, the C API's callers):
// whatever it holds must be `Send`. A compile-time check, so that no part loses it unseen.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<Communicator>();
    send::<InterCommunicator>();
};
