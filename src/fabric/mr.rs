//! Registered memory: owned, page-aligned buffers (anonymous memory maps) registered with the
//! access they need ([`Access`]) under a key that cannot be guessed, and the descriptors peers
//! need to write into them.

use std::ptr::{self, NonNull};
use std::sync::Arc;

use memmap2::{MmapMut, MmapOptions};

use circulant_sys as sys;

use super::domain::DomainInner;
use super::endpoint::EndpointInner;
use super::{check, Domain, Endpoint, FabricError, MrMode, Result};

/// What peers may do with a registered region. This process may always use it as the source
/// of its writes and the target of its reads (local access grants nothing to others).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// No remote access: send buffers and send staging, which only this process writes from.
    Local,
    /// Peers may write into it: receive, scratch and control regions (the transport's protocol
    /// only ever writes remotely).
    RemoteWrite,
    /// Peers may write into it and read from it (RMA reads; the transport never needs them).
    RemoteReadWrite,
}

impl Access {
    /// The `fi_mr_reg` access bits.
    fn flags(self) -> u64 {
        let local = sys::FI_READ | sys::FI_WRITE;
        match self {
            Access::Local => local,
            Access::RemoteWrite => local | sys::FI_REMOTE_WRITE,
            Access::RemoteReadWrite => local | sys::FI_REMOTE_WRITE | sys::FI_REMOTE_READ,
        }
    }
}

/// Random keys tried before a registration gives up on finding one that is unused in the
/// domain (a collision of 64-bit keys is practically impossible; small key sizes make it
/// likely).
const KEY_ATTEMPTS: usize = 16;

/// One registration of a region's memory with one domain.
pub(crate) struct Registration {
    mr: *mut sys::fid_mr,
    pub(crate) desc: *mut std::os::raw::c_void,
    key: u64,
    virt_addr: bool,
    /// Dropped after `Drop::drop` has closed the MR: the domain and, for FI_MR_ENDPOINT
    /// providers, the endpoint the MR is bound to stay open until then.
    endpoint: Option<Arc<EndpointInner>>,
    domain: Arc<DomainInner>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: the MR is open and closed once, here; the memory it covers is unmapped only
        // after every registration of its region was dropped (field order of RegionInner).
        unsafe { sys::circ_fi_close(ptr::addr_of_mut!((*self.mr).fid)) };
    }
}

impl Registration {
    /// Whether writes through `endpoint` may use this registration: the endpoint's domain, and
    /// the endpoint itself where the provider binds registrations to one.
    fn serves(&self, endpoint: &Arc<EndpointInner>) -> bool {
        Arc::ptr_eq(&self.domain, &endpoint.domain)
            && self
                .endpoint
                .as_ref()
                .map_or(true, |e| Arc::ptr_eq(e, endpoint))
    }
}

pub(crate) struct RegionInner {
    ptr: NonNull<u8>,
    /// The memory's registrations, one per domain (a transport with a second fabric for the
    /// ranks of its node registers its memory with both). Closed before the memory is
    /// unmapped: fields drop in order.
    regs: Vec<Registration>,
    /// The memory: unmapped after the MRs are closed. Only accessed through `ptr`.
    _map: MmapMut,
}

// SAFETY: the MRs were opened with FI_THREAD_SAFE; the buffer is only accessed through
// RegisteredMemory's methods (&mut self for local writes) and by the provider.
unsafe impl Send for RegionInner {}
// SAFETY: as above.
unsafe impl Sync for RegionInner {}

impl RegionInner {
    /// Address of byte `offset`; callers bound `offset` by the length before using it.
    pub(crate) fn addr(&self, offset: usize) -> *mut u8 {
        self.ptr.as_ptr().wrapping_add(offset)
    }

    /// The descriptor of the registration `endpoint` may use.
    pub(crate) fn desc_for(
        &self,
        endpoint: &Arc<EndpointInner>,
    ) -> Result<*mut std::os::raw::c_void> {
        self.regs
            .iter()
            .find(|r| r.serves(endpoint))
            .map(|r| r.desc)
            .ok_or_else(|| {
                FabricError::invalid(
                    "a region registered with another domain than the endpoint's".to_string(),
                )
            })
    }
}

/// A buffer owned by this process and registered with a domain (`fi_mr_reg`) with the
/// [`Access`] it was asked for, under a random key (or the provider's own under
/// `FI_MR_PROV_KEY`). Freed after the registration is closed, and never while a local
/// operation that uses it is in flight.
///
/// Peers write into it through its [`RemoteRegion`]; those writes happen outside Rust's view,
/// so read it ([`Self::read`], [`Self::to_vec`]) once the protocol says the data has arrived.
pub struct RegisteredMemory {
    pub(crate) inner: Arc<RegionInner>,
    len: usize,
}

