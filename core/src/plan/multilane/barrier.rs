//! Multi-lane barrier: a dissemination barrier inside each node, then one in every lane among
//! its carriers (one rank per node), after the node's.
//!
//! A barrier moves no data, so lanes share no bandwidth here; what they save is a phase. In
//! the hierarchical barrier only the leaders hear from the other nodes, so the node's ranks
//! must wait for their leader in a third phase. Here every rank carries a lane (rank i of a
//! node carries lane i), and a lane's dissemination reaches each of its carriers from a carrier
//! of every node, each of which had finished its node's barrier: so when a rank's lane is done,
//! every rank of every node has arrived. ⌈log₂ k⌉ rounds inside and ⌈log₂ n⌉ across, against
//! 2⌈log₂ k⌉ + ⌈log₂ n⌉; each node's link carries k signals a round instead of one.

use super::carrier;
use crate::plan::barrier::DisseminationBarrier;
use crate::plan::compose::{Composite, Group, Phase, Places};
use crate::plan::hierarchical::{check, wrong};
use crate::plan::{BufferSizes, Layout, LevelCosts, PlanError, Problem};

/// A dissemination barrier among `members`.
fn barrier(members: Vec<usize>) -> Result<Group, PlanError> {
    let k = members.len();
    Ok(Group {
        alg: Box::new(DisseminationBarrier::new(&Problem::Barrier { p: k })?),
        places: vec![Places::same(BufferSizes::default()); k],
        members,
    })
}

/// Multi-lane barrier: a dissemination barrier inside each node, then in every lane among its
/// carriers, each of a rank's signals in the lanes after its node's barrier.
pub struct LaneBarrier;

impl LaneBarrier {
    /// The algorithm's name.
    pub const NAME: &'static str = "lane-barrier";

    /// Plans `problem` on `layout`.
    pub fn plan(
        problem: &Problem,
        layout: &Layout,
        costs: &LevelCosts,
    ) -> Result<Composite, PlanError> {
        if !matches!(problem, Problem::Barrier { .. }) {
            return Err(wrong(Self::NAME, "barrier"));
        }
        check(Self::NAME, problem, layout)?;
        let n = layout.nodes();
        let nodes = (0..n)
            .map(|v| layout.ranks_on(v).to_vec())
            .filter(|m| m.len() > 1)
            .map(barrier)
            .collect::<Result<Vec<_>, _>>()?;
        let lanes = (0..layout.max_per_node())
            .map(|j| barrier((0..n).map(|v| carrier(layout, v, j)).collect()))
            .collect::<Result<Vec<_>, _>>()?;
        Composite::new(
            Self::NAME,
            problem.clone(),
            vec![
                Phase::inside(nodes, costs.inside),
                Phase::across(lanes).ordered(),
            ],
            |_| 0,
        )
    }
}
