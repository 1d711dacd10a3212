//! The pure core of circulant: no I/O, no libfabric.
//!
//! - [`schedule`]: Träff's circulant n-block broadcast schedules (seed 000, Alg. 1–6), one
//!   rank's in O(log p) steps without communication, and an independent verifier;
//! - [`plan`]: every collective algorithm as a per-rank program of rounds of one-sided writes,
//!   the registry of algorithms by name, the α-β-o model and lower bounds;
//! - [`sim`]: runs the plans of p virtual ranks in one process with real bytes, checks the
//!   results and the one-sided rules, and prices plans on layouts of ranks on nodes.
//!
//! The `circulant` crate (the library over libfabric) re-exports these modules; programs that
//! want only the schedules, plans and the model depend on this crate alone. Papers are cited as
//! "seed 000" … "seed 004" (docs/architecture.md, "References").

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod plan;
pub mod schedule;
pub mod sim;
