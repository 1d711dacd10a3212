//! Memory shared between processes of one host: a file in `/dev/shm` that its creator maps
//! and names to a peer, which maps it too. The eager path's receive slots live in such
//! memory when every rank is on one host (docs/architecture.md, "The eager path"): a writer
//! then stores a message straight into its target's slot, with no libfabric call, no lock
//! shared with the target and no completion to read.
//!
//! The file is `/dev/shm/circulant-PID-NAME`: the creator's pid (so that a launcher can
//! remove what a killed rank left, as for the shm provider's regions, see [`super::shm`]) and
//! 64 random bits. It is created with mode 0600 and `O_EXCL`, and a peer maps it only if it is
//! a regular file of this user of the announced length. The first peer that maps it removes
//! its name (the mappings stay); the creator removes it when dropped if no peer did.
//!
//! Both processes access the bytes while the other may: ordering comes from the 64-bit words
//! read with acquire and written with release ordering ([`SharedMemory::load`],
//! [`SharedMemory::publish`]), which the caller's protocol pairs so that no byte is written
//! while the other side reads it.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::MmapRaw;

use super::{FabricError, RegisteredMemory, Result};

/// Where the files are.
const DIR: &str = "/dev/shm";
/// The start of their names.
const PREFIX: &str = "circulant-";

/// A mapping of a shared file (see the module documentation).
pub struct SharedMemory {
    map: MmapRaw,
    len: usize,
    /// The file's name while this process should remove it (the creator, until a peer did).
    remove: Option<PathBuf>,
}

impl std::fmt::Debug for SharedMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedMemory")
            .field("len", &self.len)
            .finish()
    }
}

fn os_error(call: &'static str, err: std::io::Error) -> FabricError {
    let code = err.raw_os_error().unwrap_or(EIO);
    FabricError::Call {
        call,
        code,
        text: err.to_string(),
    }
}

/// EIO, for an error that carries no errno.
const EIO: i32 = 5;

/// The path of `pid`'s file `name`.
fn path_of(pid: u32, name: u64) -> PathBuf {
    PathBuf::from(format!("{DIR}/{PREFIX}{pid}-{name:016x}"))
}

