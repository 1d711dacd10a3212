//! Merged writes: a transfer's pieces posted as few scatter-gather writes as the provider's
//! limits allow.
//!
//! One write (`fi_writemsg`) gathers up to `iov` local segments into one byte stream and scatters
//! it over up to `rma_iov` remote segments. The pieces of a write are taken in one order; its
//! local segments are their source ranges with adjacent ones joined, its remote segments their
//! destination ranges with adjacent ones joined. So with `rma_iov = 1` pieces whose destinations
//! follow each other still share one write (with several local segments), and likewise for
//! sources.
//!
//! A write also carries at most `max_bytes` (the provider's `max_msg_size`): a longer piece is
//! cut into several writes, and pieces join a write only while it stays within the cap.
//!
//! The result depends only on the transfer and the limits, so a target learns how many writes it
//! receives by merging its sources' transfers ([`Incoming`]), from their plans.

use std::collections::BTreeMap;

use super::{Algorithm, Buf, Expect, Piece, PlanError, RankPlan, Round, Transfer};

/// Provider limits on one write: local segments (`iov_limit`), remote segments
/// (`rma_iov_limit`) and bytes (`max_msg_size`), all at least 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IovLimits {
    /// Local segments one write may gather.
    pub iov: usize,
    /// Remote segments one write may scatter to.
    pub rma_iov: usize,
    /// Bytes one write may carry ([`usize::MAX`]: no cap).
    pub max_bytes: usize,
}

impl IovLimits {
    /// One segment on each side: only pieces contiguous on both sides share a write.
    pub const SINGLE: IovLimits = IovLimits {
        iov: 1,
        rma_iov: 1,
        max_bytes: usize::MAX,
    };

    /// The limits with no byte cap, or [`PlanError::IovLimit`] if either is 0.
    pub fn new(iov: usize, rma_iov: usize) -> Result<Self, PlanError> {
        if iov == 0 || rma_iov == 0 {
            return Err(PlanError::IovLimit { iov, rma_iov });
        }
        Ok(IovLimits {
            iov,
            rma_iov,
            max_bytes: usize::MAX,
        })
    }

    /// These limits with writes of at most `max_bytes` (0 is taken as no cap, as providers
    /// report it).
    pub fn with_max_bytes(self, max_bytes: usize) -> IovLimits {
        IovLimits {
            max_bytes: if max_bytes == 0 {
                usize::MAX
            } else {
                max_bytes
            },
            ..self
        }
    }

    /// Whether a write's bytes are capped below what any transfer could need.
    pub fn caps_bytes(&self) -> bool {
        self.max_bytes != usize::MAX
    }

    /// The smaller of two limits on each side.
    pub fn min(self, other: IovLimits) -> IovLimits {
        IovLimits {
            iov: self.iov.min(other.iov),
            rma_iov: self.rma_iov.min(other.rma_iov),
            max_bytes: self.max_bytes.min(other.max_bytes),
        }
    }
}

impl std::fmt::Display for IovLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "iov_limit {}, rma_iov_limit {}", self.iov, self.rma_iov)?;
        if self.caps_bytes() {
            write!(f, ", at most {} bytes per write", self.max_bytes)?;
        }
        Ok(())
    }
}

/// A byte range of one buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The buffer.
    pub buf: Buf,
    /// Offset in it.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
}

impl Segment {
    fn follows(&self, buf: Buf, offset: usize) -> bool {
        self.buf == buf && self.offset.checked_add(self.len) == Some(offset)
    }
}

/// One scatter-gather write to `to`: the bytes of `local` in order land in `remote` in order
/// (both total the same length).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// The target rank.
    pub to: usize,
    /// Where the bytes come from, in order.
    pub local: Vec<Segment>,
    /// Where they land at the target, in order.
    pub remote: Vec<Segment>,
    /// The latest dependency of its pieces (see [`Piece::after`]).
    pub after: Option<u32>,
    /// How many plan pieces it carries.
    pub pieces: usize,
}

impl Write {
    /// Bytes carried.
    pub fn bytes(&self) -> usize {
        self.local.iter().map(|s| s.len).sum()
    }
}

/// Appends `len` bytes at `offset` of `buf` to a segment list, joining the last segment when
/// adjacent; returns whether a new segment was started.
fn extend(segs: &mut Vec<Segment>, buf: Buf, offset: usize, len: usize) -> bool {
    match segs.last_mut() {
        Some(last) if last.follows(buf, offset) => {
            last.len += len;
            false
        }
        _ => {
            segs.push(Segment { buf, offset, len });
            true
        }
    }
}

