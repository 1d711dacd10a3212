//! The in-memory bootstrap: the p ranks of a job are threads of one process that share a
//! key-value space. For tests of code that uses communicators, run without a launcher:
//!
//! ```no_run
//! use circulant::bootstrap::memory::Job;
//! use circulant::comm::{CommError, Communicator, Config};
//!
//! let bootstraps = Job::new(3).expect("a job of 3 ranks").bootstraps();
//! let comms: Vec<Result<Communicator, CommError>> = std::thread::scope(|s| {
//!     let ranks: Vec<_> = bootstraps
//!         .into_iter()
//!         .map(|bootstrap| {
//!             s.spawn(move || {
//!                 let mut comm = Communicator::init_over(bootstrap, Config::default())?;
//!                 comm.barrier()?;
//!                 Ok(comm)
//!             })
//!         })
//!         .collect();
//!     ranks.into_iter().map(|r| r.join().expect("no panic")).collect()
//! });
//! // Every rank is done: now the communicators may close.
//! drop(comms);
//! ```
//!
//! The semantics are those of the launcher's backends: puts become visible to every rank after
//! the next fence that all ranks call, keys and values are PMI-1 tokens within Hydra's limits,
//! and every fence waits at most the job's timeout. A fence fails at once, never hangs, when a
//! rank can no longer come: it finalized, its bootstrap was dropped (its thread returned or
//! panicked), it aborted the job, or another rank already gave up waiting.
//!
//! Over the shm provider, every rank should keep its communicator until all ranks are done
//! with theirs (join the threads first, then drop): libfabric's shm provider (1.17) reaches an
//! endpoint of the same process through that endpoint's own mapping of its region, so an
//! endpoint closed while a sibling thread still writes to it or awaits its completions crashes
//! the process (SIGSEGV). Between processes each keeps its own mapping.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{check_entry, Bootstrap, BootstrapError, KeyValue, KvsLimits, DEFAULT_TIMEOUT};

/// The limits of Hydra's key-value space, so that code tested with threads behaves as it will
/// in a launched job.
pub(super) const MEMORY_LIMITS: KvsLimits = KvsLimits {
    kvsname_max: 255,
    key_max: 63,
    value_max: 1023,
};

/// Gives every in-memory job of this process its own key-value space name.
static JOBS: AtomicU64 = AtomicU64::new(0);

/// A job of `size` ranks that are threads of this process.
#[derive(Debug)]
pub struct Job {
    size: usize,
    timeout: Duration,
    /// Each rank's host name, where the job pretends its ranks run on several hosts.
    hosts: Option<Vec<String>>,
}

impl Job {
    /// A job of `size` ranks, whose fences wait at most [`DEFAULT_TIMEOUT`].
    pub fn new(size: usize) -> Result<Job, BootstrapError> {
        if size == 0 {
            return Err(BootstrapError::Memory(
                "a job needs at least one rank (size 0)".into(),
            ));
        }
        Ok(Job {
            size,
            timeout: DEFAULT_TIMEOUT,
            hosts: None,
        })
    }

    /// Gives rank `r` the host name `hosts[r]`, so that a test sees a job spread over
    /// several nodes: the ranks then learn their node map from the host names they exchange,
    /// as in a job whose launcher tells none. Without it every rank is on one node (they
    /// are threads of one process). One name per rank.
    pub fn hosts<S: Into<String>>(
        mut self,
        hosts: impl IntoIterator<Item = S>,
    ) -> Result<Job, BootstrapError> {
        let hosts: Vec<String> = hosts.into_iter().map(Into::into).collect();
        if hosts.len() != self.size {
            return Err(BootstrapError::Memory(format!(
                "{} host names for a job of {} ranks",
                hosts.len(),
                self.size
            )));
        }
        self.hosts = Some(hosts);
        Ok(self)
    }

