//! The PMI-1 server of the built-in launcher: one job-wide key-value space and barrier, one
//! thread per rank reading that rank's private socket.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::bootstrap::wire::{
    check_token, excerpt, LineRead, LineReader, Message, REQUEST_LINE_MAX,
};

/// The maxima we announce (Hydra's figures). As in PMI-1's C interface they are buffer sizes
/// that count a terminating NUL, so the longest key or value accepted is one byte shorter.
pub const KVSNAME_MAX: usize = 256;
pub const KEY_MAX: usize = 64;
pub const VALUE_MAX: usize = 1024;

/// How far a rank has come in the PMI-1 life cycle, as this server saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmiPhase {
    /// Never sent `init` (a program that does not use PMI, or one stuck before it).
    NotInitialized,
    Initialized,
    /// Sent `barrier_in`, waiting for the others.
    InBarrier,
    Finalized,
    /// Closed its connection without `finalize`.
    LeftWithoutFinalize,
}

impl std::fmt::Display for PmiPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PmiPhase::NotInitialized => "never initialized PMI",
            PmiPhase::Initialized => "initialized PMI",
            PmiPhase::InBarrier => "waiting in the PMI barrier",
            PmiPhase::Finalized => "finalized PMI",
            PmiPhase::LeftWithoutFinalize => "left without PMI finalize",
        })
    }
}

/// Who was in a barrier that could not complete, and where the others were.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BarrierStall {
    pub waiting: Vec<usize>,
    pub absent: Vec<(usize, PmiPhase)>,
}

/// What a rank's connection reports to the launcher's main loop.
#[derive(Debug)]
pub enum PmiEvent {
    Abort { code: i32 },
    ProtocolError { detail: String },
}

struct State {
    kvsname: String,
    kvs: HashMap<String, String>,
    phases: Vec<PmiPhase>,
    /// Reply channels, for the barrier's release of every rank.
    writers: Vec<Option<UnixStream>>,
    /// The first rank that left without finalize: no barrier can complete after it.
    departed: Option<usize>,
    /// Ranks that left without finalize, in the order they left.
    departures: Vec<usize>,
    /// Ranks that ever sent `init`.
    initialized: Vec<bool>,
    /// The barrier that the first departure broke, if ranks were waiting in one.
    stall: Option<BarrierStall>,
}

/// The job's PMI-1 state, shared by the per-rank threads and the launcher.
#[derive(Clone)]
pub struct PmiServer {
    state: Arc<Mutex<State>>,
}

impl PmiServer {
    pub fn new(size: usize, kvsname: String) -> Self {
        PmiServer {
            state: Arc::new(Mutex::new(State {
                kvsname,
                kvs: HashMap::new(),
                phases: vec![PmiPhase::NotInitialized; size],
                writers: (0..size).map(|_| None).collect(),
                departed: None,
                departures: Vec::new(),
                initialized: vec![false; size],
                stall: None,
            })),
        }
    }

    /// The phase of every rank.
    pub fn phases(&self) -> Vec<PmiPhase> {
        self.lock().phases.clone()
    }

    /// Ranks that closed their channel without finalize, earliest first: the first of them is
    /// usually the cause of the others' failures.
    pub fn departures(&self) -> Vec<usize> {
        self.lock().departures.clone()
    }

    /// Whether `rank` ever sent `init`.
    pub fn initialized(&self, rank: usize) -> bool {
        self.lock().initialized[rank]
    }

    /// The barrier the job got stuck in: the one broken by the first departure, or else the one
    /// ranks are waiting in now.
    pub fn barrier_stall(&self) -> Option<BarrierStall> {
        let state = self.lock();
        state
            .stall
            .clone()
            .or_else(|| stall_of(&state.phases, None))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking rank thread must not take the launcher down with it: the state stays
        // consistent between statements, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Serves `rank` on `stream` until it closes; run on its own thread.
    pub fn serve(&self, rank: usize, stream: UnixStream, report: impl Fn(PmiEvent)) {
        let writer = match stream.try_clone() {
            Ok(w) => w,
            Err(e) => {
                let detail = format!("cannot clone the PMI socket: {e}");
                report(PmiEvent::ProtocolError { detail });
                return;
            }
        };
        // A rank that stops reading must not stall the barrier release of the others.
        let _ = writer.set_write_timeout(Some(Duration::from_secs(10)));
        self.lock().writers[rank] = Some(writer);
        let mut reader = LineReader::new();
        let mut stream = stream;
        loop {
            let line = match reader.read_line(&mut stream) {
                Ok(LineRead::Line(line)) => line,
                Ok(LineRead::Closed(rest)) => {
                    if !rest.is_empty() {
                        let detail = format!("unterminated PMI line: \"{}\"", excerpt(&rest));
                        report(PmiEvent::ProtocolError { detail });
                    }
                    break;
                }
                // A rank that exits with our last reply unread resets the connection: that is
                // a close like any other.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => {
                    let detail = format!("reading its PMI socket failed: {e}");
                    report(PmiEvent::ProtocolError { detail });
                    break;
                }
            };
            // As strict as Slurm, which reads a request with one read() of this size.
            if line.len() > REQUEST_LINE_MAX {
                let detail = format!(
                    "PMI request line of {} bytes, over the {REQUEST_LINE_MAX} a server reads: \"{}\"",
                    line.len(),
                    excerpt(&line)
                );
                report(PmiEvent::ProtocolError { detail });
                break;
            }
            let request = match Message::parse(&line) {
                Ok(request) => request,
                Err(e) => {
                    let detail = format!("malformed PMI line \"{}\": {e}", excerpt(&line));
                    report(PmiEvent::ProtocolError { detail });
                    break;
                }
            };
            match self.handle(rank, &request) {
                Ok(Some(event)) => report(event),
                Ok(None) => {}
                Err(detail) => {
                    report(PmiEvent::ProtocolError { detail });
                    break;
                }
            }
        }
        self.depart(rank);
    }

