//! Executes plans between processes with one-sided writes (ARCHITECTURE.md, "One-sided
//! protocol").
//!
//! Per operation (sequence number s, the same order on every rank):
//! 1. every rank that expects writes sends a ready token to each rank that will write to it:
//!    a write into the writer's control region naming s, a digest of the operation's arguments
//!    and where its receive and scratch buffers are;
//! 2. a transfer is posted as soon as the data it carries is held (the rounds its pieces depend
//!    on are complete) and the target's token for s has arrived, in plan order per target;
//!    every piece is one write carrying remote CQ data (s, round);
//! 3. the receiver counts arrivals per round against its plan; a round is complete when all its
//!    writes are in and every earlier round is complete; then its local steps run;
//! 4. the operation is done when every round is complete and every local write has completed.
//!
//! An operation is [`Transport::prepare`]d (the plan materialised once into a [`Prepared`],
//! which persistent operations keep and reuse), [`Transport::start`]ed (setup steps, ready
//! tokens, the writes already allowed) and [`Transport::finish`]ed (driven to completion);
//! [`Transport::execute`] does all three. Only one operation is in progress at a time.
//!
//! Zero-length pieces (signals, as in the barrier) carry no data, go into the target's control
//! region and need no token; one that arrives before its target reached its operation is kept
//! for later. A rank that finds a digest that differs from its own, or fails in any other way,
//! writes an abort to every rank, so that all of them return an error instead of waiting.

pub mod eager;
mod liveness;
pub mod wire;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::fabric::Access::{self, RemoteWrite};
use crate::fabric::{
    Address, AddressVector, Completion, CompletionQueue, Domain, Endpoint, FabricError, Info,
    LocalRange, Post, RegisteredMemory, RemoteRegion, REMOTE_REGION_BYTES,
};
use crate::plan::{self, Buf, Local, PlanError, RankPlan, Round, Transfer};
pub use eager::EagerConfig;
use eager::{Cursor, Eager, EagerPost};
use liveness::PeerProcesses;
use wire::{order, wire_seq, Event, Order, Token, TOKEN_BYTES};

/// Default deadline of one operation.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(60);

/// How long a failed operation waits for its own writes to complete before giving up on them.
const DRAIN: Duration = Duration::from_secs(2);

/// How long an idle rank polls the completion queue, yielding its core between polls, before
/// it blocks: a message that comes within this time is seen at once, and when ranks outnumber
/// cores the yield lets the rank that sends it run.
const POLL_PHASE: Duration = Duration::from_micros(50);

/// The same where the completion queue has no wait object (shm): blocking is then a sleep,
/// which wakes late, so polling goes on longer.
const POLL_PHASE_WITHOUT_WAIT_OBJECT: Duration = Duration::from_millis(1);

/// Longest single blocking wait, so that deadlines are checked often.
const WAIT_SLICE: Duration = Duration::from_millis(20);

/// Errors of the transport.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error(transparent)]
    Fabric(#[from] FabricError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("{op}: timed out after {after:?} {waiting}")]
    Timeout {
        op: String,
        after: Duration,
        waiting: String,
    },
    #[error("{op}: rank {rank} aborted the operation (it failed, or was called with different arguments)")]
    AbortedBy { op: String, rank: usize },
    #[error("{op}: rank {peer} was called with different arguments (the collective, counts, sizes, root, reduction, algorithm or CIRCULANT_EAGER_LIMIT differ)")]
    Mismatch { op: String, peer: usize },
    #[error("{op}: the ranks were called with different arguments: {what}")]
    Disagree { op: String, what: String },
    #[error("{op}: rank {rank} failed an earlier operation, so this one cannot complete")]
    AbortedEarlier { op: String, rank: usize },
    #[error("{op}: rank {peer}'s process has ended")]
    Exited { op: String, peer: usize },
    #[error("{op}: protocol violation: {what}")]
    Protocol { op: String, what: String },
    #[error("{op}: {what}")]
    Invalid { op: String, what: String },
    #[error("the communicator is unusable after an earlier failure: {0}")]
    Broken(String),
    #[error("{op}: operation {seq} is still in progress (wait for it first)")]
    Busy { op: String, seq: u64 },
}

pub type Result<T> = std::result::Result<T, TransportError>;

/// A range of registered memory one operation works on.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub mem: &'a RegisteredMemory,
    pub offset: usize,
    pub len: usize,
}

impl<'a> View<'a> {
    pub fn whole(mem: &'a RegisteredMemory) -> Self {
        View {
            mem,
            offset: 0,
            len: mem.len(),
        }
    }

    pub fn prefix(mem: &'a RegisteredMemory, len: usize) -> Self {
        View {
            mem,
            offset: 0,
            len: len.min(mem.len()),
        }
    }

    fn remote(&self) -> RemoteRegion {
        let whole = self.mem.remote();
        RemoteRegion {
            base: whole.base + self.offset as u64,
            len: self.len as u64,
            key: whole.key,
        }
    }
}

/// The buffers of one operation; a buffer the plan does not use may be `None`.
#[derive(Clone, Copy, Default)]
pub struct Buffers<'a> {
    pub send: Option<View<'a>>,
    pub recv: Option<View<'a>>,
    pub scratch: Option<View<'a>>,
}

impl<'a> Buffers<'a> {
    fn get(&self, buf: Buf) -> Option<View<'a>> {
        match buf {
            Buf::Send => self.send,
            Buf::Recv => self.recv,
            Buf::Scratch => self.scratch,
        }
    }
}

/// What one operation did on this rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpStats {
    pub writes: u64,
    pub bytes_written: u64,
    pub arrivals: u64,
    pub bytes_copied: u64,
}

/// Provider limits the transport honours.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_msg_size: usize,
}

/// What a rank publishes so that others can reach it: its endpoint name, its control
/// region and its process id (watched by peers on the same host, see `liveness`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Card {
    pub name: Vec<u8>,
    pub control: RemoteRegion,
    pub pid: u32,
}

