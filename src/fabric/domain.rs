//! Fabric and domain: the provider instance and its resource domain.

use std::ptr;
use std::sync::Arc;

use circulant_sys as sys;

use super::{check, FabricError, Info, Result};

pub(crate) struct FabricInner {
    fid: *mut sys::fid_fabric,
}

// SAFETY: objects are opened with FI_THREAD_SAFE (see `Hints`), so libfabric allows calls on them
// from any thread; the pointer itself is only closed once, in Drop.
unsafe impl Send for FabricInner {}
// SAFETY: as above.
unsafe impl Sync for FabricInner {}

impl Drop for FabricInner {
    fn drop(&mut self) {
        // SAFETY: fid was opened by fi_fabric and every child holds an Arc to this, so nothing
        // opened from it is still open. A close error cannot be acted upon here.
        unsafe { sys::circ_fi_close(ptr::addr_of_mut!((*self.fid).fid)) };
    }
}

/// An open fabric (`fi_fabric`).
#[derive(Clone)]
pub struct Fabric {
    pub(crate) inner: Arc<FabricInner>,
}

impl Fabric {
    /// Opens the fabric of a provider that `fi_getinfo` returned.
    pub fn open(info: &Info) -> Result<Fabric> {
        let mut fid = ptr::null_mut();
        // SAFETY: info owns a valid fabric_attr; fid receives the new object.
        let ret =
            unsafe { sys::fi_fabric((*info.as_ptr()).fabric_attr, &mut fid, ptr::null_mut()) };
        check("fi_fabric", ret as isize)?;
        Ok(Fabric {
            inner: Arc::new(FabricInner { fid }),
        })
    }
}

pub(crate) struct DomainInner {
    pub(crate) fid: *mut sys::fid_domain,
    pub(crate) info: Info,
    _fabric: Arc<FabricInner>,
}

// SAFETY: see FabricInner.
unsafe impl Send for DomainInner {}
// SAFETY: see FabricInner.
unsafe impl Sync for DomainInner {}

impl DomainInner {
    /// A random key to request for a registration, within the provider's key size: a peer or
    /// another user that can reach the endpoint cannot guess it, as it could guess keys that
    /// count up. Keys must be unique in the domain: registration retries on a collision.
    pub(crate) fn random_key(&self) -> Result<u64> {
        let key = crate::random::u64().map_err(|err| {
            FabricError::invalid(format!("no random memory key from the system: {err}"))
        })?;
        Ok(match self.info.mr_key_size() {
            size @ 1..=7 => key & ((1u64 << (8 * size)) - 1),
            _ => key,
        })
    }
}

impl Drop for DomainInner {
    fn drop(&mut self) {
        // SAFETY: opened by fi_domain; children hold an Arc to this, so all are closed.
        unsafe { sys::circ_fi_close(ptr::addr_of_mut!((*self.fid).fid)) };
    }
}

/// An open domain (`fi_domain`) with the `Info` it was opened with, which decides how memory is
/// registered and addressed.
#[derive(Clone)]
pub struct Domain {
    pub(crate) inner: Arc<DomainInner>,
}

impl Domain {
    /// Opens the fabric of `info` and a domain in it.
    pub fn open(info: &Info) -> Result<Domain> {
        Self::open_in(&Fabric::open(info)?, info)
    }

    /// Opens a domain of an already open fabric.
    pub fn open_in(fabric: &Fabric, info: &Info) -> Result<Domain> {
        let info = info.clone();
        let mut fid = ptr::null_mut();
        // SAFETY: fabric is open; info is a valid fi_info that outlives the call (libfabric copies
        // what it keeps).
        let ret = unsafe {
            sys::circ_fi_domain(fabric.inner.fid, info.as_ptr(), &mut fid, ptr::null_mut())
        };
        check("fi_domain", ret as isize)?;
        Ok(Domain {
            inner: Arc::new(DomainInner {
                fid,
                info,
                _fabric: fabric.inner.clone(),
            }),
        })
    }

    /// The info the domain was opened with (provider, limits, mr_mode).
    pub fn info(&self) -> &Info {
        &self.inner.info
    }
}
