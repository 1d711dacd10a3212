//! Collectives between real processes: `circulant selftest` under the built-in launcher on every
//! provider and under Hydra, and scenarios that run this test binary itself as the ranks of a
//! job (`rank_role`, selected by CIRCULANT_TEST_ROLE): back-to-back operations, a rank killed in
//! the middle of an operation, ranks that disagree on counts, the zero-copy counter, and the
//! use and misuse of persistent requests.
//!
//! Every job is bounded by the launcher's `--timeout`, and the launcher stops every rank it
//! started; each test also checks that no rank process is left.

mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use circulant::comm::{Choice, CommError, Communicator, Payload};
use circulant::plan::distribution::Distribution;
use circulant::plan::Problem;
use circulant_cli::cases::CaseData;

const BIN: &str = env!("CARGO_BIN_EXE_circulant");

/// `circulant run -n N [--provider P] --timeout T [extra] -- CMD...` with `env`.
fn launch(
    n: usize,
    provider: Option<&str>,
    extra: &[&str],
    cmd: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let mut command = Command::new(BIN);
    command.arg("run").arg("-n").arg(n.to_string());
    if let Some(p) = provider {
        command.arg("--provider").arg(p);
    }
    command
        .args(["--timeout", "240"])
        .args(extra)
        .arg("--")
        .args(cmd);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().expect("circulant run starts");
    assert_no_rank_left();
    out
}

/// The job's ranks all exited: no process of this test's roles or selftests is left.
fn assert_no_rank_left() {
    let me = std::process::id().to_string();
    let mut left = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
            let env = std::fs::read(entry.path().join("environ")).unwrap_or_default();
            let env = String::from_utf8_lossy(&env);
            let parent_is_me = status
                .lines()
                .any(|l| l.starts_with("PPid:") && l.split_whitespace().nth(1) == Some(&me));
            if parent_is_me && env.contains("PMI_RANK=") && !status.contains("State:\tZ") {
                left.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
    }
    assert!(left.is_empty(), "rank processes left running: {left:?}");
}

use common::output_text as text;

/// Runs selftest and checks its summary line.
fn selftest(n: usize, provider: &str, only: Option<&str>) {
    let mut cmd = vec![BIN, "selftest", "--quick"];
    if let Some(only) = only {
        cmd.extend(["--only", only]);
    }
    let out = launch(n, Some(provider), &[], &cmd, &[("CIRCULANT_TIMEOUT", "60")]);
    common::assert_selftest_passed(&out, &format!("{n} ranks, {provider}"));
    let all = text(&out);
    assert!(all.contains(&format!("provider {provider}")), "{all}");
}

/// The one-call collectives; persistent requests, split and inter-communicators open more
/// endpoints and have their own test below.
const COLLECTIVES: &str = "barrier,bcast,allgather,allgatherv,allreduce,reduce,\
    reduce_scatter_block,reduce_scatter,scan,exscan,gather,scatter,gatherv,scatterv,alltoall";

#[test]
fn selftest_tcp() {
    for n in [1, 2, 3, 4, 5, 8] {
        selftest(n, "tcp;ofi_rxm", Some(COLLECTIVES));
    }
}

#[test]
fn selftest_shm() {
    for n in [1, 2, 3, 4, 5, 8] {
        selftest(n, "shm", Some(COLLECTIVES));
    }
}

#[test]
fn selftest_sockets() {
    // sockets runs progress threads per rank: keep the job small on two cores.
    for n in [2, 3] {
        selftest(n, "sockets", Some("barrier,bcast,allgatherv,allreduce"));
    }
}

#[test]
fn selftest_udp() {
    selftest(3, "udp;ofi_rxd", Some("barrier,bcast,allgatherv"));
}

