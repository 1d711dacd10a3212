//! The eager path between real processes, over shm (its slots in shared memory, and with
//! `CIRCULANT_EAGER_CARRIER=write`), tcp;ofi_rxm, and for selftest and mixing also sockets and
//! udp;ofi_rxd: selftest on both sides of the switch point (eager off, a limit of 64 bytes,
//! every operation eager), a root that races ahead of a slow receiver
//! through 10,000 broadcasts (it runs out of credits and waits; every receiver's data is right
//! every time), an operation above the limit whose small pairs go eager and large ones
//! zero-copy (exact copy counts), ranks that disagree on an eager call or on the limit itself
//! (also above both limits) all get an error,
//! a rank killed during eager traffic gives every survivor an error within the deadline, and
//! over RMA writes credits ride on slots going the other way (no credit word in a ping-pong).
//!
//! Ranks are this test binary (`rank_role`, selected by CIRCULANT_TEST_ROLE) under the
//! built-in launcher, which bounds every job and stops every rank it started.

mod common;

use std::process::Output;
use std::time::{Duration, Instant};

use circulant::comm::Communicator;

const BIN: &str = env!("CARGO_BIN_EXE_circulant");

/// A provider and the eager carrier asked for (`CIRCULANT_EAGER_CARRIER`).
type Setting = (&'static str, &'static str);

/// shm stores eager messages into shared memory unless told to write them; tcp writes.
const SETTINGS: [Setting; 3] = [("shm", "auto"), ("shm", "write"), ("tcp;ofi_rxm", "auto")];

/// The other software providers, for selftest and the allgatherv that mixes both ways.
const OTHER_PROVIDERS: [Setting; 2] = [("sockets", "auto"), ("udp;ofi_rxd", "auto")];

/// A job of this file: the small calls it makes would run on the shared segment (one node),
/// which is off here so that they take the eager path it tests (tests/segment_jobs.rs tests
/// the segment).
fn job(n: usize, (provider, carrier): Setting, env: &[(&str, &str)], extra: &[&str]) -> Job {
    Job::new(n, 240)
        .provider(provider)
        .launcher_args(extra)
        .envs(&[("CIRCULANT_SEGMENT_LIMIT", "0")])
        .envs(env)
        .envs(&[("CIRCULANT_EAGER_CARRIER", carrier)])
}

fn launch(
    n: usize,
    setting: Setting,
    cmd: &[&str],
    env: &[(&str, &str)],
    extra: &[&str],
) -> Output {
    job(n, setting, env, extra).run(cmd)
}

use common::{output_text as text, Job};

/// This test binary as rank `role` of a job of `n` ranks.
fn roles(n: usize, setting: Setting, role: &str, env: &[(&str, &str)], extra: &[&str]) -> Output {
    job(n, setting, env, extra).test_binary("rank_role", role)
}

/// selftest on `n` ranks with the eager path off, only the smallest sizes eager (the rest, and
/// the large pairs of a v-collective, zero-copy), and everything eager (transfers then span
/// several slots).
fn selftest_across_the_switch_point(n: usize, setting: Setting) {
    for limit in ["0", "64", "1000000"] {
        let out = launch(
            n,
            setting,
            &[BIN, "selftest", "--quick"],
            &[
                ("CIRCULANT_TIMEOUT", "60"),
                ("CIRCULANT_EAGER_LIMIT", limit),
            ],
            &[],
        );
        let what = format!("p = {n}, {setting:?}, CIRCULANT_EAGER_LIMIT={limit}");
        common::assert_selftest_passed(&out, &what);
    }
}

#[test]
fn selftest_passes_on_both_sides_of_the_switch_point() {
    for setting in SETTINGS {
        for n in [2, 3, 4] {
            selftest_across_the_switch_point(n, setting);
        }
    }
}

#[test]
fn selftest_passes_on_both_sides_of_the_switch_point_over_sockets_and_udp() {
    for setting in OTHER_PROVIDERS {
        selftest_across_the_switch_point(3, setting);
    }
}

