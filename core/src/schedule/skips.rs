//! The skips (jumps) of the circulant graph (Alg. 1).

use super::ScheduleError;

/// Largest possible q = ⌈log₂ p⌉ for a `usize` p.
pub const MAX_Q: usize = usize::BITS as usize;

/// The skips of the circulant graph on p ranks: `skips[q] = p`, `skips[k] = ⌈skips[k+1] / 2⌉`.
///
/// In round i (k = i mod q) rank r sends to `(r + skips[k]) mod p` and receives from
/// `(r − skips[k]) mod p`. Stored inline (no heap), so it is cheap to copy.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Skips {
    p: usize,
    q: usize,
    skips: [usize; MAX_Q + 1],
}

impl Skips {
    /// The skips for p ranks; p = 1 gives q = 0 and the single skip 1.
    pub fn new(p: usize) -> Result<Skips, ScheduleError> {
        if p == 0 {
            return Err(ScheduleError::ZeroRanks);
        }
        let q = ceil_log2(p);
        let mut skips = [0; MAX_Q + 1];
        skips[q] = p;
        for k in (0..q).rev() {
            skips[k] = skips[k + 1].div_ceil(2);
        }
        Ok(Skips { p, q, skips })
    }

    /// Number of ranks.
    pub fn p(&self) -> usize {
        self.p
    }

    /// ⌈log₂ p⌉: rounds per phase and the number of blocks of one phase.
    pub fn q(&self) -> usize {
        self.q
    }

    /// The q + 1 skips; the last one is p.
    pub fn as_slice(&self) -> &[usize] {
        &self.skips[..=self.q]
    }

    /// `skips[k]` for k ≤ q (panics for k > q, like slice indexing).
    pub fn get(&self, k: usize) -> usize {
        self.as_slice()[k]
    }
}

impl std::fmt::Debug for Skips {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Skips")
            .field("p", &self.p)
            .field("q", &self.q)
            .field("skips", &self.as_slice())
            .finish()
    }
}

/// (a + b) mod p for a, b < p, without overflow for any p.
pub(crate) fn add_mod(a: usize, b: usize, p: usize) -> usize {
    if a < p - b {
        a + b
    } else {
        a - (p - b)
    }
}

/// (a − b) mod p for a, b < p.
pub(crate) fn sub_mod(a: usize, b: usize, p: usize) -> usize {
    if a >= b {
        a - b
    } else {
        a + (p - b)
    }
}

/// ⌈log₂ p⌉ (0 for p ≤ 1).
pub(crate) fn ceil_log2(p: usize) -> usize {
    if p <= 1 {
        0
    } else {
        (usize::BITS - (p - 1).leading_zeros()) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_from_the_paper() {
        assert_eq!(Skips::new(20).unwrap().as_slice(), &[1, 2, 3, 5, 10, 20]);
        assert_eq!(Skips::new(33).unwrap().as_slice(), &[1, 2, 3, 5, 9, 17, 33]);
        assert_eq!(Skips::new(32).unwrap().as_slice(), &[1, 2, 4, 8, 16, 32]);
        assert_eq!(Skips::new(31).unwrap().as_slice(), &[1, 2, 4, 8, 16, 31]);
        assert_eq!(Skips::new(1).unwrap().as_slice(), &[1]);
        assert_eq!(Skips::new(2).unwrap().as_slice(), &[1, 2]);
        assert_eq!(Skips::new(0), Err(ScheduleError::ZeroRanks));
    }

    #[test]
    fn largest_p() {
        let s = Skips::new(usize::MAX).unwrap();
        assert_eq!(s.q(), MAX_Q);
        assert_eq!(s.get(0), 1);
        assert_eq!(s.get(1), 2);
    }
}
