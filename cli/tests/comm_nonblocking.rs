//! Nonblocking collectives (`Communicator::i*`, `Request::test`/`wait`) between real
//! processes under `circulant run`, this test binary being the ranks (`rank_role`, selected
//! by CIRCULANT_TEST_ROLE); and `Communicator::init_oob` over an allgather between threads.

mod common;

use std::process::Output;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use circulant::comm::{Choice, CommError, Communicator, Request};
use circulant::plan::ReduceOp;
use common::{output_text as text, Job};

/// This test binary as the ranks of a job of `n`, in role `role`.
fn roles(n: usize, provider: &str, role: &str, timeout: &str) -> Output {
    Job::new(n, 120)
        .provider(provider)
        .envs(&[("CIRCULANT_TIMEOUT", timeout)])
        .test_binary("rank_role", role)
}

#[test]
fn every_nonblocking_collective_gives_the_blocking_result() {
    for provider in ["shm", "tcp;ofi_rxm"] {
        let out = roles(4, provider, "all", "60");
        let all = text(&out);
        assert!(out.status.success(), "{provider}:\n{all}");
        assert_eq!(
            all.matches("nonblocking ok").count(),
            4,
            "{provider}:\n{all}"
        );
    }
}

#[test]
fn a_silent_peer_makes_test_fail_within_the_deadline() {
    let started = Instant::now();
    let out = roles(3, "shm", "silent", "2");
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert_eq!(all.matches("test failed in time").count(), 2, "{all}");
    assert!(all.contains("timed out after 2s"), "{all}");
    assert!(started.elapsed() < Duration::from_secs(60), "{all}");
}

/// Entry point of the ranks of the jobs above.
#[test]
#[ignore = "a rank of the jobs this file's tests start; not a test on its own"]
fn rank_role() {
    let role = common::role("CIRCULANT_TEST_ROLE");
    let mut comm = Communicator::init().expect("init");
    match role.as_str() {
        "all" => all_collectives(&mut comm),
        "silent" => silent(&mut comm),
        other => panic!("unknown role {other}"),
    }
}

/// Tests `request` until it completes, returning how many tests it took.
fn complete(mut request: Request<'_>) -> usize {
    let mut tests = 0;
    while !request.test().expect("test") {
        tests += 1;
        std::thread::yield_now();
    }
    request.wait().expect("wait after test");
    tests
}

fn byte(owner: usize, i: usize) -> u8 {
    (owner * 41 + i * 13 + 5) as u8
}

