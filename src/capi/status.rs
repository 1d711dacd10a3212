//! Status codes, error messages (per communicator, and per thread for calls without one) and
//! the guard every entry point runs in: no Rust panic crosses the C boundary.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::bootstrap::BootstrapError;
use crate::comm::{CommError, ErrorKind};

use super::handle::Comm;

/// The call succeeded.
pub const CIRCULANT_SUCCESS: c_int = 0;
/// A bad argument: a null pointer, a size that does not fit, a root out of range, an unknown
/// data type or operator.
pub const CIRCULANT_ERR_ARGUMENT: c_int = 1;
/// A peer failed or aborted the operation (its process died, or it hit an error).
pub const CIRCULANT_ERR_PEER: c_int = 2;
/// The operation's deadline passed (`CIRCULANT_TIMEOUT`, 60 s by default).
pub const CIRCULANT_ERR_TIMEOUT: c_int = 3;
/// The ranks called the collective with arguments that do not match.
pub const CIRCULANT_ERR_MISMATCH: c_int = 4;
/// An operation is still in flight on the communicator, or requests are not freed yet.
pub const CIRCULANT_ERR_BUSY: c_int = 5;
/// The communicator is unusable after an earlier failure.
pub const CIRCULANT_ERR_UNUSABLE: c_int = 6;
/// Joining the job failed (PMI, or the out-of-band allgather).
pub const CIRCULANT_ERR_BOOTSTRAP: c_int = 7;
/// libfabric failed, or offers no usable provider.
pub const CIRCULANT_ERR_FABRIC: c_int = 8;
/// A defect in the library (a caught panic): please report it with the message.
pub const CIRCULANT_ERR_INTERNAL: c_int = 9;

/// A failed call: its status code and message.
#[derive(Debug)]
pub(super) struct Failure {
    pub code: c_int,
    pub message: String,
}

impl Failure {
    pub fn argument(message: impl Into<String>) -> Self {
        Failure {
            code: CIRCULANT_ERR_ARGUMENT,
            message: message.into(),
        }
    }

    pub fn busy(message: impl Into<String>) -> Self {
        Failure {
            code: CIRCULANT_ERR_BUSY,
            message: message.into(),
        }
    }
}

impl From<CommError> for Failure {
    fn from(err: CommError) -> Self {
        Failure {
            code: code_of(err.kind()),
            message: err.to_string(),
        }
    }
}

/// The status code of an error of `kind`.
fn code_of(kind: ErrorKind) -> c_int {
    match kind {
        ErrorKind::Argument | ErrorKind::Config | ErrorKind::Request => CIRCULANT_ERR_ARGUMENT,
        ErrorKind::Mismatch => CIRCULANT_ERR_MISMATCH,
        ErrorKind::PeerFailed | ErrorKind::Protocol => CIRCULANT_ERR_PEER,
        ErrorKind::Timeout => CIRCULANT_ERR_TIMEOUT,
        ErrorKind::Busy => CIRCULANT_ERR_BUSY,
        ErrorKind::Unusable => CIRCULANT_ERR_UNUSABLE,
        ErrorKind::Bootstrap => CIRCULANT_ERR_BOOTSTRAP,
        ErrorKind::Fabric => CIRCULANT_ERR_FABRIC,
    }
}

impl From<BootstrapError> for Failure {
    fn from(err: BootstrapError) -> Self {
        Failure::from(CommError::from(err))
    }
}

pub(super) type Outcome<T = ()> = Result<T, Failure>;

thread_local! {
    /// The last error of a call that had no communicator to keep it (init, a null handle).
    static THREAD_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Text as a C string: interior NULs (never produced by this library's messages) become '?'.
fn c_text(text: &str) -> CString {
    CString::new(text.replace('\0', "?")).unwrap_or_default()
}

/// Runs an entry point: its failure becomes a status code and a message kept by `comm` (or the
/// thread), and a panic becomes [`CIRCULANT_ERR_INTERNAL`] instead of unwinding into C.
pub(super) fn guard(comm: Option<&Comm>, body: impl FnOnce() -> Outcome) -> c_int {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return CIRCULANT_SUCCESS,
        Ok(Err(failure)) => failure,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string());
            Failure {
                code: CIRCULANT_ERR_INTERNAL,
                message: format!("internal error: {what}"),
            }
        }
    };
    let message = c_text(&failure.message);
    match comm {
        Some(comm) => comm.set_error(message),
        None => THREAD_ERROR.with(|e| *e.borrow_mut() = message),
    }
    failure.code
}

