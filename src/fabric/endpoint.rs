//! Reliable-datagram endpoints and their one-sided operations.

use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use circulant_sys as sys;

use super::av::AvInner;
use super::cq::{CqInner, Keep};
use super::domain::DomainInner;
use super::{
    check, check_post, Address, AddressVector, CompletionQueue, Domain, FabricError, Info,
    LocalRange, Post, RemoteRange, Result,
};

/// Flags of [`Endpoint::write_msg`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteFlags(u64);

impl WriteFlags {
    /// No flags.
    pub const NONE: WriteFlags = WriteFlags(0);
    /// `FI_MORE`: more writes follow at once; the provider may batch them.
    pub const MORE: WriteFlags = WriteFlags(sys::FI_MORE);
    /// `FI_DELIVERY_COMPLETE`: complete only once the data is visible at the target.
    pub const DELIVERY_COMPLETE: WriteFlags = WriteFlags(sys::FI_DELIVERY_COMPLETE);
}

impl std::ops::BitOr for WriteFlags {
    type Output = WriteFlags;
    fn bitor(self, rhs: WriteFlags) -> WriteFlags {
        WriteFlags(self.0 | rhs.0)
    }
}

/// Receives kept posted for remote CQ data on providers with the `FI_RX_CQ_DATA` mode.
struct CqDataReceives {
    /// Receives consumed by arrived writes, to be posted again.
    consumed: Arc<AtomicUsize>,
}

pub(crate) struct EndpointInner {
    pub(crate) fid: *mut sys::fid_ep,
    pub(crate) domain: Arc<DomainInner>,
    tx_cq: Arc<CqInner>,
    rx_cq: Arc<CqInner>,
    _av: Arc<AvInner>,
    cq_data_receives: Option<CqDataReceives>,
}

// SAFETY: opened with FI_THREAD_SAFE (see `Hints`); closed once, in Drop.
unsafe impl Send for EndpointInner {}
// SAFETY: as above.
unsafe impl Sync for EndpointInner {}

impl Drop for EndpointInner {
    fn drop(&mut self) {
        // SAFETY: opened by fi_endpoint; MRs bound to it hold an Arc to this. Closing cancels
        // what is still posted; the CQs (and the memory their pending operations keep alive)
        // are closed after this, as the fields drop after this body.
        unsafe { sys::circ_fi_close(ptr::addr_of_mut!((*self.fid).fid)) };
    }
}

/// Receives posted at once for remote CQ data where the provider needs them.
const CQ_DATA_RECEIVES: usize = 256;

/// An enabled `FI_EP_RDM` endpoint bound to an address vector and completion queue(s).
#[derive(Clone)]
pub struct Endpoint {
    pub(crate) inner: Arc<EndpointInner>,
}

impl Endpoint {
    /// Opens an endpoint of `domain`, binds `av`, `tx_cq` for local completions and `rx_cq` for
    /// remote CQ data (they may be the same CQ), and enables it.
    pub fn open(
        domain: &Domain,
        av: &AddressVector,
        tx_cq: &CompletionQueue,
        rx_cq: &CompletionQueue,
    ) -> Result<Endpoint> {
        let info = domain.info();
        let mut fid = ptr::null_mut();
        // SAFETY: domain is open; its info describes the endpoint to open.
        let ret = unsafe {
            sys::circ_fi_endpoint(domain.inner.fid, info.as_ptr(), &mut fid, ptr::null_mut())
        };
        check("fi_endpoint", ret as isize)?;
        let cq_data_receives = info.rx_cq_data().then(|| CqDataReceives {
            consumed: Arc::new(AtomicUsize::new(0)),
        });
        // Owned from here: Drop closes the endpoint if a later step fails.
        let inner = EndpointInner {
            fid,
            domain: domain.inner.clone(),
            tx_cq: tx_cq.inner.clone(),
            rx_cq: rx_cq.inner.clone(),
            _av: av.inner.clone(),
            cq_data_receives,
        };
        let bind = |target: *mut sys::fid, flags: u64| {
            // SAFETY: endpoint and target are open objects of the same domain.
            let ret = unsafe { sys::circ_fi_ep_bind(fid, target, flags) };
            check("fi_ep_bind", ret as isize)
        };
        // SAFETY: the AV and CQs are open objects kept alive by the Arcs just stored in `inner`;
        // only the addresses of their embedded `struct fid` are taken.
        let (av_fid, tx_fid, rx_fid): (*mut sys::fid, *mut sys::fid, *mut sys::fid) = unsafe {
            (
                ptr::addr_of_mut!((*av.inner.fid).fid),
                ptr::addr_of_mut!((*tx_cq.inner.fid).fid),
                ptr::addr_of_mut!((*rx_cq.inner.fid).fid),
            )
        };
        bind(av_fid, 0)?;
        if Arc::ptr_eq(&tx_cq.inner, &rx_cq.inner) {
            bind(tx_fid, sys::FI_TRANSMIT | sys::FI_RECV)?;
        } else {
            bind(tx_fid, sys::FI_TRANSMIT)?;
            bind(rx_fid, sys::FI_RECV)?;
        }
        // SAFETY: endpoint is open with its AV and CQs bound.
        let ret = unsafe { sys::circ_fi_enable(fid) };
        check("fi_enable", ret as isize)?;
        let endpoint = Endpoint {
            inner: Arc::new(inner),
        };
        if endpoint.inner.cq_data_receives.is_some() {
            let depth = match info.rx_size() {
                0 => CQ_DATA_RECEIVES,
                size => size.min(CQ_DATA_RECEIVES),
            };
            let posted = endpoint.post_cq_data_receives(depth)?;
            // A shortfall (-FI_EAGAIN) is made up by the next replenish.
            if let Some(receives) = &endpoint.inner.cq_data_receives {
                receives
                    .consumed
                    .fetch_add(depth - posted, Ordering::Relaxed);
            }
        }
        Ok(endpoint)
    }

