//! Every node-aware algorithm (hierarchical and multi-lane) against the simulator on uniform, uneven and scattered layouts of
//! p ≤ 64 ranks, one write per piece and merged under iov limits; and the bytes that cross the
//! nodes' links: what the collective needs there, once.

use circulant_core::plan::barrier::DisseminationBarrier;
use circulant_core::plan::compose::{Composite, Group, Phase, Places};
use circulant_core::plan::distribution::Distribution;
use circulant_core::plan::merge::IovLimits;
use circulant_core::plan::multilane::LaneAllreduce;
use circulant_core::plan::registry;
use circulant_core::plan::{
    Algorithm, BufferSizes, CostModel, Dtype, Layout, LevelCosts, Problem, ReduceOp, Reduction,
};
use circulant_core::sim::links::node_links;
use circulant_core::sim::{simulate, simulate_merged};

const COSTS: LevelCosts = LevelCosts {
    inside: CostModel {
        alpha: 5e-7,
        beta: 5e-11,
        o: 0.0,
    },
    across: CostModel {
        alpha: 2e-6,
        beta: 3e-10,
        o: 0.0,
    },
};

/// Layouts of p ranks: blocks, round robin, uneven, scattered.
fn layouts(p: usize) -> Vec<Layout> {
    let mut v = Vec::new();
    for per in [2, 3, 4, 8] {
        if p % per == 0 && p > per {
            v.push(Layout::blocks(p / per, per).unwrap());
            v.push(Layout::round_robin(p / per, per).unwrap());
        }
    }
    // Uneven: node sizes 1, 2, 3, ... in turn.
    let mut uneven = Vec::new();
    let (mut node, mut left) = (0, 1);
    for _ in 0..p {
        uneven.push(node);
        left -= 1;
        if left == 0 {
            node += 1;
            left = node % 3 + 1;
        }
    }
    v.push(Layout::new(&uneven).unwrap());
    // Scattered: a fixed pseudo-random node for each rank among ⌈p/3⌉ nodes.
    let nodes = p.div_ceil(3).max(2);
    let scattered: Vec<usize> = (0..p).map(|r| (r * 7 + r * r * 3 + 1) % nodes).collect();
    v.push(Layout::new(&scattered).unwrap());
    v.retain(Layout::is_hierarchical);
    v
}

fn problems(p: usize) -> Vec<Problem> {
    let red = |d, o| Reduction::new(d, o).unwrap();
    let mut v = vec![
        Problem::Barrier { p },
        Problem::Broadcast {
            p,
            root: p / 3,
            bytes: 37,
        },
        Problem::Broadcast {
            p,
            root: p - 1,
            bytes: 1000,
        },
        Problem::Broadcast {
            p,
            root: 0,
            bytes: 0,
        },
        Problem::Allgather { p, block: 5 },
        Problem::Allgather { p, block: 0 },
        Problem::Reduce {
            p,
            root: p - 1,
            reduction: red(Dtype::I64, ReduceOp::Sum),
            bytes: 24,
        },
        Problem::Reduce {
            p,
            root: p / 2,
            reduction: red(Dtype::F64, ReduceOp::Max),
            bytes: 8,
        },
        Problem::Allreduce {
            p,
            reduction: red(Dtype::F64, ReduceOp::Prod),
            bytes: 8 * 7,
        },
        Problem::Allreduce {
            p,
            reduction: red(Dtype::U32, ReduceOp::Bxor),
            bytes: 4 * 300,
        },
        // Fewer elements than some nodes have ranks: lanes without a share.
        Problem::Allreduce {
            p,
            reduction: red(Dtype::I32, ReduceOp::Sum),
            bytes: 4 * 3,
        },
        Problem::Allreduce {
            p,
            reduction: red(Dtype::I64, ReduceOp::Min),
            bytes: 0,
        },
        Problem::Reduce {
            p,
            root: 1,
            reduction: red(Dtype::I32, ReduceOp::Prod),
            bytes: 4 * 101,
        },
    ];
    for d in Distribution::ALL {
        v.push(Problem::Allgatherv {
            counts: d.counts(p, 6),
        });
    }
    v.push(Problem::ReduceScatterBlock {
        p,
        reduction: red(Dtype::I32, ReduceOp::Sum),
        block: 12,
    });
    v.push(Problem::ReduceScatterBlock {
        p,
        reduction: red(Dtype::F64, ReduceOp::Max),
        block: 0,
    });
    // Irregular: zeros, one large part, and the distributions of seed 001.
    let mut one = vec![0; p];
    one[p / 2] = 4 * 77;
    v.push(Problem::ReduceScatter {
        reduction: red(Dtype::U32, ReduceOp::Bxor),
        counts: one,
    });
    for d in Distribution::ALL {
        v.push(Problem::ReduceScatter {
            reduction: red(Dtype::I32, ReduceOp::Sum),
            counts: d.counts(p, 3).into_iter().map(|c| 4 * c).collect(),
        });
    }
    v
}

