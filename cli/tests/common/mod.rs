//! Helpers for tests that start real processes: every run is bounded, and whatever a test
//! started is stopped on the way out, also when the test fails.

#![allow(dead_code)]

pub mod cluster;
pub mod hosts;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use circulant::comm::Choice;

/// A shell rank that prints its pid and then waits to be stopped.
pub const WAIT: &str = "echo pid $$; exec sleep 30";

/// Hang guard for one launcher run: generous, as ranks may outnumber cores many times over.
pub const LIMIT: Duration = Duration::from_secs(60);

/// Whether this is a CI run (`CI=true`, as CI runs `.ci/run`). CI has every tool and facility
/// the tests use (`ci/deps` installs them; `.ci/run` runs as root and starts Slurm), so there a
/// test that finds one missing must fail: a skip would leave CI green with the test never run.
pub fn under_ci() -> bool {
    matches!(std::env::var("CI").as_deref(), Ok("true" | "1"))
}

/// For a test that cannot run because `what` is missing here (`hint`: where it comes from).
/// Under CI this fails the test; elsewhere it prints `skipped: ...` and the caller returns.
pub fn missing(what: &str, hint: &str) {
    assert!(
        !under_ci(),
        "{what} is missing, and CI=true: CI must run this test ({hint})"
    );
    println!("skipped: {what} ({hint})");
}

/// The command line that runs the rank entry point `name` of the calling test binary, alone.
/// Entry points are `#[ignore]`d, so that an ordinary run does not count them as passing
/// tests: `--ignored` runs them, `--exact` only this one.
pub fn entry_program(name: &str) -> Vec<String> {
    let exe = std::env::current_exe().expect("test binary path");
    [
        exe.to_string_lossy().as_ref(),
        "--ignored",
        "--exact",
        name,
        "--nocapture",
        "--test-threads=1",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// [`entry_program`] as a command.
pub fn entry_command(name: &str) -> Command {
    let program = entry_program(name);
    let mut command = Command::new(&program[0]);
    command.args(&program[1..]);
    command
}

/// Fails unless the processes that printed `text` ran the entry point `name`: given a name
/// that matches no ignored test, libtest runs nothing and exits with 0.
pub fn assert_entry_ran(text: &str, name: &str) {
    assert!(
        text.contains("running 1 test") && !text.contains("running 0 tests"),
        "a process did not run the entry point `{name}`:\n{text}"
    );
}

/// The role of a rank entry point, from the variable `var` that the test starting the job
/// sets; run without it, the entry point is no test at all and fails as such.
pub fn role(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("a rank entry point, run by the tests of this file with {var} set; not a test on its own")
    })
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_circulant")
}

pub fn circulant(args: &[&str]) -> Command {
    let mut command = Command::new(bin());
    command.args(args);
    command
}

/// A started process in its own group, killed with its group when dropped.
pub struct Started {
    pub child: Child,
    pub lines: Receiver<(bool, String)>,
    readers: Vec<thread::JoinHandle<()>>,
}