impl RegisteredMemory {
    /// Allocates `len` zeroed bytes and registers them with `domain` for `access`. Fails on
    /// providers that bind registrations to endpoints (`FI_MR_ENDPOINT`): use
    /// [`Self::for_endpoint`].
    pub fn new(domain: &Domain, len: usize, access: Access) -> Result<RegisteredMemory> {
        if domain.info().mr_mode().contains(MrMode::ENDPOINT) {
            return Err(FabricError::invalid(format!(
                "provider {} binds memory registrations to endpoints (FI_MR_ENDPOINT): \
                 register through the endpoint",
                domain.info().provider()
            )));
        }
        Self::register(&[(&domain.inner, None)], len, access)
    }

    /// Allocates `len` zeroed bytes and registers them in `endpoint`'s domain for `access`,
    /// bound to the endpoint where the provider requires it (`FI_MR_ENDPOINT`).
    pub fn for_endpoint(
        endpoint: &Endpoint,
        len: usize,
        access: Access,
    ) -> Result<RegisteredMemory> {
        Self::for_endpoints(&[endpoint], len, access)
    }

    /// Allocates `len` zeroed bytes and registers them for `access` with the domain of each of
    /// `endpoints` (of different domains), so that writes through any of them may use them;
    /// [`Self::remote_for`] gives peers of each its own descriptor.
    pub fn for_endpoints(
        endpoints: &[&Endpoint],
        len: usize,
        access: Access,
    ) -> Result<RegisteredMemory> {
        let targets: Vec<_> = endpoints
            .iter()
            .map(|e| {
                let domain = &e.inner.domain;
                let bind = domain
                    .info
                    .mr_mode()
                    .contains(MrMode::ENDPOINT)
                    .then(|| e.inner.clone());
                (domain, bind)
            })
            .collect();
        Self::register(&targets, len, access)
    }

    fn register(
        targets: &[(&Arc<DomainInner>, Option<Arc<EndpointInner>>)],
        len: usize,
        access: Access,
    ) -> Result<RegisteredMemory> {
        if len == 0 {
            return Err(FabricError::invalid("cannot register 0 bytes".to_string()));
        }
        if targets.is_empty() {
            return Err(FabricError::invalid(
                "no domain to register memory with".to_string(),
            ));
        }
        let mut map = MmapOptions::new().len(len).map_anon().map_err(|err| {
            FabricError::invalid(format!("cannot map {len} bytes of memory: {err}"))
        })?;
        // Writing (not just mapping zero pages) backs every page, as FI_MR_ALLOCATED requires.
        map.fill(0);
        let ptr = NonNull::new(map.as_mut_ptr())
            .ok_or_else(|| FabricError::invalid("memory map at address 0".to_string()))?;
        // On failure the registrations made are closed (dropped) before the map is unmapped.
        let mut regs = Vec::with_capacity(targets.len());
        for (domain, endpoint) in targets {
            regs.push(Self::register_in(
                domain,
                endpoint.clone(),
                ptr,
                len,
                access,
            )?);
        }
        Ok(RegisteredMemory {
            inner: Arc::new(RegionInner {
                ptr,
                regs,
                _map: map,
            }),
            len,
        })
    }