fn all_collectives(comm: &mut Communicator) {
    let (rank, p) = (comm.rank(), comm.size());

    // Broadcast, on a registered buffer and on a plain one.
    for root in 0..p {
        let mut registered = comm.alloc(5000).expect("alloc");
        let mut plain = vec![0u8; 777];
        if rank == root {
            registered
                .iter_mut()
                .enumerate()
                .for_each(|(i, x)| *x = byte(root, i));
            plain
                .iter_mut()
                .enumerate()
                .for_each(|(i, x)| *x = byte(root, i));
        }
        complete(comm.ibcast(&mut registered, root).expect("ibcast"));
        comm.ibcast(&mut plain[..], root)
            .expect("ibcast")
            .wait()
            .expect("wait");
        assert!(registered
            .iter()
            .enumerate()
            .all(|(i, &x)| x == byte(root, i)));
        assert!(plain.iter().enumerate().all(|(i, &x)| x == byte(root, i)));
    }

    // Allgather(v), also in place.
    let counts: Vec<usize> = (0..p).map(|r| (r % 3) * 100 + 1).collect();
    let offset: usize = counts[..rank].iter().sum();
    let mine: Vec<u8> = (0..counts[rank]).map(|i| byte(rank, i)).collect();
    let expected: Vec<u8> = (0..p)
        .flat_map(|r| (0..counts[r]).map(move |i| byte(r, i)))
        .collect();
    let mut all = vec![0u8; expected.len()];
    complete(
        comm.iallgatherv(&mine[..], &mut all[..], &counts)
            .expect("iallgatherv"),
    );
    assert_eq!(all, expected);
    let mut in_place = comm.alloc(expected.len()).expect("alloc");
    in_place[offset..offset + mine.len()].copy_from_slice(&mine);
    complete(
        comm.iallgatherv_in_place(&mut in_place, &counts)
            .expect("in place"),
    );
    assert_eq!(&in_place[..], &expected[..]);
    let block = [rank as u8; 3];
    let mut blocks = vec![0u8; 3 * p];
    complete(
        comm.iallgather(&block[..], &mut blocks[..])
            .expect("iallgather"),
    );
    assert!(blocks.chunks(3).enumerate().all(|(r, b)| b == [r as u8; 3]));
    let mut blocks = vec![0u8; 3 * p];
    blocks[3 * rank..3 * rank + 3].copy_from_slice(&block);
    complete(comm.iallgather_in_place(&mut blocks[..]).expect("in place"));
    assert!(blocks.chunks(3).enumerate().all(|(r, b)| b == [r as u8; 3]));

    // Reductions.
    let send: Vec<i64> = (0..100).map(|i| i * (rank as i64 + 1)).collect();
    let mut sum = vec![0i64; 100];
    let factor = (p * (p + 1) / 2) as i64;
    complete(
        comm.iallreduce(&send, &mut sum, ReduceOp::Sum)
            .expect("iallreduce"),
    );
    assert!(sum.iter().enumerate().all(|(i, &s)| s == i as i64 * factor));
    let mut max = vec![0f64; 1];
    complete(
        comm.iallreduce(&[rank as f64], &mut max, ReduceOp::Max)
            .expect("max"),
    );
    assert_eq!(max[0], (p - 1) as f64);
    for root in 0..p {
        let mut at_root = vec![0u32; 2];
        let values = [1u32 << rank, 1];
        complete(
            comm.ireduce(&values, &mut at_root, ReduceOp::Bor, root)
                .expect("ireduce"),
        );
        if rank == root {
            assert_eq!(at_root, [(1u32 << p) - 1, 1]);
        }
    }
    let mut prefix = [0i32];
    complete(
        comm.iscan(&[rank as i32 + 1], &mut prefix, ReduceOp::Sum)
            .expect("iscan"),
    );
    assert_eq!(prefix[0] as usize, (rank + 1) * (rank + 2) / 2);
    let mut before = [-1i32];
    complete(
        comm.iexscan(&[rank as i32 + 1], &mut before, ReduceOp::Sum)
            .expect("iexscan"),
    );
    let want = if rank == 0 {
        -1
    } else {
        (rank * (rank + 1) / 2) as i32
    };
    assert_eq!(before[0], want);
    reduce_scatters(comm);

    // Rooted and all-to-all.
    let root = p - 1;
    let mut gathered = vec![0u8; if rank == root { 2 * p } else { 0 }];
    complete(
        comm.igather(&[rank as u8, 7][..], &mut gathered[..], root)
            .expect("igather"),
    );
    if rank == root {
        assert!(gathered
            .chunks(2)
            .enumerate()
            .all(|(r, b)| b == [r as u8, 7]));
    }
    let mut part = [0u8; 2];
    complete(
        comm.iscatter(&gathered[..], &mut part[..], root)
            .expect("iscatter"),
    );
    assert_eq!(part, [rank as u8, 7]);
    let mut whole = vec![0u8; if rank == 0 { expected.len() } else { 0 }];
    complete(
        comm.igatherv(&mine[..], &mut whole[..], &counts, 0)
            .expect("igatherv"),
    );
    if rank == 0 {
        assert_eq!(whole, expected);
    }
    let mut back = vec![0u8; counts[rank]];
    complete(
        comm.iscatterv(&whole[..], &mut back[..], &counts, 0)
            .expect("iscatterv"),
    );
    assert_eq!(back, mine);
    let to: Vec<u8> = (0..p).map(|r| (rank * 10 + r) as u8).collect();
    let mut from = vec![0u8; p];
    complete(comm.ialltoall(&to[..], &mut from[..]).expect("ialltoall"));
    assert!(from
        .iter()
        .enumerate()
        .all(|(r, &x)| x as usize == r * 10 + rank));
    complete(comm.ibarrier().expect("ibarrier"));

    // A request dropped without wait completes before the borrow ends.
    let mut late = vec![0u8; 10];
    if rank == 0 {
        late.fill(9);
    }
    drop(comm.ibcast(&mut late[..], 0).expect("ibcast"));
    assert_eq!(late, [9u8; 10]);
    comm.barrier().expect("the communicator works afterwards");
    println!("nonblocking ok");
}

