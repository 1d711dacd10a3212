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
//! The persistent form of every collective ([`Communicator::barrier_init`],
//! [`Communicator::bcast_init`], [`Communicator::allgatherv_init`],
//! [`Communicator::allreduce_init`], …, [`Persistent`]) chooses, plans and registers once
//! and is then started many times (calls on the shared segment or as node phases, which have no
//! plan, are started anew each time). [`Communicator::split`] makes sub-communicators,
//! [`Communicator::split_by_node`] the one of the ranks on this rank's node (every
//! communicator knows the node of each of its ranks: [`Communicator::node_map`]),
//! [`Communicator::intercomm`] an [`InterCommunicator`] between two groups (intergroup
//! allgather(v), seed 003).
//!
//! A call with the same operation and arguments as an earlier one (on any buffers) reuses that
//! call's algorithm and plan: each communicator keeps the plans of its last calls
//! (`CIRCULANT_PLAN_CACHE`, [`Communicator::plan_cache_stats`]).
//!
//! Every collective must be called by every rank of the communicator in the same order with
//! matching arguments; ranks that disagree (different counts, sizes, roots or algorithms) get
//! an error on every rank instead of corrupted memory. After any error the communicator is
//! unusable: later calls return [`CommError::Transport`] with the first failure.
//! [`CommError::kind`] classifies every error ([`ErrorKind`]).

mod arguments;
mod buffer;
mod calibrate;
mod call;
mod calls;
mod check;
mod collectives;
mod config;
mod detached;
mod error;
mod locality;
mod node_phases;
mod nonblocking;
mod persistent;
mod persistent_init;
mod phased;
mod plan_cache;
mod provider;
mod segment;
mod select;
mod split;
mod staging;
mod start;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The shared segment's chunk: a broadcast or allgather(v) on one node runs as ⌈largest part
/// / `SEGMENT_CHUNK_BYTES`⌉ operations of the segment, each a chunk of every part.
pub use crate::transport::segment::AREA as SEGMENT_CHUNK_BYTES;
pub use crate::transport::{Carried, OpStats, Route, Traffic, TransportError};
pub use buffer::{Buffer, Element, Payload, PayloadMut};
pub(crate) use call::Call;
pub(crate) use calls::Lengths;
pub use config::{
    Config, ConfigError, ALGORITHM_ENV, ALPHA_ENV, ALPHA_INSIDE_ENV, AUTH_KEY_ENV, BETA_ENV,
    BETA_INSIDE_ENV, CHECK_ENV, DEFAULT_NODE_PROVIDER, DEFAULT_SEGMENT_LIMIT, MAX_IOV_LIMIT,
    MAX_MAX_WRITE_BYTES, NODE_PROVIDER_ENV, PLAN_CACHE_ENV, PROVIDER_ENV, SEGMENT_LIMIT_ENV,
    TCP_SEGMENTS, TIMEOUT_ENV,
};
pub use eager::{Carrier, EagerConfig};
pub use error::{CommError, ErrorKind, Result};

/// The eager path's settings and their bounds (`CIRCULANT_EAGER_*`, [`Config`]).
pub mod eager {
    pub use crate::transport::eager::{
        Carrier, EagerConfig, COPY_SECONDS_PER_BYTE, DEFAULT_SLOTS, DEFAULT_SLOT_BYTES, MAX_LIMIT,
        MAX_SLOTS, MAX_SLOT_BYTES, MIN_SLOTS, MIN_SLOT_BYTES,
    };
}
pub use node_phases::NODE_PHASE_ALGORITHMS;
pub use nonblocking::Request;
pub use persistent::Persistent;
pub use segment::SEGMENT_ALGORITHMS;
pub use split::{InterCommunicator, Side};
pub(crate) use start::Persisted;

