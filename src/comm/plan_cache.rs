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

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.digest());
    }
}

/// What mostly tells the keys of calls apart, without building or allocating anything (a
/// call is looked up by it on every start; equality decides between keys that hash alike).
fn key_hash(
    op: &str,
    problem: &Problem,
    forced: Option<&str>,
    flags: (bool, bool, Option<(usize, usize)>),
) -> u64 {
    let mut h = WordHasher::default();
    op.hash(&mut h);
    std::mem::discriminant(problem).hash(&mut h);
    problem.p().hash(&mut h);
    problem.total_bytes().hash(&mut h);
    forced.hash(&mut h);
    flags.hash(&mut h);
    h.finish()
}

impl Key {
    /// The key of `call`, built to be kept (a lookup needs none: [`Self::hash_of`] and
    /// [`Self::matches`]).
    pub fn of(call: &Call<'_>) -> Key {
        Key {
            op: call.op,
            problem: call.problem.clone(),
            forced: forced(call).map(str::to_string),
            copy_in_recv: call.copy_in_recv,
            recv_unchanged: call.recv_unchanged,
            send_in_recv: call.send_in_recv,
        }
    }

    /// The hash a cache files `call`'s key under (as [`Hash`] hashes a [`Key`]).
    pub fn hash_of(call: &Call<'_>) -> u64 {
        let mut h = WordHasher::default();
        h.write_u64(key_hash(
            call.op,
            &call.problem,
            forced(call),
            (call.copy_in_recv, call.recv_unchanged, call.send_in_recv),
        ));
        h.finish()
    }

    /// Whether this is `call`'s key.
    pub fn matches(&self, call: &Call<'_>) -> bool {
        self.op == call.op
            && self.copy_in_recv == call.copy_in_recv
            && self.recv_unchanged == call.recv_unchanged
            && self.send_in_recv == call.send_in_recv
            && self.forced.as_deref() == forced(call)
            && self.problem == call.problem
    }

    fn digest(&self) -> u64 {
        key_hash(
            self.op,
            &self.problem,
            self.forced.as_deref(),
            (self.copy_in_recv, self.recv_unchanged, self.send_in_recv),
        )
    }
}

/// The algorithm `call` forces, if any.
fn forced<'a>(call: &Call<'a>) -> Option<&'a str> {
    match call.choice {
        Choice::Auto => None,
        Choice::Named(name) => Some(name),
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

/// One kept plan.
#[derive(Debug)]
struct Entry<K, V> {
    key: K,
    value: V,
    /// Stamp of its latest use.
    used: u64,
}

/// The hash a cache files `key` under.
fn hash_of<K: Hash>(key: &K) -> u64 {
    let mut h = WordHasher::default();
    key.hash(&mut h);
    h.finish()
}

/// A bounded least-recently-used map from keys (a [`Key`]) to plans (a [`Planned`]), filed
/// by the keys' hashes so that a call can be looked up without building its key.
#[derive(Debug)]
pub(crate) struct PlanCache<K = Key, V = Planned> {
    capacity: usize,
    /// Entries by hash (keys that hash alike share a bucket).
    entries: HashMap<u64, Vec<Entry<K, V>>, BuildHasherDefault<WordHasher>>,
    /// Entries kept.
    len: usize,
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
            len: 0,
            clock: 0,
            hits: 0,
            misses: 0,
        }
    }

    /// The plan of `key`, if kept (counted as a hit, else as a miss).
    #[cfg(test)]
    pub fn get(&mut self, key: &K) -> Option<V> {
        let hash = hash_of(key);
        self.get_by(hash, |k| k == key)
    }

    /// The plan of the key that hashes to `hash` and `is` the one looked for, if kept: a
    /// lookup that needs no key built (counted as [`Self::get`]).
    pub fn get_by(&mut self, hash: u64, is: impl Fn(&K) -> bool) -> Option<V> {
        self.clock += 1;
        let found = self
            .entries
            .get_mut(&hash)
            .and_then(|bucket| bucket.iter_mut().find(|entry| is(&entry.key)));
        match found {
            Some(entry) => {
                entry.used = self.clock;
                self.hits += 1;
                Some(entry.value.clone())
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
        self.clock += 1;
        let hash = hash_of(&key);
        if let Some(entry) = self
            .entries
            .get_mut(&hash)
            .and_then(|bucket| bucket.iter_mut().find(|entry| entry.key == key))
        {
            entry.value = planned;
            entry.used = self.clock;
            return;
        }
        if self.len >= self.capacity {
            self.evict_oldest();
        }
        self.entries.entry(hash).or_default().push(Entry {
            key,
            value: planned,
            used: self.clock,
        });
        self.len += 1;
    }

    fn evict_oldest(&mut self) {
        let oldest = self
            .entries
            .iter()
            .flat_map(|(&hash, bucket)| {
                bucket
                    .iter()
                    .enumerate()
                    .map(move |(i, e)| (e.used, hash, i))
            })
            .min();
        if let Some((_, hash, i)) = oldest {
            if let Some(bucket) = self.entries.get_mut(&hash) {
                bucket.swap_remove(i);
                if bucket.is_empty() {
                    self.entries.remove(&hash);
                }
                self.len -= 1;
            }
        }
    }

    /// Forgets every plan (the cost model changed: the choices may differ now).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.len = 0;
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
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
    fn a_call_is_found_under_the_key_built_from_it() {
        use crate::plan::Problem;
        let bcast = Problem::Broadcast {
            p: 4,
            root: 1,
            bytes: 8,
        };
        let calls = [
            Call::new("bcast", bcast.clone(), Choice::Auto),
            Call::new("bcast", bcast, Choice::Named("binomial-bcast")).copy_in(true),
            Call::new(
                "allgatherv",
                Problem::Allgatherv {
                    counts: vec![3, 0, 5],
                },
                Choice::Auto,
            )
            .in_place((3, 0)),
        ];
        let mut cache: PlanCache<Key, usize> = PlanCache::new(8);
        for (i, call) in calls.iter().enumerate() {
            let key = Key::of(call);
            assert_eq!(Key::hash_of(call), hash_of(&key));
            assert!(key.matches(call));
            cache.insert(key, i);
        }
        for (i, call) in calls.iter().enumerate() {
            let got = cache.get_by(Key::hash_of(call), |key| key.matches(call));
            assert_eq!(got, Some(i));
            for (j, other) in calls.iter().enumerate() {
                assert_eq!(Key::of(other).matches(call), i == j);
            }
        }
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
