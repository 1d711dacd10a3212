//! The shared segment (docs/library.md, "Shared segment") between real processes on one host: every
//! collective it serves at p = 2, 3, 4 and 8 (and over `tcp;ofi_rxm` at p = 3) with random
//! sizes up to the limit (zeros, roots, in place, plain and registered buffers, nonblocking
//! forms; reduce-scatters in the bits of the rank-order sum) and bcast, allgather(v), gather(v)
//! and scatter(v) in chunks above it gives every byte right and says so in `comm.last()`;
//! reductions above the limit, forced plans and `CIRCULANT_SEGMENT_LIMIT=0`
//! stay off it; a forced segment that cannot serve is refused; ranks called with different
//! arguments, a rank that refuses a call and a rank that is killed fail the others promptly;
//! a call in chunks has its deadline per chunk, and an `i*` broadcast's root publishes two
//! chunks at its start; no file is left in /dev/shm.

mod common;

use std::time::{Duration, Instant};

use circulant::comm::{Buffer, Choice, CommError, Communicator, ErrorKind};
use circulant::plan::ReduceOp;

use common::{output_text, Job};

fn job(n: usize, role: &str, env: &[(&str, &str)], extra: &[&str]) -> (bool, String) {
    job_over("shm", n, role, env, extra)
}

fn job_over(
    provider: &str,
    n: usize,
    role: &str,
    env: &[(&str, &str)],
    extra: &[&str],
) -> (bool, String) {
    let out = Job::new(n, 240)
        .provider(provider)
        .launcher_args(extra)
        .envs(env)
        .test_binary("rank_role", role);
    (out.status.success(), output_text(&out))
}

/// The pids the ranks printed (`pid N`): none may have left a file in /dev/shm.
fn assert_no_files_of(all: &str) {
    for pid in all
        .lines()
        .filter_map(|l| l.split("pid ").nth(1))
        .filter_map(|w| w.split_whitespace().next())
    {
        let left = common::shared_files_of(pid);
        assert!(left.is_empty(), "files left by pid {pid}: {left:?}");
    }
}

#[test]
fn every_served_collective_is_right_at_every_p() {
    for n in [2, 3, 4, 8] {
        let (ok, all) = job(n, "served", &[], &[]);
        assert!(ok, "p = {n}:\n{all}");
        assert_eq!(all.matches("served ok").count(), n, "p = {n}:\n{all}");
        assert_no_files_of(&all);
    }
}

/// The segment serves the ranks of one host whatever the provider: the same over TCP.
#[test]
fn every_served_collective_is_right_over_tcp_too() {
    let (ok, all) = job_over("tcp;ofi_rxm", 3, "served", &[], &[]);
    assert!(ok, "{all}");
    assert_eq!(all.matches("served ok").count(), 3, "{all}");
    assert_no_files_of(&all);
}

/// `CIRCULANT_SINGLE_COPY=0`: large gathers and scatters copy through the segment (the
/// served role checks the bytes each rank copies), every byte right; a value other than 0 or
/// 1 is refused.
#[test]
fn without_single_copy_large_gathers_and_scatters_copy_through_the_segment() {
    for n in [3, 4] {
        let (ok, all) = job(n, "served", &[("CIRCULANT_SINGLE_COPY", "0")], &[]);
        assert!(ok, "p = {n}:\n{all}");
        assert_eq!(all.matches("served ok").count(), n, "p = {n}:\n{all}");
        assert_no_files_of(&all);
    }
    let (ok, all) = job(2, "served", &[("CIRCULANT_SINGLE_COPY", "often")], &[]);
    assert!(!ok, "{all}");
    assert!(
        all.contains("CIRCULANT_SINGLE_COPY") && all.contains("expected 0 or 1"),
        "{all}"
    );
}

#[test]
fn the_full_argument_check_runs_before_each_segment_call() {
    let (ok, all) = job(3, "served", &[("CIRCULANT_CHECK", "1")], &[]);
    assert!(ok, "{all}");
    assert_eq!(all.matches("served ok").count(), 3, "{all}");
}

#[test]
fn a_limit_of_zero_keeps_every_call_off_the_segment() {
    let (ok, all) = job(3, "off", &[("CIRCULANT_SEGMENT_LIMIT", "0")], &[]);
    assert!(ok, "{all}");
    assert_eq!(all.matches("off ok").count(), 3, "{all}");
}

#[test]
fn ranks_called_with_different_sizes_fail_at_once() {
    for n in [2, 4] {
        let (ok, all) = job(n, "mismatch", &[("CIRCULANT_TIMEOUT", "60")], &[]);
        assert!(ok, "p = {n}:\n{all}");
        assert_eq!(all.matches("mismatch ok").count(), n, "p = {n}:\n{all}");
        assert!(
            all.contains("rank 0 was called with different arguments"),
            "a reader names the root's digest:\n{all}"
        );
    }
}