#[test]
fn every_node_aware_algorithm_on_every_layout() {
    let mut runs = 0;
    let mut names = std::collections::BTreeSet::new();
    for p in 3..=64 {
        for layout in layouts(p) {
            for problem in problems(p) {
                for (name, make) in registry::NODE_AWARE {
                    let alg = match make(&problem, &layout, &COSTS) {
                        Ok(a) => a,
                        Err(_) => continue,
                    };
                    let model = COSTS.across;
                    simulate(alg.as_ref(), &model).unwrap_or_else(|e| {
                        panic!(
                            "{name} on {problem:?} layout {:?}: {e}",
                            layout.node_of_each()
                        )
                    });
                    if p % 7 == 0 || p < 9 {
                        for l in [1, 4] {
                            let limits = IovLimits::new(l, l).unwrap();
                            simulate_merged(alg.as_ref(), &model, limits).unwrap_or_else(|e| {
                                panic!(
                                    "{name} merged {l} on {problem:?} layout {:?}: {e}",
                                    layout.node_of_each()
                                )
                            });
                        }
                    }
                    names.insert(*name);
                    runs += 1;
                }
            }
        }
    }
    assert_eq!(names.len(), registry::NODE_AWARE.len(), "{names:?}");
    assert!(runs > 2000, "{runs}");
}

#[test]
fn node_aware_algorithms_apply_only_on_several_nodes_of_several_ranks() {
    let problem = Problem::Broadcast {
        p: 8,
        root: 0,
        bytes: 100,
    };
    for layout in [Layout::one_node(8).unwrap(), Layout::blocks(8, 1).unwrap()] {
        for (name, make) in registry::NODE_AWARE {
            assert!(make(&problem, &layout, &COSTS).is_err(), "{name}");
        }
    }
    let wrong = Layout::blocks(2, 3).unwrap();
    assert!(registry::by_name_on("hier-circulant-bcast", &problem, &wrong, &COSTS).is_err());
}

/// A broadcast brings m into every node but the root's once; an allgatherv brings into each
/// node the blocks of the other nodes once; nothing else crosses a link.
#[test]
fn bytes_across_node_links_are_what_the_collective_needs() {
    for p in [6, 8, 12, 16, 30] {
        for layout in layouts(p) {
            let n = layout.nodes();
            let m = 1000;
            for root in [0, p - 1] {
                let problem = Problem::Broadcast { p, root, bytes: m };
                let alg = registry::by_name_on("hier-circulant-bcast", &problem, &layout, &COSTS)
                    .unwrap();
                let links = node_links(alg.as_ref(), layout.node_of_each()).unwrap();
                let root_node = layout.node_of(root);
                for v in 0..n {
                    let want = if v == root_node { 0 } else { m as u64 };
                    assert_eq!(
                        links.into[v],
                        want,
                        "p={p} node {v} {:?}",
                        layout.node_of_each()
                    );
                }
            }
            let counts = Distribution::ALL[0].counts(p, 60);
            let total: usize = counts.iter().sum();
            let problem = Problem::Allgatherv {
                counts: counts.clone(),
            };
            let alg = registry::by_name_on("hier-circulant-allgatherv", &problem, &layout, &COSTS)
                .unwrap();
            let links = node_links(alg.as_ref(), layout.node_of_each()).unwrap();
            for v in 0..n {
                let own: usize = layout.ranks_on(v).iter().map(|&r| counts[r]).sum();
                assert_eq!(links.into[v], (total - own) as u64, "p={p} node {v}");
            }
        }
    }
}