impl Started {
    pub fn new(mut command: Command) -> Started {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
        let (tx, lines) = mpsc::channel();
        let mut readers = Vec::new();
        let out = child.stdout.take().expect("piped stdout");
        let err = child.stderr.take().expect("piped stderr");
        for (is_err, stream) in [
            (false, Box::new(out) as Box<dyn Read + Send>),
            (true, Box::new(err)),
        ] {
            let tx = tx.clone();
            readers.push(thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    if tx.send((is_err, line)).is_err() {
                        break;
                    }
                }
            }));
        }
        Started {
            child,
            lines,
            readers,
        }
    }

    /// Waits for the next output line (stdout or stderr) until `deadline`.
    pub fn next_line(&self, deadline: Instant) -> Option<(bool, String)> {
        let left = deadline.saturating_duration_since(Instant::now());
        self.lines.recv_timeout(left).ok()
    }

    /// Waits until `count` `pid N` lines were printed; returns those pids.
    pub fn pids(&self, count: usize) -> Vec<u32> {
        let deadline = Instant::now() + LIMIT;
        let mut pids = Vec::new();
        while pids.len() < count {
            let (_, line) = self.next_line(deadline).expect("ranks to print their pids");
            pids.extend(pids_in(&line));
        }
        pids
    }

    /// Waits for the end, collecting output; panics (after killing) past `limit`.
    pub fn finish(mut self, limit: Duration) -> Finished {
        match self.wait(limit) {
            Some(status) => self.collect(status),
            None => {
                self.kill();
                panic!("process did not end within {limit:?}");
            }
        }
    }

    /// Waits up to `limit` for the process to end; None if it still runs.
    pub fn wait(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// The output of a process that ended with `status`.
    pub fn collect(mut self, status: ExitStatus) -> Finished {
        let drain_until = Instant::now() + Duration::from_secs(10);
        for reader in std::mem::take(&mut self.readers) {
            while !reader.is_finished() && Instant::now() < drain_until {
                thread::sleep(Duration::from_millis(10));
            }
        }
        let (stdout, stderr) = self.printed();
        Finished {
            status,
            stdout,
            stderr,
        }
    }

    /// What the process printed so far and was not read yet: (stdout, stderr).
    pub fn printed(&self) -> (String, String) {
        let mut stdout = String::new();
        let mut stderr = String::new();
        while let Ok((is_err, line)) = self.lines.try_recv() {
            let target = if is_err { &mut stderr } else { &mut stdout };
            target.push_str(&line);
            target.push('\n');
        }
        (stdout, stderr)
    }

    fn kill(&mut self) {
        let pid = i32::try_from(self.child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Pids that ranks printed as `pid N`.
    pub fn pids(&self) -> Vec<u32> {
        pids_in(&self.stdout)
    }
}

/// Fails unless the job ended with `code`, its launcher said `message`, and no rank is left.
pub fn assert_failed_with(done: &Finished, code: i32, message: &str) {
    assert_eq!(done.code(), Some(code), "{done:?}");
    assert!(
        done.stderr.contains(message),
        "no `{message}` in {}",
        done.stderr
    );
    assert_all_gone(&done.pids());
}

pub fn run(command: Command) -> Finished {
    Started::new(command).finish(LIMIT)
}

pub fn pids_in(text: &str) -> Vec<u32> {
    text.lines()
        .filter_map(|line| {
            let at = line.find("pid ")?;
            line[at + 4..].split_whitespace().next()?.parse().ok()
        })
        .collect()
}

/// Whether `pid` is a live (not zombie) process.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Fails if any of `pids` is still running a moment after its launcher ended (the launcher
/// has reaped or killed them all by then; the wait only covers the kernel's bookkeeping).
pub fn assert_all_gone(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    for &pid in pids {
        while alive(pid) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        if alive(pid) {
            let _ = rustix::process::kill_process(
                rustix::process::Pid::from_raw(pid as i32).expect("pid"),
                rustix::process::Signal::KILL,
            );
            panic!("rank process {pid} was left running");
        }
    }
}

/// Live processes (not zombies) whose command line holds every one of `words`.
pub fn running_with(words: &[&str]) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|line| {
                let args: Vec<&[u8]> = line.split(|&b| b == 0).collect();
                words.iter().all(|word| args.contains(&word.as_bytes()))
            })
        })
        .filter(|&pid| alive(pid))
        .collect()
}

/// Fails if a process whose command line holds every one of `words` is still running a
/// moment from now (killing those left).
pub fn assert_none_running(words: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !running_with(words).is_empty() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    let left = running_with(words);
    for &pid in &left {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid as i32).expect("pid"),
            rustix::process::Signal::KILL,
        );
    }
    assert!(left.is_empty(), "processes {left:?} were left running");
}

/// A job under the built-in launcher, `circulant run -n N [--provider P] --timeout S [more
/// launcher arguments] -- PROGRAM`, with its environment; the launcher bounds the job and stops
/// every rank it started.
pub struct Job {
    command: Command,
    launcher: Vec<String>,
}

