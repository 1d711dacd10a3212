//! The emulated cluster (`ci/cluster`) for tests: brought up for a test unless one with enough
//! nodes runs, taken down when the test ends (also when it fails) if the test brought it up.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

use super::{missing, run};

/// One cluster at a time within a test binary (cargo runs the binaries one after another).
static CLUSTER: Mutex<()> = Mutex::new(());

/// The script, `ci/cluster`.
pub fn script() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("ci/cluster")
}

/// `ci/cluster ARGS`, without a layout from the caller's environment.
pub fn cluster(args: &[&str]) -> Command {
    let mut command = Command::new(script());
    command.args(args).env_remove("CLUSTER_LAYOUT");
    command
}

/// Holds the cluster for a test that does not need it up (the layout arithmetic), so that it
/// does not run beside one that brings it up or down.
pub fn exclusive() -> MutexGuard<'static, ()> {
    CLUSTER.lock().unwrap_or_else(|p| p.into_inner())
}

/// The emulated cluster for one test, taken down on drop if this test brought it up.
pub struct Cluster {
    started_here: bool,
    _one: MutexGuard<'static, ()>,
}

impl Cluster {
    /// A cluster of at least `nodes` nodes, or None with the reason printed where there is no
    /// root (a failure under CI, which runs as root).
    pub fn up(nodes: usize) -> Option<Cluster> {
        let one = exclusive();
        if !rustix::process::geteuid().is_root() {
            missing("root", "network namespaces need root, as CI runs");
            return None;
        }
        let status = run(cluster(&["status"]));
        let running = status.stdout.lines().count();
        if running > 0 {
            // Brought up by hand or by another tool: used as it is, and left up.
            assert!(
                running >= nodes,
                "a cluster of {running} nodes is up, these tests need {nodes}: ci/cluster down"
            );
            return Some(Cluster {
                started_here: false,
                _one: one,
            });
        }
        // `ci/cluster up` removes whatever it built if a step fails.
        let done = run(cluster(&["up", &nodes.to_string(), "1gbit"]));
        assert_eq!(done.code(), Some(0), "ci/cluster up failed: {done:?}");
        Some(Cluster {
            started_here: true,
            _one: one,
        })
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.started_here {
            let done = cluster(&["down"]).status();
            let left = cluster(&["status"]).output().map(|o| o.stdout);
            let clean = done.as_ref().is_ok_and(|s| s.success())
                && left.as_ref().is_ok_and(|out| out.is_empty());
            if !clean && !std::thread::panicking() {
                panic!("ci/cluster down failed: {done:?}, left: {left:?}");
            }
        }
    }
}
