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
mod config;
mod persistent;
mod split;

use std::sync::Arc;
use std::time::Duration;

pub use buffer::{Buffer, Element, Payload, PayloadMut};
pub use config::{
    Config, ConfigError, ALGORITHM_ENV, ALPHA_ENV, BETA_ENV, PROVIDER_ENV, TIMEOUT_ENV,
};
pub use persistent::Persistent;
pub use split::{InterCommunicator, Side};

use crate::bootstrap::{Bootstrap, BootstrapError};
use crate::fabric::{FabricError, Hints, Info, RegisteredMemory};
use crate::plan::registry;
use crate::plan::{Algorithm, CostModel, PlanError, Problem, ReduceOp, Reduction};
use crate::transport::wire::Digest;
use crate::transport::{Buffers, Card, OpStats, Opened, Transport, TransportError, View};

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
        let mut bootstrap = Bootstrap::from_env()?;
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
        let mut comm = Communicator {
            transport,
            job: Arc::new(Job { bootstrap }),
            config,
            model,
            scratch: None,
            stage_send: None,
            stage_recv: None,
            last: None,
        };
        // Every endpoint is up and every address known before the first collective.
        comm.barrier()?;
        Ok(comm)
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

    /// `"pmi-1"` or `"singleton"`.
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
        Ok(Buffer::new(self.transport.alloc(len)?, len))
    }

    /// Blocks until every rank has called it (dissemination barrier over the fabric).
    pub fn barrier(&mut self) -> Result<()> {
        let problem = Problem::Barrier { p: self.size() };
        self.run::<[u8], [u8]>("barrier", problem, Choice::Auto, None, None, false)
    }

    /// Root's `buf` ends up in every rank's `buf` (same length everywhere).
    pub fn bcast<B: PayloadMut + ?Sized>(&mut self, buf: &mut B, root: usize) -> Result<()> {
        self.bcast_using(buf, root, Choice::Auto)
    }

    pub fn bcast_using<B: PayloadMut + ?Sized>(
        &mut self,
        buf: &mut B,
        root: usize,
        choice: Choice<'_>,
    ) -> Result<()> {
        let problem = Problem::Broadcast {
            p: self.size(),
            root,
            bytes: buf.bytes().len(),
        };
        let copy_in = self.rank() == root;
        self.run::<[u8], B>("bcast", problem, choice, None, Some(buf), copy_in)
    }

    /// Every rank's `send` (all the same length) into `recv` in rank order.
    pub fn allgather<S, R>(&mut self, send: &S, recv: &mut R) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.allgather_using(send, recv, Choice::Auto)
    }

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
        let (p, block) = (self.size(), send.bytes().len());
        expect_len(
            "allgather",
            "recv",
            recv.bytes().len(),
            p.checked_mul(block),
        )?;
        let problem = Problem::Allgather { p, block };
        self.run("allgather", problem, choice, Some(send), Some(recv), false)
    }

    /// Rank r's `send` (`counts[r]` bytes) into `recv` at the sum of the counts before r.
    pub fn allgatherv<S, R>(&mut self, send: &S, recv: &mut R, counts: &[usize]) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.allgatherv_using(send, recv, counts, Choice::Auto)
    }

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
        let op = "allgatherv";
        self.check_counts(op, counts, recv.bytes().len())?;
        expect_len(op, "send", send.bytes().len(), Some(counts[self.rank()]))?;
        let problem = Problem::Allgatherv {
            counts: counts.to_vec(),
        };
        self.run(op, problem, choice, Some(send), Some(recv), false)
    }

    /// [`Self::allgatherv`] in place: this rank's contribution is already in `recv` at the sum
    /// of the counts before it. On a registered [`Buffer`] nothing is copied at all.
    pub fn allgatherv_in_place<R>(&mut self, recv: &mut R, counts: &[usize]) -> Result<()>
    where
        R: PayloadMut + ?Sized,
    {
        self.allgatherv_in_place_using(recv, counts, Choice::Auto)
    }

    pub fn allgatherv_in_place_using<R>(
        &mut self,
        recv: &mut R,
        counts: &[usize],
        choice: Choice<'_>,
    ) -> Result<()>
    where
        R: PayloadMut + ?Sized,
    {
        let op = "allgatherv";
        self.check_counts(op, counts, recv.bytes().len())?;
        let offset: usize = counts[..self.rank()].iter().sum();
        let mine = (offset, counts[self.rank()]);
        let problem = Problem::Allgatherv {
            counts: counts.to_vec(),
        };
        self.run_in::<[u8], R>(op, problem, choice, None, Some(recv), false, Some(mine))
    }

    /// [`Self::allgather`] in place: this rank's block is already at its place in `recv`.
    pub fn allgather_in_place<R>(&mut self, recv: &mut R) -> Result<()>
    where
        R: PayloadMut + ?Sized,
    {
        let p = self.size();
        let len = recv.bytes().len();
        if len % p != 0 {
            return Err(argument(
                "allgather",
                format!("recv of {len} bytes is not {p} equal blocks"),
            ));
        }
        let block = len / p;
        let problem = Problem::Allgather { p, block };
        let mine = (self.rank() * block, block);
        self.run_in::<[u8], R>(
            "allgather",
            problem,
            Choice::Auto,
            None,
            Some(recv),
            false,
            Some(mine),
        )
    }

    /// Every rank's `recv` = `op` over all ranks' `send`, elementwise.
    pub fn allreduce<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
    ) -> Result<()> {
        let reduction = Reduction::new(T::DTYPE, op)?;
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.allreduce_bytes::<[u8], [u8]>(send, recv, reduction, Choice::Auto)
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
        let bytes = send.bytes().len();
        expect_len("allreduce", "recv", recv.bytes().len(), Some(bytes))?;
        let problem = Problem::Allreduce {
            p: self.size(),
            reduction,
            bytes,
        };
        self.run("allreduce", problem, choice, Some(send), Some(recv), false)
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
        let reduction = Reduction::new(T::DTYPE, op)?;
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.reduce_bytes::<[u8], [u8]>(send, recv, reduction, root, Choice::Auto)
    }

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
        let bytes = send.bytes().len();
        if self.rank() == root {
            expect_len("reduce", "recv", recv.bytes().len(), Some(bytes))?;
        }
        let problem = Problem::Reduce {
            p: self.size(),
            root,
            reduction,
            bytes,
        };
        self.run("reduce", problem, choice, Some(send), Some(recv), false)
    }

    /// Rank r's `recv` = `op` over the `send` of ranks 0..=r.
    pub fn scan<T: Element>(&mut self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        let reduction = Reduction::new(T::DTYPE, op)?;
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.scan_bytes::<[u8], [u8]>(send, recv, reduction, false, Choice::Auto)
    }

    /// Rank r's `recv` = `op` over the `send` of ranks 0..r; rank 0's `recv` is not touched.
    pub fn exscan<T: Element>(&mut self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        let reduction = Reduction::new(T::DTYPE, op)?;
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.scan_bytes::<[u8], [u8]>(send, recv, reduction, true, Choice::Auto)
    }

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
        let name = if exclusive { "exscan" } else { "scan" };
        let bytes = send.bytes().len();
        expect_len(name, "recv", recv.bytes().len(), Some(bytes))?;
        let problem = Problem::Scan {
            p: self.size(),
            reduction,
            bytes,
            exclusive,
        };
        let copy_in = exclusive && self.rank() == 0;
        self.run(name, problem, choice, Some(send), Some(recv), copy_in)
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
        let (p, block) = (self.size(), send.bytes().len());
        if self.rank() == root {
            expect_len("gather", "recv", recv.bytes().len(), p.checked_mul(block))?;
        }
        let problem = Problem::Gather { p, root, block };
        self.run("gather", problem, choice, Some(send), Some(recv), false)
    }

    /// Block r of root's `send` (p blocks of `recv.len()` bytes) into rank r's `recv`.
    pub fn scatter<S, R>(&mut self, send: &S, recv: &mut R, root: usize) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.scatter_using(send, recv, root, Choice::Auto)
    }

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
        let (p, block) = (self.size(), recv.bytes().len());
        if self.rank() == root {
            expect_len("scatter", "send", send.bytes().len(), p.checked_mul(block))?;
        }
        let problem = Problem::Scatter { p, root, block };
        self.run("scatter", problem, choice, Some(send), Some(recv), false)
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
        let op = "gatherv";
        let problem = Problem::Gatherv {
            root,
            counts: counts.to_vec(),
        };
        let total = self.check_rooted(op, &problem, counts)?;
        expect_len(op, "send", send.bytes().len(), Some(counts[self.rank()]))?;
        if self.rank() == root {
            expect_len(op, "recv", recv.bytes().len(), Some(total))?;
        }
        self.run(op, problem, choice, Some(send), Some(recv), false)
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
        let op = "scatterv";
        let problem = Problem::Scatterv {
            root,
            counts: counts.to_vec(),
        };
        let total = self.check_rooted(op, &problem, counts)?;
        expect_len(op, "recv", recv.bytes().len(), Some(counts[self.rank()]))?;
        if self.rank() == root {
            expect_len(op, "send", send.bytes().len(), Some(total))?;
        }
        self.run(op, problem, choice, Some(send), Some(recv), false)
    }

    /// A rooted problem with one count per rank and the root in range; the counts' sum.
    fn check_rooted(&self, op: &'static str, problem: &Problem, counts: &[usize]) -> Result<usize> {
        let total = self.counts_total(op, counts)?;
        problem.validate()?;
        Ok(total)
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

    /// Block j of rank i's `send` into block i of rank j's `recv` (p blocks each).
    pub fn alltoall<S, R>(&mut self, send: &S, recv: &mut R) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.alltoall_using(send, recv, Choice::Auto)
    }

    pub fn alltoall_using<S, R>(&mut self, send: &S, recv: &mut R, choice: Choice<'_>) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let p = self.size();
        let len = send.bytes().len();
        if len % p != 0 {
            return Err(argument(
                "alltoall",
                format!("send of {len} bytes is not {p} equal blocks"),
            ));
        }
        expect_len("alltoall", "recv", recv.bytes().len(), Some(len))?;
        let problem = Problem::Alltoall { p, block: len / p };
        self.run("alltoall", problem, choice, Some(send), Some(recv), false)
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

    /// Plans `problem` for this rank and runs it on the given buffers, staging those that are
    /// not registered.
    fn run<S, R>(
        &mut self,
        op: &'static str,
        problem: Problem,
        choice: Choice<'_>,
        send: Option<&S>,
        recv: Option<&mut R>,
        copy_in_recv: bool,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.run_in(op, problem, choice, send, recv, copy_in_recv, None)
    }

    /// [`Self::run`], where `send_in_recv` = (offset, length) says the send data is that part
    /// of the receive buffer (in place).
    #[allow(clippy::too_many_arguments)]
    fn run_in<S, R>(
        &mut self,
        op: &'static str,
        problem: Problem,
        choice: Choice<'_>,
        send: Option<&S>,
        mut recv: Option<&mut R>,
        copy_in_recv: bool,
        send_in_recv: Option<(usize, usize)>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let algorithm = self.choose(&problem, choice)?;
        let plan = algorithm.rank_plan(self.rank())?;
        let need = plan.buffers;
        let digest = digest(op, algorithm.name(), &problem);

        ensure(&self.transport, &mut self.scratch, need.scratch)?;
        let mut copied = 0usize;

        let send_bytes = send.map_or(&[][..], |s| s.bytes());
        let send_direct = send.and_then(|s| s.registered()).filter(|_| need.send > 0);
        if send_direct.is_none() && need.send > 0 && send_in_recv.is_none() {
            ensure(&self.transport, &mut self.stage_send, need.send)?;
            if let Some(stage) = &self.stage_send {
                stage.store(0, &send_bytes[..need.send.min(send_bytes.len())])?;
                copied += send_bytes.len().min(need.send);
            }
        }

        let user_len = recv.as_ref().map_or(0, |r| r.bytes().len());
        let recv_direct = recv
            .as_ref()
            .and_then(|r| r.registered())
            .filter(|m| m.len() >= need.recv)
            .is_some();
        // Only what the plan receives is staged: a rank that receives nothing (a non-root of
        // reduce or gather) keeps its buffer as it was.
        let recv_len = need.recv;
        let staged = !recv_direct && recv_len > 0;
        let user_part = recv_len.min(user_len);
        if staged {
            ensure(&self.transport, &mut self.stage_recv, recv_len)?;
            if let (Some(stage), Some(r)) = (&self.stage_recv, recv.as_ref()) {
                match send_in_recv {
                    // In place: only this rank's part is input, the plan writes the rest.
                    Some((offset, len)) => {
                        let part = r.bytes().get(offset..offset + len).ok_or_else(|| {
                            argument(op, "the in-place part lies outside recv".to_string())
                        })?;
                        stage.store(offset, part)?;
                        copied += len;
                    }
                    None if copy_in_recv => {
                        stage.store(0, &r.bytes()[..user_part])?;
                        copied += user_part;
                    }
                    None => {}
                }
            }
        }

        let stats = {
            let recv_view = if recv_len == 0 {
                None
            } else if recv_direct {
                recv.as_ref()
                    .and_then(|r| r.registered())
                    .map(|m| View::prefix(m, recv_len))
            } else {
                self.stage_recv.as_ref().map(|m| View::prefix(m, recv_len))
            };
            let send_view = match (send_in_recv, send_direct, &self.stage_send) {
                _ if need.send == 0 => None,
                (Some((offset, len)), _, _) => recv_view.map(|v| View {
                    mem: v.mem,
                    offset: v.offset + offset,
                    len,
                }),
                (None, Some(mem), _) => Some(View::prefix(mem, send_bytes.len())),
                (None, None, Some(stage)) => Some(View::prefix(stage, need.send)),
                (None, None, None) => None,
            };
            let buffers = Buffers {
                send: send_view,
                recv: recv_view,
                scratch: self.scratch.as_ref().map(|m| View::prefix(m, need.scratch)),
            };
            self.transport.execute(op, digest, plan, buffers)?
        };

        if staged {
            if let (Some(stage), Some(r)) = (&self.stage_recv, recv.as_mut()) {
                stage.read(0, &mut r.bytes_mut()[..user_part])?;
                copied += user_part;
            }
        }
        self.transport.count_copied(copied);
        self.last = Some(Executed {
            algorithm: algorithm.name(),
            stats,
        });
        Ok(())
    }
}

/// Makes `slot` hold registered memory of at least `len` bytes (kept for later calls).
fn ensure(transport: &Transport, slot: &mut Option<RegisteredMemory>, len: usize) -> Result<()> {
    if len > 0 && slot.as_ref().map_or(true, |m| m.len() < len) {
        // Grow by doubling so that a sequence of growing calls registers O(log) times.
        let len = len.max(slot.as_ref().map_or(0, |m| m.len() * 2));
        *slot = Some(transport.alloc(len)?);
    }
    Ok(())
}

/// What must agree between the ranks of one operation.
fn digest(op: &str, algorithm: &str, problem: &Problem) -> u64 {
    Digest::default()
        .text(op)
        .text(algorithm)
        .text(&format!("{problem:?}"))
        .finish()
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
