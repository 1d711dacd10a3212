//! Node-aware algorithms on the real transport: ranks as threads of this process, given host
//! names so that their communicator sees several nodes (2 × 4 by blocks, 8 round robin on 2
//! nodes, 3 + 2 + 1), run every node-aware algorithm (hierarchical and multi-lane) on the
//! simulator's cases and check every byte; the automatic choice takes a node-aware algorithm
//! where it is priced fastest, and none on one node.

use std::time::Duration;

use circulant::comm::{Choice, Communicator, Config};
use circulant::plan::distribution::Distribution;
use circulant::plan::{registry, Dtype, Problem, ReduceOp, Reduction};
use circulant_cli::cases::CaseData;

mod common;
use common::hosts::run_on_hosts_to_a_barrier as run_with;

/// Deadline of every fence and collective: generous for a loaded machine, short of a hang.
const DEADLINE: Duration = Duration::from_secs(60);

/// Runs `body` on every rank of a job whose rank r runs on `hosts[r]`, over shm.
fn run<R: Send>(
    hosts: &[&str],
    algorithms: Vec<String>,
    body: impl Fn(&mut Communicator) -> R + Sync,
) -> Vec<R> {
    let config = Config {
        provider: Some("shm".into()),
        deadline: DEADLINE,
        algorithms,
        ..Config::default()
    };
    run_with(hosts, config, body)
}

const LAYOUTS: &[&[&str]] = &[
    &["a", "a", "a", "a", "b", "b", "b", "b"],
    &["a", "b", "a", "b", "a", "b", "a", "b"],
    &["a", "a", "a", "b", "b", "c"],
];

fn problems(p: usize) -> Vec<Problem> {
    let sum = Reduction::new(Dtype::I64, ReduceOp::Sum).expect("defined");
    let max = Reduction::new(Dtype::F64, ReduceOp::Max).expect("defined");
    vec![
        Problem::Broadcast {
            p,
            root: 0,
            bytes: 100_003,
        },
        Problem::Broadcast {
            p,
            root: p - 1,
            bytes: 5,
        },
        Problem::Allgather { p, block: 1001 },
        Problem::Allgatherv {
            counts: Distribution::Spike.counts(p, 50_000),
        },
        Problem::Allgatherv {
            counts: Distribution::Mod3.counts(p, 3_000),
        },
        Problem::Allreduce {
            p,
            reduction: sum,
            bytes: 8 * 2000,
        },
        Problem::Reduce {
            p,
            root: p / 2,
            reduction: max,
            bytes: 8 * 300,
        },
        // Elements that the lanes do not divide evenly, and fewer elements than lanes.
        Problem::Allreduce {
            p,
            reduction: Reduction::new(Dtype::U32, ReduceOp::Bxor).expect("defined"),
            bytes: 4 * 1001,
        },
        Problem::Reduce {
            p,
            root: p - 1,
            reduction: sum,
            bytes: 8 * 3,
        },
        Problem::ReduceScatterBlock {
            p,
            reduction: sum,
            block: 8 * 250,
        },
        // Uneven parts (one large, small ones, zeros).
        Problem::ReduceScatter {
            reduction: max,
            counts: (0..p).map(|r| 8 * [1000, 0, 3][r % 3]).collect(),
        },
    ]
}

