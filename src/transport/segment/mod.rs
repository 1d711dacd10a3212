//! Small collectives among ranks that share a host, through shared memory instead of writes:
//! every rank has a segment of its own that every other rank maps. A rank copies what it
//! contributes into its segment once and raises its flag; every rank that needs it waits for
//! the flag and copies (or reduces) it straight out of that segment. No libfabric call, no
//! completion to read, no ready token, and one copy in whatever the number of readers: the
//! latency of a small collective inside a node is a few cache-line transfers.
//!
//! Each segment:
//!
//! | at | what |
//! | --- | --- |
//! | [`DONE`] | the number of the last operation this rank completed |
//! | [`ABORT`] | 0, or the first operation this rank will not complete: it failed |
//! | [`HEAD`] + q × block | parity q: operation number, digest of the call, length, then the data |
//!
//! Each control word has a cache line of its own. Every rank reads every peer's abort word at
//! each operation; that line changes only when the peer fails, so the read stays in the
//! reader's cache. A writer reads a peer's completion word only when what it knows of it does
//! not yet free the parity: the last value it read, or s − 1 where it took that peer's part
//! of operation s (the peer had completed s − 1 to begin s). So the line a rank raises at
//! every completion mostly stays in its own cache, and a rank that takes its peers' parts
//! (allreduce, the other side of a ping-pong) does not read it at all. A parity's header
//! shares its line with the first 40 bytes of its data, so that a reader of a small part
//! waits on, and pulls, one cache line of the writer's.
//!
//! The operations of a communicator on the segment are numbered 1, 2, … alike on every rank;
//! operation s uses parity s mod 2. A rank fills a parity only when every peer's `DONE` is at
//! least s − 2, so no peer still reads what it overwrites; it stores the data, digest and
//! length, then the operation number with release ordering, and a reader takes the part once
//! the parity's number (read with acquire) is s (a writer is at most one operation ahead of
//! any reader, so the number it reads is s or below: s − 2, or older where the writer
//! published nothing at s − 2). The header's digest is the call's: a
//! reader whose own differs fails with a mismatch at once.
//!
//! How it is chosen and set up: docs/architecture.md, "The shared segment".

mod collective;

use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

use crate::fabric::{peer_memory, FabricError, SharedMemory};

use super::liveness::PeerProcesses;
use super::{Result, TransportError};

pub use collective::{block_offsets, Kind, Run, Source};

/// The completion word: the last operation completed.
pub const DONE: usize = 0;
/// The abort word: 0, or the first operation this rank will not complete. A peer that needs
/// its part of that operation or a later one, or that begins such an operation, fails at
/// once; a part it published before stays readable.
pub const ABORT: usize = 64;
/// Where parity 0 begins (after the control words' two cache lines).
pub const HEAD: usize = 128;

/// Offsets within a parity: its header, then its data.
const H_SEQ: usize = 0;
const H_DIGEST: usize = 8;
const H_LEN: usize = 16;
const H_DATA: usize = 24;

/// Bytes of one parity holding `area` bytes of data: its header and the data, to whole
/// cache lines.
fn block_bytes(area: usize) -> usize {
    (H_DATA + area).next_multiple_of(64)
}

/// Bytes of a segment whose parities hold `area` bytes each.
pub fn segment_bytes(area: usize) -> usize {
    HEAD + 2 * block_bytes(area)
}

/// The data area of a communicator's segment parities: the most a rank publishes in one
/// operation. A larger collective (bcast, allgather(v)) runs in chunks of it, and a chunk this
/// large keeps the number of operations, each a few flag reads and writes, small beside the
/// copies.
pub const AREA: usize = 64 * 1024;

/// The smallest part a gather's rank or a scatter's root publishes whose readers read it where
/// it is, one copy through the kernel, where the ranks can ([`Segment::read_parts_in_place`]),
/// instead of through the segment, a copy in and a copy out (docs/performance.md, "Gather and
/// scatter on the segment").
pub const SINGLE_COPY_FROM: usize = 32 * 1024;

/// What a rank tells its peers so that they map its segment: its pid and the file's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Address {
    pub pid: u32,
    pub name: u64,
}

/// Bytes of an [`Address`] on the wire.
pub const ADDRESS_BYTES: usize = 16;

impl Address {
    pub fn to_bytes(self) -> [u8; ADDRESS_BYTES] {
        let mut out = [0u8; ADDRESS_BYTES];
        out[..4].copy_from_slice(&self.pid.to_le_bytes());
        out[8..].copy_from_slice(&self.name.to_le_bytes());
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Option<Address> {
        let pid = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
        let name = u64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?);
        Some(Address { pid, name })
    }
}

/// This rank's segment, made and named but not yet joined with the peers'.
pub struct Own {
    memory: SharedMemory,
    address: Address,
    area: usize,
}

