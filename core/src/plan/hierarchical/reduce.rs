//! Hierarchical reductions: the n-block reduce inside each node to its leader, then among the
//! leaders the reduce, the allreduce or the reduce-scatter, then (allreduce, reduce-scatter) a
//! phase inside each node again. The n-block reduce completes its blocks at the leader one
//! after the other, the last block first, in the order the reduce among the leaders sends
//! them, so the phases overlap block by block.
//!
//! Partial results are combined in the order the trees meet them, not in rank order: the
//! operators are taken to be commutative (all of [`crate::plan::ReduceOp`] are; floating-point
//! sums and products are associative only up to rounding, so their bits may differ from a
//! reduction in rank order).

use super::{check, inner_blocks, leaders, node_members, scattered, wrong};
use crate::plan::circulant::Blocking;
use crate::plan::circulant_reduce::CirculantReduce;
use crate::plan::compose::{Composite, Group, Phase, Place, Places};
use crate::plan::registry;
use crate::plan::{
    across_blocks, displacements, optimal_blocks, Buf, Layout, LevelCosts, PlanError, Problem,
    Reduction,
};

use super::broadcast_group;

/// The reduction inside every node to its leader: its result in the leader's scratch (bytes
/// `[0, bytes)`), or in `Send` for a node of one rank. Blocks: at least `blocks` (the count
/// among the leaders), and enough that a leader passes a block on soon after it completes.
/// Returns the groups and where each leader's partial result lies.
fn reduce_to_leaders(
    reduction: Reduction,
    layout: &Layout,
    lead: &[usize],
    bytes: usize,
    blocks: usize,
    costs: &LevelCosts,
) -> Result<(Vec<Group>, Vec<Place>), PlanError> {
    let mut groups = Vec::new();
    let mut partial = Vec::new();
    for (v, &leader) in lead.iter().enumerate() {
        let members = node_members(layout, v, leader);
        if members.len() < 2 {
            partial.push(Place::at(Buf::Send, 0, bytes));
            continue;
        }
        let k = members.len();
        let alg = CirculantReduce::new(
            &Problem::Reduce {
                p: k,
                root: 0,
                reduction,
                bytes,
            },
            Blocking::Fixed(inner_blocks(k, bytes, &costs.inside).max(blocks)),
        )?;
        let places = (0..k)
            .map(|i| Places {
                send: Place::at(Buf::Send, 0, bytes),
                recv: if i == 0 {
                    Place::at(Buf::Scratch, 0, bytes)
                } else {
                    Place::none(Buf::Recv)
                },
            })
            .collect();
        partial.push(Place::at(Buf::Scratch, 0, bytes));
        groups.push(Group {
            alg: Box::new(alg),
            members,
            places,
        });
    }
    Ok((groups, partial))
}

/// Scratch of the leaders that reduce their node's vectors first.
fn leader_scratch(layout: &Layout, lead: &[usize], bytes: usize) -> Vec<usize> {
    let mut scratch = vec![0; layout.p()];
    for (v, &l) in lead.iter().enumerate() {
        if layout.ranks_on(v).len() > 1 {
            scratch[l] = bytes;
        }
    }
    scratch
}

/// Hierarchical reduce: the n-block reduce inside each node to its leader, then the n-block
/// reduce among the leaders to the root (its block count chosen for the nodes, with the
/// reduce of the first blocks inside a node before it).
pub struct HierReduce;

impl HierReduce {
    /// The algorithm's name.
    pub const NAME: &'static str = "hier-reduce";

    /// Plans `problem` on `layout`.
    pub fn plan(
        problem: &Problem,
        layout: &Layout,
        costs: &LevelCosts,
    ) -> Result<Composite, PlanError> {
        let &Problem::Reduce {
            root,
            reduction,
            bytes,
            ..
        } = problem
        else {
            return Err(wrong(Self::NAME, "reduce"));
        };
        check(Self::NAME, problem, layout)?;
        let lead = leaders(layout, Some(root));
        let n = layout.nodes();
        let blocking = Blocking::Nodes {
            costs: *costs,
            ranks_per_node: layout.max_per_node(),
        };
        let top = CirculantReduce::new(
            &Problem::Reduce {
                p: n,
                root: layout.node_of(root),
                reduction,
                bytes,
            },
            blocking,
        )?;
        let (inner, partial) =
            reduce_to_leaders(reduction, layout, &lead, bytes, top.blocks(), costs)?;
        let places = (0..n)
            .map(|v| Places {
                send: partial[v].clone(),
                recv: if lead[v] == root {
                    Place::at(Buf::Recv, 0, bytes)
                } else {
                    Place::none(Buf::Recv)
                },
            })
            .collect();
        let scratch = leader_scratch(layout, &lead, bytes);
        Composite::new(
            Self::NAME,
            problem.clone(),
            vec![
                Phase::inside(inner, costs.inside),
                Phase::across(vec![Group {
                    alg: Box::new(top),
                    members: lead,
                    places,
                }]),
            ],
            |r| scratch[r],
        )
    }
}

/// Hierarchical allreduce: the n-block reduce inside each node to its leader, the allreduce
/// among the leaders that the model across nodes prices fastest, then a broadcast inside each
/// node.
pub struct HierAllreduce;

