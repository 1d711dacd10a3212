//! Every engine, in the order a call's choice asks them, and so every algorithm of every
//! engine: the node phases on the shared segment (several nodes, small calls), the shared
//! segment (one node), then plans of one-sided writes, which take every other call. The
//! library's own exchanges and the steps of node phases run on the engines of one level.

use crate::plan::Problem;

use super::communicator::Communicator;
use super::engine::{Engine, Engines};
use super::error::Result;
use super::phases::NodePhases;
use super::plans::Plans;
use super::segment::Segment;

static ONE_LEVEL: [&dyn Engine; 2] = [&Segment, &Plans];
static EVERY: [&dyn Engine; 3] = [
    &NodePhases {
        steps: Engines(&ONE_LEVEL),
    },
    &Segment,
    &Plans,
];

/// The engines a user's call is chosen among.
pub(crate) static ALL: Engines = Engines(&EVERY);

/// The engines of one level: the segment, then plans.
pub(crate) static ONE_LEVEL_ENGINES: Engines = Engines(&ONE_LEVEL);

/// The name of every algorithm of every engine: those of plans (as `circulant model` lists
/// them), of the shared segment (`segment-…`) and of the node phases (`hier-segment-…`).
/// Each is a name `Choice::Named`, [`Communicator::using`] and `CIRCULANT_ALGORITHM` take;
/// which of them apply to a call, [`Communicator::algorithms`] says.
pub fn algorithm_names() -> Vec<&'static str> {
    ALL.names()
}

impl Communicator {
    /// The algorithms of every engine that apply to `problem` on this communicator, with the
    /// time the α-β model predicts for each, fastest first: the names a forced call accepts
    /// (the shared segment's among them where it serves the call, and the node phases on it).
    /// A call that forces none runs the first of the node phases and the segment that serves
    /// it, else the fastest plan.
    pub fn algorithms(&self, problem: &Problem) -> Result<Vec<(&'static str, f64)>> {
        Ok(ALL
            .offers(self, problem)?
            .into_iter()
            .map(|offer| (offer.name, offer.time))
            .collect())
    }
}