/// A misspelt `--only` name is refused before the job is joined instead of selecting nothing.
#[test]
fn selftest_refuses_unknown_collectives() {
    let out = Command::new(BIN)
        .args(["selftest", "--quick", "--only", "bcast,bcats"])
        .env("CIRCULANT_TIMEOUT", "30")
        .output()
        .expect("circulant starts");
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(!all.contains("passed"), "{all}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown collective \"bcats\""), "{all}");
    for name in ["barrier", "allgatherv", "exscan", "alltoall", "intercomm"] {
        assert!(err.contains(name), "{name} not listed:\n{all}");
    }
}

#[test]
fn selftest_under_hydra() {
    let out = Command::new("mpiexec.hydra")
        .args(["-n", "4", BIN, "selftest", "--quick"])
        .env("CIRCULANT_TIMEOUT", "60")
        .env("FI_PROVIDER", "tcp;ofi_rxm")
        .output()
        .expect("mpiexec.hydra (Debian package mpich) runs");
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("launcher pmi-1"), "{all}");
    let last = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    assert!(last.ends_with(" passed, 0 failed"), "{all}");
}

#[test]
fn persistent_split_intercomm_gatherv_scatterv() {
    selftest(
        3,
        "shm",
        Some("persistent,split,intercomm,gatherv,scatterv"),
    );
    selftest(4, "tcp;ofi_rxm", Some("persistent,intercomm"));
    selftest(5, "shm", Some("split,intercomm"));
}

#[test]
fn persistent_requests_refuse_misuse_and_finish_when_dropped() {
    let out = roles(3, "shm", "persistent", &[], "30");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        text(&out).matches("persistent ok").count(),
        3,
        "{}",
        text(&out)
    );
}

#[test]
fn typed_forced_algorithms_listed_algorithms_and_root_copies() {
    for provider in ["shm", "tcp;ofi_rxm"] {
        let out = roles(3, provider, "api", &[], "30");
        assert!(out.status.success(), "{provider}:\n{}", text(&out));
        assert_eq!(text(&out).matches("api ok").count(), 3, "{}", text(&out));
    }
}

/// Prints what a persistent allgatherv saves per operation against plain calls on the same
/// registered buffers (figures only: no timed assertion).
#[test]
fn persistent_allgatherv_time_per_operation() {
    let out = roles(4, "shm", "timing", &[], "60");
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let line = all
        .lines()
        .find(|l| l.contains("per operation"))
        .unwrap_or_else(|| panic!("no figures:\n{all}"));
    println!("{line}");
}

/// Communicator init, the fabric barrier and an allgather (a ring of one-sided writes among
/// the algorithms) for 1, 2, 4 and 7 ranks under both launchers on every provider.
#[test]
fn init_on_every_provider_under_both_launchers() {
    for provider in ["tcp;ofi_rxm", "shm", "sockets", "udp;ofi_rxd"] {
        for n in [1usize, 2, 4, 7] {
            let cmd = [BIN, "selftest", "--quick", "--only", "barrier,allgather"];
            let env = [("CIRCULANT_TIMEOUT", "60")];
            let ours = launch(n, Some(provider), &[], &cmd, &env);
            let hydra = Command::new("mpiexec.hydra")
                .args(["-n", &n.to_string(), "-genv", "FI_PROVIDER", provider])
                .args(cmd)
                .env("CIRCULANT_TIMEOUT", "60")
                .output()
                .expect("mpiexec.hydra (Debian package mpich) runs");
            for (launcher, out) in [("circulant run", ours), ("mpiexec.hydra", hydra)] {
                let all = text(&out);
                let last = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .last()
                    .unwrap_or_default()
                    .to_string();
                assert!(
                    out.status.success() && last.ends_with(" passed, 0 failed"),
                    "{n} ranks on {provider} under {launcher}:\n{all}"
                );
                assert!(
                    all.contains(&format!("{n} rank(s), provider {provider}")),
                    "{all}"
                );
            }
        }
    }
}

/// This test binary as rank `role` of a job.
fn roles(n: usize, provider: &str, role: &str, extra: &[&str], timeout: &str) -> Output {
    roles_with(n, provider, role, extra, timeout, &[])
}

