//! Configuration of a communicator, from the environment or set in code.
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `CIRCULANT_PROVIDER` (or `FI_PROVIDER`) | libfabric provider, e.g. `shm`, `tcp;ofi_rxm`, `verbs;ofi_rxm` | `shm` on one host, else the first RMA-capable provider |
//! | `CIRCULANT_NODE_MAP` | where the node of every rank comes from: `launcher` (the launcher's map where it gives one, else the host names the ranks exchange) or `hosts` (always the host names: for ranks a wrapper moved to other hosts, as `ci/cluster rank` does). The same on every rank | `launcher` |
//! | `CIRCULANT_NODE_PROVIDER` | the provider that reaches the ranks of this rank's node in a job on several nodes, beside the network provider (`off`: the network provider reaches every rank). The same on every rank | `shm` |
//! | `CIRCULANT_LOOPBACK` | `0`: do not pin network providers to 127.0.0.1 when all ranks share a host | `1` |
//! | `CIRCULANT_TIMEOUT` | deadline of one collective, seconds (at most 604800, 7 days) | 60 |
//! | `CIRCULANT_ALPHA`, `CIRCULANT_BETA`, `CIRCULANT_O` | α (s), β (s/byte) and the per-write overhead o (s) of the model that picks algorithms | per provider, see [`Config::model_for`] |
//! | `CIRCULANT_ALGORITHM` | comma-separated algorithm names forced wherever they apply | none |
//! | `CIRCULANT_CHECK` | `1`: every collective first checks that all ranks called it with the same arguments | `0` |
//! | `CIRCULANT_EAGER_LIMIT` | operations of at most this many bytes, and in larger ones the pairs of ranks whose writes carry at most this many, take the eager path (no ready token; data copied through receive slots); `0`: never (at most 1073741824) | from the model, see [`EagerConfig::new`] |
//! | `CIRCULANT_EAGER_SLOTS` | receive slots a rank keeps per peer that writes to it eagerly (2 to 32) | 16 |
//! | `CIRCULANT_EAGER_SLOT_BYTES` | bytes of one receive slot, header included (256 to 1048576) | 8192 |
//! | `CIRCULANT_EAGER_CARRIER` | how eager messages reach receive slots: `auto` (stores into shared memory over `shm`, RMA writes elsewhere) or `write` (RMA writes everywhere) | `auto` |
//! | `CIRCULANT_IOV_LIMIT` | most local and most remote segments of one merged write (at least 1; the provider's `iov_limit` and `rma_iov_limit` if smaller); `1` stands in for providers such as verbs (`rma_iov_limit` 1). The same on every rank | 2 over `tcp` providers ([`TCP_SEGMENTS`]), else the provider's limits |
//! | `CIRCULANT_MAX_WRITE_BYTES` | most bytes of one zero-copy write (at least 1; the provider's `max_msg_size` if smaller): longer pieces are cut, merged writes stop there. The same on every rank | the provider's `max_msg_size` |
//! | `CIRCULANT_SEGMENT_LIMIT` | on a communicator whose ranks share one node, bcast, allgather(v), gather(v) and scatter(v) run on the shared segment (one copy into shared memory, flags, one copy out; in chunks beyond its area) at every size, and reduce, allreduce and barrier in which no rank contributes more than this many bytes (and a reduction's p − 1 vectors that each rank folds total at most this many), instead of a plan; `0`: never (at most 65536). The same on every rank | [`DEFAULT_SEGMENT_LIMIT`] |
//! | `CIRCULANT_SINGLE_COPY` | `0`: a gather's or scatter's large parts on the shared segment go through it (a copy in, a copy out) even where the ranks could read them where they are (`process_vm_readv`) | `1` |
//! | `CIRCULANT_PLAN_CACHE` | plans of earlier calls kept per communicator (at most 65536; `0`: none) | 64 |
//! | `CIRCULANT_AUTH_KEY` | the job's authentication key (hex) for providers that support keys; `circulant run` sets a random one | none |

use std::time::Duration;

use crate::bootstrap::NodeSource;
use crate::fabric::AuthKey;
use crate::limits::parse_positive_seconds;
use crate::plan::merge::IovLimits;
use crate::plan::{CostModel, LevelCosts};
use crate::transport::{eager, Carrier, EagerConfig, DEFAULT_DEADLINE};

/// Entries kept unless `CIRCULANT_PLAN_CACHE` says otherwise.
pub const DEFAULT_PLAN_CACHE: usize = 64;

