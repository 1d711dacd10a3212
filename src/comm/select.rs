//! Which algorithm a call uses: a forced one, else the first configured one
//! (`CIRCULANT_ALGORITHM`) that applies, else the fastest in the α-β model — on a job whose
//! nodes hold several ranks each, the node-aware algorithms among them, every candidate priced
//! on the job's layout with the model of each level.

use crate::plan::registry;
use crate::plan::{Algorithm, PlanError, Problem};
use crate::sim::price::price_on;

/// Most rank-rounds (p × predicted rounds) an algorithm is priced on the layout for; beyond
/// that the closed form with the model across nodes prices it. Pricing is done once per call
/// shape (the plan cache keeps the choice).
const PRICED_RANK_ROUNDS: u64 = 1 << 16;

use super::{Choice, CommError, Communicator, Result};

impl Communicator {
    /// The algorithm a call would use for `problem`.
    pub fn choose(&self, problem: &Problem, choice: Choice<'_>) -> Result<Box<dyn Algorithm>> {
        problem.validate()?;
        if let Choice::Named(name) = choice {
            if let Some(&segment) = super::SEGMENT_ALGORITHMS.iter().find(|&&s| s == name) {
                return Err(CommError::Plan(PlanError::Unsupported {
                    algorithm: segment,
                    reason: "the shared segment serves calls, not plans: it has no plan to \
                             give"
                        .into(),
                }));
            }
            if let Some(&phases) = super::NODE_PHASE_ALGORITHMS.iter().find(|&&s| s == name) {
                return Err(CommError::Plan(PlanError::Unsupported {
                    algorithm: phases,
                    reason: "the node phases on the shared segment are calls on each node's \
                             and the nodes' first ranks' communicators, not a plan"
                        .into(),
                }));
            }
            return Ok(self.by_name(name, problem)?);
        }
        // The segment's names are served before a plan is chosen (`super::segment`).
        for name in self
            .config
            .algorithms
            .iter()
            .filter(|n| !n.starts_with("segment-") && !n.starts_with("hier-segment-"))
        {
            match self.by_name(name, problem) {
                Ok(algorithm) => return Ok(algorithm),
                Err(PlanError::WrongCollective { .. } | PlanError::Unsupported { .. }) => {}
                Err(err) => return Err(err.into()),
            }
        }
        let mut best: Option<(f64, Box<dyn Algorithm>)> = None;
        for (time, algorithm) in self.priced(problem)? {
            // Ties go to the earlier entry of the registry, the circulant algorithms first.
            if best.as_ref().map_or(true, |(t, _)| time < *t) {
                best = Some((time, algorithm));
            }
        }
        best.map(|(_, a)| a).ok_or_else(|| {
            CommError::Plan(PlanError::Unsupported {
                algorithm: "any",
                reason: format!(
                    "no algorithm implements {}",
                    crate::plan::collective_name(problem)
                ),
            })
        })
    }

    /// The algorithms that apply to `problem` on this communicator, with the time the α-β
    /// model predicts for each, fastest first: the names a `Choice::Named` call accepts (the
    /// shared segment's among them where it serves the call, see `super::segment`, and the
    /// node phases on it, `super::node_phases`, which blocking calls accept).
    pub fn algorithms(&self, problem: &Problem) -> Result<Vec<(&'static str, f64)>> {
        let mut out: Vec<(&'static str, f64)> = self
            .priced(problem)?
            .into_iter()
            .map(|(t, a)| (a.name(), t))
            .chain(self.segment_for(problem))
            .chain(self.node_phases_for(problem))
            .collect();
        out.sort_by(|a, b| a.1.total_cmp(&b.1));
        Ok(out)
    }

    /// The algorithm `name` for `problem`: on this communicator's layout where the problem
    /// has its ranks (an intergroup problem of an inter-communicator has those of both groups,
    /// which no node-aware algorithm serves).
    fn by_name(
        &self,
        name: &str,
        problem: &Problem,
    ) -> std::result::Result<Box<dyn Algorithm>, PlanError> {
        if problem.p() == self.nodes.layout().p() {
            registry::by_name_on(name, problem, self.nodes.layout(), &self.levels)
        } else {
            registry::by_name(name, problem, &self.levels.across)
        }
    }

    /// Every applicable algorithm with its predicted time: in closed form on one node or
    /// one rank per node; priced on the layout with both levels' models otherwise (by dataflow,
    /// each node's link carrying the bytes that cross it one message after another:
    /// [`price_on`]).
    fn priced(&self, problem: &Problem) -> Result<Vec<(f64, Box<dyn Algorithm>)>> {
        let layout = self.nodes.layout();
        if problem.p() != layout.p() {
            let across = self.levels.across;
            return Ok(registry::applicable(problem, &across)?
                .into_iter()
                .map(|a| (a.predict(&across).time, a))
                .collect());
        }
        let algorithms = registry::applicable_on(problem, layout, &self.levels)?;
        if !layout.is_hierarchical() {
            let flat = if layout.nodes() > 1 {
                self.levels.across
            } else {
                self.levels.inside
            };
            return Ok(algorithms
                .into_iter()
                .map(|a| (a.predict(&flat).time, a))
                .collect());
        }
        let across = self.levels.across;
        let mut out = Vec::with_capacity(algorithms.len());
        for a in algorithms {
            let closed = a.predict(&across);
            // Walking every rank's plan costs about a microsecond per rank-round: beyond a
            // bound the closed form across nodes stands in.
            let time = if (layout.p() as u64).saturating_mul(closed.rounds) <= PRICED_RANK_ROUNDS {
                price_on(a.as_ref(), layout, &self.levels)?.time
            } else {
                closed.time
            };
            out.push((time, a));
        }
        Ok(out)
    }
}
