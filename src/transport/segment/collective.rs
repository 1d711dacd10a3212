//! The collectives on the segment: who publishes a part, whose parts each rank takes and
//! what it makes of them.

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
    published: bool,
    /// The next rank whose part this rank has not taken yet.
    next: usize,
    /// The peer the last test waited for.
    awaited: usize,
    done: bool,
    patience: Patience,
    /// Bytes copied into and out of shared memory.
    pub bytes_copied: u64,
    /// Whether this rank published a part, and its bytes.
    pub published_part: bool,
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
            published: false,
            next: 0,
            awaited: 0,
            done: false,
            patience: Patience::new(deadline),
            bytes_copied: 0,
            published_part: false,
            bytes_published: 0,
        }
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
        if !self.published {
            // Every rank looks at the peers' abort words once per call, so that a failure on
            // any rank reaches it by its next call or the one after (a writer may run one
            // call ahead of its readers).
            let writes = self.kind.publishes(me);
            if let Err(busy) = segment
                .parity_free(self.seq, writes)
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
                if data.len() > segment.area() {
                    return Err(self.invalid(format!(
                        "a part of {} bytes, more than the segment's {}",
                        data.len(),
                        segment.area()
                    )));
                }
                segment.publish(self.seq, self.digest, data)?;
                self.bytes_copied += data.len() as u64;
                self.published_part = true;
                self.bytes_published = data.len() as u64;
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
        segment.complete(self.seq)?;
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
        let waiting = if !self.published {
            format!(
                "waiting for the ranks of the shared segment to finish operation {} of it",
                self.seq.saturating_sub(2)
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
        let Some(part) = segment.part(op, self.seq, self.digest, from).map_err(|e| {
            // The segment names the collective only: errors name the operation.
            rename(e, &self.op())
        })?
        else {
            return Ok(false);
        };
        let copied = match &self.kind {
            Kind::Barrier => 0,
            Kind::Broadcast { .. } => place(recv, 0, part).map_err(|w| self.invalid(w))?,
            Kind::Allgatherv { offsets } => {
                place(recv, offsets[from], part).map_err(|w| self.invalid(w))?
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
        let copied = match (&self.kind, send) {
            (Kind::Allgatherv { offsets }, Source::Send(data)) => {
                place(recv, offsets[me], data).map_err(|w| self.invalid(w))?
            }
            (
                Kind::Reduce { reduction, .. } | Kind::Allreduce { reduction },
                Source::Send(data),
            ) => {
                let reduction = *reduction;
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

    /// Folds rank `from`'s vector into the result in `recv` (rank 0's is copied there
    /// first); returns the bytes copied.
    fn fold(
        &self,
        reduction: Reduction,
        from: usize,
        part: &[u8],
        recv: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<usize> {
        if part.len() != recv.len() {
            return Err(self.invalid(format!(
                "a vector of {} bytes into a result of {}",
                part.len(),
                recv.len()
            )));
        }
        if from == 0 {
            recv.copy_from_slice(part);
            return Ok(part.len());
        }
        scratch.clear();
        scratch.extend_from_slice(recv);
        reduction.combine(scratch, part, recv)?;
        Ok(part.len())
    }
}

/// Copies `part` into `recv` at `at`; returns the bytes copied.
fn place(recv: &mut [u8], at: usize, part: &[u8]) -> std::result::Result<usize, String> {
    let len = recv.len();
    let to = recv
        .get_mut(at..at + part.len())
        .ok_or_else(|| format!("{} bytes at {at} outside a buffer of {len}", part.len()))?;
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
