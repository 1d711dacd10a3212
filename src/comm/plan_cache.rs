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

/// Everything that determines a call's plan on this communicator (the rank, the size, the
/// provider's limits and the configured algorithms are fixed for its life; a new cost model
/// empties the cache), in one list of fields: equality and hash are derived from it.
///
/// It comes in two forms with the same derived hash: [`PlanKey`] owns its fields and is kept
/// in the cache, [`CallKey`] borrows them from a call, so that looking a call up builds and
/// allocates nothing. `&T` hashes as `T` and `&str` as `String`, which is what makes the two
/// hashes agree (tested below).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct KeyOf<P, S> {
    /// The operation the user called (`"bcast"`, `"allgatherv"`, ...).
    pub op: &'static str,
    pub problem: P,
    /// The algorithm forced by the call, if any.
    pub forced: Option<S>,
    pub copy_in_recv: bool,
    pub recv_unchanged: bool,
    pub send_in_recv: Option<(usize, usize)>,
}

/// A key kept in the cache.
pub(crate) type PlanKey = KeyOf<Problem, String>;

/// The key of a call, borrowed from it.
pub(crate) type CallKey<'a> = KeyOf<&'a Problem, &'a str>;

impl<'a> CallKey<'a> {
    /// The key of `call`. Every field of the call is named here, so that a field added to
    /// calls has to be placed in the key or left out on purpose.
    pub fn of(call: &'a Call<'_>) -> Self {
        let &Call {
            op,
            ref problem,
            choice,
            copy_in_recv,
            recv_unchanged,
            send_in_recv,
            // The outcome of this rank's checks: a refused call is never planned.
            checked: _,
        } = call;
        KeyOf {
            op,
            problem,
            forced: match choice {
                Choice::Auto => None,
                Choice::Named(name) => Some(name),
            },
            copy_in_recv,
            recv_unchanged,
            send_in_recv,
        }
    }

    /// The key to keep.
    pub fn into_owned(self) -> PlanKey {
        let KeyOf {
            op,
            problem,
            forced,
            copy_in_recv,
            recv_unchanged,
            send_in_recv,
        } = self;
        KeyOf {
            op,
            problem: problem.clone(),
            forced: forced.map(str::to_string),
            copy_in_recv,
            recv_unchanged,
            send_in_recv,
        }
    }
}

impl PlanKey {
    /// This key, borrowed.
    pub fn view(&self) -> CallKey<'_> {
        let &KeyOf {
            op,
            ref problem,
            ref forced,
            copy_in_recv,
            recv_unchanged,
            send_in_recv,
        } = self;
        KeyOf {
            op,
            problem,
            forced: forced.as_deref(),
            copy_in_recv,
            recv_unchanged,
            send_in_recv,
        }
    }

    /// The call this key was made of, to start it again (its own checks passed when it was
    /// kept).
    pub fn call(&self) -> Call<'_> {
        let choice = self.forced.as_deref().map_or(Choice::Auto, Choice::Named);
        let mut call = Call::new(self.op, self.problem.clone(), choice)
            .copy_in(self.copy_in_recv)
            .unchanged(self.recv_unchanged);
        call.send_in_recv = self.send_in_recv;
        call
    }
}

impl PartialEq<PlanKey> for CallKey<'_> {
    fn eq(&self, key: &PlanKey) -> bool {
        *self == key.view()
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
        self.0 = mix(self.0, w);
    }
}

fn mix(state: u64, w: u64) -> u64 {
    (state ^ w)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(29)
}

/// Up to 8 bytes as one little-endian word.
fn le_word(chunk: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    let n = chunk.len().min(8);
    w[..n].copy_from_slice(&chunk[..n]);
    u64::from_le_bytes(w)
}

