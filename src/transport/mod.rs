//! Executes plans between processes with one-sided writes: per operation, every rank that
//! expects writes sends its writers a ready token, writers post each transfer as few
//! scatter-gather writes with remote CQ data as the job's limits allow (`plan::merge`) once
//! the data is held and the token is in, and receivers count arrivals per round. The protocol (tokens, CQ data, signals, aborts, deadlines, waiting) is described in
//! docs/architecture.md, section "The one-sided protocol (src/transport)".
//!
//! An operation is [`Transport::prepare`]d (the plan materialised once into a [`Prepared`],
//! which persistent operations keep and reuse), [`Transport::start`]ed (setup steps, ready
//! tokens, the writes already allowed) and [`Transport::finish`]ed (driven to completion).
//! Only one operation is in progress at a time. The transport is the crate's own: users reach
//! it through `comm`.
//!
//! The [`Transport`] owns the endpoint and drives one run at a time (`drive`); a run's state
//! (`run`) only takes in what arrived and says what may be posted, so it can be tested
//! without a fabric. Set-up is in `setup`, the peers' addresses (known at start or fetched
//! when first needed) in `peers`, the prepared plan in `prepared`, local copy and combine
//! steps in `local`, the waiting policy in `waiting`, the wire format in [`wire`], and the
//! eager path for small operations (receive slots instead of ready tokens) in [`eager`], a
//! protocol module that sees the transport's fabric only as lent to it (`link`) and never
//! the run.

mod card;
mod drive;
pub mod eager;
mod error;
mod fabrics;
mod link;
mod liveness;
mod local;
mod peers;
mod prepared;
mod run;
pub mod segment;
mod setup;
mod waiting;
pub mod wire;

use std::fmt;
use std::time::{Duration, Instant};

use crate::fabric::{Access, Completion, Endpoint, FabricError, Info, RegisteredMemory};
use crate::plan::merge::IovLimits;
use crate::plan::{Algorithm, RankPlan};
use eager::Eager;
use fabrics::Fabrics;
use peers::Peers;
use run::{Inbox, Run, Spare};

pub use card::Card;
pub use eager::{Carrier, EagerConfig};
pub use error::{Result, TransportError};
pub use fabrics::{Carried, Route, Traffic};
pub use local::{BufferViews, View};
pub use peers::CardSource;
pub use prepared::{EagerRule, Limits, Prepared};
pub use run::OpStats;
pub use setup::{provider_iov_limits, Opened};

/// Default deadline of one operation.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(60);

/// One rank's side of the one-sided protocol: its fabrics (endpoints and completion queues),
/// the peers' addresses and control regions, and the state carried from one operation to the
/// next.
pub struct Transport {
    rank: usize,
    size: usize,
    /// The network fabric, and the node's where peers share this rank's node.
    fabrics: Fabrics,
    control: RegisteredMemory,
    /// The peers' addresses and control regions, and their processes where they can be
    /// watched (shm).
    peers: Peers,
    /// Sequence number of the next operation.
    seq: u64,
    /// Tokens, and writes and aborts of operations not reached yet, kept between operations.
    inbox: Inbox,
    /// The receive slots kept for eager writers, and the targets' slots for this rank.
    eager: Eager,
    limits: Limits,
    /// The limits of one merged write, the same on every rank.
    iov: IovLimits,
    deadline: Duration,
    copied: u64,
    /// What the writes carried, per way of reaching peers.
    traffic: std::cell::Cell<Traffic>,
    broken: Option<String>,
    /// The shared segment of a communicator on one node, once set up: told of every failure
    /// that breaks this transport, so that the peers waiting on it fail at once.
    segment: Option<segment::Segment>,
    /// Sequence number of the operation started and not finished yet.
    active: Option<u64>,
    completions: Vec<Completion>,
    /// The collections of the last finished run, for the next one.
    spare: Spare,
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("provider", &self.fabrics.info().provider())
            .field("seq", &self.seq)
            .finish()
    }
}

