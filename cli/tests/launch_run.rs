//! The built-in launcher `circulant run`: real jobs of real processes.

mod common;

use common::{assert_all_gone, bin, circulant, clean_summaries, run, Started, LIMIT, WAIT};

#[test]
fn pmi_check_passes_on_1_2_4_7_ranks() {
    for n in [1, 2, 4, 7] {
        let n_text = n.to_string();
        let done = run(circulant(&["run", "-n", &n_text, "--", bin(), "pmi-check"]));
        assert_eq!(done.code(), Some(0), "{n} ranks: {done:?}");
        assert_eq!(
            clean_summaries(&done.stdout),
            n,
            "{n} ranks: {}",
            done.stdout
        );
        assert!(done
            .stdout
            .contains(&format!("rank {} of {n}: pmi-1", n - 1)));
        // The launcher's PMI_process_mapping: every rank runs on this host.
        assert_eq!(
            done.stdout.matches(" nodes 1 pid ").count(),
            n,
            "{}",
            done.stdout
        );
        assert_eq!(done.pids().len(), n);
        assert_all_gone(&done.pids());
    }
}

/// `least/most/total` of one request kind in `--pmi-stats`'s line.
fn requests(stderr: &str, kind: &str) -> [usize; 3] {
    let line = stderr
        .lines()
        .find(|l| l.contains("PMI requests per rank"))
        .unwrap_or_else(|| panic!("no --pmi-stats line in {stderr}"));
    let at = line.find(&format!("{kind} ")).expect("the kind") + kind.len() + 1;
    let figures: Vec<usize> = line[at..]
        .split(|c: char| c == ',' || c.is_whitespace())
        .next()
        .expect("figures")
        .split('/')
        .map(|f| f.parse().expect("a count"))
        .collect();
    figures.try_into().expect("three counts")
}

/// Start-up makes one key-value exchange under the built-in launcher (its process mapping says
/// every rank shares this host, so no host exchange) and reads the cards of the peers a rank
/// talks to: fewer than p gets per rank, where reading every host made more than p.
#[test]
fn start_up_is_one_exchange_and_fewer_than_p_gets_per_rank() {
    for provider in ["shm", "tcp;ofi_rxm"] {
        let done = run(circulant(&[
            "run",
            "-n",
            "16",
            "--provider",
            provider,
            "--pmi-stats",
            "--",
            bin(),
            "selftest",
            "--quick",
            "--only",
            "barrier",
        ]));
        assert_eq!(done.code(), Some(0), "{provider}: {done:?}");
        assert_eq!(
            requests(&done.stderr, "barriers"),
            [1, 1, 16],
            "{}",
            done.stderr
        );
        assert_eq!(
            requests(&done.stderr, "puts"),
            [1, 1, 16],
            "{}",
            done.stderr
        );
        // The mapping, then the cards of the barriers' peers (dissemination: log2 16 = 4
        // partners each way), far below 16 host gets.
        let [_, most, _] = requests(&done.stderr, "gets");
        assert!((2..=9).contains(&most), "{provider}: {}", done.stderr);
    }
}

#[test]
fn provider_rank_and_size_reach_every_rank() {
    let done = run(circulant(&[
        "run",
        "-n",
        "3",
        "--provider",
        "tcp;ofi_rxm",
        "--",
        "sh",
        "-c",
        "echo \"rank=$PMI_RANK size=$PMI_SIZE fi=$FI_PROVIDER fd=${PMI_FD:+set}\"",
    ]));
    assert_eq!(done.code(), Some(0), "{done:?}");
    for rank in 0..3 {
        let line = format!("rank={rank} size=3 fi=tcp;ofi_rxm fd=set");
        assert!(
            done.stdout.contains(&line),
            "missing {line}: {}",
            done.stdout
        );
    }
}

#[test]
fn tag_output_prefixes_every_line_with_its_rank() {
    let done = run(circulant(&[
        "run",
        "-n",
        "2",
        "--tag-output",
        "--",
        "sh",
        "-c",
        "echo out $PMI_RANK; echo err $PMI_RANK >&2; printf 'no newline'",
    ]));
    assert_eq!(done.code(), Some(0), "{done:?}");
    for rank in 0..2 {
        assert!(done.stdout.contains(&format!("[{rank}] out {rank}\n")));
        assert!(done.stdout.contains(&format!("[{rank}] no newline\n")));
        assert!(done.stderr.contains(&format!("[{rank}] err {rank}\n")));
    }
}

