//! Under the built-in launcher (PMI-1, one server for every get) a rank reads a peer's address
//! card when it first writes to that peer, not every card at start: after start-up and a
//! binomial broadcast some rank of 8 has read fewer than 7 cards. A rank that knows few peers
//! and refuses a call reads every card to tell every rank, and every rank gets an error
//! promptly. A PMI server that does not answer a card's get is an error within the
//! operation's deadline.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use circulant::bootstrap::{Bootstrap, BootstrapOptions, ServerAddress};
use circulant::comm::{Choice, Communicator, Config};

const BIN: &str = env!("CARGO_BIN_EXE_circulant");
const P: usize = 8;

/// Runs `case` of this file on every rank of a job of `P` under `circulant run`; returns the
/// job's output.
fn job(case: &str, provider: &str) -> String {
    let out = Command::new(BIN)
        .args(["run", "-n", &P.to_string(), "--provider", provider])
        .args(["--timeout", "120", "--"])
        .args(common::entry_program(case))
        .env("CIRCULANT_LAZY_CARDS_RANK", "1")
        .output()
        .expect("circulant run starts");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{case} on {provider}:\n{all}");
    common::assert_entry_ran(&all, case);
    all
}

/// Fails unless this process is a rank of a job that `job` started.
fn in_job() {
    common::role("CIRCULANT_LAZY_CARDS_RANK");
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
        assert!(read.iter().all(|&n| n < P), "{provider}: {read:?}");
        assert!(
            read.iter().any(|&n| n < P - 1),
            "{provider}: every rank read every card: {read:?}"
        );
        assert_eq!(output.matches("broadcast passed").count(), P, "{output}");
    }
}

#[test]
#[ignore = "a rank of the jobs this file's tests start; not a test on its own"]
fn rank_broadcast() {
    in_job();
    let mut comm = Communicator::init().expect("init");
    assert_eq!(comm.launcher(), "pmi-1");
    let (rank, p) = (comm.rank(), comm.size());
    assert_eq!(p, P);
    let at_start = comm.cards_fetched();
    let mut data = vec![0u8; 4096];
    if rank == 0 {
        data.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    }
    comm.choosing(Choice::Named("binomial-bcast"))
        .bcast(&mut data[..], 0)
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
#[ignore = "a rank of the jobs this file's tests start; not a test on its own"]
fn rank_abort() {
    in_job();
    let mut comm = Communicator::init().expect("init");
    let rank = comm.rank();
    comm.set_deadline(Duration::from_secs(30));
    // Above the eager limit: every call waits for its targets' tokens, so a rank hears of the
    // refusal by its next call (an eager root may run ahead; docs/failures.md, "The rule").
    let mut data = vec![0u8; 1 << 16];
    comm.choosing(Choice::Named("binomial-bcast"))
        .bcast(&mut data[..], 0)
        .expect("bcast");
    // The last rank refuses the next broadcast without having read every card: it reads
    // them to tell every rank. Every other rank gets an error soon after, not at its deadline.
    let last = P - 1;
    let started = Instant::now();
    if rank == last {
        assert!(comm.cards_fetched() < P - 1, "rank {rank} read every card");
        comm.refuse("bcast", "refused by the test");
        assert_eq!(comm.cards_fetched(), P - 1, "the abort went to every rank");
    } else {
        let mut bcast = || {
            comm.choosing(Choice::Named("binomial-bcast"))
                .bcast(&mut data[..], 0)
        };
        // Ranks that do not write to the last rank may finish calls before its abort (sent
        // after it read the missing cards) arrives; the abort must end them well before the
        // deadline.
        let result = (0..100_000).try_for_each(|_| bcast());
        assert!(result.is_err(), "rank {rank}: every broadcast returned Ok");
        // An abort, not the deadline.
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "rank {rank} waited {:?}: {result:?}",
            started.elapsed()
        );
    }
    println!("rank {rank}: abort passed");
}

