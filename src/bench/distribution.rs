//! Per-rank byte counts of the named allgatherv distributions, as the benchmarks generate them
//! from a base count c: the six of seed 001 §3 plus seed 000's (r mod 3)·c. Integer division
//! rounds down, and what it leaves over is not redistributed, so the total can be a little
//! below the nominal one (the CSV's `total_bytes` is the exact sum).
//!
//! These follow the peer benchmark benches/peers/mpi_coll.c, whose `bytes` column they must
//! reproduce. `crate::plan::distribution` differs in two corners: spike at p = 1 (c/2 there)
//! and geometric for p not a power of two (⌊log₂ p⌋ there); a report mixing both finds the
//! difference as differing `total_bytes`.

/// The distribution names the benchmarks use.
pub const NAMES: [&str; 7] = [
    "regular",
    "broadcast",
    "spike",
    "half-full",
    "decreasing",
    "geometric",
    "mod3",
];

/// The byte count of every rank for distribution `name` with base count `c`, or `None` for a
/// name not in [`NAMES`] or p = 0.
///
/// - regular: m_i = c
/// - broadcast: m_0 = c, m_i = 0 otherwise
/// - spike: m_0 = c/2, m_i = c / (2(p−1)) otherwise (p = 1: m_0 = c)
/// - half-full: m_i = 2c for even i, 0 for odd i
/// - decreasing: m_i = 2c(p−1−i)/(p−1) (p = 1: m_0 = c)
/// - geometric: m_i = c·p / (g·max(1, ⌈log₂ p⌉)) for i in [g−1, 2g−1), g = 1, 2, 4, …
/// - mod3: m_i = (i mod 3)·c
pub fn counts(name: &str, p: u64, c: u64) -> Option<Vec<u64>> {
    if p == 0 {
        return None;
    }
    let log = super::bounds::ceil_log2(p).max(1);
    let count = |i: u64| -> u64 {
        match name {
            "regular" => c,
            "broadcast" => u64::from(i == 0) * c,
            "spike" if p == 1 => c,
            "spike" if i == 0 => c / 2,
            "spike" => c / (2 * (p - 1)),
            "half-full" => u64::from(i % 2 == 0) * 2 * c,
            "decreasing" if p == 1 => c,
            "decreasing" => wide(2 * c as u128 * (p - 1 - i) as u128 / (p - 1) as u128),
            "geometric" => {
                let mut group = 1u64;
                while 2 * group - 1 <= i {
                    group *= 2;
                }
                wide(c as u128 * p as u128 / (group as u128 * log as u128))
            }
            _ => (i % 3) * c, // "mod3"; other names were rejected below
        }
    };
    NAMES.contains(&name).then(|| (0..p).map(count).collect())
}

/// Saturates a 128-bit intermediate into u64 (only reachable for absurd base counts).
fn wide(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}
