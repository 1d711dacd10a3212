//! The key-value space of a singleton: rank 0 of a job of one process, started without any
//! launcher, as MPI's singleton init. Its puts are its own gets; fences have no one to wait for.

use std::collections::HashMap;

use super::{check_entry, BootstrapError, KeyValue, KvsLimits};

/// Limits of the singleton key-value space: the same as Hydra's, so that code tested alone
/// behaves as it will in a job.
const LIMITS: KvsLimits = KvsLimits {
    kvsname_max: 255,
    key_max: 63,
    value_max: 1023,
};

/// The private key-value space of a singleton.
#[derive(Default)]
pub(super) struct Singleton {
    kvs: HashMap<String, String>,
}

impl KeyValue for Singleton {
    fn kind(&self) -> &'static str {
        "singleton"
    }

    fn kvsname(&self) -> &str {
        "singleton"
    }

    /// One process is one node.
    fn nodes(&self) -> Option<usize> {
        Some(1)
    }

    fn limits(&self) -> KvsLimits {
        LIMITS
    }

    fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        check_entry(key, value, LIMITS)?;
        self.kvs.insert(key.to_owned(), value.to_owned());
        Ok(())
    }

    fn get(&mut self, key: &str) -> Result<String, BootstrapError> {
        check_entry(key, "", LIMITS)?;
        self.kvs
            .get(key)
            .cloned()
            .ok_or_else(|| BootstrapError::KeyNotFound {
                key: key.to_owned(),
                detail: "(singleton)".into(),
            })
    }

    /// Nothing to publish and no one to wait for.
    fn fence(&mut self) -> Result<(), BootstrapError> {
        Ok(())
    }

    /// No launcher to tell: the caller exits with the code.
    fn abort(&mut self, _code: i32, _message: &str) -> Result<(), BootstrapError> {
        Ok(())
    }

    fn finalize(&mut self) -> Result<(), BootstrapError> {
        Ok(())
    }
}