#[test]
fn selftest_passes_with_the_smallest_slots() {
    // Two slots of 256 bytes: nearly every transfer spans slots and waits for credits.
    for provider in SETTINGS {
        let out = launch(
            3,
            provider,
            &[BIN, "selftest", "--quick"],
            &[
                ("CIRCULANT_TIMEOUT", "60"),
                ("CIRCULANT_EAGER_LIMIT", "100000"),
                ("CIRCULANT_EAGER_SLOTS", "2"),
                ("CIRCULANT_EAGER_SLOT_BYTES", "256"),
            ],
            &[],
        );
        let all = text(&out);
        assert!(out.status.success(), "{provider:?}:\n{all}");
        assert!(all.contains(" passed, 0 failed"), "{provider:?}:\n{all}");
    }
}

#[test]
fn a_root_racing_ahead_waits_for_credits_and_corrupts_nothing() {
    for provider in SETTINGS {
        for (n, slots) in [(2, "16"), (3, "2")] {
            let out = roles(
                n,
                provider,
                "race",
                &[
                    ("CIRCULANT_TIMEOUT", "60"),
                    ("CIRCULANT_EAGER_SLOTS", slots),
                ],
                &[],
            );
            let all = text(&out);
            assert!(out.status.success(), "p = {n}, {provider:?}:\n{all}");
            assert_eq!(all.matches("race ok").count(), n, "{all}");
        }
    }
}

#[test]
fn an_operation_above_the_limit_sends_its_small_pairs_eagerly_and_the_rest_zero_copy() {
    for provider in SETTINGS.into_iter().chain(OTHER_PROVIDERS) {
        let out = roles(
            4,
            provider,
            "mixed",
            &[("CIRCULANT_TIMEOUT", "30"), ("CIRCULANT_EAGER_LIMIT", "64")],
            &[],
        );
        let all = text(&out);
        assert!(out.status.success(), "{provider:?}:\n{all}");
        assert_eq!(all.matches("mixed ok").count(), 4, "{provider:?}:\n{all}");
    }
}

#[test]
fn ranks_that_disagree_on_an_eager_call_all_get_an_error() {
    for provider in SETTINGS {
        let out = roles(4, provider, "mismatch", &[("CIRCULANT_TIMEOUT", "20")], &[]);
        let all = text(&out);
        assert!(out.status.success(), "{provider:?}:\n{all}");
        assert_eq!(all.matches("mismatch detected").count(), 4, "{all}");
    }
}

#[test]
fn a_mismatched_eager_broadcast_fails_every_receiver_and_the_roots_next_call() {
    for provider in SETTINGS {
        let out = roles(
            3,
            provider,
            "bcast-mismatch",
            &[("CIRCULANT_TIMEOUT", "20")],
            &[],
        );
        let all = text(&out);
        assert!(out.status.success(), "{provider:?}:\n{all}");
        assert_eq!(all.matches("bcast mismatch failed").count(), 3, "{all}");
    }
}

#[test]
fn ranks_with_different_eager_limits_all_get_an_error() {
    for provider in SETTINGS {
        let out = roles(3, provider, "limits", &[("CIRCULANT_TIMEOUT", "20")], &[]);
        let all = text(&out);
        assert!(out.status.success(), "{provider:?}:\n{all}");
        assert_eq!(all.matches("limits differ detected").count(), 3, "{all}");
    }
}

#[test]
fn ranks_with_different_nonzero_limits_fail_above_both() {
    // Rank 1 sets 100, the others 64; the broadcasts of 1000 bytes are above both limits, but
    // the limits choose eager pairs, so the ranks must still not run them together.
    for provider in SETTINGS {
        let out = roles(
            3,
            provider,
            "limits-large",
            &[("CIRCULANT_TIMEOUT", "20"), ("CIRCULANT_EAGER_LIMIT", "64")],
            &[],
        );
        let all = text(&out);
        assert!(out.status.success(), "{provider:?}:\n{all}");
        assert_eq!(all.matches("limits differ detected").count(), 3, "{all}");
    }
}

#[test]
fn a_rank_killed_during_eager_traffic_fails_every_survivor_within_the_deadline() {
    for provider in SETTINGS {
        let started = Instant::now();
        let out = roles(
            4,
            provider,
            "kill",
            &[("CIRCULANT_TIMEOUT", "3")],
            &["--keep-going"],
        );
        let all = text(&out);
        assert!(!out.status.success(), "{all}");
        assert!(
            all.contains("rank 1"),
            "the launcher names the killed rank:\n{all}"
        );
        assert_eq!(
            all.matches("survivor got an error").count(),
            3,
            "{provider:?}:\n{all}"
        );
        assert!(started.elapsed() < Duration::from_secs(60), "{all}");
    }
}

