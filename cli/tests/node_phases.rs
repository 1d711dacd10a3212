//! The node phases on the shared segment (`hier-segment-*`): ranks as threads of this process,
//! given host names so that their communicator sees several nodes, run bcast, reduce,
//! allreduce, reduce-scatter(-block), allgather(v) and barrier as a segment operation inside each node, a plan among the nodes'
//! first ranks and a segment operation again; every byte checked on blocks, round-robin,
//! uneven and single-rank-node layouts, every root; what the automatic choice takes and where;
//! refused calls and a rank that gives up.

use std::time::{Duration, Instant};

use circulant::comm::{Choice, CommError, Communicator, Config};
use circulant::plan::{Dtype, Problem, ReduceOp, Reduction};
use circulant_cli::cases::CaseData;

mod common;
use common::hosts::run_on_hosts as run;

/// Deadline of every fence and collective: generous for a loaded machine, short of a hang.
const DEADLINE: Duration = Duration::from_secs(60);

fn config() -> Config {
    Config {
        provider: Some("shm".into()),
        deadline: DEADLINE,
        ..Config::default()
    }
}

/// 2 × 2 by blocks, 6 round robin on 2 nodes, 3 + 2 + 1, and a node of one rank beside one
/// of three.
const LAYOUTS: &[&[&str]] = &[
    &["a", "a", "b", "b"],
    &["a", "b", "a", "b", "a", "b"],
    &["a", "a", "a", "b", "b", "c"],
    &["a", "b", "b", "b"],
];

fn sum() -> Reduction {
    Reduction::new(Dtype::I64, ReduceOp::Sum).expect("defined")
}

/// Every case of `p` ranks: bcast and reduce from every root, allreduce, at sizes from 0 to
/// the default limit (8192 bytes; broadcasts of odd sizes too).
fn problems(p: usize) -> Vec<Problem> {
    let mut out = Vec::new();
    for (odd, bytes) in [(0, 0), (1, 8), (7, 56), (8192, 8192)] {
        for root in 0..p {
            out.push(Problem::Broadcast {
                p,
                root,
                bytes: odd,
            });
            out.push(Problem::Reduce {
                p,
                root,
                reduction: sum(),
                bytes,
            });
        }
        out.push(Problem::Allreduce {
            p,
            reduction: sum(),
            bytes,
        });
        out.push(Problem::ReduceScatterBlock {
            p,
            reduction: sum(),
            block: bytes / 8 / p * 8,
        });
    }
    // Reduce-scatters with zero counts, and one rank's block only.
    for scale in [1, 40] {
        out.push(Problem::ReduceScatter {
            reduction: sum(),
            counts: (0..p).map(|r| (r * 7 + 3) % 5 * 8 * scale).collect(),
        });
    }
    out.push(Problem::ReduceScatter {
        reduction: sum(),
        counts: (0..p).map(|r| if r == p - 1 { 800 } else { 0 }).collect(),
    });
    // Allgathers up to the limit in all and just past it; allgathervs with zero counts.
    for block in [0, 1, 24, 8192 / p, 8192 / p + 1] {
        out.push(Problem::Allgather { p, block });
    }
    for scale in [1, 100, 400] {
        out.push(Problem::Allgatherv {
            counts: (0..p).map(|r| (r * 7 + 3) % 5 * scale).collect(),
        });
    }
    // One rank's block only (a node whose other ranks have none skips its gather): the first
    // rank's, the last rank's.
    for only in [0, p - 1] {
        out.push(Problem::Allgatherv {
            counts: (0..p).map(|r| if r == only { 100 } else { 0 }).collect(),
        });
    }
    out
}

/// One blocking call of `problem` with `choice`: the algorithm that ran, or the wrong bytes.
fn call(
    comm: &mut Communicator,
    problem: &Problem,
    choice: Choice<'_>,
) -> Result<&'static str, String> {
    let me = CaseData::new(problem.clone()).for_rank(comm.rank());
    let mut recv = me.recv_initial.clone();
    let send = me.send.clone();
    let result = match problem {
        Problem::Broadcast { root, .. } => comm.choosing(choice).bcast(&mut recv[..], *root),
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
        Problem::Allgather { .. } => comm.choosing(choice).allgather(&send[..], &mut recv[..]),
        Problem::Allgatherv { counts } => {
            comm.choosing(choice)
                .allgatherv(&send[..], &mut recv[..], counts)
        }
        _ => return Err("not a case of this test".into()),
    };
    result.map_err(|e| format!("{problem:?}: {e}"))?;
    me.expected
        .check(&recv)
        .map_err(|m| format!("{problem:?}: {m}"))?;
    Ok(comm.last().map_or("none", |e| e.algorithm))
}

