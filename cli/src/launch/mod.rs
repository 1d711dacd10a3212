//! The built-in launcher: N ranks of one program on this host, each with a private PMI-1
//! channel (one end of a socketpair, inherited as `PMI_FD`; no port anyone else could open),
//! their output forwarded, and the job stopped as a whole when any rank fails.
//!
//! Each rank runs in its own process group so that stopping a rank also stops what it started,
//! and so that a terminal's Ctrl-C reaches only the launcher, which then stops every rank:
//! SIGTERM, and SIGKILL after a grace period. A launcher killed outright takes its ranks with it
//! (`PR_SET_PDEATHSIG`), and its guardian ([`guard`]) removes what they leave in `/dev/shm`.

mod guardian;
mod output;
mod report;
mod server;

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::wait::{waitid, Id, WaitPidFlag};
use rustix::process::{kill_process_group, Pid, Signal};
use thiserror::Error;

use guardian::Guardian;
pub use guardian::{guard, GuardianCommand, GUARD_LIMIT};
use output::forward;
pub use output::OUTPUT_CHUNK;
pub use report::{JobOutcome, JobReport, RankReport, Termination};
pub use server::{BarrierStall, PmiPhase, PmiRequests, KEY_MAX, KVSNAME_MAX, VALUE_MAX};
use server::{PmiEvent, PmiServer};

/// Default time ranks get between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);

/// Fallback wake-up of the main loop; exits, interrupts and PMI events wake it sooner.
const TICK: Duration = Duration::from_millis(200);

/// How long to wait for the output of ranks to drain after they ended.
const DRAIN: Duration = Duration::from_secs(2);

/// Environment variables of an enclosing job that must not leak into our ranks.
const FOREIGN_PMI_VARS: &[&str] = &[
    "PMI_FD",
    "PMI_PORT",
    "PMI_ID",
    "PMI_RANK",
    "PMI_SIZE",
    "PMI_JOBID",
    "PMI_SPAWNED",
    "PMI_APPNUM",
    "MPI_LOCALNRANKS",
    "MPI_LOCALRANKID",
];

/// What to run.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// Number of ranks to start.
    pub ranks: usize,
    /// The program every rank runs.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Extra environment for every rank (e.g. `FI_PROVIDER`).
    pub env: Vec<(OsString, OsString)>,
    /// Bound on the whole job.
    pub timeout: Option<Duration>,
    /// Prefix every output line with `[rank] `.
    pub tag_output: bool,
    /// Time between SIGTERM and SIGKILL when stopping ranks.
    pub grace: Duration,
    /// When a rank fails, let the others run to their own end instead of stopping them; the
    /// job still fails, naming the first failure. (PMI aborts and the timeout still stop all.)
    pub keep_going: bool,
    /// A process that outlives a launcher killed outright to remove the shared-memory files
    /// its ranks leave (see [`guard`]); without one those files stay.
    pub guardian: Option<GuardianCommand>,
}

impl JobSpec {
    /// A job of `ranks` ranks running `program` without arguments, with the default grace and no
    /// timeout.
    pub fn new(ranks: usize, program: impl Into<OsString>) -> Self {
        JobSpec {
            ranks,
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            timeout: None,
            tag_output: false,
            grace: DEFAULT_GRACE,
            keep_going: false,
            guardian: None,
        }
    }
}

