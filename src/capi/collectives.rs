//! The blocking collectives of the C API, and the codes of the reductions: each entry point
//! (`forms.rs`) builds a `Collective` from its C arguments (`collective.rs`), starts it and
//! waits; the nonblocking forms (`requests.rs`) start it, the persistent ones set it up once
//! and start it again.

use std::ffi::c_int;

use super::collective::Collective;
use super::handle::{on_comm, Comm};
use super::status::Outcome;

/// Data types of the reductions (`int dtype`).
pub const CIRCULANT_INT32: c_int = 0;
/// 64-bit signed integers.
pub const CIRCULANT_INT64: c_int = 1;
/// 32-bit unsigned integers.
pub const CIRCULANT_UINT32: c_int = 2;
/// 64-bit unsigned integers.
pub const CIRCULANT_UINT64: c_int = 3;
/// 32-bit IEEE floats.
pub const CIRCULANT_FLOAT32: c_int = 4;
/// 64-bit IEEE floats.
pub const CIRCULANT_FLOAT64: c_int = 5;

/// Operators of the reductions (`int op`); the bitwise ones on integers only.
pub const CIRCULANT_SUM: c_int = 0;
/// Product.
pub const CIRCULANT_PROD: c_int = 1;
/// Minimum.
pub const CIRCULANT_MIN: c_int = 2;
/// Maximum.
pub const CIRCULANT_MAX: c_int = 3;
/// Bitwise and.
pub const CIRCULANT_BAND: c_int = 4;
/// Bitwise or.
pub const CIRCULANT_BOR: c_int = 5;
/// Bitwise exclusive or.
pub const CIRCULANT_BXOR: c_int = 6;

/// Runs a blocking collective `op` built by `describe` on `comm`; a call refused before it
/// reached the communicator is given up on every rank ([`Comm::refuse`]).
pub(super) fn blocking(
    comm: *const Comm,
    op: &'static str,
    describe: impl FnOnce(&Comm) -> Outcome<Collective>,
) -> c_int {
    on_comm(comm, |c| {
        describe(c)
            .and_then(|collective| collective.run(c))
            .map_err(|failure| c.refuse(op, failure))
    })
}