fn forced(problem: &Problem) -> &'static str {
    match problem {
        Problem::Broadcast { .. } => "hier-segment-bcast",
        Problem::Reduce { .. } => "hier-segment-reduce",
        Problem::Allreduce { .. } => "hier-segment-allreduce",
        Problem::ReduceScatterBlock { .. } => "hier-segment-reduce-scatter-block",
        Problem::ReduceScatter { .. } => "hier-segment-reduce-scatter",
        Problem::Allgather { .. } => "hier-segment-allgather",
        Problem::Allgatherv { .. } => "hier-segment-allgatherv",
        _ => "hier-segment-barrier",
    }
}

#[test]
fn every_case_forced_and_automatic_on_every_layout() {
    for hosts in LAYOUTS {
        let p = hosts.len();
        let most = (0..p).map(|r| hosts.iter().filter(|h| **h == hosts[r]).count());
        let most_per_node = most.max().unwrap_or(1);
        let results = run(hosts, config(), |comm| {
            let mut wrong = Vec::new();
            for problem in problems(p) {
                let name = forced(&problem);
                // Forced within the limit (past it, in chunks: tested apart).
                let whole = match &problem {
                    Problem::Allgather { p, block } => p * block,
                    Problem::Allgatherv { counts } => counts.iter().sum(),
                    _ => 0,
                };
                if whole <= 8192 {
                    match call(comm, &problem, Choice::Named(name)) {
                        Ok(ran) if ran == name => {}
                        Ok(ran) => wrong.push(format!("forced {name}, ran {ran}")),
                        Err(e) => wrong.push(e),
                    }
                }
                // Unforced: the node phases wherever a rank's part fits the limit (for a
                // reduction, the vectors a node's first rank folds; for an allgather(v), the
                // whole, which the last phase broadcasts).
                let bytes = match problem {
                    Problem::Broadcast { bytes, .. } => bytes,
                    Problem::Reduce { bytes, .. } | Problem::Allreduce { bytes, .. } => {
                        bytes * (most_per_node - 1)
                    }
                    Problem::ReduceScatterBlock { .. } | Problem::ReduceScatter { .. } => {
                        problem.total_bytes() * (most_per_node - 1)
                    }
                    _ => whole,
                };
                let expected = if bytes <= 8192 { Some(name) } else { None };
                match call(comm, &problem, Choice::Auto) {
                    Ok(ran) if expected.map_or(!ran.starts_with("hier-segment-"), |e| e == ran) => {
                    }
                    Ok(ran) => wrong.push(format!("{problem:?} unforced ran {ran}")),
                    Err(e) => wrong.push(e),
                }
            }
            for _ in 0..3 {
                comm.barrier().expect("barrier");
                if comm.last().map(|e| e.algorithm) != Some("hier-segment-barrier") {
                    wrong.push(format!("barrier ran {:?}", comm.last()));
                }
            }
            // The phases' own communicators carried the data: published on the segment.
            let traffic = comm.traffic();
            if traffic.memory.writes == 0 {
                wrong.push(format!("nothing published on the segment: {traffic:?}"));
            }
            wrong
        });
        for (rank, wrong) in results.iter().enumerate() {
            assert!(wrong.is_empty(), "{hosts:?} rank {rank}: {wrong:?}");
        }
    }
}

/// One nonblocking call of `problem` with `choice`, progressed by `test` until complete (a
/// rank that gives up is told at its deadline): the algorithm that ran, or the wrong bytes.
fn icall(
    comm: &mut Communicator,
    problem: &Problem,
    choice: Choice<'_>,
) -> Result<&'static str, String> {
    let me = CaseData::new(problem.clone()).for_rank(comm.rank());
    let mut recv = me.recv_initial.clone();
    let send = me.send.clone();
    let request = match problem {
        Problem::Broadcast { root, .. } => comm.choosing(choice).ibcast(&mut recv[..], *root),
        Problem::Allreduce { reduction, .. } => {
            comm.choosing(choice)
                .iallreduce_bytes(&send[..], &mut recv[..], *reduction)
        }
        Problem::Reduce {
            root, reduction, ..
        } => comm
            .choosing(choice)
            .ireduce_bytes(&send[..], &mut recv[..], *reduction, *root),
        Problem::ReduceScatterBlock { reduction, .. } => comm
            .choosing(choice)
            .ireduce_scatter_block_bytes(&send[..], &mut recv[..], *reduction),
        Problem::ReduceScatter { reduction, counts } => {
            let elements: Vec<usize> = counts.iter().map(|c| c / 8).collect();
            comm.choosing(choice).ireduce_scatter_bytes(
                &send[..],
                &mut recv[..],
                *reduction,
                &elements,
            )
        }
        Problem::Allgather { .. } => comm.choosing(choice).iallgather(&send[..], &mut recv[..]),
        Problem::Allgatherv { counts } => {
            comm.choosing(choice)
                .iallgatherv(&send[..], &mut recv[..], counts)
        }
        _ => return Err("not a case of this test".into()),
    };
    let mut request = request.map_err(|e| format!("{problem:?}: {e}"))?;
    let algorithm = request.algorithm();
    // Progressed by test alone, yielding between tests as a program that computes would.
    loop {
        match request.test() {
            Ok(true) => break,
            Ok(false) => std::thread::yield_now(),
            Err(e) => return Err(format!("{problem:?}: {e}")),
        }
    }
    request.wait().map_err(|e| format!("{problem:?}: {e}"))?;
    me.expected
        .check(&recv)
        .map_err(|m| format!("{problem:?}: {m}"))?;
    Ok(algorithm)
}

