//! The eager path: small operations are written without a ready token into receive slots that
//! each target keeps, in library-owned registered memory, for every peer that writes to it.
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
//!   From then on the pair's eager transfers need no token. Memory per
//!   rank: (peers that write to it eagerly) × slots × slot bytes for the slots, and as much
//!   again as the local source of its own eager writes (one mirror per eager target).
//! - **A slot** holds a [`SlotHeader`] (full sequence number, round, digest, the writer's running
//!   slot number, the writes it completes, and a table of segments: target buffer, offset,
//!   length) followed by the data of one transfer's pieces, or of a part of them: a transfer
//!   larger than a slot spans several, and a piece may be split between two. The slot that
//!   ends a transfer counts the transfer's merged writes, what the target expects had it come
//!   zero-copy. The write's CQ data names the sender and the slot
//!   ([`super::wire::Event::Slot`]); writes may complete in any order, but the target reads
//!   each writer's slots in order, so a transfer is counted once all of it is copied.
//! - **Future operations.** A slot of an operation the target has not reached stays unread
//!   until it gets there; a slot of one it has finished is a protocol error.
//! - **Credits.** The writer counts slots written, the target slots read; the target returns
//!   its read count (a cumulative counter, so reordering does not matter) once half the ring
//!   was read since it last did, as a write of a [`credit word`](credit_word) into the writer's
//!   control region. A writer without a free slot waits (progressing its completion queue,
//!   under the operation's deadline); it never overwrites a slot that was not read.

use crate::fabric::{Access, Completion, FabricError, Post, RegisteredMemory, RemoteRegion};
use crate::plan::{Buf, Piece};

use super::local::BufferViews;
use super::run::{Ready, Run};
use super::waiting::{DRAIN, WAIT_SLICE};
pub use super::wire::MAX_SLOTS;
use super::wire::{self, Digest, Event, SlotRing};
use super::{Result, Transport, TransportError};

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

/// Fixed part of a slot header.
pub const HEADER_BYTES: usize = 40;
/// One segment of the header's table.
pub const SEGMENT_BYTES: usize = 16;

/// The context of credit word writes. No operation waits for them (a credit only serves later
/// operations), and their failure is forgiven: the writer they go to may have finished its last
/// operation and ended.
pub const CREDIT_CONTEXT: u64 = u64::MAX;

/// Whether a completion is one of this rank's writes that an operation counts (not a credit
/// word's).
pub(super) fn counts_as_local(c: &Completion) -> bool {
    c.context.is_some_and(|context| context != CREDIT_CONTEXT)
}

/// Marks a slot header, so that a slot that holds anything else is refused.
const MAGIC: u32 = 0x6561_6772;

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
}

impl EagerConfig {
    /// The eager path turned off.
    pub const OFF: EagerConfig = EagerConfig {
        limit: 0,
        slots: DEFAULT_SLOTS,
        slot_bytes: DEFAULT_SLOT_BYTES,
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

/// The digest an operation prepared under eager `limit` carries: the call's digest, marked
/// with the limit, so that ranks that would choose their eager pairs differently disagree.
pub fn eager_digest(digest: u64, limit: usize) -> u64 {
    Digest::default()
        .word(digest)
        .text("eager")
        .word(limit as u64)
        .finish()
}

/// One run of bytes in a slot: goes to `offset` of the target's `dst` buffer; `last` when it
/// ends its piece.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The target's buffer.
    pub dst: Buf,
    /// Offset in that buffer.
    pub offset: u64,
    /// Bytes.
    pub len: u32,
    /// The last bytes of a piece.
    pub last: bool,
}

/// What a slot says about its contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotHeader {
    /// The operation's full sequence number.
    pub seq: u64,
    /// The operation's (eager) digest.
    pub digest: u64,
    /// The writer's running count of slots written to this target before this one.
    pub number: u64,
    /// The round the data belong to.
    pub round: u32,
    /// Writes of the plan that arrive with this slot: the merged writes of the transfer it
    /// ends (the count its target expects whichever way the transfer came), else 0.
    pub writes: u32,
    /// Where the data go, in the order they follow the header.
    pub segments: Vec<Segment>,
}

impl SlotHeader {
    /// Bytes of the header with its segment table.
    pub fn table_end(&self) -> usize {
        HEADER_BYTES + SEGMENT_BYTES * self.segments.len()
    }

    /// Bytes of data after the header.
    pub fn data_len(&self) -> usize {
        self.segments.iter().map(|s| s.len as usize).sum()
    }

