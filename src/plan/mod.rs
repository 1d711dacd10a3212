//! Every collective algorithm as a pure per-rank program.
//!
//! A plan is, for one rank, an ordered sequence of [`Round`]s. A round holds the rank's
//! [`Transfer`]s (one message to one target: a list of [`Piece`]s, each a byte range of a local
//! buffer written to a byte range of one of the target's buffers), its [`Expect`]ations (how many
//! writes arrive from whom in this round) and its [`Local`] steps (copies and reductions, run once
//! the round's writes have arrived).
//!
//! How a transport walks a plan:
//! 1. run [`RankPlan::setup`] (local steps on data held from the start);
//! 2. for every round in order: post each transfer as soon as every piece's dependency
//!    ([`Piece::after`]) is met — `None`: data held after setup; `Some(i)`: data held once round
//!    `i` of this rank is complete — and the target's ready token has arrived. Each piece is one
//!    write, or the transfer is posted as the scatter-gather writes of [`merge::merge_transfer`]
//!    (the target then counts with [`merge::Incoming`]); a write carries the round index so the
//!    target can count it;
//! 3. a round is complete when all writes its expectations announce have arrived (and all
//!    earlier rounds are complete); then its local steps run. Local steps only write bytes that
//!    nothing has written before in this operation, so they never race with a posted write;
//! 4. the operation is done when every round is complete and every posted write has completed.
//!
//! Writes target the receive buffer or the scratch buffer of a peer; the peers that write into a
//! rank are exactly the `from` of its expectations, so a rank knows from its own plan whom to send
//! ready tokens to (at most q peers for the circulant plans).
//!
//! Round indices are global: the same index means the same round on every rank; a rank's plan
//! lists only the rounds in which it does something. Plans are produced lazily (iterators), so a
//! plan for p = 10^6 never holds more than one rank's rounds, and usually only one round.

use std::fmt;

pub mod allgather;
pub mod allreduce;
pub mod alltoall;
pub mod barrier;
pub mod bounds;
pub mod circulant;
pub mod compose;
pub mod distribution;
pub mod hierarchical;
pub mod intergroup;
pub mod layout;
pub mod merge;
pub mod multilane;
pub mod probe;
pub mod reduce;
pub mod registry;
pub mod ring;
pub mod rootedv;
pub mod roundrobin;
pub mod scan;
pub mod tree;

pub use layout::{Layout, LevelCosts};
pub use reduce::{Dtype, ReduceOp, Reduction};

/// The buffers a rank works on. Final results are always in `Recv`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Buf {
    /// The caller's input (read only).
    Send,
    /// The caller's output.
    Recv,
    /// Library scratch memory (size given by [`BufferSizes::scratch`]).
    Scratch,
}

impl fmt::Display for Buf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Buf::Send => "send",
            Buf::Recv => "recv",
            Buf::Scratch => "scratch",
        })
    }
}

/// One write: `len` bytes at `src_offset` of the local `src` buffer go to `dst_offset` of the
/// target's `dst` buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The sender's buffer the bytes come from.
    pub src: Buf,
    /// Offset in `src`.
    pub src_offset: usize,
    /// The target's buffer the bytes go to.
    pub dst: Buf,
    /// Offset in `dst`.
    pub dst_offset: usize,
    /// Number of bytes.
    pub len: usize,
    /// The source bytes are held once this round of the sender is complete (`None`: from the
    /// start, after setup).
    pub after: Option<u32>,
}

/// One message: all pieces go to the same target in the same round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// The target rank.
    pub to: usize,
    /// What it carries, in order.
    pub pieces: Vec<Piece>,
}

impl Transfer {
    /// Bytes carried by this message.
    pub fn bytes(&self) -> usize {
        self.pieces.iter().map(|p| p.len).sum()
    }
}

/// `writes` writes from rank `from` arrive in this round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expect {
    /// The sending rank.
    pub from: usize,
    /// How many writes it sends this rank in the round.
    pub writes: usize,
}

