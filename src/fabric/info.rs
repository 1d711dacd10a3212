//! `fi_getinfo`: what the providers offer for a set of hints.

use std::ffi::CString;
use std::fmt;
use std::ptr::{self, NonNull};

use circulant_sys as sys;

use super::{api_version, c_string, FabricError, Result};

/// Memory-registration mode bits (`domain_attr->mr_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MrMode(pub u32);

impl MrMode {
    /// `FI_MR_LOCAL`: local buffers of transfers must be registered too.
    pub const LOCAL: MrMode = MrMode(sys::FI_MR_LOCAL as u32);
    /// `FI_MR_RAW`: keys are raw bytes to be mapped before use.
    pub const RAW: MrMode = MrMode(sys::FI_MR_RAW as u32);
    /// `FI_MR_VIRT_ADDR`: remote addresses are virtual addresses, not offsets.
    pub const VIRT_ADDR: MrMode = MrMode(sys::FI_MR_VIRT_ADDR as u32);
    /// `FI_MR_ALLOCATED`: only memory backed by pages may be registered.
    pub const ALLOCATED: MrMode = MrMode(sys::FI_MR_ALLOCATED as u32);
    /// `FI_MR_PROV_KEY`: the provider chooses the keys.
    pub const PROV_KEY: MrMode = MrMode(sys::FI_MR_PROV_KEY as u32);
    /// `FI_MR_MMU_NOTIFY`: the provider must be told when mappings change.
    pub const MMU_NOTIFY: MrMode = MrMode(sys::FI_MR_MMU_NOTIFY as u32);
    /// `FI_MR_RMA_EVENT`: registrations must be enabled before use.
    pub const RMA_EVENT: MrMode = MrMode(sys::FI_MR_RMA_EVENT as u32);
    /// `FI_MR_ENDPOINT`: registrations are bound to an endpoint.
    pub const ENDPOINT: MrMode = MrMode(sys::FI_MR_ENDPOINT as u32);
    /// `FI_MR_HMEM`: device memory must be registered.
    pub const HMEM: MrMode = MrMode(sys::FI_MR_HMEM as u32);
    /// `FI_MR_COLLECTIVE`: registrations for collective offload.
    pub const COLLECTIVE: MrMode = MrMode(sys::FI_MR_COLLECTIVE as u32);

    /// Every bit this layer knows how to honour; the default in [`Hints`].
    pub const SUPPORTED: MrMode = MrMode(
        Self::LOCAL.0 | Self::VIRT_ADDR.0 | Self::ALLOCATED.0 | Self::PROV_KEY.0 | Self::ENDPOINT.0,
    );
    /// The verbs-like set (`FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY`).
    pub const VERBS: MrMode =
        MrMode(Self::LOCAL.0 | Self::VIRT_ADDR.0 | Self::ALLOCATED.0 | Self::PROV_KEY.0);

    const NAMES: [(MrMode, &'static str); 10] = [
        (Self::LOCAL, "FI_MR_LOCAL"),
        (Self::RAW, "FI_MR_RAW"),
        (Self::VIRT_ADDR, "FI_MR_VIRT_ADDR"),
        (Self::ALLOCATED, "FI_MR_ALLOCATED"),
        (Self::PROV_KEY, "FI_MR_PROV_KEY"),
        (Self::MMU_NOTIFY, "FI_MR_MMU_NOTIFY"),
        (Self::RMA_EVENT, "FI_MR_RMA_EVENT"),
        (Self::ENDPOINT, "FI_MR_ENDPOINT"),
        (Self::HMEM, "FI_MR_HMEM"),
        (Self::COLLECTIVE, "FI_MR_COLLECTIVE"),
    ];

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: MrMode) -> bool {
        self.0 & other.0 == other.0
    }

    /// Names of the set bits (`FI_MR_*`), unknown bits as hex.
    pub fn names(self) -> Vec<String> {
        let mut rest = self.0;
        let mut names = Vec::new();
        for (bit, name) in Self::NAMES {
            if self.contains(bit) {
                names.push(name.to_string());
                rest &= !bit.0;
            }
        }
        if rest != 0 {
            names.push(format!("{rest:#x}"));
        }
        names
    }
}

