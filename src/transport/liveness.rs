//! Whether the process of a peer on this host still runs, asked before every write to it.
//!
//! libfabric's shm provider (1.17) takes a spin lock in the target's shared memory for every
//! write; a peer killed while it held that lock leaves every later write to it spinning
//! inside libfabric, where no deadline can end it. A write to a peer whose process has ended
//! is therefore refused before it reaches the provider. The check is a `poll` on a pidfd
//! (about 0.2 µs here), made only where every rank shares this host (shm), whose ranks are
//! taken to share a pid namespace too. What remains is a writer already spinning on the lock
//! at the moment the peer dies.

use std::os::fd::OwnedFd;

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::process::{pidfd_open, Pid, PidfdFlags};

/// The peers' processes, for the peers that can be watched.
pub(super) struct PeerProcesses {
    /// One entry per rank: a pidfd, or `None` where there is nothing to watch (this rank,
    /// ranks on other hosts, or a kernel without pidfds).
    pidfds: Vec<Option<OwnedFd>>,
    /// Ranks whose process had ended before it could be watched.
    ended: Vec<bool>,
}

impl PeerProcesses {
    /// Nothing watched.
    pub fn none(size: usize) -> Self {
        PeerProcesses {
            pidfds: (0..size).map(|_| None).collect(),
            ended: vec![false; size],
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

    /// Whether `peer`'s process is known to have ended.
    pub fn ended(&self, peer: usize) -> bool {
        if self.ended.get(peer).copied().unwrap_or(false) {
            return true;
        }
        let Some(Some(fd)) = self.pidfds.get(peer) else {
            return false;
        };
        // A pidfd is readable once its process has terminated (a zombie included).
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        matches!(poll(&mut fds, Some(&now)), Ok(n) if n > 0)
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
        assert!(watched.ended(1));
        assert!(!PeerProcesses::none(2).ended(1));
    }
}
