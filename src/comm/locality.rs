//! Which node each rank of a communicator runs on, and the communicator of the ranks of one
//! node.
//!
//! The world communicator learns the map at init, with no exchange of its own: from the
//! launcher where it tells (`PMI_process_mapping` of Hydra, `circulant run` and Slurm's
//! PMI-2, PMIx's node ids, a job the launcher puts on one node), else from the host names the
//! ranks exchange at start ([`crate::bootstrap::Bootstrap::node_map`]). A communicator from
//! [`Communicator::split`] keeps its parent's map restricted to its ranks.

use super::error::argument;
use super::{Communicator, NodeMap, Result};

impl Communicator {
    /// The node of every rank of this communicator (nodes numbered 0, 1, ... in the order of
    /// their first rank here).
    pub fn node_map(&self) -> &NodeMap {
        &self.nodes
    }

    /// This rank's node, 0 ≤ node < [`Communicator::nodes`].
    pub fn node(&self) -> usize {
        self.nodes.node()
    }

    /// The number of nodes this communicator's ranks run on.
    pub fn nodes(&self) -> usize {
        self.nodes.nodes()
    }

    /// The node of `rank`; None when it is not a rank of this communicator.
    pub fn node_of(&self, rank: usize) -> Option<usize> {
        self.nodes.node_of(rank)
    }

    /// The ranks on `node`, in rank order; None when there is no such node.
    pub fn ranks_on(&self, node: usize) -> Option<&[usize]> {
        self.nodes.ranks_on(node)
    }

    /// The ranks on this rank's node, in rank order (this rank included).
    pub fn local_ranks(&self) -> &[usize] {
        self.nodes.local_ranks()
    }

    /// The communicator of the ranks on this rank's node, in their rank order here: a
    /// [`Communicator::split`] with the node as color and the rank as key. Every rank must
    /// call it.
    pub fn split_by_node(&mut self) -> Result<Communicator> {
        let op = "split by node";
        // Nodes and ranks are below 2^24 (the transport's rank fields): both fit. Should they
        // not, the call is given up on every rank, as any refused call is.
        let (Ok(color), Ok(key)) = (u32::try_from(self.node()), i64::try_from(self.rank())) else {
            let why = format!("node {} or rank {} does not fit", self.node(), self.rank());
            self.refuse(op, &why);
            return Err(argument(op, why));
        };
        self.split(Some(color), key)?
            .ok_or_else(|| argument(op, "the split returned no communicator".into()))
    }
}