/// The libfabric provider to use (`shm`, `tcp;ofi_rxm`, `verbs;ofi_rxm`, ...).
pub const PROVIDER_ENV: &str = "CIRCULANT_PROVIDER";
/// Where the node map comes from: `launcher` or `hosts`.
pub const NODE_MAP_ENV: &str = "CIRCULANT_NODE_MAP";
/// The provider for the ranks of one node in a job on several nodes (`off`: none).
pub const NODE_PROVIDER_ENV: &str = "CIRCULANT_NODE_PROVIDER";
/// The provider that reaches the ranks of one node by default.
pub const DEFAULT_NODE_PROVIDER: &str = "shm";
/// `0` keeps network providers off 127.0.0.1 when all ranks share a host.
pub const LOOPBACK_ENV: &str = "CIRCULANT_LOOPBACK";
/// Deadline of one collective, in seconds.
pub const TIMEOUT_ENV: &str = "CIRCULANT_TIMEOUT";
/// α (s) of the model that chooses algorithms.
pub const ALPHA_ENV: &str = "CIRCULANT_ALPHA";
/// β (s/B) of the model that chooses algorithms.
pub const BETA_ENV: &str = "CIRCULANT_BETA";
/// Per-write overhead o (s) of the model that chooses algorithms.
pub const O_ENV: &str = "CIRCULANT_O";
/// α (s) between ranks of one node, where a job spans several nodes.
pub const ALPHA_INSIDE_ENV: &str = "CIRCULANT_ALPHA_INSIDE";
/// β (s/B) between ranks of one node, where a job spans several nodes.
pub const BETA_INSIDE_ENV: &str = "CIRCULANT_BETA_INSIDE";
/// Comma-separated algorithm names, forced wherever they apply.
pub const ALGORITHM_ENV: &str = "CIRCULANT_ALGORITHM";
/// `1` turns on the full argument check before every collective.
pub const CHECK_ENV: &str = "CIRCULANT_CHECK";
/// The job's authentication key (hex); `circulant run` sets a random one.
pub const AUTH_KEY_ENV: &str = "CIRCULANT_AUTH_KEY";
/// Operations of at most this many bytes take the eager path (`0`: none).
pub const EAGER_LIMIT_ENV: &str = "CIRCULANT_EAGER_LIMIT";
/// Receive slots a rank keeps per peer that writes to it eagerly.
pub const EAGER_SLOTS_ENV: &str = "CIRCULANT_EAGER_SLOTS";
/// Bytes of one eager receive slot, its header included.
pub const EAGER_SLOT_BYTES_ENV: &str = "CIRCULANT_EAGER_SLOT_BYTES";
/// How eager messages reach receive slots: `auto` or `write`.
pub const EAGER_CARRIER_ENV: &str = "CIRCULANT_EAGER_CARRIER";
/// Segments on each side of one merged write over `tcp` providers unless
/// `CIRCULANT_IOV_LIMIT` says otherwise: with 4 (the provider's limits) some uneven
/// allgathervs took up to 2.6× as long on rate-limited links as with 2, and 2 lost at most
/// 1.4× to the best of 1, 2 and 4 in the same runs (docs/performance.md, "Merged writes").
pub const TCP_SEGMENTS: usize = 2;

/// Most local and remote segments of one merged write (below the provider's limits).
pub const IOV_LIMIT_ENV: &str = "CIRCULANT_IOV_LIMIT";
/// Largest `CIRCULANT_IOV_LIMIT` accepted (providers allow a few segments).
pub const MAX_IOV_LIMIT: usize = 1024;
/// Most bytes of one zero-copy write (below the provider's `max_msg_size`).
pub const MAX_WRITE_BYTES_ENV: &str = "CIRCULANT_MAX_WRITE_BYTES";
/// Largest `CIRCULANT_MAX_WRITE_BYTES` accepted: 2^62.
pub const MAX_MAX_WRITE_BYTES: usize = 1 << 62;
/// How many plans of earlier calls a communicator keeps (`0`: none).
pub const PLAN_CACHE_ENV: &str = "CIRCULANT_PLAN_CACHE";

/// The most bytes a rank contributes to a call served on the shared segment.
pub const SEGMENT_LIMIT_ENV: &str = "CIRCULANT_SEGMENT_LIMIT";
/// [`SEGMENT_LIMIT_ENV`]'s default.
pub const DEFAULT_SEGMENT_LIMIT: usize = 8192;
/// The largest [`SEGMENT_LIMIT_ENV`].
pub const MAX_SEGMENT_LIMIT: usize = 65536;

