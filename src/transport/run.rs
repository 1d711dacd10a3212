//! The state of one operation in progress, and what a rank keeps between operations.
//!
//! A [`Run`] is plain state: it is told what arrived ([`Incoming`]) and asked what may be
//! posted next; the transport that owns it does all reading and writing on the fabric.
//!
//! What counts as a protocol error or a disagreement: docs/architecture.md, section "The
//! one-sided protocol (src/transport)".

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use std::sync::Arc;

use crate::plan::merge::Write;
use crate::plan::{Local, Piece};

use super::eager::{self, Cursor, Eager, SlotHeader};
use super::local::{BufferViews, LocalSteps};
use super::wire::{self, order, wire_seq, Order, SlotRing, Token};
use super::{OpStats, Prepared, Result, TransportError};
use crate::fabric::RemoteRegion;

/// What the completion queue reported, as the run state needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Incoming {
    /// A peer's write (or zero-length signal, `signal`) of wire sequence `seq` for `round`.
    Data { seq: u8, round: u32, signal: bool },
    /// `from` wrote a ready token into our control region; `None` if its slot did not hold a
    /// well-formed one.
    Token { from: usize, token: Option<Token> },
    /// `from` gave up the operation of abort sequence `seq`.
    Abort { from: usize, seq: u8 },
    /// `from` wrote an eager message into its receive slot `slot` of this rank.
    Slot { from: usize, slot: u8 },
    /// `from` wrote its credit word: the low 32 bits of its count of this rank's eager
    /// messages read (`None` if the word was torn: a newer one is landing, with its own event).
    Credit { from: usize, read: Option<u32> },
    /// A control write of a kind this version does not know.
    Unknown { from: usize, kind: u8 },
    /// One of this rank's own writes completed.
    LocalDone,
}

/// What arrived for operations other than the one in progress, carried from one operation to
/// the next.
pub(super) struct Inbox {
    /// Tokens received and not yet used, per peer (usually at most one).
    pub(super) tokens: Vec<Vec<Token>>,
    /// Writes and signals of operations this rank has not reached yet:
    /// (wire seq, round, signal) → count.
    pub(super) early: HashMap<(u8, u32, bool), usize>,
    /// Aborts of operations this rank has not reached yet: (abort seq, rank).
    pub(super) early_aborts: Vec<(u8, usize)>,
    /// Ranks whose tokens of operations this rank had not reached arrived: a start checks
    /// theirs alone, not every rank's.
    early_tokens: Vec<usize>,
    /// The receive slots kept for eager writers, and the targets' slots for this rank.
    pub(super) eager: Eager,
}

impl Inbox {
    pub fn new(size: usize) -> Self {
        Inbox {
            tokens: vec![Vec::new(); size],
            early: HashMap::new(),
            early_aborts: Vec::new(),
            early_tokens: Vec::new(),
            eager: Eager::new(size),
        }
    }

    fn size(&self) -> usize {
        self.tokens.len()
    }

    /// Whether `to`'s token for operation `seq` is here.
    pub fn has_token(&self, to: usize, seq: u64) -> bool {
        self.tokens[to].iter().any(|tok| tok.seq == seq)
    }
}

/// Where a transfer stands.
struct Pending {
    position: usize,
    transfer: usize,
    to: usize,
    /// The last round whose completion the data of its pieces waits for.
    after: Option<u32>,
    /// The next transfer to the same target, in plan order.
    next_to_same: Option<usize>,
    /// Where its writes start in the plan's writes ([`Prepared`]).
    first_write: usize,
    /// How many writes it is posted as.
    writes: usize,
    /// Writes posted so far (a post may be refused with EAGAIN half way).
    posted: usize,
    /// Where the eager posting stands (a transfer's slots go out one by one).
    cursor: Cursor,
    /// Every piece is posted.
    done: bool,
}

/// A transfer allowed to be posted now ([`Run::next_ready`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ready {
    pub to: usize,
    pub round: u32,
    /// Zero-length: its pieces are signals.
    pub signal: bool,
    /// The target's token (`None` for signals, which need none, and eager transfers).
    pub token: Option<Token>,
    /// Into the target's receive slots, without a token (the eager path).
    pub eager: bool,
}

/// One operation in progress. The buffers are passed to each step rather than held, so that
/// a persistent request can keep its buffers and a run side by side.
pub(super) struct Run {
    pub(super) op: String,
    pub(super) seq: u64,
    /// The operation a failure is reported for to the peers: this one, or an earlier one
    /// that a peer may still be in when the failure concerns it (a late write or token).
    pub(super) abort_seq: u64,
    digest: u64,
    plan: Prepared,
    arrived: Vec<usize>,
    /// Position of the first incomplete round in `rounds`.
    next: usize,
    /// Every transfer of the plan, in plan order.
    transfers: Vec<Pending>,
    /// Transfers not posted whole yet.
    unposted: usize,
    /// The first transfer in plan order not posted whole yet.
    first_unposted: usize,
    /// Transfers to look at, earliest in plan order first: each the first unposted transfer
    /// to its target (posting keeps plan order per target) that may have become ready.
    candidates: BinaryHeap<Reverse<usize>>,
    /// First unposted transfers whose data is not held yet, by the round they wait for.
    awaiting_round: BinaryHeap<Reverse<(u32, usize)>>,
    /// Per target, its first unposted transfer if that waits for the target's token.
    awaiting_token: Vec<Option<usize>>,
    /// Per target, its first unposted transfer if that waits for free receive slots.
    awaiting_slots: Vec<Option<usize>>,
    /// The targets in `awaiting_slots`.
    slot_waiters: Vec<usize>,
    /// The transfer [`Self::next_ready`] returned, until it is posted whole.
    current: usize,
    /// Local writes not completed yet.
    pub(super) in_flight: usize,
    pub(super) stats: OpStats,
    local: LocalSteps,
    /// Scratch of [`Self::new`] (each target's last transfer), kept for the next run.
    last_to: Vec<Option<usize>>,
}

