//! Safe RAII wrapper over libfabric (the `circulant-sys` bindings).
//!
//! Object graph, each child holding an `Arc` to what it needs open, so that objects close in the
//! right order whatever order they are dropped in:
//!
//! ```text
//! Fabric ← Domain ← AddressVector
//!                 ← CompletionQueue
//!                 ← Endpoint (→ AddressVector, CompletionQueue(s))
//!                 ← RegisteredMemory (→ Endpoint where the provider binds MRs to endpoints)
//! ```
//!
//! Threading: every query asks for `FI_THREAD_SAFE`, so every object may be used from any thread
//! (`Send + Sync`); providers that cannot offer it are not matched.
//!
//! Completion contexts: operations carry a caller-chosen `u64` context. Internally every
//! operation that produces a completion gets its own heap `fi_context2`, which also keeps the
//! local registered memory of the operation alive until its completion has been read, so a buffer
//! can never be freed under an operation in flight. This also serves providers that need the
//! `FI_CONTEXT`/`FI_CONTEXT2` modes.

mod av;
mod cq;
mod domain;
mod endpoint;
mod error;
mod info;
mod mr;
pub mod peer_memory;
mod shared;
pub mod shm;

pub use av::{Address, AddressVector};
pub use cq::{Completion, CompletionQueue};
pub use domain::{Domain, Fabric};
pub use endpoint::{Endpoint, WriteFlags};
pub use error::{FabricError, Post, Result};
pub use info::{mode_names, AuthKey, Hints, Info, MrMode, Progress};
pub use mr::{
    Access, LocalRange, RegisteredMemory, RemoteRange, RemoteRegion, REMOTE_REGION_BYTES,
};
pub use shared::SharedMemory;

use std::ffi::CStr;

use circulant_sys as sys;

// Every handle may move to and be shared with other threads (objects are FI_THREAD_SAFE).
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Info>();
    send_sync::<Fabric>();
    send_sync::<Domain>();
    send_sync::<AddressVector>();
    send_sync::<CompletionQueue>();
    send_sync::<Endpoint>();
    send_sync::<RegisteredMemory>();
    send_sync::<SharedMemory>();
};

/// A libfabric API version (`major.minor`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl Version {
    fn from_raw(raw: u32) -> Self {
        Version {
            major: raw >> 16,
            minor: raw & 0xffff,
        }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Version of the libfabric library loaded at run time.
pub fn library_version() -> Version {
    // SAFETY: fi_version takes no arguments and only returns a constant.
    Version::from_raw(unsafe { sys::fi_version() })
}

/// API version of the headers this crate was compiled against; passed to `fi_getinfo`, so the
/// structures libfabric fills are the ones the bindings describe.
pub fn header_version() -> Version {
    Version::from_raw(api_version())
}

fn api_version() -> u32 {
    // SAFETY: the shim function returns a compile-time constant.
    unsafe { sys::circ_fi_header_version() }
}

/// `fi_strerror` for a positive libfabric error code.
pub(crate) fn strerror(code: i32) -> String {
    // SAFETY: fi_strerror accepts any value and returns a pointer to a static NUL-terminated
    // string (or a generic one for unknown codes); it is never freed.
    let text = unsafe { sys::fi_strerror(code) };
    if text.is_null() {
        return format!("unknown libfabric error {code}");
    }
    // SAFETY: non-null, NUL-terminated, static lifetime (see above).
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

/// Turns a possibly null C string owned by libfabric into an owned `String`.
///
/// # Safety
/// `ptr` must be null or point to a NUL-terminated string valid for the duration of the call.
pub(crate) unsafe fn c_string(ptr: *const std::os::raw::c_char) -> String {
    if ptr.is_null() {
        String::new()
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned()
    }
}

/// Maps a libfabric return value (negative error code on failure) to a `Result`.
pub(crate) fn check(call: &'static str, ret: isize) -> Result<usize> {
    if ret < 0 {
        Err(FabricError::call(call, ret))
    } else {
        Ok(ret as usize)
    }
}

/// Like [`check`] for data-transfer calls, where `-FI_EAGAIN` is not an error but a request to
/// progress the completion queues and retry.
pub(crate) fn check_post(call: &'static str, ret: isize) -> Result<Post> {
    if ret == -(sys::FI_EAGAIN as isize) {
        Ok(Post::Again)
    } else {
        check(call, ret).map(|_| Post::Posted)
    }
}
