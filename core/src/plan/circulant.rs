//! The circulant-graph algorithms of seed 000 (Träff 2022): n-block broadcast (Alg. 6),
//! regular allgather (Alg. 7), census allreduce (Alg. 8) and irregular allgatherv (Alg. 9).
//! All ranks use the same pattern: in round i with k = i mod q, rank r sends to
//! r + `skips[k]` and receives from r − `skips[k]` (Alg. 7 and 8 use the edges backwards).

use std::sync::OnceLock;

use super::allgather::{doubling_cost, doubling_rounds, own_copy, Gathered};
use super::{
    across_blocks, ceil_log2, check_rounds, optimal_blocks, piece, Algorithm, Blocks, Buf,
    BufferSizes, CostModel, LevelCosts, Local, PlanError, Prediction, Problem, Reduction, Round,
};
use crate::schedule::{rounds_count, Schedule, ScheduleError, ScheduleTable, Skips};

/// How many blocks a pipelined algorithm cuts its data into.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Blocking {
    /// Exactly this many blocks (at most one per byte).
    Fixed(usize),
    /// The α-β optimum for this model (seed 000, Theorem 2; for the allgatherv the better of
    /// Theorem 3's n and its halvings under the whole-byte bound).
    Model(CostModel),
    /// Among nodes whose blocks go on inside nodes of up to `ranks_per_node` ranks as they
    /// arrive (a node-aware plan's phase among the nodes): the optimum of the time among the
    /// nodes plus the broadcast of the last round's blocks inside a node, which waits for
    /// them ([`across_blocks`]).
    Nodes {
        /// The models across and inside the nodes.
        costs: LevelCosts,
        /// The most ranks a node has.
        ranks_per_node: usize,
    },
}

impl Blocking {
    pub(super) fn blocks(&self, p: usize, bytes: usize) -> Result<usize, PlanError> {
        match *self {
            Blocking::Fixed(0) => Err(PlanError::NoBlocks),
            Blocking::Fixed(n) => Ok(n.min(bytes.max(1))),
            Blocking::Model(m) => Ok(optimal_blocks(p, bytes, &m)),
            Blocking::Nodes {
                costs,
                ranks_per_node,
            } => Ok(across_blocks(p, ranks_per_node, bytes, &costs)),
        }
    }
}

/// Circulant n-block broadcast from any root (seed 000, Alg. 6 on the schedules of Alg. 4
/// and 5): block b of the root's buffer travels along the circulant graph so that every rank
/// receives a new block in every round. n − 1 + q rounds; (n − 1 + q)(α + β⌈m/n⌉), which for
/// the best n is Theorem 2's α(q−1) + 2√((q−1)αβm) + βm.
pub struct CirculantBroadcast {
    problem: Problem,
    p: usize,
    root: usize,
    blocks: Blocks,
}

impl CirculantBroadcast {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "circulant-bcast";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem, blocking: Blocking) -> Result<Self, PlanError> {
        problem.validate()?;
        match *problem {
            Problem::Broadcast { p, root, bytes } => {
                let n = blocking.blocks(p, bytes)?;
                // Blocks of ⌈m/n⌉ bytes: drop blocks that would be empty.
                let n = if bytes == 0 {
                    1
                } else {
                    bytes.div_ceil(bytes.div_ceil(n))
                };
                check_rounds(Self::NAME, rounds_count(p, n)?)?;
                Ok(CirculantBroadcast {
                    problem: problem.clone(),
                    p,
                    root,
                    blocks: Blocks::new(bytes, n),
                })
            }
            _ => Err(PlanError::WrongCollective {
                algorithm: Self::NAME,
                collective: "broadcast",
            }),
        }
    }

    /// The number of blocks n (at most the requested one: no block is empty).
    pub fn blocks(&self) -> usize {
        self.blocks.n
    }
}