/// A local step, run when its round is complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Local {
    /// Copy `len` bytes.
    Copy {
        /// Source buffer.
        src: Buf,
        /// Offset in `src`.
        src_offset: usize,
        /// Destination buffer.
        dst: Buf,
        /// Offset in `dst`.
        dst_offset: usize,
        /// Number of bytes.
        len: usize,
    },
    /// `dst = a ⊕ b` elementwise over `len` bytes.
    Combine {
        /// Element type and operator.
        reduction: Reduction,
        /// First operand: buffer and offset.
        a: (Buf, usize),
        /// Second operand: buffer and offset.
        b: (Buf, usize),
        /// Result: buffer and offset (may be one of the operands).
        dst: (Buf, usize),
        /// Number of bytes.
        len: usize,
    },
}

impl Local {
    /// The bytes the step writes: buffer, offset, length.
    pub fn output(&self) -> (Buf, usize, usize) {
        match *self {
            Local::Copy {
                dst,
                dst_offset,
                len,
                ..
            } => (dst, dst_offset, len),
            Local::Combine { dst, len, .. } => (dst.0, dst.1, len),
        }
    }
}

/// Everything one rank does in one round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Round {
    /// Global index of the round; rounds of a plan are in increasing order.
    pub index: u32,
    /// Messages this rank sends.
    pub sends: Vec<Transfer>,
    /// Writes this rank must receive before the round is complete.
    pub expects: Vec<Expect>,
    /// Local steps run once the round is complete.
    pub local: Vec<Local>,
}

impl Round {
    /// An empty round with this index.
    pub fn new(index: u32) -> Self {
        Round {
            index,
            ..Round::default()
        }
    }

    /// Whether the round sends, expects and runs nothing.
    pub fn is_empty(&self) -> bool {
        self.sends.is_empty() && self.expects.is_empty() && self.local.is_empty()
    }

    /// Adds a message unless it carries nothing; zero-length pieces are dropped.
    pub fn send(&mut self, to: usize, pieces: Vec<Piece>) {
        let pieces: Vec<Piece> = pieces.into_iter().filter(|p| p.len > 0).collect();
        if !pieces.is_empty() {
            self.sends.push(Transfer { to, pieces });
        }
    }

    /// Adds a signal: one zero-length write (barriers).
    pub fn signal(&mut self, to: usize) {
        self.sends.push(Transfer {
            to,
            pieces: vec![Piece {
                src: Buf::Send,
                src_offset: 0,
                dst: Buf::Recv,
                dst_offset: 0,
                len: 0,
                after: None,
            }],
        });
    }

    /// Expects `writes` writes from `from` (nothing if zero).
    pub fn expect(&mut self, from: usize, writes: usize) {
        if writes > 0 {
            self.expects.push(Expect { from, writes });
        }
    }
}

/// Shorthand for a piece.
pub fn piece(
    src: Buf,
    src_offset: usize,
    dst: Buf,
    dst_offset: usize,
    len: usize,
    after: Option<u32>,
) -> Piece {
    Piece {
        src,
        src_offset,
        dst,
        dst_offset,
        len,
        after,
    }
}

/// Appends a piece, dropping it if empty and
/// merging it into the previous one when both are contiguous on both sides.
pub(super) fn push_piece(out: &mut Vec<Piece>, p: Piece) {
    if p.len == 0 {
        return;
    }
    if let Some(last) = out.last_mut() {
        if last.src == p.src
            && last.dst == p.dst
            && last.src_offset + last.len == p.src_offset
            && last.dst_offset + last.len == p.dst_offset
        {
            last.len += p.len;
            last.after = last.after.max(p.after);
            return;
        }
    }
    out.push(p);
}

/// Sizes in bytes of one rank's buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferSizes {
    /// Bytes of the send buffer.
    pub send: usize,
    /// Bytes of the receive buffer.
    pub recv: usize,
    /// Bytes of library scratch memory.
    pub scratch: usize,
}

/// The plan of one rank.
pub struct RankPlan<'a> {
    /// The rank this plan is for.
    pub rank: usize,
    /// The sizes its buffers must have.
    pub buffers: BufferSizes,
    /// Local steps run before the first round.
    pub setup: Vec<Local>,
    /// The rounds, in order, produced lazily.
    pub rounds: Box<dyn Iterator<Item = Round> + Send + 'a>,
}

