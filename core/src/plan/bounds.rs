//! Lower bounds in the α-β model for 1-ported ranks (latency: information needs q = ⌈log₂ p⌉
//! rounds to reach or leave p ranks; bandwidth: the bytes a rank must receive or send). The
//! forms are those of Chan, Heimlich, Purkayastha, van de Geijn (2007), ignoring computation,
//! except for the broadcast, whose bound is the pipelined one of seed 000 Theorem 2, and the
//! reduce, which has the broadcast's bound:
//!
//! An n-block broadcast needs at least n − 1 + q rounds of at least α + βm/n each. Minimised
//! over real n ≥ 1, T(n) = (n − 1 + q)(α + βm/n) has its optimum at n* = √((q−1)βm/α), where
//! T = α(q−1) + 2√((q−1)αβm) + βm; when n* < 1 the best is n = 1, T = q(α + βm). It lies
//! between αq + βm (the latency and bandwidth terms, which no algorithm beats either) and the
//! time of every broadcast in the registry (tests/plan_bounds.rs checks both). p = 2 gives
//! α + βm; m = 0 gives 0, since nothing needs to be sent.
//!
//! A reduce run backwards is a broadcast: reverse every message's direction and the time
//! axis, and the root's result for every element, which depends on every rank's input, becomes
//! every rank's copy of the root's element, with the same messages, sizes and one-ported
//! ranks (sends become receives). So no reduce beats the broadcast's bound (computation
//! ignored), and Chan et al.'s αq + β(p−1)m/p for it is not reached by any algorithm.
//!
//! A reduce-scatter of m bytes a rank, part r (c_r bytes) to rank r: every element of part r
//! depends on every rank's input, so rank r receives at least c_r bytes and sends at least
//! m − c_r (each element of another rank's part leaves it once): αq + β·max_r max(c_r, m − c_r),
//! which is Chan et al.'s αq + β(p−1)m/p for equal parts.

use super::{ceil_log2, CostModel, Layout, LevelCosts, Problem};

/// The α-β lower bound of `problem` in seconds (0 for p = 1).
pub fn lower_bound(problem: &Problem, model: &CostModel) -> f64 {
    let p = problem.p();
    if p <= 1 {
        return 0.0;
    }
    let lat = ceil_log2(p) as f64 * model.alpha;
    let frac = (p - 1) as f64 / p as f64;
    let b = model.beta;
    match problem {
        Problem::Broadcast { bytes, .. } => broadcast(p, *bytes, model),
        Problem::Reduce { bytes, .. } => broadcast(p, *bytes, model),
        // Nothing to reduce needs no communication (the algorithms send nothing).
        Problem::ReduceScatterBlock { .. } | Problem::ReduceScatter { .. }
            if problem.total_bytes() == 0 =>
        {
            0.0
        }
        Problem::ReduceScatterBlock { .. } | Problem::ReduceScatter { .. } => {
            lat + b * reduce_scatter_volume(problem)
        }
        Problem::Allreduce { bytes, .. } => lat + 2.0 * b * frac * *bytes as f64,
        Problem::Scan { bytes, .. } => lat + b * *bytes as f64,
        Problem::Allgather { block, .. } => lat + b * ((p - 1) * block) as f64,
        Problem::Allgatherv { counts } => {
            // Every rank must receive all it does not contribute.
            let total: f64 = counts.iter().map(|&c| c as f64).sum();
            let min = counts.iter().copied().min().unwrap_or(0) as f64;
            lat + b * (total - min)
        }
        Problem::Scatter { block, .. } | Problem::Gather { block, .. } => {
            lat + b * ((p - 1) * block) as f64
        }
        Problem::Scatterv { root, counts } | Problem::Gatherv { root, counts } => {
            // The root sends or receives everything but its own part.
            let total: f64 = counts.iter().map(|&c| c as f64).sum();
            lat + b * (total - counts[*root] as f64)
        }
        Problem::Alltoall { block, .. } => lat + b * ((p - 1) * block) as f64,
        Problem::Barrier { .. } => lat,
        Problem::Intergroup { a, b: bg } => {
            let ka: f64 = a.iter().map(|&c| c as f64).sum();
            let kb: f64 = bg.iter().map(|&c| c as f64).sum();
            model.alpha + b * ka.max(kb)
        }
    }
}

/// The most bytes a rank of a reduce-scatter must send or receive: max over r of
/// max(c_r, m − c_r).
fn reduce_scatter_volume(problem: &Problem) -> f64 {
    let m = problem.total_bytes() as f64;
    let widest = |c: f64| c.max(m - c);
    match problem {
        Problem::ReduceScatterBlock { block, .. } => widest(*block as f64),
        Problem::ReduceScatter { counts, .. } => {
            counts.iter().map(|&c| widest(c as f64)).fold(0.0, f64::max)
        }
        _ => 0.0,
    }
}

