//! Merged writes between real processes: selftest passes on shm, tcp;ofi_rxm and sockets with
//! the default limits, with CIRCULANT_IOV_LIMIT at 1, 2 and 4 and with writes capped by
//! CIRCULANT_MAX_WRITE_BYTES (the zero-copy path forced, so that every transfer is posted as
//! merged writes); ranks whose limits differ all fail with an error naming both limits; and a
//! circulant allgatherv posts as many writes as `plan::merge` says, fewer with 4 segments than
//! with 1, more with a byte cap than without.
//!
//! Ranks are this test binary (`rank_role`, selected by CIRCULANT_TEST_ROLE) or the CLI's
//! selftest under the built-in launcher, which bounds every job and stops every rank it
//! started.

mod common;

use std::process::{Command, Output};

use circulant::comm::{Choice, Communicator};
use circulant::plan::merge::{write_count, IovLimits};
use circulant::plan::{registry, Problem};

const BIN: &str = env!("CARGO_BIN_EXE_circulant");

/// Variables of merged writes that the ranks take only from the test.
const LIMIT_VARS: [&str; 3] = [
    "CIRCULANT_IOV_LIMIT",
    "CIRCULANT_MAX_WRITE_BYTES",
    "CIRCULANT_EAGER_LIMIT",
];

fn launch(n: usize, provider: &str, cmd: &[&str], env: &[(&str, &str)]) -> Output {
    Job::new(n, 240)
        .provider(provider)
        .without(&LIMIT_VARS)
        .envs(env)
        .run(cmd)
}

use common::{assert_selftest_passed, output_text as text, Job};

/// This test binary as rank `role` of a job of `n` ranks.
fn roles(n: usize, provider: &str, role: &str, env: &[(&str, &str)]) -> Output {
    Job::new(n, 240)
        .provider(provider)
        .without(&LIMIT_VARS)
        .envs(env)
        .test_binary("rank_role", role)
}

/// selftest on the zero-copy path (every transfer posted as merged writes) with `var=value`.
fn zero_copy_selftest(n: usize, provider: &str, var: &str, value: &str) {
    let out = launch(
        n,
        provider,
        &[BIN, "selftest", "--quick"],
        &[
            ("CIRCULANT_TIMEOUT", "60"),
            ("CIRCULANT_EAGER_LIMIT", "0"),
            (var, value),
        ],
    );
    assert_selftest_passed(&out, &format!("p = {n}, {provider}, {var}={value:?}"));
}

#[test]
fn selftest_passes_with_the_providers_limits_and_lowered_ones() {
    // "": the default limits (the provider's: 4 on shm, 8 on sockets; 2 over tcp;ofi_rxm,
    // whose own limit of 4 is then asked for explicitly).
    for (provider, limits) in [
        ("shm", &["", "1", "2"][..]),
        ("tcp;ofi_rxm", &["", "1", "4"][..]),
        ("sockets", &["", "1", "2"][..]),
    ] {
        for n in [3, 4] {
            for limit in limits {
                zero_copy_selftest(n, provider, "CIRCULANT_IOV_LIMIT", limit);
            }
        }
    }
}

#[test]
fn selftest_passes_with_writes_cut_at_a_byte_cap() {
    for provider in ["shm", "tcp;ofi_rxm", "sockets"] {
        // 100: pieces of the larger sizes are cut into many writes; 4096: some are.
        for (n, cap) in [(3, "100"), (4, "4096")] {
            zero_copy_selftest(n, provider, "CIRCULANT_MAX_WRITE_BYTES", cap);
        }
    }
}