/// An allgatherv whose bytes all come from one rank is that rank's broadcast: every
/// broadcast, flat and node-aware, runs as it (under the broadcast's name) and is correct in
/// the simulator, merged or not; the node-aware ones bring the block into every other node
/// once; an allgatherv with two sources has none of them.
#[test]
fn an_allgatherv_from_one_rank_runs_every_broadcast() {
    let broadcasts = [
        "circulant-bcast",
        "binomial-bcast",
        "scatter-allgather-bcast",
        "round-robin-bcast",
        "hier-circulant-bcast",
        "lane-circulant-bcast",
    ];
    for p in [3, 6, 8, 13, 24] {
        for layout in layouts(p) {
            for (source, m) in [(0, 37), (p / 2, 1000), (p - 1, 4096)] {
                let mut counts = vec![0; p];
                counts[source] = m;
                let problem = Problem::Allgatherv { counts };
                let algs = registry::applicable_on(&problem, &layout, &COSTS).unwrap();
                let names: Vec<&str> = algs.iter().map(|a| a.name()).collect();
                for want in broadcasts {
                    assert!(names.contains(&want), "{want} missing: {names:?}");
                }
                for alg in &algs {
                    let at = || {
                        format!(
                            "{} from {source} on {:?}",
                            alg.name(),
                            layout.node_of_each()
                        )
                    };
                    simulate(alg.as_ref(), &COSTS.across)
                        .unwrap_or_else(|e| panic!("{}: {e}", at()));
                    let limits = IovLimits::new(2, 2).unwrap();
                    simulate_merged(alg.as_ref(), &COSTS.across, limits)
                        .unwrap_or_else(|e| panic!("{} merged: {e}", at()));
                }
                for name in ["hier-circulant-bcast", "lane-circulant-bcast"] {
                    let alg = registry::by_name_on(name, &problem, &layout, &COSTS).unwrap();
                    assert_eq!(alg.problem(), &problem);
                    let links = node_links(alg.as_ref(), layout.node_of_each()).unwrap();
                    for v in 0..layout.nodes() {
                        let want = if v == layout.node_of(source) {
                            0
                        } else {
                            m as u64
                        };
                        assert_eq!(links.into[v], want, "{name} p={p} node {v}");
                    }
                }
            }
            let mut two = vec![0; p];
            two[0] = 5;
            two[p - 1] = 5;
            let problem = Problem::Allgatherv { counts: two };
            for alg in registry::applicable_on(&problem, &layout, &COSTS).unwrap() {
                assert!(!broadcasts.contains(&alg.name()), "{}", alg.name());
            }
        }
    }
}

/// Sizes at which the levels' block counts differ (the phases of one composite then run the
/// same algorithm on the same problem with other block counts), and long vectors whose
/// lanes choose other allreduces than short ones.
#[test]
fn large_messages_with_block_counts_that_differ_per_level() {
    let costs = LevelCosts {
        inside: CostModel {
            alpha: 8.8e-5,
            beta: 5.7e-10,
            o: 6e-6,
        },
        across: CostModel {
            alpha: 2.1e-5,
            beta: 2.77e-8,
            o: 8e-6,
        },
    };
    for layout in [
        Layout::blocks(2, 2).unwrap(),
        Layout::blocks(2, 4).unwrap(),
        Layout::blocks(4, 2).unwrap(),
        Layout::new(&[0, 0, 0, 1, 1, 2]).unwrap(),
    ] {
        let p = layout.p();
        for problem in [
            Problem::Broadcast {
                p,
                root: 0,
                bytes: 1_000_000,
            },
            Problem::Allgatherv {
                counts: vec![100_000; p],
            },
            Problem::Allreduce {
                p,
                reduction: Reduction::new(Dtype::F32, ReduceOp::Sum).unwrap(),
                bytes: 4 * 250_001,
            },
            Problem::Reduce {
                p,
                root: p - 1,
                reduction: Reduction::new(Dtype::I64, ReduceOp::Max).unwrap(),
                bytes: 8 * 125_001,
            },
            Problem::Barrier { p },
        ] {
            for (name, make) in registry::NODE_AWARE {
                let Ok(alg) = make(&problem, &layout, &costs) else {
                    continue;
                };
                simulate(alg.as_ref(), &costs.across)
                    .unwrap_or_else(|e| panic!("{name} on {:?}: {e}", layout.node_of_each()));
            }
        }
    }
}

/// The links of a node-aware algorithm by name.
fn links_of(
    name: &str,
    problem: &Problem,
    layout: &Layout,
    costs: &LevelCosts,
) -> (Vec<u64>, Vec<u64>) {
    let alg = registry::by_name_on(name, problem, layout, costs)
        .unwrap_or_else(|e| panic!("{name} on {:?}: {e}", layout.node_of_each()));
    let links = node_links(alg.as_ref(), layout.node_of_each()).unwrap();
    (links.out, links.into)
}

