//! Binomial-tree baselines (seed 002, "One-to-All Broadcast and All-to-One Reduction",
//! "Scatter and Gather", "Optimized one-to-all"): broadcast, reduce, scatter, gather, and the
//! scatter + ring-allgather broadcast.
//!
//! All run on virtual ranks v = (r − root) mod p, the seed's relabelling of the root to 0 (the
//! seed XORs with the root, which needs p a power of two; the shift works for every p). Trees
//! for any p follow the hypercube template and skip partners ≥ p.

use super::{
    ceil_log2, piece, push_piece, Algorithm, Blocks, Buf, BufferSizes, CostModel, Local, PlanError,
    Prediction, Problem, Round,
};

fn virt(r: usize, root: usize, p: usize) -> usize {
    (r + p - root) % p
}

fn real(v: usize, root: usize, p: usize) -> usize {
    (v + root) % p
}

fn wrong(algorithm: &'static str, collective: &'static str) -> PlanError {
    PlanError::WrongCollective {
        algorithm,
        collective,
    }
}

/// One past the last virtual rank of v's subtree in a binomial tree on p ranks rooted at 0:
/// v's subtree is `[v, v + 2^bit) ∩ [0, p)` with bit its lowest set bit; the root's is all.
pub(super) fn subtree_end(p: usize, v: usize) -> usize {
    if v == 0 {
        p
    } else {
        (v + (1usize << v.trailing_zeros())).min(p)
    }
}

/// The parent of virtual rank v ≠ 0 in a binomial tree rooted at 0: v without its lowest set
/// bit.
pub(super) fn parent(v: usize) -> usize {
    v - (1 << v.trailing_zeros())
}

/// The round (counted from the top bit down) in which virtual rank v ≠ 0 receives in a
/// top-down binomial tree, and the bit it receives on.
pub(super) fn top_down_receive(v: usize, q: usize) -> (u32, usize) {
    let bit = v.trailing_zeros() as usize;
    ((q - 1 - bit) as u32, bit)
}

/// Binomial broadcast (seed 002, GENERAL_ONE_TO_ALL_BC): in round j the ranks whose virtual
/// rank is a multiple of 2^(q−j) send the whole message 2^(q−1−j) further. q rounds;
/// q(α + βm).
pub struct BinomialBroadcast {
    problem: Problem,
    p: usize,
    root: usize,
    bytes: usize,
}

impl BinomialBroadcast {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "binomial-bcast";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        problem.validate()?;
        match *problem {
            Problem::Broadcast { p, root, bytes } => Ok(BinomialBroadcast {
                problem: problem.clone(),
                p,
                root,
                bytes,
            }),
            _ => Err(wrong(Self::NAME, "broadcast")),
        }
    }
}

impl Algorithm for BinomialBroadcast {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, _rank: usize) -> BufferSizes {
        BufferSizes {
            send: 0,
            recv: self.bytes,
            scratch: 0,
        }
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let (p, root, m) = (self.p, self.root, self.bytes);
        let q = ceil_log2(p);
        let v = virt(rank, root, p);
        let mut out = Vec::new();
        let (first_send_bit, after) = if v == 0 {
            (q, None)
        } else {
            let (j, bit) = top_down_receive(v, q);
            let mut r = Round::new(j);
            r.expect(real(parent(v), root, p), usize::from(m > 0));
            out.push(r);
            (bit, Some(j))
        };
        for bit in (0..first_send_bit).rev() {
            let t = v + (1 << bit);
            if t < p {
                let mut r = Round::new((q - 1 - bit) as u32);
                r.send(
                    real(t, root, p),
                    vec![piece(Buf::Recv, 0, Buf::Recv, 0, m, after)],
                );
                if !r.is_empty() {
                    out.push(r);
                }
            }
        }
        out.retain(|r| !r.is_empty());
        Box::new(out.into_iter())
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        let q = ceil_log2(self.p) as u64;
        if self.bytes == 0 {
            return Prediction {
                rounds: 0,
                time: 0.0,
            };
        }
        Prediction {
            rounds: q,
            time: q as f64 * model.message(self.bytes),
        }
    }
}

/// Binomial reduce (seed 002, ALL_TO_ONE_REDUCE): in round i the virtual ranks ≡ 2^i mod 2^(i+1)
/// send their partial result to v − 2^i, which combines it. q rounds; q(α + βm).
pub struct BinomialReduce {
    problem: Problem,
    p: usize,
    root: usize,
    bytes: usize,
    reduction: super::Reduction,
}