/// docs/failures.md, "The rule": a broadcast whose root the ranks disagree on is not caught on the
/// segment (each rank completes with the data of its own call); the full check catches it.
#[test]
fn a_broadcast_whose_root_the_ranks_disagree_on_runs_each_rank_s_own_call() {
    for check in ["0", "1"] {
        let env = [("CIRCULANT_TIMEOUT", "20"), ("CIRCULANT_CHECK", check)];
        let (ok, all) = job(3, "roots-differ", &env, &[]);
        assert!(ok, "check {check}:\n{all}");
        assert_eq!(
            all.matches("roots-differ ok").count(),
            3,
            "check {check}:\n{all}"
        );
    }
}

/// Deadlines (docs/failures.md): a call in chunks has its deadline counted from the last chunk that
/// moved (a root waits on a reader that tests once a second); an `i*` broadcast's root whose
/// reader completed the calls before but is not in this one yet publishes two chunks at its
/// start (the reader completes a call of two while the root sleeps past the deadline) and no
/// more (a reader of three times out), the rest at its `wait` (a reader of three completes
/// when the root waits within the deadline).
#[test]
fn a_call_in_chunks_has_a_deadline_per_chunk_and_its_root_publishes_two_before_test() {
    let env = [("CIRCULANT_TIMEOUT", "3")];
    let (ok, all) = job(2, "chunk-deadlines", &env, &[]);
    assert!(ok, "{all}");
    assert_eq!(all.matches("chunk-deadlines ok").count(), 2, "{all}");
    assert_no_files_of(&all);
}

#[test]
fn a_call_refused_on_one_rank_fails_every_rank_promptly() {
    for n in [2, 3, 8] {
        let (ok, all) = job(n, "refused", &[("CIRCULANT_TIMEOUT", "60")], &[]);
        assert!(ok, "p = {n}:\n{all}");
        assert_eq!(all.matches("refused ok").count(), n, "p = {n}:\n{all}");
    }
}

#[test]
fn a_rank_killed_between_segment_calls_fails_every_survivor() {
    let started = Instant::now();
    let (ok, all) = job(4, "kill", &[("CIRCULANT_TIMEOUT", "30")], &["--keep-going"]);
    assert!(!ok, "{all}");
    assert_eq!(all.matches("survivor got an error").count(), 3, "{all}");
    assert!(
        !all.contains("timed out"),
        "a dead peer is found, not waited out:\n{all}"
    );
    assert!(started.elapsed() < Duration::from_secs(60), "{all}");
}

#[test]
fn the_overhead_is_measured_only_where_asked() {
    let (ok, all) = job(2, "overhead", &[], &[]);
    assert!(ok, "{all}");
    assert_eq!(all.matches("overhead ok").count(), 2, "{all}");
}

/// Entry point of the ranks of the jobs above.
#[test]
#[ignore = "a rank of the jobs this file's tests start; not a test on its own"]
fn rank_role() {
    let role = common::role("CIRCULANT_TEST_ROLE");
    let mut comm = Communicator::init().expect("init");
    println!("rank {} pid {}", comm.rank(), std::process::id());
    match role.as_str() {
        "served" => served(&mut comm),
        "off" => off(&mut comm),
        // The failures run on a communicator of their own; the job's stays usable, and its
        // barrier keeps every rank alive until all have seen their error.
        "mismatch" | "refused" | "roots-differ" => {
            let rank = comm.rank() as i64;
            let mut case = comm.split(Some(0), rank).unwrap().unwrap();
            match role.as_str() {
                "mismatch" => mismatch(&mut case),
                "refused" => refused(&mut case),
                _ => roots_differ(&mut case),
            }
            drop(case);
            comm.barrier()
                .expect("the job's communicator is unaffected");
        }
        "chunk-deadlines" => chunk_deadlines(&mut comm),
        "overhead" => overhead(&mut comm),
        "kill" => common::rank_killed_during_broadcasts(&mut comm, 64, 500, 10_000_001),
        other => panic!("unknown role {other}"),
    }
}

const LIMIT: usize = circulant::comm::DEFAULT_SEGMENT_LIMIT;

fn byte(call: usize, rank: usize, i: usize) -> u8 {
    (call * 31 + rank * 7 + i * 13 + 1) as u8
}

/// `byte` varied over longer runs too: no two chunks of 64 KiB of a block are alike, so that a
/// chunk read from a stale parity or at the wrong offset shows.
fn wide_byte(call: usize, rank: usize, i: usize) -> u8 {
    byte(call, rank, i) ^ (i >> 8) as u8 ^ (i >> 16) as u8
}

