//! Bad input gives a typed error, never a panic.

use circulant_core::plan::circulant::{Blocking, CirculantAllgatherv, CirculantBroadcast};
use circulant_core::plan::intergroup::IntergroupAllgatherv;
use circulant_core::plan::registry;
use circulant_core::plan::ring::PipelinedRingAllgatherv;
use circulant_core::plan::roundrobin::RoundRobinBroadcast;
use circulant_core::plan::tree::BinomialBroadcast;
use circulant_core::plan::{Algorithm, CostModel, Dtype, PlanError, Problem, ReduceOp, Reduction};
use circulant_core::schedule::{ScheduleError, ScheduleTable};
use circulant_core::sim::{simulate, SimError};

const MODEL: CostModel = CostModel {
    alpha: 2e-6,
    beta: 1e-10,
    o: 0.0,
};

fn all_errors(problem: &Problem) -> Vec<PlanError> {
    registry::ALL
        .iter()
        .filter_map(|(_, make)| make(problem, &MODEL).err())
        .collect()
}

#[test]
fn zero_ranks() {
    for problem in [
        Problem::Broadcast {
            p: 0,
            root: 0,
            bytes: 4,
        },
        Problem::Allgather { p: 0, block: 1 },
        Problem::Allgatherv { counts: vec![] },
        Problem::Barrier { p: 0 },
        Problem::Intergroup {
            a: vec![],
            b: vec![1],
        },
    ] {
        assert_eq!(problem.validate(), Err(PlanError::NoRanks));
        assert!(all_errors(&problem)
            .iter()
            .all(|e| *e == PlanError::NoRanks));
        assert_eq!(
            registry::applicable(&problem, &MODEL).err(),
            Some(PlanError::NoRanks)
        );
    }
}

#[test]
fn root_out_of_range() {
    let red = Reduction::new(Dtype::I32, ReduceOp::Sum).unwrap();
    for problem in [
        Problem::Broadcast {
            p: 4,
            root: 4,
            bytes: 4,
        },
        Problem::Scatter {
            p: 4,
            root: 9,
            block: 1,
        },
        Problem::Gather {
            p: 1,
            root: 1,
            block: 1,
        },
        Problem::Reduce {
            p: 3,
            root: 3,
            reduction: red,
            bytes: 4,
        },
    ] {
        assert!(matches!(
            problem.validate(),
            Err(PlanError::RootOutOfRange { .. })
        ));
        assert!(matches!(
            registry::applicable(&problem, &MODEL),
            Err(PlanError::RootOutOfRange { .. })
        ));
    }
}

#[test]
fn overflowing_sizes() {
    let huge = usize::MAX / 2 + 1;
    for problem in [
        Problem::Allgatherv {
            counts: vec![huge, huge],
        },
        Problem::Allgather { p: 3, block: huge },
        Problem::Scatter {
            p: 3,
            root: 0,
            block: huge,
        },
        Problem::Alltoall { p: 2, block: huge },
        Problem::Intergroup {
            a: vec![huge, huge],
            b: vec![1],
        },
    ] {
        assert_eq!(problem.validate(), Err(PlanError::Overflow), "{problem:?}");
        assert!(all_errors(&problem)
            .iter()
            .all(|e| *e == PlanError::Overflow));
    }
}

#[test]
fn reductions_that_make_no_sense() {
    assert!(matches!(
        Reduction::new(Dtype::F32, ReduceOp::Band),
        Err(PlanError::OpNotDefined { .. })
    ));
    let red = Reduction::new(Dtype::I64, ReduceOp::Max).unwrap();
    let problem = Problem::Allreduce {
        p: 4,
        reduction: red,
        bytes: 12,
    };
    assert!(matches!(
        problem.validate(),
        Err(PlanError::Misaligned { .. })
    ));
    let bad = Reduction {
        dtype: Dtype::F64,
        op: ReduceOp::Bxor,
    };
    let problem = Problem::Allreduce {
        p: 4,
        reduction: bad,
        bytes: 16,
    };
    assert!(matches!(
        problem.validate(),
        Err(PlanError::OpNotDefined { .. })
    ));
}

