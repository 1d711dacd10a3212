//! The reductions on the circulant graph (Träff 2024a and 2024b) against the simulator with
//! real data: every rank's result compared with a sequential reduction of every rank's input
//! (`sim::data`), for every p ≤ 64 and sampled p up to 4096, every root, block counts around
//! the phase length q, and irregular counts (zeros, one large, random, the distributions of
//! seed 001). Also what each rank sends (every block of the reduce once, every foreign part of
//! the reduce-scatter once), the golden reduce-scatter tables of five and seventeen ranks, and
//! that every rank of an allreduce ends with the same bits.

use circulant_core::plan::circulant::Blocking;
use circulant_core::plan::circulant_reduce::{CirculantReduce, CirculantReduceBroadcast};
use circulant_core::plan::distribution::Distribution;
use circulant_core::plan::reduce_scatter::CirculantReduceScatter;
use circulant_core::plan::{ceil_log2, registry, Algorithm, Local};
use circulant_core::plan::{CostModel, Dtype, Problem, ReduceOp, Reduction};
use circulant_core::sim::{simulate, simulate_on, Report};

const MODEL: CostModel = CostModel {
    alpha: 2e-6,
    beta: 1e-10,
    o: 3e-7,
};

fn red(dtype: Dtype, op: ReduceOp) -> Reduction {
    Reduction::new(dtype, op).unwrap()
}

/// A fixed xorshift sequence, so that a failure is reproducible.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn run(alg: &dyn Algorithm, what: &str) -> Report {
    simulate(alg, &MODEL).unwrap_or_else(|e| panic!("{} {what}: {e}", alg.name()))
}

/// Block counts around the phase length: 1, 2, 3, q, q + 1, 2q + 3, 3q − 1.
fn block_counts(p: usize) -> Vec<usize> {
    let q = ceil_log2(p);
    let mut v = vec![1, 2, 3, q, q + 1, 2 * q + 3, (3 * q).saturating_sub(1)];
    v.retain(|&n| n > 0);
    v.sort_unstable();
    v.dedup();
    v
}

/// The sampled p above 64: around powers of two, and a few others. Their vectors are short
/// (the simulator keeps five bytes for every byte of every rank's buffers).
fn sampled() -> Vec<usize> {
    let mut v: Vec<usize> = (7..=12)
        .flat_map(|k| [(1usize << k) - 1, 1 << k, (1 << k) + 1])
        .filter(|&p| p <= 4096)
        .collect();
    v.extend([65, 100, 300, 1000, 3000]);
    v
}

/// The circulant reduce of `p` ranks to `root` with `blocking`: correct, every rank but the
/// root sends the whole vector once (each block once), the root nothing.
fn reduce(p: usize, root: usize, reduction: Reduction, bytes: usize, blocking: Blocking) {
    let problem = Problem::Reduce {
        p,
        root,
        reduction,
        bytes,
    };
    let alg = CirculantReduce::new(&problem, blocking).unwrap();
    let what = format!("p={p} root={root} {bytes} B in {} blocks", alg.blocks());
    let report = run(&alg, &what);
    for (r, &sent) in report.bytes_sent.iter().enumerate() {
        let want = if r == root || p == 1 { 0 } else { bytes as u64 };
        assert_eq!(sent, want, "{what}: rank {r} sends {sent} bytes");
    }
}

#[test]
fn circulant_reduce_every_p_up_to_64_and_every_root() {
    let reduction = red(Dtype::I64, ReduceOp::Sum);
    for p in 1..=64 {
        let bytes = 8 * (3 * ceil_log2(p) + 5);
        for root in 0..p {
            reduce(p, root, reduction, bytes, Blocking::Model(MODEL));
            reduce(p, root, reduction, bytes, Blocking::Fixed(ceil_log2(p) + 1));
        }
        for root in [0, p / 3, p - 1] {
            for n in block_counts(p) {
                reduce(p, root, reduction, bytes, Blocking::Fixed(n));
            }
            // Empty, and fewer elements than blocks asked for.
            reduce(p, root, reduction, 0, Blocking::Fixed(4));
            reduce(
                p,
                root,
                red(Dtype::F32, ReduceOp::Max),
                8,
                Blocking::Fixed(4),
            );
        }
    }
}