impl Transport {
    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The network provider's description.
    pub fn info(&self) -> &Info {
        self.fabrics.info()
    }

    /// The description of the provider that reaches the ranks of this node, where the
    /// transport has a fabric of its own for them.
    pub fn node_info(&self) -> Option<&Info> {
        self.fabrics.node().map(Endpoint::info)
    }

    /// The network endpoint this transport writes from (memory it registers is usable with
    /// it, and with the node fabric's where there is one).
    pub fn endpoint(&self) -> &Endpoint {
        self.fabrics.network()
    }

    /// The fabric that reaches `peer`, if its card is known.
    pub fn route(&self, peer: usize) -> Option<Route> {
        self.peers.route(peer).ok()
    }

    /// What this rank's writes carried since the transport was connected, per way of
    /// reaching peers.
    pub fn traffic(&self) -> Traffic {
        self.traffic.get()
    }

    /// The limits of one merged write (the provider's, lowered by `CIRCULANT_IOV_LIMIT`): the
    /// same on every rank.
    pub fn iov_limits(&self) -> IovLimits {
        self.iov
    }

    /// How long an operation may take.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Sets how long an operation may take.
    pub fn set_deadline(&mut self, deadline: Duration) {
        self.deadline = deadline;
    }

    /// Bytes the library copied locally (plan copy steps and staging of unregistered buffers)
    /// since the communicator was created.
    pub fn bytes_copied(&self) -> u64 {
        self.copied
    }

    /// Peers' address cards fetched since the transport was connected, each when an
    /// operation first wrote to that peer (0 for a transport connected with every card).
    pub fn cards_fetched(&self) -> usize {
        self.peers.fetched()
    }

    /// Takes back bytes an operation of the library's own counted (the argument check), so
    /// that [`Self::bytes_copied`] counts the copies of the user's calls.
    pub fn discount_copied(&mut self, bytes: u64) {
        self.copied = self.copied.saturating_sub(bytes);
    }

    /// Takes the number of an operation that runs outside the transport (on the shared
    /// segment, [`segment`]), so that operations are numbered alike on both; refused, as a
    /// start is, when the transport is unusable or busy.
    pub fn take_seq(&mut self, name: &str) -> Result<u64> {
        self.usable(name)?;
        self.seq += 1;
        Ok(self.seq - 1)
    }

    /// Keeps the communicator's shared segment (see the field).
    pub fn set_segment(&mut self, segment: segment::Segment) {
        self.segment = Some(segment);
    }

    /// The shared segment, once set up.
    pub fn segment_mut(&mut self) -> Option<&mut segment::Segment> {
        self.segment.as_mut()
    }

    fn abort_segment(&self) {
        if let Some(segment) = &self.segment {
            segment.abort();
        }
    }

    /// Counts `parts` published into shared memory by operations on the segment, carrying
    /// `bytes`.
    pub fn count_published(&self, parts: usize, bytes: usize) {
        fabrics::count_memory(&self.traffic, parts, bytes);
    }

    /// Adds bytes copied outside a plan (staging of plain slices).
    pub fn count_copied(&mut self, bytes: usize) {
        self.copied += bytes as u64;
    }

    /// Registered memory of this transport's domains, with `access` for the peers.
    pub fn alloc(&self, len: usize, access: Access) -> Result<RegisteredMemory> {
        Ok(RegisteredMemory::for_endpoints(
            &self.fabrics.endpoints(),
            len.max(1),
            access,
        )?)
    }

    /// Materialises `plan` once for repeated starts ([`Prepared::new`] with this transport's
    /// size and limits: one write per piece). It never takes the eager path: see
    /// [`Self::prepare_sized`].
    pub fn prepare(&self, name: &str, plan: RankPlan<'_>) -> Result<Prepared> {
        Prepared::new(name, plan, self.size, self.limits)
    }