/// `Executed::overhead` is zero until the communicator measures it, then positive: on the
/// segment, as a plan (an allreduce above the limit), for a nonblocking call, and in a split
/// made after it was turned on.
fn overhead(comm: &mut Communicator) {
    let measured = |comm: &mut Communicator, what: &str| {
        let mut data = [comm.rank() as u8; 8];
        comm.bcast(&mut data[..], 1).expect("bcast");
        on_segment(comm, "segment-bcast", what);
        let bcast = comm.last().expect("a call ran").overhead;
        comm.ibcast(&mut data[..], 0)
            .expect("ibcast")
            .wait()
            .expect("wait");
        let ibcast = comm.last().expect("a call ran").overhead;
        let big = vec![1u64; LIMIT];
        let mut sum = vec![0u64; LIMIT];
        comm.allreduce(&big[..], &mut sum[..], ReduceOp::Sum)
            .expect("allreduce");
        let name = comm.last().expect("a call ran").algorithm;
        assert!(!name.starts_with("segment-"), "{what}: {name}");
        let plan = comm.last().expect("a call ran").overhead;
        [bcast, ibcast, plan]
    };
    let off = measured(comm, "not measured");
    assert!(off.iter().all(|d| d.is_zero()), "not measured: {off:?}");
    comm.measure_overhead(true);
    let on = measured(comm, "measured");
    assert!(on.iter().all(|d| !d.is_zero()), "measured: {on:?}");
    let rank = comm.rank() as i64;
    let mut half = comm.split(Some(0), rank).expect("split").expect("a member");
    let inherited = measured(&mut half, "in a split");
    assert!(
        inherited.iter().all(|d| !d.is_zero()),
        "in a split: {inherited:?}"
    );
    println!("overhead ok");
}

/// Asserts the last call ran on the segment as `name`.
fn on_segment(comm: &Communicator, name: &str, what: &str) {
    let last = comm.last().expect("a call ran").algorithm;
    assert_eq!(last, name, "{what}");
}

