//! The n-block reduce on the circulant graph: the n-block broadcast (seed 000, Alg. 6) run
//! backwards (Träff 2024a), and the allreduce that pipelines it into the n-block broadcast.
//!
//! Broadcast round i of virtual rank v: it sends block `S[k] + o(i)` to v + `skips[k]` and
//! receives block `R[k] + o(i)` from v − `skips[k]`. The reduce runs the same rounds in
//! decreasing i with every edge reversed: v (not the root) sends its partial of block
//! `R[k] + o(i)` to v − `skips[k]`, the rank it got that block from in the broadcast, and
//! combines the partial of block `S[k] + o(i)` it receives from v + `skips[k]` (unless that is
//! the root) into its own. In the broadcast every rank but the root receives each block exactly
//! once (the last phase caps only the baseblock entry at n − 1) and forwards it only later, so
//! for each block the parent links form a spanning tree; reversed, a rank sends its partial of
//! a block once, after its children's partials of it have arrived. n − 1 + q rounds of one
//! block each, n blocks on n trees at once: (n − 1 + q)(α + β⌈m/n⌉), the broadcast's time,
//! which for the best n is its lower bound ([`super::bounds`]). The root completes block n − 1
//! after q rounds and then one block a round, block 0 last.
//!
//! Received partials land in fresh scratch (slot 2t of round t) and each combine writes fresh
//! bytes (slot 2t + 1, or at the root the block's place in the receive buffer for its last
//! combine), so no write races with a send. A rank combines in round order, own partial ⊕
//! received one: the order is the plan's, not the arrival's, and results have the same bits
//! whatever the timing. The contributors merged at a rank are not contiguous in rank order:
//! the operators are taken to be commutative (every [`ReduceOp`](super::ReduceOp) is;
//! floating-point sums and products are associative only up to rounding).

use super::circulant::Blocking;
use super::{
    ceil_log2, check_rounds, copy_input, piece, Algorithm, Blocks, Buf, BufferSizes, CostModel,
    Local, PlanError, Prediction, Problem, Reduction, Round,
};
use crate::schedule::{rounds_count, Schedule};

/// A vector of whole elements in n blocks of whole elements: byte ranges.
#[derive(Clone, Copy, Debug)]
struct ElementBlocks {
    elements: Blocks,
    size: usize,
}

impl ElementBlocks {
    /// `bytes` in the block count `blocking` gives (at most one block per element; no block
    /// empty unless the vector is).
    fn new(
        p: usize,
        bytes: usize,
        size: usize,
        blocking: &Blocking,
    ) -> Result<ElementBlocks, PlanError> {
        let elements = bytes / size;
        let n = blocking.blocks(p, bytes)?.min(elements.max(1));
        let n = if elements == 0 {
            1
        } else {
            elements.div_ceil(elements.div_ceil(n))
        };
        Ok(ElementBlocks {
            elements: Blocks::new(elements, n),
            size,
        })
    }

    fn n(&self) -> usize {
        self.elements.n
    }

    /// Bytes of the largest block.
    fn block_bytes(&self) -> usize {
        self.elements.size * self.size
    }

    /// Byte range (offset, len) of block b.
    fn range(&self, b: usize) -> (usize, usize) {
        let (off, len) = self.elements.range(b);
        (off * self.size, len * self.size)
    }
}

/// One reduce round of one rank: the partial it sends (to, block) and the one it receives
/// (from, block), blocks of the vector.
#[derive(Clone, Copy, Debug)]
struct Step {
    index: u32,
    send: Option<(usize, usize)>,
    recv: Option<(usize, usize)>,
}

/// The n-block reduce of one problem: whose rounds run the broadcast's backwards.
#[derive(Clone, Debug)]
struct Reversed {
    p: usize,
    root: usize,
    reduction: Reduction,
    blocks: ElementBlocks,
    /// Broadcast block j is vector block n − 1 − j (the allreduce: the root completes vector
    /// block 0 first, which its broadcast sends first).
    flipped: bool,
}

/// Where a rank holds its partial of a block: buffer, offset, the round after which it is
/// held.
type Held = (Buf, usize, Option<u32>);

impl Reversed {
    fn rounds_count(&self) -> usize {
        if self.p == 1 {
            0
        } else {
            self.blocks.n() - 1 + ceil_log2(self.p)
        }
    }

