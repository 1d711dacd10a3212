//! The engines that run collective calls, and the one choice among them.
//!
//! An engine is a way of running calls on this rank: a plan of one-sided writes, the shared
//! segment of a node, or node phases on the segment around a plan among the nodes. Each lists
//! its algorithms with the model's time ([`Engine::offers`]), says whether it takes a call
//! ([`Engine::takes`]: a name of its own that the call forces, or its rule), and starts the
//! call as a [`Task`] that the call's holder progresses on the call's memory until it is
//! complete. [`Engines`] is an ordered list of them: the first that takes a call runs it,
//! and the plans, last, take every call that no other takes. `comm.algorithms(…)`, forcing
//! by name and the automatic choice all read the same list (its order and the engines'
//! rules: docs/architecture.md, "Engines").

use std::time::Duration;

use crate::plan::Problem;
use crate::transport::{OpStats, TransportError};

use super::call::{Call, Entered};
use super::check::Exchange;
use super::communicator::{Communicator, Executed};
use super::error::in_call;
use super::error::{CommError, Result};
use super::memory::Memory;
use super::plan_cache::{CallKey, PlanKey};

/// An algorithm an engine offers for a problem, with the time the model gives it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Offer {
    pub name: &'static str,
    pub time: f64,
}

/// A way of running collective calls (see the module documentation).
pub(crate) trait Engine: Sync {
    /// Every algorithm it may offer.
    fn names(&self) -> Vec<&'static str>;

    /// Its algorithms that apply to `problem` on `comm`, with the model's time of each.
    fn offers(&self, comm: &Communicator, problem: &Problem) -> Result<Vec<Offer>>;

    /// Whether it runs `call`: where the call forces a name, whether the name is its own and
    /// serves the call (an error where it is its own and cannot); else whether its rule takes
    /// the call. Every rank decides alike from the call's arguments.
    fn takes(&self, comm: &Communicator, call: &Call<'_>) -> Result<bool>;

    /// Starts `call`, which it takes, on `memory` (the memory every progress is given again).
    fn start(
        &self,
        comm: &mut Communicator,
        call: Call<'_>,
        memory: Memory<'_>,
        entered: Entered,
    ) -> Result<Box<dyn Task>>;

    /// Runs `call` to its end on `memory` and records it as the communicator's last.
    fn run(
        &self,
        comm: &mut Communicator,
        call: Call<'_>,
        mut memory: Memory<'_>,
        entered: Entered,
    ) -> Result<()> {
        let mut task = self.start(comm, call, memory.reborrow(), entered)?;
        task.progress(comm, memory, true)?;
        comm.last = Some(task.executed());
        Ok(())
    }

    /// Sets `call`, which it takes, up to be started many times on the same registered
    /// `memory` (a persistent request). An engine that keeps nothing of a call (no plan)
    /// checks it now and starts it anew at each start through `engines`, the same choice as
    /// any call's ([`Self::anew`]), so that every form of a call runs alike.
    fn keep(
        &self,
        comm: &mut Communicator,
        call: Call<'_>,
        memory: Memory<'_>,
        engines: Engines,
    ) -> Result<Box<dyn Kept>>;

    /// [`Self::keep`] for an engine that keeps nothing: `call`, checked now on this rank,
    /// as `name`.
    fn anew(
        &self,
        comm: &mut Communicator,
        mut call: Call<'_>,
        name: &'static str,
        engines: Engines,
    ) -> Result<Box<dyn Kept>> {
        if let Err(err) = comm.checks_alone(&mut call) {
            self.refuse(comm, call.op, &err);
            return Err(err);
        }
        Ok(Box::new(Anew {
            key: CallKey::of(&call).into_owned(),
            name,
            engines,
        }))
    }

    /// Gives up call `op` on this rank after `err`, before or while it runs, so that the peers
    /// fail too: the communicator, and any other the engine's calls run on.
    fn refuse(&self, comm: &mut Communicator, op: &'static str, err: &CommError) {
        comm.comm_refused(op, err);
    }
}

/// A call started on an engine, without its memory.
pub(crate) trait Task: Send {
    /// The algorithm it runs.
    fn algorithm(&self) -> &'static str;

    /// Its software overhead ([`Executed::overhead`]).
    fn overhead(&self) -> Duration;

    /// Progresses it on `memory`, the memory it started on (`wait`: to its end); true once
    /// it is complete.
    fn progress(&mut self, comm: &mut Communicator, memory: Memory<'_>, wait: bool)
        -> Result<bool>;

    /// What it did, once complete.
    fn stats(&self) -> OpStats;

    /// The record of it as the communicator's last call.
    fn executed(&self) -> Executed {
        Executed {
            algorithm: self.algorithm(),
            stats: self.stats(),
            overhead: self.overhead(),
        }
    }
}

/// A call set up once and started many times on the same registered memory.
pub(crate) trait Kept: Send {
    /// The operation (`"bcast"`, ...).
    fn op(&self) -> &'static str;

    /// The algorithm it was set up with.
    fn algorithm(&self) -> &'static str;

    /// Starts it once more on `memory`.
    fn start(&self, comm: &mut Communicator, memory: Memory<'_>) -> Result<Box<dyn Task>>;
}

/// A kept call started anew at each start, through the engines that chose it.
struct Anew {
    key: PlanKey,
    name: &'static str,
    engines: Engines,
}

impl Kept for Anew {
    fn op(&self) -> &'static str {
        self.key.op
    }

