//! Bootstrap: how the N processes of a job learn their rank and exchange what they need to
//! reach each other (fabric addresses, memory keys) before the fabric can carry anything.
//!
//! A job is started by a launcher that hands every process a PMI: the built-in `circulant
//! run` and MPICH's Hydra `mpiexec` speak PMI-1 on `PMI_FD` (or `PMI_PORT`), Slurm's `srun
//! --mpi=pmi2` PMI-2 on `PMI_FD`, and `srun --mpi=pmix` and Open MPI's `mpirun` PMIx
//! (`PMIX_NAMESPACE`, `PMIX_RANK`; the system's libpmix is loaded at run time). Without any
//! launcher variables the process is a singleton: rank 0 of a job of size 1, with a private
//! key-value space (as MPI's singleton init). A launch of several ranks without a PMI this
//! library speaks is an error that names the launcher seen, never p singletons.
//!
//! Every wait for the server has a deadline: [`BootstrapOptions::timeout`], 60 s unless the
//! environment variable `CIRCULANT_BOOTSTRAP_TIMEOUT` (seconds, at most 7 days) says otherwise.

mod channel;
mod hangup;
mod launcher;
pub mod mapping;
pub mod memory;
mod oob;
mod pmi1;
pub mod pmi2;
mod pmix;
pub mod wire;

use std::collections::HashMap;
use std::time::Duration;

use thiserror::Error;

use crate::limits::parse_positive_seconds;

pub use oob::Allgather;
use oob::OobKvs;
use pmi1::{Greeted, Pmi1Client};
use pmi2::Pmi2Client;
use pmix::PmixClient;

pub use channel::ServerAddress;
pub use launcher::{Detected, PmiChoice, PMI_ENV};
pub use pmi1::KvsLimits;

/// Deadline of every PMI wait when neither the caller nor the environment sets one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Environment variable overriding [`DEFAULT_TIMEOUT`], in seconds (fractions allowed).
pub const TIMEOUT_ENV: &str = "CIRCULANT_BOOTSTRAP_TIMEOUT";

/// Limits of the singleton key-value space: the same as Hydra's, so that code tested alone
/// behaves as it will in a job.
const SINGLETON_LIMITS: KvsLimits = KvsLimits {
    kvsname_max: 255,
    key_max: 63,
    value_max: 1023,
};

