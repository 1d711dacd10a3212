//! How a writer's slots reach one target: the carrier interface ([`SlotCarrier`]) and its two
//! implementations, RMA writes from a registered mirror of the target's slots
//! ([`WriteCarrier`]) and stores into slots in memory shared with the target
//! ([`MemoryCarrier`]). The posting loop (`super::Eager::post`) fills a slot in the memory
//! the carrier names, all but its number, and the carrier delivers it.

use crate::fabric::{FabricError, Post, RegisteredMemory, RemoteRegion, SharedMemory};

use super::super::link::{protocol, Link};
use super::super::wire::{Carrier, Event, SlotRing};
use super::super::{Result, TransportError};
use super::inbound::{shared_len, shared_stride, SHARED_HEAD};
use super::ring::Written;
use super::slot::NUMBER_AT;
use super::{MAX_SLOTS, MAX_SLOT_BYTES, MIN_SLOTS, MIN_SLOT_BYTES};

/// Memory a slot is filled in.
pub trait SlotMemory {
    /// Copies `bytes` to `at`.
    fn put(&self, at: usize, bytes: &[u8]) -> std::result::Result<(), FabricError>;
    /// Copies `len` bytes at `from` of `src` to `at`.
    fn put_from(
        &self,
        at: usize,
        src: &RegisteredMemory,
        from: usize,
        len: usize,
    ) -> std::result::Result<(), FabricError>;
}

impl SlotMemory for RegisteredMemory {
    fn put(&self, at: usize, bytes: &[u8]) -> std::result::Result<(), FabricError> {
        self.store(at, bytes)
    }

    fn put_from(
        &self,
        at: usize,
        src: &RegisteredMemory,
        from: usize,
        len: usize,
    ) -> std::result::Result<(), FabricError> {
        self.copy_from(at, src, from, len)
    }
}

impl SlotMemory for SharedMemory {
    fn put(&self, at: usize, bytes: &[u8]) -> std::result::Result<(), FabricError> {
        self.store(at, bytes)
    }

    fn put_from(
        &self,
        at: usize,
        src: &RegisteredMemory,
        from: usize,
        len: usize,
    ) -> std::result::Result<(), FabricError> {
        self.store_from(at, src, from, len)
    }
}

/// What delivering a slot came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Delivered; a local completion will follow (the operation waits for it).
    Pending,
    /// Delivered; nothing to wait for (a store, an injected write).
    Done,
    /// The provider's queue is full: nothing was delivered, the slot is filled again later.
    Again,
}

/// How a writer's filled slots reach one target. A new way to reach slots is a new
/// implementation of this, and a [`Carrier`] a target can name in its token. `Send`, as a
/// communicator may move to another thread.
pub trait SlotCarrier: Send {
    /// How the slots are reached.
    fn kind(&self) -> Carrier;
    /// Makes ready what the first slot needs (a mirror of the slots, a mapping of them).
    fn open(&mut self, link: &Link<'_>, op: &str, to: usize, ring: &Written) -> Result<()>;
    /// The target's read count of the slots, where this writer reads it itself (else its
    /// credits come back in words or in the target's own slots).
    fn read_count(&self) -> std::result::Result<Option<u64>, FabricError>;
    /// The memory `slot` is filled in, and where it starts there (after [`Self::open`]).
    fn fill_at(&self, slot: usize, slot_bytes: usize) -> Result<(&dyn SlotMemory, usize)>;
    /// Stores `number`, the slot's running number, into the filled slot at `base` and
    /// delivers its bytes up to `end` to the target.
    #[allow(clippy::too_many_arguments)]
    fn deliver(
        &mut self,
        link: &mut Link<'_>,
        op: &str,
        to: usize,
        slot: usize,
        base: usize,
        end: usize,
        number: u64,
    ) -> Result<Delivery>;
}

/// RMA writes with remote CQ data into the target's registered slots, from a local mirror
/// (one mirror slot per receive slot, allocated on the first write, so that a write's
/// source stays untouched until the target has read it).
pub struct WriteCarrier {
    region: RemoteRegion,
    mirror: Option<RegisteredMemory>,
    /// Slots up to this size are injected (no local completion); 0: none.
    inject: usize,
}

impl SlotCarrier for WriteCarrier {
    fn kind(&self) -> Carrier {
        Carrier::Write
    }

