//! The simulator's α-β price of every algorithm equals its closed form from the seeds on a grid
//! of p and m (sizes chosen so that blocks divide evenly), and the circulant algorithms take
//! exactly the rounds seed 000 promises.

use circulant_core::plan::circulant::{
    Blocking, CirculantAllgather, CirculantAllgatherv, CirculantBroadcast, CirculantCensus,
};
use circulant_core::plan::circulant_reduce::{CirculantReduce, CirculantReduceBroadcast};
use circulant_core::plan::distribution::Distribution;
use circulant_core::plan::intergroup::IntergroupAllgatherv;
use circulant_core::plan::registry;
use circulant_core::plan::ring::PipelinedRingAllgatherv;
use circulant_core::plan::roundrobin::RoundRobinBroadcast;
use circulant_core::plan::{ceil_log2, Algorithm, CostModel, Dtype, Problem, ReduceOp, Reduction};
use circulant_core::sim::simulate;

const MODELS: [CostModel; 2] = [
    CostModel {
        alpha: 2e-6,
        beta: 1e-10,
        o: 0.0,
    },
    CostModel {
        alpha: 1.0,
        beta: 0.25,
        o: 0.0,
    },
];

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()) + 1e-18
}

fn check_exact(alg: &dyn Algorithm, model: &CostModel) {
    let report = simulate(alg, model).unwrap_or_else(|e| panic!("{}: {e}", alg.name()));
    let want = alg.predict(model);
    assert!(
        close(report.round_time, want.time),
        "{} on {:?}: simulated {} vs formula {}",
        alg.name(),
        alg.problem(),
        report.round_time,
        want.time
    );
    assert_eq!(
        report.rounds as u64,
        want.rounds,
        "{} rounds on {:?}",
        alg.name(),
        alg.problem()
    );
}

#[test]
fn circulant_broadcast_takes_n_minus_1_plus_q_rounds() {
    let model = MODELS[0];
    for p in 2..=64 {
        let q = ceil_log2(p);
        for n in [1, 2, 3, q, q + 1, 2 * q + 3, 17] {
            let bytes = n * 3;
            let problem = Problem::Broadcast {
                p,
                root: (p * 7 + n) % p,
                bytes,
            };
            let alg = CirculantBroadcast::new(&problem, Blocking::Fixed(n)).unwrap();
            let report = simulate(&alg, &model).unwrap();
            assert_eq!(report.rounds as usize, n - 1 + q, "p={p} n={n}");
            check_exact(&alg, &model);
        }
    }
}

/// The n-block reduce takes the broadcast's n − 1 + q rounds, the reduce + broadcast twice
/// as many half-rounds, at the closed forms' prices where the blocks are equal.
#[test]
fn circulant_reduce_takes_n_minus_1_plus_q_rounds() {
    let model = MODELS[0];
    let reduction = Reduction::new(Dtype::I64, ReduceOp::Sum).unwrap();
    for p in 2..=64 {
        let q = ceil_log2(p);
        for n in [1, 2, 3, q, q + 1, 2 * q + 3, 17] {
            let bytes = 8 * 3 * n;
            let problem = Problem::Reduce {
                p,
                root: (p * 7 + n) % p,
                reduction,
                bytes,
            };
            let alg = CirculantReduce::new(&problem, Blocking::Fixed(n)).unwrap();
            let report = simulate(&alg, &model).unwrap();
            assert_eq!(report.rounds as usize, n - 1 + q, "p={p} n={n}");
            check_exact(&alg, &model);
            let problem = Problem::Allreduce {
                p,
                reduction,
                bytes,
            };
            let alg = CirculantReduceBroadcast::new(&problem, Blocking::Fixed(n)).unwrap();
            let report = simulate(&alg, &model).unwrap();
            assert_eq!(report.rounds as usize, 2 * (n - 1 + q), "p={p} n={n}");
            check_exact(&alg, &model);
        }
    }
}

#[test]
fn circulant_allgather_and_census_take_q_rounds() {
    for p in 2..=64 {
        let q = ceil_log2(p);
        let ag = CirculantAllgather::new(&Problem::Allgather { p, block: 3 }).unwrap();
        let census = CirculantCensus::new(&Problem::Allreduce {
            p,
            reduction: Reduction::new(Dtype::I32, ReduceOp::Sum).unwrap(),
            bytes: 8,
        })
        .unwrap();
        for model in &MODELS {
            assert_eq!(simulate(&ag, model).unwrap().rounds as usize, q);
            assert_eq!(simulate(&census, model).unwrap().rounds as usize, q);
            check_exact(&ag, model);
            check_exact(&census, model);
            // Seed 000: qα + β(p−1)m/p and q(α + βm).
            let t = ag.predict(model).time;
            assert!(close(
                t,
                q as f64 * model.alpha + model.beta * ((p - 1) * 3) as f64
            ));
            let t = census.predict(model).time;
            assert!(close(t, q as f64 * (model.alpha + 8.0 * model.beta)));
        }
    }
}