/// One call of `problem` with `name` on this rank; the wrong bytes' description if any.
fn call(comm: &mut Communicator, problem: &Problem, name: &'static str) -> Option<String> {
    let me = CaseData::new(problem.clone()).for_rank(comm.rank());
    let choice = Choice::Named(name);
    let mut recv = me.recv_initial.clone();
    let send = me.send.clone();
    let result = match problem {
        Problem::Broadcast { root, .. } => comm.choosing(choice).bcast(&mut recv[..], *root),
        Problem::Allgather { .. } => comm.choosing(choice).allgather(&send[..], &mut recv[..]),
        Problem::Allgatherv { counts } => {
            comm.choosing(choice)
                .allgatherv(&send[..], &mut recv[..], counts)
        }
        Problem::Allreduce { reduction, .. } => {
            comm.choosing(choice)
                .allreduce_bytes(&send[..], &mut recv[..], *reduction)
        }
        Problem::Reduce {
            root, reduction, ..
        } => comm
            .choosing(choice)
            .reduce_bytes(&send[..], &mut recv[..], *reduction, *root),
        Problem::ReduceScatterBlock { reduction, .. } => comm
            .choosing(choice)
            .reduce_scatter_block_bytes(&send[..], &mut recv[..], *reduction),
        Problem::ReduceScatter { reduction, counts } => {
            let elements: Vec<usize> = counts.iter().map(|c| c / 8).collect();
            comm.choosing(choice).reduce_scatter_bytes(
                &send[..],
                &mut recv[..],
                *reduction,
                &elements,
            )
        }
        _ => return Some("not a case of this test".into()),
    };
    if let Err(e) = result {
        return Some(format!("{name}: {e}"));
    }
    let used = comm.last().map(|e| e.algorithm);
    if used != Some(name) {
        return Some(format!("ran {used:?}, not {name}"));
    }
    me.expected
        .check(&recv)
        .err()
        .map(|m| format!("{name} on {problem:?}: {m}"))
}

#[test]
fn every_hierarchical_algorithm_on_several_layouts() {
    for hosts in LAYOUTS {
        let p = hosts.len();
        let wrong = run(hosts, Vec::new(), |comm| {
            assert!(comm.nodes() > 1);
            let mut wrong = Vec::new();
            let mut ran = std::collections::BTreeSet::new();
            for problem in problems(p) {
                for (name, make) in registry::NODE_AWARE {
                    let layout = circulant::plan::Layout::new(comm.node_map().node_of_each())
                        .expect("ranks");
                    if make(&problem, &layout, &comm.levels()).is_err() {
                        continue;
                    }
                    ran.insert(*name);
                    wrong.extend(call(comm, &problem, name));
                }
            }
            (ran, wrong)
        });
        for (rank, (ran, wrong)) in wrong.iter().enumerate() {
            // Every node-aware algorithm but the barriers (their own test) ran.
            assert_eq!(
                ran.len(),
                registry::NODE_AWARE.len() - 2,
                "rank {rank} ran {ran:?}"
            );
            assert!(wrong.is_empty(), "{hosts:?} rank {rank}: {wrong:?}");
        }
    }
}

#[test]
fn node_aware_barriers_are_forced_and_run() {
    for name in ["hier-barrier", "lane-barrier"] {
        for hosts in LAYOUTS {
            let ran = run(hosts, vec![name.into()], |comm| {
                for _ in 0..5 {
                    comm.barrier().expect("barrier");
                }
                comm.last().map(|e| e.algorithm)
            });
            assert!(ran.iter().all(|a| *a == Some(name)), "{hosts:?}: {ran:?}");
        }
    }
}

#[test]
fn node_aware_algorithms_are_listed_only_on_several_nodes_of_several_ranks() {
    let problem = Problem::Broadcast {
        p: 4,
        root: 0,
        bytes: 1 << 20,
    };
    let lists = |hosts: &'static [&'static str]| {
        run(hosts, Vec::new(), |comm| {
            comm.algorithms(&problem)
                .expect("algorithms")
                .into_iter()
                .map(|(n, _)| n)
                .collect::<Vec<_>>()
        })
    };
    for names in lists(&["a", "a", "b", "b"]) {
        assert!(names.contains(&"hier-circulant-bcast"), "{names:?}");
    }
    for hosts in [&["a", "a", "a", "a"][..], &["a", "b", "c", "d"][..]] {
        for names in lists(hosts) {
            assert!(!names.iter().any(|n| n.starts_with("hier-")), "{names:?}");
        }
    }
}