impl Card {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.control.to_bytes().to_vec();
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&self.name);
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> std::result::Result<Card, FabricError> {
        let head = REMOTE_REGION_BYTES + 4;
        if bytes.len() <= head {
            return Err(FabricError::invalid(format!(
                "address card of {} bytes is too short",
                bytes.len()
            )));
        }
        let mut pid = [0u8; 4];
        pid.copy_from_slice(&bytes[REMOTE_REGION_BYTES..head]);
        Ok(Card {
            control: RemoteRegion::from_bytes(&bytes[..REMOTE_REGION_BYTES])?,
            pid: u32::from_le_bytes(pid),
            name: bytes[head..].to_vec(),
        })
    }
}

/// An endpoint opened and its control region registered, before the peers are known.
pub struct Opened {
    endpoint: Endpoint,
    cq: CompletionQueue,
    av: AddressVector,
    control: RegisteredMemory,
    rank: usize,
    size: usize,
}

impl Opened {
    /// Opens an endpoint on `info` for rank `rank` of `size`.
    pub fn open(info: &Info, rank: usize, size: usize) -> Result<Opened> {
        if size == 0 || rank >= size || size as u64 > wire::MAX_FIELD {
            return Err(TransportError::Invalid {
                op: "open".into(),
                what: format!("rank {rank} of {size} ranks is not supported"),
            });
        }
        if info.cq_data_size() < 4 {
            return Err(TransportError::Invalid {
                op: "open".into(),
                what: format!(
                    "provider {} carries {} bytes of remote CQ data; 4 are needed",
                    info.provider(),
                    info.cq_data_size()
                ),
            });
        }
        if info.provider() == "shm" {
            crate::fabric::shm::remove_stale_regions_of_this_pid();
        }
        let domain = Domain::open(info)?;
        let depth = info.tx_size().max(info.rx_size()).clamp(256, 1 << 16);
        let cq = CompletionQueue::open(&domain, depth)?;
        let av = AddressVector::open(&domain, size)?;
        let endpoint = Endpoint::open(&domain, &av, &cq, &cq)?;
        // Incoming token slots (one per peer), outgoing ones (the source of our tokens), then
        // the same for eager credit words.
        let control =
            RegisteredMemory::for_endpoint(&endpoint, wire::control_bytes(size), RemoteWrite)?;
        Ok(Opened {
            endpoint,
            cq,
            av,
            control,
            rank,
            size,
        })
    }

    /// What the other ranks need to reach this one.
    pub fn card(&self) -> Result<Card> {
        Ok(Card {
            name: self.endpoint.name()?,
            control: self.control.remote(),
            pid: std::process::id(),
        })
    }

    /// Inserts every rank's card (in rank order) and returns the ready transport.
    pub fn connect(self, cards: &[Card], deadline: Duration) -> Result<Transport> {
        if cards.len() != self.size {
            return Err(TransportError::Invalid {
                op: "connect".into(),
                what: format!("{} address cards for {} ranks", cards.len(), self.size),
            });
        }
        let mut peers = Vec::with_capacity(self.size);
        for card in cards {
            peers.push(self.av.insert(&card.name)?);
        }
        let info = self.endpoint.info();
        // Every shm peer shares this host, so its process can be watched.
        let processes = if info.provider() == "shm" {
            let pids: Vec<u32> = cards.iter().map(|c| c.pid).collect();
            PeerProcesses::watch(&pids, self.rank)
        } else {
            PeerProcesses::none(self.size)
        };
        let limits = Limits {
            max_msg_size: info.max_msg_size(),
        };
        Ok(Transport {
            rank: self.rank,
            size: self.size,
            endpoint: self.endpoint,
            cq: self.cq,
            _av: self.av,
            control: self.control,
            peers,
            peer_control: cards.iter().map(|c| c.control).collect(),
            processes,
            seq: 0,
            tokens: vec![Vec::new(); self.size],
            early: HashMap::new(),
            early_aborts: Vec::new(),
            eager: Eager::new(self.size),
            limits,
            deadline,
            copied: 0,
            broken: None,
            active: None,
            completions: Vec::with_capacity(64),
        })
    }
}

/// One rank's side of the one-sided protocol: endpoint, completion queue, the peers' addresses
/// and control regions, and the state carried from one operation to the next.
pub struct Transport {
    rank: usize,
    size: usize,
    endpoint: Endpoint,
    cq: CompletionQueue,
    _av: AddressVector,
    control: RegisteredMemory,
    peers: Vec<Address>,
    peer_control: Vec<RemoteRegion>,
    /// The peers' processes, where they can be watched (shm).
    processes: PeerProcesses,
    /// Sequence number of the next operation.
    seq: u64,
    /// Tokens received and not yet used, per peer (usually at most one).
    tokens: Vec<Vec<Token>>,
    /// Writes and signals of operations this rank has not reached yet:
    /// (wire seq, round, signal) → count.
    early: HashMap<(u8, u32, bool), usize>,
    /// Aborts of operations this rank has not reached yet: (wire seq, rank).
    early_aborts: Vec<(u8, usize)>,
    /// Receive slots kept for eager writers, and the targets' slots for this rank.
    eager: Eager,
    limits: Limits,
    deadline: Duration,
    copied: u64,
    broken: Option<String>,
    /// Sequence number of the operation started and not finished yet.
    active: Option<u64>,
    completions: Vec<Completion>,
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("provider", &self.endpoint.info().provider())
            .field("seq", &self.seq)
            .finish()
    }
}

