//! The plan engine: a call as a plan of one-sided writes ([`crate::plan`]) that the transport
//! executes. Its algorithm is a forced one, else the first configured one
//! (`CIRCULANT_ALGORITHM`) that applies, else the fastest in the α-β model — on a job whose
//! nodes hold several ranks each, the node-aware algorithms among them, every candidate priced
//! on the job's layout with the model of each level. The plan comes from the plan cache when
//! an earlier call had the same arguments; plain memory is staged ([`super::staging`]).
//!
//! The path of a call on this engine: this rank's checks, the algorithm and plan, the full
//! argument check when it is on, the placement of the buffers, then the transport's start. A
//! persistent request runs it up to the plan when it is made and the rest at each start.

use std::sync::Arc;
use std::time::Duration;

use crate::plan::{registry, Algorithm, PlanError, Problem};
use crate::sim::estimate::estimate_on;
use crate::sim::price::price_on;
use crate::transport::{OpStats, Operation};

use super::call::{digest, Call, Choice, Entered};
use super::communicator::Communicator;
use super::engine::{Engine, Engines, Kept, Offer, Task};
use super::error::in_call;
use super::error::{CommError, Result};
use super::memory::Memory;
use super::plan_cache::{CallKey, PlanKey, Planned};
use super::staging::Placement;

/// Most rank-rounds (p × predicted rounds) an algorithm is priced on the layout for; beyond
/// that it is estimated ([`estimate_on`]). Pricing is done once per call
/// shape (the plan cache keeps the choice).
const PRICED_RANK_ROUNDS: u64 = 1 << 16;

/// Most rounds and pieces of two nodes' plans read to estimate an algorithm beyond
/// [`PRICED_RANK_ROUNDS`] ([`estimate_on`]); beyond, the closed form across nodes alone.
const ESTIMATE_WORK: u64 = 1 << 22;

/// The names that other engines serve, which no plan has.
const NOT_PLANS: [(&str, &str); 2] = [
    (
        "segment-",
        "the shared segment serves calls, not plans: it has no plan to give",
    ),
    (
        "hier-segment-",
        "the node phases on the shared segment are calls on each node's and the nodes' first \
         ranks' communicators, not a plan",
    ),
];

/// The plan engine (see the module documentation).
pub(crate) struct Plans;

impl Engine for Plans {
    fn names(&self) -> Vec<&'static str> {
        registry::names().collect()
    }

    fn offers(&self, comm: &Communicator, problem: &Problem) -> Result<Vec<Offer>> {
        Ok(comm
            .priced(problem)?
            .into_iter()
            .map(|(time, a)| Offer {
                name: a.name(),
                time,
            })
            .collect())
    }

    /// Every call the engines before it do not take: a name it does not have is refused
    /// when the call is planned.
    fn takes(&self, _comm: &Communicator, _call: &Call<'_>) -> Result<bool> {
        Ok(true)
    }

    fn start(
        &self,
        comm: &mut Communicator,
        mut call: Call<'_>,
        memory: Memory<'_>,
        entered: Entered,
    ) -> Result<Box<dyn Task>> {
        let planned = comm.plan_call(&mut call, &memory, FullCheck::WithCall)?;
        let key = CallKey::of(&call);
        Ok(Box::new(comm.launch(entered, key, &planned, memory)?))
    }

    fn keep(
        &self,
        comm: &mut Communicator,
        mut call: Call<'_>,
        memory: Memory<'_>,
        _engines: Engines,
    ) -> Result<Box<dyn Kept>> {
        let planned = comm.plan_call(&mut call, &memory, FullCheck::EachStart)?;
        // The scratch memory the plan needs now, so that no start registers memory.
        let Communicator {
            transport, staging, ..
        } = &mut *comm;
        if let Err(err) = staging.ensure_scratch(transport, planned.prepared.buffers.scratch) {
            comm.comm_refused(call.op, &err);
            return Err(err);
        }
        Ok(Box::new(KeptPlan {
            key: CallKey::of(&call).into_owned(),
            planned,
        }))
    }
}

/// When a call's full argument check (`CIRCULANT_CHECK`) runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FullCheck {
    /// With the call, between the choice of its algorithm and its plan.
    WithCall,
    /// At each start of the persistent request made of the call.
    EachStart,
}

/// Where a call's plan comes from.
enum Source {
    /// An earlier call with the same arguments.
    Cached(Arc<Planned>),
    /// Chosen now; planned once the argument check (if on) has passed.
    Chosen(Box<dyn Algorithm>),
}

