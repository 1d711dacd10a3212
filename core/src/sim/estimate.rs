//! An algorithm's time on a layout whose plans are too many to walk ([`super::price::price_on`]
//! reads every rank's plan): the closed form with the model across nodes, raised to what the
//! plans of two nodes' ranks show.
//!
//! The closed form prices rounds by their slowest message and gives every rank a link of its
//! own; on a node of K ranks the K ranks share the node's link. A flat allgatherv of 1 MB on 64
//! nodes × 64 ranks sends about 42 MB out of every node, which the closed form prices as 1 MB.
//! So the estimate reads the plans of the first node's and the last node's ranks (the root of
//! the rooted collectives is on the first node when it is rank 0) and takes the longest of:
//!
//! - the closed form across nodes;
//! - the busiest of these nodes' links: α across for each round, plus β across for every byte
//!   the node's ranks send to other nodes (the link carries them one after another);
//! - the busiest of these ranks: the sum of its messages, each at its level's α-β-o (a rank
//!   sends one message at a time).
//!
//! Within a budget of rounds and pieces, split between the two nodes: where a node's plans
//! hold more, the ranks read stand for the rest of its ranks (the first rank, root or leader,
//! apart); where not even its first rank's plan fits, the closed form alone stands.

use crate::plan::{Algorithm, Layout, LevelCosts, PlanError};

/// An algorithm's estimated time on a layout (module documentation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// Time in seconds.
    pub time: f64,
    /// The closed form's rounds.
    pub rounds: u64,
    /// The most bytes the ranks of one probed node send to other nodes (from the ranks read),
    /// when their plans were read.
    pub busiest_link_bytes: Option<u64>,
}