#[test]
fn circulant_allgatherv_rounds_and_bound() {
    let model = MODELS[0];
    for p in [2, 3, 5, 8, 13, 20, 33] {
        let q = ceil_log2(p);
        for d in Distribution::ALL {
            for n in [1, 2, q + 1] {
                let problem = Problem::Allgatherv {
                    counts: d.counts(p, 24),
                };
                let alg = CirculantAllgatherv::new(&problem, Blocking::Fixed(n)).unwrap();
                let report = simulate(&alg, &model).unwrap();
                let n = alg.blocks();
                assert!(report.rounds as usize <= n - 1 + q);
                if d == Distribution::Regular {
                    assert_eq!(report.rounds as usize, n - 1 + q);
                }
                assert!(report.round_time <= alg.predict(&model).time * (1.0 + 1e-9));
            }
        }
    }
}

/// Problems on which the closed forms are exact: blocks divide the data evenly.
fn exact_problems(p: usize, unit: usize) -> Vec<Problem> {
    let red = Reduction::new(Dtype::I32, ReduceOp::Sum).unwrap();
    let pow2 = p.next_power_of_two();
    vec![
        Problem::Broadcast {
            p,
            root: p / 2,
            bytes: unit * p * pow2,
        },
        Problem::Reduce {
            p,
            root: 1 % p,
            reduction: red,
            bytes: 4 * unit,
        },
        Problem::Allreduce {
            p,
            reduction: red,
            bytes: 4 * unit * p,
        },
        Problem::ReduceScatterBlock {
            p,
            reduction: red,
            block: 4 * unit,
        },
        Problem::Scan {
            p,
            reduction: red,
            bytes: 4 * unit,
            exclusive: p % 2 == 0,
        },
        Problem::Allgather { p, block: unit },
        Problem::Scatter {
            p,
            root: p - 1,
            block: unit,
        },
        Problem::Gather {
            p,
            root: p / 3,
            block: unit,
        },
        Problem::Alltoall { p, block: unit },
        Problem::Barrier { p },
    ]
}

