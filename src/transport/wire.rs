//! What travels besides the data: the 32 bits of remote CQ data every write carries, and the
//! ready token a receiver writes into a writer's control region.
//!
//! Remote CQ data is 4 bytes on verbs and EFA, so everything fits in 32 bits:
//!
//! ```text
//! data write:    0 | signal (1 bit) | seq (7 bits) | round (23 bits)
//! control write: 1 | abort (1 bit) | seq (6 bits, aborts only) | sender rank (24 bits)
//!                1 | 0 | kind (6 bits)                         | sender rank (24 bits)
//! ```
//!
//! A data write names its operation (sequence number modulo 2^SEQ_BITS) and its round, so the target
//! counts it against its plan; the signal bit marks the zero-length writes of barriers, which
//! need no token, so that a target that expects data never counts a signal as data. A control
//! write names its sender: the target then reads the sender's slot of its control region (a
//! token) or fails the operation (abort). The kind of a control write that is no abort says
//! what it is: `0` a token, `1` returned eager credits (see `eager`), `1 s s s s s` an eager
//! write into receive slot `s` (at most 32 slots per sender); other kinds are refused.
//!
//! The protocol these words serve: docs/architecture.md, section "The one-sided protocol
//! (src/transport)".

use crate::fabric::{RemoteRegion, REMOTE_REGION_BYTES};

/// Bits of the rank field of control writes.
pub const RANK_BITS: u32 = 24;
/// Largest rank the control writes hold.
pub const MAX_FIELD: u64 = (1 << RANK_BITS) - 1;
/// Bits of the round field of data writes.
pub const ROUND_BITS: u32 = 23;
/// Largest round index the data writes hold.
pub const MAX_ROUND: u64 = (1 << ROUND_BITS) - 1;
/// Bits of the sequence number that data writes carry.
pub const SEQ_BITS: u32 = 7;
/// Bits of the sequence number that aborts carry.
pub const ABORT_SEQ_BITS: u32 = 6;
/// Receive slots one sender can name in an eager write's CQ data.
pub const MAX_SLOTS: usize = 32;

const CONTROL: u64 = 1 << 31;
const ABORT: u64 = 1 << 30;
const SIGNAL: u64 = 1 << 30;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
const ABORT_SEQ_MASK: u64 = (1 << ABORT_SEQ_BITS) - 1;
const KIND_MASK: u64 = (1 << ABORT_SEQ_BITS) - 1;
const KIND_CREDIT: u64 = 1;
const KIND_SLOT: u64 = 1 << 5;

/// A decoded remote CQ data word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A write of operation `seq` (modulo 2^SEQ_BITS) in `round`: data, or a zero-length signal.
    Data {
        /// Sequence number of the operation, modulo 2^SEQ_BITS.
        seq: u8,
        /// Round index.
        round: u32,
        /// A zero-length signal, not data.
        signal: bool,
    },
    /// `from` wrote its ready token into our control region.
    Token {
        /// The writer's rank.
        from: usize,
    },
    /// `from` gave up operation `seq` (modulo 2^ABORT_SEQ_BITS).
    Abort {
        /// The rank that gave up.
        from: usize,
        /// Sequence number, modulo 2^ABORT_SEQ_BITS.
        seq: u8,
    },
    /// `from` wrote an eager message into its receive slot `slot` of this rank.
    Slot {
        /// The writer's rank.
        from: usize,
        /// The receive slot it wrote.
        slot: u8,
    },
    /// `from` wrote how many of this rank's eager messages it has read (its credit word).
    Credit {
        /// The target's rank.
        from: usize,
    },
    /// A control write of a kind this version does not know.
    Unknown {
        /// The sender's rank.
        from: usize,
        /// The kind field.
        kind: u8,
    },
}

impl Event {
    /// The 32-bit remote CQ data of this event.
    pub fn encode(self) -> u64 {
        match self {
            Event::Data { seq, round, signal } => {
                (if signal { SIGNAL } else { 0 })
                    | ((u64::from(seq) & SEQ_MASK) << ROUND_BITS)
                    | (u64::from(round) & MAX_ROUND)
            }
            Event::Token { from } => CONTROL | (from as u64 & MAX_FIELD),
            Event::Slot { from, slot } => {
                CONTROL
                    | ((KIND_SLOT | (u64::from(slot) & (MAX_SLOTS as u64 - 1))) << RANK_BITS)
                    | (from as u64 & MAX_FIELD)
            }
            Event::Credit { from } => {
                CONTROL | (KIND_CREDIT << RANK_BITS) | (from as u64 & MAX_FIELD)
            }
            Event::Unknown { from, kind } => {
                CONTROL | ((u64::from(kind) & KIND_MASK) << RANK_BITS) | (from as u64 & MAX_FIELD)
            }
            Event::Abort { from, seq } => {
                CONTROL
                    | ABORT
                    | ((u64::from(seq) & ABORT_SEQ_MASK) << RANK_BITS)
                    | (from as u64 & MAX_FIELD)
            }
        }
    }

