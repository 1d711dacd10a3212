//! The per-phase arrays of all p ranks (for allgatherv, Alg. 9, and for verification).

use super::{baseblock, range_blocks, recv_schedule, ScheduleError, Skips};

/// Receive and send arrays of every virtual rank 0..p for root 0, rank-major and flat
/// (`recv[v * q + k]`). Depends on p only: compute once per communicator size.
///
/// The receive rows are Alg. 4 run for all ranks together, round by round: the baseblocks of
/// the range a rank searches in round i slide along with the rank, so one window of per-block
/// counts serves all ranks of a round (O(1) per rank instead of an O(log p) range query; the
/// rare widened range is queried with [`range_blocks`]). The send rows are read off the receive
/// rows, `send[v][k] = recv[(v + skips[k]) mod p][k]`, instead of Alg. 5. Time O(p log p),
/// memory 2·p·q·4 bytes for the table (p = 1152: 99 KiB; p = 16384: 1.75 MiB) plus 9 bytes per
/// rank while building. The rows equal [`recv_schedule`] and [`super::send_schedule`] rank by
/// rank (tested).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleTable {
    skips: Skips,
    recv: Vec<i32>,
    send: Vec<i32>,
}

impl ScheduleTable {
    /// The table for p ranks, computed on the calling thread.
    pub fn new(p: usize) -> Result<ScheduleTable, ScheduleError> {
        ScheduleTable::with_threads(p, 1)
    }

    /// The table for p ranks, computed by up to `threads` scoped threads (large p).
    pub fn with_threads(p: usize, threads: usize) -> Result<ScheduleTable, ScheduleError> {
        let skips = Skips::new(p)?;
        let q = skips.q();
        let mut recv = zeroed(p, q)?;
        if q > 0 {
            let threads = threads.clamp(1, 64).min(p.div_ceil(8192));
            let rows_per_chunk = p.div_ceil(threads);
            let baseblocks = if q < 64 {
                baseblocks(&skips)
            } else {
                Vec::new()
            };
            let baseblocks = &baseblocks;
            std::thread::scope(|scope| {
                for (c, chunk) in recv.chunks_mut(rows_per_chunk * q).enumerate() {
                    let first = c * rows_per_chunk;
                    let mut fill = move || {
                        if q < 64 {
                            fill_rows(&skips, baseblocks, first, chunk);
                        } else {
                            // p > 2^63: one rank at a time (the window masks have 64 bits).
                            for (j, row) in chunk.chunks_mut(q).enumerate() {
                                row.copy_from_slice(&recv_schedule(&skips, first + j));
                            }
                        }
                    };
                    if threads == 1 {
                        fill();
                    } else {
                        scope.spawn(fill);
                    }
                }
            });
        }
        let mut send = zeroed(p, q)?;
        for (k, &skip) in skips.as_slice()[..q].iter().enumerate() {
            for v in 0..p {
                let to = if v + skip < p { v + skip } else { v + skip - p };
                send[v * q + k] = recv[to * q + k];
            }
        }
        Ok(ScheduleTable { skips, recv, send })
    }

    /// Bytes the table for p ranks takes (both arrays), or [`ScheduleError::TableTooLarge`] if
    /// that cannot be addressed. Building it can still fail for want of memory.
    pub fn bytes_for(p: usize) -> Result<usize, ScheduleError> {
        let q = Skips::new(p)?.q();
        p.checked_mul(q)
            .and_then(|len| len.checked_mul(2 * std::mem::size_of::<i32>()))
            .filter(|&bytes| bytes <= isize::MAX as usize)
            .ok_or(ScheduleError::TableTooLarge { p })
    }

    /// The skips of the circulant graph.
    pub fn skips(&self) -> &Skips {
        &self.skips
    }

    /// Number of ranks p.
    pub fn p(&self) -> usize {
        self.skips.p()
    }

    /// Number of rounds per phase, q = ⌈log₂ p⌉.
    pub fn q(&self) -> usize {
        self.skips.q()
    }

    /// Receive array of virtual rank v (q entries; panics for v ≥ p).
    pub fn recv(&self, v: usize) -> &[i32] {
        let q = self.q();
        &self.recv[v * q..(v + 1) * q]
    }

    /// Send array of virtual rank v (q entries; panics for v ≥ p).
    pub fn send(&self, v: usize) -> &[i32] {
        let q = self.q();
        &self.send[v * q..(v + 1) * q]
    }

    /// All receive arrays, rank-major (p·q entries).
    pub fn recv_flat(&self) -> &[i32] {
        &self.recv
    }