#[test]
fn eager_messages_take_the_carrier_of_their_provider_and_leave_no_files() {
    for setting in SETTINGS {
        let out = roles(3, setting, "carrier", &[("CIRCULANT_TIMEOUT", "30")], &[]);
        let all = text(&out);
        assert!(out.status.success(), "{setting:?}:\n{all}");
        let pids: Vec<&str> = all
            .lines()
            .filter_map(|l| l.split("carrier ok, pid ").nth(1))
            .collect();
        assert_eq!(pids.len(), 3, "{setting:?}:\n{all}");
        // Each rank's slots in shared memory went with the rank.
        for pid in pids {
            let left = common::shared_files_of(pid);
            assert!(left.is_empty(), "{setting:?}: left in /dev/shm: {left:?}");
        }
    }
}

#[test]
fn the_argument_checks_exchange_takes_the_eager_path() {
    let out = roles(
        3,
        SETTINGS[0],
        "checked",
        &[("CIRCULANT_TIMEOUT", "30"), ("CIRCULANT_CHECK", "1")],
        &[],
    );
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert_eq!(all.matches("checked ok").count(), 3, "{all}");
}

#[test]
fn credits_ride_on_slots_going_the_other_way() {
    for setting in SETTINGS {
        let out = roles(2, setting, "piggyback", &[("CIRCULANT_TIMEOUT", "30")], &[]);
        let all = text(&out);
        assert!(out.status.success(), "{setting:?}:\n{all}");
        assert_eq!(
            all.matches("piggyback ok").count(),
            2,
            "{setting:?}:\n{all}"
        );
    }
}

#[test]
fn ranks_with_different_carriers_exchange_eager_messages() {
    // Over shm rank 1 alone asks for RMA writes: it writes into the others' shared slots, they
    // write into its registered ones, and credits go back each way its target reads them.
    let out = roles(
        2,
        SETTINGS[0],
        "mixed-carriers",
        &[("CIRCULANT_TIMEOUT", "30")],
        &[],
    );
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("ping-pong ok on rank 0, carrier Memory"),
        "{all}"
    );
    assert!(
        all.contains("ping-pong ok on rank 1, carrier Write"),
        "{all}"
    );
}

/// Entry point of the ranks of the jobs above.
#[test]
#[ignore = "a rank of the jobs this file's tests start; not a test on its own"]
fn rank_role() {
    let role = common::role("CIRCULANT_TEST_ROLE");
    if std::env::var("PMI_RANK").as_deref() == Ok("1") {
        match role.as_str() {
            // This rank alone turns the eager path off.
            "limits" => std::env::set_var("CIRCULANT_EAGER_LIMIT", "0"),
            // This rank alone has another limit.
            "limits-large" => std::env::set_var("CIRCULANT_EAGER_LIMIT", "100"),
            // This rank alone has its slots written over RMA.
            "mixed-carriers" => std::env::set_var("CIRCULANT_EAGER_CARRIER", "write"),
            _ => {}
        }
    }
    let mut comm = Communicator::init().expect("init");
    match role.as_str() {
        "race" => race(&mut comm),
        "mismatch" => mismatch(&mut comm),
        "bcast-mismatch" => bcast_mismatch(&mut comm),
        "limits" => limits(&mut comm, 32),
        "limits-large" => limits(&mut comm, 1000),
        "mixed" => mixed(&mut comm),
        "carrier" => carrier(&mut comm),
        "checked" => checked(&mut comm),
        "piggyback" => piggyback(&mut comm),
        "mixed-carriers" => ping_pong(&mut comm, 4 * circulant::comm::eager::DEFAULT_SLOTS),
        "kill" => common::rank_killed_during_broadcasts(&mut comm, LEN, 500, 10_000_001),
        other => panic!("unknown role {other}"),
    }
}

fn byte(i: usize, k: usize) -> u8 {
    (i * 7 + k * 13 + 1) as u8
}

const RACES: usize = 10_000;
const LEN: usize = 64;

