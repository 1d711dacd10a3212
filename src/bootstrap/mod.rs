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
//!
//! Each of these homes of the key-value space is one implementation of `KeyValue`:
//! [`Bootstrap`] holds one and adds what they share (rank and size, the finalized state, bytes
//! over values, the exchange), so that a new backend is one more implementation.

mod channel;
mod error;
mod hangup;
mod launcher;
pub mod mapping;
pub mod memory;
mod node_map;
mod oob;
mod pmi1;
pub mod pmi2;
mod pmix;
mod singleton;
pub mod wire;

use std::time::Duration;

use crate::limits::parse_positive_seconds;

pub use error::BootstrapError;
pub use node_map::{NodeMap, NodeSource};
pub use oob::Allgather;
use oob::OobKvs;
use pmi1::{Greeted, Pmi1Client};
use pmi2::Pmi2Client;
use pmix::PmixClient;
use singleton::Singleton;

pub use channel::ServerAddress;
pub use launcher::{Detected, PmiChoice, PMI_ENV};

/// The longest key-value-space name, key and value the server keeps intact, in bytes.
///
/// PMI-1's `get_maxes` announces buffer sizes that include a C string's terminating NUL:
/// Hydra announces `vallen_max=1024` and silently cuts longer values to 1023 bytes. These
/// fields are therefore one less than the announced figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvsLimits {
    /// The longest kvsname in bytes.
    pub kvsname_max: usize,
    /// The longest key in bytes.
    pub key_max: usize,
    /// The longest value in bytes.
    pub value_max: usize,
}

/// Deadline of every PMI wait when neither the caller nor the environment sets one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Environment variable overriding [`DEFAULT_TIMEOUT`], in seconds (fractions allowed).
pub const TIMEOUT_ENV: &str = "CIRCULANT_BOOTSTRAP_TIMEOUT";

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

/// One home of the job's key-value space: a PMI flavour (PMI-1, PMI-2, PMIx), the
/// out-of-band allgather, the in-memory job or the singleton's private map. [`Bootstrap`]
/// checks that it was not finalized before every put, get and fence.
pub(crate) trait KeyValue: Send + Sync {
    /// The name [`Bootstrap::kind`] reports: `"pmi-1"`, `"pmix"`, `"memory"`, ...
    fn kind(&self) -> &'static str;

    /// Name of the key-value space.
    fn kvsname(&self) -> &str;

    /// The application number (0 unless the launcher started several programs).
    fn appnum(&self) -> i64 {
        0
    }

    /// How many nodes the job spans, where the launcher says so (see [`Bootstrap::nodes`]).
    fn nodes(&self) -> Option<usize>;

    /// The node of each of the `size` ranks, under whatever labels the launcher uses, where
    /// it tells them (see [`Bootstrap::launcher_node_map`]).
    fn node_ids(&self, _size: usize) -> Option<Vec<usize>> {
        None
    }

    /// This rank's host name where the backend gives one instead of the kernel's (an
    /// in-memory job's ranks told apart).
    fn host(&self) -> Option<String> {
        None
    }

    /// The longest kvsname, key and value this backend carries.
    fn limits(&self) -> KvsLimits;

    /// Sets the deadline of each later wait; backends that keep theirs ignore it.
    fn set_timeout(&mut self, _timeout: Duration) -> Result<(), BootstrapError> {
        Ok(())
    }

    /// Whether a get after a fence reads data this node already holds (see
    /// [`Bootstrap::gets_are_local`]).
    fn gets_are_local(&self) -> bool {
        true
    }

    /// Stores `value` under `key`; other ranks see it after the next fence.
    fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError>;

    /// The value stored under `key` before the last fence.
    fn get(&mut self, key: &str) -> Result<String, BootstrapError>;

    /// Commits this rank's puts and waits until every rank's are visible to all.
    fn fence(&mut self) -> Result<(), BootstrapError>;

    /// Ends the whole job with `code`; `message` travels where the backend can carry it.
    fn abort(&mut self, code: i32, message: &str) -> Result<(), BootstrapError>;

    /// Leaves the job cleanly; called at most once.
    fn finalize(&mut self) -> Result<(), BootstrapError>;
}

/// This process's place in the job, and the job's key-value space.
///
/// Puts become visible to other ranks after the next [`Bootstrap::fence`] that every rank
/// calls. Under PMIx data belongs to the rank that put it: a key `name@rank...` (see
/// [`Bootstrap::rank_key`]) is read from that rank, any other key from rank 0. Keys and values are PMI-1 tokens (no spaces, no control characters, keys without
/// `=`) within [`Bootstrap::limits`]; binary or long data goes through
/// [`Bootstrap::put_bytes`] / [`Bootstrap::get_bytes`].
pub struct Bootstrap {
    backend: Box<dyn KeyValue>,
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