impl Job {
    /// `n` ranks, the job bounded by `timeout` seconds.
    pub fn new(n: usize, timeout: u32) -> Job {
        let mut command = Command::new(bin());
        command.args([
            "run",
            "-n",
            &n.to_string(),
            "--timeout",
            &timeout.to_string(),
        ]);
        Job {
            command,
            launcher: Vec::new(),
        }
    }

    pub fn provider(mut self, provider: &str) -> Job {
        self.command.args(["--provider", provider]);
        self
    }

    /// More launcher arguments (before the program).
    pub fn launcher_args(mut self, args: &[&str]) -> Job {
        self.launcher.extend(args.iter().map(|a| a.to_string()));
        self
    }

    pub fn envs(mut self, env: &[(&str, &str)]) -> Job {
        for (k, v) in env {
            self.command.env(k, v);
        }
        self
    }

    /// Variables the ranks must not inherit from the test's own environment.
    pub fn without(mut self, vars: &[&str]) -> Job {
        for var in vars {
            self.command.env_remove(var);
        }
        self
    }

    /// Runs `program` as every rank and waits for the job.
    pub fn run(mut self, program: &[&str]) -> std::process::Output {
        self.command
            .args(&self.launcher)
            .arg("--")
            .args(program)
            .output()
            .expect("circulant run starts")
    }

    /// Runs the calling test binary's entry point `test` as every rank, in role `role`
    /// (`CIRCULANT_TEST_ROLE`); fails if the ranks ran no test.
    pub fn test_binary(self, test: &str, role: &str) -> std::process::Output {
        let program = entry_program(test);
        let program: Vec<&str> = program.iter().map(String::as_str).collect();
        let out = self.envs(&[("CIRCULANT_TEST_ROLE", role)]).run(&program);
        assert_entry_ran(&output_text(&out), test);
        out
    }
}

/// A finished command's standard output followed by its standard error.
pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `selftest` succeeded and its last line says it ran checks and none failed; `what` names
/// the run in the failure message.
pub fn assert_selftest_passed(out: &std::process::Output, what: &str) {
    let summary = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    assert!(
        out.status.success()
            && summary.ends_with(" passed, 0 failed")
            && !summary.starts_with("0 passed"),
        "selftest, {what}: summary {summary:?}:\n{}",
        output_text(out)
    );
}

/// `N passed, 0 failed` lines, as `pmi-check` prints one per rank.
pub fn clean_summaries(stdout: &str) -> usize {
    stdout
        .lines()
        .filter(|line| {
            let mut words = line.split_whitespace();
            matches!(
                (
                    words.next().map(|w| w.parse::<u32>().is_ok()),
                    words.next(),
                    words.next(),
                    words.next(),
                    words.next()
                ),
                (Some(true), Some("passed,"), Some("0"), Some("failed"), None)
            )
        })
        .count()
}

/// The rank role of the killed-rank tests: rank 1 kills itself (SIGKILL) while all ranks run
/// broadcasts of `len` bytes from rotating roots, and every other rank must get an error within
/// 10 s. Over shm rank 1 dies between two of its calls (after `shm_warmup` of them): a rank
/// killed inside libfabric's shm provider while it holds the lock of its shared queue can leave
/// a peer spinning on that lock for ever (docs/failures.md, "A rank that dies"). `max_calls`
/// bounds a survivor's calls, so that a test that never fails ends.
pub fn rank_killed_during_broadcasts(
    comm: &mut circulant::comm::Communicator,
    len: usize,
    shm_warmup: usize,
    max_calls: usize,
) {
    let rank = comm.rank();
    let mut buf = comm.alloc(len).expect("alloc");
    let kill_self =
        || rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    if rank == 1 && comm.provider() == "shm" {
        for i in 0..shm_warmup {
            comm.bcast(&mut buf, i % comm.size()).expect("bcast");
        }
        let _ = kill_self();
    }
    if rank == 1 {
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(300));
            let _ = kill_self();
        });
    }
    let mut last = Instant::now();
    for i in 0..max_calls {
        last = Instant::now();
        if let Err(err) = comm.bcast(&mut buf, i % comm.size()) {
            let took = last.elapsed();
            println!("rank {rank}: survivor got an error after {took:?}: {err}");
            assert!(took < Duration::from_secs(10), "the error took {took:?}");
            return;
        }
    }
    panic!("rank {rank}: no error since {:?}", last.elapsed());
}