/// `alg` on `layout` with the two levels' models of `costs`, estimated from the closed form
/// and the plans of the first and last nodes' ranks, reading about `budget` rounds and pieces
/// at most (module documentation). Errors when the layout has another number of ranks than the
/// problem, a plan cannot be built or names a rank out of range.
pub fn estimate_on(
    alg: &dyn Algorithm,
    layout: &Layout,
    costs: &LevelCosts,
    budget: u64,
) -> Result<Estimate, PlanError> {
    let p = alg.problem().p();
    if layout.p() != p {
        return Err(PlanError::CountsLength {
            expected: p,
            got: layout.p(),
        });
    }
    let closed = alg.predict(&costs.across);
    let closed_only = Estimate {
        time: closed.time,
        rounds: closed.rounds,
        busiest_link_bytes: None,
    };
    let nodes = layout.nodes();
    let probed: &[usize] = if nodes > 1 { &[0, nodes - 1] } else { &[0] };
    let share = budget / probed.len() as u64;
    let (mut busiest, mut slowest_rank) = (0u64, 0.0f64);
    for &node in probed {
        let ranks = layout.ranks_on(node);
        if ranks.is_empty() {
            continue;
        }
        // The first rank, then the others spread over the node (bit-reversed positions), so
        // that the ranks read before the budget ends sample the whole node.
        let bits = usize::BITS - ranks.len().leading_zeros();
        let mut order: Vec<usize> = (1..ranks.len()).collect();
        order.sort_by_key(|&i| i.reverse_bits() >> (usize::BITS - bits));
        // Bytes to other nodes of the node's first rank and of the further ranks read.
        let (mut first, mut rest, mut read) = (0u64, 0u64, 0usize);
        let mut work = 0u64;
        'ranks: for rank in std::iter::once(0).chain(order).map(|i| ranks[i]) {
            let (mut busy, mut out) = (0.0, 0u64);
            for round in alg.rank_plan(rank)?.rounds {
                for t in &round.sends {
                    if t.to >= p {
                        return Err(PlanError::RankOutOfRange { rank: t.to, p });
                    }
                    let (bytes, writes) = (t.bytes(), t.pieces.len());
                    busy += costs
                        .between(layout, rank, t.to)
                        .message_writes(bytes, writes);
                    if layout.node_of(t.to) != node {
                        out += bytes as u64;
                    }
                    work = work.saturating_add(writes as u64);
                }
                work = work.saturating_add(1);
                if work > share {
                    break 'ranks;
                }
            }
            slowest_rank = slowest_rank.max(busy);
            if read == 0 {
                first = out;
            } else {
                rest += out;
            }
            read += 1;
        }
        if read == 0 {
            return Ok(closed_only);
        }
        // The ranks not read send as the further ranks read did (the first rank of a node is
        // apart: the root or the leader).
        let others = if read > 1 {
            (rest as f64 / (read - 1) as f64 * (ranks.len() - 1) as f64) as u64
        } else {
            first.saturating_mul(ranks.len() as u64 - 1)
        };
        busiest = busiest.max(first.saturating_add(others));
    }
    let link = closed.rounds as f64 * costs.across.alpha + costs.across.beta * busiest as f64;
    Ok(Estimate {
        time: closed.time.max(link).max(slowest_rank),
        rounds: closed.rounds,
        busiest_link_bytes: Some(busiest),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::distribution::Distribution;
    use crate::plan::{registry, CostModel, Problem};
    use crate::sim::price::price_on;

    const COSTS: LevelCosts = LevelCosts {
        inside: CostModel {
            alpha: 3e-7,
            beta: 1e-10,
            o: 0.0,
        },
        across: CostModel {
            alpha: 1e-6,
            beta: 4e-11,
            o: 0.0,
        },
    };

    fn priced(name: &str, problem: &Problem, layout: &Layout) -> (f64, f64, Estimate) {
        let alg =
            registry::by_name_on(name, problem, layout, &COSTS).expect("the algorithm applies");
        let walked = price_on(alg.as_ref(), layout, &COSTS).expect("walked").time;
        let closed = alg.predict(&COSTS.across).time;
        let est = estimate_on(alg.as_ref(), layout, &COSTS, u64::MAX).expect("estimated");
        (walked, closed, est)
    }

    #[test]
    fn a_flat_allgatherv_is_priced_with_its_nodes_link_shared() {
        let layout = Layout::blocks(8, 16).expect("layout");
        let problem = Problem::Allgatherv {
            counts: Distribution::Regular.counts(128, 1_000_000),
        };
        let (walked, closed, est) = priced("circulant-allgatherv", &problem, &layout);
        // 16 ranks share a node's link: the closed form is far below the walk, the estimate
        // within a third of it.
        assert!(closed < walked / 4.0, "{closed} {walked}");
        assert!(
            est.time > walked / 1.5 && est.time < walked * 1.5,
            "{est:?} {walked}"
        );
        let link = est.busiest_link_bytes.expect("read");
        assert!(link > 10 * 1_000_000 / 2, "{link}");
        // Reading a few of a node's ranks and scaling them gives about the same.
        let alg = registry::by_name_on("circulant-allgatherv", &problem, &layout, &COSTS)
            .expect("the algorithm applies");
        let one_rank: u64 = alg
            .rank_plan(1)
            .expect("plan")
            .rounds
            .map(|r| 1 + r.sends.iter().map(|t| t.pieces.len() as u64).sum::<u64>())
            .sum();
        let few = estimate_on(alg.as_ref(), &layout, &COSTS, 2 * 4 * one_rank).expect("estimated");
        let sampled = few.busiest_link_bytes.expect("read");
        assert!(
            sampled.abs_diff(link) < link / 10,
            "{sampled} of a few ranks, {link} of all"
        );
    }

    #[test]
    fn node_aware_plans_are_not_priced_below_the_closed_form() {
        let layout = Layout::blocks(8, 16).expect("layout");
        let problem = Problem::Broadcast {
            p: 128,
            root: 0,
            bytes: 1_000_000,
        };
        for name in ["hier-circulant-bcast", "binomial-bcast", "circulant-bcast"] {
            let (walked, closed, est) = priced(name, &problem, &layout);
            assert!(est.time >= closed, "{name}: {est:?} {closed}");
            assert!(
                est.time > walked / 2.0 && est.time < walked * 2.0,
                "{name}: {est:?} {walked}"
            );
        }
    }

    #[test]
    fn over_budget_the_closed_form_stands() {
        let layout = Layout::blocks(4, 4).expect("layout");
        let problem = Problem::Allgatherv {
            counts: Distribution::Regular.counts(16, 16_000),
        };
        let alg = registry::by_name_on("ring-allgather", &problem, &layout, &COSTS)
            .expect("the algorithm applies");
        let est = estimate_on(alg.as_ref(), &layout, &COSTS, 4).expect("estimated");
        assert_eq!(est.busiest_link_bytes, None);
        assert_eq!(est.time, alg.predict(&COSTS.across).time);
        let wrong = Layout::blocks(2, 4).expect("layout");
        assert!(estimate_on(alg.as_ref(), &wrong, &COSTS, 3).is_err());
    }
}