    /// The event a remote CQ data word carries.
    pub fn decode(word: u64) -> Event {
        let low = (word & MAX_FIELD) as usize;
        if word & CONTROL == 0 {
            Event::Data {
                seq: ((word >> ROUND_BITS) & SEQ_MASK) as u8,
                round: (word & MAX_ROUND) as u32,
                signal: word & SIGNAL != 0,
            }
        } else if word & ABORT != 0 {
            Event::Abort {
                from: low,
                seq: ((word >> RANK_BITS) & ABORT_SEQ_MASK) as u8,
            }
        } else {
            let kind = (word >> RANK_BITS) & KIND_MASK;
            match kind {
                0 => Event::Token { from: low },
                KIND_CREDIT => Event::Credit { from: low },
                k if k & KIND_SLOT != 0 => Event::Slot {
                    from: low,
                    slot: (k & !KIND_SLOT) as u8,
                },
                k => Event::Unknown {
                    from: low,
                    kind: k as u8,
                },
            }
        }
    }
}

/// The sequence number as carried by data writes.
pub fn wire_seq(seq: u64) -> u8 {
    (seq & SEQ_MASK) as u8
}

/// The sequence number as carried by aborts.
pub fn abort_seq(seq: u64) -> u8 {
    (seq & ABORT_SEQ_MASK) as u8
}

/// Where wire sequence `seq` (of `bits` bits) lies from the `current` one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Before the current one (an operation already finished).
    Past,
    /// The current one.
    Current,
    /// Ahead by less than half the sequence space.
    Future,
}

/// Orders wire sequence numbers of `bits` bits: the half of the sequence space ahead of
/// `current` is the future, the other half the past.
pub fn order(current: u8, seq: u8, bits: u32) -> Order {
    let mask = (1u16 << bits) - 1;
    let ahead = u16::from(seq).wrapping_sub(u16::from(current)) & mask;
    if ahead == 0 {
        Order::Current
    } else if ahead < (1 << (bits - 1)) {
        Order::Future
    } else {
        Order::Past
    }
}

/// How many operations wire sequence `seq` (of `bits` bits) lies behind the `current` one.
pub fn behind(current: u8, seq: u8, bits: u32) -> u64 {
    let mask = (1u16 << bits) - 1;
    u64::from(u16::from(current).wrapping_sub(u16::from(seq)) & mask)
}

/// A receiver's permission to write into its buffers for one operation: the operation's
/// sequence number, a digest of its arguments (so that ranks that disagree fail instead of
/// corrupting memory), where its receive and scratch buffers are, and where the receive slots
/// it keeps for the writer's eager messages are (an empty region if it keeps none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    /// The operation's sequence number.
    pub seq: u64,
    /// Digest of the operation's arguments.
    pub digest: u64,
    /// The receive buffer to write into.
    pub recv: RemoteRegion,
    /// The scratch region to write into.
    pub scratch: RemoteRegion,
    /// The receive slots the receiver keeps for the writer's eager messages.
    pub slots: SlotRing,
}

/// How a writer's eager messages reach a target's receive slots; the target chooses, and its
/// token tells the writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carrier {
    /// One-sided writes with remote CQ data into registered slots (any provider).
    Write,
    /// Stores into slots in memory both processes map (ranks of one host): no libfabric call.
    Memory,
}

/// A target's receive slots for one writer: `count` slots of `slot_bytes` each, reached by
/// `carrier`. For [`Carrier::Write`], `region` is the registered slots; for
/// [`Carrier::Memory`], `region.base` is the target's pid, `region.key` the name of the file
/// that holds the slots (`fabric::SharedMemory`) and `region.len` its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotRing {
    /// Where the slots are (empty: none).
    pub region: RemoteRegion,
    /// How many slots.
    pub count: u32,
    /// Bytes of one slot.
    pub slot_bytes: u32,
    /// How they are reached.
    pub carrier: Carrier,
}

/// The bit of a token's slot count that says the slots are reached by [`Carrier::Memory`].
const MEMORY_CARRIER: u32 = 1 << 31;

