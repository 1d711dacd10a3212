//! The C API: `include/circulant.h` (generated from these files by cbindgen, `ci/header`),
//! `libcirculant.so` and `libcirculant.a`.
//!
//! Opaque handles (`circulant_comm`, `circulant_request`), `int` status codes
//! (`CIRCULANT_SUCCESS` = 0), a message per communicator (`circulant_last_error`). Every entry
//! point catches panics: none crosses into C. One operation is in flight per communicator,
//! and a communicator is used by one thread at a time.
//!
//! The raw pointers C passes in are turned into references in [`raw`] only, the one module
//! of the C API with `unsafe` code (see docs/design.md, "The C boundary"). The other modules
//! allow the `unsafe_code` lint only for `#[no_mangle]`, which it also flags.

pub mod collectives;
pub mod handle;
pub mod oob;
#[allow(unsafe_code)]
mod raw;
pub mod requests;
pub mod status;
