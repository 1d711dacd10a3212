//! The byte channel to a PMI server: the socket named by `PMI_FD` (left open for us by the
//! launcher) or `PMI_PORT` (`host:port`). PMI-1 reads lines from it, PMI-2 length-prefixed
//! frames; both wait with a deadline and say what they awaited when it passes.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use super::hangup::HangupWatch;
use super::wire::MAX_LINE;
use super::BootstrapError;

/// Where the launcher's PMI server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerAddress {
    /// An inherited socket (`PMI_FD`).
    Fd(i32),
    /// `PMI_PORT=host:port`, with `PMI_ID` when the server assigns rank and size itself.
    Port {
        /// `host:port` of the server.
        address: String,
        /// `PMI_ID`: the id this process presents in Hydra's port mode.
        id: Option<String>,
    },
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    /// Another descriptor of the same connection.
    fn duplicate(&self) -> io::Result<OwnedFd> {
        match self {
            Stream::Unix(s) => s.as_fd().try_clone_to_owned(),
            Stream::Tcp(s) => s.as_fd().try_clone_to_owned(),
        }
    }

    /// Bounds each read by `timeout`.
    fn set_read_timeout(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(Some(timeout)),
            Stream::Tcp(s) => s.set_read_timeout(Some(timeout)),
        }
    }

    /// Bounds each write by `timeout`.
    fn set_write_timeout(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_write_timeout(Some(timeout)),
            Stream::Tcp(s) => s.set_write_timeout(Some(timeout)),
        }
    }

    /// Reads what arrived, up to `buf`'s length.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }

    /// Writes all of `buf`.
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.write_all(buf),
            Stream::Tcp(s) => s.write_all(buf),
        }
    }
}

/// A connected PMI socket with the bytes received but not yet consumed.
pub(super) struct Channel {
    stream: Stream,
    buffer: Vec<u8>,
    timeout: Duration,
    /// Ends the process if the server goes away before finalize (see `hangup`).
    watch: Option<HangupWatch>,
}

impl Channel {
    /// Connects to `server` (an inherited descriptor or `host:port`); each write takes at
    /// most `timeout`, each wait for a reply at most the deadline its caller gives.
    pub(super) fn open(server: &ServerAddress, timeout: Duration) -> Result<Self, BootstrapError> {
        let stream = match server {
            ServerAddress::Fd(fd) => Stream::Unix(UnixStream::from(inherited_fd(*fd)?)),
            ServerAddress::Port { address, .. } => Stream::Tcp(connect_tcp(address, timeout)?),
        };
        stream
            .set_write_timeout(timeout)
            .map_err(|source| BootstrapError::Io {
                during: "setting the PMI socket's write timeout".into(),
                source,
            })?;
        Ok(Channel {
            stream,
            buffer: Vec::new(),
            timeout,
            watch: None,
        })
    }

    /// Ends this process if the server hangs up before [`Self::end_watch`].
    pub(super) fn watch_hangup(&mut self) -> Result<(), BootstrapError> {
        let watch = self.stream.duplicate().and_then(HangupWatch::start);
        self.watch = Some(watch.map_err(|source| BootstrapError::Io {
            during: "starting the watch on the PMI channel".into(),
            source,
        })?);
        Ok(())
    }

    /// Stops the watch: the server may close the channel once this rank finalized.
    pub(super) fn end_watch(&mut self) {
        self.watch = None;
    }

    /// The bound of each wait for the server.
    pub(super) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The deadline of each wait from now on, for reading and for writing.
    pub(super) fn set_timeout(&mut self, timeout: Duration) -> Result<(), BootstrapError> {
        // A zero write timeout means none to the socket: the shortest wait is a millisecond.
        let timeout = timeout.max(Duration::from_millis(1));
        self.stream
            .set_write_timeout(timeout)
            .map_err(|source| BootstrapError::Io {
                during: "setting the PMI socket's write timeout".into(),
                source,
            })?;
        self.timeout = timeout;
        Ok(())
    }

    /// Writes `bytes` whole, in one call: servers that read a request with a single `read()`
    /// must find all of it there.
    pub(super) fn send(&mut self, bytes: &[u8], what: &str) -> Result<(), BootstrapError> {
        self.stream
            .write_all(bytes)
            .map_err(|source| match source.kind() {
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => {
                    BootstrapError::Closed {
                        awaiting: format!("sending `{what}`"),
                    }
                }
                _ => BootstrapError::Io {
                    during: format!("sending `{what}`"),
                    source,
                },
            })
    }

