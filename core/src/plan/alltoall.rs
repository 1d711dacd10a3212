//! Pairwise-exchange all-to-all (seed 002, "All-to-All Personalized Communication on a
//! Hypercube: Optimal Algorithm"): p − 1 rounds, each rank exchanging one block with one
//! partner. For p a power of two the partner in round j is r XOR j as in the seed; otherwise
//! rank r sends to r + j and receives from r − j, which is congestion-free on a fully
//! connected network too. (p − 1)(α + βb).

use super::{
    piece, Algorithm, Buf, BufferSizes, CostModel, Local, PlanError, Prediction, Problem, Round,
};

/// Pairwise-exchange all-to-all: p − 1 rounds, each rank exchanging one block with one partner.
pub struct PairwiseAlltoall {
    problem: Problem,
    p: usize,
    block: usize,
}

impl PairwiseAlltoall {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "pairwise-alltoall";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        problem.validate()?;
        match *problem {
            Problem::Alltoall { p, block } => Ok(PairwiseAlltoall {
                problem: problem.clone(),
                p,
                block,
            }),
            _ => Err(PlanError::WrongCollective {
                algorithm: Self::NAME,
                collective: "alltoall",
            }),
        }
    }

    /// (send-to, receive-from) of `rank` in round j (1 ≤ j < p).
    fn partners(&self, rank: usize, j: usize) -> (usize, usize) {
        let p = self.p;
        if p.is_power_of_two() {
            (rank ^ j, rank ^ j)
        } else {
            ((rank + j) % p, (rank + p - j) % p)
        }
    }
}

impl Algorithm for PairwiseAlltoall {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, _rank: usize) -> BufferSizes {
        BufferSizes {
            send: self.p * self.block,
            recv: self.p * self.block,
            scratch: 0,
        }
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        if self.block == 0 {
            return Vec::new();
        }
        vec![Local::Copy {
            src: Buf::Send,
            src_offset: rank * self.block,
            dst: Buf::Recv,
            dst_offset: rank * self.block,
            len: self.block,
        }]
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let b = self.block;
        Box::new((1..self.p).filter_map(move |j| {
            let (to, from) = self.partners(rank, j);
            let mut r = Round::new(j as u32 - 1);
            r.send(
                to,
                vec![piece(Buf::Send, to * b, Buf::Recv, rank * b, b, None)],
            );
            r.expect(from, usize::from(b > 0));
            (!r.is_empty()).then_some(r)
        }))
    }
    fn bytes_between(&self, from: usize, to: usize) -> Result<usize, PlanError> {
        Ok(if from == to { 0 } else { self.block })
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        if self.block == 0 || self.p == 1 {
            return Prediction {
                rounds: 0,
                time: 0.0,
            };
        }
        Prediction {
            rounds: (self.p - 1) as u64,
            time: (self.p - 1) as f64 * model.message(self.block),
        }
    }
}
