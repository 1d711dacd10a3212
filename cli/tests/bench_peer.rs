//! The MPI peer benchmark (benches/peers/mpi_coll.c) generates the allgatherv distributions
//! exactly as circulant::plan::distribution does: compiled with MPICH's mpicc, its
//! `--print-counts` output is compared with the plan's counts for every distribution and
//! several p and base counts.

mod common;

use std::path::PathBuf;
use std::process::Command;

use circulant::plan::distribution::Distribution;

fn peer_source() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("benches/peers/mpi_coll.c")
}

#[test]
fn peer_counts_equal_the_plan_counts() {
    let exe = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mpi_coll_counts");
    let compiled = match Command::new("mpicc.mpich")
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(peer_source())
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            common::missing(
                "mpicc.mpich",
                &format!("{e}; ci/deps installs mpich and libmpich-dev"),
            );
            return;
        }
    };
    assert!(
        compiled.status.success(),
        "mpicc.mpich failed: {}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    for d in Distribution::ALL {
        for p in [1usize, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 33] {
            for c in [0usize, 1, 7, 30, 1000, 123_457] {
                let out = Command::new(&exe)
                    .args(["--print-counts", "--dist", d.name(), "-p"])
                    .arg(p.to_string())
                    .arg("--bytes")
                    .arg(c.to_string())
                    .output()
                    .expect("the peer runs");
                assert!(out.status.success(), "{d} p={p} c={c}");
                let peer: Vec<usize> = String::from_utf8_lossy(&out.stdout)
                    .split_whitespace()
                    .map(|v| v.parse().expect("a count"))
                    .collect();
                assert_eq!(peer, d.counts(p, c), "{d} p={p} c={c}");
            }
        }
    }
}
