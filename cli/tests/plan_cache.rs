//! The plan cache between real processes: this test binary runs as the ranks of a job under the
//! built-in launcher (`rank_role`, selected by CIRCULANT_TEST_ROLE) and checks
//! [`Communicator::plan_cache_stats`] after every call: repeated calls hit, calls with another
//! root, size, count vector, reduction or algorithm miss, the least recently used plan is
//! evicted at the bound (`CIRCULANT_PLAN_CACHE`), `0` turns the cache off, a persistent request
//! plans once through the same cache, and every result is checked. Ranks that disagree after their plans were cached still all get an error.
//!
//! Every job is bounded by the launcher's `--timeout`; the launcher stops every rank it
//! started.

mod common;

use std::process::Output;

use common::{output_text as text, Job};

use circulant::comm::{Choice, CommError, Communicator, Config, PLAN_CACHE_ENV};
use circulant::plan::{Problem, ReduceOp};

/// This test binary as rank `role` of an `n`-rank job with `env`.
fn roles(n: usize, provider: &str, role: &str, env: &[(&str, &str)]) -> Output {
    Job::new(n, 120)
        .provider(provider)
        // Calls that run on the shared segment have no plan to cache: off here.
        .envs(&[
            ("CIRCULANT_TIMEOUT", "30"),
            ("CIRCULANT_SEGMENT_LIMIT", "0"),
        ])
        .envs(env)
        .test_binary("rank_role", role)
}

/// Runs `role` on 4 ranks and expects `ok` from each of them.
fn expect_ok(provider: &str, role: &str, env: &[(&str, &str)], ok: &str) {
    let out = roles(4, provider, role, env);
    let all = text(&out);
    assert!(out.status.success(), "{provider} {role} {env:?}:\n{all}");
    assert_eq!(all.matches(ok).count(), 4, "{provider} {role}:\n{all}");
}

#[test]
fn repeated_calls_hit_and_the_least_recently_used_plan_is_evicted() {
    for provider in ["shm", "tcp;ofi_rxm"] {
        expect_ok(provider, "bounded", &[(PLAN_CACHE_ENV, "4")], "bounded ok");
    }
}

#[test]
fn every_argument_that_shapes_the_plan_is_part_of_the_key() {
    expect_ok("shm", "arguments", &[], "arguments ok");
    // With the full argument check, which still runs on every call (hit or not).
    expect_ok(
        "shm",
        "arguments",
        &[("CIRCULANT_CHECK", "1")],
        "arguments ok",
    );
}

#[test]
fn persistent_requests_plan_once_through_the_same_cache() {
    for check in ["0", "1"] {
        expect_ok(
            "shm",
            "persistent",
            &[("CIRCULANT_CHECK", check)],
            "persistent ok",
        );
    }
}

#[test]
fn a_cache_of_zero_plans_is_off() {
    expect_ok("shm", "off", &[(PLAN_CACHE_ENV, "0")], "off ok");
}

#[test]
fn ranks_that_disagree_after_a_cached_call_all_get_an_error() {
    for check in ["0", "1"] {
        let out = roles(4, "shm", "disagree", &[("CIRCULANT_CHECK", check)]);
        let all = text(&out);
        assert!(out.status.success(), "check {check}:\n{all}");
        assert_eq!(all.matches("disagreement detected").count(), 4, "{all}");
    }
}

#[test]
fn bad_cache_sizes_are_refused() {
    // Alone, without the launcher: the role sets the environment and joins no job.
    let out = common::entry_command("rank_role")
        .env("CIRCULANT_TEST_ROLE", "config")
        .env_remove(PLAN_CACHE_ENV)
        .output()
        .expect("the test binary starts");
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    common::assert_entry_ran(&all, "rank_role");
    assert!(all.contains("config ok"), "{all}");
}

/// Entry point of the ranks of the jobs above.
#[test]
#[ignore = "a rank of the jobs this file's tests start; not a test on its own"]
fn rank_role() {
    let role = common::role("CIRCULANT_TEST_ROLE");
    if role == "config" {
        return config();
    }
    let mut comm = Communicator::init().expect("init");
    match role.as_str() {
        "bounded" => bounded(&mut comm),
        "arguments" => arguments(&mut comm),
        "off" => off(&mut comm),
        "disagree" => disagree(&mut comm),
        "persistent" => persistent(&mut comm),
        other => panic!("unknown role {other}"),
    }
}

/// The counts since `before`: (hits, misses).
fn since(comm: &Communicator, before: (u64, u64)) -> (u64, u64) {
    let (hits, misses) = comm.plan_cache_stats();
    (hits - before.0, misses - before.1)
}