    /// The deadline of every fence (how long a rank waits for the others to arrive).
    pub fn timeout(mut self, timeout: Duration) -> Job {
        self.timeout = timeout;
        self
    }

    /// One bootstrap per rank, in rank order; give each to its own thread. A bootstrap that is
    /// dropped unused counts as a rank that left the job.
    pub fn bootstraps(self) -> Vec<Bootstrap> {
        let number = JOBS.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(Shared {
            size: self.size,
            kvsname: format!("memory-{}-{number}", std::process::id()),
            state: Mutex::new(State {
                kvs: HashMap::new(),
                staged: Vec::new(),
                in_fence: vec![false; self.size],
                arrived: 0,
                generation: 0,
                gone: Vec::new(),
                broken: None,
            }),
            changed: Condvar::new(),
        });
        (0..self.size)
            .map(|rank| {
                let kvs = MemoryKvs {
                    shared: Arc::clone(&shared),
                    rank,
                    host: self.hosts.as_ref().map(|hosts| hosts[rank].clone()),
                    timeout: self.timeout,
                    pending: Vec::new(),
                    left: false,
                };
                Bootstrap::over(Box::new(kvs), rank, self.size, self.timeout)
            })
            .collect()
    }
}

/// What the ranks of one job share.
struct Shared {
    size: usize,
    kvsname: String,
    state: Mutex<State>,
    /// Signalled when a fence completes, a rank leaves, or the job breaks.
    changed: Condvar,
}

struct State {
    /// Everything published by completed fences.
    kvs: HashMap<String, String>,
    /// Puts of the ranks already in the current fence, published when the last one arrives.
    staged: Vec<(String, String)>,
    in_fence: Vec<bool>,
    arrived: usize,
    /// Completed fences.
    generation: u64,
    /// The ranks that left the job (finalized, dropped, panicked) and why, in the order they
    /// left: a fence names the first, not whichever rank left after it because of it.
    gone: Vec<(usize, &'static str)>,
    /// Why no fence can complete any more (an abort, a rank that gave up waiting).
    broken: Option<String>,
}

impl State {
    /// Why a fence of `rank` cannot complete, if it cannot.
    fn hopeless(&self, rank: usize) -> Option<String> {
        if let Some(why) = &self.broken {
            return Some(why.clone());
        }
        self.gone
            .iter()
            .find(|&&(r, _)| r != rank && !self.in_fence[r])
            .map(|(r, why)| format!("rank {r} left the job ({why})"))
    }

    /// The ranks not (yet) in the current fence.
    fn missing(&self) -> Vec<usize> {
        (0..self.in_fence.len())
            .filter(|&r| !self.in_fence[r])
            .collect()
    }
}

/// One rank's view of an in-memory job.
pub(super) struct MemoryKvs {
    shared: Arc<Shared>,
    rank: usize,
    /// The host name the job gave this rank, if it gave names.
    host: Option<String>,
    timeout: Duration,
    /// This rank's puts since its last fence.
    pending: Vec<(String, String)>,
    left: bool,
}

impl KeyValue for MemoryKvs {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn kvsname(&self) -> &str {
        &self.shared.kvsname
    }

    /// The ranks are threads of one process, unless the job gave them host names.
    fn nodes(&self) -> Option<usize> {
        self.host.is_none().then_some(1)
    }

    fn host(&self) -> Option<String> {
        self.host.clone()
    }

    fn limits(&self) -> KvsLimits {
        MEMORY_LIMITS
    }

    /// Kept by this rank until its next fence.
    fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        check_entry(key, value, MEMORY_LIMITS)?;
        self.pending.push((key.to_owned(), value.to_owned()));
        Ok(())
    }

    fn get(&mut self, key: &str) -> Result<String, BootstrapError> {
        check_entry(key, "", MEMORY_LIMITS)?;
        self.lock()
            .kvs
            .get(key)
            .cloned()
            .ok_or_else(|| BootstrapError::KeyNotFound {
                key: key.to_owned(),
                detail: "(in-memory: was it put before the last fence?)".into(),
            })
    }