/// Rank 0 broadcasts 10,000 times back to back; the last rank sleeps between calls, so the
/// root runs out of its receive slots and must wait for credits. Every receiver checks every
/// broadcast's data; registered buffers are only copied by the eager path, so the copy count
/// shows that the broadcasts went eager.
fn race(comm: &mut Communicator) {
    let (rank, p) = (comm.rank(), comm.size());
    let slow = p - 1;
    let pause = Duration::from_micros(200);
    let mut buf = comm.alloc(LEN).unwrap();
    let before = comm.bytes_copied();
    let started = Instant::now();
    let mut slept = Duration::ZERO;
    for i in 0..RACES {
        if rank == 0 {
            for (k, x) in buf.iter_mut().enumerate() {
                *x = byte(i, k);
            }
        }
        comm.bcast(&mut buf, 0)
            .unwrap_or_else(|e| panic!("rank {rank}: bcast {i}: {e}"));
        if let Some(k) = (0..LEN).find(|&k| buf[k] != byte(i, k)) {
            panic!(
                "rank {rank}: bcast {i}: byte {k} is {}, not {}",
                buf[k],
                byte(i, k)
            );
        }
        if rank == slow {
            let t = Instant::now();
            std::thread::sleep(pause);
            slept += t.elapsed();
        }
    }
    let took = started.elapsed();
    let copied = comm.bytes_copied() - before;
    if rank != 0 {
        // Every broadcast but the first (whose token sets up the slots) is copied out.
        assert!(
            copied >= ((RACES - 1) * LEN) as u64,
            "rank {rank} copied only {copied} bytes: the broadcasts did not go eager"
        );
    }
    // The slow rank's pauses hold everyone back: the root got at most a ring ahead.
    let mut pauses = [0u8; 8];
    if rank == slow {
        pauses = (slept.as_micros() as u64).to_le_bytes();
    }
    comm.bcast(&mut pauses[..], slow).unwrap();
    let slept = Duration::from_micros(u64::from_le_bytes(pauses));
    assert!(
        took >= slept / 2,
        "rank {rank} finished in {took:?}, the slow rank slept {slept:?}: it never waited"
    );
    println!("race ok on rank {rank}: {took:?}, {copied} bytes copied");
}

/// A ring allgatherv in place on a registered buffer with counts 2000, 4, 4, 4 (2012 bytes,
/// above the limit of 64): rank r writes to r + 1 all blocks but r + 1's, so the pair 3 → 0
/// carries 12 bytes and goes eager, the others 2008 and go zero-copy. Zero-copy writes copy
/// nothing, so from the second call on (the first sets up the slots) rank 3 copies exactly 12
/// bytes into its slot source and rank 0 exactly 12 out of its slot, every other rank none.
fn mixed(comm: &mut Communicator) {
    let (rank, p) = (comm.rank(), comm.size());
    assert_eq!(p, 4);
    let counts = [2000usize, 4, 4, 4];
    let total: usize = counts.iter().sum();
    let starts: Vec<usize> = (0..p).map(|r| counts[..r].iter().sum()).collect();
    let mut recv = comm.alloc(total).unwrap();
    let ring = circulant::comm::Choice::Named("pipelined-ring-allgatherv");
    for i in 0..6 {
        let mine = starts[rank]..starts[rank] + counts[rank];
        for (k, x) in recv[mine].iter_mut().enumerate() {
            *x = byte(i + rank, k);
        }
        let before = comm.bytes_copied();
        comm.choosing(ring)
            .allgatherv_in_place(&mut recv, &counts)
            .unwrap_or_else(|e| panic!("rank {rank}: allgatherv {i}: {e}"));
        let copied = comm.bytes_copied() - before;
        for owner in 0..p {
            for k in 0..counts[owner] {
                let got = recv[starts[owner] + k];
                assert_eq!(
                    got,
                    byte(i + owner, k),
                    "rank {rank}: call {i}, block {owner}"
                );
            }
        }
        let want = if i > 0 && (rank == 0 || rank == 3) {
            12
        } else {
            0
        };
        assert_eq!(copied, want, "rank {rank}: call {i} copied {copied} bytes");
    }
    println!("mixed ok on rank {rank}");
}