/// [`roles`] with more variables in the ranks' environment.
fn roles_with(
    n: usize,
    provider: &str,
    role: &str,
    extra: &[&str],
    timeout: &str,
    env: &[(&str, &str)],
) -> Output {
    let cmd = common::entry_program("rank_role");
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let mut vars = vec![
        ("CIRCULANT_TEST_ROLE", role),
        ("CIRCULANT_TIMEOUT", timeout),
    ];
    vars.extend_from_slice(env);
    let out = launch(n, Some(provider), extra, &cmd, &vars);
    common::assert_entry_ran(&text(&out), "rank_role");
    out
}

#[test]
fn back_to_back_operations_never_overwrite_data_in_use() {
    for provider in ["shm", "tcp;ofi_rxm"] {
        let out = roles(4, provider, "stress", &[], "60");
        assert!(out.status.success(), "{provider}:\n{}", text(&out));
        assert_eq!(text(&out).matches("stress ok").count(), 4, "{}", text(&out));
    }
}

#[test]
fn a_killed_rank_makes_every_other_rank_fail_within_the_deadline() {
    for provider in ["shm", "tcp;ofi_rxm"] {
        let started = Instant::now();
        let out = roles(4, provider, "kill", &["--keep-going"], "3");
        let all = text(&out);
        assert!(!out.status.success(), "{all}");
        assert!(
            all.contains("rank 1"),
            "the launcher names the killed rank:\n{all}"
        );
        // Each survivor reports the error it got and how long it took.
        assert_eq!(
            all.matches("survivor got an error").count(),
            3,
            "{provider}:\n{all}"
        );
        assert!(started.elapsed() < Duration::from_secs(60), "{all}");
    }
}

#[test]
fn ranks_that_disagree_on_counts_all_get_an_error() {
    let out = roles(4, "tcp;ofi_rxm", "mismatch", &[], "20");
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    // Four ranks, three calls: an allgatherv, a reduce-scatter on the segment and on a plan.
    assert_eq!(all.matches("mismatch detected").count(), 12, "{all}");
}

/// On one node, as here, broadcasts and allgathervs run on the shared segment by default (one
/// copy in, one out); with it off the automatic choice takes a plan, and registered buffers
/// are never copied.
#[test]
fn registered_buffers_are_never_copied() {
    for provider in ["shm", "tcp;ofi_rxm"] {
        let env = [("CIRCULANT_SEGMENT_LIMIT", "0")];
        let out = roles_with(3, provider, "zero-copy", &[], "30", &env);
        assert!(out.status.success(), "{provider}:\n{}", text(&out));
        assert_eq!(
            text(&out).matches("zero copy ok").count(),
            3,
            "{}",
            text(&out)
        );
    }
}

/// Entry point of the ranks of the jobs above.
#[test]
#[ignore = "a rank of the jobs this file's tests start; not a test on its own"]
fn rank_role() {
    let role = common::role("CIRCULANT_TEST_ROLE");
    let mut comm = Communicator::init().expect("init");
    match role.as_str() {
        "stress" => stress(&mut comm),
        "kill" => common::rank_killed_during_broadcasts(&mut comm, 1 << 20, 50, 1_000_001),
        "mismatch" => mismatch(&mut comm),
        "zero-copy" => zero_copy(&mut comm),
        "persistent" => persistent(&mut comm),
        "timing" => timing(&mut comm),
        "api" => api(&mut comm),
        other => panic!("unknown role {other}"),
    }
}

