//! What the `circulant` command carries besides the library that programs link: the built-in
//! launcher ([`launch`]), the cases a job checks and what every rank must see ([`cases`]), and
//! the benchmark report with its charts ([`report`]).

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod cases;
pub mod launch;
pub mod report;