#[test]
fn invalid_limits_are_refused_at_init_and_by_info() {
    for (var, values, expected) in [
        (
            "CIRCULANT_IOV_LIMIT",
            ["0", "-1", "four", "1025"],
            "expected a number of segments from 1 to 1024",
        ),
        (
            "CIRCULANT_MAX_WRITE_BYTES",
            ["0", "-1", "many", "4611686018427387905"],
            "expected a number of bytes from 1 to 4611686018427387904",
        ),
    ] {
        for value in values {
            let out = launch(2, "shm", &[BIN, "selftest", "--quick"], &[(var, value)]);
            let all = text(&out);
            assert!(!out.status.success(), "{var}={value}:\n{all}");
            assert!(
                all.contains(&format!("{var}={value:?}")) && all.contains(expected),
                "{var}={value}:\n{all}"
            );
            let out = Command::new(BIN)
                .arg("info")
                .env(var, value)
                .output()
                .expect("circulant info starts");
            assert!(!out.status.success(), "info, {var}={value}");
            assert!(text(&out).contains(var), "info, {var}={value}");
        }
    }
    // shm has no byte cap of its own: none without the variable, the variable's with it.
    let shm = |var, value| info_of("shm", var, value);
    assert_eq!(shm("CIRCULANT_MAX_WRITE_BYTES", None)["name"], "shm");
    assert!(shm("CIRCULANT_MAX_WRITE_BYTES", None)["merged_max_write_bytes"].is_null());
    assert_eq!(
        shm("CIRCULANT_MAX_WRITE_BYTES", Some("4096"))["merged_max_write_bytes"],
        4096
    );
    // The limits in use: shm allows 4 segments, lowered to 2.
    let lowered = shm("CIRCULANT_IOV_LIMIT", Some("2"));
    assert_eq!(lowered["merged_iov_limit"], 2);
    assert_eq!(lowered["merged_rma_iov_limit"], 2);
    // tcp;ofi_rxm allows 4 segments; a job uses 2 unless CIRCULANT_IOV_LIMIT says otherwise.
    for (limit, merged) in [(None, 2), (Some("4"), 4), (Some("1"), 1)] {
        let tcp = info_of("tcp;ofi_rxm", "CIRCULANT_IOV_LIMIT", limit);
        assert_eq!(tcp["name"], "tcp;ofi_rxm");
        assert_eq!(tcp["rma_iov_limit"], 4);
        assert_eq!(tcp["merged_iov_limit"], merged, "{limit:?}");
        assert_eq!(tcp["merged_rma_iov_limit"], merged, "{limit:?}");
    }
}

/// `circulant info --json`'s entry for `provider`, with `var` set to `value` or unset.
fn info_of(provider: &str, var: &str, value: Option<&str>) -> serde_json::Value {
    let mut cmd = Command::new(BIN);
    cmd.args(["info", "--json"])
        .env("FI_PROVIDER", provider)
        .env_remove(var);
    if let Some(value) = value {
        cmd.env(var, value);
    }
    let out = cmd.output().expect("circulant info starts");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    report["providers"][0].clone()
}

#[test]
fn ranks_with_different_limits_all_fail_naming_both() {
    for (provider, role, ours, theirs) in [
        (
            "shm",
            "limits",
            "iov_limit 1, rma_iov_limit 1",
            "iov_limit 2",
        ),
        (
            "tcp;ofi_rxm",
            "limits",
            "iov_limit 1, rma_iov_limit 1",
            "iov_limit 2",
        ),
        (
            "shm",
            "caps",
            "at most 128 bytes per write",
            "at most 64 bytes",
        ),
    ] {
        let started = std::time::Instant::now();
        let out = roles(
            3,
            provider,
            role,
            &[("CIRCULANT_TIMEOUT", "20"), ("CIRCULANT_EAGER_LIMIT", "0")],
        );
        let all = text(&out);
        assert!(!out.status.success(), "{provider}:\n{all}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "{provider}: took {:?}",
            started.elapsed()
        );
        assert!(
            all.contains(ours) && all.contains(theirs),
            "{provider}: the error names both limits:\n{all}"
        );
        assert!(
            !all.contains("finished"),
            "{provider}: no rank may finish:\n{all}"
        );
    }
}