/// Bad input to a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the number of ranks must be at least 1")]
    /// The problem has no ranks.
    NoRanks,
    #[error("root {root} is out of range for {p} ranks")]
    /// The root is not a rank.
    RootOutOfRange {
        /// The root given.
        root: usize,
        /// The number of ranks.
        p: usize,
    },
    #[error("rank {rank} is out of range for {p} ranks")]
    /// A rank is not in the job.
    RankOutOfRange {
        /// The rank given.
        rank: usize,
        /// The number of ranks.
        p: usize,
    },
    #[error("expected {expected} counts, got {got}")]
    /// A counts array does not have one entry per rank.
    CountsLength {
        /// Its required length.
        expected: usize,
        /// Its length.
        got: usize,
    },
    #[error("sizes overflow the address space")]
    /// A size or offset does not fit in `usize`.
    Overflow,
    #[error("operator {op} is not defined for {dtype}")]
    /// The operator is not defined for the element type (bitwise on floats).
    OpNotDefined {
        /// The operator.
        op: ReduceOp,
        /// The element type.
        dtype: Dtype,
    },
    #[error("{bytes} bytes is not a whole number of {dtype} elements")]
    /// The byte count is not a whole number of elements.
    Misaligned {
        /// The byte count.
        bytes: usize,
        /// The element type.
        dtype: Dtype,
    },
    #[error("{algorithm} implements {collective}, not this collective")]
    /// The algorithm solves another collective than the problem.
    WrongCollective {
        /// The algorithm.
        algorithm: &'static str,
        /// The collective it solves.
        collective: &'static str,
    },
    #[error("{algorithm}: {reason}")]
    /// The algorithm cannot solve this instance.
    Unsupported {
        /// The algorithm.
        algorithm: &'static str,
        /// Why not.
        reason: String,
    },
    #[error("block count must be at least 1")]
    /// A block count of 0.
    NoBlocks,
    #[error("a write needs at least one local and one remote segment (iov limit {iov}, rma iov limit {rma_iov})")]
    /// Provider limits that allow no write at all.
    IovLimit {
        /// Local segments per write.
        iov: usize,
        /// Remote segments per write.
        rma_iov: usize,
    },
    #[error("unknown algorithm {0:?}")]
    /// No algorithm has this name.
    UnknownAlgorithm(String),
    #[error("schedule: {0}")]
    /// The circulant schedule cannot be built.
    Schedule(#[from] crate::schedule::ScheduleError),
}

/// The collective problems (what must hold after the operation; see [`Problem`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Problem {
    /// Root's `recv` (`bytes` long) ends up in every rank's `recv`.
    Broadcast {
        /// Number of ranks.
        p: usize,
        /// The rank whose data is broadcast.
        root: usize,
        /// Bytes broadcast.
        bytes: usize,
    },
    /// Root's `recv` = ⊕ of all `send` buffers.
    Reduce {
        /// Number of ranks.
        p: usize,
        /// The rank that receives the result.
        root: usize,
        /// Element type and operator.
        reduction: Reduction,
        /// Bytes per rank.
        bytes: usize,
    },
    /// Every `recv` = ⊕ of all `send` buffers.
    Allreduce {
        /// Number of ranks.
        p: usize,
        /// Element type and operator.
        reduction: Reduction,
        /// Bytes per rank.
        bytes: usize,
    },
    /// `recv` of rank r = ⊕ of the `send` buffers of ranks 0..=r (`exclusive`: 0..r; rank 0's
    /// `recv` is then left alone).
    Scan {
        /// Number of ranks.
        p: usize,
        /// Element type and operator.
        reduction: Reduction,
        /// Bytes per rank.
        bytes: usize,
        /// Exclusive scan (ranks before r only).
        exclusive: bool,
    },
    /// Every `recv` = all `send` buffers (`block` bytes each) in rank order.
    Allgather {
        /// Number of ranks.
        p: usize,
        /// Bytes per rank.
        block: usize,
    },
    /// Every `recv` = all `send` buffers (`counts[r]` bytes) in rank order.
    Allgatherv {
        /// Bytes contributed by each rank.
        counts: Vec<usize>,
    },
    /// Root's `send` (`p * block`) is cut into blocks; block r ends up in rank r's `recv`.
    Scatter {
        /// Number of ranks.
        p: usize,
        /// The rank that holds the data.
        root: usize,
        /// Bytes per rank.
        block: usize,
    },
    /// Rank r's `send` (`block`) ends up at block r of root's `recv`.
    Gather {
        /// Number of ranks.
        p: usize,
        /// The rank that receives the data.
        root: usize,
        /// Bytes per rank.
        block: usize,
    },
    /// Root's `send` (the sum of the counts) is cut at the counts; part r ends up in rank r's
    /// `recv`.
    Scatterv {
        /// The rank that holds the data.
        root: usize,
        /// Bytes for each rank.
        counts: Vec<usize>,
    },
    /// Rank r's `send` (`counts[r]` bytes) ends up in root's `recv` at the sum of the counts
    /// before r.
    Gatherv {
        /// The rank that receives the data.
        root: usize,
        /// Bytes from each rank.
        counts: Vec<usize>,
    },
    /// Block j of rank i's `send` ends up at block i of rank j's `recv`.
    Alltoall {
        /// Number of ranks.
        p: usize,
        /// Bytes per pair of ranks.
        block: usize,
    },
    /// No rank completes before every rank has started.
    Barrier {
        /// Number of ranks.
        p: usize,
    },
    /// Two groups: ranks `0..a.len()` form A, the rest B. Every rank's `recv` = the other
    /// group's `send` buffers in rank order.
    Intergroup {
        /// Bytes contributed by each rank of group A.
        a: Vec<usize>,
        /// Bytes contributed by each rank of group B.
        b: Vec<usize>,
    },
}