#[test]
fn failing_rank_stops_the_others_and_is_named() {
    let script = format!("if [ \"$PMI_RANK\" = 2 ]; then exit 3; fi; {WAIT}");
    let done = run(circulant(&["run", "-n", "4", "--", "sh", "-c", &script]));
    assert_eq!(done.code(), Some(3), "{done:?}");
    assert!(
        done.stderr.contains("rank 2 exited with code 3"),
        "{}",
        done.stderr
    );
    assert_all_gone(&done.pids());
}

#[test]
fn rank_killed_by_a_signal_is_named() {
    let script = format!("if [ \"$PMI_RANK\" = 1 ]; then kill -9 $$; fi; {WAIT}");
    let done = run(circulant(&["run", "-n", "3", "--", "sh", "-c", &script]));
    assert_eq!(done.code(), Some(128 + 9), "{done:?}");
    assert!(
        done.stderr
            .contains("rank 1 was killed by signal 9 (SIGKILL)"),
        "{}",
        done.stderr
    );
    assert_all_gone(&done.pids());
}

#[test]
fn rank_ignoring_sigterm_is_killed_after_the_grace_period() {
    let script =
        "trap '' TERM; if [ \"$PMI_RANK\" = 0 ]; then exit 5; fi; echo pid $$; exec sleep 30";
    let done = run(circulant(&[
        "run", "-n", "2", "--grace", "0.3", "--", "sh", "-c", script,
    ]));
    assert_eq!(done.code(), Some(5), "{done:?}");
    assert_all_gone(&done.pids());
}

#[test]
fn rank_leaving_without_finalize_fails_the_job_naming_it() {
    let done = run(circulant(&[
        "run",
        "-n",
        "4",
        "--",
        bin(),
        "pmi-check",
        "--exit-early-rank",
        "2",
    ]));
    assert_ne!(done.code(), Some(0), "{done:?}");
    assert!(
        done.stderr
            .contains("rank 2 exited after PMI init without PMI finalize"),
        "{}",
        done.stderr
    );
    assert_all_gone(&done.pids());
}

#[test]
fn rank_that_never_initializes_is_named_after_the_deadline() {
    let mut command = circulant(&[
        "run",
        "-n",
        "3",
        "--",
        bin(),
        "pmi-check",
        "--skip-init-rank",
        "1",
    ]);
    command.env("CIRCULANT_BOOTSTRAP_TIMEOUT", "1");
    let done = run(command);
    assert_ne!(done.code(), Some(0), "{done:?}");
    // The ranks that waited say what they awaited and for how long...
    assert!(
        done.stderr.contains(
            "no answer from the PMI server within 1s while awaiting `barrier_out` in reply to `barrier_in`"
        ),
        "{}",
        done.stderr
    );
    // ...and the launcher, which sees every rank, names the one that never came.
    assert!(
        done.stderr.contains("rank 1 (never initialized PMI)"),
        "{}",
        done.stderr
    );
    assert_eq!(done.pids().len(), 3, "{}", done.stdout);
    assert_all_gone(&done.pids());
}

#[test]
fn pmi_abort_ends_the_job_with_its_code() {
    let done = run(circulant(&[
        "run",
        "-n",
        "3",
        "--",
        bin(),
        "pmi-check",
        "--abort-rank",
        "1",
    ]));
    assert_eq!(done.code(), Some(7), "{done:?}");
    assert!(
        done.stderr.contains("rank 1 aborted the job with code 7"),
        "{}",
        done.stderr
    );
    assert!(
        done.stderr
            .contains("rank 1 aborting the job: asked to abort by --abort-rank"),
        "{}",
        done.stderr
    );
    assert_all_gone(&done.pids());
}

#[test]
fn timeout_bounds_the_job() {
    let done = run(circulant(&[
        "run",
        "-n",
        "2",
        "--timeout",
        "1",
        "--",
        "sh",
        "-c",
        WAIT,
    ]));
    assert_eq!(done.code(), Some(124), "{done:?}");
    assert!(done.stderr.contains("job timed out"), "{}", done.stderr);
    assert!(
        done.stderr.contains("stopped ranks 0, 1"),
        "{}",
        done.stderr
    );
    assert_eq!(done.pids().len(), 2);
    assert_all_gone(&done.pids());
}