/// The files process `pid` has in /dev/shm (the library's shared memory, named
/// `circulant-PID-NAME`): none may be left once the process has gone.
#[allow(dead_code)]
pub fn shared_files_of(pid: &str) -> Vec<String> {
    let prefix = format!("circulant-{pid}-");
    std::fs::read_dir("/dev/shm")
        .expect("/dev/shm")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(&prefix))
        .collect()
}

/// libfabric's `shm` provider keeps each endpoint's region in `/dev/shm` as `PID:N:M` and
/// removes it when the endpoint closes; a rank killed before (a job aborted by its MPI)
/// leaves it, and with it the library's receive slots (`circulant-PID-NAME`) that no peer
/// mapped yet. A test that kills ranks watches from before it starts them: on drop (also
/// when the test fails) the regions that appeared since and whose process is gone are
/// removed. Regions of live processes (tests running beside this one) are left alone.
pub struct ShmRegions {
    before: std::collections::HashSet<std::ffi::OsString>,
}

impl ShmRegions {
    pub fn watch() -> ShmRegions {
        ShmRegions {
            before: Self::names().into_iter().map(|(name, _)| name).collect(),
        }
    }

    /// The regions and receive slots in /dev/shm, with the pid their name holds.
    fn names() -> Vec<(std::ffi::OsString, u32)> {
        let Ok(entries) = std::fs::read_dir("/dev/shm") else {
            return Vec::new();
        };
        entries
            .filter_map(|entry| {
                let name = entry.ok()?.file_name();
                let text = name.to_str()?;
                if let Some(rest) = text.strip_prefix("circulant-") {
                    let pid = rest.split('-').next()?.parse().ok()?;
                    return Some((name, pid));
                }
                let parts: Vec<&str> = text.split(':').collect();
                let [pid, a, b] = parts[..] else { return None };
                if [a, b].iter().any(|p| p.parse::<u64>().is_err()) {
                    return None;
                }
                let pid = pid.parse().ok()?;
                Some((name, pid))
            })
            .collect()
    }
}

impl Drop for ShmRegions {
    fn drop(&mut self) {
        // An MPI launcher may return before its proxies have ended the ranks of an aborted
        // job: regions whose process still runs are looked at again for a few seconds.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut running = false;
            for (name, pid) in Self::names() {
                if self.before.contains(&name) {
                    continue;
                }
                if alive(pid) {
                    running = true;
                } else {
                    let _ = std::fs::remove_file(std::path::Path::new("/dev/shm").join(&name));
                }
            }
            if !running || Instant::now() >= deadline {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Whether this machine makes time namespaces (`unshare --time --monotonic`: Linux 5.6 and
/// util-linux 2.36, as root), in which a process's monotonic clock runs at an offset, as
/// another host's does; where it does not, says what is missing ([`missing`]).
pub fn time_namespaces() -> bool {
    let made = Command::new("unshare")
        .args(["--time", "--fork", "--monotonic", "1", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !made {
        missing(
            "time namespaces (unshare --time --monotonic)",
            "Linux 5.6 and util-linux 2.36, run as root",
        );
    }
    made
}

/// The reduce-scatters' algorithms a job on one host runs, as (equal blocks, counts): the
/// automatic choice, then each forced.
pub const REDUCE_SCATTER_ALGORITHMS: [(Choice<'static>, Choice<'static>); 4] = [
    (Choice::Auto, Choice::Auto),
    (
        Choice::Named("circulant-reduce-scatter"),
        Choice::Named("circulant-reduce-scatter"),
    ),
    (
        Choice::Named("ring-reduce-scatter"),
        Choice::Named("ring-reduce-scatter"),
    ),
    (
        Choice::Named("segment-reduce-scatter-block"),
        Choice::Named("segment-reduce-scatter"),
    ),
];
