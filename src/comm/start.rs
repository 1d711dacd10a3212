//! The one path of every call on this rank, from its arguments to a started operation: its
//! own checks, the algorithm and plan (from the plan cache when an earlier call had the same
//! arguments), the full argument check when it is on, the placement of the buffers, then the
//! transport's start. A call started once runs all of it at once; a persistent request runs
//! it up to the plan when it is made ([`Communicator::persist`]) and the rest at each start
//! ([`Communicator::restart`]). A call that the shared segment or the node phases serve has
//! no plan: a persistent request of it keeps the call and starts it anew each time, as the
//! `i*` form does, so that every form of a call runs alike.

use std::sync::Arc;
use std::time::Duration;

use crate::fabric::RegisteredMemory;
use crate::plan::Algorithm;
use crate::transport::{OpStats, Operation, TransportError};

use super::arguments::in_call;
use super::call::{digest, Call, Entered};
use super::nonblocking::Request;
use super::plan_cache::{CallKey, PlanKey, Planned};
use super::staging::{split, Placement};
use super::{Buffer, CommError, Communicator, Payload, PayloadMut, Result};

/// An operation started on the transport, with where its buffers are: everything a
/// [`Request`] holds besides the communicator.
pub(super) struct Started<'a> {
    pub operation: Operation,
    pub algorithm: &'static str,
    pub placement: Placement<'a>,
    /// From the entry into the call to the transport's first post ([`Operation::posting`]).
    pub overhead: Duration,
}

/// When a call's full argument check (`CIRCULANT_CHECK`) runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FullCheck {
    /// With the call, between the choice of its algorithm and its plan.
    WithCall,
    /// At each start of the persistent request made of the call.
    EachStart,
}

/// A call set up once to be started many times: what a persistent request keeps.
#[derive(Clone, Debug)]
pub(crate) struct Persisted {
    /// The call as it is started again (its operation, problem and placement of the data).
    key: PlanKey,
    kept: Kept,
}

/// How a persistent call starts.
#[derive(Clone, Debug)]
pub(super) enum Kept {
    /// Its plan, made once.
    Plan(Arc<Planned>),
    /// As a call of its own on the shared segment or as node phases (named so when the
    /// request was made), which have no plan to keep.
    Call(&'static str),
}

impl Persisted {
    pub fn op(&self) -> &'static str {
        self.key.op
    }

    pub fn algorithm(&self) -> &'static str {
        match &self.kept {
            Kept::Plan(planned) => planned.algorithm,
            Kept::Call(name) => name,
        }
    }

    pub(super) fn kept(&self) -> &Kept {
        &self.kept
    }

    /// The call, to start it anew.
    pub(super) fn call(&self) -> Call<'_> {
        self.key.call()
    }
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

impl Communicator {
    /// Runs one call to completion: as its node phases on the shared segment where they serve
    /// it ([`super::node_phases`]), else on the segment where it serves it, else as a plan
    /// whose request it waits for.
    pub(crate) fn run<S, R>(
        &mut self,
        call: Call<'_>,
        send: Option<&S>,
        recv: Option<&mut R>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        if let Some(name) = self.on_node_phases(&call)? {
            return self
                .start_node_phases(call, name, send, recv, false)?
                .wait();
        }
        // A blocking call on the segment runs there without a request of its own: a small
        // call costs about as much as moving one.
        let entered = Entered::now(self.measures_overhead);
        if let Some(name) = self.on_segment(&call)? {
            return self.run_on_segment(entered, call, name, send, recv);
        }
        self.start_planned(entered, call, send, recv)?.wait()
    }

    /// The segment algorithm that serves `call` ([`Self::segment_serves`]); a refusal gives
    /// the communicator up, so that the peers fail too.
    pub(super) fn on_segment(&mut self, call: &Call<'_>) -> Result<Option<&'static str>> {
        let served = self.segment_serves(call);
        if let Err(err) = &served {
            self.comm_refused(call.op, err);
        }
        served
    }

    /// The node phases that serve `call` ([`Self::node_phases_serve`]); a refusal gives up
    /// the phases' communicators too, where peers called otherwise may wait.
    pub(super) fn on_node_phases(&mut self, call: &Call<'_>) -> Result<Option<&'static str>> {
        let served = self.node_phases_serve(call);
        if let Err(err) = &served {
            self.node_phases_failed(call.op, err);
        }
        served
    }

    /// Starts one call on this rank: as its node phases where they serve it, else as
    /// [`Self::start_plain`].
    pub(crate) fn start<'a, S, R>(
        &'a mut self,
        call: Call<'_>,
        send: Option<&'a S>,
        recv: Option<&'a mut R>,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        if let Some(name) = self.on_node_phases(&call)? {
            return self.start_node_phases(call, name, send, recv, true);
        }
        self.start_plain(call, send, recv)
    }

