//! Failures are collective: a call refused on one rank (a root out of range, a buffer of the
//! wrong length, reduce-scatter counts of the wrong length or that overflow), ranks that call
//! with different roots, algorithms or collectives, a buffer of another communicator. Every case runs on a fresh
//! communicator split from the job's, at p = 2, 3, 4 and 8 on shm and tcp;ofi_rxm, with and
//! without the full argument check (`CIRCULANT_CHECK`).
//!
//! The ranks check the rules themselves and panic when one is broken, which fails the job:
//! - no rank ever returns `Ok` with data of another call (a broadcast that returns `Ok` holds
//!   the data of the root this rank named);
//! - after a rank refused a call, every rank gets an error for that call or for its next one,
//!   promptly (an abort, not the deadline);
//! - with the check on, every rank gets an error for the call itself, naming the difference.
//!
//! Only disagreements that leave a rank without any peer to compare with (a root or an
//! algorithm that differs) may end at the deadline without the check, as docs/failures.md says.

mod common;

use std::process::Command;
use std::time::Duration;

use circulant::comm::{Choice, CommError, Communicator, ErrorKind};
use circulant::plan::ReduceOp;

const BIN: &str = env!("CARGO_BIN_EXE_circulant");

/// Deadline of one collective on the communicators of the cases: the disagreements that can
/// only time out wait this long without the check. The job's own communicator has 60 s.
const DEADLINE: Duration = Duration::from_secs(4);

fn job(n: usize, provider: &str, check: bool) -> String {
    let out = Command::new(BIN)
        .args(["run", "-n", &n.to_string(), "--provider", provider])
        .args(["--timeout", "240", "--"])
        .args(common::entry_program("rank_cases"))
        .env("CIRCULANT_TEST_CASES", "1")
        .env("CIRCULANT_TIMEOUT", "60")
        .env("CIRCULANT_CHECK", if check { "1" } else { "0" })
        // The rules below assume that every call waits for its peers' ready tokens, so that a
        // rank hears of a failure by its next call. On the eager path a rank that needs nothing
        // from its peers (a broadcast root) completes calls until its receive slots run out
        // (docs/failures.md, "The rule"); tests/eager.rs checks the failures of that path. The same
        // holds on the shared segment, whose failures tests/segment_jobs.rs checks.
        .env("CIRCULANT_EAGER_LIMIT", "0")
        .env("CIRCULANT_SEGMENT_LIMIT", "0")
        .output()
        .expect("circulant run starts");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "p = {n} on {provider}:\n{all}");
    common::assert_entry_ran(&all, "rank_cases");
    for case in CASES {
        assert_eq!(
            all.matches(&format!("case {case} passed")).count(),
            n,
            "case {case}, p = {n} on {provider}, check {check}:\n{all}"
        );
    }
    all
}

const CASES: [&str; 12] = [
    "refused-by-a-non-root",
    "refused-by-the-root",
    "roots-differ",
    "algorithms-differ",
    "gather-buffer-short-at-root",
    "different-collectives",
    "buffer-of-another-communicator",
    "algorithm-of-another-collective",
    "persistent-roots-differ",
    "reduce-scatter-send-short",
    "reduce-scatter-counts-of-wrong-length",
    "reduce-scatter-counts-overflow",
];

#[test]
fn every_failure_is_collective_on_shm() {
    for n in [2, 3, 4, 8] {
        job(n, "shm", false);
    }
}

#[test]
fn every_failure_is_collective_on_tcp() {
    for n in [2, 3, 4, 8] {
        job(n, "tcp;ofi_rxm", false);
    }
}

#[test]
fn the_full_check_fails_every_rank_with_the_difference() {
    for provider in ["shm", "tcp;ofi_rxm"] {
        for n in [2, 3, 4, 8] {
            let all = job(n, provider, true);
            assert!(
                all.contains("called bcast with root"),
                "a root difference is named:\n{all}"
            );
        }
    }
}