#[test]
fn wrong_lengths_and_parameters() {
    let problem = Problem::Allgatherv {
        counts: vec![1, 2, 3],
    };
    let table = ScheduleTable::new(4).unwrap();
    assert!(matches!(
        CirculantAllgatherv::with_table(&problem, Blocking::Fixed(2), table),
        Err(PlanError::CountsLength {
            expected: 3,
            got: 4
        })
    ));
    let bcast = Problem::Broadcast {
        p: 5,
        root: 1,
        bytes: 10,
    };
    assert_eq!(
        CirculantBroadcast::new(&bcast, Blocking::Fixed(0)).err(),
        Some(PlanError::NoBlocks)
    );
    assert_eq!(
        PipelinedRingAllgatherv::new(&problem, Some(0), &MODEL).err(),
        Some(PlanError::NoBlocks)
    );
    assert!(matches!(
        CirculantBroadcast::new(&problem, Blocking::Fixed(1)),
        Err(PlanError::WrongCollective { .. })
    ));
    assert!(matches!(
        IntergroupAllgatherv::new(&bcast),
        Err(PlanError::WrongCollective { .. })
    ));
    assert!(matches!(
        registry::by_name("no-such", &bcast, &MODEL),
        Err(PlanError::UnknownAlgorithm(_))
    ));
    assert!(matches!(
        registry::by_name("recursive-doubling-allgather", &problem, &MODEL),
        Err(PlanError::Unsupported { .. })
    ));
    let alg = BinomialBroadcast::new(&bcast).unwrap();
    assert!(matches!(
        alg.rank_plan(5),
        Err(PlanError::RankOutOfRange { rank: 5, p: 5 })
    ));
    // A fixed block count above the byte count is capped, not an error.
    let alg = CirculantBroadcast::new(&bcast, Blocking::Fixed(1000)).unwrap();
    assert_eq!(alg.blocks(), 10);
    assert!(simulate(&alg, &MODEL).is_ok());
}

#[test]
fn the_simulator_reports_invalid_problems() {
    struct Broken(Problem);
    impl Algorithm for Broken {
        fn name(&self) -> &'static str {
            "broken"
        }
        fn problem(&self) -> &Problem {
            &self.0
        }
        fn buffers(&self, _: usize) -> circulant_core::plan::BufferSizes {
            circulant_core::plan::BufferSizes::default()
        }
        fn rounds(
            &self,
            _: usize,
        ) -> Box<dyn Iterator<Item = circulant_core::plan::Round> + Send + '_> {
            Box::new(std::iter::empty())
        }
        fn predict(&self, _: &CostModel) -> circulant_core::plan::Prediction {
            circulant_core::plan::Prediction {
                rounds: 0,
                time: 0.0,
            }
        }
    }
    let err = simulate(&Broken(Problem::Barrier { p: 0 }), &MODEL).unwrap_err();
    assert_eq!(err, SimError::Plan(PlanError::NoRanks));
    // BufferSizes that do not fit the collective.
    let err = simulate(&Broken(Problem::Allgather { p: 2, block: 3 }), &MODEL).unwrap_err();
    assert!(matches!(err, SimError::Rule { .. }));
}

/// Round indices are 32 bits: a plan with more rounds is refused, never cut short or wrapped.
#[test]
fn too_many_rounds_are_refused() {
    let unsupported = |r: Result<(), PlanError>| matches!(r, Err(PlanError::Unsupported { .. }));
    let bcast = |p: usize, bytes: usize, n: usize| {
        CirculantBroadcast::new(
            &Problem::Broadcast { p, root: 0, bytes },
            Blocking::Fixed(n),
        )
        .map(|_| ())
    };
    // p = 2: n − 1 + 1 = 2^32 rounds, indices up to 2^32 − 1; p = 4: one more.
    assert_eq!(bcast(2, 1 << 32, 1 << 32), Ok(()));
    assert!(unsupported(bcast(4, 1 << 32, 1 << 32)));
    // More blocks than the schedule counts: an error, not an empty plan.
    assert_eq!(
        bcast(4, 1 << 49, 1 << 49),
        Err(PlanError::Schedule(ScheduleError::TooManyBlocks {
            n: 1 << 49
        }))
    );
    let counts = Problem::Allgatherv {
        counts: vec![1 << 33, 0],
    };
    assert!(unsupported(
        CirculantAllgatherv::new(&counts, Blocking::Fixed(1 << 33)).map(|_| ())
    ));
    assert!(unsupported(
        PipelinedRingAllgatherv::new(&counts, Some(1), &MODEL).map(|_| ())
    ));
    let bcast = Problem::Broadcast {
        p: 4,
        root: 0,
        bytes: 3 << 33,
    };
    assert!(unsupported(
        RoundRobinBroadcast::new(&bcast, Some(1 << 33), &MODEL).map(|_| ())
    ));
    // Not applicable is not an error of the problem: the others are still offered.
    let names: Vec<&str> = registry::applicable(&bcast, &MODEL)
        .unwrap()
        .iter()
        .map(|a| a.name())
        .collect();
    assert!(names.contains(&CirculantBroadcast::NAME));
}

#[test]
fn schedule_table_size_is_checked() {
    assert_eq!(ScheduleTable::bytes_for(1152), Ok(2 * 1152 * 11 * 4));
    assert_eq!(
        ScheduleTable::bytes_for(usize::MAX),
        Err(ScheduleError::TableTooLarge { p: usize::MAX })
    );
    assert_eq!(ScheduleTable::bytes_for(0), Err(ScheduleError::ZeroRanks));
}