/// The name of a collective, for messages and the model command.
pub fn collective_name(problem: &Problem) -> &'static str {
    match problem {
        Problem::Broadcast { .. } => "broadcast",
        Problem::Reduce { .. } => "reduce",
        Problem::Allreduce { .. } => "allreduce",
        Problem::Scan {
            exclusive: false, ..
        } => "scan",
        Problem::Scan {
            exclusive: true, ..
        } => "exscan",
        Problem::Allgather { .. } => "allgather",
        Problem::Allgatherv { .. } => "allgatherv",
        Problem::Scatter { .. } => "scatter",
        Problem::Gather { .. } => "gather",
        Problem::Scatterv { .. } => "scatterv",
        Problem::Gatherv { .. } => "gatherv",
        Problem::Alltoall { .. } => "alltoall",
        Problem::Barrier { .. } => "barrier",
        Problem::Intergroup { .. } => "intergroup allgatherv",
    }
}

impl Problem {
    /// Number of ranks.
    pub fn p(&self) -> usize {
        match self {
            Problem::Broadcast { p, .. }
            | Problem::Reduce { p, .. }
            | Problem::Allreduce { p, .. }
            | Problem::Scan { p, .. }
            | Problem::Allgather { p, .. }
            | Problem::Scatter { p, .. }
            | Problem::Gather { p, .. }
            | Problem::Alltoall { p, .. }
            | Problem::Barrier { p } => *p,
            Problem::Allgatherv { counts }
            | Problem::Scatterv { counts, .. }
            | Problem::Gatherv { counts, .. } => counts.len(),
            Problem::Intergroup { a, b } => a.len() + b.len(),
        }
    }

