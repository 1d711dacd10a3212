//! Node-aware collectives for ranks on several nodes: an intra-node phase, a phase among one
//! leader rank per node, an intra-node phase ([`super::compose`]), so that the bytes crossing a
//! node's link are what the collective needs there and no more (a broadcast brings m into each
//! node once; an allgatherv brings in each node the blocks of the other nodes once).
//!
//! The leader of a node is its first rank, or the root on the root's node. Between nodes the
//! circulant schedules run among the leaders (seed 000: broadcast, allgatherv), priced with
//! the model across nodes; inside a node the phases are priced with the model inside it. The
//! phases overlap block by block: a block a leader receives from another node moves on inside
//! the node as soon as it has arrived. Any placement works: uneven nodes, ranks of a node that
//! are not consecutive (round robin), nodes of one rank (which skip the intra-node phases).

mod reduce;

pub use reduce::{HierAllreduce, HierReduce, HierReduceScatter};

use super::barrier::DisseminationBarrier;
use super::circulant::{Blocking, CirculantAllgatherv, CirculantBroadcast};
use super::compose::{Composite, Group, Phase, Place, Places};
use super::rootedv::{BinomialGatherv, LinearGatherv};
use super::{
    across_blocks, displacements, optimal_blocks, Algorithm, Buf, BufferSizes, CostModel, Layout,
    LevelCosts, PlanError, Problem, Reduction,
};

/// Blocks of the broadcasts inside a node: at least what the model inside asks for, and enough
/// that a leader forwards a block soon after it arrives (up to 128 blocks of at least 32 KiB).
pub(super) fn inner_blocks(p: usize, bytes: usize, inside: &CostModel) -> usize {
    optimal_blocks(p, bytes, inside)
        .max((bytes / (32 << 10)).min(128))
        .max(1)
}

/// The leader of every node: `root` on its node, else the node's first rank.
fn leaders(layout: &Layout, root: Option<usize>) -> Vec<usize> {
    (0..layout.nodes())
        .map(|v| match root {
            Some(r) if layout.node_of(r) == v => r,
            _ => layout.ranks_on(v)[0],
        })
        .collect()
}

/// A node's ranks with its leader first.
pub(super) fn node_members(layout: &Layout, v: usize, leader: usize) -> Vec<usize> {
    let mut m = vec![leader];
    m.extend(layout.ranks_on(v).iter().copied().filter(|&r| r != leader));
    m
}

/// Node-aware algorithms apply where nodes hold several ranks and there are several nodes.
pub(super) fn check(
    name: &'static str,
    problem: &Problem,
    layout: &Layout,
) -> Result<(), PlanError> {
    problem.validate()?;
    if layout.p() != problem.p() {
        return Err(PlanError::CountsLength {
            expected: problem.p(),
            got: layout.p(),
        });
    }
    if !layout.is_hierarchical() {
        return Err(PlanError::Unsupported {
            algorithm: name,
            reason: "needs several nodes, some with several ranks".into(),
        });
    }
    Ok(())
}

pub(super) fn wrong(name: &'static str, collective: &'static str) -> PlanError {
    PlanError::WrongCollective {
        algorithm: name,
        collective,
    }
}

/// The name and the counts of an allgatherv, or of an allgather as one with equal counts.
pub(super) fn gathered(
    problem: &Problem,
    allgatherv: &'static str,
    allgather: &'static str,
) -> Result<(&'static str, Vec<usize>), PlanError> {
    match problem {
        Problem::Allgatherv { counts } => Ok((allgatherv, counts.clone())),
        Problem::Allgather { p, block } => Ok((allgather, vec![*block; *p])),
        _ => Err(wrong(allgatherv, "allgatherv")),
    }
}

/// The reduction and the per-rank counts of a reduce-scatter, regular (equal counts) or
/// irregular.
pub(super) fn scattered(
    problem: &Problem,
    name: &'static str,
) -> Result<(Reduction, Vec<usize>), PlanError> {
    match problem {
        Problem::ReduceScatterBlock {
            p,
            reduction,
            block,
        } => Ok((*reduction, vec![*block; *p])),
        Problem::ReduceScatter { reduction, counts } => Ok((*reduction, counts.clone())),
        _ => Err(wrong(name, "reduce-scatter")),
    }
}