fn pattern(step: usize, root: usize, k: usize) -> u8 {
    (step * 37 + root * 101 + k * 13 + 5) as u8
}

/// A broadcast of `len` bytes from `root` on registered memory, its result checked; returns
/// the (hits, misses) it added.
fn bcast(
    comm: &mut Communicator,
    step: usize,
    len: usize,
    root: usize,
    choice: Choice<'_>,
) -> (u64, u64) {
    let before = comm.plan_cache_stats();
    let mut buf = comm.alloc(len).expect("alloc");
    if comm.rank() == root {
        for (k, x) in buf.iter_mut().enumerate() {
            *x = pattern(step, root, k);
        }
    }
    comm.choosing(choice)
        .bcast(&mut buf, root)
        .unwrap_or_else(|e| panic!("bcast {step}: {e}"));
    assert!(
        buf.iter()
            .enumerate()
            .all(|(k, &x)| x == pattern(step, root, k)),
        "bcast {step} (root {root}, {len} bytes) delivered wrong data"
    );
    since(comm, before)
}

const HIT: (u64, u64) = (1, 0);
const MISS: (u64, u64) = (0, 1);

/// A cache of 4 plans (`CIRCULANT_PLAN_CACHE=4`): hits on repeats, misses on another root,
/// size or algorithm, and eviction of the least recently used plan.
fn bounded(comm: &mut Communicator) {
    let p = comm.size();
    let (a, b) = (0, p - 1);
    // The plans kept, least recently used first: [barrier (from init)].
    assert_eq!(bcast(comm, 0, 1000, a, Choice::Auto), MISS);
    assert_eq!(bcast(comm, 1, 1000, a, Choice::Auto), HIT);
    assert_eq!(bcast(comm, 2, 1000, a, Choice::Auto), HIT);
    let chosen = comm.last().expect("a bcast ran").algorithm;
    // [barrier, a]
    assert_eq!(bcast(comm, 3, 1000, b, Choice::Auto), MISS, "another root");
    assert_eq!(bcast(comm, 4, 1000, a, Choice::Auto), HIT);
    // [barrier, b, a]
    assert_eq!(bcast(comm, 5, 1001, a, Choice::Auto), MISS, "another size");
    // [barrier, b, a, a+1]: full. Forcing an algorithm is another call, even the one the
    // automatic choice made; another algorithm is too. Each evicts the oldest plan.
    let problem = Problem::Broadcast {
        p,
        root: a,
        bytes: 1000,
    };
    let other = comm
        .algorithms(&problem)
        .expect("algorithms")
        .into_iter()
        .map(|(name, _)| name)
        .find(|&name| name != chosen)
        .expect("a second broadcast algorithm");
    assert_eq!(bcast(comm, 6, 1000, a, Choice::Named(chosen)), MISS);
    assert_eq!(comm.last().expect("ran").algorithm, chosen);
    // [b, a, a+1, forced chosen]: the barrier's plan is gone.
    assert_eq!(bcast(comm, 7, 1000, a, Choice::Named(other)), MISS);
    assert_eq!(comm.last().expect("ran").algorithm, other);
    // [a, a+1, chosen, other]: root b's plan is gone.
    assert_eq!(bcast(comm, 8, 1000, a, Choice::Auto), HIT);
    assert_eq!(bcast(comm, 9, 1000, a, Choice::Named(other)), HIT);
    assert_eq!(comm.last().expect("ran").algorithm, other);
    // [a+1, chosen, a, other]
    let before = comm.plan_cache_stats();
    comm.barrier().expect("barrier");
    assert_eq!(since(comm, before), MISS, "the barrier's plan was evicted");
    // [chosen, a, other, barrier]
    assert_eq!(
        bcast(comm, 10, 1000, b, Choice::Auto),
        MISS,
        "root b was evicted"
    );
    // [a, other, barrier, b]
    assert_eq!(
        bcast(comm, 11, 1001, a, Choice::Auto),
        MISS,
        "a+1 was evicted"
    );
    // [other, barrier, b, a+1]
    assert_eq!(
        bcast(comm, 12, 1000, a, Choice::Auto),
        MISS,
        "a was evicted"
    );
    assert_eq!(comm.last().expect("ran").algorithm, chosen);
    assert_eq!(bcast(comm, 13, 1000, b, Choice::Auto), HIT);
    assert_eq!(bcast(comm, 14, 1001, a, Choice::Auto), HIT);
    // A new cost model may choose differently: every plan is dropped.
    let model = comm.model();
    comm.set_model(model);
    assert_eq!(
        bcast(comm, 15, 1001, a, Choice::Auto),
        MISS,
        "after set_model"
    );
    assert_eq!(bcast(comm, 16, 1001, a, Choice::Auto), HIT);
    println!("bounded ok on rank {}", comm.rank());
}