/// The ranks of the jobs above.
#[test]
#[ignore = "a rank of the jobs this file's tests start; not a test on its own"]
fn rank_cases() {
    common::role("CIRCULANT_TEST_CASES");
    let mut world = Communicator::init().expect("init");
    let check = std::env::var("CIRCULANT_CHECK").as_deref() == Ok("1");
    for case in CASES {
        let rank = world.rank();
        let mut comm = world
            .split(Some(0), rank as i64)
            .expect("split")
            .expect("a communicator");
        let p = comm.size();
        comm.set_deadline(DEADLINE);
        let fails = Rules { rank, case, check };
        match case {
            "refused-by-a-non-root" => refused(&mut comm, &fails, 1 % p),
            "refused-by-the-root" => refused(&mut comm, &fails, 0),
            "roots-differ" => roots_differ(&mut comm, &fails),
            "algorithms-differ" => algorithms_differ(&mut comm, &fails),
            "gather-buffer-short-at-root" => short_gather(&mut comm, &fails),
            "different-collectives" => different_collectives(&mut comm, &fails),
            "buffer-of-another-communicator" => foreign_buffer(&mut world, &mut comm, &fails),
            "algorithm-of-another-collective" => other_collective(&mut comm, &fails),
            "persistent-roots-differ" => persistent_roots_differ(&mut comm, &fails),
            "reduce-scatter-send-short" => reduce_scatter_refused(&mut comm, &fails, Wrong::Send),
            "reduce-scatter-counts-of-wrong-length" => {
                reduce_scatter_refused(&mut comm, &fails, Wrong::CountsLength)
            }
            "reduce-scatter-counts-overflow" => {
                reduce_scatter_refused(&mut comm, &fails, Wrong::CountsOverflow)
            }
            _ => unreachable!(),
        }
        drop(comm);
        world.barrier().expect("the world is unaffected");
        println!("rank {rank}: case {case} passed");
    }
}

struct Rules {
    rank: usize,
    case: &'static str,
    check: bool,
}

impl Rules {
    fn fail(&self, what: String) -> ! {
        panic!("rank {} case {}: {what}", self.rank, self.case)
    }

    /// An error that came from the peers or this rank at once, not from the deadline.
    fn prompt(&self, call: &str, err: &CommError) {
        if err.to_string().contains("timed out") {
            self.fail(format!("{call} ended at the deadline: {err}"));
        }
    }

    /// The outcome of the call after a failed one: an error, prompt when `prompt`.
    fn next_fails(&self, result: Result<(), CommError>, prompt: bool) {
        if let Err(err) = &result {
            println!("rank {} case {}: next call: {err}", self.rank, self.case);
        }
        match result {
            Ok(()) => self.fail("the call after a failure succeeded".into()),
            Err(err) if prompt => self.prompt("the next call", &err),
            Err(_) => {}
        }
    }

    /// With the check on: an error for the call itself, naming `what`.
    fn checked(&self, result: &Result<(), CommError>, what: &str) {
        if !self.check {
            return;
        }
        match result {
            Ok(()) => self.fail("the check let the call through".into()),
            Err(err) => {
                println!("rank {} case {}: {err}", self.rank, self.case);
                self.prompt("the checked call", err);
                if !err.to_string().contains(what) {
                    self.fail(format!("the check's error does not say {what:?}: {err}"));
                }
            }
        }
    }
}

fn fill(root: usize) -> u8 {
    0xa0 + root as u8
}

/// A broadcast from `root` as this rank names it; `Ok` must hold that root's data.
fn bcast(
    comm: &mut Communicator,
    root: usize,
    choice: Choice<'_>,
    r: &Rules,
) -> Result<(), CommError> {
    let mut buf = vec![0u8; 1000];
    if comm.rank() == root {
        buf.fill(fill(root));
    }
    let result = comm.choosing(choice).bcast(&mut buf[..], root);
    if result.is_ok() && buf.iter().any(|&x| x != fill(root)) {
        r.fail(format!("bcast returned Ok without root {root}'s data"));
    }
    result
}

