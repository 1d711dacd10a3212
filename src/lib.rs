//! circulant: round-optimal collective communication over libfabric.
//!
//! Layers, from the pure core outwards (docs/architecture.md has the module map and the
//! protocol): `schedule` (circulant broadcast schedules), `plan` (every collective as a
//! per-rank program), `sim` (runs plans of p virtual ranks and prices them) — the pure core,
//! re-exported from the `circulant-core` crate —, `fabric` (safe libfabric wrapper),
//! `transport` (executes plans with one-sided writes), `bootstrap` (how ranks find each
//! other), `comm` (the user API); `capi` is the C API over `comm`. The `circulant` command, its
//! launcher and benchmark report are the `circulant-cli` crate. Papers are cited as "seed 000"
//! … "seed 004": docs/architecture.md, section "References".

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod bootstrap;
// `#[no_mangle]` exports trip the unsafe_code lint; the C API's unsafe blocks are in capi::raw.
#[allow(unsafe_code)]
pub mod capi;
pub mod comm;
#[allow(unsafe_code)]
pub mod fabric;
pub mod limits;
pub mod random;
pub(crate) mod transport;

pub use circulant_core::{plan, schedule, sim};

/// The executor's plan materialisation, for the benchmarks that measure it on its own; not
/// part of the documented API.
#[doc(hidden)]
pub mod bench_support {
    pub use crate::transport::{Limits, Prepared};
}
