//! The PMI-1 server of the built-in launcher: one job-wide key-value space and barrier, one
//! thread per rank reading that rank's private socket and one writing to it.
//!
//! Replies go through a per-rank queue that the rank's writer thread drains, so no write ever
//! happens under the job-wide lock: a rank that stops reading its replies stalls only itself
//! (its reader stops taking requests once [`QUEUED_REPLIES_MAX`] bytes wait for it). What one
//! rank may store is bounded ([`KEYS_PER_RANK`], [`BYTES_PER_RANK`], [`REQUEST_LINE_MAX`], [`LINE_READ_MAX`]).

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;

use circulant::bootstrap::mapping;
use circulant::bootstrap::wire::{
    check_token, excerpt, LineRead, LineReader, Message, REQUEST_LINE_MAX,
};

/// The maxima we announce (Hydra's figures). As in PMI-1's C interface they are buffer sizes
/// that count a terminating NUL, so the longest key or value accepted is one byte shorter.
pub const KVSNAME_MAX: usize = 256;
/// Longest key, counting the NUL (so 63 bytes are accepted).
pub const KEY_MAX: usize = 64;
/// Longest value, counting the NUL (so 1023 bytes are accepted).
pub const VALUE_MAX: usize = 1024;

/// Most keys one rank may put (a key put again counts once).
pub const KEYS_PER_RANK: usize = 2048;
/// Most bytes of keys and values one rank may hold in the key-value space.
pub const BYTES_PER_RANK: usize = 512 * 1024;
/// Most bytes read while looking for the end of a request line: bounds the memory a rank can
/// make the server hold (lines over [`REQUEST_LINE_MAX`] are refused once complete).
pub const LINE_READ_MAX: usize = 4096;
/// Reply bytes that may wait for a rank before its reader stops taking its requests.
const QUEUED_REPLIES_MAX: usize = 64 * 1024;

/// How far a rank has come in the PMI-1 life cycle, as this server saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmiPhase {
    /// Never sent `init` (a program that does not use PMI, or one stuck before it).
    NotInitialized,
    /// Sent `init`.
    Initialized,
    /// Sent `barrier_in`, waiting for the others.
    InBarrier,
    /// Sent `finalize`.
    Finalized,
    /// Closed its connection without `finalize`.
    LeftWithoutFinalize,
}

impl PmiPhase {
    /// The phase of a rank whose channel closed before finalize. One that never sent `init`
    /// stays so: the order in which the server sees closed channels is not the order in which
    /// the ranks ended, so a rank stopped because others failed must not look like their cause.
    fn on_departure(self) -> PmiPhase {
        match self {
            PmiPhase::NotInitialized => PmiPhase::NotInitialized,
            _ => PmiPhase::LeftWithoutFinalize,
        }
    }
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
    /// The ranks waiting in the barrier.
    pub waiting: Vec<usize>,
    /// The ranks not in it, and where they were.
    pub absent: Vec<(usize, PmiPhase)>,
}

/// What a rank's connection reports to the launcher's main loop.
#[derive(Debug)]
pub enum PmiEvent {
    Abort { code: i32 },
    ProtocolError { detail: String },
}

/// How many requests of each kind one rank made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PmiRequests {
    /// `get`: reads of the key-value space.
    pub gets: usize,
    /// `put`: stores.
    pub puts: usize,
    /// `barrier_in`: fences.
    pub barriers: usize,
}

/// A stored value and the rank that put it (which pays for it in its quota).
struct Entry {
    owner: usize,
    value: String,
}

/// What one rank holds in the key-value space.
#[derive(Clone, Copy, Default)]
struct Usage {
    keys: usize,
    bytes: usize,
}

