//! Gather and scatter with a count per rank (gatherv, scatterv): the binomial trees of seed 002
//! ("Scatter and Gather": the root hands half of the data to one partner and recurses; "the
//! gather operation is exactly the inverse of the scatter") with blocks of different sizes, and
//! the linear baselines in which the root talks to every rank directly, one rank per round.
//!
//! Virtual ranks v = (r − root) mod p as in [`super::tree`]. A tree rank v ≠ 0 keeps the blocks
//! of its subtree `(v, end(v))` back to back in its scratch (its own block is in its send or
//! receive buffer); the root uses the displacements of the counts in its own buffer, so every
//! block lands at its final offset and nothing is reordered.

use super::tree::{parent, top_down_receive};
use super::{
    ceil_log2, displacements, piece, push_piece, Algorithm, Buf, BufferSizes, CostModel, Local,
    Piece, PlanError, Prediction, Problem, Round,
};

/// (root, counts, displacements) of a gatherv or scatterv problem.
fn rooted(
    problem: &Problem,
    name: &'static str,
    gather: bool,
) -> Result<(usize, Vec<usize>, Vec<usize>), PlanError> {
    problem.validate()?;
    match problem {
        Problem::Gatherv { root, counts } if gather => {
            Ok((*root, counts.clone(), displacements(counts)))
        }
        Problem::Scatterv { root, counts } if !gather => {
            Ok((*root, counts.clone(), displacements(counts)))
        }
        _ => Err(PlanError::WrongCollective {
            algorithm: name,
            collective: if gather { "gatherv" } else { "scatterv" },
        }),
    }
}

/// The geometry shared by the binomial gatherv and scatterv.
struct Tree {
    p: usize,
    root: usize,
    counts: Vec<usize>,
    displs: Vec<usize>,
    /// Prefix sums of the counts in virtual order: `vsum[v]` = Σ counts of virtual ranks < v.
    vsum: Vec<usize>,
}

impl Tree {
    fn new(root: usize, counts: Vec<usize>, displs: Vec<usize>) -> Self {
        let p = counts.len();
        let mut vsum = Vec::with_capacity(p + 1);
        let mut acc = 0usize;
        vsum.push(0);
        for v in 0..p {
            acc += counts[(v + root) % p];
            vsum.push(acc);
        }
        Tree {
            p,
            root,
            counts,
            displs,
            vsum,
        }
    }

    fn real(&self, v: usize) -> usize {
        (v + self.root) % self.p
    }

    fn virt(&self, r: usize) -> usize {
        (r + self.p - self.root) % self.p
    }

    fn count(&self, v: usize) -> usize {
        self.counts[self.real(v)]
    }

    /// One past the last virtual rank of v's subtree.
    fn end(&self, v: usize) -> usize {
        super::tree::subtree_end(self.p, v)
    }

    /// Bytes of the blocks of virtual ranks `[lo, hi)`.
    fn bytes(&self, lo: usize, hi: usize) -> usize {
        self.vsum[hi] - self.vsum[lo]
    }

    /// Where the block of virtual rank u (≠ w) lives at tree rank w: the root's `root_buf` at
    /// u's displacement, else w's scratch.
    fn slot(&self, w: usize, u: usize, root_buf: Buf) -> (Buf, usize) {
        if w == 0 {
            (root_buf, self.displs[self.real(u)])
        } else {
            (Buf::Scratch, self.bytes(w + 1, u))
        }
    }

    /// Scratch of tree rank v: its subtree without itself.
    fn scratch(&self, v: usize) -> usize {
        if v == 0 {
            0
        } else {
            self.bytes(v + 1, self.end(v))
        }
    }

    /// The α-β time of a tree collective in which rank v ≠ 0 exchanges its subtree's bytes
    /// with its parent in round `round(v)`: every round costs its largest message.
    fn predict(&self, model: &CostModel, round: impl Fn(usize) -> usize) -> Prediction {
        let q = ceil_log2(self.p);
        let mut largest: Vec<Option<usize>> = vec![None; q];
        for v in 1..self.p {
            let bytes = self.bytes(v, self.end(v));
            if bytes > 0 {
                let slot = &mut largest[round(v)];
                *slot = Some(slot.map_or(bytes, |b| b.max(bytes)));
            }
        }
        let used: Vec<usize> = largest.into_iter().flatten().collect();
        Prediction {
            rounds: used.len() as u64,
            time: used.iter().map(|&b| model.message(b)).sum(),
        }
    }
}

/// Binomial gatherv: in round i the virtual ranks ≡ 2^i mod 2^(i+1) write every block they
/// hold to v − 2^i. ⌈log₂ p⌉ rounds; each round costs its largest subtree.
pub struct BinomialGatherv {
    problem: Problem,
    tree: Tree,
}