impl Own {
    /// Creates this rank's segment with parities of `area` bytes.
    pub fn create(area: usize) -> Result<Own> {
        // Rounded first: the peers map `segment_bytes` of the rounded area.
        let area = area.next_multiple_of(64);
        let (memory, name) = SharedMemory::create(segment_bytes(area))?;
        Ok(Own {
            memory,
            address: Address {
                pid: std::process::id(),
                name,
            },
            area,
        })
    }

    pub fn address(&self) -> Address {
        self.address
    }

    /// Maps the segments of every peer (`addresses` in rank order, this rank's at `rank`).
    pub fn join(self, rank: usize, addresses: &[Address]) -> Result<Segment> {
        let len = segment_bytes(self.area);
        let mut peers = Vec::with_capacity(addresses.len());
        let mut processes = PeerProcesses::none(addresses.len());
        let pids = addresses.iter().map(|a| a.pid).collect();
        for (r, address) in addresses.iter().enumerate() {
            if r == rank {
                peers.push(None);
                continue;
            }
            peers.push(Some(SharedMemory::open_kept(
                address.pid,
                address.name,
                len,
            )?));
            processes.watch_one(r, address.pid);
        }
        // Where the ranks outnumber the cores, a rank that spins keeps the one it waits for
        // off its core: it yields at once instead.
        let cores = machine_cores();
        Ok(Segment {
            rank,
            mine: self.memory,
            peers,
            processes,
            area: self.area,
            seq: 0,
            done_seen: vec![0; addresses.len()],
            scratch: Vec::new(),
            spins: addresses.len() <= cores,
            pids,
            single_copy: false,
        })
    }
}

/// The cores the ranks of a segment may have: those this process may run on
/// (`available_parallelism`: its affinity, cpuset and CPU quota), except for a process pinned
/// to a single core, as ranks pinned one to a core each are: each has a core of its own, and
/// the machine's online cores count. (Ranks pinned all to one core then poll [`SPINS`] times
/// before they yield.)
fn machine_cores() -> usize {
    let allowed = std::thread::available_parallelism().map_or(1, |n| n.get());
    if allowed > 1 {
        return allowed;
    }
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|list| cpu_list_len(&list))
        .unwrap_or(1)
}

/// The number of CPUs in a kernel CPU list (`0-3,8,10-11`); `None` if it is not one.
fn cpu_list_len(list: &str) -> Option<usize> {
    let mut count = 0;
    for range in list.trim().split(',') {
        let (first, last) = match range.split_once('-') {
            Some((first, last)) => (first.parse::<usize>().ok()?, last.parse::<usize>().ok()?),
            None => {
                let cpu = range.parse::<usize>().ok()?;
                (cpu, cpu)
            }
        };
        count += last.checked_sub(first)? + 1;
    }
    (count > 0).then_some(count)
}

/// The segments of a communicator's ranks as this rank sees them.
pub struct Segment {
    rank: usize,
    mine: SharedMemory,
    /// Every rank's segment but this rank's (`None` there).
    peers: Vec<Option<SharedMemory>>,
    processes: PeerProcesses,
    /// Bytes of one parity: the most a rank publishes in one operation.
    area: usize,
    /// The last operation begun.
    seq: u64,
    /// Per peer, the least its completion word can be: as this rank last read it, or one
    /// below an operation whose part of that peer's this rank took ([`Segment::published_by`]).
    done_seen: Vec<u64>,
    /// Room for a reduction's operand.
    scratch: Vec<u8>,
    /// Whether a waiting rank polls in a tight loop ([`SPINS`] times) before it yields its
    /// core.
    spins: bool,
    /// Every rank's process.
    pids: Vec<u32>,
    /// Whether every rank can read every peer's memory ([`peer_memory`]): the large parts of
    /// a gather or scatter are then read where they are ([`SINGLE_COPY_FROM`]).
    single_copy: bool,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("rank", &self.rank)
            .field("size", &self.peers.len())
            .field("area", &self.area)
            .field("seq", &self.seq)
            .finish()
    }
}

impl Segment {
    /// Every peer has mapped this rank's segment: its name can go.
    pub fn remove_name(&mut self) {
        self.mine.remove_name();
    }

    /// Whether this rank can read the memory of every peer, whose probe words are at
    /// `probes` (in rank order; [`peer_memory::probe_address`]).
    pub fn can_read_peers(&self, probes: &[u64]) -> bool {
        (0..self.size()).filter(|&r| r != self.rank).all(|r| {
            match (self.pids.get(r), probes.get(r)) {
                (Some(&pid), Some(&probe)) => peer_memory::can_read(pid, probe),
                _ => false,
            }
        })
    }

