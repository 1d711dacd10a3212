//! Completion queues (`FI_CQ_FORMAT_DATA`) and the table of operations in flight.

use std::cell::UnsafeCell;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use circulant_sys as sys;

use super::domain::DomainInner;
use super::mr::RegionInner;
use super::{c_string, check, Domain, FabricError, Result};

/// One successful completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The caller's context of a local operation; `None` for remote events (a peer's write
    /// carrying CQ data) and for receives posted internally for remote CQ data.
    pub context: Option<u64>,
    /// `FI_*` completion flags (`FI_RMA | FI_WRITE`, `FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA`, …).
    pub flags: u64,
    /// Bytes transferred, where the provider reports it.
    pub len: usize,
    /// Remote CQ data, when `flags` has `FI_REMOTE_CQ_DATA`.
    pub data: Option<u64>,
}

impl Completion {
    /// A peer's write that carried remote CQ data into our memory. Some providers (sockets)
    /// echo `FI_REMOTE_CQ_DATA` in the initiator's own completion of a write with data, so the
    /// flag alone does not tell: a remote event has no local context and `FI_REMOTE_WRITE`.
    pub fn is_remote_write_data(&self) -> bool {
        self.context.is_none()
            && self.flags & sys::FI_REMOTE_CQ_DATA != 0
            && self.flags & sys::FI_REMOTE_WRITE != 0
    }
}

/// What an operation in flight keeps alive until its completion is read.
pub(crate) enum Keep {
    /// The local registered memory of a single-region operation the provider may still read or
    /// write (held without a `Vec`, so that posting it does not allocate).
    Region { _alive: Arc<RegionInner> },
    /// Local registered memory the provider may still read or write.
    Regions { _alive: Vec<Arc<RegionInner>> },
    /// A receive posted for remote CQ data (`FI_RX_CQ_DATA`): counts consumed receives so the
    /// endpoint can post new ones.
    CqDataReceive(Arc<AtomicUsize>),
}

/// An operation in flight: the caller's context and what its completion releases.
struct Pending {
    user: u64,
    keep: Keep,
}

/// Contexts handed out per chunk: each chunk is allocated once and never moved or freed before
/// the CQ closes, so a context's address stays valid while the provider holds it.
const CHUNK: usize = 256;

/// The `fi_context2` of every operation in flight, kept in chunks of stable addresses and
/// reused through a free list, so that tracking an operation neither allocates (once enough
/// chunks exist) nor hashes. A context's slot is found from its address by arithmetic alone:
/// the op_context of a remote event may be any value, so it is never dereferenced.
struct Contexts {
    /// Memory the provider writes into while an operation is in flight (hence `UnsafeCell`).
    chunks: Vec<Box<[UnsafeCell<sys::fi_context2>]>>,
    /// What each slot's operation holds, by slot index; `None` for a free slot.
    slots: Vec<Option<Pending>>,
    /// Free slot indices.
    free: Vec<usize>,
    /// Slots in use.
    live: usize,
}

impl Contexts {
    fn new() -> Self {
        Contexts {
            chunks: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
        }
    }

