//! Errors of the libfabric wrapper: every one carries the libfabric code and its text.

use circulant_sys as sys;

/// Result of a call into the fabric layer.
pub type Result<T, E = FabricError> = std::result::Result<T, E>;

/// Outcome of posting a data transfer that did not fail.
#[must_use = "Post::Again means the operation was NOT posted: progress the completion queues and retry"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Post {
    /// The operation was queued; its completion (if any) will be reported on the CQ.
    Posted,
    /// `-FI_EAGAIN`: the provider is out of resources right now. Nothing was posted; read the
    /// completion queues to make progress and post again.
    Again,
}

/// A failed libfabric call, or an operation that completed with an error.
#[derive(Debug, thiserror::Error)]
pub enum FabricError {
    /// A libfabric call returned a negative error code.
    #[error("{call}: {text} (libfabric error {code})")]
    Call {
        /// The libfabric function that failed.
        call: &'static str,
        /// Positive libfabric error code (`FI_E*`).
        code: i32,
        /// `fi_strerror(code)`.
        text: String,
    },
    /// An operation completed with an error (`fi_cq_readerr`).
    #[error(
        "{provider}: operation {context:?} completed with error: {text} (libfabric error {code}); \
         provider error {prov_errno}: {prov_text}"
    )]
    Completion {
        /// Provider that reported the error.
        provider: String,
        /// The caller's context of the failed operation, if it was one of ours.
        context: Option<u64>,
        /// Completion flags of the failed operation (`FI_WRITE`, `FI_RMA`, …).
        flags: u64,
        /// Positive libfabric error code.
        code: i32,
        /// `fi_strerror(code)`.
        text: String,
        /// Provider-specific error number.
        prov_errno: i32,
        /// `fi_cq_strerror` text for `prov_errno`.
        prov_text: String,
    },
    /// A system call outside libfabric failed.
    #[error("{call}: {text} (errno {code})")]
    System {
        /// The system call.
        call: &'static str,
        /// Its errno.
        code: i32,
        /// What the errno means.
        text: String,
    },
    /// The arguments do not fit what the provider or the registration allows; nothing was
    /// passed to libfabric.
    #[error("{what} (libfabric error {code}: {text})")]
    Invalid {
        /// What does not fit.
        what: String,
        /// `FI_EINVAL` (or `FI_EMSGSIZE` for sizes beyond a provider limit).
        code: i32,
        /// `fi_strerror(code)`.
        text: String,
    },
}

impl FabricError {
    /// Error of `call`, which returned `ret` (negative libfabric code).
    pub(crate) fn call(call: &'static str, ret: isize) -> Self {
        let code = ret.unsigned_abs().min(i32::MAX as usize) as i32;
        FabricError::Call {
            call,
            code,
            text: super::strerror(code),
        }
    }

    pub(crate) fn invalid(what: impl Into<String>) -> Self {
        Self::invalid_with(what, sys::FI_EINVAL as i32)
    }

    pub(crate) fn too_long(what: impl Into<String>) -> Self {
        Self::invalid_with(what, sys::FI_EMSGSIZE as i32)
    }

    fn invalid_with(what: impl Into<String>, code: i32) -> Self {
        FabricError::Invalid {
            what: what.into(),
            code,
            text: super::strerror(code),
        }
    }

    /// The positive libfabric error code (a system call's errno: libfabric's codes are
    /// errno's).
    pub fn code(&self) -> i32 {
        match self {
            FabricError::Call { code, .. }
            | FabricError::System { code, .. }
            | FabricError::Completion { code, .. }
            | FabricError::Invalid { code, .. } => *code,
        }
    }

    /// `fi_strerror` of [`Self::code`].
    pub fn text(&self) -> &str {
        match self {
            FabricError::Call { text, .. }
            | FabricError::System { text, .. }
            | FabricError::Completion { text, .. }
            | FabricError::Invalid { text, .. } => text,
        }
    }
}