    /// Joins through PMIx; a libpmix that cannot be loaded is `NoPmi`, naming `detected`.
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
        let (rank, size) = (client.rank(), client.size());
        Ok(Self::over(Box::new(client), rank, size, options.timeout))
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
                // Slurm's PMI-2 answers the mapping from its own job data: read it where the
                // step spans several nodes, for the node of every rank.
                if slurm_step_nodes() != Some(1) {
                    client.read_mapping()?;
                }
                let (rank, size) = (client.rank(), client.size());
                return Ok(Self::over(Box::new(client), rank, size, options.timeout));
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
        Ok(Self::over(Box::new(client), rank, size, options.timeout))
    }

    /// Rank 0 of a job of one process, with a private key-value space.
    pub fn singleton() -> Self {
        Self::over(Box::new(Singleton::default()), 0, 1, DEFAULT_TIMEOUT)
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
        let kvs = OobKvs::new(size, allgather);
        Ok(Self::over(Box::new(kvs), rank, size, DEFAULT_TIMEOUT))
    }

    /// [`Bootstrap::oob`] where the caller also knows the node of every rank: `nodes[r]` is
    /// rank r's node under any labels (equal labels, one node; e.g. from MPI's
    /// `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`), the same on every rank. The node map
    /// then needs no host exchange.
    pub fn oob_on_nodes(
        rank: usize,
        size: usize,
        nodes: Vec<usize>,
        allgather: Allgather,
    ) -> Result<Self, BootstrapError> {
        if nodes.len() != size {
            return Err(BootstrapError::Oob(format!(
                "{} node labels for a job of {size} ranks",
                nodes.len()
            )));
        }
        if rank >= size {
            return Err(BootstrapError::Oob(format!(
                "rank {rank} is not below the job size {size}"
            )));
        }
        let kvs = OobKvs::new(size, allgather).on_nodes(nodes);
        Ok(Self::over(Box::new(kvs), rank, size, DEFAULT_TIMEOUT))
    }

    /// One bootstrap per rank of a job of `size` ranks that are threads of this process,
    /// sharing a key-value space; every fence waits at most `timeout`. See [`memory::Job`].
    pub fn in_memory(size: usize, timeout: Duration) -> Result<Vec<Self>, BootstrapError> {
        Ok(memory::Job::new(size)?.timeout(timeout).bootstraps())
    }

    /// Rank `rank` of `size` over `backend`, whose waits take at most `timeout` each.
    pub(crate) fn over(
        backend: Box<dyn KeyValue>,
        rank: usize,
        size: usize,
        timeout: Duration,
    ) -> Self {
        Bootstrap {
            backend,
            rank,
            size,
            timeout,
            finalized: false,
        }
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
        self.backend.kind()
    }

    /// The application number (0 unless the launcher started several programs).
    pub fn appnum(&self) -> i64 {
        self.backend.appnum()
    }

    /// Name of the job's key-value space.
    pub fn kvsname(&self) -> &str {
        self.backend.kvsname()
    }

    /// How many nodes the job spans, where the launcher says so: PMIx's job data, a Slurm
    /// step's `SLURM_STEP_NUM_NODES`, the `PMI_process_mapping` of a PMI-1 or PMI-2 server
    /// (Hydra, `circulant run`); 1 for a singleton and for an in-memory job without host
    /// names, whose ranks are threads of one process. None elsewhere (out-of-band jobs,
    /// servers without a mapping). [`Bootstrap::node_map`] gives the node of every rank.
    pub fn nodes(&self) -> Option<usize> {
        self.backend.nodes()
    }

    /// The server's maxima for keys and values.
    pub fn limits(&self) -> KvsLimits {
        self.backend.limits()
    }

    /// The deadline of each wait.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sets the deadline of each later wait for the server (PMI-1 and PMI-2; the other
    /// backends keep theirs): a caller with a deadline of its own bounds its requests by it.
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<(), BootstrapError> {
        self.backend.set_timeout(timeout)?;
        self.timeout = timeout;
        Ok(())
    }

    /// Whether a get after a fence is a read of data this node already holds: PMIx collects
    /// every rank's data at the fence, and under Slurm each node's step daemon receives the
    /// whole key-value space at the fence (PMI-2, and PMI-1 served by it); the other backends
    /// keep it locally too. False for PMI-1 and PMI-2 elsewhere (`circulant run`, Hydra),
    /// where every get is a request to the launcher's one server.
    pub fn gets_are_local(&self) -> bool {
        self.backend.gets_are_local()
    }

    /// The key under which `rank` publishes `name`: one namespace per rank.
    pub fn rank_key(rank: usize, name: &str) -> String {
        format!("{name}@{rank}")
    }

    /// Stores `value` under `key` in the job's key-value space; other ranks see it after the next
    /// fence.
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        self.check_open()?;
        self.backend.put(key, value)
    }

    /// The value other ranks (or this one) stored under `key` before the last fence.
    pub fn get(&mut self, key: &str) -> Result<String, BootstrapError> {
        self.check_open()?;
        self.backend.get(key)
    }

    /// Makes every rank's earlier puts visible to all, and waits for all ranks (PMI-1 has one
    /// operation for both).
    pub fn fence(&mut self) -> Result<(), BootstrapError> {
        self.check_open()?;
        self.backend.fence()
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
        self.backend.abort(code, message)
    }

    /// Leaves the job cleanly. Later calls are no-ops; other operations fail afterwards.
    pub fn finalize(&mut self) -> Result<(), BootstrapError> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        self.backend.finalize()
    }

    /// Fails once the bootstrap was finalized.
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

/// Fails unless `rank` is a rank of a job of `size`.
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

/// The error for a variable the launcher should have set along with its PMI channel.
fn missing(var: &'static str) -> BootstrapError {
    BootstrapError::Env {
        var,
        value: String::new(),
        reason: "not set, but the launcher's PMI channel is".into(),
    }
}

/// The number in environment variable `var`, whose value is `text`.
fn parse_env<T: std::str::FromStr>(var: &'static str, text: &str) -> Result<T, BootstrapError> {
    text.trim().parse().map_err(|_| BootstrapError::Env {
        var,
        value: text.to_owned(),
        reason: "not a non-negative integer".into(),
    })
}

/// Lower-case hex digits of `bytes`.
fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        text.push(DIGITS[usize::from(b >> 4)] as char);
        text.push(DIGITS[usize::from(b & 15)] as char);
    }
    text
}

/// The bytes of even-length hex `text`; None if it is not that.
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
