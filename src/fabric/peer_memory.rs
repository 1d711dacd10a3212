//! Reads of a peer process's memory through the kernel (`process_vm_readv(2)`): one copy from
//! the peer's buffer straight into this process's, where a copy through shared memory takes
//! two. The kernel allows it between processes of one user unless a security module forbids
//! it (Yama's `ptrace_scope` 1 allows it only towards descendants, 2 and 3 not at all), so a
//! job checks that every rank can read every peer ([`probe_address`], [`can_read`]) before it
//! relies on it.

use std::io::IoSliceMut;

use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::unistd::Pid;

use super::{FabricError, Result};

/// A word every process of the library holds at [`probe_address`]: a peer that reads it there
/// can read this process's memory.
static PROBE: u64 = 0x6369_7263_756c_616e;

/// Where this process holds the probe word.
pub fn probe_address() -> u64 {
    std::ptr::addr_of!(PROBE) as u64
}

/// Whether this process can read the memory of process `pid`, whose probe word is at
/// `address`.
pub fn can_read(pid: u32, address: u64) -> bool {
    let mut word = [0u8; 8];
    read_peer(pid, address, &mut word).is_ok() && u64::from_ne_bytes(word) == PROBE
}

/// Copies `into.len()` bytes at `address` of process `pid` into `into`. An error if the kernel
/// refuses, the process has ended, or the range is not all mapped in it.
pub fn read_peer(pid: u32, address: u64, into: &mut [u8]) -> Result<()> {
    let pid = Pid::from_raw(
        i32::try_from(pid)
            .map_err(|_| FabricError::invalid(format!("process {pid} is not a process id")))?,
    );
    let mut done = 0;
    while done < into.len() {
        let rest = &mut into[done..];
        let remote = RemoteIoVec {
            base: usize::try_from(address)
                .ok()
                .and_then(|a| a.checked_add(done))
                .ok_or_else(|| FabricError::invalid(format!("address {address:#x} too large")))?,
            len: rest.len(),
        };
        let read =
            process_vm_readv(pid, &mut [IoSliceMut::new(rest)], &[remote]).map_err(|errno| {
                FabricError::System {
                    call: "process_vm_readv",
                    code: errno as i32,
                    text: errno.desc().to_string(),
                }
            })?;
        if read == 0 {
            return Err(FabricError::invalid(format!(
                "process {pid} has no memory at {:#x}",
                remote.base
            )));
        }
        done += read;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_reads_its_own_memory_and_not_what_is_unmapped() {
        let me = std::process::id();
        assert!(can_read(me, probe_address()));
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let mut copy = vec![0u8; data.len()];
        read_peer(me, data.as_ptr() as u64, &mut copy).expect("read");
        assert_eq!(copy, data);
        assert!(
            read_peer(me, 8, &mut [0u8; 8]).is_err(),
            "page 0 is not mapped"
        );
        assert!(!can_read(me, probe_address() + 1));
    }
}