/// Whether `file` is a shared file of process `pid` (`circulant-PID-` and 16 hex digits).
pub(crate) fn is_file_of(file: &str, pid: u32) -> bool {
    let Some(rest) = file.strip_prefix(PREFIX) else {
        return false;
    };
    let Some((owner, name)) = rest.split_once('-') else {
        return false;
    };
    owner == pid.to_string()
        && name.len() == 16
        && name
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl SharedMemory {
    /// Creates and maps a zeroed file of `len` bytes; returns it with the name a peer opens it
    /// by (with this process's pid, [`Self::open`]).
    pub fn create(len: usize) -> Result<(SharedMemory, u64)> {
        if len == 0 {
            return Err(FabricError::invalid("shared memory of 0 bytes"));
        }
        let pid = std::process::id();
        // A name taken already (by a file a dead process left) is drawn again.
        for _ in 0..8 {
            let name = crate::random::u64().map_err(|e| os_error("getrandom", e))?;
            let path = path_of(pid, name);
            let file = match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
                .open(&path)
            {
                Ok(file) => file,
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(err) => return Err(os_error("open (/dev/shm)", err)),
            };
            let mapped = file
                .set_len(len as u64)
                .map_err(|e| os_error("ftruncate (/dev/shm)", e))
                .and_then(|()| Self::map(&file, len));
            return match mapped {
                Ok(map) => Ok((
                    SharedMemory {
                        map,
                        len,
                        remove: Some(path),
                    },
                    name,
                )),
                Err(err) => {
                    let _ = std::fs::remove_file(&path);
                    Err(err)
                }
            };
        }
        Err(FabricError::invalid(
            "no free name for shared memory in /dev/shm",
        ))
    }

    /// Maps file `name` of process `pid` (made by [`Self::create`]), which must be a regular
    /// file of this user of exactly `len` bytes, and removes its name.
    pub fn open(pid: u32, name: u64, len: usize) -> Result<SharedMemory> {
        Self::open_named(pid, name, len, true)
    }

    /// [`Self::open`] for memory that several peers map: the name stays until its creator
    /// removes it ([`Self::remove_name`]) once every peer has mapped it.
    pub fn open_kept(pid: u32, name: u64, len: usize) -> Result<SharedMemory> {
        Self::open_named(pid, name, len, false)
    }

    /// Removes the file's name now (the creator's, once its peers have mapped it); the
    /// mappings stay.
    pub fn remove_name(&mut self) {
        if let Some(path) = self.remove.take() {
            let _ = std::fs::remove_file(path);
        }
    }

    fn open_named(pid: u32, name: u64, len: usize, remove: bool) -> Result<SharedMemory> {
        let path = path_of(pid, name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
            .map_err(|e| os_error("open (/dev/shm)", e))?;
        let meta = file
            .metadata()
            .map_err(|e| os_error("fstat (/dev/shm)", e))?;
        let me = rustix::process::geteuid().as_raw();
        if !meta.file_type().is_file() || meta.uid() != me || meta.len() != len as u64 {
            return Err(FabricError::invalid(format!(
                "{} is not a file of this user of {len} bytes",
                path.display()
            )));
        }
        let map = Self::map(&file, len)?;
        // Mapped: the name is no longer needed (the creator's removal then finds nothing).
        if remove {
            let _ = std::fs::remove_file(&path);
        }
        Ok(SharedMemory {
            map,
            len,
            remove: None,
        })
    }

    fn map(file: &File, len: usize) -> Result<MmapRaw> {
        let map = MmapRaw::map_raw(file).map_err(|e| os_error("mmap (/dev/shm)", e))?;
        if map.len() < len {
            return Err(FabricError::invalid(format!(
                "a shared mapping of {} bytes, {len} expected",
                map.len()
            )));
        }
        Ok(map)
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is mapped (never: [`Self::create`] refuses 0 bytes).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check(&self, offset: usize, len: usize) -> Result<()> {
        if offset.checked_add(len).map_or(true, |end| end > self.len) {
            return Err(FabricError::invalid(format!(
                "{len} bytes at {offset} outside shared memory of {}",
                self.len
            )));
        }
        Ok(())
    }

    fn word(&self, offset: usize) -> Result<&AtomicU64> {
        self.check(offset, 8)?;
        if offset % 8 != 0 {
            return Err(FabricError::invalid(format!(
                "a shared word at unaligned offset {offset}"
            )));
        }
        // SAFETY: in bounds and 8-byte aligned (the map is page-aligned); the memory lives as
        // long as `self`, and every access to these 8 bytes in either process is atomic.
        Ok(unsafe { AtomicU64::from_ptr(self.map.as_mut_ptr().add(offset).cast()) })
    }

    /// The 64-bit word at `offset` (8-aligned), read with acquire ordering: what the peer wrote
    /// before publishing it is visible afterwards.
    pub fn load(&self, offset: usize) -> Result<u64> {
        Ok(self.word(offset)?.load(Ordering::Acquire))
    }

    /// Writes the 64-bit word at `offset` (8-aligned) with release ordering: everything this
    /// process wrote before is visible to a peer that loads the word.
    pub fn publish(&self, offset: usize, value: u64) -> Result<()> {
        self.word(offset)?.store(value, Ordering::Release);
        Ok(())
    }

    /// Copies `src` to `offset`. The caller's protocol must ensure the peer does not access
    /// these bytes until a later [`Self::publish`] tells it to.
    pub fn store(&self, offset: usize, src: &[u8]) -> Result<()> {
        self.check(offset, src.len())?;
        // SAFETY: bounds checked; src is a private buffer; the peer does not touch the range
        // (the caller's protocol, above).
        unsafe {
            ptr::copy_nonoverlapping(src.as_ptr(), self.map.as_mut_ptr().add(offset), src.len())
        };
        Ok(())
    }

    /// Copies `len` bytes of `src` at `src_offset` to `offset`; the same rule as
    /// [`Self::store`].
    pub fn store_from(
        &self,
        offset: usize,
        src: &RegisteredMemory,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        self.check(offset, len)?;
        let from = src
            .as_slice()
            .get(src_offset..src_offset + len)
            .ok_or_else(|| {
                FabricError::invalid(format!(
                    "{len} bytes at {src_offset} outside a region of {}",
                    src.len()
                ))
            })?;
        self.store(offset, from)
    }

    /// The bytes from `offset` on, `len` of them. Read only what the peer published (after a
    /// [`Self::load`] that says so) and that it does not write again before this process
    /// tells it.
    pub fn bytes(&self, offset: usize, len: usize) -> Result<&[u8]> {
        self.check(offset, len)?;
        // SAFETY: bounds checked; the memory lives as long as `self`; the peer does not
        // write the range while it is read (the caller's protocol, above).
        Ok(unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(offset), len) })
    }
}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        if let Some(path) = self.remove.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_maps_what_its_creator_wrote_and_the_name_goes() {
        let (created, name) = SharedMemory::create(4096).expect("created");
        let path = path_of(std::process::id(), name);
        assert!(path.exists());
        let mode = std::fs::metadata(&path).expect("stat").mode() & 0o777;
        assert_eq!(mode, 0o600);
        created.store(64, b"hello").unwrap();
        created.publish(8, 5).unwrap();
        let peer = SharedMemory::open(std::process::id(), name, 4096).expect("opened");
        assert!(!path.exists(), "the peer removes the name once mapped");
        assert_eq!(peer.load(8).unwrap(), 5);
        assert_eq!(peer.bytes(64, 5).unwrap(), b"hello");
        peer.publish(16, 9).unwrap();
        assert_eq!(created.load(16).unwrap(), 9);
        drop(created);
        assert_eq!(
            peer.load(16).unwrap(),
            9,
            "the peer's mapping outlives the creator"
        );
    }

    #[test]
    fn memory_mapped_by_several_peers_keeps_its_name_until_the_creator_removes_it() {
        let (mut created, name) = SharedMemory::create(4096).expect("created");
        let path = path_of(std::process::id(), name);
        let first = SharedMemory::open_kept(std::process::id(), name, 4096).expect("first");
        let second = SharedMemory::open_kept(std::process::id(), name, 4096).expect("second");
        assert!(path.exists());
        created.remove_name();
        assert!(!path.exists());
        created.publish(0, 7).unwrap();
        assert_eq!((first.load(0).unwrap(), second.load(0).unwrap()), (7, 7));
    }

    #[test]
    fn wrong_lengths_names_and_offsets_are_refused() {
        let (created, name) = SharedMemory::create(4096).expect("created");
        assert!(SharedMemory::open(std::process::id(), name, 8192).is_err());
        assert!(SharedMemory::open(std::process::id(), name ^ 1, 4096).is_err());
        assert!(created.load(4092).is_err());
        assert!(created.load(12).is_err());
        assert!(created.store(4090, &[0; 7]).is_err());
        assert!(created.bytes(usize::MAX, 2).is_err());
        assert!(SharedMemory::create(0).is_err());
        let path = path_of(std::process::id(), name);
        drop(created);
        assert!(!path.exists(), "the creator removes a name no peer took");
    }

    #[test]
    fn file_names_are_matched_exactly() {
        assert!(is_file_of("circulant-1234-00000000deadbeef", 1234));
        for name in [
            "circulant-12345-00000000deadbeef",
            "circulant-1234-deadbeef",
            "circulant-1234-00000000DEADBEEF",
            "circulant-1234-00000000deadbeef-x",
            "1234:0:0",
        ] {
            assert!(!is_file_of(name, 1234), "{name}");
        }
    }
}