    fn vector_block(&self, b: usize) -> usize {
        if self.flipped {
            self.blocks.n() - 1 - b
        } else {
            b
        }
    }

    /// The reduce rounds of `rank` in order (checked in `new`: rank and root valid).
    fn steps(&self, rank: usize) -> Vec<Step> {
        let n = self.blocks.n();
        let Ok(rounds) = Schedule::new(self.p, rank, self.root).and_then(|s| s.into_rounds(n))
        else {
            return Vec::new();
        };
        let last = self.rounds_count().saturating_sub(1);
        let mut steps: Vec<Step> = rounds
            .map(|r| Step {
                index: (last - r.index) as u32,
                send: r.recv.map(|b| (r.from, self.vector_block(b))),
                recv: r.send.map(|b| (r.to, self.vector_block(b))),
            })
            .collect();
        steps.reverse();
        steps
    }

    /// Scratch bytes: two block slots a round.
    fn scratch(&self) -> usize {
        2 * self.rounds_count() * self.blocks.block_bytes()
    }

    /// The reduce's rounds of `rank`, round t numbered `index(t)` (increasing), and where it
    /// holds each block's partial at the end (at the root: its place in the receive buffer).
    fn plan(&self, rank: usize, index: impl Fn(u32) -> u32) -> (Vec<Round>, Vec<Held>) {
        let n = self.blocks.n();
        let bs = self.blocks.block_bytes();
        let steps = self.steps(rank);
        // The root's last combine of a block writes the result.
        let mut left = vec![0usize; n];
        if rank == self.root {
            for s in &steps {
                if let Some((_, b)) = s.recv {
                    left[b] += 1;
                }
            }
        }
        let mut held: Vec<Held> = (0..n)
            .map(|b| (Buf::Send, self.blocks.range(b).0, None))
            .collect();
        let mut rounds = Vec::with_capacity(steps.len());
        for s in steps {
            let t = s.index as usize;
            let mut round = Round::new(index(s.index));
            if let Some((to, b)) = s.send {
                let (buf, at, after) = held[b];
                let len = self.blocks.range(b).1;
                round.send(
                    to,
                    vec![piece(buf, at, Buf::Scratch, 2 * t * bs, len, after)],
                );
            }
            if let Some((from, b)) = s.recv {
                let (off, len) = self.blocks.range(b);
                round.expect(from, usize::from(len > 0));
                let dst = if rank == self.root && left[b] == 1 {
                    (Buf::Recv, off)
                } else {
                    (Buf::Scratch, (2 * t + 1) * bs)
                };
                left[b] = left[b].saturating_sub(1);
                if len > 0 {
                    let (buf, at, _) = held[b];
                    round.local.push(Local::Combine {
                        reduction: self.reduction,
                        a: (buf, at),
                        b: (Buf::Scratch, 2 * t * bs),
                        dst,
                        len,
                    });
                }
                held[b] = (dst.0, dst.1, Some(round.index));
            }
            if !round.is_empty() {
                rounds.push(round);
            }
        }
        (rounds, held)
    }

    /// The root's copy of its input where there is nothing to combine (p = 1).
    fn setup(&self, rank: usize) -> Vec<Local> {
        if self.p > 1 || rank != self.root {
            return Vec::new();
        }
        copy_input(self.bytes())
    }

    /// Bytes of the vector.
    fn bytes(&self) -> usize {
        let (off, len) = self.blocks.range(self.blocks.n() - 1);
        off + len
    }
}

/// p, root, reduction and bytes of a reduce, or of an allreduce as a reduce to rank 0.
fn reduction_of(problem: &Problem) -> Option<(usize, usize, Reduction, usize)> {
    match *problem {
        Problem::Reduce {
            p,
            root,
            reduction,
            bytes,
        } => Some((p, root, reduction, bytes)),
        Problem::Allreduce {
            p,
            reduction,
            bytes,
        } => Some((p, 0, reduction, bytes)),
        _ => None,
    }
}

/// Circulant n-block reduce to any root (Träff 2024a; module documentation), the block count
/// chosen as for the circulant broadcast.
pub struct CirculantReduce {
    problem: Problem,
    reduce: Reversed,
}

impl CirculantReduce {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "circulant-reduce";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments
    /// are invalid.
    pub fn new(problem: &Problem, blocking: Blocking) -> Result<Self, PlanError> {
        problem.validate()?;
        let Problem::Reduce { .. } = problem else {
            return Err(PlanError::WrongCollective {
                algorithm: Self::NAME,
                collective: "reduce",
            });
        };
        Ok(CirculantReduce {
            problem: problem.clone(),
            reduce: reversed(problem, &blocking, false, Self::NAME)?,
        })
    }

