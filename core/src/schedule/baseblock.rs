//! Baseblocks (Alg. 2): the first block a rank receives.

use super::Skips;

/// The baseblock of rank r (taken mod p): `baseblock(skips[k]) = k`, and for r in its home range
/// `skips[k] < r < skips[k+1]` the baseblock of `r − skips[k]`. Rank 0 (the root) counts as rank
/// p = `skips[q]`, so its baseblock is q. O(log p).
pub fn baseblock(skips: &Skips, r: usize) -> usize {
    let s = skips.as_slice();
    let mut r = r % skips.p();
    if r == 0 {
        return skips.q();
    }
    // Invariant: 1 ≤ r ≤ s[k]; the loop ends at the latest at k = 0, where s[0] = 1 = r.
    let mut k = skips.q();
    while r != s[k] && k > 0 {
        k -= 1;
        if s[k] < r {
            r -= s[k];
        }
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's linear recipe: in round k the root sends block k to skips[k], and every rank
    /// 1 ≤ r < skips[k] forwards its baseblock to r + skips[k] when that is below skips[k+1].
    fn linear(p: usize) -> Vec<usize> {
        let skips = Skips::new(p).unwrap();
        let mut bb = vec![usize::MAX; p];
        bb[0] = skips.q();
        for k in 0..skips.q() {
            let (sk, sk1) = (skips.get(k), skips.get(k + 1));
            bb[sk] = k;
            for r in 1..sk {
                if r + sk < sk1 {
                    bb[r + sk] = bb[r];
                }
            }
        }
        bb
    }

    #[test]
    fn agrees_with_the_linear_recipe() {
        for p in 1..=600 {
            let skips = Skips::new(p).unwrap();
            let want = linear(p);
            for (r, &b) in want.iter().enumerate() {
                assert_eq!(baseblock(&skips, r), b, "p = {p}, r = {r}");
            }
        }
    }
}