    /// Takes a free slot for `pending` and returns its context's address.
    fn insert(&mut self, pending: Pending) -> *mut sys::fi_context2 {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                let first = self.chunks.len() * CHUNK;
                self.chunks.push(
                    (0..CHUNK)
                        .map(|_| UnsafeCell::new(sys::fi_context2::default()))
                        .collect(),
                );
                self.slots.resize_with(first + CHUNK, || None);
                // Lowest index on top, so that a lightly used CQ keeps to the first slots.
                self.free.extend((first + 1..first + CHUNK).rev());
                first
            }
        };
        let context = self.chunks[index / CHUNK][index % CHUNK].get();
        // SAFETY: the slot was free, so no operation in flight refers to its context and
        // nothing else reads or writes it; it is cleared as a new one would be.
        unsafe { context.write(sys::fi_context2::default()) };
        self.slots[index] = Some(pending);
        self.live += 1;
        context
    }

    /// The slot whose context is at `address`, if it is one of ours.
    fn index_of(&self, address: usize) -> Option<usize> {
        let size = std::mem::size_of::<UnsafeCell<sys::fi_context2>>();
        self.chunks.iter().enumerate().find_map(|(c, chunk)| {
            let offset = address.checked_sub(chunk.as_ptr() as usize)?;
            (offset < CHUNK * size && offset % size == 0).then_some(c * CHUNK + offset / size)
        })
    }

    fn get(&self, address: usize) -> Option<&Pending> {
        self.slots[self.index_of(address)?].as_ref()
    }

    /// Frees the slot of the context at `address`, returning what it held.
    fn remove(&mut self, address: usize) -> Option<Pending> {
        let index = self.index_of(address)?;
        let pending = self.slots[index].take()?;
        self.free.push(index);
        self.live -= 1;
        Some(pending)
    }
}

pub(crate) struct CqInner {
    pub(crate) fid: *mut sys::fid_cq,
    has_wait: bool,
    provider: String,
    /// Operations in flight, by their fi_context2. Locked because endpoints sharing this CQ
    /// may post from any thread (the CQ is `Sync`).
    pending: Mutex<Contexts>,
    _domain: Arc<DomainInner>,
}

// SAFETY: opened with FI_THREAD_SAFE (see `Hints`); the pending table is behind a Mutex; closed
// once, in Drop.
unsafe impl Send for CqInner {}
// SAFETY: as above.
unsafe impl Sync for CqInner {}

impl CqInner {
    fn pending(&self) -> MutexGuard<'_, Contexts> {
        // A panic while holding the lock cannot leave the table inconsistent (single inserts
        // and removes), so a poisoned lock is still usable.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers an operation about to be posted; returns the context pointer to pass.
    pub(crate) fn track(&self, user: u64, keep: Keep) -> *mut std::os::raw::c_void {
        self.pending().insert(Pending { user, keep }).cast()
    }

    /// Forgets an operation whose post failed (or returned -FI_EAGAIN): no completion will come.
    pub(crate) fn untrack(&self, context: *mut std::os::raw::c_void) {
        self.pending().remove(context as usize);
    }

    /// Resolves the op_context of a completion with `flags`: the caller's context, or `None`
    /// for remote events and internal receives.
    fn finish(&self, op_context: *mut std::os::raw::c_void, flags: u64) -> Option<u64> {
        if op_context.is_null() {
            return None;
        }
        let mut pending = self.pending();
        let key = op_context as usize;
        // The op_context of a remote event is undefined unless it consumed one of our
        // receives: never let such a value release a local operation still in flight.
        let remote = flags & (sys::FI_REMOTE_WRITE | sys::FI_REMOTE_READ) != 0;
        if remote && !matches!(pending.get(key)?.keep, Keep::CqDataReceive(_)) {
            return None;
        }
        let done = pending.remove(key)?;
        drop(pending);
        match &done.keep {
            Keep::Region { .. } | Keep::Regions { .. } => Some(done.user),
            Keep::CqDataReceive(consumed) => {
                consumed.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }
}

impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: opened by fi_cq_open; endpoints bound to it hold an Arc to this, so they are
        // closed and no operation can complete into the pending contexts any more (their chunks
        // are freed after this, with the fields).
        unsafe { sys::circ_fi_close(ptr::addr_of_mut!((*self.fid).fid)) };
    }
}

/// An open completion queue.
#[derive(Clone)]
pub struct CompletionQueue {
    pub(crate) inner: Arc<CqInner>,
}

/// Entries read per call into the provider.
const BATCH: usize = 32;