#[derive(Debug, Error)]
/// Why a rank could not join its job or use the job's key-value space.
pub enum BootstrapError {
    #[error(
        "not inside a job: PMI_RANK/PMI_FD not set; start with `circulant run -n N -- ...` or mpiexec"
    )]
    /// No launcher's variables are set while a job was required.
    NotInJob,
    #[error("environment variable {var}={value:?} is invalid: {reason}")]
    /// An environment variable holds a value this library cannot use.
    Env {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it must be.
        reason: String,
    },
    #[error("cannot reach the PMI server at {endpoint}")]
    /// The PMI server's socket could not be opened.
    Connect {
        /// The address tried (`PMI_FD=...` or `PMI_PORT=...`).
        endpoint: String,
        #[source]
        /// The operating system's error.
        source: std::io::Error,
    },
    #[error("PMI I/O failed while {during}")]
    /// Reading or writing the PMI channel failed.
    Io {
        /// The request in progress.
        during: String,
        #[source]
        /// The operating system's error.
        source: std::io::Error,
    },
    #[error("no answer from the PMI server within {timeout:?} while awaiting {awaiting} (a rank that exited or never started, or a stalled launcher; set {TIMEOUT_ENV} to wait longer)")]
    /// The PMI server did not answer within the bootstrap timeout.
    Deadline {
        /// The reply awaited.
        awaiting: String,
        /// The timeout that passed.
        timeout: Duration,
    },
    #[error(
        "the PMI server closed the connection while awaiting {awaiting} (did the launcher exit?)"
    )]
    /// The server closed the connection: the launcher exited or dropped this rank.
    Closed {
        /// The reply awaited.
        awaiting: String,
    },
    #[error("malformed line from the PMI server while awaiting {awaiting}: \"{line}\"")]
    /// The server sent a line that is not a PMI message.
    Malformed {
        /// The reply awaited.
        awaiting: String,
        /// The line as received.
        line: String,
        #[source]
        /// What is wrong with it.
        source: wire::WireError,
    },
    #[error("unexpected reply from the PMI server while awaiting {awaiting}: \"{got}\"")]
    /// The server answered with another command than the one awaited.
    Unexpected {
        /// The reply awaited.
        awaiting: String,
        /// The line received.
        got: String,
    },
    #[error("the PMI server refused `{request}`: rc={rc} {detail}")]
    /// The server answered a request with an error code.
    Refused {
        /// The request refused.
        request: String,
        /// The server's return code.
        rc: String,
        /// The server's message, if any.
        detail: String,
    },
    #[error("the PMI barrier failed: {detail}")]
    /// The job-wide barrier failed (a rank left or finalized).
    BarrierFailed {
        /// The server's explanation.
        detail: String,
    },
    #[error("key `{key}` not found in the job's key-value space {detail}")]
    /// No rank put this key before the last fence.
    KeyNotFound {
        /// The key looked up.
        key: String,
        /// What the server or the backend added.
        detail: String,
    },
    #[error("key `{key}` has {len} bytes, the PMI server allows at most {max}")]
    /// A key is longer than the PMI server accepts.
    KeyTooLong {
        /// The key.
        key: String,
        /// Its length in bytes.
        len: usize,
        /// The longest key the server accepts.
        max: usize,
    },
    #[error("value for key `{key}` has {len} bytes, the PMI server allows at most {max} (use put_bytes for long data)")]
    /// A value is longer than the PMI server accepts.
    ValueTooLong {
        /// The key it was put under.
        key: String,
        /// Its length in bytes.
        len: usize,
        /// The longest value the server accepts.
        max: usize,
    },
    #[error("key `{key}` cannot be sent over PMI-1: {problem}")]
    /// A key contains characters PMI-1 lines cannot carry.
    InvalidKey {
        /// The key.
        key: String,
        /// Which characters.
        problem: String,
    },
    #[error("value for key `{key}` cannot be sent over PMI-1: {problem}")]
    /// A value contains characters PMI-1 lines cannot carry.
    InvalidValue {
        /// The key it was put under.
        key: String,
        /// Which characters.
        problem: String,
    },
    #[error("key `{key}` does not hold data written by put_bytes: {reason}")]
    /// A key read with `get_bytes` does not hold what `put_bytes` writes.
    CorruptBytes {
        /// The key.
        key: String,
        /// What is wrong with its value.
        reason: String,
    },
    #[error("the bootstrap was already finalized")]
    /// The bootstrap was used after `finalize`.
    Finalized,
    #[error("in-memory job: {0}")]
    /// The in-memory job failed (a rank thread ended, or its timeout passed).
    Memory(String),
    #[error("the out-of-band allgather failed: {0}")]
    /// The caller's out-of-band allgather failed or returned records of the wrong size.
    Oob(String),
    #[error("{seen}, but this process has no PMI it can use: {advice}")]
    /// A launcher started several ranks, but none of its PMI interfaces is usable here.
    NoPmi {
        /// What the environment shows of the launcher.
        seen: String,
        /// How to launch so that a PMI is available.
        advice: String,
    },
    #[error("PMIx {during} failed: {status}")]
    /// A libpmix call failed.
    Pmix {
        /// The call.
        during: String,
        /// PMIx's status name.
        status: String,
    },
}

/// How to bootstrap.
#[derive(Debug, Clone)]
pub struct BootstrapOptions {
    /// Deadline of every single wait for the PMI server.
    pub timeout: Duration,
    /// Without PMI variables, become rank 0 of 1 (true) or fail with `NotInJob` (false).
    pub allow_singleton: bool,
    /// Until finalize, end this process with SIGTERM if the PMI channel hangs up (the launcher
    /// died): a rank must not outlive its job.
    pub end_with_launcher: bool,
}

impl Default for BootstrapOptions {
    fn default() -> Self {
        BootstrapOptions {
            timeout: DEFAULT_TIMEOUT,
            allow_singleton: true,
            end_with_launcher: true,
        }
    }
}

