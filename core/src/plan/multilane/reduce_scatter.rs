//! Multi-lane reduce-scatter: lane j carries the parts of every node's j-th rank. Inside each
//! node a reduce-scatter leaves each member, reduced over the node's ranks, the parts of the
//! lanes it carries (a node with fewer ranks than lanes gives a rank several); then lane j's
//! carriers, one per node, run the reduce-scatter among the nodes in which node u's carrier,
//! its j-th rank, gets its own part, complete, in its receive buffer. Nothing is left to do
//! inside a node afterwards. Node u's link carries out m − M_u (M_u: its ranks' parts), what
//! the collective must send out of it, split among its ranks.

use super::{carrier, shared_link};
use crate::plan::compose::{Composite, Group, Phase, Place, Places};
use crate::plan::hierarchical::{check, scattered};
use crate::plan::registry;
use crate::plan::{displacements, Buf, Layout, LevelCosts, PlanError, Problem};

/// Multi-lane reduce-scatter, regular and irregular (module documentation); each phase runs
/// the reduce-scatter its level's model prices fastest (across: with β × lanes, the lanes
/// share the node's link).
pub struct LaneReduceScatter;

impl LaneReduceScatter {
    /// The algorithm's name.
    pub const NAME: &'static str = "lane-reduce-scatter";

    /// Plans `problem` on `layout`.
    pub fn plan(
        problem: &Problem,
        layout: &Layout,
        costs: &LevelCosts,
    ) -> Result<Composite, PlanError> {
        let (reduction, counts) = scattered(problem, Self::NAME)?;
        check(Self::NAME, problem, layout)?;
        let displs = displacements(&counts);
        let (n, lanes) = (layout.nodes(), layout.max_per_node());
        // Node u's part in lane j: its j-th rank's.
        let part = |u: usize, j: usize| layout.ranks_on(u).get(j).copied();
        // Lane j's vector: the parts of every node's j-th rank, node by node.
        let lane = |j: usize| {
            (0..n)
                .filter_map(move |u| part(u, j))
                .map(|r| (displs[r], counts[r]))
        };
        let lane_bytes: Vec<usize> = (0..lanes).map(|j| lane(j).map(|x| x.1).sum()).collect();

        // Inside: where each node's carrier of lane j holds the lane's vector reduced over
        // the node (a node's one rank: its input).
        let mut held: Vec<Vec<Place>> = Vec::with_capacity(n);
        let mut scratch = vec![0usize; layout.p()];
        let mut inside = Vec::new();
        for v in 0..n {
            let ranks = layout.ranks_on(v);
            let k = ranks.len();
            let mut here: Vec<Place> = (0..lanes)
                .map(|j| Place::runs(Buf::Send, lane(j)))
                .collect();
            if k < 2 {
                held.push(here);
                continue;
            }
            let mine: Vec<Vec<usize>> = (0..k)
                .map(|i| {
                    (i..lanes)
                        .step_by(k)
                        .filter(|&j| lane_bytes[j] > 0)
                        .collect()
                })
                .collect();
            let sub_counts: Vec<usize> = mine
                .iter()
                .map(|m| m.iter().map(|&j| lane_bytes[j]).sum())
                .collect();
            let send = Place::runs(Buf::Send, mine.iter().flatten().flat_map(|&j| lane(j)));
            let mut places = Vec::with_capacity(k);
            for (i, &c) in ranks.iter().enumerate() {
                let base = scratch[c];
                for &j in &mine[i] {
                    here[j] = Place::at(Buf::Scratch, scratch[c], lane_bytes[j]);
                    scratch[c] += lane_bytes[j];
                }
                places.push(Places {
                    send: send.clone(),
                    recv: Place::at(Buf::Scratch, base, sub_counts[i]),
                });
            }
            held.push(here);
            if sub_counts.iter().any(|&c| c > 0) {
                let sub = Problem::ReduceScatter {
                    reduction,
                    counts: sub_counts,
                };
                inside.push(Group {
                    alg: registry::fastest(&sub, &costs.inside, Self::NAME)?,
                    members: ranks.to_vec(),
                    places,
                });
            }
        }

        // Across: lane j's reduce-scatter among its carriers.
        let model = shared_link(&costs.across, lanes);
        let mut across = Vec::new();
        for j in (0..lanes).filter(|&j| lane_bytes[j] > 0) {
            let sub = Problem::ReduceScatter {
                reduction,
                counts: (0..n)
                    .map(|u| part(u, j).map_or(0, |r| counts[r]))
                    .collect(),
            };
            let places = (0..n)
                .map(|u| Places {
                    send: held[u][j].clone(),
                    // The carrier of a lane its node has a rank for is that rank.
                    recv: match part(u, j) {
                        Some(r) => Place::at(Buf::Recv, 0, counts[r]),
                        None => Place::none(Buf::Recv),
                    },
                })
                .collect();
            across.push(Group {
                alg: registry::fastest(&sub, &model, Self::NAME)?,
                members: (0..n).map(|u| carrier(layout, u, j)).collect(),
                places,
            });
        }
        Composite::new(
            Self::NAME,
            problem.clone(),
            vec![Phase::inside(inside, costs.inside), Phase::across(across)],
            |r| scratch[r],
        )
    }
}
