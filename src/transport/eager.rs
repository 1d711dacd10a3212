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

use crate::fabric::{
    Access, Completion, FabricError, Post, RegisteredMemory, RemoteRegion, SharedMemory,
};
use crate::plan::{Buf, Piece};

use super::local::BufferViews;
use super::run::{Ready, Run};
use super::waiting::{DRAIN, WAIT_SLICE};
use super::wire::{self, Event, SlotRing};
pub use super::wire::{Carrier, MAX_SLOTS};
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
pub const HEADER_BYTES: usize = 48;
/// Where a slot header holds the writer's running slot number, which a writer through memory
/// ([`Carrier::Memory`]) stores last, with release ordering: the slot is there once it reads
/// as the number the target expects next.
const NUMBER_AT: usize = 16;
/// Where a slot header holds the writer's read count of the target's slots for it (credits
/// going the other way; [`Carrier::Write`] only).
const CREDIT_AT: usize = 40;
/// A ring in shared memory starts with the target's read count (its credits, one cache line).
const SHARED_HEAD: usize = 64;
/// The number a slot of a new shared ring holds: none the writer ever writes.
const UNWRITTEN: u64 = u64::MAX;

/// Bytes from one slot of a shared ring to the next: slots start on cache lines.
fn shared_stride(slot_bytes: usize) -> usize {
    slot_bytes.div_ceil(64) * 64
}

/// Bytes of a shared ring of `slots` slots of `slot_bytes`.
fn shared_len(slots: usize, slot_bytes: usize) -> usize {
    SHARED_HEAD + slots * shared_stride(slot_bytes)
}
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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// Over [`Carrier::Write`], the writer's read count of the slots the target keeps for it
    /// when it wrote this slot: the target's credits, carried along (0 through memory).
    pub credit: u64,
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
        out.extend_from_slice(&self.fixed());
        for s in &self.segments {
            out.extend_from_slice(&s.to_bytes());
        }
        out
    }

    /// The fixed part of the header, [`HEADER_BYTES`] long.
    pub fn fixed(&self) -> [u8; HEADER_BYTES] {
        let mut out = [0u8; HEADER_BYTES];
        out[..8].copy_from_slice(&self.seq.to_le_bytes());
        out[8..16].copy_from_slice(&self.digest.to_le_bytes());
        out[NUMBER_AT..NUMBER_AT + 8].copy_from_slice(&self.number.to_le_bytes());
        out[24..28].copy_from_slice(&self.round.to_le_bytes());
        out[28..30].copy_from_slice(&(self.segments.len() as u16).to_le_bytes());
        out[32..36].copy_from_slice(&self.writes.to_le_bytes());
        out[36..40].copy_from_slice(&MAGIC.to_le_bytes());
        out[CREDIT_AT..CREDIT_AT + 8].copy_from_slice(&self.credit.to_le_bytes());
        out
    }

    /// Decodes the header at the start of a slot of `slot.len()` bytes; an error says what is
    /// wrong with it.
    pub fn from_bytes(slot: &[u8]) -> std::result::Result<SlotHeader, String> {
        let mut header = SlotHeader::default();
        header.read(slot)?;
        Ok(header)
    }

    /// [`Self::from_bytes`] into this header, keeping its segment table's allocation.
    pub fn read(&mut self, slot: &[u8]) -> std::result::Result<(), String> {
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
        self.segments.clear();
        for k in 0..count {
            let at = HEADER_BYTES + k * SEGMENT_BYTES;
            let dst = match slot[at + 12] {
                1 => Buf::Recv,
                2 => Buf::Scratch,
                b => return Err(format!("an eager segment into buffer kind {b}")),
            };
            self.segments.push(Segment {
                offset: u64_at(at),
                len: u32_at(at + 8),
                dst,
                last: slot[at + 13] != 0,
            });
        }
        self.seq = u64_at(0);
        self.digest = u64_at(8);
        self.number = u64_at(NUMBER_AT);
        self.round = u32_at(24);
        self.writes = u32_at(32);
        self.credit = u64_at(CREDIT_AT);
        let data = self.data_len();
        if table_end + data > slot.len() {
            return Err(format!(
                "a slot header announcing {data} data bytes in a slot of {}",
                slot.len()
            ));
        }
        // Writes arrive with the slot that ends a transfer: its last bytes end a piece.
        if self.writes > 0 && !self.segments.last().is_some_and(|s| s.last) {
            return Err(format!(
                "a slot header counting {} writes before its transfer ends",
                self.writes
            ));
        }
        Ok(())
    }
}

