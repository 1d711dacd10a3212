//! The eager path: small operations are written without a ready token into receive slots that
//! each target keeps, in library-owned memory, for every peer that writes to it.
//!
//! - **Which pairs.** Every pair of an operation whose size (`Problem::total_bytes`, equal on
//!   every rank) is at most the limit ([`EagerConfig::limit`], `CIRCULANT_EAGER_LIMIT`); in a
//!   larger one, each pair whose transfers carry at most the limit in total
//!   ([`super::EagerPairs`], chosen alike by both ranks when the plan is prepared). The digest
//!   of an operation prepared under a limit is marked with it ([`eager_digest`]), so ranks whose
//!   limits disagree fail with a mismatch instead of waiting for tokens that never come.
//! - **Lazy rings.** A target that keeps no slots for an eager writer yet allocates them
//!   ([`EagerConfig::slots`] slots of [`EagerConfig::slot_bytes`]) and sends the writer an
//!   ordinary ready token that also names the slots; that operation goes the zero-copy way.
//!   From then on the pair's eager transfers need no token. Memory per rank: (peers that
//!   write to it eagerly) × slots × slot bytes for the slots, and as much again as the local
//!   source of its own eager writes (one mirror per eager target written with RMA writes).
//! - **A slot** holds a header (full sequence number, round, digest, the writer's running
//!   slot number, the writes it completes, credits going back, and a table of segments:
//!   target buffer, offset, length; [`slot`]) followed by the data of one transfer's pieces,
//!   or of a part of them ([`pack`]): a transfer larger than a slot spans several, and a piece
//!   may be split between two. The slot that ends a transfer counts the transfer's merged
//!   writes, what the target expects had it come zero-copy. The target reads each writer's
//!   slots in order, so a transfer is counted once all of it is copied.
//! - **Carriers** ([`carrier`]): RMA writes with remote CQ data naming the sender and the slot
//!   ([`super::wire::Event::Slot`]), or stores into memory shared by target and writer (ranks
//!   of one host), where the slot's number, stored last, tells the target it is there.
//! - **Future operations.** A slot of an operation the target has not reached stays unread
//!   until it gets there (its writer is parked); a slot of one it has finished is a protocol
//!   error.
//! - **Credits** ([`ring`]). The writer counts slots written, the target slots read; the
//!   target's cumulative read count goes back along with its own slots to the writer, or as a
//!   [`credit word`](ring::credit_word) written into the writer's control region once half the
//!   ring was read since it last went back; through shared memory the writer reads it there.
//!   A writer without a free slot waits (progressing its completion queue, under the
//!   operation's deadline); it never overwrites a slot that was not read.
//!
//! The executor talks to this module through [`Eager`]: it posts a ready transfer
//! ([`Eager::post`]: done, try again, no credit), hands it the events of slots and credit
//! words, and lets it read what arrived ([`Eager::take`]) into the operation's buffers,
//! checked and counted by the operation through [`Receiver`].

pub mod carrier;
mod config;
mod inbound;
pub mod pack;
pub mod ring;
pub mod slot;

use crate::fabric::{Access, Completion, Endpoint, Post, RegisteredMemory};
use crate::plan::Piece;

use super::link::{protocol, Link};
use super::local::BufferViews;
use super::wire::{self, Event, SlotRing};
pub use super::wire::{Carrier, MAX_SLOTS};
use super::{Result, TransportError};
use carrier::{Delivery, Outbound, SlotMemory};
pub use config::{
    carrier_for, eager_digest, EagerConfig, COPY_SECONDS_PER_BYTE, DEFAULT_SLOTS,
    DEFAULT_SLOT_BYTES, MAX_LIMIT, MAX_SLOT_BYTES, MIN_SLOTS, MIN_SLOT_BYTES,
};
use inbound::Inbound;
pub use pack::Cursor;
use pack::{ends, pack_into, segment, Part};
pub use ring::read_credit_word;
use ring::{credit_word, Looks};
pub use slot::SlotHeader;
use slot::{Fixed, HEADER_BYTES, NUMBER_AT, SEGMENT_BYTES};