/// `0`: large gathers and scatters on the shared segment copy through it, not out of the
/// writer's memory.
pub const SINGLE_COPY_ENV: &str = "CIRCULANT_SINGLE_COPY";

/// Most plans a communicator keeps (`CIRCULANT_PLAN_CACHE`).
pub const MAX_PLAN_CACHE: usize = 65536;

#[derive(Debug, thiserror::Error)]
#[error("{var}={value:?}: {reason}")]
/// A configuration variable with a value that cannot be used.
pub struct ConfigError {
    /// The variable.
    pub var: &'static str,
    /// Its value.
    pub value: String,
    /// What it must be.
    pub reason: &'static str,
}

#[derive(Clone, Debug, PartialEq)]
/// How a communicator is set up and chooses algorithms; [`Config::from_env`] reads it from the
/// `CIRCULANT_*` variables.
pub struct Config {
    /// The provider to use; `None`: `shm` on one host, else the first RMA-capable provider.
    pub provider: Option<String>,
    /// Pin network providers to 127.0.0.1 when all ranks share a host.
    pub loopback: bool,
    /// Where the node of every rank comes from (the same on every rank).
    pub node_map: NodeSource,
    /// The provider that reaches the ranks of this rank's node in a job on several nodes,
    /// beside the network provider; `None`: the network provider reaches every rank. The same
    /// on every rank.
    pub node_provider: Option<String>,
    /// How long an operation may take before it fails on every rank.
    pub deadline: Duration,
    /// α (s) of the cost model; `None`: the provider's rough value.
    pub alpha: Option<f64>,
    /// β (s/B) of the cost model; `None`: the provider's rough value.
    pub beta: Option<f64>,
    /// Per-write overhead o (s) of the cost model; `None`: the provider's rough value.
    pub o: Option<f64>,
    /// α (s) between ranks of one node of a job on several nodes; `None`: as across.
    pub alpha_inside: Option<f64>,
    /// β (s/B) between ranks of one node of a job on several nodes; `None`: as across.
    pub beta_inside: Option<f64>,
    /// Algorithm names forced wherever they apply.
    pub algorithms: Vec<String>,
    /// The full argument check before every collective (the same on every rank).
    pub check: bool,
    /// Set on the domain of providers that support authorization keys (see [`AuthKey`]).
    pub auth_key: Option<AuthKey>,
    /// The eager path's limit in bytes (`None`: from the model).
    pub eager_limit: Option<usize>,
    /// Receive slots per eager writer (`None`: the default).
    pub eager_slots: Option<usize>,
    /// Bytes of one receive slot (`None`: the default).
    pub eager_slot_bytes: Option<usize>,
    /// Eager messages always travel as RMA writes, also where every rank is on this host
    /// (`CIRCULANT_EAGER_CARRIER=write`).
    pub eager_writes_only: bool,
    /// Plans of earlier calls kept per communicator, least recently used dropped first
    /// (0: none).
    pub plan_cache: usize,
    /// Calls in which no rank contributes more than this many bytes run on the shared
    /// segment where every rank is on one node (0: never). The same on every rank.
    pub segment_limit: usize,
    /// Whether a gather's or scatter's large parts on the segment are read where they are,
    /// where every rank can read every peer's memory (any rank's `false` keeps every rank's
    /// off).
    pub single_copy: bool,
    /// Most local and most remote segments of one merged write, if lower than the provider's
    /// (`None`: the provider's). Must be the same on every rank.
    pub iov_limit: Option<usize>,
    /// Most bytes of one zero-copy write, if lower than the provider's `max_msg_size`
    /// (`None`: the provider's). Must be the same on every rank.
    pub max_write_bytes: Option<usize>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            provider: None,
            loopback: true,
            node_map: NodeSource::Launcher,
            node_provider: Some(DEFAULT_NODE_PROVIDER.to_string()),
            deadline: DEFAULT_DEADLINE,
            alpha: None,
            beta: None,
            o: None,
            alpha_inside: None,
            beta_inside: None,
            algorithms: Vec::new(),
            check: false,
            auth_key: None,
            eager_limit: None,
            eager_slots: None,
            eager_slot_bytes: None,
            eager_writes_only: false,
            plan_cache: DEFAULT_PLAN_CACHE,
            segment_limit: DEFAULT_SEGMENT_LIMIT,
            single_copy: true,
            iov_limit: None,
            max_write_bytes: None,
        }
    }
}