/// The nonblocking forms take the node phases where the blocking ones do, and run the same
/// steps: every case, forced and unforced, on every layout, progressed by `test` alone;
/// `wait` and the blocking form in between on the same communicator.
#[test]
fn nonblocking_calls_take_the_node_phases() {
    for hosts in LAYOUTS {
        let p = hosts.len();
        let results = run(hosts, config(), |comm| {
            let mut wrong = Vec::new();
            for problem in problems(p) {
                let name = forced(&problem);
                let whole = match &problem {
                    Problem::Allgather { p, block } => p * block,
                    Problem::Allgatherv { counts } => counts.iter().sum(),
                    _ => 0,
                };
                if whole <= 8192 {
                    match icall(comm, &problem, Choice::Named(name)) {
                        Ok(ran) if ran == name => {}
                        Ok(ran) => wrong.push(format!("forced {name}, ran {ran}")),
                        Err(e) => wrong.push(e),
                    }
                }
                let blocking = call(comm, &problem, Choice::Auto);
                let nonblocking = icall(comm, &problem, Choice::Auto);
                match (blocking, nonblocking) {
                    (Ok(a), Ok(b)) if a == b => {}
                    (a, b) => wrong.push(format!("{problem:?}: blocking {a:?}, nonblocking {b:?}")),
                }
            }
            let request = comm.ibarrier().expect("ibarrier");
            let ran = request.algorithm();
            request.wait().expect("ibarrier");
            if ran != "hier-segment-barrier" {
                wrong.push(format!("ibarrier ran {ran}"));
            }
            wrong
        });
        for (rank, wrong) in results.iter().enumerate() {
            assert!(wrong.is_empty(), "{hosts:?} rank {rank}: {wrong:?}");
        }
    }
}

/// Past the limit a forced bcast or allgather(v) runs its node phases on the segment in
/// chunks (64 KiB a chunk: these take several), blocking and nonblocking, every byte checked
/// on every layout and from every root; unforced, the same calls take a plan.
#[test]
fn forced_broadcasts_and_allgathers_run_past_the_limit_in_chunks() {
    const BCAST: usize = 150_001;
    for hosts in LAYOUTS {
        let p = hosts.len();
        let broadcasts: Vec<Problem> = (0..p)
            .map(|root| Problem::Broadcast {
                p,
                root,
                bytes: BCAST,
            })
            .collect();
        let gathers = [
            Problem::Allgather { p, block: 40_003 },
            Problem::Allgatherv {
                counts: (0..p).map(|r| (r * 7 + 3) % 5 * 30_001).collect(),
            },
        ];
        let results = run(hosts, config(), |comm| {
            let mut wrong = Vec::new();
            let mut published = (0, 0);
            for (i, problem) in broadcasts.iter().chain(&gathers).enumerate() {
                let name = forced(problem);
                let listed = comm
                    .algorithms(problem)
                    .map(|all| all.iter().any(|(n, _)| *n == name));
                if !matches!(listed, Ok(true)) {
                    wrong.push(format!("{name} not listed for {problem:?}: {listed:?}"));
                }
                let before = comm.traffic().memory;
                for result in [
                    call(comm, problem, Choice::Named(name)),
                    icall(comm, problem, Choice::Named(name)),
                ] {
                    match result {
                        Ok(ran) if ran == name => {}
                        Ok(ran) => wrong.push(format!("forced {name}, ran {ran}")),
                        Err(e) => wrong.push(e),
                    }
                }
                if i < broadcasts.len() {
                    let after = comm.traffic().memory;
                    published.0 += after.writes - before.writes;
                    published.1 += after.bytes - before.bytes;
                }
                match call(comm, problem, Choice::Auto) {
                    Ok(ran) if !ran.starts_with("hier-segment-") => {}
                    Ok(ran) => wrong.push(format!("{problem:?} unforced ran {ran}")),
                    Err(e) => wrong.push(e),
                }
            }
            (wrong, published)
        });
        let mut per_node = std::collections::BTreeMap::new();
        for (rank, (wrong, published)) in results.iter().enumerate() {
            assert!(wrong.is_empty(), "{hosts:?} rank {rank}: {wrong:?}");
            let node: &mut (u64, u64, usize) = per_node.entry(hosts[rank]).or_default();
            *node = (node.0 + published.0, node.1 + published.1, node.2 + 1);
        }
        // Each forced broadcast (p roots, two forms) put the whole message on the segment of
        // every node of several ranks, once, in three chunks.
        let calls = 2 * p as u64;
        for (node, (parts, bytes, ranks)) in per_node {
            if ranks > 1 {
                assert!(parts >= 3 * calls, "{hosts:?} node {node}: {parts} parts");
                assert!(
                    bytes >= calls * BCAST as u64,
                    "{hosts:?} node {node}: {bytes} B"
                );
            }
        }
    }
}