    /// Materialises `plan`, this rank's plan of `algorithm`, for an operation of `bytes` as
    /// every rank computes it (the problem's size): its transfers are posted as merged writes
    /// under [`Self::iov_limits`], and its pairs take the eager path as [`Prepared::sized`]
    /// chooses under the eager limit: all of them if `bytes` is at most the limit, else those
    /// whose transfers carry at most the limit.
    pub fn prepare_sized(
        &self,
        name: &str,
        algorithm: &dyn Algorithm,
        plan: RankPlan<'_>,
        bytes: usize,
    ) -> Result<Prepared> {
        let config = self.eager.config();
        let rule = EagerRule {
            limit: config.limit,
            all: config.applies(bytes),
        };
        Prepared::sized(
            name,
            algorithm,
            plan,
            self.size,
            self.limits,
            self.iov,
            rule,
        )
    }

    /// Sets the eager path's settings (the same limit on every rank, or eager operations fail
    /// with a mismatch); receive slots kept already stay as they are.
    pub fn set_eager(&mut self, config: EagerConfig) {
        let provider = self.info().provider();
        let inject = self.info().inject_size();
        self.eager.configure(config, &provider, inject);
    }

    /// How writers reach the receive slots this rank sets up for them from now on.
    pub fn eager_carrier(&self) -> Carrier {
        self.eager.carrier()
    }

    /// Credit words this rank wrote to its eager writers (over [`Carrier::Write`]; credits that
    /// went along in slots to those writers are not counted).
    pub fn credit_words(&self) -> u64 {
        self.eager.credit_words()
    }

    /// Starts a prepared plan as the next operation: checks the buffers, runs the setup steps,
    /// sends the ready tokens and posts every write that is already allowed (reading the
    /// completion queue once, except where eager messages travel through shared memory), then
    /// returns.
    /// [`Self::finish`] with the same buffers completes it; no other operation may start on
    /// this transport before (an error says so). The buffers must stay registered and
    /// untouched until then.
    pub fn start(
        &mut self,
        name: &str,
        digest: u64,
        prepared: &Prepared,
        buffers: BufferViews<'_>,
    ) -> Result<Operation> {
        self.usable(name)?;
        let seq = self.seq;
        self.seq += 1;
        let mut spare = std::mem::take(&mut self.spare);
        let op = operation_name(spare.take_name(), name, seq);
        let mut run = Run::new(op, seq, digest, prepared, self.size, spare);
        self.active = Some(seq);
        // From here on the peers count on this operation: any failure goes through `fail`.
        // One pass of progress, the completion queue read too: it lets in what peers already
        // sent, and the aborts of an earlier operation that this rank finished without reading
        // the queue (a root that only stored into shared memory) fail this one.
        let started = self
            .begin(&mut run, &buffers)
            .and_then(|posting| self.progress(&mut run, &buffers).map(|()| posting));
        match started {
            Ok(posting) => Ok(Operation {
                run,
                started: posting,
                posting,
            }),
            Err(err) => Err(self.fail(&mut run, err)),
        }
    }

    /// Drives a started operation to completion.
    pub fn finish(&mut self, operation: Operation, buffers: BufferViews<'_>) -> Result<OpStats> {
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
        let result = self.drive(&mut run, &buffers);
        self.copied += run.stats.bytes_copied;
        self.active = None;
        match result {
            Ok(()) => {
                let stats = run.stats;
                self.spare = run.into_spare();
                Ok(stats)
            }
            Err(err) => Err(self.fail(&mut run, err)),
        }
    }

