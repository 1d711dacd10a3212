//! The per-phase receive and send arrays of one rank by the greedy construction of seed 000
//! (Alg. 4, 5): O(log² p) for the receive array, O(log³ p) for the send array. The schedules
//! the plans use come from [`super::recv_schedule`] and [`super::send_schedule`] in O(log p);
//! these are their oracle (the two give the same arrays, tested), and [`super::ScheduleTable`]
//! runs the same greedy choices for all ranks at once.

use super::skips::{add_mod, sub_mod};
use super::{baseblock, range_blocks, BlockSet, PhaseBlocks, Skips};

/// The receive array of rank r (mod p) for root 0 (Alg. 4). O(log² p).
///
/// In r's home round i (`skips[i] ≤ r < skips[i+1]`) it receives its baseblock; in every other
/// round a block b of the previous phase (entry b − q), greedily: round 0 the baseblock of r − 1;
/// rounds 1 … q − 2 the largest baseblock not yet taken among the ranks
/// `[r − skips[i+1] + 1, r − skips[i]]`, or if there is none, among
/// `[r − (skips[0] + … + skips[i]), r − skips[i+1]]`; round q − 1 the one block left. The set of
/// taken blocks starts with r's own baseblock (the paper writes ∅; with it the last round would
/// have two candidates). Rank 0 counts as rank p with baseblock q.
pub fn recv_schedule(skips: &Skips, r: usize) -> PhaseBlocks {
    recv_rounds(skips, r, skips.q())
}

/// The send array of rank r (mod p) for root 0 (Alg. 5): entry i is the block that
/// `(r + skips[i]) mod p` receives in round i. The entry toward the root is the root's own
/// receive entry (the rounds do not send it). O(log³ p).
pub fn send_schedule(skips: &Skips, r: usize) -> PhaseBlocks {
    let (p, q) = (skips.p(), skips.q());
    let r = r % p;
    let mut out = PhaseBlocks::new(q);
    for i in 0..q {
        let to = add_mod(r, skips.get(i), p);
        out.blocks[i] = recv_rounds(skips, to, i + 1).blocks[i];
    }
    out
}

/// The first `rounds` entries of r's receive array (the rest stay 0).
fn recv_rounds(skips: &Skips, r: usize, rounds: usize) -> PhaseBlocks {
    let (p, q) = (skips.p(), skips.q());
    let s = skips.as_slice();
    let r = r % p;
    let mut out = PhaseBlocks::new(q);
    let own = baseblock(skips, r);
    let mut taken = BlockSet::single(own);
    // skips[0] + … + skips[i], for the widened range.
    let mut skip_sum = 0usize;
    for i in 0..rounds.min(q) {
        skip_sum += s[i];
        if r != 0 && s[i] <= r && r < s[i + 1] {
            out.blocks[i] = own as i32;
            continue;
        }
        let block = if i == 0 {
            baseblock(skips, back(r, 1, p))
        } else if i + 1 < q {
            // Ranks whose block r's from-rank r − skips[i] can hold by now.
            let near = range_blocks(skips, back(r, s[i + 1] - 1, p), s[i + 1] - s[i]);
            let mut fresh = near.difference(taken);
            if fresh.is_empty() {
                let wide = range_blocks(
                    skips,
                    back(r, skip_sum, p),
                    (skip_sum + 1).saturating_sub(s[i + 1]),
                );
                fresh = wide.difference(taken);
            }
            // Lemma 2 guarantees a candidate; should it ever fail, the verifier reports the
            // schedule rather than this function panicking.
            fresh
                .max()
                .unwrap_or_else(|| missing(taken, q).unwrap_or(0))
        } else {
            missing(taken, q).unwrap_or(0)
        };
        taken.insert(block);
        out.blocks[i] = block as i32 - q as i32;
    }
    out
}

/// The smallest block of 0..q not yet taken.
fn missing(taken: BlockSet, q: usize) -> Option<usize> {
    BlockSet::up_to(q)
        .difference(taken)
        .min()
        .filter(|&b| b < q)
}

/// (r − d) mod p for any d.
fn back(r: usize, d: usize, p: usize) -> usize {
    sub_mod(r, d % p, p)
}