/// Runs the `count` role on 8 ranks of shm with `env` and returns the writes posted and the
/// pieces sent, summed over ranks; every rank must post the writes its plan merges to.
fn counted(env: &[(&str, &str)]) -> (u64, u64) {
    counted_over("shm", env)
}

/// [`counted`] over `provider`. `CIRCULANT_TEST_SEGMENTS` in `env` gives the segments the
/// ranks must merge under where `CIRCULANT_IOV_LIMIT` is not set.
fn counted_over(provider: &str, env: &[(&str, &str)]) -> (u64, u64) {
    let mut all_env = vec![("CIRCULANT_TIMEOUT", "60"), ("CIRCULANT_EAGER_LIMIT", "0")];
    all_env.extend_from_slice(env);
    let out = roles(8, provider, "count", &all_env);
    let all = text(&out);
    assert!(out.status.success(), "{env:?}:\n{all}");
    let (mut posted, mut pieces, mut ranks) = (0, 0, 0);
    // The test harness may print its own words before the rank's line.
    for line in all
        .lines()
        .filter_map(|l| l.find("writes ").map(|at| &l[at..]))
    {
        let f: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse().expect("a number"))
            .collect();
        // rank, posted, from the plan, pieces
        assert_eq!(f[1], f[2], "{env:?}: {line}");
        posted += f[1];
        pieces += f[3];
        ranks += 1;
    }
    assert_eq!(ranks, 8, "{env:?}:\n{all}");
    (posted, pieces)
}

#[test]
fn a_circulant_allgatherv_posts_the_merged_writes_of_its_plan() {
    let (one, pieces) = counted(&[("CIRCULANT_IOV_LIMIT", "1")]);
    let (four, _) = counted(&[("CIRCULANT_IOV_LIMIT", "4")]);
    assert!(four < one, "limit 4: {four} writes, limit 1: {one}");
    assert!(one <= pieces);
    // Capped at 3 bytes, no write carries more: the 8-byte blocks take at least 8/3 writes
    // each.
    let (capped, _) = counted(&[
        ("CIRCULANT_IOV_LIMIT", "4"),
        ("CIRCULANT_MAX_WRITE_BYTES", "3"),
    ]);
    assert!(
        3 * capped >= 8 * pieces,
        "{capped} writes for {pieces} pieces"
    );
}

#[test]
fn tcp_jobs_merge_two_segments_unless_told_otherwise() {
    // Every rank posts the merged writes of its plan under 2 segments.
    counted_over("tcp;ofi_rxm", &[("CIRCULANT_TEST_SEGMENTS", "2")]);
    // Ranks that agree with rank 1's CIRCULANT_IOV_LIMIT=2 without setting it run; with its
    // CIRCULANT_IOV_LIMIT=4 (the provider's own limit) they disagree.
    let env = |limit| {
        [
            ("CIRCULANT_TIMEOUT", "20"),
            ("CIRCULANT_EAGER_LIMIT", "0"),
            ("CIRCULANT_TEST_RANK1_LIMIT", limit),
        ]
    };
    let out = roles(3, "tcp;ofi_rxm", "rank1-limit", &env("2"));
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        (0..3).all(|r| all.contains(&format!("rank {r} finished"))),
        "{all}"
    );
    let out = roles(3, "tcp;ofi_rxm", "rank1-limit", &env("4"));
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains("iov_limit 2, rma_iov_limit 2") && all.contains("iov_limit 4"),
        "{all}"
    );
}

