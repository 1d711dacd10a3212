//! The out-of-band bootstrap: the job's key-value space carried over an allgather that the
//! caller supplies (its MPI, a TCP store, its own launcher).
//!
//! Puts are kept locally until the next fence; a fence is two allgathers of fixed-size
//! records, as the caller's function only knows fixed sizes: first every rank's length (8
//! bytes), then every rank's puts padded to the longest. A fence with nothing to put still
//! synchronises, so it is also the barrier.

use std::collections::HashMap;
use std::sync::Mutex;

use super::{check_lengths, BootstrapError, KeyValue, KvsLimits};

/// An allgather of fixed-size records: every rank passes `send` (the same length on every
/// rank) and receives every rank's record in rank order in `recv` (size × that length).
pub type Allgather = Box<dyn FnMut(&[u8], &mut [u8]) -> Result<(), String> + Send>;

/// Limits of the out-of-band key-value space: nothing in the transport limits it, these only
/// keep a rank's records to a sane size.
pub(super) const OOB_LIMITS: KvsLimits = KvsLimits {
    kvsname_max: 255,
    key_max: 255,
    value_max: 1 << 16,
};

/// The key-value space of an out-of-band job.
pub(super) struct OobKvs {
    /// Behind a lock only so that a communicator stays `Sync`: a bootstrap is used by one
    /// thread at a time.
    allgather: Mutex<Allgather>,
    size: usize,
    pending: Vec<(String, String)>,
    kvs: HashMap<String, String>,
    /// The node of every rank where the caller told it (labels: equal is one node).
    nodes: Option<Vec<usize>>,
}

impl OobKvs {
    /// The key-value space of a job of `size` ranks over `allgather`; empty until a fence.
    pub(super) fn new(size: usize, allgather: Allgather) -> Self {
        OobKvs {
            allgather: Mutex::new(allgather),
            size,
            pending: Vec::new(),
            kvs: HashMap::new(),
            nodes: None,
        }
    }

    /// The same, with the node of every rank (`nodes[r]`, labels) from the caller: no host
    /// exchange at start-up.
    pub(super) fn on_nodes(mut self, nodes: Vec<usize>) -> Self {
        self.nodes = Some(nodes);
        self
    }

    /// Calls the caller's allgather; a panic in an earlier call is an error, not a panic.
    fn call(&mut self, send: &[u8], recv: &mut [u8]) -> Result<(), BootstrapError> {
        let allgather = self
            .allgather
            .get_mut()
            .map_err(|_| BootstrapError::Oob("an earlier allgather panicked".into()))?;
        allgather(send, recv).map_err(BootstrapError::Oob)
    }
}

impl KeyValue for OobKvs {
    fn kind(&self) -> &'static str {
        "oob"
    }

    fn kvsname(&self) -> &str {
        "oob"
    }

    /// The number of distinct node labels the caller gave, if it gave them.
    fn nodes(&self) -> Option<usize> {
        self.nodes.as_ref().map(|labels| {
            let mut distinct = labels.clone();
            distinct.sort_unstable();
            distinct.dedup();
            distinct.len()
        })
    }

    /// The caller's node labels (an allgather by itself says nothing about hosts).
    fn node_ids(&self, size: usize) -> Option<Vec<usize>> {
        self.nodes.clone().filter(|labels| labels.len() == size)
    }

    fn limits(&self) -> KvsLimits {
        OOB_LIMITS
    }

    /// Kept locally until the next fence.
    fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        check_lengths(key, value, OOB_LIMITS)?;
        self.pending.push((key.to_owned(), value.to_owned()));
        Ok(())
    }

    fn get(&mut self, key: &str) -> Result<String, BootstrapError> {
        self.kvs
            .get(key)
            .cloned()
            .ok_or_else(|| BootstrapError::KeyNotFound {
                key: key.to_owned(),
                detail: "(out-of-band: was it put before the last fence?)".into(),
            })
    }

    /// Publishes every rank's puts to all ranks: two allgathers (lengths, then records).
    fn fence(&mut self) -> Result<(), BootstrapError> {
        let mine = encode(&self.pending);
        let mut lengths = vec![0u8; 8 * self.size];
        self.call(&(mine.len() as u64).to_le_bytes(), &mut lengths)?;
        let lengths: Vec<u64> = lengths
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect();
        let most = lengths.iter().copied().max().unwrap_or(0);
        // A length is a peer's word: bound it before allocating size × most bytes.
        let limit = (self.size as u64) * (OOB_LIMITS.key_max + OOB_LIMITS.value_max + 8) as u64;
        if most > limit.max(1 << 24) {
            return Err(malformed(format!("a rank announced {most} bytes of puts")));
        }
        let most = most as usize;
        let mut record = mine;
        record.resize(most, 0);
        let mut all = vec![0u8; most * self.size];
        self.call(&record, &mut all)?;
        for (rank, len) in lengths.iter().enumerate() {
            let start = rank * most;
            let bytes = &all[start..start + *len as usize];
            for (key, value) in
                decode(bytes).map_err(|what| malformed(format!("rank {rank}: {what}")))?
            {
                self.kvs.insert(key, value);
            }
        }
        self.pending.clear();
        Ok(())
    }

    /// The caller's allgather has no way to end the job: the caller exits with the code.
    fn abort(&mut self, _code: i32, _message: &str) -> Result<(), BootstrapError> {
        Ok(())
    }

    fn finalize(&mut self) -> Result<(), BootstrapError> {
        Ok(())
    }
}