    /// Registers the `len` bytes at `ptr` with `domain` (bound to `endpoint` if given).
    fn register_in(
        domain: &Arc<DomainInner>,
        endpoint: Option<Arc<EndpointInner>>,
        ptr: NonNull<u8>,
        len: usize,
        access: Access,
    ) -> Result<Registration> {
        let mr_mode = domain.info.mr_mode();
        let prov_key = mr_mode.contains(MrMode::PROV_KEY);
        // A random key is requested even under FI_MR_PROV_KEY, where it is ignored: a layered
        // provider whose core does not assign keys then still gets distinct ones (tcp;ofi_rxm
        // with a forced FI_MR_PROV_KEY rejects a second key 0).
        let mut requested_key = 0;
        let mut mr = ptr::null_mut();
        let mut ret = 0;
        for _ in 0..KEY_ATTEMPTS {
            requested_key = domain.random_key()?;
            // SAFETY: domain is open; the buffer is valid for len bytes and stays allocated
            // until after the MR is closed (RegionInner's field order).
            ret = unsafe {
                sys::circ_fi_mr_reg(
                    domain.fid,
                    ptr.as_ptr().cast(),
                    len,
                    access.flags(),
                    0,
                    requested_key,
                    0,
                    &mut mr,
                    ptr::null_mut(),
                )
            };
            // -FI_ENOKEY: the key is in use in the domain; draw another.
            if ret != -(sys::FI_ENOKEY as i32) {
                break;
            }
        }
        check("fi_mr_reg", ret as isize)?;
        // From here on the Registration owns the MR; its Drop closes it.
        let mut reg = Registration {
            mr,
            desc: ptr::null_mut(),
            key: requested_key,
            virt_addr: mr_mode.contains(MrMode::VIRT_ADDR),
            endpoint: None,
            domain: domain.clone(),
        };
        if let Some(endpoint) = endpoint {
            // SAFETY: mr and the endpoint are open; binding and enabling is what FI_MR_ENDPOINT
            // requires before first use.
            let ret =
                unsafe { sys::circ_fi_mr_bind(mr, ptr::addr_of_mut!((*endpoint.fid).fid), 0) };
            reg.endpoint = Some(endpoint);
            check("fi_mr_bind", ret as isize)?;
            // SAFETY: mr is open and bound.
            let ret = unsafe { sys::circ_fi_mr_enable(mr) };
            check("fi_mr_enable", ret as isize)?;
        }
        // SAFETY: mr is open (and enabled where needed).
        reg.desc = unsafe { sys::circ_fi_mr_desc(mr) };
        if prov_key {
            // SAFETY: as above.
            let key = unsafe { sys::circ_fi_mr_key(mr) };
            if key == sys::FI_KEY_NOTAVAIL {
                return Err(FabricError::invalid(format!(
                    "{} gave no key for a registration (FI_MR_RAW keys are not supported)",
                    domain.info.provider()
                )));
            }
            reg.key = key;
        }
        Ok(reg)
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the length is 0.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether writes through `endpoint` may use this region: it was registered in the
    /// endpoint's domain (and bound to that endpoint where the provider binds regions).
    pub fn usable_with(&self, endpoint: &Endpoint) -> bool {
        self.inner.regs.iter().any(|r| r.serves(&endpoint.inner))
    }

    /// Key peers use to access the region (through its first registration).
    pub fn key(&self) -> u64 {
        self.inner.regs[0].key
    }

    /// What a peer needs to write into (or read from) this region through its first
    /// registration.
    pub fn remote(&self) -> RemoteRegion {
        self.remote_of(&self.inner.regs[0])
    }

    /// What a peer reached through `endpoint` needs to write into this region: the
    /// registration with that endpoint's domain, if the region has one.
    pub fn remote_for(&self, endpoint: &Endpoint) -> Option<RemoteRegion> {
        self.inner
            .regs
            .iter()
            .find(|r| r.serves(&endpoint.inner))
            .map(|r| self.remote_of(r))
    }

    fn remote_of(&self, reg: &Registration) -> RemoteRegion {
        RemoteRegion {
            base: if reg.virt_addr {
                self.inner.ptr.as_ptr() as u64
            } else {
                0
            },
            len: self.len as u64,
            key: reg.key,
        }
    }

    /// The local bytes `offset..offset + len`, as the source or target of an operation.
    pub fn range(&self, offset: usize, len: usize) -> Result<LocalRange<'_>> {
        self.check(offset, len)?;
        Ok(LocalRange {
            region: self,
            offset,
            len,
        })
    }

    fn check(&self, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(FabricError::invalid(format!(
                "range {offset}+{len} outside a registered region of {} bytes",
                self.len
            ))),
        }
    }

    /// Copies bytes out of the region.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.check(offset, dst.len())?;
        // SAFETY: bounds checked; dst is a distinct Rust buffer.
        unsafe { ptr::copy_nonoverlapping(self.inner.addr(offset), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Copies bytes into the region (e.g. data to send).
    pub fn write(&mut self, offset: usize, src: &[u8]) -> Result<()> {
        self.check(offset, src.len())?;
        // SAFETY: bounds checked; &mut self excludes other local access through this handle.
        unsafe { ptr::copy_nonoverlapping(src.as_ptr(), self.inner.addr(offset), src.len()) };
        Ok(())
    }

    /// Copies bytes into the region through a shared reference: the region is memory shared
    /// with the provider and peers, never lent out as a Rust slice while shared, so stores go
    /// through raw copies like the provider's own. The caller's protocol must ensure no peer
    /// writes these bytes at the same time (they would interleave, as with any RMA target).
    pub fn store(&self, offset: usize, src: &[u8]) -> Result<()> {
        self.check(offset, src.len())?;
        // SAFETY: bounds checked; src is a distinct Rust buffer; no Rust reference into the
        // region exists while `self` is shared (slices need &mut self, see as_mut_slice).
        unsafe { ptr::copy_nonoverlapping(src.as_ptr(), self.inner.addr(offset), src.len()) };
        Ok(())
    }

    /// Copies `len` bytes from `src` at `src_offset` to this region at `offset` (the ranges may
    /// overlap when both are the same region). Same rules as [`Self::store`].
    pub fn copy_from(
        &self,
        offset: usize,
        src: &RegisteredMemory,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        self.check(offset, len)?;
        src.check(src_offset, len)?;
        // SAFETY: both ranges are in bounds of live regions; ptr::copy allows overlap.
        unsafe { ptr::copy(src.inner.addr(src_offset), self.inner.addr(offset), len) };
        Ok(())
    }

    /// The region's bytes. Writes by peers land here outside Rust's view: read what the
    /// protocol says has arrived.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the map is valid for len bytes for the life of `inner`, which `self` keeps.
        unsafe { std::slice::from_raw_parts(self.inner.ptr.as_ptr(), self.len) }
    }

    /// The region's bytes, for the owner to fill or read between operations.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in as_slice; &mut self excludes every other local access through this
        // handle (the RegisteredMemory is not Clone).
        unsafe { std::slice::from_raw_parts_mut(self.inner.ptr.as_ptr(), self.len) }
    }

    /// A copy of the whole region.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0; self.len];
        // The range is the whole region, so read cannot fail.
        let _ = self.read(0, &mut out);
        out
    }
}