impl Transport {
    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn info(&self) -> &Info {
        self.endpoint.info()
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    pub fn set_deadline(&mut self, deadline: Duration) {
        self.deadline = deadline;
    }

    /// Bytes the library copied locally (plan copy steps and staging of unregistered buffers)
    /// since the communicator was created.
    pub fn bytes_copied(&self) -> u64 {
        self.copied
    }

    /// Takes back bytes an operation of the library's own counted (the argument check), so
    /// that [`Self::bytes_copied`] counts the copies of the user's calls.
    pub fn discount_copied(&mut self, bytes: u64) {
        self.copied = self.copied.saturating_sub(bytes);
    }

    /// Adds bytes copied outside a plan (staging of plain slices).
    pub fn count_copied(&mut self, bytes: usize) {
        self.copied += bytes as u64;
    }

    /// Registered memory of this transport's domain, with `access` for the peers.
    pub fn alloc(&self, len: usize, access: Access) -> Result<RegisteredMemory> {
        Ok(RegisteredMemory::for_endpoint(
            &self.endpoint,
            len.max(1),
            access,
        )?)
    }

    /// Materialises `plan` once for repeated starts ([`Prepared::new`] with this transport's
    /// size and limits). It never takes the eager path: see [`Self::prepare_sized`].
    pub fn prepare(&self, name: &str, plan: RankPlan<'_>) -> Result<Prepared> {
        Prepared::new(name, plan, self.size, self.limits)
    }

    /// As [`Self::prepare`], for an operation of `bytes` as every rank computes it (the
    /// problem's size): at most the eager limit, it takes the eager path.
    pub fn prepare_sized(&self, name: &str, plan: RankPlan<'_>, bytes: usize) -> Result<Prepared> {
        let mut prepared = Prepared::new(name, plan, self.size, self.limits)?;
        prepared.eager = self.eager.config.applies(bytes);
        Ok(prepared)
    }

    /// Sets the eager path's settings (the same limit on every rank, or eager operations fail
    /// with a mismatch); receive slots kept already stay as they are.
    pub fn set_eager(&mut self, config: EagerConfig) {
        self.eager.config = config;
        // The sockets provider loses injected writes now and then (design notes).
        self.eager.inject = match self.info().provider().as_str() {
            "sockets" => 0,
            _ => self.info().inject_size(),
        };
    }

    /// The eager path's settings.
    pub fn eager(&self) -> EagerConfig {
        self.eager.config
    }

    /// Bytes of receive slots this rank keeps for eager writers.
    pub fn eager_slot_bytes(&self) -> usize {
        self.eager.kept_bytes()
    }

    /// Runs `plan` as operation `name` with `buffers`; `digest` must be equal on every rank
    /// that runs this operation (it summarises the arguments that must agree).
    pub fn execute(
        &mut self,
        name: &str,
        digest: u64,
        plan: RankPlan<'_>,
        buffers: Buffers<'_>,
    ) -> Result<OpStats> {
        let prepared = self.prepare(name, plan)?;
        let operation = self.start(name, digest, &prepared, buffers)?;
        self.finish(operation, buffers)
    }

    /// Starts a prepared plan as the next operation: checks the buffers, runs the setup steps,
    /// sends the ready tokens and posts every write that is already allowed, then returns.
    /// [`Self::finish`] with the same buffers completes it; no other operation may start on
    /// this transport before (an error says so). The buffers must stay registered and
    /// untouched until then.
    pub fn start(
        &mut self,
        name: &str,
        digest: u64,
        prepared: &Prepared,
        buffers: Buffers<'_>,
    ) -> Result<Operation> {
        self.usable(name)?;
        let seq = self.seq;
        self.seq += 1;
        let op = format!("{name} (operation {seq})");
        let mut run = Run::new(self, op, seq, digest, prepared);
        self.active = Some(seq);
        // From here on the peers count on this operation: any failure goes through `fail`.
        let started = run
            .begin(self, &buffers)
            .and_then(|()| run.progress(self, &buffers));
        match started {
            Ok(()) => Ok(Operation {
                run,
                started: Instant::now(),
            }),
            Err(err) => Err(self.fail(&mut run, err)),
        }
    }

    /// Drives a started operation to completion.
    pub fn finish(&mut self, operation: Operation, buffers: Buffers<'_>) -> Result<OpStats> {
        let mut run = operation.run;
        if let Some(why) = &self.broken {
            return Err(TransportError::Broken(why.clone()));
        }
        if self.active != Some(run.seq) {
            return Err(TransportError::Invalid {
                op: run.op.clone(),
                what: "the operation is not the one in progress on this transport".into(),
            });
        }
        let result = run.drive(self, &buffers);
        self.copied += run.stats.bytes_copied;
        self.active = None;
        match result {
            Ok(()) => Ok(run.stats),
            Err(err) => Err(self.fail(&mut run, err)),
        }
    }

    /// Progresses a started operation without blocking: completes what has arrived and posts
    /// what is allowed. `Ok(true)` once it is done (then [`Self::finish`] returns at once).
    /// The deadline counts from the start here, as a caller that only tests never waits.
    pub fn test(&mut self, operation: &mut Operation, buffers: Buffers<'_>) -> Result<bool> {
        let Operation { run, started } = operation;
        if self.active != Some(run.seq) {
            return Err(TransportError::Invalid {
                op: run.op.clone(),
                what: "the operation is not the one in progress on this transport".into(),
            });
        }
        let result = run.progress(self, &buffers).and_then(|()| {
            if run.done() {
                Ok(true)
            } else if started.elapsed() >= self.deadline {
                Err(TransportError::Timeout {
                    op: run.op.clone(),
                    after: self.deadline,
                    waiting: run.awaited(self),
                })
            } else {
                Ok(false)
            }
        });
        result.map_err(|err| self.fail(run, err))
    }

    /// Whether an operation has been started and not finished.
    pub fn in_progress(&self) -> bool {
        self.active.is_some()
    }

    /// Sequence number the next operation gets.
    pub fn next_seq(&self) -> u64 {
        self.seq
    }

    /// Why the transport is unusable, if it is.
    pub fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// Gives up an operation this rank refused before starting it (its arguments failed a
    /// check here), as if it had failed: the operation in progress, or else the next one,
    /// consumes its sequence number, every peer is told (so that each returns an error for
    /// it instead of pairing its data with another call), and the transport becomes
    /// unusable. `why` is kept for later calls.
    pub fn abandon(&mut self, name: &str, why: &str) {
        if self.broken.is_some() {
            return;
        }
        let seq = match self.active {
            Some(seq) => seq,
            None => {
                self.seq += 1;
                self.seq - 1
            }
        };
        let mut run = Run::new(
            self,
            format!("{name} (operation {seq})"),
            seq,
            0,
            &Prepared::empty(),
        );
        run.abort_all(self);
        run.drain(self);
        self.broken = Some(format!("{name} (operation {seq}): {why}"));
        self.active = None;
    }

    fn usable(&self, name: &str) -> Result<()> {
        if let Some(why) = &self.broken {
            return Err(TransportError::Broken(why.clone()));
        }
        if let Some(seq) = self.active {
            return Err(TransportError::Busy {
                op: name.to_string(),
                seq,
            });
        }
        Ok(())
    }

    /// Tells the peers that `run` failed and marks the transport unusable.
    fn fail(&mut self, run: &mut Run, err: TransportError) -> TransportError {
        // A local write that failed has completed: draining must not wait for it.
        if let TransportError::Fabric(FabricError::Completion {
            context: Some(_), ..
        }) = &err
        {
            run.in_flight = run.in_flight.saturating_sub(1);
        }
        run.abort_all(self);
        run.drain(self);
        // Writes of a failed operation may still arrive: nothing later can trust them.
        self.broken = Some(err.to_string());
        self.active = None;
        err
    }

    /// A zero-length write into `peer`'s control region carrying `event`.
    fn post_signal(&self, peer: usize, event: Event) -> Result<Post> {
        let local = self.control.range(0, 0)?;
        let remote = self.peer_control[peer].range(0, 0)?;
        Ok(self
            .endpoint
            .write(local, self.peers[peer], remote, Some(event.encode()), 0)?)
    }

    fn post_token(&self, peer: usize, token: &Token) -> Result<Post> {
        let out = (self.size + peer) * TOKEN_BYTES;
        self.control.store(out, &token.to_bytes())?;
        let local = self.control.range(out, TOKEN_BYTES)?;
        let remote =
            self.peer_control[peer].range((self.rank * TOKEN_BYTES) as u64, TOKEN_BYTES as u64)?;
        let event = Event::Token { from: self.rank };
        Ok(self
            .endpoint
            .write(local, self.peers[peer], remote, Some(event.encode()), 0)?)
    }

    /// Reads the token `from` just wrote into our control region.
    fn take_token(&mut self, from: usize) -> Option<Token> {
        let mut bytes = [0u8; TOKEN_BYTES];
        self.control.read(from * TOKEN_BYTES, &mut bytes).ok()?;
        Token::from_bytes(&bytes)
    }
}

/// A plan materialised for repeated starts ([`Transport::prepare`]): cloning it is cheap.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// Buffer sizes the plan needs.
    pub buffers: plan::Buffers,
    setup: Arc<[Local]>,
    rounds: Arc<[Round]>,
    /// Writes expected per round.
    expected: Arc<[usize]>,
    /// The ranks that write into this one (they get ready tokens).
    writers: Arc<[usize]>,
    /// The ranks this one writes data into (it waits for their tokens).
    targets: Arc<[usize]>,
    /// Whether what arrives are signals (no receive or scratch buffer) rather than data.
    receives_signals: bool,
    /// Whether the operation takes the eager path (the same on every rank).
    eager: bool,
}

