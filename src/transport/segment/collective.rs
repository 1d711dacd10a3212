//! The collectives on the segment: who publishes a part, whose parts each rank takes and
//! what it makes of them.
//!
//! A collective whose parts exceed the segment's area runs in chunks: chunk j of every part
//! (the bytes from j × area) goes as operation s + j, so that a writer fills one parity while
//! its readers copy out of the other, and every rank copies the whole of what it needs once.
//! Every rank counts the chunks alike from the call (the largest part).

use std::time::Duration;

use crate::plan::Reduction;

use super::{Patience, Pause, Segment, SPINS};

use crate::transport::{Result, TransportError};

/// A collective as the segment runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The root publishes its buffer; every other rank copies it out.
    Broadcast { root: usize },
    /// Every rank publishes its vector; the root reduces them in rank order.
    Reduce { root: usize, reduction: Reduction },
    /// Every rank publishes its vector and reduces all of them in rank order (so that every
    /// rank gets the same bits).
    Allreduce { reduction: Reduction },
    /// Every rank publishes its block; every rank copies each block to its offset (the sums
    /// of the counts before it).
    Allgatherv { offsets: Vec<usize> },
    /// Every rank raises its flag and waits for all others'.
    Barrier,
}

impl Kind {
    /// Whether `rank` publishes a part.
    fn publishes(&self, rank: usize) -> bool {
        match self {
            Kind::Broadcast { root } => rank == *root,
            _ => true,
        }
    }

    /// Whether `rank` takes the part of `from`.
    fn takes(&self, rank: usize, from: usize) -> bool {
        match self {
            Kind::Broadcast { root } => from == *root && rank != *root,
            Kind::Reduce { root, .. } => rank == *root,
            Kind::Allreduce { .. } | Kind::Allgatherv { .. } | Kind::Barrier => true,
        }
    }
}

/// Where each rank's block of an allgatherv begins ([`Kind::Allgatherv`]'s offsets): the sums
/// of the counts before it.
pub fn block_offsets(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .scan(0, |at, &c| {
            let offset = *at;
            *at += c;
            Some(offset)
        })
        .collect()
}

/// Where this rank's part is.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// It publishes nothing.
    None,
    /// The send buffer.
    Send(&'a [u8]),
    /// (offset, length) within the receive buffer: a broadcast root's data, an in-place
    /// block.
    InRecv(usize, usize),
}

/// One collective on the segment on this rank.
pub struct Run {
    /// The operation's name for errors (`bcast (operation 7)`).
    name: &'static str,
    /// Its number among the communicator's operations, for errors.
    number: u64,
    seq: u64,
    digest: u64,
    kind: Kind,
    /// The chunks the call runs in (operations seq, seq + 1, …), the chunk under way and the
    /// bytes of a whole chunk (the segment's area).
    chunks: u64,
    chunk: u64,
    area: usize,
    /// Whether this rank published its part of the chunk under way.
    published: bool,
    /// The next rank whose part of the chunk under way this rank has not taken yet.
    next: usize,
    /// The peer the last test waited for.
    awaited: usize,
    done: bool,
    patience: Patience,
    /// Bytes copied into and out of shared memory.
    pub bytes_copied: u64,
    /// The parts this rank published (one a chunk), and their bytes.
    pub parts_published: u64,
    pub bytes_published: u64,
}

impl Run {
    /// Begins the next operation on `segment`: `kind`, named `name` (the collective the
    /// user called) and numbered `number` in errors, checked against the peers' `digest`.
    pub fn new(
        segment: &mut Segment,
        name: &'static str,
        number: u64,
        digest: u64,
        kind: Kind,
        deadline: Duration,
    ) -> Run {
        Run {
            name,
            number,
            seq: segment.next_seq(),
            digest,
            kind,
            chunks: 1,
            chunk: 0,
            area: segment.area(),
            published: false,
            next: 0,
            awaited: 0,
            done: false,
            patience: Patience::new(deadline),
            bytes_copied: 0,
            parts_published: 0,
            bytes_published: 0,
        }
    }

    /// The same call in as many chunks as parts of up to `largest` bytes need (every rank
    /// passes the same `largest`: the most bytes any rank publishes), each an operation of the
    /// segment; taken before any other run begins on the segment.
    pub fn chunked(mut self, segment: &mut Segment, largest: usize) -> Run {
        let chunks = largest.div_ceil(self.area.max(1)).max(1) as u64;
        segment.take_seqs(chunks - 1);
        self.chunks = chunks;
        self
    }