/// The context of credit word writes. No operation waits for them (a credit only serves later
/// operations), and their failure is forgiven: the writer they go to may have finished its last
/// operation and ended.
pub const CREDIT_CONTEXT: u64 = u64::MAX;

/// Whether a completion is one of this rank's writes that an operation counts (not a credit
/// word's).
pub(super) fn counts_as_local(c: &Completion) -> bool {
    c.context.is_some_and(|context| context != CREDIT_CONTEXT)
}

/// A transfer ready to go eagerly, as the operation describes it to [`Eager::post`].
#[derive(Clone, Copy, Debug)]
pub struct Transfer<'a> {
    /// The operation's name, for errors.
    pub op: &'a str,
    /// The target.
    pub to: usize,
    /// The operation's full sequence number.
    pub seq: u64,
    /// The operation's (eager) digest.
    pub digest: u64,
    /// The round its data belong to.
    pub round: u32,
    /// Its pieces.
    pub pieces: &'a [Piece],
    /// The merged writes the target counts for it.
    pub writes: usize,
}

/// How far posting a transfer got: what the operation records once [`Eager::post`]
/// returns, also when it fails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sent {
    /// Where the next slot of the transfer starts.
    pub cursor: Cursor,
    /// Slots posted in this call.
    pub slots: usize,
    /// Data bytes they carry (each copied into its slot).
    pub bytes: usize,
    /// Slots whose delivery will complete locally (the operation waits for them).
    pub pending: usize,
}

impl Sent {
    /// Nothing sent yet in this call; the transfer goes on at `cursor`.
    pub fn at(cursor: Cursor) -> Sent {
        Sent {
            cursor,
            ..Sent::default()
        }
    }

    fn slot(&mut self, next: Cursor, bytes: usize, delivery: Delivery) {
        self.cursor = next;
        self.slots += 1;
        self.bytes += bytes;
        self.pending += usize::from(delivery == Delivery::Pending);
    }
}

/// What posting a transfer's eager slots came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EagerPost {
    /// Every slot of the transfer was posted.
    Done,
    /// The provider's queue is full.
    Again,
    /// The target has no free slot: wait for its credits.
    NoCredit,
}

/// The operation in progress, as the reading of slots needs it: it decides which slots are
/// its own and counts their writes.
pub trait Receiver {
    /// The operation's name, for errors.
    fn op(&self) -> &str;
    /// Whether a slot with `header` from `from` belongs to the operation (`Ok(true)`) or to a
    /// later one (`Ok(false)`: it waits); an error for anything else.
    fn accept(&mut self, from: usize, header: &SlotHeader) -> Result<bool>;
    /// The data of an accepted slot are in place (`copied` bytes): counts its writes.
    fn arrived(&mut self, header: &SlotHeader, copied: usize) -> Result<()>;
    /// `to` freed receive slots a transfer of the operation may wait for.
    fn slots_freed(&mut self, to: usize);
}

/// A rank's eager state: its settings, the slots it keeps per writer and what it knows of
/// the slots its targets keep for it.
pub struct Eager {
    config: EagerConfig,
    /// Eager writes up to this size are injected (`fi_inject_writedata`: no local
    /// completion); 0 where injection is not to be trusted.
    inject: usize,
    /// How writers reach the receive slots this rank sets up for them.
    carrier: Carrier,
    /// Per writer, the slots kept for it.
    inbound: Vec<Option<Inbound>>,
    /// Per target, its slots for this rank, once a token named them.
    outbound: Vec<Option<Outbound>>,
    /// Which writers' slots to read next.
    looks: Looks,
    /// Credit words written and not completed yet.
    credit_writes: usize,
    /// Credit words posted since the transport was connected.
    credit_words: u64,
    /// Room for the parts of the slot being written and the header of the slot being read,
    /// kept from one to the next.
    parts: Vec<Part>,
    header: SlotHeader,
}