impl Algorithm for CirculantBroadcast {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, _rank: usize) -> BufferSizes {
        BufferSizes {
            send: 0,
            recv: self.blocks.total,
            scratch: 0,
        }
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let blocks = self.blocks;
        let n = blocks.n;
        // p, root and n are checked in `new`, so only a rank out of range (which
        // `rank_plan` rejects) can fail here.
        let Ok(rounds) = Schedule::new(self.p, rank, self.root).and_then(|s| s.into_rounds(n))
        else {
            return Box::new(std::iter::empty());
        };
        let is_root = rank == self.root;
        // Round in which this rank first received each block.
        let mut got: Vec<Option<u32>> = vec![None; n];
        Box::new(rounds.filter_map(move |sr| {
            // Fits: `new` checked the round count.
            let index = sr.index as u32;
            let mut r = Round::new(index);
            if let Some(b) = sr.send {
                let (off, len) = blocks.range(b);
                let after = if is_root { None } else { got[b] };
                r.send(
                    sr.to,
                    vec![piece(Buf::Recv, off, Buf::Recv, off, len, after)],
                );
            }
            if let Some(b) = sr.recv {
                r.expect(sr.from, usize::from(blocks.range(b).1 > 0));
                if got[b].is_none() {
                    got[b] = Some(index);
                }
            }
            (!r.is_empty()).then_some(r)
        }))
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        let q = ceil_log2(self.p);
        if self.blocks.total == 0 || q == 0 {
            return Prediction {
                rounds: 0,
                time: 0.0,
            };
        }
        let rounds = self.blocks.n - 1 + q;
        Prediction {
            rounds: rounds as u64,
            time: rounds as f64 * model.message(self.blocks.size),
        }
    }
}

/// Circulant regular allgather (seed 000, Alg. 7): in round k rank r sends its first
/// `skips[k+1] − skips[k]` blocks to r − `skips[k]`. q rounds; qα + β(p−1)m/p. Blocks are written
/// straight into rank order, so irregular counts work too (with a larger β term).
pub struct CirculantAllgather {
    g: Gathered,
    skips: Vec<usize>,
}

impl CirculantAllgather {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "circulant-allgather";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        let g = Gathered::new(problem, Self::NAME)?;
        let skips = Skips::new(g.p())?.as_slice().to_vec();
        Ok(CirculantAllgather { g, skips })
    }
}

impl Algorithm for CirculantAllgather {
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
        Box::new(doubling_rounds(&self.g, self.skips.clone(), rank))
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        doubling_cost(&self.g, &self.skips, model)
    }
}

/// Circulant census allreduce (seed 000, Alg. 8, after Bar-Noy, Kipnis, Schieber): after round
/// k, S holds the sum of the skips[k+1] − 1 values above r; if skips[k+1] is odd the rank
/// takes S from r + `skips[k]` − 1, else x ⊕ S from r + `skips[k]`. q rounds; q(α + βm).
pub struct CirculantCensus {
    problem: Problem,
    p: usize,
    reduction: Reduction,
    bytes: usize,
    skips: Vec<usize>,
}

impl CirculantCensus {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "circulant-census";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        problem.validate()?;
        match *problem {
            Problem::Allreduce {
                p,
                reduction,
                bytes,
            } => Ok(CirculantCensus {
                problem: problem.clone(),
                p,
                reduction,
                bytes,
                skips: Skips::new(p)?.as_slice().to_vec(),
            }),
            _ => Err(PlanError::WrongCollective {
                algorithm: Self::NAME,
                collective: "allreduce",
            }),
        }
    }

    fn odd(&self, k: usize) -> bool {
        self.skips[k + 1] % 2 == 1
    }

    /// (to, from) of rank r in round k.
    fn partners(&self, r: usize, k: usize) -> (usize, usize) {
        let p = self.p;
        let s = self.skips[k] - usize::from(self.odd(k));
        ((r + p - s % p) % p, (r + s) % p)
    }
}

