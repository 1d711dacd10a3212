//! A plan materialised once for repeated starts, checked against what the wire and the
//! provider can carry.

use std::sync::Arc;

use crate::plan::{self, Local, RankPlan, Round};

use super::{wire, Result, TransportError};

/// Provider limits the transport honours.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest message one write may carry.
    pub max_msg_size: usize,
}

/// A plan materialised for repeated starts ([`super::Transport::prepare`]): cloning it is
/// cheap.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// Buffer sizes the plan needs.
    pub buffers: plan::BufferSizes,
    pub(super) setup: Arc<[Local]>,
    pub(super) rounds: Arc<[Round]>,
    /// Writes expected per round.
    pub(super) expected: Arc<[usize]>,
    /// The ranks that write into this one (they get ready tokens).
    pub(super) writers: Arc<[usize]>,
    /// The ranks this one writes data into (it waits for their tokens).
    pub(super) targets: Arc<[usize]>,
    /// Whether what arrives are signals (no receive or scratch buffer) rather than data.
    pub(super) receives_signals: bool,
    /// Whether the operation takes the eager path (the same on every rank).
    pub(super) eager: bool,
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
            eager: false,
            buffers: plan.buffers,
            setup: plan.setup.into(),
            rounds: rounds.into(),
            expected: expected.into(),
            writers: writers.into(),
            targets: targets.into(),
        })
    }

    /// A plan that does nothing (the stand-in for an operation given up before its start).
    pub(super) fn empty() -> Prepared {
        Prepared {
            buffers: plan::BufferSizes::default(),
            setup: Arc::new([]),
            rounds: Arc::new([]),
            expected: Arc::new([]),
            writers: Arc::new([]),
            targets: Arc::new([]),
            receives_signals: true,
            eager: false,
        }
    }

    /// Whether the operation takes the eager path.
    pub fn is_eager(&self) -> bool {
        self.eager
    }

    /// Rounds in which this rank does something.
    pub fn rounds(&self) -> usize {
        self.rounds.len()
    }
}
