//! Multi-lane collectives: every rank of a node carries a share of the traffic between nodes.
//! Lane j joins the j-th rank of every node; the lanes run their schedules among the nodes side
//! by side, and the ranks of each node split the data among the lanes before and exchange what
//! the lanes brought after. A node with fewer ranks than lanes carries lane j with its rank
//! j mod (its ranks), so any placement works. The bytes that cross a node's link are those of
//! the hierarchical algorithms ([`super::hierarchical`]); what changes is that no one rank of a
//! node handles them all (Träff's decomposition of collectives into node and lane
//! communicators, "multi-lane" in docs/architecture.md's references).
//!
//! - [`LaneAllgatherv`]: lane j gathers the blocks of every node's j-th rank, then each node's
//!   ranks exchange their lanes.
//! - [`LaneBroadcast`]: the message in shares, one a lane, then exchanged inside every node.
//! - [`LaneAllreduce`], [`LaneReduce`]: a reduce-scatter inside each node into one share a
//!   lane, lane j's allreduce (reduce to the root's node) of share j, then the shares exchanged
//!   inside every node (gathered at the root).
//! - [`LaneReduceScatter`]: a reduce-scatter inside each node into the lanes its ranks carry,
//!   then lane j's reduce-scatter of every node's j-th rank's part among its carriers.
//! - [`LaneBarrier`]: a barrier inside each node, then one in every lane; every rank carries a
//!   lane, so no node phase follows.

mod allgather;
mod barrier;
mod broadcast;
mod reduce;
mod reduce_scatter;

pub use allgather::LaneAllgatherv;
pub use barrier::LaneBarrier;
pub use broadcast::LaneBroadcast;
pub use reduce::{LaneAllreduce, LaneReduce};
pub use reduce_scatter::LaneReduceScatter;

use super::circulant::{Blocking, CirculantAllgatherv};
use super::compose::{Group, Place, Places};
use super::{Buf, CostModel, Layout, LevelCosts, PlanError, Problem};

/// The model one lane sees across nodes: the lanes of a node share its link, so each gets a
/// part of its bandwidth (block counts chosen with it are those of the whole message).
pub(super) fn shared_link(across: &CostModel, lanes: usize) -> CostModel {
    CostModel {
        beta: across.beta * lanes as f64,
        ..*across
    }
}

/// The rank of node `v` that carries lane `j`.
pub(super) fn carrier(layout: &Layout, v: usize, j: usize) -> usize {
    let ranks = layout.ranks_on(v);
    ranks[j % ranks.len()]
}

/// An allgatherv inside node `v` in which member i contributes `runs(i)` of the receive
/// buffer (already held there) and every member ends with all of them.
pub(super) fn exchange_group(
    layout: &Layout,
    v: usize,
    runs: impl Fn(usize) -> Vec<(usize, usize)>,
    costs: &LevelCosts,
) -> Result<Group, PlanError> {
    let own = Exchange::new(layout.ranks_on(v).len(), runs);
    own.group(layout, v, costs)
}

/// What the members of a node's exchange contribute and receive, where they lie: the same
/// for every node whose members carry the same lanes, so built once for them.
pub(super) struct Exchange {
    /// Per member, its own runs.
    send: Vec<Place>,
    /// Everything, in members' order.
    recv: Place,
    counts: Vec<usize>,
}

impl Exchange {
    /// The exchange of `k` members, member i contributing `runs(i)`.
    pub(super) fn new(k: usize, runs: impl Fn(usize) -> Vec<(usize, usize)>) -> Exchange {
        let own: Vec<Vec<(usize, usize)>> = (0..k).map(runs).collect();
        Exchange {
            send: own
                .iter()
                .map(|r| Place::runs(Buf::Recv, r.iter().copied()))
                .collect(),
            // Every member receives into the same place: built once, shared.
            recv: Place::runs(Buf::Recv, own.iter().flatten().copied()),
            counts: own.iter().map(|r| r.iter().map(|x| x.1).sum()).collect(),
        }
    }

    /// The exchange as the group of node `v`'s members.
    pub(super) fn group(
        &self,
        layout: &Layout,
        v: usize,
        costs: &LevelCosts,
    ) -> Result<Group, PlanError> {
        let members = layout.ranks_on(v).to_vec();
        let alg = CirculantAllgatherv::new(
            &Problem::Allgatherv {
                counts: self.counts.clone(),
            },
            Blocking::Model(costs.inside),
        )?;
        let places = self
            .send
            .iter()
            .map(|send| Places {
                send: send.clone(),
                recv: self.recv.clone(),
            })
            .collect();
        Ok(Group {
            alg: Box::new(alg),
            members,
            places,
        })
    }
}
