//! Gatherv and scatterv: every algorithm against the simulator for every p in 1..=32, every
//! root, counts with zeros (random, all zero, one non-empty part) and the distributions of
//! seed 001; and the rejection of bad problems.

use circulant_core::plan::distribution::Distribution;
use circulant_core::plan::registry;
use circulant_core::plan::rootedv::{
    BinomialGatherv, BinomialScatterv, LinearGatherv, LinearScatterv,
};
use circulant_core::plan::{Algorithm, CostModel, PlanError, Problem};
use circulant_core::sim::simulate;

const MODEL: CostModel = CostModel {
    alpha: 2e-6,
    beta: 1e-10,
    o: 0.0,
};

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 as usize
    }
}

fn count_sets(p: usize, rng: &mut Rng) -> Vec<Vec<usize>> {
    let mut sets = vec![vec![0; p], {
        let mut one = vec![0; p];
        one[p / 2] = 5;
        one
    }];
    for _ in 0..3 {
        // About one part in three empty.
        sets.push(
            (0..p)
                .map(|_| match rng.next() % 3 {
                    0 => 0,
                    _ => rng.next() % 40,
                })
                .collect(),
        );
    }
    for d in [
        Distribution::Spike,
        Distribution::Decreasing,
        Distribution::Mod3,
    ] {
        sets.push(d.counts(p, 6));
    }
    sets
}

#[test]
fn every_gatherv_and_scatterv_algorithm_for_p_up_to_32() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut runs = 0;
    for p in 1..=32 {
        for root in 0..p {
            for counts in count_sets(p, &mut rng) {
                for problem in [
                    Problem::Gatherv {
                        root,
                        counts: counts.clone(),
                    },
                    Problem::Scatterv {
                        root,
                        counts: counts.clone(),
                    },
                ] {
                    let algs = registry::applicable(&problem, &MODEL).unwrap();
                    assert_eq!(algs.len(), 2, "{problem:?}");
                    for alg in algs {
                        let report = simulate(alg.as_ref(), &MODEL)
                            .unwrap_or_else(|e| panic!("{} on {problem:?}: {e}", alg.name()));
                        // The seed's cost model prices both trees at most as the linear form.
                        let predicted = alg.predict(&MODEL);
                        assert!(
                            report.round_time <= predicted.time * (1.0 + 1e-9) + 1e-15,
                            "{}: simulated {} above predicted {}",
                            alg.name(),
                            report.round_time,
                            predicted.time
                        );
                        runs += 1;
                    }
                }
            }
        }
    }
    assert!(runs > 10_000, "{runs}");
}

#[test]
fn binomial_trees_take_ceil_log_p_rounds() {
    for p in 2..=32usize {
        let counts = vec![3; p];
        let q = circulant_core::plan::ceil_log2(p) as u32;
        for root in [0, p - 1] {
            let g = BinomialGatherv::new(&Problem::Gatherv {
                root,
                counts: counts.clone(),
            })
            .unwrap();
            let s = BinomialScatterv::new(&Problem::Scatterv {
                root,
                counts: counts.clone(),
            })
            .unwrap();
            assert_eq!(simulate(&g, &MODEL).unwrap().rounds, q, "gatherv p={p}");
            assert_eq!(simulate(&s, &MODEL).unwrap().rounds, q, "scatterv p={p}");
            let lg = LinearGatherv::new(&Problem::Gatherv {
                root,
                counts: counts.clone(),
            })
            .unwrap();
            assert_eq!(simulate(&lg, &MODEL).unwrap().rounds as usize, p - 1);
        }
    }
}

#[test]
fn bad_rooted_problems_are_errors() {
    let out_of_range = Problem::Gatherv {
        root: 3,
        counts: vec![1, 2, 3],
    };
    assert_eq!(
        BinomialGatherv::new(&out_of_range).err(),
        Some(PlanError::RootOutOfRange { root: 3, p: 3 })
    );
    let none = Problem::Scatterv {
        root: 0,
        counts: vec![],
    };
    assert_eq!(LinearScatterv::new(&none).err(), Some(PlanError::NoRanks));
    let overflow = Problem::Scatterv {
        root: 0,
        counts: vec![usize::MAX, 1],
    };
    assert_eq!(
        BinomialScatterv::new(&overflow).err(),
        Some(PlanError::Overflow)
    );
    let wrong = Problem::Gather {
        p: 2,
        root: 0,
        block: 1,
    };
    assert!(matches!(
        LinearGatherv::new(&wrong).err(),
        Some(PlanError::WrongCollective { .. })
    ));
    // A plan for a rank that does not exist.
    let g = BinomialGatherv::new(&Problem::Gatherv {
        root: 0,
        counts: vec![1, 1],
    })
    .unwrap();
    assert!(matches!(
        g.rank_plan(2).err(),
        Some(PlanError::RankOutOfRange { rank: 2, p: 2 })
    ));
}