/// A PMI-1 server for a job of two ranks, threads of this test: it keeps the key-value space
/// and answers every request, except that it never answers a get of an address card.
fn server_silent_on_cards() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let address = listener.local_addr().expect("address").to_string();
    let kvs = Arc::new((Mutex::new(Shared::default()), Condvar::new()));
    std::thread::spawn(move || {
        for _ in 0..2 {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let kvs = Arc::clone(&kvs);
            std::thread::spawn(move || serve_one(stream, &kvs));
        }
    });
    address
}

#[derive(Default)]
struct Shared {
    values: HashMap<String, String>,
    /// Ranks in the current barrier, and barriers completed.
    arrived: usize,
    generation: u64,
}

fn serve_one(stream: TcpStream, kvs: &(Mutex<Shared>, Condvar)) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap_or(0) > 0 {
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{name}=")).map(str::to_owned))
                .unwrap_or_default()
        };
        let answer = match field("cmd").as_str() {
            "init" => "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n".into(),
            "get_maxes" => "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n".into(),
            "get_appnum" => "cmd=appnum appnum=0\n".into(),
            "get_my_kvsname" => "cmd=my_kvsname kvsname=kvs_lazy\n".into(),
            "put" => {
                let mut shared = kvs.0.lock().expect("kvs");
                shared.values.insert(field("key"), field("value"));
                "cmd=put_result rc=0\n".into()
            }
            "barrier_in" => {
                let mut shared = kvs.0.lock().expect("kvs");
                let generation = shared.generation;
                shared.arrived += 1;
                if shared.arrived == 2 {
                    shared.arrived = 0;
                    shared.generation += 1;
                    kvs.1.notify_all();
                }
                while shared.generation == generation {
                    shared = kvs.1.wait(shared).expect("kvs");
                }
                "cmd=barrier_out rc=0\n".into()
            }
            "get" if field("key").starts_with("card") => String::new(),
            "get" => {
                let shared = kvs.0.lock().expect("kvs");
                match shared.values.get(&field("key")) {
                    Some(value) => format!("cmd=get_result rc=0 value={value}\n"),
                    None => "cmd=get_result rc=-1 msg=not_found\n".into(),
                }
            }
            "finalize" => "cmd=finalize_ack rc=0\n".into(),
            _ => return,
        };
        if reader.get_mut().write_all(answer.as_bytes()).is_err() {
            return;
        }
        line.clear();
    }
}

#[test]
fn a_pmi_server_that_does_not_answer_a_card_is_an_error_within_the_deadline() {
    let address = server_silent_on_cards();
    let deadline = Duration::from_secs(2);
    let started = Instant::now();
    let results: Vec<String> = std::thread::scope(|s| {
        let ranks: Vec<_> = (0..2)
            .map(|rank| {
                let address = address.clone();
                s.spawn(move || {
                    let endpoint = ServerAddress::Port { address, id: None };
                    let options = BootstrapOptions {
                        timeout: Duration::from_secs(60),
                        allow_singleton: false,
                        end_with_launcher: false,
                    };
                    let bootstrap = Bootstrap::connect(
                        &endpoint,
                        Some(rank.to_string()),
                        Some("2".into()),
                        &options,
                    )
                    .expect("connect");
                    let config = Config {
                        provider: Some("tcp;ofi_rxm".into()),
                        deadline,
                        ..Config::default()
                    };
                    match Communicator::init_over(bootstrap, config) {
                        Ok(_) => "joined".to_string(),
                        Err(error) => error.to_string(),
                    }
                })
            })
            .collect();
        ranks
            .into_iter()
            .map(|r| r.join().expect("rank thread"))
            .collect()
    });
    // Each rank asks for the other's card in the start-up barrier and gets no answer.
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    for result in &results {
        assert!(result.contains("cannot reach rank"), "{results:?}");
        assert!(
            result.contains("no answer from the PMI server"),
            "{results:?}"
        );
    }
}