/// `CIRCULANT_ALGORITHM` forces the node phases as a name does: a large broadcast runs on them
/// (in chunks), and the calls the name does not cover choose for themselves.
#[test]
fn a_configured_name_forces_the_node_phases_past_the_limit() {
    let forced = Config {
        algorithms: vec!["hier-segment-bcast".into()],
        ..config()
    };
    let hosts = LAYOUTS[1];
    let ran = run(hosts, forced, |comm| {
        let root = 3;
        let mut big: Vec<u8> = if comm.rank() == root {
            (0..100_003u32).map(|i| (i % 251) as u8).collect()
        } else {
            vec![0; 100_003]
        };
        comm.bcast(&mut big[..], root).expect("bcast");
        let right = big.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8);
        let bcast = comm.last().map(|e| e.algorithm);
        let (send, mut recv) = (vec![1i64; 2000], vec![0i64; 2000]);
        comm.allreduce(&send, &mut recv, ReduceOp::Sum)
            .expect("allreduce");
        (right, bcast, comm.last().map(|e| e.algorithm))
    });
    for (rank, (right, bcast, allreduce)) in ran.into_iter().enumerate() {
        assert!(right, "rank {rank}: wrong data");
        assert_eq!(bcast, Some("hier-segment-bcast"), "rank {rank}");
        assert!(
            !allreduce.expect("ran").starts_with("hier-segment-"),
            "rank {rank}: {allreduce:?}"
        );
    }
}

/// A started nonblocking call does not wait for its peers' later steps, also with the full
/// argument check on: between the start and the wait every rank makes a blocking call on
/// another communicator, which a start that waited in a step's exchange would never reach.
#[test]
fn a_started_call_lets_its_rank_call_elsewhere_before_it_waits() {
    let checked = Config {
        check: true,
        ..config()
    };
    for hosts in LAYOUTS {
        let p = hosts.len() as i64;
        let results = run(hosts, checked.clone(), |comm| {
            let rank = comm.rank();
            let mut other = comm
                .split(Some(0), rank as i64)
                .expect("split")
                .expect("member");
            let started = Instant::now();
            let (send, mut recv) = ([rank as i64 + 1], [0i64]);
            let request = comm
                .iallreduce(&send, &mut recv, ReduceOp::Sum)
                .map_err(|e| e.to_string());
            let elsewhere = other.barrier().map_err(|e| e.to_string());
            let ran = request.as_ref().map(|r| r.algorithm()).unwrap_or("none");
            let waited = request.and_then(|r| r.wait().map_err(|e| e.to_string()));
            (ran, elsewhere, waited, recv[0], started.elapsed())
        });
        for (rank, (ran, elsewhere, waited, sum, took)) in results.iter().enumerate() {
            assert_eq!(*ran, "hier-segment-allreduce", "{hosts:?} rank {rank}");
            assert_eq!(elsewhere, &Ok(()), "{hosts:?} rank {rank}");
            assert_eq!(waited, &Ok(()), "{hosts:?} rank {rank}");
            assert_eq!(*sum, p * (p + 1) / 2, "{hosts:?} rank {rank}");
            assert!(*took < DEADLINE / 2, "{hosts:?} rank {rank}: {took:?}");
        }
    }
}

/// An `i*` call posts its first phase before it returns: a broadcast root that is not its
/// node's first rank has only that phase (its data published on the segment), so every other
/// rank completes while the root, having started, neither tests nor waits.
#[test]
fn a_started_call_has_posted_its_first_phase() {
    const ASLEEP: Duration = Duration::from_secs(4);
    let hosts = LAYOUTS[0];
    let results = run(hosts, config(), |comm| {
        let root = 1;
        let mut buf = [0u8; 64];
        if comm.rank() == root {
            buf = [5u8; 64];
        }
        let started = Instant::now();
        if comm.rank() == root {
            let request = comm.ibcast(&mut buf[..], root).expect("ibcast");
            std::thread::sleep(ASLEEP);
            request.wait().expect("wait");
        } else {
            comm.bcast(&mut buf[..], root).expect("bcast");
        }
        (
            started.elapsed(),
            buf == [5u8; 64],
            comm.last().map(|e| e.algorithm),
        )
    });
    for (rank, (took, right, ran)) in results.iter().enumerate() {
        assert!(right, "rank {rank}: wrong data");
        assert_eq!(*ran, Some("hier-segment-bcast"), "rank {rank}");
        if rank != 1 {
            assert!(
                *took < ASLEEP - Duration::from_secs(1),
                "rank {rank} took {took:?}"
            );
        }
    }
}

