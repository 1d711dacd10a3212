//! The user API: a [`Communicator`] of the ranks of a job, its collectives, and how it chooses
//! algorithms.
//!
//! ```no_run
//! use circulant::comm::Communicator;
//! let mut comm = Communicator::init()?;
//! let mut data = comm.alloc(1 << 20)?;            // registered: no copies
//! if comm.rank() == 0 { data.fill(7); }
//! comm.bcast(&mut data, 0)?;
//! let counts: Vec<usize> = (0..comm.size()).map(|r| 1000 * (r % 3)).collect();
//! let mine = vec![comm.rank() as u8; counts[comm.rank()]];
//! let mut all = vec![0u8; counts.iter().sum()];   // plain memory works too (staged)
//! comm.allgatherv(&mine[..], &mut all[..], &counts)?;
//! # Ok::<(), circulant::comm::CommError>(())
//! ```
//!
//! The collectives: [`Communicator::barrier`], [`bcast`](Communicator::bcast),
//! [`allgather`](Communicator::allgather), [`allgatherv`](Communicator::allgatherv) (also in
//! place), [`allreduce`](Communicator::allreduce), [`reduce`](Communicator::reduce),
//! [`scan`](Communicator::scan), [`exscan`](Communicator::exscan),
//! [`gather`](Communicator::gather), [`gatherv`](Communicator::gatherv),
//! [`scatter`](Communicator::scatter), [`scatterv`](Communicator::scatterv),
//! [`alltoall`](Communicator::alltoall); the non-reducing ones have a `*_using` form that
//! forces an algorithm, the reducing ones take a choice in their `*_bytes` form.
//! Persistent broadcast and allgatherv ([`Communicator::bcast_init`],
//! [`Communicator::allgatherv_init`], [`Persistent`]) choose, plan and register once and are
//! then started many times. [`Communicator::split`] makes sub-communicators,
//! [`Communicator::intercomm`] an [`InterCommunicator`] between two groups (intergroup
//! allgather(v), seed 003).
//!
//! Every collective must be called by every rank of the communicator in the same order with
//! matching arguments; ranks that disagree (different counts, sizes, roots or algorithms) get
//! an error on every rank instead of corrupted memory. After any error the communicator is
//! unusable: later calls return [`CommError::Transport`] with the first failure.

mod buffer;
mod call;
mod check;
mod config;
mod nonblocking;
mod persistent;
mod split;

use std::sync::Arc;
use std::time::Duration;

pub use buffer::{Buffer, Element, Payload, PayloadMut};
pub use config::{
    Config, ConfigError, ALGORITHM_ENV, ALPHA_ENV, AUTH_KEY_ENV, BETA_ENV, CHECK_ENV, PROVIDER_ENV,
    TIMEOUT_ENV,
};
pub use nonblocking::Request;
pub use persistent::Persistent;
pub use split::{InterCommunicator, Side};

use crate::bootstrap::{Bootstrap, BootstrapError};
use crate::fabric::Access::{self, Local, RemoteWrite};
use crate::fabric::{FabricError, Hints, Info, RegisteredMemory};
use crate::plan::registry;
use crate::plan::{Algorithm, CostModel, PlanError, Problem, ReduceOp, Reduction};
use crate::transport::{Buffers, Card, OpStats, Opened, Transport, TransportError, View};
use call::{digest, Call};