/// 1000 broadcasts and 1000 allgathervs, back to back, alternating two buffer pairs, roots and
/// distributions, each result checked: a fast rank must never write into a buffer that a slow
/// one still reads or forwards from.
fn stress(comm: &mut Communicator) {
    let (rank, p) = (comm.rank(), comm.size());
    let len = 4096 + 3;
    let mut bufs = [comm.alloc(len).unwrap(), comm.alloc(len).unwrap()];
    let dists = [
        Distribution::Spike,
        Distribution::Regular,
        Distribution::Decreasing,
    ];
    let mut recvs = [comm.alloc(3 * len).unwrap(), comm.alloc(3 * len).unwrap()];
    for i in 0..1000 {
        // Data of generation i: a byte left from an earlier operation shows.
        let generation = i as u64;
        let root = i % p;
        let bcast = CaseData::generation(
            Problem::Broadcast {
                p,
                root,
                bytes: len,
            },
            generation,
        )
        .for_rank(rank);
        let buf = &mut bufs[i % 2];
        buf.copy_from_slice(&bcast.recv_initial);
        comm.bcast(buf, root)
            .unwrap_or_else(|e| panic!("bcast {i}: {e}"));
        if let Err(wrong) = bcast.expected.check(buf) {
            panic!("bcast {i}: {wrong}");
        }

        let dist = dists[i % dists.len()];
        let counts = dist.counts(p, dist.base_for_total(p, 2 * len));
        let gather = CaseData::generation(
            Problem::Allgatherv {
                counts: counts.clone(),
            },
            generation,
        )
        .for_rank(rank);
        let total = gather.recv_initial.len();
        let recv = &mut recvs[i % 2];
        recv.set_len(total)
            .unwrap_or_else(|e| panic!("{total} bytes fit: {e}"));
        recv.copy_from_slice(&gather.recv_initial);
        comm.allgatherv(&gather.send[..], recv, &counts)
            .unwrap_or_else(|e| panic!("allgatherv {i}: {e}"));
        if let Err(wrong) = gather.expected.check(recv) {
            panic!("allgatherv {i}: {wrong}");
        }
    }
    println!("stress ok on rank {rank}");
}

/// Rank 2 calls allgatherv, then reduce_scatter (on the shared segment and forced onto a
/// plan), with counts that differ from everyone else's: every rank must get an error, and no
/// rank's memory may be written out of bounds. Each call runs on a communicator of its own
/// (the error leaves it unusable); the job's stays usable.
fn mismatch(comm: &mut Communicator) {
    use circulant::plan::ReduceOp;
    let (rank, p) = (comm.rank(), comm.size());
    let cases = [
        ("allgatherv", Choice::Auto),
        ("reduce_scatter", Choice::Auto),
        ("reduce_scatter", Choice::Named("circulant-reduce-scatter")),
    ];
    for (op, choice) in cases {
        let mut case = comm.split(Some(0), rank as i64).unwrap().unwrap();
        let mut counts = vec![if op == "allgatherv" { 1000 } else { 4 }; p];
        if rank == 2 {
            counts[3] /= 2;
        }
        let total: usize = counts.iter().sum();
        let result = if op == "allgatherv" {
            let send = vec![rank as u8; counts[rank]];
            let mut recv = case.alloc(total).unwrap();
            case.allgatherv(&send[..], &mut recv, &counts)
        } else {
            let send = vec![rank as i64; total];
            let mut recv = vec![0i64; counts[rank]];
            case.choosing(choice)
                .reduce_scatter(&send, &mut recv, ReduceOp::Sum, &counts)
        };
        match result {
            Err(err) => println!("rank {rank}: mismatch detected: {op} {choice:?}: {err}"),
            Ok(()) => panic!("rank {rank}: {op} {choice:?} with mismatched counts succeeded"),
        }
        drop(case);
        comm.barrier()
            .expect("the job's communicator is unaffected");
    }
}