/// Rank `bad` names a root out of range; the others broadcast from 0.
fn refused(comm: &mut Communicator, r: &Rules, bad: usize) {
    let p = comm.size();
    let root = if comm.rank() == bad { p + 3 } else { 0 };
    let first = bcast(comm, root, Choice::Auto, r);
    r.checked(&first, "root");
    if let Err(err) = &first {
        println!("rank {} case {}: {err}", r.rank, r.case);
    }
    match &first {
        Err(err) => r.prompt("the refused call", err),
        Ok(()) if comm.rank() == bad => r.fail("a root out of range was accepted".into()),
        Ok(()) => {}
    }
    r.next_fails(bcast(comm, 0, Choice::Auto, r), true);
}

/// Rank 0 broadcasts from 0, the others from 1.
fn roots_differ(comm: &mut Communicator, r: &Rules) {
    if comm.size() < 2 {
        return;
    }
    let root = usize::from(comm.rank() != 0);
    let first = bcast(comm, root, Choice::Auto, r);
    r.checked(&first, "called bcast with root");
    later(comm, r);
}

/// After a disagreement that only the deadline may reveal: with the check, the next call
/// fails at once; without it, later calls may still succeed among the ranks that agree (with
/// the right data), but once the deadline has passed everywhere, a call that needs every rank
/// (a barrier) fails on every rank. A broadcast then need not: a rank whose data come from
/// ranks that agree completes it where the failed rank's word has not reached it yet (the
/// failed rank tells a rank it never exchanged with only while that rank makes progress, for
/// 2 s; docs/failures.md, "How the word travels"). The barrier may fail at its deadline: the cases
/// above assert that failures spread promptly.
fn later(comm: &mut Communicator, r: &Rules) {
    if r.check {
        r.next_fails(bcast(comm, 0, Choice::Auto, r), true);
        return;
    }
    let _ = bcast(comm, 0, Choice::Auto, r);
    std::thread::sleep(DEADLINE);
    let _ = bcast(comm, 0, Choice::Auto, r);
    r.next_fails(comm.barrier(), false);
}

/// The last rank forces the binomial broadcast, the others the circulant one.
fn algorithms_differ(comm: &mut Communicator, r: &Rules) {
    let last = comm.size() - 1;
    let name = if comm.rank() == last {
        "binomial-bcast"
    } else {
        "circulant-bcast"
    };
    let first = bcast(comm, 0, Choice::Named(name), r);
    r.checked(&first, "algorithm");
    if comm.size() > 1 {
        later(comm, r);
    }
}

/// The root's gather receive buffer is one byte short.
fn short_gather(comm: &mut Communicator, r: &Rules) {
    let p = comm.size();
    let send = [comm.rank() as u8; 100];
    let len = if comm.rank() == 0 {
        100 * p - 1
    } else {
        100 * p
    };
    let mut recv = vec![0u8; len];
    let first = comm.gather(&send[..], &mut recv[..], 0);
    r.checked(&first, "refused its arguments");
    match &first {
        Err(err) => r.prompt("the refused gather", err),
        Ok(()) if comm.rank() == 0 => r.fail("a short receive buffer was accepted".into()),
        Ok(()) => {}
    }
    r.next_fails(comm.barrier(), true);
}

/// How the last rank's reduce-scatter arguments are wrong.
#[derive(Clone, Copy, Debug)]
enum Wrong {
    /// A send buffer one element short of size × the receive buffer.
    Send,
    /// One count more than there are ranks.
    CountsLength,
    /// A count whose bytes overflow.
    CountsOverflow,
}

