//! A target's receive slots for one writer: registered memory the writer writes into, or
//! memory shared with the writer, which stores into it.
//!
//! A ring in shared memory starts with the target's read count (the writer's credits, one
//! cache line), then the slots, each on its own cache lines; a slot is there once its number
//! (at [`NUMBER_AT`]) reads as the number the target expects next.

use crate::fabric::{FabricError, RegisteredMemory, RemoteRegion, SharedMemory};

use super::super::wire::{Carrier, SlotRing};
use super::ring::Reads;
use super::slot::NUMBER_AT;

/// Where the read count lies in a shared ring, and the bytes before its first slot.
pub const SHARED_HEAD: usize = 64;
/// The number a slot of a new shared ring holds: none the writer ever writes.
const UNWRITTEN: u64 = u64::MAX;

/// Bytes from one slot of a shared ring to the next: slots start on cache lines.
pub fn shared_stride(slot_bytes: usize) -> usize {
    slot_bytes.div_ceil(64) * 64
}

/// Bytes of a shared ring of `slots` slots of `slot_bytes`.
pub fn shared_len(slots: usize, slot_bytes: usize) -> usize {
    SHARED_HEAD + slots * shared_stride(slot_bytes)
}

/// Where a target's receive slots for one writer are.
enum RingMemory {
    /// Registered memory the writer writes into ([`Carrier::Write`]).
    Registered(RegisteredMemory),
    /// Memory shared with the writer ([`Carrier::Memory`]), and the name of its file.
    Shared { mem: SharedMemory, name: u64 },
}

/// A target's receive slots for one writer, and how far they were read.
pub struct Inbound {
    mem: RingMemory,
    slot_bytes: usize,
    /// How far they were read.
    pub reads: Reads,
}

impl Inbound {
    /// `slots` slots of `slot_bytes` in registered memory `mem`.
    pub fn registered(mem: RegisteredMemory, slots: usize, slot_bytes: usize) -> Inbound {
        Inbound {
            mem: RingMemory::Registered(mem),
            slot_bytes,
            reads: Reads::new(slots),
        }
    }

    /// `slots` slots of `slot_bytes` in new memory shared with the writer, none written yet.
    pub fn shared(slots: usize, slot_bytes: usize) -> Result<Inbound, FabricError> {
        let (mem, name) = SharedMemory::create(shared_len(slots, slot_bytes))?;
        let stride = shared_stride(slot_bytes);
        for slot in 0..slots {
            mem.publish(SHARED_HEAD + slot * stride + NUMBER_AT, UNWRITTEN)?;
        }
        Ok(Inbound {
            mem: RingMemory::Shared { mem, name },
            slot_bytes,
            reads: Reads::new(slots),
        })
    }

    /// What the writer needs to know about these slots (its token names them).
    pub fn ring(&self) -> SlotRing {
        let (region, carrier) = match &self.mem {
            RingMemory::Registered(mem) => (mem.remote(), Carrier::Write),
            RingMemory::Shared { mem, name } => (
                RemoteRegion {
                    base: u64::from(std::process::id()),
                    len: mem.len() as u64,
                    key: *name,
                },
                Carrier::Memory,
            ),
        };
        SlotRing {
            region,
            count: self.reads.slots() as u32,
            slot_bytes: self.slot_bytes as u32,
            carrier,
        }
    }

    /// Whether the writer stores into shared memory (no event tells its arrivals, and it
    /// reads its credits there itself).
    pub fn is_shared(&self) -> bool {
        matches!(self.mem, RingMemory::Shared { .. })
    }

    /// The slot to read next, if it is there: its write's event arrived, or (shared memory)
    /// it holds the number expected next.
    pub fn head(&self) -> Option<usize> {
        match &self.mem {
            RingMemory::Registered(_) => self.reads.head(),
            RingMemory::Shared { mem, .. } => {
                let slot = self.reads.next();
                let at = SHARED_HEAD + slot * shared_stride(self.slot_bytes) + NUMBER_AT;
                (mem.load(at).ok()? == self.reads.read).then_some(slot)
            }
        }
    }

    /// The bytes of `slot`.
    pub fn slot(&self, slot: usize) -> Result<&[u8], FabricError> {
        match &self.mem {
            RingMemory::Registered(mem) => {
                let at = slot * self.slot_bytes;
                mem.as_slice()
                    .get(at..at + self.slot_bytes)
                    .ok_or_else(|| FabricError::invalid(format!("slot {slot} outside its ring")))
            }
            RingMemory::Shared { mem, .. } => mem.bytes(
                SHARED_HEAD + slot * shared_stride(self.slot_bytes),
                self.slot_bytes,
            ),
        }
    }

    /// The head slot was read: for a shared ring, the writer sees it free at once.
    pub fn consume(&mut self) -> Result<(), FabricError> {
        self.reads.consume();
        if let RingMemory::Shared { mem, .. } = &self.mem {
            mem.publish(0, self.reads.read)?;
        }
        Ok(())
    }
}
