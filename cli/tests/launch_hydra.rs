//! Jobs under MPICH's Hydra (`mpiexec.hydra`, Debian package `mpich`): the same PMI-1 client
//! works through Hydra's inherited PMI_FD and through its PMI_PORT mode; PMI-2 when asked for
//! (`CIRCULANT_PMI=pmi2`).

mod common;

use std::process::Command;

use common::{assert_all_gone, bin, clean_summaries, run};

const HYDRA: &str = "mpiexec.hydra";

fn hydra(args: &[&str]) -> Command {
    let found = Command::new(HYDRA)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{HYDRA} is needed for these tests: apt-get install mpich"
    );
    let mut command = Command::new(HYDRA);
    command.args(args);
    command
}

#[test]
fn pmi_check_passes_under_hydra_on_1_2_4_7_ranks() {
    for n in [1, 2, 4, 7] {
        let n_text = n.to_string();
        let done = run(hydra(&["-n", &n_text, bin(), "pmi-check"]));
        assert_eq!(done.code(), Some(0), "{n} ranks: {done:?}");
        assert_eq!(clean_summaries(&done.stdout), n, "{}", done.stdout);
        assert!(done
            .stdout
            .contains(&format!("rank {} of {n}: pmi-1", n - 1)));
        // Hydra's PMI_process_mapping tells every rank the job's node count.
        assert_eq!(
            done.stdout.matches(" nodes 1 pid ").count(),
            n,
            "{}",
            done.stdout
        );
        assert_all_gone(&done.pids());
    }
}

#[test]
fn pmi_check_passes_under_hydra_over_pmi2_when_asked() {
    let mut command = hydra(&["-n", "4", bin(), "pmi-check"]);
    command.env("CIRCULANT_PMI", "pmi2");
    let done = run(command);
    assert_eq!(done.code(), Some(0), "{done:?}");
    assert_eq!(clean_summaries(&done.stdout), 4, "{}", done.stdout);
    assert!(
        done.stdout.contains("rank 3 of 4: pmi-2"),
        "{}",
        done.stdout
    );
    assert_eq!(
        done.stdout.matches(" nodes 1 pid ").count(),
        4,
        "{}",
        done.stdout
    );
    assert_all_gone(&done.pids());
}

#[test]
fn hydra_ranks_without_their_pmi_channel_fail_instead_of_starting_singletons() {
    let program = [
        "env",
        "-u",
        "PMI_FD",
        "-u",
        "PMI_RANK",
        "-u",
        "PMI_SIZE",
        bin(),
        "pmi-check",
    ];
    let mut args = vec!["-n", "2"];
    args.extend(program);
    let done = run(hydra(&args));
    assert_ne!(done.code(), Some(0), "{done:?}");
    assert_eq!(clean_summaries(&done.stdout), 0, "{}", done.stdout);
    assert!(
        done.stderr.contains(
            "Hydra started 2 ranks on this node (MPI_LOCALNRANKS) without PMI_FD or PMI_PORT"
        ),
        "{}",
        done.stderr
    );
}

#[test]
fn pmi_check_passes_in_hydras_port_mode() {
    for pmi in ["pmi1", "pmi2"] {
        let mut command = hydra(&["-pmi-port", "-n", "3", bin(), "pmi-check"]);
        command.env("CIRCULANT_PMI", pmi);
        let done = run(command);
        assert_eq!(done.code(), Some(0), "{pmi}: {done:?}");
        assert_eq!(clean_summaries(&done.stdout), 3, "{}", done.stdout);
        assert_all_gone(&done.pids());
    }
}

#[test]
fn rank_leaving_early_stops_the_hydra_job() {
    let mut command = hydra(&["-n", "4", bin(), "pmi-check", "--exit-early-rank", "2"]);
    command.env("CIRCULANT_BOOTSTRAP_TIMEOUT", "2");
    let done = run(command);
    // Hydra kills the other ranks when one exits without finalize; its own exit status is then
    // 9 or, depending on the order it collects them, 0 — not ours to check. What must hold:
    // no rank got past the barrier the departed rank never entered, and nothing is left.
    // (Hydra may drop the ranks' last output as it kills them, so none is required here.)
    assert_eq!(clean_summaries(&done.stdout), 0, "{done:?}");
    assert_all_gone(&done.pids());
}

#[test]
fn rank_never_initializing_fails_the_hydra_job_within_the_deadline() {
    let mut command = hydra(&["-n", "3", bin(), "pmi-check", "--skip-init-rank", "1"]);
    command.env("CIRCULANT_BOOTSTRAP_TIMEOUT", "1");
    let done = run(command);
    assert_ne!(done.code(), Some(0), "{done:?}");
    // Hydra cannot tell which rank is missing; the waiting ranks name what they awaited.
    assert!(
        done.stderr.contains(
            "no answer from the PMI server within 1s while awaiting `barrier_out` in reply to `barrier_in`"
        ),
        "{}",
        done.stderr
    );
    assert_all_gone(&done.pids());
}

#[test]
fn pmi_abort_ends_the_hydra_job_with_its_code() {
    let done = run(hydra(&["-n", "3", bin(), "pmi-check", "--abort-rank", "1"]));
    assert_eq!(done.code(), Some(7), "{done:?}");
    assert_all_gone(&done.pids());
}

#[test]
fn every_rank_is_on_this_host_under_hydra() {
    for pmi in ["pmi1", "pmi2"] {
        let mut command = hydra(&["-n", "3", bin(), "selftest", "--quick", "--only", "nodes"]);
        command.env("CIRCULANT_PMI", pmi);
        let done = run(command);
        assert_eq!(done.code(), Some(0), "{pmi}: {done:?}");
        assert!(
            done.stdout
                .contains("selftest: nodes 1 (ranks per node [3])"),
            "{pmi}: {}",
            done.stdout
        );
        assert!(
            done.stdout.contains("3 passed, 0 failed"),
            "{pmi}: {}",
            done.stdout
        );
        assert_all_gone(&done.pids());
    }
}
