//! A vector cut into p parts, part j for rank j: the layout of the reduce-scatters (and of the
//! allreduces built on them), even or from counts, with the sums over cyclic runs of parts the
//! circulant rounds need in O(1).

/// The parts of a vector of `total()` bytes, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parts {
    /// p parts of `each` bytes, the first `longer` of them `unit` bytes longer (a vector of
    /// whole elements cut as evenly as it goes). Nothing proportional to p is stored.
    Even {
        /// Number of parts.
        p: usize,
        /// Bytes of the short parts.
        each: usize,
        /// Bytes of one element.
        unit: usize,
        /// How many parts (the first ones) hold one element more.
        longer: usize,
    },
    /// Parts of the given lengths.
    Counts {
        /// Bytes of each part.
        counts: Vec<usize>,
        /// Offset of each part, then the total.
        displs: Vec<usize>,
    },
}

impl Parts {
    /// `bytes` (whole elements of `unit` bytes) in `p ≥ 1` parts whose lengths differ by at
    /// most one element, the longer ones first.
    pub fn even(bytes: usize, unit: usize, p: usize) -> Parts {
        let elements = bytes / unit.max(1);
        Parts::Even {
            p,
            each: elements / p * unit,
            unit,
            longer: elements % p,
        }
    }

    /// Parts of `counts` bytes (their sum checked by the caller).
    pub fn counts(counts: &[usize]) -> Parts {
        let mut displs = Vec::with_capacity(counts.len() + 1);
        let mut at = 0usize;
        for &c in counts {
            displs.push(at);
            at = at.saturating_add(c);
        }
        displs.push(at);
        Parts::Counts {
            counts: counts.to_vec(),
            displs,
        }
    }

    /// Number of parts.
    pub fn p(&self) -> usize {
        match self {
            Parts::Even { p, .. } => *p,
            Parts::Counts { counts, .. } => counts.len(),
        }
    }

    /// Bytes of the whole vector.
    pub fn total(&self) -> usize {
        self.at(self.p())
    }

    /// Bytes of part j.
    pub fn len(&self, j: usize) -> usize {
        match self {
            Parts::Even {
                each, unit, longer, ..
            } => each + if j < *longer { *unit } else { 0 },
            Parts::Counts { counts, .. } => counts[j],
        }
    }

    /// Whether every part is empty.
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// Offset of part j (j = p: the total).
    pub fn at(&self, j: usize) -> usize {
        match self {
            Parts::Even {
                each, unit, longer, ..
            } => j * each + j.min(*longer) * unit,
            Parts::Counts { displs, .. } => displs[j],
        }
    }

    /// The byte ranges (offset, len) of the `n ≤ p` parts from `start` on, cyclic: one range,
    /// or two where the run wraps around the end of the vector; empty ranges left out.
    pub fn ranges(&self, start: usize, n: usize) -> impl Iterator<Item = (usize, usize)> {
        let p = self.p();
        let first_end = p.min(start + n.min(p - start));
        let wrapped = n - (first_end - start);
        let a = (self.at(start), self.at(first_end) - self.at(start));
        let b = (0, self.at(wrapped));
        [a, b].into_iter().filter(|&(_, len)| len > 0)
    }

    /// Bytes of the `n ≤ p` parts from `start` on, cyclic.
    pub fn run_bytes(&self, start: usize, n: usize) -> usize {
        self.ranges(start, n).map(|(_, len)| len).sum()
    }

    /// The most bytes any `n ≤ p` consecutive parts hold (cyclic), O(1) for even parts and
    /// O(p) from counts.
    pub fn widest(&self, n: usize) -> usize {
        match self {
            Parts::Even {
                each, unit, longer, ..
            } => n * each + n.min(*longer) * unit,
            Parts::Counts { .. } => (0..self.p())
                .map(|start| self.run_bytes(start, n))
                .max()
                .unwrap_or(0),
        }
    }

    /// Bytes of the longest part.
    pub fn longest(&self) -> usize {
        match self {
            Parts::Even { .. } => self.len(0),
            Parts::Counts { counts, .. } => counts.iter().copied().max().unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_parts_are_counts_of_whole_elements() {
        for p in 1..=9 {
            for elements in [0, 1, 5, 9, 10, 100] {
                let even = Parts::even(elements * 8 + 3, 8, p);
                let counts: Vec<usize> = (0..p).map(|j| even.len(j)).collect();
                let given = Parts::counts(&counts);
                assert_eq!(even.total(), elements * 8);
                assert!(counts.iter().all(|c| c % 8 == 0));
                assert!(counts.windows(2).all(|w| w[0] >= w[1] && w[0] - w[1] <= 8));
                for start in 0..p {
                    assert_eq!(even.at(start), given.at(start));
                    for n in 0..=p {
                        let a: Vec<_> = even.ranges(start, n).collect();
                        assert_eq!(a, given.ranges(start, n).collect::<Vec<_>>());
                        let sum: usize = (0..n).map(|i| counts[(start + i) % p]).sum();
                        assert_eq!(even.run_bytes(start, n), sum);
                    }
                }
                for n in 0..=p {
                    assert_eq!(even.widest(n), given.widest(n), "p={p} n={n}");
                }
            }
        }
    }
}