    /// The info of the endpoint's domain.
    pub fn info(&self) -> &Info {
        &self.inner.domain.info
    }

    /// The endpoint's address (`fi_getname`), to be inserted into peers' address vectors.
    pub fn name(&self) -> Result<Vec<u8>> {
        let mut name = vec![0u8; 256];
        loop {
            let mut len = name.len();
            // SAFETY: endpoint is open; name is writable for len bytes; len is updated to the
            // needed size (on -FI_ETOOSMALL) or the size written.
            let ret = unsafe {
                sys::circ_fi_getname(
                    ptr::addr_of_mut!((*self.inner.fid).fid),
                    name.as_mut_ptr().cast(),
                    &mut len,
                )
            };
            if ret == -(sys::FI_ETOOSMALL as i32) && len > name.len() {
                name.resize(len, 0);
                continue;
            }
            check("fi_getname", ret as isize)?;
            name.truncate(len);
            return Ok(name);
        }
    }

    /// Whether writes carrying remote CQ data consume receives posted by this endpoint
    /// (`FI_RX_CQ_DATA`). If so, call [`Self::replenish_cq_data_receives`] while progressing.
    pub fn needs_cq_data_receives(&self) -> bool {
        self.inner.cq_data_receives.is_some()
    }

    /// Posts again the receives that arrived remote CQ data consumed (`FI_RX_CQ_DATA`
    /// providers; a no-op elsewhere). Returns how many were posted.
    pub fn replenish_cq_data_receives(&self) -> Result<usize> {
        let Some(receives) = &self.inner.cq_data_receives else {
            return Ok(0);
        };
        let consumed = receives.consumed.swap(0, Ordering::Relaxed);
        let posted = self.post_cq_data_receives(consumed);
        // Those not posted (-FI_EAGAIN or an error) are tried again on the next call.
        let left = consumed - posted.as_ref().map_or(0, |&n| n);
        receives.consumed.fetch_add(left, Ordering::Relaxed);
        posted
    }

    fn post_cq_data_receives(&self, count: usize) -> Result<usize> {
        let Some(receives) = &self.inner.cq_data_receives else {
            return Ok(0);
        };
        for posted in 0..count {
            let context = self
                .inner
                .rx_cq
                .track(0, Keep::CqDataReceive(receives.consumed.clone()));
            // SAFETY: endpoint is open; a zero-length receive with no buffer only consumes the
            // CQ data; context is a live fi_context2 tracked by the rx CQ.
            let ret = unsafe {
                sys::circ_fi_recv(
                    self.inner.fid,
                    ptr::null_mut(),
                    0,
                    ptr::null_mut(),
                    sys::FI_ADDR_UNSPEC,
                    context,
                )
            };
            match check_post("fi_recv", ret) {
                Ok(Post::Posted) => {}
                Ok(Post::Again) => {
                    self.inner.rx_cq.untrack(context);
                    return Ok(posted);
                }
                Err(err) => {
                    self.inner.rx_cq.untrack(context);
                    return Err(err);
                }
            }
        }
        Ok(count)
    }