/// Multi-lane reduce: each node but the root's sends the vector out once (m bytes, the shares
/// of its lanes), as the hierarchical reduce does; what each node takes in depends on the
/// lanes' trees (one per block of the circulant reduce), but in all it is what left the
/// nodes: nothing else crosses a link.
#[test]
fn lane_reduce_moves_across_links_what_the_hierarchical_reduce_moves() {
    let red = Reduction::new(Dtype::I64, ReduceOp::Sum).unwrap();
    for p in [6, 8, 12, 16, 30, 64] {
        for layout in layouts(p) {
            for root in [0, p / 2, p - 1] {
                // 1000 elements: shares of 125 to 1000 elements, some one element longer.
                let m = 8 * 1000;
                let problem = Problem::Reduce {
                    p,
                    root,
                    reduction: red,
                    bytes: m,
                };
                let (out, into) = links_of("lane-reduce", &problem, &layout, &COSTS);
                let root_node = layout.node_of(root);
                for (v, &bytes) in out.iter().enumerate() {
                    let want = if v == root_node { 0 } else { m as u64 };
                    assert_eq!(bytes, want, "p={p} node {v} {:?}", layout.node_of_each());
                }
                let hier = links_of("hier-reduce", &problem, &layout, &COSTS);
                assert_eq!(out, hier.0, "p={p} {:?}", layout.node_of_each());
                let total = |v: &[u64]| v.iter().sum::<u64>();
                assert_eq!(total(&into), total(&out), "p={p}");
                assert_eq!(total(&hier.1), total(&hier.0), "p={p}");
            }
        }
    }
}

/// A reduce-scatter sends out of every node the parts of the other nodes' ranks, m − M_v, once
/// (hierarchical: from its leader; multi-lane: split among its ranks); every byte that enters
/// a node left another.
#[test]
fn reduce_scatters_send_out_of_each_node_what_its_ranks_do_not_keep() {
    let red = Reduction::new(Dtype::I32, ReduceOp::Sum).unwrap();
    for p in [6, 8, 12, 16, 30, 64] {
        for layout in layouts(p) {
            let mut skewed: Vec<usize> = (0..p).map(|r| 4 * (r % 4)).collect();
            skewed[p - 1] = 4 * 250;
            for counts in [vec![4 * 25; p], skewed] {
                let m: usize = counts.iter().sum();
                let problem = Problem::ReduceScatter {
                    reduction: red,
                    counts: counts.clone(),
                };
                for name in ["hier-reduce-scatter", "lane-reduce-scatter"] {
                    let (out, into) = links_of(name, &problem, &layout, &COSTS);
                    for (v, &bytes) in out.iter().enumerate() {
                        let own: usize = layout.ranks_on(v).iter().map(|&r| counts[r]).sum();
                        assert_eq!(bytes, (m - own) as u64, "{name} p={p} node {v}");
                    }
                    assert_eq!(into.iter().sum::<u64>(), out.iter().sum::<u64>(), "{name}");
                }
            }
        }
    }
}

/// Multi-lane allreduce: only the lanes cross links, each lane's allreduce moving its share
/// among one carrier per node. With the shares' allreduces linear in their bytes, each node's
/// link carries what one allreduce of the whole vector among one rank per node carries (the
/// hierarchical allreduce): with the circulant census, ⌈log₂ n⌉·m each way; with
/// reduce-scatter + allgather on the circulant graph or the ring, 2(n − 1)·m/n (shares that n
/// divides).
#[test]
fn lane_allreduce_moves_across_links_what_one_allreduce_among_the_nodes_moves() {
    let red = Reduction::new(Dtype::F64, ReduceOp::Sum).unwrap();
    // Latency-bound (small vectors) and bandwidth-bound (a slow link and long vectors).
    let slow = LevelCosts {
        inside: COSTS.inside,
        across: CostModel {
            alpha: 2e-6,
            beta: 1e-8,
            o: 0.0,
        },
    };
    let mut seen = std::collections::BTreeSet::new();
    for p in [6, 8, 12, 16, 24, 30, 64] {
        for layout in layouts(p) {
            let (n, lanes) = (layout.nodes(), layout.max_per_node());
            for (costs, elements) in [(COSTS, 3 * lanes), (slow, 200 * n * lanes)] {
                let m = 8 * elements;
                let problem = Problem::Allreduce {
                    p,
                    reduction: red,
                    bytes: m,
                };
                let plan = LaneAllreduce::plan(&problem, &layout, &costs).unwrap();
                let lane = plan.phases()[1].groups[0].alg.name();
                for g in &plan.phases()[1].groups {
                    assert_eq!(g.alg.name(), lane, "one algorithm for equal shares");
                    assert_eq!(g.members.len(), n);
                }
                let links = node_links(&plan as &dyn Algorithm, layout.node_of_each()).unwrap();
                let q = usize::BITS - (n - 1).leading_zeros();
                let want = match lane {
                    "circulant-census" => Some(q as u64 * m as u64),
                    "reduce-scatter-allgather" | "circulant-allreduce" => {
                        Some((2 * (n - 1) * m / n) as u64)
                    }
                    _ => None,
                };
                for v in 0..n {
                    if let Some(want) = want {
                        assert_eq!(links.out[v], want, "{lane} p={p} node {v}");
                        assert_eq!(links.into[v], want, "{lane} p={p} node {v}");
                    }
                }
                let hier = links_of("hier-allreduce", &problem, &layout, &costs);
                if want.is_some() {
                    assert_eq!((links.out, links.into), hier, "{lane} p={p}");
                }
                seen.insert(lane);
            }
        }
    }
    assert!(seen.contains("circulant-census"), "{seen:?}");
    assert!(seen.contains("circulant-allreduce"), "{seen:?}");
}