/// The last rank calls a reduce-scatter with `wrong` arguments, the others with right ones (i64
/// sums, 5 elements per rank): the last rank's call is refused with an argument error that says
/// why, its receive buffer untouched, and every rank gets an error for the call or its next
/// one, promptly. The full check names the refusal, or the counts that differ.
fn reduce_scatter_refused(comm: &mut Communicator, r: &Rules, wrong: Wrong) {
    let p = comm.size();
    let bad = comm.rank() == p - 1;
    let mut counts = vec![5usize; p];
    let mut send = vec![1i64; 5 * p];
    let mut recv = [-1i64; 5];
    let (first, why, checked) = match wrong {
        Wrong::Send => {
            send.truncate(5 * p - usize::from(bad));
            let result = comm.reduce_scatter_block(&send, &mut recv, ReduceOp::Sum);
            let why = format!("the send buffer has {} bytes", 8 * (5 * p - 1));
            (result, why.clone(), format!("refused its arguments: {why}"))
        }
        Wrong::CountsLength => {
            if bad {
                counts.push(0);
            }
            let result = comm.reduce_scatter(&send, &mut recv, ReduceOp::Sum, &counts);
            let checked = format!("rank {} called reduce_scatter with {} counts", p - 1, p + 1);
            (result, format!("{} counts for {p} ranks", p + 1), checked)
        }
        Wrong::CountsOverflow => {
            if bad {
                counts[0] = usize::MAX / 4;
            }
            let result = comm.reduce_scatter(&send, &mut recv, ReduceOp::Sum, &counts);
            let checked = format!("rank {} called reduce_scatter with", p - 1);
            (result, "the counts overflow".to_string(), checked)
        }
    };
    r.checked(&first, &checked);
    match &first {
        Err(err) if bad && !r.check => {
            if err.kind() != ErrorKind::Argument || !err.to_string().contains(&why) {
                r.fail(format!("{wrong:?}: the error does not say {why:?}: {err}"));
            }
        }
        Err(err) => r.prompt("the refused reduce-scatter", err),
        Ok(()) if bad => r.fail(format!("{wrong:?} was accepted")),
        Ok(()) => {}
    }
    if bad && recv != [-1; 5] {
        r.fail(format!(
            "{wrong:?}: the refused call wrote its receive buffer"
        ));
    }
    r.next_fails(comm.barrier(), true);
}

/// Rank 0 calls a barrier, the others a broadcast from the last rank.
fn different_collectives(comm: &mut Communicator, r: &Rules) {
    let p = comm.size();
    let first = if comm.rank() == 0 {
        comm.barrier()
    } else {
        bcast(comm, p - 1, Choice::Auto, r)
    };
    r.checked(&first, "rank 1 called bcast, rank 0 called barrier");
    if comm.rank() == 0 {
        if let Err(err) = &first {
            r.prompt("the barrier", err);
        } else {
            r.fail("a barrier paired with broadcasts succeeded".into());
        }
    }
    r.next_fails(comm.barrier(), true);
}

/// Every rank passes a buffer allocated by the parent communicator.
fn foreign_buffer(world: &mut Communicator, comm: &mut Communicator, r: &Rules) {
    let mut buf = world.alloc(64).expect("alloc");
    match comm.bcast(&mut buf, 0) {
        Ok(()) => r.fail("a buffer of another communicator was accepted".into()),
        Err(err) if !err.to_string().contains("another communicator") => {
            r.fail(format!("the error does not say why: {err}"))
        }
        Err(err) => r.prompt("the refused call", &err),
    }
    r.next_fails(comm.barrier(), true);
}

/// Every rank forces an allgather algorithm on a broadcast.
fn other_collective(comm: &mut Communicator, r: &Rules) {
    let mut buf = [0u8; 10];
    match comm
        .choosing(Choice::Named("ring-allgather"))
        .bcast(&mut buf[..], 0)
    {
        Ok(()) => r.fail("an allgather algorithm ran a broadcast".into()),
        Err(err) => {
            let text = err.to_string();
            if !text.starts_with("bcast") || !text.contains("ring-allgather implements allgather") {
                r.fail(format!("the error names the wrong collective: {text}"));
            }
        }
    }
    r.next_fails(comm.barrier(), true);
}

/// A persistent broadcast set up by rank 0 from root 0 and by the others from root 1: with the
/// check, its start fails on every rank naming the roots; `Ok` holds the named root's data.
fn persistent_roots_differ(comm: &mut Communicator, r: &Rules) {
    let root = usize::from(comm.rank() != 0);
    let mut buf = comm.alloc(1000).expect("alloc");
    if comm.rank() == root {
        buf.fill(fill(root));
    }
    let first = match comm.bcast_init(&mut buf, root) {
        Ok(mut request) => request.start().and_then(|()| request.wait()),
        Err(err) => Err(err),
    };
    if first.is_ok() && buf.iter().any(|&x| x != fill(root)) {
        r.fail(format!(
            "a persistent bcast returned Ok without root {root}'s data"
        ));
    }
    r.checked(&first, "called bcast with root");
    later(comm, r);
}