#[test]
fn simulated_prices_equal_the_seed_formulas() {
    let mut checked = 0;
    for p in [1, 2, 3, 4, 5, 7, 8, 12, 16, 19, 32, 36] {
        for unit in [1, 4] {
            for problem in exact_problems(p, unit) {
                for model in &MODELS {
                    for alg in registry::applicable(&problem, model).unwrap() {
                        // Model-chosen block counts need not divide m (tested above and below); the
                        // circulant allgatherv has only an upper bound.
                        if [
                            CirculantBroadcast::NAME,
                            CirculantReduce::NAME,
                            CirculantReduceBroadcast::NAME,
                            RoundRobinBroadcast::NAME,
                            PipelinedRingAllgatherv::NAME,
                            CirculantAllgatherv::NAME,
                        ]
                        .contains(&alg.name())
                        {
                            continue;
                        }
                        check_exact(alg.as_ref(), model);
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 300, "{checked}");
}

#[test]
fn round_robin_broadcast_matches_table_1() {
    for p in 1usize..=20 {
        for s in [1usize, 2, 5] {
            let bytes = 3 * s * p.saturating_sub(1).max(1);
            let problem = Problem::Broadcast {
                p,
                root: p / 2,
                bytes,
            };
            for model in &MODELS {
                let alg = RoundRobinBroadcast::new(&problem, Some(s), model).unwrap();
                check_exact(&alg, model);
            }
        }
    }
}

#[test]
fn pipelined_ring_is_the_linear_ring_on_regular_problems_and_eq_1_otherwise() {
    for p in 2..=24 {
        let model = MODELS[0];
        let regular = Problem::Allgatherv {
            counts: vec![40; p],
        };
        let ring = PipelinedRingAllgatherv::new(&regular, None, &model).unwrap();
        assert_eq!(ring.block(), 40);
        check_exact(&ring, &model);
        for d in Distribution::ALL {
            let problem = Problem::Allgatherv {
                counts: d.counts(p, 64),
            };
            for block in [1, 7, 64] {
                let alg = PipelinedRingAllgatherv::new(&problem, Some(block), &model).unwrap();
                let report = simulate(&alg, &model).unwrap();
                // Eq. (1): at most b − min b_i rounds of at most α + βB each.
                assert!(report.rounds as usize <= alg.ring_rounds());
                let bound = alg.ring_rounds() as f64 * model.message(alg.block());
                assert!(report.round_time <= bound * (1.0 + 1e-9));
                assert!(report.dataflow_time <= report.round_time * (1.0 + 1e-9));
            }
        }
    }
}

#[test]
fn intergroup_meets_the_seed_bound() {
    let model = MODELS[1];
    for (pa, pb) in [(6, 2), (8, 3), (25, 7), (4, 4), (3, 5), (1, 1), (9, 1)] {
        for (ka, kb) in [(12, 12), (30, 7), (5, 40)] {
            let problem = Problem::Intergroup {
                a: vec![ka; pa],
                b: vec![kb; pb],
            };
            let alg = IntergroupAllgatherv::new(&problem).unwrap();
            check_exact(&alg, &model);
            let report = simulate(&alg, &model).unwrap();
            // The groups' allgathers run side by side: the seed adds their times as a whole,
            // which the dataflow price does and the lock-step one cannot.
            assert!(
                report.dataflow_time <= alg.seed_bound(&model) * (1.0 + 1e-9),
                "({pa},{pb},{ka},{kb}): {} > {}",
                report.dataflow_time,
                alg.seed_bound(&model)
            );
            // Alg. 1: |A|/|B| exchange rounds when |B| divides |A| and k_B is a multiple.
            if pa % pb == 0 && kb % (pa / pb) == 0 {
                assert_eq!(alg.exchange_rounds() as usize, pa / pb);
            }
            let root = registry::by_name("root-gathering", &problem, &model).unwrap();
            check_exact(root.as_ref(), &model);
        }
    }
}

/// Seed 000 Theorem 2: with the model's n the broadcast costs about
/// α(q−1) + 2√((q−1)αβm) + βm (exactly when n is the real optimum and divides m).
#[test]
fn circulant_broadcast_with_the_model_n_meets_theorem_2() {
    for model in &MODELS {
        for p in [3, 20, 36, 100, 1152] {
            for m in [1usize << 16, 1 << 20, 400_000] {
                let q = ceil_log2(p) as f64;
                let (a, b, mf) = (model.alpha, model.beta, m as f64);
                let theorem = a * (q - 1.0) + 2.0 * ((q - 1.0) * a * b * mf).sqrt() + b * mf;
                let problem = Problem::Broadcast {
                    p,
                    root: 1,
                    bytes: m,
                };
                let alg = CirculantBroadcast::new(&problem, Blocking::Model(*model)).unwrap();
                let predicted = alg.predict(model).time;
                // The real optimum is a lower bound; integer n and ⌈m/n⌉ cost little.
                assert!(predicted >= theorem * (1.0 - 1e-12), "p={p} m={m}");
                assert!(
                    predicted <= theorem * 1.01 + model.message(1),
                    "p={p} m={m}: {predicted} vs {theorem}"
                );
                if p <= 100 && m <= 1 << 16 {
                    let r = simulate(&alg, model).unwrap();
                    assert!(r.round_time <= predicted * (1.0 + 1e-9));
                    assert_eq!(r.rounds as usize, alg.blocks() - 1 + ceil_log2(p));
                }
            }
        }
    }
}

/// Seed 004 Table 2: with many segments the round-robin broadcast takes t·N/(N−1) for odd N
/// and t for even N (α = 0, t = βD).
#[test]
fn round_robin_tends_to_table_2() {
    let model = CostModel {
        alpha: 0.0,
        beta: 1.0,
        o: 0.0,
    };
    for (n, factor) in [(3usize, 1.5), (5, 1.25), (7, 7.0 / 6.0), (4, 1.0), (8, 1.0)] {
        let s = 400;
        let d = s * (n - 1) * 10;
        let problem = Problem::Broadcast {
            p: n,
            root: 0,
            bytes: d,
        };
        let alg = RoundRobinBroadcast::new(&problem, Some(s), &model).unwrap();
        let r = simulate(&alg, &model).unwrap();
        let ratio = r.round_time / d as f64;
        assert!(
            (ratio - factor).abs() < 0.02 * factor,
            "N={n}: {ratio} vs {factor}"
        );
        check_exact(&alg, &model);
    }
}