struct State {
    kvsname: String,
    kvs: HashMap<String, Entry>,
    usage: Vec<Usage>,
    phases: Vec<PmiPhase>,
    requests: Vec<PmiRequests>,
    /// Reply queues, for the barrier's release of every rank.
    outboxes: Vec<Option<Arc<Outbox>>>,
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
                usage: vec![Usage::default(); size],
                phases: vec![PmiPhase::NotInitialized; size],
                requests: vec![PmiRequests::default(); size],
                outboxes: (0..size).map(|_| None).collect(),
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

    /// Every rank's request counts, by rank.
    pub fn requests(&self) -> Vec<PmiRequests> {
        self.lock().requests.clone()
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
        let outbox = Arc::new(Outbox::default());
        let drain = Arc::clone(&outbox);
        thread::spawn(move || drain.run(writer));
        self.lock().outboxes[rank] = Some(Arc::clone(&outbox));
        let mut reader = LineReader::with_limit(LINE_READ_MAX);
        let mut stream = stream;
        loop {
            // A rank that does not read its replies gets no further service.
            outbox.wait_below(QUEUED_REPLIES_MAX);
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
                Ok(Handled { replies, event }) => {
                    for (to, reply) in replies {
                        to.push(reply.encode().into_bytes());
                    }
                    if let Some(event) = event {
                        report(event);
                    }
                }
                Err(detail) => {
                    report(PmiEvent::ProtocolError { detail });
                    break;
                }
            }
        }
        let replies = self.depart(rank);
        for (to, reply) in replies {
            to.push(reply.encode().into_bytes());
        }
        outbox.close();
    }

    /// Answers one request under the lock; the replies are sent after it is released. `Err`
    /// is a protocol violation that ends the job.
    fn handle(&self, rank: usize, request: &Message) -> Result<Handled, String> {
        let mut state = self.lock();
        let mut handled = Handled::default();
        if state.phases[rank] == PmiPhase::Finalized && request.cmd() != "abort" {
            // A finalized rank is out of the job: it can neither store nor synchronize.
            if let Some(name) = reply_name(request.cmd()) {
                let reply = Message::new(name)
                    .with("rc", -1)
                    .with("msg", format!("rank_{rank}_already_finalized_PMI"));
                handled.reply(&state, rank, reply);
                return Ok(handled);
            }
        }
        let counts = &mut state.requests[rank];
        match request.cmd() {
            "get" => counts.gets += 1,
            "put" => counts.puts += 1,
            "barrier_in" => counts.barriers += 1,
            _ => {}
        }
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
                } else if key == mapping::KEY {
                    Some(format!("{key}_is_kept_by_the_launcher"))
                } else if check_token(key, true).is_err() || key.len() >= KEY_MAX {
                    Some(format!("invalid_key_or_not_shorter_than_{KEY_MAX}"))
                } else if value.map_or(true, |v| v.len() >= VALUE_MAX) {
                    Some(format!("missing_value_or_not_shorter_than_{VALUE_MAX}"))
                } else {
                    let value = value.unwrap_or_default();
                    store(&mut state, rank, key, value).err()
                };
                match problem {
                    Some(msg) => Message::new("put_result").with("rc", -1).with("msg", msg),
                    None => Message::new("put_result")
                        .with("rc", 0)
                        .with("msg", "success"),
                }
            }
            "get" => {
                let key = request.get("key").unwrap_or("");
                let found = if request.get("kvsname") != Some(state.kvsname.as_str()) {
                    None
                } else if key == mapping::KEY {
                    // Every rank this launcher starts runs on this host.
                    Some(mapping::one_node(state.phases.len()))
                } else {
                    state.kvs.get(key).map(|entry| entry.value.clone())
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
                if let Some(why) = barrier_broken(&state) {
                    barrier_failure(&why)
                } else {
                    state.phases[rank] = PmiPhase::InBarrier;
                    if state.phases.iter().all(|p| *p == PmiPhase::InBarrier) {
                        release_barrier(&mut state, &Message::new("barrier_out"), &mut handled);
                    }
                    return Ok(handled);
                }
            }
            "finalize" => {
                state.phases[rank] = PmiPhase::Finalized;
                // Ranks waiting in a barrier now wait for a rank that will never come.
                if state.stall.is_none() && state.departed.is_none() {
                    state.stall = stall_of(&state.phases, None);
                }
                let failure = barrier_failure(&format!("rank_{rank}_finalized_PMI"));
                release_barrier(&mut state, &failure, &mut handled);
                Message::new("finalize_ack")
            }
            "abort" => {
                let code = request
                    .get("exitcode")
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(1);
                handled.event = Some(PmiEvent::Abort { code });
                return Ok(handled);
            }
            other => {
                return Err(format!(
                    "unknown PMI command `{}`",
                    excerpt(other.as_bytes())
                ))
            }
        };
        handled.reply(&state, rank, reply);
        Ok(handled)
    }

    /// The rank's connection closed: without finalize, no barrier can complete any more.
    /// Returns the failure replies for the ranks waiting in a barrier.
    fn depart(&self, rank: usize) -> Vec<(Arc<Outbox>, Message)> {
        let mut state = self.lock();
        let mut handled = Handled::default();
        state.outboxes[rank] = None;
        if state.phases[rank] != PmiPhase::Finalized {
            if state.departed.is_none() {
                // The leaving rank may itself have been waiting (and given up): count it in.
                state.stall = stall_of(&state.phases, Some(rank));
            }
            state.phases[rank] = state.phases[rank].on_departure();
            state.departures.push(rank);
            if state.departed.is_none() {
                state.departed = Some(rank);
                let failure =
                    barrier_failure(&format!("rank_{rank}_left_the_job_without_finalize"));
                release_barrier(&mut state, &failure, &mut handled);
            }
        }
        handled.replies
    }
}

