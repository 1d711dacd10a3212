//! Ends a rank whose launcher is gone: a thread waits for the PMI channel to hang up (the
//! launcher, or the proxy that started the rank, died) and then sends this process SIGTERM,
//! and SIGKILL [`GRACE`] later, so that no rank outlives its job. A program that handles
//! SIGTERM gets the grace period to clean up (libraries linked with libfabric may install a
//! SIGTERM handler that does not end the process, hence the SIGKILL).

use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::Duration;

use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;
use rustix::process::{getpid, kill_process, Signal};

/// Time between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);

/// Watches the PMI channel while it lives; dropping it ends the watch (before a finalize,
/// after which a server may close the channel).
pub struct HangupWatch {
    _stop: UnixStream,
}

impl HangupWatch {
    /// Starts watching `channel` (a duplicate of the PMI socket).
    pub fn start(channel: OwnedFd) -> std::io::Result<HangupWatch> {
        let (stop, stopped) = UnixStream::pair()?;
        thread::Builder::new()
            .name("pmi-hangup-watch".into())
            .spawn(move || watch(channel, stopped))?;
        Ok(HangupWatch { _stop: stop })
    }
}

/// The watch's thread: returns when `stopped` becomes readable or closes (the watch was
/// dropped); ends the process when `channel` hangs up first.
fn watch(channel: OwnedFd, stopped: UnixStream) {
    loop {
        // Data from the server is not asked for, so replies do not wake the thread.
        let mut fds = [
            PollFd::new(&channel, PollFlags::RDHUP),
            PollFd::new(&stopped, PollFlags::IN),
        ];
        match poll(&mut fds, None) {
            Err(Errno::INTR) => continue,
            Err(_) => return,
            Ok(_) => {}
        }
        if !fds[1].revents().is_empty() {
            return;
        }
        let hangup = PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR;
        if fds[0].revents().intersects(hangup) {
            // Not eprintln: stderr is likely a pipe to the dead launcher, and a failed write
            // must not end this thread before it ends the process.
            let _ = writeln!(
                std::io::stderr(),
                "circulant: the PMI channel to the launcher closed before PMI finalize (the \
                 launcher is gone); ending this rank"
            );
            let _ = kill_process(getpid(), Signal::TERM);
            thread::sleep(GRACE);
            let _ = kill_process(getpid(), Signal::KILL);
            return;
        }
        if fds[0].revents().contains(PollFlags::NVAL) {
            return;
        }
    }
}