/// Broadcast and in-place allgatherv on registered buffers copy nothing, with the circulant
/// algorithms and with the automatic choice, where every pair of ranks carries more than the
/// eager limit (the smallest block here, 25 kB at p = 3, is above every default limit).
fn zero_copy(comm: &mut Communicator) {
    let (rank, p) = (comm.rank(), comm.size());
    let before = comm.bytes_copied();
    let bytes = (1 << 20) + 1;
    let mut buf = comm.alloc(bytes).unwrap();
    for (generation, choice) in [Choice::Named("circulant-bcast"), Choice::Auto]
        .into_iter()
        .enumerate()
    {
        for root in 0..p {
            let problem = Problem::Broadcast { p, root, bytes };
            let data = CaseData::generation(problem, generation as u64).for_rank(rank);
            buf.copy_from_slice(&data.recv_initial);
            comm.choosing(choice).bcast(&mut buf, root).unwrap();
            data.expected.check(&buf).unwrap();
        }
    }
    let counts: Vec<usize> = Distribution::Geometric.counts(p, 100_000);
    let mut recv = comm.alloc(counts.iter().sum()).unwrap();
    for (generation, choice) in [Choice::Named("circulant-allgatherv"), Choice::Auto]
        .into_iter()
        .enumerate()
    {
        let problem = Problem::Allgatherv {
            counts: counts.clone(),
        };
        let data = CaseData::generation(problem, generation as u64).for_rank(rank);
        let in_place = data.in_place_initial.as_ref().expect("an allgatherv");
        recv.copy_from_slice(in_place);
        comm.choosing(choice)
            .allgatherv_in_place(&mut recv, &counts)
            .unwrap();
        data.expected.check(recv.bytes()).unwrap();
    }
    assert_eq!(
        comm.bytes_copied(),
        before,
        "bytes copied on registered buffers"
    );
    // The counter does count: a plain slice is staged.
    let mut plain = [0u8; 100];
    comm.bcast(&mut plain[..], 0).unwrap();
    assert!(
        comm.bytes_copied() > before,
        "staging a plain slice is counted"
    );
    println!("zero copy ok on rank {rank}");
}

fn misuse(result: Result<impl Sized, CommError>, what: &str) {
    match result {
        Err(CommError::Request { .. }) => {}
        Err(other) => panic!("{what}: {other}"),
        Ok(_) => panic!("{what} was accepted"),
    }
}

