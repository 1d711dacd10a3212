//! Jobs under a real one-node Slurm (Debian's slurm-wlm and munge, started by `ci/slurm up`):
//! `srun --mpi=pmi2` (PMI-2, and PMI-1 when asked for), `srun --mpi=pmix` (PMIx), and the
//! error that replaces p silent singletons under `srun --mpi=none`.
//!
//! Each test brings the cluster up unless it already runs (as `.ci/run` does), and stops what
//! it started when it ends, also when it fails. The tests run one at a time: one cluster.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

use common::{assert_all_gone, bin, clean_summaries, missing, run, Finished};

/// One cluster at a time.
static CLUSTER: Mutex<()> = Mutex::new(());

/// A running Slurm; stopped on drop if this test started it.
struct Slurm {
    conf: String,
    started_here: bool,
}

fn script() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("ci/slurm")
}

impl Slurm {
    /// The running cluster, or None with the reason printed when Slurm cannot be had here
    /// (a failure under CI).
    fn up() -> Option<Slurm> {
        if Command::new("srun").arg("--version").output().is_err() {
            missing("srun", "ci/deps installs slurm-wlm and munge");
            return None;
        }
        let dir = std::env::var("CIRCULANT_SLURM_DIR")
            .unwrap_or_else(|_| "/tmp/circulant-slurm".to_owned());
        let conf = format!("{dir}/slurm.conf");
        let running = Command::new(script())
            .arg("status")
            .status()
            .is_ok_and(|s| s.success());
        if running {
            return Some(Slurm {
                conf,
                started_here: false,
            });
        }
        let out = Command::new(script())
            .arg("up")
            .output()
            .expect("run ci/slurm up");
        if !out.status.success() {
            let reason = String::from_utf8_lossy(&out.stderr);
            // Without root no slurmd can start job steps: the only acceptable skip, and not
            // under CI, which runs as root.
            if !rustix::process::geteuid().is_root() {
                missing("root", &format!("Slurm needs root here: {}", reason.trim()));
                return None;
            }
            panic!("ci/slurm up failed: {reason}");
        }
        Some(Slurm {
            conf,
            started_here: true,
        })
    }

    fn srun(&self, mpi: &str, n: usize, args: &[&str]) -> Command {
        let mut command = Command::new("srun");
        command
            .env("SLURM_CONF", &self.conf)
            .arg(format!("--mpi={mpi}"))
            .arg("-n")
            .arg(n.to_string())
            // Slurm's own deadline on top of the harness's: a hung step is killed.
            .arg("--time=2")
            .arg(bin())
            .args(args);
        command
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        if self.started_here {
            let stopped = Command::new(script()).arg("down").status();
            if !stopped.as_ref().is_ok_and(|s| s.success()) && !std::thread::panicking() {
                panic!("ci/slurm down failed: {stopped:?}");
            }
        }
    }
}

fn passes(done: &Finished, n: usize, kind: &str) {
    assert_eq!(done.code(), Some(0), "{done:?}");
    assert_eq!(clean_summaries(&done.stdout), n, "{}", done.stdout);
    for rank in 0..n {
        assert!(
            done.stdout
                .contains(&format!("rank {rank} of {n}: {kind} ")),
            "{}",
            done.stdout
        );
    }
    assert_all_gone(&done.pids());
}

/// No rank got past the abort, and nothing is left running.
fn ended_by_abort(done: &Finished) {
    assert_eq!(clean_summaries(&done.stdout), 0, "{}", done.stdout);
    assert_all_gone(&done.pids());
}

fn selftest_passes(done: &Finished, n: usize, kind: &str) {
    assert_eq!(done.code(), Some(0), "{done:?}");
    assert!(
        done.stdout.contains(&format!(
            "selftest: {n} rank(s), provider shm, launcher {kind}"
        )),
        "{}",
        done.stdout
    );
    assert!(done.stdout.contains(" passed, 0 failed"), "{}", done.stdout);
}

#[test]
fn srun_mpi_pmi2_runs_pmi_check_and_selftest_over_pmi2_and_pmi1() {
    let _one = CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let Some(slurm) = Slurm::up() else { return };
    let done = run(slurm.srun("pmi2", 4, &["pmi-check"]));
    passes(&done, 4, "pmi-2");
    // Slurm's PMI-1 reads a request with one read() of 1024 bytes: put_bytes pieces and the
    // over-long-value check must respect that.
    let mut pmi1 = slurm.srun("pmi2", 4, &["pmi-check"]);
    pmi1.env("CIRCULANT_PMI", "pmi1");
    let done = run(pmi1);
    passes(&done, 4, "pmi-1");
    let done = run(slurm.srun("pmi2", 4, &["selftest", "--quick"]));
    selftest_passes(&done, 4, "pmi-2");
    // PMI-2's abort carries no exit code: Slurm kills the step (8: the rank's own exit when
    // its abort did nothing).
    let done = run(slurm.srun("pmi2", 3, &["pmi-check", "--abort-rank", "1"]));
    ended_by_abort(&done);
    assert_ne!(done.code(), Some(0), "{done:?}");
    assert_ne!(done.code(), Some(8), "{done:?}");
}

#[test]
fn srun_mpi_pmix_runs_pmi_check_and_selftest_over_pmix() {
    let _one = CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let Some(slurm) = Slurm::up() else { return };
    let done = run(slurm.srun("pmix", 4, &["pmi-check"]));
    passes(&done, 4, "pmix");
    let done = run(slurm.srun("pmix", 4, &["selftest", "--quick"]));
    selftest_passes(&done, 4, "pmix");
    let done = run(slurm.srun("pmix", 3, &["pmi-check", "--abort-rank", "1"]));
    ended_by_abort(&done);
    assert_eq!(done.code(), Some(7), "{done:?}");
}

