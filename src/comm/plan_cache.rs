//! The plans of earlier calls, kept per communicator so that a repeated call with the same
//! arguments neither chooses an algorithm, nor plans, nor validates again.
//!
//! An entry holds what is a pure function of its key: the algorithm chosen, the prepared
//! plan (rounds, expectations, writers: offsets within the buffers, never addresses) and the
//! digest the ready tokens carry. Everything that differs from call to call (the buffers and
//! their registrations, the staging, the sequence number, the argument check's exchange) is
//! supplied when the operation starts. The cache is bounded: the entry used least recently
//! goes first.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use crate::plan::Problem;
use crate::transport::Prepared;

use super::call::Call;
use super::Choice;

/// Entries kept unless `CIRCULANT_PLAN_CACHE` says otherwise.
pub const DEFAULT_PLAN_CACHE: usize = 64;

/// Everything that determines a call's plan on this communicator (the rank, the size, the
/// provider's limits and the configured algorithms are fixed for its life; a new cost model
/// empties the cache).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Key {
    op: &'static str,
    problem: Problem,
    /// The algorithm forced by the call, if any.
    forced: Option<String>,
    copy_in_recv: bool,
    recv_unchanged: bool,
    send_in_recv: Option<(usize, usize)>,
}

// `Problem` holds integers only, so its equality is an equivalence.
impl Eq for Key {}

// Looked up on every call: hashes what mostly tells keys apart, without building or
// allocating anything (equality decides between keys that hash alike).
impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.op.hash(state);
        std::mem::discriminant(&self.problem).hash(state);
        self.problem.p().hash(state);
        self.problem.total_bytes().hash(state);
        self.forced.hash(state);
        self.copy_in_recv.hash(state);
        self.recv_unchanged.hash(state);
        self.send_in_recv.hash(state);
    }
}

impl Key {
    pub fn of(call: &Call<'_>) -> Key {
        Key {
            op: call.op,
            problem: call.problem.clone(),
            forced: match call.choice {
                Choice::Auto => None,
                Choice::Named(name) => Some(name.to_string()),
            },
            copy_in_recv: call.copy_in_recv,
            recv_unchanged: call.recv_unchanged,
            send_in_recv: call.send_in_recv,
        }
    }
}

/// A call's plan, ready to start: cloning it is cheap (the plan is shared).
#[derive(Clone, Debug)]
pub(crate) struct Planned {
    pub algorithm: &'static str,
    pub prepared: Prepared,
    /// What every rank must agree on ([`super::call::digest`] of the call).
    pub digest: u64,
}

/// A hasher for the cache's few keys, which come from this process only (so no defence
/// against chosen collisions is needed): one multiply per word, far cheaper than the
/// default's per call.
#[derive(Default)]
pub(crate) struct WordHasher(u64);

impl WordHasher {
    fn word(&mut self, w: u64) {
        self.0 = (self.0 ^ w)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
}

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.word(u64::from_le_bytes(w));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.word(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.word(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.word(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.word(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A bounded least-recently-used map from keys (a [`Key`]) to plans (a [`Planned`]).
#[derive(Debug)]
pub(crate) struct PlanCache<K = Key, V = Planned> {
    capacity: usize,
    entries: HashMap<K, (V, u64), BuildHasherDefault<WordHasher>>,
    /// Stamp of the latest use: larger is more recent.
    clock: u64,
    hits: u64,
    misses: u64,
}

impl<K: Eq + Hash + Clone, V: Clone> PlanCache<K, V> {
    /// A cache of at most `capacity` entries (0: nothing is kept).
    pub fn new(capacity: usize) -> Self {
        PlanCache {
            capacity,
            entries: HashMap::default(),
            clock: 0,
            hits: 0,
            misses: 0,
        }
    }

    /// The plan of `key`, if kept (counted as a hit, else as a miss).
    pub fn get(&mut self, key: &K) -> Option<V> {
        self.clock += 1;
        match self.entries.get_mut(key) {
            Some((planned, used)) => {
                *used = self.clock;
                self.hits += 1;
                Some(planned.clone())
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Keeps `planned` for `key`, dropping the least recently used entry when full.
    pub fn insert(&mut self, key: K, planned: V) {
        if self.capacity == 0 {
            return;
        }
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                self.entries.remove(&oldest);
            }
        }
        self.clock += 1;
        self.entries.insert(key, (planned, self.clock));
    }

    /// Forgets every plan (the cost model changed: the choices may differ now).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// (hits, misses) so far.
    pub fn stats(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_misses_and_least_recent_eviction() {
        let mut cache: PlanCache<u32, &str> = PlanCache::new(2);
        assert_eq!(cache.get(&1), None);
        cache.insert(1, "one");
        cache.insert(2, "two");
        assert_eq!(cache.get(&1), Some("one"));
        // 2 is now the least recently used: a third entry replaces it.
        cache.insert(3, "three");
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&2), None);
        assert_eq!(cache.get(&1), Some("one"));
        assert_eq!(cache.get(&3), Some("three"));
        // Replacing a kept key evicts nothing.
        cache.insert(3, "drei");
        assert_eq!(cache.get(&1), Some("one"));
        assert_eq!(cache.get(&3), Some("drei"));
        assert_eq!(cache.stats(), (5, 2));
        cache.clear();
        assert_eq!(cache.get(&1), None);
    }

    #[test]
    fn capacity_zero_keeps_nothing() {
        let mut cache: PlanCache<u32, u32> = PlanCache::new(0);
        cache.insert(1, 1);
        assert_eq!(cache.get(&1), None);
        assert_eq!(cache.len(), 0);
        assert_eq!(cache.stats(), (0, 1));
    }
}
