//! Every algorithm priced on a layout of ranks on nodes (`sim::price::price_on`) takes at
//! least the two-level lower bound (`plan::bounds::two_level`), on layouts by blocks, round
//! robin and uneven, for models where crossing nodes is dearer and where it is not.

use circulant_core::plan::bounds::two_level;
use circulant_core::plan::distribution::Distribution;
use circulant_core::plan::{
    registry, CostModel, Dtype, Layout, LevelCosts, Problem, ReduceOp, Reduction,
};
use circulant_core::sim::price::price_on;

fn costs() -> Vec<LevelCosts> {
    let shm = CostModel {
        alpha: 0.5e-6,
        beta: 0.05e-9,
        o: 0.1e-6,
    };
    let ib = CostModel {
        alpha: 2e-6,
        beta: 0.08e-9,
        o: 0.3e-6,
    };
    let slow = CostModel {
        alpha: 20e-6,
        beta: 1e-9,
        o: 2e-6,
    };
    vec![
        LevelCosts {
            inside: shm,
            across: ib,
        },
        LevelCosts {
            inside: shm,
            across: slow,
        },
        LevelCosts::flat(ib),
        // Crossing cheaper than staying: the bound takes the cheaper level.
        LevelCosts {
            inside: slow,
            across: shm,
        },
    ]
}

fn layouts(p: usize) -> Vec<Layout> {
    let mut out = vec![Layout::one_node(p).expect("ranks")];
    for per in [2, 3, 4] {
        if p % per == 0 {
            out.push(Layout::blocks(p / per, per).expect("ranks"));
            out.push(Layout::round_robin(p / per, per).expect("ranks"));
        }
    }
    out.push(Layout::blocks(p, 1).expect("ranks"));
    // Uneven: half the ranks on node 0, the others one a node.
    let uneven: Vec<usize> = (0..p).map(|r| r.saturating_sub(p / 2)).collect();
    out.push(Layout::new(&uneven).expect("ranks"));
    out
}

fn problems(p: usize, bytes: usize) -> Vec<Problem> {
    let red = Reduction::new(Dtype::I32, ReduceOp::Sum).expect("defined");
    let vector = bytes - bytes % 4;
    vec![
        Problem::Broadcast {
            p,
            root: p - 1,
            bytes,
        },
        Problem::Allgather {
            p,
            block: bytes / p,
        },
        Problem::Allgatherv {
            counts: Distribution::Spike.counts(p, bytes / p),
        },
        Problem::Allgatherv {
            counts: Distribution::Broadcast.counts(p, bytes / p),
        },
        Problem::Allreduce {
            p,
            reduction: red,
            bytes: vector,
        },
        Problem::Reduce {
            p,
            root: 1,
            reduction: red,
            bytes: vector,
        },
        Problem::Barrier { p },
    ]
}

#[test]
fn no_algorithm_beats_the_two_level_bound() {
    let mut checked = 0;
    for p in [2usize, 4, 6, 8, 12] {
        for bytes in [96usize, 12_000, 1_200_000] {
            for problem in problems(p, bytes) {
                for costs in costs() {
                    for layout in layouts(p) {
                        let bound = two_level(&problem, &layout, &costs).expect("same ranks");
                        for alg in registry::applicable(&problem, &costs.inside).expect("valid") {
                            let t = price_on(alg.as_ref(), &layout, &costs)
                                .expect("priced")
                                .time;
                            assert!(
                                t >= bound * (1.0 - 1e-9),
                                "{} on {:?} of {problem:?} with {costs:?}: {t} < {bound}",
                                alg.name(),
                                layout.node_of_each()
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 1000, "{checked}");
}
