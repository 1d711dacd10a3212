//! Multi-lane reduce and allreduce: the vector in one share per lane. Inside each node a
//! reduce-scatter leaves share j, reduced over the node's ranks, at the node's carrier of lane
//! j; lane j reduces (or allreduces) share j among its carriers, one per node; then the shares
//! are gathered at the root inside its node (reduce) or exchanged by the ranks of every node
//! (allreduce).
//!
//! The reduce-scatter inside a node is one reduce-scatter (the circulant one, or the ring where
//! the model inside prices it faster) whose part for a member is the shares it carries (a node
//! with fewer ranks than lanes gives a rank several shares). Each lane runs the reduce or
//! allreduce among the nodes that the model across nodes prices fastest. As in
//! [`crate::plan::hierarchical`], partial results are combined in the order the schedules meet
//! them, not in rank order: the operators are taken to be commutative (all of
//! [`crate::plan::ReduceOp`] are; floating-point sums and products are associative only up to
//! rounding, so their bits may differ from a reduction in rank order).

use super::{carrier, exchange_group, shared_link};
use crate::plan::compose::{Composite, Group, Phase, Place, Places};
use crate::plan::hierarchical::{check, wrong};
use crate::plan::registry;
use crate::plan::rootedv::{BinomialGatherv, LinearGatherv};
use crate::plan::{Algorithm, Buf, Layout, LevelCosts, PlanError, Problem, Reduction};

/// The vector of `bytes` in `lanes` shares of whole elements of `size` bytes, as (offset, len):
/// the first ones one element longer where the elements do not divide evenly (some are empty
/// when there are fewer elements than lanes).
pub(super) fn shares(bytes: usize, size: usize, lanes: usize) -> Vec<(usize, usize)> {
    let lanes = lanes.max(1);
    let elements = bytes / size.max(1);
    let (each, extra) = (elements / lanes, elements % lanes);
    let mut at = 0;
    (0..lanes)
        .map(|j| {
            let len = (each + usize::from(j < extra)) * size;
            let share = (at, len);
            at += len;
            share
        })
        .collect()
}

/// The lanes (non-empty shares) that member `i` of a node of `k` ranks carries.
fn carried(shares: &[(usize, usize)], i: usize, k: usize) -> Vec<usize> {
    (i..shares.len())
        .step_by(k.max(1))
        .filter(|&j| shares[j].1 > 0)
        .collect()
}

/// The reduce-scatter inside every node: its groups, where each carrier holds each reduced
/// share (`partial[v][j]` on node v's carrier of lane j), and the scratch bytes each rank
/// holds them in (from offset 0).
struct Scattered {
    groups: Vec<Group>,
    partial: Vec<Vec<Place>>,
    scratch: Vec<usize>,
}

/// The reduce-scatter inside every node of several ranks (the one the model inside prices
/// fastest) that leaves each member the shares of the lanes it carries, one after the other
/// in its scratch.
fn reduce_scatter(
    layout: &Layout,
    reduction: Reduction,
    shares: &[(usize, usize)],
    costs: &LevelCosts,
    name: &'static str,
) -> Result<Scattered, PlanError> {
    let mut groups = Vec::new();
    let mut partial = Vec::with_capacity(layout.nodes());
    let mut scratch = vec![0usize; layout.p()];
    for v in 0..layout.nodes() {
        let ranks = layout.ranks_on(v);
        let k = ranks.len();
        let mut here: Vec<Place> = shares
            .iter()
            .map(|&(off, len)| Place::at(Buf::Send, off, len))
            .collect();
        let mine: Vec<Vec<usize>> = (0..k).map(|i| carried(shares, i, k)).collect();
        let counts: Vec<usize> = mine
            .iter()
            .map(|m| m.iter().map(|&j| shares[j].1).sum())
            .collect();
        if k < 2 || counts.iter().all(|&c| c == 0) {
            // A node's one rank holds its shares in its input.
            partial.push(here);
            continue;
        }
        let mut places = Vec::with_capacity(k);
        let send = Place::runs(Buf::Send, mine.iter().flatten().map(|&j| shares[j]));
        for (i, &c) in ranks.iter().enumerate() {
            let base = scratch[c];
            for &j in &mine[i] {
                here[j] = Place::at(Buf::Scratch, scratch[c], shares[j].1);
                scratch[c] += shares[j].1;
            }
            places.push(Places {
                send: send.clone(),
                recv: Place::at(Buf::Scratch, base, counts[i]),
            });
        }
        let sub = Problem::ReduceScatter { reduction, counts };
        groups.push(Group {
            alg: registry::fastest(&sub, &costs.inside, name)?,
            members: ranks.to_vec(),
            places,
        });
        partial.push(here);
    }
    Ok(Scattered {
        groups,
        partial,
        scratch,
    })
}

