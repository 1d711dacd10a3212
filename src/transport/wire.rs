//! What travels besides the data: the 32 bits of remote CQ data every write carries, and the
//! ready token a receiver writes into a writer's control region.
//!
//! Remote CQ data is 4 bytes on verbs and EFA, so everything fits in 32 bits:
//!
//! ```text
//! data write:    0 | seq (7 bits) | round (24 bits)
//! control write: 1 | abort (1 bit) | seq (6 bits, aborts only) | sender rank (24 bits)
//! ```
//!
//! A data write names its operation (sequence number modulo 128) and its round, so the target
//! counts it against its plan. A control write names its sender: the target then reads the
//! sender's slot of its control region (a token) or fails the operation (abort).

use crate::fabric::{RemoteRegion, REMOTE_REGION_BYTES};

/// Largest rank and round index the 24-bit fields hold.
pub const MAX_FIELD: u64 = (1 << 24) - 1;

const CONTROL: u64 = 1 << 31;
const ABORT: u64 = 1 << 30;
const SEQ_BITS: u32 = 7;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
const ABORT_SEQ_MASK: u64 = (1 << 6) - 1;

/// A decoded remote CQ data word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A data write of operation `seq` (modulo 128) in `round`.
    Data { seq: u8, round: u32 },
    /// `from` wrote its ready token into our control region.
    Token { from: usize },
    /// `from` gave up operation `seq` (modulo 64).
    Abort { from: usize, seq: u8 },
}

impl Event {
    pub fn encode(self) -> u64 {
        match self {
            Event::Data { seq, round } => {
                ((u64::from(seq) & SEQ_MASK) << 24) | (u64::from(round) & MAX_FIELD)
            }
            Event::Token { from } => CONTROL | (from as u64 & MAX_FIELD),
            Event::Abort { from, seq } => {
                CONTROL
                    | ABORT
                    | ((u64::from(seq) & ABORT_SEQ_MASK) << 24)
                    | (from as u64 & MAX_FIELD)
            }
        }
    }

    pub fn decode(word: u64) -> Event {
        let low = (word & MAX_FIELD) as usize;
        if word & CONTROL == 0 {
            Event::Data {
                seq: ((word >> 24) & SEQ_MASK) as u8,
                round: low as u32,
            }
        } else if word & ABORT != 0 {
            Event::Abort {
                from: low,
                seq: ((word >> 24) & ABORT_SEQ_MASK) as u8,
            }
        } else {
            Event::Token { from: low }
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

/// A receiver's permission to write into its buffers for one operation: the operation's
/// sequence number, a digest of its arguments (so that ranks that disagree fail instead of
/// corrupting memory), and where its receive and scratch buffers are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    pub seq: u64,
    pub digest: u64,
    pub recv: RemoteRegion,
    pub scratch: RemoteRegion,
}

/// Encoded size of a token, and of a control-region slot.
pub const TOKEN_BYTES: usize = 16 + 2 * REMOTE_REGION_BYTES;

impl Token {
    pub fn to_bytes(&self) -> [u8; TOKEN_BYTES] {
        let mut out = [0; TOKEN_BYTES];
        out[..8].copy_from_slice(&self.seq.to_le_bytes());
        out[8..16].copy_from_slice(&self.digest.to_le_bytes());
        out[16..16 + REMOTE_REGION_BYTES].copy_from_slice(&self.recv.to_bytes());
        out[16 + REMOTE_REGION_BYTES..].copy_from_slice(&self.scratch.to_bytes());
        out
    }

    /// Decodes a slot; `None` if it does not hold a well-formed token.
    pub fn from_bytes(bytes: &[u8; TOKEN_BYTES]) -> Option<Token> {
        let word = |i: usize| {
            let mut w = [0; 8];
            w.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(w)
        };
        Some(Token {
            seq: word(0),
            digest: word(8),
            recv: RemoteRegion::from_bytes(&bytes[16..16 + REMOTE_REGION_BYTES]).ok()?,
            scratch: RemoteRegion::from_bytes(&bytes[16 + REMOTE_REGION_BYTES..]).ok()?,
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
    pub fn word(mut self, w: u64) -> Self {
        for byte in w.to_le_bytes() {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }

    pub fn text(self, s: &str) -> Self {
        s.bytes()
            .fold(self.word(s.len() as u64), |d, b| d.word(u64::from(b)))
    }

    pub fn finish(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_in_32_bits() {
        let events = [
            Event::Data { seq: 0, round: 0 },
            Event::Data {
                seq: 127,
                round: MAX_FIELD as u32,
            },
            Event::Data { seq: 5, round: 77 },
            Event::Token { from: 0 },
            Event::Token {
                from: MAX_FIELD as usize,
            },
            Event::Abort { from: 3, seq: 63 },
            Event::Abort { from: 0, seq: 0 },
        ];
        for e in events {
            let word = e.encode();
            assert!(word <= u64::from(u32::MAX), "{e:?} needs more than 32 bits");
            assert_eq!(Event::decode(word), e);
        }
        assert_eq!(wire_seq(128 + 9), 9);
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
        };
        assert_eq!(Token::from_bytes(&token.to_bytes()), Some(token));
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