/// The outcome of one request: replies to send once the lock is released, and an event for
/// the launcher.
#[derive(Default)]
struct Handled {
    replies: Vec<(Arc<Outbox>, Message)>,
    event: Option<PmiEvent>,
}

impl Handled {
    fn reply(&mut self, state: &State, rank: usize, reply: Message) {
        if let Some(outbox) = &state.outboxes[rank] {
            self.replies.push((Arc::clone(outbox), reply));
        }
    }
}

/// The name of the reply to a request, for refusing it.
fn reply_name(cmd: &str) -> Option<&'static str> {
    Some(match cmd {
        "init" => "response_to_init",
        "get_maxes" => "maxes",
        "get_appnum" => "appnum",
        "get_my_kvsname" => "my_kvsname",
        "get_universe_size" => "universe_size",
        "put" => "put_result",
        "get" => "get_result",
        "barrier_in" => "barrier_out",
        "finalize" => "finalize_ack",
        _ => return None,
    })
}

/// Stores `key` for `rank` within its quota; `Err` is the reply's message.
fn store(state: &mut State, rank: usize, key: &str, value: &str) -> Result<(), String> {
    let previous = state
        .kvs
        .get(key)
        .map(|entry| (entry.owner, key.len() + entry.value.len()));
    let mut usage = state.usage[rank];
    if let Some((_, bytes)) = previous.filter(|(owner, _)| *owner == rank) {
        usage.keys -= 1;
        usage.bytes -= bytes;
    }
    usage.keys += 1;
    usage.bytes += key.len() + value.len();
    if usage.keys > KEYS_PER_RANK {
        return Err(format!(
            "quota_exceeded:_rank_{rank}_already_put_{KEYS_PER_RANK}_keys,_the_most_one_rank_may_put"
        ));
    }
    if usage.bytes > BYTES_PER_RANK {
        return Err(format!(
            "quota_exceeded:_rank_{rank}_would_hold_more_than_{BYTES_PER_RANK}_bytes_of_keys_and_values"
        ));
    }
    if let Some((owner, bytes)) = previous.filter(|(owner, _)| *owner != rank) {
        state.usage[owner].keys -= 1;
        state.usage[owner].bytes -= bytes;
    }
    state.usage[rank] = usage;
    let entry = Entry {
        owner: rank,
        value: value.to_owned(),
    };
    state.kvs.insert(key.to_owned(), entry);
    Ok(())
}

