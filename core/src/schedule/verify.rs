//! An independent verifier of per-phase schedules.
//!
//! It checks the receive and send arrays of all p ranks for a broadcast from root 0, whoever
//! produced them (this module, another algorithm, a JSON file), and shares nothing with their
//! construction but [`Skips`]:
//!
//! 1. agreement: `send[r][k] == recv[(r + skips[k]) mod p][k]` for every r and k. This includes
//!    the entries toward the root, which the broadcast never sends: they must hold the canonical
//!    value of Alg. 5, the root's own receive entry, so that every entry of both arrays is
//!    determined and any single changed entry is rejected;
//! 2. possession: running Alg. 6, every block a rank sends (to a rank other than the root) is one
//!    it holds: the root holds all blocks from the start, the others what they received in
//!    earlier rounds;
//! 3. completeness: after the n − 1 + q rounds of Alg. 6 every rank holds all n blocks, for each
//!    n of a list (see [`block_counts`]).
//!
//! Alg. 6 as simulated here: x = (q − (n − 1) mod q) mod q dummy rounds, then in round
//! i = x … x + n + q − 2 (k = i mod q) entry e means block `e + q·⌊i/q⌋ − x`; negative blocks
//! move nothing, blocks above n − 1 mean block n − 1; the root receives nothing. Cost
//! O(p·(q + Σ(n + q))) time with per-rank bitsets of held blocks, O(p·(q + n/64)) memory.

use super::Skips;

/// Why a schedule is rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    #[error("the number of ranks must be at least 1")]
    /// p = 0.
    ZeroRanks,
    #[error("{what} has {found} entries, expected {expected}")]
    /// An array has the wrong number of entries.
    Shape {
        /// Which array.
        what: &'static str,
        /// The entries it must have.
        expected: usize,
        /// The entries it has.
        found: usize,
    },
    #[error(
        "agreement: rank {rank} sends {sent} in phase round {round}, \
         but its target {target} receives {received}"
    )]
    /// A rank sends another block than its target receives from it.
    Agreement {
        /// The sender.
        rank: usize,
        /// The round of the phase.
        round: usize,
        /// Its target.
        target: usize,
        /// The block it sends.
        sent: i32,
        /// The block the target receives from it.
        received: i32,
    },
    #[error("possession: with {blocks} blocks, rank {rank} sends block {block} in round {round} before holding it")]
    /// A rank sends a block it does not yet hold.
    Possession {
        /// The number of blocks n.
        blocks: usize,
        /// The round.
        round: usize,
        /// The sender.
        rank: usize,
        /// The block.
        block: usize,
    },
    #[error(
        "completeness: with {blocks} blocks, rank {rank} lacks block {block} after the last round"
    )]
    /// A rank lacks a block after the last round.
    Incomplete {
        /// The number of blocks n.
        blocks: usize,
        /// The rank.
        rank: usize,
        /// The block it lacks.
        block: usize,
    },
}

/// The block counts n checked by default: 1, 2, q, q + 1, 2q + 3 (distinct). Together they start
/// with every kind of phase offset x ∈ {0, 1, q − 2, q − 1} and run 1 to 3 full phases.
pub fn block_counts(q: usize) -> Vec<usize> {
    let mut ns = vec![1, 2, q, q + 1, 2 * q + 3];
    ns.retain(|&n| n >= 1);
    ns.sort_unstable();
    ns.dedup();
    ns
}

/// Verifies rank-major rows (`recv[r][k]`), e.g. parsed from `circulant schedule --json`.
pub fn verify_rows(
    recv: &[Vec<i32>],
    send: &[Vec<i32>],
    block_counts: &[usize],
) -> Result<(), Violation> {
    let p = recv.len();
    let skips = Skips::new(p).map_err(|_| Violation::ZeroRanks)?;
    let q = skips.q();
    if send.len() != p {
        return Err(Violation::Shape {
            what: "send",
            expected: p,
            found: send.len(),
        });
    }
    for (what, rows) in [("recv row", recv), ("send row", send)] {
        if let Some(row) = rows.iter().find(|row| row.len() != q) {
            return Err(Violation::Shape {
                what,
                expected: q,
                found: row.len(),
            });
        }
    }
    let flat = |rows: &[Vec<i32>]| rows.iter().flatten().copied().collect::<Vec<_>>();
    verify(p, &flat(recv), &flat(send), block_counts)
}