impl Config {
    /// The configuration in the `CIRCULANT_*` environment variables; an invalid value is an error,
    /// not ignored.
    pub fn from_env() -> Result<Config, ConfigError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        // libfabric reads FI_PROVIDER itself, and an empty value excludes every provider.
        if let Some(empty) = std::env::var("FI_PROVIDER")
            .ok()
            .filter(|v| v.trim().is_empty())
        {
            return Err(ConfigError {
                var: "FI_PROVIDER",
                value: empty,
                reason: "the value is empty, and libfabric then offers no provider at all; \
                         unset it or name a provider (`circulant info` lists them)",
            });
        }
        let mut config = Config {
            provider: var(PROVIDER_ENV).or_else(|| var("FI_PROVIDER")),
            ..Config::default()
        };
        if let Some(v) = var(LOOPBACK_ENV) {
            config.loopback = flag(LOOPBACK_ENV, &v)?;
        }
        if let Some(v) = var(NODE_MAP_ENV) {
            config.node_map = match v.trim() {
                "launcher" => NodeSource::Launcher,
                "hosts" => NodeSource::Hosts,
                _ => {
                    return Err(ConfigError {
                        var: NODE_MAP_ENV,
                        value: v,
                        reason: "expected launcher or hosts",
                    })
                }
            };
        }
        if let Some(v) = var(NODE_PROVIDER_ENV) {
            config.node_provider = match v.trim() {
                "off" => None,
                name => Some(name.to_string()),
            };
        }
        if let Some(v) = var(CHECK_ENV) {
            config.check = flag(CHECK_ENV, &v)?;
        }
        if let Some(v) = var(TIMEOUT_ENV) {
            config.deadline = parse_positive_seconds(&v).map_err(|e| ConfigError {
                var: TIMEOUT_ENV,
                value: v.clone(),
                reason: e.reason(),
            })?;
        }
        if let Some(v) = var(ALPHA_ENV) {
            config.alpha = Some(positive(ALPHA_ENV, &v)?);
        }
        if let Some(v) = var(BETA_ENV) {
            config.beta = Some(positive(BETA_ENV, &v)?);
        }
        if let Some(v) = var(O_ENV) {
            config.o = Some(positive(O_ENV, &v)?);
        }
        if let Some(v) = var(ALPHA_INSIDE_ENV) {
            config.alpha_inside = Some(positive(ALPHA_INSIDE_ENV, &v)?);
        }
        if let Some(v) = var(BETA_INSIDE_ENV) {
            config.beta_inside = Some(positive(BETA_INSIDE_ENV, &v)?);
        }
        if let Some(v) = var(ALGORITHM_ENV) {
            config.algorithms = v
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
        }
        if let Some(v) = var(EAGER_LIMIT_ENV) {
            config.eager_limit = Some(in_range(EAGER_LIMIT_ENV, &v, 0, eager::MAX_LIMIT)?);
        }
        if let Some(v) = var(EAGER_SLOTS_ENV) {
            let (min, max) = (eager::MIN_SLOTS, eager::MAX_SLOTS);
            config.eager_slots = Some(in_range(EAGER_SLOTS_ENV, &v, min, max)?);
        }
        if let Some(v) = var(EAGER_SLOT_BYTES_ENV) {
            let (min, max) = (eager::MIN_SLOT_BYTES, eager::MAX_SLOT_BYTES);
            config.eager_slot_bytes = Some(in_range(EAGER_SLOT_BYTES_ENV, &v, min, max)?);
        }
        config.eager_writes_only = Config::eager_writes_only_from_env()?;
        if let Some(v) = var(PLAN_CACHE_ENV) {
            config.plan_cache = count(PLAN_CACHE_ENV, &v, MAX_PLAN_CACHE)?;
        }
        if let Some(v) = var(SEGMENT_LIMIT_ENV) {
            config.segment_limit = count(SEGMENT_LIMIT_ENV, &v, MAX_SEGMENT_LIMIT)?;
        }
        if let Some(v) = var(SINGLE_COPY_ENV) {
            config.single_copy = flag(SINGLE_COPY_ENV, &v)?;
        }
        config.iov_limit = Config::iov_limit_from_env()?;
        config.max_write_bytes = Config::max_write_bytes_from_env()?;
        if let Some(v) = var(AUTH_KEY_ENV) {
            config.auth_key = Some(AuthKey::from_hex(&v).map_err(|_| ConfigError {
                var: AUTH_KEY_ENV,
                // The value is a secret: the error does not repeat it.
                value: format!("<{} characters>", v.len()),
                reason: "expected hexadecimal bytes (2 to 512 digits)",
            })?);
        }
        Ok(config)
    }

    /// The α-β-o model: the configured values, else rough figures for the provider's kind
    /// (shared memory: α = 1 µs, β = 0.1 ns/B, o = 0.1 µs; sockets-based: α = 20 µs,
    /// β = 0.4 ns/B, o = 2 µs; RDMA hardware: α = 2 µs, β = 0.1 ns/B, o = 0.3 µs). o, the cost of
    /// each further write of a message, is the software share of a small write's one-way time
    /// (posting at the sender, completion at the receiver): about 40 % of a shared-memory write
    /// (0.26 µs one-way measured), a quarter of a tcp;ofi_rxm one (8.4 µs, mostly the kernel's
    /// TCP path), a doorbell and a completion poll on RDMA hardware. They only rank algorithms
    /// against each other; set measured values (`circulant bench` reports α and β) for a given
    /// machine.
    pub fn model_for(&self, provider: &str) -> CostModel {
        let (alpha, beta, o) = match provider {
            "shm" => (1e-6, 1e-10, 1e-7),
            p if p.starts_with("tcp")
                || p.starts_with("sockets")
                || p.starts_with("udp")
                || p.starts_with("net") =>
            {
                (2e-5, 4e-10, 2e-6)
            }
            _ => (2e-6, 1e-10, 3e-7),
        };
        CostModel {
            alpha: self.alpha.unwrap_or(alpha),
            beta: self.beta.unwrap_or(beta),
            o: self.o.unwrap_or(o),
        }
    }

    /// The model of each level for a job whose model (across nodes, or the only one on one
    /// node) is `model`: inside a node as across, unless `alpha_inside` or `beta_inside`
    /// (`CIRCULANT_ALPHA_INSIDE`, `CIRCULANT_BETA_INSIDE`) say otherwise. A communicator on
    /// several nodes that reaches the ranks of a node through a node provider sets those it
    /// was not given to that provider's rough model.
    pub fn levels(&self, model: CostModel) -> LevelCosts {
        LevelCosts {
            inside: CostModel {
                alpha: self.alpha_inside.unwrap_or(model.alpha),
                beta: self.beta_inside.unwrap_or(model.beta),
                o: model.o,
            },
            across: model,
        }
    }

    /// `CIRCULANT_IOV_LIMIT` alone, if set: a whole number from 1 to [`MAX_IOV_LIMIT`].
    pub fn iov_limit_from_env() -> Result<Option<usize>, ConfigError> {
        match std::env::var(IOV_LIMIT_ENV)
            .ok()
            .filter(|v| !v.trim().is_empty())
        {
            Some(v) => Ok(Some(in_range(IOV_LIMIT_ENV, &v, 1, MAX_IOV_LIMIT)?)),
            None => Ok(None),
        }
    }

    /// `CIRCULANT_MAX_WRITE_BYTES` alone, if set: a whole number from 1 to
    /// [`MAX_MAX_WRITE_BYTES`].
    pub fn max_write_bytes_from_env() -> Result<Option<usize>, ConfigError> {
        match std::env::var(MAX_WRITE_BYTES_ENV)
            .ok()
            .filter(|v| !v.trim().is_empty())
        {
            Some(v) => Ok(Some(in_range(
                MAX_WRITE_BYTES_ENV,
                &v,
                1,
                MAX_MAX_WRITE_BYTES,
            )?)),
            None => Ok(None),
        }
    }

    /// A configuration with only the limits of one merged write and the eager carrier read
    /// from the environment (`CIRCULANT_IOV_LIMIT`, `CIRCULANT_MAX_WRITE_BYTES`,
    /// `CIRCULANT_EAGER_CARRIER`; everything else the defaults), for tools that report them
    /// per provider without a communicator ([`Self::iov_cap_for`]).
    pub fn write_limits_from_env() -> Result<Config, ConfigError> {
        Ok(Config {
            iov_limit: Config::iov_limit_from_env()?,
            max_write_bytes: Config::max_write_bytes_from_env()?,
            eager_writes_only: Config::eager_writes_only_from_env()?,
            ..Config::default()
        })
    }

    /// `CIRCULANT_EAGER_CARRIER`: whether eager messages always travel as RMA writes.
    fn eager_writes_only_from_env() -> Result<bool, ConfigError> {
        match std::env::var(EAGER_CARRIER_ENV)
            .ok()
            .filter(|v| !v.trim().is_empty())
        {
            None => Ok(false),
            Some(v) => match v.trim() {
                "auto" => Ok(false),
                "write" => Ok(true),
                _ => Err(ConfigError {
                    var: EAGER_CARRIER_ENV,
                    value: v,
                    reason: "expected auto or write",
                }),
            },
        }
    }

    /// The cap that the variables alone set on the limits of one merged write
    /// (`CIRCULANT_IOV_LIMIT` for both sides, `CIRCULANT_MAX_WRITE_BYTES`), if either is set;
    /// a provider may have a default cap besides ([`Self::iov_cap_for`]).
    pub fn iov_cap(&self) -> Option<IovLimits> {
        self.iov_cap_for("")
    }

    /// The cap on the limits of one merged write over `provider`: `CIRCULANT_IOV_LIMIT` for
    /// both sides where it is set, else [`TCP_SEGMENTS`] over `tcp` providers (none
    /// elsewhere), and `CIRCULANT_MAX_WRITE_BYTES`. The provider's own limits still bound it.
    pub fn iov_cap_for(&self, provider: &str) -> Option<IovLimits> {
        let segments = self
            .iov_limit
            .or_else(|| provider.starts_with("tcp").then_some(TCP_SEGMENTS));
        if segments.is_none() && self.max_write_bytes.is_none() {
            return None;
        }
        let n = segments.unwrap_or(usize::MAX);
        Some(IovLimits {
            iov: n,
            rma_iov: n,
            max_bytes: self.max_write_bytes.unwrap_or(usize::MAX),
        })
    }

    /// The limits of one merged write a job over the provider `info` describes would use:
    /// the provider's own ([`Self::iov_cap_for`] lowers them).
    pub fn write_limits(&self, info: &crate::fabric::Info) -> IovLimits {
        let limits = crate::transport::provider_iov_limits(info);
        match self.iov_cap_for(&info.provider()) {
            Some(cap) => limits.min(cap),
            None => limits,
        }
    }

    /// How eager messages would reach their receive slots over `provider`.
    pub fn eager_carrier_for(&self, provider: &str) -> Carrier {
        crate::transport::eager::carrier_for(provider, !self.eager_writes_only)
    }

    /// The eager path's settings for `model`: what was set, the rest from the model.
    pub fn eager_for(&self, model: &CostModel) -> EagerConfig {
        EagerConfig {
            memory: !self.eager_writes_only,
            ..EagerConfig::new(
                model.alpha,
                self.eager_limit,
                self.eager_slots,
                self.eager_slot_bytes,
            )
        }
    }
}