impl CompletionQueue {
    /// Opens a CQ of `size` entries (0: provider default) with format `FI_CQ_FORMAT_DATA`, with a
    /// file-descriptor wait object where the provider has one (for [`Self::wait`]).
    pub fn open(domain: &Domain, size: usize) -> Result<CompletionQueue> {
        let open = |wait_obj| {
            let mut attr = sys::fi_cq_attr {
                size,
                format: sys::FI_CQ_FORMAT_DATA,
                wait_obj,
                ..Default::default()
            };
            let mut fid = ptr::null_mut();
            // SAFETY: domain is open; attr is initialised; fid receives the new CQ.
            let ret = unsafe {
                sys::circ_fi_cq_open(domain.inner.fid, &mut attr, &mut fid, ptr::null_mut())
            };
            check("fi_cq_open", ret as isize).map(|_| fid)
        };
        // A file descriptor is a wait the kernel does. FI_WAIT_UNSPEC is not asked for: shm in
        // libfabric 1.17 then picks a sched_yield loop that spins a core and ignores the
        // timeout of fi_cq_sread. Without an fd, `wait` polls with a growing sleep.
        let (fid, has_wait) = match open(sys::FI_WAIT_FD) {
            Ok(fid) => (fid, true),
            Err(_) => (open(sys::FI_WAIT_NONE)?, false),
        };
        Ok(CompletionQueue {
            inner: Arc::new(CqInner {
                fid,
                has_wait,
                provider: domain.info().provider(),
                pending: Mutex::new(Contexts::new()),
                _domain: domain.inner.clone(),
            }),
        })
    }

    /// Whether [`Self::wait`] blocks on a wait object (else it polls with a growing sleep).
    pub fn has_wait_object(&self) -> bool {
        self.inner.has_wait
    }

    /// Operations posted on this CQ whose completion has not been read yet.
    pub fn in_flight(&self) -> usize {
        self.inner.pending().live
    }

    /// Reads available completions without blocking (this also progresses manual-progress
    /// providers), appending them to `out`. Returns how many were read: 0 means none yet
    /// (`-FI_EAGAIN`), not an error. An operation that failed is returned as
    /// `FabricError::Completion`.
    pub fn poll(&self, out: &mut Vec<Completion>) -> Result<usize> {
        let mut entries = [sys::fi_cq_data_entry::default(); BATCH];
        // SAFETY: cq is open with FI_CQ_FORMAT_DATA, so it writes at most BATCH
        // fi_cq_data_entry into the array.
        let ret =
            unsafe { sys::circ_fi_cq_read(self.inner.fid, entries.as_mut_ptr().cast(), BATCH) };
        self.collect(ret, &entries, out)
    }