/// Every rank broadcasts small messages in turn, so every pair sets up its receive slots:
/// over shm (unless told to write) the carrier is shared memory, and once each writer has
/// mapped its slots no file name of this rank's is left in /dev/shm.
fn carrier(comm: &mut Communicator) {
    use circulant::comm::Carrier;
    let (rank, p) = (comm.rank(), comm.size());
    let writes = std::env::var("CIRCULANT_EAGER_CARRIER").as_deref() == Ok("write");
    let want = if comm.provider() == "shm" && !writes {
        Carrier::Memory
    } else {
        Carrier::Write
    };
    assert_eq!(comm.eager_carrier(), want, "rank {rank}");
    let pid = std::process::id().to_string();
    let named = || common::shared_files_of(&pid);
    // The first eager broadcast sets up the receivers' slots: in shared memory, files that
    // stay named until their writer maps them.
    let mut buf = [0u8; 16];
    comm.bcast(&mut buf[..], 0).unwrap();
    let mine = [named().len() as u64];
    let mut files = [0u64];
    comm.allreduce(&mine, &mut files, circulant::plan::ReduceOp::Sum)
        .unwrap();
    assert_eq!(
        files[0] > 0,
        want == Carrier::Memory,
        "rank {rank}: {} files",
        files[0]
    );
    let before = comm.bytes_copied();
    for i in 0..40 {
        for root in 0..p {
            if rank == root {
                buf.fill(byte(i, root));
            }
            comm.bcast(&mut buf[..], root).unwrap();
            assert!(
                buf.iter().all(|&x| x == byte(i, root)),
                "rank {rank}: bcast {i}"
            );
        }
    }
    assert!(
        comm.bytes_copied() > before,
        "rank {rank}: nothing went eager"
    );
    let left = named();
    assert!(left.is_empty(), "rank {rank}: {left:?} still named");
    comm.barrier().unwrap();
    println!("rank {rank}: carrier ok, pid {pid}");
}

/// Two ranks broadcast in turn (a ping-pong): over RMA writes each slot carries the writer's
/// read count of the other's slots, so no credit word is ever due. Then rank 0 broadcasts alone:
/// rank 1 has nothing to carry its credits in and writes credit words (none through shared
/// memory, where the writer reads the count itself).
fn piggyback(comm: &mut Communicator) {
    use circulant::comm::Carrier;
    let rank = comm.rank();
    assert_eq!(comm.size(), 2);
    let mut buf = [0u8; 8];
    let calls = 4 * circulant::comm::eager::DEFAULT_SLOTS;
    let before = comm.eager_credit_words();
    ping_pong(comm, calls);
    let words = comm.eager_credit_words() - before;
    assert_eq!(
        words, 0,
        "rank {rank}: {words} credit words in the ping-pong"
    );
    for i in 0..calls {
        if rank == 0 {
            buf.fill(byte(i, 0));
        }
        comm.bcast(&mut buf[..], 0).unwrap();
        assert!(buf.iter().all(|&x| x == byte(i, 0)), "rank {rank}: {i}");
    }
    let words = comm.eager_credit_words() - before;
    let writes = comm.eager_carrier() == Carrier::Write;
    assert_eq!(
        words > 0,
        writes && rank == 1,
        "rank {rank}: {words} credit words, carrier {:?}",
        comm.eager_carrier()
    );
    comm.barrier().unwrap();
    println!("piggyback ok on rank {rank}");
}

/// `calls` broadcasts of 8 bytes between two ranks, roots 0 and 1 in turn, each checked.
fn ping_pong(comm: &mut Communicator, calls: usize) {
    let rank = comm.rank();
    let mut buf = [0u8; 8];
    for i in 0..calls {
        let root = i % 2;
        if rank == root {
            buf.fill(byte(i, root));
        }
        comm.bcast(&mut buf[..], root).unwrap();
        assert!(buf.iter().all(|&x| x == byte(i, root)), "rank {rank}: {i}");
    }
    println!(
        "ping-pong ok on rank {rank}, carrier {:?}",
        comm.eager_carrier()
    );
}

/// Names of this process's receive slots in shared memory (each goes once its writer has
/// mapped it).
fn slot_files() -> usize {
    let prefix = format!("circulant-{}-", std::process::id());
    std::fs::read_dir("/dev/shm")
        .expect("/dev/shm")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .count()
}