/// A whole number in `min..=max`.
fn in_range(var: &'static str, value: &str, min: usize, max: usize) -> Result<usize, ConfigError> {
    match value.trim().parse::<usize>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(ConfigError {
            var,
            value: value.to_string(),
            reason: match (var, min) {
                (EAGER_LIMIT_ENV, _) => "expected a number of bytes from 0 to 1073741824",
                (EAGER_SLOTS_ENV, _) => "expected a number of slots from 2 to 32",
                (IOV_LIMIT_ENV, _) => "expected a number of segments from 1 to 1024",
                (MAX_WRITE_BYTES_ENV, _) => {
                    "expected a number of bytes from 1 to 4611686018427387904"
                }
                _ => "expected a number of bytes from 256 to 1048576",
            },
        }),
    }
}

fn flag(var: &'static str, value: &str) -> Result<bool, ConfigError> {
    match value.trim() {
        "0" | "false" | "no" => Ok(false),
        "1" | "true" | "yes" => Ok(true),
        _ => Err(ConfigError {
            var,
            value: value.to_string(),
            reason: "expected 0 or 1",
        }),
    }
}

/// A whole number from 0 to `max`.
fn count(var: &'static str, value: &str, max: usize) -> Result<usize, ConfigError> {
    match value.trim().parse::<usize>() {
        Ok(n) if n <= max => Ok(n),
        Ok(_) => Err(ConfigError {
            var,
            value: value.to_string(),
            reason: "too large (at most 65536)",
        }),
        Err(_) => Err(ConfigError {
            var,
            value: value.to_string(),
            reason: "expected a whole number from 0 to 65536",
        }),
    }
}

fn positive(var: &'static str, value: &str) -> Result<f64, ConfigError> {
    match value.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(ConfigError {
            var,
            value: value.to_string(),
            reason: "expected a positive number",
        }),
    }
}
