//! The slot codec: what a receive slot holds, declared once. A slot starts with the fixed
//! header ([`Fixed`], [`HEADER_BYTES`]), then one table entry per segment ([`SEGMENT_BYTES`]
//! each), then the segments' data in table order. Every field is little-endian.

use bytemuck::{Pod, Zeroable};

use crate::plan::Buf;

/// Bytes of the fixed part of a slot header.
pub const HEADER_BYTES: usize = std::mem::size_of::<Fixed>();
/// Bytes of one entry of the segment table.
pub const SEGMENT_BYTES: usize = std::mem::size_of::<SegmentEntry>();
/// Where the fixed header holds the writer's running slot number, which a writer through
/// shared memory stores last, with release ordering: the slot is there once it reads as the
/// number the target expects next.
pub const NUMBER_AT: usize = 16;
/// Marks a slot header ("egar" in ASCII, little-endian), so that a slot that holds anything
/// else is refused.
const MAGIC: u32 = 0x6561_6772;

/// The fixed part of a slot header, byte for byte as it lies in the slot (no padding: the
/// layout is asserted in the tests). Made by [`Fixed::new`] alone.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Fixed {
    seq: u64,
    digest: u64,
    number: u64,
    round: u32,
    segments: u16,
    reserved: u16,
    writes: u32,
    magic: u32,
    credit: u64,
}

/// One entry of the segment table as it lies in the slot.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
struct SegmentEntry {
    offset: u64,
    len: u32,
    dst: u8,
    last: u8,
    reserved: [u8; 2],
}

impl Fixed {
    /// The fixed header of slot `number` of operation `seq` (its eager `digest`) for `round`,
    /// with `segments` table entries; it counts `writes` merged writes if it ends a transfer
    /// (else 0) and carries the writer's read count `credit` of the target's slots for it.
    pub fn new(
        seq: u64,
        digest: u64,
        number: u64,
        round: u32,
        segments: u16,
        writes: u32,
        credit: u64,
    ) -> Fixed {
        Fixed {
            seq: seq.to_le(),
            digest: digest.to_le(),
            number: number.to_le(),
            round: round.to_le(),
            segments: segments.to_le(),
            reserved: 0,
            writes: writes.to_le(),
            magic: MAGIC.to_le(),
            credit: credit.to_le(),
        }
    }

    /// The bytes of the header.
    pub fn as_bytes(&self) -> &[u8; HEADER_BYTES] {
        bytemuck::cast_ref(self)
    }

    /// The running slot number, as it lies in the slot.
    pub fn number(&self) -> u64 {
        u64::from_le(self.number)
    }
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

impl Segment {
    /// The segment's entry in a slot header's table.
    pub fn to_bytes(self) -> [u8; SEGMENT_BYTES] {
        let entry = SegmentEntry {
            offset: self.offset.to_le(),
            len: self.len.to_le(),
            dst: match self.dst {
                Buf::Send => 0,
                Buf::Recv => 1,
                Buf::Scratch => 2,
            },
            last: u8::from(self.last),
            reserved: [0; 2],
        };
        bytemuck::cast(entry)
    }

    fn from_entry(entry: &SegmentEntry) -> Result<Segment, String> {
        let dst = match entry.dst {
            1 => Buf::Recv,
            2 => Buf::Scratch,
            b => return Err(format!("an eager segment into buffer kind {b}")),
        };
        Ok(Segment {
            dst,
            offset: u64::from_le(entry.offset),
            len: u32::from_le(entry.len),
            last: entry.last != 0,
        })
    }
}

/// A slot header as read from a slot.
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
    /// Where slots are written with RMA writes, the writer's read count of the slots the
    /// target keeps for it when it wrote this slot: the target's credits, carried along (0
    /// otherwise).
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

    #[cfg(test)]
    /// The fixed part of this header. A table longer than a slot header counts (u16) is
    /// never made: packing puts at most `u16::MAX` segments in a slot.
    pub fn fixed(&self) -> Fixed {
        Fixed::new(
            self.seq,
            self.digest,
            self.number,
            self.round,
            self.segments.len() as u16,
            self.writes,
            self.credit,
        )
    }