/// The error for a record a peer sent that does not parse.
fn malformed(what: String) -> BootstrapError {
    BootstrapError::Oob(format!("malformed record: {what}"))
}

/// Puts as `u32 key length, key, u32 value length, value`, little endian.
fn encode(puts: &[(String, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (key, value) in puts {
        for text in [key, value] {
            out.extend_from_slice(&(text.len() as u32).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        }
    }
    out
}

/// The puts of one rank's record (see [`encode`]).
fn decode(mut bytes: &[u8]) -> Result<Vec<(String, String)>, String> {
    let take = |bytes: &mut &[u8]| -> Result<String, String> {
        let head: [u8; 4] = bytes
            .get(..4)
            .and_then(|h| h.try_into().ok())
            .ok_or("a length is cut short")?;
        let (len, rest) = (u32::from_le_bytes(head) as usize, &bytes[4..]);
        let text = rest.get(..len).ok_or("a text is cut short")?;
        *bytes = &rest[len..];
        String::from_utf8(text.to_vec()).map_err(|_| "a text is not UTF-8".to_string())
    };
    let mut puts = Vec::new();
    while !bytes.is_empty() {
        let key = take(&mut bytes)?;
        let value = take(&mut bytes)?;
        puts.push((key, value));
    }
    Ok(puts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_reject_cut_input() {
        let puts = vec![("a".to_string(), "1".to_string()), ("bb".into(), "".into())];
        let bytes = encode(&puts);
        assert_eq!(decode(&bytes).expect("decode"), puts);
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode(&[9, 0, 0, 0, b'x']).is_err());
    }

    #[test]
    fn a_fence_over_a_one_rank_allgather_publishes_the_puts() {
        let gather: Allgather = Box::new(|send, recv| {
            recv.copy_from_slice(send);
            Ok(())
        });
        let mut kvs = OobKvs::new(1, gather);
        kvs.put("k", "v").expect("put");
        assert!(kvs.get("k").is_err());
        kvs.fence().expect("fence");
        assert_eq!(kvs.get("k").expect("get"), "v");
    }

    #[test]
    fn a_failing_allgather_is_an_error() {
        let gather: Allgather = Box::new(|_, _| Err("peer gone".into()));
        let mut kvs = OobKvs::new(2, gather);
        let err = kvs.fence().expect_err("must fail");
        assert!(err.to_string().contains("peer gone"), "{err}");
    }

    #[test]
    fn node_labels_from_the_caller_make_the_node_map_without_an_exchange() {
        use crate::bootstrap::Bootstrap;
        let never: Allgather = Box::new(|_, _| Err("no exchange expected".into()));
        let boot = Bootstrap::oob_on_nodes(1, 3, vec![5, 5, 9], never).expect("bootstrap");
        assert_eq!(boot.nodes(), Some(2));
        let map = boot.launcher_node_map().expect("the caller's map");
        assert_eq!((map.nodes(), map.node()), (2, 0));
        assert_eq!(map.node_of(2), Some(1));
        let plain = Bootstrap::oob(1, 3, Box::new(|_, _| Ok(()))).expect("bootstrap");
        assert!(plain.launcher_node_map().is_none());
        let short = Bootstrap::oob_on_nodes(0, 3, vec![0], Box::new(|_, _| Ok(())));
        assert!(short
            .expect_err("two labels missing")
            .to_string()
            .contains("1 node labels"));
    }
}