    fn open(&mut self, link: &Link<'_>, _op: &str, _to: usize, ring: &Written) -> Result<()> {
        if self.mirror.is_none() {
            // Registered with every fabric: the target's card, which says which one reaches
            // it, may not be known yet.
            self.mirror = Some(RegisteredMemory::for_endpoints(
                &link.fabrics.endpoints(),
                ring.slots * ring.slot_bytes,
                crate::fabric::Access::Local,
            )?);
        }
        Ok(())
    }

    fn read_count(&self) -> std::result::Result<Option<u64>, FabricError> {
        Ok(None)
    }

    fn fill_at(&self, slot: usize, slot_bytes: usize) -> Result<(&dyn SlotMemory, usize)> {
        let mirror = self
            .mirror
            .as_ref()
            .ok_or_else(|| FabricError::invalid("no source for eager writes"))?;
        Ok((mirror, slot * slot_bytes))
    }

    fn deliver(
        &mut self,
        link: &mut Link<'_>,
        op: &str,
        to: usize,
        slot: usize,
        base: usize,
        end: usize,
        number: u64,
    ) -> Result<Delivery> {
        let Some(mirror) = self.mirror.as_ref() else {
            return Err(protocol(op, "no source for eager writes".into()));
        };
        mirror.put(base + NUMBER_AT, &number.to_le_bytes())?;
        link.reachable(op, to)?;
        let peer = link.peers.address(to)?;
        let endpoint = link.endpoint_to(to)?;
        let remote = self.region.range(base as u64, (end - base) as u64)?;
        let event = Some(
            Event::Slot {
                from: link.rank,
                slot: slot as u8,
            }
            .encode(),
        );
        // Small slots are injected: no completion to wait for.
        let (post, delivered) = if end - base <= self.inject {
            let post = endpoint.inject_write(&mirror.as_slice()[base..end], peer, remote, event)?;
            (post, Delivery::Done)
        } else {
            let local = mirror.range(base, end - base)?;
            let post = endpoint.write(local, peer, remote, event, link.seq)?;
            (post, Delivery::Pending)
        };
        Ok(match post {
            Post::Posted => delivered,
            Post::Again => Delivery::Again,
        })
    }
}

/// Stores into slots in memory shared with the target, mapped on the first slot: each
/// slot's header and data are stored, then its number, which tells the target the slot is
/// there. No libfabric call, and no lock the target holds: a target that has died leaves
/// its slots unread, and the writer finds out when they run out.
pub struct MemoryCarrier {
    pid: u32,
    name: u64,
    len: usize,
    map: Option<SharedMemory>,
}

impl SlotCarrier for MemoryCarrier {
    fn kind(&self) -> Carrier {
        Carrier::Memory
    }

    fn open(&mut self, _link: &Link<'_>, op: &str, to: usize, _ring: &Written) -> Result<()> {
        if self.map.is_none() {
            let opened = SharedMemory::open(self.pid, self.name, self.len).map_err(|e| {
                TransportError::Unreachable {
                    op: op.to_string(),
                    peer: to,
                    source: Box::new(e),
                }
            })?;
            self.map = Some(opened);
        }
        Ok(())
    }

    fn read_count(&self) -> std::result::Result<Option<u64>, FabricError> {
        self.map.as_ref().map(|map| map.load(0)).transpose()
    }

    fn fill_at(&self, slot: usize, slot_bytes: usize) -> Result<(&dyn SlotMemory, usize)> {
        let map = self
            .map
            .as_ref()
            .ok_or_else(|| FabricError::invalid("eager stores without memory"))?;
        Ok((map, SHARED_HEAD + slot * shared_stride(slot_bytes)))
    }