    /// Lets large gathers and scatters read their parts where they are: every rank can read
    /// every peer's memory, as all of them agreed.
    pub fn read_parts_in_place(&mut self) {
        self.single_copy = true;
    }

    /// The most bytes a rank publishes in one operation.
    pub fn area(&self) -> usize {
        self.area
    }

    pub fn size(&self) -> usize {
        self.peers.len()
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of the next operation, taken.
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Takes the numbers of the `more` operations after the last one taken.
    fn take_seqs(&mut self, more: u64) {
        self.seq += more;
    }

    /// Tells every peer that this rank failed: it completes no operation after the last it
    /// completed, and every peer that needs it in one fails at once (the first abort counts).
    pub fn abort(&self) {
        if matches!(self.mine.load(ABORT), Ok(0)) {
            let first = self.mine.load(DONE).unwrap_or(0) + 1;
            let _ = self.mine.publish(ABORT, first);
            // Before the program's next writes: a reader of a part read where it is that
            // copied any of them sees the abort after its copy.
            fence(Ordering::SeqCst);
        }
    }

    /// An error if `peer` failed before completing operation `seq`.
    fn aborted_by(&self, peer: usize, memory: &SharedMemory, seq: u64) -> Result<()> {
        match memory.load(ABORT)? {
            0 => Ok(()),
            first if first <= seq => Err(TransportError::AbortedBy {
                op: String::new(),
                rank: peer,
            }),
            _ => Ok(()),
        }
    }

    fn peer(&self, rank: usize) -> std::result::Result<&SharedMemory, FabricError> {
        self.peers
            .get(rank)
            .and_then(Option::as_ref)
            .ok_or_else(|| FabricError::invalid(format!("no segment of rank {rank}")))
    }

    /// Whether this rank may publish its part of operation `seq` (`writes`): whether every
    /// peer has completed operation `seq − 2`, so that its parity may be filled again, else
    /// the first peer that has not; a rank that does not write needs no peer's completion. A
    /// peer that failed before completing `seq` is an error.
    fn parity_free(&mut self, seq: u64, writes: bool) -> Result<std::result::Result<(), usize>> {
        let need = seq.saturating_sub(2);
        let mut busy = None;
        for (rank, peer) in self.peers.iter().enumerate() {
            let Some(peer) = peer else { continue };
            self.aborted_by(rank, peer, seq)?;
            if !writes || busy.is_some() || self.done_seen[rank] >= need {
                continue;
            }
            self.done_seen[rank] = peer.load(DONE)?;
            if self.done_seen[rank] < need {
                busy = Some(rank);
            }
        }
        Ok(busy.map_or(Ok(()), Err))
    }

    /// Whether every peer that is one of the `readers` has completed operation `seq` (so that
    /// none reads this rank's memory for it any more), else the first that has not; a reader
    /// that failed before is an error.
    fn read_by(
        &mut self,
        seq: u64,
        readers: impl Fn(usize) -> bool,
    ) -> Result<std::result::Result<(), usize>> {
        let mut busy = None;
        for (rank, peer) in self.peers.iter().enumerate() {
            let Some(peer) = peer else { continue };
            if self.done_seen[rank] >= seq || !readers(rank) {
                continue;
            }
            self.done_seen[rank] = peer.load(DONE)?;
            if self.done_seen[rank] < seq {
                self.aborted_by(rank, peer, seq)?;
                busy = busy.or(Some(rank));
            }
        }
        Ok(busy.map_or(Ok(()), Err))
    }

    /// An error if `peer` failed before completing operation `seq`.
    fn failed_before(&self, peer: usize, seq: u64) -> Result<()> {
        // After the copy that came before: see `abort`.
        fence(Ordering::SeqCst);
        self.aborted_by(peer, self.peer(peer)?, seq)
    }

    /// Copies `into.len()` bytes at `address` of `from`'s memory into `into`.
    fn read_peer(&self, from: usize, address: u64, into: &mut [u8]) -> Result<()> {
        let pid = self.pids.get(from).copied().unwrap_or(0);
        peer_memory::read_peer(pid, address, into).map_err(TransportError::from)
    }

    /// Where the parity of operation `seq` begins.
    fn block(&self, seq: u64) -> usize {
        HEAD + (seq % 2) as usize * block_bytes(self.area)
    }

    /// Publishes `data` as this rank's part of operation `seq` with `digest`.
    fn publish(&self, seq: u64, digest: u64, data: &[u8]) -> Result<()> {
        let block = self.block(seq);
        self.mine.store(block + H_DATA, data)?;
        self.mine.publish(block + H_DIGEST, digest)?;
        self.mine.publish(block + H_LEN, data.len() as u64)?;
        self.mine.publish(block + H_SEQ, seq)?;
        Ok(())
    }

    /// `from`'s part of operation `seq`, once published: checked against `digest`.
    fn part(&self, op: &str, seq: u64, digest: u64, from: usize) -> Result<Option<&[u8]>> {
        let peer = self.peer(from)?;
        let block = self.block(seq);
        let published = peer.load(block + H_SEQ)?;
        if published < seq {
            self.aborted_by(from, peer, seq).map_err(|e| e.in_op(op))?;
            return Ok(None);
        }
        // The number's acquire made the header and data visible; they cannot change before
        // this rank's DONE reaches `seq`.
        if published != seq {
            return Err(TransportError::Protocol {
                op: op.to_string(),
                what: format!("rank {from} published operation {published} before {seq}"),
            });
        }
        if peer.load(block + H_DIGEST)? != digest {
            return Err(TransportError::Mismatch {
                op: op.to_string(),
                peer: from,
            });
        }
        let len = peer.load(block + H_LEN)? as usize;
        if len > self.area {
            return Err(TransportError::Protocol {
                op: op.to_string(),
                what: format!("rank {from} published {len} bytes, more than {}", self.area),
            });
        }
        Ok(Some(peer.bytes(block + H_DATA, len)?))
    }

    /// `from`'s part of operation `seq` was taken: `from` had completed operation `seq − 1`,
    /// as a rank begins an operation only once it completed the one before (one operation is
    /// in flight per communicator). What this rank knows of `from`'s completion grows with
    /// it, which spares the read of `from`'s completion word, a line `from` just wrote, when
    /// this rank next publishes.
    fn published_by(&mut self, from: usize, seq: u64) {
        if let Some(seen) = self.done_seen.get_mut(from) {
            *seen = (*seen).max(seq.saturating_sub(1));
        }
    }

    /// Marks operation `seq` complete on this rank.
    fn complete(&self, seq: u64) -> Result<()> {
        self.mine.publish(DONE, seq)?;
        Ok(())
    }

    /// Whether `peer`'s process has ended (asked of the kernel at most every few microseconds).
    fn ended(&self, peer: usize) -> bool {
        self.processes.ended(peer)
    }
}

/// How a rank waits for its peers on the segment: it polls, yielding its core between polls
/// (ranks may outnumber cores), then sleeps in growing steps so that an idle rank leaves the
/// cores to others; the deadline ends the wait.
pub struct Patience {
    /// When the wait began: the first time the run had to wait (reading the clock costs as
    /// much as a small call, which mostly does not wait).
    since: Option<Instant>,
    deadline: Duration,
    sleep: Duration,
}

/// Polls in a tight loop before a waiting rank yields its core, where every rank of the
/// segment can have a core of its own ([`machine_cores`]: ranks pinned one to a core spin
/// too): a peer on another core answers within them. Few, as ranks need not be pinned: two
/// that the kernel put on one core would spin each other off it (spinning for 20 µs instead
/// made whole runs of 300 broadcasts 2–5× slower); where ranks outnumber the cores there is
/// no spinning.
pub const SPINS: usize = 64;

/// What a pause was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pause {
    /// A yield of the core, within the poll phase.
    Polling,
    /// A sleep: the peers are slow to come, worth asking whether they still run.
    Sleeping,
    /// None: the deadline has passed.
    Expired,
}