/// The collections of a finished [`Run`], kept by the transport for the next one so that
/// starting an operation allocates nothing once their capacities fit.
#[derive(Default)]
pub(super) struct Spare {
    transfers: Vec<Pending>,
    last_to: Vec<Option<usize>>,
    arrived: Vec<usize>,
    candidates: BinaryHeap<Reverse<usize>>,
    awaiting_round: BinaryHeap<Reverse<(u32, usize)>>,
    awaiting_token: Vec<Option<usize>>,
    awaiting_slots: Vec<Option<usize>>,
    slot_waiters: Vec<usize>,
    local: LocalSteps,
    /// The operation's name, whose buffer the next name reuses.
    op: String,
}

impl Spare {
    /// The name buffer, for the next operation's name.
    pub fn take_name(&mut self) -> String {
        std::mem::take(&mut self.op)
    }
}

impl Run {
    /// Operation `seq`, named `op`, of `plan` among `size` ranks, in the collections of
    /// `spare` (emptied first).
    pub fn new(
        op: String,
        seq: u64,
        digest: u64,
        plan: &Prepared,
        size: usize,
        spare: Spare,
    ) -> Self {
        let Spare {
            mut transfers,
            mut last_to,
            mut arrived,
            mut candidates,
            mut awaiting_round,
            mut awaiting_token,
            mut awaiting_slots,
            mut slot_waiters,
            local,
            op: _,
        } = spare;
        transfers.clear();
        slot_waiters.clear();
        candidates.clear();
        awaiting_round.clear();
        // Kept at `size` entries, all `None` ([`Self::into_spare`] resets what a run set), so
        // that starting an operation costs what its plan holds, not p.
        for v in [&mut last_to, &mut awaiting_token, &mut awaiting_slots] {
            if v.len() != size {
                v.clear();
                v.resize(size, None);
            }
        }
        arrived.clear();
        arrived.resize(plan.rounds.len(), 0);
        for (position, round) in plan.rounds.iter().enumerate() {
            for (transfer, t) in round.sends.iter().enumerate() {
                let index = transfers.len();
                match last_to[t.to].replace(index) {
                    Some(before) => {
                        let before: &mut Pending = &mut transfers[before];
                        before.next_to_same = Some(index);
                    }
                    None => candidates.push(Reverse(index)),
                }
                transfers.push(Pending {
                    position,
                    transfer,
                    to: t.to,
                    after: t.pieces.iter().map(|p| p.after).max().flatten(),
                    first_write: plan.transfer_writes[index],
                    writes: plan.transfer_writes[index + 1] - plan.transfer_writes[index],
                    next_to_same: None,
                    posted: 0,
                    cursor: Cursor::default(),
                    done: false,
                });
            }
        }
        Run {
            op,
            seq,
            // The eager limit chooses the eager pairs: ranks that disagree on it fail.
            digest: if plan.eager_limit > 0 {
                eager::eager_digest(digest, plan.eager_limit)
            } else {
                digest
            },
            plan: plan.clone(),
            arrived,
            next: 0,
            unposted: transfers.len(),
            transfers,
            first_unposted: 0,
            candidates,
            awaiting_round,
            awaiting_token,
            awaiting_slots,
            slot_waiters,
            current: 0,
            in_flight: 0,
            stats: OpStats::default(),
            local,
            abort_seq: seq,
            last_to,
        }
    }

    /// Operation `seq` named as the transport names it, in fresh collections.
    #[cfg(test)]
    pub(super) fn for_test(seq: u64, digest: u64, plan: &Prepared, size: usize) -> Run {
        let op = format!("test (operation {seq})");
        Run::new(op, seq, digest, plan, size, Spare::default())
    }

    /// Gives back the collections for the next run ([`Self::new`]), the per-rank ones reset
    /// where this run set them: only at the targets of its transfers.
    pub fn into_spare(mut self) -> Spare {
        for p in &self.transfers {
            self.last_to[p.to] = None;
            self.awaiting_token[p.to] = None;
            self.awaiting_slots[p.to] = None;
        }
        Spare {
            transfers: self.transfers,
            last_to: self.last_to,
            arrived: self.arrived,
            candidates: self.candidates,
            awaiting_round: self.awaiting_round,
            awaiting_token: self.awaiting_token,
            awaiting_slots: self.awaiting_slots,
            slot_waiters: self.slot_waiters,
            local: self.local.kept(),
            op: self.op,
        }
    }

    /// Checks that `buffers` are as large as the plan needs, then runs the setup steps.
    pub fn setup(&mut self, buffers: &BufferViews<'_>) -> Result<()> {
        let need = self.plan.buffers;
        for (buf, need) in [
            (crate::plan::Buf::Send, need.send),
            (crate::plan::Buf::Recv, need.recv),
            (crate::plan::Buf::Scratch, need.scratch),
        ] {
            let have = buffers.get(buf).map_or(0, |v| v.len);
            if have < need {
                return Err(TransportError::Invalid {
                    op: self.op.clone(),
                    what: format!("the {buf} buffer has {have} bytes, the plan needs {need}"),
                });
            }
        }
        let steps: &[Local] = &self.plan.setup;
        self.local
            .run(&self.op, steps, buffers, &mut self.stats.bytes_copied)
    }

    /// The ready token this rank sends its writers, if it has buffers to write into.
    pub fn ready_token(&self, buffers: &BufferViews<'_>) -> Option<Token> {
        let has_target =
            buffers.recv.is_some_and(|v| v.len > 0) || buffers.scratch.is_some_and(|v| v.len > 0);
        if !has_target {
            return None;
        }
        let empty = RemoteRegion {
            base: 0,
            len: 0,
            key: 0,
        };
        Some(Token {
            seq: self.seq,
            digest: self.digest,
            recv: buffers.recv.map_or(empty, |v| v.remote()),
            scratch: buffers.scratch.map_or(empty, |v| v.remote()),
            slots: SlotRing::NONE,
        })
    }

    /// The ranks that write into this one (they get the ready token).
    pub fn writers(&self) -> &[usize] {
        &self.plan.writers
    }