/// A broadcast among `members` (the first is the root) of `bytes` in the receive buffer.
pub(super) fn broadcast_group(
    members: Vec<usize>,
    bytes: usize,
    blocks: usize,
) -> Result<Group, PlanError> {
    let k = members.len();
    let alg = CirculantBroadcast::new(
        &Problem::Broadcast {
            p: k,
            root: 0,
            bytes,
        },
        Blocking::Fixed(blocks.max(1)),
    )?;
    let places = vec![
        Places::same(BufferSizes {
            send: 0,
            recv: bytes,
            scratch: 0
        });
        k
    ];
    Ok(Group {
        alg: Box::new(alg),
        members,
        places,
    })
}

/// Hierarchical circulant broadcast: the circulant n-block broadcast among the leaders, then
/// inside every node from its leader, block by block as blocks arrive.
pub struct HierBroadcast;

impl HierBroadcast {
    /// The algorithm's name.
    pub const NAME: &'static str = "hier-circulant-bcast";

    /// Plans `problem` on `layout`.
    pub fn plan(
        problem: &Problem,
        layout: &Layout,
        costs: &LevelCosts,
    ) -> Result<Composite, PlanError> {
        let &Problem::Broadcast { root, bytes, .. } = problem else {
            return Err(wrong(Self::NAME, "broadcast"));
        };
        check(Self::NAME, problem, layout)?;
        let lead = leaders(layout, Some(root));
        let n = layout.nodes();
        let across = across_blocks(n, layout.max_per_node(), bytes, costs);
        let mut top = broadcast_group(lead.clone(), bytes, across)?;
        // The root's node is the broadcast's root among the leaders.
        let root_node = layout.node_of(root);
        top.alg = Box::new(CirculantBroadcast::new(
            &Problem::Broadcast {
                p: n,
                root: root_node,
                bytes,
            },
            Blocking::Fixed(across),
        )?);
        let mut inner = Vec::new();
        for (v, &leader) in lead.iter().enumerate() {
            let members = node_members(layout, v, leader);
            if members.len() > 1 {
                let blocks = inner_blocks(members.len(), bytes, &costs.inside).max(across);
                inner.push(broadcast_group(members, bytes, blocks)?);
            }
        }
        Composite::new(
            Self::NAME,
            problem.clone(),
            vec![Phase::across(vec![top]), Phase::inside(inner, costs.inside)],
            |_| 0,
        )
    }
}

/// Hierarchical circulant allgatherv: each node's blocks gathered at its leader, the circulant
/// allgatherv among the leaders (each contributing its node's blocks), then everything
/// broadcast inside every node from its leader as it arrives.
pub struct HierAllgatherv;

impl HierAllgatherv {
    /// The algorithm's name.
    pub const NAME: &'static str = "hier-circulant-allgatherv";
    /// Its name for the regular allgather.
    pub const ALLGATHER: &'static str = "hier-circulant-allgather";