/// The nonblocking reduce-scatters, typed, of equal blocks and at counts with empty parts,
/// small (on one host the automatic choice takes the shared segment) and large (a plan), with
/// the automatic choice and each algorithm forced, against the reduction computed here.
fn reduce_scatters(comm: &mut Communicator) {
    let (rank, p) = (comm.rank(), comm.size());
    // Element i of rank r's vector: whole numbers, exact in f64.
    let term = |r: usize, i: usize| ((r * 7919 + i * 104_729) % 10_007) as i64 - 5000;
    let sum = |i: usize| (0..p).map(|r| term(r, i)).sum::<i64>();
    let min = |i: usize| (0..p).map(|r| term(r, i) as f64).fold(f64::MAX, f64::min);
    for (elements, small) in [(3, true), (2000, false)] {
        let counts: Vec<usize> = (0..p).map(|r| (r % 3) * elements / 2).collect();
        let offset: usize = counts[..rank].iter().sum();
        let total: usize = counts.iter().sum();
        let mine: Vec<i64> = (0..elements * p).map(|i| term(rank, i)).collect();
        let mine_f64: Vec<f64> = (0..total).map(|i| term(rank, i) as f64).collect();
        for (block_choice, choice) in common::REDUCE_SCATTER_ALGORITHMS {
            let what = format!("{elements} elements, {choice:?}");
            if !small && matches!(choice, Choice::Named(n) if n.starts_with("segment-")) {
                continue; // the segment folds no more than its limit
            }
            let mut block = vec![0i64; elements];
            complete(
                comm.choosing(block_choice)
                    .ireduce_scatter_block(&mine, &mut block, ReduceOp::Sum)
                    .expect("ireduce_scatter_block"),
            );
            let ran_block = comm.last().expect("a call ran").algorithm;
            let want: Vec<i64> = (rank * elements..(rank + 1) * elements).map(sum).collect();
            assert_eq!(block, want, "ireduce_scatter_block, {what}");
            let mut part = vec![f64::NAN; counts[rank]];
            comm.choosing(choice)
                .ireduce_scatter(&mine_f64, &mut part, ReduceOp::Min, &counts)
                .expect("ireduce_scatter")
                .wait()
                .expect("wait");
            let ran = comm.last().expect("a call ran").algorithm;
            let want: Vec<f64> = (offset..offset + counts[rank]).map(min).collect();
            assert_eq!(part, want, "ireduce_scatter, {what}");
            match (block_choice, choice) {
                (Choice::Named(block_name), Choice::Named(name)) => {
                    assert_eq!((ran_block, ran), (block_name, name), "{what}")
                }
                // On one host small reductions run on the shared segment, large ones as plans.
                _ => {
                    assert_eq!(
                        ran_block.starts_with("segment-"),
                        small,
                        "{what}: {ran_block}"
                    );
                    assert_eq!(ran.starts_with("segment-"), small, "{what}: {ran}");
                }
            }
        }
    }
}

