//! Allreduce: the baselines of seed 002 ("All-Reduce and Prefix-Sum Operations" and "Improving
//! Performance of Operations"), recursive doubling and reduce-scatter followed by allgather on
//! the ring, and the circulant reduce-scatter followed by the circulant allgather (Träff
//! 2024b).
//!
//! Received partial results land in fresh scratch slots and every combine writes a fresh
//! destination, so no write ever races with a message still being sent from the same bytes.

use super::parts::Parts;
use super::reduce_scatter::{ring_reduce_scatter_rounds, CirculantScatter};
use super::{
    copy_input, floor_log2, piece, Algorithm, Blocks, Buf, BufferSizes, CostModel, Local,
    PlanError, Prediction, Problem, Reduction, Round,
};
use crate::schedule::{add_mod, sub_mod};

fn allreduce_of(
    problem: &Problem,
    name: &'static str,
) -> Result<(usize, Reduction, usize), PlanError> {
    problem.validate()?;
    match *problem {
        Problem::Allreduce {
            p,
            reduction,
            bytes,
        } => Ok((p, reduction, bytes)),
        _ => Err(PlanError::WrongCollective {
            algorithm: name,
            collective: "allreduce",
        }),
    }
}

/// Recursive-doubling allreduce (seed 002: "uses the pattern of all-to-all broadcast … the
/// message size does not increase", (α + βm) log p). For p not a power of two the first 2·rem
/// ranks (rem = p − 2^⌊log p⌋) pair up before and after: (⌊log p⌋ + 2)(α + βm).
pub struct RecursiveDoublingAllreduce {
    problem: Problem,
    p: usize,
    reduction: Reduction,
    bytes: usize,
}

impl RecursiveDoublingAllreduce {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "recursive-doubling-allreduce";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        let (p, reduction, bytes) = allreduce_of(problem, Self::NAME)?;
        Ok(RecursiveDoublingAllreduce {
            problem: problem.clone(),
            p,
            reduction,
            bytes,
        })
    }

    fn shape(&self) -> (usize, usize) {
        let l = floor_log2(self.p);
        (l, self.p - (1 << l))
    }

    /// Real rank of the doubling participant `nr`.
    fn real(&self, nr: usize) -> usize {
        let (_, rem) = self.shape();
        if nr < rem {
            2 * nr + 1
        } else {
            nr + rem
        }
    }
}

impl Algorithm for RecursiveDoublingAllreduce {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, _rank: usize) -> BufferSizes {
        let (l, _) = self.shape();
        BufferSizes {
            send: self.bytes,
            recv: self.bytes,
            scratch: 2 * (l + 1) * self.bytes,
        }
    }
    fn setup(&self, _rank: usize) -> Vec<Local> {
        if self.p == 1 {
            copy_input(self.bytes)
        } else {
            Vec::new()
        }
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let m = self.bytes;
        let (l, rem) = self.shape();
        let base = u32::from(rem > 0);
        let mut out = Vec::new();
        if self.p == 1 {
            return Box::new(out.into_iter());
        }
        if rank < 2 * rem && rank % 2 == 0 {
            let mut r0 = Round::new(0);
            r0.send(
                rank + 1,
                vec![piece(Buf::Send, 0, Buf::Scratch, 0, m, None)],
            );
            out.push(r0);
            let mut last = Round::new(base + l as u32);
            last.expect(rank + 1, usize::from(m > 0));
            out.push(last);
            out.retain(|r| !r.is_empty());
            return Box::new(out.into_iter());
        }
        let combines = l + usize::from(rank < 2 * rem);
        let mut done = 0;
        let mut acc = (Buf::Send, 0usize);
        let mut after = None;
        let mut combine = |r: &mut Round, slot: usize, acc: &mut (Buf, usize)| {
            done += 1;
            let dst = if done == combines {
                (Buf::Recv, 0)
            } else {
                (Buf::Scratch, (2 * slot + 1) * m)
            };
            if m > 0 {
                r.local.push(Local::Combine {
                    reduction: self.reduction,
                    a: *acc,
                    b: (Buf::Scratch, 2 * slot * m),
                    dst,
                    len: m,
                });
            }
            *acc = dst;
        };
        let nr = if rank < 2 * rem {
            let mut r0 = Round::new(0);
            r0.expect(rank - 1, usize::from(m > 0));
            combine(&mut r0, 0, &mut acc);
            after = Some(0);
            out.push(r0);
            rank / 2
        } else {
            rank - rem
        };
        for i in 0..l {
            let index = base + i as u32;
            let partner = self.real(nr ^ (1 << i));
            let mut r = Round::new(index);
            r.send(
                partner,
                vec![piece(acc.0, acc.1, Buf::Scratch, 2 * (i + 1) * m, m, after)],
            );
            r.expect(partner, usize::from(m > 0));
            combine(&mut r, i + 1, &mut acc);
            after = Some(index);
            out.push(r);
        }
        if rank < 2 * rem {
            let mut r = Round::new(base + l as u32);
            r.send(rank - 1, vec![piece(Buf::Recv, 0, Buf::Recv, 0, m, after)]);
            out.push(r);
        }
        out.retain(|r| !r.is_empty());
        Box::new(out.into_iter())
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        let (l, rem) = self.shape();
        if self.bytes == 0 || self.p == 1 {
            return Prediction {
                rounds: 0,
                time: 0.0,
            };
        }
        let rounds = l + if rem > 0 { 2 } else { 0 };
        Prediction {
            rounds: rounds as u64,
            time: rounds as f64 * model.message(self.bytes),
        }
    }
}