    /// The header and its segment table as they start a slot.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.table_end());
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.digest.to_le_bytes());
        out.extend_from_slice(&self.number.to_le_bytes());
        out.extend_from_slice(&self.round.to_le_bytes());
        out.extend_from_slice(&(self.segments.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.writes.to_le_bytes());
        out.extend_from_slice(&MAGIC.to_le_bytes());
        for s in &self.segments {
            out.extend_from_slice(&s.offset.to_le_bytes());
            out.extend_from_slice(&s.len.to_le_bytes());
            out.push(match s.dst {
                Buf::Recv => 1,
                Buf::Scratch => 2,
                Buf::Send => 0,
            });
            out.push(u8::from(s.last));
            out.extend_from_slice(&[0, 0]);
        }
        out
    }

    /// Decodes the header at the start of a slot of `slot.len()` bytes; an error says what is
    /// wrong with it.
    pub fn from_bytes(slot: &[u8]) -> std::result::Result<SlotHeader, String> {
        if slot.len() < HEADER_BYTES {
            return Err(format!("a receive slot of {} bytes", slot.len()));
        }
        let u64_at = |i: usize| {
            let mut w = [0; 8];
            w.copy_from_slice(&slot[i..i + 8]);
            u64::from_le_bytes(w)
        };
        let u32_at = |i: usize| {
            let mut w = [0; 4];
            w.copy_from_slice(&slot[i..i + 4]);
            u32::from_le_bytes(w)
        };
        let u16_at = |i: usize| u16::from_le_bytes([slot[i], slot[i + 1]]);
        if u32_at(36) != MAGIC {
            return Err("an eager write without a slot header".into());
        }
        let count = usize::from(u16_at(28));
        let table_end = HEADER_BYTES + count * SEGMENT_BYTES;
        if table_end > slot.len() {
            return Err(format!("a slot header with {count} segments"));
        }
        let mut segments = Vec::with_capacity(count);
        for k in 0..count {
            let at = HEADER_BYTES + k * SEGMENT_BYTES;
            let dst = match slot[at + 12] {
                1 => Buf::Recv,
                2 => Buf::Scratch,
                b => return Err(format!("an eager segment into buffer kind {b}")),
            };
            segments.push(Segment {
                offset: u64_at(at),
                len: u32_at(at + 8),
                dst,
                last: slot[at + 13] != 0,
            });
        }
        let header = SlotHeader {
            seq: u64_at(0),
            digest: u64_at(8),
            number: u64_at(16),
            round: u32_at(24),
            writes: u32_at(32),
            segments,
        };
        let data = header.data_len();
        if table_end + data > slot.len() {
            return Err(format!(
                "a slot header announcing {data} data bytes in a slot of {}",
                slot.len()
            ));
        }
        // Writes arrive with the slot that ends a transfer: its last bytes end a piece.
        if header.writes > 0 && !header.segments.last().is_some_and(|s| s.last) {
            return Err(format!(
                "a slot header counting {} writes before its transfer ends",
                header.writes
            ));
        }
        Ok(header)
    }
}

/// Where the eager posting of a transfer stands: the piece and the bytes of it already sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cursor {
    /// Index of the piece in its transfer.
    pub piece: usize,
    /// Bytes of that piece sent already.
    pub offset: usize,
}

/// A run of one piece that goes into a slot: `len` bytes from `offset` within piece `piece`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    /// Index of the piece in its transfer.
    pub piece: usize,
    /// Where the part starts in the piece.
    pub offset: usize,
    /// Bytes.
    pub len: usize,
    /// The part ends its piece.
    pub last: bool,
}

/// What the next slot of a transfer carries: as many parts as fit in `slot_bytes` (header,
/// table and data), starting at `from`; and where the following slot starts. `None` when the
/// transfer is all sent. Empty pieces are skipped (signals never go eager).
pub fn pack(pieces: &[Piece], from: Cursor, slot_bytes: usize) -> Option<(Vec<Part>, Cursor)> {
    let mut cursor = from;
    while cursor.piece < pieces.len() && pieces[cursor.piece].len == cursor.offset {
        cursor = Cursor {
            piece: cursor.piece + 1,
            offset: 0,
        };
    }
    if cursor.piece >= pieces.len() {
        return None;
    }
    let mut used = HEADER_BYTES;
    let mut parts = Vec::new();
    while cursor.piece < pieces.len() {
        let piece = &pieces[cursor.piece];
        let left = piece.len - cursor.offset;
        if left == 0 {
            cursor = Cursor {
                piece: cursor.piece + 1,
                offset: 0,
            };
            continue;
        }
        // A segment needs its table entry and at least one byte of room.
        if used + SEGMENT_BYTES >= slot_bytes || parts.len() == usize::from(u16::MAX) {
            break;
        }
        let room = slot_bytes - used - SEGMENT_BYTES;
        let len = left.min(room).min(u32::MAX as usize);
        let last = len == left;
        parts.push(Part {
            piece: cursor.piece,
            offset: cursor.offset,
            len,
            last,
        });
        used += SEGMENT_BYTES + len;
        cursor = if last {
            Cursor {
                piece: cursor.piece + 1,
                offset: 0,
            }
        } else {
            Cursor {
                piece: cursor.piece,
                offset: cursor.offset + len,
            }
        };
        if !last {
            break;
        }
    }
    Some((parts, cursor))
}

/// Whether nothing of `pieces` is left from `cursor` on (empty pieces are never sent).
pub fn ends(pieces: &[Piece], cursor: Cursor) -> bool {
    pieces.iter().enumerate().skip(cursor.piece).all(|(k, p)| {
        let sent = if k == cursor.piece { cursor.offset } else { 0 };
        p.len == sent
    })
}

/// The header segments of `parts` of `pieces`.
pub fn segments(pieces: &[Piece], parts: &[Part]) -> Vec<Segment> {
    parts
        .iter()
        .map(|p| {
            let piece = &pieces[p.piece];
            Segment {
                dst: piece.dst,
                offset: (piece.dst_offset + p.offset) as u64,
                len: p.len as u32,
                last: p.last,
            }
        })
        .collect()
}

/// A credit word: the low 32 bits of a target's read count, and their complement, so that a
/// word read while the next one lands (a torn read) is recognised and ignored.
pub fn credit_word(read: u64) -> [u8; wire::CREDIT_BYTES] {
    let low = read as u32;
    let mut out = [0; wire::CREDIT_BYTES];
    out[..4].copy_from_slice(&low.to_le_bytes());
    out[4..].copy_from_slice(&(!low).to_le_bytes());
    out
}