impl std::ops::BitOr for MrMode {
    type Output = MrMode;
    fn bitor(self, rhs: MrMode) -> MrMode {
        MrMode(self.0 | rhs.0)
    }
}

impl fmt::Display for MrMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = self.names();
        if names.is_empty() {
            f.write_str("0")
        } else {
            f.write_str(&names.join("|"))
        }
    }
}

/// A provider's progress model for data transfers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The provider progresses operations on its own.
    Auto,
    /// Operations only progress while the application calls into the provider (CQ reads).
    Manual,
    /// The provider does not say.
    Unspecified,
    /// A value this build does not name (newer headers).
    Other(u32),
}

impl Progress {
    fn from_raw(raw: i32) -> Self {
        // The enum's C type is compiler-chosen (u32 or i32): compare as i64.
        #[allow(clippy::unnecessary_cast)]
        let is = |value: sys::fi_progress| raw as i64 == value as i64;
        if is(sys::FI_PROGRESS_AUTO) {
            Progress::Auto
        } else if is(sys::FI_PROGRESS_MANUAL) {
            Progress::Manual
        } else if is(sys::FI_PROGRESS_UNSPEC) {
            Progress::Unspecified
        } else {
            Progress::Other(raw as u32)
        }
    }
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Progress::Auto => f.write_str("auto"),
            Progress::Manual => f.write_str("manual"),
            Progress::Unspecified => f.write_str("unspecified"),
            Progress::Other(raw) => write!(f, "{raw}"),
        }
    }
}

/// A job's authentication key: providers that support authorization keys
/// (`domain_attr->auth_key_size > 0`) only let endpoints and registrations with the same key
/// reach each other. Its bytes are never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthKey(Vec<u8>);

impl AuthKey {
    /// Longest key accepted, in bytes.
    pub const MAX_BYTES: usize = 256;

    /// A key from its hexadecimal text (1 to [`Self::MAX_BYTES`] bytes).
    pub fn from_hex(text: &str) -> std::result::Result<AuthKey, String> {
        let text = text.trim();
        if text.is_empty() || text.len() % 2 != 0 || text.len() > 2 * Self::MAX_BYTES {
            return Err(format!(
                "expected an even number of hexadecimal digits (2 to {})",
                2 * Self::MAX_BYTES
            ));
        }
        (0..text.len())
            .step_by(2)
            .map(|i| {
                text.get(i..i + 2)
                    .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                    .ok_or_else(|| "contains a character that is not a hexadecimal digit".into())
            })
            .collect::<std::result::Result<Vec<u8>, String>>()
            .map(AuthKey)
    }

    /// The key fitted to a provider's key size: cut, or repeated to fill it.
    fn fitted(&self, size: usize) -> Vec<u8> {
        self.0.iter().copied().cycle().take(size).collect()
    }
}

impl fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AuthKey({} bytes)", self.0.len())
    }
}

/// What to ask `fi_getinfo` for.
#[derive(Clone, Debug)]
pub struct Hints {
    /// Provider name (`"tcp;ofi_rxm"`, `"shm"`, …); `None` for any. The `FI_PROVIDER` environment
    /// variable restricts the providers libfabric loads in any case.
    pub provider: Option<String>,
    /// Local address to bind to (with `FI_SOURCE`), e.g. `"127.0.0.1"` to stay on loopback.
    pub node: Option<String>,
    /// Local service (port) to bind to, with `node`.
    pub service: Option<String>,
    /// Required capabilities (`FI_RMA`, `FI_MSG`, …).
    pub caps: u64,
    /// Mode bits the application supports.
    pub mode: u64,
    /// Memory-registration modes the application supports.
    pub mr_mode: MrMode,
    /// Authentication key for the entries whose provider supports keys (others match as
    /// without it, as a key in the hints would exclude them).
    pub auth_key: Option<AuthKey>,
}