    /// Starts one call on this rank without node phases (the path of the library's own
    /// exchanges, such as those that split the phases' communicators): on the segment where
    /// it serves, else its plan ([`Self::plan_call`]), then the plan on the given buffers,
    /// staging those that are not registered ([`Self::launch`]).
    pub(crate) fn start_plain<'a, S, R>(
        &'a mut self,
        call: Call<'_>,
        send: Option<&'a S>,
        recv: Option<&'a mut R>,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        // The call's software overhead counts from here (see `Executed::overhead`).
        let entered = Entered::now(self.measures_overhead);
        if let Some(name) = self.on_segment(&call)? {
            return self.start_on_segment(entered, call, name, send, recv);
        }
        self.start_planned(entered, call, send, recv)
    }

    /// [`Self::start`] as a plan.
    pub(super) fn start_planned<'a, S, R>(
        &'a mut self,
        entered: Entered,
        mut call: Call<'_>,
        send: Option<&'a S>,
        recv: Option<&'a mut R>,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let send_mem = send.and_then(|s| s.registered());
        let recv_mem = recv.as_deref().and_then(|r| r.registered());
        let planned = self.plan_call(&mut call, send_mem, recv_mem, FullCheck::WithCall)?;
        self.launch(entered, CallKey::of(&call), &planned, send, recv)
    }

    /// Sets `call` up once for a persistent request on buffers `send` and `recv`, which
    /// every start must pass again ([`Self::restart`]): its plan, or, where the shared
    /// segment or the node phases serve it, this rank's checks of it now and the call anew at
    /// each start. The full argument check runs at each start.
    pub(crate) fn persist<S, R>(
        &mut self,
        mut call: Call<'_>,
        send: Option<&S>,
        recv: Option<&R>,
    ) -> Result<Persisted>
    where
        S: Payload + ?Sized,
        R: Payload + ?Sized,
    {
        let unplanned = match self.on_node_phases(&call)? {
            Some(name) => Some(name),
            None => self.on_segment(&call)?,
        };
        if let Some(name) = unplanned {
            if let Err(err) = self.checks_alone(&mut call) {
                // The phases' communicators too, where they are set up: peers may wait there.
                self.node_phases_failed(call.op, &err);
                return Err(err);
            }
            return Ok(Persisted {
                key: CallKey::of(&call).into_owned(),
                kept: Kept::Call(name),
            });
        }
        let send_mem = send.and_then(|s| s.registered());
        let recv_mem = recv.and_then(|r| r.registered());
        let planned = self.plan_call(&mut call, send_mem, recv_mem, FullCheck::EachStart)?;
        Ok(Persisted {
            key: CallKey::of(&call).into_owned(),
            kept: Kept::Plan(planned),
        })
    }

    /// Starts a persistent call again on its buffers (plain ones staged as in
    /// [`Self::start`]).
    pub(crate) fn restart<'a, S, R>(
        &'a mut self,
        persisted: &Persisted,
        send: Option<&'a S>,
        recv: Option<&'a mut R>,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let Kept::Plan(planned) = &persisted.kept else {
            return self.start(persisted.call(), send, recv);
        };
        let entered = Entered::now(self.measures_overhead);
        let key = persisted.key.view();
        self.check_start(key.op, key.problem, persisted.algorithm())?;
        self.launch(entered, key, planned, send, recv)
    }

    /// Starts a persistent call again on registered buffers its request keeps (Rust's
    /// [`super::Persistent`]), as [`Self::restart`] does; the request keeps the buffers, so
    /// only the operation and its overhead are returned, and [`Self::finish_kept`] completes
    /// it.
    pub(super) fn restart_kept(
        &mut self,
        entered: Entered,
        persisted: &Persisted,
        planned: &Planned,
        send: Option<&Buffer>,
        recv: Option<&mut Buffer>,
    ) -> Result<(Operation, Duration)> {
        let key = persisted.key.view();
        self.check_start(key.op, key.problem, persisted.algorithm())?;
        match self.place_and_start(entered, key, planned, send, recv) {
            Ok(started) => Ok((started.operation, started.overhead)),
            Err(err) => {
                self.comm_refused(key.op, &err);
                Err(err)
            }
        }
    }

    /// Completes an operation [`Self::restart_kept`] started on the same buffers. Registered
    /// buffers are placed as they are (nothing is staged), so placing them again finds what
    /// the start gave the transport.
    pub(super) fn finish_kept(
        &mut self,
        persisted: &Persisted,
        planned: &Planned,
        operation: Operation,
        send: Option<&Buffer>,
        recv: Option<&mut Buffer>,
    ) -> Result<OpStats> {
        let need = planned.prepared.buffers;
        let placement = self.place(persisted.key.view(), need, send, recv)?;
        let (transport, owned) = split(self);
        Ok(transport.finish(operation, placement.views(owned))?)
    }

    /// What a persistent request's start checks before it posts: that the communicator is
    /// not broken, and the full argument check when it is on (a start that fails it is still
    /// consumed on every rank).
    pub(super) fn check_start(
        &mut self,
        op: &'static str,
        problem: &crate::plan::Problem,
        algorithm: &'static str,
    ) -> Result<()> {
        if let Some(why) = self.transport.broken() {
            return Err(TransportError::Broken(why.to_string()).into());
        }
        if !self.config.check {
            return Ok(());
        }
        let agreed = self.agree(op, problem, Ok(algorithm));
        if let Err(err) = &agreed {
            self.comm_refused(op, err);
        }
        agreed
    }

    /// The one function from a call to its prepared, checked plan, whether the call is
    /// started once or kept by a persistent request: this rank's checks (`call.checked`, the
    /// buffers' owner `send` and `recv`, the algorithm), the full argument check when it is
    /// on and `check` says it runs now, then the plan (from the cache, or made and kept
    /// there). A call refused on this rank is still consumed and given up on every rank
    /// ([`crate::transport::Transport::abandon`]), so that no rank pairs the data of one
    /// call with another. The outcome of this rank's checks is taken out of `call`.
    pub(super) fn plan_call(
        &mut self,
        call: &mut Call<'_>,
        send: Option<&RegisteredMemory>,
        recv: Option<&RegisteredMemory>,
        check: FullCheck,
    ) -> Result<Arc<Planned>> {
        if let Some(why) = self.transport.broken() {
            return Err(TransportError::Broken(why.to_string()).into());
        }
        let checked = std::mem::replace(&mut call.checked, Ok(()));
        let planned = self.plan_checked(call, checked, send, recv, check);
        match planned {
            Ok(planned) => Ok(planned),
            Err(err) => {
                self.comm_refused(call.op, &err);
                Err(err)
            }
        }
    }

    fn plan_checked(
        &mut self,
        call: &Call<'_>,
        checked: Result<()>,
        send: Option<&RegisteredMemory>,
        recv: Option<&RegisteredMemory>,
        check: FullCheck,
    ) -> Result<Arc<Planned>> {
        let op = call.op;
        // What varies per call is checked on every call: the buffers' lengths and owner.
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

    /// Starts `planned`, the plan of the call `key`, on its buffers: registered ones as they
    /// are, plain ones staged. A call that fails here is given up on every rank as in
    /// [`Self::plan_call`].
    fn launch<'a, S, R>(
        &'a mut self,
        entered: Entered,
        key: CallKey<'_>,
        planned: &Planned,
        send: Option<&'a S>,
        recv: Option<&'a mut R>,
    ) -> Result<Request<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        match self.place_and_start(entered, key, planned, send, recv) {
            Ok(started) => Ok(Request::new(self, key.op, started, !key.recv_unchanged)),
            Err(err) => {
                self.comm_refused(key.op, &err);
                Err(err)
            }
        }
    }

    fn place_and_start<'a, S, R>(
        &mut self,
        entered: Entered,
        key: CallKey<'_>,
        planned: &Planned,
        send: Option<&'a S>,
        recv: Option<&'a mut R>,
    ) -> Result<Started<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let placement = self.place(key, planned.prepared.buffers, send, recv)?;
        let (transport, owned) = split(self);
        let buffers = placement.views(owned);
        let operation = transport.start(key.op, planned.digest, &planned.prepared, buffers)?;
        Ok(Started {
            overhead: entered.until(operation.posting()),
            operation,
            algorithm: planned.algorithm,
            placement,
        })
    }

    /// Gives up call `op`, which failed with `err` before the transport started it (nothing
    /// happens where the transport is broken already: every failure once the transport
    /// started a call has broken it).
    pub(super) fn comm_refused(&mut self, op: &'static str, err: &CommError) {
        if self.transport.broken().is_none() {
            let why = err.to_string();
            let why = why.strip_prefix(&format!("{op}: ")).unwrap_or(&why);
            self.transport.abandon(op, why);
        }
    }
}