fn served(comm: &mut Communicator) {
    let (me, p) = (comm.rank(), comm.size());
    let mut rng = Rng(0x5e9_0000 + p as u64);
    let memory_before = comm.traffic().memory.bytes;
    let mut buffer: Buffer = comm.alloc(LIMIT * p).expect("alloc");
    let mut exact: Buffer = comm.alloc(LIMIT).expect("alloc");
    for call in 0..400 {
        let size = match rng.next_u64() % 4 {
            0 => 0,
            1 => (rng.next_u64() % 16) as usize,
            2 => LIMIT,
            _ => (rng.next_u64() % LIMIT as u64) as usize,
        };
        let root = (rng.next_u64() % p as u64) as usize;
        match call % 7 {
            0 => {
                // A registered buffer at the limit, plain memory below it.
                let mut plain = vec![0u8; size];
                {
                    let buf: &mut [u8] = if size == LIMIT {
                        &mut exact
                    } else {
                        &mut plain
                    };
                    for (i, b) in buf.iter_mut().enumerate() {
                        *b = if me == root { byte(call, root, i) } else { 0 };
                    }
                }
                match (size == LIMIT, call % 2 == 0) {
                    (true, _) => comm.bcast(&mut exact, root).expect("bcast"),
                    (false, true) => comm.bcast(&mut plain[..], root).expect("bcast"),
                    (false, false) => {
                        let mut request = comm.ibcast(&mut plain[..], root).expect("ibcast");
                        while !request.test().expect("test") {}
                        request.wait().expect("wait");
                    }
                }
                on_segment(comm, "segment-bcast", "bcast");
                let buf: &[u8] = if size == LIMIT { &exact } else { &plain };
                for (i, &b) in buf.iter().enumerate() {
                    assert_eq!(b, byte(call, root, i), "bcast {call} byte {i}");
                }
            }
            1 | 2 => {
                // Reductions: the p − 1 vectors a rank folds within the limit.
                let n = size.min(LIMIT / (p - 1)) / 8;
                let send: Vec<i64> = (0..n).map(|i| (me * 1000 + i + call) as i64 - 7).collect();
                let mut recv = vec![0i64; n];
                let expect: Vec<i64> = (0..n)
                    .map(|i| (0..p).map(|r| (r * 1000 + i + call) as i64 - 7).sum())
                    .collect();
                if call % 7 == 1 {
                    comm.allreduce(&send, &mut recv, ReduceOp::Sum)
                        .expect("allreduce");
                    on_segment(comm, "segment-allreduce", "allreduce");
                    assert_eq!(recv, expect, "allreduce {call}");
                } else {
                    comm.reduce(&send, &mut recv, ReduceOp::Sum, root)
                        .expect("reduce");
                    on_segment(comm, "segment-reduce", "reduce");
                    if me == root {
                        assert_eq!(recv, expect, "reduce {call}");
                    }
                }
                // Floating point: the same bits on every rank (rank order).
                let x: Vec<f64> = (0..n)
                    .map(|i| 0.1 * (me + i) as f64 + 1e-9 * call as f64)
                    .collect();
                let mut y = vec![0f64; n];
                let mut request = comm
                    .iallreduce(&x, &mut y, ReduceOp::Sum)
                    .expect("iallreduce");
                while !request.test().expect("test") {}
                request.wait().expect("wait");
                let bits: Vec<u64> = y.iter().map(|v| v.to_bits()).collect();
                let mut first = vec![0u64; n];
                if me == 0 {
                    first.copy_from_slice(&bits);
                }
                comm.bcast(bytemuck::cast_slice_mut::<u64, u8>(&mut first), 0)
                    .expect("bcast");
                assert_eq!(bits, first, "the same sum on every rank");
            }
            3 => {
                let block = size.min(LIMIT);
                let send: Vec<u8> = (0..block).map(|i| byte(call, me, i)).collect();
                let mut recv = vec![0u8; block * p];
                comm.allgather(&send[..], &mut recv[..]).expect("allgather");
                on_segment(comm, "segment-allgather", "allgather");
                for r in 0..p {
                    for i in 0..block {
                        assert_eq!(recv[r * block + i], byte(call, r, i), "allgather {call}");
                    }
                }
            }
            4 | 5 => {
                let counts: Vec<usize> = (0..p)
                    .map(|r| {
                        if (r + call) % 3 == 0 {
                            0
                        } else {
                            (size * (r + 1) / p).min(LIMIT)
                        }
                    })
                    .collect();
                let at: Vec<usize> = counts
                    .iter()
                    .scan(0, |s, &c| {
                        let o = *s;
                        *s += c;
                        Some(o)
                    })
                    .collect();
                let total: usize = counts.iter().sum();
                let recv: &mut [u8] = &mut buffer[..total];
                recv.fill(0);
                if call % 7 == 4 {
                    let send: Vec<u8> = (0..counts[me]).map(|i| byte(call, me, i)).collect();
                    comm.allgatherv(&send[..], recv, &counts)
                        .expect("allgatherv");
                } else {
                    for i in 0..counts[me] {
                        recv[at[me] + i] = byte(call, me, i);
                    }
                    comm.allgatherv_in_place(recv, &counts).expect("in place");
                }
                on_segment(comm, "segment-allgatherv", "allgatherv");
                for r in 0..p {
                    for i in 0..counts[r] {
                        assert_eq!(
                            buffer[at[r] + i],
                            byte(call, r, i),
                            "allgatherv {call} from {r}"
                        );
                    }
                }
            }
            _ => {
                comm.barrier().expect("barrier");
                on_segment(comm, "segment-barrier", "barrier");
            }
        }
    }
    assert!(
        comm.traffic().memory.bytes > memory_before,
        "parts count as memory traffic"
    );
    // Above the limit a broadcast and an allgatherv still run on the segment, in chunks of its
    // area (64 KiB): every byte arrives where it belongs, chunk boundaries included.
    let wide =
        |call: usize, r: usize, i: usize| byte(call, r, i) ^ (i >> 9) as u8 ^ (i >> 17) as u8;
    let len = 3 * (64 << 10) + 17;
    let root = p - 1;
    let mut big: Vec<u8> = (0..len)
        .map(|i| if me == root { wide(901, root, i) } else { 0 })
        .collect();
    comm.bcast(&mut big[..], root).expect("bcast in chunks");
    on_segment(comm, "segment-bcast", "bcast above the limit");
    assert!(
        (0..len).all(|i| big[i] == wide(901, root, i)),
        "bcast in chunks"
    );
    // Blocks of 0, 70 kB, 140 kB, …: an empty one, and every other one past a chunk.
    let counts: Vec<usize> = (0..p).map(|r| r * 70_000).collect();
    let mine: Vec<u8> = (0..counts[me]).map(|i| wide(902, me, i)).collect();
    let mut all = vec![0u8; counts.iter().sum()];
    comm.allgatherv(&mine[..], &mut all[..], &counts)
        .expect("allgatherv in chunks");
    on_segment(comm, "segment-allgatherv", "allgatherv above the limit");
    let mut at = 0;
    for (r, &c) in counts.iter().enumerate() {
        assert!(
            (0..c).all(|i| all[at + i] == wide(902, r, i)),
            "allgatherv in chunks: rank {r}'s block"
        );
        at += c;
    }
    // An allgather of 100 kB blocks: two chunks each.
    let block: Vec<u8> = (0..100_000).map(|i| wide(903, me, i)).collect();
    let mut blocks = vec![0u8; 100_000 * p];
    comm.allgather(&block[..], &mut blocks[..])
        .expect("allgather in chunks");
    on_segment(comm, "segment-allgather", "allgather above the limit");
    for r in 0..p {
        assert!(
            (0..100_000).all(|i| blocks[r * 100_000 + i] == wide(903, r, i)),
            "allgather in chunks: rank {r}'s block"
        );
    }
    rooted(comm, &mut rng);
    reduce_scatters(comm, &mut rng);
    let mut small = [1u8; 8];
    // A reduction whose p − 1 vectors exceed the limit runs as a plan, unless forced.
    if p > 2 {
        let n = LIMIT / 8;
        let (send, mut recv) = (vec![1i64; n], vec![0i64; n]);
        comm.allreduce(&send, &mut recv, ReduceOp::Sum)
            .expect("allreduce");
        assert!(!comm.last().unwrap().algorithm.starts_with("segment-"));
        let (send, recv) = (
            bytemuck::cast_slice(&send),
            bytemuck::cast_slice_mut(&mut recv),
        );
        let sum =
            circulant::plan::Reduction::new(circulant::plan::Dtype::I64, ReduceOp::Sum).unwrap();
        comm.choosing(Choice::Named("segment-allreduce"))
            .allreduce_bytes::<[u8], [u8]>(send, recv, sum)
            .expect("forced");
        on_segment(comm, "segment-allreduce", "forced above the fold limit");
    }
    comm.choosing(Choice::Named("binomial-bcast"))
        .bcast(&mut small[..], 0)
        .expect("binomial");
    assert_eq!(comm.last().unwrap().algorithm, "binomial-bcast");
    // The segment is listed where it serves.
    let problem = circulant::plan::Problem::Broadcast {
        p,
        root: 0,
        bytes: 8,
    };
    let names: Vec<&str> = comm
        .algorithms(&problem)
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert!(names.contains(&"segment-bcast"), "{names:?}");
    // A split communicator (here of every rank, in reverse order) has its own segment.
    let mut reversed = comm.split(Some(0), -(me as i64)).unwrap().unwrap();
    let mut word = [if reversed.rank() == 0 { 42u8 } else { 0 }; 8];
    reversed
        .bcast(&mut word[..], 0)
        .expect("bcast on the split");
    assert_eq!(word, [42; 8]);
    on_segment(&reversed, "segment-bcast", "on the split");
    drop(reversed);
    // A forced segment that cannot serve the call is refused on every rank: a reduction's
    // vector above the limit (reductions do not run in chunks).
    let n = LIMIT / 8 + 1;
    let (send, mut recv) = (vec![1i64; n], vec![0i64; n]);
    let sum = circulant::plan::Reduction::new(circulant::plan::Dtype::I64, ReduceOp::Sum).unwrap();
    let err = comm
        .choosing(Choice::Named("segment-allreduce"))
        .allreduce_bytes::<[u8], [u8]>(
            bytemuck::cast_slice(&send),
            bytemuck::cast_slice_mut(&mut recv),
            sum,
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Argument, "{err}");
    assert!(err.to_string().contains("CIRCULANT_SEGMENT_LIMIT"), "{err}");
    println!("rank {me}: served ok");
}