    /// Checks the problem: at least one rank, roots in range, sizes without overflow, whole
    /// elements and defined operators for reductions.
    pub fn validate(&self) -> Result<(), PlanError> {
        let p = self.p();
        if p == 0 {
            return Err(PlanError::NoRanks);
        }
        match self {
            Problem::Broadcast { root, .. }
            | Problem::Scatter { root, .. }
            | Problem::Gather { root, .. }
            | Problem::Reduce { root, .. }
            | Problem::Scatterv { root, .. }
            | Problem::Gatherv { root, .. }
                if *root >= p =>
            {
                return Err(PlanError::RootOutOfRange { root: *root, p });
            }
            _ => {}
        }
        match self {
            Problem::Reduce {
                reduction, bytes, ..
            }
            | Problem::Allreduce {
                reduction, bytes, ..
            }
            | Problem::Scan {
                reduction, bytes, ..
            } => {
                reduction.validate()?;
                if bytes % reduction.dtype.size() != 0 {
                    return Err(PlanError::Misaligned {
                        bytes: *bytes,
                        dtype: reduction.dtype,
                    });
                }
                // Scratch memory of the reductions holds a few multiples of the vector.
                bytes
                    .checked_mul(4 * (ceil_log2(p) + 3))
                    .ok_or(PlanError::Overflow)?;
            }
            Problem::Allgather { block, .. }
            | Problem::Scatter { block, .. }
            | Problem::Gather { block, .. } => {
                block.checked_mul(p).ok_or(PlanError::Overflow)?;
            }
            Problem::Alltoall { block, .. } => {
                block
                    .checked_mul(p)
                    .and_then(|x| x.checked_mul(2))
                    .ok_or(PlanError::Overflow)?;
            }
            Problem::Allgatherv { counts }
            | Problem::Scatterv { counts, .. }
            | Problem::Gatherv { counts, .. } => {
                checked_sum(counts)?;
            }
            Problem::Intergroup { a, b } => {
                if a.is_empty() || b.is_empty() {
                    return Err(PlanError::NoRanks);
                }
                checked_sum(a)?;
                checked_sum(b)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Bytes each rank must end up with (the `m` of the α-β formulas): the broadcast or vector
    /// size, the total of an allgather(v), a whole row for scatter/gather/alltoall.
    pub fn total_bytes(&self) -> usize {
        match self {
            Problem::Broadcast { bytes, .. }
            | Problem::Reduce { bytes, .. }
            | Problem::Allreduce { bytes, .. }
            | Problem::Scan { bytes, .. } => *bytes,
            Problem::Allgather { p, block }
            | Problem::Scatter { p, block, .. }
            | Problem::Gather { p, block, .. }
            | Problem::Alltoall { p, block } => p.saturating_mul(*block),
            Problem::Allgatherv { counts }
            | Problem::Scatterv { counts, .. }
            | Problem::Gatherv { counts, .. } => {
                counts.iter().fold(0usize, |a, &c| a.saturating_add(c))
            }
            Problem::Barrier { .. } => 0,
            Problem::Intergroup { a, b } => {
                let sa = a.iter().fold(0usize, |x, &c| x.saturating_add(c));
                let sb = b.iter().fold(0usize, |x, &c| x.saturating_add(c));
                sa.max(sb)
            }
        }
    }
}

/// Sum of counts, or [`PlanError::Overflow`].
pub fn checked_sum(counts: &[usize]) -> Result<usize, PlanError> {
    counts
        .iter()
        .try_fold(0usize, |a, &c| a.checked_add(c))
        .ok_or(PlanError::Overflow)
}

/// Exclusive prefix sums (displacements); the caller has checked the total.
pub fn displacements(counts: &[usize]) -> Vec<usize> {
    let mut d = Vec::with_capacity(counts.len());
    let mut acc = 0usize;
    for &c in counts {
        d.push(acc);
        acc = acc.saturating_add(c);
    }
    d
}

/// Round indices are `u32`: a plan of `rounds` rounds (indices 0..rounds) must not exceed
/// 2^32 of them. Beyond that `algorithm` cannot plan the problem (not applicable).
pub(crate) fn check_rounds(algorithm: &'static str, rounds: usize) -> Result<(), PlanError> {
    if rounds as u64 > u64::from(u32::MAX) + 1 {
        return Err(PlanError::Unsupported {
            algorithm,
            reason: format!("{rounds} rounds do not fit the 32-bit round index"),
        });
    }
    Ok(())
}

/// ⌈log₂ p⌉ (0 for p ≤ 1), the q of the circulant skips.
pub fn ceil_log2(p: usize) -> usize {
    crate::schedule::ceil_log2(p)
}

/// ⌊log₂ p⌋ (0 for p ≤ 1).
pub fn floor_log2(p: usize) -> usize {
    if p <= 1 {
        0
    } else {
        (usize::BITS - 1 - p.leading_zeros()) as usize
    }
}

/// The α-β (Hockney) cost model with LogGP's per-message overhead: a message of m bytes posted
/// as w writes costs `alpha + o * (w - 1) + beta * m` seconds. α is the one-way time of a
/// message of one write (its own overhead at both ends included); each further write of the
/// same message adds o, the software cost of posting it at the sender and completing it at the
/// receiver, which pipelined writes do not hide (docs/plan-model.md).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CostModel {
    /// Latency per message, in seconds.
    pub alpha: f64,
    /// Time per byte, in seconds.
    pub beta: f64,
    /// Overhead of each further write of a message, in seconds (LogGP's o).
    pub o: f64,
}

impl CostModel {
    /// A message of one write.
    pub fn message(&self, bytes: usize) -> f64 {
        self.alpha + self.beta * bytes as f64
    }

    /// A message of `bytes` posted as `writes` writes (at least one).
    pub fn message_writes(&self, bytes: usize, writes: usize) -> f64 {
        self.message(bytes) + self.o * writes.saturating_sub(1) as f64
    }
}

/// A closed-form prediction: rounds and time in the α-β model, priced by rounds (every round
/// costs its slowest message).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    /// Number of rounds.
    pub rounds: u64,
    /// Time in seconds.
    pub time: f64,
}

/// A collective algorithm for one problem.
pub trait Algorithm: Send + Sync {
    /// Short stable name, e.g. `circulant-bcast`.
    fn name(&self) -> &'static str;
    /// The problem this instance solves.
    fn problem(&self) -> &Problem;
    /// Buffer sizes of `rank` (valid rank assumed; see [`Algorithm::rank_plan`]).
    fn buffers(&self, rank: usize) -> BufferSizes;
    /// Local steps before the first round.
    fn setup(&self, _rank: usize) -> Vec<Local> {
        Vec::new()
    }
    /// The rounds of `rank`, in increasing index order (valid rank assumed).
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_>;
    /// The closed-form cost from the seed, priced by rounds.
    fn predict(&self, model: &CostModel) -> Prediction;
    /// Work shared by the plans of all ranks that can fail (building a table); done once,
    /// lazily. [`Algorithm::rank_plan`] returns its error instead of an empty plan.
    fn prepare(&self) -> Result<(), PlanError> {
        Ok(())
    }
    /// Bytes `from` writes to `to` over the whole operation (both ranks valid): what decides
    /// whether the pair takes the eager path, computed alike by both. By default summed from
    /// `from`'s plan; an algorithm that knows it in closed form says so.
    fn bytes_between(&self, from: usize, to: usize) -> Result<usize, PlanError> {
        let plan = self.rank_plan(from)?;
        Ok(plan
            .rounds
            .flat_map(|r| r.sends)
            .filter(|t| t.to == to)
            .map(|t| t.bytes())
            .sum())
    }
    /// The plan of `rank`, with the rank checked and [`Algorithm::prepare`] done.
    fn rank_plan(&self, rank: usize) -> Result<RankPlan<'_>, PlanError> {
        let p = self.problem().p();
        if rank >= p {
            return Err(PlanError::RankOutOfRange { rank, p });
        }
        self.prepare()?;
        Ok(RankPlan {
            rank,
            buffers: self.buffers(rank),
            setup: self.setup(rank),
            rounds: self.rounds(rank),
        })
    }
}