impl Hints {
    /// Reliable datagram endpoints with RMA: what the one-sided transport needs. Remote CQ data
    /// is not a hint (libfabric 1.17 then matches nothing); check [`Info::cq_data_size`].
    pub fn rdm_rma() -> Self {
        Hints {
            provider: None,
            node: None,
            service: None,
            caps: sys::FI_RMA,
            // Contexts are heap fi_context2 (see the module docs); FI_RX_CQ_DATA is handled by
            // posting receives for remote CQ data (see `Endpoint`).
            mode: sys::FI_CONTEXT | sys::FI_CONTEXT2 | sys::FI_RX_CQ_DATA,
            mr_mode: MrMode::SUPPORTED,
            auth_key: None,
        }
    }

    /// Only this provider (`fi_getinfo`'s `prov_name`).
    pub fn provider(mut self, name: impl Into<String>) -> Self {
        self.provider = Some(name.into());
        self
    }

    /// Bind to this local address (`FI_SOURCE`).
    pub fn node(mut self, node: impl Into<String>) -> Self {
        self.node = Some(node.into());
        self
    }

    /// Asks for these registration modes (tests force the modes of other providers).
    pub fn mr_mode(mut self, mr_mode: MrMode) -> Self {
        self.mr_mode = mr_mode;
        self
    }

    /// Asks for a domain restricted to this authorization key.
    pub fn auth_key(mut self, key: AuthKey) -> Self {
        self.auth_key = Some(key);
        self
    }
}

impl Default for Hints {
    fn default() -> Self {
        Self::rdm_rma()
    }
}

/// One `fi_info` entry: a provider, fabric and domain with their attributes. Owned (a copy made
/// with `fi_dupinfo`), freed on drop.
pub struct Info {
    ptr: NonNull<sys::fi_info>,
}

// SAFETY: an Info is an exclusively owned heap copy that this type only reads after creation;
// libfabric keeps no reference to it.
unsafe impl Send for Info {}
// SAFETY: shared access only reads plain data.
unsafe impl Sync for Info {}

impl Info {
    /// `fi_getinfo` with `hints`: every matching entry, in the provider's order of preference.
    /// No match is an empty list, not an error.
    pub fn query(hints: &Hints) -> Result<Vec<Info>> {
        let to_c = |s: &Option<String>, what: &str| -> Result<Option<CString>> {
            s.as_deref()
                .map(|s| {
                    CString::new(s)
                        .map_err(|_| FabricError::invalid(format!("{what} contains NUL")))
                })
                .transpose()
        };
        let prov_name = to_c(&hints.provider, "provider name")?;
        let node = to_c(&hints.node, "node")?;
        let service = to_c(&hints.service, "service")?;

        // SAFETY: fi_allocinfo returns a zeroed fi_info with allocated sub-attributes, or null.
        let raw_hints = unsafe { sys::circ_fi_allocinfo() };
        let Some(raw_hints) = NonNull::new(raw_hints) else {
            return Err(FabricError::call(
                "fi_allocinfo",
                -(sys::FI_ENOMEM as isize),
            ));
        };
        let hints_ptr = raw_hints.as_ptr();
        let mut list: *mut sys::fi_info = ptr::null_mut();
        // SAFETY: hints_ptr and its attribute pointers were allocated by fi_allocinfo and are
        // exclusively ours. prov_name points into a CString that outlives the fi_getinfo call and
        // is reset to null before fi_freeinfo, which would otherwise free it.
        let ret = unsafe {
            let h = &mut *hints_ptr;
            h.caps = hints.caps;
            h.mode = hints.mode;
            (*h.ep_attr).type_ = sys::FI_EP_RDM;
            (*h.domain_attr).mr_mode = hints.mr_mode.0 as i32;
            (*h.domain_attr).threading = sys::FI_THREAD_SAFE;
            if let Some(name) = &prov_name {
                (*h.fabric_attr).prov_name = name.as_ptr() as *mut _;
            }
            let flags = if node.is_some() { sys::FI_SOURCE } else { 0 };
            let ret = sys::fi_getinfo(
                api_version(),
                node.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
                service.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
                flags,
                hints_ptr,
                &mut list,
            );
            (*h.fabric_attr).prov_name = ptr::null_mut();
            sys::fi_freeinfo(hints_ptr);
            ret
        };
        if ret == -(sys::FI_ENODATA as i32) {
            return Ok(Vec::new());
        }
        super::check("fi_getinfo", ret as isize)?;

        let mut infos = Vec::new();
        let mut cursor = list;
        let mut failed = None;
        while !cursor.is_null() {
            // SAFETY: cursor is an entry of the list fi_getinfo returned, not yet freed;
            // fi_dupinfo copies one entry (with next = null).
            let copy = unsafe { sys::fi_dupinfo(cursor) };
            match NonNull::new(copy).map(|ptr| Info { ptr }) {
                Some(mut info) => match (&hints.auth_key, info.auth_key_size()) {
                    (Some(key), size @ 1..) => match info.set_auth_key(&key.fitted(size)) {
                        Ok(()) => infos.push(info),
                        Err(err) => failed = Some(err),
                    },
                    _ => infos.push(info),
                },
                None => failed = Some(FabricError::call("fi_dupinfo", -(sys::FI_ENOMEM as isize))),
            }
            // SAFETY: as above, the list is still alive.
            cursor = unsafe { (*cursor).next };
        }
        // SAFETY: list came from fi_getinfo and is freed once; the copies are independent.
        unsafe { sys::fi_freeinfo(list) };
        match failed {
            Some(err) => Err(err),
            None => Ok(infos),
        }
    }