/// The 32 bits a credit word carries, or `None` if it is torn.
pub fn read_credit_word(bytes: &[u8; wire::CREDIT_BYTES]) -> Option<u32> {
    let low = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let check = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    (check == !low).then_some(low)
}

/// How far a target has read one writer's slots, and which have arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reads {
    /// Slots whose write has arrived and that were not read yet.
    arrived: Vec<bool>,
    /// Slots read so far (the next one to read is `read % slots`).
    pub read: u64,
    /// The read count last sent to the writer.
    pub returned: u64,
    /// A credit word is due but could not be posted yet (full transmit queue).
    pub owed: bool,
}

impl Reads {
    /// Nothing read yet of `slots` slots.
    pub fn new(slots: usize) -> Reads {
        Reads {
            arrived: vec![false; slots],
            read: 0,
            returned: 0,
            owed: false,
        }
    }

    fn slots(&self) -> usize {
        self.arrived.len()
    }

    /// Notes that the write into `slot` arrived.
    pub fn arrive(&mut self, slot: usize) -> std::result::Result<(), String> {
        let slots = self.slots();
        match self.arrived.get_mut(slot) {
            None => Err(format!("an eager write into slot {slot} of {slots}")),
            Some(true) => Err(format!(
                "an eager write into slot {slot}, which was not read yet"
            )),
            Some(a) => {
                *a = true;
                Ok(())
            }
        }
    }

    /// The slot to read next, if its write has arrived.
    pub fn head(&self) -> Option<usize> {
        let slot = (self.read % self.slots() as u64) as usize;
        self.arrived[slot].then_some(slot)
    }

    /// The head slot was read.
    pub fn consume(&mut self) {
        let slot = (self.read % self.slots() as u64) as usize;
        self.arrived[slot] = false;
        self.read += 1;
    }

    /// Whether the writer should get its credits back: half the ring was read since the last
    /// return (or a return could not be posted).
    pub fn credits_due(&self) -> bool {
        self.owed || self.read - self.returned >= (self.slots() / 2).max(1) as u64
    }
}

/// A target's receive slots for one writer.
pub struct Inbound {
    /// The slots, registered for remote writes.
    pub mem: RegisteredMemory,
    /// Bytes of one slot.
    pub slot_bytes: usize,
    /// How far they were read.
    pub reads: Reads,
}

impl Inbound {
    /// `slots` slots of `slot_bytes` in `mem`.
    pub fn new(mem: RegisteredMemory, slots: usize, slot_bytes: usize) -> Inbound {
        Inbound {
            mem,
            slot_bytes,
            reads: Reads::new(slots),
        }
    }

    /// What the writer needs to know about these slots.
    pub fn ring(&self) -> SlotRing {
        SlotRing {
            region: self.mem.remote(),
            count: self.reads.slots() as u32,
            slot_bytes: self.slot_bytes as u32,
        }
    }

    /// The bytes of `slot`.
    pub fn slot(&self, slot: usize) -> &[u8] {
        let at = slot * self.slot_bytes;
        &self.mem.as_slice()[at..at + self.slot_bytes]
    }
}

/// A writer's view of a target's receive slots for it.
pub struct Outbound {
    /// Where the slots are.
    pub region: RemoteRegion,
    /// How many.
    pub slots: usize,
    /// Bytes of one.
    pub slot_bytes: usize,
    /// The local source of eager writes: one mirror slot per receive slot (allocated on the
    /// first eager write).
    pub mirror: Option<RegisteredMemory>,
    /// Slots written so far.
    pub written: u64,
    /// Slots the target reported read.
    pub freed: u64,
}

impl Outbound {
    /// The target's slots as its token named them; an error if they are unusable.
    pub fn new(ring: &SlotRing) -> std::result::Result<Outbound, String> {
        let (slots, slot_bytes) = (ring.count as usize, ring.slot_bytes as usize);
        if !(MIN_SLOTS..=MAX_SLOTS).contains(&slots)
            || !(MIN_SLOT_BYTES..=MAX_SLOT_BYTES).contains(&slot_bytes)
            || (slots * slot_bytes) as u64 > ring.region.len
        {
            return Err(format!(
                "receive slots {} × {} bytes in a region of {}",
                slots, slot_bytes, ring.region.len
            ));
        }
        Ok(Outbound {
            region: ring.region,
            slots,
            slot_bytes,
            mirror: None,
            written: 0,
            freed: 0,
        })
    }

    /// Slots that may be written now.
    pub fn free(&self) -> usize {
        self.slots - (self.written - self.freed) as usize
    }

    /// The slot the next write goes into.
    pub fn next_slot(&self) -> usize {
        (self.written % self.slots as u64) as usize
    }

    /// Takes a credit word's count (the low 32 bits of the target's read count): the count is
    /// cumulative, so an older word than one already seen changes nothing.
    pub fn credit(&mut self, low: u32) -> std::result::Result<(), String> {
        let behind = u64::from((self.written as u32).wrapping_sub(low));
        if behind > self.written || behind > self.slots as u64 {
            return Err(format!(
                "credits for {low} slots read (low bits), {} written",
                self.written
            ));
        }
        self.freed = self.freed.max(self.written - behind);
        Ok(())
    }
}