#[derive(Debug, Error)]
/// Why a job could not be started.
pub enum LaunchError {
    #[error("a job needs at least one rank")]
    /// The job has no ranks.
    NoRanks,
    #[error("cannot create the PMI channel of rank {rank}")]
    /// The socketpair of a rank's PMI channel could not be created.
    Channel {
        /// The rank.
        rank: usize,
        #[source]
        /// The operating system's error.
        source: std::io::Error,
    },
    #[error("cannot start rank {rank} ({program})")]
    /// A rank's process could not be started.
    Spawn {
        /// The rank.
        rank: usize,
        /// The program.
        program: String,
        #[source]
        /// The operating system's error.
        source: std::io::Error,
    },
    #[error("cannot install the launcher's interrupt handler: {0}")]
    /// The launcher's signal handlers could not be installed.
    Signals(String),
    #[error("cannot start the job's guardian")]
    /// The guardian process could not be started.
    Guardian(#[source] std::io::Error),
    #[error("cannot draw the job's random authentication key")]
    /// The job's authentication key could not be drawn.
    AuthKey(#[source] std::io::Error),
}

enum Event {
    /// SIGINT, SIGTERM or SIGHUP reached the launcher.
    Interrupted,
    /// A rank's process has ended (not yet reaped).
    Exited,
    Pmi(usize, PmiEvent),
}

struct Rank {
    child: Child,
    pid: u32,
    ended: Option<Termination>,
}

impl Rank {
    /// Records how the rank ended, and removes the shared-memory files it can no longer remove
    /// itself (a rank killed by SIGKILL leaves them).
    fn reaped(&mut self, status: ExitStatus) -> Termination {
        let termination = Termination::from(status);
        self.ended = Some(termination);
        // The pid cannot have been reused yet: this runs right after the reap.
        circulant::fabric::shm::remove_regions_of(self.pid);
        termination
    }
}

/// Runs the job to its end and reports how it ended. Errors are failures to start it; a failing
/// rank is an outcome in the report.
pub fn run_job(spec: &JobSpec) -> Result<JobReport, LaunchError> {
    if spec.ranks == 0 {
        return Err(LaunchError::NoRanks);
    }
    let spec = &with_auth_key(spec)?;
    let start = Instant::now();
    let deadline = spec.timeout.map(|t| start + t);
    let (events, inbox) = mpsc::channel();

    let interrupts = InterruptRoute::start(events.clone())?;

    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.as_micros());
    let kvsname = format!("circulant_{}_{stamp}", std::process::id());
    let server = PmiServer::new(spec.ranks, kvsname);
    let mut guardian = spec.guardian.as_ref().map(Guardian::start).transpose()?;
    let (drained_tx, drained) = mpsc::channel::<()>();
    let mut ranks: Vec<Rank> = Vec::with_capacity(spec.ranks);
    let mut forwarders = 0;
    let mut spawn_error = None;
    for rank in 0..spec.ranks {
        match spawn_rank(spec, rank, &server, &events) {
            Ok((mut child, pid)) => {
                if let Some(guardian) = &mut guardian {
                    guardian.rank(pid);
                }
                watch_exit(pid, events.clone());
                if let Some(out) = child.stdout.take() {
                    forward(out, rank, spec.tag_output, false, drained_tx.clone());
                    forwarders += 1;
                }
                if let Some(err) = child.stderr.take() {
                    forward(err, rank, spec.tag_output, true, drained_tx.clone());
                    forwarders += 1;
                }
                ranks.push(Rank {
                    child,
                    pid,
                    ended: None,
                });
            }
            Err(e) => {
                spawn_error = Some(e);
                break;
            }
        }
    }
    drop(drained_tx);

    let outcome = match spawn_error {
        Some(_) => None,
        None => Some(watch(
            &mut ranks,
            &server,
            &inbox,
            deadline,
            start,
            spec.keep_going,
        )),
    };
    stop(&mut ranks, &inbox, spec.grace);
    // Stop stragglers a rank left behind in its process group (they would hold our pipes).
    for rank in &ranks {
        kill_group(rank.pid, Signal::KILL);
    }
    // Every rank is reaped and its files removed: nothing is left for the guardian.
    if let Some(guardian) = guardian {
        guardian.done();
    }
    let drain_deadline = Instant::now() + DRAIN;
    for _ in 0..forwarders {
        let left = drain_deadline.saturating_duration_since(Instant::now());
        if drained.recv_timeout(left).is_err() {
            break;
        }
    }
    drop(interrupts);

    if let Some(e) = spawn_error {
        return Err(e);
    }
    let phases = server.phases();
    let ranks = ranks
        .iter()
        .zip(phases)
        .zip(server.requests())
        .map(|((rank, pmi), requests)| RankReport {
            pid: rank.pid,
            termination: rank.ended.unwrap_or(Termination::Signaled(9)),
            pmi,
            requests,
        })
        .collect();
    let outcome = outcome.unwrap_or(JobOutcome::Succeeded);
    let barrier_stall = match outcome {
        JobOutcome::Succeeded => None,
        _ => server.barrier_stall(),
    };
    Ok(JobReport {
        outcome,
        ranks,
        barrier_stall,
    })
}

/// The running job's inbox, for the process-wide interrupt handler.
static INTERRUPTS: Mutex<Option<Sender<Event>>> = Mutex::new(None);

/// Whether the process-wide interrupt handler could be installed.
static HANDLER: OnceLock<Result<(), String>> = OnceLock::new();

/// Routes SIGINT, SIGTERM and SIGHUP to the job's main loop while it runs.
///
/// The handler replaces whatever was installed before rather than chaining to it: libraries
/// linked with libfabric may install their own handlers when loaded (Debian's libinfinipath,
/// through PSM, does, and exits the process from it, which would orphan the ranks). Outside a
/// job the handler exits with status 130, as an interrupted program does.
struct InterruptRoute;

impl InterruptRoute {
    fn start(events: Sender<Event>) -> Result<InterruptRoute, LaunchError> {
        let installed = HANDLER.get_or_init(|| {
            ctrlc::set_handler(|| {
                let inbox = INTERRUPTS.lock().unwrap_or_else(|p| p.into_inner()).clone();
                match inbox {
                    Some(inbox) => {
                        let _ = inbox.send(Event::Interrupted);
                    }
                    None => std::process::exit(130),
                }
            })
            .map_err(|e| e.to_string())
        });
        installed.clone().map_err(LaunchError::Signals)?;
        *INTERRUPTS.lock().unwrap_or_else(|p| p.into_inner()) = Some(events);
        Ok(InterruptRoute)
    }
}

impl Drop for InterruptRoute {
    fn drop(&mut self) {
        *INTERRUPTS.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// Tells the main loop when `pid` has ended, without reaping it: the main loop reaps, so a pid
/// is never signalled after it could have been reused.
fn watch_exit(pid: u32, events: Sender<Event>) {
    let Some(pid) = i32::try_from(pid).ok().map(nix::unistd::Pid::from_raw) else {
        return;
    };
    thread::spawn(move || loop {
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
        match waitid(Id::Pid(pid), flags) {
            Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => {
                let _ = events.send(Event::Exited);
                break;
            }
            // ECHILD: already reaped by the main loop.
            Err(_) => break,
        }
    });
}

fn spawn_rank(
    spec: &JobSpec,
    rank: usize,
    server: &PmiServer,
    events: &Sender<Event>,
) -> Result<(Child, u32), LaunchError> {
    let channel_error = |source| LaunchError::Channel { rank, source };
    let (ours, theirs) = UnixStream::pair().map_err(channel_error)?;
    // The rank's end must survive exec: clear close-on-exec on it alone. Ranks are spawned one
    // after another from this thread and `theirs` is closed right after the spawn, so no other
    // rank inherits it.
    rustix::io::fcntl_setfd(&theirs, rustix::io::FdFlags::empty())
        .map_err(|e| channel_error(e.into()))?;
    let mut command = Command::new(&spec.program);
    command.args(&spec.args);
    for var in FOREIGN_PMI_VARS {
        command.env_remove(var);
    }
    command
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .env("PMI_RANK", rank.to_string())
        .env("PMI_SIZE", spec.ranks.to_string())
        .env("PMI_FD", theirs.as_raw_fd().to_string())
        .env("MPI_LOCALNRANKS", spec.ranks.to_string())
        .env("MPI_LOCALRANKID", rank.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // A launcher killed outright takes its ranks with it.
    circulant_sys::process::die_with_parent(&mut command, Signal::KILL.as_raw());
    let child = command.spawn().map_err(|source| LaunchError::Spawn {
        rank,
        program: spec.program.to_string_lossy().into_owned(),
        source,
    })?;
    drop(theirs);
    let pid = child.id();
    let server = server.clone();
    let events = events.clone();
    thread::spawn(move || {
        server.serve(rank, ours, |event| {
            let _ = events.send(Event::Pmi(rank, event));
        })
    });
    Ok((child, pid))
}

/// Waits for the end of the job: every rank exited, or the first failure, abort, timeout or
/// interrupt.
fn watch(
    ranks: &mut [Rank],
    server: &PmiServer,
    inbox: &mpsc::Receiver<Event>,
    deadline: Option<Instant>,
    start: Instant,
    keep_going: bool,
) -> JobOutcome {
    let mut first_failure = None;
    loop {
        let now = Instant::now();
        let wait = deadline.map_or(TICK, |d| d.saturating_duration_since(now).min(TICK));
        match inbox.recv_timeout(wait) {
            Ok(Event::Interrupted) => return JobOutcome::Interrupted,
            Ok(Event::Pmi(rank, PmiEvent::Abort { code })) => {
                return JobOutcome::Aborted { rank, code }
            }
            Ok(Event::Pmi(rank, PmiEvent::ProtocolError { detail })) => {
                return JobOutcome::PmiProtocol { rank, detail }
            }
            Ok(Event::Exited) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {}
        }
        if let Some(outcome) = reap(ranks, server) {
            if !keep_going {
                return outcome;
            }
            first_failure.get_or_insert(outcome);
        }
        if ranks.iter().all(|r| r.ended.is_some()) {
            return first_failure.unwrap_or(JobOutcome::Succeeded);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            let running = (0..ranks.len())
                .filter(|&r| ranks[r].ended.is_none())
                .collect();
            return JobOutcome::TimedOut {
                after: start.elapsed(),
                running,
            };
        }
    }
}

/// How long to wait for a rank that closed its PMI channel to become waitable.
const SETTLE: Duration = Duration::from_secs(1);

/// Collects ranks that ended; returns the failure among them that came first.
fn reap(ranks: &mut [Rank], server: &PmiServer) -> Option<JobOutcome> {
    let mut failures: Vec<(usize, Termination)> = Vec::new();
    for (index, rank) in ranks.iter_mut().enumerate() {
        if let Some(termination) = try_reap(rank) {
            failures.push((index, termination));
        }
    }
    if failures.is_empty() {
        return None;
    }
    // A rank that left PMI first broke the barrier the others then failed in, but a process
    // closes its descriptors before it becomes waitable: give ranks that left before the
    // failing ones a moment to be reaped too, so that the cause is named, not a consequence.
    let departures = server.departures();
    let left_at = |rank: usize| departures.iter().position(|&r| r == rank);
    let first_failure = failures
        .iter()
        .map(|&(rank, _)| left_at(rank).unwrap_or(usize::MAX))
        .min()
        .unwrap_or(usize::MAX);
    let settle_until = Instant::now() + SETTLE;
    for &earlier in departures.iter().take(first_failure) {
        while ranks[earlier].ended.is_none() && Instant::now() < settle_until {
            match try_reap(&mut ranks[earlier]) {
                Some(termination) => failures.push((earlier, termination)),
                None if ranks[earlier].ended.is_some() => {}
                None => thread::sleep(Duration::from_millis(5)),
            }
        }
    }
    let phases = server.phases();
    failures
        .into_iter()
        .filter_map(|(rank, termination)| {
            let outcome = if termination != Termination::Exited(0) {
                JobOutcome::RankFailed { rank, termination }
            } else if matches!(
                phases[rank],
                PmiPhase::Initialized | PmiPhase::InBarrier | PmiPhase::LeftWithoutFinalize
            ) && server.initialized(rank)
            {
                // Finalize is acknowledged before the rank can exit, so this phase is final.
                JobOutcome::NoFinalize { rank }
            } else {
                return None;
            };
            Some(((left_at(rank).unwrap_or(usize::MAX), rank), outcome))
        })
        .min_by_key(|(order, _)| *order)
        .map(|(_, outcome)| outcome)
}

/// Reaps `rank` if it ended; returns how it ended if that might be a failure (every end except
/// a plain exit 0 is judged by the caller with the PMI phase).
fn try_reap(rank: &mut Rank) -> Option<Termination> {
    if rank.ended.is_some() {
        return None;
    }
    let Ok(Some(status)) = rank.child.try_wait() else {
        return None;
    };
    Some(rank.reaped(status))
}

/// Stops every rank still running: SIGTERM and SIGCONT to its group, SIGKILL after `grace`.
fn stop(ranks: &mut [Rank], inbox: &mpsc::Receiver<Event>, grace: Duration) {
    let running = |ranks: &mut [Rank]| {
        for rank in ranks.iter_mut().filter(|r| r.ended.is_none()) {
            if let Ok(Some(status)) = rank.child.try_wait() {
                rank.reaped(status);
            }
        }
        ranks.iter().any(|r| r.ended.is_none())
    };
    if !running(ranks) {
        return;
    }
    for rank in ranks.iter().filter(|r| r.ended.is_none()) {
        kill_group(rank.pid, Signal::TERM);
        // A stopped rank acts on SIGTERM only once it runs again.
        kill_group(rank.pid, Signal::CONT);
    }
    let deadline = Instant::now() + grace;
    while running(ranks) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        // Woken by the exit watchers; other events no longer matter.
        let _ = inbox.recv_timeout(left.min(Duration::from_millis(50)));
    }
    for rank in ranks.iter_mut().filter(|r| r.ended.is_none()) {
        kill_group(rank.pid, Signal::KILL);
        if let Ok(status) = rank.child.wait() {
            rank.reaped(status);
        }
    }
}

fn kill_group(pid: u32, signal: Signal) {
    let pid = i32::try_from(pid).ok().and_then(Pid::from_raw);
    if let Some(pid) = pid {
        // ESRCH (the group is already empty) is the common, harmless case.
        let _ = kill_process_group(pid, signal);
    }
}

/// The spec with a random per-job authentication key for the ranks (providers that support
/// keys let only endpoints with the job's key reach each other), unless the launcher's
/// environment or the spec already sets one.
fn with_auth_key(spec: &JobSpec) -> Result<JobSpec, LaunchError> {
    let mut spec = spec.clone();
    let var = circulant::comm::AUTH_KEY_ENV;
    if std::env::var_os(var).is_none() && !spec.env.iter().any(|(k, _)| k == var) {
        let key = circulant::random::hex(32).map_err(LaunchError::AuthKey)?;
        spec.env.push((var.into(), key.into()));
    }
    Ok(spec)
}