/// The broadcast bound of seed 000 Theorem 2 for `bytes` on `p` ranks (see the module text).
pub fn broadcast(p: usize, bytes: usize, model: &CostModel) -> f64 {
    // An empty message needs no communication at all (the algorithms send nothing).
    if p <= 1 || bytes == 0 {
        return 0.0;
    }
    let (a, b, m) = (model.alpha, model.beta, bytes as f64);
    let q1 = (ceil_log2(p) - 1) as f64;
    let n_best = if a > 0.0 {
        (q1 * b * m / a).sqrt()
    } else {
        f64::INFINITY
    };
    if n_best >= 1.0 {
        a * q1 + 2.0 * (q1 * a * b * m).sqrt() + b * m
    } else {
        (q1 + 1.0) * (a + b * m)
    }
}

/// The lower bound of `problem` on `layout` in the two-level model of `costs` (what
/// `sim::price::price_on` prices: messages inside a node cost `costs.inside`, between nodes
/// `costs.across`, and a node link carries the bytes that cross it one after another, each
/// message's bytes after its latency). 0 for p = 1; `None` for a layout of another number of
/// ranks.
///
/// Every message costs at least `cheap`, the smaller α and β of the two levels (o ignored),
/// so the flat bound [`lower_bound`] with `cheap` holds on every layout and for every
/// collective. With N > 1 nodes and K ranks on the fullest node it is raised, for the
/// broadcast, allgather(v), allreduce, reduce and barrier, by what must cross node links:
///
/// - latency, L(n) = α_across·⌈log_{K+1} n⌉: only messages between nodes carry anything from
///   one node to another, each lasts at least α_across before its bytes cross, and each rank
///   sends (receives) one at a time; so in s·α_across the K ranks of a node reached bring in
///   at most K more nodes per α_across, and at most (K+1)^s nodes are reached (or heard
///   from). n nodes need L(n).
/// - broadcast of m > 0 bytes: L(N) + β_across·m. Some node's link starts to carry the
///   message no earlier than L(N), and it must carry all m bytes from then on.
/// - allgather(v): max(L(n), α_across + β_across·B), with n the nodes whose ranks contribute
///   bytes and B the bytes of the other nodes' ranks that the node holding the least must
///   receive through its link. (Not their sum: the link can carry near nodes' bytes while far
///   nodes' bytes are still on the way.) 0 when nothing is gathered.
/// - allreduce of m > 0 bytes: max(L(N), α_across + β_across·2(N − 1)/N·m): some node must
///   send 2(N − 1)/N·m (Patarasuk and Yuan 2009; the form of the flat allreduce bound, with
///   nodes as the parties).
/// - reduce of m > 0 bytes: max(L(N), α_across + β_across·m): the result of every element
///   depends on other nodes' elements, so at least one element's bytes about it enter the
///   root's node.
/// - reduce-scatter: max(L(N), α_across + β_across·max_v max(M_v, m − M_v)), with M_v the bytes
///   of the parts of node v's ranks: every element of them depends on other nodes' inputs and
///   must enter node v, and every element of other nodes' parts depends on node v's inputs and
///   must leave it. 0 when the vector is empty.
/// - barrier: L(N).
///
/// Other collectives keep the flat bound with `cheap`.
pub fn two_level(problem: &Problem, layout: &Layout, costs: &LevelCosts) -> Option<f64> {
    let p = problem.p();
    if layout.p() != p {
        return None;
    }
    let cheap = CostModel {
        alpha: costs.inside.alpha.min(costs.across.alpha),
        beta: costs.inside.beta.min(costs.across.beta),
        o: 0.0,
    };
    let flat = lower_bound(problem, &cheap);
    let nodes = layout.nodes();
    if nodes <= 1 {
        return Some(flat);
    }
    let (a, b) = (costs.across.alpha, costs.across.beta);
    let lat = |n: usize| a * hops(n, layout.max_per_node()) as f64;
    // Bytes contributed by the ranks of each node (gathers).
    let gathered = |count: &dyn Fn(usize) -> usize| {
        let held: Vec<f64> = (0..nodes)
            .map(|n| layout.ranks_on(n).iter().map(|&r| count(r) as f64).sum())
            .collect();
        let total: f64 = held.iter().sum();
        let least = held.iter().copied().fold(f64::INFINITY, f64::min);
        let with_data = held.iter().filter(|&&h| h > 0.0).count();
        if total > 0.0 {
            lat(with_data).max(a + b * (total - least))
        } else {
            0.0
        }
    };
    let across = match problem {
        Problem::Broadcast { bytes, .. } if *bytes > 0 => lat(nodes) + b * *bytes as f64,
        Problem::Allgather { block, .. } => gathered(&|_| *block),
        Problem::Allgatherv { counts } => gathered(&|r| counts[r]),
        Problem::Allreduce { bytes, .. } if *bytes > 0 => {
            let share = 2.0 * (nodes - 1) as f64 / nodes as f64;
            lat(nodes).max(a + b * share * *bytes as f64)
        }
        Problem::Reduce { bytes, .. } if *bytes > 0 => lat(nodes).max(a + b * *bytes as f64),
        Problem::ReduceScatterBlock { .. } | Problem::ReduceScatter { .. } => {
            let m = problem.total_bytes();
            let part = |r: usize| match problem {
                Problem::ReduceScatter { counts, .. } => counts[r],
                _ => m / p,
            };
            let widest = (0..nodes)
                .map(|v| {
                    let own: usize = layout.ranks_on(v).iter().map(|&r| part(r)).sum();
                    own.max(m - own)
                })
                .max()
                .unwrap_or(0);
            if m > 0 {
                lat(nodes).max(a + b * widest as f64)
            } else {
                0.0
            }
        }
        Problem::Barrier { .. } => lat(nodes),
        _ => 0.0,
    };
    Some(flat.max(across))
}

