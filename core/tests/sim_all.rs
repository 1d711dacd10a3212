//! Every algorithm against the simulator for every p in 1..=64 with small sizes, one write per
//! piece and merged under iov limits.

use circulant_core::plan::distribution::Distribution;
use circulant_core::plan::merge::{tally, IovLimits};
use circulant_core::plan::registry;
use circulant_core::plan::{CostModel, Dtype, Problem, ReduceOp, Reduction};
use circulant_core::sim::{simulate, simulate_merged};

const MODEL: CostModel = CostModel {
    alpha: 2e-6,
    beta: 1e-10,
    o: 0.0,
};

/// Small model-independent problem set for p ranks.
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
            root: 0,
            bytes: 0,
        },
        Problem::Broadcast {
            p,
            root: p - 1,
            bytes: 1,
        },
        Problem::Allgather { p, block: 5 },
        Problem::Allgather { p, block: 0 },
        Problem::Scatter {
            p,
            root: p / 2,
            block: 3,
        },
        Problem::Gather {
            p,
            root: (p * 2) / 3,
            block: 3,
        },
        Problem::Alltoall { p, block: 2 },
        Problem::Reduce {
            p,
            root: p - 1,
            reduction: red(Dtype::I64, ReduceOp::Sum),
            bytes: 24,
        },
        Problem::Allreduce {
            p,
            reduction: red(Dtype::F64, ReduceOp::Prod),
            bytes: 8 * 7,
        },
        Problem::Allreduce {
            p,
            reduction: red(Dtype::U32, ReduceOp::Bxor),
            bytes: 4,
        },
        Problem::ReduceScatterBlock {
            p,
            reduction: red(Dtype::I32, ReduceOp::Max),
            block: 8,
        },
        Problem::ReduceScatter {
            reduction: red(Dtype::F32, ReduceOp::Sum),
            counts: (0..p).map(|r| 4 * (r % 3)).collect(),
        },
        Problem::Scan {
            p,
            reduction: red(Dtype::I32, ReduceOp::Sum),
            bytes: 12,
            exclusive: false,
        },
        Problem::Scan {
            p,
            reduction: red(Dtype::F32, ReduceOp::Max),
            bytes: 8,
            exclusive: true,
        },
    ];
    for d in Distribution::ALL {
        v.push(Problem::Allgatherv {
            counts: d.counts(p, 6),
        });
    }
    if p >= 2 {
        let pa = p.div_ceil(2);
        v.push(Problem::Intergroup {
            a: vec![4; pa],
            b: vec![6; p - pa],
        });
        v.push(Problem::Intergroup {
            a: (0..pa).map(|i| i % 4).collect(),
            b: (0..p - pa).map(|i| 3 * i + 1).collect(),
        });
    }
    v
}

#[test]
fn every_algorithm_for_p_up_to_64() {
    let mut runs = 0;
    for p in 1..=64 {
        for problem in problems(p) {
            for alg in registry::applicable(&problem, &MODEL).unwrap() {
                let report = simulate(alg.as_ref(), &MODEL)
                    .unwrap_or_else(|e| panic!("{} on {:?} (p={p}): {e}", alg.name(), problem));
                assert!(
                    report.dataflow_time <= report.round_time * (1.0 + 1e-9) + 1e-15,
                    "{}: dataflow {} > rounds {}",
                    alg.name(),
                    report.dataflow_time,
                    report.round_time
                );
                runs += 1;
            }
        }
    }
    assert!(runs > 1000);
}

#[test]
fn every_reduction_on_every_reducing_algorithm() {
    let mut runs = 0;
    for dtype in Dtype::ALL {
        for op in ReduceOp::ALL {
            let Ok(reduction) = Reduction::new(dtype, op) else {
                assert!(dtype.is_float() && op.is_bitwise());
                continue;
            };
            for p in [1, 2, 3, 5, 8, 13] {
                let bytes = 3 * dtype.size();
                for problem in [
                    Problem::Reduce {
                        p,
                        root: p / 2,
                        reduction,
                        bytes,
                    },
                    Problem::Allreduce {
                        p,
                        reduction,
                        bytes,
                    },
                    Problem::ReduceScatterBlock {
                        p,
                        reduction,
                        block: bytes,
                    },
                    Problem::ReduceScatter {
                        reduction,
                        counts: (0..p).map(|r| bytes * (r % 2)).collect(),
                    },
                    Problem::Scan {
                        p,
                        reduction,
                        bytes,
                        exclusive: false,
                    },
                    Problem::Scan {
                        p,
                        reduction,
                        bytes,
                        exclusive: true,
                    },
                ] {
                    for alg in registry::applicable(&problem, &MODEL).unwrap() {
                        simulate(alg.as_ref(), &MODEL)
                            .unwrap_or_else(|e| panic!("{} {dtype} {op} p={p}: {e}", alg.name()));
                        runs += 1;
                    }
                }
            }
        }
    }
    // 6 types × 4 ops + 4 integer types × 3 bitwise ops, 6 sizes; two reduces (binomial,
    // circulant), five allreduces, two reduce-scatters of each kind (circulant, ring),
    // inclusive and exclusive scan.
    assert_eq!(runs, (6 * 4 + 4 * 3) * 6 * 13);
}