/// Splits `total` bytes into `n` blocks: block b is `[b*s, min((b+1)*s, total))` with
/// `s = ⌈total/n⌉` (the last blocks may be short or empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocks {
    /// Total bytes.
    pub total: usize,
    /// Number of blocks.
    pub n: usize,
    /// Bytes per block, ⌈total/n⌉.
    pub size: usize,
}

impl Blocks {
    /// `total` bytes in `n` blocks (at least one).
    pub fn new(total: usize, n: usize) -> Self {
        let n = n.max(1);
        Blocks {
            total,
            n,
            size: total.div_ceil(n),
        }
    }

    /// Byte range of block `b` as (offset, len).
    pub fn range(&self, b: usize) -> (usize, usize) {
        let start = (b.saturating_mul(self.size)).min(self.total);
        let end = (start.saturating_add(self.size)).min(self.total);
        (start, end - start)
    }
}

/// Number of blocks for the circulant broadcast from Theorem 2 of seed 000: minimising
/// (n − 1 + q)(α + βm/n) gives n = √((q − 1)βm/α) (q ≥ 2), rounded to the better neighbour and
/// kept in 1..=max(m, 1).
pub fn optimal_blocks(p: usize, bytes: usize, model: &CostModel) -> usize {
    let q = ceil_log2(p);
    if bytes <= 1 || q == 0 {
        return 1;
    }
    let cost = |n: usize| (n as f64 - 1.0 + q as f64) * model.message(bytes.div_ceil(n));
    // q = 1 (p = 2): T(n) = nα + βm, best with one block; no latency: as many as bytes.
    let real = if q <= 1 {
        1.0
    } else if model.alpha <= 0.0 {
        bytes as f64
    } else {
        (((q - 1) as f64) * model.beta * bytes as f64 / model.alpha).sqrt()
    };
    let lo = (real.floor() as usize).clamp(1, bytes);
    let hi = (lo + 1).min(bytes);
    if cost(hi) < cost(lo) {
        hi
    } else {
        lo
    }
}