/// A transport's eager state: its settings, the slots it keeps per writer and what it knows of
/// the slots its targets keep for it.
pub struct Eager {
    /// The settings.
    pub config: EagerConfig,
    /// Per writer, the slots kept for it.
    pub inbound: Vec<Option<Inbound>>,
    /// Per target, its slots for this rank, once a token named them.
    pub outbound: Vec<Option<Outbound>>,
    /// Writers whose slots should be looked at (something arrived).
    queued: Vec<usize>,
    queued_flag: Vec<bool>,
    /// Writers whose next slot belongs to an operation that has not begun.
    pub parked: Vec<usize>,
    /// Eager writes up to this size are injected (`fi_inject_writedata`: no local
    /// completion); 0 where injection is not to be trusted.
    pub inject: usize,
    /// Credit words written and not completed yet.
    pub credit_writes: usize,
}

impl Eager {
    /// No slots among `size` ranks, the path off.
    pub fn new(size: usize) -> Eager {
        Eager {
            config: EagerConfig::OFF,
            inbound: (0..size).map(|_| None).collect(),
            outbound: (0..size).map(|_| None).collect(),
            queued: Vec::new(),
            queued_flag: vec![false; size],
            parked: Vec::new(),
            inject: 0,
            credit_writes: 0,
        }
    }

    /// A credit word's write completed (or failed).
    pub fn credit_write_done(&mut self) {
        self.credit_writes = self.credit_writes.saturating_sub(1);
    }

    /// Marks `writer`'s slots to be looked at.
    pub fn queue(&mut self, writer: usize) {
        if !self.queued_flag[writer] {
            self.queued_flag[writer] = true;
            self.queued.push(writer);
        }
    }

    /// The next writer to look at.
    pub fn next_queued(&mut self) -> Option<usize> {
        let writer = self.queued.pop()?;
        self.queued_flag[writer] = false;
        Some(writer)
    }

    /// Queues the writers whose next slot belonged to a later operation (a new one began).
    pub fn queue_parked(&mut self) {
        while let Some(writer) = self.parked.pop() {
            self.queue(writer);
        }
    }

    /// Notes that `from` wrote into its slot `slot` of this rank.
    pub fn slot_arrived(&mut self, from: usize, slot: u8) -> std::result::Result<(), String> {
        let Some(ring) = self.inbound.get_mut(from).and_then(|r| r.as_mut()) else {
            return Err(format!(
                "an eager write from rank {from}, for which this rank keeps no slots"
            ));
        };
        ring.reads
            .arrive(usize::from(slot))
            .map_err(|what| format!("rank {from}: {what}"))?;
        self.queue(from);
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
        match low {
            Some(low) => out
                .credit(low)
                .map_err(|what| format!("rank {from}: {what}")),
            None => Ok(()),
        }
    }

    /// Records the slots a token names (the first token that names them counts).
    pub fn learn(&mut self, from: usize, ring: &SlotRing) -> std::result::Result<(), String> {
        if ring.is_none() || self.outbound[from].is_some() {
            return Ok(());
        }
        self.outbound[from] = Some(Outbound::new(ring)?);
        Ok(())
    }

    /// Receive slots of this rank, in use or not.
    pub fn kept_bytes(&self) -> usize {
        self.inbound.iter().flatten().map(|r| r.mem.len()).sum()
    }
}

/// What posting a transfer's next eager slot came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EagerPost {
    /// Every slot of the transfer was posted.
    Done,
    /// The provider's queue is full.
    Again,
    /// The target has no free slot: wait for its credits.
    NoCredit,
}

impl From<Post> for EagerPost {
    fn from(post: Post) -> Self {
        match post {
            Post::Posted => EagerPost::Done,
            Post::Again => EagerPost::Again,
        }
    }
}

impl Transport {
    /// What reading the completion queue came to, with the failure of a credit word's write
    /// forgiven: its writer may have finished its last operation and ended, which is no
    /// failure of this one (over shm the liveness check skips such a writer; other providers
    /// tell it only by the failed write).
    pub(super) fn forgive_credit_failure(
        &mut self,
        got: std::result::Result<usize, FabricError>,
    ) -> Result<usize> {
        match got {
            Err(FabricError::Completion {
                context: Some(CREDIT_CONTEXT),
                ..
            }) => {
                self.inbox.eager.credit_write_done();
                Ok(0)
            }
            other => Ok(other?),
        }
    }

    /// Waits a little for credit words still in flight, so that the endpoint never closes with
    /// them posted (no operation waits for them).
    pub(super) fn drain_credit_writes(&mut self) {
        let deadline = std::time::Instant::now() + DRAIN;
        while self.inbox.eager.credit_writes > 0 && std::time::Instant::now() < deadline {
            match self.cq.wait(&mut self.completions, WAIT_SLICE) {
                Ok(_) => {
                    for c in &self.completions {
                        if c.context == Some(CREDIT_CONTEXT) {
                            self.inbox.eager.credit_write_done();
                        }
                    }
                    self.completions.clear();
                }
                Err(FabricError::Completion {
                    context: Some(CREDIT_CONTEXT),
                    ..
                }) => self.inbox.eager.credit_write_done(),
                Err(_) => {}
            }
        }
    }

    /// The count of the credit word `from` wrote into our control region (`None` if it is
    /// torn or cannot be read).
    pub(super) fn read_credit(&self, from: usize) -> Option<u32> {
        let mut word = [0u8; wire::CREDIT_BYTES];
        self.control
            .read(wire::credit_in(self.size, from), &mut word)
            .ok()?;
        read_credit_word(&word)
    }

