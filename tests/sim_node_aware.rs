//! Every node-aware algorithm (hierarchical and multi-lane) against the simulator on uniform, uneven and scattered layouts of
//! p ≤ 64 ranks, one write per piece and merged under iov limits; and the bytes that cross the
//! nodes' links: what the collective needs there, once.

use circulant::plan::distribution::Distribution;
use circulant::plan::merge::IovLimits;
use circulant::plan::registry;
use circulant::plan::{CostModel, Dtype, Layout, LevelCosts, Problem, ReduceOp, Reduction};
use circulant::sim::links::node_links;
use circulant::sim::{simulate, simulate_merged};

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
    ];
    for d in Distribution::ALL {
        v.push(Problem::Allgatherv {
            counts: d.counts(p, 6),
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

/// Sizes at which the levels' block counts differ (the phases of one composite then run the
/// same algorithm on the same problem with other block counts).
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