/// The calls above the limit run plans; with the segment turned off
/// (`CIRCULANT_SEGMENT_LIMIT=0`) no call takes the node phases, nor one for which a plan is
/// forced.
#[test]
fn large_calls_and_no_segment_run_plans() {
    let hosts = LAYOUTS[0];
    let ran = run(hosts, config(), |comm| {
        let mut big = vec![7u8; 8193];
        comm.bcast(&mut big[..], 1).expect("bcast");
        let blocking = comm.last().map(|e| e.algorithm);
        let request = comm.ibcast(&mut big[..], 1).expect("ibcast");
        let nonblocking = request.algorithm();
        request.wait().expect("ibcast");
        (blocking, nonblocking)
    });
    for (blocking, nonblocking) in ran {
        assert!(!blocking.expect("ran").starts_with("hier-segment-"));
        assert!(!nonblocking.starts_with("hier-segment-"));
    }
    let off = Config {
        segment_limit: 0,
        ..config()
    };
    let ran = run(hosts, off, |comm| {
        let mut buf = [7u8; 8];
        comm.bcast(&mut buf[..], 0).expect("bcast");
        let bcast = comm.last().map(|e| e.algorithm);
        comm.barrier().expect("barrier");
        (bcast, comm.last().map(|e| e.algorithm))
    });
    for (bcast, barrier) in ran {
        assert!(!bcast.expect("ran").starts_with("hier-segment-"));
        assert!(!barrier.expect("ran").starts_with("hier-segment-"));
    }
    // A plan forced by CIRCULANT_ALGORITHM (or by name) runs instead, and a node-phase name
    // there leaves the calls it does not name alone.
    let forced = Config {
        algorithms: vec!["binomial-bcast".into(), "hier-segment-allreduce".into()],
        ..config()
    };
    let ran = run(hosts, forced, |comm| {
        let mut buf = [7u8; 8];
        comm.bcast(&mut buf[..], 0).expect("bcast");
        let configured = comm.last().map(|e| e.algorithm);
        comm.choosing(Choice::Named("circulant-bcast"))
            .bcast(&mut buf[..], 0)
            .expect("bcast");
        let named = comm.last().map(|e| e.algorithm);
        let (send, mut recv) = ([1i64], [0i64]);
        comm.allreduce(&send, &mut recv, ReduceOp::Sum)
            .expect("allreduce");
        let allreduce = comm.last().map(|e| e.algorithm);
        // An allgatherv whose bytes all come from one rank is its broadcast: the configured
        // broadcast is forced on it too.
        let p = comm.size();
        let mut counts = vec![0usize; p];
        counts[p - 1] = 3;
        let send = if comm.rank() == p - 1 {
            vec![9u8; 3]
        } else {
            Vec::new()
        };
        let mut gathered = [0u8; 3];
        comm.allgatherv(&send[..], &mut gathered[..], &counts)
            .expect("allgatherv");
        let one_source = (comm.last().map(|e| e.algorithm), gathered);
        (configured, named, allreduce, recv[0], one_source)
    });
    for (configured, named, allreduce, sum, one_source) in ran {
        assert_eq!(configured, Some("binomial-bcast"));
        assert_eq!(named, Some("circulant-bcast"));
        assert_eq!(allreduce, Some("hier-segment-allreduce"));
        assert_eq!(sum, hosts.len() as i64);
        assert_eq!(one_source, (Some("binomial-bcast"), [9u8; 3]));
    }
}

/// A forced name that cannot serve the call fails on every rank with the reason (a reduction
/// past the limit: its folds do not run in chunks); the names are listed among a
/// communicator's algorithms only where they serve.
#[test]
fn forced_names_that_cannot_serve_are_refused_with_the_reason() {
    let problem = |p| Problem::Broadcast {
        p,
        root: 0,
        bytes: 8,
    };
    // A reduction past the limit: its vectors are folded, not moved in chunks.
    let past = |p| Problem::Allreduce {
        p,
        reduction: sum(),
        bytes: 8200,
    };
    let errors = run(LAYOUTS[0], config(), |comm| {
        let listed = comm
            .algorithms(&problem(4))
            .expect("algorithms")
            .iter()
            .any(|(n, _)| *n == "hier-segment-bcast");
        let listed_past = comm
            .algorithms(&past(4))
            .expect("algorithms")
            .iter()
            .any(|(n, _)| *n == "hier-segment-allreduce");
        let (send, mut recv) = (vec![1i64; 1025], vec![0i64; 1025]);
        let err = comm
            .choosing(Choice::Named("hier-segment-allreduce"))
            .allreduce(&send, &mut recv, ReduceOp::Sum)
            .expect_err("above the limit");
        (listed, listed_past, err.to_string())
    });
    for (listed, listed_past, err) in errors {
        assert!(listed && !listed_past);
        assert!(err.contains("exceed"), "{err}");
    }
    let errors = run(&["a", "a", "a"], config(), |comm| {
        let listed = comm
            .algorithms(&problem(3))
            .expect("algorithms")
            .iter()
            .any(|(n, _)| n.starts_with("hier-segment-"));
        let mut buf = [0u8; 8];
        let err = comm
            .choosing(Choice::Named("hier-segment-bcast"))
            .bcast(&mut buf[..], 0)
            .expect_err("one node");
        (listed, err.to_string())
    });
    for (listed, err) in errors {
        assert!(!listed);
        assert!(err.contains("several nodes"), "{err}");
    }
}

