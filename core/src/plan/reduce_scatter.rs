//! Reduce-scatter: every rank contributes a vector cut into p parts, and rank r ends with part
//! r reduced over all ranks (equal parts: `ReduceScatterBlock`; parts of given counts:
//! `ReduceScatter`).
//!
//! - [`CirculantReduceScatter`] (Träff 2024b): ⌈log₂ p⌉ rounds on the circulant graph, each
//!   rank sending, receiving and combining p − 1 parts. Rank r addresses part j by its position
//!   i = (j − r) mod p. In round t (k = q − 1 − t, largest skip first) it sends its partials
//!   of positions `[skips[k], skips[k+1])` to r + `skips[k]` and combines the
//!   w = `skips[k+1] − skips[k]` partials it receives from r − `skips[k]` (their positions
//!   `skips[k]…`, its own 0…w − 1) into its own; afterwards it never touches positions
//!   ≥ `skips[k]`. Before round t the partials of part j are held by the `skips[k+1]` ranks
//!   j, j − 1, …, and their contributors partition all ranks; after the last round (skip 1)
//!   rank j alone holds part j, complete. It is the regular allgather (seed 000, Alg. 7)
//!   reversed in time and direction. q(α + o) + β·Σ_t (the widest w consecutive parts).
//! - [`RingReduceScatter`] (seed 002): the ring, p − 1 rounds of one part each, the bandwidth
//!   baseline.
//!
//! Received partials land in fresh scratch, and each combine writes fresh bytes: the partials a
//! rank receives in round t, then what it combines them into. Every element is combined in the
//! order the plan fixes (own partial ⊕ received one), so the bits of a result do not depend
//! on timing. Merged contributor sets are not contiguous in rank order: the operators are
//! taken to be commutative (every [`ReduceOp`](super::ReduceOp) is; floating-point sums and
//! products are associative only up to rounding).

use std::sync::OnceLock;

use super::parts::Parts;
use super::{
    copy_input, piece, push_piece, Algorithm, Buf, BufferSizes, CostModel, Local, Piece, PlanError,
    Prediction, Problem, Reduction, Round,
};
use crate::schedule::{add_mod, sub_mod, Skips};

/// The reduction and the parts of a reduce-scatter problem.
pub(crate) fn reduce_scatter_of(
    problem: &Problem,
    name: &'static str,
) -> Result<(Reduction, Parts), PlanError> {
    problem.validate()?;
    match problem {
        Problem::ReduceScatterBlock {
            p,
            reduction,
            block,
        } => Ok((
            *reduction,
            Parts::Even {
                p: *p,
                each: *block,
                unit: reduction.dtype.size(),
                longer: 0,
            },
        )),
        Problem::ReduceScatter { reduction, counts } => Ok((*reduction, Parts::counts(counts))),
        _ => Err(PlanError::WrongCollective {
            algorithm: name,
            collective: "reduce-scatter",
        }),
    }
}

/// Appends a combine, joining it to the previous one where all three ranges continue it.
fn push_combine(out: &mut Vec<Local>, step: Local) {
    let Local::Combine {
        reduction,
        a,
        b,
        dst,
        len,
    } = step
    else {
        out.push(step);
        return;
    };
    if len == 0 {
        return;
    }
    if let Some(Local::Combine {
        reduction: r0,
        a: a0,
        b: b0,
        dst: d0,
        len: l0,
    }) = out.last_mut()
    {
        let continues = |x: (Buf, usize), y: (Buf, usize)| x.0 == y.0 && x.1 + *l0 == y.1;
        if *r0 == reduction && continues(*a0, a) && continues(*b0, b) && continues(*d0, dst) {
            *l0 += len;
            return;
        }
    }
    out.push(step);
}

/// The circulant reduce-scatter's rounds of every rank (module documentation), also the first
/// half of the circulant allreduce.
pub(crate) struct CirculantScatter {
    pub(crate) parts: Parts,
    pub(crate) reduction: Reduction,
    pub(crate) skips: Skips,
    /// Each rank's result goes to its part's offset of the receive buffer (an allreduce), not
    /// to offset 0 (a reduce-scatter).
    pub(crate) in_place: bool,
    /// Per round, the most bytes any rank sends (computed on first use).
    widest: OnceLock<Vec<usize>>,
}

/// Where a rank holds a partial: buffer, offset, and the round after which it is held.
type Held = (Buf, usize, Option<u32>);

impl CirculantScatter {
    pub(crate) fn new(
        parts: Parts,
        reduction: Reduction,
        in_place: bool,
    ) -> Result<Self, PlanError> {
        let skips = Skips::new(parts.p())?;
        Ok(CirculantScatter {
            parts,
            reduction,
            skips,
            in_place,
            widest: OnceLock::new(),
        })
    }

    pub(crate) fn p(&self) -> usize {
        self.parts.p()
    }

    pub(crate) fn q(&self) -> usize {
        self.skips.q()
    }

    /// The skip and the width (positions sent and combined) of round t.
    fn round(&self, t: usize) -> (usize, usize) {
        let k = self.q() - 1 - t;
        let s = self.skips.get(k);
        (s, self.skips.get(k + 1) - s)
    }

