//! The job's key-value space through PMIx (`srun --mpi=pmix`, Open MPI's `mpirun`), with the
//! system's libpmix loaded at run time by `circulant_sys::pmix`.
//!
//! PMIx data belongs to the process that put it: a get names that process. A key of the form
//! `name@rank...` (as [`super::Bootstrap::rank_key`] builds, pieces `name@rank.i` included) is
//! read from that rank, any other key from rank 0. A fence collects every process's data into
//! every node's store, so that the gets after it are answered locally.

use std::time::Duration;

use circulant_sys::pmix::{
    Me, Pmix, Status, KEY_APPNUM, KEY_JOB_SIZE, KEY_NODEID, KEY_NUM_NODES, RANK_WILDCARD,
};

use super::{check_entry, BootstrapError, KeyValue, KvsLimits};

/// PMIx has no value limit of its own; this bound keeps a put within one message.
const LIMITS: KvsLimits = KvsLimits {
    kvsname_max: circulant_sys::pmix::MAX_NSLEN,
    key_max: circulant_sys::pmix::MAX_KEYLEN,
    value_max: 64 * 1024 - 1,
};

/// Why PMIx could not start.
pub(super) enum PmixError {
    /// The library is missing or unusable.
    Load(String),
    /// A PMIx call failed.
    Call(BootstrapError),
}

/// An initialized PMIx client.
pub struct PmixClient {
    api: &'static Pmix,
    me: Me,
    size: usize,
    appnum: i64,
    nodes: Option<usize>,
    /// PMIx takes whole seconds.
    timeout_seconds: u32,
}

impl PmixClient {
    /// `PMIx_Init`, then the job's size and this process's application number.
    pub(super) fn init(timeout: Duration) -> Result<Self, PmixError> {
        let api = Pmix::load().map_err(PmixError::Load)?;
        let call = |during: &str| {
            let during = during.to_owned();
            move |status: Status| PmixError::Call(failed(api, &during, status))
        };
        let me = api.init().map_err(call(
            "PMIx_Init (PMIX_* variables are set, but the launcher's PMIx server does not answer)",
        ))?;
        let timeout_seconds = u32::try_from(timeout.as_secs().max(1)).unwrap_or(u32::MAX);
        let size = api
            .get_number(&me.namespace, RANK_WILDCARD, KEY_JOB_SIZE, timeout_seconds)
            .map_err(call("getting the job size"))?;
        let appnum = api
            .get_number(&me.namespace, me.rank, KEY_APPNUM, timeout_seconds)
            .unwrap_or(0);
        let nodes = api
            .get_number(&me.namespace, RANK_WILDCARD, KEY_NUM_NODES, timeout_seconds)
            .ok()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n > 0);
        Ok(PmixClient {
            api,
            nodes,
            size: usize::try_from(size).unwrap_or(usize::MAX),
            appnum: i64::try_from(appnum).unwrap_or(0),
            me,
            timeout_seconds,
        })
    }

    /// This process's rank in its namespace.
    pub(super) fn rank(&self) -> usize {
        self.me.rank as usize
    }

    /// The job size (`PMIX_JOB_SIZE`).
    pub(super) fn size(&self) -> usize {
        self.size
    }
}

impl KeyValue for PmixClient {
    fn kind(&self) -> &'static str {
        "pmix"
    }

    /// This process's namespace.
    fn kvsname(&self) -> &str {
        &self.me.namespace
    }

    /// `PMIX_APPNUM`, 0 where the server has none.
    fn appnum(&self) -> i64 {
        self.appnum
    }

    /// The number of nodes the job spans (`PMIX_NUM_NODES`), as the launcher tells it.
    fn nodes(&self) -> Option<usize> {
        self.nodes
    }

    /// Every rank's `PMIX_NODEID`, which the launcher hands each process with the job's data
    /// (Open MPI's and Slurm's servers do); None if any is missing. Asked only where the job
    /// spans several nodes: one node needs no ids.
    fn node_ids(&self, size: usize) -> Option<Vec<usize>> {
        if self.nodes == Some(1) {
            return None;
        }
        (0..size)
            .map(|rank| {
                let rank = u32::try_from(rank).ok()?;
                let id = self
                    .api
                    .get_local_number(&self.me.namespace, rank, KEY_NODEID, self.timeout_seconds)
                    .ok()?;
                usize::try_from(id).ok()
            })
            .collect()
    }

    /// PMIx's key and namespace maxima, and a bound on values.
    fn limits(&self) -> KvsLimits {
        LIMITS
    }

    /// `PMIx_Put`; published by the next fence's commit.
    fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        check_entry(key, value, LIMITS)?;
        self.api
            .put(key, value.as_bytes())
            .map_err(|status| failed(self.api, &format!("put of `{key}`"), status))
    }

    /// `PMIx_Get` from the rank that owns `key` (see the module documentation).
    fn get(&mut self, key: &str) -> Result<String, BootstrapError> {
        check_entry(key, "", LIMITS)?;
        let owner = owner_of(key).filter(|&rank| rank < self.size).unwrap_or(0);
        let bytes = self
            .api
            .get_bytes(&self.me.namespace, owner as u32, key, self.timeout_seconds)
            .map_err(|status| {
                if status.0 == circulant_sys::pmix::ERR_NOT_FOUND {
                    BootstrapError::KeyNotFound {
                        key: key.to_owned(),
                        detail: format!("(PMIx, put by rank {owner})"),
                    }
                } else {
                    failed(
                        self.api,
                        &format!("get of `{key}` from rank {owner}"),
                        status,
                    )
                }
            })?;
        String::from_utf8(bytes).map_err(|_| BootstrapError::InvalidValue {
            key: key.to_owned(),
            problem: "the value is not UTF-8".into(),
        })
    }

    /// Commit, then a fence over the job that collects every process's data.
    fn fence(&mut self) -> Result<(), BootstrapError> {
        self.api
            .commit()
            .map_err(|status| failed(self.api, "PMIx_Commit", status))?;
        self.api
            .fence(true, self.timeout_seconds)
            .map_err(|status| BootstrapError::BarrierFailed {
                detail: format!(
                    "PMIx_Fence (collecting data, timeout {} s): {}",
                    self.timeout_seconds,
                    self.api.describe(status)
                ),
            })
    }

    /// `PMIx_Abort` of the whole job with `code` and `message`.
    fn abort(&mut self, code: i32, message: &str) -> Result<(), BootstrapError> {
        self.api
            .abort(code, message)
            .map_err(|status| failed(self.api, "PMIx_Abort", status))
    }

    /// `PMIx_Finalize`.
    fn finalize(&mut self) -> Result<(), BootstrapError> {
        self.api
            .finalize()
            .map_err(|status| failed(self.api, "PMIx_Finalize", status))
    }
}

/// A PMIx call's failure as an error.
fn failed(api: &Pmix, during: &str, status: Status) -> BootstrapError {
    BootstrapError::Pmix {
        during: during.to_owned(),
        status: api.describe(status),
    }
}

/// The rank in `name@rank` or `name@rank.piece`.
fn owner_of(key: &str) -> Option<usize> {
    let (_, after) = key.rsplit_once('@')?;
    let digits: &str = after.split('.').next()?;
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_come_from_rank_keys_and_their_pieces() {
        assert_eq!(owner_of("card@12"), Some(12));
        assert_eq!(owner_of("card@12.3"), Some(12));
        assert_eq!(owner_of("a@b@7"), Some(7));
        assert_eq!(owner_of("no-such-key"), None);
        assert_eq!(owner_of("x@"), None);
        assert_eq!(owner_of("x@1x"), None);
    }
}