impl Prepared {
    /// Materialises `plan` (its rounds, expectations and writers) for `size` ranks, checked
    /// against the provider's `limits`, so that it can be started many times.
    pub fn new(name: &str, plan: RankPlan<'_>, size: usize, limits: Limits) -> Result<Prepared> {
        let invalid = |what: String| TransportError::Invalid {
            op: name.to_string(),
            what,
        };
        let rounds: Vec<Round> = plan.rounds.collect();
        let mut expected = Vec::with_capacity(rounds.len());
        let mut writers = Vec::new();
        let mut targets = Vec::new();
        for round in &rounds {
            if u64::from(round.index) > wire::MAX_ROUND {
                return Err(invalid(format!(
                    "round {} does not fit the {} bits of remote CQ data",
                    round.index,
                    wire::ROUND_BITS
                )));
            }
            expected.push(round.expects.iter().map(|e| e.writes).sum());
            writers.extend(round.expects.iter().map(|e| e.from));
            for transfer in &round.sends {
                if transfer.to >= size {
                    return Err(invalid(format!("a write to rank {}", transfer.to)));
                }
                if transfer.bytes() > 0 {
                    targets.push(transfer.to);
                }
                for piece in &transfer.pieces {
                    if piece.len > limits.max_msg_size && limits.max_msg_size > 0 {
                        return Err(invalid(format!(
                            "a write of {} bytes exceeds the provider's max_msg_size {}",
                            piece.len, limits.max_msg_size
                        )));
                    }
                }
            }
        }
        writers.sort_unstable();
        writers.dedup();
        targets.sort_unstable();
        targets.dedup();
        if let Some(&w) = writers.last().filter(|&&w| w >= size) {
            return Err(invalid(format!("writes expected from rank {w}")));
        }
        Ok(Prepared {
            receives_signals: plan.buffers.recv == 0 && plan.buffers.scratch == 0,
            buffers: plan.buffers,
            setup: plan.setup.into(),
            rounds: rounds.into(),
            expected: expected.into(),
            writers: writers.into(),
            targets: targets.into(),
            eager: false,
        })
    }

    /// A plan that does nothing (the stand-in for an operation given up before its start).
    fn empty() -> Prepared {
        Prepared {
            buffers: plan::Buffers::default(),
            setup: Arc::new([]),
            rounds: Arc::new([]),
            expected: Arc::new([]),
            writers: Arc::new([]),
            targets: Arc::new([]),
            receives_signals: true,
            eager: false,
        }
    }

    /// Rounds in which this rank does something.
    pub fn rounds(&self) -> usize {
        self.rounds.len()
    }

    /// Whether the operation takes the eager path.
    pub fn is_eager(&self) -> bool {
        self.eager
    }
}

/// An operation started with [`Transport::start`] and not finished yet.
pub struct Operation {
    run: Run,
    /// When it was started: [`Transport::test`]'s deadline counts from here.
    started: Instant,
}

impl fmt::Debug for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Operation")
            .field("op", &self.run.op)
            .field("seq", &self.run.seq)
            .finish()
    }
}