impl HierAllreduce {
    /// The algorithm's name.
    pub const NAME: &'static str = "hier-allreduce";

    /// Plans `problem` on `layout`.
    pub fn plan(
        problem: &Problem,
        layout: &Layout,
        costs: &LevelCosts,
    ) -> Result<Composite, PlanError> {
        let &Problem::Allreduce {
            reduction, bytes, ..
        } = problem
        else {
            return Err(wrong(Self::NAME, "allreduce"));
        };
        check(Self::NAME, problem, layout)?;
        let lead = leaders(layout, None);
        let n = layout.nodes();
        let blocks = across_blocks(n, layout.max_per_node(), bytes, costs);
        let (inner, partial) = reduce_to_leaders(reduction, layout, &lead, bytes, blocks, costs)?;
        let sub = Problem::Allreduce {
            p: n,
            reduction,
            bytes,
        };
        let top = registry::fastest(&sub, &costs.across, Self::NAME)?;
        let places = (0..n)
            .map(|v| Places {
                send: partial[v].clone(),
                recv: Place::at(Buf::Recv, 0, bytes),
            })
            .collect();
        let mut spread = Vec::new();
        for (v, &leader) in lead.iter().enumerate() {
            let members = node_members(layout, v, leader);
            if members.len() > 1 {
                let blocks = optimal_blocks(members.len(), bytes, &costs.inside);
                spread.push(broadcast_group(members, bytes, blocks)?);
            }
        }
        let scratch = leader_scratch(layout, &lead, bytes);
        Composite::new(
            Self::NAME,
            problem.clone(),
            vec![
                Phase::inside(inner, costs.inside),
                Phase::across(vec![Group {
                    alg: top,
                    members: lead,
                    places,
                }]),
                Phase::inside(spread, costs.inside),
            ],
            |r| scratch[r],
        )
    }
}

/// Hierarchical reduce-scatter: the n-block reduce of the whole vector inside each node to its
/// leader; among the leaders the reduce-scatter the model across nodes prices fastest, on the
/// vector taken node by node, which leaves each leader its node's parts; then each leader
/// scatters them to its node's ranks. Node v's link carries m − M_v out (M_v: its ranks'
/// parts).
pub struct HierReduceScatter;

impl HierReduceScatter {
    /// The algorithm's name.
    pub const NAME: &'static str = "hier-reduce-scatter";

    /// Plans `problem` (a reduce-scatter, regular or irregular) on `layout`.
    pub fn plan(
        problem: &Problem,
        layout: &Layout,
        costs: &LevelCosts,
    ) -> Result<Composite, PlanError> {
        let (reduction, counts) = scattered(problem, Self::NAME)?;
        check(Self::NAME, problem, layout)?;
        let total: usize = counts.iter().sum();
        let displs = displacements(&counts);
        let lead = leaders(layout, None);
        let n = layout.nodes();
        let ranks = |v: usize| layout.ranks_on(v);
        let node_counts: Vec<usize> = (0..n)
            .map(|v| ranks(v).iter().map(|&r| counts[r]).sum())
            .collect();
        let top = registry::fastest(
            &Problem::ReduceScatter {
                reduction,
                counts: node_counts.clone(),
            },
            &costs.across,
            Self::NAME,
        )?;
        let (inner, partial) = reduce_to_leaders(reduction, layout, &lead, total, 1, costs)?;
        let mut scratch = leader_scratch(layout, &lead, total);

        // Leader v's parts of its node, in its node's rank order (the leader first): in its
        // receive buffer on a node of one rank, else in scratch until the scatter.
        let mut gathered = Vec::with_capacity(n);
        let mut places = Vec::with_capacity(n);
        for v in 0..n {
            let from = &partial[v];
            let send = Place::runs(
                from.buf(),
                (0..n).flat_map(|u| ranks(u).iter().map(|&r| (displs[r], counts[r]))),
            );
            let recv = if ranks(v).len() < 2 {
                Place::at(Buf::Recv, 0, node_counts[v])
            } else {
                let at = scratch[lead[v]];
                scratch[lead[v]] += node_counts[v];
                Place::at(Buf::Scratch, at, node_counts[v])
            };
            gathered.push(recv.clone());
            places.push(Places { send, recv });
        }
        let mut spread = Vec::new();
        for v in (0..n).filter(|&v| ranks(v).len() > 1) {
            let members = ranks(v).to_vec();
            let sub = Problem::Scatterv {
                root: 0,
                counts: members.iter().map(|&r| counts[r]).collect(),
            };
            let places = members
                .iter()
                .enumerate()
                .map(|(i, &r)| Places {
                    send: if i == 0 {
                        gathered[v].clone()
                    } else {
                        Place::none(Buf::Send)
                    },
                    recv: Place::at(Buf::Recv, 0, counts[r]),
                })
                .collect();
            spread.push(Group {
                alg: registry::fastest(&sub, &costs.inside, Self::NAME)?,
                members,
                places,
            });
        }
        Composite::new(
            Self::NAME,
            problem.clone(),
            vec![
                Phase::inside(inner, costs.inside),
                Phase::across(vec![Group {
                    alg: top,
                    members: lead,
                    places,
                }]),
                Phase::inside(spread, costs.inside),
            ],
            |r| scratch[r],
        )
    }
}
