//! What a protocol module (the eager path) may use of the transport while it serves one
//! operation: the endpoint, the peers, the control region, and the operation's sequence
//! number and deadline. It never sees the operation's state (`run`); the operation's name,
//! which errors carry, comes with each call.

use std::cell::Cell;
use std::time::Duration;

use crate::fabric::{Endpoint, RegisteredMemory};

use super::fabrics::{Fabrics, Traffic};
use super::peers::Peers;
use super::TransportError;

/// The transport's fabric, lent for one step of an operation.
pub(crate) struct Link<'a> {
    /// The operation's full sequence number: the context of its writes.
    pub seq: u64,
    /// This rank.
    pub rank: usize,
    /// The number of ranks.
    pub size: usize,
    /// The fabrics writes go through.
    pub fabrics: &'a Fabrics,
    /// The peers' addresses and control regions.
    pub peers: &'a mut Peers,
    /// This rank's control region (the sources of credit words).
    pub control: &'a RegisteredMemory,
    /// How long fetching a peer's card may take.
    pub deadline: Duration,
    /// What the writes carried, counted as they are posted.
    pub traffic: &'a Cell<Traffic>,
}

impl<'a> Link<'a> {
    /// Fetches `peer`'s card if it is not known yet, and refuses a write to a peer whose
    /// process has ended (see `liveness`); `op` names the operation for the error.
    pub fn reachable(&mut self, op: &str, peer: usize) -> Result<(), TransportError> {
        self.peers.reachable(op, peer, self.deadline)
    }

    /// The endpoint that reaches `peer` (made reachable before) and the way it counts in
    /// the traffic.
    pub fn endpoint_to(&self, peer: usize) -> Result<&'a Endpoint, TransportError> {
        Ok(self.fabrics.endpoint(self.peers.route(peer)?))
    }

    /// Counts `writes` posted to `peer`, carrying `bytes` of data.
    pub fn count(&self, peer: usize, writes: usize, bytes: usize) {
        if let Ok(route) = self.peers.route(peer) {
            super::fabrics::count(self.traffic, route, writes, bytes);
        }
    }
}

/// A protocol violation in operation `op`.
pub(crate) fn protocol(op: &str, what: String) -> TransportError {
    TransportError::Protocol {
        op: op.to_string(),
        what,
    }
}