    fn check_data(&self, data: Option<u64>) -> Result<()> {
        let Some(data) = data else { return Ok(()) };
        let size = self.info().cq_data_size();
        if size == 0 || (size < 8 && data >> (8 * size) != 0) {
            return Err(FabricError::too_long(format!(
                "remote CQ data {data:#x} does not fit the {size} bytes of {}",
                self.info().provider()
            )));
        }
        Ok(())
    }

    fn check_len(&self, len: usize) -> Result<()> {
        let max = self.info().max_msg_size();
        if max > 0 && len > max {
            return Err(FabricError::too_long(format!(
                "transfer of {len} bytes exceeds max_msg_size {max} of {}",
                self.info().provider()
            )));
        }
        Ok(())
    }

    /// Posts a write from `src` into `remote` at `dest` (`fi_write`, or `fi_writedata` with
    /// remote CQ data). `remote.len` must equal `src.len()`. Completes on the tx CQ with
    /// `context`; the region is kept alive until then.
    ///
    /// The completion follows the provider's default semantics (transmit-complete on the
    /// providers here): it frees the source, but does not prove the target accepted the write.
    /// A write the target refuses (bad key or range) is only reported to the initiator with
    /// `WriteFlags::DELIVERY_COMPLETE` (see [`Self::write_msg`]), and by some providers not at
    /// all: the target's arrival count and a deadline are the protocol's proof of delivery.
    pub fn write(
        &self,
        src: LocalRange<'_>,
        dest: Address,
        remote: RemoteRange,
        data: Option<u64>,
        context: u64,
    ) -> Result<Post> {
        if remote.len != src.len as u64 {
            return Err(FabricError::invalid(format!(
                "write of {} local bytes into a remote range of {}",
                src.len, remote.len
            )));
        }
        self.check_len(src.len)?;
        self.check_data(data)?;
        let region = &src.region.inner;
        let desc = region.desc_for(&self.inner)?;
        let op = self.inner.tx_cq.track(
            context,
            Keep::Region {
                _alive: region.clone(),
            },
        );
        // SAFETY: endpoint is open; the source range is inside the registered region, which the
        // tx CQ keeps alive (with op) until the completion is read; desc belongs to the region.
        let ret = unsafe {
            let buf = region.addr(src.offset).cast();
            match data {
                Some(data) => sys::circ_fi_writedata(
                    self.inner.fid,
                    buf,
                    src.len,
                    desc,
                    data,
                    dest.0,
                    remote.addr,
                    remote.key,
                    op,
                ),
                None => sys::circ_fi_write(
                    self.inner.fid,
                    buf,
                    src.len,
                    desc,
                    dest.0,
                    remote.addr,
                    remote.key,
                    op,
                ),
            }
        };
        self.finish_post(
            if data.is_some() {
                "fi_writedata"
            } else {
                "fi_write"
            },
            ret,
            op,
        )
    }

