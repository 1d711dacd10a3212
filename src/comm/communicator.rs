//! The communicator: the ranks of a job connected over a libfabric endpoint, what it keeps
//! between calls (the plan cache, staging memory, the argument check's memory, what serves
//! a node), and its accessors.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::bootstrap::{Bootstrap, NodeMap};
use crate::fabric::Access::RemoteWrite;
use crate::plan::{CostModel, LevelCosts};
use crate::transport::{Carrier, OpStats, Route, Traffic, Transport};

use super::buffer::Buffer;
use super::call::Digests;
use super::check::Checker;
use super::config::Config;
use super::error::Result;
use super::memory::StepBuffers;
use super::plan_cache::{PlanCache, PlanKey, Planned};
use super::staging::Staging;

/// The ranks of a job, connected over a libfabric endpoint.
pub struct Communicator {
    pub(super) transport: Transport,
    /// The job's bootstrap, shared by the communicators split from the world one: it is
    /// finalized when the last of them is dropped, and only the world communicator uses it.
    pub(super) job: Arc<Job>,
    pub(super) config: Config,
    /// The models that choose algorithms: across nodes (the only one on one node) and inside.
    pub(super) levels: LevelCosts,
    /// Where plans' data lives while they run: scratch, and plain memory staged.
    pub(super) staging: Staging,
    /// The full argument check's memory and plan (`CIRCULANT_CHECK`).
    pub(super) checker: Checker,
    /// The plans of earlier calls (`CIRCULANT_PLAN_CACHE`), shared so that a hit costs one
    /// reference count.
    pub(super) plans: PlanCache<PlanKey, Arc<Planned>>,
    pub(super) last: Option<Executed>,
    /// Whether [`Executed::overhead`] is measured ([`Communicator::measure_overhead`]).
    pub(super) measures_overhead: bool,
    /// Other ranks' address cards read from the key-value space at start.
    pub(super) cards_at_start: usize,
    /// The node of every rank ([`Communicator::node`]).
    pub(super) nodes: NodeMap,
    /// What serves the ranks of a node: the shared segment and the node phases.
    pub(super) node: NodeServices,
}

/// What serves the ranks of one node, set up at the first call that needs it.
#[derive(Default)]
pub(super) struct NodeServices {
    /// The shared segment of a communicator on one node.
    pub segment: SegmentStatus,
    /// The digests of the segment's last calls.
    pub digests: Digests,
    /// The communicators the node phases run on, on several nodes.
    pub phases: Option<Box<NodeComms>>,
}

/// Where a communicator's shared segment stands.
#[derive(Debug, Default)]
pub(super) enum SegmentStatus {
    /// Not set up yet: the first call it serves sets it up.
    #[default]
    Untried,
    /// Being set up (its own exchanges run as plans).
    SettingUp,
    /// Not to be used: turned off, or the ranks could not map each other's segments.
    Off,
    /// Set up: the transport keeps it (`Transport::segment_mut`), so that every failure that
    /// breaks the transport marks it.
    Ready,
}

/// The communicators of the node phases: the ranks of this rank's node, and (on each node's
/// first rank) the first ranks of all nodes, with the registered memory of the steps on each.
pub(super) struct NodeComms {
    /// The steps' buffers on each communicator (before the communicators: they go first).
    pub node_buffers: StepBuffers,
    pub leader_buffers: StepBuffers,
    pub node: Communicator,
    pub leaders: Option<Communicator>,
    /// The parent's node map, kept so that a call need not copy it.
    pub layout: crate::plan::Layout,
}

impl NodeComms {
    /// Both communicators.
    pub fn communicators(&self) -> impl Iterator<Item = &Communicator> {
        std::iter::once(&self.node).chain(self.leaders.as_ref())
    }

    /// The same, to change: they follow their parent's models and deadline.
    pub fn communicators_mut(&mut self) -> impl Iterator<Item = &mut Communicator> {
        std::iter::once(&mut self.node).chain(self.leaders.as_mut())
    }
}

/// What the last collective ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Executed {
    /// The algorithm's name.
    pub algorithm: &'static str,
    /// What the transport did.
    pub stats: OpStats,
    /// The call's software overhead on this rank: from its entry into the communicator (the
    /// blocking or `i*` form, or [`Persistent::start`](super::Persistent::start)) to its first post to the fabric (its
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
pub(super) struct Job {
    bootstrap: Mutex<Bootstrap>,
    kind: &'static str,
}

impl Job {
    pub fn new(bootstrap: Bootstrap) -> Job {
        Job {
            kind: bootstrap.kind(),
            bootstrap: Mutex::new(bootstrap),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Bootstrap> {
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
    /// A communicator over a connected transport (of the world or of a split): the only
    /// place one is built.
    pub(super) fn new(
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
            staging: Staging::default(),
            checker: Checker::default(),
            plans,
            last: None,
            measures_overhead: false,
            cards_at_start: 0,
            nodes,
            node: NodeServices::default(),
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
        for phase in self.node.phases.iter().flat_map(|p| p.communicators()) {
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
        self.checker.forget_plan();
        for phase in self.phase_comms_mut() {
            phase.set_levels(levels);
        }
    }

    /// Deadline of one collective (of each phase, where the node phases on the shared segment
    /// serve a call).
    pub fn set_deadline(&mut self, deadline: Duration) {
        self.transport.set_deadline(deadline);
        for phase in self.phase_comms_mut() {
            phase.set_deadline(deadline);
        }
    }

    /// Turns the full argument check on or off (`CIRCULANT_CHECK`): every rank must do the
    /// same, between the same two collectives. Communicators split from this one inherit it.
    pub fn set_check(&mut self, on: bool) {
        self.config.check = on;
        for phase in self.phase_comms_mut() {
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

    /// The communicators of the node phases, where they are set up.
    fn phase_comms_mut(&mut self) -> impl Iterator<Item = &mut Communicator> {
        self.node
            .phases
            .iter_mut()
            .flat_map(|p| p.communicators_mut())
    }

    /// Gives up collective call `op`, refused before it reached the communicator (by a
    /// binding that checks its own arguments, as the C API does): the call is consumed and
    /// every rank gets an error for it, as for a call the communicator refuses itself (see
    /// "Disagreeing ranks" in docs/architecture.md). The communicator is unusable afterwards.
    pub fn refuse(&mut self, op: &'static str, why: &str) {
        self.transport.abandon(op, why);
    }
}
