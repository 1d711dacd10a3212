//! The state of one operation in progress, and what a rank keeps between operations.
//!
//! A [`Run`] is plain state: it is told what arrived ([`Incoming`]) and asked what may be
//! posted next; the transport that owns it does all reading and writing on the fabric.
//!
//! What counts as a protocol error or a disagreement: docs/architecture.md, section "The
//! one-sided protocol (src/transport)".

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use std::sync::Arc;

use crate::plan::merge::Write;
use crate::plan::Local;

mod inbox;

pub(super) use inbox::{Inbox, Incoming};

use super::eager::{self, Cursor, Receiver, Sent, SlotHeader, Transfer};
use super::error::{Result, TransportError};
use super::local::{BufferViews, LocalSteps};
use super::prepared::Prepared;
use super::wire::{self, order, wire_seq, Order, SlotRing, Token};
use crate::fabric::RemoteRegion;

/// What one operation did on this rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpStats {
    /// Writes posted.
    pub writes: u64,
    /// Bytes those writes carried.
    pub bytes_written: u64,
    /// Writes that arrived.
    pub arrivals: u64,
    /// Bytes copied by local steps.
    pub bytes_copied: u64,
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
    /// become ready, not to all of them. A transfer of an eager pair goes without a token to a
    /// target whose receive slots this rank knows (`knows_slots`). The transfer stays current
    /// until [`Self::transfer_posted`].
    pub fn next_ready(
        &mut self,
        inbox: &mut Inbox,
        knows_slots: impl Fn(usize) -> bool,
    ) -> Result<Option<Ready>> {
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
            let eager = token.is_none() && !signal && self.plan.eager.to(to) && knows_slots(to);
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
    #[cfg(test)]
    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// The current ready transfer as the eager path posts it, and where its posting stands.
    pub fn eager_transfer(&self, ready: &Ready) -> (Transfer<'_>, Cursor) {
        let p = &self.transfers[self.current];
        let transfer = Transfer {
            op: &self.op,
            to: ready.to,
            seq: self.seq,
            digest: self.digest,
            round: ready.round,
            pieces: &self.plan.rounds[p.position].sends[p.transfer].pieces,
            writes: p.writes,
        };
        (transfer, p.cursor)
    }

    /// Receive slots of the current transfer went out as `sent` says (their data copied into
    /// the slots' source); those that complete locally are waited for.
    pub fn slots_posted(&mut self, sent: &Sent) {
        self.transfers[self.current].cursor = sent.cursor;
        self.stats.writes += sent.slots as u64;
        self.stats.bytes_written += sent.bytes as u64;
        self.stats.bytes_copied += sent.bytes as u64;
        self.in_flight += sent.pending;
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

impl Receiver for Run {
    fn op(&self) -> &str {
        &self.op
    }

    fn accept(&mut self, from: usize, header: &SlotHeader) -> Result<bool> {
        self.check_slot(from, header)
    }

    fn arrived(&mut self, header: &SlotHeader, copied: usize) -> Result<()> {
        self.stats.bytes_copied += copied as u64;
        self.count_slot(header)
    }

    fn slots_freed(&mut self, to: usize) {
        Run::slots_freed(self, to);
    }
}

#[cfg(test)]
mod tests;