/// Segments `pieces` would need in this order, if they formed one write.
fn starts(prev: Option<&Piece>, p: &Piece) -> (bool, bool) {
    match prev {
        None => (true, true),
        Some(q) => (
            !(q.src == p.src && q.src_offset.checked_add(q.len) == Some(p.src_offset)),
            !(q.dst == p.dst && q.dst_offset.checked_add(q.len) == Some(p.dst_offset)),
        ),
    }
}

/// Greedy cut of `order` into writes: a piece joins the current write unless that would need
/// more segments than the limits allow; under a byte cap a piece fills the current write up to
/// the cap and goes on in the next one. For a fixed order this gives the fewest writes (every
/// part of a valid write is valid).
fn pack(to: usize, order: &[&Piece], limits: IovLimits) -> Vec<Write> {
    let mut out: Vec<Write> = Vec::new();
    let mut prev: Option<Piece> = None;
    let mut bytes = 0usize;
    for &whole in order {
        let mut rest = *whole;
        let mut first = true;
        loop {
            let (new_local, new_remote) = starts(prev.as_ref(), &rest);
            let room = limits.max_bytes - bytes;
            let fits = out.last().is_some_and(|w| {
                w.local.len() + usize::from(new_local) <= limits.iov
                    && w.remote.len() + usize::from(new_remote) <= limits.rma_iov
                    && (room > 0 || rest.len == 0)
            });
            if !fits {
                out.push(Write {
                    to,
                    local: Vec::new(),
                    remote: Vec::new(),
                    after: None,
                    pieces: 0,
                });
                bytes = 0;
                continue;
            }
            let part = Piece {
                len: rest.len.min(room),
                ..rest
            };
            if let Some(w) = out.last_mut() {
                extend(&mut w.local, part.src, part.src_offset, part.len);
                extend(&mut w.remote, part.dst, part.dst_offset, part.len);
                w.after = w.after.max(part.after);
                // A piece cut into parts is counted once, with its first part.
                w.pieces += usize::from(first);
            }
            bytes += part.len;
            prev = Some(part);
            first = false;
            if part.len == rest.len {
                break;
            }
            rest = Piece {
                src_offset: rest.src_offset + part.len,
                dst_offset: rest.dst_offset + part.len,
                len: rest.len - part.len,
                ..rest
            };
        }
    }
    out
}

fn buf_rank(b: Buf) -> u8 {
    match b {
        Buf::Send => 0,
        Buf::Recv => 1,
        Buf::Scratch => 2,
    }
}

/// The writes that carry `transfer` under `limits`: its pieces in plan order, in destination
/// order and in source order are each packed greedily, and the order with the fewest writes
/// wins (the first on ties). Empty pieces carry nothing and are left out, unless the transfer
/// has nothing else (a signal: one empty write).
pub fn merge_transfer(transfer: &Transfer, limits: IovLimits) -> Vec<Write> {
    let mut pieces: Vec<&Piece> = transfer.pieces.iter().filter(|p| p.len > 0).collect();
    if pieces.is_empty() {
        pieces.extend(transfer.pieces.first());
    }
    let mut by_dst = pieces.clone();
    by_dst.sort_by_key(|p| (buf_rank(p.dst), p.dst_offset));
    let mut by_src = pieces.clone();
    by_src.sort_by_key(|p| (buf_rank(p.src), p.src_offset));
    let mut best = pack(transfer.to, &pieces, limits);
    for order in [by_dst, by_src] {
        let w = pack(transfer.to, &order, limits);
        if w.len() < best.len() {
            best = w;
        }
    }
    best
}

/// The writes of `transfer` without merging: one per piece, in plan order, empty pieces
/// included (each a signal). Where the target counts pieces (the plan's own expectations).
pub fn piece_writes(transfer: &Transfer) -> Vec<Write> {
    transfer
        .pieces
        .iter()
        .map(|p| Write {
            to: transfer.to,
            local: vec![Segment {
                buf: p.src,
                offset: p.src_offset,
                len: p.len,
            }],
            remote: vec![Segment {
                buf: p.dst,
                offset: p.dst_offset,
                len: p.len,
            }],
            after: p.after,
            pieces: 1,
        })
        .collect()
}

/// Number of writes `transfer` needs under `limits`.
pub fn write_count(transfer: &Transfer, limits: IovLimits) -> usize {
    merge_transfer(transfer, limits).len()
}

/// Every write a rank posts in `round` (its transfers in order, each merged on its own: a
/// transfer is posted once all its pieces' data is held).
pub fn round_writes(round: &Round, limits: IovLimits) -> Vec<Write> {
    round
        .sends
        .iter()
        .flat_map(|t| merge_transfer(t, limits))
        .collect()
}

