//! Packing a transfer's pieces into slots: as many parts as fit in one slot (header, table
//! and data), a piece split between slots where it does not fit.

use crate::plan::Piece;

use super::slot::{Segment, HEADER_BYTES, SEGMENT_BYTES};

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

#[cfg(test)]
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

#[cfg(test)]
/// The header segments of `parts` of `pieces`.
pub fn segments(pieces: &[Piece], parts: &[Part]) -> Vec<Segment> {
    parts.iter().map(|p| segment(pieces, p)).collect()
}

/// The header segment of `part` of `pieces`.
pub fn segment(pieces: &[Piece], part: &Part) -> Segment {
    let piece = &pieces[part.piece];
    Segment {
        dst: piece.dst,
        offset: (piece.dst_offset + part.offset) as u64,
        len: part.len as u32,
        last: part.last,
    }
}

#[cfg(test)]
mod tests {
    use super::super::MIN_SLOT_BYTES;
    use super::*;
    use crate::plan::{piece, Buf};

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
}