/// The default cache: counts, reductions, element types, in place and the nonblocking forms,
/// on plain (staged) memory, every result checked.
fn arguments(comm: &mut Communicator) {
    let (rank, p) = (comm.rank(), comm.size());
    let before = comm.plan_cache_stats();
    // Allgatherv from plain memory: the same counts hit whatever the buffers are.
    let counts_a: Vec<usize> = (0..p).map(|r| 100 + 7 * r).collect();
    let counts_b: Vec<usize> = (0..p).map(|r| 100 + 7 * (p - 1 - r)).collect();
    for (step, counts) in [&counts_a, &counts_a, &counts_b, &counts_a, &counts_b]
        .into_iter()
        .enumerate()
    {
        let send: Vec<u8> = (0..counts[rank]).map(|k| pattern(step, rank, k)).collect();
        let mut recv = vec![0u8; counts.iter().sum()];
        comm.allgatherv(&send[..], &mut recv[..], counts)
            .unwrap_or_else(|e| panic!("allgatherv {step}: {e}"));
        let mut at = 0;
        for (owner, &c) in counts.iter().enumerate() {
            for k in 0..c {
                assert_eq!(recv[at], pattern(step, owner, k), "allgatherv {step}");
                at += 1;
            }
        }
    }
    assert_eq!(since(comm, before), (3, 2), "counts a, a, b, a, b");

    // In place is another call than with a separate send buffer.
    let before = comm.plan_cache_stats();
    for step in 0..2 {
        let mut recv = vec![0u8; counts_a.iter().sum()];
        let mine: usize = counts_a[..rank].iter().sum();
        for k in 0..counts_a[rank] {
            recv[mine + k] = pattern(step, rank, k);
        }
        comm.allgatherv_in_place(&mut recv[..], &counts_a)
            .unwrap_or_else(|e| panic!("in place {step}: {e}"));
        let mut at = 0;
        for (owner, &c) in counts_a.iter().enumerate() {
            for k in 0..c {
                assert_eq!(recv[at], pattern(step, owner, k), "in place {step}");
                at += 1;
            }
        }
    }
    assert_eq!(since(comm, before), (1, 1), "in place, twice");

    // Reductions: the operator and the element type are part of the key.
    let before = comm.plan_cache_stats();
    for step in 0..2 {
        let send: Vec<i32> = (0..64).map(|k| (rank * 1000 + k + step) as i32).collect();
        let mut sum = vec![0i32; 64];
        comm.allreduce(&send, &mut sum, ReduceOp::Sum)
            .expect("allreduce sum");
        let mut max = vec![0i32; 64];
        comm.allreduce(&send, &mut max, ReduceOp::Max)
            .expect("allreduce max");
        for k in 0..64 {
            let want: i32 = (0..p).map(|r| (r * 1000 + k + step) as i32).sum();
            assert_eq!(sum[k], want, "sum {step}");
            assert_eq!(max[k], ((p - 1) * 1000 + k + step) as i32, "max {step}");
        }
        let send: Vec<u32> = (0..64).map(|k| (rank + k + step) as u32).collect();
        let mut sum = vec![0u32; 64];
        comm.allreduce(&send, &mut sum, ReduceOp::Sum)
            .expect("allreduce u32");
        for (k, &s) in sum.iter().enumerate() {
            let want: u32 = (0..p).map(|r| (r + k + step) as u32).sum();
            assert_eq!(s, want, "u32 sum {step}");
        }
    }
    assert_eq!(
        since(comm, before),
        (3, 3),
        "i32 sum, i32 max, u32 sum, twice"
    );

    // Rooted calls: the root is part of the key; the nonblocking form shares the blocking
    // one's plans.
    let before = comm.plan_cache_stats();
    for (step, root) in [0, 1, 0, 1].into_iter().enumerate() {
        let send = [pattern(step, rank, 0); 40];
        let mut recv = vec![0u8; if rank == root { 40 * p } else { 0 }];
        if step < 2 {
            comm.gather(&send[..], &mut recv[..], root)
                .unwrap_or_else(|e| panic!("gather {step}: {e}"));
        } else {
            let mut request = comm
                .igather(&send[..], &mut recv[..], root)
                .unwrap_or_else(|e| panic!("igather {step}: {e}"));
            while !request.test().expect("test") {}
            request.wait().expect("wait");
        }
        if rank == root {
            for r in 0..p {
                assert!(
                    recv[40 * r..40 * (r + 1)]
                        .iter()
                        .all(|&x| x == pattern(step, r, 0)),
                    "gather {step}"
                );
            }
        }
    }
    assert_eq!(since(comm, before), (2, 2), "roots 0, 1, 0, 1");
    println!("arguments ok on rank {rank}");
}