/// Errors of the user API.
#[derive(Debug, thiserror::Error)]
pub enum CommError {
    #[error("bootstrap: {0}")]
    Bootstrap(#[from] BootstrapError),
    #[error("fabric: {0}")]
    Fabric(#[from] FabricError),
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("{0}")]
    Plan(#[from] PlanError),
    #[error("configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("no libfabric provider offers RDM endpoints with RMA and remote CQ data{0}")]
    NoProvider(String),
    #[error("ranks chose different providers: rank {rank} uses {theirs}, this rank {ours} (set FI_PROVIDER the same for every rank)")]
    ProviderMismatch {
        rank: usize,
        theirs: String,
        ours: String,
    },
    #[error("{op}: {what}")]
    Argument { op: &'static str, what: String },
    /// The ranks called an operation with arguments that differ (found by the full check,
    /// `CIRCULANT_CHECK=1`); every rank gets this error.
    #[error("{op}: {what}")]
    Disagree { op: &'static str, what: String },
    /// A persistent request used out of order (start twice, wait without start, buffer
    /// access while the operation runs).
    #[error("{op}: {what}")]
    Request {
        op: &'static str,
        what: &'static str,
    },
}

pub type Result<T> = std::result::Result<T, CommError>;

/// Which algorithm a call uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Choice<'a> {
    /// The fastest in the α-β model for this p and size, unless `CIRCULANT_ALGORITHM` names
    /// one that applies.
    #[default]
    Auto,
    /// This algorithm (a name from `circulant model`).
    Named(&'a str),
}

/// The ranks of a job, connected over a libfabric endpoint.
pub struct Communicator {
    transport: Transport,
    /// The job's bootstrap, shared by the communicators split from the world one: it is
    /// finalized when the last of them is dropped, and only the world communicator uses it.
    job: Arc<Job>,
    config: Config,
    model: CostModel,
    scratch: Option<RegisteredMemory>,
    stage_send: Option<RegisteredMemory>,
    stage_recv: Option<RegisteredMemory>,
    /// Send and receive memory of the argument check (`CIRCULANT_CHECK`).
    check_mem: Option<(RegisteredMemory, RegisteredMemory)>,
    last: Option<Executed>,
}

/// What the last collective ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Executed {
    pub algorithm: &'static str,
    pub stats: OpStats,
}

/// Membership in the launcher's job: leaves it when dropped.
struct Job {
    bootstrap: Bootstrap,
}

impl Drop for Job {
    fn drop(&mut self) {
        // Leaving the job is best effort: a launcher that is gone cannot be told.
        let _ = self.bootstrap.finalize();
    }
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("rank", &self.rank())
            .field("size", &self.size())
            .field("provider", &self.provider())
            .finish()
    }
}

impl Communicator {
    /// Joins the job this process was started in (see [`crate::bootstrap`]; a process started
    /// alone is rank 0 of 1), with the configuration from the environment ([`Config`]).
    pub fn init() -> Result<Communicator> {
        Self::init_with(Config::from_env()?)
    }

    pub fn init_with(config: Config) -> Result<Communicator> {
        Self::init_over(Bootstrap::from_env()?, config)
    }

    /// Rank `rank` of `size` processes that bootstrap through the caller's `allgather` of
    /// fixed-size records: `allgather(send, recv)` must give every rank all ranks' `send`
    /// (the same length everywhere) in rank order in `recv`. For programs that already have
    /// MPI, a TCP store or their own launcher. Every rank must call it.
    pub fn init_oob<F>(rank: usize, size: usize, allgather: F) -> Result<Communicator>
    where
        F: FnMut(&[u8], &mut [u8]) -> std::result::Result<(), String> + Send + 'static,
    {
        let bootstrap = Bootstrap::oob(rank, size, Box::new(allgather))?;
        Self::init_over(bootstrap, Config::from_env()?)
    }

    /// Joins a job through `bootstrap`.
    pub fn init_over(mut bootstrap: Bootstrap, config: Config) -> Result<Communicator> {
        let (rank, size) = (bootstrap.rank(), bootstrap.size());
        // At most two key-value exchanges: the hosts, unless the launcher tells how many nodes
        // the job spans (the provider depends on it), then each rank's provider with its card.
        let one_host = match bootstrap.nodes() {
            Some(nodes) => nodes == 1,
            None => {
                let hosts = bootstrap.exchange("host", hostname().as_bytes())?;
                hosts.iter().all(|h| *h == hosts[0])
            }
        };
        let info = choose_provider(&config, one_host)?;
        let ours = info.provider();
        let opened = Opened::open(&info, rank, size)?;
        // [provider length: 1 byte][provider][card]; provider names are a few bytes long.
        let name = &ours.as_bytes()[..ours.len().min(usize::from(u8::MAX))];
        let card = opened.card()?.to_bytes();
        let mut mine = Vec::with_capacity(1 + name.len() + card.len());
        mine.push(name.len() as u8);
        mine.extend_from_slice(name);
        mine.extend_from_slice(&card);
        let mut cards = Vec::with_capacity(size);
        for (r, entry) in bootstrap.exchange("card", &mine)?.iter().enumerate() {
            let split = entry
                .split_first()
                .filter(|(&n, rest)| rest.len() >= usize::from(n))
                .map(|(&n, rest)| rest.split_at(usize::from(n)));
            match split {
                Some((theirs, card)) if theirs == name => cards.push(Card::from_bytes(card)?),
                _ => {
                    let theirs = split.map_or("(an unreadable card)".into(), |(theirs, _)| {
                        String::from_utf8_lossy(theirs).into_owned()
                    });
                    return Err(CommError::ProviderMismatch {
                        rank: r,
                        theirs,
                        ours,
                    });
                }
            }
        }
        let transport = opened.connect(&cards, config.deadline)?;
        let model = config.model_for(&info.provider());
        let mut comm = Communicator::new(transport, Arc::new(Job { bootstrap }), config, model);
        // Every endpoint is up and every address known before the first collective.
        comm.barrier()?;
        Ok(comm)
    }

    /// A communicator over a connected transport (of the world or of a split).
    fn new(mut transport: Transport, job: Arc<Job>, config: Config, model: CostModel) -> Self {
        transport.set_eager(config.eager_for(&model));
        Communicator {
            transport,
            job,
            config,
            model,
            scratch: None,
            stage_send: None,
            stage_recv: None,
            check_mem: None,
            last: None,
        }
    }

    pub fn rank(&self) -> usize {
        self.transport.rank()
    }

    pub fn size(&self) -> usize {
        self.transport.size()
    }

    /// The libfabric provider in use.
    pub fn provider(&self) -> String {
        self.transport.info().provider()
    }

    /// `"pmi-1"`, `"singleton"` or `"oob"`.
    pub fn launcher(&self) -> &'static str {
        self.job.bootstrap.kind()
    }

    /// The α-β model used to choose algorithms.
    pub fn model(&self) -> CostModel {
        self.model
    }

    /// Sets the α-β model (the same on every rank, or the ranks may choose differently and
    /// fail with a mismatch).
    pub fn set_model(&mut self, model: CostModel) {
        self.model = model;
    }

    /// Deadline of one collective.
    pub fn set_deadline(&mut self, deadline: Duration) {
        self.transport.set_deadline(deadline);
    }

    /// Turns the full argument check on or off (`CIRCULANT_CHECK`): every rank must do the
    /// same, between the same two collectives. Communicators split from this one inherit it.
    pub fn set_check(&mut self, on: bool) {
        self.config.check = on;
    }

    /// Bytes this communicator copied locally so far: plan copy steps and the staging of
    /// plain (unregistered) slices. Stays 0 for broadcast and in-place allgatherv on
    /// [`Buffer`]s.
    pub fn bytes_copied(&self) -> u64 {
        self.transport.bytes_copied()
    }

    /// The algorithm and counts of the last collective.
    pub fn last(&self) -> Option<&Executed> {
        self.last.as_ref()
    }

    /// `len` bytes of registered memory, zeroed: collectives on it copy nothing.
    pub fn alloc(&self, len: usize) -> Result<Buffer> {
        Ok(Buffer::new(self.transport.alloc(len, RemoteWrite)?, len))
    }

    /// Blocks until every rank has called it (dissemination barrier over the fabric).
    pub fn barrier(&mut self) -> Result<()> {
        self.ibarrier()?.wait()
    }

    /// Root's `buf` ends up in every rank's `buf` (same length everywhere).
    pub fn bcast<B: PayloadMut + ?Sized>(&mut self, buf: &mut B, root: usize) -> Result<()> {
        self.bcast_using(buf, root, Choice::Auto)
    }

    /// [`Self::bcast`] with a forced algorithm.
    pub fn bcast_using<B: PayloadMut + ?Sized>(
        &mut self,
        buf: &mut B,
        root: usize,
        choice: Choice<'_>,
    ) -> Result<()> {
        self.ibcast_using(buf, root, choice)?.wait()
    }

    /// Every rank's `send` (all the same length) into `recv` in rank order.
    pub fn allgather<S, R>(&mut self, send: &S, recv: &mut R) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.allgather_using(send, recv, Choice::Auto)
    }