/// The thread's last error without a communicator.
pub(super) fn thread_error() -> *const c_char {
    THREAD_ERROR.with(|e| e.borrow().as_ptr())
}

/// The text of a status code (a static string; never NULL).
#[no_mangle]
pub extern "C" fn circulant_strerror(code: c_int) -> *const c_char {
    text_of(code).as_ptr().cast()
}

/// The text of a status code, NUL-terminated.
fn text_of(code: c_int) -> &'static [u8] {
    match code {
        CIRCULANT_SUCCESS => b"success\0",
        CIRCULANT_ERR_ARGUMENT => b"invalid argument\0",
        CIRCULANT_ERR_PEER => b"a peer failed or aborted the operation\0",
        CIRCULANT_ERR_TIMEOUT => b"the operation timed out\0",
        CIRCULANT_ERR_MISMATCH => b"the ranks called the collective with different arguments\0",
        CIRCULANT_ERR_BUSY => b"an operation is still in flight on the communicator\0",
        CIRCULANT_ERR_UNUSABLE => b"the communicator is unusable after an earlier failure\0",
        CIRCULANT_ERR_BOOTSTRAP => b"joining the job failed\0",
        CIRCULANT_ERR_FABRIC => b"the fabric failed\0",
        CIRCULANT_ERR_INTERNAL => b"internal error in circulant\0",
        _ => b"unknown status code\0",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn thread_message() -> String {
        THREAD_ERROR.with(|e| e.borrow().to_string_lossy().into_owned())
    }

    #[test]
    fn a_panic_becomes_an_internal_error_with_its_message() {
        let code = guard(None, || panic!("deliberately"));
        assert_eq!(code, CIRCULANT_ERR_INTERNAL);
        assert_eq!(thread_message(), "internal error: deliberately");
    }

    #[test]
    fn failures_keep_their_code_and_message() {
        assert_eq!(guard(None, || Ok(())), CIRCULANT_SUCCESS);
        let code = guard(None, || Err(Failure::argument("a\0b")));
        assert_eq!(code, CIRCULANT_ERR_ARGUMENT);
        assert_eq!(thread_message(), "a?b");
    }

    #[test]
    fn kinds_keep_their_codes() {
        let codes = [
            (ErrorKind::Argument, CIRCULANT_ERR_ARGUMENT),
            (ErrorKind::Config, CIRCULANT_ERR_ARGUMENT),
            (ErrorKind::Request, CIRCULANT_ERR_ARGUMENT),
            (ErrorKind::Mismatch, CIRCULANT_ERR_MISMATCH),
            (ErrorKind::PeerFailed, CIRCULANT_ERR_PEER),
            (ErrorKind::Protocol, CIRCULANT_ERR_PEER),
            (ErrorKind::Timeout, CIRCULANT_ERR_TIMEOUT),
            (ErrorKind::Busy, CIRCULANT_ERR_BUSY),
            (ErrorKind::Unusable, CIRCULANT_ERR_UNUSABLE),
            (ErrorKind::Bootstrap, CIRCULANT_ERR_BOOTSTRAP),
            (ErrorKind::Fabric, CIRCULANT_ERR_FABRIC),
        ];
        for (kind, code) in codes {
            assert_eq!(code_of(kind), code, "{kind:?}");
        }
        let err = CommError::Request {
            op: "bcast",
            what: "wait without start",
        };
        let failure = Failure::from(err);
        assert_eq!(failure.code, CIRCULANT_ERR_ARGUMENT);
        assert_eq!(failure.message, "bcast: wait without start");
    }

    #[test]
    fn every_code_has_a_distinct_text() {
        let texts: Vec<String> = (0..=10)
            .map(|code| {
                CStr::from_bytes_until_nul(text_of(code))
                    .map(|t| t.to_string_lossy().into_owned())
                    .unwrap_or_default()
            })
            .collect();
        let mut unique = texts.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), texts.len(), "{texts:?}");
        assert!(texts.iter().all(|t| !t.is_empty()));
    }
}