    /// The number of blocks n.
    pub fn blocks(&self) -> usize {
        self.reduce.blocks.n()
    }
}

/// The n-block reduce of `problem` (a reduce, or an allreduce to rank 0).
fn reversed(
    problem: &Problem,
    blocking: &Blocking,
    flipped: bool,
    name: &'static str,
) -> Result<Reversed, PlanError> {
    let (p, root, reduction, bytes) = reduction_of(problem).ok_or(PlanError::WrongCollective {
        algorithm: name,
        collective: "reduce",
    })?;
    let blocks = ElementBlocks::new(p, bytes, reduction.dtype.size(), blocking)?;
    // The allreduce numbers its rounds up to 2(n − 1 + 2q) + 1.
    check_rounds(name, 2 * (rounds_count(p, blocks.n())? + ceil_log2(p) + 1))?;
    Ok(Reversed {
        p,
        root,
        reduction,
        blocks,
        flipped,
    })
}

/// (n − 1 + q) rounds of α + β⌈m/n⌉, `times` over.
fn pipelined(reduce: &Reversed, model: &CostModel, times: usize) -> Prediction {
    let q = ceil_log2(reduce.p);
    let bs = reduce.blocks.block_bytes();
    if bs == 0 || q == 0 {
        return Prediction {
            rounds: 0,
            time: 0.0,
        };
    }
    let rounds = reduce.rounds_count();
    Prediction {
        rounds: (times * rounds) as u64,
        time: (times * rounds) as f64 * model.message(bs),
    }
}

impl Algorithm for CirculantReduce {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        let (off, len) = self.reduce.blocks.range(self.blocks() - 1);
        BufferSizes {
            send: off + len,
            recv: if rank == self.reduce.root {
                off + len
            } else {
                0
            },
            scratch: self.reduce.scratch(),
        }
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        self.reduce.setup(rank)
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        Box::new(self.reduce.plan(rank, |t| t).0.into_iter())
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        pipelined(&self.reduce, model, 1)
    }
}

/// Circulant n-block allreduce: the n-block reduce to rank 0 pipelined into the n-block
/// broadcast from rank 0. The reduce's blocks are numbered backwards, so that rank 0 completes
/// vector block 0 first, after q rounds, and then one block a round, in the order the
/// broadcast sends them; the broadcast runs q rounds behind the reduce, each of its blocks
/// leaving rank 0 right after the reduce completed it, and the two overlap in the n − 1
/// rounds between, alternating half-rounds. 2(n − 1 + q) half-rounds of one message a rank:
/// 2(n − 1 + q)(α + β⌈m/n⌉) by rounds, which the overlap shortens where data arrives early.
/// Every rank ends with rank 0's bits.
pub struct CirculantReduceBroadcast {
    problem: Problem,
    reduce: Reversed,
}

impl CirculantReduceBroadcast {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "circulant-reduce-bcast";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments
    /// are invalid.
    pub fn new(problem: &Problem, blocking: Blocking) -> Result<Self, PlanError> {
        problem.validate()?;
        let Problem::Allreduce { .. } = problem else {
            return Err(PlanError::WrongCollective {
                algorithm: Self::NAME,
                collective: "allreduce",
            });
        };
        Ok(CirculantReduceBroadcast {
            problem: problem.clone(),
            reduce: reversed(problem, &blocking, true, Self::NAME)?,
        })
    }

    /// The number of blocks n.
    pub fn blocks(&self) -> usize {
        self.reduce.blocks.n()
    }
}