impl Segment {
    /// The segment's entry in a slot header's table, [`SEGMENT_BYTES`] long.
    pub fn to_bytes(&self) -> [u8; SEGMENT_BYTES] {
        let mut out = [0u8; SEGMENT_BYTES];
        out[..8].copy_from_slice(&self.offset.to_le_bytes());
        out[8..12].copy_from_slice(&self.len.to_le_bytes());
        out[12] = match self.dst {
            Buf::Recv => 1,
            Buf::Scratch => 2,
            Buf::Send => 0,
        };
        out[13] = u8::from(self.last);
        out
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
    let mut parts = Vec::new();
    pack_into(pieces, from, slot_bytes, &mut parts).map(|next| (parts, next))
}

/// [`pack`] into `parts` (emptied first, its allocation kept): where the following slot
/// starts, or `None` when the transfer is all sent.
pub fn pack_into(
    pieces: &[Piece],
    from: Cursor,
    slot_bytes: usize,
    parts: &mut Vec<Part>,
) -> Option<Cursor> {
    parts.clear();
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
    Some(cursor)
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
    parts.iter().map(|p| segment(pieces, p)).collect()
}

/// The header segment of `part` of `pieces`.
fn segment(pieces: &[Piece], part: &Part) -> Segment {
    let piece = &pieces[part.piece];
    Segment {
        dst: piece.dst,
        offset: (piece.dst_offset + part.offset) as u64,
        len: part.len as u32,
        last: part.last,
    }
}

/// Memory a slot is filled in: the mirror of a target's registered slots, or the target's
/// slots in shared memory.
trait SlotMemory {
    fn put(&self, at: usize, bytes: &[u8]) -> std::result::Result<(), FabricError>;
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

/// Fills the slot at `base` of `mem` with the header `fixed` (its number too if `number`),
/// the segment table of `parts` of `pieces` and their data from `buffers`; returns where the
/// slot's bytes end and how many data bytes it carries.
#[allow(clippy::too_many_arguments)]
fn fill_slot(
    mem: &impl SlotMemory,
    base: usize,
    fixed: &[u8; HEADER_BYTES],
    number: bool,
    parts: &[Part],
    pieces: &[Piece],
    buffers: &BufferViews<'_>,
    run: &Run,
) -> Result<(usize, usize)> {
    if number {
        mem.put(base, fixed)?;
    } else {
        mem.put(base, &fixed[..NUMBER_AT])?;
        mem.put(base + NUMBER_AT + 8, &fixed[NUMBER_AT + 8..])?;
    }
    let mut at = base + HEADER_BYTES;
    for part in parts {
        mem.put(at, &segment(pieces, part).to_bytes())?;
        at += SEGMENT_BYTES;
    }
    let mut data = 0;
    for part in parts {
        let piece = &pieces[part.piece];
        let src = buffers.view(&run.op, piece.src)?;
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

/// The fixed header of the slot number `number` of `run` for `round` that carries `parts` of
/// `pieces`, after which the transfer goes on at `next`: it counts the transfer's
/// `transfer_writes` if it ends the transfer. It carries no credits (see [`carry_credit`]).
fn slot_fixed(
    run: &Run,
    number: u64,
    round: u32,
    parts: &[Part],
    pieces: &[Piece],
    next: Cursor,
    transfer_writes: u32,
) -> [u8; HEADER_BYTES] {
    let mut fixed = [0u8; HEADER_BYTES];
    fixed[..8].copy_from_slice(&run.seq.to_le_bytes());
    fixed[8..16].copy_from_slice(&run.digest().to_le_bytes());
    fixed[NUMBER_AT..NUMBER_AT + 8].copy_from_slice(&number.to_le_bytes());
    fixed[24..28].copy_from_slice(&round.to_le_bytes());
    // `pack_into` puts at most u16::MAX parts in a slot.
    fixed[28..30].copy_from_slice(&(parts.len() as u16).to_le_bytes());
    let writes = if ends(pieces, next) {
        transfer_writes
    } else {
        0
    };
    fixed[32..36].copy_from_slice(&writes.to_le_bytes());
    fixed[36..40].copy_from_slice(&MAGIC.to_le_bytes());
    fixed
}

/// Puts the writer's read count `credit` of the target's slots into the fixed header `fixed`.
fn carry_credit(fixed: &mut [u8; HEADER_BYTES], credit: u64) {
    fixed[CREDIT_AT..CREDIT_AT + 8].copy_from_slice(&credit.to_le_bytes());
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
    /// Slots read so far.
    pub read: u64,
    /// The slot to read next, `read % slots` (kept, not divided for on every look).
    next: usize,
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
            next: 0,
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
        self.arrived[self.next].then_some(self.next)
    }

    /// The head slot was read.
    pub fn consume(&mut self) {
        self.arrived[self.next] = false;
        self.read += 1;
        self.next += 1;
        if self.next == self.slots() {
            self.next = 0;
        }
    }

    /// A slot that carried the read count `read` to the writer was posted: no credit word is
    /// needed for it.
    pub fn carried(&mut self, read: u64) {
        self.returned = self.returned.max(read);
        if self.returned == self.read {
            self.owed = false;
        }
    }

    /// Whether the writer should get its credits back: half the ring was read since the last
    /// return (or a return could not be posted).
    pub fn credits_due(&self) -> bool {
        self.owed || self.read - self.returned >= (self.slots() / 2).max(1) as u64
    }
}

/// Where a target's receive slots for one writer are.
pub enum RingMemory {
    /// Registered memory the writer writes into ([`Carrier::Write`]).
    Registered(RegisteredMemory),
    /// Memory shared with the writer ([`Carrier::Memory`]): the read count, then the slots;
    /// `name` is the file's name.
    Shared {
        /// The mapping.
        mem: SharedMemory,
        /// The name the writer opens it by.
        name: u64,
    },
}

/// A target's receive slots for one writer.
pub struct Inbound {
    /// The slots.
    pub mem: RingMemory,
    /// Bytes of one slot.
    pub slot_bytes: usize,
    /// How far they were read.
    pub reads: Reads,
}

impl Inbound {
    /// `slots` slots of `slot_bytes` in `mem`.
    pub fn new(mem: RegisteredMemory, slots: usize, slot_bytes: usize) -> Inbound {
        Inbound {
            mem: RingMemory::Registered(mem),
            slot_bytes,
            reads: Reads::new(slots),
        }
    }

    /// `slots` slots of `slot_bytes` in new memory shared with the writer, none written yet.
    pub fn shared(slots: usize, slot_bytes: usize) -> std::result::Result<Inbound, FabricError> {
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

    /// What the writer needs to know about these slots.
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

    /// Bytes of memory the slots take.
    pub fn len(&self) -> usize {
        match &self.mem {
            RingMemory::Registered(mem) => mem.len(),
            RingMemory::Shared { mem, .. } => mem.len(),
        }
    }

    /// Whether the slots take no memory (never).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the writer stores into shared memory.
    pub fn is_shared(&self) -> bool {
        matches!(self.mem, RingMemory::Shared { .. })
    }

    /// The slot to read next, if it is there: its write's event arrived, or (shared memory)
    /// it holds the number expected next.
    pub fn head(&self) -> Option<usize> {
        match &self.mem {
            RingMemory::Registered(_) => self.reads.head(),
            RingMemory::Shared { mem, .. } => {
                let slot = self.reads.next;
                let at = SHARED_HEAD + slot * shared_stride(self.slot_bytes) + NUMBER_AT;
                (mem.load(at).ok()? == self.reads.read).then_some(slot)
            }
        }
    }

    /// The bytes of `slot`.
    pub fn slot(&self, slot: usize) -> std::result::Result<&[u8], FabricError> {
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
    pub fn consume(&mut self) -> std::result::Result<(), FabricError> {
        self.reads.consume();
        if let RingMemory::Shared { mem, .. } = &self.mem {
            mem.publish(0, self.reads.read)?;
        }
        Ok(())
    }
}

/// Where a writer's eager messages to one target go.
pub enum Destination {
    /// Registered slots, written from a local mirror (one mirror slot per receive slot,
    /// allocated on the first eager write, so that a write's source stays untouched until
    /// the target has read it).
    Write {
        /// The target's slots.
        region: RemoteRegion,
        /// The local source of the writes.
        mirror: Option<RegisteredMemory>,
    },
    /// Slots in memory shared with the target, mapped on the first eager write.
    Memory {
        /// The target's pid.
        pid: u32,
        /// The file's name.
        name: u64,
        /// Its length.
        len: usize,
        /// The mapping.
        map: Option<SharedMemory>,
    },
}

/// A writer's view of a target's receive slots for it.
pub struct Outbound {
    /// Where they are.
    pub destination: Destination,
    /// How many.
    pub slots: usize,
    /// Bytes of one.
    pub slot_bytes: usize,
    /// Slots written so far.
    pub written: u64,
    /// Slots the target reported read.
    pub freed: u64,
}

impl Outbound {
    /// The target's slots as its token named them; an error if they are unusable.
    pub fn new(ring: &SlotRing) -> std::result::Result<Outbound, String> {
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
        let destination = match ring.carrier {
            Carrier::Write => Destination::Write {
                region: ring.region,
                mirror: None,
            },
            Carrier::Memory => Destination::Memory {
                pid: u32::try_from(ring.region.base)
                    .map_err(|_| format!("receive slots of process {}", ring.region.base))?,
                name: ring.region.key,
                len: needed,
                map: None,
            },
        };
        Ok(Outbound {
            destination,
            slots,
            slot_bytes,
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
    /// cumulative, so an older word than one already seen changes nothing — also one older
    /// than a count a slot carried since, which may lie more than a ring behind.
    pub fn credit(&mut self, low: u32) -> std::result::Result<(), String> {
        let behind = u64::from((self.written as u32).wrapping_sub(low));
        if behind > self.written {
            return Err(format!(
                "credits for {low} slots read (low bits), {} written",
                self.written
            ));
        }
        self.freed = self.freed.max(self.written - behind);
        Ok(())
    }

    /// Takes the read count a slot from the target carried (its header's `credit`): the count
    /// is cumulative and may be older than a credit word already taken. Whether slots were
    /// freed.
    pub fn piggyback(&mut self, read: u64) -> std::result::Result<bool, String> {
        if matches!(self.destination, Destination::Memory { .. }) {
            return Err("credits in a slot header, for slots in shared memory".into());
        }
        if read > self.written {
            return Err(format!(
                "credits for {read} slots read, {} written",
                self.written
            ));
        }
        let freed = read > self.freed;
        self.freed = self.freed.max(read);
        Ok(freed)
    }

    /// Reads the read count a target through shared memory keeps for this writer (its
    /// credits); whether slots were freed. Nothing happens for other destinations, or before
    /// the first write mapped the memory.
    pub fn refresh(&mut self) -> std::result::Result<bool, String> {
        let Destination::Memory { map: Some(map), .. } = &self.destination else {
            return Ok(false);
        };
        let read = map.load(0).map_err(|e| e.to_string())?;
        if read > self.written || self.written - read > self.slots as u64 {
            return Err(format!("{read} slots read of {} written", self.written));
        }
        let freed = read > self.freed;
        self.freed = self.freed.max(read);
        Ok(freed)
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
    /// Credit words posted since the transport was connected.
    pub credit_words: u64,
    /// How writers reach the receive slots this rank sets up for them.
    pub carrier: Carrier,
    /// Writers whose slots are in shared memory: no event tells their arrivals, so their
    /// next slots are looked at on every pass ([`Eager::poll_shared`]).
    shared: Vec<usize>,
    /// Writers in `parked` (their next slot waits for a later operation).
    parked_flag: Vec<bool>,
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
            inbound: (0..size).map(|_| None).collect(),
            outbound: (0..size).map(|_| None).collect(),
            queued: Vec::new(),
            queued_flag: vec![false; size],
            parked: Vec::new(),
            inject: 0,
            credit_writes: 0,
            credit_words: 0,
            carrier: Carrier::Write,
            shared: Vec::new(),
            parked_flag: vec![false; size],
            parts: Vec::new(),
            header: SlotHeader::default(),
        }
    }

    /// Keeps `ring` for `writer` from now on.
    pub fn keep(&mut self, writer: usize, ring: Inbound) {
        if ring.is_shared() {
            self.shared.push(writer);
        }
        self.inbound[writer] = Some(ring);
    }

    /// Queues the writers through shared memory whose next slot is there (and not waiting
    /// for a later operation).
    pub fn poll_shared(&mut self) {
        for i in 0..self.shared.len() {
            let writer = self.shared[i];
            if self.parked_flag[writer] || self.queued_flag[writer] {
                continue;
            }
            if self.inbound[writer]
                .as_ref()
                .is_some_and(|ring| ring.head().is_some())
            {
                self.queue(writer);
            }
        }
    }

    /// `writer`'s next slot belongs to an operation that has not begun.
    pub fn park(&mut self, writer: usize) {
        if !self.parked_flag[writer] {
            self.parked_flag[writer] = true;
            self.parked.push(writer);
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
            self.parked_flag[writer] = false;
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
        if ring.is_shared() {
            return Err(format!(
                "an eager write event from rank {from}, whose slots are in shared memory"
            ));
        }
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
        if matches!(out.destination, Destination::Memory { .. }) {
            return Err(format!(
                "a credit word from rank {from}, whose slots are in shared memory"
            ));
        }
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
        self.inbound.iter().flatten().map(Inbound::len).sum()
    }
}

/// The merged writes a slot header counts, which must fit its 32-bit field.
fn writes_field(run: &Run, to: usize, writes: usize) -> Result<u32> {
    u32::try_from(writes).map_err(|_| {
        run.protocol(format!(
            "{writes} writes in one eager transfer to rank {to}"
        ))
    })
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
        let ring = match self.inbox.eager.carrier {
            Carrier::Write => {
                let mem = self.alloc(config.ring_bytes(), Access::RemoteWrite)?;
                Inbound::new(mem, config.slots, config.slot_bytes)
            }
            Carrier::Memory => Inbound::shared(config.slots, config.slot_bytes)?,
        };
        let slots = ring.ring();
        self.inbox.eager.keep(writer, ring);
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
        let mut parts = std::mem::take(&mut self.inbox.eager.parts);
        let posted = self.post_slots(run, buffers, ready, &mut parts);
        self.inbox.eager.parts = parts;
        posted
    }

    fn post_slots(
        &mut self,
        run: &mut Run,
        buffers: &BufferViews<'_>,
        ready: Ready,
        parts: &mut Vec<Part>,
    ) -> Result<EagerPost> {
        let to = ready.to;
        let through_memory = matches!(
            self.inbox.eager.outbound[to]
                .as_ref()
                .map(|o| &o.destination),
            Some(Destination::Memory { .. })
        );
        if through_memory {
            return self.store_slots(run, buffers, ready, parts);
        }
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
            let Some(next) = pack_into(pieces, cursor, out.slot_bytes, parts) else {
                return Ok(EagerPost::Done);
            };
            let transfer_writes = writes_field(run, to, transfer_writes)?;
            if out.free() == 0 {
                return Ok(EagerPost::NoCredit);
            }
            let slot = out.next_slot();
            let base = slot * out.slot_bytes;
            let Destination::Write { region, mirror } = &mut out.destination else {
                return Err(run.protocol(format!("an eager write to rank {to} through memory")));
            };
            if mirror.is_none() {
                let len = out.slots * out.slot_bytes;
                *mirror = Some(RegisteredMemory::for_endpoint(
                    &self.endpoint,
                    len,
                    Access::Local,
                )?);
            }
            let Some(mirror) = mirror.as_ref() else {
                return Err(run.protocol("no source for eager writes".into()));
            };
            // The target's credits go along: what this rank read of its slots for the target,
            // unless the target reads that count in shared memory itself.
            let credit = self.inbox.eager.inbound[to]
                .as_ref()
                .filter(|ring| !ring.is_shared())
                .map_or(0, |ring| ring.reads.read);
            let mut fixed = slot_fixed(
                run,
                out.written,
                ready.round,
                parts,
                pieces,
                next,
                transfer_writes,
            );
            carry_credit(&mut fixed, credit);
            let (at, data) = fill_slot(mirror, base, &fixed, true, parts, pieces, buffers, run)?;
            let remote = region.range(base as u64, (at - base) as u64)?;
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
            run.slot_posted(next, data, injected);
            if let Some(ring) = self.inbox.eager.inbound[to].as_mut() {
                ring.reads.carried(credit);
            }
        }
    }

    /// [`Self::post_eager`] into slots in memory shared with the target: each slot's header
    /// and data are stored, then its number, which tells the target the slot is there. No
    /// libfabric call, and no lock the target holds: a target that has died leaves its
    /// slots unread, and the writer finds out when they run out ([`Self::slots_ran_out`]).
    fn store_slots(
        &mut self,
        run: &mut Run,
        buffers: &BufferViews<'_>,
        ready: Ready,
        parts: &mut Vec<Part>,
    ) -> Result<EagerPost> {
        let to = ready.to;
        loop {
            let Some(out) = self.inbox.eager.outbound[to].as_mut() else {
                return Err(run.protocol(format!("an eager write to rank {to} without its slots")));
            };
            let (pieces, cursor, transfer_writes) = run.eager_cursor();
            let Some(next) = pack_into(pieces, cursor, out.slot_bytes, parts) else {
                return Ok(EagerPost::Done);
            };
            let transfer_writes = writes_field(run, to, transfer_writes)?;
            let Destination::Memory {
                pid,
                name,
                len,
                map,
            } = &mut out.destination
            else {
                return Err(run.protocol(format!("an eager store to rank {to} without memory")));
            };
            if map.is_none() {
                let opened = SharedMemory::open(*pid, *name, *len).map_err(|e| {
                    TransportError::Unreachable {
                        op: run.op.to_string(),
                        peer: to,
                        source: Box::new(e),
                    }
                })?;
                *map = Some(opened);
            }
            if out.free() == 0 && !out.refresh().map_err(|what| run.protocol(what))? {
                return Ok(EagerPost::NoCredit);
            }
            let Destination::Memory { map: Some(map), .. } = &out.destination else {
                return Err(run.protocol(format!("an eager store to rank {to} without memory")));
            };
            let base = SHARED_HEAD + out.next_slot() * shared_stride(out.slot_bytes);
            // Through memory the target reads its credits itself: none carried.
            let fixed = slot_fixed(
                run,
                out.written,
                ready.round,
                parts,
                pieces,
                next,
                transfer_writes,
            );
            // Everything but the number first: the target reads nothing of the slot before it.
            let (_, data) = fill_slot(map, base, &fixed, false, parts, pieces, buffers, run)?;
            map.publish(base + NUMBER_AT, out.written)?;
            out.written += 1;
            run.slot_posted(next, data, true);
        }
    }

    /// Whether slots of targets through shared memory were freed for transfers that wait for
    /// them (woken, to be posted again); a target among them that has ended is an error.
    pub(super) fn slots_ran_out(&mut self, run: &mut Run) -> Result<bool> {
        let mut woken = false;
        let mut k = 0;
        while let Some(&to) = run.slot_waiters().get(k) {
            let freed = match self.inbox.eager.outbound[to].as_mut() {
                Some(out) => out.refresh().map_err(|what| run.protocol(what))?,
                None => false,
            };
            if freed {
                run.slots_freed(to);
                woken = true;
                continue;
            }
            let shared = matches!(
                self.inbox.eager.outbound[to]
                    .as_ref()
                    .map(|o| &o.destination),
                Some(Destination::Memory { .. })
            );
            if shared && self.peers.ended(to) {
                return Err(TransportError::Exited {
                    op: run.op.to_string(),
                    peer: to,
                });
            }
            k += 1;
        }
        Ok(woken)
    }

    /// Reads the slots that arrived, in order per writer, for as long as they belong to this
    /// operation: checks each header, copies the data into place and counts its writes; gives
    /// credits back when due. A slot of a later operation waits for it; one of an operation
    /// that is over is a protocol error.
    pub(super) fn take_slots(&mut self, run: &mut Run, buffers: &BufferViews<'_>) -> Result<bool> {
        let mut progress = false;
        let mut owed = Vec::new();
        self.inbox.eager.poll_shared();
        while let Some(from) = self.inbox.eager.next_queued() {
            while let Some(ring) = self.inbox.eager.inbound[from].as_ref() {
                let Some(slot) = ring.head() else {
                    break;
                };
                let bytes = ring.slot(slot)?;
                let header = &mut self.inbox.eager.header;
                header
                    .read(bytes)
                    .map_err(|what| run.protocol(format!("rank {from}: {what}")))?;
                if header.number != ring.reads.read {
                    return Err(run.protocol(format!(
                        "rank {from}'s eager write number {} in the place of number {}",
                        header.number, ring.reads.read
                    )));
                }
                // Credits it carries count whichever operation the slot belongs to.
                if header.credit > 0 {
                    let Some(out) = self.inbox.eager.outbound[from].as_mut() else {
                        return Err(run.protocol(format!(
                            "credits from rank {from}, whose slots this rank does not use"
                        )));
                    };
                    let freed = out
                        .piggyback(header.credit)
                        .map_err(|what| run.protocol(format!("rank {from}: {what}")))?;
                    if freed {
                        run.slots_freed(from);
                    }
                }
                let header = &self.inbox.eager.header;
                if !run.check_slot(from, header)? {
                    self.inbox.eager.park(from);
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
                run.count_slot(header)?;
                if let Some(ring) = self.inbox.eager.inbound[from].as_mut() {
                    ring.consume()?;
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
        // A writer through shared memory reads the count itself.
        if ring.is_shared() || !ring.reads.credits_due() {
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
            self.inbox.eager.credit_words += 1;
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
            carrier: Carrier::Write,
        }
    }

    fn slot_header(seq: u64, digest: u64) -> SlotHeader {
        SlotHeader {
            seq,
            digest,
            number: 0,
            round: 0,
            writes: 1,
            credit: 0,
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
            credit: (1 << 35) + 5,
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
        let slots = pack_all(&ps, HEADER_BYTES + SEGMENT_BYTES + 8);
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
        // A count that went along in a slot settles what was owed up to it.
        reads.carried(9);
        assert!(!reads.credits_due());
        reads.arrive(1).unwrap();
        reads.consume();
        reads.carried(7);
        assert_eq!(reads.returned, 9);
        reads.arrive(2).unwrap();
        reads.consume();
        assert!(reads.credits_due());
        reads.carried(11);
        assert!(!reads.credits_due());
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
            carrier: Carrier::Write,
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
        // A word older than a count a slot carried since, more than a ring behind: nothing.
        out.written = 40;
        out.piggyback(30).unwrap();
        out.credit(8).unwrap();
        assert_eq!(out.freed, 30);
        // Across the 32-bit wrap.
        out.written = (1 << 32) + 3;
        out.freed = (1 << 32) - 10;
        out.credit(2).unwrap();
        assert_eq!(out.freed, (1 << 32) + 2);
        assert_eq!(out.next_slot(), (((1u64 << 32) + 3) % 16) as usize);
        // Counts carried in slots: full 64 bits, cumulative, never beyond what was written.
        let mut carried = Outbound::new(&ring).unwrap();
        carried.written = 20;
        assert!(carried.piggyback(12).unwrap());
        assert_eq!(carried.free(), 8);
        assert!(!carried.piggyback(5).unwrap());
        assert_eq!(carried.free(), 8);
        assert!(carried.piggyback(21).is_err());
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