    /// Counts signals and aborts of this operation that arrived during earlier ones, and
    /// checks the tokens that did.
    pub fn adopt_early(&mut self, inbox: &mut Inbox) -> Result<()> {
        let abort = wire::abort_seq(self.seq);
        if let Some(&(_, rank)) = inbox.early_aborts.iter().find(|(s, _)| *s == abort) {
            return Err(TransportError::AbortedBy {
                op: self.op.to_string(),
                rank,
            });
        }
        inbox
            .early_aborts
            .retain(|&(s, _)| order(abort, s, wire::ABORT_SEQ_BITS) == Order::Future);
        let seq = wire_seq(self.seq);
        if !inbox.early.is_empty() {
            let early: Vec<(u32, bool, usize)> = inbox
                .early
                .iter()
                .filter(|((s, _, _), _)| *s == seq)
                .map(|(&(_, round, signal), &n)| (round, signal, n))
                .collect();
            for (round, signal, n) in early {
                inbox.early.remove(&(seq, round, signal));
                self.count_arrivals(round, signal, n)?;
            }
        }
        // Tokens of this operation that are here came early: each is checked now, and the
        // ranks with tokens of later operations still are kept.
        let mut k = 0;
        while let Some(&from) = inbox.early_tokens.get(k) {
            let tokens = &inbox.tokens[from];
            if let Some(token) = tokens.iter().find(|tok| tok.seq == self.seq) {
                self.check_token(from, token)?;
            }
            if tokens.iter().any(|tok| tok.seq > self.seq) {
                k += 1;
            } else {
                inbox.early_tokens.swap_remove(k);
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

    /// Takes in what the completion queue reported.
    pub fn on_event(&mut self, inbox: &mut Inbox, event: Incoming) -> Result<()> {
        match event {
            Incoming::LocalDone => self.in_flight = self.in_flight.saturating_sub(1),
            Incoming::Data { seq, round, signal } => {
                let current = wire_seq(self.seq);
                match order(current, seq, wire::SEQ_BITS) {
                    Order::Current => self.count_arrivals(round, signal, 1)?,
                    Order::Future => *inbox.early.entry((seq, round, signal)).or_insert(0) += 1,
                    Order::Past => {
                        // Its sender may still be in that operation: abort that one.
                        let behind = wire::behind(current, seq, wire::SEQ_BITS);
                        self.abort_seq = self.seq.saturating_sub(behind);
                        return Err(self.protocol(format!(
                            "a write of an operation that is over (wire sequence {seq}, current {current})"
                        )));
                    }
                }
            }
            Incoming::Token { from, token } => {
                if from >= inbox.size() {
                    return Err(self.protocol(format!("a token from rank {from}")));
                }
                if let Some(token) = token {
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
                    inbox
                        .eager
                        .learn(from, &token.slots)
                        .map_err(|what| self.protocol(what))?;
                    let list = &mut inbox.tokens[from];
                    if !list.iter().any(|tok| tok.seq == token.seq) {
                        list.push(token);
                        if token.seq > self.seq && !inbox.early_tokens.contains(&from) {
                            inbox.early_tokens.push(from);
                        }
                    }
                    if token.seq == self.seq {
                        if let Some(waiting) = self.awaiting_token[from].take() {
                            self.candidates.push(Reverse(waiting));
                        }
                    }
                }
            }
            Incoming::Slot { from, slot } => inbox
                .eager
                .slot_arrived(from, slot)
                .map_err(|what| self.protocol(what))?,
            Incoming::Credit { from, read } => {
                inbox
                    .eager
                    .credit(from, read)
                    .map_err(|what| self.protocol(what))?;
                self.slots_freed(from);
            }
            Incoming::Unknown { from, kind } => {
                return Err(self.protocol(format!(
                    "a control write of unknown kind {kind} from rank {from}"
                )));
            }
            Incoming::Abort { from, seq } => {
                let current = wire::abort_seq(self.seq);
                match order(current, seq, wire::ABORT_SEQ_BITS) {
                    Order::Current => {
                        return Err(TransportError::AbortedBy {
                            op: self.op.to_string(),
                            rank: from,
                        });
                    }
                    Order::Future => inbox.early_aborts.push((seq, from)),
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

    /// Advances over complete rounds, running their local steps.
    pub fn complete_rounds(&mut self, buffers: &BufferViews<'_>) -> Result<bool> {
        let mut progress = false;
        while self.next < self.plan.rounds.len()
            && self.arrived[self.next] >= self.plan.expected[self.next]
        {
            let steps: &[Local] = &self.plan.rounds[self.next].local;
            self.local
                .run(&self.op, steps, buffers, &mut self.stats.bytes_copied)?;
            self.next += 1;
            progress = true;
        }
        Ok(progress)
    }

    /// Index of the first round that is not complete (`u64::MAX` when all are).
    fn complete_below(&self) -> u64 {
        self.plan
            .rounds
            .get(self.next)
            .map_or(u64::MAX, |r| u64::from(r.index))
    }

    /// Starts a pass over the transfers that may have become ready ([`Self::next_ready`]):
    /// those whose data the rounds completed since the last pass hold.
    pub fn start_scan(&mut self) {
        let below = self.complete_below();
        while let Some(&Reverse((round, index))) = self.awaiting_round.peek() {
            if u64::from(round) >= below {
                break;
            }
            self.awaiting_round.pop();
            self.candidates.push(Reverse(index));
        }
    }

    /// The next transfer of this pass, in plan order, whose data is held and whose target is
    /// ready; only the first unposted transfer to each target is looked at, so that plan
    /// order per target is kept. The work is proportional to the transfers that may have
    /// become ready, not to all of them. The transfer stays current until
    /// [`Self::transfer_posted`].
    pub fn next_ready(&mut self, inbox: &mut Inbox) -> Result<Option<Ready>> {
        let below = self.complete_below();
        while let Some(&Reverse(index)) = self.candidates.peek() {
            let Pending {
                position,
                transfer,
                to,
                after,
                ..
            } = self.transfers[index];
            if let Some(round) = after.filter(|&r| u64::from(r) >= below) {
                self.candidates.pop();
                self.awaiting_round.push(Reverse((round, index)));
                continue;
            }
            let round = &self.plan.rounds[position];
            let signal = round.sends[transfer].bytes() == 0;
            let token = self.token_for(inbox, to)?;
            // Without a token, an eager operation writes into the target's slots if it knows
            // them (else the target's token, which names its slots, is on its way).
            let eager = token.is_none()
                && !signal
                && self.plan.eager.to(to)
                && inbox.eager.outbound[to].is_some();
            if token.is_none() && !signal && !eager {
                self.candidates.pop();
                self.awaiting_token[to] = Some(index);
                continue;
            }
            self.current = index;
            return Ok(Some(Ready {
                to,
                round: round.index,
                signal,
                token,
                eager,
            }));
        }
        Ok(None)
    }

    /// The token of `to` for this operation, checking its digest; drops tokens of operations
    /// that are over.
    fn token_for(&self, inbox: &mut Inbox, to: usize) -> Result<Option<Token>> {
        let list = &mut inbox.tokens[to];
        list.retain(|tok| tok.seq >= self.seq);
        let Some(token) = list.iter().find(|tok| tok.seq == self.seq).copied() else {
            return Ok(None);
        };
        self.check_token(to, &token)?;
        Ok(Some(token))
    }

    /// The plan's writes (shared; see [`Self::next_write`]).
    pub fn plan_writes(&self) -> Arc<[Write]> {
        Arc::clone(&self.plan.writes)
    }

    /// Index into [`Self::plan_writes`] of the current ready transfer's next write still to
    /// post, and whether it is the transfer's last.
    pub fn next_write(&self) -> Option<(usize, bool)> {
        let p = &self.transfers[self.current];
        (p.posted < p.writes).then(|| (p.first_write + p.posted, p.posted + 1 == p.writes))
    }

    /// The provider took the write [`Self::next_write`] returned, of `len` bytes.
    pub fn write_posted(&mut self, len: usize) {
        self.transfers[self.current].posted += 1;
        self.in_flight += 1;
        self.stats.writes += 1;
        self.stats.bytes_written += len as u64;
    }

    /// Whether, once the current transfer is posted, another one not on the eager path would
    /// be ready in the same pass ([`Self::next_ready`]'s rules without its side effects): the
    /// writes before it may then go with `FI_MORE`. An eager transfer may find no free slot
    /// and post nothing, so it is not counted.
    pub fn more_ready(&self, inbox: &Inbox) -> bool {
        let below = self.complete_below();
        let current = self.current;
        let ready = |index: usize| {
            let p = &self.transfers[index];
            if p.done || p.after.is_some_and(|r| u64::from(r) >= below) {
                return false;
            }
            let signal = self.plan.rounds[p.position].sends[p.transfer].bytes() == 0;
            signal || inbox.has_token(p.to, self.seq)
        };
        self.transfers[current].next_to_same.is_some_and(ready)
            || self
                .candidates
                .iter()
                .any(|&Reverse(index)| index != current && ready(index))
    }

    /// Every write of the current ready transfer is posted: the next transfer to its target
    /// may go.
    pub fn transfer_posted(&mut self) {
        let top = self.candidates.pop();
        debug_assert_eq!(top, Some(Reverse(self.current)));
        let posted = &mut self.transfers[self.current];
        posted.done = true;
        if let Some(next) = posted.next_to_same {
            self.candidates.push(Reverse(next));
        }
        self.unposted -= 1;
        while self
            .transfers
            .get(self.first_unposted)
            .is_some_and(|t| t.done)
        {
            self.first_unposted += 1;
        }
    }

    /// Whether `writer` writes to this rank eagerly in this operation.
    pub fn eager_from(&self, writer: usize) -> bool {
        self.plan.eager.from(writer)
    }

    /// The digest the operation's messages carry.
    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// The pieces of the current ready transfer, where its eager posting stands, and the
    /// writes its target counts for it.
    pub fn eager_cursor(&self) -> (&[Piece], Cursor, usize) {
        let p = &self.transfers[self.current];
        let pieces = &self.plan.rounds[p.position].sends[p.transfer].pieces;
        (pieces, p.cursor, p.writes)
    }

    /// One receive slot of the current transfer went out, carrying `data` bytes (copied into
    /// the slot's source) up to `next`; `injected` writes have no local completion.
    pub fn slot_posted(&mut self, next: Cursor, data: usize, injected: bool) {
        self.transfers[self.current].cursor = next;
        self.stats.writes += 1;
        self.stats.bytes_written += data as u64;
        self.stats.bytes_copied += data as u64;
        if !injected {
            self.in_flight += 1;
        }
    }

    /// The current transfer waits for its target to free receive slots (its credits wake it:
    /// [`Self::slots_freed`]).
    pub fn wait_for_slots(&mut self) {
        let top = self.candidates.pop();
        debug_assert_eq!(top, Some(Reverse(self.current)));
        let to = self.transfers[self.current].to;
        if self.awaiting_slots[to].replace(self.current).is_none() {
            self.slot_waiters.push(to);
        }
    }

    /// The targets whose receive slots a transfer waits for.
    pub fn slot_waiters(&self) -> &[usize] {
        &self.slot_waiters
    }

    /// `to` freed receive slots: the transfer that waits for them, if any, may go.
    pub fn slots_freed(&mut self, to: usize) {
        if let Some(waiting) = self.awaiting_slots[to].take() {
            self.candidates.push(Reverse(waiting));
            self.slot_waiters.retain(|&t| t != to);
        }
    }

    /// Checks the header of `from`'s next slot: `Ok(true)` if it belongs to this operation
    /// (its writes are then counted with [`Self::count_slot`] once its data is in place),
    /// `Ok(false)` if to a later one (it waits for that one). A slot of an operation that is
    /// over, with another digest, or from a rank this one expects nothing from is an error.
    pub fn check_slot(&mut self, from: usize, header: &SlotHeader) -> Result<bool> {
        if header.seq > self.seq {
            return Ok(false);
        }
        if header.seq < self.seq {
            // Its sender may still be in that operation: abort that one.
            self.abort_seq = header.seq;
            return Err(self.protocol(format!(
                "an eager write of rank {from} for operation {}, which is over",
                header.seq
            )));
        }
        if header.digest != self.digest {
            return Err(TransportError::Mismatch {
                op: self.op.clone(),
                peer: from,
            });
        }
        if self.plan.writers.binary_search(&from).is_err() {
            return Err(TransportError::Disagree {
                op: self.op.clone(),
                what: format!(
                    "rank {from} writes to this rank, whose call expects nothing from it"
                ),
            });
        }
        Ok(true)
    }

    /// Counts the writes a slot of this operation completes.
    pub fn count_slot(&mut self, header: &SlotHeader) -> Result<()> {
        self.count_arrivals(header.round, false, header.writes as usize)
    }

    pub fn done(&self) -> bool {
        self.next == self.plan.rounds.len() && self.unposted == 0 && self.in_flight == 0
    }

    /// What the operation is still waiting for, for a deadline error.
    pub fn awaited(&self, inbox: &Inbox) -> String {
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
        if let Some(p) = self.transfers.get(self.first_unposted) {
            let to = p.to;
            if self.awaiting_slots[to].is_some() {
                return format!("waiting for rank {to} to read its receive slots (all in use)");
            }
            return if inbox.has_token(to, self.seq) {
                format!("posting a write to rank {to}")
            } else {
                format!("waiting for the ready token of rank {to}")
            };
        }
        format!("waiting for {} local writes to complete", self.in_flight)
    }

    pub fn protocol(&self, what: String) -> TransportError {
        TransportError::Protocol {
            op: self.op.to_string(),
            what,
        }
    }
}

#[cfg(test)]
mod tests {
    //! The run state fed events as a completion queue would report them, without a fabric.

    use super::*;
    use crate::plan::{piece, Buf, RankPlan, Round};
    use crate::transport::Limits;

    const SIZE: usize = 3;
    const DIGEST: u64 = 0xd1;
    /// Operations a data write's sequence number tells apart.
    const SEQ_SPACE: u64 = 1 << wire::SEQ_BITS;
    const ABORT_SPACE: u64 = 1 << wire::ABORT_SEQ_BITS;

    fn prepare(buffers: crate::plan::BufferSizes, rounds: Vec<Round>) -> Prepared {
        let plan = RankPlan {
            rank: 0,
            buffers,
            setup: Vec::new(),
            rounds: Box::new(rounds.into_iter()),
        };
        Prepared::new("test", plan, SIZE, Limits { max_msg_size: 0 }).expect("a valid plan")
    }

    /// Rank 0 of 3, receiving data:
    /// round 0: 8 bytes to rank 1 (held from the start); 1 write from rank 2;
    /// round 1: 8 bytes to rank 1 (held after round 0), 8 to rank 2; 2 writes from rank 2;
    /// round 2: 8 bytes to rank 1 (held from the start, but behind round 1's in plan order).
    fn data_plan() -> Prepared {
        let bytes = |src, after| vec![piece(Buf::Send, src, Buf::Recv, 0, 8, after)];
        let mut r0 = Round::new(0);
        r0.send(1, bytes(0, None));
        r0.expect(2, 1);
        let mut r1 = Round::new(1);
        r1.send(1, bytes(8, Some(0)));
        r1.send(2, bytes(0, None));
        r1.expect(2, 2);
        let mut r2 = Round::new(2);
        r2.send(1, bytes(8, None));
        let buffers = crate::plan::BufferSizes {
            send: 16,
            recv: 16,
            scratch: 0,
        };
        prepare(buffers, vec![r0, r1, r2])
    }

    /// Rank 0 of 3 in a barrier-like plan: a signal to rank 1, one signal from rank 2.
    fn signal_plan() -> Prepared {
        let mut r0 = Round::new(0);
        r0.signal(1);
        r0.expect(2, 1);
        prepare(crate::plan::BufferSizes::default(), vec![r0])
    }

    fn run_at(seq: u64, plan: &Prepared) -> Run {
        Run::for_test(seq, DIGEST, plan, SIZE)
    }

    fn data(seq: u64, round: u32) -> Incoming {
        Incoming::Data {
            seq: wire_seq(seq),
            round,
            signal: false,
        }
    }

    fn signal(seq: u64, round: u32) -> Incoming {
        Incoming::Data {
            seq: wire_seq(seq),
            round,
            signal: true,
        }
    }

    fn token(from: usize, seq: u64, digest: u64) -> Incoming {
        let region = RemoteRegion {
            base: 4096,
            len: 16,
            key: 9,
        };
        Incoming::Token {
            from,
            token: Some(Token {
                seq,
                digest,
                recv: region,
                scratch: region,
                slots: SlotRing::NONE,
            }),
        }
    }

    fn abort(from: usize, seq: u64) -> Incoming {
        Incoming::Abort {
            from,
            seq: wire::abort_seq(seq),
        }
    }

    fn complete(run: &mut Run) -> bool {
        run.complete_rounds(&BufferViews::default())
            .expect("rounds without local steps")
    }

    /// The transfers one scan finds ready, each posted whole: (target, round).
    fn post_all_ready(run: &mut Run, inbox: &mut Inbox) -> Vec<(usize, u32)> {
        run.start_scan();
        let mut posted = Vec::new();
        while let Some(ready) = run.next_ready(inbox).expect("a ready transfer") {
            let writes = run.plan_writes();
            while let Some((index, _)) = run.next_write() {
                run.write_posted(writes[index].bytes());
            }
            run.transfer_posted();
            posted.push((ready.to, ready.round));
        }
        posted
    }

    #[test]
    fn rounds_complete_in_order_once_their_writes_are_in() {
        let plan = data_plan();
        let mut inbox = Inbox::new(SIZE);
        let mut run = run_at(5, &plan);
        run.on_event(&mut inbox, data(5, 1)).unwrap();
        run.on_event(&mut inbox, data(5, 1)).unwrap();
        // Round 1 is in, but round 0 is not.
        assert!(!complete(&mut run));
        assert_eq!(run.next, 0);
        assert!(run
            .awaited(&inbox)
            .contains("1 of 1 writes in round 0 from rank(s) 2"));
        run.on_event(&mut inbox, data(5, 0)).unwrap();
        assert!(complete(&mut run));
        // Round 2 expects nothing, so it completes with round 1.
        assert_eq!(run.next, 3);
        assert_eq!(run.stats.arrivals, 3);
        assert!(!run.done(), "nothing is posted yet");
    }

    #[test]
    fn a_write_for_a_round_without_writes_is_refused() {
        let plan = data_plan();
        let mut inbox = Inbox::new(SIZE);
        let mut run = run_at(0, &plan);
        let err = run.on_event(&mut inbox, data(0, 2)).unwrap_err();
        assert!(matches!(err, TransportError::Protocol { .. }), "{err}");
        let err = run.on_event(&mut inbox, data(0, 7)).unwrap_err();
        assert!(err.to_string().contains("round 7"), "{err}");
    }

    #[test]
    fn a_run_hands_its_per_rank_collections_back_cleared() {
        let plan = data_plan();
        let mut inbox = Inbox::new(SIZE);
        let mut run = run_at(3, &plan);
        assert_eq!(post_all_ready(&mut run, &mut inbox), []);
        assert_eq!(run.awaiting_token, [None, Some(0), Some(2)]);
        run.awaiting_slots[2] = Some(2);
        let spare = run.into_spare();
        for v in [&spare.last_to, &spare.awaiting_token, &spare.awaiting_slots] {
            assert_eq!(v[..], [None; SIZE]);
        }
        // The next run starts from them as from fresh ones.
        let mut next = Run::new(String::new(), 4, DIGEST, &plan, SIZE, spare);
        assert_eq!(post_all_ready(&mut next, &mut inbox), []);
        assert_eq!(next.awaiting_token, [None, Some(0), Some(2)]);
    }

    #[test]
    fn transfers_wait_for_their_data_and_token_in_plan_order_per_target() {
        let plan = data_plan();
        let mut inbox = Inbox::new(SIZE);
        let mut run = run_at(3, &plan);
        assert_eq!(post_all_ready(&mut run, &mut inbox), []);
        assert!(run.awaited(&inbox).contains("round 0"));
        // Nothing is looked at again until a token or a round makes it ready.
        assert!(run.candidates.is_empty());
        assert_eq!(run.awaiting_token, [None, Some(0), Some(2)]);
        run.on_event(&mut inbox, token(1, 3, DIGEST)).unwrap();
        assert_eq!(run.candidates.len(), 1);
        // Round 0's write to rank 1 goes; round 1's waits for round 0, and round 2's, though
        // its data is held, stays behind it.
        assert_eq!(post_all_ready(&mut run, &mut inbox), [(1, 0)]);
        assert_eq!(run.in_flight, 1);
        assert_eq!(run.stats.writes, 1);
        assert_eq!(run.stats.bytes_written, 8);
        run.on_event(&mut inbox, data(3, 0)).unwrap();
        assert!(complete(&mut run));
        assert_eq!(post_all_ready(&mut run, &mut inbox), [(1, 1), (1, 2)]);
        // Rank 2's token has not come.
        run.on_event(&mut inbox, data(3, 1)).unwrap();
        run.on_event(&mut inbox, data(3, 1)).unwrap();
        assert!(complete(&mut run));
        assert_eq!(run.awaited(&inbox), "waiting for the ready token of rank 2");
        run.on_event(&mut inbox, token(2, 3, DIGEST)).unwrap();
        assert_eq!(run.awaited(&inbox), "posting a write to rank 2");
        assert_eq!(post_all_ready(&mut run, &mut inbox), [(2, 1)]);
        assert_eq!(run.in_flight, 4);
        for left in (0..4).rev() {
            assert!(!run.done());
            run.on_event(&mut inbox, Incoming::LocalDone).unwrap();
            assert_eq!(run.in_flight, left);
        }
        assert!(run.done());
    }

    #[test]
    fn a_transfer_refused_half_way_resumes_at_its_next_write() {
        let mut r0 = Round::new(0);
        r0.send(
            1,
            vec![
                piece(Buf::Send, 0, Buf::Recv, 0, 4, None),
                piece(Buf::Send, 4, Buf::Recv, 4, 4, None),
            ],
        );
        let buffers = crate::plan::BufferSizes {
            send: 8,
            recv: 8,
            scratch: 0,
        };
        let plan = prepare(buffers, vec![r0]);
        let mut inbox = Inbox::new(SIZE);
        let mut run = run_at(0, &plan);
        run.on_event(&mut inbox, token(1, 0, DIGEST)).unwrap();
        run.start_scan();
        assert!(run.next_ready(&mut inbox).unwrap().is_some());
        let writes = run.plan_writes();
        let (first, last) = run.next_write().unwrap();
        assert!(!last);
        run.write_posted(writes[first].bytes());
        // The provider refuses the second write: the next scan offers the same transfer.
        run.start_scan();
        let ready = run.next_ready(&mut inbox).unwrap().unwrap();
        assert_eq!((ready.to, ready.round, ready.signal), (1, 0, false));
        let (second, last) = run.next_write().unwrap();
        assert!(last);
        assert_eq!(writes[second].local[0].offset, 4);
    }

    #[test]
    fn more_is_ready_only_for_a_transfer_that_can_go_in_the_same_pass() {
        let plan = data_plan();
        let mut inbox = Inbox::new(SIZE);
        let mut run = run_at(3, &plan);
        run.on_event(&mut inbox, token(1, 3, DIGEST)).unwrap();
        run.start_scan();
        let ready = run.next_ready(&mut inbox).unwrap().unwrap();
        assert_eq!((ready.to, ready.round), (1, 0));
        // The next transfer to rank 1 waits for round 0, the one to rank 2 (its data held)
        // for rank 2's token: nothing can follow in this pass.
        assert!(!run.more_ready(&inbox));
        run.on_event(&mut inbox, token(2, 3, DIGEST)).unwrap();
        assert!(run.more_ready(&inbox));
        run.write_posted(8);
        run.transfer_posted();
        let ready = run.next_ready(&mut inbox).unwrap().unwrap();
        assert_eq!((ready.to, ready.round), (2, 1));
        assert!(!run.more_ready(&inbox), "rank 1's next waits for round 0");
        run.write_posted(8);
        run.transfer_posted();
        assert!(run.next_ready(&mut inbox).unwrap().is_none());
        run.on_event(&mut inbox, data(3, 0)).unwrap();
        assert!(complete(&mut run));
        run.start_scan();
        let ready = run.next_ready(&mut inbox).unwrap().unwrap();
        assert_eq!((ready.to, ready.round), (1, 1));
        // Round 2's transfer to rank 1 follows it (its data is held from the start).
        assert!(run.more_ready(&inbox));
    }

    #[test]
    fn writes_and_tokens_of_the_next_operation_wait_for_it_across_the_wrap() {
        let plan = data_plan();
        let mut inbox = Inbox::new(SIZE);
        let last = SEQ_SPACE - 1;
        let mut run = run_at(last, &plan);
        // The next operation's wire sequence is 0: ahead of this one, not behind.
        run.on_event(&mut inbox, data(last + 1, 0)).unwrap();
        run.on_event(&mut inbox, data(last + 1, 1)).unwrap();
        run.on_event(&mut inbox, token(1, last + 1, DIGEST))
            .unwrap();
        assert_eq!(run.stats.arrivals, 0);
        assert_eq!(inbox.early.get(&(0, 0, false)), Some(&1));
        assert_eq!(inbox.early.get(&(0, 1, false)), Some(&1));
        assert!(inbox.has_token(1, last + 1));
        // This operation cannot use the next one's token.
        assert_eq!(post_all_ready(&mut run, &mut inbox), []);

        let mut next = run_at(last + 1, &plan);
        next.adopt_early(&mut inbox).unwrap();
        assert!(inbox.early.is_empty());
        assert_eq!(next.stats.arrivals, 2);
        assert!(complete(&mut next));
        assert_eq!(next.next, 1, "round 1 still misses a write");
        assert_eq!(
            post_all_ready(&mut next, &mut inbox),
            [(1, 0), (1, 1), (1, 2)]
        );
    }

    #[test]
    fn a_write_of_an_operation_that_is_over_aborts_the_one_its_sender_is_in() {
        let plan = data_plan();
        for (current, late) in [
            (SEQ_SPACE, SEQ_SPACE - 1),
            (SEQ_SPACE + 2, SEQ_SPACE - 1),
            (5, 4),
        ] {
            let mut inbox = Inbox::new(SIZE);
            let mut run = run_at(current, &plan);
            let err = run.on_event(&mut inbox, data(late, 0)).unwrap_err();
            assert!(matches!(err, TransportError::Protocol { .. }), "{err}");
            assert_eq!(run.abort_seq, late, "current {current}");
            assert_eq!(run.stats.arrivals, 0);
            assert!(inbox.early.is_empty());
        }
    }

    #[test]
    fn the_future_reaches_half_the_sequence_space() {
        let plan = data_plan();
        let half = SEQ_SPACE / 2;
        for current in [0, SEQ_SPACE - 3, 5 * SEQ_SPACE + 17] {
            let mut inbox = Inbox::new(SIZE);
            let mut run = run_at(current, &plan);
            run.on_event(&mut inbox, data(current + half - 1, 0))
                .unwrap();
            assert_eq!(
                inbox.early.get(&(wire_seq(current + half - 1), 0, false)),
                Some(&1)
            );
            // Half the space ahead is as far behind: an operation that is over.
            let err = run
                .on_event(&mut inbox, data(current + half, 0))
                .unwrap_err();
            assert!(matches!(err, TransportError::Protocol { .. }), "{err}");
            assert_eq!(run.abort_seq, current.saturating_sub(half));
        }
    }

    #[test]
    fn more_writes_than_a_round_expects_are_an_error() {
        let plan = data_plan();
        let mut inbox = Inbox::new(SIZE);
        let mut run = run_at(1, &plan);
        run.on_event(&mut inbox, data(1, 0)).unwrap();
        let err = run.on_event(&mut inbox, data(1, 0)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "test (operation 1): protocol violation: 2 writes arrived in round 0, 1 expected"
        );
    }

    #[test]
    fn more_early_writes_than_a_round_expects_are_an_error_when_adopted() {
        let plan = data_plan();
        let mut inbox = Inbox::new(SIZE);
        let mut run = run_at(1, &plan);
        run.on_event(&mut inbox, data(2, 0)).unwrap();
        run.on_event(&mut inbox, data(2, 0)).unwrap();
        assert_eq!(inbox.early.get(&(wire_seq(2), 0, false)), Some(&2));
        let err = run_at(2, &plan).adopt_early(&mut inbox).unwrap_err();
        assert!(err
            .to_string()
            .contains("2 writes arrived in round 0, 1 expected"));
    }

    #[test]
    fn a_token_that_comes_twice_is_kept_once() {
        let plan = data_plan();
        let mut inbox = Inbox::new(SIZE);
        let mut run = run_at(4, &plan);
        run.on_event(&mut inbox, token(1, 4, DIGEST)).unwrap();
        run.on_event(&mut inbox, token(1, 4, DIGEST)).unwrap();
        run.on_event(&mut inbox, token(1, 5, DIGEST)).unwrap();
        assert_eq!(inbox.tokens[1].len(), 2);
        // A slot that held no well-formed token is ignored.
        run.on_event(
            &mut inbox,
            Incoming::Token {
                from: 2,
                token: None,
            },
        )
        .unwrap();
        assert!(inbox.tokens[2].is_empty());
    }

    #[test]
    fn tokens_that_disagree_are_errors() {
        let plan = data_plan();
        let mut inbox = Inbox::new(SIZE);
        let mut run = run_at(4, &plan);
        let err = run
            .on_event(&mut inbox, token(1, 4, DIGEST + 1))
            .unwrap_err();
        assert!(
            matches!(err, TransportError::Mismatch { peer: 1, .. }),
            "{err}"
        );
        // A future token is checked by its own operation.
        run.on_event(&mut inbox, token(2, 5, DIGEST + 1)).unwrap();
        let err = run_at(5, &plan).adopt_early(&mut inbox).unwrap_err();
        assert!(
            matches!(err, TransportError::Mismatch { peer: 2, .. }),
            "{err}"
        );
        // A token of an operation that is over: its sender is still in it.
        let mut run = run_at(9, &plan);
        let err = run.on_event(&mut inbox, token(1, 7, DIGEST)).unwrap_err();
        assert!(matches!(err, TransportError::Disagree { .. }), "{err}");
        assert_eq!(run.abort_seq, 7);
        // A token from a rank this one does not write to.
        let signals = signal_plan();
        let mut run = run_at(9, &signals);
        let err = run.on_event(&mut inbox, token(1, 9, DIGEST)).unwrap_err();
        assert!(matches!(err, TransportError::Disagree { .. }), "{err}");
        // A token from a rank that does not exist.
        let err = run
            .on_event(&mut inbox, token(SIZE, 9, DIGEST))
            .unwrap_err();
        assert!(matches!(err, TransportError::Protocol { .. }), "{err}");
    }

    #[test]
    fn aborts_of_this_past_and_future_operations() {
        let plan = data_plan();
        let mut inbox = Inbox::new(SIZE);
        let mut run = run_at(10, &plan);
        let err = run.on_event(&mut inbox, abort(2, 10)).unwrap_err();
        assert!(
            matches!(err, TransportError::AbortedBy { rank: 2, .. }),
            "{err}"
        );
        let err = run.on_event(&mut inbox, abort(1, 9)).unwrap_err();
        assert!(
            matches!(err, TransportError::AbortedEarlier { rank: 1, .. }),
            "{err}"
        );
        // A future abort waits for its operation, which then fails at its start.
        run.on_event(&mut inbox, abort(1, 12)).unwrap();
        assert_eq!(inbox.early_aborts, [(wire::abort_seq(12), 1)]);
        run_at(11, &plan).adopt_early(&mut inbox).unwrap();
        assert_eq!(inbox.early_aborts.len(), 1, "still ahead of operation 11");
        let err = run_at(12, &plan).adopt_early(&mut inbox).unwrap_err();
        assert!(
            matches!(err, TransportError::AbortedBy { rank: 1, .. }),
            "{err}"
        );
    }

    #[test]
    fn aborts_order_across_the_wrap_of_their_shorter_sequence() {
        let plan = data_plan();
        let mut inbox = Inbox::new(SIZE);
        let last = ABORT_SPACE - 1;
        let mut run = run_at(last, &plan);
        run.on_event(&mut inbox, abort(2, last + 1)).unwrap();
        assert_eq!(inbox.early_aborts, [(0, 2)]);
        let err = run_at(last + 1, &plan).adopt_early(&mut inbox).unwrap_err();
        assert!(
            matches!(err, TransportError::AbortedBy { rank: 2, .. }),
            "{err}"
        );
        let mut run = run_at(ABORT_SPACE, &plan);
        let err = run.on_event(&mut inbox, abort(0, last)).unwrap_err();
        assert!(
            matches!(err, TransportError::AbortedEarlier { .. }),
            "{err}"
        );
    }

    #[test]
    fn an_abort_passed_over_is_dropped() {
        let plan = data_plan();
        let mut inbox = Inbox::new(SIZE);
        run_at(1, &plan).on_event(&mut inbox, abort(2, 3)).unwrap();
        // Operation 3 was given up elsewhere before this rank came to it (its abort was for
        // operation 3, and this rank now starts operation 4): it is no longer kept.
        run_at(4, &plan).adopt_early(&mut inbox).unwrap();
        assert!(inbox.early_aborts.is_empty());
    }

    #[test]
    fn a_signal_never_completes_a_round_that_expects_data() {
        let plan = data_plan();
        let mut inbox = Inbox::new(SIZE);
        let mut run = run_at(6, &plan);
        let err = run.on_event(&mut inbox, signal(6, 0)).unwrap_err();
        assert!(matches!(err, TransportError::Disagree { .. }), "{err}");
        assert!(
            err.to_string().contains("a signal arrived in round 0"),
            "{err}"
        );
        assert_eq!(run.stats.arrivals, 0);
        assert!(!complete(&mut run));
        assert_eq!(run.next, 0);
        // Nor when it came early.
        let mut run = run_at(5, &plan);
        run.on_event(&mut inbox, signal(6, 0)).unwrap();
        assert_eq!(inbox.early.get(&(wire_seq(6), 0, true)), Some(&1));
        let mut next = run_at(6, &plan);
        assert!(matches!(
            next.adopt_early(&mut inbox),
            Err(TransportError::Disagree { .. })
        ));
        assert_eq!(next.next, 0);
        assert_eq!(next.stats.arrivals, 0);
    }

    #[test]
    fn signals_complete_signal_rounds_and_data_does_not() {
        let plan = signal_plan();
        let mut inbox = Inbox::new(SIZE);
        let mut run = run_at(2, &plan);
        let err = run.on_event(&mut inbox, data(2, 0)).unwrap_err();
        assert!(err.to_string().contains("data arrived in round 0"), "{err}");
        let mut run = run_at(2, &plan);
        // A signal needs no token.
        let ready = {
            run.start_scan();
            run.next_ready(&mut inbox).unwrap()
        };
        assert_eq!(
            ready,
            Some(Ready {
                to: 1,
                round: 0,
                signal: true,
                token: None,
                eager: false,
            })
        );
        run.write_posted(0);
        run.transfer_posted();
        run.on_event(&mut inbox, signal(2, 0)).unwrap();
        assert!(complete(&mut run));
        run.on_event(&mut inbox, Incoming::LocalDone).unwrap();
        assert!(run.done());
    }
}