/// A rank that refuses a call (its root out of range) fails at once and gives up the phases'
/// communicators too: the ranks that needed it fail, those that did not (a root publishes
/// and goes on, as on the segment of one node) complete, and the next call fails on every
/// rank, all long before the deadline.
/// The same in the nonblocking form (the refusing rank's `ibcast` fails, and the requests of
/// the ranks that needed it fail in `test`) and the persistent one (its `bcast_init` fails,
/// and the others' starts where they need it).
#[test]
fn a_refused_call_fails_where_needed_and_the_next_everywhere() {
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Form {
        Blocking,
        Nonblocking,
        Persistent,
    }
    let forms = [Form::Blocking, Form::Nonblocking, Form::Persistent];
    for (hosts, form) in LAYOUTS.iter().flat_map(|h| forms.map(|f| (h, f))) {
        let p = hosts.len();
        let results = run(hosts, config(), |comm| {
            let mut buf = [1u8; 16];
            comm.bcast(&mut buf[..], 0).expect("first bcast");
            assert_eq!(comm.last().map(|e| e.algorithm), Some("hier-segment-bcast"));
            let refuses = comm.rank() == p - 1;
            let root = if refuses { p } else { 0 };
            let started = Instant::now();
            let refused: Result<(), CommError> = match form {
                Form::Nonblocking => comm
                    .ibcast(&mut buf[..], root)
                    .and_then(|mut request| loop {
                        match request.test() {
                            Ok(true) => break Ok(()),
                            Ok(false) => std::thread::yield_now(),
                            Err(e) => break Err(e),
                        }
                    }),
                Form::Blocking => comm.bcast(&mut buf[..], root),
                Form::Persistent => {
                    let mut kept = comm.alloc(16).expect("alloc");
                    let made = comm.bcast_init(&mut kept, root);
                    made.and_then(|mut request| request.run())
                }
            };
            let next: Result<(), CommError> = comm.barrier();
            (
                refuses,
                refused.map_err(|e| e.to_string()),
                next.map_err(|e| e.to_string()),
                started.elapsed(),
            )
        });
        for (rank, (refuses, refused, next, took)) in results.iter().enumerate() {
            if *refuses {
                let err = refused.as_ref().expect_err("refused");
                assert!(err.contains("root"), "{err}");
            }
            assert!(
                next.is_err(),
                "{hosts:?} {form:?} rank {rank}: the next call completed"
            );
            assert!(
                *took < DEADLINE / 2,
                "{hosts:?} rank {rank} failed after {took:?}: {refused:?} {next:?}"
            );
        }
    }
}

/// With `CIRCULANT_CHECK` on, ranks whose sizes disagree across the limit (one takes the node
/// phases, the others a plan) are told so by the check on every rank, before any phase.
#[test]
fn the_argument_check_catches_ranks_on_different_paths() {
    let checked = Config {
        check: true,
        ..config()
    };
    let results = run(LAYOUTS[0], checked, |comm| {
        let mut small = [1u8; 8];
        comm.bcast(&mut small[..], 0).expect("an agreed call");
        let ran = comm.last().map(|e| e.algorithm);
        let mut buf = vec![1u8; if comm.rank() == 0 { 8 } else { 9000 }];
        let started = Instant::now();
        let result = comm.bcast(&mut buf[..], 0).map_err(|e| e.to_string());
        (ran, result, started.elapsed())
    });
    for (rank, (ran, result, took)) in results.iter().enumerate() {
        assert_eq!(*ran, Some("hier-segment-bcast"), "rank {rank}");
        assert!(result.is_err(), "rank {rank} completed");
        assert!(*took < DEADLINE / 2, "rank {rank}: {took:?} {result:?}");
    }
}

/// A rank whose forced name cannot serve its call (refused before any phase) gives up the
/// phases' communicators too: the ranks waiting for it there fail at once, not at its next
/// call (it makes none for a while) nor at their deadline; the next call fails on every rank.
#[test]
fn a_forced_name_refused_on_one_rank_fails_the_others_at_once() {
    const QUIET: Duration = Duration::from_secs(5);
    for hosts in LAYOUTS {
        let p = hosts.len();
        let results = run(hosts, config(), |comm| {
            let mut buf = [1u8; 8];
            comm.bcast(&mut buf[..], 0).expect("first bcast");
            let refuses = comm.rank() == p - 1;
            let choice = if refuses {
                Choice::Named("hier-segment-reduce")
            } else {
                Choice::Auto
            };
            // The refusing rank is the root: every other rank waits for it in some phase.
            let started = Instant::now();
            let refused = comm.choosing(choice).bcast(&mut buf[..], p - 1);
            let took = started.elapsed();
            if refuses {
                std::thread::sleep(QUIET);
            }
            let next = comm.barrier();
            (refused.is_err(), took, next.is_err())
        });
        for (rank, (refused, took, next)) in results.iter().enumerate() {
            assert!(refused, "{hosts:?} rank {rank}: the call completed");
            assert!(
                *took < QUIET / 2,
                "{hosts:?} rank {rank} failed after {took:?}"
            );
            assert!(next, "{hosts:?} rank {rank}: the next call completed");
        }
    }
}

