//! Which algorithm a call uses: a forced one, else the first configured one
//! (`CIRCULANT_ALGORITHM`) that applies, else the fastest in the α-β model.

use crate::plan::registry;
use crate::plan::{Algorithm, PlanError, Problem};

use super::{Choice, CommError, Communicator, Result};

impl Communicator {
    /// The algorithm a call would use for `problem`.
    pub fn choose(&self, problem: &Problem, choice: Choice<'_>) -> Result<Box<dyn Algorithm>> {
        problem.validate()?;
        if let Choice::Named(name) = choice {
            return Ok(registry::by_name(name, problem, &self.model)?);
        }
        for name in &self.config.algorithms {
            match registry::by_name(name, problem, &self.model) {
                Ok(algorithm) => return Ok(algorithm),
                Err(PlanError::WrongCollective { .. } | PlanError::Unsupported { .. }) => {}
                Err(err) => return Err(err.into()),
            }
        }
        let mut best: Option<(f64, Box<dyn Algorithm>)> = None;
        for algorithm in registry::applicable(problem, &self.model)? {
            // Ties go to the earlier entry of the registry, the circulant algorithms first.
            let time = algorithm.predict(&self.model).time;
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
    /// model predicts for each, fastest first: the names a `Choice::Named` call accepts.
    pub fn algorithms(&self, problem: &Problem) -> Result<Vec<(&'static str, f64)>> {
        let mut out: Vec<(&'static str, f64)> = registry::applicable(problem, &self.model)?
            .into_iter()
            .map(|a| (a.name(), a.predict(&self.model).time))
            .collect();
        out.sort_by(|a, b| a.1.total_cmp(&b.1));
        Ok(out)
    }
}
