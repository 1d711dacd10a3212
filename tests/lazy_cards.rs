//! Under the built-in launcher (PMI-1, one server for every get) a rank reads a peer's address
//! card when it first writes to that peer, not every card at start: after start-up and a
//! binomial broadcast some rank of 8 has read fewer than 7 cards. A rank that knows few peers
//! and refuses a call reads every card to tell every rank, and every rank gets an error
//! promptly.

use std::process::Command;
use std::time::{Duration, Instant};

use circulant::comm::{Choice, Communicator};

const BIN: &str = env!("CARGO_BIN_EXE_circulant");
const P: usize = 8;

/// Runs `case` of this file on every rank of a job of `P` under `circulant run`; returns the
/// job's output.
fn job(case: &str, provider: &str) -> String {
    let exe = std::env::current_exe().expect("test binary path");
    let out = Command::new(BIN)
        .args(["run", "-n", &P.to_string(), "--provider", provider])
        .args(["--timeout", "120", "--"])
        .arg(exe)
        .args(["--exact", case, "--nocapture", "--test-threads=1"])
        .env("CIRCULANT_LAZY_CARDS_RANK", "1")
        .output()
        .expect("circulant run starts");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{case} on {provider}:\n{all}");
    all
}

fn in_job() -> bool {
    std::env::var_os("CIRCULANT_LAZY_CARDS_RANK").is_some()
}

/// `rank R read N cards` from every rank.
fn cards_read(output: &str) -> Vec<usize> {
    let mut read = vec![usize::MAX; P];
    for line in output.lines() {
        // The test harness may print its own words before ours on the line.
        let Some(at) = line.find("rank ") else {
            continue;
        };
        let words: Vec<&str> = line[at..].split_whitespace().collect();
        if let ["rank", rank, "read", n, "cards"] = words[..] {
            read[rank.parse::<usize>().expect("rank")] = n.parse().expect("count");
        }
    }
    assert!(read.iter().all(|&n| n != usize::MAX), "{output}");
    read
}

#[test]
fn a_binomial_broadcast_reads_few_cards() {
    for provider in ["shm", "tcp;ofi_rxm"] {
        let output = job("rank_broadcast", provider);
        let read = cards_read(&output);
        assert!(read.iter().all(|&n| n <= P - 1), "{provider}: {read:?}");
        assert!(
            read.iter().any(|&n| n < P - 1),
            "{provider}: every rank read every card: {read:?}"
        );
        assert_eq!(output.matches("broadcast passed").count(), P, "{output}");
    }
}

#[test]
fn rank_broadcast() {
    if !in_job() {
        return;
    }
    let mut comm = Communicator::init().expect("init");
    assert_eq!(comm.launcher(), "pmi-1");
    let (rank, p) = (comm.rank(), comm.size());
    assert_eq!(p, P);
    let at_start = comm.cards_fetched();
    let mut data = vec![0u8; 4096];
    if rank == 0 {
        data.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    }
    comm.bcast_using(&mut data[..], 0, Choice::Named("binomial-bcast"))
        .expect("bcast");
    assert!(data.iter().enumerate().all(|(i, &b)| b == i as u8));
    let read = comm.cards_fetched();
    assert!(read >= at_start && read < p);
    println!("rank {rank} read {read} cards");
    println!("rank {rank}: broadcast passed");
}

#[test]
fn an_abort_reaches_ranks_whose_cards_were_not_read() {
    let output = job("rank_abort", "shm");
    assert_eq!(output.matches("abort passed").count(), P, "{output}");
}

#[test]
fn rank_abort() {
    if !in_job() {
        return;
    }
    let mut comm = Communicator::init().expect("init");
    let rank = comm.rank();
    comm.set_deadline(Duration::from_secs(30));
    let mut data = vec![0u8; 64];
    comm.bcast_using(&mut data[..], 0, Choice::Named("binomial-bcast"))
        .expect("bcast");
    // The last rank refuses the next broadcast without having read every card: it reads
    // them to tell every rank. Every other rank gets an error for that broadcast or the next.
    let last = P - 1;
    let started = Instant::now();
    if rank == last {
        assert!(comm.cards_fetched() < P - 1, "rank {rank} read every card");
        comm.refuse("bcast", "refused by the test");
        assert_eq!(comm.cards_fetched(), P - 1, "the abort went to every rank");
    } else {
        let mut bcast = || comm.bcast_using(&mut data[..], 0, Choice::Named("binomial-bcast"));
        let result = bcast().and_then(|()| bcast());
        assert!(result.is_err(), "rank {rank}: two broadcasts returned Ok");
        // An abort, not the deadline.
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "rank {rank} waited {:?}: {result:?}",
            started.elapsed()
        );
    }
    println!("rank {rank}: abort passed");
}