/// gather(v) and scatter(v), blocking and `i*`, from random roots with random counts (empty
/// blocks among them), within the area and in chunks past it: the root gets every block at
/// its place, every rank its own block of the root's buffer.
fn rooted(comm: &mut Communicator, rng: &mut Rng) {
    let (me, p) = (comm.rank(), comm.size());
    let single_copy = single_copy_expected();
    for call in 1000..1120 {
        let size = match rng.next_u64() % 5 {
            0 => 0,
            1 => (rng.next_u64() % 16) as usize,
            2 => LIMIT,
            3 => 100_000 + (rng.next_u64() % 50_000) as usize,
            _ => (rng.next_u64() % LIMIT as u64) as usize,
        };
        let root = (rng.next_u64() % p as u64) as usize;
        let vector = call % 2 == 1;
        let counts: Vec<usize> = (0..p)
            .map(|r| match (vector, (r + call) % 3) {
                (false, _) => size,
                (true, 0) => 0,
                (true, _) => size * (r + 1) / p,
            })
            .collect();
        let at: Vec<usize> = counts
            .iter()
            .scan(0, |s, &c| {
                let o = *s;
                *s += c;
                Some(o)
            })
            .collect();
        let total: usize = counts.iter().sum();
        let nonblocking = call % 4 >= 2;
        if call % 8 < 4 {
            let send: Vec<u8> = (0..counts[me]).map(|i| wide_byte(call, me, i)).collect();
            let mut recv = vec![0u8; if me == root { total } else { 0 }];
            let copied_before = comm.bytes_copied();
            let name = ["segment-gather", "segment-gatherv"][usize::from(vector)];
            match (vector, nonblocking) {
                (false, false) => comm.gather(&send[..], &mut recv[..], root),
                (true, false) => comm.gatherv(&send[..], &mut recv[..], &counts, root),
                (false, true) => comm
                    .igather(&send[..], &mut recv[..], root)
                    .and_then(|r| r.wait()),
                (true, true) => comm
                    .igatherv(&send[..], &mut recv[..], &counts, root)
                    .and_then(|r| r.wait()),
            }
            .expect(name);
            on_segment(comm, name, "gather");
            // A rank's block of a large gather is read where it is (nothing copied on its
            // rank), else copied into the segment.
            let largest = counts.iter().copied().max().unwrap_or(0);
            if let (true, Some(single)) = (me != root && largest >= 32 * 1024, single_copy) {
                let copied = comm.bytes_copied() - copied_before;
                let want = if single { 0 } else { counts[me] as u64 };
                assert_eq!(copied, want, "{name} {call}: bytes copied on {me}");
            }
            if me == root {
                for r in 0..p {
                    assert!(
                        (0..counts[r]).all(|i| recv[at[r] + i] == wide_byte(call, r, i)),
                        "{name} {call}: rank {r}'s block at root {root}"
                    );
                }
            }
        } else {
            let send: Vec<u8> = if me == root {
                (0..p)
                    .flat_map(|r| (0..counts[r]).map(move |i| wide_byte(call, r, i)))
                    .collect()
            } else {
                Vec::new()
            };
            let mut recv = vec![0u8; counts[me]];
            let copied_before = comm.bytes_copied();
            let name = ["segment-scatter", "segment-scatterv"][usize::from(vector)];
            match (vector, nonblocking) {
                (false, false) => comm.scatter(&send[..], &mut recv[..], root),
                (true, false) => comm.scatterv(&send[..], &mut recv[..], &counts, root),
                (false, true) => comm
                    .iscatter(&send[..], &mut recv[..], root)
                    .and_then(|r| r.wait()),
                (true, true) => comm
                    .iscatterv(&send[..], &mut recv[..], &counts, root)
                    .and_then(|r| r.wait()),
            }
            .expect(name);
            on_segment(comm, name, "scatter");
            // Every rank copies its block out; the root copies its buffer in unless it is read
            // where it is.
            let copied = comm.bytes_copied() - copied_before;
            let copied_in = if me == root && (total < 32 * 1024 || single_copy == Some(false)) {
                total as u64
            } else {
                0
            };
            if single_copy.is_some() {
                assert_eq!(
                    copied,
                    counts[me] as u64 + copied_in,
                    "{name} {call} on {me}"
                );
            }
            assert!(
                (0..counts[me]).all(|i| recv[i] == wide_byte(call, me, i)),
                "{name} {call} from {root}: the block of {me}"
            );
        }
    }
}