impl BinomialGatherv {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "binomial-gatherv";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        let (root, counts, displs) = rooted(problem, Self::NAME, true)?;
        Ok(BinomialGatherv {
            problem: problem.clone(),
            tree: Tree::new(root, counts, displs),
        })
    }

    /// The pieces v's subtree sends to its parent; scratch data is held after `after`.
    fn pieces(&self, v: usize, after: Option<u32>) -> Vec<Piece> {
        let t = &self.tree;
        let parent = parent(v);
        let mut out = Vec::new();
        for u in v..t.end(v) {
            let (sb, so, dep) = if u == v {
                (Buf::Send, 0, None)
            } else {
                (Buf::Scratch, t.bytes(v + 1, u), after)
            };
            let (db, dofs) = t.slot(parent, u, Buf::Recv);
            push_piece(&mut out, piece(sb, so, db, dofs, t.count(u), dep));
        }
        out
    }
}

impl Algorithm for BinomialGatherv {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        let t = &self.tree;
        let v = t.virt(rank);
        BufferSizes {
            send: t.counts[rank],
            recv: if v == 0 { t.vsum[t.p] } else { 0 },
            scratch: t.scratch(v),
        }
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        let t = &self.tree;
        if rank == t.root && t.counts[rank] > 0 {
            vec![Local::Copy {
                src: Buf::Send,
                src_offset: 0,
                dst: Buf::Recv,
                dst_offset: t.displs[rank],
                len: t.counts[rank],
            }]
        } else {
            Vec::new()
        }
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let t = &self.tree;
        let q = ceil_log2(t.p);
        let v = t.virt(rank);
        let top = if v == 0 {
            q
        } else {
            v.trailing_zeros() as usize
        };
        let mut out = Vec::new();
        let mut after = None;
        for i in 0..top {
            let c = v + (1 << i);
            if c < t.p {
                let writes = self.pieces(c, Some(0)).len();
                if writes > 0 {
                    let mut r = Round::new(i as u32);
                    r.expect(t.real(c), writes);
                    after = Some(i as u32);
                    out.push(r);
                }
            }
        }
        if v != 0 {
            let bit = v.trailing_zeros() as usize;
            let mut r = Round::new(bit as u32);
            r.send(t.real(parent(v)), self.pieces(v, after));
            out.push(r);
        }
        out.retain(|r| !r.is_empty());
        Box::new(out.into_iter())
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        self.tree.predict(model, |v| v.trailing_zeros() as usize)
    }
}

/// Binomial scatterv: the root writes the blocks of virtual ranks `[2^(q−1), p)` to 2^(q−1),
/// and so on recursively; the mirror of [`BinomialGatherv`].
pub struct BinomialScatterv {
    problem: Problem,
    tree: Tree,
}

impl BinomialScatterv {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "binomial-scatterv";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        let (root, counts, displs) = rooted(problem, Self::NAME, false)?;
        Ok(BinomialScatterv {
            problem: problem.clone(),
            tree: Tree::new(root, counts, displs),
        })
    }

    /// The pieces tree rank `from` writes to child t: t's block into its receive buffer, the
    /// rest of t's subtree into its scratch.
    fn pieces(&self, from: usize, t_v: usize, after: Option<u32>) -> Vec<Piece> {
        let t = &self.tree;
        let mut out = Vec::new();
        for u in t_v..t.end(t_v) {
            let (sb, so) = t.slot(from, u, Buf::Send);
            let (db, dofs) = if u == t_v {
                (Buf::Recv, 0)
            } else {
                (Buf::Scratch, t.bytes(t_v + 1, u))
            };
            push_piece(&mut out, piece(sb, so, db, dofs, t.count(u), after));
        }
        out
    }
}

impl Algorithm for BinomialScatterv {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        let t = &self.tree;
        let v = t.virt(rank);
        BufferSizes {
            send: if v == 0 { t.vsum[t.p] } else { 0 },
            recv: t.counts[rank],
            scratch: t.scratch(v),
        }
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        let t = &self.tree;
        if rank == t.root && t.counts[rank] > 0 {
            vec![Local::Copy {
                src: Buf::Send,
                src_offset: t.displs[rank],
                dst: Buf::Recv,
                dst_offset: 0,
                len: t.counts[rank],
            }]
        } else {
            Vec::new()
        }
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let t = &self.tree;
        let q = ceil_log2(t.p);
        let v = t.virt(rank);
        let mut out = Vec::new();
        let (top, after) = if v == 0 {
            (q, None)
        } else {
            let (j, bit) = top_down_receive(v, q);
            let parent = parent(v);
            let writes = self.pieces(parent, v, None).len();
            if writes > 0 {
                let mut r = Round::new(j);
                r.expect(t.real(parent), writes);
                out.push(r);
                (bit, Some(j))
            } else {
                (bit, None)
            }
        };
        for bit in (0..top).rev() {
            let c = v + (1 << bit);
            if c < t.p {
                let mut r = Round::new((q - 1 - bit) as u32);
                r.send(t.real(c), self.pieces(v, c, after));
                out.push(r);
            }
        }
        out.retain(|r| !r.is_empty());
        Box::new(out.into_iter())
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        let q = ceil_log2(self.tree.p);
        self.tree
            .predict(model, |v| q - 1 - v.trailing_zeros() as usize)
    }
}