    /// Answers one request. `Err` is a protocol violation that ends the job.
    fn handle(&self, rank: usize, request: &Message) -> Result<Option<PmiEvent>, String> {
        let mut state = self.lock();
        let reply = match request.cmd() {
            "init" => {
                state.initialized[rank] = true;
                if state.phases[rank] == PmiPhase::NotInitialized {
                    state.phases[rank] = PmiPhase::Initialized;
                }
                Message::new("response_to_init")
                    .with("pmi_version", 1)
                    .with("pmi_subversion", 1)
                    .with("rc", 0)
            }
            "get_maxes" => Message::new("maxes")
                .with("kvsname_max", KVSNAME_MAX)
                .with("keylen_max", KEY_MAX)
                .with("vallen_max", VALUE_MAX),
            "get_appnum" => Message::new("appnum").with("appnum", 0),
            "get_my_kvsname" => Message::new("my_kvsname").with("kvsname", &state.kvsname),
            "get_universe_size" => Message::new("universe_size").with("size", state.phases.len()),
            "put" => {
                let key = request.get("key").unwrap_or("");
                let value = request.get("value");
                let problem = if request.get("kvsname") != Some(state.kvsname.as_str()) {
                    Some("unknown_kvsname".to_owned())
                } else if check_token(key, true).is_err() || key.len() >= KEY_MAX {
                    Some(format!("invalid_key_or_not_shorter_than_{KEY_MAX}"))
                } else if value.map_or(true, |v| v.len() >= VALUE_MAX) {
                    Some(format!("missing_value_or_not_shorter_than_{VALUE_MAX}"))
                } else {
                    None
                };
                match problem {
                    Some(msg) => Message::new("put_result").with("rc", -1).with("msg", msg),
                    None => {
                        let value = value.unwrap_or_default().to_owned();
                        state.kvs.insert(key.to_owned(), value);
                        Message::new("put_result")
                            .with("rc", 0)
                            .with("msg", "success")
                    }
                }
            }
            "get" => {
                let key = request.get("key").unwrap_or("");
                let found = if request.get("kvsname") == Some(state.kvsname.as_str()) {
                    state.kvs.get(key).cloned()
                } else {
                    None
                };
                match found {
                    Some(value) => Message::new("get_result")
                        .with("rc", 0)
                        .with("msg", "success")
                        .with("value", value),
                    None => Message::new("get_result")
                        .with("rc", -1)
                        .with("msg", "key_not_found")
                        .with("value", "unknown"),
                }
            }
            "barrier_in" => {
                if let Some(gone) = state.departed {
                    barrier_failure(gone)
                } else {
                    state.phases[rank] = PmiPhase::InBarrier;
                    if state.phases.iter().all(|p| *p == PmiPhase::InBarrier) {
                        release_barrier(&mut state, Message::new("barrier_out"));
                    }
                    return Ok(None);
                }
            }
            "finalize" => {
                state.phases[rank] = PmiPhase::Finalized;
                Message::new("finalize_ack")
            }
            "abort" => {
                let code = request
                    .get("exitcode")
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(1);
                return Ok(Some(PmiEvent::Abort { code }));
            }
            other => {
                return Err(format!(
                    "unknown PMI command `{}`",
                    excerpt(other.as_bytes())
                ))
            }
        };
        send(&mut state, rank, &reply);
        Ok(None)
    }

    /// The rank's connection closed: without finalize, no barrier can complete any more.
    fn depart(&self, rank: usize) {
        let mut state = self.lock();
        state.writers[rank] = None;
        if state.phases[rank] != PmiPhase::Finalized {
            if state.departed.is_none() {
                // The leaving rank may itself have been waiting (and given up): count it in.
                state.stall = stall_of(&state.phases, Some(rank));
            }
            state.phases[rank] = PmiPhase::LeftWithoutFinalize;
            state.departures.push(rank);
            if state.departed.is_none() {
                state.departed = Some(rank);
                release_barrier(&mut state, barrier_failure(rank));
            }
        }
    }
}

/// The ranks in the barrier and those absent from it, if any rank is in it. `leaving` is a
/// rank about to be marked as departed; its phase is the one it had.
fn stall_of(phases: &[PmiPhase], leaving: Option<usize>) -> Option<BarrierStall> {
    let waiting: Vec<usize> = (0..phases.len())
        .filter(|&r| phases[r] == PmiPhase::InBarrier)
        .collect();
    if waiting.is_empty() {
        return None;
    }
    let absent = (0..phases.len())
        .filter(|&r| phases[r] != PmiPhase::InBarrier)
        .map(|r| {
            let phase = if Some(r) == leaving {
                PmiPhase::LeftWithoutFinalize
            } else {
                phases[r]
            };
            (r, phase)
        })
        .collect();
    Some(BarrierStall { waiting, absent })
}

fn barrier_failure(gone: usize) -> Message {
    Message::new("barrier_out")
        .with("rc", -1)
        .with("msg", format!("rank_{gone}_left_the_job_without_finalize"))
}

/// Sends `reply` to every rank in the barrier and lets them go on.
fn release_barrier(state: &mut State, reply: Message) {
    for rank in 0..state.phases.len() {
        if state.phases[rank] == PmiPhase::InBarrier {
            state.phases[rank] = PmiPhase::Initialized;
            send(state, rank, &reply);
        }
    }
}

fn send(state: &mut State, rank: usize, reply: &Message) {
    // A failed write means the rank is gone; its reader thread reports that.
    if let Some(writer) = state.writers[rank].as_mut() {
        let _ = writer.write_all(reply.encode().as_bytes());
    }
}