impl BinomialReduce {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "binomial-reduce";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        problem.validate()?;
        match *problem {
            Problem::Reduce {
                p,
                root,
                reduction,
                bytes,
            } => Ok(BinomialReduce {
                problem: problem.clone(),
                p,
                root,
                bytes,
                reduction,
            }),
            _ => Err(wrong(Self::NAME, "reduce")),
        }
    }

    /// Partners v + 2^i this virtual rank receives from, with their rounds.
    fn children(&self, v: usize) -> Vec<(u32, usize)> {
        let q = ceil_log2(self.p);
        let top = if v == 0 {
            q
        } else {
            v.trailing_zeros() as usize
        };
        (0..top)
            .filter(|&i| v + (1 << i) < self.p)
            .map(|i| (i as u32, v + (1 << i)))
            .collect()
    }
}

impl Algorithm for BinomialReduce {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        let v = virt(rank, self.root, self.p);
        BufferSizes {
            send: self.bytes,
            recv: if v == 0 { self.bytes } else { 0 },
            scratch: 2 * self.children(v).len() * self.bytes,
        }
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        let v = virt(rank, self.root, self.p);
        if v == 0 && self.children(0).is_empty() && self.bytes > 0 {
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
        let (p, root, m) = (self.p, self.root, self.bytes);
        let v = virt(rank, root, p);
        let kids = self.children(v);
        let mut out = Vec::new();
        let mut acc = (Buf::Send, 0usize);
        let mut after = None;
        for (k, &(round, child)) in kids.iter().enumerate() {
            let mut r = Round::new(round);
            r.expect(real(child, root, p), usize::from(m > 0));
            let slot = (Buf::Scratch, 2 * k * m);
            let dst = if v == 0 && k + 1 == kids.len() {
                (Buf::Recv, 0)
            } else {
                (Buf::Scratch, (2 * k + 1) * m)
            };
            if m > 0 {
                r.local.push(Local::Combine {
                    reduction: self.reduction,
                    a: acc,
                    b: slot,
                    dst,
                    len: m,
                });
            }
            acc = dst;
            after = Some(round);
            out.push(r);
        }
        if v != 0 {
            let bit = v.trailing_zeros();
            let mut r = Round::new(bit);
            let parent = parent(v);
            // The parent's k-th child slot.
            let k = self
                .children(parent)
                .iter()
                .position(|&(_, c)| c == v)
                .unwrap_or(0);
            r.send(
                real(parent, root, p),
                vec![piece(acc.0, acc.1, Buf::Scratch, 2 * k * m, m, after)],
            );
            out.push(r);
        }
        out.retain(|r| !r.is_empty());
        Box::new(out.into_iter())
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        let q = ceil_log2(self.p) as u64;
        if self.bytes == 0 {
            return Prediction {
                rounds: 0,
                time: 0.0,
            };
        }
        Prediction {
            rounds: q,
            time: q as f64 * model.message(self.bytes),
        }
    }
}

/// Pieces carrying the blocks of virtual ranks `[lo, hi)` (block size `b`) from a sender to the
/// receiver `t == lo`. `src` maps a virtual block to (buffer, offset) at the sender; at the
/// receiver block `lo` goes to `recv[0]`, the others to its scratch at `(u − lo − 1)·b`.
fn scatter_pieces(
    lo: usize,
    hi: usize,
    b: usize,
    after: Option<u32>,
    src: impl Fn(usize) -> (Buf, usize),
) -> Vec<super::Piece> {
    let mut out: Vec<super::Piece> = Vec::new();
    for u in lo..hi {
        let (sb, so) = src(u);
        let (db, dofs) = if u == lo {
            (Buf::Recv, 0)
        } else {
            (Buf::Scratch, (u - lo - 1) * b)
        };
        push_piece(&mut out, piece(sb, so, db, dofs, b, after));
    }
    out
}

/// Binomial scatter (seed 002, "Scatter and Gather"): the root hands half of the blocks to
/// v = 2^(q−1), and so on recursively. q rounds; qα + β(p−1)b.
pub struct BinomialScatter {
    problem: Problem,
    p: usize,
    root: usize,
    block: usize,
}

impl BinomialScatter {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "binomial-scatter";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        problem.validate()?;
        match *problem {
            Problem::Scatter { p, root, block } => Ok(BinomialScatter {
                problem: problem.clone(),
                p,
                root,
                block,
            }),
            _ => Err(wrong(Self::NAME, "scatter")),
        }
    }
}