/// Rank 1 never joins the allreduce: the others, only testing, fail at the deadline.
fn silent(comm: &mut Communicator) {
    let mut sum = [0u32; 16];
    if comm.rank() == 1 {
        std::thread::sleep(Duration::from_secs(6));
        return;
    }
    let started = Instant::now();
    let mut request = comm
        .iallreduce(&[1u32; 16], &mut sum, ReduceOp::Sum)
        .expect("iallreduce starts");
    let err = loop {
        match request.test() {
            Ok(true) => panic!("completed without rank 1"),
            Ok(false) => std::thread::sleep(Duration::from_millis(1)),
            Err(err) => break err,
        }
    };
    assert!(matches!(err, CommError::Transport(_)), "{err}");
    // The first rank to reach the deadline aborts the operation on the others.
    let text = err.to_string();
    assert!(
        text.contains("timed out") || text.contains("aborted"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "{err}");
    // The failure sticks: wait reports it again.
    assert!(request.wait().is_err());
    println!("test failed in time: {err}");
}

/// Two threads of this process bootstrap through an allgather over shared memory.
#[test]
fn init_oob_bootstraps_through_the_callers_allgather() {
    let n = 2;
    let barrier = Arc::new(Barrier::new(n));
    let slots = Arc::new(Mutex::new(vec![Vec::new(); n]));
    let threads: Vec<_> = (0..n)
        .map(|rank| {
            let (barrier, slots) = (Arc::clone(&barrier), Arc::clone(&slots));
            std::thread::spawn(move || {
                let allgather = move |send: &[u8], recv: &mut [u8]| {
                    slots.lock().map_err(|e| e.to_string())?[rank] = send.to_vec();
                    barrier.wait();
                    let all = slots.lock().map_err(|e| e.to_string())?.concat();
                    barrier.wait();
                    if all.len() != recv.len() {
                        return Err(format!("{} bytes for {}", all.len(), recv.len()));
                    }
                    recv.copy_from_slice(&all);
                    Ok(())
                };
                let mut comm = Communicator::init_oob(rank, n, allgather).expect("init_oob");
                assert_eq!(
                    (comm.rank(), comm.size(), comm.launcher()),
                    (rank, n, "oob")
                );
                let mut sum = [0u64];
                comm.allreduce(&[rank as u64 + 1], &mut sum, ReduceOp::Sum)
                    .expect("allreduce");
                sum[0]
            })
        })
        .collect();
    for thread in threads {
        assert_eq!(thread.join().expect("thread"), 3);
    }
}

/// The allgathers an out-of-band start-up of 2 threads makes, run in a child process (the
/// configuration comes from the environment, which threads of this process share).
fn oob_allgathers(env: &[(&str, &str)]) -> usize {
    let mut cmd = common::entry_command("oob_role");
    cmd.env("CIRCULANT_TEST_ROLE", "oob")
        .env("CIRCULANT_TIMEOUT", "30")
        .env_remove("CIRCULANT_PROVIDER")
        .env_remove("FI_PROVIDER")
        .env_remove("CIRCULANT_LOOPBACK");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the test binary starts");
    let all = text(&out);
    assert!(out.status.success(), "{env:?}:\n{all}");
    common::assert_entry_ran(&all, "oob_role");
    all.lines()
        .find_map(|l| {
            l.split_once("allgathers ")
                .map(|(_, n)| n.trim().to_string())
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in:\n{all}"))
}

/// Without a node map (the out-of-band bootstrap knows none) start-up exchanges every rank's
/// host before the provider is chosen, unless the provider does not depend on it (configured
/// and not pinned to loopback): then the hosts go with the cards' exchange.
#[test]
fn the_host_exchange_is_skipped_where_nothing_depends_on_it() {
    let provider = ("CIRCULANT_PROVIDER", "tcp;ofi_rxm");
    let with_hosts = oob_allgathers(&[provider]);
    let without = oob_allgathers(&[provider, ("CIRCULANT_LOOPBACK", "0")]);
    // A fence is two allgathers (the lengths, then the records): one exchange against two.
    assert_eq!(without, 2, "{without} allgathers");
    assert_eq!(with_hosts, 4, "{with_hosts} allgathers");
    assert_eq!(oob_allgathers(&[]), with_hosts);
}

/// The process of `oob_allgathers`.
#[test]
#[ignore = "run by this file's host exchange test; not a test on its own"]
fn oob_role() {
    assert_eq!(common::role("CIRCULANT_TEST_ROLE"), "oob");
    let n = 2;
    let barrier = Arc::new(Barrier::new(n));
    let slots = Arc::new(Mutex::new(vec![Vec::new(); n]));
    let calls = Arc::new(Mutex::new(0usize));
    let threads: Vec<_> = (0..n)
        .map(|rank| {
            let (barrier, slots, calls) =
                (Arc::clone(&barrier), Arc::clone(&slots), Arc::clone(&calls));
            std::thread::spawn(move || {
                let allgather = move |send: &[u8], recv: &mut [u8]| {
                    if rank == 0 {
                        *calls.lock().map_err(|e| e.to_string())? += 1;
                    }
                    slots.lock().map_err(|e| e.to_string())?[rank] = send.to_vec();
                    barrier.wait();
                    let all = slots.lock().map_err(|e| e.to_string())?.concat();
                    barrier.wait();
                    recv.copy_from_slice(&all);
                    Ok(())
                };
                let mut comm = Communicator::init_oob(rank, n, allgather).expect("init_oob");
                let mut sum = [0u64];
                comm.allreduce(&[rank as u64 + 1], &mut sum, ReduceOp::Sum)
                    .expect("allreduce");
                assert_eq!(sum[0], 3);
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("thread");
    }
    println!("allgathers {}", calls.lock().expect("count"));
}

#[test]
fn init_oob_reports_a_failing_allgather_and_bad_ranks() {
    let err = Communicator::init_oob(0, 2, |_: &[u8], _: &mut [u8]| Err("no peers".into()))
        .expect_err("must fail");
    assert!(err.to_string().contains("no peers"), "{err}");
    let err = Communicator::init_oob(3, 2, |_: &[u8], _: &mut [u8]| Ok(())).expect_err("rank");
    assert!(err.to_string().contains("rank 3"), "{err}");
}
