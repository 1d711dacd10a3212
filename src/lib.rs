//! circulant: round-optimal collective communication over libfabric.
//!
//! Layers, from the pure core outwards (docs/architecture.md has the module map and the
//! protocol): `schedule` (circulant broadcast schedules), `plan` (every collective as a
//! per-rank program), `sim` (runs plans of p virtual ranks and prices them), `fabric` (safe
//! libfabric wrapper), `transport` (executes plans with one-sided writes), `bootstrap` (how
//! ranks find each other), `comm` (the user API), `launch` (the built-in launcher); `capi` is
//! the C API over `comm`, `report` the benchmark report. Papers are cited as "seed 000" …
//! "seed 004": README.md, section "References".

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod bootstrap;
// `#[no_mangle]` exports trip the unsafe_code lint; the C API's unsafe blocks are in capi::raw.
#[allow(unsafe_code)]
pub mod capi;
pub mod comm;
#[allow(unsafe_code)]
pub mod fabric;
pub mod launch;
pub mod limits;
pub mod plan;
pub mod random;
pub mod report;
pub mod schedule;
pub mod sim;
pub(crate) mod transport;

/// The executor's plan materialisation, for the benchmarks that measure it on its own; not
/// part of the documented API.
#[doc(hidden)]
pub mod bench_support {
    pub use crate::transport::{Limits, Prepared};
}
