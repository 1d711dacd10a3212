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
    Bootstrap(#[from] BootstrapError),
    #[error("fabric: {0}")]
    Fabric(#[from] FabricError),
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("{0}")]
    Plan(#[from] PlanError),
    #[error("configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("no libfabric provider offers RDM endpoints with RMA and remote CQ data{0}")]
    NoProvider(String),
    #[error("ranks chose different providers: rank {rank} uses {theirs}, this rank {ours} (set FI_PROVIDER the same for every rank)")]
    ProviderMismatch {
        rank: usize,
        theirs: String,
        ours: String,
    },
    #[error("{op}: {what}")]
    Argument { op: &'static str, what: String },
    /// The ranks called an operation with arguments that differ (found by the full check,
    /// `CIRCULANT_CHECK=1`); every rank gets this error.
    #[error("{op}: {what}")]
    Disagree { op: &'static str, what: String },
    /// A persistent request used out of order (start twice, wait without start, buffer
    /// access while the operation runs).
    #[error("{op}: {what}")]
    Request {
        op: &'static str,
        what: &'static str,
    },
}

pub type Result<T> = std::result::Result<T, CommError>;