/// With a link across nodes much slower than the pairs inside a node, the automatic choice
/// prices the candidates on the layout and takes a node-aware allgatherv, whose result is right.
#[test]
fn the_automatic_choice_takes_a_node_aware_algorithm_where_it_is_priced_fastest() {
    use circulant::plan::{CostModel, LevelCosts};
    let hosts = LAYOUTS[0];
    let p = hosts.len();
    let problem = Problem::Allgatherv {
        counts: vec![100_000; p],
    };
    let chosen = run(hosts, Vec::new(), |comm| {
        comm.set_levels(LevelCosts {
            inside: CostModel {
                alpha: 1e-6,
                beta: 1e-10,
                o: 1e-7,
            },
            across: CostModel {
                alpha: 2e-5,
                beta: 2.7e-8,
                o: 7e-6,
            },
        });
        let me = CaseData::new(problem.clone()).for_rank(comm.rank());
        let Problem::Allgatherv { counts } = &problem else {
            unreachable!("an allgatherv")
        };
        let mut recv = me.recv_initial.clone();
        comm.allgatherv(&me.send[..], &mut recv[..], counts)
            .expect("allgatherv");
        let wrong = me.expected.check(&recv).err().map(|m| m.to_string());
        (comm.last().map(|e| e.algorithm), wrong)
    });
    for (rank, (algorithm, wrong)) in chosen.iter().enumerate() {
        assert_eq!(*wrong, None, "rank {rank}");
        let name = algorithm.expect("a call ran");
        assert!(
            name.starts_with("hier-") || name.starts_with("lane-"),
            "rank {rank} chose {name}"
        );
    }
}

/// With the same slow link, the automatic choice takes the multi-lane allreduce (its lanes move
/// across the link what the hierarchical one moves, and its ranks share the work inside the
/// node) and, among the plans (the shared segment off: by default a blocking barrier runs its
/// node phases on the segment, tests/node_phases.rs), the multi-lane barrier (one node phase
/// fewer than the hierarchical one); both results are right.
#[test]
fn the_automatic_choice_takes_the_lanes_for_allreduce_and_barrier_on_a_slow_link() {
    use circulant::plan::{CostModel, LevelCosts};
    let hosts = LAYOUTS[0];
    let p = hosts.len();
    let problem = Problem::Allreduce {
        p,
        reduction: Reduction::new(Dtype::I64, ReduceOp::Sum).expect("defined"),
        bytes: 8 * 20_000,
    };
    let config = Config {
        provider: Some("shm".into()),
        deadline: DEADLINE,
        segment_limit: 0,
        ..Config::default()
    };
    let chosen = run_with(hosts, config, |comm| {
        comm.set_levels(LevelCosts {
            inside: CostModel {
                alpha: 1e-6,
                beta: 1e-10,
                o: 1e-7,
            },
            across: CostModel {
                alpha: 2e-5,
                beta: 2.7e-8,
                o: 7e-6,
            },
        });
        let me = CaseData::new(problem.clone()).for_rank(comm.rank());
        let Problem::Allreduce { reduction, .. } = problem else {
            unreachable!("an allreduce")
        };
        let mut recv = me.recv_initial.clone();
        comm.allreduce_bytes(&me.send[..], &mut recv[..], reduction)
            .expect("allreduce");
        let wrong = me.expected.check(&recv).err().map(|m| m.to_string());
        let allreduce = comm.last().map(|e| e.algorithm);
        comm.barrier().expect("barrier");
        (allreduce, comm.last().map(|e| e.algorithm), wrong)
    });
    for (rank, (allreduce, barrier, wrong)) in chosen.iter().enumerate() {
        assert_eq!(*wrong, None, "rank {rank}");
        assert_eq!(*allreduce, Some("lane-allreduce"), "rank {rank}");
        assert_eq!(*barrier, Some("lane-barrier"), "rank {rank}");
    }
}