/// A range of local registered memory.
#[derive(Clone, Copy)]
pub struct LocalRange<'a> {
    pub(crate) region: &'a RegisteredMemory,
    pub(crate) offset: usize,
    pub(crate) len: usize,
}

impl LocalRange<'_> {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the length is 0.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A peer's registered region as seen from here: base address (its virtual address under
/// `FI_MR_VIRT_ADDR`, else 0 as addresses are offsets), length and key. Exchanged as 24 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteRegion {
    /// Base address (virtual address, or 0 where addresses are offsets).
    pub base: u64,
    /// Length in bytes.
    pub len: u64,
    /// Remote key.
    pub key: u64,
}

/// Encoded size of a [`RemoteRegion`].
pub const REMOTE_REGION_BYTES: usize = 24;

impl RemoteRegion {
    /// `offset..offset + len` of the peer's region, bounds-checked against its length.
    pub fn range(&self, offset: u64, len: u64) -> Result<RemoteRange> {
        // The base comes from a peer: its sum with the offset must not wrap either.
        let end = offset.checked_add(len).filter(|&end| end <= self.len);
        match (end, self.base.checked_add(offset)) {
            (Some(_), Some(addr)) => Ok(RemoteRange {
                addr,
                len,
                key: self.key,
            }),
            _ => Err(FabricError::invalid(format!(
                "range {offset}+{len} outside a remote region of {} bytes at {:#x}",
                self.len, self.base
            ))),
        }
    }

    /// Little-endian `base, len, key`.
    pub fn to_bytes(&self) -> [u8; REMOTE_REGION_BYTES] {
        let mut out = [0; REMOTE_REGION_BYTES];
        out[..8].copy_from_slice(&self.base.to_le_bytes());
        out[8..16].copy_from_slice(&self.len.to_le_bytes());
        out[16..].copy_from_slice(&self.key.to_le_bytes());
        out
    }

    /// Parses the 24 bytes of [`RemoteRegion::to_bytes`]; any other length is an error.
    pub fn from_bytes(bytes: &[u8]) -> Result<RemoteRegion> {
        let bytes: &[u8; REMOTE_REGION_BYTES] = bytes.try_into().map_err(|_| {
            FabricError::invalid(format!(
                "remote region descriptor of {} bytes (expected {REMOTE_REGION_BYTES})",
                bytes.len()
            ))
        })?;
        let word = |i: usize| {
            let mut w = [0; 8];
            w.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
            u64::from_le_bytes(w)
        };
        Ok(RemoteRegion {
            base: word(0),
            len: word(1),
            key: word(2),
        })
    }
}

/// Target of an RMA operation in a peer's memory: address as the provider expects it (see
/// [`RemoteRegion`]), length and key. Normally made with [`RemoteRegion::range`]; a hand-made
/// one is checked by the peer's provider, never trusted locally.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteRange {
    /// Address (see [`RemoteRegion`]).
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Remote key.
    pub key: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_region_round_trips_through_bytes() {
        let region = RemoteRegion {
            base: 0x7f00_1234_5000,
            len: 4096,
            key: 0xdead_beef,
        };
        assert_eq!(
            RemoteRegion::from_bytes(&region.to_bytes()).ok(),
            Some(region)
        );
        assert!(RemoteRegion::from_bytes(&region.to_bytes()[..23]).is_err());
    }

    #[test]
    fn remote_ranges_stay_inside_the_region() {
        let region = RemoteRegion {
            base: 1000,
            len: 100,
            key: 7,
        };
        let range = region.range(40, 60).ok();
        assert_eq!(
            range,
            Some(RemoteRange {
                addr: 1040,
                len: 60,
                key: 7
            })
        );
        assert!(region.range(41, 60).is_err());
        assert!(region.range(u64::MAX, 2).is_err());
        assert!(region.range(100, 0).is_ok());
    }
}