impl Algorithm for BinomialScatter {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        let v = virt(rank, self.root, self.p);
        BufferSizes {
            send: if v == 0 { self.p * self.block } else { 0 },
            recv: self.block,
            scratch: if v == 0 {
                0
            } else {
                (subtree_end(self.p, v) - v - 1) * self.block
            },
        }
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        if rank == self.root && self.block > 0 {
            vec![Local::Copy {
                src: Buf::Send,
                src_offset: rank * self.block,
                dst: Buf::Recv,
                dst_offset: 0,
                len: self.block,
            }]
        } else {
            Vec::new()
        }
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let (p, root, b) = (self.p, self.root, self.block);
        let q = ceil_log2(p);
        let v = virt(rank, root, p);
        let mut out = Vec::new();
        let src = move |u: usize| -> (Buf, usize) {
            if v == 0 {
                (Buf::Send, real(u, root, p) * b)
            } else {
                (Buf::Scratch, (u - v - 1) * b)
            }
        };
        let (top, after) = if v == 0 {
            (q, None)
        } else {
            let (j, bit) = top_down_receive(v, q);
            let parent = parent(v);
            let pieces = scatter_pieces(v, subtree_end(self.p, v), b, None, |u| {
                if parent == 0 {
                    (Buf::Send, real(u, root, p) * b)
                } else {
                    (Buf::Scratch, (u - parent - 1) * b)
                }
            });
            let mut r = Round::new(j);
            r.expect(real(parent, root, p), pieces.len());
            out.push(r);
            (bit, Some(j))
        };
        for bit in (0..top).rev() {
            let t = v + (1 << bit);
            if t < p {
                let mut r = Round::new((q - 1 - bit) as u32);
                let pieces = scatter_pieces(t, subtree_end(self.p, t), b, after, src);
                r.send(real(t, root, p), pieces);
                out.push(r);
            }
        }
        out.retain(|r| !r.is_empty());
        Box::new(out.into_iter())
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        tree_row_cost(self.p, self.block, model)
    }
}

/// qα + β(p−1)b: scatter and gather on a binomial tree (seed 002, "Cost of Scatter and
/// Gather"); exact for every p, since round i moves min(2^i, p − 2^i) blocks.
fn tree_row_cost(p: usize, block: usize, model: &CostModel) -> Prediction {
    let q = ceil_log2(p);
    if block == 0 || p == 1 {
        return Prediction {
            rounds: 0,
            time: 0.0,
        };
    }
    let time = (0..q)
        .map(|i| model.message(block * (1usize << i).min(p - (1 << i))))
        .sum();
    Prediction {
        rounds: q as u64,
        time,
    }
}

/// Binomial gather (seed 002: "the gather operation is exactly the inverse of the scatter"):
/// in round i the virtual ranks ≡ 2^i mod 2^(i+1) send all blocks they hold to v − 2^i.
/// Intermediate ranks collect in scratch; the root receives straight into its receive buffer.
pub struct BinomialGather {
    problem: Problem,
    p: usize,
    root: usize,
    block: usize,
}

impl BinomialGather {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "binomial-gather";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        problem.validate()?;
        match *problem {
            Problem::Gather { p, root, block } => Ok(BinomialGather {
                problem: problem.clone(),
                p,
                root,
                block,
            }),
            _ => Err(wrong(Self::NAME, "gather")),
        }
    }

    /// Where block of virtual rank u lives at virtual rank w (w ≠ u).
    fn slot(&self, w: usize, u: usize) -> (Buf, usize) {
        if w == 0 {
            (Buf::Recv, real(u, self.root, self.p) * self.block)
        } else {
            (Buf::Scratch, (u - w - 1) * self.block)
        }
    }

    /// Pieces of v's subtree for its parent.
    fn pieces(&self, v: usize, after: Option<u32>) -> Vec<super::Piece> {
        let parent = parent(v);
        let b = self.block;
        let mut out: Vec<super::Piece> = Vec::new();
        for u in v..subtree_end(self.p, v) {
            let (sb, so) = if u == v {
                (Buf::Send, 0)
            } else {
                (Buf::Scratch, (u - v - 1) * b)
            };
            let (db, dofs) = self.slot(parent, u);
            let dep = if u == v { None } else { after };
            push_piece(&mut out, piece(sb, so, db, dofs, b, dep));
        }
        out
    }
}