/// Linear gatherv: virtual rank v writes its block straight to its place in the root's receive
/// buffer in round v − 1 (the root receives one block per round). p − 1 rounds.
pub struct LinearGatherv {
    problem: Problem,
    tree: Tree,
}

impl LinearGatherv {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "linear-gatherv";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        let (root, counts, displs) = rooted(problem, Self::NAME, true)?;
        Ok(LinearGatherv {
            problem: problem.clone(),
            tree: Tree::new(root, counts, displs),
        })
    }
}

/// (p − 1)α + β·(bytes of every rank but the root), counting only non-empty blocks.
fn linear_cost(t: &Tree, model: &CostModel) -> Prediction {
    let blocks: Vec<usize> = (1..t.p).map(|v| t.count(v)).filter(|&c| c > 0).collect();
    Prediction {
        rounds: blocks.len() as u64,
        time: blocks.iter().map(|&c| model.message(c)).sum(),
    }
}

impl Algorithm for LinearGatherv {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        let t = &self.tree;
        BufferSizes {
            send: t.counts[rank],
            recv: if rank == t.root { t.vsum[t.p] } else { 0 },
            scratch: 0,
        }
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        let t = &self.tree;
        if rank == t.root && t.counts[rank] > 0 {
            vec![Local::Copy {
                src: Buf::Send,
                src_offset: 0,
                dst: Buf::Recv,
                dst_offset: t.displs[rank],
                len: t.counts[rank],
            }]
        } else {
            Vec::new()
        }
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let t = &self.tree;
        let v = t.virt(rank);
        let rounds: Vec<Round> = if v == 0 {
            (1..t.p)
                .filter(|&u| t.count(u) > 0)
                .map(|u| {
                    let mut r = Round::new((u - 1) as u32);
                    r.expect(t.real(u), 1);
                    r
                })
                .collect()
        } else {
            let mut r = Round::new((v - 1) as u32);
            let len = t.counts[rank];
            r.send(
                t.root,
                vec![piece(Buf::Send, 0, Buf::Recv, t.displs[rank], len, None)],
            );
            vec![r]
        };
        Box::new(rounds.into_iter().filter(|r| !r.is_empty()))
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        linear_cost(&self.tree, model)
    }
}

/// Linear scatterv: the root writes block r straight into rank r's receive buffer, virtual
/// rank v in round v − 1. p − 1 rounds.
pub struct LinearScatterv {
    problem: Problem,
    tree: Tree,
}

impl LinearScatterv {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "linear-scatterv";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        let (root, counts, displs) = rooted(problem, Self::NAME, false)?;
        Ok(LinearScatterv {
            problem: problem.clone(),
            tree: Tree::new(root, counts, displs),
        })
    }
}

impl Algorithm for LinearScatterv {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        let t = &self.tree;
        BufferSizes {
            send: if rank == t.root { t.vsum[t.p] } else { 0 },
            recv: t.counts[rank],
            scratch: 0,
        }
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        let t = &self.tree;
        if rank == t.root && t.counts[rank] > 0 {
            vec![Local::Copy {
                src: Buf::Send,
                src_offset: t.displs[rank],
                dst: Buf::Recv,
                dst_offset: 0,
                len: t.counts[rank],
            }]
        } else {
            Vec::new()
        }
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let t = &self.tree;
        let v = t.virt(rank);
        let rounds: Vec<Round> = if v == 0 {
            (1..t.p)
                .map(|u| {
                    let r_u = t.real(u);
                    let mut r = Round::new((u - 1) as u32);
                    r.send(
                        r_u,
                        vec![piece(
                            Buf::Send,
                            t.displs[r_u],
                            Buf::Recv,
                            0,
                            t.counts[r_u],
                            None,
                        )],
                    );
                    r
                })
                .collect()
        } else {
            let mut r = Round::new((v - 1) as u32);
            r.expect(t.root, usize::from(t.counts[rank] > 0));
            vec![r]
        };
        Box::new(rounds.into_iter().filter(|r| !r.is_empty()))
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        linear_cost(&self.tree, model)
    }
}
