//! Multi-lane allgatherv: the lanes gather the blocks of every node's j-th ranks, then each
//! node's ranks exchange their lanes.

use super::{carrier, shared_link, Exchange};
use crate::plan::circulant::{Blocking, CirculantAllgatherv};
use crate::plan::compose::{Composite, Group, Phase, Place, Places};
use crate::plan::hierarchical::{check, gathered};
use crate::plan::{displacements, Buf, Layout, LevelCosts, PlanError, Problem};

/// Multi-lane allgatherv: lane j is the circulant allgatherv of the blocks of every node's
/// j-th rank among the lane's carriers; then each node's ranks exchange their lanes.
pub struct LaneAllgatherv;

impl LaneAllgatherv {
    /// The algorithm's name.
    pub const NAME: &'static str = "lane-circulant-allgatherv";
    /// Its name for the regular allgather.
    pub const ALLGATHER: &'static str = "lane-circulant-allgather";

    /// Plans `problem` (an allgatherv, or an allgather as one with equal counts) on `layout`.
    pub fn plan(
        problem: &Problem,
        layout: &Layout,
        costs: &LevelCosts,
    ) -> Result<Composite, PlanError> {
        let (name, counts) = gathered(problem, Self::NAME, Self::ALLGATHER)?;
        check(name, problem, layout)?;
        let displs = displacements(&counts);
        let (n, lanes) = (layout.nodes(), layout.max_per_node());
        // Node v's block in lane j: its j-th rank's, or nothing.
        let block = |v: usize, j: usize| -> Option<usize> { layout.ranks_on(v).get(j).copied() };
        let slot = |r: usize| (displs[r], counts[r]);

        let mut across = Vec::with_capacity(lanes);
        for j in 0..lanes {
            let members: Vec<usize> = (0..n).map(|v| carrier(layout, v, j)).collect();
            let lane_counts: Vec<usize> = (0..n)
                .map(|v| block(v, j).map_or(0, |r| counts[r]))
                .collect();
            // Every carrier of the lane receives into the same place: built once, shared.
            let recv = Place::runs(Buf::Recv, (0..n).filter_map(|v| block(v, j)).map(slot));
            let alg = CirculantAllgatherv::new(
                &Problem::Allgatherv {
                    counts: lane_counts,
                },
                Blocking::Nodes {
                    costs: LevelCosts {
                        across: shared_link(&costs.across, lanes),
                        inside: costs.inside,
                    },
                    ranks_per_node: layout.max_per_node(),
                },
            )?;
            let places = (0..n)
                .map(|v| Places {
                    send: match block(v, j) {
                        Some(r) => Place::at(Buf::Send, 0, counts[r]),
                        None => Place::none(Buf::Send),
                    },
                    recv: recv.clone(),
                })
                .collect();
            across.push(Group {
                alg: Box::new(alg),
                members,
                places,
            });
        }

        let mut inside = Vec::new();
        // Where the members of a node of k ranks contribute and receive depends on k alone.
        let mut exchanges: std::collections::HashMap<usize, Exchange> =
            std::collections::HashMap::new();
        for v in 0..n {
            let k = layout.ranks_on(v).len();
            if k < 2 {
                continue;
            }
            // Member i carries the lanes j ≡ i (mod k): every node's block of those lanes.
            let runs = |i: usize| -> Vec<(usize, usize)> {
                (i..lanes)
                    .step_by(k)
                    .flat_map(|j| (0..n).filter_map(move |u| block(u, j)))
                    .map(slot)
                    .collect()
            };
            let exchange = exchanges.entry(k).or_insert_with(|| Exchange::new(k, runs));
            inside.push(exchange.group(layout, v, costs)?);
        }
        Composite::new(
            name,
            problem.clone(),
            vec![Phase::across(across), Phase::inside(inside, costs.inside)],
            |_| 0,
        )
    }
}