/// Where a transfer stands.
struct Pending {
    position: usize,
    transfer: usize,
    /// Pieces posted so far (a post may be refused with EAGAIN half way).
    posted: usize,
    /// Where the eager posting stands (slots of a transfer go out one by one).
    cursor: Cursor,
}

/// One operation in progress. The buffers are passed to each step rather than held, so that
/// a persistent request can keep its buffers and a run side by side.
struct Run {
    op: String,
    seq: u64,
    /// The operation a failure is reported for to the peers: this one, or an earlier one
    /// that a peer may still be in when the failure concerns it (a late write or token).
    abort_seq: u64,
    digest: u64,
    plan: Prepared,
    arrived: Vec<usize>,
    /// Position of the first incomplete round in `rounds`.
    next: usize,
    pending: Vec<Pending>,
    /// Local writes not completed yet.
    in_flight: usize,
    stats: OpStats,
    /// The result of a combine step, kept for the next one.
    combined: Vec<u8>,
    /// Generation stamps per target, to keep plan order per target while scanning.
    blocked: Vec<u64>,
    scan: u64,
}

impl Run {
    fn new(t: &Transport, op: String, seq: u64, digest: u64, plan: &Prepared) -> Self {
        let mut pending = Vec::new();
        for (position, round) in plan.rounds.iter().enumerate() {
            for transfer in 0..round.sends.len() {
                pending.push(Pending {
                    position,
                    transfer,
                    posted: 0,
                    cursor: Cursor::default(),
                });
            }
        }
        Run {
            op,
            seq,
            // An eager operation's digest is marked: ranks that disagree on it fail.
            digest: if plan.eager {
                eager::eager_digest(digest)
            } else {
                digest
            },
            plan: plan.clone(),
            arrived: vec![0; plan.rounds.len()],
            next: 0,
            pending,
            in_flight: 0,
            stats: OpStats::default(),
            combined: Vec::new(),
            blocked: vec![0; t.size],
            scan: 0,
            abort_seq: seq,
        }
    }

    /// Checks the buffers, runs the setup steps, counts what arrived early and sends the ready
    /// tokens.
    fn begin(&mut self, t: &mut Transport, buffers: &Buffers<'_>) -> Result<()> {
        let plan = self.plan.clone();
        for (buf, need) in [
            (Buf::Send, plan.buffers.send),
            (Buf::Recv, plan.buffers.recv),
            (Buf::Scratch, plan.buffers.scratch),
        ] {
            let have = buffers.get(buf).map_or(0, |v| v.len);
            if have < need {
                return Err(TransportError::Invalid {
                    op: self.op.clone(),
                    what: format!("the {buf} buffer has {have} bytes, the plan needs {need}"),
                });
            }
        }
        self.local_steps(&plan.setup, buffers)?;
        self.adopt_early(t)?;
        // Eager writes of this operation that came before it began.
        t.eager.queue_parked();
        self.take_slots(t, buffers)?;
        // Ready tokens: our buffers are free for this operation from now on.
        let has_target =
            buffers.recv.is_some_and(|v| v.len > 0) || buffers.scratch.is_some_and(|v| v.len > 0);
        if has_target {
            let empty = RemoteRegion {
                base: 0,
                len: 0,
                key: 0,
            };
            let token = Token {
                seq: self.seq,
                digest: self.digest,
                recv: buffers.recv.map_or(empty, |v| v.remote()),
                scratch: buffers.scratch.map_or(empty, |v| v.remote()),
                slots: wire::SlotRing::NONE,
            };
            for &writer in plan.writers.iter() {
                // An eager writer that knows our slots needs no token.
                let Some(slots) = self.eager_token(t, writer)? else {
                    continue;
                };
                let token = Token { slots, ..token };
                self.reachable(t, writer)?;
                self.post_with_retry(t, |t| t.post_token(writer, &token))?;
            }
        }
        Ok(())
    }

    /// Counts signals and aborts of this operation that arrived during earlier ones, and
    /// checks the tokens that did.
    fn adopt_early(&mut self, t: &mut Transport) -> Result<()> {
        let abort = wire::abort_seq(self.seq);
        if let Some(&(_, rank)) = t.early_aborts.iter().find(|(s, _)| *s == abort) {
            return Err(TransportError::AbortedBy {
                op: self.op.to_string(),
                rank,
            });
        }
        t.early_aborts
            .retain(|&(s, _)| order(abort, s, wire::ABORT_SEQ_BITS) == Order::Future);
        let seq = wire_seq(self.seq);
        let early: Vec<(u32, bool, usize)> = t
            .early
            .iter()
            .filter(|((s, _, _), _)| *s == seq)
            .map(|(&(_, round, signal), &n)| (round, signal, n))
            .collect();
        for (round, signal, n) in early {
            t.early.remove(&(seq, round, signal));
            self.count_arrivals(round, signal, n)?;
        }
        for from in 0..t.size {
            if let Some(token) = t.tokens[from].iter().find(|tok| tok.seq == self.seq) {
                let token = *token;
                self.check_token(from, &token)?;
            }
        }
        Ok(())
    }

    /// A token `from` sent for this operation: its digest must be ours, and this rank must
    /// write into `from` (or the two ranks run different plans).
    fn check_token(&self, from: usize, token: &Token) -> Result<()> {
        if token.digest != self.digest {
            return Err(TransportError::Mismatch {
                op: self.op.to_string(),
                peer: from,
            });
        }
        if self.plan.targets.binary_search(&from).is_err() {
            return Err(TransportError::Disagree {
                op: self.op.to_string(),
                what: format!(
                    "rank {from} expects writes from this rank that this rank's call does not make"
                ),
            });
        }
        Ok(())
    }