use crate::bootstrap::Bootstrap;
pub use crate::bootstrap::NodeMap;
use crate::fabric::Access::RemoteWrite;
use crate::fabric::RegisteredMemory;
use crate::plan::{CostModel, LevelCosts};
use crate::transport::Transport;
use plan_cache::{PlanCache, Planned};

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
    /// The models that choose algorithms: across nodes (the only one on one node) and inside.
    levels: LevelCosts,
    scratch: Option<RegisteredMemory>,
    stage_send: Option<RegisteredMemory>,
    stage_recv: Option<RegisteredMemory>,
    /// Send and receive memory of the argument check (`CIRCULANT_CHECK`).
    check_mem: Option<(RegisteredMemory, RegisteredMemory)>,
    /// The plan of the argument check's own exchange (kept unless the plan cache is off).
    check_plan: Option<Planned>,
    /// The plans of earlier calls (`CIRCULANT_PLAN_CACHE`), shared so that a hit costs one
    /// reference count.
    plans: PlanCache<plan_cache::PlanKey, Arc<Planned>>,
    last: Option<Executed>,
    /// Whether [`Executed::overhead`] is measured ([`Communicator::measure_overhead`]).
    measures_overhead: bool,
    /// Other ranks' address cards read from the key-value space at start.
    cards_at_start: usize,
    /// The node of every rank ([`Communicator::node`]).
    nodes: NodeMap,
    /// The shared segment of a communicator on one node (set up at its first call).
    segment: segment::SegmentState,
    segment_digests: segment::Digests,
    /// The communicators of the node phases on the shared segment (split at their first call).
    phases: node_phases::PhaseState,
}

/// What the last collective ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Executed {
    /// The algorithm's name.
    pub algorithm: &'static str,
    /// What the transport did.
    pub stats: OpStats,
    /// The call's software overhead on this rank: from its entry into the communicator (the
    /// blocking or `i*` form, or [`Persistent::start`]) to its first post to the fabric (its
    /// first ready token; on a rank that sends none, the moment the transport went on to post
    /// its writes, before any wait for the peers); on the shared segment, to the end of its
    /// first pass (its part published where the peers let it). It includes the argument check
    /// when `CIRCULANT_CHECK` is on (an exchange with the peers) and the staging of plain
    /// slices. Zero unless the communicator measures it ([`Communicator::measure_overhead`]).
    pub overhead: Duration,
}

/// Membership in the launcher's job: leaves it when dropped. The world communicator's
/// transport reads peers' address cards from its key-value space after start, so the job is
/// left when that transport is gone too.
struct Job {
    bootstrap: Mutex<Bootstrap>,
    kind: &'static str,
}