#[test]
fn every_algorithm_with_merged_writes() {
    let mut runs = 0;
    for p in [1, 2, 3, 5, 7, 8, 12, 17, 31, 32, 36, 63, 64] {
        for problem in problems(p) {
            for alg in registry::applicable(&problem, &MODEL).unwrap() {
                let single = simulate(alg.as_ref(), &MODEL).unwrap();
                let mut previous = single.writes.clone();
                for l in [1, 2, 4, 8] {
                    let limits = IovLimits::new(l, l).unwrap();
                    let r = simulate_merged(alg.as_ref(), &MODEL, limits).unwrap_or_else(|e| {
                        panic!("{} on {:?} (p={p}, limits {l}): {e}", alg.name(), problem)
                    });
                    assert_eq!(r.pieces, single.writes, "{}", alg.name());
                    assert_eq!(r.bytes_received, single.bytes_received, "{}", alg.name());
                    // Counting without data agrees with executing.
                    let t = tally(alg.as_ref(), limits, &MODEL).unwrap();
                    assert_eq!(
                        t.writes_per_rank,
                        r.writes.iter().copied().max().unwrap_or(0)
                    );
                    assert_eq!(
                        t.pieces_per_rank,
                        r.pieces.iter().copied().max().unwrap_or(0)
                    );
                    assert!(
                        (t.round_time - r.round_time).abs() <= 1e-9 * r.round_time + 1e-15,
                        "{}: tally {} simulated {}",
                        alg.name(),
                        t.round_time,
                        r.round_time
                    );
                    // Larger limits never need more writes.
                    for (rank, (&w, &before)) in r.writes.iter().zip(&previous).enumerate() {
                        assert!(w <= before, "{} rank {rank}: {w} > {before}", alg.name());
                        assert!(w >= r.messages[rank], "{}", alg.name());
                    }
                    previous = r.writes;
                    runs += 1;
                }
            }
        }
    }
    assert!(runs > 1000, "{runs}");
}

#[test]
fn every_algorithm_with_a_byte_cap_on_writes() {
    let mut runs = 0;
    for p in [1, 2, 3, 7, 8, 17, 32] {
        for problem in problems(p) {
            for alg in registry::applicable(&problem, &MODEL).unwrap() {
                let single = simulate(alg.as_ref(), &MODEL).unwrap();
                let uncapped = IovLimits::new(4, 4).unwrap();
                let free = simulate_merged(alg.as_ref(), &MODEL, uncapped).unwrap();
                for cap in [1, 3, 7] {
                    let limits = uncapped.with_max_bytes(cap);
                    let r = simulate_merged(alg.as_ref(), &MODEL, limits).unwrap_or_else(|e| {
                        panic!("{} on {:?} (p={p}, cap {cap}): {e}", alg.name(), problem)
                    });
                    assert_eq!(r.pieces, single.writes, "{}", alg.name());
                    assert_eq!(r.bytes_received, single.bytes_received, "{}", alg.name());
                    for rank in 0..p {
                        // A cap never saves a write, and every write carries at most cap bytes.
                        assert!(r.writes[rank] >= free.writes[rank], "{}", alg.name());
                        assert!(
                            r.writes[rank] as usize * cap >= r.bytes_sent[rank] as usize,
                            "{} rank {rank}",
                            alg.name()
                        );
                    }
                    let t = tally(alg.as_ref(), limits, &MODEL).unwrap();
                    assert_eq!(
                        t.writes_per_rank,
                        r.writes.iter().copied().max().unwrap_or(0)
                    );
                    runs += 1;
                }
            }
        }
    }
    assert!(runs > 500, "{runs}");
}

#[test]
fn merging_adds_o_per_further_write_only() {
    // p = 64 allgather of 8 bytes: Bruck's wrapped rounds are two pieces, one write merged.
    let model = CostModel { o: 1e-6, ..MODEL };
    let problem = Problem::Allgather { p: 64, block: 8 };
    let alg = registry::by_name("bruck-allgather", &problem, &model).unwrap();
    let single = simulate(alg.as_ref(), &model).unwrap();
    let merged = simulate_merged(alg.as_ref(), &model, IovLimits::new(4, 4).unwrap()).unwrap();
    assert_eq!(merged.writes.iter().max(), Some(&6));
    assert!(single.writes.iter().max().unwrap() > &6);
    // Five wrapped rounds cost o more each without merging.
    let diff = single.round_time - merged.round_time;
    assert!((diff - 5.0 * model.o).abs() < 1e-12, "{diff}");
}