    /// Progresses a started operation without blocking: completes what has arrived and posts
    /// what is allowed. `Ok(true)` once it is done (then [`Self::finish`] returns at once).
    /// The deadline counts from the start here, as a caller that only tests never waits.
    pub fn test(&mut self, operation: &mut Operation, buffers: BufferViews<'_>) -> Result<bool> {
        let Operation { run, started, .. } = operation;
        if self.active != Some(run.seq) {
            return Err(TransportError::Invalid {
                op: run.op.clone(),
                what: "the operation is not the one in progress on this transport".into(),
            });
        }
        let result = self.progress(run, &buffers).and_then(|()| {
            if run.done() {
                Ok(true)
            } else if started.elapsed() >= self.deadline {
                Err(TransportError::Timeout {
                    op: run.op.clone(),
                    after: self.deadline,
                    waiting: run.awaited(&self.inbox),
                })
            } else {
                Ok(false)
            }
        });
        result.map_err(|err| self.fail(run, err))
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
        self.give_up(name, why, None);
    }

    /// [`Self::abandon`] for an operation that failed outside the transport (on the shared
    /// segment) with `err`: as a failed operation here, the peers are told, but an abort that
    /// came from a peer does not make this rank fetch every card first (that peer told every
    /// rank).
    pub fn abandon_after(&mut self, name: &str, err: &TransportError) {
        self.give_up(name, &err.to_string(), Some(err));
    }

    fn give_up(&mut self, name: &str, why: &str, err: Option<&TransportError>) {
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
            format!("{name} (operation {seq})"),
            seq,
            0,
            &Prepared::empty(),
            self.size,
            Spare::default(),
        );
        self.fetch_cards_to_abort(err);
        self.abort_all(&mut run);
        self.drain(&mut run);
        self.broken = Some(match err {
            Some(_) => why.to_string(),
            None => format!("{name} (operation {seq}): {why}"),
        });
        self.abort_segment();
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

    /// Before an abort: every rank must hear of the failure, so the cards not known yet are
    /// fetched (within the deadline, while the source answers). Not after an abort from a
    /// peer (`err`): that peer fetched them and told every rank, and a failure that spreads
    /// must not make every rank read every card.
    fn fetch_cards_to_abort(&mut self, err: Option<&TransportError>) {
        if !matches!(
            err,
            Some(TransportError::AbortedBy { .. } | TransportError::AbortedEarlier { .. })
        ) {
            self.peers.resolve_all(Instant::now() + self.deadline);
        }
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
        self.fetch_cards_to_abort(Some(&err));
        self.abort_all(run);
        self.drain(run);
        // Writes of a failed operation may still arrive: nothing later can trust them.
        self.broken = Some(err.to_string());
        self.abort_segment();
        self.active = None;
        err
    }
}

impl Drop for Transport {
    fn drop(&mut self) {
        self.drain_credit_writes();
    }
}

/// `"{name} (operation {seq})"`, the name errors give an operation, built in `op`'s buffer
/// without the formatting machinery: it is made on every start.
fn operation_name(mut op: String, name: &str, seq: u64) -> String {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = seq;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    op.clear();
    op.push_str(name);
    op.push_str(" (operation ");
    op.extend(digits[at..].iter().map(|&d| char::from(d)));
    op.push(')');
    op
}

/// An operation started with [`Transport::start`] and not finished yet.
pub struct Operation {
    run: Run,
    /// When it was started: [`Transport::test`]'s deadline counts from here.
    started: Instant,
    /// When its posting began (see [`Operation::posting`]).
    posting: Instant,
}

impl Operation {
    /// When the transport began posting this operation: just before its first write to the
    /// fabric (a ready token), or, on a rank that sends no token, once its setup was done and
    /// it went on to post its writes (which may wait for the peers' tokens).
    pub fn posting(&self) -> Instant {
        self.posting
    }
}

impl fmt::Debug for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Operation")
            .field("op", &self.run.op)
            .field("seq", &self.run.seq)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn operation_names_as_formatted() {
        for seq in [0, 7, 10, 12_345, u64::MAX] {
            assert_eq!(
                super::operation_name(String::from("stale"), "bcast", seq),
                format!("bcast (operation {seq})")
            );
        }
    }
}