    /// A copy asking the provider to operate with `mr_mode` (e.g. the verbs-like set on a
    /// provider that would require fewer bits). `Domain::open` fails if the provider cannot.
    pub fn with_mr_mode(&self, mr_mode: MrMode) -> Info {
        let copy = self.clone();
        // SAFETY: copy is exclusively owned; domain_attr is null or valid for its life.
        if let Some(attr) = unsafe { copy.ptr.as_ptr().as_mut() }
            .and_then(|info| unsafe { info.domain_attr.as_mut() })
        {
            attr.mr_mode = mr_mode.0 as i32;
        }
        copy
    }

    /// A copy with `key` as the domain's default authorization key (`domain_attr->auth_key`),
    /// for providers that support keys ([`Self::auth_key_size`]); [`Hints::auth_key`] does
    /// this for every such entry of a query.
    pub fn with_auth_key(&self, key: &[u8]) -> Result<Info> {
        let mut copy = self.clone();
        copy.set_auth_key(key)?;
        Ok(copy)
    }

    fn set_auth_key(&mut self, key: &[u8]) -> Result<()> {
        // SAFETY: the fi_info is exclusively owned by self (&mut: nothing reads it meanwhile);
        // the shim copies key's len bytes into a malloc'ed buffer that
        // fi_freeinfo releases with the info.
        let ret = unsafe { sys::circ_fi_info_set_auth_key(self.as_ptr(), key.as_ptr(), key.len()) };
        super::check("fi_info auth_key", ret as isize).map(|_| ())
    }

    /// Size in bytes of the authorization keys the domain takes: 0 if the provider has none,
    /// else its key size, or the size of the key set ([`Self::with_auth_key`]).
    pub fn auth_key_size(&self) -> usize {
        self.domain_attr().map_or(0, |a| a.auth_key_size)
    }

