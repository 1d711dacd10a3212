//! Multi-lane collectives: every rank of a node carries a share of the traffic between nodes.
//! Lane j joins the j-th rank of every node; the lanes run their circulant schedules among the
//! nodes side by side, then the ranks of each node exchange what their lanes brought. A node
//! with fewer ranks than lanes carries lane j with its rank j mod (its ranks), so any placement
//! works. The bytes that cross a node's link are those of the hierarchical algorithms
//! ([`super::hierarchical`]); what changes is that no one rank of a node handles them all.

use super::circulant::{Blocking, CirculantAllgatherv, CirculantBroadcast};
use super::compose::{Composite, Group, Phase, Place, Places};
use super::hierarchical::{broadcast_group, check, gathered, inner_blocks, node_members, wrong};
use super::rootedv::BinomialScatterv;
use super::{
    displacements, optimal_blocks, Blocks, Buf, CostModel, Layout, LevelCosts, PlanError, Problem,
};

/// The model one lane sees across nodes: the lanes of a node share its link, so each gets a
/// part of its bandwidth (block counts chosen with it are those of the whole message).
fn shared_link(across: &CostModel, lanes: usize) -> CostModel {
    CostModel {
        beta: across.beta * lanes as f64,
        ..*across
    }
}

/// The rank of node `v` that carries lane `j`.
fn carrier(layout: &Layout, v: usize, j: usize) -> usize {
    let ranks = layout.ranks_on(v);
    ranks[j % ranks.len()]
}

/// An allgatherv inside node `v` in which member i contributes `runs(i)` of the receive
/// buffer (already held there) and every member ends with all of them.
fn exchange_group(
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
            let recv: Vec<(usize, usize)> = (0..n).filter_map(|v| block(v, j)).map(slot).collect();
            let alg = CirculantAllgatherv::new(
                &Problem::Allgatherv {
                    counts: lane_counts,
                },
                Blocking::Model(shared_link(&costs.across, lanes)),
            )?;
            let places = (0..n)
                .map(|v| Places {
                    send: match block(v, j) {
                        Some(r) => Place::at(Buf::Send, 0, counts[r]),
                        None => Place::none(Buf::Send),
                    },
                    recv: Place::runs(Buf::Recv, recv.iter().copied()),
                })
                .collect();
            across.push(Group {
                alg: Box::new(alg),
                members,
                places,
            });
        }

        let mut inside = Vec::new();
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
            inside.push(exchange_group(layout, v, runs, costs)?);
        }
        Composite::new(
            name,
            problem.clone(),
            vec![Phase::across(across), Phase::inside(inside, costs.inside)],
            |_| 0,
        )
    }
}

/// Multi-lane broadcast: the message in as many shares as the largest other node has ranks;
/// the root hands each carrier of its node its lanes' shares (a scatterv); lane j is the
/// circulant broadcast of share j among the lane's carriers; then each node's ranks exchange
/// their shares (the root's node receives the message from the root).
pub struct LaneBroadcast;

impl LaneBroadcast {
    /// The algorithm's name.
    pub const NAME: &'static str = "lane-circulant-bcast";

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
        let n = layout.nodes();
        let root_node = layout.node_of(root);
        let lanes = (0..n)
            .filter(|&v| v != root_node)
            .map(|v| layout.ranks_on(v).len())
            .max()
            .unwrap_or(1)
            .max(1);
        let shares = Blocks::new(bytes, lanes);
        let carry = |v: usize, j: usize| carrier(layout, v, j);
        // On the root's node, a carrier other than the root gets its lanes' shares from the
        // root first, into its scratch (its receive buffer is written once, by the broadcast
        // inside the node at the end): where lane j's share lies in it.
        let root_ranks = layout.ranks_on(root_node);
        let mut in_scratch: Vec<Option<usize>> = vec![None; lanes];
        let mut scratch = vec![0usize; layout.p()];
        let mut scatter_counts = vec![0usize; root_ranks.len()];
        let mut scatter_runs: Vec<Vec<(usize, usize)>> = vec![Vec::new(); root_ranks.len()];
        for (j, place) in in_scratch.iter_mut().enumerate() {
            let c = carry(root_node, j);
            if c != root {
                let i = j % root_ranks.len();
                *place = Some(scratch[c]);
                scratch[c] += shares.range(j).1;
                scatter_counts[i] += shares.range(j).1;
                scatter_runs[i].push(shares.range(j));
            }
        }

        let mut first = Vec::new();
        if scatter_counts.iter().any(|&c| c > 0) {
            let at = root_ranks.iter().position(|&r| r == root).unwrap_or(0);
            let alg = BinomialScatterv::new(&Problem::Scatterv {
                root: at,
                counts: scatter_counts.clone(),
            })?;
            let places = root_ranks
                .iter()
                .enumerate()
                .map(|(i, &r)| Places {
                    send: if r == root {
                        Place::runs(Buf::Recv, scatter_runs.iter().flatten().copied())
                    } else {
                        Place::none(Buf::Send)
                    },
                    recv: if r == root {
                        Place::none(Buf::Recv)
                    } else {
                        Place::at(Buf::Scratch, 0, scatter_counts[i])
                    },
                })
                .collect();
            first.push(Group {
                alg: Box::new(alg),
                members: root_ranks.to_vec(),
                places,
            });
        }

        let mut across = Vec::with_capacity(lanes);
        for (j, &at_root) in in_scratch.iter().enumerate() {
            let (off, len) = shares.range(j);
            let members: Vec<usize> = (0..n).map(|v| carry(v, j)).collect();
            let alg = CirculantBroadcast::new(
                &Problem::Broadcast {
                    p: n,
                    root: root_node,
                    bytes: len,
                },
                Blocking::Fixed(optimal_blocks(n, len, &shared_link(&costs.across, lanes))),
            )?;
            let places = (0..n)
                .map(|v| Places {
                    send: Place::none(Buf::Send),
                    recv: match at_root {
                        Some(at) if v == root_node => Place::at(Buf::Scratch, at, len),
                        _ => Place::at(Buf::Recv, off, len),
                    },
                })
                .collect();
            across.push(Group {
                alg: Box::new(alg),
                members,
                places,
            });
        }

        let mut inside = Vec::new();
        for v in 0..n {
            let k = layout.ranks_on(v).len();
            if k < 2 {
                continue;
            }
            if v == root_node {
                let members = node_members(layout, v, root);
                let blocks = inner_blocks(k, bytes, &costs.inside);
                inside.push(broadcast_group(members, bytes, blocks)?);
                continue;
            }
            let runs = |i: usize| -> Vec<(usize, usize)> {
                (i..lanes).step_by(k).map(|j| shares.range(j)).collect()
            };
            inside.push(exchange_group(layout, v, runs, costs)?);
        }
        Composite::new(
            Self::NAME,
            problem.clone(),
            vec![
                Phase::inside(first, costs.inside),
                Phase::across(across),
                Phase::inside(inside, costs.inside),
            ],
            |r| scratch[r],
        )
    }
}
