//! Random p up to 1000, random roots and sizes (0, 1, odd, large): every applicable algorithm
//! passes the simulator; allgatherv over the distributions of seed 001 §3 and random counts
//! with zeros; reduce-scatters with counts with zeros.

use circulant_core::plan::distribution::Distribution;
use circulant_core::plan::merge::IovLimits;
use circulant_core::plan::registry;
use circulant_core::plan::{CostModel, Dtype, Problem, ReduceOp, Reduction};
use circulant_core::sim::{simulate, simulate_merged};
use proptest::prelude::*;

const MODEL: CostModel = CostModel {
    alpha: 2e-6,
    beta: 1e-10,
    o: 0.0,
};

fn run_all(problem: &Problem) -> Result<(), TestCaseError> {
    let algs =
        registry::applicable(problem, &MODEL).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert!(!algs.is_empty());
    // Merged writes under limits that vary with p (1 to 8 segments a side).
    let limits = IovLimits::new(1 + problem.p() % 8, 1 + problem.p() / 8 % 8).unwrap();
    for alg in algs {
        let r = simulate(alg.as_ref(), &MODEL);
        prop_assert!(
            r.is_ok(),
            "{} on p={}: {}",
            alg.name(),
            problem.p(),
            r.unwrap_err()
        );
        let m = simulate_merged(alg.as_ref(), &MODEL, limits);
        prop_assert!(
            m.is_ok(),
            "{} on p={} merged under {:?}: {}",
            alg.name(),
            problem.p(),
            limits,
            m.unwrap_err()
        );
    }
    Ok(())
}

/// Sizes: 0, 1, odd, and (for small p) large.
fn size(p: usize) -> impl Strategy<Value = usize> {
    let large = if p <= 16 { 40_000 } else { 64 };
    prop_oneof![
        Just(0usize),
        Just(1usize),
        (0usize..20).prop_map(|x| 2 * x + 1),
        Just(large)
    ]
}

fn ranks() -> impl Strategy<Value = usize> {
    prop_oneof![3 => 1usize..=64, 1 => 65usize..=1000]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn broadcasts(p in ranks(), root_seed in any::<usize>(), bytes in ranks().prop_flat_map(size)) {
        let root = root_seed % p;
        // Keep the whole simulation small for large p.
        let bytes = if p > 64 { bytes.min(300) } else { bytes };
        run_all(&Problem::Broadcast { p, root, bytes })?;
    }

    #[test]
    fn rooted_and_personalised(p in ranks(), root_seed in any::<usize>(), block in 0usize..4) {
        let root = root_seed % p;
        run_all(&Problem::Scatter { p, root, block })?;
        run_all(&Problem::Gather { p, root, block })?;
        // Per-rank counts with zeros.
        let counts: Vec<usize> = (0..p).map(|r| (r * 7 + block + root) % 5).collect();
        run_all(&Problem::Gatherv { root, counts: counts.clone() })?;
        run_all(&Problem::Scatterv { root, counts })?;
        if p <= 200 {
            run_all(&Problem::Alltoall { p, block })?;
        }
        run_all(&Problem::Barrier { p })?;
    }

    #[test]
    fn reductions(
        p in ranks(),
        root_seed in any::<usize>(),
        dtype in prop::sample::select(Dtype::ALL.to_vec()),
        op in prop::sample::select(ReduceOp::ALL.to_vec()),
        elements in prop_oneof![Just(0usize), Just(1usize), 2usize..9],
    ) {
        let Ok(reduction) = Reduction::new(dtype, op) else {
            prop_assume!(false);
            unreachable!()
        };
        let bytes = elements * dtype.size();
        run_all(&Problem::Reduce { p, root: root_seed % p, reduction, bytes })?;
        if p <= 300 {
            run_all(&Problem::Allreduce { p, reduction, bytes })?;
        }
        run_all(&Problem::Scan { p, reduction, bytes, exclusive: false })?;
        run_all(&Problem::Scan { p, reduction, bytes, exclusive: true })?;
        if p <= 300 {
            run_all(&Problem::ReduceScatterBlock { p, reduction, block: bytes })?;
            // Counts of up to `elements` elements, with zeros.
            let counts = (0..p)
                .map(|r| (r * 7 + root_seed) % (elements + 1) * dtype.size())
                .collect();
            run_all(&Problem::ReduceScatter { reduction, counts })?;
        }
    }

    #[test]
    fn allgathervs(
        p in ranks(),
        dist in prop::sample::select(Distribution::ALL.to_vec()),
        c in prop_oneof![Just(0usize), Just(1usize), 2usize..40],
    ) {
        let c = if p > 64 { c.min(6) } else { c };
        run_all(&Problem::Allgatherv { counts: dist.counts(p, c) })?;
    }

    #[test]
    fn random_counts_with_zeros(counts in prop::collection::vec(prop_oneof![2 => Just(0usize), 3 => 0usize..50], 1..80)) {
        run_all(&Problem::Allgatherv { counts: counts.clone() })?;
        run_all(&Problem::Allgather { p: counts.len(), block: counts[0] % 7 })?;
    }

    #[test]
    fn intergroups(
        a in prop::collection::vec(0usize..30, 1..40),
        b in prop::collection::vec(0usize..30, 1..40),
    ) {
        run_all(&Problem::Intergroup { a, b })?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Seed 000 Alg. 6: n − 1 + q rounds for any p, root and n.
    #[test]
    fn circulant_broadcast_rounds(p in ranks(), root_seed in any::<usize>(), n in 1usize..40) {
        use circulant_core::plan::circulant::{Blocking, CirculantBroadcast};
        let problem = Problem::Broadcast { p, root: root_seed % p, bytes: 2 * n + 1 };
        let alg = CirculantBroadcast::new(&problem, Blocking::Fixed(n)).unwrap();
        let r = simulate(&alg, &MODEL).unwrap();
        let q = circulant_core::plan::ceil_log2(p);
        let n = alg.blocks();
        prop_assert!((1..=40).contains(&n));
        prop_assert_eq!(r.rounds as usize, if p == 1 { 0 } else { n - 1 + q });
    }

    /// The n-block reduce (Träff 2024a) with a fixed n, any root, any p.
    #[test]
    fn circulant_reduce_any_n(p in ranks(), root_seed in any::<usize>(), n in 1usize..40) {
        use circulant_core::plan::circulant::Blocking;
        use circulant_core::plan::circulant_reduce::CirculantReduce;
        let reduction = Reduction::new(Dtype::I32, ReduceOp::Sum).unwrap();
        let problem = Problem::Reduce { p, root: root_seed % p, reduction, bytes: 4 * (n + 3) };
        let alg = CirculantReduce::new(&problem, Blocking::Fixed(n)).unwrap();
        let r = simulate(&alg, &MODEL);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
        let q = circulant_core::plan::ceil_log2(p);
        prop_assert_eq!(r.unwrap().rounds as usize, if p == 1 { 0 } else { alg.blocks() - 1 + q });
    }

    /// Seed 000 Alg. 9 with a fixed n, any counts with zeros.
    #[test]
    fn circulant_allgatherv_any_n(counts in prop::collection::vec(prop_oneof![Just(0usize), 0usize..30], 1..70), n in 1usize..12) {
        use circulant_core::plan::circulant::{Blocking, CirculantAllgatherv};
        let problem = Problem::Allgatherv { counts };
        let alg = CirculantAllgatherv::new(&problem, Blocking::Fixed(n)).unwrap();
        let r = simulate(&alg, &MODEL);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}