/// Reduce-scatter + allgather allreduce (seed 002: "an all-reduce operation requires an
/// all-to-all reduction and an all-to-all broadcast"), both on the ring so that every p works:
/// 2(p − 1) rounds, 2(p−1)(α + β⌈m/p⌉).
pub struct ReduceScatterAllgather {
    problem: Problem,
    p: usize,
    reduction: Reduction,
    bytes: usize,
}

impl ReduceScatterAllgather {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "reduce-scatter-allgather";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        let (p, reduction, bytes) = allreduce_of(problem, Self::NAME)?;
        Ok(ReduceScatterAllgather {
            problem: problem.clone(),
            p,
            reduction,
            bytes,
        })
    }

    fn seg(&self) -> (Blocks, usize) {
        let size = self.reduction.dtype.size();
        (Blocks::new(self.bytes / size, self.p), size)
    }

    /// Byte range of segment j.
    fn range(&self, j: usize) -> (usize, usize) {
        let (b, size) = self.seg();
        let (o, l) = b.range(j);
        (o * size, l * size)
    }

    fn slot(&self) -> usize {
        let (b, size) = self.seg();
        b.size * size
    }
}

impl Algorithm for ReduceScatterAllgather {
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
            scratch: 2 * self.p.saturating_sub(1) * self.slot(),
        }
    }
    fn setup(&self, _rank: usize) -> Vec<Local> {
        if self.p == 1 {
            copy_input(self.bytes)
        } else {
            Vec::new()
        }
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let p = self.p;
        let steps = p.saturating_sub(1);
        let next = (rank + 1) % p;
        let prev = (rank + p - 1) % p;
        let reduce = ring_reduce_scatter_rounds(
            p,
            rank,
            self.reduction,
            self.slot(),
            move |j| self.range(j),
            self.range(rank).0,
        );
        let gather = (0..steps).filter_map(move |t| {
            let index = (steps + t) as u32;
            let mut r = Round::new(index);
            let (off, len) = self.range((rank + p - t) % p);
            r.send(
                next,
                vec![piece(Buf::Recv, off, Buf::Recv, off, len, Some(index - 1))],
            );
            let (_, ilen) = self.range((rank + 2 * p - 1 - t) % p);
            r.expect(prev, usize::from(ilen > 0));
            (!r.is_empty()).then_some(r)
        });
        Box::new(reduce.chain(gather))
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        if self.bytes == 0 || self.p == 1 {
            return Prediction {
                rounds: 0,
                time: 0.0,
            };
        }
        let rounds = 2 * (self.p - 1);
        Prediction {
            rounds: rounds as u64,
            time: rounds as f64 * model.message(self.slot()),
        }
    }
}

/// Circulant allreduce (Träff 2024b): the circulant reduce-scatter
/// ([`super::reduce_scatter::CirculantReduceScatter`]) leaves part r of the vector, complete, in
/// place in rank r's receive buffer, and the circulant allgather (seed 000, Alg. 7) brings
/// every rank every part: in round q + k rank r sends its parts r … r + w − 1
/// (w = `skips[k+1] − skips[k]`) to r − `skips[k]`. The vector is cut into p parts of whole
/// elements. 2⌈log₂ p⌉ rounds; 2(p − 1) parts sent and received by every rank, p − 1 combined:
/// 2q·α + 2β(p − 1)m/p (+ o for the second piece of a run that wraps around the vector).
/// Every part is reduced once, at its rank, so every rank ends with the same bits.
pub struct CirculantAllreduce {
    problem: Problem,
    scatter: CirculantScatter,
}

impl CirculantAllreduce {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "circulant-allreduce";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        let (p, reduction, bytes) = allreduce_of(problem, Self::NAME)?;
        let parts = Parts::even(bytes, reduction.dtype.size(), p);
        Ok(CirculantAllreduce {
            problem: problem.clone(),
            scatter: CirculantScatter::new(parts, reduction, true)?,
        })
    }

    /// Round q + k of the allgather of rank r.
    fn gather_round(&self, r: usize, k: usize) -> Round {
        let sc = &self.scatter;
        let (p, q) = (sc.p(), sc.q());
        let s = sc.skips.get(k);
        let w = sc.skips.get(k + 1) - s;
        let index = (q + k) as u32;
        let mut round = Round::new(index);
        let pieces = sc
            .parts
            .ranges(r, w)
            .map(|(off, len)| piece(Buf::Recv, off, Buf::Recv, off, len, Some(index - 1)))
            .collect();
        round.send(sub_mod(r, s, p), pieces);
        let from = add_mod(r, s, p);
        round.expect(from, sc.parts.ranges(from, w).count());
        round
    }
}

impl Algorithm for CirculantAllreduce {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        let total = self.scatter.parts.total();
        BufferSizes {
            send: total,
            recv: total,
            scratch: self.scatter.scratch(rank),
        }
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        self.scatter.setup(rank)
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let gather = (0..self.scatter.q())
            .map(move |k| self.gather_round(rank, k))
            .filter(|r| !r.is_empty());
        Box::new(self.scatter.rounds(rank).chain(gather))
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        let sc = &self.scatter;
        let mut out = sc.predict(model);
        for k in 0..sc.q() {
            let w = sc.skips.get(k + 1) - sc.skips.get(k);
            let bytes = sc.parts.widest(w);
            if bytes > 0 {
                out.rounds += 1;
                out.time += model.message_writes(bytes, 1 + usize::from(w >= 2));
            }
        }
        out
    }
}
