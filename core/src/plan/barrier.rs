//! Dissemination barrier: in round k every rank signals r + 2^k and waits for r − 2^k. After
//! ⌈log p⌉ rounds every rank has heard, directly or through others, from every rank. The same
//! doubling pattern as seed 002's all-to-all broadcast on a hypercube, with empty messages.

use super::{ceil_log2, Algorithm, BufferSizes, CostModel, PlanError, Prediction, Problem, Round};

/// Dissemination barrier; ⌈log p⌉ rounds, ⌈log p⌉α.
pub struct DisseminationBarrier {
    problem: Problem,
    p: usize,
}

impl DisseminationBarrier {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "dissemination-barrier";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        problem.validate()?;
        match *problem {
            Problem::Barrier { p } => Ok(DisseminationBarrier {
                problem: problem.clone(),
                p,
            }),
            _ => Err(PlanError::WrongCollective {
                algorithm: Self::NAME,
                collective: "barrier",
            }),
        }
    }
}

impl Algorithm for DisseminationBarrier {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, _rank: usize) -> BufferSizes {
        BufferSizes::default()
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let p = self.p;
        Box::new((0..ceil_log2(p)).map(move |k| {
            let s = 1usize << k;
            let mut r = Round::new(k as u32);
            r.signal((rank + s) % p);
            if let Some(t) = r.sends.last_mut() {
                t.pieces[0].after = (k > 0).then(|| k as u32 - 1);
            }
            r.expect((rank + p - s) % p, 1);
            r
        }))
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        let q = ceil_log2(self.p);
        Prediction {
            rounds: q as u64,
            time: q as f64 * model.alpha,
        }
    }
}