#[test]
fn circulant_reduce_sampled_p_up_to_4096() {
    let mut state = 0x51_7cc1_b727_220au64;
    for p in sampled() {
        let root = (xorshift(&mut state) % p as u64) as usize;
        for root in [0, root, p - 1] {
            reduce(
                p,
                root,
                red(Dtype::U32, ReduceOp::Bxor),
                4 * 100,
                Blocking::Model(MODEL),
            );
            reduce(
                p,
                root,
                red(Dtype::F64, ReduceOp::Sum),
                8 * 40,
                Blocking::Fixed(2 * ceil_log2(p) + 3),
            );
        }
    }
}

/// The allreduces of `p` ranks that apply, and the reduce + broadcast with each block count.
fn allreduces(p: usize, reduction: Reduction, bytes: usize, counts: &[usize]) {
    let problem = Problem::Allreduce {
        p,
        reduction,
        bytes,
    };
    for alg in registry::applicable(&problem, &MODEL).unwrap() {
        run(alg.as_ref(), &format!("p={p} {bytes} B"));
    }
    for &n in counts {
        let alg = CirculantReduceBroadcast::new(&problem, Blocking::Fixed(n)).unwrap();
        run(&alg, &format!("p={p} {bytes} B in {n} blocks"));
    }
}

#[test]
fn allreduces_every_p_up_to_64() {
    for p in 1..=64 {
        let counts = block_counts(p);
        let elements = 3 * ceil_log2(p) + 5;
        allreduces(p, red(Dtype::I32, ReduceOp::Sum), 4 * elements, &counts);
        // Fewer elements than ranks: empty parts and blocks.
        allreduces(p, red(Dtype::F64, ReduceOp::Min), 8 * 3, &counts);
        allreduces(p, red(Dtype::U64, ReduceOp::Bor), 0, &[1]);
        allreduces(p, red(Dtype::F32, ReduceOp::Prod), 4 * (2 * p + 1), &[]);
    }
}

#[test]
fn allreduces_sampled_p_up_to_4096() {
    for p in sampled() {
        // More elements than ranks, some parts one longer.
        let problem = Problem::Allreduce {
            p,
            reduction: red(Dtype::I32, ReduceOp::Sum),
            bytes: 4 * (p + 7),
        };
        let alg = registry::by_name("circulant-allreduce", &problem, &MODEL).unwrap();
        run(alg.as_ref(), &format!("p={p}"));
        // Blocks of a few elements: the reduce's scratch holds two blocks a round.
        let q = ceil_log2(p);
        let problem = Problem::Allreduce {
            p,
            reduction: red(Dtype::I32, ReduceOp::Sum),
            bytes: 4 * (3 * q + 4),
        };
        let alg = CirculantReduceBroadcast::new(&problem, Blocking::Fixed(q + 2)).unwrap();
        run(&alg, &format!("p={p}"));
    }
}

/// Counts in bytes of 4-byte elements: all zero, one large among zeros, one large among
/// small ones with zeros, random with zeros (up to `most` elements), and the distributions of
/// seed 001.
fn irregular(p: usize, most: u64, state: &mut u64) -> Vec<Vec<usize>> {
    let mut v = vec![vec![0; p]];
    let mut one = vec![0; p];
    one[p / 2] = 4 * 500;
    v.push(one);
    let mut skewed: Vec<usize> = (0..p).map(|r| 4 * (r % 3)).collect();
    skewed[p - 1] = 4 * 300;
    v.push(skewed);
    v.push(
        (0..p)
            .map(|_| {
                let x = xorshift(state) % (most + 1);
                if x < most / 3 {
                    0
                } else {
                    4 * x as usize
                }
            })
            .collect(),
    );
    for d in Distribution::ALL {
        v.push(d.counts(p, 5).into_iter().map(|c| 4 * c).collect());
    }
    v
}

/// Every reduce-scatter algorithm that applies: correct; the circulant one's rank r sends
/// every part but its own exactly once (m − c_r bytes).
fn reduce_scatters(problem: &Problem) {
    let p = problem.p();
    let algs = registry::applicable(problem, &MODEL).unwrap();
    assert!(algs.len() >= 2, "{problem:?}");
    for alg in algs {
        let report = run(alg.as_ref(), &format!("{problem:?}"));
        if alg.name() == CirculantReduceScatter::NAME {
            let m = problem.total_bytes();
            for r in 0..p {
                let own = match problem {
                    Problem::ReduceScatter { counts, .. } => counts[r],
                    _ => m / p,
                };
                assert_eq!(
                    report.bytes_sent[r],
                    (m - own) as u64,
                    "{problem:?} rank {r}"
                );
            }
        }
    }
}