    /// Like [`Self::poll`] but waits up to `timeout` for at least one completion; 0 after the
    /// timeout. Blocks on the CQ's wait object (`fi_cq_sread`) where there is one, else polls
    /// with a growing sleep, so that waiting does not hold a core (a caller that expects a
    /// completion soon polls before it waits).
    pub fn wait(&self, out: &mut Vec<Completion>, timeout: Duration) -> Result<usize> {
        if self.inner.has_wait {
            let mut entries = [sys::fi_cq_data_entry::default(); BATCH];
            let millis = timeout.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: as in poll; a null cond means "at least one entry"; timeout in ms.
            let ret = unsafe {
                sys::circ_fi_cq_sread(
                    self.inner.fid,
                    entries.as_mut_ptr().cast(),
                    BATCH,
                    ptr::null(),
                    millis,
                )
            };
            if ret == -(sys::FI_ETIMEDOUT as isize) {
                return Ok(0);
            }
            return self.collect(ret, &entries, out);
        }
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_micros(50);
        loop {
            let n = self.poll(out)?;
            let now = Instant::now();
            if n > 0 || now >= deadline {
                return Ok(n);
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }

    fn collect(
        &self,
        ret: isize,
        entries: &[sys::fi_cq_data_entry],
        out: &mut Vec<Completion>,
    ) -> Result<usize> {
        if ret == -(sys::FI_EAGAIN as isize) {
            return Ok(0);
        }
        if ret == -(sys::FI_EAVAIL as isize) {
            return self.read_error();
        }
        let n = check("fi_cq_read", ret)?.min(entries.len());
        for entry in &entries[..n] {
            out.push(Completion {
                context: self.inner.finish(entry.op_context, entry.flags),
                flags: entry.flags,
                len: entry.len,
                data: (entry.flags & sys::FI_REMOTE_CQ_DATA != 0).then_some(entry.data),
            });
        }
        Ok(n)
    }

    /// Reads one error completion and turns it into a `FabricError::Completion`.
    fn read_error(&self) -> Result<usize> {
        let mut entry = sys::fi_cq_err_entry::default();
        // SAFETY: cq is open; entry is a zeroed fi_cq_err_entry (err_data_size 0 lets the
        // provider point err_data at its own buffer, valid until the next read).
        let ret = unsafe { sys::circ_fi_cq_readerr(self.inner.fid, &mut entry, 0) };
        if ret == -(sys::FI_EAGAIN as isize) {
            return Ok(0);
        }
        check("fi_cq_readerr", ret)?;
        // SAFETY: fi_cq_strerror returns null or a string valid until the next CQ call; it is
        // copied immediately. err_data is what readerr just returned.
        let prov_text = unsafe {
            c_string(sys::circ_fi_cq_strerror(
                self.inner.fid,
                entry.prov_errno,
                entry.err_data,
                ptr::null_mut(),
                0,
            ))
        };
        let code = entry.err.unsigned_abs().min(i32::MAX as u32) as i32;
        Err(FabricError::Completion {
            provider: self.inner.provider.clone(),
            context: self.inner.finish(entry.op_context, entry.flags),
            flags: entry.flags,
            code,
            text: super::strerror(code),
            prov_errno: entry.prov_errno,
            prov_text,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receive() -> Pending {
        Pending {
            user: 7,
            keep: Keep::CqDataReceive(Arc::new(AtomicUsize::new(0))),
        }
    }

    #[test]
    fn contexts_are_found_by_address_and_reused_without_growing() {
        let mut contexts = Contexts::new();
        let a = contexts.insert(receive()) as usize;
        let b = contexts.insert(receive()) as usize;
        assert_ne!(a, b);
        assert_eq!(contexts.live, 2);
        assert_eq!(contexts.get(a).map(|p| p.user), Some(7));
        assert!(contexts.remove(a).is_some());
        assert!(contexts.remove(a).is_none(), "a slot is released once");
        assert_eq!(contexts.live, 1);
        // The freed context is handed out again: no new chunk.
        assert_eq!(contexts.insert(receive()) as usize, a);
        assert_eq!(contexts.chunks.len(), 1);
    }

    #[test]
    fn addresses_that_are_not_contexts_are_unknown() {
        let mut contexts = Contexts::new();
        let a = contexts.insert(receive()) as usize;
        let size = std::mem::size_of::<sys::fi_context2>();
        assert!(contexts.get(a + 1).is_none(), "inside a context");
        assert!(contexts.get(a + size).is_none(), "a free slot");
        assert!(
            contexts.get(a.wrapping_sub(size)).is_none(),
            "before the chunk"
        );
        assert!(contexts.get(a + CHUNK * size).is_none(), "past the chunk");
        assert!(contexts.remove(12345).is_none());
        assert_eq!(contexts.live, 1);
    }

    #[test]
    fn contexts_keep_their_addresses_as_chunks_are_added() {
        let mut contexts = Contexts::new();
        let first: Vec<usize> = (0..CHUNK)
            .map(|_| contexts.insert(receive()) as usize)
            .collect();
        let more: Vec<usize> = (0..CHUNK + 1)
            .map(|_| contexts.insert(receive()) as usize)
            .collect();
        assert_eq!(contexts.chunks.len(), 3);
        for &address in first.iter().chain(&more) {
            assert!(contexts.get(address).is_some());
        }
        for &address in &first {
            assert!(contexts.remove(address).is_some());
        }
        assert_eq!(contexts.live, CHUNK + 1);
    }
}