impl Algorithm for CirculantCensus {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, _rank: usize) -> BufferSizes {
        BufferSizes {
            send: self.bytes,
            recv: self.bytes,
            scratch: 3 * (self.skips.len() - 1) * self.bytes,
        }
    }
    fn setup(&self, _rank: usize) -> Vec<Local> {
        if self.p == 1 && self.bytes > 0 {
            vec![Local::Copy {
                src: Buf::Send,
                src_offset: 0,
                dst: Buf::Recv,
                dst_offset: 0,
                len: self.bytes,
            }]
        } else {
            Vec::new()
        }
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let m = self.bytes;
        let q = self.skips.len() - 1;
        let red = self.reduction;
        let slot = move |k: usize, j: usize| (Buf::Scratch, (3 * k + j) * m);
        Box::new((0..q).map(move |k| {
            let (to, from) = self.partners(rank, k);
            let mut r = Round::new(k as u32);
            // What to send: x in round 0, then S (odd) or x ⊕ S (even), both prepared at the
            // end of round k − 1.
            let (src, after) = if k == 0 {
                ((Buf::Send, 0), None)
            } else if self.odd(k) {
                (
                    if k == 1 { slot(0, 0) } else { slot(k - 1, 1) },
                    Some(k as u32 - 1),
                )
            } else {
                (slot(k - 1, 2), Some(k as u32 - 1))
            };
            r.send(
                to,
                vec![piece(src.0, src.1, Buf::Scratch, 3 * k * m, m, after)],
            );
            r.expect(from, usize::from(m > 0));
            if m > 0 {
                // S after round k: B itself in round 0, else S ⊕ B.
                let s_k = if k == 0 {
                    slot(0, 0)
                } else {
                    let prev = if k == 1 { slot(0, 0) } else { slot(k - 1, 1) };
                    r.local.push(Local::Combine {
                        reduction: red,
                        a: prev,
                        b: slot(k, 0),
                        dst: slot(k, 1),
                        len: m,
                    });
                    slot(k, 1)
                };
                if k + 1 == q {
                    r.local.push(Local::Combine {
                        reduction: red,
                        a: (Buf::Send, 0),
                        b: s_k,
                        dst: (Buf::Recv, 0),
                        len: m,
                    });
                } else if !self.odd(k + 1) {
                    r.local.push(Local::Combine {
                        reduction: red,
                        a: (Buf::Send, 0),
                        b: s_k,
                        dst: slot(k, 2),
                        len: m,
                    });
                }
            }
            r
        }))
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        let q = ceil_log2(self.p);
        if self.bytes == 0 || q == 0 {
            return Prediction {
                rounds: 0,
                time: 0.0,
            };
        }
        Prediction {
            rounds: q as u64,
            time: q as f64 * model.message(self.bytes),
        }
    }
}

/// Circulant irregular allgatherv (seed 000, Alg. 9): all p broadcasts, one per root, share
/// the round structure; rank r serves root j with the schedule of virtual rank (r − j) mod p,
/// read from one [`ScheduleTable`] for all roots. Root j's m_j bytes are cut into n blocks.
/// Unlike the paper nothing is packed: a round's message is one piece per root, written straight
/// into the target's receive buffer; roots with nothing to send contribute no piece.
/// n − 1 + q rounds; at most (n − 1 + q)(α + β·Σ_j⌈m_j/n⌉) (Theorem 3 with m = Σ m_j), plus o
/// for every piece after the first of a message.
pub struct CirculantAllgatherv {
    g: Gathered,
    n: usize,
    table: OnceLock<Result<ScheduleTable, ScheduleError>>,
}

impl CirculantAllgatherv {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "circulant-allgatherv";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem, blocking: Blocking) -> Result<Self, PlanError> {
        let g = Gathered::new(problem, Self::NAME)?;
        ScheduleTable::bytes_for(g.p())?;
        let max = g.counts.iter().copied().max().unwrap_or(0);
        let n = match blocking {
            Blocking::Model(model) => best_allgatherv_blocks(&g.counts, g.total, &model, None),
            Blocking::Nodes {
                costs,
                ranks_per_node,
            } => best_allgatherv_blocks(
                &g.counts,
                g.total,
                &costs.across,
                Some((&costs.inside, ranks_per_node)),
            ),
            fixed => fixed.blocks(g.p(), g.total)?,
        }
        .min(max.max(1));
        check_rounds(Self::NAME, rounds_count(g.p(), n)?)?;
        Ok(CirculantAllgatherv {
            g,
            n,
            table: OnceLock::new(),
        })
    }

    /// With a precomputed table for this p (cache it per communicator).
    pub fn with_table(
        problem: &Problem,
        blocking: Blocking,
        table: ScheduleTable,
    ) -> Result<Self, PlanError> {
        let a = Self::new(problem, blocking)?;
        if table.p() != a.g.p() {
            return Err(PlanError::CountsLength {
                expected: a.g.p(),
                got: table.p(),
            });
        }
        let _ = a.table.set(Ok(table));
        Ok(a)
    }

    /// The number of blocks n of the schedule.
    pub fn blocks(&self) -> usize {
        self.n
    }

    /// The table, built on first use; an error if it does not fit in memory.
    fn table(&self) -> Result<&ScheduleTable, ScheduleError> {
        self.table
            .get_or_init(|| ScheduleTable::new(self.g.p()))
            .as_ref()
            .map_err(|e| *e)
    }
}