impl BootstrapOptions {
    /// Defaults, with the timeout from `CIRCULANT_BOOTSTRAP_TIMEOUT` if set.
    pub fn from_env() -> Result<Self, BootstrapError> {
        let mut options = BootstrapOptions::default();
        if let Ok(text) = std::env::var(TIMEOUT_ENV) {
            options.timeout = parse_positive_seconds(&text).map_err(|e| BootstrapError::Env {
                var: TIMEOUT_ENV,
                value: text.clone(),
                reason: e.to_string(),
            })?;
        }
        Ok(options)
    }
}

enum Backend {
    Pmi1(Pmi1Client),
    Pmi2(Pmi2Client),
    Pmix(PmixClient),
    Singleton(HashMap<String, String>),
    Oob(OobKvs),
    Memory(memory::MemoryKvs),
}

/// This process's place in the job, and the job's key-value space.
///
/// Puts become visible to other ranks after the next [`Bootstrap::fence`] that every rank
/// calls. Under PMIx data belongs to the rank that put it: a key `name@rank...` (see
/// [`Bootstrap::rank_key`]) is read from that rank, any other key from rank 0. Keys and values are PMI-1 tokens (no spaces, no control characters, keys without
/// `=`) within [`Bootstrap::limits`]; binary or long data goes through
/// [`Bootstrap::put_bytes`] / [`Bootstrap::get_bytes`].
pub struct Bootstrap {
    backend: Backend,
    rank: usize,
    size: usize,
    timeout: Duration,
    finalized: bool,
}

impl std::fmt::Debug for Bootstrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bootstrap")
            .field("kind", &self.kind())
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

impl Bootstrap {
    /// Joins the job described by the environment (`PMI_FD` or `PMI_PORT`, `PMI_RANK`,
    /// `PMI_SIZE`), or becomes a singleton when none of them is set.
    pub fn from_env() -> Result<Self, BootstrapError> {
        Self::from_env_with(&BootstrapOptions::from_env()?)
    }