    /// All send arrays, rank-major (p·q entries).
    pub fn send_flat(&self) -> &[i32] {
        &self.send
    }

    /// Baseblocks of all ranks (rank 0: q).
    pub fn baseblocks(&self) -> Vec<usize> {
        (0..self.p()).map(|r| baseblock(&self.skips, r)).collect()
    }
}

/// p·q zeros, or an error if they do not fit in memory (instead of aborting).
fn zeroed(p: usize, q: usize) -> Result<Vec<i32>, ScheduleError> {
    let too_large = ScheduleError::TableTooLarge { p };
    let len = p.checked_mul(q).ok_or(too_large)?;
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| too_large)?;
    v.resize(len, 0);
    Ok(v)
}

/// Baseblocks of all ranks by the paper's linear recipe: rank skips[k] gets block k, and the
/// rest of its home range repeats the baseblocks of ranks 1, 2, …
fn baseblocks(skips: &Skips) -> Vec<u8> {
    let (p, q) = (skips.p(), skips.q());
    let mut bb = vec![0u8; p];
    bb[0] = q as u8;
    for k in 0..q {
        let (lo, hi) = (skips.get(k), skips.get(k + 1));
        bb[lo] = k as u8;
        for r in lo + 1..hi {
            bb[r] = bb[r - lo];
        }
    }
    bb
}

/// Per-block counts of the baseblocks in a sliding range of ranks, and the set they form.
struct Window<'a> {
    bb: &'a [u8],
    counts: [u32; 64],
    mask: u64,
}

impl<'a> Window<'a> {
    fn new(bb: &'a [u8]) -> Window<'a> {
        Window {
            bb,
            counts: [0; 64],
            mask: 0,
        }
    }

    fn add(&mut self, r: usize) {
        let b = self.bb[r] as usize;
        self.counts[b] += 1;
        self.mask |= 1 << b;
    }

    fn remove(&mut self, r: usize) {
        let b = self.bb[r] as usize;
        self.counts[b] -= 1;
        if self.counts[b] == 0 {
            self.mask &= !(1 << b);
        }
    }
}

/// Alg. 4 for the ranks `first..` whose rows make up `rows` (q < 64), round by round; the
/// choices are exactly those of [`super::greedy::recv_schedule`].
fn fill_rows(skips: &Skips, bb: &[u8], first: usize, rows: &mut [i32]) {
    let (p, q) = (skips.p(), skips.q());
    let s = skips.as_slice();
    let count = rows.len() / q;
    let back = |r: usize, d: usize| if r >= d { r - d } else { r + p - d };
    let mut taken: Vec<u64> = (first..first + count).map(|r| 1 << bb[r]).collect();
    let mut skip_sum = 0;
    for i in 0..q {
        skip_sum += s[i];
        let home = |r: usize| r != 0 && s[i] <= r && r < s[i + 1];
        let sliding = i > 0 && i + 1 < q;
        // Window of round i for rank r: ranks r − skips[i+1] + 1 ..= r − skips[i].
        let mut window = Window::new(bb);
        if sliding {
            for d in s[i]..s[i + 1] {
                window.add(back(first, d));
            }
        }
        for j in 0..count {
            let r = first + j;
            if sliding && j > 0 {
                window.add(back(r, s[i]));
                window.remove(back(r, s[i + 1]));
            }
            if home(r) {
                rows[j * q + i] = bb[r] as i32;
                continue;
            }
            let block = if i == 0 {
                bb[back(r, 1)] as usize
            } else if sliding {
                let mut fresh = window.mask & !taken[j];
                if fresh == 0 {
                    let wide = range_blocks(
                        skips,
                        back(r, skip_sum % p),
                        (skip_sum + 1).saturating_sub(s[i + 1]),
                    );
                    fresh = wide.iter().fold(0u64, |m, b| m | 1 << b) & !taken[j];
                }
                highest(fresh).unwrap_or_else(|| lowest_missing(taken[j], q))
            } else {
                lowest_missing(taken[j], q)
            };
            taken[j] |= 1 << block;
            rows[j * q + i] = block as i32 - q as i32;
        }
    }
}

fn highest(set: u64) -> Option<usize> {
    (set != 0).then(|| 63 - set.leading_zeros() as usize)
}

/// The smallest block of 0..q not in `taken` (0 if none: the verifier then reports it).
fn lowest_missing(taken: u64, q: usize) -> usize {
    let missing = !taken & ((1u64 << q) - 1);
    if missing == 0 {
        0
    } else {
        missing.trailing_zeros() as usize
    }
}