impl Eager {
    /// No slots among `size` ranks, the path off.
    pub fn new(size: usize) -> Eager {
        Eager {
            config: EagerConfig::OFF,
            inject: 0,
            carrier: Carrier::Write,
            inbound: (0..size).map(|_| None).collect(),
            outbound: (0..size).map(|_| None).collect(),
            looks: Looks::new(size),
            credit_writes: 0,
            credit_words: 0,
            parts: Vec::new(),
            header: SlotHeader::default(),
        }
    }

    /// Sets the settings for a job over `provider`, whose largest injected write is
    /// `inject_size`; receive slots kept already stay as they are.
    pub fn configure(&mut self, config: EagerConfig, provider: &str, inject_size: usize) {
        self.config = config;
        // Small slot writes are injected only over shm: sockets loses injected writes now and
        // then, and an injected write still queued in tcp;ofi_rxm when the endpoint closes
        // crashed the process once (docs/architecture.md, provider findings).
        self.inject = if provider == "shm" { inject_size } else { 0 };
        self.carrier = carrier_for(provider, config.memory);
    }

    /// The settings.
    pub fn config(&self) -> EagerConfig {
        self.config
    }

    /// How writers reach the receive slots this rank sets up for them from now on.
    pub fn carrier(&self) -> Carrier {
        self.carrier
    }

    /// Credit words posted since the transport was connected.
    pub fn credit_words(&self) -> u64 {
        self.credit_words
    }

    /// How this rank reaches `to`'s slots for it, once a token named them.
    pub fn carrier_to(&self, to: usize) -> Option<Carrier> {
        self.outbound
            .get(to)?
            .as_ref()
            .map(|out| out.carrier.kind())
    }

    /// Whether this rank keeps receive slots for `writer`.
    pub fn keeps_slots_for(&self, writer: usize) -> bool {
        self.inbound.get(writer).is_some_and(Option::is_some)
    }

    /// Whether this rank knows `to`'s slots for it (a token named them).
    pub fn knows_slots(&self, to: usize) -> bool {
        self.outbound.get(to).is_some_and(Option::is_some)
    }

    /// A new operation began: slots that waited for it are read on its first pass.
    pub fn begin(&mut self) {
        self.looks.unpark();
    }

    /// The slots to name in the ready token for `writer`, or `None` if it gets no token: in
    /// an operation where `writer` writes `eager`ly, a writer that knows this rank's slots
    /// needs none; one that does not gets them now (allocated on first use), registered with
    /// `endpoint` (the fabric that reaches the writer) or, for a writer `on_host` where
    /// memory may be shared, in shared memory.
    pub fn token_slots(
        &mut self,
        endpoint: &Endpoint,
        writer: usize,
        eager: bool,
        on_host: bool,
    ) -> Result<Option<SlotRing>> {
        if let Some(ring) = &self.inbound[writer] {
            return Ok((!eager).then(|| ring.ring()));
        }
        if !eager {
            return Ok(Some(SlotRing::NONE));
        }
        let EagerConfig {
            slots, slot_bytes, ..
        } = self.config;
        let carrier = if on_host && self.config.memory {
            Carrier::Memory
        } else {
            Carrier::Write
        };
        let ring = match carrier {
            Carrier::Write => {
                let len = self.config.ring_bytes().max(1);
                let mem = RegisteredMemory::for_endpoint(endpoint, len, Access::RemoteWrite)?;
                Inbound::registered(mem, slots, slot_bytes)
            }
            Carrier::Memory => {
                // No event tells what a writer stores: its slots are looked at on every pass.
                self.looks.watch(writer);
                Inbound::shared(slots, slot_bytes)?
            }
        };
        let named = ring.ring();
        self.inbound[writer] = Some(ring);
        Ok(Some(named))
    }

    /// Records the slots a token from `from` names (the first token that names them counts).
    pub fn learn(&mut self, from: usize, ring: &SlotRing) -> std::result::Result<(), String> {
        if ring.is_none() || self.knows_slots(from) {
            return Ok(());
        }
        self.outbound[from] = Some(Outbound::new(ring, self.inject)?);
        Ok(())
    }

