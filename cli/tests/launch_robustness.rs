//! The built-in launcher under abuse: ranks that flood the PMI server, overfill the key-value
//! space, break barriers, write endless lines, get stopped or killed, or lose their launcher.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{
    alive, assert_all_gone, assert_failed_with, bin, circulant, pids_in, run, Started, LIMIT, WAIT,
};
use rustix::process::{kill_process, Pid, Signal};

/// bash functions speaking PMI-1 on `$PMI_FD`: `ask LINE` sends a request and puts the reply
/// in `$reply`.
const PMI_SH: &str = r#"
ask() { printf '%s\n' "$1" >&"$PMI_FD"; IFS= read -r -t 10 reply <&"$PMI_FD" || reply=TIMEOUT; }
ask 'cmd=init pmi_version=1 pmi_subversion=1'
ask 'cmd=get_my_kvsname'; kvs=${reply##*kvsname=}
"#;

fn signal(pid: u32, signal: Signal) {
    let pid = Pid::from_raw(pid as i32).expect("pid");
    let _ = kill_process(pid, signal);
}

#[test]
fn a_rank_flooding_the_pmi_server_does_not_delay_another_ranks_failure() {
    // Rank 0 sends requests without ever reading a reply; rank 1 fails after a second.
    let script = "if [ \"$PMI_RANK\" = 0 ]; then echo pid $$; \
                  while :; do printf 'cmd=get_maxes\\n'; done >&\"$PMI_FD\"; \
                  else echo pid $$; sleep 1; exit 3; fi";
    let started = Instant::now();
    let done = run(circulant(&["run", "-n", "2", "--", "bash", "-c", script]));
    let took = started.elapsed();
    assert_failed_with(&done, 3, "rank 1 exited with code 3");
    assert!(took < Duration::from_secs(6), "the job took {took:?}");
}

/// Runs one rank that puts keys `k0`, `k1`, ... with values of `value_len` bytes until the
/// server refuses one; returns what it printed.
fn put_until_refused(value_len: usize) -> String {
    let script = format!(
        "{PMI_SH}
        value=$(head -c {value_len} /dev/zero | tr '\\0' v)
        i=0
        while [ $i -lt 5000 ]; do
            ask \"cmd=put kvsname=$kvs key=k$i value=$value\"
            case $reply in *rc=0*) i=$((i+1));; *) echo \"refused after $i: $reply\"; break;; esac
        done
        ask 'cmd=get kvsname='$kvs' key=k0'; echo \"first key: ${{reply%% value=*}}\"
        ask 'cmd=finalize'"
    );
    let done = run(circulant(&["run", "-n", "1", "--", "bash", "-c", &script]));
    assert_eq!(done.code(), Some(0), "{done:?}");
    done.stdout
}

#[test]
fn the_key_quota_gives_the_rank_a_clear_error() {
    let out = put_until_refused(1);
    assert!(
        out.contains(
            "refused after 2048: cmd=put_result rc=-1 \
             msg=quota_exceeded:_rank_0_already_put_2048_keys,_the_most_one_rank_may_put"
        ),
        "{out}"
    );
    // What was stored stays readable.
    assert!(out.contains("first key: cmd=get_result rc=0"), "{out}");
}

#[test]
fn the_byte_quota_gives_the_rank_a_clear_error() {
    // 512 KiB of keys and values: 580 puts of 900 + 2 to 4 bytes fit, the next does not (a
    // value of 900 bytes keeps the request line within the 1024 bytes a server reads).
    let out = put_until_refused(900);
    let line = out
        .lines()
        .find(|l| l.starts_with("refused after "))
        .unwrap_or_else(|| panic!("no refusal: {out}"));
    assert!(
        line.ends_with(
            "msg=quota_exceeded:_rank_0_would_hold_more_than_524288_bytes_of_keys_and_values"
        ),
        "{line}"
    );
    let accepted: usize = line["refused after ".len()..]
        .split(':')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("count");
    assert!((570..590).contains(&accepted), "{line}");
}

