//! Pipelined (blocked) ring allgatherv (seed 001, Träff, Ripke, Siebert, Balaji, Thakur, Gropp
//! 2010, §2.2–2.4).
//!
//! Every contribution m_i is cut into b_i = max(1, ⌈m_i/B⌉) blocks of at most B bytes; process i
//! plays a "virtual node" of b_i virtual processes on a ring of b = Σ b_i virtual processes. In
//! round t the last virtual process of every process forwards block (last_i − t) mod b to the
//! next process, which needs b − b_{i+1} blocks: b − min b_i rounds (eq. 1). Empty blocks (zero
//! contributors, §2.3) are neither sent nor received, and the ring is ordered so that the
//! processes with data sit equidistantly among those without (§2.3, Figure 3), which shortens
//! the pipeline to about Σ⌈m_i/B⌉ − 1 + ⌊z/(p−z)⌋ effective rounds.

use super::allgather::{counts_of, own_copy};
use super::{
    check_rounds, displacements, piece, Algorithm, Buf, BufferSizes, CostModel, Local, PlanError,
    Prediction, Problem, Round,
};

/// The pipelined ring allgatherv of seed 001: blocks travel the ring in pipelined rounds.
pub struct PipelinedRingAllgatherv {
    problem: Problem,
    counts: Vec<usize>,
    displs: Vec<usize>,
    total: usize,
    block: usize,
    /// Ring position → rank.
    order: Vec<usize>,
    /// Rank → ring position.
    position: Vec<usize>,
    /// First virtual process (block index) of each ring position; `first[p]` = b.
    first: Vec<usize>,
}

impl PipelinedRingAllgatherv {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "pipelined-ring-allgatherv";

    /// With block size `block`, or (None) the block size of eq. (2) for `model`.
    pub fn new(
        problem: &Problem,
        block: Option<usize>,
        model: &CostModel,
    ) -> Result<Self, PlanError> {
        let counts = counts_of(problem, Self::NAME)?;
        let total = super::checked_sum(&counts)?;
        let displs = displacements(&counts);
        let p = counts.len();
        let max = counts.iter().copied().max().unwrap_or(0);
        let block = match block {
            Some(0) => return Err(PlanError::NoBlocks),
            Some(b) => b,
            None => block_size(&counts, model),
        }
        .clamp(1, max.max(1));
        let order = equidistant_order(&counts);
        let mut position = vec![0; p];
        for (i, &r) in order.iter().enumerate() {
            position[r] = i;
        }
        let mut first = Vec::with_capacity(p + 1);
        let mut acc = 0usize;
        for &r in &order {
            first.push(acc);
            acc = acc
                .checked_add(counts[r].div_ceil(block).max(1))
                .ok_or(PlanError::Overflow)?;
        }
        first.push(acc);
        let ring = PipelinedRingAllgatherv {
            problem: problem.clone(),
            counts,
            displs,
            total,
            block,
            order,
            position,
            first,
        };
        check_rounds(Self::NAME, ring.ring_rounds())?;
        Ok(ring)
    }

    /// The block size B.
    pub fn block(&self) -> usize {
        self.block
    }

    fn b(&self) -> usize {
        self.first[self.counts.len()]
    }

    fn blocks_at(&self, pos: usize) -> usize {
        self.first[pos + 1] - self.first[pos]
    }

    /// Byte range in the receive buffer of global block `beta`.
    fn range(&self, beta: usize) -> (usize, usize) {
        let pos = self.first.partition_point(|&f| f <= beta) - 1;
        let r = self.order[pos];
        let j = beta - self.first[pos];
        let start = (j * self.block).min(self.counts[r]);
        let end = (start + self.block).min(self.counts[r]);
        (self.displs[r] + start, end - start)
    }

    /// Rounds of eq. (1): b − min b_i.
    pub fn ring_rounds(&self) -> usize {
        let min = (0..self.counts.len())
            .map(|i| self.blocks_at(i))
            .min()
            .unwrap_or(0);
        self.b() - min
    }
}