    /// Like [`Bootstrap::from_env`], with explicit options (timeouts).
    pub fn from_env_with(options: &BootstrapOptions) -> Result<Self, BootstrapError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let choice = PmiChoice::from_env()?;
        let fd = var("PMI_FD");
        let port = var("PMI_PORT");
        let id = var("PMI_ID");
        let server = match (fd, port) {
            (Some(fd), _) => Some(ServerAddress::Fd(parse_env("PMI_FD", &fd)?)),
            (None, Some(address)) => Some(ServerAddress::Port { address, id }),
            (None, None) => None,
        };
        let detected = launcher::detect();
        match (server, choice) {
            (Some(server), PmiChoice::Auto | PmiChoice::Pmi1 | PmiChoice::Pmi2) => {
                // PMI-2 is offered where it is known to keep PMI-1's guarantees: under Slurm.
                // Hydra accepts it too, but its PMI-2 fence does not wait for ranks that never
                // initialized and it has no abort; there PMI-2 is only used when asked for.
                let offer_pmi2 = choice == PmiChoice::Pmi2
                    || (choice == PmiChoice::Auto && var("SLURM_STEP_ID").is_some());
                Self::connect_as(
                    &server,
                    var("PMI_RANK"),
                    var("PMI_SIZE"),
                    options,
                    offer_pmi2,
                )
                .and_then(|boot| match (choice, boot.kind()) {
                    (PmiChoice::Pmi2, "pmi-1") => Err(BootstrapError::NoPmi {
                        seen: format!("{PMI_ENV} asks for pmi-2"),
                        advice: "the PMI server answered `init` with PMI-1 only (unset it)".into(),
                    }),
                    _ => Ok(boot),
                })
            }
            (_, PmiChoice::Auto | PmiChoice::Pmix) if detected.pmix.is_some() => {
                Self::pmix(options, &detected)
            }
            (None, PmiChoice::Pmi1 | PmiChoice::Pmi2) => Err(BootstrapError::NoPmi {
                seen: format!("{PMI_ENV} asks for {}", choice.name()),
                advice: "PMI_FD or PMI_PORT is not set (start under `srun --mpi=pmi2`, \
                         `mpiexec.hydra` or `circulant run`)"
                    .into(),
            }),
            (_, PmiChoice::Pmix) => Err(BootstrapError::NoPmi {
                seen: format!("{PMI_ENV} asks for pmix"),
                advice: "PMIX_NAMESPACE/PMIX_RANK are not set (start under `srun --mpi=pmix` \
                         or Open MPI's `mpirun`)"
                    .into(),
            }),
            (None, PmiChoice::Auto) => {
                if var("PMI_RANK").is_some() || var("PMI_SIZE").is_some() {
                    return Err(BootstrapError::Env {
                        var: "PMI_FD",
                        value: String::new(),
                        reason: "PMI_RANK/PMI_SIZE are set but neither PMI_FD nor PMI_PORT \
                                 says where the PMI server is"
                            .into(),
                    });
                }
                // A launch of several ranks without a PMI we speak would give p singletons.
                if let Some((seen, advice)) = detected.multi_rank_without_pmi() {
                    return Err(BootstrapError::NoPmi { seen, advice });
                }
                if options.allow_singleton {
                    let mut singleton = Self::singleton();
                    singleton.timeout = options.timeout;
                    return Ok(singleton);
                }
                Err(BootstrapError::NotInJob)
            }
        }
    }

    fn pmix(options: &BootstrapOptions, detected: &Detected) -> Result<Self, BootstrapError> {
        let client = PmixClient::init(options.timeout).map_err(|error| match error {
            pmix::PmixError::Load(reason) => BootstrapError::NoPmi {
                seen: detected.pmix.clone().unwrap_or_default(),
                advice: format!(
                    "the PMIx library cannot be loaded ({reason}); install it \
                     (Debian: apt-get install libpmix2), or start with `srun --mpi=pmi2`"
                ),
            },
            pmix::PmixError::Call(error) => error,
        })?;
        Ok(Bootstrap {
            rank: client.rank(),
            size: client.size(),
            backend: Backend::Pmix(client),
            timeout: options.timeout,
            finalized: false,
        })
    }

    /// Joins the PMI server at an explicit address, with rank and size as the environment would give.
    /// PMI-1 only, as the built-in launcher and Hydra serve it.
    pub fn connect(
        server: &ServerAddress,
        rank: Option<String>,
        size: Option<String>,
        options: &BootstrapOptions,
    ) -> Result<Self, BootstrapError> {
        Self::connect_as(server, rank, size, options, false)
    }

    /// Joins the server at `server` with PMI-2 if offered and the server accepts it, else PMI-1.
    fn connect_as(
        server: &ServerAddress,
        rank: Option<String>,
        size: Option<String>,
        options: &BootstrapOptions,
        offer_pmi2: bool,
    ) -> Result<Self, BootstrapError> {
        let mut client = match Pmi1Client::greet(server, options.timeout, offer_pmi2)? {
            Greeted::Pmi1(client) => client,
            Greeted::Pmi2 { channel, assigned } => {
                let rank = match (assigned.0, &rank) {
                    (Some(r), _) => Some(r),
                    (None, Some(text)) => Some(parse_env("PMI_RANK", text)?),
                    (None, None) => None,
                };
                let jobid = std::env::var("PMI_JOBID").ok().filter(|j| !j.is_empty());
                let mut client = Pmi2Client::fullinit(channel, rank, jobid)?;
                check_rank(client.rank(), client.size())?;
                if options.end_with_launcher {
                    client.watch_hangup()?;
                }
                if slurm_step_nodes().is_none() {
                    client.read_mapping()?;
                }
                return Ok(Bootstrap {
                    rank: client.rank(),
                    size: client.size(),
                    backend: Backend::Pmi2(client),
                    timeout: options.timeout,
                    finalized: false,
                });
            }
        };
        if options.end_with_launcher {
            client.watch_hangup()?;
        }
        let (told_rank, told_size) = client.assigned();
        let rank = match (told_rank, rank) {
            (Some(r), _) => r,
            (None, Some(text)) => parse_env("PMI_RANK", &text)?,
            (None, None) => return Err(missing("PMI_RANK")),
        };
        let size = match (told_size, size) {
            (Some(s), _) => s,
            (None, Some(text)) => parse_env("PMI_SIZE", &text)?,
            (None, None) => return Err(missing("PMI_SIZE")),
        };
        check_rank(rank, size)?;
        if slurm_step_nodes().is_none() {
            client.read_mapping()?;
        }
        Ok(Bootstrap {
            backend: Backend::Pmi1(client),
            rank,
            size,
            timeout: options.timeout,
            finalized: false,
        })
    }

    /// Rank 0 of a job of one process, with a private key-value space.
    pub fn singleton() -> Self {
        Bootstrap {
            backend: Backend::Singleton(HashMap::new()),
            rank: 0,
            size: 1,
            timeout: DEFAULT_TIMEOUT,
            finalized: false,
        }
    }

    /// Rank `rank` of a job of `size` processes whose key-value space travels over the
    /// caller's `allgather` (see [`Allgather`]). Every rank of the job must call it. The
    /// caller's function has to enforce its own deadlines.
    pub fn oob(rank: usize, size: usize, allgather: Allgather) -> Result<Self, BootstrapError> {
        if size == 0 || rank >= size {
            return Err(BootstrapError::Oob(format!(
                "rank {rank} is not below the job size {size}"
            )));
        }
        Ok(Bootstrap {
            backend: Backend::Oob(OobKvs::new(size, allgather)),
            rank,
            size,
            timeout: DEFAULT_TIMEOUT,
            finalized: false,
        })
    }

    /// One bootstrap per rank of a job of `size` ranks that are threads of this process,
    /// sharing a key-value space; every fence waits at most `timeout`. See [`memory::Job`].
    pub fn in_memory(size: usize, timeout: Duration) -> Result<Vec<Self>, BootstrapError> {
        Ok(memory::Job::new(size)?.timeout(timeout).bootstraps())
    }

    /// This process's rank in the job.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks in the job.
    pub fn size(&self) -> usize {
        self.size
    }

    /// `"pmi-1"`, `"pmi-2"`, `"pmix"`, `"singleton"`, `"oob"` or `"memory"`.
    pub fn kind(&self) -> &'static str {
        match self.backend {
            Backend::Pmi1(_) => "pmi-1",
            Backend::Pmi2(_) => "pmi-2",
            Backend::Pmix(_) => "pmix",
            Backend::Singleton(_) => "singleton",
            Backend::Oob(_) => "oob",
            Backend::Memory(_) => "memory",
        }
    }

    /// The application number (0 unless the launcher started several programs).
    pub fn appnum(&self) -> i64 {
        match &self.backend {
            Backend::Pmi1(client) => client.appnum(),
            Backend::Pmi2(client) => client.appnum(),
            Backend::Pmix(client) => client.appnum(),
            Backend::Singleton(_) | Backend::Oob(_) | Backend::Memory(_) => 0,
        }
    }

    /// Name of the job's key-value space.
    pub fn kvsname(&self) -> &str {
        match &self.backend {
            Backend::Pmi1(client) => client.kvsname(),
            Backend::Pmi2(client) => client.jobid(),
            Backend::Pmix(client) => client.namespace(),
            Backend::Singleton(_) => "singleton",
            Backend::Oob(_) => "oob",
            Backend::Memory(kvs) => kvs.kvsname(),
        }
    }

    /// How many nodes the job spans, where the launcher says so: PMIx's job data, a Slurm
    /// step's `SLURM_STEP_NUM_NODES`, the `PMI_process_mapping` of a PMI-1 or PMI-2 server
    /// (Hydra, `circulant run`); 1 for a singleton and for an in-memory job, whose ranks are
    /// threads of one process. None elsewhere (out-of-band jobs, servers without a mapping).
    pub fn nodes(&self) -> Option<usize> {
        match &self.backend {
            Backend::Pmix(client) => client.nodes(),
            Backend::Pmi1(client) => slurm_step_nodes().or(client.mapped_nodes()),
            Backend::Pmi2(client) => slurm_step_nodes().or(client.mapped_nodes()),
            Backend::Singleton(_) | Backend::Memory(_) => Some(1),
            Backend::Oob(_) => None,
        }
    }

    /// The server's maxima for keys and values.
    pub fn limits(&self) -> KvsLimits {
        match &self.backend {
            Backend::Pmi1(client) => client.limits(),
            Backend::Pmi2(client) => client.limits(),
            Backend::Pmix(client) => client.limits(),
            Backend::Singleton(_) => SINGLETON_LIMITS,
            Backend::Oob(_) => oob::OOB_LIMITS,
            Backend::Memory(_) => memory::MEMORY_LIMITS,
        }
    }

    /// The deadline of each wait.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sets the deadline of each later wait for the server (PMI-1 and PMI-2; the other
    /// backends keep theirs): a caller with a deadline of its own bounds its requests by it.
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<(), BootstrapError> {
        match &mut self.backend {
            Backend::Pmi1(client) => client.set_timeout(timeout)?,
            Backend::Pmi2(client) => client.set_timeout(timeout)?,
            Backend::Pmix(_) | Backend::Singleton(_) | Backend::Oob(_) | Backend::Memory(_) => {}
        }
        self.timeout = timeout;
        Ok(())
    }

    /// Whether a get after a fence is a read of data this node already holds: PMIx collects
    /// every rank's data at the fence, and under Slurm each node's step daemon receives the
    /// whole key-value space at the fence (PMI-2, and PMI-1 served by it); the other backends
    /// keep it locally too. False for PMI-1 and PMI-2 elsewhere (`circulant run`, Hydra),
    /// where every get is a request to the launcher's one server.
    pub fn gets_are_local(&self) -> bool {
        match &self.backend {
            Backend::Pmi1(_) | Backend::Pmi2(_) => slurm_step_nodes().is_some(),
            Backend::Pmix(_) | Backend::Singleton(_) | Backend::Oob(_) | Backend::Memory(_) => true,
        }
    }

    /// The key under which `rank` publishes `name`: one namespace per rank.
    pub fn rank_key(rank: usize, name: &str) -> String {
        format!("{name}@{rank}")
    }

    /// Stores `value` under `key` in the job's key-value space; other ranks see it after the next
    /// fence.
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        self.check_open()?;
        match &mut self.backend {
            Backend::Pmi1(client) => client.put(key, value),
            Backend::Pmi2(client) => client.put(key, value),
            Backend::Pmix(client) => client.put(key, value),
            Backend::Singleton(kvs) => {
                check_entry(key, value, SINGLETON_LIMITS)?;
                kvs.insert(key.to_owned(), value.to_owned());
                Ok(())
            }
            Backend::Oob(kvs) => kvs.put(key, value),
            Backend::Memory(kvs) => kvs.put(key, value),
        }
    }

    /// The value other ranks (or this one) stored under `key` before the last fence.
    pub fn get(&mut self, key: &str) -> Result<String, BootstrapError> {
        self.check_open()?;
        match &mut self.backend {
            Backend::Pmi1(client) => client.get(key),
            Backend::Pmi2(client) => client.get(key),
            Backend::Pmix(client) => client.get(key),
            Backend::Singleton(kvs) => {
                check_entry(key, "", SINGLETON_LIMITS)?;
                kvs.get(key)
                    .cloned()
                    .ok_or_else(|| BootstrapError::KeyNotFound {
                        key: key.to_owned(),
                        detail: "(singleton)".into(),
                    })
            }
            Backend::Oob(kvs) => kvs.get(key),
            Backend::Memory(kvs) => kvs.get(key),
        }
    }

    /// Makes every rank's earlier puts visible to all, and waits for all ranks (PMI-1 has one
    /// operation for both).
    pub fn fence(&mut self) -> Result<(), BootstrapError> {
        self.check_open()?;
        match &mut self.backend {
            Backend::Pmi1(client) => client.barrier(),
            Backend::Pmi2(client) => client.fence(),
            Backend::Pmix(client) => client.fence(),
            Backend::Singleton(_) => Ok(()),
            Backend::Oob(kvs) => kvs.fence(),
            Backend::Memory(kvs) => kvs.fence(),
        }
    }

    /// Waits for all ranks; the same operation as [`Bootstrap::fence`].
    pub fn barrier(&mut self) -> Result<(), BootstrapError> {
        self.fence()
    }

    /// Stores arbitrary bytes under `key`, hex-encoded and split over the keys `key.0`,
    /// `key.1`, … when longer than one value allows.
    pub fn put_bytes(&mut self, key: &str, bytes: &[u8]) -> Result<(), BootstrapError> {
        let limits = self.limits();
        let hex = to_hex(bytes);
        // One byte goes to the `h` marker.
        if hex.len() < limits.value_max {
            return self.put(key, &format!("h{hex}"));
        }
        // Whole bytes per piece: an even number of hex digits.
        let piece = (limits.value_max & !1).max(2);
        let chunks: Vec<&str> = hex
            .as_bytes()
            .chunks(piece)
            .map(|c| std::str::from_utf8(c).unwrap_or_default())
            .collect();
        // Check the longest piece key before writing anything.
        let last_key = format!("{key}.{}", chunks.len() - 1);
        if last_key.len() > limits.key_max {
            return Err(BootstrapError::KeyTooLong {
                len: last_key.len(),
                key: last_key,
                max: limits.key_max,
            });
        }
        for (i, chunk) in chunks.iter().enumerate() {
            self.put(&format!("{key}.{i}"), chunk)?;
        }
        self.put(key, &format!("c{}.{}", chunks.len(), bytes.len()))
    }

    /// Reads bytes stored by [`Bootstrap::put_bytes`].
    pub fn get_bytes(&mut self, key: &str) -> Result<Vec<u8>, BootstrapError> {
        let head = self.get(key)?;
        let corrupt = |reason: &str| BootstrapError::CorruptBytes {
            key: key.to_owned(),
            reason: reason.to_owned(),
        };
        if let Some(hex) = head.strip_prefix('h') {
            return from_hex(hex).ok_or_else(|| corrupt("not hex"));
        }
        let (count, len) = head
            .strip_prefix('c')
            .and_then(|rest| rest.split_once('.'))
            .and_then(|(c, l)| Some((c.parse::<usize>().ok()?, l.parse::<usize>().ok()?)))
            .ok_or_else(|| corrupt("neither `h<hex>` nor `c<pieces>.<length>`"))?;
        // The length is a peer's word: it is checked at the end, not trusted for allocation.
        let mut bytes = Vec::new();
        for i in 0..count {
            let piece = self.get(&format!("{key}.{i}"))?;
            bytes.extend(from_hex(&piece).ok_or_else(|| corrupt("a piece is not hex"))?);
        }
        if bytes.len() != len {
            return Err(corrupt(&format!(
                "pieces hold {} bytes, the header says {len}",
                bytes.len()
            )));
        }
        Ok(bytes)
    }

    /// Every rank's bytes for `name`: publishes `mine` under [`Bootstrap::rank_key`], fences,
    /// and reads every rank's (this rank's included, in rank order). The one-call exchange of
    /// fabric addresses and memory keys at start-up.
    pub fn exchange(&mut self, name: &str, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        self.put_bytes(&Self::rank_key(self.rank, name), mine)?;
        self.fence()?;
        (0..self.size)
            .map(|rank| self.get_bytes(&Self::rank_key(rank, name)))
            .collect()
    }

    /// Asks the launcher to end the whole job with exit code `code`; `message` goes to this
    /// process's standard error, as PMI-1 carries no text. The launcher then kills this process;
    /// callers should exit with `code` if this returns.
    pub fn abort(&mut self, code: i32, message: &str) -> Result<(), BootstrapError> {
        eprintln!("rank {} aborting the job: {message}", self.rank);
        match &mut self.backend {
            Backend::Pmi1(client) => client.abort(code),
            Backend::Pmi2(client) => client.abort(message),
            Backend::Pmix(client) => client.abort(code, message),
            Backend::Memory(kvs) => {
                kvs.abort(code, message);
                Ok(())
            }
            Backend::Singleton(_) | Backend::Oob(_) => Ok(()),
        }
    }

    /// Leaves the job cleanly. Later calls are no-ops; other operations fail afterwards.
    pub fn finalize(&mut self) -> Result<(), BootstrapError> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        match &mut self.backend {
            Backend::Pmi1(client) => client.finalize(),
            Backend::Pmi2(client) => client.finalize(),
            Backend::Pmix(client) => client.finalize(),
            Backend::Memory(kvs) => {
                kvs.finalize();
                Ok(())
            }
            Backend::Singleton(_) | Backend::Oob(_) => Ok(()),
        }
    }

    fn check_open(&self) -> Result<(), BootstrapError> {
        if self.finalized {
            Err(BootstrapError::Finalized)
        } else {
            Ok(())
        }
    }
}