impl Job {
    fn new(bootstrap: Bootstrap) -> Job {
        Job {
            kind: bootstrap.kind(),
            bootstrap: Mutex::new(bootstrap),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Bootstrap> {
        // A thread that panicked while holding it left the bootstrap as usable as it was.
        self.bootstrap
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        let bootstrap = match self.bootstrap.get_mut() {
            Ok(bootstrap) => bootstrap,
            Err(poisoned) => poisoned.into_inner(),
        };
        // Leaving the job is best effort: a launcher that is gone cannot be told.
        let _ = bootstrap.finalize();
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

    /// Joins the job named by the environment (PMI), with an explicit configuration.
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
    pub fn init_over(bootstrap: Bootstrap, config: Config) -> Result<Communicator> {
        let job = Arc::new(Job::new(bootstrap));
        let connected = provider::connect(&job, &config)?;
        // Inside a node the node provider's rough model, where the job may use one, unless
        // CIRCULANT_ALPHA_INSIDE and CIRCULANT_BETA_INSIDE say otherwise.
        let mut config = config;
        if let Some(inside) = connected.inside {
            config.alpha_inside.get_or_insert(inside.alpha);
            config.beta_inside.get_or_insert(inside.beta);
        }
        let levels = config.levels(connected.model);
        let mut comm = Communicator::new(connected.transport, job, config, levels, connected.nodes);
        comm.cards_at_start = connected.cards_at_start;
        // Every endpoint is up before the first collective (a plan's barrier: the node phases
        // split communicators at their first call, which a job's start need not).
        comm.plain_barrier()?;
        Ok(comm)
    }

    /// A communicator over a connected transport (of the world or of a split): the only
    /// place one is built.
    fn new(
        mut transport: Transport,
        job: Arc<Job>,
        config: Config,
        levels: LevelCosts,
        nodes: NodeMap,
    ) -> Self {
        transport.set_eager(config.eager_for(&levels.across));
        let plans = PlanCache::new(config.plan_cache);
        Communicator {
            transport,
            job,
            config,
            levels,
            scratch: None,
            stage_send: None,
            stage_recv: None,
            check_mem: None,
            check_plan: None,
            plans,
            last: None,
            measures_overhead: false,
            cards_at_start: 0,
            nodes,
            segment: segment::SegmentState::default(),
            segment_digests: segment::Digests::default(),
            phases: node_phases::PhaseState::default(),
        }
    }

    /// This rank in the communicator, 0 ≤ rank < size.
    pub fn rank(&self) -> usize {
        self.transport.rank()
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.transport.size()
    }

    /// The libfabric provider in use.
    pub fn provider(&self) -> String {
        self.transport.info().provider()
    }

    /// The provider that reaches the ranks of this rank's node, where it is another than
    /// [`Self::provider`]: in a job on several nodes, `shm` by default
    /// (`CIRCULANT_NODE_PROVIDER`) on a node that holds several of its ranks.
    pub fn node_provider(&self) -> Option<String> {
        self.transport.node_info().map(|info| info.provider())
    }

    /// How this rank reaches `rank`: through the network provider, or the node's
    /// ([`Self::node_provider`]); `None` for a rank whose address was not needed yet.
    pub fn route(&self, rank: usize) -> Option<Route> {
        self.transport.route(rank)
    }

    /// What this rank's writes carried since the communicator was created, per way of
    /// reaching peers: through the network provider, through the node's, and stored into
    /// shared memory (eager receive slots, and the parts published on the shared segment).
    /// It includes the communicators the node phases on the shared segment run on.
    pub fn traffic(&self) -> Traffic {
        let mut traffic = self.transport.traffic();
        for phase in self.phases.communicators() {
            traffic.add(&phase.traffic());
        }
        traffic
    }

    /// `"pmi-1"`, `"singleton"` or `"oob"`.
    pub fn launcher(&self) -> &'static str {
        self.job.kind
    }

    /// Other ranks' address cards this communicator read from the job's key-value space so
    /// far. Where the PMI brings every rank's data to each node at its fence (PMIx, Slurm)
    /// all p − 1 are read at start; elsewhere (`circulant run`, Hydra, in-memory and
    /// out-of-band jobs) a peer's card is read when an operation first writes to that peer
    /// (its data, a ready token, a signal or an abort), so a rank that only talks to a few
    /// peers reads a few cards. Communicators from [`Communicator::split`] exchange their
    /// cards over the parent and read none.
    pub fn cards_fetched(&self) -> usize {
        self.cards_at_start + self.transport.cards_fetched()
    }

    /// The α-β model used to choose algorithms (across nodes, where the job spans several).
    pub fn model(&self) -> CostModel {
        self.levels.across
    }

    /// Sets the α-β model (the same on every rank, or the ranks may choose differently and
    /// fail with a mismatch); inside a node the model follows it unless
    /// `CIRCULANT_ALPHA_INSIDE`/`CIRCULANT_BETA_INSIDE` set it.
    pub fn set_model(&mut self, model: CostModel) {
        self.set_levels(self.config.levels(model));
    }

    /// The models of both levels: inside a node and across nodes.
    pub fn levels(&self) -> LevelCosts {
        self.levels
    }

    /// Sets the models of both levels (the same on every rank).
    pub fn set_levels(&mut self, levels: LevelCosts) {
        self.levels = levels;
        // The choices made under the old model may not be the ones the new one makes.
        self.plans.clear();
        self.check_plan = None;
        for phase in self.phases.communicators_mut() {
            phase.set_levels(levels);
        }
    }

    /// Deadline of one collective (of each phase, where the node phases on the shared segment
    /// serve a call).
    pub fn set_deadline(&mut self, deadline: Duration) {
        self.transport.set_deadline(deadline);
        for phase in self.phases.communicators_mut() {
            phase.set_deadline(deadline);
        }
    }

    /// Turns the full argument check on or off (`CIRCULANT_CHECK`): every rank must do the
    /// same, between the same two collectives. Communicators split from this one inherit it.
    pub fn set_check(&mut self, on: bool) {
        self.config.check = on;
        for phase in self.phases.communicators_mut() {
            phase.set_check(on);
        }
    }

    /// Bytes this communicator copied locally so far: plan copy steps and the staging of
    /// plain (unregistered) slices. Stays 0 for broadcast and in-place allgatherv on
    /// [`Buffer`]s.
    pub fn bytes_copied(&self) -> u64 {
        self.transport.bytes_copied()
    }

    /// How eager messages reach this rank's receive slots: stores into shared memory where
    /// every rank is on this host (the shm provider), RMA writes elsewhere or when
    /// `CIRCULANT_EAGER_CARRIER=write`.
    pub fn eager_carrier(&self) -> Carrier {
        self.transport.eager_carrier()
    }

    /// Credit words this rank wrote to the ranks that write eager messages into its slots:
    /// over RMA writes it tells each writer, once half its slots were read, how many it read,
    /// unless that count went along with an eager message of its own to that writer. Through
    /// shared memory writers read the count themselves (no words).
    pub fn eager_credit_words(&self) -> u64 {
        self.transport.credit_words()
    }

    /// The algorithm and counts of the last collective.
    pub fn last(&self) -> Option<&Executed> {
        self.last.as_ref()
    }

    /// Whether collectives measure their software overhead ([`Executed::overhead`]; off at
    /// first, and in a split as in its parent when it was made). Measuring reads the clock at
    /// each call's entry and at the end of its overhead: on the shared segment two reads,
    /// about 50 ns, a sixth of a small broadcast between two ranks.
    pub fn measure_overhead(&mut self, on: bool) {
        self.measures_overhead = on;
    }

    /// `len` bytes of registered memory, zeroed: collectives on it copy nothing.
    pub fn alloc(&self, len: usize) -> Result<Buffer> {
        Ok(Buffer::new(self.transport.alloc(len, RemoteWrite)?, len))
    }

    /// The plan cache's counts so far: (hits, misses). A hit is a call whose algorithm and
    /// plan were taken from an earlier call with the same arguments (the same operation,
    /// problem, forced algorithm and placement of the data); a miss is a call that chose and
    /// planned. A persistent request counts once, when it is made (its starts reuse its plan;
    /// one that the shared segment or the node phases serve has none and counts nothing).
    /// Calls refused before that point count as neither. With the cache off
    /// (`CIRCULANT_PLAN_CACHE=0`) every planned call is a miss.
    pub fn plan_cache_stats(&self) -> (u64, u64) {
        self.plans.stats()
    }

    /// Gives up collective call `op`, refused before it reached the communicator (by a
    /// binding that checks its own arguments, as the C API does): the call is consumed and
    /// every rank gets an error for it, as for a call the communicator refuses itself (see
    /// "Disagreeing ranks" in docs/architecture.md). The communicator is unusable afterwards.
    pub fn refuse(&mut self, op: &'static str, why: &str) {
        self.transport.abandon(op, why);
    }
}

// A communicator moves to the thread that uses it (ranks as threads, the C API's callers):
// whatever it holds must be `Send`. A compile-time check, so that no part loses it unseen.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<Communicator>();
    send::<InterCommunicator>();
};
