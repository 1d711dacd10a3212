//! Completion queues (`FI_CQ_FORMAT_DATA`) and the table of operations in flight.

use std::collections::HashMap;
use std::ptr::{self, NonNull};
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
    /// Local registered memory the provider may still read or write.
    Regions { _alive: Vec<Arc<RegionInner>> },
    /// A receive posted for remote CQ data (`FI_RX_CQ_DATA`): counts consumed receives so the
    /// endpoint can post new ones.
    CqDataReceive(Arc<AtomicUsize>),
}

/// An operation in flight: its heap `fi_context2` (owned through a raw pointer, as the provider
/// writes into it while we hold it) and what its completion releases.
struct Pending {
    context: NonNull<sys::fi_context2>,
    user: u64,
    keep: Keep,
}

impl Drop for Pending {
    fn drop(&mut self) {
        // SAFETY: context came from Box::into_raw in `track` and is freed once, here, after the
        // provider reported (or can no longer report) the operation.
        drop(unsafe { Box::from_raw(self.context.as_ptr()) });
    }
}

pub(crate) struct CqInner {
    pub(crate) fid: *mut sys::fid_cq,
    has_wait: bool,
    provider: String,
    /// Operations in flight, by the address of their fi_context2.
    pending: Mutex<HashMap<usize, Pending>>,
    _domain: Arc<DomainInner>,
}

// SAFETY: opened with FI_THREAD_SAFE (see `Hints`); the pending table is behind a Mutex; closed
// once, in Drop.
unsafe impl Send for CqInner {}
// SAFETY: as above.
unsafe impl Sync for CqInner {}

impl CqInner {
    fn pending(&self) -> MutexGuard<'_, HashMap<usize, Pending>> {
        // A panic while holding the lock cannot leave the map inconsistent (single inserts and
        // removes), so a poisoned lock is still usable.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers an operation about to be posted; returns the context pointer to pass.
    pub(crate) fn track(&self, user: u64, keep: Keep) -> *mut std::os::raw::c_void {
        let context = NonNull::from(Box::leak(Box::<sys::fi_context2>::default()));
        let ptr = context.as_ptr();
        self.pending().insert(
            ptr as usize,
            Pending {
                context,
                user,
                keep,
            },
        );
        ptr.cast()
    }

    /// Forgets an operation whose post failed (or returned -FI_EAGAIN): no completion will come.
    pub(crate) fn untrack(&self, context: *mut std::os::raw::c_void) {
        self.pending().remove(&(context as usize));
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
        if remote && !matches!(pending.get(&key)?.keep, Keep::CqDataReceive(_)) {
            return None;
        }
        let done = pending.remove(&key)?;
        drop(pending);
        match &done.keep {
            Keep::Regions { .. } => Some(done.user),
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
        // closed and no operation can complete into the pending contexts any more.
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
                pending: Mutex::new(HashMap::new()),
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
        self.inner.pending().len()
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