/// Checks a key and value against PMI-1's token rules (the same under every PMI, so that code
/// behaves alike everywhere) and `limits`.
fn check_entry(key: &str, value: &str, limits: KvsLimits) -> Result<(), BootstrapError> {
    if let Err(problem) = wire::check_token(key, true) {
        return Err(BootstrapError::InvalidKey {
            key: key.to_owned(),
            problem: problem.to_string(),
        });
    }
    if let Err(problem) = wire::check_token(value, false) {
        return Err(BootstrapError::InvalidValue {
            key: key.to_owned(),
            problem: problem.to_string(),
        });
    }
    check_lengths(key, value, limits)
}

/// Key and value within `limits`.
fn check_lengths(key: &str, value: &str, limits: KvsLimits) -> Result<(), BootstrapError> {
    if key.len() > limits.key_max {
        return Err(BootstrapError::KeyTooLong {
            key: key.to_owned(),
            len: key.len(),
            max: limits.key_max,
        });
    }
    if value.len() > limits.value_max {
        return Err(BootstrapError::ValueTooLong {
            key: key.to_owned(),
            len: value.len(),
            max: limits.value_max,
        });
    }
    Ok(())
}

fn check_rank(rank: usize, size: usize) -> Result<(), BootstrapError> {
    if size == 0 || rank >= size {
        return Err(BootstrapError::Env {
            var: "PMI_RANK",
            value: rank.to_string(),
            reason: format!("rank must be below the job size {size}"),
        });
    }
    Ok(())
}