impl Algorithm for CirculantReduceBroadcast {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, _rank: usize) -> BufferSizes {
        let bytes = self.reduce.bytes();
        BufferSizes {
            send: bytes,
            recv: bytes,
            scratch: self.reduce.scratch(),
        }
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        self.reduce.setup(rank)
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let red = &self.reduce;
        let (n, q) = (red.blocks.n(), ceil_log2(red.p) as u32);
        // Reduce round t is round 2t, broadcast round s round 2(s + q) + 1: the broadcast q
        // rounds behind, each half-round one message a rank, so that a message waiting for its
        // data does not hold up the other half's on the rank's port.
        let (reduce, held) = red.plan(rank, |t| 2 * t);
        let Ok(broadcast) = Schedule::new(red.p, rank, 0).and_then(|s| s.into_rounds(n)) else {
            return Box::new(std::iter::empty());
        };
        // The round after which rank 0 holds each vector block complete in its receive
        // buffer, and each other rank once the broadcast has brought it.
        let mut got: Vec<Option<u32>> = if rank == 0 {
            held.iter().map(|h| h.2).collect()
        } else {
            vec![None; n]
        };
        let mut rounds = reduce;
        for br in broadcast {
            let index = 2 * (br.index as u32 + q) + 1;
            let mut round = Round::new(index);
            if let Some(b) = br.send {
                let (off, len) = red.blocks.range(b);
                round.send(
                    br.to,
                    vec![piece(Buf::Recv, off, Buf::Recv, off, len, got[b])],
                );
            }
            if let Some(b) = br.recv {
                round.expect(br.from, usize::from(red.blocks.range(b).1 > 0));
                if got[b].is_none() {
                    got[b] = Some(index);
                }
            }
            if !round.is_empty() {
                rounds.push(round);
            }
        }
        rounds.sort_by_key(|r| r.index);
        Box::new(rounds.into_iter())
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        pipelined(&self.reduce, model, 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Dtype, ReduceOp};

    /// (send (to, block), receive (from, block)) of ranks 0..5 in each reduce round.
    type Table = [[(Option<(usize, usize)>, Option<(usize, usize)>); 5]; 5];

    /// The worked example of p = 5, n = 3, root 0 (q = 3, x = 1): broadcast rounds i = 5 … 1
    /// run backwards, one row each.
    const P5_N3: Table = [
        [
            (None, Some((3, 2))),
            (Some((3, 0)), Some((4, 2))),
            (Some((4, 1)), None),
            (Some((0, 2)), Some((1, 0))),
            (Some((1, 2)), Some((2, 1))),
        ],
        [
            (None, Some((2, 2))),
            (Some((4, 1)), None),
            (Some((0, 2)), Some((4, 0))),
            (None, None),
            (Some((2, 0)), Some((1, 1))),
        ],
        [
            (None, Some((1, 2))),
            (Some((0, 2)), None),
            (None, Some((3, 0))),
            (Some((2, 0)), Some((4, 1))),
            (Some((3, 1)), None),
        ],
        [
            (None, Some((3, 1))),
            (None, None),
            (None, None),
            (Some((0, 1)), None),
            (None, None),
        ],
        [
            (None, Some((2, 0))),
            (None, None),
            (Some((0, 0)), None),
            (None, None),
            (None, None),
        ],
    ];

    #[test]
    fn the_worked_example_of_five_ranks_and_three_blocks() {
        let reduction = Reduction::new(Dtype::I64, ReduceOp::Sum).unwrap();
        let problem = Problem::Reduce {
            p: 5,
            root: 0,
            reduction,
            bytes: 24,
        };
        let alg = CirculantReduce::new(&problem, Blocking::Fixed(3)).unwrap();
        assert_eq!(alg.blocks(), 3);
        for rank in 0..5 {
            let steps = alg.reduce.steps(rank);
            let indices: Vec<u32> = steps.iter().map(|s| s.index).collect();
            assert_eq!(indices, vec![0, 1, 2, 3, 4]);
            let got: Vec<_> = steps.iter().map(|s| (s.send, s.recv)).collect();
            let want: Vec<_> = P5_N3.iter().map(|row| row[rank]).collect();
            assert_eq!(got, want, "rank {rank}");
        }
        // The same with another root: every rank plays its virtual rank.
        let problem = Problem::Reduce {
            p: 5,
            root: 2,
            reduction,
            bytes: 24,
        };
        let alg = CirculantReduce::new(&problem, Blocking::Fixed(3)).unwrap();
        let real = |v: usize| (v + 2) % 5;
        let moved = |x: Option<(usize, usize)>| x.map(|(r, b)| (real(r), b));
        for v in 0..5 {
            let got: Vec<_> = alg
                .reduce
                .steps(real(v))
                .iter()
                .map(|s| (s.send, s.recv))
                .collect();
            let want: Vec<_> = P5_N3
                .iter()
                .map(|row| (moved(row[v].0), moved(row[v].1)))
                .collect();
            assert_eq!(got, want, "virtual rank {v}");
        }
    }
}
