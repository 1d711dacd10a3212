//! What arrives: the events the completion queue reports to an operation, and what arrives
//! for operations other than the one in progress, kept by the transport from one operation
//! to the next.

use std::collections::HashMap;

use super::super::wire::Token;

/// What arrived for operations other than the one in progress, carried from one operation to
/// the next.
pub(in crate::transport) struct Inbox {
    /// Tokens received and not yet used, per peer (usually at most one).
    pub(in crate::transport) tokens: Vec<Vec<Token>>,
    /// Writes and signals of operations this rank has not reached yet:
    /// (wire seq, round, signal) → count.
    pub(in crate::transport) early: HashMap<(u8, u32, bool), usize>,
    /// Aborts of operations this rank has not reached yet: (abort seq, rank).
    pub(in crate::transport) early_aborts: Vec<(u8, usize)>,
    /// Ranks whose tokens of operations this rank had not reached arrived: a start checks
    /// theirs alone, not every rank's.
    pub(in crate::transport) early_tokens: Vec<usize>,
}

impl Inbox {
    /// Nothing arrived yet among `size` ranks.
    pub(in crate::transport) fn new(size: usize) -> Self {
        Inbox {
            tokens: vec![Vec::new(); size],
            early: HashMap::new(),
            early_aborts: Vec::new(),
            early_tokens: Vec::new(),
        }
    }

    /// The number of ranks.
    pub(in crate::transport) fn size(&self) -> usize {
        self.tokens.len()
    }

    /// Whether `to`'s token for operation `seq` is here.
    pub(in crate::transport) fn has_token(&self, to: usize, seq: u64) -> bool {
        self.tokens[to].iter().any(|tok| tok.seq == seq)
    }
}

/// What the completion queue reported, as the run state needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::transport) enum Incoming {
    /// A peer's write (or zero-length signal, `signal`) of wire sequence `seq` for `round`.
    Data { seq: u8, round: u32, signal: bool },
    /// `from` wrote a ready token into our control region; `None` if its slot did not hold a
    /// well-formed one.
    Token { from: usize, token: Option<Token> },
    /// `from` gave up the operation of abort sequence `seq`.
    Abort { from: usize, seq: u8 },
    /// A control write of a kind this version does not know.
    Unknown { from: usize, kind: u8 },
    /// One of this rank's own writes completed.
    LocalDone,
}