/// The allgathers in place (as the C API's `MPI_IN_PLACE` calls them): each rank's block is
/// already at its place; every block arrives at its rank's place on round-robin and uneven
/// layouts.
#[test]
fn allgathers_in_place_take_the_node_phases() {
    let pattern = |r: usize, i: usize| (r * 31 + i * 7 + 1) as u8;
    for hosts in [LAYOUTS[1], LAYOUTS[2]] {
        let p = hosts.len();
        let results = run(hosts, config(), |comm| {
            let me = comm.rank();
            let mut wrong = Vec::new();
            let counts: Vec<usize> = (0..p).map(|r| (r % 3) * 5 + 1).collect();
            let offsets: Vec<usize> = (0..p).map(|r| counts[..r].iter().sum()).collect();
            let whole = |counts: &[usize], offsets: &[usize]| {
                let mut all = vec![0u8; counts.iter().sum()];
                for r in 0..p {
                    for i in 0..counts[r] {
                        all[offsets[r] + i] = pattern(r, i);
                    }
                }
                all
            };
            let expected = whole(&counts, &offsets);
            let mut buf = vec![0u8; expected.len()];
            let mine = offsets[me]..offsets[me] + counts[me];
            buf[mine.clone()].copy_from_slice(&expected[mine]);
            comm.allgatherv_in_place(&mut buf[..], &counts)
                .expect("allgatherv in place");
            if buf != expected {
                wrong.push(format!("allgatherv in place: {buf:?}"));
            }
            wrong.push(format!("{:?}", comm.last().map(|e| e.algorithm)));
            let block = 3;
            let (counts, offsets): (Vec<usize>, Vec<usize>) =
                (0..p).map(|r| (block, r * block)).unzip();
            let expected = whole(&counts, &offsets);
            let mut buf = vec![0u8; expected.len()];
            let mine = me * block..(me + 1) * block;
            buf[mine.clone()].copy_from_slice(&expected[mine]);
            comm.allgather_in_place(&mut buf[..])
                .expect("allgather in place");
            if buf != expected {
                wrong.push(format!("allgather in place: {buf:?}"));
            }
            wrong.push(format!("{:?}", comm.last().map(|e| e.algorithm)));
            wrong
        });
        for (rank, ran) in results.iter().enumerate() {
            assert_eq!(
                ran,
                &[
                    "Some(\"hier-segment-allgatherv\")",
                    "Some(\"hier-segment-allgather\")"
                ],
                "{hosts:?} rank {rank}"
            );
        }
    }
}

/// A `hier-segment-*` name in `CIRCULANT_ALGORITHM` does not reach the library's own
/// exchanges (a split's allgathers, here larger than a small limit): the split works, and the
/// calls the name can serve take it.
#[test]
fn a_configured_node_phase_name_leaves_the_splits_alone() {
    let forced = Config {
        segment_limit: 16,
        algorithms: vec!["hier-segment-allgather".into()],
        ..config()
    };
    let ran = run(LAYOUTS[0], forced, |comm| {
        let rank = comm.rank();
        let sub = comm
            .split(Some(0), rank as i64)
            .map(|sub| sub.map(|s| s.size()))
            .map_err(|e| e.to_string());
        let mine = [rank as u8; 2];
        let mut all = [9u8; 8];
        let gathered = comm
            .allgather(&mine[..], &mut all[..])
            .map_err(|e| e.to_string());
        (sub, gathered, comm.last().map(|e| e.algorithm), all)
    });
    for (sub, gathered, algorithm, all) in ran {
        assert_eq!(sub, Ok(Some(4)));
        assert_eq!(gathered, Ok(()));
        assert_eq!(algorithm, Some("hier-segment-allgather"));
        assert_eq!(all, [0, 0, 1, 1, 2, 2, 3, 3]);
    }
}

/// A byte of start `start` from rank `rank` at `i`.
fn byte_of(start: usize, rank: usize, i: usize) -> u8 {
    (start * 37 + rank * 13 + i * 11 + 1) as u8
}