/// How long a waiting rank polls before it sleeps.
const POLL_PHASE: Duration = Duration::from_millis(1);
const FIRST_SLEEP: Duration = Duration::from_micros(20);
const LONGEST_SLEEP: Duration = Duration::from_millis(1);

impl Patience {
    pub fn new(deadline: Duration) -> Self {
        Patience {
            since: None,
            deadline,
            sleep: FIRST_SLEEP,
        }
    }

    /// The peers moved: a wait after this polls again before it sleeps, and its deadline
    /// counts from then (a call in many chunks may take longer than one deadline as a whole).
    pub fn progressed(&mut self) {
        self.since = None;
        self.sleep = FIRST_SLEEP;
    }

    /// How long the run has waited (the clock starts at the first call).
    pub fn waited(&mut self) -> Duration {
        self.since.get_or_insert_with(Instant::now).elapsed()
    }

    /// Waits a little: yields the core while polling, sleeps after that.
    pub fn pause(&mut self) -> Pause {
        let waited = self.waited();
        if waited >= self.deadline {
            return Pause::Expired;
        }
        if waited < POLL_PHASE {
            std::thread::yield_now();
            Pause::Polling
        } else {
            std::thread::sleep(self.sleep.min(self.deadline - waited));
            self.sleep = (self.sleep * 2).min(LONGEST_SLEEP);
            Pause::Sleeping
        }
    }

    pub fn deadline(&self) -> Duration {
        self.deadline
    }
}

#[cfg(test)]
mod tests;
