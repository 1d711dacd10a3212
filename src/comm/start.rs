//! How one call starts on this rank: its own checks, the algorithm and plan (from the plan
//! cache when an earlier call had the same arguments), the full argument check when it is
//! on, the placement of the buffers, then the transport's start.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::plan::Algorithm;
use crate::transport::{Operation, TransportError};

use super::arguments::in_call;
use super::call::{digest, Call};
use super::nonblocking::Request;
use super::plan_cache::{CallKey, Planned};
use super::staging::{split, Placement};
use super::{CommError, Communicator, Payload, PayloadMut, Result};

/// An operation started on the transport, with where its buffers are: everything a
/// [`Request`] holds besides the communicator.
pub(super) struct Started<'a> {
    pub operation: Operation,
    pub algorithm: &'static str,
    pub placement: Placement<'a>,
    /// From the entry into [`Communicator::start`] to the transport's first post
    /// ([`Operation::posting`]).
    pub overhead: Duration,
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
    /// Runs one call to completion ([`Self::start`], then the request's `wait`).
    pub(super) fn run<S, R>(
        &mut self,
        call: Call<'_>,
        send: Option<&S>,
        recv: Option<&mut R>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.start(call, send, recv)?.wait()
    }

    /// Starts one call on this rank: its own checks (`call.checked`, the buffers' owner, the
    /// algorithm), the full argument check when it is on, then the plan on the given buffers,
    /// staging those that are not registered. A call refused on this rank is still consumed
    /// and given up on every rank ([`crate::transport::Transport::abandon`]), so that no rank
    /// pairs the data of one call with another.
    pub(super) fn start<'a, S, R>(
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
        let entered = Instant::now();
        let (op, copy_out) = (call.op, !call.recv_unchanged);
        match self.begin(call, entered, send, recv) {
            Ok(started) => Ok(Request::new(self, op, started, copy_out)),
            Err(err) => {
                // Every failure once the transport started the call has broken it, so a
                // transport still whole means the call was refused before it started (the
                // argument check's own exchange may have run): the peers still count on it.
                self.comm_refused(op, &err);
                Err(err)
            }
        }
    }

    /// Gives up call `op`, which failed with `err` before the transport started it (nothing
    /// happens where the transport is broken already).
    pub(super) fn comm_refused(&mut self, op: &'static str, err: &CommError) {
        if self.transport.broken().is_none() {
            let why = err.to_string();
            let why = why.strip_prefix(&format!("{op}: ")).unwrap_or(&why);
            self.transport.abandon(op, why);
        }
    }

    fn begin<'a, S, R>(
        &mut self,
        mut call: Call<'_>,
        entered: Instant,
        send: Option<&'a S>,
        recv: Option<&'a mut R>,
    ) -> Result<Started<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        if let Some(why) = self.transport.broken() {
            return Err(TransportError::Broken(why.to_string()).into());
        }
        let op = call.op;
        // What varies per call is checked on every call: the buffers' lengths and owner.
        let checked = std::mem::replace(&mut call.checked, Ok(()));
        let source = checked
            .and_then(|()| self.owns(op, "send", send.and_then(|s| s.registered())))
            .and_then(|()| self.owns(op, "recv", recv.as_ref().and_then(|r| r.registered())))
            .and_then(|()| match self.plans.get(&CallKey::of(&call)) {
                Some(planned) => Ok(Source::Cached(planned)),
                None => self.choose(&call.problem, call.choice).map(Source::Chosen),
            })
            .map_err(|e| in_call(op, e));
        if self.config.check {
            let name = source
                .as_ref()
                .map(Source::algorithm)
                .map_err(|e| e.to_string());
            self.agree(op, &call.problem, name)?;
        }
        let planned = match source? {
            Source::Cached(planned) => planned,
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
                    .insert(CallKey::of(&call).to_owned(), Arc::clone(&planned));
                planned
            }
        };
        let placement = self.place(&call, planned.prepared.buffers, send, recv)?;
        let (transport, owned) = split(self);
        let buffers = placement.views(owned);
        let operation = transport.start(op, planned.digest, &planned.prepared, buffers)?;
        Ok(Started {
            overhead: operation.posting().saturating_duration_since(entered),
            operation,
            algorithm: planned.algorithm,
            placement,
        })
    }
}