#[test]
fn srun_without_a_pmi_fails_instead_of_starting_singletons() {
    let _one = CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let Some(slurm) = Slurm::up() else { return };
    let done = run(slurm.srun("none", 3, &["pmi-check"]));
    assert_ne!(done.code(), Some(0), "{done:?}");
    assert_eq!(clean_summaries(&done.stdout), 0, "{}", done.stdout);
    assert!(
        done.stderr.contains(
            "Slurm started this step with 3 tasks without a PMI (srun --mpi=none?), but this \
             process has no PMI it can use: start it with `srun --mpi=pmi2` or `srun --mpi=pmix`"
        ),
        "{}",
        done.stderr
    );
}

#[test]
fn rank_never_initializing_fails_the_step_within_the_deadline() {
    let _one = CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let Some(slurm) = Slurm::up() else { return };
    for (mpi, error) in [
        (
            "pmi2",
            "no answer from the PMI server within 2s while awaiting `kvs-fence-response`",
        ),
        (
            "pmix",
            "the PMI barrier failed: PMIx_Fence (collecting data, timeout 2 s): TIMEOUT",
        ),
    ] {
        let mut command = slurm.srun(mpi, 3, &["pmi-check", "--skip-init-rank", "1"]);
        command.env("CIRCULANT_BOOTSTRAP_TIMEOUT", "2");
        // A rank that fails ends the step (`srun --kill-on-bad-exit`): Slurm's default lets
        // the rank that never initialized sleep on.
        command.env("SLURM_KILL_BAD_EXIT", "1");
        let started = std::time::Instant::now();
        let done = run(command);
        assert_ne!(done.code(), Some(0), "{mpi}: {done:?}");
        assert!(done.stderr.contains(error), "{mpi}: {}", done.stderr);
        // The deadline, Slurm's kill and its grace (KillWait 5 s), with room for a busy machine.
        assert!(
            started.elapsed().as_secs() < 30,
            "{mpi}: {:?}",
            started.elapsed()
        );
        assert_all_gone(&done.pids());
    }
}

/// A Slurm of several nodes on the emulated cluster (`ci/slurm nodes up`); stopped on drop if
/// this test started it.
struct SlurmNodes {
    started_here: bool,
}

impl SlurmNodes {
    fn up(n: usize) -> Option<SlurmNodes> {
        if Command::new("srun").arg("--version").output().is_err() {
            missing("srun", "ci/deps installs slurm-wlm and munge");
            return None;
        }
        if !rustix::process::geteuid().is_root() {
            missing(
                "root",
                "network namespaces and slurmd need root, as CI runs",
            );
            return None;
        }
        let running = Command::new(script())
            .args(["nodes", "status"])
            .status()
            .is_ok_and(|s| s.success());
        if running {
            return Some(SlurmNodes {
                started_here: false,
            });
        }
        let out = Command::new(script())
            .args(["nodes", "up", &n.to_string()])
            .output()
            .expect("run ci/slurm nodes up");
        assert!(
            out.status.success(),
            "ci/slurm nodes up failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(SlurmNodes { started_here: true })
    }

    fn srun(&self, mpi: &str, nodes: usize, n: usize, args: &[&str]) -> Command {
        let mut command = Command::new(script());
        command
            .args(["nodes", "srun"])
            .arg(format!("--mpi={mpi}"))
            .arg(format!("-N{nodes}"))
            .arg(format!("-n{n}"))
            .arg("--time=2")
            .arg(bin())
            .args(args);
        command
    }
}

impl Drop for SlurmNodes {
    fn drop(&mut self) {
        if self.started_here {
            let stopped = Command::new(script()).args(["nodes", "down"]).status();
            if !stopped.as_ref().is_ok_and(|s| s.success()) && !std::thread::panicking() {
                panic!("ci/slurm nodes down failed: {stopped:?}");
            }
        }
    }
}

#[test]
fn srun_on_three_nodes_runs_pmi_check_and_selftest_over_the_network() {
    let _one = CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let Some(slurm) = SlurmNodes::up(3) else {
        return;
    };
    for (mpi, kind) in [("pmi2", "pmi-2"), ("pmix", "pmix")] {
        let done = run(slurm.srun(mpi, 3, 4, &["pmi-check"]));
        passes(&done, 4, kind);
        let done = run(slurm.srun(mpi, 3, 4, &["selftest", "--quick"]));
        assert_eq!(done.code(), Some(0), "{mpi}: {done:?}");
        // Ranks on different hosts: the network provider, not shared memory.
        assert!(
            done.stdout.contains(&format!(
                "selftest: 4 rank(s), provider tcp;ofi_rxm, launcher {kind}"
            )),
            "{mpi}: {}",
            done.stdout
        );
        // Rank 0 shares its node with rank 1: shm between them (the node fabric).
        assert!(
            done.stdout
                .contains("selftest: rank 0 reaches the ranks of its node through shm"),
            "{mpi}: {}",
            done.stdout
        );
        // Slurm's block distribution of 4 tasks on 3 nodes, as every rank's node map sees it
        // (from the PMI-2 mapping, from PMIx's node ids).
        assert!(
            done.stdout
                .contains("selftest: nodes 3 (ranks per node [2, 1, 1])"),
            "{mpi}: {}",
            done.stdout
        );
        assert!(done.stdout.contains(" passed, 0 failed"), "{}", done.stdout);
    }
}