/// Multi-lane allreduce: a reduce-scatter inside each node (share j to the node's carrier of
/// lane j), lane j the allreduce of share j among its carriers that the model across nodes
/// prices fastest (with β × lanes: the lanes share the node's link), then the ranks of each
/// node exchange their shares.
pub struct LaneAllreduce;

impl LaneAllreduce {
    /// The algorithm's name.
    pub const NAME: &'static str = "lane-allreduce";

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
        let (n, lanes) = (layout.nodes(), layout.max_per_node());
        let shares = shares(bytes, reduction.dtype.size(), lanes);
        let scattered = reduce_scatter(layout, reduction, &shares, costs, Self::NAME)?;
        let model = shared_link(&costs.across, lanes);

        let mut across = Vec::new();
        for (j, &(off, len)) in shares.iter().enumerate() {
            if len == 0 {
                continue;
            }
            let sub = Problem::Allreduce {
                p: n,
                reduction,
                bytes: len,
            };
            let places = (0..n)
                .map(|v| Places {
                    send: scattered.partial[v][j].clone(),
                    recv: Place::at(Buf::Recv, off, len),
                })
                .collect();
            across.push(Group {
                alg: registry::fastest(&sub, &model, Self::NAME)?,
                members: (0..n).map(|v| carrier(layout, v, j)).collect(),
                places,
            });
        }

        let mut inside = Vec::new();
        if bytes > 0 {
            for v in 0..n {
                let k = layout.ranks_on(v).len();
                if k < 2 {
                    continue;
                }
                let runs = |i: usize| -> Vec<(usize, usize)> {
                    carried(&shares, i, k)
                        .into_iter()
                        .map(|j| shares[j])
                        .collect()
                };
                inside.push(exchange_group(layout, v, runs, costs)?);
            }
        }
        let scratch = scattered.scratch;
        Composite::new(
            Self::NAME,
            problem.clone(),
            vec![
                Phase::inside(scattered.groups, costs.inside),
                Phase::across(across),
                Phase::inside(inside, costs.inside),
            ],
            |r| scratch[r],
        )
    }
}

/// Multi-lane reduce: a reduce-scatter inside each node, lane j the reduce of share j among
/// its carriers to the root node's carrier of lane j, then a gatherv of the shares to the root
/// inside its node.
pub struct LaneReduce;

impl LaneReduce {
    /// The algorithm's name.
    pub const NAME: &'static str = "lane-reduce";

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
        let (n, lanes) = (layout.nodes(), layout.max_per_node());
        let root_node = layout.node_of(root);
        let shares = shares(bytes, reduction.dtype.size(), lanes);
        let Scattered {
            groups: first,
            partial,
            mut scratch,
        } = reduce_scatter(layout, reduction, &shares, costs, Self::NAME)?;
        let model = shared_link(&costs.across, lanes);

        // Where the root node's carrier of lane j receives the reduced share: the root's
        // receive buffer, or another carrier's scratch until the gatherv.
        let slot: Vec<Option<usize>> = shares
            .iter()
            .enumerate()
            .map(|(j, &(_, len))| {
                let c = carrier(layout, root_node, j);
                (c != root && len > 0).then(|| {
                    let at = scratch[c];
                    scratch[c] += len;
                    at
                })
            })
            .collect();
        let result = |j: usize| -> Place {
            let (off, len) = shares[j];
            match slot[j] {
                Some(at) => Place::at(Buf::Scratch, at, len),
                None => Place::at(Buf::Recv, off, len),
            }
        };