    /// The next line, `\n` included.
    pub(super) fn receive_line(
        &mut self,
        awaiting: &str,
        deadline: Instant,
    ) -> Result<Vec<u8>, BootstrapError> {
        loop {
            if let Some(end) = self.buffer.iter().position(|&c| c == b'\n') {
                let rest = self.buffer.split_off(end + 1);
                return Ok(std::mem::replace(&mut self.buffer, rest));
            }
            if self.buffer.len() > MAX_LINE {
                return Err(BootstrapError::Io {
                    during: format!("awaiting {awaiting}"),
                    source: io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("no end of line within {MAX_LINE} bytes"),
                    ),
                });
            }
            self.fill(awaiting, deadline)?;
        }
    }

    /// The next `len` bytes.
    pub(super) fn receive_exact(
        &mut self,
        len: usize,
        awaiting: &str,
        deadline: Instant,
    ) -> Result<Vec<u8>, BootstrapError> {
        while self.buffer.len() < len {
            self.fill(awaiting, deadline)?;
        }
        let rest = self.buffer.split_off(len);
        Ok(std::mem::replace(&mut self.buffer, rest))
    }

    /// Reads what the server sent next, waiting until `deadline` at most.
    fn fill(&mut self, awaiting: &str, deadline: Instant) -> Result<(), BootstrapError> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(BootstrapError::Deadline {
                    awaiting: awaiting.to_owned(),
                    timeout: self.timeout,
                });
            }
            self.stream
                .set_read_timeout(left)
                .map_err(|source| BootstrapError::Io {
                    during: format!("setting the read timeout for {awaiting}"),
                    source,
                })?;
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    return Err(BootstrapError::Closed {
                        awaiting: awaiting.to_owned(),
                    })
                }
                Ok(n) => {
                    self.buffer.extend_from_slice(&chunk[..n]);
                    return Ok(());
                }
                // A timed-out read: loop to re-check the deadline.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                    return Err(BootstrapError::Closed {
                        awaiting: awaiting.to_owned(),
                    })
                }
                Err(source) => {
                    return Err(BootstrapError::Io {
                        during: format!("awaiting {awaiting}"),
                        source,
                    })
                }
            }
        }
    }
}

/// Takes a duplicate of the socket the launcher left open as descriptor `fd`. `pidfd_getfd` on
/// our own process gives an owned descriptor without asserting ownership of the raw number, so
/// this needs no `unsafe`; the inherited number itself stays open until exit.
fn inherited_fd(fd: i32) -> Result<std::os::fd::OwnedFd, BootstrapError> {
    use rustix::process::{getpid, pidfd_getfd, pidfd_open, PidfdFlags, PidfdGetfdFlags};
    let me = pidfd_open(getpid(), PidfdFlags::empty()).map_err(|e| BootstrapError::Connect {
        endpoint: format!("PMI_FD={fd}"),
        source: e.into(),
    })?;
    let owned =
        pidfd_getfd(&me, fd, PidfdGetfdFlags::empty()).map_err(|e| BootstrapError::Connect {
            endpoint: format!("PMI_FD={fd} (is that descriptor open in this process?)"),
            source: e.into(),
        })?;
    // Only a socket can reach a PMI server; anything else (a file, a tty) is a wrong PMI_FD.
    let stat = rustix::fs::fstat(&owned).map_err(|e| BootstrapError::Connect {
        endpoint: format!("PMI_FD={fd}"),
        source: e.into(),
    })?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Socket {
        return Err(BootstrapError::Connect {
            endpoint: format!("PMI_FD={fd}"),
            source: io::Error::new(io::ErrorKind::InvalidInput, "descriptor is not a socket"),
        });
    }
    Ok(owned)
}

/// Connects to Hydra's `PMI_PORT` (`host:port`) within `timeout`.
fn connect_tcp(address: &str, timeout: Duration) -> Result<TcpStream, BootstrapError> {
    let connect_error = |source| BootstrapError::Connect {
        endpoint: format!("PMI_PORT={address}"),
        source,
    };
    let candidates = address.to_socket_addrs().map_err(connect_error)?;
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the name resolves to no address");
    for candidate in candidates {
        match TcpStream::connect_timeout(&candidate, timeout) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = e,
        }
    }
    Err(connect_error(last))
}