/// Why no barrier can complete any more: a rank left without finalize or finalized.
fn barrier_broken(state: &State) -> Option<String> {
    if let Some(gone) = state.departed {
        return Some(format!("rank_{gone}_left_the_job_without_finalize"));
    }
    state
        .phases
        .iter()
        .position(|p| *p == PmiPhase::Finalized)
        .map(|rank| format!("rank_{rank}_finalized_PMI"))
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
                phases[r].on_departure()
            } else {
                phases[r]
            };
            (r, phase)
        })
        .collect();
    Some(BarrierStall { waiting, absent })
}

fn barrier_failure(why: &str) -> Message {
    Message::new("barrier_out").with("rc", -1).with("msg", why)
}

/// Queues `reply` for every rank in the barrier and lets them go on.
fn release_barrier(state: &mut State, reply: &Message, handled: &mut Handled) {
    for rank in 0..state.phases.len() {
        if state.phases[rank] == PmiPhase::InBarrier {
            state.phases[rank] = PmiPhase::Initialized;
            handled.reply(state, rank, reply.clone());
        }
    }
}

/// Replies waiting for one rank, written by that rank's own thread.
#[derive(Default)]
struct Outbox {
    queue: Mutex<Queue>,
    changed: Condvar,
}

#[derive(Default)]
struct Queue {
    lines: VecDeque<Vec<u8>>,
    bytes: usize,
    /// The rank's connection ended (or a write to it failed): nothing more is sent.
    closed: bool,
}