    /// Publishes every rank's puts once all ranks have arrived; waits at most the timeout.
    fn fence(&mut self) -> Result<(), BootstrapError> {
        let deadline = Instant::now() + self.timeout;
        let shared = Arc::clone(&self.shared);
        let mut state = lock(&shared);
        if let Some(why) = state.hopeless(self.rank) {
            return Err(BootstrapError::BarrierFailed { detail: why });
        }
        state.staged.append(&mut self.pending);
        state.in_fence[self.rank] = true;
        state.arrived += 1;
        let generation = state.generation;
        if state.arrived == shared.size {
            let staged = std::mem::take(&mut state.staged);
            state.kvs.extend(staged);
            state.in_fence.iter_mut().for_each(|f| *f = false);
            state.arrived = 0;
            state.generation += 1;
            shared.changed.notify_all();
            return Ok(());
        }
        loop {
            if state.generation != generation {
                return Ok(());
            }
            if let Some(why) = state.hopeless(self.rank) {
                return Err(BootstrapError::BarrierFailed { detail: why });
            }
            let now = Instant::now();
            if now >= deadline {
                let missing = state.missing();
                // The others cannot complete this fence either: they fail now, not later.
                state.broken = Some(format!(
                    "rank {} gave up waiting in a fence for ranks {missing:?} after {:?}",
                    self.rank, self.timeout
                ));
                shared.changed.notify_all();
                return Err(BootstrapError::Deadline {
                    awaiting: format!("a fence (ranks {missing:?} never arrived)"),
                    timeout: self.timeout,
                });
            }
            state = shared
                .changed
                .wait_timeout(state, deadline - now)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        }
    }

    /// Ends the job for every rank: their fences fail with `message`. Threads cannot be killed;
    /// the caller should return.
    fn abort(&mut self, code: i32, message: &str) -> Result<(), BootstrapError> {
        let mut state = self.lock();
        if state.broken.is_none() {
            state.broken = Some(format!(
                "rank {} aborted the job (code {code}): {message}",
                self.rank
            ));
        }
        self.shared.changed.notify_all();
        Ok(())
    }

    /// Leaves the job: fences of the others fail from now on instead of waiting for this rank.
    fn finalize(&mut self) -> Result<(), BootstrapError> {
        let why = if std::thread::panicking() {
            "its thread panicked"
        } else {
            "finalized"
        };
        self.leave(why);
        Ok(())
    }
}

impl MemoryKvs {
    /// Marks this rank as gone (once) and wakes the ranks waiting in a fence.
    fn leave(&mut self, why: &'static str) {
        if self.left {
            return;
        }
        self.left = true;
        let mut state = self.lock();
        state.gone.push((self.rank, why));
        self.shared.changed.notify_all();
    }

    /// The job's shared state (see [`lock`]).
    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.shared)
    }
}

