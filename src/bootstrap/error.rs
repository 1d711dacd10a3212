//! Why a rank could not join its job or use the job's key-value space.

use std::time::Duration;

use thiserror::Error;

use super::{wire, TIMEOUT_ENV};

#[derive(Debug, Error)]
/// Why a rank could not join its job or use the job's key-value space.
pub enum BootstrapError {
    #[error(
        "not inside a job: PMI_RANK/PMI_FD not set; start with `circulant run -n N -- ...` or mpiexec"
    )]
    /// No launcher's variables are set while a job was required.
    NotInJob,
    #[error("environment variable {var}={value:?} is invalid: {reason}")]
    /// An environment variable holds a value this library cannot use.
    Env {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it must be.
        reason: String,
    },
    #[error("cannot reach the PMI server at {endpoint}")]
    /// The PMI server's socket could not be opened.
    Connect {
        /// The address tried (`PMI_FD=...` or `PMI_PORT=...`).
        endpoint: String,
        #[source]
        /// The operating system's error.
        source: std::io::Error,
    },
    #[error("PMI I/O failed while {during}")]
    /// Reading or writing the PMI channel failed.
    Io {
        /// The request in progress.
        during: String,
        #[source]
        /// The operating system's error.
        source: std::io::Error,
    },
    #[error("no answer from the PMI server within {timeout:?} while awaiting {awaiting} (a rank that exited or never started, or a stalled launcher; set {TIMEOUT_ENV} to wait longer)")]
    /// The PMI server did not answer within the bootstrap timeout.
    Deadline {
        /// The reply awaited.
        awaiting: String,
        /// The timeout that passed.
        timeout: Duration,
    },
    #[error(
        "the PMI server closed the connection while awaiting {awaiting} (did the launcher exit?)"
    )]
    /// The server closed the connection: the launcher exited or dropped this rank.
    Closed {
        /// The reply awaited.
        awaiting: String,
    },
    #[error("malformed line from the PMI server while awaiting {awaiting}: \"{line}\"")]
    /// The server sent a line that is not a PMI message.
    Malformed {
        /// The reply awaited.
        awaiting: String,
        /// The line as received.
        line: String,
        #[source]
        /// What is wrong with it.
        source: wire::WireError,
    },
    #[error("unexpected reply from the PMI server while awaiting {awaiting}: \"{got}\"")]
    /// The server answered with another command than the one awaited.
    Unexpected {
        /// The reply awaited.
        awaiting: String,
        /// The line received.
        got: String,
    },
    #[error("the PMI server refused `{request}`: rc={rc} {detail}")]
    /// The server answered a request with an error code.
    Refused {
        /// The request refused.
        request: String,
        /// The server's return code.
        rc: String,
        /// The server's message, if any.
        detail: String,
    },
    #[error("the PMI barrier failed: {detail}")]
    /// The job-wide barrier failed (a rank left or finalized).
    BarrierFailed {
        /// The server's explanation.
        detail: String,
    },
    #[error("key `{key}` not found in the job's key-value space {detail}")]
    /// No rank put this key before the last fence.
    KeyNotFound {
        /// The key looked up.
        key: String,
        /// What the server or the backend added.
        detail: String,
    },
    #[error("key `{key}` has {len} bytes, the PMI server allows at most {max}")]
    /// A key is longer than the PMI server accepts.
    KeyTooLong {
        /// The key.
        key: String,
        /// Its length in bytes.
        len: usize,
        /// The longest key the server accepts.
        max: usize,
    },
    #[error("value for key `{key}` has {len} bytes, the PMI server allows at most {max} (use put_bytes for long data)")]
    /// A value is longer than the PMI server accepts.
    ValueTooLong {
        /// The key it was put under.
        key: String,
        /// Its length in bytes.
        len: usize,
        /// The longest value the server accepts.
        max: usize,
    },
    #[error("key `{key}` cannot be sent over PMI-1: {problem}")]
    /// A key contains characters PMI-1 lines cannot carry.
    InvalidKey {
        /// The key.
        key: String,
        /// Which characters.
        problem: String,
    },
    #[error("value for key `{key}` cannot be sent over PMI-1: {problem}")]
    /// A value contains characters PMI-1 lines cannot carry.
    InvalidValue {
        /// The key it was put under.
        key: String,
        /// Which characters.
        problem: String,
    },
    #[error("key `{key}` does not hold data written by put_bytes: {reason}")]
    /// A key read with `get_bytes` does not hold what `put_bytes` writes.
    CorruptBytes {
        /// The key.
        key: String,
        /// What is wrong with its value.
        reason: String,
    },
    #[error("the bootstrap was already finalized")]
    /// The bootstrap was used after `finalize`.
    Finalized,
    #[error("in-memory job: {0}")]
    /// The in-memory job failed (a rank thread ended, or its timeout passed).
    Memory(String),
    #[error("the out-of-band allgather failed: {0}")]
    /// The caller's out-of-band allgather failed or returned records of the wrong size.
    Oob(String),
    #[error("{seen}, but this process has no PMI it can use: {advice}")]
    /// A launcher started several ranks, but none of its PMI interfaces is usable here.
    NoPmi {
        /// What the environment shows of the launcher.
        seen: String,
        /// How to launch so that a PMI is available.
        advice: String,
    },
    #[error("PMIx {during} failed: {status}")]
    /// A libpmix call failed.
    Pmix {
        /// The call.
        during: String,
        /// PMIx's status name.
        status: String,
    },
}