    /// Scratch offsets of rank r's areas: round t's received partials at `areas[t]`, what
    /// they are combined into right after them.
    fn areas(&self, r: usize) -> Vec<usize> {
        let mut areas = Vec::with_capacity(self.q() + 1);
        let mut at = 0;
        for t in 0..self.q() {
            areas.push(at);
            at += 2 * self.parts.run_bytes(r, self.round(t).1);
        }
        areas.push(at);
        areas
    }

    /// Scratch bytes of rank r (the last round combines into the receive buffer).
    pub(crate) fn scratch(&self, r: usize) -> usize {
        let end = self.areas(r)[self.q()];
        end - if self.q() > 0 { self.parts.len(r) } else { 0 }
    }

    /// Where rank r's result goes in its receive buffer.
    pub(crate) fn result_at(&self, r: usize) -> usize {
        if self.in_place {
            self.parts.at(r)
        } else {
            0
        }
    }

    /// Where rank r (with `areas`) holds its partial of position i at the start of round t:
    /// where the last round before t that combined it put it, or its input.
    fn held(&self, r: usize, areas: &[usize], t: usize, i: usize) -> Held {
        let p = self.p();
        match (0..t).rev().find(|&u| i < self.round(u).1) {
            Some(u) => {
                let width = self.parts.run_bytes(r, self.round(u).1);
                let at = areas[u] + width + self.parts.run_bytes(r, i);
                (Buf::Scratch, at, Some(u as u32))
            }
            None => (Buf::Send, self.parts.at(add_mod(r, i, p)), None),
        }
    }

    /// What rank r sends in round t: its target and the pieces.
    fn sends(&self, r: usize, areas: &[usize], t: usize) -> (usize, Vec<Piece>) {
        let p = self.p();
        let (s, w) = self.round(t);
        let to = add_mod(r, s, p);
        let into = self.areas(to)[t];
        let mut pieces = Vec::new();
        let mut off = 0;
        for i in s..s + w {
            let len = self.parts.len(add_mod(r, i, p));
            let (buf, at, after) = self.held(r, areas, t, i);
            push_piece(
                &mut pieces,
                piece(buf, at, Buf::Scratch, into + off, len, after),
            );
            off += len;
        }
        (to, pieces)
    }

    /// Round t of rank r (`areas` its own).
    fn round_of(&self, r: usize, areas: &[usize], t: usize) -> Round {
        let p = self.p();
        let (s, w) = self.round(t);
        let mut round = Round::new(t as u32);
        let (to, pieces) = self.sends(r, areas, t);
        round.send(to, pieces);
        let from = sub_mod(r, s, p);
        round.expect(from, self.sends(from, &self.areas(from), t).1.len());
        let (base, last) = (areas[t], t + 1 == self.q());
        let out = base + self.parts.run_bytes(r, w);
        let mut off = 0;
        for i in 0..w {
            let len = self.parts.len(add_mod(r, i, p));
            let (buf, at, _) = self.held(r, areas, t, i);
            let dst = if last {
                (Buf::Recv, self.result_at(r))
            } else {
                (Buf::Scratch, out + off)
            };
            push_combine(
                &mut round.local,
                Local::Combine {
                    reduction: self.reduction,
                    a: (buf, at),
                    b: (Buf::Scratch, base + off),
                    dst,
                    len,
                },
            );
            off += len;
        }
        round
    }

    /// The q rounds of rank r, rounds 0..q.
    pub(crate) fn rounds(&self, r: usize) -> impl Iterator<Item = Round> + Send + '_ {
        let areas = self.areas(r);
        (0..self.q())
            .map(move |t| self.round_of(r, &areas, t))
            .filter(|round| !round.is_empty())
    }

    /// Copies rank 0's part into place where there is nothing to combine (p = 1).
    pub(crate) fn setup(&self, r: usize) -> Vec<Local> {
        let len = self.parts.len(r);
        if self.q() > 0 || len == 0 {
            return Vec::new();
        }
        vec![Local::Copy {
            src: Buf::Send,
            src_offset: self.parts.at(r),
            dst: Buf::Recv,
            dst_offset: self.result_at(r),
            len,
        }]
    }

    /// The most bytes a rank sends in each round.
    fn widest(&self) -> &[usize] {
        self.widest
            .get_or_init(|| {
                (0..self.q())
                    .map(|t| self.parts.widest(self.round(t).1))
                    .collect()
            })
            .as_slice()
    }

    /// Writes of round t's messages at most: the first round's run of inputs wraps around the
    /// end of the vector; a later round's partials lie in the round before's area, but for
    /// the last position where `skips[k+2]` is odd (the round before combined one position
    /// fewer), a piece of its own unless it is the only one.
    fn writes(&self, t: usize) -> usize {
        let (_, w) = self.round(t);
        if t == 0 {
            1 + usize::from(w >= 2)
        } else {
            let k = self.q() - 1 - t;
            1 + usize::from(self.skips.get(k + 2) % 2 == 1 && w >= 2)
        }
    }

    /// Rounds and time of the q rounds: each costs its widest message.
    pub(crate) fn predict(&self, model: &CostModel) -> Prediction {
        let mut out = Prediction {
            rounds: 0,
            time: 0.0,
        };
        for (t, &bytes) in self.widest().iter().enumerate() {
            if bytes > 0 {
                out.rounds += 1;
                out.time += model.message_writes(bytes, self.writes(t));
            }
        }
        out
    }
}

