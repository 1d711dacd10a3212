//! The collectives on the segment: who publishes a part, whose parts each rank takes and
//! what it makes of them.
//!
//! A collective whose parts exceed the segment's area runs in chunks: chunk j of every part
//! (the bytes from j × area) goes as operation s + j, so that a writer fills one parity while
//! its readers copy out of the other, and every rank copies the whole of what it needs once.
//! Every rank counts the chunks alike from the call (the largest part).

use std::time::Duration;

use crate::plan::Reduction;

use super::{Patience, Pause, Segment, SINGLE_COPY_FROM, SPINS};

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
    /// Every rank publishes its vector; every rank reduces its own block of all of them in
    /// rank order (`bounds`: where each rank's block begins, then the total).
    ReduceScatter {
        reduction: Reduction,
        bounds: Vec<usize>,
    },
    /// Every rank publishes its block; every rank copies each block to its offset (the sums
    /// of the counts before it).
    Allgatherv { offsets: Vec<usize> },
    /// Every rank but the root publishes its block; the root copies each block to its place
    /// (`bounds`: where each block begins, then the total), its own from its send buffer.
    Gatherv { root: usize, bounds: Vec<usize> },
    /// The root publishes its send buffer, every rank's block in rank order; every rank copies
    /// its own block out (`bounds`: where each block begins, then the total).
    Scatterv { root: usize, bounds: Vec<usize> },
    /// Every rank raises its flag and waits for all others'.
    Barrier,
}

impl Kind {
    /// Whether `rank` publishes a part.
    fn publishes(&self, rank: usize) -> bool {
        match self {
            Kind::Broadcast { root } | Kind::Scatterv { root, .. } => rank == *root,
            Kind::Gatherv { root, .. } => rank != *root,
            _ => true,
        }
    }

    /// Whether `rank` takes the part of `from`.
    fn takes(&self, rank: usize, from: usize) -> bool {
        match self {
            Kind::Broadcast { root } => from == *root && rank != *root,
            Kind::Reduce { root, .. } | Kind::Gatherv { root, .. } => rank == *root,
            Kind::Scatterv { root, .. } => from == *root,
            Kind::Allreduce { .. }
            | Kind::ReduceScatter { .. }
            | Kind::Allgatherv { .. }
            | Kind::Barrier => true,
        }
    }

    /// Whether the readers of a part may read it where it is ([`SINGLE_COPY_FROM`]): each
    /// part has one reader, the root of a gather or the rank of a scatter's block.
    fn reads_in_place(&self) -> bool {
        matches!(self, Kind::Gatherv { .. } | Kind::Scatterv { .. })
    }

    /// Whether `rank` publishes a part of chunk `chunk` (of `area` bytes each). Every rank
    /// that publishes does in the first chunk, where its readers check its digest; a gatherv's
    /// rank in the later ones only while its block lasts, so that a short block's rank is
    /// done when it is published.
    fn publishes_in(&self, rank: usize, chunk: u64, area: usize) -> bool {
        self.publishes(rank)
            && (chunk == 0
                || match self {
                    Kind::Gatherv { bounds, .. } => block_in_chunk(bounds, rank, chunk, area, true),
                    _ => true,
                })
    }

    /// Whether `rank` takes the part of `from` in chunk `chunk`: in the first chunk wherever
    /// it takes it at all; in a later one a gatherv's root only while `from`'s block lasts,
    /// a scatterv's rank only where the root's chunk holds bytes of its own block.
    fn takes_in(&self, rank: usize, from: usize, chunk: u64, area: usize) -> bool {
        self.takes(rank, from)
            && (chunk == 0
                || match self {
                    Kind::Gatherv { bounds, .. } => block_in_chunk(bounds, from, chunk, area, true),
                    Kind::Scatterv { bounds, .. } => {
                        block_in_chunk(bounds, rank, chunk, area, false)
                    }
                    _ => true,
                })
    }
}

