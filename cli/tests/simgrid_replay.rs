//! Plans replayed under SimGrid (benches/simgrid): `circulant plan` writes a ring allgather,
//! benches/simgrid/replay.c runs it under smpirun on a platform of benches/simgrid/platform,
//! and its simulated time is checked against the time worked out here from the platform's
//! latency and bandwidth. Skips (`skipped: ...`) where smpicc, smpirun or python3 is missing,
//! except under CI=true. The plan format itself is checked without SimGrid.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{circulant, missing, Started};

/// The platform's figures (benches/simgrid/platform, kind hdr): between nodes 1 µs and
/// 25 GB/s, inside a node 0.3 µs and 10 GB/s.
const ACROSS: (f64, f64) = (1e-6, 25e9);
const INSIDE: (f64, f64) = (0.3e-6, 10e9);

/// Bytes each rank contributes: the ring moves one such block per round.
const BLOCK: usize = 1_000_000;

fn simgrid_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../benches/simgrid")
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
}

/// Runs `command` to its end (at most two minutes) and returns its standard output; panics
/// with its output when it fails.
fn output(command: Command) -> String {
    let what = format!("{command:?}");
    let done = Started::new(command).finish(Duration::from_secs(120));
    assert!(done.status.success(), "{what} failed: {done:?}");
    done.stdout
}

/// A scratch directory of this test, removed first if a run before left it.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("circulant-simgrid-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// The simulated time of the ring allgather on `nodes` × `cores` ranks (placed by blocks).
fn simulated_ring(dir: &Path, nodes: usize, cores: usize) -> f64 {
    let p = nodes * cores;
    let replay = dir.join("replay");
    let mut cc = Command::new("smpicc");
    cc.arg("-O2")
        .arg("-o")
        .arg(&replay)
        .arg(simgrid_dir().join("replay.c"));
    output(cc);
    let platform = dir.join("platform");
    let mut gen = Command::new(simgrid_dir().join("platform"));
    gen.args(["--nodes", &nodes.to_string(), "--cores", &cores.to_string()])
        .arg("--out")
        .arg(&platform);
    output(gen);
    let plan = dir.join("ring.plan");
    let bytes = (BLOCK * p).to_string();
    let mut args = vec!["plan", "--op", "allgatherv", "--bytes", &bytes];
    let (n, k) = (nodes.to_string(), cores.to_string());
    let p_text = p.to_string();
    if cores > 1 {
        args.extend(["--nodes", &n, "--ranks-per-node", &k]);
    } else {
        args.extend(["-p", &p_text]);
    }
    args.extend(["--algorithm", "ring-allgather", "--out"]);
    let mut make = circulant(&args);
    make.arg(&plan);
    output(make);
    let mut run = Command::new(simgrid_dir().join("smpirun"));
    run.arg(&platform)
        .arg(p.to_string())
        .arg(&replay)
        .arg(&plan);
    let out = output(run);
    let time = out
        .lines()
        .find_map(|l| l.strip_prefix("time_s "))
        .unwrap_or_else(|| panic!("no time_s line in {out}"));
    time.trim().parse().expect("a time in seconds")
}

/// The ring by hand: rank i sends its newest block to i + 1 in every round once it has
/// arrived, one message to a target at a time, each taking latency + block / bandwidth of its
/// level. recv[i] is when rank i's block of the current round has arrived.
fn ring_by_hand(node_of: impl Fn(usize) -> usize, p: usize) -> f64 {
    let cost = |from: usize, to: usize| {
        let (lat, bw) = if node_of(from) == node_of(to) {
            INSIDE
        } else {
            ACROSS
        };
        lat + BLOCK as f64 / bw
    };
    // Round 0: every rank's own block goes out at once.
    let mut recv: Vec<f64> = (0..p).map(|i| cost((i + p - 1) % p, i)).collect();
    for _ in 1..p - 1 {
        // Rank i − 1 forwards what it got last round once it has it, and once its previous
        // message to i (which i got at recv[i]) is done.
        recv = (0..p)
            .map(|i| {
                let from = (i + p - 1) % p;
                recv[from].max(recv[i]) + cost(from, i)
            })
            .collect();
    }
    recv.into_iter().fold(0.0, f64::max)
}

fn have_tools() -> bool {
    for tool in ["smpicc", "smpirun", "python3"] {
        if !on_path(tool) {
            missing(tool, "ci/deps installs libsimgrid-dev");
            return false;
        }
    }
    true
}

fn assert_close(simulated: f64, by_hand: f64) {
    let rel = (simulated - by_hand).abs() / by_hand;
    assert!(
        rel < 1e-3,
        "simulated {simulated:e} s, by hand {by_hand:e} s ({:.3} %)",
        rel * 100.0
    );
}

#[test]
fn a_ring_of_eight_nodes_takes_seven_messages() {
    if !have_tools() {
        return;
    }
    let dir = scratch("p8");
    let simulated = simulated_ring(&dir, 8, 1);
    // Seven rounds of 1 µs + 1 MB at 25 GB/s = 41 µs: 287 µs.
    let by_hand = ring_by_hand(|r| r, 8);
    assert!((by_hand - 7.0 * 41e-6).abs() < 1e-12);
    assert_close(simulated, by_hand);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_ring_on_two_nodes_of_four_waits_for_its_slow_edges() {
    if !have_tools() {
        return;
    }
    let dir = scratch("2x4");
    let simulated = simulated_ring(&dir, 2, 4);
    // Six edges inside the nodes (100.3 µs a block) and two across (41 µs): the blocks queue
    // behind the slower edges.
    let by_hand = ring_by_hand(|r| r / 4, 8);
    assert!(by_hand > 7.0 * 100.3e-6 - 1e-12, "{by_hand}");
    assert_close(simulated, by_hand);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_plan_file_has_every_ranks_rounds_and_their_offsets() {
    let dir = scratch("format");
    let plan = dir.join("binomial.plan");
    let mut make = circulant(&[
        "plan",
        "--op",
        "bcast",
        "-p",
        "4",
        "--bytes",
        "1000",
        "--algorithm",
        "binomial-bcast",
        "--out",
    ]);
    make.arg(&plan);
    let said = output(make);
    assert!(said.contains("3 messages"), "{said}");
    let text = std::fs::read_to_string(&plan).expect("the plan");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "circulant-plan 1 p 4");
    assert_eq!(
        lines[1],
        "algorithm binomial-bcast collective bcast bytes 1000 root 0"
    );
    // The root sends the whole message to 2, then to 1; 2 forwards it to 3 once it has it.
    assert!(
        text.contains("\n0 s 2 1000 1 -\n1 s 1 1000 1 -\n"),
        "{text}"
    );
    assert!(text.contains("\n0 r 0 1000\n1 s 3 1000 1 0\n"), "{text}");
    // The last line locates the table of offsets, one per rank, each at its rank's line.
    let table: usize = lines.last().expect("lines").parse().expect("an offset");
    for (rank, entry) in text[table..].lines().take(4).enumerate() {
        let at: usize = entry.parse().expect("an offset");
        assert!(
            text[at..].starts_with(&format!("rank {rank} ")),
            "{}",
            &text[at..]
        );
    }
    let mut wrong = circulant(&["plan", "--op", "bcast", "-p", "4", "--bytes", "1000"]);
    wrong
        .args(["--algorithm", "ring-allgather", "--out"])
        .arg(&plan);
    let done = Started::new(wrong).finish(Duration::from_secs(60));
    assert!(!done.status.success());
    assert!(
        done.stderr
            .contains("ring-allgather does not apply to this problem; these do: circulant-bcast"),
        "{}",
        done.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}