impl SlotRing {
    /// No slots.
    pub const NONE: SlotRing = SlotRing {
        region: RemoteRegion {
            base: 0,
            len: 0,
            key: 0,
        },
        count: 0,
        slot_bytes: 0,
        carrier: Carrier::Write,
    };

    /// Whether this names no slots.
    pub fn is_none(&self) -> bool {
        self.count == 0
    }
}

/// Encoded size of a token, and of a control-region slot.
pub const TOKEN_BYTES: usize = 24 + 3 * REMOTE_REGION_BYTES;

/// Bytes of a credit word (see `eager`).
pub const CREDIT_BYTES: usize = 8;

/// Size of a rank's control region among `size` ranks: incoming tokens (one slot per peer),
/// outgoing tokens (the source of ours), incoming credit words, outgoing credit words.
pub fn control_bytes(size: usize) -> usize {
    2 * size * (TOKEN_BYTES + CREDIT_BYTES)
}

/// Offset of the credit word `from` writes into a control region.
pub fn credit_in(size: usize, from: usize) -> usize {
    2 * size * TOKEN_BYTES + from * CREDIT_BYTES
}

/// Offset of the source of the credit word written to `to`.
pub fn credit_out(size: usize, to: usize) -> usize {
    2 * size * TOKEN_BYTES + (size + to) * CREDIT_BYTES
}

impl Token {
    /// The encoded token, [`TOKEN_BYTES`] long.
    pub fn to_bytes(self) -> [u8; TOKEN_BYTES] {
        let mut out = [0; TOKEN_BYTES];
        out[..8].copy_from_slice(&self.seq.to_le_bytes());
        out[8..16].copy_from_slice(&self.digest.to_le_bytes());
        let r = REMOTE_REGION_BYTES;
        out[16..16 + r].copy_from_slice(&self.recv.to_bytes());
        out[16 + r..16 + 2 * r].copy_from_slice(&self.scratch.to_bytes());
        out[16 + 2 * r..16 + 3 * r].copy_from_slice(&self.slots.region.to_bytes());
        let carrier = match self.slots.carrier {
            Carrier::Write => 0,
            Carrier::Memory => MEMORY_CARRIER,
        };
        out[16 + 3 * r..20 + 3 * r].copy_from_slice(&(self.slots.count | carrier).to_le_bytes());
        out[20 + 3 * r..].copy_from_slice(&self.slots.slot_bytes.to_le_bytes());
        out
    }

    /// Decodes a slot; `None` if it does not hold a well-formed token.
    pub fn from_bytes(bytes: &[u8; TOKEN_BYTES]) -> Option<Token> {
        let word = |i: usize| {
            let mut w = [0; 8];
            w.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(w)
        };
        let half = |i: usize| {
            let mut w = [0; 4];
            w.copy_from_slice(&bytes[i..i + 4]);
            u32::from_le_bytes(w)
        };
        let r = REMOTE_REGION_BYTES;
        let count = half(16 + 3 * r);
        Some(Token {
            seq: word(0),
            digest: word(8),
            recv: RemoteRegion::from_bytes(&bytes[16..16 + r]).ok()?,
            scratch: RemoteRegion::from_bytes(&bytes[16 + r..16 + 2 * r]).ok()?,
            slots: SlotRing {
                region: RemoteRegion::from_bytes(&bytes[16 + 2 * r..16 + 3 * r]).ok()?,
                count: count & !MEMORY_CARRIER,
                slot_bytes: half(20 + 3 * r),
                carrier: if count & MEMORY_CARRIER != 0 {
                    Carrier::Memory
                } else {
                    Carrier::Write
                },
            },
        })
    }
}

/// FNV-1a over 64-bit words: a digest of an operation's arguments, equal on every rank that
/// called the operation the same way.
#[derive(Clone, Copy, Debug)]
pub struct Digest(u64);

impl Default for Digest {
    fn default() -> Self {
        Digest(0xcbf2_9ce4_8422_2325)
    }
}