    fn algorithm(&self) -> &'static str {
        self.name
    }

    fn start(&self, comm: &mut Communicator, memory: Memory<'_>) -> Result<Box<dyn Task>> {
        self.engines.start(comm, self.key.call(), memory)
    }
}

/// The engines a communicator runs calls with, in the order they are asked.
#[derive(Clone, Copy)]
pub(crate) struct Engines(pub &'static [&'static dyn Engine]);

impl Engines {
    /// The engine that runs `call`: the first that takes it. A refusal gives the call up on
    /// every rank.
    pub fn choose(self, comm: &mut Communicator, call: &Call<'_>) -> Result<&'static dyn Engine> {
        for &engine in self.0 {
            match engine.takes(comm, call) {
                Ok(true) => return Ok(engine),
                Ok(false) => {}
                Err(err) => {
                    engine.refuse(comm, call.op, &err);
                    return Err(err);
                }
            }
        }
        let err = in_call(
            call.op,
            CommError::Argument {
                op: call.op,
                what: "no engine runs this call".into(),
            },
        );
        comm.comm_refused(call.op, &err);
        Err(err)
    }

    /// Starts `call` on `memory`.
    pub fn start(
        self,
        comm: &mut Communicator,
        call: Call<'_>,
        memory: Memory<'_>,
    ) -> Result<Box<dyn Task>> {
        // The call's software overhead counts from here (see `Executed::overhead`).
        let entered = Entered::now(comm.measures_overhead);
        self.choose(comm, &call)?.start(comm, call, memory, entered)
    }

    /// Runs `call` to its end on `memory`.
    pub fn run(self, comm: &mut Communicator, call: Call<'_>, memory: Memory<'_>) -> Result<()> {
        let entered = Entered::now(comm.measures_overhead);
        self.choose(comm, &call)?.run(comm, call, memory, entered)
    }

    /// Sets `call` up for a persistent request on `memory`.
    pub fn keep(
        self,
        comm: &mut Communicator,
        call: Call<'_>,
        memory: Memory<'_>,
    ) -> Result<Box<dyn Kept>> {
        self.choose(comm, &call)?.keep(comm, call, memory, self)
    }

    /// Every algorithm of every engine that applies to `problem` on `comm`, fastest first.
    pub fn offers(self, comm: &Communicator, problem: &Problem) -> Result<Vec<Offer>> {
        let mut all = Vec::new();
        for engine in self.0 {
            all.extend(engine.offers(comm, problem)?);
        }
        all.sort_by(|a, b| a.time.total_cmp(&b.time));
        Ok(all)
    }

    /// Every algorithm of every engine.
    pub fn names(self) -> Vec<&'static str> {
        self.0.iter().flat_map(|e| e.names()).collect()
    }
}

impl Communicator {
    /// Gives up call `op`, which failed with `err` before the transport started it (nothing
    /// happens where the transport is broken already: every failure once the transport
    /// started a call has broken it).
    pub(crate) fn comm_refused(&mut self, op: &'static str, err: &CommError) {
        if self.transport.broken().is_none() {
            let why = err.to_string();
            let why = why.strip_prefix(&format!("{op}: ")).unwrap_or(&why);
            self.transport.abandon(op, why);
        }
    }

    /// The full argument check (`CIRCULANT_CHECK=1`) of a call of `op` on `problem` that
    /// this rank runs with `chosen` (or refused, with the reason).
    pub(crate) fn agree(
        &mut self,
        op: &'static str,
        problem: &Problem,
        chosen: std::result::Result<&str, String>,
    ) -> Result<()> {
        let Communicator {
            transport,
            staging,
            checker,
            levels,
            plans,
            ..
        } = self;
        let on = Exchange {
            transport,
            staging,
            model: &levels.across,
            keep_plan: plans.capacity() > 0,
        };
        checker.agree(on, op, problem, chosen)
    }

    /// This rank's checks of a call that runs without a plan of its own (the call's, and
    /// those of the problem a plan's choice makes: a root in range, a reduction defined for
    /// its type), compared with every rank's under `CIRCULANT_CHECK` as `name`: an error if
    /// the comparison failed, else this rank's outcome, which the caller refuses or runs.
    pub(crate) fn checks_agreed(&mut self, call: &mut Call<'_>, name: &str) -> Result<Result<()>> {
        let op = call.op;
        let checked = self.checks_alone(call);
        if self.config.check {
            self.agree(
                op,
                &call.problem,
                checked.as_ref().map(|_| name).map_err(|e| e.to_string()),
            )?;
        }
        Ok(checked)
    }

    /// This rank's checks of a call that runs without a plan (see [`Self::checks_agreed`]),
    /// taken out of `call`.
    pub(crate) fn checks_alone(&self, call: &mut Call<'_>) -> Result<()> {
        let op = call.op;
        std::mem::replace(&mut call.checked, Ok(())).and_then(|()| {
            call.problem
                .validate()
                .map_err(|e| in_call(op, CommError::Plan(e)))
        })
    }

    /// The communicator's transport, unless a failure broke it.
    pub(crate) fn usable(&self) -> Result<()> {
        match self.transport.broken() {
            Some(why) => Err(TransportError::Broken(why.to_string()).into()),
            None => Ok(()),
        }
    }
}
