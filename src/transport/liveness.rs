//! Whether the process of a peer on this host still runs, asked before every write to it.
//!
//! libfabric's shm provider (1.17) takes a spin lock in the target's shared memory for every
//! write; a peer killed while it held that lock leaves every later write to it spinning
//! inside libfabric, where no deadline can end it. A write to a peer whose process has ended
//! is therefore refused before it reaches the provider. The check is a `poll` on a pidfd
//! (about 0.2 µs here), made only where every rank shares this host (shm), whose ranks are
//! taken to share a pid namespace too, and at most once per [`RECHECK`] per peer: a peer found
//! running that recently is taken to run still. What remains is a writer already spinning on
//! the lock at the moment the peer dies, and writes in the moments after its death: the
//! kernel's teardown of the process (its memory maps, tens of microseconds or more) comes
//! before the pidfd tells, and the recheck interval adds at most its length to that.

use std::cell::Cell;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::process::{pidfd_open, Pid, PidfdFlags};

/// The peers' processes, for the peers that can be watched.
pub(super) struct PeerProcesses {
    /// One entry per rank: a pidfd, or `None` where there is nothing to watch (this rank,
    /// ranks on other hosts, or a kernel without pidfds).
    pidfds: Vec<Option<OwnedFd>>,
    /// Ranks whose process had ended before it could be watched.
    ended: Vec<bool>,
    /// When each rank's process was last found running.
    running_at: Vec<Cell<Option<Instant>>>,
}

/// How long a peer found running is taken to run without asking again: a `poll` costs about
/// 0.2 µs, a third of what a small write over shm costs in all, and this is shorter than the
/// kernel's teardown of a process that was killed.
pub(super) const RECHECK: Duration = Duration::from_micros(10);

impl PeerProcesses {
    /// Nothing watched.
    pub fn none(size: usize) -> Self {
        PeerProcesses {
            pidfds: (0..size).map(|_| None).collect(),
            ended: vec![false; size],
            running_at: vec![Cell::new(None); size],
        }
    }

    /// Watches `rank`'s process `pid` (on this host) from now on.
    pub fn watch_one(&mut self, rank: usize, pid: u32) {
        let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
            return;
        };
        match pidfd_open(pid, PidfdFlags::empty()) {
            Ok(fd) => self.pidfds[rank] = Some(fd),
            Err(rustix::io::Errno::SRCH) => self.ended[rank] = true,
            // No pidfds here (old kernel, seccomp): writes go out unchecked.
            Err(_) => {}
        }
    }

    /// Whether `peer`'s process is known to have ended (asked of the kernel unless it was
    /// found running within [`RECHECK`]): the check before a write.
    pub fn ended(&self, peer: usize) -> bool {
        self.ended_within(peer, RECHECK)
    }

    /// Whether `peer`'s process has ended, asked of the kernel now: for aborts and credits,
    /// which go out when peers are likely to have just died.
    pub fn ended_now(&self, peer: usize) -> bool {
        self.ended_within(peer, Duration::ZERO)
    }

    fn ended_within(&self, peer: usize, recheck: Duration) -> bool {
        if self.ended.get(peer).copied().unwrap_or(false) {
            return true;
        }
        let Some(Some(fd)) = self.pidfds.get(peer) else {
            return false;
        };
        let now = Instant::now();
        let running_at = &self.running_at[peer];
        if running_at
            .get()
            .is_some_and(|at| now.saturating_duration_since(at) < recheck)
        {
            return false;
        }
        // A pidfd is readable once its process has terminated (a zombie included).
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        let immediately = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let ended = matches!(poll(&mut fds, Some(&immediately)), Ok(n) if n > 0);
        if !ended {
            running_at.set(Some(now));
        }
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_process_is_not_ended_and_an_exited_one_is() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        let mut watched = PeerProcesses::none(2);
        watched.watch_one(1, child.id());
        assert!(!watched.ended(0), "a rank not watched is never ended");
        assert!(!watched.ended(1));
        child.kill().expect("kill");
        child.wait().expect("reaped");
        // Found running just before: taken to run until the recheck interval has passed,
        // unless asked now.
        assert!(watched.ended_now(1));
        std::thread::sleep(RECHECK);
        assert!(watched.ended(1));
        assert!(watched.ended(1), "an ended process stays ended");
        assert!(!PeerProcesses::none(2).ended(1));
    }
}