    /// Posts one write gathering `local` ranges (at most `iov_limit`) into `remote` ranges (at
    /// most `rma_iov_limit`) at `dest` (`fi_writemsg`); the lengths must add up to the same
    /// total. Carries remote CQ data if `data` is given.
    pub fn write_msg(
        &self,
        local: &[LocalRange<'_>],
        dest: Address,
        remote: &[RemoteRange],
        data: Option<u64>,
        flags: WriteFlags,
        context: u64,
    ) -> Result<Post> {
        let info = self.info();
        if local.is_empty() || local.len() > info.iov_limit().max(1) {
            return Err(FabricError::too_long(format!(
                "{} local ranges (iov_limit of {} is {})",
                local.len(),
                info.provider(),
                info.iov_limit()
            )));
        }
        if remote.is_empty() || remote.len() > info.rma_iov_limit().max(1) {
            return Err(FabricError::too_long(format!(
                "{} remote ranges (rma_iov_limit of {} is {})",
                remote.len(),
                info.provider(),
                info.rma_iov_limit()
            )));
        }
        let local_total: usize = local.iter().map(|r| r.len).sum();
        let remote_total: u64 = remote.iter().map(|r| r.len).sum();
        if local_total as u64 != remote_total {
            return Err(FabricError::invalid(format!(
                "write of {local_total} local bytes into remote ranges of {remote_total}"
            )));
        }
        self.check_len(local_total)?;
        self.check_data(data)?;

        let iov: Vec<sys::iovec> = local
            .iter()
            .map(|r| sys::iovec {
                iov_base: r.region.inner.addr(r.offset).cast(),
                iov_len: r.len,
            })
            .collect();
        let mut desc = local
            .iter()
            .map(|r| r.region.inner.desc_for(&self.inner))
            .collect::<Result<Vec<*mut std::os::raw::c_void>>>()?;
        let rma_iov: Vec<sys::fi_rma_iov> = remote
            .iter()
            .map(|r| sys::fi_rma_iov {
                addr: r.addr,
                len: r.len as usize,
                key: r.key,
            })
            .collect();
        let keep = local.iter().map(|r| r.region.inner.clone()).collect();
        let op = self
            .inner
            .tx_cq
            .track(context, Keep::Regions { _alive: keep });
        let msg = sys::fi_msg_rma {
            msg_iov: iov.as_ptr(),
            desc: desc.as_mut_ptr(),
            iov_count: iov.len(),
            addr: dest.0,
            rma_iov: rma_iov.as_ptr(),
            rma_iov_count: rma_iov.len(),
            context: op,
            data: data.unwrap_or(0),
        };
        let mut op_flags = flags.0 | sys::FI_COMPLETION;
        if data.is_some() {
            op_flags |= sys::FI_REMOTE_CQ_DATA;
        }
        // SAFETY: endpoint is open; the iov, desc and rma_iov arrays live across the call (the
        // ASYNC_IOV mode is not accepted, so the provider copies them); the local ranges are in
        // registered regions kept alive by the tx CQ until the completion is read.
        let ret = unsafe { sys::circ_fi_writemsg(self.inner.fid, &msg, op_flags) };
        self.finish_post("fi_writemsg", ret, op)
    }

    /// Writes `bytes` (at most `inject_size`) into `remote` at `dest` with `fi_inject_write` /
    /// `fi_inject_writedata`: the bytes are copied at once and no local completion is reported.
    pub fn inject_write(
        &self,
        bytes: &[u8],
        dest: Address,
        remote: RemoteRange,
        data: Option<u64>,
    ) -> Result<Post> {
        let inject = self.info().inject_size();
        if bytes.len() > inject {
            return Err(FabricError::too_long(format!(
                "inject of {} bytes exceeds inject_size {inject} of {}",
                bytes.len(),
                self.info().provider()
            )));
        }
        if remote.len != bytes.len() as u64 {
            return Err(FabricError::invalid(format!(
                "inject of {} bytes into a remote range of {}",
                bytes.len(),
                remote.len
            )));
        }
        self.check_data(data)?;
        // SAFETY: endpoint is open; bytes is read before the call returns (inject semantics).
        let ret = unsafe {
            match data {
                Some(data) => sys::circ_fi_inject_writedata(
                    self.inner.fid,
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    data,
                    dest.0,
                    remote.addr,
                    remote.key,
                ),
                None => sys::circ_fi_inject_write(
                    self.inner.fid,
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    dest.0,
                    remote.addr,
                    remote.key,
                ),
            }
        };
        check_post("fi_inject_write", ret)
    }

    /// Posts a read of `remote` at `src` into `dst` (`fi_read`); lengths must match.
    pub fn read(
        &self,
        dst: LocalRange<'_>,
        src: Address,
        remote: RemoteRange,
        context: u64,
    ) -> Result<Post> {
        if remote.len != dst.len as u64 {
            return Err(FabricError::invalid(format!(
                "read of a remote range of {} into {} local bytes",
                remote.len, dst.len
            )));
        }
        self.check_len(dst.len)?;
        let region = &dst.region.inner;
        let desc = region.desc_for(&self.inner)?;
        let op = self.inner.tx_cq.track(
            context,
            Keep::Region {
                _alive: region.clone(),
            },
        );
        // SAFETY: as in write; the provider writes into the registered range only.
        let ret = unsafe {
            sys::circ_fi_read(
                self.inner.fid,
                region.addr(dst.offset).cast(),
                dst.len,
                desc,
                src.0,
                remote.addr,
                remote.key,
                op,
            )
        };
        self.finish_post("fi_read", ret, op)
    }

    fn finish_post(
        &self,
        call: &'static str,
        ret: isize,
        op: *mut std::os::raw::c_void,
    ) -> Result<Post> {
        let outcome = check_post(call, ret);
        if !matches!(outcome, Ok(Post::Posted)) {
            // Not posted: no completion will ever refer to op.
            self.inner.tx_cq.untrack(op);
        }
        outcome
    }
}
