//! Address vector: peers' endpoint names (from `Endpoint::name`) to `fi_addr_t`.

use std::ptr;
use std::sync::Arc;

use circulant_sys as sys;

use super::domain::DomainInner;
use super::{check, Domain, FabricError, Result};

/// A peer's address in an [`AddressVector`] (`fi_addr_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Address(pub(crate) sys::fi_addr_t);

impl Address {
    /// The `fi_addr_t` value libfabric takes.
    pub fn raw(self) -> u64 {
        self.0
    }
}

pub(crate) struct AvInner {
    pub(crate) fid: *mut sys::fid_av,
    domain: Arc<DomainInner>,
}

// SAFETY: opened with FI_THREAD_SAFE (see `Hints`); closed once, in Drop.
unsafe impl Send for AvInner {}
// SAFETY: as above.
unsafe impl Sync for AvInner {}

impl Drop for AvInner {
    fn drop(&mut self) {
        // SAFETY: opened by fi_av_open; endpoints bound to it hold an Arc to this.
        unsafe { sys::circ_fi_close(ptr::addr_of_mut!((*self.fid).fid)) };
    }
}

/// An open address vector (`fi_av_open`), synchronous inserts.
#[derive(Clone)]
pub struct AddressVector {
    pub(crate) inner: Arc<AvInner>,
}

/// Longest endpoint name accepted; real ones are tens of bytes.
const MAX_NAME: usize = 4096;

impl AddressVector {
    /// Opens an address vector for about `count` peers (a hint, 0 for the provider default).
    pub fn open(domain: &Domain, count: usize) -> Result<AddressVector> {
        let mut attr = sys::fi_av_attr {
            type_: domain.info().av_type(),
            count,
            ..Default::default()
        };
        let mut fid = ptr::null_mut();
        // SAFETY: domain is open; attr is a valid, initialised fi_av_attr for the call.
        let ret =
            unsafe { sys::circ_fi_av_open(domain.inner.fid, &mut attr, &mut fid, ptr::null_mut()) };
        check("fi_av_open", ret as isize)?;
        Ok(AddressVector {
            inner: Arc::new(AvInner {
                fid,
                domain: domain.inner.clone(),
            }),
        })
    }

    /// Inserts one peer by its endpoint name (the bytes of `Endpoint::name`).
    pub fn insert(&self, name: &[u8]) -> Result<Address> {
        if name.is_empty() || name.len() > MAX_NAME {
            return Err(FabricError::invalid(format!(
                "endpoint name of {} bytes (expected 1..={MAX_NAME})",
                name.len()
            )));
        }
        // The provider reads as many bytes as its address format says (a sockaddr, or a
        // NUL-terminated string for FI_ADDR_STR), not name.len(): pad with zeros so that a
        // short or corrupt name cannot make it read past our buffer.
        let padded_len = name.len().max(self.inner.domain.info.src_addrlen()) + 256;
        let mut padded = vec![0u8; padded_len];
        padded[..name.len()].copy_from_slice(name);
        let mut addr: sys::fi_addr_t = sys::FI_ADDR_NOTAVAIL;
        // SAFETY: av is open; padded is readable for padded_len bytes (see above); addr receives
        // one fi_addr_t.
        let ret = unsafe {
            sys::circ_fi_av_insert(
                self.inner.fid,
                padded.as_ptr().cast(),
                1,
                &mut addr,
                0,
                ptr::null_mut(),
            )
        };
        let inserted = check("fi_av_insert", ret as isize)?;
        if inserted != 1 || addr == sys::FI_ADDR_NOTAVAIL {
            return Err(FabricError::invalid(format!(
                "fi_av_insert rejected an endpoint name of {} bytes",
                name.len()
            )));
        }
        Ok(Address(addr))
    }
}