/// Inputs from this many bytes on are mixed in four lanes.
const LANES_FROM: usize = 64;

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        // A long input (the counts of a v-collective, one word per rank) goes through four
        // independent lanes, so that its multiplies overlap instead of each waiting for the
        // one before: a lookup hashes every count of the call.
        let rest = if bytes.len() >= LANES_FROM {
            let mut blocks = bytes.chunks_exact(32);
            let mut lanes = [0u64; 4];
            for block in &mut blocks {
                for (lane, word) in lanes.iter_mut().zip(block.chunks_exact(8)) {
                    *lane = mix(*lane, le_word(word));
                }
            }
            for lane in lanes {
                self.word(lane);
            }
            blocks.remainder()
        } else {
            bytes
        };
        for chunk in rest.chunks(8) {
            self.word(le_word(chunk));
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
fn hash_of<K: Hash + ?Sized>(key: &K) -> u64 {
    let mut h = WordHasher::default();
    key.hash(&mut h);
    h.finish()
}

/// A bounded least-recently-used map from keys (a [`PlanKey`]) to plans (a [`Planned`]),
/// filed by the keys' hashes so that a call can be looked up by its borrowed key.
#[derive(Debug)]
pub(crate) struct PlanCache<K = PlanKey, V = Planned> {
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

    /// The plan kept for the key equal to `query`, if any (counted as a hit, else as a
    /// miss). `query` may be a borrowed form of the keys that hashes as they do: then the
    /// lookup builds and allocates nothing.
    pub fn get<Q>(&mut self, query: &Q) -> Option<V>
    where
        Q: Hash + PartialEq<K> + ?Sized,
    {
        self.clock += 1;
        let found = self
            .entries
            .get_mut(&hash_of(query))
            .and_then(|bucket| bucket.iter_mut().find(|entry| *query == entry.key));
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

    /// Calls that differ from the first in exactly one field of the key each. The key is
    /// destructured without `..`, so a field added to it fails to compile here until a call
    /// differing in it is added.
    fn one_field_apart() -> Vec<Call<'static>> {
        use crate::plan::{Dtype, ReduceOp, Reduction};
        let bcast = |root, bytes| Problem::Broadcast { p: 4, root, bytes };
        let base = || Call::new("bcast", bcast(1, 8), Choice::Auto);
        let KeyOf {
            op: _,
            problem: _,
            forced: _,
            copy_in_recv: _,
            recv_unchanged: _,
            send_in_recv: _,
        } = CallKey::of(&base());
        let sum = Reduction::new(Dtype::I32, ReduceOp::Sum).expect("sum");
        let max = Reduction::new(Dtype::I32, ReduceOp::Max).expect("max");
        let allreduce = |reduction, bytes| Problem::Allreduce {
            p: 4,
            reduction,
            bytes,
        };
        let allgatherv = |counts: Vec<usize>| Problem::Allgatherv { counts };
        vec![
            base(),
            // op
            Call::new("ibcast", bcast(1, 8), Choice::Auto),
            // problem: its fields, then another variant
            Call::new(
                "bcast",
                Problem::Broadcast {
                    p: 5,
                    root: 1,
                    bytes: 8,
                },
                Choice::Auto,
            ),
            Call::new("bcast", bcast(2, 8), Choice::Auto),
            Call::new("bcast", bcast(1, 9), Choice::Auto),
            Call::new("bcast", Problem::Allgather { p: 4, block: 2 }, Choice::Auto),
            Call::new("bcast", allreduce(sum, 8), Choice::Auto),
            Call::new("bcast", allreduce(max, 8), Choice::Auto),
            Call::new("bcast", allgatherv(vec![3, 0, 5, 0]), Choice::Auto),
            Call::new("bcast", allgatherv(vec![0, 3, 5, 0]), Choice::Auto),
            // forced
            Call::new("bcast", bcast(1, 8), Choice::Named("binomial-bcast")),
            Call::new("bcast", bcast(1, 8), Choice::Named("circulant-bcast")),
            // copy_in_recv
            base().copy_in(true),
            // recv_unchanged
            base().unchanged(true),
            // send_in_recv
            base().in_place((0, 0)),
            base().in_place((2, 2)),
        ]
    }

    #[test]
    fn calls_one_key_field_apart_never_share_a_plan() {
        let calls = one_field_apart();
        let mut cache: PlanCache<PlanKey, usize> = PlanCache::new(calls.len());
        for (i, call) in calls.iter().enumerate() {
            cache.insert(CallKey::of(call).into_owned(), i);
        }
        assert_eq!(cache.len(), calls.len());
        for (i, call) in calls.iter().enumerate() {
            assert_eq!(
                cache.get(&CallKey::of(call)),
                Some(i),
                "{:?}",
                CallKey::of(call)
            );
            for (j, other) in calls.iter().enumerate() {
                let kept = CallKey::of(other).into_owned();
                assert_eq!(CallKey::of(call) == kept, i == j, "{i} against {j}");
            }
        }
        // A call's outcome of its own checks is not part of its key.
        let refused = Call::new("bcast", calls[0].problem.clone(), Choice::Auto)
            .checked(Err(crate::comm::error::argument("bcast", "no".into())));
        assert_eq!(cache.get(&CallKey::of(&refused)), Some(0));
    }

    #[test]
    fn a_borrowed_key_hashes_as_the_kept_one() {
        for call in one_field_apart() {
            let key = CallKey::of(&call);
            let kept = key.into_owned();
            assert_eq!(hash_of(&key), hash_of(&kept), "{key:?}");
            assert_eq!(kept.view(), key);
        }
    }

    #[test]
    fn long_inputs_are_told_apart_by_every_word() {
        let hash = |words: &[usize]| hash_of(words);
        for p in [3usize, 8, 9, 64, 67] {
            let counts: Vec<usize> = (0..p).map(|r| 1000 + r).collect();
            assert_eq!(hash(&counts), hash(&counts.clone()), "p {p}");
            for r in 0..p {
                let mut other = counts.clone();
                other[r] += 1;
                assert_ne!(hash(&counts), hash(&other), "p {p}, count {r}");
            }
            let mut swapped = counts.clone();
            swapped.swap(0, p - 1);
            assert_ne!(hash(&counts), hash(&swapped), "p {p}");
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
