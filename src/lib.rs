//! circulant: round-optimal collective communication over libfabric.
//!
//! Layers, from the pure core outwards (see `docs/architecture.md`):
//! `schedule` (circulant broadcast schedules), `plan` (every collective as a per-rank program),
//! `sim` (runs plans of p virtual ranks and prices them), `fabric` (safe libfabric wrapper),
//! `transport`, `bootstrap`, `comm`, `launch`; `capi` is the C API over `comm`.

#![deny(unsafe_code)]

pub mod bench;
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
pub mod schedule;
pub mod sim;
pub mod transport;