/// Circulant reduce-scatter, regular and irregular (Träff 2024b; module documentation).
pub struct CirculantReduceScatter {
    problem: Problem,
    scatter: CirculantScatter,
}

impl CirculantReduceScatter {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "circulant-reduce-scatter";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments
    /// are invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        let (reduction, parts) = reduce_scatter_of(problem, Self::NAME)?;
        Ok(CirculantReduceScatter {
            problem: problem.clone(),
            scatter: CirculantScatter::new(parts, reduction, false)?,
        })
    }
}

impl Algorithm for CirculantReduceScatter {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        BufferSizes {
            send: self.scatter.parts.total(),
            recv: self.scatter.parts.len(rank),
            scratch: self.scatter.scratch(rank),
        }
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        self.scatter.setup(rank)
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        Box::new(self.scatter.rounds(rank))
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        self.scatter.predict(model)
    }
}

/// The ring reduce-scatter's rounds of one rank (seed 002): in round t rank r sends its partial
/// of part (r − t − 1) mod p to r + 1 and combines the partial of part (r − t − 2) mod p it
/// receives from r − 1 with its own input; after p − 1 rounds it holds part r, complete,
/// which the last combine writes to `result_at` of its receive buffer. `range(j)` is part j's
/// (offset, len); scratch holds 2(p − 1) slots of `slot` bytes.
pub(crate) fn ring_reduce_scatter_rounds<'a>(
    p: usize,
    rank: usize,
    reduction: Reduction,
    slot: usize,
    range: impl Fn(usize) -> (usize, usize) + Send + 'a,
    result_at: usize,
) -> impl Iterator<Item = Round> + Send + 'a {
    let steps = p.saturating_sub(1);
    let next = add_mod(rank, 1 % p, p);
    let prev = sub_mod(rank, 1 % p, p);
    (0..steps).filter_map(move |t| {
        let mut r = Round::new(t as u32);
        let (off, len) = range(sub_mod(rank, (t + 1) % p, p));
        let src = if t == 0 {
            piece(Buf::Send, off, Buf::Scratch, 0, len, None)
        } else {
            piece(
                Buf::Scratch,
                (steps + t - 1) * slot,
                Buf::Scratch,
                t * slot,
                len,
                Some(t as u32 - 1),
            )
        };
        r.send(next, vec![src]);
        let (ioff, ilen) = range(sub_mod(rank, (t + 2) % p, p));
        r.expect(prev, usize::from(ilen > 0));
        if ilen > 0 {
            let dst = if t + 1 == steps {
                (Buf::Recv, result_at)
            } else {
                (Buf::Scratch, (steps + t) * slot)
            };
            r.local.push(Local::Combine {
                reduction,
                a: (Buf::Send, ioff),
                b: (Buf::Scratch, t * slot),
                dst,
                len: ilen,
            });
        }
        (!r.is_empty()).then_some(r)
    })
}

/// Ring reduce-scatter (seed 002, the first half of its ring allreduce), regular and
/// irregular: p − 1 rounds, (p − 1)(α + β·(the longest part)).
pub struct RingReduceScatter {
    problem: Problem,
    reduction: Reduction,
    parts: Parts,
    slot: usize,
}

impl RingReduceScatter {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "ring-reduce-scatter";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments
    /// are invalid, or if its scratch (2(p − 1) slots of the longest part) cannot be addressed.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        let (reduction, parts) = reduce_scatter_of(problem, Self::NAME)?;
        let slot = parts.longest();
        slot.checked_mul(2 * parts.p())
            .ok_or_else(|| PlanError::Unsupported {
                algorithm: Self::NAME,
                reason: "its scratch of 2(p − 1) longest parts cannot be addressed".into(),
            })?;
        Ok(RingReduceScatter {
            problem: problem.clone(),
            reduction,
            parts,
            slot,
        })
    }
}

impl Algorithm for RingReduceScatter {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        BufferSizes {
            send: self.parts.total(),
            recv: self.parts.len(rank),
            scratch: 2 * self.parts.p().saturating_sub(1) * self.slot,
        }
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        if self.parts.p() > 1 {
            return Vec::new();
        }
        copy_input(self.parts.len(rank))
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let parts = &self.parts;
        Box::new(ring_reduce_scatter_rounds(
            parts.p(),
            rank,
            self.reduction,
            self.slot,
            move |j| (parts.at(j), parts.len(j)),
            0,
        ))
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        let p = self.parts.p();
        if self.parts.is_empty() || p == 1 {
            return Prediction {
                rounds: 0,
                time: 0.0,
            };
        }
        let rounds = p - 1;
        Prediction {
            rounds: rounds as u64,
            time: rounds as f64 * model.message(self.slot),
        }
    }
}
