//! Multi-lane broadcast: the message in shares, one lane per share, then each node's ranks
//! exchange their shares.

use super::{carrier, exchange_group, shared_link};
use crate::plan::circulant::{Blocking, CirculantBroadcast};
use crate::plan::compose::{Composite, Group, Phase, Place, Places};
use crate::plan::hierarchical::{broadcast_group, check, inner_blocks, node_members, wrong};
use crate::plan::rootedv::BinomialScatterv;
use crate::plan::{Blocks, Buf, Layout, LevelCosts, PlanError, Problem};

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

        // The lanes share each node's link; a lane's blocks go on inside its nodes as they
        // arrive.
        let link = LevelCosts {
            across: shared_link(&costs.across, lanes),
            inside: costs.inside,
        };
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
                Blocking::Nodes {
                    costs: link,
                    ranks_per_node: layout.max_per_node(),
                },
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
