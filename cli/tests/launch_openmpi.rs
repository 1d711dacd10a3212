//! Jobs under Open MPI's `mpirun` (Debian package `openmpi-bin`), which offers only PMIx: the
//! ranks join through libpmix, and a launch whose PMIx variables are gone fails instead of
//! running p singletons.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::Duration;

use common::{assert_all_gone, assert_none_running, bin, clean_summaries, missing, run, Started};

/// `mpirun` starting `program` on `n` ranks, or None where there is no mpirun (a failure
/// under CI).
fn mpirun(n: usize, program: &[&str]) -> Option<Command> {
    if Command::new("mpirun").arg("--version").output().is_err() {
        missing("mpirun", "ci/deps installs openmpi-bin");
        return None;
    }
    let mut command = Command::new("mpirun");
    command
        .args(["--allow-run-as-root", "--oversubscribe", "-n"])
        .arg(n.to_string())
        .args(program);
    Some(command)
}

#[test]
fn mpirun_runs_pmi_check_over_pmix() {
    let Some(command) = mpirun(4, &[bin(), "pmi-check"]) else {
        return;
    };
    let done = run(command);
    assert_eq!(done.code(), Some(0), "{done:?}");
    assert_eq!(clean_summaries(&done.stdout), 4, "{}", done.stdout);
    for rank in 0..4 {
        assert!(
            done.stdout.contains(&format!("rank {rank} of 4: pmix ")),
            "{}",
            done.stdout
        );
    }
    // PMIx tells the node count: start-up skips the host exchange.
    assert_eq!(
        done.stdout.matches(" nodes 1 pid ").count(),
        4,
        "{}",
        done.stdout
    );
    assert_all_gone(&done.pids());
}

#[test]
fn mpirun_runs_selftest_over_pmix() {
    let Some(command) = mpirun(4, &[bin(), "selftest", "--quick"]) else {
        return;
    };
    let done = run(command);
    assert_eq!(done.code(), Some(0), "{done:?}");
    assert!(
        done.stdout
            .contains("selftest: 4 rank(s), provider shm, launcher pmix"),
        "{}",
        done.stdout
    );
    assert!(done.stdout.contains(" passed, 0 failed"), "{}", done.stdout);
}

#[test]
fn mpirun_without_pmix_variables_fails_instead_of_starting_singletons() {
    // What an Open MPI without PMIx support would give: OMPI_COMM_WORLD_SIZE only.
    let program = [
        "env",
        "-u",
        "PMIX_RANK",
        "-u",
        "PMIX_NAMESPACE",
        bin(),
        "pmi-check",
    ];
    let Some(command) = mpirun(2, &program) else {
        return;
    };
    let done = run(command);
    assert_ne!(done.code(), Some(0), "{done:?}");
    assert_eq!(clean_summaries(&done.stdout), 0, "{}", done.stdout);
    assert!(
        done.stderr.contains(
            "Open MPI's launcher started 2 ranks (OMPI_COMM_WORLD_SIZE) without PMIx variables, \
             but this process has no PMI it can use"
        ),
        "{}",
        done.stderr
    );
}

#[test]
fn pmix_variables_without_a_server_are_an_error_not_a_singleton() {
    let mut command = Command::new(bin());
    command
        .arg("pmi-check")
        .env("PMIX_NAMESPACE", "gone")
        .env("PMIX_RANK", "0")
        .env_remove("PMIX_SERVER_URI41")
        .env_remove("PMIX_SERVER_URI4");
    let done = run(command);
    assert_eq!(done.code(), Some(1), "{done:?}");
    assert!(
        done.stderr.contains("PMIx_Init") && !done.stdout.contains("singleton"),
        "{done:?}"
    );
}

#[test]
fn a_pmix_abort_ends_the_mpirun_job_and_leaves_no_rank() {
    // `mpirun --timeout` bounds a job that mpirun fails to end. No other test here starts
    // ranks with --abort-rank: any process with it left afterwards is a rank of this job
    // (mpirun may drop the output, pid included, of a rank it kills).
    let rank = [bin(), "pmi-check", "--abort-rank", "1"];
    let program = ["--timeout", "30", rank[0], rank[1], rank[2], rank[3]];
    let Some(command) = mpirun(3, &program) else {
        return;
    };
    let started = std::time::Instant::now();
    let mut job = Started::new(command);
    let Some(status) = job.wait(Duration::from_secs(45)) else {
        // Debian 12's mpirun (Open MPI 4.1.4) was seen to hang in its own PMIx server's
        // finalize (docs/running.md): that is its own end, not the ranks'. It was also seen to
        // hang before it had ended the ranks waiting in a fence, its server answering nothing,
        // where no deadline of theirs can act (the fence's timeout is the server's). Once
        // mpirun alone is gone, every rank must end by itself.
        let (_, stderr) = job.printed();
        assert!(stderr.contains("rank 1 aborting the job"), "{stderr}");
        let _ = job.child.kill();
        let _ = job.child.wait();
        assert_none_running(&rank);
        println!("mpirun hung after the ranks ended; stopped");
        return;
    };
    let done = job.collect(status);
    assert_eq!(clean_summaries(&done.stdout), 0, "{}", done.stdout);
    assert!(
        done.stderr.contains("rank 1 aborting the job"),
        "{}",
        done.stderr
    );
    // The abort's code, as in most runs. Debian 12's mpirun was also seen to crash itself
    // after ending the ranks (docs/running.md): with SIGSEGV, or with SIGPIPE from a write of
    // its own to a connection that an ended rank had closed (the test reads mpirun's output
    // to its end). Its own end, not the ranks'.
    let crashed = matches!(done.status.signal(), Some(11) | Some(13));
    let timed_out = started.elapsed() >= Duration::from_secs(30);
    assert!(done.code() == Some(7) || crashed || timed_out, "{done:?}");
    // The job ended through the abort, not through the rank's own exit with the code.
    assert!(
        !done.stderr.contains("exited with non-zero status"),
        "{}",
        done.stderr
    );
    assert_none_running(&rank);
}