/// The shared state. No code that can panic runs under the lock, so a poisoned lock holds
/// consistent data.
fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared
        .state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Drop for MemoryKvs {
    fn drop(&mut self) {
        let why = if std::thread::panicking() {
            "its thread panicked"
        } else {
            "its bootstrap was dropped without finalize"
        };
        self.leave(why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(size: usize, timeout_ms: u64) -> Vec<Bootstrap> {
        Job::new(size)
            .expect("job")
            .timeout(Duration::from_millis(timeout_ms))
            .bootstraps()
    }

    #[test]
    fn puts_are_visible_to_all_after_a_fence_and_exchange_gives_rank_order() {
        let boots = job(4, 10_000);
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = boots
                .into_iter()
                .map(|mut boot| {
                    s.spawn(move || {
                        let rank = boot.rank();
                        assert_eq!(boot.size(), 4);
                        assert_eq!(boot.kind(), "memory");
                        boot.put(&format!("k{rank}"), &format!("v{rank}"))?;
                        // Not visible before the fence, not even to this rank.
                        assert!(matches!(
                            boot.get(&format!("k{rank}")),
                            Err(BootstrapError::KeyNotFound { .. })
                        ));
                        boot.fence()?;
                        let seen: Vec<String> = (0..4)
                            .map(|r| boot.get(&format!("k{r}")))
                            .collect::<Result<_, _>>()?;
                        let long: Vec<u8> = (0..3000).map(|i| (i * rank) as u8).collect();
                        let all = boot.exchange("long", &long)?;
                        boot.barrier()?;
                        boot.finalize()?;
                        Ok::<_, BootstrapError>((seen, all))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("no panic"))
                .collect()
        });
        for result in results {
            let (seen, all) = result.expect("rank succeeded");
            assert_eq!(seen, ["v0", "v1", "v2", "v3"]);
            for (r, bytes) in all.iter().enumerate() {
                let want: Vec<u8> = (0..3000).map(|i| (i * r) as u8).collect();
                assert_eq!(bytes, &want);
            }
        }
    }

    #[test]
    fn a_rank_that_never_comes_fails_the_fence_at_its_deadline() {
        let mut boots = job(3, 200);
        let absent = boots.pop().expect("rank 2");
        let started = Instant::now();
        let errors: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = boots
                .into_iter()
                .map(|mut boot| s.spawn(move || boot.fence()))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("no panic"))
                .collect()
        });
        assert!(started.elapsed() < Duration::from_secs(5));
        for error in errors {
            let text = error.expect_err("rank 2 never came").to_string();
            assert!(text.contains("[2]"), "{text}");
        }
        drop(absent);
    }

    #[test]
    fn a_rank_that_leaves_or_aborts_fails_the_others_at_once() {
        for how in ["finalize", "drop", "panic", "abort"] {
            let mut boots = job(3, 30_000);
            let mut leaver = boots.remove(1);
            let started = Instant::now();
            let errors: Vec<_> = std::thread::scope(|s| {
                let handles: Vec<_> = boots
                    .into_iter()
                    .map(|mut boot| s.spawn(move || boot.fence()))
                    .collect();
                let leaving = s.spawn(move || match how {
                    "finalize" => leaver.finalize().expect("finalize"),
                    "drop" => drop(leaver),
                    "abort" => leaver.abort(3, "test").expect("abort"),
                    _ => {
                        let _owned = leaver;
                        panic!("a rank's thread panics");
                    }
                });
                assert_eq!(leaving.join().is_err(), how == "panic");
                handles
                    .into_iter()
                    .map(|h| h.join().expect("no panic"))
                    .collect()
            });
            assert!(started.elapsed() < Duration::from_secs(10), "{how}");
            let expect = match how {
                "finalize" => "finalized",
                "drop" => "dropped",
                "abort" => "aborted the job (code 3): test",
                _ => "panicked",
            };
            for error in errors {
                let text = error.expect_err(how).to_string();
                assert!(text.contains(expect), "{how}: {text}");
            }
        }
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(matches!(Job::new(0), Err(BootstrapError::Memory(_))));
        let mut boots = job(1, 1000);
        let boot = &mut boots[0];
        assert!(matches!(
            boot.put("k", &"x".repeat(1024)),
            Err(BootstrapError::ValueTooLong { .. })
        ));
        assert!(matches!(
            boot.put(&"k".repeat(64), "v"),
            Err(BootstrapError::KeyTooLong { .. })
        ));
        assert!(matches!(
            boot.put("a b", "v"),
            Err(BootstrapError::InvalidKey { .. })
        ));
        assert!(matches!(
            boot.get("missing"),
            Err(BootstrapError::KeyNotFound { .. })
        ));
        boot.fence().expect("a job of one fences alone");
        boot.finalize().expect("finalize");
        assert!(matches!(boot.fence(), Err(BootstrapError::Finalized)));
    }
}