/// The writes a target receives, per source, in the rounds of its plan: merges the transfers
/// its sources address to it in the same round, from the sources' own plans (walked lazily, one
/// iterator per source, so the work is that of the sources' plans up to the target's last round).
pub struct Incoming<'a> {
    alg: &'a dyn Algorithm,
    rank: usize,
    limits: IovLimits,
    sources: BTreeMap<usize, std::iter::Peekable<Box<dyn Iterator<Item = Round> + Send + 'a>>>,
    /// Whether one expected piece is taken as one write without reading the source's plan.
    trust_single: bool,
}

impl<'a> Incoming<'a> {
    /// The writes `rank` receives under `alg` with these limits, every expectation checked
    /// against its source's plan (the simulator's rule).
    pub fn new(alg: &'a dyn Algorithm, rank: usize, limits: IovLimits) -> Self {
        Incoming {
            alg,
            rank,
            limits,
            sources: BTreeMap::new(),
            trust_single: false,
        }
    }

    /// As [`Self::new`], but one expected piece is one write under any segment limits, so the
    /// source's plan is read only where several pieces are expected from it (or where writes
    /// have a byte cap): for a transport preparing plans the simulator has checked.
    pub fn trusting_single_pieces(alg: &'a dyn Algorithm, rank: usize, limits: IovLimits) -> Self {
        Incoming {
            trust_single: true,
            ..Self::new(alg, rank, limits)
        }
    }

    /// The expectations of `round` (a round of this rank's plan; rounds are given in increasing
    /// index order) counted in merged writes. Fails if a source's plan does not send the pieces
    /// the round expects from it.
    pub fn expects(&mut self, round: &Round) -> Result<Vec<Expect>, PlanError> {
        let mut per_source: BTreeMap<usize, usize> = BTreeMap::new();
        for e in &round.expects {
            *per_source.entry(e.from).or_insert(0) += e.writes;
        }
        let mut out = Vec::with_capacity(per_source.len());
        for (from, pieces) in per_source {
            if pieces == 1 && self.trust_single && !self.limits.caps_bytes() {
                // One piece is one write under any segment limits (not under a byte cap, which
                // may cut it): the source's plan need not be read.
                out.push(Expect { from, writes: 1 });
                continue;
            }
            let src = match self.sources.entry(from) {
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => {
                    let RankPlan { rounds, .. } = self.alg.rank_plan(from)?;
                    v.insert(rounds.peekable())
                }
            };
            while src.next_if(|r| r.index < round.index).is_some() {}
            let mut sent_pieces = 0;
            let mut writes = 0;
            if let Some(r) = src.next_if(|r| r.index == round.index) {
                for t in r.sends.iter().filter(|t| t.to == self.rank) {
                    sent_pieces += t.pieces.len();
                    writes += write_count(t, self.limits);
                }
            }
            if sent_pieces != pieces {
                return Err(PlanError::Unsupported {
                    algorithm: self.alg.name(),
                    reason: format!(
                        "rank {} expects {pieces} pieces from rank {from} in round {}, \
                         whose plan sends {sent_pieces}",
                        self.rank, round.index
                    ),
                });
            }
            out.push(Expect { from, writes });
        }
        Ok(out)
    }
}

/// Writes and price of a whole plan under given limits, counted without data.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tally {
    /// Most writes any rank posts.
    pub writes_per_rank: u64,
    /// Most pieces any rank sends (the writes of one write per piece).
    pub pieces_per_rank: u64,
    /// Priced by rounds with the merged writes: every round costs its busiest port, a message
    /// [`CostModel::message_writes`](super::CostModel::message_writes).
    pub round_time: f64,
}

