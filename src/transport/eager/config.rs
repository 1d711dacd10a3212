//! The eager path's settings: the limit, the slots, and how writers reach them.

use super::super::wire::{Carrier, MAX_SLOTS};
use super::slot::{HEADER_BYTES, SEGMENT_BYTES};

/// Default number of receive slots per eager writer.
pub const DEFAULT_SLOTS: usize = 16;
/// Fewest slots: credits come back once half of them were read.
pub const MIN_SLOTS: usize = 2;
/// Default size of one slot (header and data).
pub const DEFAULT_SLOT_BYTES: usize = 8192;
/// Smallest slot: a header, one segment and some data.
pub const MIN_SLOT_BYTES: usize = 256;
/// Largest slot.
pub const MAX_SLOT_BYTES: usize = 1 << 20;
/// Largest eager limit that can be set.
pub const MAX_LIMIT: usize = 1 << 30;
/// What copying one byte costs (s/B), for the default limit: memory bandwidth of about
/// 10 GB/s. An eager byte is copied twice (into the writer's slot source, out of the slot).
pub const COPY_SECONDS_PER_BYTE: f64 = 1e-10;

/// The eager path's settings. Every rank must use the same `limit` (a disagreement fails as a
/// mismatch); slots and slot sizes are each target's own (its tokens tell the writers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EagerConfig {
    /// Operations of at most this many bytes are eager (0: none).
    pub limit: usize,
    /// Receive slots per eager writer.
    pub slots: usize,
    /// Bytes of one slot, header included.
    pub slot_bytes: usize,
    /// Whether writers may store into slots in shared memory ([`Carrier::Memory`]) where every
    /// rank is on this host (the shm provider); else every slot is written with RMA writes.
    pub memory: bool,
}

impl EagerConfig {
    /// The eager path turned off.
    pub const OFF: EagerConfig = EagerConfig {
        limit: 0,
        slots: DEFAULT_SLOTS,
        slot_bytes: DEFAULT_SLOT_BYTES,
        memory: true,
    };

    /// The settings for a message latency of `alpha` seconds, with what was set explicitly.
    /// The default limit is where the copies an eager operation costs (twice its bytes) take as
    /// long as the message it saves (`alpha / (2 × COPY_SECONDS_PER_BYTE)`), at most what one
    /// slot carries in one segment, so that a default eager transfer takes one slot.
    pub fn new(
        alpha: f64,
        limit: Option<usize>,
        slots: Option<usize>,
        slot_bytes: Option<usize>,
    ) -> EagerConfig {
        let slots = slots.unwrap_or(DEFAULT_SLOTS).clamp(MIN_SLOTS, MAX_SLOTS);
        let slot_bytes = slot_bytes
            .unwrap_or(DEFAULT_SLOT_BYTES)
            .clamp(MIN_SLOT_BYTES, MAX_SLOT_BYTES);
        let limit = limit.unwrap_or_else(|| {
            let balance = alpha / (2.0 * COPY_SECONDS_PER_BYTE);
            let one_slot = slot_bytes - HEADER_BYTES - SEGMENT_BYTES;
            if balance.is_finite() && balance > 0.0 {
                (balance as usize).min(one_slot)
            } else {
                0
            }
        });
        EagerConfig {
            limit: limit.min(MAX_LIMIT),
            slots,
            slot_bytes,
            memory: true,
        }
    }

    /// Whether every pair of an operation of `bytes` (its size as every rank computes it) is
    /// eager.
    pub fn applies(&self, bytes: usize) -> bool {
        self.limit > 0 && bytes <= self.limit
    }

    /// Bytes of the receive slots kept for one writer.
    pub fn ring_bytes(&self) -> usize {
        self.slots * self.slot_bytes
    }
}

/// How writers reach the receive slots a rank keeps for them over `provider`: over shm every
/// rank is on one host, so they store into shared memory unless `memory` is off
/// ([`EagerConfig::memory`]); elsewhere RMA writes.
pub fn carrier_for(provider: &str, memory: bool) -> Carrier {
    if provider == "shm" && memory {
        Carrier::Memory
    } else {
        Carrier::Write
    }
}

/// The digest an operation prepared under eager `limit` carries: the call's digest, marked
/// with the limit, so that ranks that would choose their eager pairs differently disagree.
pub fn eager_digest(digest: u64, limit: usize) -> u64 {
    // Made on every start: a few multiplies rather than a byte-wise digest.
    [EAGER_MARK, limit as u64, digest]
        .iter()
        .fold(EAGER_MARK, |h, &w| {
            (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
        })
}

/// Marks eager digests ("eager" in ASCII).
const EAGER_MARK: u64 = 0x0065_6167_6572;
