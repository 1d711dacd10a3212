//! How a job of the built-in launcher ended: each rank's termination, the job's outcome, and
//! the report `circulant run` prints and takes its exit status from.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use std::time::Duration;

use super::{BarrierStall, PmiPhase, PmiRequests};

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// Exited with this status.
    Exited(i32),
    /// Was killed by this signal.
    Signaled(i32),
}

impl From<ExitStatus> for Termination {
    fn from(status: ExitStatus) -> Self {
        match (status.code(), status.signal()) {
            (Some(code), _) => Termination::Exited(code),
            (None, Some(signal)) => Termination::Signaled(signal),
            // Neither code nor signal is only possible for stopped processes, which wait()
            // does not report.
            (None, None) => Termination::Exited(-1),
        }
    }
}

impl std::fmt::Display for Termination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Termination::Exited(code) => write!(f, "exited with code {code}"),
            Termination::Signaled(signal) => {
                write!(f, "was killed by signal {signal}")?;
                match signal_name(*signal) {
                    Some(name) => write!(f, " ({name})"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// Why the job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome {
    /// Every rank exited with status 0 after PMI finalize.
    Succeeded,
    /// The first rank seen to fail.
    RankFailed {
        /// The rank.
        rank: usize,
        /// How it ended.
        termination: Termination,
    },
    /// A rank exited with status 0 after PMI init but without finalize: its peers can never
    /// complete a barrier with it.
    NoFinalize {
        /// The rank.
        rank: usize,
    },
    /// A rank called PMI abort.
    Aborted {
        /// The rank.
        rank: usize,
        /// The code it gave to abort.
        code: i32,
    },
    /// A rank spoke something other than PMI-1 on its channel.
    PmiProtocol {
        /// The rank.
        rank: usize,
        /// What it sent.
        detail: String,
    },
    /// The job ran longer than its timeout.
    TimedOut {
        /// The timeout.
        after: Duration,
        /// The ranks still running then.
        running: Vec<usize>,
    },
    /// SIGINT, SIGTERM or SIGHUP.
    Interrupted,
}

/// One rank at the end of the job.
#[derive(Debug, Clone)]
pub struct RankReport {
    /// Process id.
    pub pid: u32,
    /// How it ended.
    pub termination: Termination,
    /// How far it came in PMI.
    pub pmi: PmiPhase,
    /// The PMI requests it made.
    pub requests: PmiRequests,
}

/// The end of a job: its outcome and every rank's.
#[derive(Debug, Clone)]
pub struct JobReport {
    /// Why the job ended.
    pub outcome: JobOutcome,
    /// Every rank, by rank.
    pub ranks: Vec<RankReport>,
    /// The PMI barrier the job was stuck in, if it was.
    pub barrier_stall: Option<BarrierStall>,
}

impl JobReport {
    /// The launcher's exit status: 0 on success; the failing rank's exit code, or 128 + its
    /// signal; the code of a PMI abort; 124 on timeout (as timeout(1)); 128 + the signal that
    /// interrupted the launcher; 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        let clamp = |code: i32| u8::try_from(code).ok().filter(|c| *c != 0).unwrap_or(1);
        match &self.outcome {
            JobOutcome::Succeeded => 0,
            JobOutcome::RankFailed { termination, .. } => match termination {
                Termination::Exited(code) => clamp(*code),
                Termination::Signaled(signal) => clamp(128 + signal),
            },
            JobOutcome::Aborted { code, .. } => clamp(*code),
            JobOutcome::NoFinalize { .. } | JobOutcome::PmiProtocol { .. } => 1,
            JobOutcome::TimedOut { .. } => 124,
            JobOutcome::Interrupted => 130,
        }
    }

    /// A sentence on why the job failed, with the PMI state of ranks that might explain it;
    /// `None` on success.
    pub fn failure(&self) -> Option<String> {
        let mut text = match &self.outcome {
            JobOutcome::Succeeded => return None,
            JobOutcome::RankFailed { rank, termination } => {
                format!("rank {rank} {termination}; stopped the other ranks")
            }
            JobOutcome::NoFinalize { rank } => format!(
                "rank {rank} exited after PMI init without PMI finalize; stopped the other ranks"
            ),
            JobOutcome::Aborted { rank, code } => {
                format!("rank {rank} aborted the job with code {code}")
            }
            JobOutcome::PmiProtocol { rank, detail } => {
                format!("rank {rank} broke the PMI protocol: {detail}; stopped the job")
            }
            JobOutcome::TimedOut { after, running } => format!(
                "job timed out after {:.1} s; stopped ranks {}",
                after.as_secs_f64(),
                join(running)
            ),
            JobOutcome::Interrupted => {
                "interrupted (SIGINT, SIGTERM or SIGHUP); stopped all ranks".to_owned()
            }
        };
        // When the failing rank had been waiting in a barrier (and gave up), or the job was
        // stopped from outside, name the ranks that never came to that barrier.
        let failed_rank = match &self.outcome {
            JobOutcome::RankFailed { rank, .. }
            | JobOutcome::NoFinalize { rank }
            | JobOutcome::Aborted { rank, .. }
            | JobOutcome::PmiProtocol { rank, .. } => Some(*rank),
            _ => None,
        };
        let stall = self
            .barrier_stall
            .as_ref()
            .filter(|stall| failed_rank.map_or(true, |rank| stall.waiting.contains(&rank)));
        if let Some(stall) = stall {
            let absent: Vec<String> = stall
                .absent
                .iter()
                .map(|(rank, phase)| format!("rank {rank} ({phase})"))
                .collect();
            let waiting = match stall.waiting.as_slice() {
                [one] => format!("rank {one} was"),
                many => format!("ranks {} were", join(many)),
            };
            text.push_str(&format!(
                "; {waiting} waiting in the PMI barrier for {}",
                absent.join(", ")
            ));
        }
        Some(text)
    }
}

fn join(ranks: &[usize]) -> String {
    let names: Vec<String> = ranks.iter().map(|r| r.to_string()).collect();
    names.join(", ")
}

fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => return None,
    })
}