    fn deliver(
        &mut self,
        _link: &mut Link<'_>,
        _op: &str,
        _to: usize,
        slot: usize,
        base: usize,
        _end: usize,
        number: u64,
    ) -> Result<Delivery> {
        let Some(map) = self.map.as_ref() else {
            return Err(FabricError::invalid(format!(
                "an eager store into slot {slot} without memory"
            ))
            .into());
        };
        map.publish(base + NUMBER_AT, number)?;
        Ok(Delivery::Done)
    }
}

/// A writer's view of a target's receive slots for it: how many it wrote and were freed, and
/// how it reaches them.
pub struct Outbound {
    /// Slots written and freed.
    pub ring: Written,
    /// How slots reach the target.
    pub carrier: Box<dyn SlotCarrier>,
}

impl Outbound {
    /// The target's slots as its token named them (`inject`: the largest slot write to
    /// inject); an error if they are unusable.
    pub fn new(ring: &SlotRing, inject: usize) -> std::result::Result<Outbound, String> {
        let (slots, slot_bytes) = (ring.count as usize, ring.slot_bytes as usize);
        let needed = match ring.carrier {
            Carrier::Write => slots.saturating_mul(slot_bytes),
            Carrier::Memory => shared_len(slots, slot_bytes),
        };
        let fits = match ring.carrier {
            Carrier::Write => needed as u64 <= ring.region.len,
            Carrier::Memory => needed as u64 == ring.region.len,
        };
        if !(MIN_SLOTS..=MAX_SLOTS).contains(&slots)
            || !(MIN_SLOT_BYTES..=MAX_SLOT_BYTES).contains(&slot_bytes)
            || !fits
        {
            return Err(format!(
                "receive slots {} × {} bytes in a region of {}",
                slots, slot_bytes, ring.region.len
            ));
        }
        let carrier: Box<dyn SlotCarrier> = match ring.carrier {
            Carrier::Write => Box::new(WriteCarrier {
                region: ring.region,
                mirror: None,
                inject,
            }),
            Carrier::Memory => Box::new(MemoryCarrier {
                pid: u32::try_from(ring.region.base)
                    .map_err(|_| format!("receive slots of process {}", ring.region.base))?,
                name: ring.region.key,
                len: needed,
                map: None,
            }),
        };
        Ok(Outbound {
            ring: Written::new(slots, slot_bytes),
            carrier,
        })
    }

    /// Reads the target's read count where this writer reads it itself (shared memory):
    /// whether slots were freed.
    pub fn refresh(&mut self) -> std::result::Result<bool, String> {
        match self.carrier.read_count().map_err(|e| e.to_string())? {
            Some(read) => self.ring.observed(read),
            None => Ok(false),
        }
    }

    /// Takes the read count a slot from the target carried: whether slots were freed. A
    /// target whose slots this writer reads its count of itself carries none.
    pub fn carried(&mut self, read: u64) -> std::result::Result<bool, String> {
        if self.carrier.kind() == Carrier::Memory {
            return Err("credits in a slot header, for slots in shared memory".into());
        }
        self.ring.carried(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(count: u32, carrier: Carrier, len: u64) -> SlotRing {
        SlotRing {
            region: RemoteRegion {
                base: 42,
                len,
                key: 1,
            },
            count,
            slot_bytes: 512,
            carrier,
        }
    }

    #[test]
    fn a_token_names_usable_slots_or_is_refused() {
        let write = Outbound::new(&ring(16, Carrier::Write, 16 * 512), 0).unwrap();
        assert_eq!(write.carrier.kind(), Carrier::Write);
        assert_eq!((write.ring.slots, write.ring.slot_bytes), (16, 512));
        let exact = shared_len(4, 512) as u64;
        let memory = Outbound::new(&ring(4, Carrier::Memory, exact), 0).unwrap();
        assert_eq!(memory.carrier.kind(), Carrier::Memory);
        // Too many slots for the CQ data's slot field, a region too small, or a shared file
        // of another length.
        assert!(Outbound::new(&ring(64, Carrier::Write, 64 * 512), 0).is_err());
        assert!(Outbound::new(&ring(16, Carrier::Write, 100), 0).is_err());
        assert!(Outbound::new(&ring(4, Carrier::Memory, exact + 64), 0).is_err());
    }

    #[test]
    fn credits_ride_in_slots_only_where_the_writer_cannot_read_them() {
        let mut write = Outbound::new(&ring(4, Carrier::Write, 4 * 512), 0).unwrap();
        write.ring.written = 4;
        assert!(write.carried(2).unwrap());
        assert_eq!(write.ring.free(), 2);
        // Nothing mapped yet: nothing to read, nothing freed.
        assert!(!write.refresh().unwrap());
        let mut memory =
            Outbound::new(&ring(4, Carrier::Memory, shared_len(4, 512) as u64), 0).unwrap();
        assert!(memory.carried(1).unwrap_err().contains("shared memory"));
        assert!(!memory.refresh().unwrap());
    }
}