    /// The slots to name in the ready token for `writer`, or `None` if it gets no token: in an
    /// eager operation, a writer that knows this rank's slots for it needs none; one that does
    /// not gets them now (allocated on first use).
    pub(super) fn eager_token(&mut self, run: &Run, writer: usize) -> Result<Option<SlotRing>> {
        let eager = run.eager_from(writer);
        if let Some(ring) = &self.inbox.eager.inbound[writer] {
            return Ok((!eager).then(|| ring.ring()));
        }
        if !eager {
            return Ok(Some(SlotRing::NONE));
        }
        let config = self.inbox.eager.config;
        let mem = self.alloc(config.ring_bytes(), Access::RemoteWrite)?;
        let ring = Inbound::new(mem, config.slots, config.slot_bytes);
        let slots = ring.ring();
        self.inbox.eager.inbound[writer] = Some(ring);
        Ok(Some(slots))
    }

    /// Writes the next slots of the ready transfer (to a target whose slots this rank knows),
    /// as many as the target has free.
    pub(super) fn post_eager(
        &mut self,
        run: &mut Run,
        buffers: &BufferViews<'_>,
        ready: Ready,
    ) -> Result<EagerPost> {
        let to = ready.to;
        self.reachable(run, to)?;
        let peer = self.peers.address(to)?;
        let inject = self.inbox.eager.inject;
        // The first slot follows that check at once; later ones are checked again.
        let mut checked = true;
        loop {
            if !std::mem::take(&mut checked) {
                self.reachable(run, to)?;
            }
            let Some(out) = self.inbox.eager.outbound[to].as_mut() else {
                return Err(run.protocol(format!("an eager write to rank {to} without its slots")));
            };
            let (pieces, cursor, transfer_writes) = run.eager_cursor();
            let Some((parts, next)) = pack(pieces, cursor, out.slot_bytes) else {
                return Ok(EagerPost::Done);
            };
            let Ok(transfer_writes) = u32::try_from(transfer_writes) else {
                return Err(run.protocol(format!(
                    "{transfer_writes} writes in one eager transfer to rank {to}"
                )));
            };
            if out.free() == 0 {
                return Ok(EagerPost::NoCredit);
            }
            let slot = out.next_slot();
            let header = SlotHeader {
                seq: run.seq,
                digest: run.digest(),
                number: out.written,
                round: ready.round,
                writes: if ends(pieces, next) {
                    transfer_writes
                } else {
                    0
                },
                segments: segments(pieces, &parts),
            };
            if out.mirror.is_none() {
                let len = out.slots * out.slot_bytes;
                out.mirror = Some(RegisteredMemory::for_endpoint(
                    &self.endpoint,
                    len,
                    Access::Local,
                )?);
            }
            let Some(mirror) = out.mirror.as_ref() else {
                return Err(run.protocol("no source for eager writes".into()));
            };
            let base = slot * out.slot_bytes;
            let head = header.to_bytes();
            mirror.store(base, &head)?;
            let mut at = base + head.len();
            for part in &parts {
                let piece = &pieces[part.piece];
                let src = buffers.view(&run.op, piece.src)?;
                let from = src.offset + piece.src_offset + part.offset;
                mirror.copy_from(at, src.mem, from, part.len)?;
                at += part.len;
            }
            let remote = out.region.range(base as u64, (at - base) as u64)?;
            let event = Some(
                Event::Slot {
                    from: self.rank,
                    slot: slot as u8,
                }
                .encode(),
            );
            // Small slots are injected: no completion to wait for.
            let injected = at - base <= inject;
            let post = if injected {
                self.endpoint
                    .inject_write(&mirror.as_slice()[base..at], peer, remote, event)?
            } else {
                let local = mirror.range(base, at - base)?;
                self.endpoint.write(local, peer, remote, event, run.seq)?
            };
            if post == Post::Again {
                return Ok(EagerPost::Again);
            }
            out.written += 1;
            run.slot_posted(next, header.data_len(), injected);
        }
    }

    /// Reads the slots that arrived, in order per writer, for as long as they belong to this
    /// operation: checks each header, copies the data into place and counts its writes; gives
    /// credits back when due. A slot of a later operation waits for it; one of an operation
    /// that is over is a protocol error.
    pub(super) fn take_slots(&mut self, run: &mut Run, buffers: &BufferViews<'_>) -> Result<bool> {
        let mut progress = false;
        let mut owed = Vec::new();
        while let Some(from) = self.inbox.eager.next_queued() {
            while let Some(ring) = self.inbox.eager.inbound[from].as_ref() {
                let Some(slot) = ring.reads.head() else {
                    break;
                };
                let bytes = ring.slot(slot);
                let header = SlotHeader::from_bytes(bytes)
                    .map_err(|what| run.protocol(format!("rank {from}: {what}")))?;
                if header.number != ring.reads.read {
                    return Err(run.protocol(format!(
                        "rank {from}'s eager write number {} in the place of number {}",
                        header.number, ring.reads.read
                    )));
                }
                if !run.check_slot(from, &header)? {
                    self.inbox.eager.parked.push(from);
                    break;
                }
                let mut at = header.table_end();
                for seg in &header.segments {
                    let view = buffers.view(&run.op, seg.dst)?;
                    let (offset, len) = (seg.offset as usize, seg.len as usize);
                    if offset.checked_add(len).map_or(true, |end| end > view.len) {
                        return Err(TransportError::Mismatch {
                            op: run.op.clone(),
                            peer: from,
                        });
                    }
                    view.mem.store(view.offset + offset, &bytes[at..at + len])?;
                    at += len;
                    run.stats.bytes_copied += len as u64;
                }
                run.count_slot(&header)?;
                if let Some(ring) = self.inbox.eager.inbound[from].as_mut() {
                    ring.reads.consume();
                }
                progress = true;
            }
            if !self.return_credits(from)? {
                owed.push(from);
            }
        }
        for from in owed {
            self.inbox.eager.queue(from);
        }
        Ok(progress)
    }