    /// The bytes of chunk `chunk` of a part of `data` (empty past its end).
    fn chunk_of<'d>(&self, data: &'d [u8], chunk: u64) -> &'d [u8] {
        let from = (chunk as usize).saturating_mul(self.area).min(data.len());
        let to = from.saturating_add(self.area).min(data.len());
        &data[from..to]
    }

    fn op(&self) -> String {
        format!("{} (operation {})", self.name, self.number)
    }

    /// Goes as far as the peers allow without waiting; true once complete.
    pub fn test(
        &mut self,
        segment: &mut Segment,
        send: Source<'_>,
        recv: &mut [u8],
    ) -> Result<bool> {
        if self.done {
            return Ok(true);
        }
        let me = segment.rank();
        while self.chunk < self.chunks {
            let seq = self.seq + self.chunk;
            if !self.published {
                // Every rank looks at the peers' abort words once per operation, so that a
                // failure on any rank reaches it by its next operation or the one after (a
                // writer may run one operation ahead of its readers).
                let writes = self.kind.publishes(me);
                if let Err(busy) = segment
                    .parity_free(seq, writes)
                    .map_err(|e| rename(e, &self.op()))?
                {
                    self.awaited = busy;
                    return Ok(false);
                }
                if writes {
                    let data = match send {
                        Source::None => &[][..],
                        Source::Send(data) => data,
                        Source::InRecv(at, len) => recv.get(at..at + len).ok_or_else(|| {
                            self.invalid(format!("{len} bytes at {at} outside the buffer"))
                        })?,
                    };
                    if data.len() > self.area.saturating_mul(self.chunks as usize) {
                        return Err(self.invalid(format!(
                            "a part of {} bytes, more than {} chunks of the segment's {}",
                            data.len(),
                            self.chunks,
                            self.area
                        )));
                    }
                    let part = self.chunk_of(data, self.chunk);
                    segment.publish(seq, self.digest, part)?;
                    self.bytes_copied += part.len() as u64;
                    self.parts_published += 1;
                    self.bytes_published += part.len() as u64;
                }
                self.published = true;
            }
            while self.next < segment.size() {
                let from = self.next;
                if self.kind.takes(me, from) && !self.take(segment, from, send, recv)? {
                    self.awaited = from;
                    return Ok(false);
                }
                self.next += 1;
            }
            segment.complete(seq)?;
            self.chunk += 1;
            self.published = false;
            self.next = 0;
            if self.chunk < self.chunks {
                // The peers move: the next chunk's wait polls again before it sleeps.
                self.patience.progressed();
            }
        }
        self.done = true;
        Ok(true)
    }

    /// Waits until complete or the deadline: a few polls in a tight loop first where every
    /// rank can have a core ([`SPINS`]), then polls that yield the core, then sleeps.
    pub fn wait(&mut self, segment: &mut Segment, send: Source<'_>, recv: &mut [u8]) -> Result<()> {
        if segment.spins {
            for _ in 0..SPINS {
                if self.test(segment, send, recv)? {
                    return Ok(());
                }
                std::hint::spin_loop();
            }
        }
        while !self.test(segment, send, recv)? {
            match self.patience.pause() {
                Pause::Polling => {}
                Pause::Sleeping => {
                    if self.test_unless_gone(segment, send, recv)? {
                        return Ok(());
                    }
                }
                Pause::Expired => return Err(self.timeout()),
            }
        }
        Ok(())
    }

    /// For a caller that only tests, after a test that did not complete: true if complete
    /// now; an error once the deadline has passed or the awaited peer's process has ended.
    pub fn test_within_deadline(
        &mut self,
        segment: &mut Segment,
        send: Source<'_>,
        recv: &mut [u8],
    ) -> Result<bool> {
        if self.patience.waited() >= self.patience.deadline() {
            return Err(self.timeout());
        }
        self.test_unless_gone(segment, send, recv)
    }

    /// Where the awaited peer's process has ended: tests once more (it may have done its part
    /// before it ended) and fails if it is still awaited. True if complete.
    fn test_unless_gone(
        &mut self,
        segment: &mut Segment,
        send: Source<'_>,
        recv: &mut [u8],
    ) -> Result<bool> {
        let gone = self.awaited;
        if !segment.ended(gone) {
            return Ok(false);
        }
        if self.test(segment, send, recv)? {
            return Ok(true);
        }
        if self.awaited == gone {
            return Err(TransportError::Exited {
                op: self.op(),
                peer: gone,
            });
        }
        Ok(false)
    }

    /// The error of a run past its deadline.
    pub fn timeout(&self) -> TransportError {
        let seq = self.seq + self.chunk;
        let waiting = if !self.published {
            format!(
                "waiting for the ranks of the shared segment to finish operation {} of it",
                seq.saturating_sub(2)
            )
        } else {
            format!(
                "waiting for rank {}'s part in the shared segment",
                self.next
            )
        };
        TransportError::Timeout {
            op: self.op(),
            after: self.patience.deadline(),
            waiting,
        }
    }

    fn invalid(&self, what: String) -> TransportError {
        TransportError::Invalid {
            op: self.op(),
            what,
        }
    }

    /// Takes `from`'s part into `recv` if it is there.
    fn take(
        &mut self,
        segment: &mut Segment,
        from: usize,
        send: Source<'_>,
        recv: &mut [u8],
    ) -> Result<bool> {
        let me = segment.rank();
        if from == me {
            return self.take_own(segment, send, recv).map(|()| true);
        }
        let mut scratch = std::mem::take(&mut segment.scratch);
        let taken = self.take_peer(segment, from, recv, &mut scratch);
        segment.scratch = scratch;
        taken
    }

    fn take_peer(
        &mut self,
        segment: &Segment,
        from: usize,
        recv: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<bool> {
        let op = self.name;
        let seq = self.seq + self.chunk;
        let Some(part) = segment.part(op, seq, self.digest, from).map_err(|e| {
            // The segment names the collective only: errors name the operation.
            rename(e, &self.op())
        })?
        else {
            return Ok(false);
        };
        let at = (self.chunk as usize).saturating_mul(self.area);
        let copied = match &self.kind {
            Kind::Barrier => 0,
            Kind::Broadcast { .. } => {
                place(recv, at, recv.len(), part).map_err(|w| self.invalid(w))?
            }
            Kind::Allgatherv { offsets } => {
                let end = offsets.get(from + 1).copied().unwrap_or(recv.len());
                place(recv, offsets[from] + at, end, part).map_err(|w| self.invalid(w))?
            }
            Kind::Reduce { reduction, .. } | Kind::Allreduce { reduction } => {
                let reduction = *reduction;
                self.fold(reduction, from, part, recv, scratch)?
            }
        };
        self.bytes_copied += copied as u64;
        Ok(true)
    }

    /// This rank's own part: copied to its place (allgatherv from a send buffer) or folded
    /// into the reduction.
    fn take_own(&mut self, segment: &mut Segment, send: Source<'_>, recv: &mut [u8]) -> Result<()> {
        let me = segment.rank();
        let at = (self.chunk as usize).saturating_mul(self.area);
        let copied = match (&self.kind, send) {
            (Kind::Allgatherv { offsets }, Source::Send(data)) => {
                let end = offsets.get(me + 1).copied().unwrap_or(recv.len());
                let part = self.chunk_of(data, self.chunk);
                place(recv, offsets[me] + at, end, part).map_err(|w| self.invalid(w))?
            }
            (
                Kind::Reduce { reduction, .. } | Kind::Allreduce { reduction },
                Source::Send(data),
            ) => {
                let reduction = *reduction;
                let data = self.chunk_of(data, self.chunk);
                let mut scratch = std::mem::take(&mut segment.scratch);
                let folded = self.fold(reduction, me, data, recv, &mut scratch);
                segment.scratch = scratch;
                folded?
            }
            _ => 0,
        };
        self.bytes_copied += copied as u64;
        Ok(())
    }

    /// Folds rank `from`'s chunk of its vector into the result's chunk in `recv` (rank 0's is
    /// copied there first); returns the bytes copied.
    fn fold(
        &self,
        reduction: Reduction,
        from: usize,
        part: &[u8],
        recv: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<usize> {
        let at = (self.chunk as usize)
            .saturating_mul(self.area)
            .min(recv.len());
        let result = &mut recv[at..];
        let result_len = result.len().min(self.area);
        let result = &mut result[..result_len];
        if part.len() != result.len() {
            return Err(self.invalid(format!(
                "a vector's chunk of {} bytes into a result's of {}",
                part.len(),
                result.len()
            )));
        }
        if from == 0 {
            result.copy_from_slice(part);
            return Ok(part.len());
        }
        scratch.clear();
        scratch.extend_from_slice(result);
        reduction.combine(scratch, part, result)?;
        Ok(part.len())
    }
}

/// Copies `part` into `recv` at `at`, where it must end by `end`; returns the bytes copied.
fn place(
    recv: &mut [u8],
    at: usize,
    end: usize,
    part: &[u8],
) -> std::result::Result<usize, String> {
    if part.is_empty() {
        // A part's chunks past its end are empty (chunks count the largest part).
        return Ok(0);
    }
    let len = recv.len();
    let to = recv
        .get_mut(at..at + part.len())
        .filter(|_| at + part.len() <= end)
        .ok_or_else(|| {
            format!(
                "{} bytes at {at} outside a block ending at {end} of a buffer of {len}",
                part.len()
            )
        })?;
    to.copy_from_slice(part);
    Ok(part.len())
}

/// `err` with the operation named `op`.
pub(super) fn rename(err: TransportError, op: &str) -> TransportError {
    match err {
        TransportError::AbortedBy { rank, .. } => TransportError::AbortedBy {
            op: op.to_string(),
            rank,
        },
        TransportError::Mismatch { peer, .. } => TransportError::Mismatch {
            op: op.to_string(),
            peer,
        },
        TransportError::Protocol { what, .. } => TransportError::Protocol {
            op: op.to_string(),
            what,
        },
        other => other,
    }
}