    /// Tells every other rank that this operation failed here. A full transmit queue is
    /// progressed and the abort posted again, for as long as draining would wait.
    fn abort_all(&mut self, t: &mut Transport) {
        let event = Event::Abort {
            from: t.rank,
            seq: wire::abort_seq(self.abort_seq),
        };
        let deadline = Instant::now() + DRAIN;
        let (rank, size) = (t.rank, t.size);
        for peer in (0..size).filter(|&peer| peer != rank) {
            loop {
                // A write to a peer that has ended could spin forever (see `liveness`).
                if t.processes.ended(peer) {
                    break;
                }
                match t.post_signal(peer, event) {
                    Ok(Post::Posted) => {
                        self.in_flight += 1;
                        break;
                    }
                    Ok(Post::Again) if Instant::now() < deadline => self.reap(t),
                    // Best effort: a peer that is gone cannot be told.
                    _ => break,
                }
            }
        }
    }

    /// Waits a slice for completions after a failure, counting only our own writes.
    fn reap(&mut self, t: &mut Transport) {
        match t.cq.wait(&mut t.completions, WAIT_SLICE) {
            Ok(_) => {
                let done = t.completions.iter().filter(|c| c.context.is_some()).count();
                self.in_flight = self.in_flight.saturating_sub(done);
                t.completions.clear();
            }
            // A failed write is a completed one.
            Err(_) => self.in_flight = self.in_flight.saturating_sub(1),
        }
    }

    fn local_steps(&mut self, steps: &[Local], buffers: &Buffers<'_>) -> Result<()> {
        for step in steps {
            match *step {
                Local::Copy {
                    src,
                    src_offset,
                    dst,
                    dst_offset,
                    len,
                } => {
                    let (s, d) = (self.view(buffers, src)?, self.writable(buffers, dst)?);
                    let (from, to) = (s.offset + src_offset, d.offset + dst_offset);
                    // In place (the send buffer is part of the receive buffer): nothing to copy.
                    if std::ptr::eq(s.mem, d.mem) && from == to {
                        continue;
                    }
                    d.mem.copy_from(to, s.mem, from, len)?;
                    self.stats.bytes_copied += len as u64;
                }
                Local::Combine {
                    reduction,
                    a,
                    b,
                    dst,
                    len,
                } => {
                    let (va, vb, vd) = (
                        self.view(buffers, a.0)?,
                        self.view(buffers, b.0)?,
                        self.writable(buffers, dst.0)?,
                    );
                    // The result goes through a buffer kept by the run: dst may overlap a or b.
                    let x = self.bytes(va, a.1, len)?;
                    let y = self.bytes(vb, b.1, len)?;
                    self.combined.resize(len, 0);
                    reduction.combine(x, y, &mut self.combined)?;
                    vd.mem.store(vd.offset + dst.1, &self.combined)?;
                }
            }
        }
        Ok(())
    }