#[test]
fn reduce_scatters_every_p_up_to_64() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for p in 1..=64 {
        for block in [0, 4, 12] {
            reduce_scatters(&Problem::ReduceScatterBlock {
                p,
                reduction: red(Dtype::I32, ReduceOp::Sum),
                block,
            });
        }
        reduce_scatters(&Problem::ReduceScatterBlock {
            p,
            reduction: red(Dtype::F64, ReduceOp::Max),
            block: 16,
        });
        for (i, counts) in irregular(p, 11, &mut state).into_iter().enumerate() {
            let reduction = match i % 3 {
                0 => red(Dtype::I32, ReduceOp::Sum),
                1 => red(Dtype::F32, ReduceOp::Sum),
                _ => red(Dtype::U32, ReduceOp::Bxor),
            };
            reduce_scatters(&Problem::ReduceScatter { reduction, counts });
        }
    }
}

#[test]
fn reduce_scatters_sampled_p_up_to_4096() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for p in sampled() {
        let mut problems = vec![Problem::ReduceScatterBlock {
            p,
            reduction: red(Dtype::I32, ReduceOp::Sum),
            block: 4,
        }];
        // One large among zeros, one large among small ones, random with zeros.
        for counts in irregular(p, 2, &mut state).into_iter().skip(1).take(3) {
            problems.push(Problem::ReduceScatter {
                reduction: red(Dtype::I32, ReduceOp::Max),
                counts,
            });
        }
        for problem in problems {
            // The ring's p − 1 rounds are checked up to 64 ranks.
            let alg = CirculantReduceScatter::new(&problem).unwrap();
            run(&alg, &format!("p={p}"));
        }
    }
}

/// (target, blocks sent, source, blocks received) of one rank in one round.
type Row = (usize, Vec<usize>, usize, Vec<usize>);

/// Rank r's rounds of the circulant reduce-scatter of p ranks whose part j has 4·2^j bytes, so
/// that the bytes of a message say which parts it carries.
fn rows(p: usize, r: usize) -> Vec<Row> {
    let counts: Vec<usize> = (0..p).map(|j| 4 << j).collect();
    let problem = Problem::ReduceScatter {
        reduction: red(Dtype::I32, ReduceOp::Sum),
        counts,
    };
    let alg = CirculantReduceScatter::new(&problem).unwrap();
    let parts = |bytes: usize| {
        (0..p)
            .filter(|&j| bytes & (4 << j) != 0)
            .collect::<Vec<_>>()
    };
    let plan = alg.rank_plan(r).unwrap();
    plan.rounds
        .map(|round| {
            assert_eq!((round.sends.len(), round.expects.len()), (1, 1));
            let combined: usize = round
                .local
                .iter()
                .map(|l| match l {
                    Local::Combine { len, .. } => *len,
                    Local::Copy { .. } => 0,
                })
                .sum();
            let sent = &round.sends[0];
            (
                sent.to,
                parts(sent.bytes()),
                round.expects[0].from,
                parts(combined),
            )
        })
        .collect()
}

#[test]
fn the_worked_example_of_five_ranks() {
    // Rank r: round k = 2, 1, 0 as (→t: parts, ←f: parts).
    let table: [[Row; 3]; 5] = [
        [
            (3, vec![3, 4], 2, vec![0, 1]),
            (2, vec![2], 3, vec![0]),
            (1, vec![1], 4, vec![0]),
        ],
        [
            (4, vec![0, 4], 3, vec![1, 2]),
            (3, vec![3], 4, vec![1]),
            (2, vec![2], 0, vec![1]),
        ],
        [
            (0, vec![0, 1], 4, vec![2, 3]),
            (4, vec![4], 0, vec![2]),
            (3, vec![3], 1, vec![2]),
        ],
        [
            (1, vec![1, 2], 0, vec![3, 4]),
            (0, vec![0], 1, vec![3]),
            (4, vec![4], 2, vec![3]),
        ],
        [
            (2, vec![2, 3], 1, vec![0, 4]),
            (1, vec![1], 2, vec![4]),
            (0, vec![0], 3, vec![4]),
        ],
    ];
    for (r, want) in table.iter().enumerate() {
        assert_eq!(rows(5, r), want.to_vec(), "rank {r}");
    }
}