/// Start twice, wait without start and buffer access while active are typed errors that leave
/// the request usable; other collectives run between operations; a request dropped while
/// active finishes its operation first; a broadcast on one node runs on the shared segment;
/// typed allreduce and reduce requests and a barrier's.
fn persistent(comm: &mut Communicator) {
    use circulant::plan::ReduceOp;
    let (rank, p) = (comm.rank(), comm.size());
    let mut buf = comm.alloc(10_000).unwrap();
    let before = comm.bytes_copied();
    {
        let mut bcast = comm.bcast_init(&mut buf, 1).unwrap();
        misuse(bcast.wait(), "wait without start");
        for step in 0..5u8 {
            if rank == 1 {
                bcast.buffer_mut().unwrap().fill(step);
            }
            bcast.start().unwrap();
            misuse(bcast.start(), "start twice");
            misuse(bcast.buffer_mut(), "buffer access while active");
            misuse(bcast.comm(), "the communicator while active");
            bcast.wait().unwrap();
            assert!(bcast.buffer().unwrap().iter().all(|&x| x == step));
            // Another collective between two starts.
            bcast.comm().unwrap().barrier().unwrap();
        }
        misuse(bcast.send_buffer_mut(), "a send buffer of a broadcast");
        assert_eq!(bcast.starts(), 5);
        if rank == 1 {
            bcast.buffer_mut().unwrap().fill(99);
        }
        bcast.start().unwrap();
        // Dropped while active: the operation completes before the buffer is given back.
    }
    assert!(
        buf.iter().all(|&x| x == 99),
        "the dropped operation completed"
    );
    // On one node the broadcast runs on the shared segment: each of the six starts copies
    // the message once on every rank (the root into the segment, the others out of it).
    assert_eq!(
        comm.bytes_copied() - before,
        6 * 10_000,
        "persistent bcast on the segment"
    );

    let counts = vec![4; p];
    let mut recv = comm.alloc(4 * p).unwrap();
    let mut send = comm.alloc(4).unwrap();
    let mut gather = comm.allgatherv_init(&mut send, &mut recv, &counts).unwrap();
    gather.send_buffer_mut().unwrap().fill(rank as u8);
    gather.run().unwrap();
    let got = gather.buffer().unwrap().to_vec();
    drop(gather);
    assert!((0..p).all(|r| got[4 * r..4 * r + 4].iter().all(|&x| x == r as u8)));

    // Typed reductions on registered buffers; a reduce's non-roots may pass an empty one.
    let mut send = comm.alloc(8 * 3).unwrap();
    let mut sum = comm.alloc(8 * 3).unwrap();
    // A forced algorithm: the last that applies (the automatic choice takes the first).
    let problem = Problem::Allreduce {
        p,
        reduction: circulant::plan::Reduction {
            dtype: circulant::plan::Dtype::I64,
            op: ReduceOp::Sum,
        },
        bytes: 8 * 3,
    };
    let forced = comm.algorithms(&problem).unwrap().last().unwrap().0;
    let mut allreduce = comm
        .choosing(Choice::Named(forced))
        .allreduce_init::<i64>(&mut send, &mut sum, ReduceOp::Sum)
        .unwrap();
    assert_eq!(allreduce.algorithm(), forced);
    for step in 0..3i64 {
        let mine = [rank as i64, step, -(rank as i64) * step];
        allreduce
            .send_buffer_mut()
            .unwrap()
            .copy_from_slice(bytemuck::cast_slice(&mine));
        allreduce.run().unwrap();
        let got: &[i64] = bytemuck::cast_slice(allreduce.buffer().unwrap());
        let ranks = (p * (p - 1) / 2) as i64;
        assert_eq!(got, [ranks, step * p as i64, -ranks * step], "step {step}");
    }
    drop(allreduce);
    let mut most = comm
        .allreduce_init::<i64>(&mut send, &mut sum, ReduceOp::Max)
        .unwrap();
    most.run().unwrap();
    let got: &[i64] = bytemuck::cast_slice(most.buffer().unwrap());
    assert_eq!(got, [p as i64 - 1, 2, 0], "the last step's data, maximum");
    drop(most);
    let root = p - 1;
    let mut send = comm.alloc(8).unwrap();
    let mut most = comm.alloc(if rank == root { 8 } else { 0 }).unwrap();
    let mut reduce = comm
        .reduce_init::<f64>(&mut send, &mut most, ReduceOp::Max, root)
        .unwrap();
    reduce
        .send_buffer_mut()
        .unwrap()
        .copy_from_slice(&(rank as f64 * 1.5).to_ne_bytes());
    reduce.run().unwrap();
    if rank == root {
        let got = f64::from_ne_bytes(reduce.buffer().unwrap().try_into().unwrap());
        assert_eq!(got, root as f64 * 1.5);
    }
    drop(reduce);
    // A persistent call on the shared segment reports what it did, as the blocking one does.
    let mut small = comm.alloc(64).unwrap();
    let segment = Choice::Named("segment-bcast");
    comm.choosing(segment).bcast(&mut small, 0).unwrap();
    let blocking = comm.last().unwrap().stats;
    let mut bcast = comm.choosing(segment).bcast_init(&mut small, 0).unwrap();
    bcast.run().unwrap();
    let executed = bcast.comm().unwrap().last().unwrap();
    assert_eq!(executed.algorithm, "segment-bcast");
    assert_eq!(executed.stats, blocking);
    if rank != 0 {
        assert_eq!(
            executed.stats.bytes_copied, 64,
            "a reader copies the part out"
        );
    }
    drop(bcast);
    let mut barrier = comm.barrier_init().unwrap();
    misuse(barrier.buffer(), "the buffer of a barrier");
    misuse(barrier.send_buffer_mut(), "a send buffer of a barrier");
    for _ in 0..3 {
        barrier.run().unwrap();
    }
    drop(barrier);
    persistent_reduce_scatters(comm);

    // Wrong lengths are refused up front, and the refusal ends the communicator on every
    // rank (the peers counted on the request's first start).
    let mut short = comm.alloc(3).unwrap();
    let mut recv = comm.alloc(10).unwrap();
    assert!(matches!(
        comm.allgatherv_init(&mut short, &mut recv, &counts),
        Err(CommError::Argument { .. })
    ));
    assert!(matches!(comm.barrier(), Err(CommError::Transport(_))));
    println!("persistent ok on rank {rank}");
}

