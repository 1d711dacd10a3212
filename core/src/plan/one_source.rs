//! An allgatherv whose bytes all come from one rank is that rank's broadcast: every rank ends
//! up with the one block, at offset 0 of its receive buffer (the blocks before it are
//! empty). [`OneSource`] runs any broadcast algorithm as such an allgatherv, so the
//! broadcast's schedules (round-optimal, node-aware) compete for it in the automatic choice
//! beside the allgatherv's own, by the same prices.

use super::allgather::own_copy;
use super::{
    displacements, Algorithm, BufferSizes, CostModel, Local, PlanError, Prediction, Problem,
    RankPlan, Round,
};

/// The broadcast that solves `problem`: an allgatherv with exactly one non-empty block.
pub fn as_broadcast(problem: &Problem) -> Option<Problem> {
    let Problem::Allgatherv { counts } = problem else {
        return None;
    };
    let mut sources = counts.iter().enumerate().filter(|(_, &c)| c > 0);
    let (root, &bytes) = sources.next()?;
    if sources.next().is_some() {
        return None;
    }
    Some(Problem::Broadcast {
        p: counts.len(),
        root,
        bytes,
    })
}

/// A broadcast algorithm run as the allgatherv it solves: the source copies its block into
/// its receive buffer, then the broadcast's rounds run on that buffer. It keeps the
/// broadcast's name: that is what runs.
pub struct OneSource {
    problem: Problem,
    counts: Vec<usize>,
    broadcast: Box<dyn Algorithm>,
}

impl OneSource {
    /// `broadcast` (an algorithm for [`as_broadcast`] of `problem`) as `problem`.
    pub fn new(problem: &Problem, broadcast: Box<dyn Algorithm>) -> Result<Self, PlanError> {
        match (problem, as_broadcast(problem)) {
            (Problem::Allgatherv { counts }, Some(b)) if &b == broadcast.problem() => {
                Ok(OneSource {
                    problem: problem.clone(),
                    counts: counts.clone(),
                    broadcast,
                })
            }
            _ => Err(PlanError::Unsupported {
                algorithm: broadcast.name(),
                reason: "an allgatherv runs as a broadcast only where one rank has all its bytes"
                    .into(),
            }),
        }
    }
}

impl Algorithm for OneSource {
    fn name(&self) -> &'static str {
        self.broadcast.name()
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        BufferSizes {
            send: self.counts[rank],
            ..self.broadcast.buffers(rank)
        }
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        let mut steps = own_copy(&self.counts, &displacements(&self.counts), rank);
        steps.extend(self.broadcast.setup(rank));
        steps
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        self.broadcast.rounds(rank)
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        self.broadcast.predict(model)
    }
    fn prepare(&self) -> Result<(), PlanError> {
        self.broadcast.prepare()
    }
    fn bytes_between(&self, from: usize, to: usize) -> Result<usize, PlanError> {
        self.broadcast.bytes_between(from, to)
    }
    // The broadcast's own plan, built once (a composite's `setup` and `rounds` alone build it
    // twice and hide its error), with the source's copy first.
    fn rank_plan(&self, rank: usize) -> Result<RankPlan<'_>, PlanError> {
        let mut plan = self.broadcast.rank_plan(rank)?;
        let mut setup = own_copy(&self.counts, &displacements(&self.counts), rank);
        setup.append(&mut plan.setup);
        plan.setup = setup;
        plan.buffers.send = self.counts[rank];
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_non_empty_block_is_a_broadcast() {
        let one = |counts: Vec<usize>| as_broadcast(&Problem::Allgatherv { counts });
        assert_eq!(
            one(vec![0, 0, 7, 0]),
            Some(Problem::Broadcast {
                p: 4,
                root: 2,
                bytes: 7
            })
        );
        assert_eq!(one(vec![0, 0, 0]), None);
        assert_eq!(one(vec![1, 0, 1]), None);
        assert_eq!(
            as_broadcast(&Problem::Broadcast {
                p: 2,
                root: 0,
                bytes: 3
            }),
            None
        );
    }
}
