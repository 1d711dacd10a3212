//! The state of one operation in progress, and what a rank keeps between operations.
//!
//! A [`Run`] is plain state: it is told what arrived ([`Incoming`]) and asked what may be
//! posted next; the transport that owns it does all reading and writing on the fabric.

use std::collections::HashMap;

use crate::plan::{Local, Piece};

use super::local::{Buffers, LocalSteps};
use super::wire::{self, order, wire_seq, Order, Token};
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
}

impl Inbox {
    pub fn new(size: usize) -> Self {
        Inbox {
            tokens: vec![Vec::new(); size],
            early: HashMap::new(),
            early_aborts: Vec::new(),
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
    /// Pieces posted so far (a post may be refused with EAGAIN half way).
    posted: usize,
}

/// A transfer allowed to be posted now ([`Run::next_ready`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ready {
    pub to: usize,
    pub round: u32,
    /// Zero-length: its pieces are signals.
    pub signal: bool,
    /// The target's token (`None` for signals, which need none).
    pub token: Option<Token>,
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
    pending: Vec<Pending>,
    /// Local writes not completed yet.
    pub(super) in_flight: usize,
    pub(super) stats: OpStats,
    local: LocalSteps,
    /// Generation stamps per target, to keep plan order per target while scanning.
    blocked: Vec<u64>,
    scan: u64,
    /// Position in `pending` of the scan in progress.
    cursor: usize,
}

impl Run {
    /// Operation `seq`, named `op`, of `plan` among `size` ranks.
    pub fn new(op: String, seq: u64, digest: u64, plan: &Prepared, size: usize) -> Self {
        let mut pending = Vec::new();
        for (position, round) in plan.rounds.iter().enumerate() {
            for transfer in 0..round.sends.len() {
                pending.push(Pending {
                    position,
                    transfer,
                    posted: 0,
                });
            }
        }
        Run {
            op,
            seq,
            digest,
            plan: plan.clone(),
            arrived: vec![0; plan.rounds.len()],
            next: 0,
            pending,
            in_flight: 0,
            stats: OpStats::default(),
            local: LocalSteps::default(),
            blocked: vec![0; size],
            scan: 0,
            cursor: 0,
            abort_seq: seq,
        }
    }

    /// Checks that `buffers` are as large as the plan needs, then runs the setup steps.
    pub fn setup(&mut self, buffers: &Buffers<'_>) -> Result<()> {
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
    pub fn ready_token(&self, buffers: &Buffers<'_>) -> Option<Token> {
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
        for (from, tokens) in inbox.tokens.iter().enumerate() {
            if let Some(token) = tokens.iter().find(|tok| tok.seq == self.seq) {
                self.check_token(from, token)?;
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
                    }
                }
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
    pub fn complete_rounds(&mut self, buffers: &Buffers<'_>) -> Result<bool> {
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

    /// Starts a pass over the pending transfers ([`Self::next_ready`]).
    pub fn start_scan(&mut self) {
        self.scan += 1;
        self.cursor = 0;
    }

    /// The next pending transfer of this pass whose data is held and whose target is ready,
    /// keeping plan order per target: a target whose earlier transfer is not ready gets none
    /// in this pass. The transfer stays current until [`Self::transfer_posted`].
    pub fn next_ready(&mut self, inbox: &mut Inbox) -> Result<Option<Ready>> {
        let below = self.complete_below();
        while self.cursor < self.pending.len() {
            let Pending {
                position, transfer, ..
            } = self.pending[self.cursor];
            let round = &self.plan.rounds[position];
            let transfer = &round.sends[transfer];
            let to = transfer.to;
            if self.blocked[to] == self.scan {
                self.cursor += 1;
                continue;
            }
            let held = transfer
                .pieces
                .iter()
                .all(|p| p.after.map_or(true, |r| u64::from(r) < below));
            let signal = transfer.bytes() == 0;
            let token = if held {
                self.token_for(inbox, to)?
            } else {
                None
            };
            if !(held && (token.is_some() || signal)) {
                self.blocked[to] = self.scan;
                self.cursor += 1;
                continue;
            }
            return Ok(Some(Ready {
                to,
                round: round.index,
                signal,
                token,
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

    /// The next piece of the current ready transfer still to post.
    pub fn next_piece(&self) -> Option<Piece> {
        let p = &self.pending[self.cursor];
        self.plan.rounds[p.position].sends[p.transfer]
            .pieces
            .get(p.posted)
            .copied()
    }

    /// The provider took the piece [`Self::next_piece`] returned.
    pub fn piece_posted(&mut self, len: usize) {
        self.pending[self.cursor].posted += 1;
        self.in_flight += 1;
        self.stats.writes += 1;
        self.stats.bytes_written += len as u64;
    }

    /// Every piece of the current ready transfer is posted: it is no longer pending.
    pub fn transfer_posted(&mut self) {
        self.pending.remove(self.cursor);
    }

    pub fn done(&self) -> bool {
        self.next == self.plan.rounds.len() && self.pending.is_empty() && self.in_flight == 0
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
        if let Some(p) = self.pending.first() {
            let to = self.plan.rounds[p.position].sends[p.transfer].to;
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
