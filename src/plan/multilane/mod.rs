//! Multi-lane collectives: every rank of a node carries a share of the traffic between nodes.
//! Lane j joins the j-th rank of every node; the lanes run their circulant schedules among the
//! nodes side by side, then the ranks of each node exchange what their lanes brought. A node
//! with fewer ranks than lanes carries lane j with its rank j mod (its ranks), so any placement
//! works. The bytes that cross a node's link are those of the hierarchical algorithms
//! ([`super::hierarchical`]); what changes is that no one rank of a node handles them all.

mod allgather;
mod barrier;
mod broadcast;
mod reduce;

pub use allgather::LaneAllgatherv;
pub use barrier::LaneBarrier;
pub use broadcast::LaneBroadcast;
pub use reduce::{LaneAllreduce, LaneReduce};

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
    let members = layout.ranks_on(v).to_vec();
    let own: Vec<Vec<(usize, usize)>> = (0..members.len()).map(runs).collect();
    let counts: Vec<usize> = own.iter().map(|r| r.iter().map(|x| x.1).sum()).collect();
    let all: Vec<(usize, usize)> = own.iter().flatten().copied().collect();
    let alg = CirculantAllgatherv::new(
        &Problem::Allgatherv { counts },
        Blocking::Model(costs.inside),
    )?;
    let places = own
        .into_iter()
        .map(|r| Places {
            send: Place::runs(Buf::Recv, r),
            recv: Place::runs(Buf::Recv, all.iter().copied()),
        })
        .collect();
    Ok(Group {
        alg: Box::new(alg),
        members,
        places,
    })
}
