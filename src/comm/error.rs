//! The errors of the user API.

use crate::bootstrap::BootstrapError;
use crate::fabric::FabricError;
use crate::plan::PlanError;
use crate::transport::TransportError;

use super::ConfigError;

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
