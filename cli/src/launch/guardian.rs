//! The job's guardian: a small process that the launcher starts before its ranks and that
//! outlives a launcher killed outright, to remove what the ranks then leave in `/dev/shm`.
//!
//! Ranks get SIGKILL from the kernel when their launcher dies (`PR_SET_PDEATHSIG`), so
//! libfabric's shm provider cannot remove its regions, and a killed launcher reaps no rank and
//! removes nothing. The launcher therefore tells the guardian, over a pipe that only the
//! launcher holds, the pid of every rank it starts (`rank PID`), and `done` at the end of the
//! job, after it removed what ended ranks left. When the pipe closes without `done`, the
//! launcher is gone: the guardian waits until no live process holds each rank's pid any more and
//! then removes the files named after that pid and owned by this user (`fabric::shm`), at
//! most [`GUARD_LIMIT`] after the launcher died. A file named after a pid that no live process
//! holds belongs to no one, so a rank whose pid was reused by a live process keeps its files
//! rather than taking another process's.
//!
//! The guardian runs in its own process group, so that a signal to the launcher's group (a
//! terminal's Ctrl-C, `kill -- -PGID`) does not take it along, with no standard output or
//! error, so that it holds none of the launcher's pipes.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::LaunchError;

/// How long the guardian waits for the ranks of a dead launcher to end (they get SIGKILL
/// from the kernel at once; this only bounds the guardian's life).
pub const GUARD_LIMIT: Duration = Duration::from_secs(30);

/// How often the guardian looks whether the ranks of a dead launcher have ended.
const POLL: Duration = Duration::from_millis(10);

/// The longest line the guardian reads (`rank ` and a pid, or `done`).
const LINE_MAX: usize = 64;

/// How to start the guardian: a program whose arguments make it run [`guard`] on its
/// standard input (`circulant` does with its hidden subcommand `launch-guardian`).
#[derive(Debug, Clone)]
pub struct GuardianCommand {
    /// The program.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

/// The launcher's end of a running guardian.
pub(super) struct Guardian {
    child: Child,
    /// None once `done` was sent.
    pipe: Option<ChildStdin>,
}

impl Guardian {
    /// Starts the guardian, before any rank.
    pub(super) fn start(command: &GuardianCommand) -> Result<Guardian, LaunchError> {
        let mut child = Command::new(&command.program)
            .args(&command.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(LaunchError::Guardian)?;
        let pipe = child.stdin.take();
        // A stopped guardian must not stall the launcher: a line it cannot take now is dropped
        // (4096 ranks' lines fit in a pipe's 64 KiB anyway).
        if let Some(pipe) = &pipe {
            let _ = rustix::fs::fcntl_setfl(pipe, rustix::fs::OFlags::NONBLOCK);
        }
        Ok(Guardian { child, pipe })
    }

    /// Tells the guardian about a rank just started.
    pub(super) fn rank(&mut self, pid: u32) {
        self.send(&format!("rank {pid}\n"));
    }

    /// Tells the guardian that the job ended with every rank reaped, and lets it go. The
    /// launcher does not wait for it (it may still be starting): a thread reaps it.
    pub(super) fn done(mut self) {
        self.send("done\n");
        self.pipe = None;
        let mut child = self.child;
        if matches!(child.try_wait(), Ok(None)) {
            thread::spawn(move || child.wait());
        }
    }

    /// Writes `line`; a guardian that is gone or not reading loses it.
    fn send(&mut self, line: &str) {
        if let Some(pipe) = &mut self.pipe {
            let _ = pipe.write_all(line.as_bytes());
        }
    }
}

/// The guardian's work: reads the launcher's lines from `input` until it closes; if the
/// launcher did not say `done`, waits for its ranks to end and removes their files. Returns
/// for how many ranks it removed files.
pub fn guard(input: impl Read) -> usize {
    guard_for(input, GUARD_LIMIT)
}

/// [`guard`], waiting at most `limit` for the ranks to end.
fn guard_for(input: impl Read, limit: Duration) -> usize {
    let (mut waiting, done) = listen(input);
    if done {
        return 0;
    }
    let deadline = Instant::now() + limit;
    let mut cleaned = 0;
    loop {
        waiting.retain(|&pid| {
            if holds_pid(pid) {
                return true;
            }
            circulant::fabric::shm::remove_regions_of(pid);
            cleaned += 1;
            false
        });
        if waiting.is_empty() || Instant::now() >= deadline {
            return cleaned;
        }
        thread::sleep(POLL);
    }
}

/// The rank pids the launcher gave, and whether it said `done`, read until `done` or the end
/// of `input`.
fn listen(input: impl Read) -> (Vec<u32>, bool) {
    let mut lines = BufReader::new(input);
    let mut ranks = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut lines)
            .take(LINE_MAX as u64)
            .read_until(b'\n', &mut line)
        {
            Ok(0) => return (ranks, false),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return (ranks, false),
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end();
        if text == "done" {
            return (ranks, true);
        }
        if let Some(pid) = text.strip_prefix("rank ").and_then(|p| p.parse().ok()) {
            ranks.push(pid);
        }
    }
}

/// Whether a live process (not a zombie, whose pid cannot be reused and whose files no one
/// uses any more) holds `pid`.
fn holds_pid(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which may hold anything, in parentheses.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launchers_lines_are_read_up_to_done() {
        let said = listen(&b"rank 12\nrank x\nrank 34\ndone\nrank 56\n"[..]);
        assert_eq!(said, (vec![12, 34], true));
        assert_eq!(listen(&b"rank 12\nrank 3"[..]), (vec![12, 3], false));
        assert_eq!(guard(&b"rank 12\ndone\n"[..]), 0);
    }

    #[test]
    fn live_processes_hold_their_pid() {
        assert!(holds_pid(std::process::id()));
        assert!(!holds_pid(u32::MAX));
    }

    #[test]
    fn files_of_an_ended_rank_are_removed_and_a_live_ones_kept() {
        let mut ended = Command::new("true").spawn().expect("spawn true");
        let gone = ended.id();
        ended.wait().expect("reaped");
        let live = std::process::id();
        // Named after this process, with a domain no provider uses here.
        let kept = format!("/dev/shm/{live}:9999:9999");
        let removed = format!("/dev/shm/{gone}:0:0");
        for file in [&kept, &removed] {
            std::fs::write(file, b"x").expect("a file in /dev/shm");
        }
        let said = format!("rank {gone}\nrank {live}\n");
        let cleaned = guard_for(said.as_bytes(), Duration::from_millis(300));
        let (removed_gone, kept_there) = (
            !std::path::Path::new(&removed).exists(),
            std::path::Path::new(&kept).exists(),
        );
        let _ = std::fs::remove_file(&kept);
        let _ = std::fs::remove_file(&removed);
        assert_eq!(cleaned, 1);
        assert!(removed_gone, "the ended rank's file is left");
        assert!(kept_there, "the live process's file was removed");
    }
}
