//! The set of baseblocks in a cyclic range of ranks (Alg. 3) in O(log p).
//!
//! Let S be the baseblocks of ranks 1, 2, …, p − 1. Alg. 2 gives S a self-similar shape: its
//! first `skips[k] − 1` entries S_k satisfy
//! `S_{k+1} = S_k, k, S_k[1 ..= skips[k+1] − skips[k] − 1]`,
//! so a range of S either lies inside one copy of S_k (shift it and descend) or straddles the
//! entry k (take k, the part after it is a prefix of S, and the part before it is a suffix of
//! S_k: descend). A prefix `S[1..=len]` holds exactly the blocks 0..=j for the largest j with
//! `skips[j] ≤ len`. Each step lowers k by one, so a range costs O(q) steps with no recursion;
//! this also covers the small-k exceptions Alg. 3 leaves to the reader.

use super::Skips;

/// A set of blocks 0..=q (q ≤ 64), as a bit mask.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct BlockSet(u128);

impl BlockSet {
    /// The empty set.
    pub const EMPTY: BlockSet = BlockSet(0);

    /// The blocks 0..=j.
    pub fn up_to(j: usize) -> BlockSet {
        BlockSet(u128::MAX >> (127 - j))
    }

    /// The set {b}.
    pub fn single(b: usize) -> BlockSet {
        BlockSet(1 << b)
    }

    /// Whether block `b` is in the set.
    pub fn contains(self, b: usize) -> bool {
        b < 128 && self.0 >> b & 1 == 1
    }

    /// Adds block `b`.
    pub fn insert(&mut self, b: usize) {
        self.0 |= 1 << b;
    }

    /// Blocks in either set.
    pub fn union(self, other: BlockSet) -> BlockSet {
        BlockSet(self.0 | other.0)
    }

    /// Blocks in `self` but not in `other`.
    pub fn difference(self, other: BlockSet) -> BlockSet {
        BlockSet(self.0 & !other.0)
    }

    /// Whether the set has no block.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Number of blocks in the set.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The largest block in the set.
    pub fn max(self) -> Option<usize> {
        (self.0 != 0).then(|| 127 - self.0.leading_zeros() as usize)
    }

    /// The smallest block in the set.
    pub fn min(self) -> Option<usize> {
        (self.0 != 0).then(|| self.0.trailing_zeros() as usize)
    }

    /// The blocks in increasing order.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        (0..128).filter(move |&b| self.contains(b))
    }
}

impl std::fmt::Debug for BlockSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// The baseblocks of the `len` ranks `start, start + 1, …` (cyclic mod p); rank 0 contributes
/// the root's baseblock q. A range of p or more ranks holds every block 0..=q.
pub fn range_blocks(skips: &Skips, start: usize, len: usize) -> BlockSet {
    let p = skips.p();
    if len == 0 {
        return BlockSet::EMPTY;
    }
    if len >= p {
        return BlockSet::up_to(skips.q());
    }
    // Positions 1..=p: rank r ≥ 1 at position r, rank 0 at position p.
    let a = match start % p {
        0 => p,
        r => r,
    };
    // The range ends at position a + len − 1; compare without forming it (no overflow).
    if len - 1 < p - a {
        return linear(skips, a, a + (len - 1));
    }
    let mut set = BlockSet::single(skips.q());
    if a < p {
        set = set.union(linear(skips, a, p - 1));
    }
    let wrapped = (len - 1) - (p - a);
    if wrapped > 0 {
        set = set.union(prefix(skips, wrapped));
    }
    set
}

/// The blocks in `S[1..=len]`, 1 ≤ len ≤ p − 1: `{0..=j}` for the largest j with
/// `skips[j] ≤ len`. Since `skips[j] = ⌈p / 2^(q−j)⌉`, `skips[j] ≤ len ⇔ p ≤ len·2^(q−j)`; the
/// smallest such shift t = q − j is the difference of bit lengths, or one more.
fn prefix(skips: &Skips, len: usize) -> BlockSet {
    let p = skips.p();
    let t = (len.leading_zeros() - p.leading_zeros()) as usize;
    let t = t + usize::from(p > len << t);
    BlockSet::up_to(skips.q() - t)
}

/// The blocks in `S[a..=b]`, 1 ≤ a ≤ b ≤ p − 1.
fn linear(skips: &Skips, mut a: usize, mut b: usize) -> BlockSet {
    let s = skips.as_slice();
    let mut set = BlockSet::EMPTY;
    // Invariant: 1 ≤ a ≤ b ≤ s[k] − 1, i.e. the range lies in S_k.
    let mut k = skips.q();
    while k > 0 {
        let m = s[k - 1];
        if b < m {
            // Inside the first copy of S_{k−1}.
        } else if a > m {
            // Inside the trailing prefix copy of S_{k−1}.
            a -= m;
            b -= m;
        } else {
            set.insert(k - 1);
            if b > m {
                set = set.union(prefix(skips, b - m));
            }
            if a == m {
                break;
            }
            b = m - 1;
        }
        k -= 1;
    }
    set
}

#[cfg(test)]
mod tests {
    use super::super::baseblock;
    use super::*;

    #[test]
    fn prefix_matches_scan() {
        for p in 2..=300 {
            let skips = Skips::new(p).unwrap();
            let mut seen = BlockSet::EMPTY;
            for len in 1..p {
                seen.insert(baseblock(&skips, len));
                assert_eq!(prefix(&skips, len), seen, "p = {p}, len = {len}");
            }
        }
    }

    #[test]
    fn table_2_home_range_exception() {
        // The paper: for p = 33 the range [3, 4] holds only the baseblocks 2 and 0.
        let skips = Skips::new(33).unwrap();
        assert_eq!(
            range_blocks(&skips, 3, 2).iter().collect::<Vec<_>>(),
            vec![0, 2]
        );
    }
}