/// Entry point of the ranks of the jobs above.
#[test]
#[ignore = "a rank of the jobs this file's tests start; not a test on its own"]
fn rank_role() {
    let role = common::role("CIRCULANT_TEST_ROLE");
    let rank: usize = std::env::var("PMI_RANK")
        .ok()
        .and_then(|r| r.parse().ok())
        .expect("PMI_RANK");
    // Rank 1 alone merges under other limits than the rest.
    if role == "limits" {
        std::env::set_var("CIRCULANT_IOV_LIMIT", if rank == 1 { "2" } else { "1" });
    }
    // Rank 1 alone sets the limit the test gives; the others keep the default.
    if role == "rank1-limit" && rank == 1 {
        let limit = std::env::var("CIRCULANT_TEST_RANK1_LIMIT").expect("a limit");
        std::env::set_var("CIRCULANT_IOV_LIMIT", limit);
    }
    if role == "caps" {
        std::env::set_var(
            "CIRCULANT_MAX_WRITE_BYTES",
            if rank == 1 { "64" } else { "128" },
        );
    }
    let comm = Communicator::init();
    match role.as_str() {
        "limits" | "caps" | "rank1-limit" => limits(comm),
        "count" => count(comm.expect("init")),
        other => panic!("unknown role {other}"),
    }
}

/// Init (which reads every card where the key-value space is local) or the first collectives
/// (which fetch the cards they need) must fail on every rank. A rank that only hears of the
/// failure through another's abort waits a moment before it exits, as the launcher stops every
/// rank once one has exited: the rank that found the mismatch reports it first.
fn limits(comm: circulant::comm::Result<Communicator>) {
    let fail = |err: circulant::comm::CommError| -> ! {
        let text = err.to_string();
        if !text.contains("rma_iov_limit") {
            std::thread::sleep(std::time::Duration::from_secs(3));
        }
        eprintln!("failed: {text}");
        std::process::exit(3);
    };
    let mut comm = comm.unwrap_or_else(|err| fail(err));
    let p = comm.size();
    let counts = vec![8; p];
    let mut buf = vec![0u8; 8 * p];
    for _ in 0..10 {
        let mine = [comm.rank() as u8; 8];
        if let Err(err) = comm.allgatherv(&mine[..], &mut buf[..], &counts) {
            fail(err);
        }
    }
    println!("rank {} finished", comm.rank());
}

/// One circulant allgatherv of 8 bytes per rank, in place on registered memory: the writes
/// posted, those `plan::merge` gives this rank's plan under the configured limits (the
/// providers' are 4 on shm and tcp;ofi_rxm, with no byte cap), and the plan's pieces.
fn count(mut comm: Communicator) {
    let (rank, p) = (comm.rank(), comm.size());
    let limit: usize = std::env::var("CIRCULANT_IOV_LIMIT")
        .or_else(|_| std::env::var("CIRCULANT_TEST_SEGMENTS"))
        .expect("a limit")
        .parse()
        .expect("a number");
    let counts = vec![8; p];
    let mut buf = comm.alloc(8 * p).expect("alloc");
    for (i, x) in buf.iter_mut().enumerate() {
        *x = if i / 8 == rank { rank as u8 + 1 } else { 0 };
    }
    comm.choosing(Choice::Named("circulant-allgatherv"))
        .allgatherv_in_place(&mut buf, &counts)
        .expect("allgatherv");
    for (i, x) in buf.iter().enumerate() {
        assert_eq!(*x, (i / 8) as u8 + 1, "byte {i}");
    }
    let last = comm.last().expect("a collective ran");
    assert_eq!(last.algorithm, "circulant-allgatherv");
    let problem = Problem::Allgatherv { counts };
    let alg = registry::by_name("circulant-allgatherv", &problem, &comm.model()).expect("applies");
    let cap = std::env::var("CIRCULANT_MAX_WRITE_BYTES").map_or(0, |c| c.parse().expect("a cap"));
    let limits = IovLimits::new(limit.min(4), limit.min(4))
        .expect("limits")
        .with_max_bytes(cap);
    let (mut planned, mut pieces) = (0, 0);
    for round in alg.rank_plan(rank).expect("plan").rounds {
        for t in &round.sends {
            planned += write_count(t, limits);
            pieces += t.pieces.len();
        }
    }
    println!("writes {rank} {} {planned} {pieces}", last.stats.writes);
}