impl Digest {
    /// Adds a 64-bit word.
    pub fn word(mut self, w: u64) -> Self {
        for byte in w.to_le_bytes() {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }

    /// Adds a string (its length, then its bytes).
    pub fn text(self, s: &str) -> Self {
        s.bytes()
            .fold(self.word(s.len() as u64), |d, b| d.word(u64::from(b)))
    }

    /// The digest.
    pub fn finish(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest wire sequence of data writes and of aborts.
    const LAST_SEQ: u8 = SEQ_MASK as u8;
    const LAST_ABORT_SEQ: u8 = ABORT_SEQ_MASK as u8;
    /// Half the sequence space: the first sequence number that is in the past.
    const HALF_SEQ: u8 = 1 << (SEQ_BITS - 1);
    const HALF_ABORT_SEQ: u8 = 1 << (ABORT_SEQ_BITS - 1);

    #[test]
    fn events_round_trip_in_32_bits() {
        let events = [
            Event::Data {
                seq: 0,
                round: 0,
                signal: false,
            },
            Event::Data {
                seq: LAST_SEQ,
                round: MAX_ROUND as u32,
                signal: true,
            },
            Event::Data {
                seq: LAST_SEQ,
                round: MAX_ROUND as u32,
                signal: false,
            },
            Event::Data {
                seq: 5,
                round: 77,
                signal: true,
            },
            Event::Token { from: 0 },
            Event::Token {
                from: MAX_FIELD as usize,
            },
            Event::Abort {
                from: 3,
                seq: LAST_ABORT_SEQ,
            },
            Event::Abort { from: 0, seq: 0 },
            Event::Slot { from: 0, slot: 0 },
            Event::Slot {
                from: MAX_FIELD as usize,
                slot: MAX_SLOTS as u8 - 1,
            },
            Event::Credit { from: 7 },
            Event::Unknown { from: 2, kind: 9 },
        ];
        for e in events {
            let word = e.encode();
            assert!(word <= u64::from(u32::MAX), "{e:?} needs more than 32 bits");
            assert_eq!(Event::decode(word), e);
        }
        assert_eq!(wire_seq((1 << SEQ_BITS) + 9), 9);
        assert_eq!(abort_seq((1 << ABORT_SEQ_BITS) + 9), 9);
    }

    #[test]
    fn sequence_numbers_order_across_the_wrap() {
        assert_eq!(order(5, 5, SEQ_BITS), Order::Current);
        assert_eq!(order(5, 6, SEQ_BITS), Order::Future);
        assert_eq!(order(5, 4, SEQ_BITS), Order::Past);
        assert_eq!(order(LAST_SEQ, 0, SEQ_BITS), Order::Future);
        assert_eq!(order(0, LAST_SEQ, SEQ_BITS), Order::Past);
        assert_eq!(order(0, HALF_SEQ - 1, SEQ_BITS), Order::Future);
        assert_eq!(order(0, HALF_SEQ, SEQ_BITS), Order::Past);
        assert_eq!(order(LAST_ABORT_SEQ, 0, ABORT_SEQ_BITS), Order::Future);
        assert_eq!(order(0, HALF_ABORT_SEQ - 1, ABORT_SEQ_BITS), Order::Future);
        assert_eq!(order(0, HALF_ABORT_SEQ, ABORT_SEQ_BITS), Order::Past);
    }

    #[test]
    fn distance_behind_counts_across_the_wrap() {
        assert_eq!(behind(5, 3, SEQ_BITS), 2);
        assert_eq!(behind(0, LAST_SEQ, SEQ_BITS), 1);
        assert_eq!(behind(1, LAST_SEQ - 1, SEQ_BITS), 3);
        assert_eq!(behind(0, LAST_ABORT_SEQ, ABORT_SEQ_BITS), 1);
        assert_eq!(behind(4, 4, SEQ_BITS), 0);
    }

    #[test]
    fn tokens_round_trip() {
        let region = |b| RemoteRegion {
            base: b,
            len: b * 3,
            key: b + 1,
        };
        let token = Token {
            seq: 1 << 40,
            digest: 0xfeed,
            recv: region(4096),
            scratch: region(0),
            slots: SlotRing {
                region: region(1 << 20),
                count: 16,
                slot_bytes: 8192,
                carrier: Carrier::Write,
            },
        };
        assert_eq!(Token::from_bytes(&token.to_bytes()), Some(token));
        let shared = Token {
            slots: SlotRing {
                carrier: Carrier::Memory,
                ..token.slots
            },
            ..token
        };
        assert_eq!(Token::from_bytes(&shared.to_bytes()), Some(shared));
        let plain = Token {
            slots: SlotRing::NONE,
            ..token
        };
        assert_eq!(Token::from_bytes(&plain.to_bytes()), Some(plain));
        assert!(plain.slots.is_none());
    }

    #[test]
    fn digests_tell_arguments_apart() {
        let a = Digest::default()
            .text("allgatherv")
            .word(3)
            .word(5)
            .finish();
        let b = Digest::default()
            .text("allgatherv")
            .word(5)
            .word(3)
            .finish();
        let c = Digest::default()
            .text("allgatherv")
            .word(3)
            .word(5)
            .finish();
        assert_ne!(a, b);
        assert_eq!(a, c);
    }
}