    /// Notes that `from` wrote into its slot `slot` of this rank.
    pub fn slot_arrived(&mut self, from: usize, slot: u8) -> std::result::Result<(), String> {
        let Some(ring) = self.inbound.get_mut(from).and_then(|r| r.as_mut()) else {
            return Err(format!(
                "an eager write from rank {from}, for which this rank keeps no slots"
            ));
        };
        if ring.is_shared() {
            return Err(format!(
                "an eager write event from rank {from}, whose slots are in shared memory"
            ));
        }
        ring.reads
            .arrive(usize::from(slot))
            .map_err(|what| format!("rank {from}: {what}"))?;
        self.looks.queue(from);
        Ok(())
    }

    /// Takes the count of a credit word from `from` (`None`: the word was torn, being
    /// overwritten; the newer write's own event follows).
    pub fn credit(&mut self, from: usize, low: Option<u32>) -> std::result::Result<(), String> {
        let Some(out) = self.outbound.get_mut(from).and_then(|o| o.as_mut()) else {
            return Err(format!(
                "credits from rank {from}, whose slots this rank does not use"
            ));
        };
        if out.carrier.kind() == Carrier::Memory {
            return Err(format!(
                "a credit word from rank {from}, whose slots are in shared memory"
            ));
        }
        match low {
            Some(low) => out
                .ring
                .credit(low)
                .map_err(|what| format!("rank {from}: {what}")),
            None => Ok(()),
        }
    }

    /// A credit word's write completed (or failed).
    pub fn credit_write_done(&mut self) {
        self.credit_writes = self.credit_writes.saturating_sub(1);
    }

    /// Credit words written and not completed yet.
    pub fn credit_writes(&self) -> usize {
        self.credit_writes
    }

    /// Posts the next slots of `transfer` (to a target whose slots this rank knows), as many
    /// as the target has free, from where `sent` says it stands; `sent` records what went.
    /// The one posting loop of every carrier: pack the next slot, make the carrier ready,
    /// wait for a free slot, fill the slot's header, table and data (all but its number), and
    /// let the carrier deliver it.
    pub fn post(
        &mut self,
        link: &mut Link<'_>,
        transfer: &Transfer<'_>,
        buffers: &BufferViews<'_>,
        sent: &mut Sent,
    ) -> Result<EagerPost> {
        let to = transfer.to;
        loop {
            let Some(out) = self.outbound.get_mut(to).and_then(Option::as_mut) else {
                return Err(protocol(
                    transfer.op,
                    format!("an eager write to rank {to} without its slots"),
                ));
            };
            let slot_bytes = out.ring.slot_bytes;
            let Some(next) = pack_into(transfer.pieces, sent.cursor, slot_bytes, &mut self.parts)
            else {
                return Ok(EagerPost::Done);
            };
            // The slot that ends the transfer counts its writes, in a 32-bit field.
            let writes = if ends(transfer.pieces, next) {
                u32::try_from(transfer.writes).map_err(|_| {
                    protocol(
                        transfer.op,
                        format!(
                            "{} writes in one eager transfer to rank {to}",
                            transfer.writes
                        ),
                    )
                })?
            } else {
                0
            };
            out.carrier.open(link, transfer.op, to, &out.ring)?;
            if out.ring.free() == 0 && !out.refresh().map_err(|what| protocol(transfer.op, what))? {
                return Ok(EagerPost::NoCredit);
            }
            // The target's credits go along where slots are written: what this rank read of
            // its slots for the target, unless the target reads that count in shared memory.
            let credit = match out.carrier.kind() {
                Carrier::Write => self.inbound[to]
                    .as_ref()
                    .filter(|ring| !ring.is_shared())
                    .map(|ring| ring.reads.read),
                Carrier::Memory => None,
            };
            let number = out.ring.written;
            let slot = out.ring.next_slot();
            // `pack_into` puts at most u16::MAX parts in a slot.
            let fixed = Fixed::new(
                transfer.seq,
                transfer.digest,
                number,
                transfer.round,
                self.parts.len() as u16,
                writes,
                credit.unwrap_or(0),
            );
            let (mem, base) = out.carrier.fill_at(slot, slot_bytes)?;
            let (end, bytes) = fill_slot(
                mem,
                base,
                &fixed,
                &self.parts,
                transfer.pieces,
                buffers,
                transfer.op,
            )?;
            let delivery = out
                .carrier
                .deliver(link, transfer.op, to, slot, base, end, number)?;
            if delivery == Delivery::Again {
                return Ok(EagerPost::Again);
            }
            out.ring.written += 1;
            sent.slot(next, bytes, delivery);
            if let (Some(read), Some(ring)) = (credit, self.inbound[to].as_mut()) {
                ring.reads.carried(read);
            }
        }
    }