#[test]
fn interrupt_stops_every_rank() {
    let job = Started::new(circulant(&["run", "-n", "3", "--", "sh", "-c", WAIT]));
    let pids = job.pids(3);
    let launcher = rustix::process::Pid::from_child(&job.child);
    rustix::process::kill_process(launcher, rustix::process::Signal::INT).expect("SIGINT");
    let done = job.finish(LIMIT);
    assert_eq!(done.code(), Some(130), "{done:?}");
    assert!(
        done.stderr
            .contains("interrupted (SIGINT, SIGTERM or SIGHUP)"),
        "{}",
        done.stderr
    );
    assert_all_gone(&pids);
}

#[test]
fn rank_speaking_garbage_on_its_pmi_channel_is_named() {
    let script = format!("if [ \"$PMI_RANK\" = 1 ]; then echo 'hello there' >&$PMI_FD; fi; {WAIT}");
    let done = run(circulant(&["run", "-n", "2", "--", "bash", "-c", &script]));
    assert_eq!(done.code(), Some(1), "{done:?}");
    assert!(
        done.stderr
            .contains("rank 1 broke the PMI protocol: malformed PMI line \"hello there\""),
        "{}",
        done.stderr
    );
    assert_all_gone(&done.pids());
}

#[test]
fn programs_without_pmi_run_and_succeed() {
    let done = run(circulant(&["run", "-n", "3", "--", "true"]));
    assert_eq!(done.code(), Some(0), "{done:?}");
}

#[test]
fn missing_program_is_a_clear_error() {
    let done = run(circulant(&["run", "-n", "2", "--", "/no/such/program"]));
    assert_eq!(done.code(), Some(1), "{done:?}");
    assert!(
        done.stderr
            .contains("cannot start rank 0 (/no/such/program)"),
        "{}",
        done.stderr
    );
}

#[test]
fn zero_ranks_are_refused() {
    let done = run(circulant(&["run", "-n", "0", "--", "true"]));
    assert_ne!(done.code(), Some(0), "{done:?}");
}

#[test]
fn pmi_check_alone_is_a_singleton() {
    let mut command = circulant(&["pmi-check"]);
    for var in ["PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE", "PMI_ID"] {
        command.env_remove(var);
    }
    let done = run(command);
    assert_eq!(done.code(), Some(0), "{done:?}");
    assert!(done.stdout.contains("rank 0 of 1: singleton"));
    assert_eq!(clean_summaries(&done.stdout), 1);
}

#[test]
fn a_run_inside_a_job_gets_its_own_pmi_channel() {
    // An inner launcher must not pass the outer job's PMI variables on to its ranks.
    let inner = format!("{} run -n 2 -- {} pmi-check", bin(), bin());
    let done = run(circulant(&["run", "-n", "1", "--", "sh", "-c", &inner]));
    assert_eq!(done.code(), Some(0), "{done:?}");
    assert_eq!(clean_summaries(&done.stdout), 2, "{}", done.stdout);
}

#[test]
fn malformed_grace_is_refused_before_anything_starts() {
    let done = run(circulant(&["run", "-n", "1", "--grace", "x", "--", "true"]));
    assert_ne!(done.code(), Some(0));
    assert!(
        done.stderr.contains("not a number of seconds"),
        "{}",
        done.stderr
    );
}

#[test]
fn every_rank_is_on_this_host_by_the_mapping_and_by_host_names() {
    // The launcher's mapping, and the host names exchanged when asked for them instead.
    for source in ["launcher", "hosts"] {
        let mut command = circulant(&[
            "run",
            "-n",
            "3",
            "--provider",
            "shm",
            "--",
            bin(),
            "selftest",
            "--quick",
            "--only",
            "nodes",
        ]);
        command.env("CIRCULANT_NODE_MAP", source);
        let done = run(command);
        assert_eq!(done.code(), Some(0), "{source}: {done:?}");
        assert!(
            done.stdout
                .contains("selftest: nodes 1 (ranks per node [3])"),
            "{source}: {}",
            done.stdout
        );
        assert!(
            done.stdout.contains("3 passed, 0 failed"),
            "{source}: {}",
            done.stdout
        );
        assert_all_gone(&done.pids());
    }
}