    /// `len` bytes at `offset` of a view, read in place.
    fn bytes<'b>(&self, view: View<'b>, offset: usize, len: usize) -> Result<&'b [u8]> {
        let start = view.offset + offset;
        view.mem
            .as_slice()
            .get(start..start + len)
            .ok_or_else(|| self.protocol(format!("a local step reads past a buffer at {start}")))
    }

    fn view<'b>(&self, buffers: &Buffers<'b>, buf: Buf) -> Result<View<'b>> {
        buffers.get(buf).ok_or_else(|| TransportError::Invalid {
            op: self.op.to_string(),
            what: format!("the plan uses a {buf} buffer that was not given"),
        })
    }

    fn writable<'b>(&self, buffers: &Buffers<'b>, buf: Buf) -> Result<View<'b>> {
        if buf == Buf::Send {
            return Err(self.protocol("the plan writes into the send buffer".into()));
        }
        self.view(buffers, buf)
    }

    /// Refuses a write to a peer whose process has ended (see `liveness`).
    fn reachable(&self, t: &Transport, peer: usize) -> Result<()> {
        if t.processes.ended(peer) {
            return Err(TransportError::Exited {
                op: self.op.to_string(),
                peer,
            });
        }
        Ok(())
    }

    fn protocol(&self, what: String) -> TransportError {
        TransportError::Protocol {
            op: self.op.to_string(),
            what,
        }
    }

    /// Index of the first round that is not complete (`u64::MAX` when all are).
    fn complete_below(&self) -> u64 {
        self.plan
            .rounds
            .get(self.next)
            .map_or(u64::MAX, |r| u64::from(r.index))
    }

    fn done(&self) -> bool {
        self.next == self.plan.rounds.len() && self.pending.is_empty() && self.in_flight == 0
    }

    /// One pass without waiting: completes rounds, posts what is allowed, takes the
    /// completions that are there.
    fn progress(&mut self, t: &mut Transport, buffers: &Buffers<'_>) -> Result<()> {
        self.take_slots(t, buffers)?;
        self.complete_rounds(buffers)?;
        self.post_ready(t, buffers)?;
        if t.cq.poll(&mut t.completions)? > 0 {
            self.take_completions(t)?;
            self.take_slots(t, buffers)?;
            self.complete_rounds(buffers)?;
            self.post_ready(t, buffers)?;
        }
        Ok(())
    }

    /// Handles the completions read into `t.completions` and empties it (keeping its
    /// allocation for the next read). After an error the rest are still counted as local
    /// writes done, so that draining does not wait for them; receives consumed by remote CQ
    /// data are posted again.
    fn take_completions(&mut self, t: &mut Transport) -> Result<()> {
        let completions = std::mem::take(&mut t.completions);
        let mut outcome = Ok(());
        for c in &completions {
            if outcome.is_ok() {
                outcome = self.on_completion(t, c);
            } else if c.context.is_some() {
                self.in_flight = self.in_flight.saturating_sub(1);
            }
        }
        t.completions = completions;
        t.completions.clear();
        if t.endpoint.needs_cq_data_receives() {
            t.endpoint.replenish_cq_data_receives()?;
        }
        outcome
    }

    fn drive(&mut self, t: &mut Transport, buffers: &Buffers<'_>) -> Result<()> {
        // The deadline counts from the wait: a caller may do other work after starting.
        let deadline = Instant::now() + t.deadline;
        let poll_phase = if t.cq.has_wait_object() {
            POLL_PHASE
        } else {
            POLL_PHASE_WITHOUT_WAIT_OBJECT
        };
        let mut idle_since = Instant::now();
        let mut idle = false;
        loop {
            let mut progress = self.take_slots(t, buffers)?;
            progress |= self.complete_rounds(buffers)?;
            progress |= self.post_ready(t, buffers)?;
            if self.done() {
                return Ok(());
            }
            let got = if !idle || idle_since.elapsed() < poll_phase {
                if idle {
                    std::thread::yield_now();
                }
                t.cq.poll(&mut t.completions)
            } else {
                let left = deadline.saturating_duration_since(Instant::now());
                t.cq.wait(&mut t.completions, left.min(WAIT_SLICE))
            };
            let got = got?;
            if got > 0 {
                progress = true;
                self.take_completions(t)?;
            }
            if progress {
                idle = false;
            } else {
                if !idle {
                    idle = true;
                    idle_since = Instant::now();
                }
                if Instant::now() >= deadline {
                    return Err(TransportError::Timeout {
                        op: self.op.to_string(),
                        after: t.deadline,
                        waiting: self.awaited(t),
                    });
                }
            }
        }
    }

    /// Advances over complete rounds, running their local steps.
    fn complete_rounds(&mut self, buffers: &Buffers<'_>) -> Result<bool> {
        let mut progress = false;
        while self.next < self.plan.rounds.len()
            && self.arrived[self.next] >= self.plan.expected[self.next]
        {
            let rounds = Arc::clone(&self.plan.rounds);
            self.local_steps(&rounds[self.next].local, buffers)?;
            self.next += 1;
            progress = true;
        }
        Ok(progress)
    }

    /// Posts every transfer whose data is held and whose target is ready, keeping plan order
    /// per target.
    fn post_ready(&mut self, t: &mut Transport, buffers: &Buffers<'_>) -> Result<bool> {
        self.scan += 1;
        let below = self.complete_below();
        let mut progress = false;
        let mut i = 0;
        while i < self.pending.len() {
            let (position, index) = (self.pending[i].position, self.pending[i].transfer);
            let to = self.plan.rounds[position].sends[index].to;
            if self.blocked[to] == self.scan {
                i += 1;
                continue;
            }
            let transfer = &self.plan.rounds[position].sends[index];
            let held = transfer
                .pieces
                .iter()
                .all(|p| p.after.map_or(true, |r| u64::from(r) < below));
            let token = if held {
                self.token_for(t, transfer)?
            } else {
                None
            };
            // Without a token, an eager operation writes into the target's slots if it knows
            // them (else the target's token, with its slots, is on its way).
            let eager = held
                && token.is_none()
                && self.plan.eager
                && transfer.bytes() > 0
                && t.eager.outbound[to].is_some();
            let ready = held && (token.is_some() || transfer.bytes() == 0 || eager);
            if !ready {
                self.blocked[to] = self.scan;
                i += 1;
                continue;
            }
            let rounds = Arc::clone(&self.plan.rounds);
            let round = rounds[position].index;
            let transfer = &rounds[position].sends[index];
            if eager {
                match self.post_eager(t, buffers, transfer, round, i)? {
                    EagerPost::Done => {
                        progress = true;
                        self.pending.remove(i);
                    }
                    EagerPost::Again => break,
                    EagerPost::NoCredit => {
                        self.blocked[to] = self.scan;
                        i += 1;
                    }
                }
                continue;
            }
            let finished = self.post_transfer(t, buffers, transfer, round, token, i)?;
            progress = true;
            if finished {
                self.pending.remove(i);
            } else {
                // The provider's queue is full: progress completions before posting more.
                break;
            }
        }
        Ok(progress)
    }

    /// The token of `transfer`'s target for this operation, checking its digest.
    fn token_for(&self, t: &mut Transport, transfer: &Transfer) -> Result<Option<Token>> {
        let list = &mut t.tokens[transfer.to];
        list.retain(|tok| tok.seq >= self.seq);
        let Some(token) = list.iter().find(|tok| tok.seq == self.seq).copied() else {
            return Ok(None);
        };
        self.check_token(transfer.to, &token)?;
        Ok(Some(token))
    }

    /// Posts the remaining pieces of pending transfer `slot`; false if the provider asked to
    /// retry later.
    fn post_transfer(
        &mut self,
        t: &mut Transport,
        buffers: &Buffers<'_>,
        transfer: &Transfer,
        round: u32,
        token: Option<Token>,
        slot: usize,
    ) -> Result<bool> {
        let event = Event::Data {
            seq: wire_seq(self.seq),
            round,
            signal: transfer.bytes() == 0,
        };
        let peer = t.peers[transfer.to];
        let count = transfer.pieces.len();
        while self.pending[slot].posted < count {
            let piece = &transfer.pieces[self.pending[slot].posted];
            let post = if piece.len == 0 {
                self.reachable(t, transfer.to)?;
                t.post_signal(transfer.to, event)?
            } else {
                let token = token.ok_or_else(|| self.protocol("a write without a token".into()))?;
                let target = match piece.dst {
                    Buf::Recv => token.recv,
                    Buf::Scratch => token.scratch,
                    Buf::Send => {
                        return Err(self.protocol("a write into a send buffer".into()));
                    }
                };
                let remote = target
                    .range(piece.dst_offset as u64, piece.len as u64)
                    .map_err(|_| TransportError::Mismatch {
                        op: self.op.to_string(),
                        peer: transfer.to,
                    })?;
                let src = self.view(buffers, piece.src)?;
                let local: LocalRange<'_> =
                    src.mem.range(src.offset + piece.src_offset, piece.len)?;
                self.reachable(t, transfer.to)?;
                t.endpoint
                    .write(local, peer, remote, Some(event.encode()), self.seq)?
            };
            match post {
                Post::Posted => {
                    self.pending[slot].posted += 1;
                    self.in_flight += 1;
                    self.stats.writes += 1;
                    self.stats.bytes_written += piece.len as u64;
                }
                Post::Again => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Posts a control write, progressing the queue while the provider asks to retry.
    fn post_with_retry(
        &mut self,
        t: &mut Transport,
        mut post: impl FnMut(&Transport) -> Result<Post>,
    ) -> Result<()> {
        let deadline = Instant::now() + t.deadline;
        loop {
            if post(t)? == Post::Posted {
                self.in_flight += 1;
                return Ok(());
            }
            let n = t.cq.wait(&mut t.completions, WAIT_SLICE)?;
            if n > 0 {
                self.take_completions(t)?;
            }
            if Instant::now() >= deadline {
                return Err(TransportError::Timeout {
                    op: self.op.to_string(),
                    after: t.deadline,
                    waiting: "for room in the provider's transmit queue".into(),
                });
            }
        }
    }

    fn on_completion(&mut self, t: &mut Transport, c: &Completion) -> Result<()> {
        if c.context.is_some() {
            self.in_flight = self.in_flight.saturating_sub(1);
            return Ok(());
        }
        if !c.is_remote_write_data() {
            return Ok(());
        }
        let Some(word) = c.data else {
            return Ok(());
        };
        match Event::decode(word) {
            Event::Data { seq, round, signal } => {
                let current = wire_seq(self.seq);
                match order(current, seq, wire::SEQ_BITS) {
                    Order::Current => self.count_arrivals(round, signal, 1)?,
                    Order::Future => *t.early.entry((seq, round, signal)).or_insert(0) += 1,
                    Order::Past => {
                        // Its sender may still be in that operation: abort that one.
                        let behind =
                            u64::from(current.wrapping_sub(seq) & ((1 << wire::SEQ_BITS) - 1));
                        self.abort_seq = self.seq.saturating_sub(behind);
                        return Err(self.protocol(format!(
                            "a write of an operation that is over (wire sequence {seq}, current {current})"
                        )));
                    }
                }
            }
            Event::Token { from } => {
                if from >= t.size {
                    return Err(self.protocol(format!("a token from rank {from}")));
                }
                if let Some(token) = t.take_token(from) {
                    if token.seq < self.seq {
                        // Its sender is still in that operation: abort that one.
                        self.abort_seq = token.seq;
                        return Err(TransportError::Disagree {
                            op: self.op.to_string(),
                            what: format!(
                                "rank {from} expects writes from this rank in operation {}, which this rank finished without writing to it",
                                token.seq
                            ),
                        });
                    }
                    if token.seq == self.seq {
                        self.check_token(from, &token)?;
                    }
                    t.eager
                        .learn(from, &token.slots)
                        .map_err(|what| self.protocol(what))?;
                    let list = &mut t.tokens[from];
                    if !list.iter().any(|tok| tok.seq == token.seq) {
                        list.push(token);
                    }
                }
            }
            Event::Slot { from, slot } => self.slot_arrived(t, from, slot)?,
            Event::Credit { from } => self.credit_arrived(t, from)?,
            Event::Unknown { from, kind } => {
                return Err(self.protocol(format!(
                    "a control write of unknown kind {kind} from rank {from}"
                )));
            }
            Event::Abort { from, seq } => {
                let current = wire::abort_seq(self.seq);
                match order(current, seq, wire::ABORT_SEQ_BITS) {
                    Order::Current => {
                        return Err(TransportError::AbortedBy {
                            op: self.op.to_string(),
                            rank: from,
                        });
                    }
                    Order::Future => t.early_aborts.push((seq, from)),
                    // An operation this rank finished failed elsewhere: that rank is gone
                    // from this communicator, so this operation cannot complete either.
                    Order::Past => {
                        return Err(TransportError::AbortedEarlier {
                            op: self.op.to_string(),
                            rank: from,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Counts `n` writes (or signals) of this operation that arrived for `round`.
    fn count_arrivals(&mut self, round: u32, signal: bool, n: usize) -> Result<()> {
        if signal != self.plan.receives_signals {
            let (got, want) = if signal {
                ("a signal", "data")
            } else {
                ("data", "a signal")
            };
            return Err(TransportError::Disagree {
                op: self.op.to_string(),
                what: format!(
                    "{got} arrived in round {round} where this rank's call expects {want} (another rank called a different collective)"
                ),
            });
        }
        let position = self
            .plan
            .rounds
            .binary_search_by_key(&round, |r| r.index)
            .map_err(|_| {
                self.protocol(format!(
                    "a write for round {round}, in which this rank expects none"
                ))
            })?;
        self.arrived[position] += n;
        self.stats.arrivals += n as u64;
        if self.arrived[position] > self.plan.expected[position] {
            return Err(self.protocol(format!(
                "{} writes arrived in round {round}, {} expected",
                self.arrived[position], self.plan.expected[position]
            )));
        }
        Ok(())
    }

    /// What the operation is still waiting for, for a deadline error.
    fn awaited(&self, t: &Transport) -> String {
        if let Some(round) = self.plan.rounds.get(self.next) {
            let missing = self.plan.expected[self.next] - self.arrived[self.next];
            let from: Vec<String> = round.expects.iter().map(|e| e.from.to_string()).collect();
            return format!(
                "waiting for {missing} of {} writes in round {} from rank(s) {}",
                self.plan.expected[self.next],
                round.index,
                from.join(", ")
            );
        }
        if let Some(p) = self.pending.first() {
            let to = self.plan.rounds[p.position].sends[p.transfer].to;
            let has_token = t.tokens[to].iter().any(|tok| tok.seq == self.seq);
            let slots = t.eager.outbound[to].as_ref().filter(|_| self.plan.eager);
            if let Some(out) = slots.filter(|o| !has_token && o.free() == 0) {
                return format!(
                    "waiting for rank {to} to read its receive slots (all {} in use)",
                    out.slots
                );
            }
            return if has_token {
                format!("posting a write to rank {to}")
            } else {
                format!("waiting for the ready token of rank {to}")
            };
        }
        format!("waiting for {} local writes to complete", self.in_flight)
    }

    /// After a failure: waits a little for our own writes, so that no write that reads the
    /// operation's buffers is still in flight (the regions stay alive until their writes
    /// complete in any case). False if some never completed.
    fn drain(&mut self, t: &mut Transport) -> bool {
        let deadline = Instant::now() + DRAIN;
        while self.in_flight > 0 && Instant::now() < deadline {
            self.reap(t);
        }
        self.in_flight == 0
    }
}