/// `CIRCULANT_PLAN_CACHE=0`: every call plans, nothing hits, the results are right.
fn off(comm: &mut Communicator) {
    for step in 0..5 {
        assert_eq!(
            bcast(comm, step, 777, step % comm.size(), Choice::Auto),
            MISS
        );
        assert_eq!(bcast(comm, step, 777, 0, Choice::Auto), MISS);
    }
    assert_eq!(comm.plan_cache_stats().0, 0);
    println!("off ok on rank {}", comm.rank());
}

/// A persistent broadcast is planned once, by the path of every call: it takes the plan of
/// an earlier broadcast with the same arguments, its starts touch the cache no more, and a
/// later broadcast with the same arguments finds its plan too.
fn persistent(comm: &mut Communicator) {
    let root = comm.size() - 1;
    assert_eq!(bcast(comm, 0, 3000, root, Choice::Auto), MISS);
    let mut buf = comm.alloc(3000).expect("alloc");
    let before = comm.plan_cache_stats();
    let mut request = comm.bcast_init(&mut buf, root).expect("bcast_init");
    assert_eq!(since(request.comm().expect("idle"), before), HIT);
    for step in 1..4 {
        if request.rank() == root {
            for (k, x) in request.buffer_mut().expect("idle").iter_mut().enumerate() {
                *x = pattern(step, root, k);
            }
        }
        request
            .run()
            .unwrap_or_else(|e| panic!("start {step}: {e}"));
        let data = request.buffer().expect("idle");
        assert!(
            data.iter()
                .enumerate()
                .all(|(k, &x)| x == pattern(step, root, k)),
            "persistent bcast {step} delivered wrong data"
        );
    }
    assert_eq!(since(request.comm().expect("idle"), before), HIT, "starts");
    drop(request);
    // Another size: the persistent request plans (a miss) and keeps that plan for later calls.
    let mut other = comm.alloc(3001).expect("alloc");
    let before = comm.plan_cache_stats();
    let mut request = comm.bcast_init(&mut other, root).expect("bcast_init");
    request.run().expect("start");
    drop(request);
    assert_eq!(since(comm, before), MISS);
    assert_eq!(bcast(comm, 4, 3001, root, Choice::Auto), HIT);
    println!("persistent ok on rank {}", comm.rank());
}

/// Two allgathervs that every rank plans alike (the second from the cache), then one whose
/// counts differ on rank 2: every rank gets an error, from the ready tokens' digest or from the
/// full check.
fn disagree(comm: &mut Communicator) {
    let (rank, p) = (comm.rank(), comm.size());
    let mut counts = vec![1000usize; p];
    for step in 0..3 {
        if step == 2 && rank == 2 {
            counts[3] = 500;
        }
        let send = vec![rank as u8; counts[rank]];
        let mut recv = comm.alloc(counts.iter().sum()).expect("alloc");
        let before = comm.plan_cache_stats();
        let result = comm.allgatherv(&send[..], &mut recv, &counts);
        match (step, result) {
            (0 | 1, Ok(())) => {
                assert_eq!(since(comm, before), if step == 0 { MISS } else { HIT });
                for (owner, part) in recv.chunks(1000).enumerate() {
                    assert!(part.iter().all(|&x| x == owner as u8), "step {step}");
                }
            }
            (2, Err(err)) => println!("rank {rank}: disagreement detected: {err}"),
            (_, result) => panic!("rank {rank}: allgatherv {step}: {result:?}"),
        }
    }
    let mut recv = comm.alloc(1000 * p).expect("alloc");
    assert!(matches!(
        comm.allgatherv(&[rank as u8; 1000][..], &mut recv, &vec![1000; p]),
        Err(CommError::Transport(_))
    ));
}

/// The variable's values are range-checked (runs alone: it sets the environment).
fn config() {
    let parse = |value: &str| {
        std::env::set_var(PLAN_CACHE_ENV, value);
        Config::from_env()
    };
    assert_eq!(parse("0").expect("0").plan_cache, 0);
    assert_eq!(parse(" 12 ").expect("12").plan_cache, 12);
    assert_eq!(parse("65536").expect("the bound").plan_cache, 65536);
    for bad in ["65537", "-1", "many", "1.5"] {
        let err = parse(bad).expect_err(bad);
        assert!(err.to_string().contains(PLAN_CACHE_ENV), "{err}");
    }
    std::env::remove_var(PLAN_CACHE_ENV);
    assert_eq!(Config::from_env().expect("default").plan_cache, 64);
    println!("config ok");
}