/// The multi-lane barrier has one node phase fewer than the hierarchical one: ⌈log₂ k⌉ rounds
/// inside the largest node (k ranks) and ⌈log₂ n⌉ across, against 2⌈log₂ k⌉ + ⌈log₂ n⌉. Its
/// node phase is needed: lanes alone leave a rank unaware of the ranks of other lanes.
#[test]
fn lane_barrier_saves_a_node_phase_and_needs_its_first_one() {
    let log = |x: usize| (usize::BITS - (x - 1).leading_zeros()) as usize;
    let rounds = |alg: &dyn Algorithm| -> usize {
        (0..alg.problem().p())
            .map(|r| alg.rank_plan(r).unwrap().rounds.count())
            .max()
            .unwrap_or(0)
    };
    for p in [6, 8, 12, 16, 30, 64] {
        for layout in layouts(p) {
            let problem = Problem::Barrier { p };
            let (n, k) = (layout.nodes(), layout.max_per_node());
            let lane = registry::by_name_on("lane-barrier", &problem, &layout, &COSTS).unwrap();
            let hier = registry::by_name_on("hier-barrier", &problem, &layout, &COSTS).unwrap();
            assert_eq!(
                rounds(lane.as_ref()),
                log(k) + log(n),
                "{:?}",
                layout.node_of_each()
            );
            assert_eq!(rounds(hier.as_ref()), 2 * log(k) + log(n));

            let uniform = (0..n).all(|v| layout.ranks_on(v).len() == k);
            if !uniform {
                // A rank of a smaller node carries several lanes and may pass word between them.
                continue;
            }
            let lanes_only = (0..k)
                .map(|j| {
                    let members: Vec<usize> = (0..n)
                        .map(|v| layout.ranks_on(v)[j % layout.ranks_on(v).len()])
                        .collect();
                    Group {
                        alg: Box::new(
                            DisseminationBarrier::new(&Problem::Barrier { p: n }).unwrap(),
                        ),
                        places: vec![Places::same(BufferSizes::default()); n],
                        members,
                    }
                })
                .collect();
            let wrong = Composite::new(
                "lanes-only",
                problem,
                vec![Phase::across(lanes_only)],
                |_| 0,
            )
            .unwrap();
            assert!(
                simulate(&wrong, &COSTS.across).is_err(),
                "{:?}",
                layout.node_of_each()
            );
        }
    }
}

/// Where the model across nodes makes the link the bottleneck, the multi-lane reduce and
/// allreduce are priced faster than the hierarchical ones and every flat one, so the
/// automatic choice takes them.
#[test]
fn lanes_are_priced_fastest_for_mid_sized_reductions() {
    use circulant_core::sim::price::price_on;
    let red = Reduction::new(Dtype::F32, ReduceOp::Sum).unwrap();
    let layout = Layout::blocks(4, 8).unwrap();
    let costs = LevelCosts {
        inside: CostModel {
            alpha: 5e-7,
            beta: 5e-11,
            o: 1e-7,
        },
        across: CostModel {
            alpha: 2e-6,
            beta: 8e-11,
            o: 3e-7,
        },
    };
    for problem in [
        Problem::Allreduce {
            p: 32,
            reduction: red,
            bytes: 1 << 16,
        },
        Problem::Reduce {
            p: 32,
            root: 5,
            reduction: red,
            bytes: 1 << 16,
        },
    ] {
        let mut priced: Vec<(f64, &str)> = registry::applicable_on(&problem, &layout, &costs)
            .unwrap()
            .iter()
            .map(|a| {
                (
                    price_on(a.as_ref(), &layout, &costs).unwrap().time,
                    a.name(),
                )
            })
            .collect();
        priced.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(priced[0].1.starts_with("lane-"), "{priced:?}");
    }
}