/// Walks the plan of every rank of `alg`, one rank at a time, and counts their merged writes.
///
/// One rank's plan is alive at a time (a plan may hold O(p) state, so p plans at once would be
/// O(p²)); what is kept across ranks is the cost of each (round, port), bounded by the writes.
pub fn tally(
    alg: &dyn Algorithm,
    limits: IovLimits,
    model: &super::CostModel,
) -> Result<Tally, PlanError> {
    let p = alg.problem().p();
    let mut writes_per_rank = 0u64;
    let mut pieces_per_rank = 0u64;
    // Per round: the busiest sender's cost, and every target's received cost.
    let mut send = BTreeMap::<u32, f64>::new();
    let mut recv = BTreeMap::<(u32, usize), f64>::new();
    for r in 0..p {
        let (mut writes, mut pieces) = (0u64, 0u64);
        for round in alg.rank_plan(r)?.rounds {
            let mut sent = 0.0;
            for t in &round.sends {
                let w = write_count(t, limits);
                writes += w as u64;
                pieces += t.pieces.len() as u64;
                let cost = model.message_writes(t.bytes(), w);
                sent += cost;
                *recv.entry((round.index, t.to)).or_insert(0.0) += cost;
            }
            let busiest = send.entry(round.index).or_insert(0.0);
            *busiest = busiest.max(sent);
        }
        writes_per_rank = writes_per_rank.max(writes);
        pieces_per_rank = pieces_per_rank.max(pieces);
    }
    for ((index, _), cost) in recv {
        let busiest = send.entry(index).or_insert(0.0);
        *busiest = busiest.max(cost);
    }
    Ok(Tally {
        writes_per_rank,
        pieces_per_rank,
        round_time: send.values().sum(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::piece;

    fn t(pieces: Vec<Piece>) -> Transfer {
        Transfer { to: 1, pieces }
    }

    #[test]
    fn adjacent_destinations_share_one_remote_segment() {
        // Destinations follow each other, sources do not.
        let tr = t(vec![
            piece(Buf::Recv, 0, Buf::Recv, 0, 4, None),
            piece(Buf::Recv, 100, Buf::Recv, 4, 4, None),
            piece(Buf::Send, 0, Buf::Recv, 8, 4, Some(3)),
        ]);
        assert_eq!(write_count(&tr, IovLimits::SINGLE), 3);
        let w = merge_transfer(&tr, IovLimits::new(4, 1).unwrap());
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].remote.len(), 1);
        assert_eq!(w[0].local.len(), 3);
        assert_eq!(w[0].after, Some(3));
        assert_eq!(w[0].pieces, 3);
        assert_eq!(write_count(&tr, IovLimits::new(2, 1).unwrap()), 2);
    }

    #[test]
    fn adjacent_sources_share_one_local_segment() {
        let tr = t(vec![
            piece(Buf::Recv, 0, Buf::Recv, 50, 4, None),
            piece(Buf::Recv, 4, Buf::Scratch, 0, 4, None),
        ]);
        let w = merge_transfer(&tr, IovLimits::new(1, 2).unwrap());
        assert_eq!(w.len(), 1);
        assert_eq!(
            w[0].local,
            vec![Segment {
                buf: Buf::Recv,
                offset: 0,
                len: 8
            }]
        );
        assert_eq!(w[0].remote.len(), 2);
    }

    #[test]
    fn the_byte_cap_cuts_long_pieces_and_closes_full_writes() {
        let tr = t(vec![
            piece(Buf::Recv, 0, Buf::Recv, 0, 10, None),
            piece(Buf::Recv, 10, Buf::Recv, 10, 3, Some(2)),
            piece(Buf::Recv, 40, Buf::Recv, 40, 2, None),
        ]);
        let four = IovLimits::new(4, 4).unwrap();
        assert_eq!(write_count(&tr, four), 1);
        let w = merge_transfer(&tr, four.with_max_bytes(4));
        // 13 contiguous bytes in parts of 4, then 2 more (the last part of 1 shares a write).
        let sizes: Vec<usize> = w.iter().map(Write::bytes).collect();
        assert_eq!(sizes, vec![4, 4, 4, 3]);
        assert!(w.iter().all(|w| w.bytes() <= 4));
        // Every piece is counted once, and the parts land where the piece did.
        assert_eq!(w.iter().map(|w| w.pieces).sum::<usize>(), 3);
        assert_eq!(w[3].local.len(), 2);
        assert_eq!(w[3].remote[1].offset, 40);
        assert_eq!(w[3].after, Some(2));
        let landed: usize = w.iter().flat_map(|w| &w.remote).map(|s| s.len).sum();
        assert_eq!(landed, 15);
        // A cap of one byte: one write per byte.
        assert_eq!(write_count(&tr, four.with_max_bytes(1)), 15);
        // A signal under a cap is still one empty write.
        let mut r = Round::new(0);
        r.signal(3);
        assert_eq!(round_writes(&r, four.with_max_bytes(1)).len(), 1);
    }

    #[test]
    fn a_signal_is_one_empty_write() {
        let mut r = Round::new(0);
        r.signal(3);
        let w = round_writes(&r, IovLimits::new(4, 4).unwrap());
        assert_eq!(w.len(), 1);
        assert_eq!((w[0].to, w[0].bytes(), w[0].pieces), (3, 0, 1));
    }

    #[test]
    fn zero_limits_are_refused() {
        assert!(IovLimits::new(0, 1).is_err());
        assert!(IovLimits::new(1, 0).is_err());
        let l = IovLimits::new(2, 3).unwrap();
        assert_eq!((l.iov, l.rma_iov, l.caps_bytes()), (2, 3, false));
        assert_eq!(l.with_max_bytes(0), l);
        assert_eq!(l.with_max_bytes(7).max_bytes, 7);
        assert_eq!(l.with_max_bytes(7).min(l).max_bytes, 7);
    }
}
