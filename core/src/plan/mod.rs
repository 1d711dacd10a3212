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
pub mod circulant_reduce;
pub mod compose;
pub mod distribution;
mod error;
pub mod hierarchical;
pub mod intergroup;
pub mod layout;
pub mod merge;
pub mod multilane;
pub mod one_source;
pub mod parts;
pub mod probe;
mod problem;
pub mod reduce;
pub mod reduce_scatter;
pub mod registry;
pub mod ring;
pub mod rootedv;
pub mod roundrobin;
pub mod scan;
pub mod tree;

pub use error::PlanError;
pub use layout::{Layout, LevelCosts};
pub use problem::{checked_sum, collective_name, displacements, Problem};
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

/// The first `len` bytes of the send buffer copied to the receive buffer: all a rank does in
/// a reduction it is alone in.
pub(super) fn copy_input(len: usize) -> Vec<Local> {
    if len == 0 {
        return Vec::new();
    }
    vec![Local::Copy {
        src: Buf::Send,
        src_offset: 0,
        dst: Buf::Recv,
        dst_offset: 0,
        len,
    }]
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
    pipeline_blocks(ceil_log2(p), 0, bytes, model, model)
}

/// Blocks of a broadcast among `nodes` nodes whose blocks go on inside nodes of up to `k`
/// ranks as they arrive: the count that minimises the pipeline among the nodes
/// ((n − 1 + ⌈log₂ nodes⌉) messages of m/n) plus the broadcast of its last block inside a node
/// (⌈log₂ k⌉ messages of m/n), which waits for that block. Among the nodes alone (k = 1) this
/// is [`optimal_blocks`]; with two nodes that count is one block, and a node's ranks would
/// wait for the whole message before it moves on among them.
pub fn across_blocks(nodes: usize, k: usize, bytes: usize, costs: &LevelCosts) -> usize {
    pipeline_blocks(
        ceil_log2(nodes),
        ceil_log2(k),
        bytes,
        &costs.across,
        &costs.inside,
    )
}

/// The n minimising (n − 1 + qa)(α + βm/n) across plus qi(α + βm/n) inside, which is
/// n = √(((qa − 1)β + qi·β_inside)·m/α), rounded to the better neighbour and kept in
/// 1..=max(m, 1). One block where nothing is pipelined (qa = 0, or qa = 1 with nothing
/// inside: T = nα + βm); as many as bytes without latency.
fn pipeline_blocks(
    qa: usize,
    qi: usize,
    bytes: usize,
    across: &CostModel,
    inside: &CostModel,
) -> usize {
    if bytes <= 1 || qa == 0 {
        return 1;
    }
    let cost = |n: usize| {
        let block = bytes.div_ceil(n);
        (n as f64 - 1.0 + qa as f64) * across.message(block) + qi as f64 * inside.message(block)
    };
    let real = if qa == 1 && qi == 0 {
        1.0
    } else if across.alpha <= 0.0 {
        bytes as f64
    } else {
        let per_byte = (qa - 1) as f64 * across.beta + qi as f64 * inside.beta;
        (per_byte * bytes as f64 / across.alpha).sqrt()
    };
    let lo = (real.floor() as usize).clamp(1, bytes);
    let hi = (lo + 1).min(bytes);
    if cost(hi) < cost(lo) {
        hi
    } else {
        lo
    }
}