    /// Sends `from` the count of its slots read, if due; false if the provider's queue was
    /// full (it is tried again on the next pass).
    fn return_credits(&mut self, from: usize) -> Result<bool> {
        let Some(ring) = self.inbox.eager.inbound[from].as_mut() else {
            return Ok(true);
        };
        if !ring.reads.credits_due() {
            return Ok(true);
        }
        let read = ring.reads.read;
        // Credits only serve later operations: a writer may have finished its last one and
        // ended, and that is no failure of this one.
        if self.peers.ended_now(from) {
            ring.reads.returned = read;
            ring.reads.owed = false;
            return Ok(true);
        }
        let word = credit_word(read);
        let remote = self
            .peers
            .control(from)?
            .range(wire::credit_in(self.size, self.rank) as u64, 8)?;
        let event = Some(Event::Credit { from: self.rank }.encode());
        // Not injected: an injected write that fails has no context to tell it from a failed
        // data write. The source may be overwritten by the next word while this write is in
        // flight: the target then reads that newer count, or a torn word it ignores.
        let out = wire::credit_out(self.size, from);
        self.control.store(out, &word)?;
        let local = self.control.range(out, word.len())?;
        let post = self.endpoint.write(
            local,
            self.peers.address(from)?,
            remote,
            event,
            CREDIT_CONTEXT,
        );
        // A writer that is gone needs no credits; one that is not and never gets them fails
        // at its deadline.
        let posted = !matches!(post, Ok(Post::Again));
        if matches!(post, Ok(Post::Posted)) {
            self.inbox.eager.credit_writes += 1;
        }
        let Some(ring) = self.inbox.eager.inbound[from].as_mut() else {
            return Ok(true);
        };
        ring.reads.owed = !posted;
        if posted {
            ring.reads.returned = read;
        }
        Ok(posted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::piece;
    use crate::plan::{RankPlan, Round};
    use crate::transport::run::{Inbox, Incoming};
    use crate::transport::{Limits, Prepared};

    const SIZE: usize = 3;
    const DIGEST: u64 = 0xd1;
    const LIMIT: usize = 64;

    /// Rank 0 of 3: round 0 writes 8 bytes to rank 1 and expects one write from rank 2.
    fn plan(eager: bool) -> Prepared {
        let mut r0 = Round::new(0);
        r0.send(1, vec![piece(Buf::Send, 0, Buf::Recv, 0, 8, None)]);
        r0.expect(2, 1);
        let plan = RankPlan {
            rank: 0,
            buffers: crate::plan::BufferSizes {
                send: 8,
                recv: 8,
                scratch: 0,
            },
            setup: Vec::new(),
            rounds: Box::new(vec![r0].into_iter()),
        };
        let prepared =
            Prepared::new("test", plan, SIZE, Limits { max_msg_size: 0 }).expect("a valid plan");
        if eager {
            prepared.into_eager(LIMIT)
        } else {
            prepared
        }
    }

    fn ring(count: u32) -> SlotRing {
        SlotRing {
            region: RemoteRegion {
                base: 0,
                len: u64::from(count) * 512,
                key: 1,
            },
            count,
            slot_bytes: 512,
        }
    }

    fn slot_header(seq: u64, digest: u64) -> SlotHeader {
        SlotHeader {
            seq,
            digest,
            number: 0,
            round: 0,
            writes: 1,
            segments: vec![Segment {
                dst: Buf::Recv,
                offset: 0,
                len: 8,
                last: true,
            }],
        }
    }

    #[test]
    fn an_eager_transfer_needs_known_slots_and_free_ones_not_a_token() {
        let mut inbox = Inbox::new(SIZE);
        // Slots not known yet: the transfer waits for the target's token (which names them).
        let mut run = Run::for_test(4, DIGEST, &plan(true), SIZE);
        assert_eq!(run.digest(), eager_digest(DIGEST, LIMIT));
        run.start_scan();
        assert_eq!(run.next_ready(&mut inbox).unwrap(), None);
        // A token of a later operation names them: from the next operation on, no token.
        inbox.eager.learn(1, &ring(4)).unwrap();
        let mut run = Run::for_test(5, DIGEST, &plan(true), SIZE);
        run.start_scan();
        let ready = run
            .next_ready(&mut inbox)
            .unwrap()
            .expect("ready without a token");
        assert!(ready.eager && ready.token.is_none() && ready.to == 1);
        // No free slot: it waits for credits, and the credit word wakes it.
        run.wait_for_slots();
        run.start_scan();
        assert_eq!(run.next_ready(&mut inbox).unwrap(), None);
        if let Some(out) = inbox.eager.outbound[1].as_mut() {
            out.written = 4;
        }
        run.on_event(
            &mut inbox,
            Incoming::Credit {
                from: 1,
                read: Some(2),
            },
        )
        .unwrap();
        assert_eq!(inbox.eager.outbound[1].as_ref().map(|o| o.free()), Some(2));
        run.start_scan();
        assert!(run.next_ready(&mut inbox).unwrap().is_some_and(|r| r.eager));
        // An operation above the limit waits for the token as ever.
        let mut run = Run::for_test(6, DIGEST, &plan(false), SIZE);
        assert_eq!(run.digest(), DIGEST);
        run.start_scan();
        assert_eq!(run.next_ready(&mut inbox).unwrap(), None);
    }

    #[test]
    fn slot_headers_are_checked_against_the_operation() {
        let prepared = plan(true);
        let mut run = Run::for_test(7, DIGEST, &prepared, SIZE);
        let digest = run.digest();
        assert!(run.check_slot(2, &slot_header(7, digest)).unwrap());
        run.count_slot(&slot_header(7, digest)).unwrap();
        assert_eq!(run.stats.arrivals, 1);
        assert!(
            run.count_slot(&slot_header(7, digest)).is_err(),
            "one write expected"
        );
        // A later operation's slot waits; an earlier one's aborts that operation.
        assert!(!run.check_slot(2, &slot_header(8, digest)).unwrap());
        let err = run.check_slot(2, &slot_header(6, digest)).unwrap_err();
        assert!(err.to_string().contains("operation 6"), "{err}");
        assert_eq!(run.abort_seq, 6);
        // Another digest (different arguments, or an operation that is not eager there).
        let mut run = Run::for_test(7, DIGEST, &prepared, SIZE);
        let err = run.check_slot(2, &slot_header(7, DIGEST)).unwrap_err();
        assert!(
            matches!(err, TransportError::Mismatch { peer: 2, .. }),
            "{err}"
        );
        // A rank this one expects nothing from.
        let err = run.check_slot(1, &slot_header(7, digest)).unwrap_err();
        assert!(matches!(err, TransportError::Disagree { .. }), "{err}");
    }

    #[test]
    fn arrivals_and_credits_from_strangers_are_protocol_errors() {
        let mut inbox = Inbox::new(SIZE);
        let mut run = Run::for_test(1, DIGEST, &plan(true), SIZE);
        let slot = run.on_event(&mut inbox, Incoming::Slot { from: 2, slot: 0 });
        assert!(slot.unwrap_err().to_string().contains("keeps no slots"));
        let credit = run.on_event(
            &mut inbox,
            Incoming::Credit {
                from: 1,
                read: Some(1),
            },
        );
        assert!(credit.unwrap_err().to_string().contains("does not use"));
        let unknown = run.on_event(&mut inbox, Incoming::Unknown { from: 1, kind: 9 });
        assert!(unknown.unwrap_err().to_string().contains("unknown kind 9"));
        // A torn credit word changes nothing.
        inbox.eager.learn(1, &ring(4)).unwrap();
        run.on_event(
            &mut inbox,
            Incoming::Credit {
                from: 1,
                read: None,
            },
        )
        .unwrap();
        assert_eq!(inbox.eager.outbound[1].as_ref().map(|o| o.freed), Some(0));
        // Slots too large for the CQ data's slot field are refused when learned.
        assert!(Eager::new(SIZE).learn(1, &ring(64)).is_err());
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

    fn header() -> SlotHeader {
        SlotHeader {
            seq: (1 << 40) + 3,
            digest: 0xdead_beef,
            number: 77,
            round: 9,
            writes: 70_000,
            segments: vec![
                Segment {
                    dst: Buf::Recv,
                    offset: 100,
                    len: 10,
                    last: false,
                },
                Segment {
                    dst: Buf::Scratch,
                    offset: 1 << 33,
                    len: 5,
                    last: true,
                },
            ],
        }
    }

    #[test]
    fn slot_headers_round_trip() {
        let h = header();
        let mut slot = h.to_bytes();
        assert_eq!(slot.len(), h.table_end());
        slot.resize(h.table_end() + h.data_len(), 0);
        assert_eq!(SlotHeader::from_bytes(&slot), Ok(h));
    }

    #[test]
    fn bad_slot_headers_are_refused() {
        let h = header();
        let full = |bytes: &mut Vec<u8>| bytes.resize(h.table_end() + h.data_len(), 0);
        // Nothing written.
        assert!(SlotHeader::from_bytes(&[0; 64]).is_err());
        // Too short for its data.
        let short = h.to_bytes();
        assert!(SlotHeader::from_bytes(&short).is_err());
        // Writes counted by a slot whose last piece goes on in the next slot.
        let mut cut = h.clone();
        cut.segments[1].last = false;
        let mut wrong = cut.to_bytes();
        full(&mut wrong);
        assert!(SlotHeader::from_bytes(&wrong)
            .unwrap_err()
            .contains("writes"));
        // A segment into a send buffer.
        let mut send = h.clone();
        send.segments[0].dst = Buf::Send;
        let mut bytes = send.to_bytes();
        full(&mut bytes);
        assert!(SlotHeader::from_bytes(&bytes).is_err());
        // A table longer than the slot.
        let mut many = h.to_bytes();
        many[28] = 0xff;
        full(&mut many);
        assert!(SlotHeader::from_bytes(&many).is_err());
    }

    fn pieces(lens: &[usize]) -> Vec<Piece> {
        let mut at = 0;
        lens.iter()
            .map(|&len| {
                let p = piece(Buf::Send, at, Buf::Recv, 1000 + at, len, None);
                at += len;
                p
            })
            .collect()
    }

    /// Packs a whole transfer; returns the slots' parts.
    fn pack_all(pieces: &[Piece], slot_bytes: usize) -> Vec<Vec<Part>> {
        let mut out = Vec::new();
        let mut cursor = Cursor::default();
        while let Some((parts, next)) = pack(pieces, cursor, slot_bytes) {
            assert!(!parts.is_empty());
            let used: usize =
                HEADER_BYTES + parts.iter().map(|p| SEGMENT_BYTES + p.len).sum::<usize>();
            assert!(used <= slot_bytes, "{used} > {slot_bytes}");
            out.push(parts);
            cursor = next;
        }
        out
    }

    #[test]
    fn a_transfer_ends_with_its_last_bytes_and_empty_pieces_do_not_count() {
        let ps = pieces(&[3, 0, 5, 0]);
        let at = |piece, offset| Cursor { piece, offset };
        assert!(!ends(&ps, at(0, 0)));
        assert!(!ends(&ps, at(1, 0)));
        assert!(!ends(&ps, at(2, 4)));
        assert!(ends(&ps, at(2, 5)));
        assert!(ends(&ps, at(3, 0)));
        assert!(ends(&ps, at(4, 0)));
        // Every slot of a packed transfer but its last goes on.
        let slots = pack_all(&ps, 64);
        for (k, parts) in slots.iter().enumerate() {
            let last = parts.last().unwrap();
            let cursor = if last.last {
                at(last.piece + 1, 0)
            } else {
                at(last.piece, last.offset + last.len)
            };
            assert_eq!(ends(&ps, cursor), k + 1 == slots.len(), "slot {k}");
        }
    }

    #[test]
    fn small_pieces_share_one_slot() {
        let ps = pieces(&[10, 20, 30]);
        let slots = pack_all(&ps, 256);
        assert_eq!(slots.len(), 1);
        assert_eq!(slots[0].len(), 3);
        assert!(slots[0].iter().all(|p| p.last && p.offset == 0));
        let segs = segments(&ps, &slots[0]);
        assert_eq!(segs[1].offset, 1010);
        assert_eq!(segs[2].len, 30);
    }

    #[test]
    fn large_pieces_span_slots_and_every_byte_is_sent_once() {
        for lens in [
            vec![1000],
            vec![100, 1000, 3],
            vec![200, 200, 200],
            vec![0, 5, 0],
        ] {
            let ps = pieces(&lens);
            for slot_bytes in [MIN_SLOT_BYTES, 300, 1024] {
                let slots = pack_all(&ps, slot_bytes);
                let mut sent = vec![0usize; ps.len()];
                let mut ended = 0;
                for parts in &slots {
                    for p in parts {
                        assert_eq!(p.offset, sent[p.piece], "parts in order");
                        sent[p.piece] += p.len;
                        assert_eq!(p.last, sent[p.piece] == ps[p.piece].len);
                        ended += usize::from(p.last);
                    }
                }
                assert_eq!(sent, lens, "{lens:?} in slots of {slot_bytes}");
                assert_eq!(ended, lens.iter().filter(|&&l| l > 0).count());
            }
        }
        assert!(pack(&pieces(&[0, 0]), Cursor::default(), 256).is_none());
    }

    #[test]
    fn credit_words_survive_only_whole() {
        for read in [0u64, 1, 15, 1 << 32, (1 << 32) + 5, u64::MAX] {
            assert_eq!(read_credit_word(&credit_word(read)), Some(read as u32));
        }
        let mut torn = credit_word(5);
        torn[4..].copy_from_slice(&credit_word(6)[4..]);
        assert_eq!(read_credit_word(&torn), None);
        assert_eq!(read_credit_word(&[0; 8]), None);
    }

    #[test]
    fn slots_are_read_in_order_and_credits_return_at_half_the_ring() {
        let mut reads = Reads::new(4);
        assert_eq!(reads.head(), None);
        // Slot 1 completes before slot 0: nothing to read until slot 0 is there.
        reads.arrive(1).unwrap();
        assert_eq!(reads.head(), None);
        reads.arrive(0).unwrap();
        assert_eq!(reads.head(), Some(0));
        assert!(reads.arrive(0).unwrap_err().contains("not read"));
        assert!(reads.arrive(4).is_err());
        reads.consume();
        assert!(!reads.credits_due());
        assert_eq!(reads.head(), Some(1));
        reads.consume();
        assert!(reads.credits_due());
        reads.returned = reads.read;
        assert!(!reads.credits_due());
        assert_eq!(reads.head(), None);
        // Around the ring.
        for k in 2..9 {
            reads.arrive(k % 4).unwrap();
            assert_eq!(reads.head(), Some(k % 4));
            reads.consume();
        }
        assert_eq!(reads.read, 9);
        reads.owed = true;
        reads.returned = 9;
        assert!(reads.credits_due());
    }

    #[test]
    fn credits_are_cumulative_and_never_run_ahead() {
        let ring = SlotRing {
            region: RemoteRegion {
                base: 0,
                len: 16 * 512,
                key: 1,
            },
            count: 16,
            slot_bytes: 512,
        };
        let mut out = Outbound::new(&ring).unwrap();
        assert_eq!(out.free(), 16);
        out.written = 16;
        assert_eq!(out.free(), 0);
        out.credit(8).unwrap();
        assert_eq!(out.free(), 8);
        // An older word arriving late changes nothing.
        out.credit(4).unwrap();
        assert_eq!(out.free(), 8);
        // More read than written is a protocol error.
        assert!(out.credit(17).is_err());
        // Across the 32-bit wrap.
        out.written = (1 << 32) + 3;
        out.freed = (1 << 32) - 10;
        out.credit(2).unwrap();
        assert_eq!(out.freed, (1 << 32) + 2);
        assert_eq!(out.next_slot(), (((1u64 << 32) + 3) % 16) as usize);
        let bad = SlotRing { count: 64, ..ring };
        assert!(Outbound::new(&bad).is_err());
        let small = SlotRing {
            region: RemoteRegion {
                len: 100,
                ..ring.region
            },
            ..ring
        };
        assert!(Outbound::new(&small).is_err());
    }
}
