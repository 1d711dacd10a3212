//! How a rank waits for completions: it polls while messages are likely to come soon,
//! yielding its core between polls, then blocks in short slices so that deadlines are checked.
//!
//! The policy and its measured effect: docs/architecture.md, section "The one-sided protocol
//! (src/transport)", paragraph "Waiting", and docs/performance.md.

use std::time::{Duration, Instant};

use crate::fabric::{Completion, FabricError};

use super::fabrics::Fabrics;

/// How long a failed operation waits for its own writes to complete before giving up on them.
pub(super) const DRAIN: Duration = Duration::from_secs(2);

/// How long an idle rank polls the completion queue, yielding its core between polls, before
/// it blocks: a message that comes within this time is seen at once, and when ranks outnumber
/// cores the yield lets the rank that sends it run.
const POLL_PHASE: Duration = Duration::from_micros(50);

/// The same where the completion queue has no wait object (shm): blocking is then a sleep,
/// which wakes late, so polling goes on longer.
const POLL_PHASE_WITHOUT_WAIT_OBJECT: Duration = Duration::from_millis(1);

/// The same where a node fabric adds a second queue and some peers run on other nodes: no
/// wait object covers both queues, so a waiting rank sleeps too, and a sleeping rank moves no
/// data (shm copies a large write when its target reads the queue, tcp reads its sockets
/// then). Its waits are for the link, whose steps are milliseconds apart, so it polls until
/// such a step is surely late.
/// Ranks of one node wait for each other's cores instead, where a longer poll phase took them
/// from the ranks that had work (docs/performance-archive.md, "Waiting with two fabrics").
const POLL_PHASE_TWO_QUEUES: Duration = Duration::from_millis(20);

/// Longest single blocking wait, so that deadlines are checked often.
pub(super) const WAIT_SLICE: Duration = Duration::from_millis(20);

/// Where the completion queue has no wait object, a waiting rank sleeps between polls, at
/// first this long, doubling up to the longest sleep: each sleep returns to the caller, which
/// looks at what no completion announces (receive slots in shared memory) before it waits on.
/// The longest sleep is what a rank that waited long (for a whole message over a slow link)
/// may add to each step after it.
const FIRST_SLEEP: Duration = Duration::from_micros(50);
const LONGEST_SLEEP: Duration = Duration::from_millis(1);
const LONGEST_SLEEP_TWO_QUEUES: Duration = Duration::from_micros(200);

/// The waiting of one drive to completion: whether the rank is idle, since when, and its
/// deadline.
pub(super) struct Waiting {
    poll_phase: Duration,
    deadline: Instant,
    idle: bool,
    idle_since: Instant,
    /// The next sleep where the queue has no wait object.
    sleep: Duration,
    longest_sleep: Duration,
}

impl Waiting {
    /// Waiting on `cq` for at most `deadline` from now.
    pub fn new(cq: &Fabrics, deadline: Duration) -> Self {
        let now = Instant::now();
        let (poll_phase, longest_sleep) = if cq.has_wait_object() {
            (POLL_PHASE, LONGEST_SLEEP)
        } else if cq.waits_across_nodes() {
            (POLL_PHASE_TWO_QUEUES, LONGEST_SLEEP_TWO_QUEUES)
        } else {
            (POLL_PHASE_WITHOUT_WAIT_OBJECT, LONGEST_SLEEP)
        };
        Waiting {
            poll_phase,
            deadline: now + deadline,
            idle: false,
            idle_since: now,
            sleep: FIRST_SLEEP,
            longest_sleep,
        }
    }

    /// Reads completions into `out`: a poll while busy or in the poll phase (yielding first
    /// when idle), else a blocking wait of at most one slice, or where the queue has no wait
    /// object one sleep and a poll.
    pub fn read(&mut self, cq: &Fabrics, out: &mut Vec<Completion>) -> Result<usize, FabricError> {
        if !self.idle || self.idle_since.elapsed() < self.poll_phase {
            if self.idle {
                std::thread::yield_now();
            }
            return cq.poll(out);
        }
        let left = self.deadline.saturating_duration_since(Instant::now());
        if cq.has_wait_object() {
            return cq.wait(out, left.min(WAIT_SLICE));
        }
        std::thread::sleep(self.sleep.min(left));
        self.sleep = (self.sleep * 2).min(self.longest_sleep);
        cq.poll(out)
    }

    /// Notes whether the last pass made progress; true when the rank is idle past its
    /// deadline.
    pub fn expired(&mut self, progress: bool) -> bool {
        if progress {
            self.idle = false;
            self.sleep = FIRST_SLEEP;
            return false;
        }
        if !self.idle {
            self.idle = true;
            self.idle_since = Instant::now();
        }
        Instant::now() >= self.deadline
    }
}