    /// Whether `to`, whose slots a transfer waits for, freed some (read in shared memory);
    /// a target through shared memory whose process has ended is an error, as nothing else
    /// would tell.
    pub fn look_for_free_slots(&mut self, link: &Link<'_>, op: &str, to: usize) -> Result<bool> {
        let Some(out) = self.outbound.get_mut(to).and_then(Option::as_mut) else {
            return Ok(false);
        };
        if out.refresh().map_err(|what| protocol(op, what))? {
            return Ok(true);
        }
        if out.carrier.kind() == Carrier::Memory && link.peers.ended(to) {
            return Err(TransportError::Exited {
                op: op.to_string(),
                peer: to,
            });
        }
        Ok(false)
    }

    /// Reads the slots that arrived, in order per writer, for as long as `receiver` accepts
    /// them: checks each header, copies the data into place and has their writes counted;
    /// gives credits back when due. Whether anything was read.
    pub fn take(
        &mut self,
        link: &mut Link<'_>,
        buffers: &BufferViews<'_>,
        receiver: &mut impl Receiver,
    ) -> Result<bool> {
        let mut progress = false;
        let mut owed = Vec::new();
        let inbound = &self.inbound;
        self.looks
            .poll(|writer| inbound[writer].as_ref().is_some_and(|r| r.head().is_some()));
        while let Some(from) = self.looks.next() {
            while let Some(ring) = self.inbound[from].as_ref() {
                let Some(slot) = ring.head() else {
                    break;
                };
                let bytes = ring.slot(slot)?;
                let header = &mut self.header;
                header
                    .read(bytes)
                    .map_err(|what| protocol(receiver.op(), format!("rank {from}: {what}")))?;
                if header.number != ring.reads.read {
                    return Err(protocol(
                        receiver.op(),
                        format!(
                            "rank {from}'s eager write number {} in the place of number {}",
                            header.number, ring.reads.read
                        ),
                    ));
                }
                // Credits it carries count whichever operation the slot belongs to.
                if header.credit > 0 {
                    let Some(out) = self.outbound[from].as_mut() else {
                        return Err(protocol(
                            receiver.op(),
                            format!("credits from rank {from}, whose slots this rank does not use"),
                        ));
                    };
                    let freed = out
                        .carried(header.credit)
                        .map_err(|what| protocol(receiver.op(), format!("rank {from}: {what}")))?;
                    if freed {
                        receiver.slots_freed(from);
                    }
                }
                if !receiver.accept(from, header)? {
                    self.looks.park(from);
                    break;
                }
                let mut at = header.table_end();
                let mut copied = 0;
                for seg in &header.segments {
                    let view = buffers.view(receiver.op(), seg.dst)?;
                    let (offset, len) = (seg.offset as usize, seg.len as usize);
                    if offset.checked_add(len).map_or(true, |end| end > view.len) {
                        return Err(TransportError::Mismatch {
                            op: receiver.op().to_string(),
                            peer: from,
                        });
                    }
                    view.mem.store(view.offset + offset, &bytes[at..at + len])?;
                    at += len;
                    copied += len;
                }
                receiver.arrived(header, copied)?;
                if let Some(ring) = self.inbound[from].as_mut() {
                    ring.consume()?;
                }
                progress = true;
            }
            if !self.return_credits(link, from)? {
                owed.push(from);
            }
        }
        for from in owed {
            self.looks.queue(from);
        }
        Ok(progress)
    }

