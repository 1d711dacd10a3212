//! The errors of the user API.

use crate::bootstrap::BootstrapError;
use crate::fabric::FabricError;
use crate::plan::PlanError;
use crate::transport::TransportError;

use super::config::ConfigError;

/// Errors of the user API.
#[derive(Debug, thiserror::Error)]
pub enum CommError {
    #[error("bootstrap: {0}")]
    /// Joining the job or exchanging addresses failed.
    Bootstrap(#[from] BootstrapError),
    #[error("fabric: {0}")]
    /// A libfabric call failed outside an operation (set-up, registration).
    Fabric(#[from] FabricError),
    #[error(transparent)]
    /// An operation failed (deadline, abort, disagreement); the communicator is unusable after it.
    Transport(#[from] TransportError),
    #[error("{0}")]
    /// The call cannot be planned (bad root, counts, sizes or algorithm).
    Plan(#[from] PlanError),
    #[error("configuration: {0}")]
    /// A configuration variable is invalid.
    Config(#[from] ConfigError),
    #[error("no libfabric provider offers RDM endpoints with RMA and remote CQ data{0}")]
    /// No provider offers what the transport needs; the string adds what was asked for.
    NoProvider(String),
    #[error("ranks chose different providers: rank {rank} uses {theirs}, this rank {ours} (set FI_PROVIDER the same for every rank)")]
    /// Ranks of one job chose different providers.
    ProviderMismatch {
        /// A rank that chose differently.
        rank: usize,
        /// Its provider.
        theirs: String,
        /// This rank's provider.
        ours: String,
    },
    #[error("{op}: {what}")]
    /// The arguments of a call are wrong on this rank; every rank gets an error.
    Argument {
        /// The call.
        op: &'static str,
        /// What is wrong.
        what: String,
    },
    /// The ranks called an operation with arguments that differ (found by the full check,
    /// `CIRCULANT_CHECK=1`); every rank gets this error.
    #[error("{op}: {what}")]
    Disagree {
        /// The call.
        op: &'static str,
        /// What differs.
        what: String,
    },
    /// A persistent request used out of order (start twice, wait without start, buffer
    /// access while the operation runs).
    #[error("{op}: {what}")]
    Request {
        /// The call.
        op: &'static str,
        /// What was out of order.
        what: &'static str,
    },
}

/// Results of the user API.
pub type Result<T> = std::result::Result<T, CommError>;

/// What kind of failure an error is, whichever layer it comes from: what a caller needs to
/// decide what to do (fix its arguments, look at a peer, wait longer, give up the
/// communicator), in the spirit of MPI's error classes. The C status codes are chosen from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The arguments of a call are wrong on this rank (sizes, counts, root, algorithm), or
    /// the call cannot be carried as given.
    Argument,
    /// A configuration variable or setting is invalid.
    Config,
    /// A persistent request was used out of order.
    Request,
    /// The ranks called a collective with arguments that differ.
    Mismatch,
    /// A peer failed, aborted the operation, or its process ended.
    PeerFailed,
    /// A peer broke the one-sided protocol (a write that was not expected).
    Protocol,
    /// The operation's deadline passed.
    Timeout,
    /// Another operation is still in progress on the communicator.
    Busy,
    /// The communicator is unusable after an earlier failure.
    Unusable,
    /// Joining the job, or reading a peer's address from it, failed.
    Bootstrap,
    /// libfabric failed (including its resources: registration, queues), offers no usable
    /// provider, or the ranks set up their fabric differently.
    Fabric,
}

impl CommError {
    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            CommError::Bootstrap(_) => ErrorKind::Bootstrap,
            CommError::Fabric(_)
            | CommError::NoProvider(_)
            | CommError::ProviderMismatch { .. } => ErrorKind::Fabric,
            CommError::Transport(err) => transport_kind(err),
            CommError::Plan(_) | CommError::Argument { .. } => ErrorKind::Argument,
            CommError::Config(_) => ErrorKind::Config,
            CommError::Disagree { .. } => ErrorKind::Mismatch,
            CommError::Request { .. } => ErrorKind::Request,
        }
    }
}

/// The kind of a failure of the transport.
fn transport_kind(err: &TransportError) -> ErrorKind {
    match err {
        TransportError::Fabric(_) | TransportError::IovMismatch { .. } => ErrorKind::Fabric,
        TransportError::Plan(_) | TransportError::Invalid { .. } => ErrorKind::Argument,
        TransportError::Timeout { .. } => ErrorKind::Timeout,
        TransportError::Mismatch { .. } | TransportError::Disagree { .. } => ErrorKind::Mismatch,
        TransportError::AbortedBy { .. }
        | TransportError::AbortedEarlier { .. }
        | TransportError::Exited { .. } => ErrorKind::PeerFailed,
        TransportError::Protocol { .. } => ErrorKind::Protocol,
        TransportError::Unreachable { .. } => ErrorKind::Bootstrap,
        TransportError::Broken(_) => ErrorKind::Unusable,
        TransportError::Busy { .. } => ErrorKind::Busy,
    }
}

/// A plan error of a call, named after the operation the user called.
pub(crate) fn in_call(op: &'static str, err: CommError) -> CommError {
    match err {
        CommError::Plan(e) => argument(op, e.to_string()),
        other => other,
    }
}

pub(crate) fn argument(op: &'static str, what: String) -> CommError {
    CommError::Argument { op, what }
}

pub(crate) fn expect_len(
    op: &'static str,
    which: &str,
    have: usize,
    want: Option<usize>,
) -> Result<()> {
    match want {
        Some(want) if want == have => Ok(()),
        Some(want) => Err(argument(
            op,
            format!("the {which} buffer has {have} bytes, {want} expected"),
        )),
        None => Err(argument(op, format!("the {which} buffer size overflows"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::merge::IovLimits;
    use std::time::Duration;

    fn transport(err: TransportError) -> ErrorKind {
        CommError::from(err).kind()
    }

    #[test]
    fn every_error_has_its_kind() {
        let op = || "bcast".to_string();
        let fabric = || FabricError::Invalid {
            what: "too long".into(),
            code: 22,
            text: "Invalid argument".into(),
        };
        let config = ConfigError {
            var: "CIRCULANT_TIMEOUT",
            value: "soon".into(),
            reason: "a duration",
        };
        let limits = IovLimits {
            iov: 1,
            rma_iov: 1,
            max_bytes: usize::MAX,
        };
        let cases = [
            (
                CommError::from(BootstrapError::NotInJob),
                ErrorKind::Bootstrap,
            ),
            (CommError::from(fabric()), ErrorKind::Fabric),
            (CommError::from(PlanError::NoRanks), ErrorKind::Argument),
            (CommError::from(config), ErrorKind::Config),
            (CommError::NoProvider(String::new()), ErrorKind::Fabric),
            (
                CommError::ProviderMismatch {
                    rank: 1,
                    theirs: "tcp".into(),
                    ours: "shm".into(),
                },
                ErrorKind::Fabric,
            ),
            (
                CommError::Argument {
                    op: "bcast",
                    what: "root".into(),
                },
                ErrorKind::Argument,
            ),
            (
                CommError::Disagree {
                    op: "bcast",
                    what: "root".into(),
                },
                ErrorKind::Mismatch,
            ),
            (
                CommError::Request {
                    op: "bcast",
                    what: "wait without start",
                },
                ErrorKind::Request,
            ),
        ];
        for (err, kind) in cases {
            assert_eq!(err.kind(), kind, "{err}");
        }
        let transport_cases = [
            (TransportError::Fabric(fabric()), ErrorKind::Fabric),
            (
                TransportError::Plan(PlanError::NoRanks),
                ErrorKind::Argument,
            ),
            (
                TransportError::Timeout {
                    op: op(),
                    after: Duration::from_secs(1),
                    waiting: "round 0".into(),
                },
                ErrorKind::Timeout,
            ),
            (
                TransportError::AbortedBy { op: op(), rank: 1 },
                ErrorKind::PeerFailed,
            ),
            (
                TransportError::Mismatch { op: op(), peer: 1 },
                ErrorKind::Mismatch,
            ),
            (
                TransportError::Disagree {
                    op: op(),
                    what: "counts".into(),
                },
                ErrorKind::Mismatch,
            ),
            (
                TransportError::AbortedEarlier { op: op(), rank: 1 },
                ErrorKind::PeerFailed,
            ),
            (
                TransportError::Exited { op: op(), peer: 1 },
                ErrorKind::PeerFailed,
            ),
            (
                TransportError::Unreachable {
                    op: op(),
                    peer: 1,
                    source: "no card".into(),
                },
                ErrorKind::Bootstrap,
            ),
            (
                TransportError::Protocol {
                    op: op(),
                    what: "a write".into(),
                },
                ErrorKind::Protocol,
            ),
            (
                TransportError::IovMismatch {
                    rank: 0,
                    ours: limits,
                    peer: 1,
                    theirs: limits,
                },
                ErrorKind::Fabric,
            ),
            (
                TransportError::Invalid {
                    op: op(),
                    what: "too large".into(),
                },
                ErrorKind::Argument,
            ),
            (
                TransportError::Broken("earlier".into()),
                ErrorKind::Unusable,
            ),
            (TransportError::Busy { op: op(), seq: 3 }, ErrorKind::Busy),
        ];
        for (err, kind) in transport_cases {
            let text = err.to_string();
            assert_eq!(transport(err), kind, "{text}");
        }
    }
}