impl Algorithm for BinomialGather {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        let v = virt(rank, self.root, self.p);
        BufferSizes {
            send: self.block,
            recv: if v == 0 { self.p * self.block } else { 0 },
            scratch: if v == 0 {
                0
            } else {
                (subtree_end(self.p, v) - v - 1) * self.block
            },
        }
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        if rank == self.root && self.block > 0 {
            vec![Local::Copy {
                src: Buf::Send,
                src_offset: 0,
                dst: Buf::Recv,
                dst_offset: rank * self.block,
                len: self.block,
            }]
        } else {
            Vec::new()
        }
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let (p, root) = (self.p, self.root);
        let q = ceil_log2(p);
        let v = virt(rank, root, p);
        let top = if v == 0 {
            q
        } else {
            v.trailing_zeros() as usize
        };
        let mut out = Vec::new();
        let mut after = None;
        for i in 0..top {
            let c = v + (1 << i);
            if c < p {
                let mut r = Round::new(i as u32);
                r.expect(real(c, root, p), self.pieces(c, Some(0)).len());
                after = Some(i as u32);
                out.push(r);
            }
        }
        if v != 0 {
            let bit = v.trailing_zeros() as usize;
            let mut r = Round::new(bit as u32);
            let parent = parent(v);
            r.send(real(parent, root, p), self.pieces(v, after));
            out.push(r);
        }
        out.retain(|r| !r.is_empty());
        Box::new(out.into_iter())
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        tree_row_cost(self.p, self.block, model)
    }
}

/// Broadcast as binomial scatter + ring allgather (seed 002 "Optimized one-to-all", seed 004
/// Table 1 "van de Geijn"; the allgather is the ring of seed 002 so it works for every p).
/// Segment v (of ⌈m/p⌉ bytes) belongs to virtual rank v; both phases write segments straight to
/// their final place. q + p − 1 rounds; (q + p − 1)α + 2β(p−1)⌈m/p⌉.
pub struct ScatterAllgatherBroadcast {
    problem: Problem,
    p: usize,
    root: usize,
    bytes: usize,
}

impl ScatterAllgatherBroadcast {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "scatter-allgather-bcast";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        problem.validate()?;
        match *problem {
            Problem::Broadcast { p, root, bytes } => Ok(ScatterAllgatherBroadcast {
                problem: problem.clone(),
                p,
                root,
                bytes,
            }),
            _ => Err(wrong(Self::NAME, "broadcast")),
        }
    }

    fn segments(&self) -> Blocks {
        Blocks::new(self.bytes, self.p)
    }

    /// Byte range of the segments of virtual ranks [lo, hi).
    fn span(&self, lo: usize, hi: usize) -> (usize, usize) {
        let s = self.segments();
        let (a, _) = s.range(lo);
        let (c, l) = s.range(hi - 1);
        (a, c + l - a)
    }
}

impl Algorithm for ScatterAllgatherBroadcast {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, _rank: usize) -> BufferSizes {
        BufferSizes {
            send: 0,
            recv: self.bytes,
            scratch: 0,
        }
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let (p, root) = (self.p, self.root);
        let q = ceil_log2(p);
        let v = virt(rank, root, p);
        let mut scatter = Vec::new();
        let (top, after) = if v == 0 {
            (q, None)
        } else {
            let (j, bit) = top_down_receive(v, q);
            let parent = parent(v);
            let (_, len) = self.span(v, subtree_end(self.p, v));
            let mut r = Round::new(j);
            r.expect(real(parent, root, p), usize::from(len > 0));
            scatter.push(r);
            (bit, Some(j))
        };
        for bit in (0..top).rev() {
            let t = v + (1 << bit);
            if t < p {
                let mut r = Round::new((q - 1 - bit) as u32);
                let (off, len) = self.span(t, subtree_end(self.p, t));
                r.send(
                    real(t, root, p),
                    vec![piece(Buf::Recv, off, Buf::Recv, off, len, after)],
                );
                scatter.push(r);
            }
        }
        scatter.retain(|r| !r.is_empty());
        let seg = self.segments();
        let last_scatter = after;
        let ring = (0..p.saturating_sub(1)).filter_map(move |t| {
            let index = (q + t) as u32;
            let mut r = Round::new(index);
            let out_seg = (v + p - t) % p;
            let (off, len) = seg.range(out_seg);
            let dep = if t == 0 {
                last_scatter
            } else {
                Some(index - 1)
            };
            r.send(
                real((v + 1) % p, root, p),
                vec![piece(Buf::Recv, off, Buf::Recv, off, len, dep)],
            );
            let in_seg = (v + 2 * p - 1 - t) % p;
            r.expect(
                real((v + p - 1) % p, root, p),
                usize::from(seg.range(in_seg).1 > 0),
            );
            (!r.is_empty()).then_some(r)
        });
        Box::new(scatter.into_iter().chain(ring))
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        let p = self.p;
        if self.bytes == 0 || p == 1 {
            return Prediction {
                rounds: 0,
                time: 0.0,
            };
        }
        let q = ceil_log2(p);
        let s = self.bytes.div_ceil(p);
        // The binomial scatter of p blocks of s ≥ 1 bytes.
        let scatter = tree_row_cost(p, s, model).time;
        Prediction {
            rounds: (q + p - 1) as u64,
            time: scatter + (p - 1) as f64 * model.message(s),
        }
    }
}