/// reduce_scatter_block and reduce_scatter, blocking and `i*`, with random sizes within the
/// limit (random counts, empty parts among them) on the segment, in f64 sums that must have
/// the bits of the sum in rank order computed here; past the limit a plan, and the segment
/// forced there refused.
fn reduce_scatters(comm: &mut Communicator, rng: &mut Rng) {
    let (me, p) = (comm.rank(), comm.size());
    let term = |call: usize, r: usize, i: usize| 0.1 * (r * 31 + i) as f64 + 1e-7 * call as f64;
    // The sum of element i over all ranks, one rank after the other.
    let sum = |call: usize, i: usize| (1..p).fold(term(call, 0, i), |s, r| s + term(call, r, i));
    let elements = LIMIT / 8;
    for call in 2000..2060 {
        let counts: Vec<usize> = if call % 2 == 0 {
            let block = (rng.next_u64() % (elements / p + 1) as u64) as usize;
            vec![block; p]
        } else {
            let mut left = elements;
            (0..p)
                .map(|_| {
                    let count = match rng.next_u64() % 3 {
                        0 => 0,
                        _ => (rng.next_u64() % (left as u64 / 2 + 1)) as usize,
                    };
                    left -= count;
                    count
                })
                .collect()
        };
        let at: usize = counts[..me].iter().sum();
        let total: usize = counts.iter().sum();
        let send: Vec<f64> = (0..total).map(|i| term(call, me, i)).collect();
        let mut recv = vec![f64::NAN; counts[me]];
        let nonblocking = call % 4 >= 2;
        let name = if call % 2 == 0 {
            if nonblocking {
                comm.ireduce_scatter_block(&send, &mut recv, ReduceOp::Sum)
                    .and_then(|r| r.wait())
            } else {
                comm.reduce_scatter_block(&send, &mut recv, ReduceOp::Sum)
            }
            .expect("reduce_scatter_block");
            "segment-reduce-scatter-block"
        } else {
            if nonblocking {
                comm.ireduce_scatter(&send, &mut recv, ReduceOp::Sum, &counts)
                    .and_then(|r| r.wait())
            } else {
                comm.reduce_scatter(&send, &mut recv, ReduceOp::Sum, &counts)
            }
            .expect("reduce_scatter");
            "segment-reduce-scatter"
        };
        on_segment(comm, name, "reduce-scatter");
        let bits: Vec<u64> = recv.iter().map(|x| x.to_bits()).collect();
        let want: Vec<u64> = (at..at + counts[me])
            .map(|i| sum(call, i).to_bits())
            .collect();
        assert_eq!(bits, want, "{name} {call} on {me}: {counts:?}");
    }
    // One element past the limit: a plan, with the same sums up to rounding (it folds in another
    // order); the segment forced is refused (on a communicator of its own, which the refusal
    // leaves unusable).
    let share = elements / p;
    let counts: Vec<usize> = (0..p)
        .map(|r| {
            if r == 0 {
                elements + 1 - (p - 1) * share
            } else {
                share
            }
        })
        .collect();
    let total = elements + 1;
    let send: Vec<f64> = (0..total).map(|i| term(2100, me, i)).collect();
    let mut recv = vec![0f64; counts[me]];
    comm.reduce_scatter(&send, &mut recv, ReduceOp::Sum, &counts)
        .expect("reduce_scatter past the limit");
    let name = comm.last().expect("a call ran").algorithm;
    assert!(!name.starts_with("segment-"), "past the limit: {name}");
    let at: usize = counts[..me].iter().sum();
    for (j, x) in recv.iter().enumerate() {
        let want = sum(2100, at + j);
        assert!(
            (x - want).abs() <= 1e-9 * want.abs(),
            "{name}: {x} for {want}"
        );
    }
    let mut case = comm.split(Some(0), me as i64).unwrap().unwrap();
    let err = case
        .using("segment-reduce-scatter")
        .reduce_scatter(&send, &mut recv, ReduceOp::Sum, &counts)
        .expect_err("the segment forced past its limit");
    assert_eq!(err.kind(), ErrorKind::Argument, "{err}");
    assert!(err.to_string().contains("CIRCULANT_SEGMENT_LIMIT"), "{err}");
}