/// Persistent requests run as the blocking and `i*` forms of their call do: on the shared
/// segment of one node, as node phases on several, as a plan above the limit. Each start
/// delivers its own data, and on every other start the odd ranks call the blocking form
/// instead of starting their request, which works only if both forms run alike.
#[test]
fn persistent_requests_run_as_the_other_forms() {
    let one_node: &[&str] = &["a", "a", "a"];
    for hosts in LAYOUTS.iter().copied().chain([one_node]) {
        let p = hosts.len();
        let results = run(hosts, config(), |comm| {
            let me = comm.rank();
            let mut wrong = Vec::new();
            // Does this rank call the blocking form at `start`?
            let blocking_at = |start: usize| me % 2 == 1 && start % 2 == 0;
            for bytes in [1, 56, 8192, 9000] {
                for root in 0..p {
                    let data = |start: usize| -> Vec<u8> {
                        (0..bytes).map(|i| byte_of(start, root, i)).collect()
                    };
                    let mut plain = if me == root { data(0) } else { vec![0; bytes] };
                    comm.bcast(&mut plain[..], root).expect("bcast");
                    let blocking = comm.last().map_or("none", |e| e.algorithm);
                    let mut buf = comm.alloc(bytes).expect("alloc");
                    let mut request = comm.bcast_init(&mut buf, root).expect("bcast_init");
                    if request.algorithm() != blocking {
                        wrong.push(format!(
                            "bcast {bytes} from {root}: persistent {}, blocking {blocking}",
                            request.algorithm()
                        ));
                    }
                    for start in 1..=4 {
                        let got = if blocking_at(start) {
                            let mut plain = if me == root {
                                data(start)
                            } else {
                                vec![0; bytes]
                            };
                            let comm = request.comm().expect("idle");
                            comm.bcast(&mut plain[..], root).expect("bcast");
                            plain
                        } else {
                            if me == root {
                                request
                                    .buffer_mut()
                                    .expect("idle")
                                    .copy_from_slice(&data(start));
                            }
                            request.run().expect("persistent bcast");
                            let ran = request.comm().expect("idle").last().map(|e| e.algorithm);
                            if ran != Some(blocking) {
                                wrong.push(format!("bcast {bytes}: start ran {ran:?}"));
                            }
                            request.buffer().expect("idle").to_vec()
                        };
                        if got != data(start) {
                            wrong.push(format!("bcast {bytes} from {root}, start {start}: wrong"));
                        }
                    }
                }
            }
            for scale in [40, 2000] {
                let counts: Vec<usize> = (0..p).map(|r| (r * 7 + 3) % 5 * scale).collect();
                let offsets: Vec<usize> = (0..p).map(|r| counts[..r].iter().sum()).collect();
                let total = counts.iter().sum();
                let block = |start: usize, r: usize| -> Vec<u8> {
                    (0..counts[r]).map(|i| byte_of(start, r, i)).collect()
                };
                let whole =
                    |start: usize| -> Vec<u8> { (0..p).flat_map(|r| block(start, r)).collect() };
                let mut plain = vec![0; total];
                comm.allgatherv(&block(0, me)[..], &mut plain[..], &counts)
                    .expect("allgatherv");
                let blocking = comm.last().map_or("none", |e| e.algorithm);
                let mut send = comm.alloc(counts[me]).expect("alloc");
                let mut recv = comm.alloc(total).expect("alloc");
                let mut request = comm
                    .allgatherv_init(&mut send, &mut recv, &counts)
                    .expect("allgatherv_init");
                if request.algorithm() != blocking {
                    wrong.push(format!(
                        "allgatherv ×{scale}: persistent {}, blocking {blocking}",
                        request.algorithm()
                    ));
                }
                for start in 1..=4 {
                    let got = if blocking_at(start) {
                        let mut plain = vec![0; total];
                        let comm = request.comm().expect("idle");
                        comm.allgatherv(&block(start, me)[..], &mut plain[..], &counts)
                            .expect("allgatherv");
                        plain
                    } else {
                        request
                            .send_buffer_mut()
                            .expect("idle")
                            .copy_from_slice(&block(start, me));
                        request.run().expect("persistent allgatherv");
                        request.buffer().expect("idle").to_vec()
                    };
                    if got != whole(start) {
                        wrong.push(format!("allgatherv ×{scale}, start {start}: wrong"));
                    }
                }
                drop(request);
                let mut request = comm
                    .allgatherv_in_place_init(&mut recv, &counts)
                    .expect("allgatherv_in_place_init");
                for start in 5..=7 {
                    let mine = offsets[me]..offsets[me] + counts[me];
                    let buffer = request.buffer_mut().expect("idle");
                    buffer.fill(0);
                    buffer[mine].copy_from_slice(&block(start, me));
                    request.run().expect("persistent allgatherv in place");
                    if request.buffer().expect("idle") != whole(start) {
                        wrong.push(format!(
                            "allgatherv in place ×{scale}, start {start}: wrong"
                        ));
                    }
                }
                if request.algorithm() != blocking {
                    wrong.push(format!(
                        "allgatherv in place ×{scale}: persistent {}, blocking {blocking}",
                        request.algorithm()
                    ));
                }
            }
            wrong
        });
        for (rank, wrong) in results.iter().enumerate() {
            assert!(wrong.is_empty(), "{hosts:?} rank {rank}: {wrong:?}");
        }
    }
}