/// The node count of the Slurm step this process belongs to (`SLURM_STEP_NUM_NODES`, only
/// inside a step).
fn slurm_step_nodes() -> Option<usize> {
    let var = |name: &str| std::env::var(name).ok();
    var("SLURM_STEP_ID")?;
    var("SLURM_STEP_NUM_NODES")?
        .trim()
        .parse()
        .ok()
        .filter(|&n| n > 0)
}

fn missing(var: &'static str) -> BootstrapError {
    BootstrapError::Env {
        var,
        value: String::new(),
        reason: "not set, but the launcher's PMI channel is".into(),
    }
}

fn parse_env<T: std::str::FromStr>(var: &'static str, text: &str) -> Result<T, BootstrapError> {
    text.trim().parse().map_err(|_| BootstrapError::Env {
        var,
        value: text.to_owned(),
        reason: "not a non-negative integer".into(),
    })
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        text.push(DIGITS[usize::from(b >> 4)] as char);
        text.push(DIGITS[usize::from(b & 15)] as char);
    }
    text
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    text.as_bytes()
        .chunks(2)
        .map(|pair| {
            let digit = |c: u8| (c as char).to_digit(16);
            Some((digit(pair[0])? * 16 + digit(pair[1])?) as u8)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(from_hex(&to_hex(&bytes)), Some(bytes));
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex("zz"), None);
    }

    #[test]
    fn singleton_keeps_long_bytes() {
        let mut boot = Bootstrap::singleton();
        assert_eq!((boot.rank(), boot.size()), (0, 1));
        let long: Vec<u8> = (0..1500u32).map(|i| (i * 7) as u8).collect();
        boot.put_bytes("addr", &long).expect("put");
        boot.put_bytes("short", b"\x00\xff").expect("put");
        boot.fence().expect("fence");
        assert_eq!(boot.get_bytes("addr").expect("get"), long);
        assert_eq!(boot.get_bytes("short").expect("get"), b"\x00\xff");
        assert!(matches!(
            boot.get("missing"),
            Err(BootstrapError::KeyNotFound { .. })
        ));
        assert!(matches!(
            boot.put("k", &"x".repeat(1024)),
            Err(BootstrapError::ValueTooLong { .. })
        ));
        assert!(matches!(
            boot.put("a b", "1"),
            Err(BootstrapError::InvalidKey { .. })
        ));
        assert_eq!(
            boot.exchange("name", b"\x01\x02").expect("exchange"),
            vec![b"\x01\x02".to_vec()]
        );
        boot.finalize().expect("finalize");
        assert!(matches!(boot.put("k", "v"), Err(BootstrapError::Finalized)));
    }
}