/// Persistent typed reduce-scatters (equal blocks; counts with an empty part), with the
/// automatic choice and each algorithm forced: every start reduces the data then in the send
/// buffers, against the reduction computed here.
fn persistent_reduce_scatters(comm: &mut Communicator) {
    use circulant::plan::ReduceOp;
    let (rank, p) = (comm.rank(), comm.size());
    let term = |r: usize, i: usize, step: usize| (r * 101 + i * 13 + step * 1000) as i32 - 500;
    let sum = |i: usize, step: usize| (0..p).map(|r| term(r, i, step)).sum::<i32>();
    let block = 6;
    let counts: Vec<usize> = (0..p).map(|r| if r == 1 { 0 } else { 2 * r + 3 }).collect();
    let offset: usize = counts[..rank].iter().sum();
    let total: usize = counts.iter().sum();
    for (block_choice, choice) in common::REDUCE_SCATTER_ALGORITHMS {
        let mut send = comm.alloc(4 * block * p).unwrap();
        let mut recv = comm.alloc(4 * block).unwrap();
        let mut request = comm
            .choosing(block_choice)
            .reduce_scatter_block_init::<i32>(&mut send, &mut recv, ReduceOp::Sum)
            .unwrap();
        if let Choice::Named(name) = block_choice {
            assert_eq!(request.algorithm(), name);
        }
        for step in 0..3 {
            let mine: Vec<i32> = (0..block * p).map(|i| term(rank, i, step)).collect();
            let send = request.send_buffer_mut().unwrap();
            send.copy_from_slice(bytemuck::cast_slice(&mine));
            request.run().unwrap();
            let got: &[i32] = bytemuck::cast_slice(request.buffer().unwrap());
            let want: Vec<i32> = (rank * block..(rank + 1) * block)
                .map(|i| sum(i, step))
                .collect();
            assert_eq!(got, want, "{block_choice:?} step {step}");
        }
        drop(request);
        let mut send = comm.alloc(4 * total).unwrap();
        let mut recv = comm.alloc(4 * counts[rank]).unwrap();
        let mut request = comm
            .choosing(choice)
            .reduce_scatter_init::<u32>(&mut send, &mut recv, ReduceOp::Bxor, &counts)
            .unwrap();
        if let Choice::Named(name) = choice {
            assert_eq!(request.algorithm(), name);
        }
        for step in 0..3 {
            let mine: Vec<u32> = (0..total).map(|i| term(rank, i, step) as u32).collect();
            let send = request.send_buffer_mut().unwrap();
            send.copy_from_slice(bytemuck::cast_slice(&mine));
            request.run().unwrap();
            let got: &[u32] = bytemuck::cast_slice(request.buffer().unwrap());
            let want: Vec<u32> = (offset..offset + counts[rank])
                .map(|i| (0..p).fold(0, |x, r| x ^ term(r, i, step) as u32))
                .collect();
            assert_eq!(got, want, "{choice:?} step {step}");
        }
    }
}