impl Outbox {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, line: Vec<u8>) {
        let mut queue = self.lock();
        if !queue.closed {
            queue.bytes += line.len();
            queue.lines.push_back(line);
            self.changed.notify_all();
        }
    }

    fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    /// Waits until at most `limit` bytes are queued, or the connection ended.
    fn wait_below(&self, limit: usize) {
        let mut queue = self.lock();
        while queue.bytes > limit && !queue.closed {
            queue = self.changed.wait(queue).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Writes queued lines to `stream` until the connection ends.
    fn run(&self, mut stream: UnixStream) {
        loop {
            let line = {
                let mut queue = self.lock();
                loop {
                    if let Some(line) = queue.lines.pop_front() {
                        break line;
                    }
                    if queue.closed {
                        return;
                    }
                    queue = self.changed.wait(queue).unwrap_or_else(|p| p.into_inner());
                }
            };
            // A failed write means the rank is gone; its reader reports that.
            let written = stream.write_all(&line);
            let mut queue = self.lock();
            queue.bytes -= line.len();
            if written.is_err() {
                queue.closed = true;
                queue.lines.clear();
                queue.bytes = 0;
            }
            self.changed.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;
    use std::io::Read;
    use std::time::Duration;

    fn request() -> impl Strategy<Value = Vec<u8>> {
        let command =
            "(init|get_maxes|get_my_kvsname|put|get|barrier_in|finalize|abort|[a-z_]{1,8})";
        let field = ("(kvsname|key|value|exitcode|[a-z]{1,3})", "[!-~]{0,12}");
        prop_oneof![
            (command, vec(field, 0..4)).prop_map(|(cmd, fields)| {
                let mut line = format!("cmd={cmd}");
                for (key, value) in fields {
                    line.push_str(&format!(" {key}={value}"));
                }
                line.push('\n');
                line.into_bytes()
            }),
            vec(any::<u8>(), 0..120),
        ]
    }

    /// Replies of the server to `requests` from rank 0 of a job of `size`.
    fn replies(size: usize, requests: &str) -> String {
        let server = PmiServer::new(size, "kvs".into());
        let (ours, mut theirs) = UnixStream::pair().expect("socketpair");
        let serving = server.clone();
        let handle = thread::spawn(move || serving.serve(0, ours, |_| {}));
        theirs.write_all(requests.as_bytes()).expect("requests");
        let _ = theirs.shutdown(std::net::Shutdown::Write);
        theirs
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut replies = String::new();
        let _ = theirs.read_to_string(&mut replies);
        handle.join().expect("the server ends");
        replies
    }

    #[test]
    fn the_process_mapping_is_the_launchers_and_says_one_node() {
        let replies = replies(
            5,
            "cmd=init pmi_version=1 pmi_subversion=1\n\
             cmd=put kvsname=kvs key=PMI_process_mapping value=(vector,(0,5,1))\n\
             cmd=get kvsname=kvs key=PMI_process_mapping\n",
        );
        let lines: Vec<&str> = replies.lines().collect();
        assert_eq!(lines.len(), 3, "{replies}");
        assert!(lines[1].starts_with("cmd=put_result rc=-1"), "{replies}");
        assert_eq!(
            lines[2],
            "cmd=get_result rc=0 msg=success value=(vector,(0,1,5))"
        );
    }

    /// Ranks 0 and 2 wait in the barrier; rank 1, which never sent `init`, is stopped and its
    /// channel is the first the server sees closed. It is named as never initialized, not as
    /// one that left.
    #[test]
    fn a_rank_stopped_before_init_stays_never_initialized() {
        let server = PmiServer::new(3, "kvs".into());
        let mut clients = Vec::new();
        let mut handles = Vec::new();
        for rank in 0..3 {
            let (ours, theirs) = UnixStream::pair().expect("socketpair");
            let serving = server.clone();
            handles.push(thread::spawn(move || serving.serve(rank, ours, |_| {})));
            clients.push(theirs);
        }
        let waiting = [0, 2];
        for &rank in &waiting {
            clients[rank]
                .write_all(b"cmd=init pmi_version=1 pmi_subversion=1\ncmd=barrier_in\n")
                .expect("requests");
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while server.phases()
            != [
                PmiPhase::InBarrier,
                PmiPhase::NotInitialized,
                PmiPhase::InBarrier,
            ]
        {
            assert!(
                std::time::Instant::now() < deadline,
                "{:?}",
                server.phases()
            );
            thread::sleep(Duration::from_millis(2));
        }
        let never = clients.remove(1);
        drop(never);
        handles.remove(1).join().expect("the server ends");
        assert_eq!(server.phases()[1], PmiPhase::NotInitialized);
        assert_eq!(server.departures(), [1]);
        assert_eq!(
            server.barrier_stall(),
            Some(BarrierStall {
                waiting: waiting.to_vec(),
                absent: vec![(1, PmiPhase::NotInitialized)],
            })
        );
        drop(clients);
        for handle in handles {
            handle.join().expect("the server ends");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever a rank sends, the server neither panics nor answers with something that is
        /// not a PMI line.
        #[test]
        fn arbitrary_requests_never_panic_the_server(requests in vec(request(), 0..24)) {
            let server = PmiServer::new(2, "kvs".into());
            let (ours, mut theirs) = UnixStream::pair().expect("socketpair");
            let serving = server.clone();
            let handle = thread::spawn(move || serving.serve(0, ours, |_| {}));
            for request in &requests {
                if theirs.write_all(request).is_err() {
                    break;
                }
            }
            let _ = theirs.shutdown(std::net::Shutdown::Write);
            theirs.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
            let mut replies = Vec::new();
            let _ = theirs.read_to_end(&mut replies);
            prop_assert!(handle.join().is_ok(), "the server panicked");
            for line in replies.split_inclusive(|&c| c == b'\n') {
                prop_assert!(Message::parse(line).is_ok(), "{:?}", String::from_utf8_lossy(line));
            }
            let phases = server.phases();
            prop_assert_eq!(phases[1], PmiPhase::NotInitialized);
        }
    }
}
