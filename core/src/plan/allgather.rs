//! Allgather(v) baselines (seed 002, "All-to-All Broadcast"): ring, recursive doubling
//! (hypercube) and Bruck's dissemination pattern.
//!
//! All of them write every block straight to its final place in the receivers' buffers (rank
//! order), so none needs the local rotation of the two-sided Bruck algorithm: the one-sided
//! write names the remote offset.

use super::{
    ceil_log2, displacements, piece, Algorithm, Buf, BufferSizes, CostModel, Local, PlanError,
    Prediction, Problem, Round,
};

/// The per-rank byte counts of an allgather or allgatherv problem.
pub(crate) fn counts_of(problem: &Problem, name: &'static str) -> Result<Vec<usize>, PlanError> {
    problem.validate()?;
    match problem {
        Problem::Allgather { p, block } => Ok(vec![*block; *p]),
        Problem::Allgatherv { counts } => Ok(counts.clone()),
        _ => Err(PlanError::WrongCollective {
            algorithm: name,
            collective: "allgather(v)",
        }),
    }
}

/// Copies the own block from the send buffer to its place in the receive buffer.
pub(crate) fn own_copy(counts: &[usize], displs: &[usize], rank: usize) -> Vec<Local> {
    if counts[rank] == 0 {
        return Vec::new();
    }
    vec![Local::Copy {
        src: Buf::Send,
        src_offset: 0,
        dst: Buf::Recv,
        dst_offset: displs[rank],
        len: counts[rank],
    }]
}

/// Shared state of the allgather(v) algorithms.
pub(crate) struct Gathered {
    pub problem: Problem,
    pub counts: Vec<usize>,
    pub displs: Vec<usize>,
    pub total: usize,
}

impl Gathered {
    pub fn new(problem: &Problem, name: &'static str) -> Result<Self, PlanError> {
        let counts = counts_of(problem, name)?;
        let total = super::checked_sum(&counts)?;
        let displs = displacements(&counts);
        Ok(Gathered {
            problem: problem.clone(),
            counts,
            displs,
            total,
        })
    }

    pub fn p(&self) -> usize {
        self.counts.len()
    }

    pub fn buffers(&self, rank: usize) -> BufferSizes {
        BufferSizes {
            send: self.counts[rank],
            recv: self.total,
            scratch: 0,
        }
    }

    /// Pieces for the blocks of ranks `start, start+1, …` (`len` ranks, cyclic) from the
    /// receive buffer to the same place remotely: one piece per contiguous run.
    pub fn cyclic_pieces(&self, start: usize, len: usize, after: Option<u32>) -> Vec<super::Piece> {
        let p = self.p();
        let mut out = Vec::new();
        if len == 0 {
            return out;
        }
        let end = start + len;
        let mut push = |a: usize, b: usize| {
            // Ranks [a, b) with b ≤ p.
            let off = self.displs[a];
            let stop = if b == p { self.total } else { self.displs[b] };
            if stop > off {
                out.push(piece(Buf::Recv, off, Buf::Recv, off, stop - off, after));
            }
        };
        if end <= p {
            push(start, end);
        } else {
            push(start, p);
            push(0, end - p);
        }
        out
    }

    /// Bytes of the blocks of ranks `start..start+len` (cyclic).
    pub fn cyclic_bytes(&self, start: usize, len: usize) -> usize {
        self.cyclic_pieces(start, len, None)
            .iter()
            .map(|p| p.len)
            .sum()
    }
}

/// Ring allgather(v) (seed 002, ALL_TO_ALL_BC_RING; the linear ring of seed 001 §2.1): in round
/// t rank r forwards block (r − t) mod p to r + 1. p − 1 rounds; (p−1)(α + β·max m_i), since
/// every block is in flight in every round.
pub struct RingAllgather {
    g: Gathered,
}

impl RingAllgather {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "ring-allgather";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        Ok(RingAllgather {
            g: Gathered::new(problem, Self::NAME)?,
        })
    }
}

impl Algorithm for RingAllgather {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.g.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        self.g.buffers(rank)
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        own_copy(&self.g.counts, &self.g.displs, rank)
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let p = self.g.p();
        let g = &self.g;
        Box::new((0..p.saturating_sub(1)).filter_map(move |t| {
            let mut r = Round::new(t as u32);
            let out = (rank + p - t) % p;
            let after = (t > 0).then(|| t as u32 - 1);
            r.send((rank + 1) % p, g.cyclic_pieces(out, 1, after));
            let inb = (rank + 2 * p - 1 - t) % p;
            r.expect((rank + p - 1) % p, usize::from(g.counts[inb] > 0));
            (!r.is_empty()).then_some(r)
        }))
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        let p = self.g.p();
        let max = self.g.counts.iter().copied().max().unwrap_or(0);
        if max == 0 || p == 1 {
            return Prediction {
                rounds: 0,
                time: 0.0,
            };
        }
        Prediction {
            rounds: (p - 1) as u64,
            time: (p - 1) as f64 * model.message(max),
        }
    }
}

/// Recursive-doubling allgather(v) (seed 002, ALL_TO_ALL_BC_HCUBE): in round i rank r exchanges
/// everything it holds, the blocks of its i-dimensional subcube, with r XOR 2^i. Needs p a
/// power of two. log p rounds; for equal blocks log p·α + β(p−1)b.
pub struct RecursiveDoublingAllgather {
    g: Gathered,
}

