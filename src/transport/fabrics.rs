//! The fabrics a transport writes through: the network provider's, which reaches every rank,
//! and, in a job of several nodes, a second one for the ranks of this node (shared memory),
//! so that their bytes do not go through the node's network link. Each peer is reached
//! through one of them (its [`Route`], fixed when its card is learned); completions are read
//! from both.

use std::cell::Cell;
use std::time::Duration;

use crate::fabric::{AddressVector, Completion, CompletionQueue, Endpoint, FabricError, Info};

/// Longest sleep between polls of the completion queues in [`Fabrics::wait`] (retries and
/// draining) where there are two of them (no single wait object covers both).
const POLL_SLEEP: Duration = Duration::from_micros(50);

/// How a peer is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Through the network provider.
    Network,
    /// Through the provider for the ranks of this node.
    Node,
}

/// One fabric: endpoint, its completion queue and address vector.
pub(crate) struct Fabric {
    pub endpoint: Endpoint,
    pub cq: CompletionQueue,
    pub av: AddressVector,
}

/// The network fabric, and the node's where the transport has one.
pub(crate) struct Fabrics {
    network: Fabric,
    node: Option<Fabric>,
    /// Whether some peer runs on another node.
    across: bool,
}

impl Fabrics {
    pub fn new(network: Fabric, node: Option<Fabric>, across: bool) -> Fabrics {
        Fabrics {
            network,
            node,
            across,
        }
    }

    /// Whether a waiting rank waits on two completion queues for peers of which some run on
    /// other nodes (whose steps, over a link, are far apart).
    pub fn waits_across_nodes(&self) -> bool {
        self.node.is_some() && self.across
    }

    /// The network fabric's endpoint (every peer can be reached through it).
    pub fn network(&self) -> &Endpoint {
        &self.network.endpoint
    }

    /// The node fabric's endpoint, if the transport has one.
    pub fn node(&self) -> Option<&Endpoint> {
        self.node.as_ref().map(|f| &f.endpoint)
    }

    /// The endpoint of `route` (the network's where there is no node fabric).
    pub fn endpoint(&self, route: Route) -> &Endpoint {
        match (route, &self.node) {
            (Route::Node, Some(node)) => &node.endpoint,
            _ => &self.network.endpoint,
        }
    }

    /// Every endpoint, the network's first: memory peers write into is registered with all.
    pub fn endpoints(&self) -> Vec<&Endpoint> {
        std::iter::once(&self.network.endpoint)
            .chain(self.node.as_ref().map(|f| &f.endpoint))
            .collect()
    }

    /// The network fabric's provider.
    pub fn info(&self) -> &Info {
        self.network.endpoint.info()
    }

    /// Whether a waiting rank can block on one wait object: there is one completion queue,
    /// and it has one.
    pub fn has_wait_object(&self) -> bool {
        self.node.is_none() && self.network.cq.has_wait_object()
    }

    /// Reads the completions that are there from every queue, appending them to `out`. A
    /// failed operation is returned as the error once the other queue was read too.
    pub fn poll(&self, out: &mut Vec<Completion>) -> Result<usize, FabricError> {
        let network = self.network.cq.poll(out);
        let node = match &self.node {
            Some(node) => node.cq.poll(out),
            None => Ok(0),
        };
        Ok(network? + node?)
    }

    /// Like [`Self::poll`] but waits up to `timeout` for a completion: on the queue's wait
    /// object where there is one queue, else polling both with short sleeps.
    pub fn wait(&self, out: &mut Vec<Completion>, timeout: Duration) -> Result<usize, FabricError> {
        if self.node.is_none() {
            return self.network.cq.wait(out, timeout);
        }
        let until = std::time::Instant::now() + timeout;
        loop {
            let got = self.poll(out)?;
            let left = until.saturating_duration_since(std::time::Instant::now());
            if got > 0 || left.is_zero() {
                return Ok(got);
            }
            std::thread::sleep(left.min(POLL_SLEEP));
        }
    }

    /// Posts again the receives that remote CQ data consumed, on the endpoints that need them.
    pub fn replenish(&self) -> Result<(), FabricError> {
        for endpoint in self.endpoints() {
            if endpoint.needs_cq_data_receives() {
                endpoint.replenish_cq_data_receives()?;
            }
        }
        Ok(())
    }
}

/// What one way of reaching peers carried: writes posted (data, receive slots, tokens,
/// signals, aborts, credit words) and the bytes of operation data among them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Carried {
    /// Writes posted (or, for [`Traffic::memory`], receive slots stored).
    pub writes: u64,
    /// Bytes of the operations' data they carried (zero-copy writes, and the data in receive
    /// slots, without their headers).
    pub bytes: u64,
}

impl Carried {
    pub(crate) fn add(&mut self, writes: usize, bytes: usize) {
        self.writes += writes as u64;
        self.bytes += bytes as u64;
    }
}

/// Where a rank's writes went since its transport was connected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Through the network provider.
    pub network: Carried,
    /// Through the provider for the ranks of this node (none without a node fabric).
    pub node: Carried,
    /// Stored into shared memory, no provider involved: receive slots (the eager path's
    /// memory carrier) and the parts ranks publish on the shared segment.
    pub memory: Carried,
}

impl Traffic {
    /// Adds what `other` carried (a communicator's and those it runs phases on).
    pub fn add(&mut self, other: &Traffic) {
        for (mine, theirs) in [
            (&mut self.network, other.network),
            (&mut self.node, other.node),
            (&mut self.memory, other.memory),
        ] {
            mine.add(theirs.writes as usize, theirs.bytes as usize);
        }
    }

    fn route(&mut self, route: Route) -> &mut Carried {
        match route {
            Route::Network => &mut self.network,
            Route::Node => &mut self.node,
        }
    }
}

/// Counts `writes` through `route` carrying `bytes` of data (kept in a cell: writes are
/// posted through shared references to the transport).
pub(crate) fn count(traffic: &Cell<Traffic>, route: Route, writes: usize, bytes: usize) {
    let mut t = traffic.get();
    t.route(route).add(writes, bytes);
    traffic.set(t);
}

/// Counts receive slots stored into shared memory, carrying `bytes` of data.
pub(crate) fn count_memory(traffic: &Cell<Traffic>, slots: usize, bytes: usize) {
    let mut t = traffic.get();
    t.memory.add(slots, bytes);
    traffic.set(t);
}
