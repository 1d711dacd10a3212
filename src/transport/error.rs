//! The transport's errors.

use std::time::Duration;

use crate::fabric::FabricError;
use crate::plan::merge::IovLimits;
use crate::plan::PlanError;

/// Errors of the transport.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error(transparent)]
    /// A libfabric call failed.
    Fabric(#[from] FabricError),
    #[error(transparent)]
    /// The plan is invalid.
    Plan(#[from] PlanError),
    #[error("{op}: timed out after {after:?} {waiting}")]
    /// The operation did not complete by its deadline.
    Timeout {
        /// The operation.
        op: String,
        /// The deadline that passed.
        after: Duration,
        /// What it was waiting for (round, writes and senders, a token, local completions).
        waiting: String,
    },
    #[error("{op}: rank {rank} aborted the operation (it failed, or was called with different arguments)")]
    /// Another rank aborted this operation.
    AbortedBy {
        /// The operation.
        op: String,
        /// The rank that aborted.
        rank: usize,
    },
    #[error("{op}: rank {peer} was called with different arguments (the collective, counts, sizes, root, reduction, algorithm or CIRCULANT_EAGER_LIMIT differ)")]
    /// A peer's ready token carries another digest: it was called with other arguments.
    Mismatch {
        /// The operation.
        op: String,
        /// The peer.
        peer: usize,
    },
    #[error("{op}: the ranks were called with different arguments: {what}")]
    /// The ranks disagree on the operation (found by what arrived, not by a digest).
    Disagree {
        /// The operation.
        op: String,
        /// What disagrees.
        what: String,
    },
    #[error("{op}: rank {rank} failed an earlier operation, so this one cannot complete")]
    /// A rank gave up an operation this rank had already finished: it left the communicator.
    AbortedEarlier {
        /// The operation.
        op: String,
        /// The rank.
        rank: usize,
    },
    #[error("{op}: rank {peer}'s process has ended")]
    /// A peer on this host has ended, so no write to it can be made.
    Exited {
        /// The operation.
        op: String,
        /// The peer.
        peer: usize,
    },
    #[error("{op}: cannot reach rank {peer}: {source}")]
    /// A peer's address card could not be fetched or used.
    Unreachable {
        /// The operation.
        op: String,
        /// The peer.
        peer: usize,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("{op}: protocol violation: {what}")]
    /// A peer broke the protocol (a write that was not expected).
    Protocol {
        /// The operation.
        op: String,
        /// What arrived.
        what: String,
    },
    #[error("rank {peer} merges writes under {theirs}, rank {rank} under {ours}: every rank must use the same limits (set CIRCULANT_IOV_LIMIT and CIRCULANT_MAX_WRITE_BYTES alike on every rank)")]
    /// A peer's card names other limits of merged writes than this rank's: the targets would
    /// count other writes than their sources post.
    IovMismatch {
        /// This rank.
        rank: usize,
        /// This rank's limits.
        ours: IovLimits,
        /// The peer.
        peer: usize,
        /// The peer's limits.
        theirs: IovLimits,
    },
    #[error("{op}: {what}")]
    /// The operation cannot run as given: buffers its plan needs are missing, it is not the one in
    /// progress, or it exceeds what the wire or the provider can carry.
    Invalid {
        /// The operation.
        op: String,
        /// What does not fit.
        what: String,
    },
    #[error("the communicator is unusable after an earlier failure: {0}")]
    /// An earlier failure left the transport unusable; holds that failure.
    Broken(String),
    #[error("{op}: operation {seq} is still in progress (wait for it first)")]
    /// An operation was started while another is in progress.
    Busy {
        /// The operation started.
        op: String,
        /// The sequence number of the one in progress.
        seq: u64,
    },
}

/// Results of the transport.
pub type Result<T> = std::result::Result<T, TransportError>;

impl TransportError {
    /// The error with the operation named `op`, where it names one.
    pub(crate) fn in_op(self, op: &str) -> TransportError {
        match self {
            TransportError::AbortedBy { rank, .. } => TransportError::AbortedBy {
                op: op.to_string(),
                rank,
            },
            TransportError::Mismatch { peer, .. } => TransportError::Mismatch {
                op: op.to_string(),
                peer,
            },
            TransportError::Protocol { what, .. } => TransportError::Protocol {
                op: op.to_string(),
                what,
            },
            other => other,
        }
    }
}
