//! The irregular allgatherv workloads: the six distributions of seed 001 §3 and seed 000 §3.2's
//! (r mod 3)·c. `c` is the base count in bytes.

use std::fmt;
use std::str::FromStr;

use super::floor_log2;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
/// How the counts of an allgatherv vary over the ranks, for p ranks and base count c.
pub enum Distribution {
    /// m_i = c.
    Regular,
    /// m_0 = c, all others 0.
    Broadcast,
    /// m_0 = c/2, all others c/(2(p−1)).
    Spike,
    /// Even ranks 2c, odd ranks 0.
    HalfFull,
    /// m_i = 2c(p−1−i)/(p−1).
    Decreasing,
    /// m_{i−1+j} = c·p/(i·log p) for i = 1, 2, 4, … and j < i.
    Geometric,
    /// m_i = (i mod 3)·c (seed 000 §3.2).
    Mod3,
}

impl Distribution {
    /// Every distribution.
    pub const ALL: [Distribution; 7] = [
        Distribution::Regular,
        Distribution::Broadcast,
        Distribution::Spike,
        Distribution::HalfFull,
        Distribution::Decreasing,
        Distribution::Geometric,
        Distribution::Mod3,
    ];

    /// The name the command line and the CSV files use.
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Regular => "regular",
            Distribution::Broadcast => "broadcast",
            Distribution::Spike => "spike",
            Distribution::HalfFull => "half-full",
            Distribution::Decreasing => "decreasing",
            Distribution::Geometric => "geometric",
            Distribution::Mod3 => "mod3",
        }
    }

    /// The base count c giving (about) `total` bytes over p ranks: m = c for broadcast and spike,
    /// m = p·c for the others (seed 001 §3).
    pub fn base_for_total(self, p: usize, total: usize) -> usize {
        match self {
            Distribution::Broadcast | Distribution::Spike => total,
            _ => total / p.max(1),
        }
    }

    /// Byte counts for p ranks with base count c (fractions rounded down).
    pub fn counts(self, p: usize, c: usize) -> Vec<usize> {
        let c128 = c as u128;
        (0..p)
            .map(|i| {
                let v: u128 = match self {
                    Distribution::Regular => c128,
                    Distribution::Broadcast => {
                        if i == 0 {
                            c128
                        } else {
                            0
                        }
                    }
                    Distribution::Spike => {
                        if i == 0 || p == 1 {
                            c128 / 2
                        } else {
                            c128 / (2 * (p as u128 - 1))
                        }
                    }
                    Distribution::HalfFull => {
                        if i % 2 == 0 {
                            2 * c128
                        } else {
                            0
                        }
                    }
                    Distribution::Decreasing => {
                        if p == 1 {
                            c128
                        } else {
                            2 * c128 * (p - 1 - i) as u128 / (p as u128 - 1)
                        }
                    }
                    Distribution::Geometric => {
                        // Rank i lies in the group of size g = 2^⌊log₂(i+1)⌋.
                        let g = 1u128 << floor_log2(i + 1);
                        let logp = (floor_log2(p.max(2)) as u128).max(1);
                        c128 * p as u128 / (g * logp)
                    }
                    Distribution::Mod3 => (i % 3) as u128 * c128,
                };
                usize::try_from(v).unwrap_or(usize::MAX)
            })
            .collect()
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown distribution name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown distribution {0:?} (regular, broadcast, spike, half-full, decreasing, geometric, mod3)")]
pub struct UnknownDistribution(pub String);

impl FromStr for Distribution {
    type Err = UnknownDistribution;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Distribution::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| UnknownDistribution(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_match_the_seed() {
        let p = 16;
        let c = 1024;
        let sum = |d: Distribution| d.counts(p, c).iter().sum::<usize>();
        assert_eq!(sum(Distribution::Regular), p * c);
        assert_eq!(sum(Distribution::Broadcast), c);
        assert_eq!(sum(Distribution::HalfFull), p * c);
        // Geometric: log p groups of c·p/log p each cover ranks 0..p−1.
        let geo = Distribution::Geometric.counts(p, c);
        assert_eq!(geo[..p - 1].iter().sum::<usize>(), p * c);
        assert!(sum(Distribution::Spike) <= c);
        assert!(sum(Distribution::Decreasing) <= p * c);
        assert_eq!(
            "half-full".parse::<Distribution>(),
            Ok(Distribution::HalfFull)
        );
        assert!("nope".parse::<Distribution>().is_err());
    }
}