    /// Sends `from` the count of its slots read, if due; false if the provider's queue was
    /// full (it is tried again on the next pass).
    fn return_credits(&mut self, link: &mut Link<'_>, from: usize) -> Result<bool> {
        let Some(ring) = self.inbound[from].as_mut() else {
            return Ok(true);
        };
        // A writer through shared memory reads the count itself.
        if ring.is_shared() || !ring.reads.credits_due() {
            return Ok(true);
        }
        let read = ring.reads.read;
        // Credits only serve later operations: a writer may have finished its last one and
        // ended, and that is no failure of this one.
        if link.peers.ended_now(from) {
            ring.reads.returning(true);
            return Ok(true);
        }
        let word = credit_word(read);
        let remote = link
            .peers
            .control(from)?
            .range(wire::credit_in(link.size, link.rank) as u64, 8)?;
        let event = Some(Event::Credit { from: link.rank }.encode());
        // Not injected: an injected write that fails has no context to tell it from a failed
        // data write. The source may be overwritten by the next word while this write is in
        // flight: the target then reads that newer count, or a torn word it ignores.
        let out = wire::credit_out(link.size, from);
        link.control.store(out, &word)?;
        let local = link.control.range(out, word.len())?;
        let post = link.endpoint_to(from)?.write(
            local,
            link.peers.address(from)?,
            remote,
            event,
            CREDIT_CONTEXT,
        );
        // A writer that is gone needs no credits; one that is not and never gets them fails
        // at its deadline.
        let posted = !matches!(post, Ok(Post::Again));
        if matches!(post, Ok(Post::Posted)) {
            self.credit_writes += 1;
            self.credit_words += 1;
            link.count(from, 1, 0);
        }
        if let Some(ring) = self.inbound[from].as_mut() {
            ring.reads.returning(posted);
        }
        Ok(posted)
    }
}

