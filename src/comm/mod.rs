//! The user API: a [`Communicator`] of the ranks of a job, its collectives, and how it chooses
//! algorithms.
//!
//! ```no_run
//! use circulant::comm::Communicator;
//! let mut comm = Communicator::init()?;
//! let mut data = comm.alloc(1 << 20)?;            // registered: no copies
//! if comm.rank() == 0 { data.fill(7); }
//! comm.bcast(&mut data, 0)?;
//! let counts: Vec<usize> = (0..comm.size()).map(|r| 1000 * (r % 3)).collect();
//! let mine = vec![comm.rank() as u8; counts[comm.rank()]];
//! let mut all = vec![0u8; counts.iter().sum()];   // plain memory works too (staged)
//! comm.allgatherv(&mine[..], &mut all[..], &counts)?;
//! # Ok::<(), circulant::comm::CommError>(())
//! ```
//!
//! The collectives: [`Communicator::barrier`], [`bcast`](Communicator::bcast),
//! [`allgather`](Communicator::allgather), [`allgatherv`](Communicator::allgatherv) (also in
//! place), [`allreduce`](Communicator::allreduce), [`reduce`](Communicator::reduce),
//! [`scan`](Communicator::scan), [`exscan`](Communicator::exscan),
//! [`gather`](Communicator::gather), [`gatherv`](Communicator::gatherv),
//! [`scatter`](Communicator::scatter), [`scatterv`](Communicator::scatterv),
//! [`alltoall`](Communicator::alltoall), each described once in the table of collectives
//! and made in three forms: blocking, nonblocking (`ibcast`, …, a [`Request`]) and persistent
//! (`bcast_init`, …, a [`Persistent`] that chooses, plans and registers once and is then
//! started many times; calls on the shared segment or as node phases, which have no plan,
//! are started anew each time). [`Communicator::using`] forces an algorithm for one call;
//! the reductions also have untyped forms over a [`Reduction`](crate::plan::Reduction)
//! (`allreduce_bytes`, …). [`Communicator::split`] makes sub-communicators,
//! [`Communicator::split_by_node`] the one of the ranks on this rank's node (every
//! communicator knows the node of each of its ranks: [`Communicator::node_map`]),
//! [`Communicator::intercomm`] an [`InterCommunicator`] between two groups (intergroup
//! allgather(v), seed 003).
//!
//! A call runs on one of the engines of the registry ([`algorithm_names`]): node phases on
//! the shared segment, the shared segment of one node, or a plan of one-sided writes; the
//! first that takes the call runs it. A call with the same operation and arguments as an
//! earlier one (on any buffers) reuses that call's algorithm and plan: each communicator keeps the plans of its last calls
//! (`CIRCULANT_PLAN_CACHE`, [`Communicator::plan_cache_stats`]).
//!
//! Every collective must be called by every rank of the communicator in the same order with
//! matching arguments; ranks that disagree (different counts, sizes, roots or algorithms) get
//! an error on every rank instead of corrupted memory. After any error the communicator is
//! unusable: later calls return [`CommError::Transport`] with the first failure.
//! [`CommError::kind`] classifies every error ([`ErrorKind`]).

mod arguments;
mod buffer;
mod calibrate;
mod call;
mod calls;
mod check;
mod communicator;
mod config;
mod engine;
mod error;
mod forms;
mod locality;
mod memory;
mod persistent;
mod phases;
mod plan_cache;
mod plans;
mod provider;
mod registry;
mod request;
mod segment;
mod split;
mod staging;
mod steps;
mod table;

/// The shared segment's chunk: a broadcast or allgather(v) on one node runs as ⌈largest part
/// / `SEGMENT_CHUNK_BYTES`⌉ operations of the segment, each a chunk of every part.
pub use crate::transport::segment::AREA as SEGMENT_CHUNK_BYTES;
pub use crate::transport::{Carried, OpStats, Route, Traffic, TransportError};
pub use buffer::{Buffer, Element, Output, Payload, PayloadMut};
pub(crate) use call::Call;
pub use call::Choice;
pub(crate) use calls::Lengths;
pub use communicator::{Communicator, Executed};
pub use config::{
    Config, ConfigError, ALGORITHM_ENV, ALPHA_ENV, ALPHA_INSIDE_ENV, AUTH_KEY_ENV, BETA_ENV,
    BETA_INSIDE_ENV, CHECK_ENV, DEFAULT_NODE_PROVIDER, DEFAULT_SEGMENT_LIMIT, MAX_IOV_LIMIT,
    MAX_MAX_WRITE_BYTES, NODE_PROVIDER_ENV, PLAN_CACHE_ENV, PROVIDER_ENV, SEGMENT_LIMIT_ENV,
    TCP_SEGMENTS, TIMEOUT_ENV,
};
pub use eager::{Carrier, EagerConfig};
pub(crate) use engine::Kept;
pub use error::{CommError, ErrorKind, Result};
pub use forms::Using;
pub(crate) use memory::{Input, Memory};
pub use persistent::Persistent;
pub use phases::NODE_PHASE_ALGORITHMS;
pub use registry::algorithm_names;
pub(crate) use registry::ALL as ENGINES;
pub use request::Request;
pub use segment::SEGMENT_ALGORITHMS;
pub use split::{InterCommunicator, Side};
pub(crate) use table::collectives;

pub use crate::bootstrap::NodeMap;

/// The eager path's settings and their bounds (`CIRCULANT_EAGER_*`, [`Config`]).
pub mod eager {
    pub use crate::transport::eager::{
        Carrier, EagerConfig, COPY_SECONDS_PER_BYTE, DEFAULT_SLOTS, DEFAULT_SLOT_BYTES, MAX_LIMIT,
        MAX_SLOTS, MAX_SLOT_BYTES, MIN_SLOTS, MIN_SLOT_BYTES,
    };
}