impl Source {
    fn algorithm(&self) -> &'static str {
        match self {
            Source::Cached(planned) => planned.algorithm,
            Source::Chosen(algorithm) => algorithm.name(),
        }
    }
}

/// A plan's operation on the transport.
struct PlanTask {
    /// Taken when it finishes.
    operation: Option<Operation>,
    algorithm: &'static str,
    placement: Placement,
    /// Bytes staged in at the start, and out at the end.
    copied: usize,
    /// Whether a staged receive buffer is copied out at the end (not where the call leaves it
    /// unchanged, as at the broadcast root).
    copy_out: bool,
    overhead: Duration,
    stats: OpStats,
}

impl Task for PlanTask {
    fn algorithm(&self) -> &'static str {
        self.algorithm
    }

    fn overhead(&self) -> Duration {
        self.overhead
    }

    fn progress(
        &mut self,
        comm: &mut Communicator,
        mut memory: Memory<'_>,
        wait: bool,
    ) -> Result<bool> {
        let Communicator {
            transport, staging, ..
        } = comm;
        {
            let Some(operation) = self.operation.as_mut() else {
                return Ok(true);
            };
            let views = staging.views(&self.placement, &memory);
            if !wait && !transport.test(operation, views)? {
                return Ok(false);
            }
        }
        if let Some(operation) = self.operation.take() {
            self.stats = transport.finish(operation, staging.views(&self.placement, &memory))?;
        }
        if self.copy_out && self.placement.stages_out() {
            self.copied += staging.stage_out(&self.placement, &mut memory)?;
        }
        transport.count_copied(self.copied);
        Ok(true)
    }

    fn stats(&self) -> OpStats {
        self.stats
    }
}

/// A persistent request's plan, started again on the request's buffers.
struct KeptPlan {
    /// The call as it is started again (its operation, problem and placement of the data).
    key: PlanKey,
    planned: Arc<Planned>,
}

impl Kept for KeptPlan {
    fn op(&self) -> &'static str {
        self.key.op
    }

    fn algorithm(&self) -> &'static str {
        self.planned.algorithm
    }

    fn start(&self, comm: &mut Communicator, memory: Memory<'_>) -> Result<Box<dyn Task>> {
        let entered = Entered::now(comm.measures_overhead);
        let key = self.key.view();
        comm.check_start(key.op, key.problem, self.planned.algorithm)?;
        Ok(Box::new(comm.launch(
            entered,
            key,
            &self.planned,
            memory,
        )?))
    }
}

impl Communicator {
    /// The one function from a call to its prepared, checked plan, whether the call is
    /// started once or kept by a persistent request: this rank's checks (`call.checked`, the
    /// buffers' owner, the algorithm), the full argument check when it is on and `check` says
    /// it runs now, then the plan (from the cache, or made and kept there). A call refused on
    /// this rank is still consumed and given up on every rank
    /// ([`crate::transport::Transport::abandon`]), so that no rank pairs the data of one call
    /// with another. The outcome of this rank's checks is taken out of `call`.
    fn plan_call(
        &mut self,
        call: &mut Call<'_>,
        memory: &Memory<'_>,
        check: FullCheck,
    ) -> Result<Arc<Planned>> {
        self.usable()?;
        let checked = std::mem::replace(&mut call.checked, Ok(()));
        let planned = self.plan_checked(call, checked, memory, check);
        if let Err(err) = &planned {
            self.comm_refused(call.op, err);
        }
        planned
    }