/// With the full argument check on, a broadcast far above the eager limit goes zero-copy,
/// but the check's own exchange of 256 bytes per rank is eager: its first run (for the
/// barrier that ends start-up) sets up receive slots (in shared memory over shm, named until
/// their writers map them).
fn checked(comm: &mut Communicator) {
    let rank = comm.rank();
    // The barrier that ends start-up was checked too: its exchange set up the slots.
    assert!(
        slot_files() > 0,
        "rank {rank}: the check's exchange set up no slots"
    );
    let mut buf = comm.alloc(100_000).unwrap();
    for i in 0..3 {
        if rank == 0 {
            buf.fill(i as u8 + 1);
        }
        comm.bcast(&mut buf, 0).unwrap();
        assert!(
            buf.iter().all(|&x| x == i as u8 + 1),
            "rank {rank}: bcast {i}"
        );
    }
    assert_eq!(
        comm.bytes_copied(),
        0,
        "rank {rank}: the broadcasts were not zero-copy"
    );
    println!("rank {rank}: checked ok");
}

/// After a few eager allgathervs (which set up the slots), rank 2 calls one with counts that
/// differ from everyone else's: every rank must get an error.
fn mismatch(comm: &mut Communicator) {
    let (rank, p) = (comm.rank(), comm.size());
    let mut counts = vec![10usize; p];
    let total: usize = counts.iter().sum();
    let mut recv = comm.alloc(total).unwrap();
    let before = comm.bytes_copied();
    for i in 0..5 {
        let send = vec![byte(i, rank); counts[rank]];
        comm.allgatherv(&send[..], &mut recv, &counts).unwrap();
        for (owner, chunk) in recv.chunks(10).enumerate() {
            assert!(chunk.iter().all(|&x| x == byte(i, owner)), "allgatherv {i}");
        }
    }
    assert!(comm.bytes_copied() > before, "the allgathervs went eager");
    if rank == 2 {
        counts[3] = 5;
    }
    let send = vec![rank as u8; counts[rank]];
    let total: usize = counts.iter().sum();
    recv.set_len(total).unwrap();
    match comm.allgatherv(&send[..], &mut recv, &counts) {
        Err(err) => println!("rank {rank}: mismatch detected: {err}"),
        Ok(()) => panic!("rank {rank}: allgatherv with mismatched counts succeeded"),
    }
}

/// After a few eager broadcasts, the root sends 8 bytes where the others expect 16. The
/// receivers compare the digest that comes with the data and fail the call; the root waits for
/// nothing, so it may complete its call (its data are its own) and must then fail its next one.
fn bcast_mismatch(comm: &mut Communicator) {
    let rank = comm.rank();
    let mut buf = [0u8; 16];
    for i in 0..3 {
        if rank == 0 {
            buf.fill(i as u8 + 1);
        }
        comm.bcast(&mut buf[..8], 0).unwrap();
        assert!(buf[..8].iter().all(|&x| x == i as u8 + 1), "bcast {i}");
    }
    let len = if rank == 0 { 8 } else { 16 };
    match comm.bcast(&mut buf[..len], 0) {
        Err(err) => println!("rank {rank}: bcast mismatch failed in the call: {err}"),
        // The receivers' aborts are there a moment later; the root's next call reads them
        // even if, storing into shared memory, it needs nothing from the receivers.
        Ok(()) if rank == 0 => {
            std::thread::sleep(Duration::from_secs(1));
            match comm.bcast(&mut buf[..8], 0) {
                Err(err) => println!("rank {rank}: bcast mismatch failed in the next call: {err}"),
                Ok(()) => panic!("rank {rank}: the call after a mismatched broadcast succeeded"),
            }
        }
        Ok(()) => panic!("rank {rank}: a receiver completed a mismatched broadcast"),
    }
}

/// Rank 1 runs with another eager limit than the others (off, or another number): the first
/// broadcast of `len` bytes fails on every rank (their digests differ) instead of waiting for
/// tokens that never come.
fn limits(comm: &mut Communicator, len: usize) {
    let rank = comm.rank();
    let mut buf = vec![rank as u8; len];
    let mut first = Ok(());
    // The error may come with the next call (a rank that got everything it needed first).
    for _ in 0..2 {
        first = comm.bcast(&mut buf[..], 0);
        if first.is_err() {
            break;
        }
    }
    match first {
        Err(err) => println!("rank {rank}: limits differ detected: {err}"),
        Ok(()) => panic!("rank {rank}: broadcasts with different eager limits succeeded"),
    }
}