    /// The authorization key set on the domain, if any.
    pub fn auth_key(&self) -> Option<Vec<u8>> {
        let attr = self.domain_attr()?;
        if attr.auth_key.is_null() {
            return None;
        }
        // SAFETY: a non-null auth_key of an owned fi_info points to auth_key_size bytes owned
        // by the info (set by the provider or by set_auth_key).
        Some(unsafe { std::slice::from_raw_parts(attr.auth_key, attr.auth_key_size) }.to_vec())
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::fi_info {
        self.ptr.as_ptr()
    }

    fn raw(&self) -> &sys::fi_info {
        // SAFETY: ptr is a valid fi_info owned by self for its whole life.
        unsafe { self.ptr.as_ref() }
    }

    fn fabric_attr(&self) -> Option<&sys::fi_fabric_attr> {
        // SAFETY: attribute pointers of an owned fi_info are null or valid for its life.
        unsafe { self.raw().fabric_attr.as_ref() }
    }

    fn domain_attr(&self) -> Option<&sys::fi_domain_attr> {
        // SAFETY: as in fabric_attr.
        unsafe { self.raw().domain_attr.as_ref() }
    }

    fn tx_attr(&self) -> Option<&sys::fi_tx_attr> {
        // SAFETY: as in fabric_attr.
        unsafe { self.raw().tx_attr.as_ref() }
    }

    fn rx_attr(&self) -> Option<&sys::fi_rx_attr> {
        // SAFETY: as in fabric_attr.
        unsafe { self.raw().rx_attr.as_ref() }
    }

    fn ep_attr(&self) -> Option<&sys::fi_ep_attr> {
        // SAFETY: as in fabric_attr.
        unsafe { self.raw().ep_attr.as_ref() }
    }

    /// Provider name, e.g. `"tcp;ofi_rxm"`.
    pub fn provider(&self) -> String {
        // SAFETY: prov_name is null or a NUL-terminated string owned by the fi_info.
        self.fabric_attr()
            .map(|a| unsafe { c_string(a.prov_name) })
            .unwrap_or_default()
    }

    /// The fabric's name.
    pub fn fabric_name(&self) -> String {
        // SAFETY: as in provider.
        self.fabric_attr()
            .map(|a| unsafe { c_string(a.name) })
            .unwrap_or_default()
    }

    /// The domain's name.
    pub fn domain_name(&self) -> String {
        // SAFETY: as in provider.
        self.domain_attr()
            .map(|a| unsafe { c_string(a.name) })
            .unwrap_or_default()
    }

    /// Capability bits (`FI_*`).
    pub fn caps(&self) -> u64 {
        self.raw().caps
    }

    /// Mode bits the provider requires of the application.
    pub fn mode(&self) -> u64 {
        self.raw().mode
    }

    /// Whether a write carrying remote CQ data consumes a posted receive at the target.
    pub fn rx_cq_data(&self) -> bool {
        self.mode() & sys::FI_RX_CQ_DATA != 0
    }

    /// The registration modes the provider requires.
    pub fn mr_mode(&self) -> MrMode {
        MrMode(self.domain_attr().map_or(0, |a| a.mr_mode as u32))
    }

    /// Bytes of remote CQ data a write can carry (0: none).
    pub fn cq_data_size(&self) -> usize {
        self.domain_attr().map_or(0, |a| a.cq_data_size)
    }

    /// Size of MR keys in bytes.
    pub fn mr_key_size(&self) -> usize {
        self.domain_attr().map_or(0, |a| a.mr_key_size)
    }

    /// Maximum local iov entries of one transfer.
    pub fn iov_limit(&self) -> usize {
        self.tx_attr().map_or(0, |a| a.iov_limit)
    }

    /// Maximum remote rma_iov entries of one RMA transfer.
    pub fn rma_iov_limit(&self) -> usize {
        self.tx_attr().map_or(0, |a| a.rma_iov_limit)
    }

    /// Largest transfer that can be injected (source buffer reusable on return).
    pub fn inject_size(&self) -> usize {
        self.tx_attr().map_or(0, |a| a.inject_size)
    }

    /// Transmit queue depth.
    pub fn tx_size(&self) -> usize {
        self.tx_attr().map_or(0, |a| a.size)
    }

    /// Receive queue depth.
    pub fn rx_size(&self) -> usize {
        self.rx_attr().map_or(0, |a| a.size)
    }

    /// Largest message one transfer may carry.
    pub fn max_msg_size(&self) -> usize {
        self.ep_attr().map_or(0, |a| a.max_msg_size)
    }

    /// Whether data transfers progress by themselves or only while the application calls in.
    pub fn data_progress(&self) -> Progress {
        // SAFETY: the shim only reads the owned fi_info (null-checked).
        Progress::from_raw(unsafe { sys::circ_fi_info_data_progress(self.as_ptr()) })
    }

    /// Control progress model (with 2.x headers, where only one model remains: the data one).
    pub fn control_progress(&self) -> Progress {
        // SAFETY: as in data_progress.
        Progress::from_raw(unsafe { sys::circ_fi_info_control_progress(self.as_ptr()) })
    }

    /// Address vector type the domain prefers (`FI_AV_UNSPEC` if none).
    pub(crate) fn av_type(&self) -> sys::fi_av_type {
        self.domain_attr().map_or(sys::FI_AV_UNSPEC, |a| a.av_type)
    }

    /// Length of this entry's source address, if known.
    pub(crate) fn src_addrlen(&self) -> usize {
        self.raw().src_addrlen
    }
}

impl Clone for Info {
    fn clone(&self) -> Self {
        // SAFETY: self.ptr is a valid fi_info; fi_dupinfo returns an independent copy or null.
        let copy = unsafe { sys::fi_dupinfo(self.ptr.as_ptr()) };
        match NonNull::new(copy) {
            Some(ptr) => Info { ptr },
            // Out of memory while copying a few hundred bytes: as for any Rust allocation.
            None => std::alloc::handle_alloc_error(std::alloc::Layout::new::<sys::fi_info>()),
        }
    }
}

impl Drop for Info {
    fn drop(&mut self) {
        // SAFETY: the entry was created by fi_dupinfo and is freed exactly once.
        unsafe { sys::fi_freeinfo(self.ptr.as_ptr()) }
    }
}

impl fmt::Debug for Info {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Info")
            .field("provider", &self.provider())
            .field("fabric", &self.fabric_name())
            .field("domain", &self.domain_name())
            .field("mr_mode", &self.mr_mode().to_string())
            .field("cq_data_size", &self.cq_data_size())
            .field("auth_key", &self.auth_key().is_some())
            .finish()
    }
}

