//! A PMI-1 client over the wire protocol: the connection named by `PMI_FD` (a socket the
//! launcher left open for us) or `PMI_PORT` (`host:port`, with `PMI_ID` in Hydra's port mode).
//! Every reply is awaited with a deadline, and every failure says what was awaited.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use super::hangup::HangupWatch;
use super::wire::{check_token, excerpt, LineRead, LineReader, Message};
use super::BootstrapError;

/// The longest key-value-space name, key and value the server keeps intact, in bytes.
///
/// PMI-1's `get_maxes` announces buffer sizes that include a C string's terminating NUL:
/// Hydra announces `vallen_max=1024` and silently cuts longer values to 1023 bytes. These
/// fields are therefore one less than the announced figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvsLimits {
    pub kvsname_max: usize,
    pub key_max: usize,
    pub value_max: usize,
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn set_read_timeout(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(Some(timeout)),
            Stream::Tcp(s) => s.set_read_timeout(Some(timeout)),
        }
    }
    fn set_write_timeout(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_write_timeout(Some(timeout)),
            Stream::Tcp(s) => s.set_write_timeout(Some(timeout)),
        }
    }
    /// Another descriptor of the same connection.
    fn duplicate(&self) -> io::Result<OwnedFd> {
        match self {
            Stream::Unix(s) => s.as_fd().try_clone_to_owned(),
            Stream::Tcp(s) => s.as_fd().try_clone_to_owned(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}

/// Where the launcher's PMI server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// An inherited socket (`PMI_FD`).
    Fd(i32),
    /// `PMI_PORT=host:port`, with `PMI_ID` when the server assigns rank and size itself.
    Port { address: String, id: Option<String> },
}

/// An initialized PMI-1 session.
pub struct Pmi1Client {
    stream: Stream,
    reader: LineReader,
    timeout: Duration,
    kvsname: String,
    limits: KvsLimits,
    appnum: i64,
    rank: Option<usize>,
    size: Option<usize>,
    /// Ends the process if the server goes away before finalize.
    watch: Option<HangupWatch>,
}

impl Pmi1Client {
    /// Connects and runs the PMI-1 start-up: `init`, `get_maxes`, `get_appnum`,
    /// `get_my_kvsname`. In port mode with an id, the server also tells rank and size.
    pub fn connect(
        endpoint: &Endpoint,
        timeout: Duration,
        end_with_launcher: bool,
    ) -> Result<Self, BootstrapError> {
        let stream = match endpoint {
            Endpoint::Fd(fd) => Stream::Unix(UnixStream::from(inherited_fd(*fd)?)),
            Endpoint::Port { address, .. } => Stream::Tcp(connect_tcp(address, timeout)?),
        };
        let watch = if end_with_launcher {
            let watched = stream.duplicate().and_then(HangupWatch::start);
            Some(watched.map_err(|source| BootstrapError::Io {
                during: "starting the watch on the PMI channel".into(),
                source,
            })?)
        } else {
            None
        };
        stream
            .set_write_timeout(timeout)
            .map_err(|source| BootstrapError::Io {
                during: "setting the PMI socket's write timeout".into(),
                source,
            })?;
        let mut client = Pmi1Client {
            stream,
            reader: LineReader::new(),
            timeout,
            kvsname: String::new(),
            limits: KvsLimits {
                kvsname_max: 0,
                key_max: 0,
                value_max: 0,
            },
            appnum: 0,
            rank: None,
            size: None,
            watch,
        };
        if let Endpoint::Port { id: Some(id), .. } = endpoint {
            client.port_handshake(id)?;
        }
        let reply = client.call(
            &Message::new("init")
                .with("pmi_version", 1)
                .with("pmi_subversion", 1),
            "response_to_init",
        )?;
        if let Some(version) = reply.get("pmi_version") {
            if version != "1" {
                return Err(BootstrapError::Unexpected {
                    awaiting: "the reply to `init`".into(),
                    got: format!("server speaks PMI version {version}, not 1"),
                });
            }
        }
        let maxes = client.call(&Message::new("get_maxes"), "maxes")?;
        let usable = |announced: usize| announced.saturating_sub(1);
        client.limits = KvsLimits {
            kvsname_max: usable(number_field(&maxes, "kvsname_max")?),
            key_max: usable(number_field(&maxes, "keylen_max")?),
            value_max: usable(number_field(&maxes, "vallen_max")?),
        };
        if client.limits.key_max == 0 || client.limits.value_max < 2 {
            return Err(BootstrapError::Unexpected {
                awaiting: "usable maxima in the reply to `get_maxes`".into(),
                got: excerpt(maxes.encode().trim_end().as_bytes()),
            });
        }
        let appnum = client.call(&Message::new("get_appnum"), "appnum")?;
        client.appnum = number_field(&appnum, "appnum")?;
        let name = client.call(&Message::new("get_my_kvsname"), "my_kvsname")?;
        client.kvsname = text_field(&name, "kvsname")?.to_owned();
        Ok(client)
    }

    /// Hydra's port mode: `initack pmiid=ID`, answered by `initack` and `set` lines.
    fn port_handshake(&mut self, id: &str) -> Result<(), BootstrapError> {
        self.call(&Message::new("initack").with("pmiid", id), "initack")?;
        for _ in 0..3 {
            let set = self.receive(
                "the `set` lines after `initack`",
                Instant::now() + self.timeout,
            )?;
            if set.cmd() != "set" {
                return Err(BootstrapError::Unexpected {
                    awaiting: "the `set` lines after `initack`".into(),
                    got: set.encode(),
                });
            }
            if set.get("size").is_some() {
                self.size = Some(number_field(&set, "size")?);
            } else if set.get("rank").is_some() {
                self.rank = Some(number_field(&set, "rank")?);
            }
        }
        Ok(())
    }

    pub fn kvsname(&self) -> &str {
        &self.kvsname
    }
    pub fn limits(&self) -> KvsLimits {
        self.limits
    }
    pub fn appnum(&self) -> i64 {
        self.appnum
    }
    /// Rank and size told by the server in port mode.
    pub fn assigned(&self) -> (Option<usize>, Option<usize>) {
        (self.rank, self.size)
    }
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        self.check_key(key)?;
        if let Err(problem) = check_token(value, false) {
            return Err(BootstrapError::InvalidValue {
                key: key.to_owned(),
                problem: problem.to_string(),
            });
        }
        if value.len() > self.limits.value_max {
            return Err(BootstrapError::ValueTooLong {
                key: key.to_owned(),
                len: value.len(),
                max: self.limits.value_max,
            });
        }
        let request = Message::new("put")
            .with("kvsname", &self.kvsname)
            .with("key", key)
            .with("value", value);
        self.call(&request, "put_result")?;
        Ok(())
    }

    /// The value of `key`, or `KeyNotFound` if the server has none.
    pub fn get(&mut self, key: &str) -> Result<String, BootstrapError> {
        self.check_key(key)?;
        let request = Message::new("get")
            .with("kvsname", &self.kvsname)
            .with("key", key);
        let reply = self.exchange(&request, "get_result")?;
        if reply.get("rc").is_some_and(|rc| rc != "0") {
            return Err(BootstrapError::KeyNotFound {
                key: key.to_owned(),
                detail: reply.get("msg").unwrap_or("").to_owned(),
            });
        }
        Ok(text_field(&reply, "value")?.to_owned())
    }

    /// `barrier_in` … `barrier_out`: every rank's puts are visible to every rank afterwards.
    pub fn barrier(&mut self) -> Result<(), BootstrapError> {
        let reply = self.exchange(&Message::new("barrier_in"), "barrier_out")?;
        if let Some(rc) = reply.get("rc").filter(|rc| *rc != "0") {
            return Err(BootstrapError::BarrierFailed {
                detail: format!("rc={rc} {}", reply.get("msg").unwrap_or("")),
            });
        }
        Ok(())
    }

    pub fn finalize(&mut self) -> Result<(), BootstrapError> {
        // The server may close the channel once the rank finalized.
        self.watch = None;
        self.call(&Message::new("finalize"), "finalize_ack")?;
        Ok(())
    }

    /// Asks the launcher to end the whole job with `code`. No reply is awaited: the launcher
    /// kills this process.
    pub fn abort(&mut self, code: i32) -> Result<(), BootstrapError> {
        self.send(&Message::new("abort").with("exitcode", code))
    }

    fn check_key(&self, key: &str) -> Result<(), BootstrapError> {
        if let Err(problem) = check_token(key, true) {
            return Err(BootstrapError::InvalidKey {
                key: key.to_owned(),
                problem: problem.to_string(),
            });
        }
        if key.len() > self.limits.key_max {
            return Err(BootstrapError::KeyTooLong {
                key: key.to_owned(),
                len: key.len(),
                max: self.limits.key_max,
            });
        }
        Ok(())
    }

    /// Sends `request`, awaits `expect`, and fails on a non-zero `rc`.
    fn call(&mut self, request: &Message, expect: &str) -> Result<Message, BootstrapError> {
        let reply = self.exchange(request, expect)?;
        if let Some(rc) = reply.get("rc").filter(|rc| *rc != "0") {
            return Err(BootstrapError::Refused {
                request: request.cmd().to_owned(),
                rc: rc.to_owned(),
                detail: reply.get("msg").unwrap_or("").to_owned(),
            });
        }
        Ok(reply)
    }

    /// Sends `request` and awaits the reply named `expect`, without judging its `rc`.
    fn exchange(&mut self, request: &Message, expect: &str) -> Result<Message, BootstrapError> {
        let deadline = Instant::now() + self.timeout;
        self.send(request)?;
        let awaiting = format!("`{expect}` in reply to `{}`", request.cmd());
        let reply = self.receive(&awaiting, deadline)?;
        if reply.cmd() != expect {
            return Err(BootstrapError::Unexpected {
                awaiting,
                got: excerpt(reply.encode().trim_end().as_bytes()),
            });
        }
        Ok(reply)
    }

    fn send(&mut self, request: &Message) -> Result<(), BootstrapError> {
        let line = request.encode();
        self.stream
            .write_all(line.as_bytes())
            .map_err(|source| match source.kind() {
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => {
                    BootstrapError::Closed {
                        awaiting: format!("sending `{}`", request.cmd()),
                    }
                }
                _ => BootstrapError::Io {
                    during: format!("sending `{}`", request.cmd()),
                    source,
                },
            })
    }

    fn receive(&mut self, awaiting: &str, deadline: Instant) -> Result<Message, BootstrapError> {
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
            match self.reader.read_line(&mut self.stream) {
                Ok(LineRead::Line(line)) => {
                    return Message::parse(&line).map_err(|source| BootstrapError::Malformed {
                        awaiting: awaiting.to_owned(),
                        line: excerpt(&line),
                        source,
                    })
                }
                Ok(LineRead::Closed(_)) => {
                    return Err(BootstrapError::Closed {
                        awaiting: awaiting.to_owned(),
                    })
                }
                // A timed-out read: loop to re-check the deadline.
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::TimedOut => {}
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

fn text_field<'m>(message: &'m Message, key: &str) -> Result<&'m str, BootstrapError> {
    message.get(key).ok_or_else(|| BootstrapError::Unexpected {
        awaiting: format!("field `{key}` in `{}`", message.cmd()),
        got: excerpt(message.encode().trim_end().as_bytes()),
    })
}

fn number_field<T: std::str::FromStr>(message: &Message, key: &str) -> Result<T, BootstrapError> {
    let text = text_field(message, key)?;
    text.parse().map_err(|_| BootstrapError::Unexpected {
        awaiting: format!("a number in field `{key}` of `{}`", message.cmd()),
        got: excerpt(text.as_bytes()),
    })
}