#[test]
fn a_barrier_fails_at_once_when_a_rank_finalized() {
    // Rank 1 waits in the barrier before rank 0 finalizes, then enters another one after;
    // rank 0's requests after finalize are refused.
    let script = format!(
        "{PMI_SH}
        if [ \"$PMI_RANK\" = 0 ]; then
            sleep 1
            ask 'cmd=finalize'; echo \"0 finalize: $reply\"
            ask 'cmd=barrier_in'; echo \"0 barrier after finalize: $reply\"
            ask \"cmd=put kvsname=$kvs key=late value=1\"; echo \"0 put after finalize: $reply\"
            sleep 2
        else
            start=$(date +%s%N)
            ask 'cmd=barrier_in'; echo \"1 waiting barrier: $reply\"
            ask 'cmd=barrier_in'; echo \"1 later barrier: $reply\"
            echo \"1 waited $(( ($(date +%s%N) - start) / 1000000 )) ms\"
            ask 'cmd=finalize'
        fi"
    );
    let done = run(circulant(&["run", "-n", "2", "--", "bash", "-c", &script]));
    assert_eq!(done.code(), Some(0), "{done:?}");
    let out = &done.stdout;
    for expected in [
        "0 finalize: cmd=finalize_ack",
        "0 barrier after finalize: cmd=barrier_out rc=-1 msg=rank_0_already_finalized_PMI",
        "0 put after finalize: cmd=put_result rc=-1 msg=rank_0_already_finalized_PMI",
        "1 waiting barrier: cmd=barrier_out rc=-1 msg=rank_0_finalized_PMI",
        "1 later barrier: cmd=barrier_out rc=-1 msg=rank_0_finalized_PMI",
    ] {
        assert!(out.contains(expected), "missing {expected}: {out}");
    }
    let waited: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("1 waited "))
        .and_then(|l| l.strip_suffix(" ms"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no wait time: {out}"));
    // Released when rank 0 finalized (after 1 s), not when rank 0 exited (after 3 s).
    assert!((900..2500).contains(&waited), "rank 1 waited {waited} ms");
}

#[test]
fn an_endless_line_is_forwarded_in_bounded_memory() {
    const BYTES: u64 = 256 << 20;
    let script = format!("head -c {BYTES} /dev/zero; {WAIT}");
    let mut launcher = Command::new(bin())
        .args(["run", "-n", "1", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the launcher");
    let mut out = launcher.stdout.take().expect("stdout");
    let seen = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&seen);
    let reader = thread::spawn(move || {
        let mut chunk = vec![0u8; 1 << 16];
        let mut pid_line = Vec::new();
        while let Ok(n) = out.read(&mut chunk) {
            if n == 0 {
                break;
            }
            let total = counter.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
            if total > BYTES {
                pid_line.extend_from_slice(&chunk[..n]);
            }
        }
        pid_line
    });
    let deadline = Instant::now() + LIMIT;
    // All the zeros and the pid line through: read the peak memory of the launcher.
    while seen.load(Ordering::Relaxed) < BYTES + 5 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", launcher.id()))
        .expect("launcher status");
    signal(launcher.id(), Signal::INT);
    let _ = launcher.wait();
    let tail = reader.join().expect("reader");
    assert!(seen.load(Ordering::Relaxed) > BYTES, "output was cut short");
    let peak_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    assert!(
        peak_kib < 64 * 1024,
        "the launcher grew to {peak_kib} KiB forwarding a line of {BYTES} bytes"
    );
    assert_all_gone(&pids_in(&String::from_utf8_lossy(&tail)));
}

#[test]
fn ranks_die_with_a_killed_launcher() {
    // Rank 0 never uses PMI; rank 1's PMI program runs as a grandchild of the launcher (the
    // kernel's parent-death signal reaches only the launcher's own children) and is between
    // PMI init and finalize, outside any PMI call, when the launcher dies.
    let script = format!(
        "if [ \"$PMI_RANK\" = 0 ]; then {WAIT}; else echo pid $$; \
         {} pmi-check --sleep-after-init 60 & wait; fi",
        bin()
    );
    let job = Started::new(circulant(&["run", "-n", "2", "--", "sh", "-c", &script]));
    let mut pids = job.pids(2);
    // The grandchild prints its pid once it has initialized PMI.
    let deadline = Instant::now() + LIMIT;
    while pids.len() < 3 {
        let (_, line) = job.next_line(deadline).expect("pmi-check to start");
        if line.contains("pmi-1") {
            pids.extend(pids_in(&line));
        }
    }
    signal(job.child.id(), Signal::KILL);
    let killed = Instant::now();
    let deadline = killed + Duration::from_secs(5);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    for &pid in &left {
        signal(pid, Signal::KILL);
    }
    assert!(
        left.is_empty(),
        "{left:?} still ran {:?} after the launcher was killed",
        killed.elapsed()
    );
}

#[test]
fn a_stopped_rank_is_stopped_with_the_job() {
    // Without SIGCONT the stopped rank would sit out the 30 s grace period.
    let script =
        format!("if [ \"$PMI_RANK\" = 0 ]; then {WAIT}; else echo pid $$; sleep 2; exit 3; fi");
    let job = Started::new(circulant(&[
        "run", "-n", "2", "--grace", "30", "--", "sh", "-c", &script,
    ]));
    let started = Instant::now();
    let pids = job.pids(2);
    for &pid in &pids {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() == "sleep" {
            signal(pid, Signal::STOP);
        }
    }
    let done = job.finish(LIMIT);
    assert_eq!(done.code(), Some(3), "{done:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the job took {:?}",
        started.elapsed()
    );
    assert_all_gone(&pids);
}

/// The files of process `pid` in /dev/shm: libfabric shm's regions (`PID:N:M`) and the
/// library's receive slots (`circulant-PID-NAME`).
fn shm_files_of(pid: u32) -> Vec<String> {
    let (region, slots) = (format!("{pid}:"), format!("circulant-{pid}-"));
    std::fs::read_dir("/dev/shm")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|name| name.starts_with(&region) || name.starts_with(&slots))
                .collect()
        })
        .unwrap_or_default()
}

