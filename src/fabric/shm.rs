//! The files libfabric's shm provider (1.17) keeps its per-endpoint regions in:
//! `/dev/shm/PID:DOMAIN:ENDPOINT`, 16 MiB each, removed by the provider when the endpoint
//! closes. A process that is killed leaves them behind, and a later process that gets the
//! same pid cannot open its endpoint (`fi_enable` fails with "Device or resource busy").
//! The receive slots the library itself keeps in `/dev/shm` ([`super::SharedMemory`],
//! `circulant-PID-NAME`) are removed with them when that process has ended.

/// Where the shm provider keeps its regions.
const SHM_DIR: &str = "/dev/shm";

/// Removes the regions of process `pid`, a process that has ended or a job's process that is
/// ending: files named `PID:N:M` or `circulant-PID-NAME`, owned by this user.
pub fn remove_regions_of(pid: u32) {
    remove_files_of(pid, true);
}

/// Removes the shm provider's regions of `pid` (`PID:N:M`) owned by this user, and its
/// `circulant-PID-NAME` files too where `with_slots`.
fn remove_files_of(pid: u32, with_slots: bool) {
    let Ok(entries) = std::fs::read_dir(SHM_DIR) else {
        return;
    };
    let me = rustix::process::geteuid();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(|n| {
            is_region_of(n, pid) || (with_slots && super::shared::is_file_of(n, pid))
        }) {
            continue;
        }
        let path = entry.path();
        let ours = rustix::fs::lstat(&path).is_ok_and(|st| {
            st.st_uid == me.as_raw()
                && rustix::fs::FileType::from_raw_mode(st.st_mode)
                    == rustix::fs::FileType::RegularFile
        });
        if ours {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Removes, once per process and before its first shm endpoint, the provider's regions a
/// dead process with this process's pid left behind: no live process can own them, and
/// they would keep this one's endpoint from opening. Its `circulant-PID-NAME` files stay:
/// this process may have made some already (for another provider's communicator), and a
/// dead one's cannot be told from them; they block nothing (names are drawn at random).
pub(crate) fn remove_stale_regions_of_this_pid() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| remove_files_of(std::process::id(), false));
}

/// Whether `name` is `PID:N:M` with the given pid and decimal N and M.
fn is_region_of(name: &str, pid: u32) -> bool {
    let mut parts = name.split(':');
    let decimal = |part: Option<&str>| {
        part.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    };
    parts.next() == Some(pid.to_string().as_str())
        && decimal(parts.next())
        && decimal(parts.next())
        && parts.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_names_are_matched_exactly() {
        assert!(is_region_of("1234:0:0", 1234));
        assert!(is_region_of("1234:12:7", 1234));
        for name in [
            "12345:0:0",
            "234:0:0",
            "1234:0",
            "1234:0:0:0",
            "1234:a:0",
            "1234::0",
        ] {
            assert!(!is_region_of(name, 1234), "{name}");
        }
    }

    /// Pids above Linux's limit (2^22), which no process has: the files of this test are its
    /// own, not those other tests of this process make meanwhile.
    const NO_PROCESS: u32 = (1 << 22) + 77;

    #[test]
    fn a_stale_region_of_a_pid_is_removed_and_others_are_kept() {
        let pid = NO_PROCESS;
        let exists = |f: &String| std::path::Path::new(f).exists();
        let stale = format!("{SHM_DIR}/{pid}:0:77");
        let slots = format!("{SHM_DIR}/circulant-{pid}-00000000000000aa");
        let other = format!("{SHM_DIR}/{}:0:77", pid + 1);
        for file in [&stale, &slots, &other] {
            std::fs::write(file, b"x").expect("a file in /dev/shm");
        }
        // Before an endpoint of this pid: its provider regions only.
        remove_files_of(pid, false);
        assert!(!exists(&stale) && exists(&slots) && exists(&other));
        std::fs::write(&stale, b"x").expect("a file in /dev/shm");
        // After a process of this pid ended: its slots too.
        remove_regions_of(pid);
        assert!(!exists(&stale) && !exists(&slots) && exists(&other));
        std::fs::remove_file(&other).expect("cleaned up");
    }
}