#[test]
fn the_worked_example_of_seventeen_ranks() {
    let skips = [1, 2, 3, 5, 9, 17];
    let cyclic = |from: usize, to: usize| -> Vec<usize> {
        let mut v: Vec<usize> = (from..to).map(|j| j % 17).collect();
        v.sort_unstable();
        v
    };
    // Rows of the table, literally: rank 0, 9 and 16.
    assert_eq!(
        rows(17, 0),
        vec![
            (9, cyclic(9, 17), 8, cyclic(0, 8)),
            (5, cyclic(5, 9), 12, cyclic(0, 4)),
            (3, vec![3, 4], 14, vec![0, 1]),
            (2, vec![2], 15, vec![0]),
            (1, vec![1], 16, vec![0]),
        ]
    );
    assert_eq!(
        rows(17, 9),
        vec![
            (1, cyclic(1, 9), 0, cyclic(9, 17)),
            (14, cyclic(14, 18), 4, cyclic(9, 13)),
            (12, vec![12, 13], 6, vec![9, 10]),
            (11, vec![11], 7, vec![9]),
            (10, vec![10], 8, vec![9]),
        ]
    );
    assert_eq!(
        rows(17, 16),
        vec![
            (8, cyclic(8, 16), 7, cyclic(16, 24)),
            (4, cyclic(4, 8), 11, cyclic(16, 20)),
            (2, vec![2, 3], 13, vec![0, 16]),
            (1, vec![1], 14, vec![16]),
            (0, vec![0], 15, vec![16]),
        ]
    );
    // Every rank: round k sends parts r + skips[k] … r + skips[k+1] − 1 to r + skips[k] and
    // receives r … r + skips[k+1] − skips[k] − 1 from r − skips[k].
    for r in 0..17 {
        let want: Vec<Row> = (0..5)
            .rev()
            .map(|k| {
                let (s, next) = (skips[k], skips[k + 1]);
                (
                    (r + s) % 17,
                    cyclic(r + s, r + next),
                    (r + 17 - s) % 17,
                    cyclic(r, r + next - s),
                )
            })
            .collect();
        assert_eq!(rows(17, r), want, "rank {r}");
    }
}

/// Inputs whose sum depends on the order of the additions: magnitudes from 2^−30 to 2^30.
fn floats(p: usize, elements: usize, state: &mut u64) -> Vec<Vec<u8>> {
    (0..p)
        .map(|_| {
            (0..elements)
                .flat_map(|_| {
                    let x = xorshift(state);
                    let mantissa = (x >> 11) as f64 / (1u64 << 53) as f64;
                    let exponent = (x % 61) as i32 - 30;
                    let sign = if x & (1 << 10) == 0 { 1.0 } else { -1.0 };
                    (sign * mantissa * 2f64.powi(exponent)).to_le_bytes()
                })
                .collect()
        })
        .collect()
}

#[test]
fn every_rank_of_an_allreduce_ends_with_the_same_bits() {
    let mut state = 0x0123_4567_89ab_cdefu64;
    let mut differ = 0;
    for p in (2..=40).chain([100, 257]) {
        let elements = 2 * p + 3;
        let problem = Problem::Allreduce {
            p,
            reduction: red(Dtype::F64, ReduceOp::Sum),
            bytes: 8 * elements,
        };
        let inputs = floats(p, elements, &mut state);
        let sequential: Vec<f64> = (0..elements)
            .map(|i| {
                (0..p)
                    .map(|r| {
                        let mut b = [0u8; 8];
                        b.copy_from_slice(&inputs[r][8 * i..8 * i + 8]);
                        f64::from_le_bytes(b)
                    })
                    .sum()
            })
            .collect();
        for alg in [
            registry::by_name("circulant-allreduce", &problem, &MODEL).unwrap(),
            Box::new(CirculantReduceBroadcast::new(&problem, Blocking::Fixed(5)).unwrap()),
        ] {
            let (_, results) = simulate_on(alg.as_ref(), &MODEL, inputs.clone()).unwrap();
            for (r, result) in results.iter().enumerate() {
                assert_eq!(result, &results[0], "{} p={p}: rank {r}", alg.name());
            }
            // Close to the sum in rank order, but not always its bits: the order is the
            // plan's.
            for (i, want) in sequential.iter().enumerate() {
                let mut b = [0u8; 8];
                b.copy_from_slice(&results[0][8 * i..8 * i + 8]);
                let got = f64::from_le_bytes(b);
                assert!(
                    (got - want).abs() <= 1e-6 * (1.0 + want.abs()),
                    "{got} {want}"
                );
                differ += usize::from(got.to_bits() != want.to_bits());
            }
        }
    }
    assert!(
        differ > 0,
        "the inputs do not tell orders of combination apart"
    );
}