/// The command line of process `pid`, its arguments joined by spaces.
fn command_line(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|line| String::from_utf8_lossy(&line).replace('\0', " "))
        .unwrap_or_default()
}

/// The children of `pid` (the launcher's ranks).
fn children_of(pid: u32) -> Vec<u32> {
    let mut children = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            children.extend(
                list.split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    children
}

#[test]
fn a_rank_killed_during_a_shm_job_leaves_no_shm_files() {
    let job = Started::new(circulant(&[
        "run",
        "-n",
        "2",
        "--provider",
        "shm",
        "--",
        bin(),
        "selftest",
    ]));
    let deadline = Instant::now() + LIMIT;
    let (victim, ranks) = loop {
        let ranks = children_of(job.child.id());
        if let Some(&rank) = ranks.iter().find(|&&r| !shm_files_of(r).is_empty()) {
            break (rank, ranks);
        }
        assert!(Instant::now() < deadline, "no shm region appeared");
        thread::sleep(Duration::from_millis(20));
    };
    signal(victim, Signal::KILL);
    let done = job.finish(LIMIT);
    assert_ne!(done.code(), Some(0), "{done:?}");
    assert!(
        done.stderr.contains("killed by signal 9"),
        "{}",
        done.stderr
    );
    for rank in ranks {
        assert_eq!(shm_files_of(rank), Vec::<String>::new(), "rank pid {rank}");
    }
}

#[test]
fn a_killed_launcher_of_a_shm_job_leaves_no_rank_and_no_shm_file() {
    // Four ranks broadcasting over shm for as long as the job lasts.
    let job = Started::new(circulant(&[
        "run",
        "-n",
        "4",
        "--provider",
        "shm",
        "--timeout",
        "300",
        "--",
        bin(),
        "bench",
        "--op",
        "bcast",
        "--max-bytes",
        "4096",
        "--reps",
        "1000000000",
        "--no-progress",
    ]));
    let launcher = job.child.id();
    let deadline = Instant::now() + LIMIT;
    let (ranks, guardian) = loop {
        let children = children_of(launcher);
        let (ranks, others): (Vec<u32>, Vec<u32>) = children
            .iter()
            .partition(|&&pid| command_line(pid).contains(" bench "));
        let guardian = others
            .into_iter()
            .find(|&pid| command_line(pid).contains("launch-guardian"));
        if ranks.len() == 4 && ranks.iter().all(|&r| !shm_files_of(r).is_empty()) {
            break (ranks, guardian);
        }
        assert!(
            Instant::now() < deadline,
            "the ranks {ranks:?} did not all open shm endpoints"
        );
        thread::sleep(Duration::from_millis(20));
    };
    signal(launcher, Signal::KILL);
    let killed = Instant::now();
    let gone_by = killed + Duration::from_secs(5);
    let left = |ranks: &[u32]| -> (Vec<u32>, Vec<String>) {
        let running = ranks.iter().copied().filter(|&p| alive(p)).collect();
        (
            running,
            ranks.iter().flat_map(|&p| shm_files_of(p)).collect(),
        )
    };
    let (mut running, mut files) = left(&ranks);
    while (!running.is_empty() || !files.is_empty()) && Instant::now() < gone_by {
        thread::sleep(Duration::from_millis(20));
        (running, files) = left(&ranks);
    }
    let took = killed.elapsed();
    // Whatever the outcome, leave nothing behind: ranks, the guardian, files.
    for &pid in &running {
        signal(pid, Signal::KILL);
    }
    let guardian_ended = guardian.map(|pid| {
        let until = Instant::now() + Duration::from_secs(5);
        while alive(pid) && Instant::now() < until {
            thread::sleep(Duration::from_millis(20));
        }
        let ended = !alive(pid);
        if !ended {
            signal(pid, Signal::KILL);
        }
        ended
    });
    for file in &files {
        let _ = std::fs::remove_file(format!("/dev/shm/{file}"));
    }
    assert!(
        running.is_empty(),
        "ranks {running:?} still ran {took:?} after the launcher was killed"
    );
    assert!(
        files.is_empty(),
        "{files:?} were left in /dev/shm {took:?} after the launcher was killed"
    );
    assert_eq!(guardian_ended, Some(true), "the guardian (started, ended)");
}

#[test]
fn an_overlong_pmi_line_ends_the_job_naming_the_rank() {
    let script = format!(
        "if [ \"$PMI_RANK\" = 1 ]; then printf 'cmd=put key=k value=%05000d\\n' 0 >&\"$PMI_FD\"; fi; {WAIT}"
    );
    let done = run(circulant(&["run", "-n", "2", "--", "bash", "-c", &script]));
    assert_failed_with(
        &done,
        1,
        "rank 1 broke the PMI protocol: reading its PMI socket failed: no end of line within \
         4096 bytes",
    );
}
