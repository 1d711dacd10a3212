//! The C API: `include/circulant.h` (generated from these files by cbindgen, `ci/header`),
//! `libcirculant.so` and `libcirculant.a`.
//!
//! Opaque handles (`circulant_comm`, `circulant_request`), `int` status codes
//! (`CIRCULANT_SUCCESS` = 0), a message per communicator (`circulant_last_error`). Every entry
//! point catches panics: none crosses into C. One operation is in flight per communicator,
//! and a communicator is used by one thread at a time.
//!
//! The raw pointers C passes in are turned into references in `raw` only, the one module
//! of the C API with `unsafe` code (see docs/architecture.md, section "The C boundary"). The module allows
//! the `unsafe_code` lint because `#[no_mangle]` trips it too; a test
//! (tests/capi_header.rs) keeps `unsafe` blocks, functions and impls out of the other files.

mod collective;
pub mod collectives;
pub mod handle;
pub mod oob;
mod raw;
pub mod requests;
pub mod status;