    /// Plans `problem` (an allgatherv, or an allgather as one with equal counts) on `layout`.
    pub fn plan(
        problem: &Problem,
        layout: &Layout,
        costs: &LevelCosts,
    ) -> Result<Composite, PlanError> {
        let (name, counts) = gathered(problem, Self::NAME, Self::ALLGATHER)?;
        check(name, problem, layout)?;
        let total: usize = counts.iter().sum();
        let displs = displacements(&counts);
        let slot = |r: usize| (displs[r], counts[r]);
        let lead = leaders(layout, None);
        let n = layout.nodes();

        // 1. Gather each node's blocks at its leader, each block at its final place.
        let mut gathers = Vec::new();
        for (v, &leader) in lead.iter().enumerate() {
            let members = node_members(layout, v, leader);
            if members.len() < 2 {
                continue;
            }
            let sub = Problem::Gatherv {
                root: 0,
                counts: members.iter().map(|&r| counts[r]).collect(),
            };
            let binomial = BinomialGatherv::new(&sub)?;
            let linear = LinearGatherv::new(&sub)?;
            let alg: Box<dyn Algorithm> =
                if linear.predict(&costs.inside).time < binomial.predict(&costs.inside).time {
                    Box::new(linear)
                } else {
                    Box::new(binomial)
                };
            let places = members
                .iter()
                .enumerate()
                .map(|(i, &r)| Places {
                    send: Place::at(Buf::Send, 0, counts[r]),
                    recv: if i == 0 {
                        Place::runs(Buf::Recv, members.iter().map(|&m| slot(m)))
                    } else {
                        Place::none(Buf::Recv)
                    },
                })
                .collect();
            gathers.push(Group {
                alg,
                members,
                places,
            });
        }

        // 2. The circulant allgatherv among the leaders: node v contributes its ranks' blocks.
        let node_counts: Vec<usize> = (0..n)
            .map(|v| layout.ranks_on(v).iter().map(|&r| counts[r]).sum())
            .collect();
        let all_runs = Place::runs(
            Buf::Recv,
            (0..n).flat_map(|v| layout.ranks_on(v).iter().map(|&r| slot(r))),
        );
        let top = CirculantAllgatherv::new(
            &Problem::Allgatherv {
                counts: node_counts,
            },
            Blocking::Nodes {
                costs: *costs,
                ranks_per_node: layout.max_per_node(),
            },
        )?;
        let top_places = (0..n)
            .map(|v| Places {
                send: if layout.ranks_on(v).len() > 1 {
                    Place::runs(Buf::Recv, layout.ranks_on(v).iter().map(|&r| slot(r)))
                } else {
                    Place::at(Buf::Send, 0, counts[lead[v]])
                },
                recv: all_runs.clone(),
            })
            .collect();
        let top = Group {
            alg: Box::new(top),
            members: lead.clone(),
            places: top_places,
        };

        // 3. Everything to every rank of a node from its leader.
        let mut spread = Vec::new();
        for (v, &leader) in lead.iter().enumerate() {
            let members = node_members(layout, v, leader);
            if members.len() > 1 {
                let blocks = inner_blocks(members.len(), total, &costs.inside);
                spread.push(broadcast_group(members, total, blocks)?);
            }
        }
        Composite::new(
            name,
            problem.clone(),
            vec![
                Phase::inside(gathers, costs.inside),
                Phase::across(vec![top]),
                Phase::inside(spread, costs.inside),
            ],
            |_| 0,
        )
    }
}

/// Hierarchical barrier: a dissemination barrier inside each node, among the leaders, and
/// inside each node again, each phase after the one before.
pub struct HierBarrier;