/// Names of the mode bits (`Info::mode`) this layer knows, unknown bits as hex.
pub fn mode_names(mode: u64) -> Vec<String> {
    // Only bits defined by both the 1.x and 2.x headers.
    const NAMES: [(u64, &str); 4] = [
        (sys::FI_CONTEXT, "FI_CONTEXT"),
        (sys::FI_CONTEXT2, "FI_CONTEXT2"),
        (sys::FI_MSG_PREFIX, "FI_MSG_PREFIX"),
        (sys::FI_RX_CQ_DATA, "FI_RX_CQ_DATA"),
    ];
    let mut rest = mode;
    let mut names = Vec::new();
    for (bit, name) in NAMES {
        if mode & bit != 0 {
            names.push(name.to_string());
            rest &= !bit;
        }
    }
    if rest != 0 {
        names.push(format!("{rest:#x}"));
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mr_mode_names_every_bit() {
        assert_eq!(MrMode(0).to_string(), "0");
        assert_eq!(
            MrMode::VERBS.to_string(),
            "FI_MR_LOCAL|FI_MR_VIRT_ADDR|FI_MR_ALLOCATED|FI_MR_PROV_KEY"
        );
        assert_eq!(MrMode(1 << 30).names(), vec!["0x40000000".to_string()]);
        assert!(MrMode::SUPPORTED.contains(MrMode::VERBS | MrMode::ENDPOINT));
        assert!(!MrMode::VERBS.contains(MrMode::ENDPOINT));
    }

    #[test]
    fn auth_keys_are_fitted_to_the_provider_size() {
        let key = AuthKey::from_hex("010203").expect("key");
        assert_eq!(key.fitted(2), vec![1, 2]);
        assert_eq!(key.fitted(7), vec![1, 2, 3, 1, 2, 3, 1]);
        assert!(key.fitted(0).is_empty());
    }
}