    #[cfg(test)]
    /// The header and its segment table as they start a slot.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.table_end());
        out.extend_from_slice(self.fixed().as_bytes());
        for s in &self.segments {
            out.extend_from_slice(&s.to_bytes());
        }
        out
    }

    #[cfg(test)]
    /// Decodes the header at the start of a slot of `slot.len()` bytes; an error says what is
    /// wrong with it.
    pub fn from_bytes(slot: &[u8]) -> Result<SlotHeader, String> {
        let mut header = SlotHeader::default();
        header.read(slot)?;
        Ok(header)
    }

    /// [`Self::from_bytes`] into this header, keeping its segment table's allocation.
    pub fn read(&mut self, slot: &[u8]) -> Result<(), String> {
        let Some(fixed) = slot.get(..HEADER_BYTES) else {
            return Err(format!("a receive slot of {} bytes", slot.len()));
        };
        let fixed: Fixed = bytemuck::pod_read_unaligned(fixed);
        if u32::from_le(fixed.magic) != MAGIC {
            return Err("an eager write without a slot header".into());
        }
        let count = usize::from(u16::from_le(fixed.segments));
        let table_end = HEADER_BYTES + count * SEGMENT_BYTES;
        let Some(table) = slot.get(HEADER_BYTES..table_end) else {
            return Err(format!("a slot header with {count} segments"));
        };
        self.segments.clear();
        for entry in table.chunks_exact(SEGMENT_BYTES) {
            let entry: SegmentEntry = bytemuck::pod_read_unaligned(entry);
            self.segments.push(Segment::from_entry(&entry)?);
        }
        self.seq = u64::from_le(fixed.seq);
        self.digest = u64::from_le(fixed.digest);
        self.number = fixed.number();
        self.round = u32::from_le(fixed.round);
        self.writes = u32::from_le(fixed.writes);
        self.credit = u64::from_le(fixed.credit);
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

#[cfg(test)]
mod tests {
    use super::*;

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

    fn u64_at(bytes: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
    }

    fn u32_at(bytes: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
    }

    /// The wire layout, field by field: a change to it is a change of the protocol.
    #[test]
    fn the_fixed_header_lies_as_declared() {
        assert_eq!((HEADER_BYTES, SEGMENT_BYTES), (48, 16));
        let fixed = Fixed::new(
            0x0102_0304_0506_0708,
            0x1112_1314_1516_1718,
            0x2122_2324_2526_2728,
            0x3132_3334,
            0x4142,
            0x5152_5354,
            0x6162_6364_6566_6768,
        );
        let b = fixed.as_bytes();
        assert_eq!(u64_at(b, 0), 0x0102_0304_0506_0708, "seq");
        assert_eq!(u64_at(b, 8), 0x1112_1314_1516_1718, "digest");
        assert_eq!(u64_at(b, NUMBER_AT), 0x2122_2324_2526_2728, "number");
        assert_eq!(u32_at(b, 24), 0x3132_3334, "round");
        assert_eq!(u16::from_le_bytes([b[28], b[29]]), 0x4142, "segments");
        assert_eq!(&b[30..32], &[0, 0], "reserved");
        assert_eq!(u32_at(b, 32), 0x5152_5354, "writes");
        assert_eq!(u32_at(b, 36), MAGIC, "magic");
        assert_eq!(u64_at(b, 40), 0x6162_6364_6566_6768, "credit");
        assert_eq!(fixed.number(), 0x2122_2324_2526_2728);
        let entry = Segment {
            dst: Buf::Scratch,
            offset: 0x0102_0304_0506_0708,
            len: 0x1112_1314,
            last: true,
        }
        .to_bytes();
        assert_eq!(u64_at(&entry, 0), 0x0102_0304_0506_0708, "offset");
        assert_eq!(u32_at(&entry, 8), 0x1112_1314, "len");
        assert_eq!(&entry[12..], &[2, 1, 0, 0], "dst, last, reserved");
    }

    /// The hot path's encoder (`Fixed::new`) and the decoder agree on every field.
    #[test]
    fn slot_headers_round_trip() {
        let h = header();
        let mut slot = h.to_bytes();
        assert_eq!(slot.len(), h.table_end());
        assert_eq!(&slot[..HEADER_BYTES], h.fixed().as_bytes());
        slot.resize(h.table_end() + h.data_len(), 0);
        assert_eq!(SlotHeader::from_bytes(&slot), Ok(h.clone()));
        // Read into a header that held another one: nothing of it stays.
        let mut reused = SlotHeader {
            segments: vec![h.segments[0]; 5],
            ..SlotHeader::default()
        };
        reused.read(&slot).unwrap();
        assert_eq!(reused, h);
    }

    #[test]
    fn bad_slot_headers_are_refused() {
        let h = header();
        let full = |bytes: &mut Vec<u8>| bytes.resize(h.table_end() + h.data_len(), 0);
        // Nothing written, or too short for a header.
        assert!(SlotHeader::from_bytes(&[0; 64]).is_err());
        assert!(SlotHeader::from_bytes(&h.to_bytes()[..HEADER_BYTES - 1]).is_err());
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
}