        let mut across = Vec::new();
        for (j, &(_, len)) in shares.iter().enumerate() {
            if len == 0 {
                continue;
            }
            let sub = Problem::Reduce {
                p: n,
                root: root_node,
                reduction,
                bytes: len,
            };
            let places = (0..n)
                .map(|v| Places {
                    send: partial[v][j].clone(),
                    recv: if v == root_node {
                        result(j)
                    } else {
                        Place::none(Buf::Recv)
                    },
                })
                .collect();
            across.push(Group {
                alg: registry::fastest(&sub, &model, Self::NAME)?,
                members: (0..n).map(|v| carrier(layout, v, j)).collect(),
                places,
            });
        }

        let mut last = Vec::new();
        let members = layout.ranks_on(root_node).to_vec();
        let k = members.len();
        // The shares the root node's other carriers hold, member by member.
        let held: Vec<Vec<usize>> = (0..k)
            .map(|i| {
                if members[i] == root {
                    Vec::new()
                } else {
                    carried(&shares, i, k)
                }
            })
            .collect();
        if held.iter().any(|h| !h.is_empty()) {
            let at = members.iter().position(|&r| r == root).unwrap_or(0);
            let counts: Vec<usize> = held
                .iter()
                .map(|h| h.iter().map(|&j| shares[j].1).sum())
                .collect();
            let sub = Problem::Gatherv { root: at, counts };
            let binomial = BinomialGatherv::new(&sub)?;
            let linear = LinearGatherv::new(&sub)?;
            let alg: Box<dyn Algorithm> =
                if linear.predict(&costs.inside).time < binomial.predict(&costs.inside).time {
                    Box::new(linear)
                } else {
                    Box::new(binomial)
                };
            let into = Place::runs(Buf::Recv, held.iter().flatten().map(|&j| shares[j]));
            let places = (0..k)
                .map(|i| {
                    if i == at {
                        Places {
                            send: Place::none(Buf::Send),
                            recv: into.clone(),
                        }
                    } else {
                        Places {
                            send: Place::runs(
                                Buf::Scratch,
                                held[i]
                                    .iter()
                                    .filter_map(|&j| slot[j].map(|at| (at, shares[j].1))),
                            ),
                            recv: Place::none(Buf::Recv),
                        }
                    }
                })
                .collect();
            last.push(Group {
                alg,
                members,
                places,
            });
        }
        Composite::new(
            Self::NAME,
            problem.clone(),
            vec![
                Phase::inside(first, costs.inside),
                Phase::across(across),
                Phase::inside(last, costs.inside),
            ],
            |r| scratch[r],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_whole_elements_that_cover_the_vector_in_order() {
        for size in [4, 8] {
            for elements in [0, 1, 3, 7, 8, 9, 1000] {
                for lanes in 1..=9 {
                    let s = shares(elements * size, size, lanes);
                    assert_eq!(s.len(), lanes);
                    let mut at = 0;
                    for &(off, len) in &s {
                        assert_eq!(off, at);
                        assert_eq!(len % size, 0);
                        at += len;
                    }
                    assert_eq!(at, elements * size);
                    let most = s.iter().map(|x| x.1).max().unwrap_or(0);
                    let least = s.iter().map(|x| x.1).min().unwrap_or(0);
                    assert!(most - least <= size, "{s:?}");
                }
            }
        }
    }

    #[test]
    fn a_node_of_fewer_ranks_carries_every_lane_once() {
        let s = shares(8 * 10, 8, 4);
        let mut all: Vec<usize> = (0..3).flat_map(|i| carried(&s, i, 3)).collect();
        all.sort_unstable();
        assert_eq!(all, vec![0, 1, 2, 3]);
        // Empty shares are carried by nobody.
        let few = shares(8 * 2, 8, 4);
        assert_eq!(carried(&few, 0, 4), vec![0]);
        assert!(carried(&few, 3, 4).is_empty());
    }
}
