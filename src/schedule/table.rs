//! The per-phase arrays of all p ranks (for allgatherv, Alg. 9, and for verification).

use super::{baseblock, recv_schedule, ScheduleError, Skips};

/// Receive and send arrays of every virtual rank 0..p for root 0, rank-major and flat
/// (`recv[v * q + k]`). Depends on p only: compute once per communicator size.
///
/// Receive rows come from Alg. 4 (O(log² p) each); send rows are read off the receive rows,
/// `send[v][k] = recv[(v + skips[k]) mod p][k]`, instead of Alg. 5. Time O(p log² p), memory
/// 2·p·q·4 bytes (p = 1152: 99 KiB; p = 16384: 1.75 MiB).
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
        let mut recv = vec![0i32; p * q];
        if q > 0 {
            let threads = threads.clamp(1, 64).min(p.div_ceil(4096).max(1));
            let rows_per_chunk = p.div_ceil(threads);
            std::thread::scope(|scope| {
                for (c, chunk) in recv.chunks_mut(rows_per_chunk * q).enumerate() {
                    let mut fill = move || {
                        for (j, row) in chunk.chunks_mut(q).enumerate() {
                            row.copy_from_slice(&recv_schedule(&skips, c * rows_per_chunk + j));
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
        let mut send = vec![0i32; p * q];
        for (v, row) in send.chunks_mut(q.max(1)).enumerate().take(p) {
            for (k, entry) in row.iter_mut().enumerate() {
                let to = (v + skips.get(k)) % p;
                *entry = recv[to * q + k];
            }
        }
        Ok(ScheduleTable { skips, recv, send })
    }

    pub fn skips(&self) -> &Skips {
        &self.skips
    }

    pub fn p(&self) -> usize {
        self.skips.p()
    }

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