/// Typed reductions with a forced algorithm, the list of algorithms that apply, what a
/// plain-memory broadcast copies at the root, and a length beyond a buffer's capacity.
fn api(comm: &mut Communicator) {
    use circulant::plan::ReduceOp;
    let (rank, p) = (comm.rank(), comm.size());
    let send = [rank as i64 + 1; 5];
    let mut sum = [0i64; 5];
    let total = (p * (p + 1) / 2) as i64;
    for name in ["recursive-doubling-allreduce", "reduce-scatter-allgather"] {
        sum.fill(0);
        comm.choosing(Choice::Named(name))
            .allreduce(&send, &mut sum, ReduceOp::Sum)
            .unwrap();
        assert_eq!(sum, [total; 5], "{name}");
        assert_eq!(comm.last().unwrap().algorithm, name);
    }
    let mut root_sum = [0i64; 5];
    comm.choosing(Choice::Named("binomial-reduce"))
        .reduce(&send, &mut root_sum, ReduceOp::Sum, 0)
        .unwrap();
    if rank == 0 {
        assert_eq!(root_sum, [total; 5]);
    }
    let mut prefix = [0i64; 5];
    comm.choosing(Choice::Named("hypercube-scan"))
        .scan(&send, &mut prefix, ReduceOp::Sum)
        .unwrap();
    assert_eq!(prefix, [((rank + 1) * (rank + 2) / 2) as i64; 5]);
    prefix.fill(0);
    comm.choosing(Choice::Named("hypercube-scan"))
        .exscan(&send, &mut prefix, ReduceOp::Sum)
        .unwrap();
    if rank > 0 {
        assert_eq!(prefix, [(rank * (rank + 1) / 2) as i64; 5]);
    }

    let bcast = Problem::Broadcast {
        p,
        root: 0,
        bytes: 1 << 20,
    };
    let listed = comm.algorithms(&bcast).unwrap();
    assert!(
        listed.iter().any(|(n, _)| *n == "circulant-bcast"),
        "{listed:?}"
    );
    assert!(listed.windows(2).all(|w| w[0].1 <= w[1].1), "fastest first");
    assert!(
        listed.iter().all(|(n, _)| n.ends_with("bcast")),
        "{listed:?}"
    );

    // The root's plain buffer is staged in once and not copied back; the others' only out.
    let mut data = vec![if rank == 1 { 7u8 } else { 0 }; 10_000];
    let before = comm.bytes_copied();
    comm.choosing(Choice::Named("circulant-bcast"))
        .bcast(&mut data[..], 1)
        .unwrap();
    assert!(data.iter().all(|&x| x == 7));
    let copied = comm.bytes_copied() - before;
    assert_eq!(copied, 10_000, "rank {rank} copied {copied} bytes");

    let mut buf = comm.alloc(100).unwrap();
    assert!(matches!(buf.set_len(101), Err(CommError::Argument { .. })));
    buf.set_len(50).unwrap();
    assert_eq!(buf.len(), 50);
    comm.barrier().unwrap();
    println!("api ok on rank {rank}");
}

/// Plain and persistent circulant allgatherv, 4 KiB in all, 2000 operations each; rank 0
/// prints the mean time per operation of both.
fn timing(comm: &mut Communicator) {
    use circulant::comm::Choice;
    let (rank, p) = (comm.rank(), comm.size());
    let counts = vec![1024; p];
    let mut send = comm.alloc(1024).unwrap();
    let mut recv = comm.alloc(1024 * p).unwrap();
    send.fill(rank as u8);
    let choice = Choice::Named("circulant-allgatherv");
    let n = 2000;
    comm.barrier().unwrap();
    let started = Instant::now();
    for _ in 0..n {
        comm.choosing(choice)
            .allgatherv(&send, &mut recv, &counts)
            .unwrap();
    }
    let plain = started.elapsed() / n;
    let mut request = comm
        .choosing(choice)
        .allgatherv_init(&mut send, &mut recv, &counts)
        .unwrap();
    request.comm().unwrap().barrier().unwrap();
    let started = Instant::now();
    for _ in 0..n {
        request.run().unwrap();
    }
    let persistent = started.elapsed() / n;
    assert!((0..p).all(|r| request.buffer().unwrap()[1024 * r] == r as u8));
    if rank == 0 {
        println!(
            "allgatherv of {} B on {p} ranks per operation: plain {plain:?}, persistent {persistent:?}",
            1024 * p
        );
    }
}