/// Whether large gathers and scatters read their parts where they are in this job: not with
/// `CIRCULANT_SINGLE_COPY=0`; yes where neither Yama nor a seccomp filter is in the way;
/// unknown (`None`) where one is (Yama allows it to ranks with `CAP_SYS_PTRACE`, a filter may
/// or may not forbid it).
fn single_copy_expected() -> Option<bool> {
    if std::env::var("CIRCULANT_SINGLE_COPY").as_deref() == Ok("0") {
        return Some(false);
    }
    let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .map(|s| s.trim() == "0")
        .unwrap_or(true);
    if !yama {
        return None;
    }
    let filtered = std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Seccomp:") && l.trim_end() != "Seccomp:\t0")
        })
        .unwrap_or(true);
    (!filtered).then_some(true)
}

/// Rank 0 names root 0, the others root 1, in a broadcast of several chunks: without the full
/// check every rank completes with the data of its own call; with it every rank fails.
fn roots_differ(comm: &mut Communicator) {
    let me = comm.rank();
    let root = usize::from(me != 0);
    let fill = 0xa0 + root as u8;
    let mut buf = vec![if me == root { fill } else { 0 }; 200_000];
    let result = comm.bcast(&mut buf[..], root);
    if std::env::var("CIRCULANT_CHECK").as_deref() == Ok("1") {
        let err = result.expect_err("the full check catches the roots");
        assert!(err.to_string().contains("root"), "rank {me}: {err}");
    } else {
        result.expect("every rank completes its own call");
        on_segment(comm, "segment-bcast", "roots differ");
        assert!(
            buf.iter().all(|&b| b == fill),
            "rank {me}: the data of root {root}"
        );
    }
    println!("rank {me}: roots-differ ok");
}

fn off(comm: &mut Communicator) {
    let mut buf = [0u8; 8];
    comm.bcast(&mut buf[..], 0).expect("bcast");
    assert!(!comm.last().unwrap().algorithm.starts_with("segment-"));
    let mut recv = [0i32; 2];
    comm.allreduce(&[1, 2], &mut recv, ReduceOp::Sum)
        .expect("allreduce");
    assert!(!comm.last().unwrap().algorithm.starts_with("segment-"));
    let p = comm.size() as i32;
    assert_eq!(recv, [p, 2 * p]);
    println!("rank {}: off ok", comm.rank());
}

/// Every rank gets an error (for this call or, at the root, a later one), and no rank returns
/// `Ok` with data of another call.
fn expect_failure(comm: &mut Communicator, first: Result<(), CommError>, what: &str) -> CommError {
    let err = match first {
        Err(err) => err,
        Ok(()) => {
            // A rank that waited for nothing hears of it within two more calls.
            let mut word = [0u8; 8];
            let a = comm.bcast(&mut word[..], comm.rank());
            let b = a.and_then(|()| comm.bcast(&mut word[..], comm.rank()));
            b.expect_err(what)
        }
    };
    assert_ne!(err.kind(), ErrorKind::Timeout, "{what}: {err}");
    err
}

