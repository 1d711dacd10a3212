//! Merged writes: they move exactly the pieces' bytes, respect the limits, and every target
//! computes from its sources' plans the writes they post to it.

use std::collections::BTreeMap;

use circulant_core::plan::distribution::Distribution;
use circulant_core::plan::merge::{merge_transfer, round_writes, Incoming, IovLimits};
use circulant_core::plan::{piece, registry, Buf, CostModel, Piece, Problem, Transfer};
use proptest::prelude::*;

const MODEL: CostModel = CostModel {
    alpha: 2e-6,
    beta: 1e-10,
    o: 3e-7,
};

fn buf() -> impl Strategy<Value = Buf> {
    prop_oneof![Just(Buf::Send), Just(Buf::Recv), Just(Buf::Scratch)]
}

/// Pieces laid out one after another on both sides with small random gaps (often none), in a
/// random order, so that merging has something to find.
fn transfer() -> impl Strategy<Value = Transfer> {
    prop::collection::vec(
        (
            buf(),
            0usize..3,
            buf(),
            0usize..3,
            0usize..6,
            prop::option::of(0u32..4),
        ),
        1..24,
    )
    .prop_flat_map(|specs| {
        let mut src_at = BTreeMap::new();
        let mut dst_at = BTreeMap::new();
        let mut pieces = Vec::new();
        for (sb, sgap, db, dgap, len, after) in specs {
            let s = src_at.entry(sb as u8).or_insert(0usize);
            let d = dst_at.entry(db as u8).or_insert(0usize);
            *s += sgap;
            *d += dgap;
            pieces.push(piece(sb, *s, db, *d, len, after));
            *s += len;
            *d += len;
        }
        Just(pieces).prop_shuffle()
    })
    .prop_map(|pieces| Transfer { to: 1, pieces })
}

/// The (source byte, destination byte) pairs a list of pieces moves.
fn moved_by_pieces(pieces: &[Piece]) -> Vec<((u8, usize), (u8, usize))> {
    let mut v: Vec<_> = pieces
        .iter()
        .flat_map(|p| {
            (0..p.len).map(move |i| {
                (
                    (p.src as u8, p.src_offset + i),
                    (p.dst as u8, p.dst_offset + i),
                )
            })
        })
        .collect();
    v.sort_unstable();
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn merged_writes_move_the_same_bytes_within_limits(
        t in transfer(),
        iov in 1usize..6,
        rma_iov in 1usize..6,
    ) {
        let limits = IovLimits::new(iov, rma_iov).unwrap();
        let writes = merge_transfer(&t, limits);
        let nonempty = t.pieces.iter().filter(|p| p.len > 0).count();
        prop_assert!(!writes.is_empty());
        prop_assert!(writes.len() <= nonempty.max(1));
        let mut moved = Vec::new();
        let mut carried = 0;
        for w in &writes {
            prop_assert_eq!(w.to, t.to);
            prop_assert!(w.local.len() <= iov && w.remote.len() <= rma_iov);
            prop_assert_eq!(w.local.iter().map(|s| s.len).sum::<usize>(), w.bytes());
            prop_assert_eq!(w.remote.iter().map(|s| s.len).sum::<usize>(), w.bytes());
            let src = w.local.iter().flat_map(|s| (0..s.len).map(move |i| (s.buf as u8, s.offset + i)));
            let dst = w.remote.iter().flat_map(|s| (0..s.len).map(move |i| (s.buf as u8, s.offset + i)));
            moved.extend(src.zip(dst));
            carried += w.pieces;
        }
        moved.sort_unstable();
        prop_assert_eq!(moved, moved_by_pieces(&t.pieces));
        prop_assert_eq!(carried, nonempty.max(1));
        // Larger limits never need more writes; pieces with no neighbours need one each.
        let more = IovLimits::new(iov + 1, rma_iov + 1).unwrap();
        prop_assert!(merge_transfer(&t, more).len() <= writes.len());
        // Deterministic.
        prop_assert_eq!(merge_transfer(&t, limits), writes);
    }

    #[test]
    fn targets_expect_what_sources_post(
        p in 1usize..40,
        dist in 0usize..Distribution::ALL.len(),
        base in 0usize..9,
        l in 1usize..9,
    ) {
        let limits = IovLimits::new(l, l).unwrap();
        let d = Distribution::ALL[dist];
        for problem in [
            Problem::Allgatherv { counts: d.counts(p, base) },
            Problem::Broadcast { p, root: p / 2, bytes: base * 13 },
            Problem::Alltoall { p, block: base },
        ] {
            for alg in registry::applicable(&problem, &MODEL).unwrap() {
                // Sender side: writes per (round, target, source).
                let mut posted: BTreeMap<(u32, usize, usize), usize> = BTreeMap::new();
                for r in 0..p {
                    for round in alg.rank_plan(r).unwrap().rounds {
                        for w in round_writes(&round, limits) {
                            *posted.entry((round.index, w.to, r)).or_default() += 1;
                        }
                    }
                }
                // Receiver side, from the target's own plan and its sources' plans.
                let mut expected = BTreeMap::new();
                for r in 0..p {
                    let mut inc = Incoming::new(alg.as_ref(), r, limits);
                    for round in alg.rank_plan(r).unwrap().rounds {
                        for e in inc.expects(&round).unwrap() {
                            if e.writes > 0 {
                                *expected.entry((round.index, r, e.from)).or_default() += e.writes;
                            }
                        }
                    }
                }
                prop_assert_eq!(&posted, &expected, "{}", alg.name());
            }
        }
    }
}