impl HierBarrier {
    /// The algorithm's name.
    pub const NAME: &'static str = "hier-barrier";

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
        let lead = leaders(layout, None);
        let barrier = |members: Vec<usize>| -> Result<Group, PlanError> {
            let k = members.len();
            Ok(Group {
                alg: Box::new(DisseminationBarrier::new(&Problem::Barrier { p: k })?),
                places: vec![Places::same(BufferSizes::default()); k],
                members,
            })
        };
        let nodes = || -> Result<Vec<Group>, PlanError> {
            lead.iter()
                .enumerate()
                .map(|(v, &l)| node_members(layout, v, l))
                .filter(|m| m.len() > 1)
                .map(barrier)
                .collect()
        };
        Composite::new(
            Self::NAME,
            problem.clone(),
            vec![
                Phase::inside(nodes()?, costs.inside),
                Phase::across(vec![barrier(lead.clone())?]).ordered(),
                Phase::inside(nodes()?, costs.inside).ordered(),
            ],
            |_| 0,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ceil_log2;

    fn costs(alpha_across: f64, beta_across: f64) -> LevelCosts {
        LevelCosts {
            inside: CostModel {
                alpha: 1.06e-6,
                beta: 1.4e-10,
                o: 6.5e-7,
            },
            across: CostModel {
                alpha: alpha_across,
                beta: beta_across,
                o: 5e-6,
            },
        }
    }

    /// The least cost of the objective `across_blocks` minimises, by brute force.
    fn cheapest(nodes: usize, k: usize, bytes: usize, c: &LevelCosts) -> f64 {
        let (qa, qi) = (ceil_log2(nodes) as f64, ceil_log2(k) as f64);
        (1..=bytes.min(4096))
            .map(|n| {
                let block = bytes.div_ceil(n);
                (n as f64 - 1.0 + qa) * c.across.message(block) + qi * c.inside.message(block)
            })
            .fold(f64::INFINITY, f64::min)
    }

    #[test]
    fn across_blocks_minimise_the_pipeline_and_the_last_blocks_way_inside() {
        for c in [
            costs(1.43e-5, 2.77e-8),
            costs(2e-6, 8e-11),
            costs(5e-5, 1e-9),
        ] {
            for nodes in [2, 3, 4, 16] {
                for k in [1, 2, 4, 64] {
                    for bytes in [1, 1000, 100_000, 2_000_000] {
                        let n = across_blocks(nodes, k, bytes, &c);
                        let block = bytes.div_ceil(n);
                        let (qa, qi) = (ceil_log2(nodes) as f64, ceil_log2(k) as f64);
                        let got = (n as f64 - 1.0 + qa) * c.across.message(block)
                            + qi * c.inside.message(block);
                        let best = cheapest(nodes, k, bytes, &c);
                        // Within 0.1 %: blocks of ⌈m/n⌉ bytes make the cost uneven in n,
                        // and the count is taken next to the smooth optimum.
                        assert!(
                            got <= best * (1.0 + 1e-3),
                            "{nodes} nodes × {k}, {bytes} B: {n} blocks cost {got}, best {best}"
                        );
                        if k == 1 {
                            assert_eq!(n, optimal_blocks(nodes, bytes, &c.across));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn two_nodes_cut_a_long_broadcast_so_that_their_ranks_need_not_wait_for_all_of_it() {
        // The emulated cluster's levels (300 Mbit/s across, shared memory inside): among two
        // nodes alone one block is best, yet the ranks of a node would then wait for all of it.
        let c = costs(1.43e-5, 2.77e-8);
        assert_eq!(optimal_blocks(2, 2_000_000, &c.across), 1);
        let n = across_blocks(2, 4, 2_000_000, &c);
        assert!((4..=8).contains(&n), "{n} blocks");
        let plan = HierBroadcast::plan(
            &Problem::Broadcast {
                p: 8,
                root: 0,
                bytes: 2_000_000,
            },
            &Layout::blocks(2, 4).unwrap(),
            &c,
        )
        .unwrap();
        // Rank 0 writes to rank 4, the other node's leader, once per block.
        let writes = plan
            .rank_plan(0)
            .unwrap()
            .rounds
            .flat_map(|r| r.sends)
            .filter(|t| t.to == 4)
            .count();
        assert_eq!(writes, n);
    }

    #[test]
    fn the_leaders_allgatherv_is_cut_so_that_their_ranks_need_not_wait_for_a_whole_node() {
        use crate::plan::circulant::{Blocking, CirculantAllgatherv};
        // One node holds every byte (the broadcast distribution on two nodes): among the two
        // leaders alone one block is best; with the ranks behind them, several.
        let c = costs(1.43e-5, 2.77e-8);
        let problem = Problem::Allgatherv {
            counts: vec![1_000_000, 0],
        };
        let writes = |blocking| {
            let alg = CirculantAllgatherv::new(&problem, blocking).unwrap();
            let plan = alg.rank_plan(0).unwrap();
            plan.rounds.flat_map(|r| r.sends).count()
        };
        assert_eq!(writes(Blocking::Model(c.across)), 1);
        let nodes = writes(Blocking::Nodes {
            costs: c,
            ranks_per_node: 4,
        });
        assert!((3..=8).contains(&nodes), "{nodes} writes");
    }
}
