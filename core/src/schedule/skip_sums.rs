//! The per-phase arrays of one rank in O(log p) (Träff 2024a, docs/architecture.md
//! "References"): the same arrays as the greedy construction of seed 000 ([`super::greedy`]),
//! found by a depth-first search over sums of skips (receive array) and by a default rule with
//! a few look-ups (send array).
//!
//! Receive array. A candidate is a sum of distinct skips taken in decreasing index order,
//! `c = skips[e₁] + skips[e₂] + …` (q ≥ e₁ > e₂ > …); its last index is the block attached to
//! it, and index q alone (c = p) stands for the root, i.e. for r's own baseblock. With
//! x = p + r, round k looks at the window `x − skips[k+1] < c ≤ x − skips[k]`: the ranks at
//! distance `[skips[k], skips[k+1])` behind r, whose blocks r's sender in round k can hold.
//! Windows of successive rounds are adjacent and move down. The search takes, round by round,
//! the largest unused index whose candidate lies in the round's window below every candidate
//! chosen so far, refining a candidate at or below the window with smaller skips first; the
//! unused indices are a descending linked list (O(1) removal). Each step examines one
//! (prefix, index) pair: about 2.6·q steps per rank at most, recursion depth q + 1.
//!
//! Send array. Rank r forwards by default its baseblock until the walk down the levels meets
//! the largest skip of r's greedy decomposition, and then the block of the decomposition level
//! met last; `bound` is an exclusive limit on the residue below which a rank keeps r's greedy
//! choices on the levels above. Where the target `r + skips[k]` does not extend r's
//! decomposition without a carry the rule may not hold, and the target's receive entry is
//! computed instead (at most four look-ups per rank in all our checks).
//!
//! Arithmetic is in u128: candidates reach 3p, which overflows `usize` for p near its top.

use super::{baseblock, PhaseBlocks, Skips, MAX_Q};

/// No index: the end of the list of unused indices.
const NONE: u8 = u8::MAX;

/// The receive array of rank r (mod p) for root 0, in O(log p): equal to
/// [`super::greedy::recv_schedule`].
pub fn recv_schedule(skips: &Skips, r: usize) -> PhaseBlocks {
    recv_rounds(skips, r % skips.p(), skips.q())
}

/// The send array of rank r (mod p) for root 0, in O(log p): entry k is the block that
/// `(r + skips[k]) mod p` receives in round k (toward the root, the root's own receive entry,
/// which the rounds do not send). Equal to [`super::greedy::send_schedule`].
pub fn send_schedule(skips: &Skips, r: usize) -> PhaseBlocks {
    let (p, q) = (skips.p(), skips.q());
    let r = r % p;
    let mut out = PhaseBlocks::new(q);
    if r == 0 {
        for (k, entry) in out.blocks[..q].iter_mut().enumerate() {
            *entry = k as i32;
        }
        return out;
    }
    if q == 0 {
        return out;
    }
    let s = |k: usize| skips.get(k) as u128;
    let b = baseblock(skips, r);
    let look_up = |k: usize| {
        let to = (r as u128 + s(k)) % p as u128;
        recv_rounds(skips, to as usize, k + 1).blocks[k]
    };
    out.blocks[0] = b as i32 - q as i32;
    let (mut rem, mut bound) = (r as u128, p as u128);
    let mut default = b as i32;
    for k in (1..q).rev() {
        let ok = if rem < s(k) {
            // Level k is not in r's decomposition.
            let ok = rem + s(k) < bound || bound < s(k - 1) || (k == 1 && b > 0);
            bound = bound.min(s(k));
            ok
        } else {
            default = k as i32 - q as i32;
            bound -= s(k);
            let ok = rem > s(k) || rem <= bound || k == 1 || bound < s(k - 1);
            rem -= s(k);
            ok
        };
        out.blocks[k] = if ok { default } else { look_up(k) };
    }
    out
}

/// The first `rounds` entries of r's receive array (r < p; the rest stay 0).
fn recv_rounds(skips: &Skips, r: usize, rounds: usize) -> PhaseBlocks {
    let q = skips.q();
    let mut out = PhaseBlocks::new(q);
    if q == 0 {
        return out;
    }
    let own = baseblock(skips, r);
    let mut search = Search::new(skips, r, own, rounds.min(q));
    let first = search.highest;
    search.run(0, 2 * skips.p() as u128, first);
    for (entry, &e) in out.blocks[..search.rounds]
        .iter_mut()
        .zip(&search.entry[..search.rounds])
    {
        *entry = if usize::from(e) == q {
            own as i32
        } else {
            i32::from(e) - q as i32
        };
    }
    out
}

/// The state of the search for one rank's receive array.
struct Search<'a> {
    skips: &'a Skips,
    /// p + r.
    x: u128,
    /// The index chosen for each round so far.
    entry: [u8; MAX_Q],
    /// Rounds filled.
    k: usize,
    /// Rounds wanted.
    rounds: usize,
    /// The unused indices as a descending doubly linked list; a removed index keeps its link
    /// to the next smaller one, so a scan can step off an index it has just removed.
    below: [u8; MAX_Q + 1],
    above: [u8; MAX_Q + 1],
    /// The largest unused index.
    highest: u8,
}

impl<'a> Search<'a> {
    /// The search for rank r with baseblock `own`: indices 0..=q but `own` are unused.
    fn new(skips: &'a Skips, r: usize, own: usize, rounds: usize) -> Search<'a> {
        let q = skips.q();
        let mut below = [NONE; MAX_Q + 1];
        let mut above = [NONE; MAX_Q + 1];
        let mut last = NONE;
        let mut highest = NONE;
        for e in (0..=q).rev().filter(|&e| e != own) {
            let e = e as u8;
            if last == NONE {
                highest = e;
            } else {
                below[usize::from(last)] = e;
                above[usize::from(e)] = last;
            }
            last = e;
        }
        Search {
            skips,
            x: skips.p() as u128 + r as u128,
            entry: [0; MAX_Q],
            k: 0,
            rounds,
            below,
            above,
            highest,
        }
    }

    fn skip(&self, k: usize) -> u128 {
        self.skips.get(k) as u128
    }

    /// The top of round k's window.
    fn hi(&self, k: usize) -> u128 {
        self.x - self.skip(k)
    }

    /// The bottom (exclusive) of round k's window.
    fn lo(&self, k: usize) -> u128 {
        self.x - self.skip(k + 1)
    }

    fn remove(&mut self, e: u8) {
        let (up, down) = (self.above[usize::from(e)], self.below[usize::from(e)]);
        if up == NONE {
            self.highest = down;
        } else {
            self.below[usize::from(up)] = down;
        }
        if down != NONE {
            self.above[usize::from(down)] = up;
        }
    }

    /// Candidates `base + skips[e]` for the unused indices from `e` down, each below `bound`.
    fn run(&mut self, base: u128, mut bound: u128, mut e: u8) {
        while e != NONE && self.k < self.rounds {
            let c = base + self.skip(usize::from(e));
            if c <= self.hi(self.k) && c < bound {
                if c <= self.lo(self.k) {
                    // At or below the window: smaller skips may bring it into the window.
                    self.run(c, bound, self.below[usize::from(e)]);
                    if self.k == self.rounds {
                        return;
                    }
                }
                if base > self.lo(self.k) {
                    // This prefix now lies above the window, which has moved down.
                    return;
                }
                self.entry[self.k] = e;
                self.k += 1;
                bound = c;
                self.remove(e);
            }
            e = self.below[usize::from(e)];
        }
    }
}