    fn plan_checked(
        &mut self,
        call: &Call<'_>,
        checked: Result<()>,
        memory: &Memory<'_>,
        check: FullCheck,
    ) -> Result<Arc<Planned>> {
        let op = call.op;
        // What varies per call is checked on every call: the buffers' lengths and owner.
        let send = memory.send.and_then(|s| s.registered);
        let recv = memory.recv.as_ref().and_then(|r| r.registered());
        let source = checked
            .and_then(|()| self.owns(op, "send", send))
            .and_then(|()| self.owns(op, "recv", recv))
            .and_then(|()| match self.plans.get(&CallKey::of(call)) {
                Some(planned) => Ok(Source::Cached(planned)),
                None => self.choose(&call.problem, call.choice).map(Source::Chosen),
            })
            .map_err(|e| in_call(op, e));
        if self.config.check && check == FullCheck::WithCall {
            let name = source
                .as_ref()
                .map(Source::algorithm)
                .map_err(|e| e.to_string());
            self.agree(op, &call.problem, name)?;
        }
        match source? {
            Source::Cached(planned) => Ok(planned),
            Source::Chosen(algorithm) => {
                let plan = algorithm
                    .rank_plan(self.rank())
                    .map_err(|e| in_call(op, e.into()))?;
                let planned = Arc::new(Planned {
                    algorithm: algorithm.name(),
                    prepared: self.transport.prepare_sized(
                        op,
                        algorithm.as_ref(),
                        plan,
                        call.problem.total_bytes(),
                    )?,
                    digest: digest(op, algorithm.name(), &call.problem),
                });
                self.plans
                    .insert(CallKey::of(call).into_owned(), Arc::clone(&planned));
                Ok(planned)
            }
        }
    }

    /// Starts `planned`, the plan of the call `key`, on `memory`: registered buffers as they
    /// are, plain ones staged. A call that fails here is given up on every rank as in
    /// [`Self::plan_call`].
    fn launch(
        &mut self,
        entered: Entered,
        key: CallKey<'_>,
        planned: &Planned,
        memory: Memory<'_>,
    ) -> Result<PlanTask> {
        let started = self.place_and_start(entered, key, planned, &memory);
        if let Err(err) = &started {
            self.comm_refused(key.op, err);
        }
        started
    }

    fn place_and_start(
        &mut self,
        entered: Entered,
        key: CallKey<'_>,
        planned: &Planned,
        memory: &Memory<'_>,
    ) -> Result<PlanTask> {
        let Communicator {
            transport, staging, ..
        } = self;
        let (placement, copied) =
            staging.place(transport, key, planned.prepared.buffers, memory)?;
        let views = staging.views(&placement, memory);
        let operation = transport.start(key.op, planned.digest, &planned.prepared, views)?;
        Ok(PlanTask {
            overhead: entered.until(operation.posting()),
            operation: Some(operation),
            algorithm: planned.algorithm,
            placement,
            copied,
            copy_out: !key.recv_unchanged,
            stats: OpStats::default(),
        })
    }

    /// What a persistent request's start checks before it posts: that the communicator is
    /// not broken, and the full argument check when it is on (a start that fails it is still
    /// consumed on every rank).
    fn check_start(
        &mut self,
        op: &'static str,
        problem: &Problem,
        algorithm: &'static str,
    ) -> Result<()> {
        self.usable()?;
        if !self.config.check {
            return Ok(());
        }
        let agreed = self.agree(op, problem, Ok(algorithm));
        if let Err(err) = &agreed {
            self.comm_refused(op, err);
        }
        agreed
    }

    /// The plan algorithm a call would use for `problem` (where no other engine takes it).
    pub fn choose(&self, problem: &Problem, choice: Choice<'_>) -> Result<Box<dyn Algorithm>> {
        problem.validate()?;
        if let Choice::Named(name) = choice {
            if let Some((_, reason)) = NOT_PLANS.iter().find(|(p, _)| name.starts_with(p)) {
                return Err(CommError::Argument {
                    op: "choose",
                    what: format!("{name}: {reason}"),
                });
            }
            return Ok(self.by_name(name, problem)?);
        }
        // The other engines' names are served before a plan is chosen.
        for name in self
            .config
            .algorithms
            .iter()
            .filter(|n| !NOT_PLANS.iter().any(|(p, _)| n.starts_with(p)))
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

    /// Whether `CIRCULANT_ALGORITHM` forces a plan algorithm that applies to `call`.
    pub(crate) fn forces_a_plan(&self, call: &Call<'_>) -> bool {
        !self.config.algorithms.is_empty()
            && self.config.algorithms.iter().any(|name| {
                !NOT_PLANS.iter().any(|(p, _)| name.starts_with(p))
                    && self.choose(&call.problem, Choice::Named(name)).is_ok()
            })
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
            // bound two nodes' plans and the closed form estimate it.
            let time = if (layout.p() as u64).saturating_mul(closed.rounds) <= PRICED_RANK_ROUNDS {
                price_on(a.as_ref(), layout, &self.levels)?.time
            } else {
                estimate_on(a.as_ref(), layout, &self.levels, ESTIMATE_WORK)?.time
            };
            out.push((time, a));
        }
        Ok(out)
    }
}