/// ⌈log_{k+1} n⌉: the fewest steps in which n nodes are reached from one when each node
/// reached brings in at most k more per step.
fn hops(n: usize, k: usize) -> usize {
    let (mut reached, mut steps) = (1usize, 0);
    while reached < n {
        reached = reached.saturating_mul(k.max(1) + 1);
        steps += 1;
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Dtype, ReduceOp, Reduction};

    const COSTS: LevelCosts = LevelCosts {
        inside: CostModel {
            alpha: 1.0,
            beta: 0.001,
            o: 0.0,
        },
        across: CostModel {
            alpha: 10.0,
            beta: 0.01,
            o: 0.0,
        },
    };

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs()
    }

    #[test]
    fn two_nodes_of_two_ranks() {
        // N = 2, K = 2: one step across, L = α_across = 10.
        let red = Reduction::new(Dtype::I32, ReduceOp::Sum).expect("defined");
        for layout in [
            Layout::blocks(2, 2).expect("ranks"),
            Layout::round_robin(2, 2).expect("ranks"),
        ] {
            let bound = |problem: Problem| two_level(&problem, &layout, &COSTS).expect("4 ranks");
            // 10 + 0.01·1000 (the flat bound with the cheap model is 1 + 2·1 + 1 = 4).
            let bcast = Problem::Broadcast {
                p: 4,
                root: 0,
                bytes: 1000,
            };
            assert!(close(bound(bcast), 20.0));
            // Each node receives the other node's 2000 bytes: 10 + 0.01·2000.
            assert!(close(bound(Problem::Allgather { p: 4, block: 1000 }), 30.0));
            // Node 1 holds 100 + 300, node 0 (by blocks) 0 + 200: node 0 receives 400.
            let counts = vec![0, 200, 100, 300];
            let v = two_level(&Problem::Allgatherv { counts }, &layout, &COSTS).expect("4 ranks");
            let least = if layout.node_of(1) == 0 { 200.0 } else { 100.0 };
            assert!(close(v, 10.0 + 0.01 * (600.0 - least)), "{v}");
            // 2(N − 1)/N = 1: 10 + 0.01·4000; a reduce brings 4000 bytes into the root's node.
            let allreduce = Problem::Allreduce {
                p: 4,
                reduction: red,
                bytes: 4000,
            };
            assert!(close(bound(allreduce), 50.0));
            let reduce = Problem::Reduce {
                p: 4,
                root: 3,
                reduction: red,
                bytes: 4000,
            };
            assert!(close(bound(reduce), 50.0));
            assert!(close(bound(Problem::Barrier { p: 4 }), 10.0));
        }
    }

    #[test]
    fn latency_across_grows_with_the_nodes_a_node_can_reach() {
        let barrier = Problem::Barrier { p: 8 };
        // One rank per node: 8 nodes need 3 steps; 4 nodes of 2 ranks: 9 > 4 after 2 steps
        // (1, 3, 9), 2 nodes of 4: 1.
        let steps = |layout: Layout| two_level(&barrier, &layout, &COSTS).expect("8 ranks") / 10.0;
        assert!(close(steps(Layout::blocks(8, 1).expect("ranks")), 3.0));
        assert!(close(steps(Layout::blocks(4, 2).expect("ranks")), 2.0));
        assert!(close(steps(Layout::blocks(2, 4).expect("ranks")), 1.0));
        // One node: the flat bound with the cheaper model, ⌈log₂ 8⌉·1.
        assert!(close(steps(Layout::one_node(8).expect("ranks")), 0.3));
        assert_eq!(
            two_level(&barrier, &Layout::one_node(4).expect("ranks"), &COSTS),
            None
        );
    }
}