fn mismatch(comm: &mut Communicator) {
    let me = comm.rank();
    // The root broadcasts 8 bytes, the others expect 16.
    let mut buf = vec![7u8; if me == 0 { 8 } else { 16 }];
    let result = comm.bcast(&mut buf[..], 0);
    if me != 0 {
        // The digest, or a reader that found it first and aborted.
        let err = result.as_ref().expect_err("a reader fails at once");
        assert!(
            matches!(err.kind(), ErrorKind::Mismatch | ErrorKind::PeerFailed),
            "{err}"
        );
    }
    let err = expect_failure(comm, result, "mismatch");
    println!("rank {me}: mismatch ok ({err})");
}

fn refused(comm: &mut Communicator) {
    let (me, p) = (comm.rank(), comm.size());
    // Rank 1 gives a receive buffer one byte short.
    let send = [me as u8; 4];
    let mut recv = vec![0u8; 4 * p - usize::from(me == 1)];
    let result = comm.allgather(&send[..], &mut recv[..]);
    if me == 1 {
        let err = result.as_ref().expect_err("refused here");
        assert_eq!(err.kind(), ErrorKind::Argument, "{err}");
    }
    let err = expect_failure(comm, result, "refused");
    println!("rank {me}: refused ok ({err})");
}

/// The deadline (`CIRCULANT_TIMEOUT`) the job of `chunk-deadlines` runs with.
const CHUNK_DEADLINE: Duration = Duration::from_secs(3);

/// Rank 0 broadcasts, rank 1 reads (p = 2, `CIRCULANT_TIMEOUT=3`).
fn chunk_deadlines(comm: &mut Communicator) {
    let me = comm.rank();
    let area = circulant::comm::SEGMENT_CHUNK_BYTES;
    let fill = |buf: &mut [u8], call: usize| {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = if me == 0 { byte(call, 0, i) } else { 0 };
        }
    };
    let right =
        |buf: &[u8], call: usize| buf.iter().enumerate().all(|(i, &b)| b == byte(call, 0, i));

    // 1. Twelve chunks, the reader testing once a second: the root, waiting, sees a chunk
    // move at least every second and completes. (That such a call may take longer than one
    // deadline as a whole is shown deterministically by the segment's unit tests, where the
    // steps take turns; here the two processes may run on a few chunks in one test.)
    let mut big = vec![0u8; 12 * area];
    fill(&mut big, 1);
    if me == 0 {
        comm.bcast(&mut big[..], 0)
            .expect("a root waiting on a slow reader");
    } else {
        let mut request = comm.ibcast(&mut big[..], 0).expect("ibcast");
        while !request.test().expect("a reader that tests once a second") {
            std::thread::sleep(Duration::from_secs(1));
        }
        request.wait().expect("wait");
        assert!(right(&big, 1), "the twelve chunks");
    }
    on_segment(comm, "segment-bcast", "bcast of twelve chunks");

    // 2.–4. The root starts an `ibcast` while the reader is not in the call yet, and sleeps
    // before its `wait`: the first two chunks go at the start, a third needs the reader done
    // with the first (a writer runs at most two operations ahead of its readers) and so waits
    // for the root's `wait`. Two chunks complete while the root sleeps past the deadline;
    // three complete where it sleeps half the deadline, and fail the reader where it sleeps
    // past it. Each on a communicator of its own, its segment set up and its barrier
    // completed by every rank (the job's barrier after it) before the start; a failure leaves
    // it unusable. (chunks, the root's sleep between its start and its wait, whether the
    // reader completes)
    let cases = [
        (2, 2 * CHUNK_DEADLINE, true),
        (3, CHUNK_DEADLINE / 2, true),
        (3, 2 * CHUNK_DEADLINE, false),
    ];
    for (chunks, sleep, completes) in cases {
        let mut case = comm.split(Some(0), me as i64).unwrap().unwrap();
        case.barrier().expect("the case's segment");
        comm.barrier().expect("barrier");
        let mut data = vec![0u8; chunks * area];
        fill(&mut data, chunks);
        if me == 0 {
            let request = case.ibcast(&mut data[..], 0).expect("ibcast");
            comm.barrier().expect("barrier");
            std::thread::sleep(sleep);
            let result = request.wait();
            if completes {
                result.expect("wait");
            } else {
                // The reader has given up: the root hears of it now or at its next call.
                let _ = expect_failure(&mut case, result, "three chunks");
            }
        } else {
            comm.barrier().expect("barrier");
            let started = Instant::now();
            let result = case.bcast(&mut data[..], 0);
            if completes {
                // Two chunks at the root's start, a third at its wait within the deadline.
                result.expect("the chunks of the root's start and of its wait");
                assert!(right(&data, chunks), "{chunks} chunks");
            } else {
                let err = result.expect_err("the third chunk waits for the root's wait");
                assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
            }
            // Back in step with the sleeping root (the next call has a deadline too).
            std::thread::sleep(sleep.saturating_sub(started.elapsed()));
        }
    }
    comm.barrier()
        .expect("the job's communicator is unaffected");
    println!("rank {me}: chunk-deadlines ok");
}

/// A small deterministic generator (SplitMix64), the same sequence on every rank.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