/// Fills the slot at `base` of `mem` with the fixed header (all but its number, which the
/// carrier stores last), the segment table of `parts` of `pieces` and their data from
/// `buffers`; returns where the slot's bytes end and how many data bytes it carries.
fn fill_slot(
    mem: &dyn SlotMemory,
    base: usize,
    fixed: &Fixed,
    parts: &[Part],
    pieces: &[Piece],
    buffers: &BufferViews<'_>,
    op: &str,
) -> Result<(usize, usize)> {
    let header = fixed.as_bytes();
    mem.put(base, &header[..NUMBER_AT])?;
    mem.put(base + NUMBER_AT + 8, &header[NUMBER_AT + 8..])?;
    let mut at = base + HEADER_BYTES;
    for part in parts {
        mem.put(at, &segment(pieces, part).to_bytes())?;
        at += SEGMENT_BYTES;
    }
    let mut data = 0;
    for part in parts {
        let piece = &pieces[part.piece];
        let src = buffers.view(op, piece.src)?;
        mem.put_from(
            at,
            src.mem,
            src.offset + piece.src_offset + part.offset,
            part.len,
        )?;
        at += part.len;
        data += part.len;
    }
    Ok((at, data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::RemoteRegion;

    const SIZE: usize = 3;

    fn ring(count: u32) -> SlotRing {
        SlotRing {
            region: RemoteRegion {
                base: 0,
                len: u64::from(count) * 512,
                key: 1,
            },
            count,
            slot_bytes: 512,
            carrier: Carrier::Write,
        }
    }

    #[test]
    fn the_default_limit_follows_the_model_and_one_slot() {
        // shm: 1 µs against 2 × 0.1 ns/B.
        let shm = EagerConfig::new(1e-6, None, None, None);
        assert_eq!(shm.limit, 5000);
        assert!(shm.applies(5000) && !shm.applies(5001) && shm.applies(1));
        // sockets: 20 µs would allow 100 kB; one slot holds less.
        let tcp = EagerConfig::new(2e-5, None, None, None);
        assert_eq!(tcp.limit, DEFAULT_SLOT_BYTES - HEADER_BYTES - SEGMENT_BYTES);
        let off = EagerConfig::new(1e-6, Some(0), None, None);
        assert!(!off.applies(0) && !off.applies(1));
        let forced = EagerConfig::new(1e-6, Some(1 << 20), Some(4), Some(1024));
        assert_eq!(
            (forced.limit, forced.slots, forced.slot_bytes),
            (1 << 20, 4, 1024)
        );
        assert_eq!(forced.ring_bytes(), 4096);
        let clamped = EagerConfig::new(1e-6, None, Some(1000), Some(1));
        assert_eq!(
            (clamped.slots, clamped.slot_bytes),
            (MAX_SLOTS, MIN_SLOT_BYTES)
        );
    }

    #[test]
    fn eager_digests_differ_from_plain_ones() {
        assert_ne!(eager_digest(7, 64), 7);
        assert_eq!(eager_digest(7, 64), eager_digest(7, 64));
        assert_ne!(eager_digest(7, 64), eager_digest(8, 64));
        // Ranks whose limits differ choose their eager pairs differently: their digests differ.
        assert_ne!(eager_digest(7, 64), eager_digest(7, 65));
    }

    #[test]
    fn injection_and_carriers_follow_the_provider() {
        let mut eager = Eager::new(SIZE);
        let config = EagerConfig::new(1e-6, None, None, None);
        eager.configure(config, "shm", 4096);
        assert_eq!((eager.inject, eager.carrier()), (4096, Carrier::Memory));
        eager.configure(
            EagerConfig {
                memory: false,
                ..config
            },
            "shm",
            4096,
        );
        assert_eq!(eager.carrier(), Carrier::Write);
        eager.configure(config, "tcp;ofi_rxm", 64);
        assert_eq!((eager.inject, eager.carrier()), (0, Carrier::Write));
        assert_eq!(eager.config(), config);
    }

    #[test]
    fn arrivals_and_credits_from_strangers_are_protocol_errors() {
        let mut eager = Eager::new(SIZE);
        assert!(eager
            .slot_arrived(2, 0)
            .unwrap_err()
            .contains("keeps no slots"));
        assert!(eager
            .slot_arrived(SIZE + 5, 0)
            .unwrap_err()
            .contains("keeps no slots"));
        assert!(eager
            .credit(1, Some(1))
            .unwrap_err()
            .contains("does not use"));
        // Slots named by a token are known from then on; the first token's slots count.
        assert!(!eager.knows_slots(1));
        eager.learn(1, &SlotRing::NONE).unwrap();
        assert!(!eager.knows_slots(1));
        eager.learn(1, &ring(4)).unwrap();
        assert!(eager.knows_slots(1));
        eager.learn(1, &ring(8)).unwrap();
        let out = eager.outbound[1].as_ref().unwrap();
        assert_eq!(out.ring.slots, 4);
        // A torn credit word changes nothing; a whole one frees what was read.
        eager.credit(1, None).unwrap();
        assert_eq!(eager.outbound[1].as_ref().unwrap().ring.freed, 0);
        eager.outbound[1].as_mut().unwrap().ring.written = 4;
        eager.credit(1, Some(2)).unwrap();
        assert_eq!(eager.outbound[1].as_ref().unwrap().ring.free(), 2);
        assert!(eager.credit(1, Some(9)).is_err());
        // Slots too large for the CQ data's slot field are refused when learned.
        assert!(Eager::new(SIZE).learn(1, &ring(64)).is_err());
    }

    #[test]
    fn credit_writes_are_counted_until_done() {
        let mut eager = Eager::new(SIZE);
        eager.credit_writes = 2;
        eager.credit_write_done();
        assert_eq!(eager.credit_writes(), 1);
        eager.credit_write_done();
        eager.credit_write_done();
        assert_eq!(eager.credit_writes(), 0);
    }
}