/// Block size B of seed 001 eq. (2): B = √(m·(α/β) / ((p+z)/2 − 1 + ⌊z/(p−z)⌋)); for regular
/// problems B = m_i, and for z = p − 1 (a broadcast) the linear pipeline's √(mα/((p−2)β)).
pub fn block_size(counts: &[usize], model: &CostModel) -> usize {
    let p = counts.len();
    let m: usize = counts.iter().fold(0usize, |a, &c| a.saturating_add(c));
    let max = counts.iter().copied().max().unwrap_or(0);
    if p <= 1 || max == 0 {
        return max.max(1);
    }
    if counts.iter().all(|&c| c == counts[0]) {
        return counts[0].max(1);
    }
    if model.beta <= 0.0 {
        return max;
    }
    let z = counts.iter().filter(|&&c| c == 0).count();
    let denom = if z == p - 1 {
        (p as f64 - 2.0).max(1.0)
    } else {
        ((p + z) as f64 / 2.0 - 1.0 + (z / (p - z)) as f64).max(1.0)
    };
    let b = (m as f64 * model.alpha / model.beta / denom).sqrt();
    (b.round() as usize).clamp(1, max)
}

/// Ring order with the contributors equidistant among the zero contributors: each contributor
/// is preceded by ⌊z/(p−z)⌋ (or one more) processes without data.
fn equidistant_order(counts: &[usize]) -> Vec<usize> {
    let nonzero: Vec<usize> = (0..counts.len()).filter(|&r| counts[r] > 0).collect();
    let zero: Vec<usize> = (0..counts.len()).filter(|&r| counts[r] == 0).collect();
    if nonzero.is_empty() {
        return zero;
    }
    let (per, extra) = (zero.len() / nonzero.len(), zero.len() % nonzero.len());
    let mut out = Vec::with_capacity(counts.len());
    let mut zi = zero.into_iter();
    for (k, r) in nonzero.into_iter().enumerate() {
        for _ in 0..per + usize::from(k < extra) {
            out.extend(zi.next());
        }
        out.push(r);
    }
    out
}

impl Algorithm for PipelinedRingAllgatherv {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        BufferSizes {
            send: self.counts[rank],
            recv: self.total,
            scratch: 0,
        }
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        own_copy(&self.counts, &self.displs, rank)
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let p = self.counts.len();
        let b = self.b();
        let pos = self.position[rank];
        let next_pos = (pos + 1) % p;
        let prev_pos = (pos + p - 1) % p;
        let next = self.order[next_pos];
        let prev = self.order[prev_pos];
        let (first, bi) = (self.first[pos], self.blocks_at(pos));
        let last = first + bi - 1;
        let send_rounds = b - self.blocks_at(next_pos);
        let recv_rounds = b - bi;
        let rounds = if p == 1 { 0 } else { self.ring_rounds() };
        Box::new((0..rounds).filter_map(move |t| {
            // Fits: `new` checked the round count.
            let mut r = Round::new(t as u32);
            if t < send_rounds {
                let beta = (last + b - t % b) % b;
                let (off, len) = self.range(beta);
                let after = (t >= bi).then(|| (t - bi) as u32);
                r.send(
                    next,
                    vec![piece(Buf::Recv, off, Buf::Recv, off, len, after)],
                );
            }
            if t < recv_rounds {
                let beta = (first + 2 * b - 1 - t % b) % b;
                r.expect(prev, usize::from(self.range(beta).1 > 0));
            }
            (!r.is_empty()).then_some(r)
        }))
    }
    /// Seed 001 §2.3: (Σ⌈m_i/B⌉ − 1 + ⌊z/(p−z)⌋)(α + βB) for 0 < z < p − 1, else eq. (1)'s
    /// b − min b_i rounds of α + βB. An estimate: it assumes b_i > z' for every contributor.
    fn predict(&self, model: &CostModel) -> Prediction {
        let p = self.counts.len();
        if self.total == 0 || p == 1 {
            return Prediction {
                rounds: 0,
                time: 0.0,
            };
        }
        let z = self.counts.iter().filter(|&&c| c == 0).count();
        let rounds = if z > 0 && z < p - 1 {
            let full: usize = self.counts.iter().map(|&c| c.div_ceil(self.block)).sum();
            full - 1 + z / (p - z)
        } else {
            self.ring_rounds()
        };
        let max_block = self
            .block
            .min(self.counts.iter().copied().max().unwrap_or(0));
        Prediction {
            rounds: rounds as u64,
            time: rounds as f64 * model.message(max_block),
        }
    }
}
