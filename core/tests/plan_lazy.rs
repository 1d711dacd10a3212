//! Plans are produced lazily: one rank's plan at p = 10^6 costs only that rank's rounds.

use circulant_core::plan::allgather::RingAllgather;
use circulant_core::plan::circulant::{Blocking, CirculantBroadcast};
use circulant_core::plan::tree::BinomialBroadcast;
use circulant_core::plan::{ceil_log2, Algorithm, Problem};

#[test]
fn one_rank_of_a_million() {
    let p = 1_000_000;
    let problem = Problem::Broadcast {
        p,
        root: 999_999,
        bytes: 1 << 20,
    };
    let alg = CirculantBroadcast::new(&problem, Blocking::Fixed(100)).unwrap();
    for rank in [0, 1, 12_345, 999_998, 999_999] {
        let plan = alg.rank_plan(rank).unwrap();
        let rounds: Vec<_> = plan.rounds.collect();
        // Every round sends or receives something (the root only sends).
        assert!(rounds.len() <= 100 - 1 + ceil_log2(p));
        assert!(rounds
            .iter()
            .all(|r| r.sends.len() <= 1 && r.expects.len() <= 1));
        if rank != 999_999 {
            let got: usize = rounds.iter().map(|r| r.expects.len()).sum();
            assert!(got >= 100, "rank {rank} receives {got} blocks");
        }
    }
    let tree = BinomialBroadcast::new(&problem).unwrap();
    assert_eq!(tree.rank_plan(999_999).unwrap().rounds.count(), 20);
    assert_eq!(tree.rank_plan(0).unwrap().rounds.count(), 1);
}

#[test]
fn ring_rounds_are_produced_one_at_a_time() {
    let p = 100_000;
    let alg = RingAllgather::new(&Problem::Allgather { p, block: 8 }).unwrap();
    let mut rounds = alg.rank_plan(7).unwrap().rounds;
    let first = rounds.next().unwrap();
    assert_eq!(first.index, 0);
    assert_eq!(first.sends[0].to, 8);
    assert_eq!(rounds.count(), p - 2);
}
