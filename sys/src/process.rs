//! Set-up of a child process between fork and exec, which needs `unsafe` (`pre_exec`).

use std::io;
use std::os::raw::{c_int, c_ulong};
use std::os::unix::process::CommandExt;
use std::process::Command;

extern "C" {
    fn prctl(option: c_int, ...) -> c_int;
    fn getppid() -> c_int;
}

/// `PR_SET_PDEATHSIG` of `<linux/prctl.h>`.
const PR_SET_PDEATHSIG: c_int = 1;
/// `ESRCH` of `<errno.h>`.
const ESRCH: i32 = 3;

/// Makes the process that `command` starts receive `signal` when its parent dies, and fail to
/// start if the parent died before the child could ask for that. The kernel sends the signal
/// when the thread that spawned the child ends, so spawn from a thread that lives as long as
/// the children should.
pub fn die_with_parent(command: &mut Command, signal: c_int) {
    let parent = std::process::id() as c_int;
    let signal = signal as c_ulong;
    // SAFETY: the closure runs in the forked child before exec; it calls only prctl and
    // getppid, which are async-signal-safe, and allocates nothing (an io::Error from an OS
    // error code holds no heap memory).
    unsafe {
        command.pre_exec(move || {
            if prctl(PR_SET_PDEATHSIG, signal) != 0 {
                return Err(io::Error::last_os_error());
            }
            if getppid() != parent {
                return Err(io::Error::from_raw_os_error(ESRCH));
            }
            Ok(())
        });
    }
}