/// Upper bound of the allgatherv time with n blocks: (n − 1 + q)(α + β·Σ_j⌈m_j/n⌉), plus o for
/// each of the about w·n − (n − 1 + q) writes beyond one per round (w roots with data).
fn allgatherv_bound(counts: &[usize], n: usize, model: &CostModel) -> f64 {
    let q = ceil_log2(counts.len());
    let per_round: usize = counts.iter().map(|&c| c.div_ceil(n)).sum();
    // One write per piece: every rank receives about n blocks of each root with data, so the
    // writes beyond one per round are about w·n − (n − 1 + q).
    let rounds = n - 1 + q;
    let roots = counts.iter().filter(|&&c| c > 0).count();
    let extra = roots.saturating_mul(n).saturating_sub(rounds);
    rounds as f64 * model.message(per_round) + model.o * extra as f64
}

/// The block count minimising [`allgatherv_bound`] among Theorem 3's n (m = Σ m_j) and its
/// halvings: with many small contributions the rounding of every root's block to whole bytes
/// makes fewer blocks better. With `inside` (the model inside a node and its most ranks), the
/// nodes' ranks wait for the last round's blocks: their broadcast inside a node is added, and
/// the count that minimises the broadcast's version of it ([`across_blocks`]) and its
/// halvings are candidates too.
fn best_allgatherv_blocks(
    counts: &[usize],
    total: usize,
    model: &CostModel,
    inside: Option<(&CostModel, usize)>,
) -> usize {
    let p = counts.len();
    let cost = |n: usize| {
        let tail = inside.map_or(0.0, |(inside, k)| {
            let per_round: usize = counts.iter().map(|&c| c.div_ceil(n)).sum();
            ceil_log2(k) as f64 * inside.message(per_round)
        });
        allgatherv_bound(counts, n, model) + tail
    };
    let mut starts = vec![optimal_blocks(p, total, model)];
    if let Some((inside, k)) = inside {
        starts.push(across_blocks(
            p,
            k,
            total,
            &LevelCosts {
                inside: *inside,
                across: *model,
            },
        ));
    }
    let mut best = (f64::INFINITY, 1);
    for mut n in starts {
        loop {
            let t = cost(n);
            if t < best.0 {
                best = (t, n);
            }
            if n <= 1 {
                break;
            }
            n /= 2;
        }
    }
    best.1
}

impl Algorithm for CirculantAllgatherv {
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
    fn prepare(&self) -> Result<(), PlanError> {
        self.table()?;
        Ok(())
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        // `rank_plan` reports a table that could not be built (see `prepare`).
        let Ok(table) = self.table() else {
            return Box::new(std::iter::empty());
        };
        let p = self.g.p();
        let q = table.q();
        let n = self.n;
        if q == 0 {
            return Box::new(std::iter::empty());
        }
        let x = (q - (n - 1) % q) % q;
        let skips = *table.skips();
        let g = &self.g;
        let blocks: Vec<Blocks> = g.counts.iter().map(|&c| Blocks::new(c, n)).collect();
        let block = move |entry: i32, i: usize| -> Option<usize> {
            let b = entry as i64 + (q * (i / q)) as i64 - x as i64;
            (b >= 0).then(|| (b as usize).min(n - 1))
        };
        Box::new((x..x + n - 1 + q).filter_map(move |i| {
            let k = i % q;
            let s = skips.get(k);
            let index = (i - x) as u32;
            let to = (rank + s) % p;
            let from = (rank + p - s) % p;
            let mut r = Round::new(index);
            let mut pieces = Vec::new();
            let mut writes = 0;
            for (j, root_blocks) in blocks.iter().enumerate() {
                let v = (rank + p - j) % p;
                // Send for root j unless the target is root j itself.
                if to != j {
                    if let Some(b) = block(table.send(v)[k], i) {
                        let (off, len) = root_blocks.range(b);
                        let at = g.displs[j] + off;
                        let after = if j == rank || index == 0 {
                            None
                        } else {
                            Some(index - 1)
                        };
                        if len > 0 {
                            pieces.push(piece(Buf::Recv, at, Buf::Recv, at, len, after));
                        }
                    }
                }
                if v != 0 {
                    if let Some(b) = block(table.recv(v)[k], i) {
                        writes += usize::from(root_blocks.range(b).1 > 0);
                    }
                }
            }
            r.send(to, pieces);
            r.expect(from, writes);
            (!r.is_empty()).then_some(r)
        }))
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        let q = ceil_log2(self.g.p());
        if self.g.total == 0 || q == 0 {
            return Prediction {
                rounds: 0,
                time: 0.0,
            };
        }
        Prediction {
            rounds: (self.n - 1 + q) as u64,
            time: allgatherv_bound(&self.g.counts, self.n, model),
        }
    }
}