/// Whether the block of `rank` (from `bounds[rank]` to `bounds[rank + 1]` of the root's
/// buffer) has bytes in chunk `chunk` (of `area` bytes each) of that buffer, or where `alone`,
/// of the block itself (a part its rank publishes).
fn block_in_chunk(bounds: &[usize], rank: usize, chunk: u64, area: usize, alone: bool) -> bool {
    let Ok((begin, end)) = block(bounds, rank) else {
        return false;
    };
    let from = (chunk as usize).saturating_mul(area);
    let (begin, end) = if alone {
        (0, end.saturating_sub(begin))
    } else {
        (begin, end)
    };
    begin < from.saturating_add(area) && end > from && begin < end
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

/// What a part read where it is publishes instead of its bytes: their address in the
/// writer's memory and their length, each a little-endian u64.
const DESCRIPTOR_BYTES: usize = 16;

fn descriptor(part: &[u8]) -> [u8; DESCRIPTOR_BYTES] {
    let mut out = [0u8; DESCRIPTOR_BYTES];
    out[..8].copy_from_slice(&(part.as_ptr() as u64).to_le_bytes());
    out[8..].copy_from_slice(&(part.len() as u64).to_le_bytes());
    out
}

/// The (address, length) of a descriptor; `None` if `bytes` is not one.
fn read_descriptor(bytes: &[u8]) -> Option<(u64, usize)> {
    if bytes.len() != DESCRIPTOR_BYTES {
        return None;
    }
    let address = u64::from_le_bytes(bytes[..8].try_into().ok()?);
    let len = u64::from_le_bytes(bytes[8..].try_into().ok()?);
    Some((address, usize::try_from(len).ok()?))
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
    /// Whether the parts are read where they are (one operation, each part a descriptor), not
    /// through the segment.
    single: bool,
    /// Whether this rank is past publishing in the chunk under way, whether it published a
    /// part there, and whether it waits for the readers of its part read where it is.
    published: bool,
    wrote: bool,
    draining: bool,
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
            single: false,
            published: false,
            wrote: false,
            draining: false,
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
    /// segment; taken before any other run begins on the segment. A gather's or scatter's
    /// parts of [`SINGLE_COPY_FROM`] or more are instead read where they are, in one
    /// operation, where the ranks can read each other's memory.
    pub fn chunked(mut self, segment: &mut Segment, largest: usize) -> Run {
        if segment.single_copy && self.kind.reads_in_place() && largest >= SINGLE_COPY_FROM {
            self.single = true;
            // One chunk holds every part.
            self.area = usize::MAX;
            return self;
        }
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
                let writes = self.kind.publishes_in(me, self.chunk, self.area);
                if let Err(busy) = segment
                    .parity_free(seq, writes)
                    .map_err(|e| e.in_op(&self.op()))?
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
                    if self.single {
                        // The part stays where it is until every reader has completed.
                        segment.publish(seq, self.digest, &descriptor(part))?;
                    } else {
                        segment.publish(seq, self.digest, part)?;
                        self.bytes_copied += part.len() as u64;
                    }
                    self.parts_published += 1;
                    self.bytes_published += part.len() as u64;
                }
                self.published = true;
                self.wrote = writes;
            }
            while self.next < segment.size() {
                let from = self.next;
                if self.kind.takes_in(me, from, self.chunk, self.area)
                    && !self.take(segment, from, send, recv)?
                {
                    self.awaited = from;
                    return Ok(false);
                }
                self.next += 1;
            }
            if self.single && self.wrote {
                // Readers copy out of this rank's buffer until they complete; this rank
                // completes after them, so that a failure of its own meanwhile marks this
                // operation, and a reader that comes late fails instead of reading a buffer
                // the program has back.
                let (kind, chunk, area) = (&self.kind, self.chunk, self.area);
                let readers = |r: usize| kind.takes_in(r, me, chunk, area);
                if let Err(busy) = segment
                    .read_by(seq, readers)
                    .map_err(|e| e.in_op(&self.op()))?
                {
                    self.awaited = busy;
                    self.draining = true;
                    return Ok(false);
                }
                self.draining = false;
            }
            segment.complete(seq)?;
            self.chunk += 1;
            self.published = false;
            self.wrote = false;
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
        } else if self.draining {
            format!(
                "waiting for rank {} to read this rank's part where it is",
                self.awaited
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
        if matches!(taken, Ok(true)) {
            segment.published_by(from, self.seq + self.chunk);
        }
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
            e.in_op(&self.op())
        })?
        else {
            return Ok(false);
        };
        if self.single {
            let copied = self.read_in_place(segment, from, part, recv)?;
            self.bytes_copied += copied as u64;
            return Ok(true);
        }
        let at = (self.chunk as usize).saturating_mul(self.area);
        let copied = match &self.kind {
            Kind::Barrier => 0,
            Kind::Broadcast { .. } => {
                place(recv, at, recv.len(), part).map_err(|w| self.invalid(w))?
            }
            Kind::Allgatherv { offsets }
            | Kind::Gatherv {
                bounds: offsets, ..
            } => {
                let end = offsets.get(from + 1).copied().unwrap_or(recv.len());
                place(recv, offsets[from] + at, end, part).map_err(|w| self.invalid(w))?
            }
            Kind::Scatterv { bounds, .. } => {
                own_block(recv, bounds, segment.rank(), at, part).map_err(|w| self.invalid(w))?
            }
            Kind::Reduce { reduction, .. } | Kind::Allreduce { reduction } => {
                let reduction = *reduction;
                self.fold(reduction, from, part, recv, scratch)?
            }
            Kind::ReduceScatter { reduction, bounds } => {
                let piece = own_piece(bounds, segment.rank(), part).map_err(|w| self.invalid(w))?;
                self.fold_into(*reduction, from, piece, recv, scratch)?
            }
        };
        self.bytes_copied += copied as u64;
        Ok(true)
    }

    /// Reads the part `from` published as a descriptor (`part`) out of its memory into `recv`:
    /// a gatherv's block to its place, a scatterv's rank its own block of the root's buffer.
    /// Returns the bytes copied.
    fn read_in_place(
        &self,
        segment: &Segment,
        from: usize,
        part: &[u8],
        recv: &mut [u8],
    ) -> Result<usize> {
        let (address, len) = read_descriptor(part).ok_or_else(|| TransportError::Protocol {
            op: self.op(),
            what: format!(
                "rank {from} published {} bytes, not a descriptor",
                part.len()
            ),
        })?;
        let me = segment.rank();
        // Where in the peer's part the bytes are, and where in `recv` they go.
        let (skip, to, bytes) = match &self.kind {
            Kind::Gatherv { bounds, .. } => {
                let (begin, end) = block(bounds, from).map_err(|w| self.invalid(w))?;
                if len != end - begin {
                    return Err(self.invalid(format!(
                        "rank {from} published a block of {len} bytes, the counts give {}",
                        end - begin
                    )));
                }
                (0, begin, end - begin)
            }
            Kind::Scatterv { bounds, .. } => {
                let (begin, end) = block(bounds, me).map_err(|w| self.invalid(w))?;
                if end > len {
                    return Err(self.invalid(format!(
                        "rank {from} published a buffer of {len} bytes, the counts give {}",
                        bounds.last().copied().unwrap_or(0)
                    )));
                }
                (begin, 0, end - begin)
            }
            _ => {
                return Err(self.invalid(format!("{} reads no part where it is", self.name)));
            }
        };
        if bytes == 0 {
            return Ok(0);
        }
        let len = recv.len();
        let into = recv.get_mut(to..to + bytes).ok_or_else(|| {
            self.invalid(format!("{bytes} bytes at {to} outside a buffer of {len}"))
        })?;
        let seq = self.seq + self.chunk;
        let read = segment.read_peer(from, address.saturating_add(skip as u64), into);
        // The writer stays in the call until this rank completes, unless it failed: then its
        // buffer may be the program's again, and what was read may be anything.
        let failed = if segment.ended(from) {
            Err(TransportError::Exited {
                op: self.op(),
                peer: from,
            })
        } else {
            segment.failed_before(from, seq)
        };
        failed.and(read).map_err(|e| e.in_op(&self.op()))?;
        Ok(bytes)
    }

    /// This rank's own part: copied to its place (allgatherv from a send buffer) or folded
    /// into the reduction.
    fn take_own(&mut self, segment: &mut Segment, send: Source<'_>, recv: &mut [u8]) -> Result<()> {
        let me = segment.rank();
        let at = (self.chunk as usize).saturating_mul(self.area);
        let copied = match (&self.kind, send) {
            (
                Kind::Allgatherv { offsets }
                | Kind::Gatherv {
                    bounds: offsets, ..
                },
                Source::Send(data),
            ) => {
                let end = offsets.get(me + 1).copied().unwrap_or(recv.len());
                let part = self.chunk_of(data, self.chunk);
                place(recv, offsets[me] + at, end, part).map_err(|w| self.invalid(w))?
            }
            (Kind::Scatterv { bounds, .. }, Source::Send(data)) => {
                let part = self.chunk_of(data, self.chunk);
                own_block(recv, bounds, me, at, part).map_err(|w| self.invalid(w))?
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
            (Kind::ReduceScatter { reduction, bounds }, Source::Send(data)) => {
                let piece = own_piece(bounds, me, data).map_err(|w| self.invalid(w))?;
                let mut scratch = std::mem::take(&mut segment.scratch);
                let folded = self.fold_into(*reduction, me, piece, recv, &mut scratch);
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
        self.fold_into(reduction, from, part, &mut result[..result_len], scratch)
    }

    /// Folds rank `from`'s `part` into `result`, the same length (rank 0's is copied there);
    /// returns the bytes copied.
    fn fold_into(
        &self,
        reduction: Reduction,
        from: usize,
        part: &[u8],
        result: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<usize> {
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

/// Copies the bytes of rank `me`'s block (from `bounds[me]` to `bounds[me + 1]` of the
/// root's buffer) that a chunk of that buffer holds (`part`, from `at`) into `recv`, which
/// holds the block alone; returns the bytes copied.
fn own_block(
    recv: &mut [u8],
    bounds: &[usize],
    me: usize,
    at: usize,
    part: &[u8],
) -> std::result::Result<usize, String> {
    let (begin, end) = block(bounds, me)?;
    let from = at.max(begin);
    let to = at.saturating_add(part.len()).min(end);
    if from >= to {
        return Ok(0);
    }
    place(recv, from - begin, end - begin, &part[from - at..to - at])
}

/// Rank `me`'s block of a reduce-scatter's vector `part` (from `bounds[me]` to
/// `bounds[me + 1]`).
fn own_piece<'p>(
    bounds: &[usize],
    me: usize,
    part: &'p [u8],
) -> std::result::Result<&'p [u8], String> {
    let (begin, end) = block(bounds, me)?;
    part.get(begin..end).ok_or_else(|| {
        format!(
            "a vector of {} bytes without the block at {begin}..{end}",
            part.len()
        )
    })
}

/// Where the block of `rank` begins and ends (`bounds[rank]`, `bounds[rank + 1]`).
fn block(bounds: &[usize], rank: usize) -> std::result::Result<(usize, usize), String> {
    match (bounds.get(rank), bounds.get(rank + 1)) {
        (Some(&begin), Some(&end)) if begin <= end => Ok((begin, end)),
        _ => Err(format!(
            "no block of rank {rank} among {} bounds",
            bounds.len()
        )),
    }
}