impl RecursiveDoublingAllgather {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "recursive-doubling-allgather";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        let g = Gathered::new(problem, Self::NAME)?;
        if !g.p().is_power_of_two() {
            return Err(PlanError::Unsupported {
                algorithm: Self::NAME,
                reason: format!("p = {} is not a power of two", g.p()),
            });
        }
        Ok(RecursiveDoublingAllgather { g })
    }

    fn round_bytes(&self, i: usize) -> usize {
        let p = self.g.p();
        (0..p)
            .step_by(1 << i)
            .map(|base| self.g.cyclic_bytes(base, 1 << i))
            .max()
            .unwrap_or(0)
    }
}

impl Algorithm for RecursiveDoublingAllgather {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.g.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        self.g.buffers(rank)
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        own_copy(&self.g.counts, &self.g.displs, rank)
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let q = ceil_log2(self.g.p());
        let g = &self.g;
        Box::new((0..q).filter_map(move |i| {
            let mut r = Round::new(i as u32);
            let partner = rank ^ (1 << i);
            let mine = rank & !((1usize << i) - 1);
            let theirs = partner & !((1usize << i) - 1);
            let after = (i > 0).then(|| i as u32 - 1);
            r.send(partner, g.cyclic_pieces(mine, 1 << i, after));
            r.expect(partner, g.cyclic_pieces(theirs, 1 << i, None).len());
            (!r.is_empty()).then_some(r)
        }))
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        let q = ceil_log2(self.g.p());
        let mut rounds = 0;
        let mut time = 0.0;
        for i in 0..q {
            let b = self.round_bytes(i);
            if b > 0 {
                rounds += 1;
                time += model.message(b);
            }
        }
        Prediction { rounds, time }
    }
}

/// Bruck allgather(v) (seed 003 §4 cites it for the intragroup step): in round k rank r sends
/// the min(2^k, p − 2^k) blocks starting at its own to r − 2^k. Works for every p in ⌈log p⌉
/// rounds; for equal blocks ⌈log p⌉α + β(p−1)b. Blocks go straight to their final place.
pub struct BruckAllgather {
    g: Gathered,
}

impl BruckAllgather {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "bruck-allgather";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        Ok(BruckAllgather {
            g: Gathered::new(problem, Self::NAME)?,
        })
    }
}

/// Rounds of a doubling allgather over the given skips (Bruck: powers of two; seed 000 Alg. 7:
/// the circulant skips): in round k rank r sends its first `skips[k+1] − skips[k]` blocks to
/// r − skips[k] and receives blocks `skips[k] .. skips[k+1]` (relative to r) from r + skips[k].
pub(crate) fn doubling_rounds<'a>(
    g: &'a Gathered,
    skips: Vec<usize>,
    rank: usize,
) -> impl Iterator<Item = Round> + Send + 'a {
    let p = g.p();
    let q = skips.len().saturating_sub(1);
    (0..q).filter_map(move |k| {
        let (s, next) = (skips[k], skips[k + 1]);
        let count = next - s;
        let mut r = Round::new(k as u32);
        let after = (k > 0).then(|| k as u32 - 1);
        r.send((rank + p - s) % p, g.cyclic_pieces(rank, count, after));
        r.expect(
            (rank + s) % p,
            g.cyclic_pieces((rank + s) % p, count, None).len(),
        );
        (!r.is_empty()).then_some(r)
    })
}

/// Closed-form price of [`doubling_rounds`]: round k costs α + β·(largest run of
/// `skips[k+1] − skips[k]` consecutive blocks); for equal blocks qα + β(p−1)b.
pub(crate) fn doubling_cost(g: &Gathered, skips: &[usize], model: &CostModel) -> Prediction {
    let p = g.p();
    let mut rounds = 0;
    let mut time = 0.0;
    let regular = g.counts.iter().all(|&c| c == g.counts[0]);
    for k in 0..skips.len().saturating_sub(1) {
        let count = skips[k + 1] - skips[k];
        let b = if regular {
            count * g.counts.first().copied().unwrap_or(0)
        } else {
            (0..p).map(|r| g.cyclic_bytes(r, count)).max().unwrap_or(0)
        };
        if b > 0 {
            rounds += 1;
            // Blocks r.. wrap around the end of the receive buffer: two pieces, two writes.
            let writes = if count >= 2 { 2 } else { 1 };
            time += model.message_writes(b, writes);
        }
    }
    Prediction { rounds, time }
}

/// Powers of two up to p, then p (the Bruck pattern as skips).
pub(crate) fn power_skips(p: usize) -> Vec<usize> {
    let q = ceil_log2(p);
    let mut s: Vec<usize> = (0..q).map(|k| 1usize << k).collect();
    s.push(p);
    if p == 1 {
        return vec![1];
    }
    s
}

impl Algorithm for BruckAllgather {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.g.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        self.g.buffers(rank)
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        own_copy(&self.g.counts, &self.g.displs, rank)
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        Box::new(doubling_rounds(&self.g, power_skips(self.g.p()), rank))
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        doubling_cost(&self.g, &power_skips(self.g.p()), model)
    }
}