    /// [`Self::allgather`] with a forced algorithm.
    pub fn allgather_using<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.iallgather_using(send, recv, choice)?.wait()
    }

    /// Rank r's `send` (`counts[r]` bytes) into `recv` at the sum of the counts before r.
    pub fn allgatherv<S, R>(&mut self, send: &S, recv: &mut R, counts: &[usize]) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.allgatherv_using(send, recv, counts, Choice::Auto)
    }

    /// [`Self::allgatherv`] with a forced algorithm.
    pub fn allgatherv_using<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        counts: &[usize],
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.iallgatherv_using(send, recv, counts, choice)?.wait()
    }

    /// [`Self::allgatherv`] in place: this rank's contribution is already in `recv` at the sum
    /// of the counts before it. On a registered [`Buffer`] nothing is copied at all.
    pub fn allgatherv_in_place<R>(&mut self, recv: &mut R, counts: &[usize]) -> Result<()>
    where
        R: PayloadMut + ?Sized,
    {
        self.allgatherv_in_place_using(recv, counts, Choice::Auto)
    }

    /// [`Self::allgatherv_in_place`] with a forced algorithm.
    pub fn allgatherv_in_place_using<R>(
        &mut self,
        recv: &mut R,
        counts: &[usize],
        choice: Choice<'_>,
    ) -> Result<()>
    where
        R: PayloadMut + ?Sized,
    {
        self.iallgatherv_in_place_using(recv, counts, choice)?
            .wait()
    }

    /// [`Self::allgather`] in place: this rank's block is already at its place in `recv`.
    pub fn allgather_in_place<R>(&mut self, recv: &mut R) -> Result<()>
    where
        R: PayloadMut + ?Sized,
    {
        self.iallgather_in_place(recv)?.wait()
    }

    /// Every rank's `recv` = `op` over all ranks' `send`, elementwise.
    pub fn allreduce<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
    ) -> Result<()> {
        self.allreduce_using(send, recv, op, Choice::Auto)
    }

    /// [`Self::allreduce`] with a forced algorithm.
    pub fn allreduce_using<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        choice: Choice<'_>,
    ) -> Result<()> {
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.allreduce_bytes::<[u8], [u8]>(send, recv, typed::<T>(op), choice)
    }

    /// [`Self::allreduce`] over raw bytes holding elements of `reduction`'s type.
    pub fn allreduce_bytes<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        reduction: Reduction,
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.iallreduce_bytes(send, recv, reduction, choice)?.wait()
    }

    /// Root's `recv` = `op` over all ranks' `send`; other ranks' `recv` is not touched (it may
    /// be empty there).
    pub fn reduce<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        self.reduce_using(send, recv, op, root, Choice::Auto)
    }

    /// [`Self::reduce`] with a forced algorithm.
    pub fn reduce_using<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        root: usize,
        choice: Choice<'_>,
    ) -> Result<()> {
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.reduce_bytes::<[u8], [u8]>(send, recv, typed::<T>(op), root, choice)
    }

    /// [`Self::reduce_bytes`] with a forced algorithm.
    pub fn reduce_bytes<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        reduction: Reduction,
        root: usize,
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.ireduce_bytes(send, recv, reduction, root, choice)?
            .wait()
    }

    /// Rank r's `recv` = `op` over the `send` of ranks 0..=r.
    pub fn scan<T: Element>(&mut self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        self.scan_using(send, recv, op, Choice::Auto)
    }

    /// [`Self::scan`] with a forced algorithm.
    pub fn scan_using<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        choice: Choice<'_>,
    ) -> Result<()> {
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.scan_bytes::<[u8], [u8]>(send, recv, typed::<T>(op), false, choice)
    }

    /// Rank r's `recv` = `op` over the `send` of ranks 0..r; rank 0's `recv` is not touched.
    pub fn exscan<T: Element>(&mut self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        self.exscan_using(send, recv, op, Choice::Auto)
    }

    /// [`Self::exscan`] with a forced algorithm.
    pub fn exscan_using<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        choice: Choice<'_>,
    ) -> Result<()> {
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.scan_bytes::<[u8], [u8]>(send, recv, typed::<T>(op), true, choice)
    }

    /// [`Self::scan_bytes`] with a forced algorithm.
    pub fn scan_bytes<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        reduction: Reduction,
        exclusive: bool,
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.iscan_bytes(send, recv, reduction, exclusive, choice)?
            .wait()
    }

    /// Every rank's `send` (all the same length) into root's `recv` in rank order; other
    /// ranks' `recv` is not touched (it may be empty there).
    pub fn gather<S, R>(&mut self, send: &S, recv: &mut R, root: usize) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.gather_using(send, recv, root, Choice::Auto)
    }

    /// [`Self::gather`] with a forced algorithm.
    pub fn gather_using<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        root: usize,
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.igather_using(send, recv, root, choice)?.wait()
    }

    /// Block r of root's `send` (p blocks of `recv.len()` bytes) into rank r's `recv`.
    pub fn scatter<S, R>(&mut self, send: &S, recv: &mut R, root: usize) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.scatter_using(send, recv, root, Choice::Auto)
    }

    /// [`Self::scatter`] with a forced algorithm.
    pub fn scatter_using<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        root: usize,
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.iscatter_using(send, recv, root, choice)?.wait()
    }

    /// Rank r's `send` (`counts[r]` bytes) into root's `recv` at the sum of the counts before
    /// r; other ranks' `recv` is not touched (it may be empty there).
    pub fn gatherv<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        counts: &[usize],
        root: usize,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.gatherv_using(send, recv, counts, root, Choice::Auto)
    }

    /// [`Self::gatherv`] with a forced algorithm.
    pub fn gatherv_using<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        counts: &[usize],
        root: usize,
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.igatherv_using(send, recv, counts, root, choice)?
            .wait()
    }

    /// Part r of root's `send` (cut at the counts) into rank r's `recv` (`counts[r]` bytes);
    /// other ranks' `send` is not read (it may be empty there).
    pub fn scatterv<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        counts: &[usize],
        root: usize,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.scatterv_using(send, recv, counts, root, Choice::Auto)
    }

    /// [`Self::scatterv`] with a forced algorithm.
    pub fn scatterv_using<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        counts: &[usize],
        root: usize,
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.iscatterv_using(send, recv, counts, root, choice)?
            .wait()
    }

    /// Block j of rank i's `send` into block i of rank j's `recv` (p blocks each).
    pub fn alltoall<S, R>(&mut self, send: &S, recv: &mut R) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.alltoall_using(send, recv, Choice::Auto)
    }

    /// [`Self::alltoall`] with a forced algorithm.
    pub fn alltoall_using<S, R>(&mut self, send: &S, recv: &mut R, choice: Choice<'_>) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.ialltoall_using(send, recv, choice)?.wait()
    }

    /// The buffers of a rooted v-collective: `own` (which, length) holds this rank's count,
    /// and at the root `whole` holds their sum.
    fn check_rooted(
        &self,
        op: &'static str,
        counts: &[usize],
        root: usize,
        own: (&str, usize),
        whole: (&str, usize),
    ) -> Result<()> {
        let total = self.counts_total(op, counts)?;
        expect_len(op, own.0, own.1, self.own(counts))?;
        if self.rank() == root {
            expect_len(op, whole.0, whole.1, Some(total))?;
        }
        Ok(())
    }

    /// This rank's count (`None` when there is none: the length check then fails).
    fn own(&self, counts: &[usize]) -> Option<usize> {
        counts.get(self.rank()).copied()
    }

    /// (offset, length) of this rank's part of a buffer cut at `counts`; empty when the
    /// counts do not fit (the call is refused then).
    fn own_part(&self, counts: &[usize]) -> (usize, usize) {
        let offset = counts
            .get(..self.rank())
            .and_then(|before| crate::plan::checked_sum(before).ok());
        match (offset, self.own(counts)) {
            (Some(offset), Some(len)) => (offset, len),
            _ => (0, 0),
        }
    }

    /// The sum of per-rank `counts`, checking there is one per rank and the sum fits.
    fn counts_total(&self, op: &'static str, counts: &[usize]) -> Result<usize> {
        if counts.len() != self.size() {
            return Err(argument(
                op,
                format!("{} counts for {} ranks", counts.len(), self.size()),
            ));
        }
        crate::plan::checked_sum(counts)
            .map_err(|_| argument(op, "the counts overflow".to_string()))
    }

    /// One count per rank, and a receive buffer of exactly their sum.
    fn check_counts(&self, op: &'static str, counts: &[usize], recv_len: usize) -> Result<()> {
        let total = self.counts_total(op, counts)?;
        expect_len(op, "recv", recv_len, Some(total))
    }

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

    /// Gives up collective call `op`, refused before it reached the communicator (by a
    /// binding that checks its own arguments, as the C API does): the call is consumed and
    /// every rank gets an error for it, as for a call the communicator refuses itself (see
    /// [`Transport::abandon`]). The communicator is unusable afterwards.
    pub fn refuse(&mut self, op: &'static str, why: &str) {
        self.transport.abandon(op, why);
    }

    /// Runs one call to completion ([`Self::start`], then the request's `wait`).
    fn run<S, R>(
        &mut self,
        call: Call<'_>,
        checked: Result<()>,
        send: Option<&S>,
        recv: Option<&mut R>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.start(call, checked, send, recv)?.wait()
    }

    /// Refuses registered memory of another communicator: its keys mean nothing to this
    /// one's peers.
    fn owns(&self, op: &'static str, which: &str, mem: Option<&RegisteredMemory>) -> Result<()> {
        match mem {
            Some(mem) if !mem.usable_with(self.transport.endpoint()) => Err(argument(
                op,
                format!(
                    "the {which} buffer was allocated by another communicator (use this one's alloc)"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The full argument check (`CIRCULANT_CHECK=1`): every rank's record of this call is
    /// exchanged and compared on every rank; a difference, or a rank that refused its call,
    /// fails the call everywhere with the same message.
    fn agree(
        &mut self,
        op: &'static str,
        problem: &Problem,
        chosen: std::result::Result<&str, String>,
    ) -> Result<()> {
        let record = check::Record::new(op, problem, chosen);
        let p = self.size();
        let exchange = check::exchange_problem(p);
        let algorithm = check::exchange_algorithm(p, &self.model)?;
        let plan = algorithm.rank_plan(self.rank())?;
        let need = plan.buffers;
        let (send, recv) = match self.check_mem.take() {
            Some(mem) => mem,
            None => (
                self.transport.alloc(check::RECORD_BYTES, Local)?,
                self.transport.alloc(p * check::RECORD_BYTES, RemoteWrite)?,
            ),
        };
        let (send, recv) = &*self.check_mem.insert((send, recv));
        ensure(
            &self.transport,
            &mut self.scratch,
            need.scratch,
            RemoteWrite,
        )?;
        send.store(0, &record.to_bytes())?;
        let buffers = Buffers {
            send: Some(View::prefix(send, check::RECORD_BYTES)),
            recv: Some(View::prefix(recv, p * check::RECORD_BYTES)),
            scratch: self.scratch.as_ref().map(|m| View::prefix(m, need.scratch)),
        };
        let digest = digest(check::CHECK_OP, algorithm.name(), &exchange);
        let stats = self
            .transport
            .execute(check::CHECK_OP, digest, plan, buffers)?;
        // The check's own copies are not the user's.
        self.transport.discount_copied(stats.bytes_copied);
        let records: Vec<Option<check::Record>> = recv
            .to_vec()
            .chunks_exact(check::RECORD_BYTES)
            .map(check::Record::from_bytes)
            .collect();
        match check::compare(&records) {
            None => Ok(()),
            Some(what) => {
                self.transport.abandon(op, &what);
                Err(CommError::Disagree { op, what })
            }
        }
    }
}

/// A plan error of a call, named after the operation the user called.
fn in_call(op: &'static str, err: CommError) -> CommError {
    match err {
        CommError::Plan(e) => argument(op, e.to_string()),
        other => other,
    }
}

/// The reduction of `op` over `T` (checked when the call is planned).
fn typed<T: Element>(op: ReduceOp) -> Reduction {
    Reduction {
        dtype: T::DTYPE,
        op,
    }
}

/// Makes `slot` hold registered memory of at least `len` bytes with `access` (kept for later
/// calls).
fn ensure(
    transport: &Transport,
    slot: &mut Option<RegisteredMemory>,
    len: usize,
    access: Access,
) -> Result<()> {
    if len > 0 && slot.as_ref().map_or(true, |m| m.len() < len) {
        // Grow by doubling so that a sequence of growing calls registers O(log) times.
        let len = len.max(slot.as_ref().map_or(0, |m| m.len() * 2));
        *slot = Some(transport.alloc(len, access)?);
    }
    Ok(())
}

fn argument(op: &'static str, what: String) -> CommError {
    CommError::Argument { op, what }
}

fn expect_len(op: &'static str, which: &str, have: usize, want: Option<usize>) -> Result<()> {
    match want {
        Some(want) if want == have => Ok(()),
        Some(want) => Err(argument(
            op,
            format!("the {which} buffer has {have} bytes, {want} expected"),
        )),
        None => Err(argument(op, format!("the {which} buffer size overflows"))),
    }
}

/// This host's name, to tell whether all ranks share one node.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// The provider: the configured one, else `shm` when every rank is on this host, else the
/// first RMA-capable network provider. Network providers are pinned to loopback when every
/// rank is on one host.
fn choose_provider(config: &Config, one_host: bool) -> Result<Info> {
    let query = |name: Option<&str>, loopback: bool| -> Result<Vec<Info>> {
        let mut hints = Hints::rdm_rma();
        hints.auth_key = config.auth_key.clone();
        if let Some(name) = name {
            hints = hints.provider(name);
        }
        if loopback && name != Some("shm") {
            hints = hints.node("127.0.0.1");
        }
        Ok(Info::query(&hints)?
            .into_iter()
            .filter(|i| i.cq_data_size() >= 4)
            .collect())
    };
    if let Some(name) = config.provider.as_deref() {
        let found = query(Some(name), one_host && config.loopback)?;
        return found
            .into_iter()
            .next()
            .ok_or_else(|| CommError::NoProvider(format!(" named {name}")));
    }
    if one_host {
        if let Some(info) = query(Some("shm"), false)?.into_iter().next() {
            return Ok(info);
        }
    }
    query(None, one_host && config.loopback)?
        .into_iter()
        .find(|i| i.provider() != "shm")
        .ok_or_else(|| CommError::NoProvider(String::new()))
}