/// Verifies flat rank-major arrays of p·q entries (`recv[r * q + k]`) for the given block counts.
pub fn verify(
    p: usize,
    recv: &[i32],
    send: &[i32],
    block_counts: &[usize],
) -> Result<(), Violation> {
    verify_with_threads(p, recv, send, block_counts, 1)
}

/// [`verify`] with the simulations of the different block counts spread over up to `threads`
/// scoped threads (large p). Reports the violation of the smallest failing block count.
pub fn verify_with_threads(
    p: usize,
    recv: &[i32],
    send: &[i32],
    block_counts: &[usize],
    threads: usize,
) -> Result<(), Violation> {
    let skips = Skips::new(p).map_err(|_| Violation::ZeroRanks)?;
    let q = skips.q();
    for (what, array) in [("recv", recv), ("send", send)] {
        if Some(array.len()) != p.checked_mul(q) {
            return Err(Violation::Shape {
                what,
                expected: p.saturating_mul(q),
                found: array.len(),
            });
        }
    }
    if q == 0 {
        return Ok(());
    }
    // Round-major copies: a simulated round then streams through memory.
    let recv = transpose(recv, p, q);
    let send = transpose(send, p, q);
    for k in 0..q {
        let skip = skips.get(k);
        let (recv_k, send_k) = (&recv[k * p..][..p], &send[k * p..][..p]);
        for (r, &sent) in send_k.iter().enumerate() {
            // (r + skip) mod p without a division per entry.
            let target = if r + skip < p { r + skip } else { r + skip - p };
            if sent != recv_k[target] {
                return Err(Violation::Agreement {
                    rank: r,
                    round: k,
                    target,
                    sent,
                    received: recv_k[target],
                });
            }
        }
    }
    let mut ns: Vec<usize> = block_counts.iter().copied().filter(|&n| n > 0).collect();
    ns.sort_unstable();
    let threads = threads.clamp(1, ns.len().max(1));
    if threads == 1 {
        return ns
            .iter()
            .try_for_each(|&n| simulate(&skips, &recv, &send, n));
    }
    // Largest n first: it takes longest.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut verdicts: Vec<(usize, Result<(), Violation>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&n) = ns.iter().rev().nth(i) else {
                            return out;
                        };
                        out.push((n, simulate(&skips, &recv, &send, n)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    verdicts.sort_by_key(|(n, _)| *n);
    verdicts.into_iter().try_for_each(|(_, v)| v)
}

fn transpose(rank_major: &[i32], p: usize, q: usize) -> Vec<i32> {
    let mut out = vec![0; p * q];
    for (r, row) in rank_major.chunks_exact(q).enumerate() {
        for (k, &e) in row.iter().enumerate() {
            out[k * p + r] = e;
        }
    }
    out
}

/// Runs Alg. 6 for n blocks on round-major arrays, checking possession and completeness.
fn simulate(skips: &Skips, recv: &[i32], send: &[i32], n: usize) -> Result<(), Violation> {
    let (p, q) = (skips.p(), skips.q());
    let words = n.div_ceil(64);
    let mut held = vec![0u64; p * words];
    for b in 0..n {
        held[b / 64] |= 1 << (b % 64);
    }
    let holds = |held: &[u64], r: usize, b: usize| held[r * words + b / 64] >> (b % 64) & 1 == 1;
    let x = (q - (n - 1) % q) % q;
    let last = n as i64 - 1;
    for i in x..x + n + q - 1 {
        let k = i % q;
        let offset = (q * (i / q)) as i64 - x as i64;
        let skip = skips.get(k);
        let (recv_k, send_k) = (&recv[k * p..][..p], &send[k * p..][..p]);
        // Every send is checked against the holdings before the round.
        // The rank whose target is the root sends nothing.
        let to_root = p - skip;
        for (r, &e) in send_k.iter().enumerate() {
            let block = e as i64 + offset;
            if block < 0 || r == to_root {
                continue;
            }
            let block = block.min(last) as usize;
            if !holds(&held, r, block) {
                return Err(Violation::Possession {
                    blocks: n,
                    round: i - x,
                    rank: r,
                    block,
                });
            }
        }
        for (t, &e) in recv_k.iter().enumerate().skip(1) {
            let block = e as i64 + offset;
            if block >= 0 {
                let block = block.min(last) as usize;
                held[t * words + block / 64] |= 1 << (block % 64);
            }
        }
    }
    for r in 1..p {
        if let Some(block) = (0..n).find(|&b| !holds(&held, r, b)) {
            return Err(Violation::Incomplete {
                blocks: n,
                rank: r,
                block,
            });
        }
    }
    Ok(())
}
