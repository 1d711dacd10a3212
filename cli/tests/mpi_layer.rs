//! The MPI profiling-interface layer (mpi/, built by `ci/mpi-layer`) preloaded
//! into MPI programs that know nothing of circulant: C programs compiled with each `mpicc`
//! and run under MPICH's `mpiexec.hydra` and Open MPI's `mpirun` at p = 1, 2, 3, 4, 8, every
//! served collective compared in the same program with the PMPI_ call on the same data
//! (cli/tests/mpi/collectives.c); the nonblocking and persistent forms with every wait and test
//! call (cli/tests/mpi/nonblocking.c); the settings, the statistics and the error handlers; a Fortran
//! program; Debian's `hpcc` and ScaLAPACK tests, with and without the layer; every served
//! collective on the emulated cluster (`ci/cluster`), ranks on several nodes.
//!
//! Every job runs in its own process group, killed if it outlives its limit.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock, RwLock};
use std::time::Duration;

use common::{cluster, missing, Finished, ShmRegions, Started};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// Bringing the emulated cluster up or down adds and removes interfaces of this host, and a
/// Hydra job starting meanwhile was seen to end at once with status 1 and no output: the jobs
/// on this host hold it to read, the test on the cluster holds it to write.
static HOST_NETWORK: RwLock<()> = RwLock::new(());
const LIMIT: Duration = Duration::from_secs(180);
/// Held by a test that watches /dev/shm ([`ShmRegions`], whose drop removes the files of
/// every ended process that appeared since), so that no other test's watch removes the files
/// an aborted job left while a test looks for them.
static SHM_WATCH: Mutex<()> = Mutex::new(());

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mpi {
    Mpich,
    OpenMpi,
}

impl Mpi {
    fn name(self) -> &'static str {
        match self {
            Mpi::Mpich => "mpich",
            Mpi::OpenMpi => "openmpi",
        }
    }
}

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(ROOT).join("target"),
    }
}

/// Builds both layers once per test binary (`ci/mpi-layer --profile test`: the library
/// `cargo test` just built); None where an mpicc is missing (a failure under CI).
fn layers() -> Option<&'static PathBuf> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            for mpi in ["mpich", "openmpi"] {
                if Command::new(format!("mpicc.{mpi}"))
                    .arg("--version")
                    .output()
                    .is_err()
                {
                    missing(
                        &format!("mpicc.{mpi}"),
                        "ci/deps installs libmpich-dev and libopenmpi-dev",
                    );
                    return None;
                }
            }
            let out = Command::new(Path::new(ROOT).join("ci/mpi-layer"))
                .args(["--profile", "test"])
                .output()
                .expect("ci/mpi-layer starts");
            assert!(
                out.status.success(),
                "ci/mpi-layer failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            Some(target_dir().join("mpi/test"))
        })
        .as_ref()
}

fn layer(mpi: Mpi) -> Option<PathBuf> {
    let lib = layers()?.join(format!("libcirculant-mpi-{}.so", mpi.name()));
    assert!(lib.exists(), "{} not built", lib.display());
    Some(lib)
}

/// tests/mpi/SOURCE compiled with the MPI's C or Fortran compiler, warnings as errors for C;
/// once per test binary (tests running side by side share it).
fn program(mpi: Mpi, source: &str) -> PathBuf {
    compiled_once(mpi, &Path::new(ROOT).join("cli/tests/mpi").join(source))
}

/// The peer benchmark, benches/peers/mpi_coll.c, compiled as `program` compiles.
fn peer(mpi: Mpi) -> PathBuf {
    compiled_once(mpi, &Path::new(ROOT).join("benches/peers/mpi_coll.c"))
}

/// `compile` once per test binary and source: a test that compiled it again could rewrite
/// the program while another runs it.
fn compiled_once(mpi: Mpi, source: &Path) -> PathBuf {
    static BUILT: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let key = format!("{}/{}", mpi.name(), source.display());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, exe)) = built.iter().find(|(k, _)| *k == key) {
        return exe.clone();
    }
    let exe = compile(mpi, source);
    built.push((key, exe.clone()));
    exe
}

/// The C or Fortran program at `source` compiled with the MPI's compiler.
fn compile(mpi: Mpi, source: &Path) -> PathBuf {
    let fortran = source.extension().is_some_and(|e| e == "f90");
    let compiler = format!(
        "{}.{}",
        if fortran { "mpif90" } else { "mpicc" },
        mpi.name()
    );
    let name = source
        .file_name()
        .expect("a source file")
        .to_string_lossy()
        .replace('.', "-");
    let exe = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("mpi-{name}-{}", mpi.name()));
    let mut command = Command::new(&compiler);
    if !fortran {
        command.args(["-O1", "-Wall", "-Wextra", "-Werror"]);
    }
    let out = command
        .arg(source)
        .arg("-o")
        .arg(&exe)
        .current_dir(env!("CARGO_TARGET_TMPDIR"))
        .output()
        .unwrap_or_else(|e| panic!("{compiler} starts: {e}"));
    assert!(
        out.status.success(),
        "{compiler} {} failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// `program args` on `p` ranks under the MPI's launcher, the layer preloaded where given,
/// with `env` set for every rank.
fn job(
    mpi: Mpi,
    p: usize,
    layer: Option<&Path>,
    env: &[(&str, &str)],
    program: &Path,
    args: &[&str],
    dir: &Path,
) -> Finished {
    let mut command = match mpi {
        Mpi::Mpich => {
            let mut c = Command::new("mpiexec.hydra");
            c.args(["-n", &p.to_string(), "env"]);
            if let Some(lib) = layer {
                c.arg(format!("LD_PRELOAD={}", lib.display()));
            }
            c
        }
        Mpi::OpenMpi => {
            let mut c = Command::new("mpirun");
            c.args([
                "--allow-run-as-root",
                "--oversubscribe",
                "-n",
                &p.to_string(),
            ]);
            if let Some(lib) = layer {
                c.args(["-x", &format!("LD_PRELOAD={}", lib.display())]);
            }
            for (k, _) in env {
                c.args(["-x", k]);
            }
            c
        }
    };
    command.arg(program).args(args).current_dir(dir);
    let _steady = HOST_NETWORK.read().unwrap_or_else(|e| e.into_inner());
    command.env_remove("CIRCULANT_MPI");
    command.env_remove("CIRCULANT_MPI_STATS");
    command.env_remove("CIRCULANT_MPI_THRESHOLDS");
    for (k, v) in env {
        command.env(k, v);
    }
    Started::new(command).finish(LIMIT)
}

/// (rank, passed, failed) of every "rank R: N passed, M failed" line, sorted.
fn summaries(out: &str) -> Vec<(usize, usize, usize)> {
    let mut found: Vec<(usize, usize, usize)> = out
        .lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("rank ")?;
            let (rank, rest) = rest.split_once(": ")?;
            let (passed, rest) = rest.split_once(" passed, ")?;
            let failed = rest.strip_suffix(" failed")?;
            Some((
                rank.parse().ok()?,
                passed.parse().ok()?,
                failed.parse().ok()?,
            ))
        })
        .collect();
    found.sort();
    found
}

fn assert_all_passed(done: &Finished, p: usize, at_least: usize) {
    let all = format!("{}{}", done.stdout, done.stderr);
    assert_eq!(done.code(), Some(0), "the job failed:\n{all}");
    let found = summaries(&done.stdout);
    assert_eq!(found.len(), p, "one summary per rank expected:\n{all}");
    for (i, &(rank, passed, failed)) in found.iter().enumerate() {
        assert_eq!((rank, failed), (i, 0), "{all}");
        assert!(passed >= at_least, "rank {rank}: {passed} checks\n{all}");
    }
}

/// `job` for a program that aborts, the layer preloaded. Hydra now and then ends an aborted
/// job without forwarding any of its ranks' output, not even MPICH's own abort line: such a
/// run tells nothing of the layer and is made again (twice at most; the caller's assertions
/// hold for the run that spoke).
fn aborting_job(
    mpi: Mpi,
    p: usize,
    lib: &Path,
    env: &[(&str, &str)],
    program: &Path,
    args: &[&str],
    dir: &Path,
) -> Finished {
    let mut done = job(mpi, p, Some(lib), env, program, args, dir);
    for _ in 0..2 {
        let silent = done.stdout.is_empty() && done.stderr.is_empty();
        if !(matches!(mpi, Mpi::Mpich) && silent) {
            break;
        }
        done = job(mpi, p, Some(lib), env, program, args, dir);
    }
    done
}

/// One statistics line: calls served, passed through, and the count of each reason.
type Stats = (u64, u64, Vec<(String, u64)>);

/// The statistics line of `name` (e.g. `MPI_Bcast`).
fn stats(text: &str, name: &str) -> Option<Stats> {
    let prefix = format!("circulant-mpi: {name} served ");
    let line = text.lines().find_map(|l| l.strip_prefix(&prefix))?;
    let mut words = line.split_whitespace();
    let served = words.next()?.parse().ok()?;
    let _ = words.next(); // "passed"
    let passed = words.next()?.parse().ok()?;
    let reasons = words
        .filter_map(|w| {
            let (k, v) = w.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect();
    Some((served, passed, reasons))
}

fn reason(text: &str, name: &str, why: &str) -> u64 {
    stats(text, name)
        .and_then(|(_, _, reasons)| reasons.into_iter().find(|(k, _)| k == why))
        .map_or(0, |(_, v)| v)
}

const SERVED: [&str; 13] = [
    "MPI_Barrier",
    "MPI_Bcast",
    "MPI_Allgather",
    "MPI_Allgatherv",
    "MPI_Allreduce",
    "MPI_Reduce",
    "MPI_Gather",
    "MPI_Gatherv",
    "MPI_Scatter",
    "MPI_Scatterv",
    "MPI_Alltoall",
    "MPI_Scan",
    "MPI_Exscan",
];

/// Every collective at p = 1, 2, 3, 4, 8 with CIRCULANT_MPI=on: all checks pass, every
/// collective was served, the user operation and the short integers were passed through.
fn every_collective(mpi: Mpi) {
    let Some(lib) = layer(mpi) else { return };
    let exe = program(mpi, "collectives.c");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    for p in [1, 2, 3, 4, 8] {
        let done = job(
            mpi,
            p,
            Some(&lib),
            &[("CIRCULANT_MPI", "on"), ("CIRCULANT_MPI_STATS", "1")],
            &exe,
            &["2"],
            &dir,
        );
        assert_all_passed(&done, p, 100);
        let err = &done.stderr;
        assert!(
            err.contains(&format!("stats ({}, CIRCULANT_MPI=on", mpi.name())),
            "{err}"
        );
        let mut names: Vec<String> = SERVED.iter().map(|s| s.to_string()).collect();
        if mpi == Mpi::Mpich {
            // MPICH 4 has the large-count forms; the barrier has none.
            names.extend(SERVED[1..].iter().map(|s| format!("{s}_c")));
        } else {
            assert!(!err.contains("_c served"), "{err}");
        }
        for name in &names {
            let (served, _, _) =
                stats(err, name).unwrap_or_else(|| panic!("no statistics of {name}:\n{err}"));
            assert!(served > 0, "{name} never served at p = {p}:\n{err}");
        }
        // The user operation and MPI_SHORT: once per round and rank, passed through.
        assert!(reason(err, "MPI_Allreduce", "operation") > 0, "{err}");
        assert!(reason(err, "MPI_Allreduce", "datatype") > 0, "{err}");
        // The intercommunicator's broadcast, on every rank.
        let inter = if p >= 2 { p as u64 } else { 0 };
        assert_eq!(
            reason(err, "MPI_Bcast", "intercommunicator"),
            inter,
            "{err}"
        );
    }
    // MPI_THREAD_MULTIPLE: everything goes to MPI.
    let done = job(
        mpi,
        2,
        Some(&lib),
        &[("CIRCULANT_MPI", "on"), ("CIRCULANT_MPI_STATS", "1")],
        &exe,
        &["1", "multiple"],
        &dir,
    );
    assert_all_passed(&done, 2, 100);
    assert!(done.stdout.contains("thread level multiple"), "{done:?}");
    for name in SERVED {
        let (served, passed, _) = stats(&done.stderr, name).expect("statistics");
        assert_eq!(served, 0, "{}", done.stderr);
        let expected = passed - reason(&done.stderr, name, "intercommunicator");
        assert_eq!(
            reason(&done.stderr, name, "thread-multiple"),
            expected,
            "{}",
            done.stderr
        );
    }
}

#[test]
fn every_collective_under_mpich() {
    every_collective(Mpi::Mpich);
}

#[test]
fn every_collective_under_open_mpi() {
    every_collective(Mpi::OpenMpi);
}

/// The nonblocking collectives the layer serves.
const SERVED_NONBLOCKING: [&str; 13] = [
    "MPI_Ibarrier",
    "MPI_Ibcast",
    "MPI_Iallgather",
    "MPI_Iallgatherv",
    "MPI_Iallreduce",
    "MPI_Ireduce",
    "MPI_Igather",
    "MPI_Iscatter",
    "MPI_Igatherv",
    "MPI_Iscatterv",
    "MPI_Ialltoall",
    "MPI_Iscan",
    "MPI_Iexscan",
];

/// tests/mpi/nonblocking.c at p = 1, 2, 3, 4, 8 with CIRCULANT_MPI=on: every check passes;
/// every nonblocking collective was served; no call passed as `not-mirrored` (with
/// CIRCULANT_MPI_EAGER=16 circulant starts on a communicator when MPI makes it);
/// under MPICH the persistent collectives and the large-count forms were served; ranks that
/// wait in MPI's blocking point-to-point calls (and in `MPI_Wait` on a receive) for a peer
/// whose served broadcast needs them keep it going (p ≥ 3). With auto every check passes; with
/// off nothing is served.
fn nonblocking(mpi: Mpi) {
    let Some(lib) = layer(mpi) else { return };
    let exe = program(mpi, "nonblocking.c");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    for p in [1, 2, 3, 4, 8] {
        let env = [
            ("CIRCULANT_MPI", "on"),
            ("CIRCULANT_MPI_STATS", "1"),
            ("CIRCULANT_MPI_EAGER", "16"),
        ];
        let done = job(mpi, p, Some(&lib), &env, &exe, &["6"], &dir);
        assert_all_passed(&done, p, 170);
        let err = &done.stderr;
        for name in SERVED_NONBLOCKING {
            let (served, _, _) =
                stats(err, name).unwrap_or_else(|| panic!("no statistics of {name}:\n{err}"));
            assert!(served > 0, "{name} never served at p = {p}:\n{err}");
        }
        assert!(!err.contains("not-mirrored"), "{err}");
        if mpi == Mpi::Mpich {
            for name in [
                "MPI_Barrier_init",
                "MPI_Bcast_init",
                "MPI_Allreduce_init",
                "MPI_Allgatherv_init",
                "MPI_Bcast_init_c",
                "MPI_Ibcast_c",
                "MPI_Iallreduce_c",
                "MPI_Iallgatherv_c",
                "MPI_Igatherv_c",
                "MPI_Iscatterv_c",
            ] {
                // The persistent reduction with a user's operation is MPI's own, passed (and
                // counted) once per rank at its init; nothing else passes.
                let user = if name == "MPI_Allreduce_init" {
                    p as u64
                } else {
                    0
                };
                let (served, passed, _) = stats(err, name).expect("statistics");
                assert!(served > 0 && passed == user, "{name} at p = {p}:\n{err}");
                assert_eq!(reason(err, name, "operation"), user, "{err}");
            }
        } else {
            assert!(!err.contains("_init served"), "{err}");
            assert!(!err.contains("_c served"), "{err}");
        }
    }
    for mode in ["auto", "off"] {
        let env = [("CIRCULANT_MPI", mode), ("CIRCULANT_MPI_STATS", "1")];
        let done = job(mpi, 4, Some(&lib), &env, &exe, &["4"], &dir);
        assert_all_passed(&done, 4, 100);
        if mode == "off" {
            let (served, passed, _) = stats(&done.stderr, "MPI_Iallreduce").expect("statistics");
            assert_eq!(
                (served, reason(&done.stderr, "MPI_Iallreduce", "off")),
                (0, passed)
            );
        }
    }
}

/// tests/mpi/communicators.c at p = 3 and 4 with CIRCULANT_MPI=on and CIRCULANT_MPI_EAGER=16:
/// communicators from every call that makes one (MPI_Comm_split with MPI_UNDEFINED among them)
/// on which only nonblocking collectives are called: every byte checked, every call served,
/// none passed as `not-mirrored`. With CIRCULANT_MPI_EAGER=0 (the default) their calls pass as
/// `not-mirrored`, and still give the right bytes.
fn communicators(mpi: Mpi) {
    let Some(lib) = layer(mpi) else { return };
    let exe = program(mpi, "communicators.c");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    for p in [3, 4] {
        let env = [
            ("CIRCULANT_MPI", "on"),
            ("CIRCULANT_MPI_STATS", "1"),
            ("CIRCULANT_MPI_EAGER", "16"),
        ];
        let done = job(mpi, p, Some(&lib), &env, &exe, &["check", "3"], &dir);
        assert_all_passed(&done, p, 100);
        let err = &done.stderr;
        assert!(!err.contains("not-mirrored"), "{err}");
        for name in [
            "MPI_Ibcast",
            "MPI_Iallreduce",
            "MPI_Iallgatherv",
            "MPI_Igatherv",
            "MPI_Iscatterv",
            "MPI_Ibarrier",
        ] {
            let (served, passed, _) =
                stats(err, name).unwrap_or_else(|| panic!("no statistics of {name}:\n{err}"));
            assert!(served > 0 && passed == 0, "{name} at p = {p}:\n{err}");
        }
    }
    let env = [
        ("CIRCULANT_MPI", "on"),
        ("CIRCULANT_MPI_STATS", "1"),
        ("CIRCULANT_MPI_EAGER", "0"),
    ];
    let done = job(mpi, 4, Some(&lib), &env, &exe, &["check", "2"], &dir);
    assert_all_passed(&done, 4, 60);
    let (served, passed, _) = stats(&done.stderr, "MPI_Ibcast").expect("statistics");
    assert_eq!(
        (served, reason(&done.stderr, "MPI_Ibcast", "not-mirrored")),
        (0, passed),
        "{}",
        done.stderr
    );
}

#[test]
fn communicators_are_served_from_their_creation_under_mpich() {
    communicators(Mpi::Mpich);
}

#[test]
fn communicators_are_served_from_their_creation_under_open_mpi() {
    communicators(Mpi::OpenMpi);
}

#[test]
fn nonblocking_and_persistent_under_mpich() {
    nonblocking(Mpi::Mpich);
}

#[test]
fn nonblocking_and_persistent_under_open_mpi() {
    nonblocking(Mpi::OpenMpi);
}

/// MPI-4's persistent collectives match by the order of their inits: a bcast and a barrier
/// started in opposite orders on even and odd ranks are right, passed to MPI (reason
/// `unordered-starts`), and the same two made with an info that asserts one order of starts
/// are served (MPICH; Open MPI 4.1 has no persistent collectives).
#[test]
fn persistent_collectives_started_in_any_order_are_right() {
    let Some(lib) = layer(Mpi::Mpich) else { return };
    let exe = program(Mpi::Mpich, "persistent_order.c");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let env = [
        ("CIRCULANT_MPI", "on"),
        ("CIRCULANT_CHECK", "1"),
        ("CIRCULANT_MPI_STATS", "1"),
    ];
    let done = job(Mpi::Mpich, 4, Some(&lib), &env, &exe, &[], &dir);
    assert_all_passed(&done, 4, 20);
    for name in ["MPI_Bcast_init", "MPI_Barrier_init"] {
        // 4 inits passed; 4 ranks x 10 starts of the ordered one served.
        assert_eq!(
            reason(&done.stderr, name, "unordered-starts"),
            4,
            "{done:?}"
        );
        let (served, _, _) = stats(&done.stderr, name).expect("statistics");
        assert_eq!(served, 40, "{done:?}");
    }
}

/// The reduce-scatters' forms: blocking, nonblocking and, under MPICH (MPI 4), persistent
/// and large-count.
fn reduce_scatter_forms(mpi: Mpi) -> Vec<String> {
    let mut names = Vec::new();
    for stem in ["Reduce_scatter_block", "Reduce_scatter"] {
        names.push(format!("MPI_{stem}"));
        names.push(format!("MPI_I{}", stem.to_lowercase()));
        if mpi == Mpi::Mpich {
            names.push(format!("MPI_{stem}_c"));
            names.push(format!("MPI_I{}_c", stem.to_lowercase()));
            names.push(format!("MPI_{stem}_init"));
            names.push(format!("MPI_{stem}_init_c"));
        }
    }
    names
}

/// tests/mpi/reduce_scatter.c at p = 1, 2, 3, 4, 8 with CIRCULANT_MPI=on: every check passes
/// (each form against the MPI's own call: zero counts, in place, ints and doubles, every
/// operation the layer maps, on the world, a duplicate and a split communicator); every form
/// was served; what passes is exactly, per round and rank, the user operation of the
/// blocking reduce_scatter_block and of the nonblocking reduce_scatter (`operation`), the
/// MPI_SHORTs of the first and the derived datatype of the blocking reduce_scatter
/// (`datatype`), and under MPICH the persistent reduce_scatter_block of a user's operation,
/// passed at its init. Then auto at p = 3 with a thresholds file (`reduce_scatter.c sizes`):
/// of whole vectors of 0, 12, 24, 36, 48, 60, 996, 1008 and 24000 bytes, exactly those within
/// the ranges `24-48 1000-` are served (996 B in a class that holds served sizes, 24000 B in
/// the gate's last class), blocking and nonblocking, on the world and on a duplicate.
fn reduce_scatters(mpi: Mpi) {
    let Some(lib) = layer(mpi) else { return };
    let exe = program(mpi, "reduce_scatter.c");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let names = reduce_scatter_forms(mpi);
    for p in [1, 2, 3, 4, 8] {
        let env = [("CIRCULANT_MPI", "on"), ("CIRCULANT_MPI_STATS", "1")];
        let done = job(mpi, p, Some(&lib), &env, &exe, &["3"], &dir);
        assert_all_passed(&done, p, 60);
        let err = &done.stderr;
        // Three rounds on the world, one on the duplicate, one on the split communicator.
        let rounds = 5 * p as u64;
        for name in &names {
            let (served, passed, _) =
                stats(err, name).unwrap_or_else(|| panic!("no statistics of {name}:\n{err}"));
            assert!(served > 0, "{name} never served at p = {p}:\n{err}");
            let (operation, datatype) = match name.as_str() {
                "MPI_Reduce_scatter_block" => (rounds, rounds),
                "MPI_Reduce_scatter" => (0, rounds),
                "MPI_Ireduce_scatter" | "MPI_Reduce_scatter_block_init" => (rounds, 0),
                _ => (0, 0),
            };
            assert_eq!(reason(err, name, "operation"), operation, "{name}:\n{err}");
            assert_eq!(reason(err, name, "datatype"), datatype, "{name}:\n{err}");
            assert_eq!(passed, operation + datatype, "{name} at p = {p}:\n{err}");
        }
        if mpi == Mpi::OpenMpi {
            assert!(!err.contains("_init served"), "{err}");
            assert!(!err.contains("_c served"), "{err}");
        }
    }
    let text = "reduce_scatter_block 24-48 1000-\nreduce_scatter 24-48 1000-\n\
                ireduce_scatter_block 24-48 1000-\nireduce_scatter 24-48 1000-\n";
    let file = format!("mpi-reduce-scatter-{}.txt", mpi.name());
    let done = with_thresholds(mpi, &lib, 3, &file, text, &exe, &["sizes"]);
    assert_all_passed(&done, 3, 72);
    for name in names
        .iter()
        .filter(|n| !n.ends_with("_c") && !n.contains("_init"))
    {
        // Per rank and communicator 5 of the 9 sizes served, 4 passed by their size.
        let (served, passed, _) = stats(&done.stderr, name).expect("statistics");
        assert_eq!(
            (served, passed),
            (3 * 2 * 5, 3 * 2 * 4),
            "{name}:\n{}",
            done.stderr
        );
        assert_eq!(reason(&done.stderr, name, "below-threshold"), passed);
    }
}

#[test]
fn reduce_scatters_under_mpich() {
    reduce_scatters(Mpi::Mpich);
}

#[test]
fn reduce_scatters_under_open_mpi() {
    reduce_scatters(Mpi::OpenMpi);
}

/// mpi/README.md, "Where progress stops": a rank inside a collective MPI runs does not move the
/// layer's calls, so a peer that waits for one before it joins that collective fails at the
/// call's deadline (with circulant's message, not a hang); completing the call first avoids it.
#[test]
fn a_rank_inside_a_collective_mpi_runs_does_not_move_the_layers_calls() {
    let Some(lib) = layer(Mpi::Mpich) else { return };
    let exe = program(Mpi::Mpich, "progress.c");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let env = [("CIRCULANT_MPI", "on"), ("CIRCULANT_TIMEOUT", "3")];
    let done = job(Mpi::Mpich, 3, Some(&lib), &env, &exe, &["first"], &dir);
    assert_eq!(done.code(), Some(0), "{done:?}");
    assert_eq!(done.stdout.matches(": completed").count(), 3, "{done:?}");
    // The job aborts: its ranks are killed before they close their endpoints.
    let _watching = SHM_WATCH.lock().unwrap_or_else(|e| e.into_inner());
    let _regions = ShmRegions::watch();
    let done = aborting_job(Mpi::Mpich, 3, &lib, &env, &exe, &["after"], &dir);
    assert_ne!(done.code(), Some(0), "{done:?}");
    // The rank whose deadline passed first says so; the job may end on a rank that heard of
    // it from that rank first.
    let said = |what: &str| done.stderr.contains(&format!("circulant bcast ({what})"));
    assert!(
        said("the operation timed out") || said("a peer failed or aborted the operation"),
        "{done:?}"
    );
}

/// `program` with `args` under `mpi` at `p` ranks, the layer preloaded with its statistics on
/// and the thresholds written to `file` from `text`.
fn with_thresholds(
    mpi: Mpi,
    lib: &Path,
    p: usize,
    file: &str,
    text: &str,
    program: &Path,
    args: &[&str],
) -> Finished {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join(file);
    std::fs::write(&file, text).expect("write thresholds");
    job(
        mpi,
        p,
        Some(lib),
        &[
            ("CIRCULANT_MPI_STATS", "1"),
            ("CIRCULANT_MPI_THRESHOLDS", &file.to_string_lossy()),
        ],
        program,
        args,
        &dir,
    )
}

/// auto with a thresholds file: what lies outside a collective's ranges or is `never` is passed
/// through (and still correct); off passes everything through.
#[test]
fn thresholds_and_off_decide_what_is_served() {
    let Some(lib) = layer(Mpi::Mpich) else { return };
    let exe = program(Mpi::Mpich, "collectives.c");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("mpi-thresholds.txt");
    std::fs::write(
        &file,
        "# a test's thresholds\nbcast 0-\nallgather 0\nallreduce 0-999 # a range with an end\nalltoall never\nallgatherv never\nscan never\n",
    )
    .expect("write thresholds");
    let file = file.to_string_lossy().into_owned();
    let done = job(
        Mpi::Mpich,
        3,
        Some(&lib),
        &[
            ("CIRCULANT_MPI_STATS", "1"),
            ("CIRCULANT_MPI_THRESHOLDS", &file),
        ],
        &exe,
        &["2"],
        &dir,
    );
    assert_all_passed(&done, 3, 100);
    let err = &done.stderr;
    assert!(
        err.contains(&format!("CIRCULANT_MPI=auto, thresholds {file}")),
        "{err}"
    );
    let (bcast, bcast_passed, _) = stats(err, "MPI_Bcast").expect("bcast statistics");
    // Every broadcast served but the intercommunicator's.
    assert!(bcast > 0, "{err}");
    assert_eq!(
        bcast_passed,
        reason(err, "MPI_Bcast", "intercommunicator"),
        "{err}"
    );
    assert_eq!(bcast_passed, 3, "{err}");
    let (allreduce, _, _) = stats(err, "MPI_Allreduce").expect("allreduce statistics");
    assert!(allreduce > 0, "{err}");
    // Served within its range, passed through above it (the program's vectors reach 2800
    // bytes).
    assert!(reason(err, "MPI_Allreduce", "below-threshold") > 0, "{err}");
    let (alltoall, _, _) = stats(err, "MPI_Alltoall").expect("alltoall statistics");
    assert_eq!(alltoall, 0, "{err}");
    assert!(reason(err, "MPI_Alltoall", "below-threshold") > 0, "{err}");
    // An allgatherv outside its ranges passes before its arrays are looked at (in place too),
    // and is correct.
    let (allgatherv, allgatherv_passed, _) =
        stats(err, "MPI_Allgatherv").expect("allgatherv statistics");
    assert_eq!(allgatherv, 0, "{err}");
    assert_eq!(
        reason(err, "MPI_Allgatherv", "below-threshold"),
        allgatherv_passed - reason(err, "MPI_Allgatherv", "intercommunicator"),
        "{err}"
    );
    // Not in the file and no built-in threshold: passed through.
    assert_eq!(
        stats(err, "MPI_Scan").expect("scan statistics").0,
        0,
        "{err}"
    );

    // A line for communicators of 3 ranks or more (`bcast@3`): the world and its duplicate
    // take it, the split communicators of 2 and 1 ranks the line without a size. A
    // collective with only a sized line (`reduce@3`; the built-in file has reduce lines of
    // every size) has no ranges below it: the file's lines replace the built-in ones of every
    // size.
    let sized = |p| {
        let text = "bcast never\nbcast@3 0-\nallgather@3 never\nallgather 0-\nreduce@3 0-\n";
        with_thresholds(
            Mpi::Mpich,
            &lib,
            p,
            "mpi-sized-thresholds.txt",
            text,
            &exe,
            &["2"],
        )
    };
    let done = sized(3);
    assert_all_passed(&done, 3, 100);
    let err = &done.stderr;
    for name in ["MPI_Bcast", "MPI_Allgather", "MPI_Reduce"] {
        let (served, _, _) = stats(err, name).unwrap_or_else(|| panic!("no {name}:\n{err}"));
        assert!(served > 0, "{name} never served:\n{err}");
        assert!(reason(err, name, "below-threshold") > 0, "{name}:\n{err}");
    }
    // The same file at p = 2: no communicator has 3 ranks.
    let done = sized(2);
    assert_all_passed(&done, 2, 100);
    let err = &done.stderr;
    assert_eq!(stats(err, "MPI_Bcast").map(|s| s.0), Some(0), "{err}");
    assert_eq!(stats(err, "MPI_Reduce").map(|s| s.0), Some(0), "{err}");
    assert!(
        stats(err, "MPI_Allgather").is_some_and(|s| s.0 > 0),
        "{err}"
    );

    // The nonblocking and persistent forms have thresholds of their own (`ibcast`, ...): a
    // form the file says `never` for passes while the other form is served.
    let done = with_thresholds(
        Mpi::Mpich,
        &lib,
        3,
        "mpi-form-thresholds.txt",
        "barrier 0-\nibarrier never\nbcast 0-\nibcast never\nallreduce never\niallreduce 0-\nallgatherv never\niallgatherv 0-\n",
        &program(Mpi::Mpich, "nonblocking.c"),
        &["2"],
    );
    assert_all_passed(&done, 3, 170);
    let err = &done.stderr;
    for name in [
        "MPI_Barrier",
        "MPI_Bcast",
        "MPI_Iallreduce",
        "MPI_Iallreduce_c",
        "MPI_Iallgatherv",
        "MPI_Allgatherv_init",
    ] {
        let (served, _, _) = stats(err, name).unwrap_or_else(|| panic!("no {name}:\n{err}"));
        assert!(served > 0, "{name} never served:\n{err}");
    }
    for name in [
        "MPI_Ibarrier",
        "MPI_Ibcast",
        "MPI_Ibcast_c",
        "MPI_Bcast_init",
        "MPI_Bcast_init_c",
        "MPI_Allreduce",
    ] {
        let (served, passed, _) = stats(err, name).unwrap_or_else(|| panic!("no {name}:\n{err}"));
        assert_eq!(served, 0, "{name} served:\n{err}");
        let below = reason(err, name, "below-threshold");
        assert!(
            below > 0 && below + reason(err, name, "not-mirrored") == passed,
            "{name}:\n{err}"
        );
    }

    let done = job(
        Mpi::OpenMpi,
        2,
        layer(Mpi::OpenMpi).as_deref(),
        &[("CIRCULANT_MPI", "off"), ("CIRCULANT_MPI_STATS", "1")],
        &program(Mpi::OpenMpi, "collectives.c"),
        &["1"],
        &dir,
    );
    assert_all_passed(&done, 2, 100);
    for name in SERVED {
        let (served, passed, _) = stats(&done.stderr, name).expect("statistics");
        assert_eq!(served, 0, "{}", done.stderr);
        assert_eq!(reason(&done.stderr, name, "off"), passed, "{}", done.stderr);
    }
}

/// A call that auto passes by its size is decided from the layer's gate (size classes of the
/// ranges) on a communicator the gate knows, and by the ranges themselves on any other or with
/// a type the gate has no size of: at sizes on both sides of every edge of the ranges and of
/// the classes, every communicator serves exactly the calls within its ranges, under both MPIs
/// (cli/tests/mpi/edges.c at p = 3: bcast of 0-1025 bytes, allreduce of 0-2400 bytes, allgatherv
/// and allgather of 0-27 bytes (allgather also in place and with other types on its two
/// sides), gather, scatter (both also in place at the root), gatherv, scatterv and alltoall of
/// 0-27 bytes, barrier; on the world and a duplicate, blocking and nonblocking, on the
/// duplicate with other types (one the gate takes at its first call, one it never does), and
/// on a pair of ranks made after the duplicate was freed, whose bcast
/// ranges differ: a gate that kept the freed duplicate's classes would pass its 511 B, where
/// the MPI gives the pair the freed handle, as at least one of the two does).
#[test]
fn every_communicator_serves_the_sizes_of_its_ranges() {
    const LOW: &str = "below-threshold";
    let mut reused = Vec::new();
    let text = "bcast 9-511\nbcast@3 5-8 512-1023 1025\nallreduce 4-4 1024-2044 2400-\n\
                allgatherv 12-14 27\nallgather 12-14 27\nbarrier 0\n\
                ibcast 5-8 512-1023 1025\niallreduce 4-4 1024-2044 2400-\n\
                iallgatherv 12-14 27\niallgather 12-14 27\nibarrier 0\n\
                gather 12-14 27\nscatter 12-14 27\nalltoall 12-14 27\n\
                gatherv 12-14 27\ngatherv@3 never\nscatterv 12-14 27\n\
                igather 12-14 27\niscatter 12-14 27\nialltoall 12-14 27\n";
    for mpi in [Mpi::Mpich, Mpi::OpenMpi] {
        let Some(lib) = layer(mpi) else { return };
        let exe = program(mpi, "edges.c");
        let done = with_thresholds(mpi, &lib, 3, "mpi-edges.txt", text, &exe, &[]);
        assert_all_passed(&done, 3, 300);
        if done
            .stdout
            .contains("the pair's handle was the duplicate's: yes")
        {
            reused.push(mpi.name());
        }
        let err = &done.stderr;
        // Per rank and communicator of 3: bcast 5, 8, 512, 1023 and 1025 bytes of 11 sizes;
        // allreduce 4, 1024, 1028, 2044 and 2400 bytes of 10; allgatherv totals 12 and 27 of
        // 10; allgather the same, again in place, and totals 12n (12 and 36-108: a range `27`
        // is 27 B and more) of 10; the barrier. Blocking: the world, the duplicate twice;
        // nonblocking: the world and the duplicate. The pair (per rank, 2 ranks): bcast 9
        // and 511 bytes, allgatherv totals 12 and 14, allgather the same twice and totals 8n
        // from 32 (6 of 10), the same allreduces, the barrier. Gather and scatter (each
        // twice, once in place at the root), alltoall and scatterv: totals 12 and 27 of 10
        // per communicator of 3, 12 and 14 per pair; gatherv the same per pair (the root
        // tells its decision), never on communicators of 3 (the gate passes it). Nonblocking
        // gatherv and scatterv pass: the file has no line for them. Under MPICH, persistent bcasts of the 11 sizes,
        // each started twice, on the world and on a new duplicate (and a blocking barrier
        // there): served at each start within the ranges. Passed: on the world, by the gate
        // once at the init where the size's class is passed whole (0, 1 and 511 B), else at
        // each start (4, 9 and 1024 B, whose classes hold served sizes); on the duplicate,
        // unknown to the gate at the inits, at each start.
        let mpich = u64::from(mpi == Mpi::Mpich);
        for (name, served, passed, why) in [
            (
                "MPI_Bcast_init",
                mpich * 2 * 3 * 2 * 5,
                mpich * 3 * (3 + 2 * 3 + 2 * 6),
                LOW,
            ),
            ("MPI_Bcast", 3 * 3 * 5 + 2 * 2, 3 * 3 * 6 + 2 * 9, LOW),
            ("MPI_Allreduce", 3 * 3 * 5 + 2 * 5, 3 * 3 * 5 + 2 * 5, LOW),
            ("MPI_Allgatherv", 3 * 3 * 2 + 2 * 2, 3 * 3 * 8 + 2 * 8, LOW),
            (
                "MPI_Allgather",
                3 * 3 * 12 + 2 * 10,
                3 * 3 * 18 + 2 * 20,
                LOW,
            ),
            ("MPI_Gather", 3 * 3 * 4 + 2 * 4, 3 * 3 * 16 + 2 * 16, LOW),
            ("MPI_Scatter", 3 * 3 * 4 + 2 * 4, 3 * 3 * 16 + 2 * 16, LOW),
            ("MPI_Alltoall", 3 * 3 * 2 + 2 * 2, 3 * 3 * 8 + 2 * 8, LOW),
            ("MPI_Gatherv", 2 * 2, 3 * 3 * 10 + 2 * 8, LOW),
            ("MPI_Scatterv", 3 * 3 * 2 + 2 * 2, 3 * 3 * 8 + 2 * 8, LOW),
            ("MPI_Barrier", 3 * 3 + 2 + mpich * 3, 0, LOW),
            ("MPI_Ibcast", 2 * 3 * 5, 2 * 3 * 6, LOW),
            ("MPI_Iallreduce", 2 * 3 * 5, 2 * 3 * 5, LOW),
            ("MPI_Iallgatherv", 2 * 3 * 2, 2 * 3 * 8, LOW),
            ("MPI_Iallgather", 2 * 3 * 12, 2 * 3 * 18, LOW),
            ("MPI_Igather", 2 * 3 * 4, 2 * 3 * 16, LOW),
            ("MPI_Iscatter", 2 * 3 * 4, 2 * 3 * 16, LOW),
            ("MPI_Ialltoall", 2 * 3 * 2, 2 * 3 * 8, LOW),
            ("MPI_Igatherv", 0, 2 * 3 * 10, LOW),
            ("MPI_Iscatterv", 0, 2 * 3 * 10, LOW),
            ("MPI_Ibarrier", 2 * 3, 0, LOW),
        ] {
            let (s, p, _) = match stats(err, name) {
                Some(counts) => counts,
                // A collective the MPI does not have is not listed.
                None if (served, passed) == (0, 0) => continue,
                None => panic!("no {name}:\n{err}"),
            };
            assert_eq!((s, p), (served, passed), "{} {name}:\n{err}", mpi.name());
            assert_eq!(reason(err, name, why), passed, "{name}:\n{err}");
        }
    }
    assert!(
        !reused.is_empty(),
        "neither MPI gave the pair the freed duplicate's handle: \
         the test of a forgotten entry ran nowhere"
    );
}

/// The built-in Open MPI thresholds have lines for communicators of 8 ranks or more
/// (`allgatherv@8 4096-`, which passes the program's small allgathervs on its world); a file's
/// line for allgatherv replaces the built-in ones of every size, so that at p = 8 every
/// allgatherv is served.
#[test]
fn a_thresholds_file_replaces_the_built_in_lines_of_every_size() {
    let Some(lib) = layer(Mpi::OpenMpi) else {
        return;
    };
    let exe = program(Mpi::OpenMpi, "collectives.c");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let built_in = job(
        Mpi::OpenMpi,
        8,
        Some(&lib),
        &[("CIRCULANT_MPI_STATS", "1")],
        &exe,
        &["1"],
        &dir,
    );
    assert_all_passed(&built_in, 8, 50);
    assert!(
        reason(&built_in.stderr, "MPI_Allgatherv", "below-threshold") > 0,
        "{built_in:?}"
    );
    let done = with_thresholds(
        Mpi::OpenMpi,
        &lib,
        8,
        "mpi-every-allgatherv.txt",
        "allgatherv 0-\n",
        &exe,
        &["1"],
    );
    assert_all_passed(&done, 8, 50);
    let err = &done.stderr;
    assert!(
        stats(err, "MPI_Allgatherv").is_some_and(|s| s.0 > 0),
        "{err}"
    );
    assert_eq!(reason(err, "MPI_Allgatherv", "below-threshold"), 0, "{err}");
}

/// The built-in thresholds serve what mpi/README.md says: at p = 4 under Open MPI bcast at
/// 4-8 KiB (100 B passes), under MPICH from 64 B (2 B passes); at p = 2 under Open MPI
/// allgather at 8 KiB in all (100 B a rank passes, and so does the bcast of 5000 B served at
/// p = 4), under MPICH bcast at 512 B - 4 KiB (2 B and 10 kB pass); at p = 3 under Open MPI
/// bcast at 4 KiB (5000 B passes), under MPICH from 512 B (100 B passes). The peer
/// benchmark's timed calls are its only calls of the collective measured.
#[test]
fn the_built_in_thresholds_serve_where_the_readme_says() {
    let cases = [
        (Mpi::OpenMpi, 4, "bcast", "100", false),
        (Mpi::OpenMpi, 4, "bcast", "5000", true),
        (Mpi::Mpich, 4, "bcast", "2", false),
        (Mpi::Mpich, 4, "bcast", "100", true),
        (Mpi::OpenMpi, 2, "allgather", "100", false),
        (Mpi::OpenMpi, 2, "allgather", "4096", true),
        (Mpi::OpenMpi, 2, "bcast", "5000", false),
        (Mpi::Mpich, 2, "bcast", "2", false),
        (Mpi::Mpich, 2, "bcast", "1000", true),
        (Mpi::Mpich, 2, "bcast", "10000", false),
        (Mpi::OpenMpi, 3, "bcast", "4096", true),
        (Mpi::OpenMpi, 3, "bcast", "5000", false),
        (Mpi::Mpich, 3, "bcast", "100", false),
        (Mpi::Mpich, 3, "bcast", "1000", true),
    ];
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    for (mpi, p, op, bytes, serves) in cases {
        let Some(lib) = layer(mpi) else { return };
        let args = [
            "--op",
            op,
            "--reps",
            "3",
            "--min-bytes",
            bytes,
            "--max-bytes",
            bytes,
        ];
        let env = [("CIRCULANT_MPI_STATS", "1")];
        let done = job(mpi, p, Some(&lib), &env, &peer(mpi), &args, &dir);
        assert_eq!(done.code(), Some(0), "{done:?}");
        let err = &done.stderr;
        let name = if op == "bcast" {
            "MPI_Bcast"
        } else {
            "MPI_Allgather"
        };
        let (s, passed, _) = stats(err, name).unwrap_or_else(|| panic!("no {name}:\n{err}"));
        let label = format!("{} {op} of {bytes} B at p = {p}", mpi.name());
        if serves {
            assert!(s > 0 && passed == 0, "{label} not served:\n{err}");
        } else {
            assert!(s == 0 && passed > 0, "{label} served:\n{err}");
            assert_eq!(
                reason(err, name, "below-threshold"),
                passed,
                "{label}:\n{err}"
            );
        }
    }
}

/// The peer benchmark's persistent form (`--persistent`: one `MPI_Allgatherv_init` per size,
/// then `MPI_Start` and `MPI_Wait` at every call): under MPICH with the layer, paired (the
/// same calls through the `PMPI_` names), every size's result checked (the program fails on a
/// wrong byte) and the layer's requests served; Open MPI 4.1 has no persistent collectives,
/// and the benchmark says so.
#[test]
fn the_peer_benchmark_measures_persistent_requests() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    if let Some(lib) = layer(Mpi::Mpich) {
        let peer = peer(Mpi::Mpich);
        let args = [
            "--op",
            "allgatherv",
            "--dist",
            "spike",
            "--persistent",
            "--paired",
            "--reps",
            "2",
            "--max-bytes",
            "20000",
        ];
        let env = [("CIRCULANT_MPI", "on"), ("CIRCULANT_MPI_STATS", "1")];
        let done = job(Mpi::Mpich, 3, Some(&lib), &env, &peer, &args, &dir);
        assert_eq!(done.code(), Some(0), "{done:?}");
        for series in ["mpi-persistent", "pmpi-persistent"] {
            let rows = done
                .stdout
                .lines()
                .filter(|l| l.split(',').nth(2) == Some(series))
                .count();
            assert_eq!(rows, 10, "{series}:\n{}", done.stdout);
        }
        let (served, _, _) = stats(&done.stderr, "MPI_Allgatherv_init")
            .unwrap_or_else(|| panic!("no statistics:\n{}", done.stderr));
        assert!(served > 0, "{}", done.stderr);
    }
    if layer(Mpi::OpenMpi).is_some() {
        let peer = peer(Mpi::OpenMpi);
        let done = job(Mpi::OpenMpi, 1, None, &[], &peer, &["--persistent"], &dir);
        assert_eq!(done.code(), Some(2), "{done:?}");
        assert!(
            done.stderr
                .contains("--persistent needs MPI-4's persistent collectives"),
            "{done:?}"
        );
    }
}

/// The peer benchmark's overlap (`--overlap`: the nonblocking call alone, a computation alone
/// as long as its median, both together) under both MPIs, with the layer serving the calls:
/// every size's result checked, a row per size with the three columns, each overlap within
/// 0–100 % and the one the row's minima give; `--overlap` excludes the other forms.
#[test]
fn the_peer_benchmark_measures_overlap() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    for mpi in [Mpi::Mpich, Mpi::OpenMpi] {
        let Some(lib) = layer(mpi) else { return };
        let peer = peer(mpi);
        let args = [
            "--op",
            "allreduce",
            "--overlap",
            "--reps",
            "3",
            "--min-bytes",
            "1000",
            "--max-bytes",
            "100000",
        ];
        let env = [("CIRCULANT_MPI", "on"), ("CIRCULANT_MPI_STATS", "1")];
        let done = job(mpi, 2, Some(&lib), &env, &peer, &args, &dir);
        assert_eq!(done.code(), Some(0), "{done:?}");
        let mut lines = done.stdout.lines().filter(|l| !l.starts_with('#'));
        let header = lines.next().unwrap_or_default();
        assert!(
            header.ends_with(",median_s,alone_s,compute_s,overlap_pct"),
            "{}",
            done.stdout
        );
        let rows: Vec<Vec<f64>> = lines
            .filter(|l| l.split(',').nth(2) == Some("overlap"))
            .map(|l| {
                l.split(',')
                    .skip(8)
                    .map(|x| x.parse().expect("a number"))
                    .collect()
            })
            .collect();
        assert_eq!(rows.len(), 5, "{}", done.stdout);
        for row in &rows {
            let [both, _median, alone, compute, pct] = row[..] else {
                panic!("{row:?}")
            };
            assert!((0.0..=100.0).contains(&pct), "{row:?}");
            let expected = (100.0 * (1.0 - (both - compute) / alone)).clamp(0.0, 100.0);
            assert!((pct - expected).abs() < 0.06, "{row:?}");
        }
        let (served, _, _) = stats(&done.stderr, "MPI_Iallreduce")
            .unwrap_or_else(|| panic!("no statistics:\n{}", done.stderr));
        assert!(served > 0, "{}", done.stderr);
        let refused = job(mpi, 1, None, &[], &peer, &["--overlap", "--paired"], &dir);
        assert_eq!(refused.code(), Some(2), "{refused:?}");
        assert!(refused.stderr.contains("--overlap excludes"), "{refused:?}");
    }
}

/// The peer benchmark's reductions (`--op reduce`, `reduce-scatter-block`, `reduce-scatter`)
/// under both MPIs with the layer, paired, in every form the MPI has: every size's result
/// checked (the program fails on a wrong element), a row per size (4 B to 20 kB) and series,
/// and the layer served the calls through the `MPI_` names.
#[test]
fn the_peer_benchmark_measures_the_reductions() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    for mpi in [Mpi::Mpich, Mpi::OpenMpi] {
        let Some(lib) = layer(mpi) else { return };
        let peer = peer(mpi);
        let forms: &[&str] = match mpi {
            Mpi::Mpich => &["", "--nonblocking", "--persistent"],
            Mpi::OpenMpi => &["", "--nonblocking"],
        };
        for (op, stem) in [
            ("reduce", "Reduce"),
            ("reduce-scatter-block", "Reduce_scatter_block"),
            ("reduce-scatter", "Reduce_scatter"),
        ] {
            for form in forms {
                let mut args = vec!["--op", op, "--dist", "spike", "--paired", "--reps", "2"];
                args.extend(["--max-bytes", "20000"]);
                if !form.is_empty() {
                    args.push(form);
                }
                let env = [("CIRCULANT_MPI", "on"), ("CIRCULANT_MPI_STATS", "1")];
                let done = job(mpi, 3, Some(&lib), &env, &peer, &args, &dir);
                assert_eq!(done.code(), Some(0), "{op} {form}: {done:?}");
                let suffix = form.trim_start_matches("--");
                for series in ["mpi", "pmpi"] {
                    let algorithm = if suffix.is_empty() {
                        series.to_string()
                    } else {
                        format!("{series}-{suffix}")
                    };
                    let rows = done
                        .stdout
                        .lines()
                        .filter(|l| l.split(',').nth(1) == Some(op))
                        .filter(|l| l.split(',').nth(2) == Some(algorithm.as_str()))
                        .count();
                    assert_eq!(rows, 8, "{op} {algorithm}:\n{}", done.stdout);
                }
                let name = match suffix {
                    "" => format!("MPI_{stem}"),
                    "nonblocking" => format!("MPI_I{}", stem.to_lowercase()),
                    _ => format!("MPI_{stem}_init"),
                };
                let (served, _, _) = stats(&done.stderr, &name)
                    .unwrap_or_else(|| panic!("no statistics of {name}:\n{}", done.stderr));
                assert!(served > 0, "{name}:\n{}", done.stderr);
            }
        }
    }
}

#[test]
fn bad_settings_are_refused_with_a_message() {
    let Some(lib) = layer(Mpi::Mpich) else { return };
    let exe = program(Mpi::Mpich, "collectives.c");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let done = job(
        Mpi::Mpich,
        1,
        Some(&lib),
        &[("CIRCULANT_MPI", "fast")],
        &exe,
        &["1"],
        &dir,
    );
    assert_ne!(done.code(), Some(0), "{done:?}");
    assert!(
        done.stderr
            .contains("CIRCULANT_MPI=fast: expected off, on or auto"),
        "{done:?}"
    );
    let file = dir.join("mpi-bad-thresholds.txt");
    for (text, says) in [
        ("bcast lots\n", "line 1: `lots` is not a byte count"),
        (
            "# ranges\nbcast 8-64\nallreduce 900-3\n",
            "line 3: `900-3`, a range that ends before it begins",
        ),
        (
            "reduce never 8-\n",
            "line 1: expected `COLLECTIVE never` or",
        ),
        (
            "bcast 8-\nbcast@0 8-\n",
            "line 2: `@0` is not a number of ranks (1 or more)",
        ),
        ("bcast@4x never\n", "line 1: `@4x` is not a number of ranks"),
        ("bcast@ never\n", "line 1: `@` is not a number of ranks"),
    ] {
        std::fs::write(&file, text).expect("write thresholds");
        let done = job(
            Mpi::Mpich,
            1,
            Some(&lib),
            &[("CIRCULANT_MPI_THRESHOLDS", &file.to_string_lossy())],
            &exe,
            &["1"],
            &dir,
        );
        assert_ne!(done.code(), Some(0), "{done:?}");
        assert!(done.stderr.contains(says), "{says}: {done:?}");
    }
}

/// MPI_ERRORS_RETURN: an error class whose string is circulant's message, and the
/// communicator goes on through MPI; MPI_ERRORS_ARE_FATAL: the job ends with the message.
fn errors(mpi: Mpi) {
    let Some(lib) = layer(mpi) else { return };
    let exe = program(mpi, "errors.c");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let env = [
        ("CIRCULANT_MPI", "on"),
        ("CIRCULANT_CHECK", "1"),
        ("CIRCULANT_MPI_STATS", "1"),
    ];
    let done = job(mpi, 3, Some(&lib), &env, &exe, &["return"], &dir);
    assert_eq!(done.code(), Some(0), "{done:?}");
    for rank in 0..3 {
        let line = done
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("rank {rank}: error class ")))
            .unwrap_or_else(|| panic!("no error of rank {rank}: {done:?}"));
        assert!(
            line.contains("circulant bcast") && line.contains("different arguments"),
            "{line}"
        );
        assert!(
            done.stdout
                .contains(&format!("rank {rank}: after the error ok")),
            "{done:?}"
        );
    }
    // The first section's broadcast and the one after the nonblocking errors.
    assert_eq!(
        reason(&done.stderr, "MPI_Bcast", "failed-before"),
        6,
        "{done:?}"
    );
    // The nonblocking broadcast: its error at its MPI_Wait; the next one fails too (not every
    // rank need know of the failure yet); after a blocking call, one passes and is correct.
    for rank in 0..3 {
        let line = done
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("rank {rank}: nonblocking error class ")))
            .unwrap_or_else(|| panic!("no nonblocking error of rank {rank}: {done:?}"));
        assert!(
            line.contains("circulant bcast") && line.contains("different arguments"),
            "{line}"
        );
        let next = format!("rank {rank}: next nonblocking call failed");
        let after = format!("rank {rank}: after the nonblocking error ok");
        assert!(done.stdout.contains(&next), "{done:?}");
        assert!(done.stdout.contains(&after), "{done:?}");
    }
    assert_eq!(
        reason(&done.stderr, "MPI_Ibcast", "failed-before"),
        3,
        "{done:?}"
    );
    // The negative count: passed through, and MPI's own error class.
    assert_eq!(reason(&done.stderr, "MPI_Bcast", "argument"), 3, "{done:?}");
    for rank in 0..3 {
        let line = format!("rank {rank}: negative count: MPI_ERR_COUNT");
        assert!(done.stdout.contains(&line), "{done:?}");
        // MPI's own persistent request, which the layer's holds, checks the init's arguments.
        if mpi == Mpi::Mpich {
            let line = format!("rank {rank}: persistent bad root: MPI_ERR_ROOT, no request");
            assert!(done.stdout.contains(&line), "{done:?}");
        }
    }

    // MPI_Abort kills the ranks before they close their endpoints.
    let _watching = SHM_WATCH.lock().unwrap_or_else(|e| e.into_inner());
    let _regions = ShmRegions::watch();
    let done = aborting_job(mpi, 3, &lib, &env, &exe, &["fatal"], &dir);
    assert_ne!(done.code(), Some(0), "{done:?}");
    assert!(
        done.stderr.contains("circulant-mpi: rank ")
            && done.stderr.contains(
                "circulant bcast (the ranks called the collective with different arguments)"
            ),
        "{done:?}"
    );
    assert!(!done.stdout.contains("after the error"), "{done:?}");
}

#[test]
fn errors_reach_the_error_handler_under_mpich() {
    errors(Mpi::Mpich);
}

#[test]
fn errors_reach_the_error_handler_under_open_mpi() {
    errors(Mpi::OpenMpi);
}

/// Arguments MPI says are not significant, passed as NULL, -1 and MPI_DATATYPE_NULL (the
/// receive side of a gather on a non-root, the send side of a scatter on a non-root, either
/// side MPI_IN_PLACE stands for, ...), in every form the MPI has, at p = 4 and root 1: every
/// result is right and the calls were served (the rooted `v` forms' nonblocking and
/// persistent ones pass, as always).
fn insignificant_arguments(mpi: Mpi) {
    let Some(lib) = layer(mpi) else { return };
    let exe = program(mpi, "insignificant.c");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let env = [
        ("CIRCULANT_MPI", "on"),
        ("CIRCULANT_CHECK", "1"),
        ("CIRCULANT_MPI_STATS", "1"),
    ];
    let done = job(mpi, 4, Some(&lib), &env, &exe, &[], &dir);
    assert_all_passed(&done, 4, 24);
    let forms: &[&str] = match mpi {
        Mpi::Mpich => &["", "_c", "I", "_init"],
        Mpi::OpenMpi => &["", "I"],
    };
    for stem in [
        "Gather",
        "Scatter",
        "Reduce",
        "Allgather",
        "Allgatherv",
        "Alltoall",
    ] {
        for form in forms {
            let name = match *form {
                "I" => format!("MPI_I{}", stem.to_lowercase()),
                suffix => format!("MPI_{stem}{suffix}"),
            };
            let (served, passed, _) = stats(&done.stderr, &name)
                .unwrap_or_else(|| panic!("no statistics of {name}:\n{done:?}"));
            assert!(served > 0 && passed == 0, "{name}: {done:?}");
        }
    }
}

#[test]
fn insignificant_arguments_are_not_looked_at_under_mpich() {
    insignificant_arguments(Mpi::Mpich);
}

#[test]
fn insignificant_arguments_are_not_looked_at_under_open_mpi() {
    insignificant_arguments(Mpi::OpenMpi);
}

/// A 4-rank job whose rank 1 calls MPI_Abort (or, with `kill`, is killed by SIGKILL) while the
/// others wait: 5 s after the job none of its ranks' files in /dev/shm (libfabric's shm
/// regions `PID:N:M`, circulant's `circulant-PID-NAME`) is left. On an abort the layer removes
/// them for every rank of the node before the MPI kills them; a killed rank's are removed by
/// its watcher process, and so are those of the ranks the MPI ends after it.
fn no_shared_files_left(mpi: Mpi, kill: bool) {
    let Some(lib) = layer(mpi) else { return };
    let exe = program(mpi, "abort.c");
    let how = if kill { "kill" } else { "abort" };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{how}-{}", mpi.name()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory for the pids");
    let pids_dir = dir.to_string_lossy().into_owned();
    let env = [("CIRCULANT_MPI", "on")];
    // Removes what the job leaves should the assertions fail.
    let _watching = SHM_WATCH.lock().unwrap_or_else(|e| e.into_inner());
    let _regions = ShmRegions::watch();
    let args: &[&str] = if kill {
        &[&pids_dir, "kill"]
    } else {
        &[&pids_dir]
    };
    let done = job(mpi, 4, Some(&lib), &env, &exe, args, &dir);
    assert_ne!(done.code(), Some(0), "{done:?}");
    let pids: Vec<String> = (0..4)
        .map(|r| {
            let file = dir.join(format!("rank-{r}.pid"));
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("{}: {e}\n{done:?}", file.display()));
            text.trim().to_string()
        })
        .collect();
    std::thread::sleep(Duration::from_secs(5));
    let left: Vec<String> = std::fs::read_dir("/dev/shm")
        .expect("/dev/shm")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| {
            pids.iter().any(|pid| {
                name.starts_with(&format!("circulant-{pid}-"))
                    || name.starts_with(&format!("{pid}:"))
            })
        })
        .collect();
    assert!(left.is_empty(), "left in /dev/shm: {left:?}\n{done:?}");
}

#[test]
fn abort_leaves_no_shared_files_under_mpich() {
    no_shared_files_left(Mpi::Mpich, false);
}

#[test]
fn abort_leaves_no_shared_files_under_open_mpi() {
    no_shared_files_left(Mpi::OpenMpi, false);
}

#[test]
fn a_killed_rank_leaves_no_shared_files_under_mpich() {
    no_shared_files_left(Mpi::Mpich, true);
}

#[test]
fn a_killed_rank_leaves_no_shared_files_under_open_mpi() {
    no_shared_files_left(Mpi::OpenMpi, true);
}

/// `use mpi`: MPICH's Fortran bindings call the C functions, so the layer serves them; Open
/// MPI's call the PMPI_ ones, so the program runs on MPI alone (and stays correct).
#[test]
fn a_fortran_program_runs_with_the_layer() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    for mpi in [Mpi::Mpich, Mpi::OpenMpi] {
        let Some(lib) = layer(mpi) else { return };
        let exe = program(mpi, "collectives.f90");
        let env = [("CIRCULANT_MPI", "on"), ("CIRCULANT_MPI_STATS", "1")];
        let done = job(mpi, 3, Some(&lib), &env, &exe, &[], &dir);
        assert_all_passed(&done, 3, 4);
        if mpi == Mpi::Mpich {
            for name in [
                "MPI_Bcast",
                "MPI_Allreduce",
                "MPI_Allgather",
                "MPI_Ibcast",
                "MPI_Iallreduce",
            ] {
                assert_eq!(stats(&done.stderr, name).map(|s| s.0), Some(3), "{done:?}");
            }
        }
    }
}

/// A tiny HPC Challenge input: HPL of order 200 on a 2 x 2 grid, PTRANS, and the rest at the
/// sizes hpcc derives from it.
const HPCCINF: &str = "HPLinpack benchmark input file
Innovative Computing Laboratory, University of Tennessee
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
200          Ns
1            # of NBs
32           NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
2            Ps
2            Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0                      		Number of additional problem sizes for PTRANS
1200 10000 30000        	values of N
0                       	number of additional blocking sizes for PTRANS
40 9 8 13 13 20 16 32 64       	values of NB
";

/// The verdicts of an hpcc run: its check lines and the HPL and PTRANS PASSED/FAILED lines.
fn hpcc_verdicts(output: &str) -> Vec<String> {
    output
        .lines()
        .filter(|l| {
            l.contains("PASSED")
                || l.contains("FAILED")
                || l.starts_with("Found ")
                || l.contains("errors in")
                || l.starts_with("Failure")
        })
        .map(|l| {
            // The figures that are timings are not results: keep the words.
            l.split_whitespace()
                .filter(|w| !w.contains('.') || *w == "(passed).")
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

#[test]
fn hpcc_gives_the_same_verdicts_with_the_layer() {
    // (Looked up, not run: hpcc without its input file runs its full default benchmark.)
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join("hpcc").is_file()))
        .unwrap_or(false);
    if !on_path {
        missing("hpcc", "ci/deps installs hpcc");
        return;
    }
    let Some(lib) = layer(Mpi::OpenMpi) else {
        return;
    };
    let mut verdicts = Vec::new();
    for (name, preload) in [("plain", None), ("layer", Some(lib.as_path()))] {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("hpcc-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("hpcc directory");
        std::fs::write(dir.join("hpccinf.txt"), HPCCINF).expect("hpccinf.txt");
        let env = [("CIRCULANT_MPI", "on"), ("CIRCULANT_MPI_STATS", "1")];
        let done = job(Mpi::OpenMpi, 4, preload, &env, Path::new("hpcc"), &[], &dir);
        assert_eq!(done.code(), Some(0), "{done:?}");
        let out = std::fs::read_to_string(dir.join("hpccoutf.txt")).expect("hpccoutf.txt");
        assert!(out.contains("End of HPC Challenge tests"), "{out}");
        let v = hpcc_verdicts(&out);
        assert!(v.iter().any(|l| l.contains("PASSED")), "{out}");
        assert!(!v.iter().any(|l| l.contains("FAILED")), "{out}");
        if preload.is_some() {
            for name in ["MPI_Bcast", "MPI_Allreduce", "MPI_Alltoall", "MPI_Barrier"] {
                let served = stats(&done.stderr, name).map_or(0, |s| s.0);
                assert!(served > 0, "{name}: {}", done.stderr);
            }
        } else {
            assert!(!done.stderr.contains("circulant-mpi"), "{}", done.stderr);
        }
        // PTRANS prints a CPU row beside a repetition's WALL row only when the process's CPU
        // clock advanced during it (seen to differ between two runs of plain hpcc): its
        // verdict is the WALL row's, checked above for FAILED and compared below.
        verdicts.push(
            v.into_iter()
                .filter(|l| !l.starts_with("CPU "))
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(verdicts[0], verdicts[1]);
}

/// ScaLAPACK's LU test (xdlu, Open MPI build): grids 1x1, 2x2, 1x4, 4x1 on 4 ranks.
#[test]
fn scalapack_lu_passes_the_same_checks_with_the_layer() {
    let tests = Path::new("/usr/lib/x86_64-linux-gnu/scalapack/openmpi-tests");
    if !tests.join("xdlu").exists() {
        missing("scalapack's xdlu", "ci/deps installs scalapack-mpi-test");
        return;
    }
    let Some(lib) = layer(Mpi::OpenMpi) else {
        return;
    };
    let mut reports = Vec::new();
    for (name, preload) in [("plain", None), ("layer", Some(lib.as_path()))] {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("scalapack-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scalapack directory");
        std::fs::copy(tests.join("LU.dat"), dir.join("LU.dat")).expect("LU.dat");
        let env = [("CIRCULANT_MPI", "on"), ("CIRCULANT_MPI_STATS", "1")];
        let done = job(
            Mpi::OpenMpi,
            4,
            preload,
            &env,
            &tests.join("xdlu"),
            &[],
            &dir,
        );
        assert_eq!(done.code(), Some(0), "{done:?}");
        let summary: Vec<String> = done
            .stdout
            .lines()
            .filter(|l| l.contains("tests completed") || l.contains("tests skipped"))
            .map(|l| l.trim().to_string())
            .collect();
        assert!(
            summary.iter().any(
                |l| l.ends_with("tests completed and passed residual checks.")
                    && !l.starts_with("0 ")
            ),
            "{done:?}"
        );
        assert!(
            summary.contains(&"0 tests completed and failed residual checks.".to_string()),
            "{done:?}"
        );
        if preload.is_some() {
            for name in ["MPI_Bcast", "MPI_Allreduce", "MPI_Reduce"] {
                let served = stats(&done.stderr, name).map_or(0, |s| s.0);
                assert!(served > 0, "{name}: {}", done.stderr);
            }
        }
        reports.push(summary);
    }
    assert_eq!(reports[0], reports[1]);
}

/// Where the ranks' monotonic clocks differ (rank 1 in a time namespace 100000 s ahead, as
/// another host's clock), circulant-mpi-calibrate cannot set a common start: it times each
/// call after a barrier, and the file says so.
#[test]
fn calibration_on_ranks_whose_clocks_differ_times_after_a_barrier() {
    let Some(lib) = layer(Mpi::OpenMpi) else {
        return;
    };
    if !common::time_namespaces() {
        return;
    }
    let calibrate = layers()
        .expect("built")
        .join("circulant-mpi-calibrate-openmpi");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("mpi-calibrated-two-clocks.txt");
    let _ = std::fs::remove_file(&file);
    let run = format!(
        "env LD_PRELOAD={} {} --max-bytes 64 --reps 1 --rounds 1 --forms blocking {}",
        lib.display(),
        calibrate.display(),
        file.display()
    );
    let done = two_clock_job(&run, Some(100_000), &dir);
    assert_eq!(done.code(), Some(0), "{done:?}");
    let text = std::fs::read_to_string(&file).expect("the thresholds file");
    assert!(
        text.contains(
            "# each call timed after a barrier (the ranks' clocks differ by more than 1 ms)\n"
        ),
        "{text}"
    );
    assert!(text.contains("\nbcast "), "{text}");
}

/// The shell command `run` on two ranks under Open MPI, rank 1 with its monotonic clock
/// `offset` seconds ahead (in a time namespace, as another host's clock is) where given.
fn two_clock_job(run: &str, offset: Option<u64>, dir: &Path) -> Finished {
    let script = match offset {
        None => format!("exec {run}"),
        Some(s) => format!(
            "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then \
             exec unshare --time --fork --monotonic {s} {run}; else exec {run}; fi"
        ),
    };
    job(
        Mpi::OpenMpi,
        2,
        None,
        &[],
        Path::new("/bin/sh"),
        &["-c", &script],
        dir,
    )
}

/// The peer benchmark `mpi_coll` times every call from a common start, which needs one clock:
/// a job with a rank whose monotonic clock runs at an offset (as another host's does) stops
/// with status 2 and says why; the same job on one clock measures.
#[test]
fn the_peer_benchmark_refuses_ranks_whose_clocks_differ() {
    if Command::new("mpicc.openmpi")
        .arg("--version")
        .output()
        .is_err()
    {
        missing("mpicc.openmpi", "ci/deps installs libopenmpi-dev");
        return;
    }
    if !common::time_namespaces() {
        return;
    }
    let peer = peer(Mpi::OpenMpi);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let run = format!(
        "{} --op bcast --reps 2 --min-bytes 8 --max-bytes 8",
        peer.display()
    );
    for offset in [None, Some(100_000)] {
        let done = two_clock_job(&run, offset, &dir);
        if offset.is_none() {
            assert_eq!(done.code(), Some(0), "{done:?}");
            assert!(done.stdout.contains("\nopenmpi,bcast,"), "{done:?}");
        } else {
            common::assert_failed_with(
                &done,
                2,
                "mpi_coll: the ranks' monotonic clocks differ by more than 1 ms",
            );
            assert!(!done.stdout.contains("openmpi,bcast,"), "{done:?}");
        }
    }
}

/// circulant-mpi-calibrate writes a thresholds file (here from a short run) that the layer
/// then reads; without the layer preloaded it refuses to measure.
#[test]
fn calibration_writes_a_thresholds_file_the_layer_reads() {
    let Some(lib) = layer(Mpi::OpenMpi) else {
        return;
    };
    let calibrate = layers()
        .expect("built")
        .join("circulant-mpi-calibrate-openmpi");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("mpi-calibrated.txt");
    let _ = std::fs::remove_file(&file);
    let args = [
        "--max-bytes",
        "512",
        "--reps",
        "2",
        "--rounds",
        "2",
        file.to_str().expect("utf-8"),
    ];
    let done = job(Mpi::OpenMpi, 2, None, &[], &calibrate, &args, &dir);
    assert_ne!(done.code(), Some(0), "{done:?}");
    assert!(
        done.stderr
            .contains("the circulant MPI layer is not loaded"),
        "{done:?}"
    );
    assert!(!file.exists());

    let done = job(Mpi::OpenMpi, 2, Some(&lib), &[], &calibrate, &args, &dir);
    assert_eq!(done.code(), Some(0), "{done:?}");
    let text = std::fs::read_to_string(&file).expect("the thresholds file");
    // Medians of the two series by default.
    assert!(text.contains("2 repetitions (median), 2 rounds"), "{text}");
    // On one host the ranks share a clock: every call is timed from a common start.
    assert!(
        text.contains("# each call timed from a common start\n"),
        "{text}"
    );
    let settings: Vec<(&str, &str)> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .collect();
    let names: Vec<&str> = settings.iter().map(|(name, _)| *name).collect();
    // Every collective in its blocking form, then the nonblocking forms the layer serves.
    assert_eq!(
        names,
        [
            "barrier",
            "bcast",
            "allgather",
            "allgatherv",
            "allreduce",
            "reduce",
            "reduce_scatter_block",
            "reduce_scatter",
            "gather",
            "gatherv",
            "scatter",
            "scatterv",
            "alltoall",
            "scan",
            "exscan",
            "ibarrier",
            "ibcast",
            "iallgather",
            "iallgatherv",
            "iallreduce",
            "ireduce",
            "ireduce_scatter_block",
            "ireduce_scatter",
            "igather",
            "iscatter",
            "ialltoall",
            "iscan",
            "iexscan"
        ],
        "{text}"
    );
    // `never`, or ranges of measured sizes: `A-B`, or `A-` open at the last.
    let measured = |v: &str| v.parse::<u64>().is_ok_and(|v| v <= 512);
    for (name, value) in &settings {
        let ranges_ok = value.split(' ').all(|range| match range.split_once('-') {
            Some((from, "")) => measured(from),
            Some((from, to)) => measured(from) && measured(to),
            None => false,
        });
        assert!(*value == "never" || ranges_ok, "{name} {value}: {text}");
    }
    let done = job(
        Mpi::OpenMpi,
        2,
        Some(&lib),
        &[
            ("CIRCULANT_MPI_STATS", "1"),
            ("CIRCULANT_MPI_THRESHOLDS", file.to_str().expect("utf-8")),
        ],
        &program(Mpi::OpenMpi, "collectives.c"),
        &["1"],
        &dir,
    );
    assert_all_passed(&done, 2, 100);
    assert!(
        done.stderr
            .contains(&format!("thresholds {}", file.display())),
        "{done:?}"
    );
    // `--forms nonblocking` measures the nonblocking forms alone, `--sized` names each line
    // for communicators of the job's size and more (`ibcast@2`), `--step 2` measures sizes
    // twice apart (8, 16, 32, 64 B), `--statistic minimum` compares the least times; a form
    // or statistic it does not know is refused.
    let forms = dir.join("mpi-calibrated-nonblocking.txt");
    let nb_args = [
        "--max-bytes",
        "64",
        "--reps",
        "1",
        "--rounds",
        "1",
        "--forms",
        "nonblocking",
        "--sized",
        "--step",
        "2",
        "--statistic",
        "minimum",
        forms.to_str().expect("utf-8"),
    ];
    let measured_nb = job(Mpi::OpenMpi, 2, Some(&lib), &[], &calibrate, &nb_args, &dir);
    assert_eq!(measured_nb.code(), Some(0), "{measured_nb:?}");
    let nb_text = std::fs::read_to_string(&forms).expect("the thresholds file");
    let nb_names: Vec<&str> = nb_text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' ').map(|(name, _)| name))
        .collect();
    let sized: Vec<String> = names[15..].iter().map(|n| format!("{n}@2")).collect();
    assert_eq!(nb_names, sized, "{nb_text}");
    assert!(
        nb_text.contains("1 repetitions (minimum), 1 rounds"),
        "{nb_text}"
    );
    assert!(
        nb_text
            .lines()
            .any(|l| l.starts_with("# 8:") && l.contains(" 16:") && l.contains(" 32:")),
        "{nb_text}"
    );
    // The layer reads such a file (`ibcast@2 ...`): the nonblocking program passes with it.
    let with_sized = with_thresholds(
        Mpi::OpenMpi,
        &lib,
        2,
        "mpi-calibrated-nonblocking-read.txt",
        &nb_text,
        &program(Mpi::OpenMpi, "nonblocking.c"),
        &["1"],
    );
    assert_all_passed(&with_sized, 2, 50);
    let mut bad = nb_args;
    bad[7] = "sometimes";
    let refused = job(Mpi::OpenMpi, 2, Some(&lib), &[], &calibrate, &bad, &dir);
    assert_eq!(refused.code(), Some(2), "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("--forms: blocking, nonblocking or both"),
        "{refused:?}"
    );
    let mut bad = nb_args;
    bad[10] = "1";
    let refused = job(Mpi::OpenMpi, 2, Some(&lib), &[], &calibrate, &bad, &dir);
    assert_eq!(refused.code(), Some(2), "{refused:?}");
    assert!(refused.stderr.contains("--step: 2 to 64"), "{refused:?}");
    let mut bad = nb_args;
    bad[12] = "mean";
    let refused = job(Mpi::OpenMpi, 2, Some(&lib), &[], &calibrate, &bad, &dir);
    assert_eq!(refused.code(), Some(2), "{refused:?}");
    assert!(
        refused.stderr.contains("--statistic: median or minimum"),
        "{refused:?}"
    );
    // `--collectives` measures the collectives named alone, in the forms asked for (the file
    // then holds their lines only); a name it does not know is refused.
    let some = dir.join("mpi-calibrated-some.txt");
    let some_args = [
        "--max-bytes",
        "64",
        "--reps",
        "1",
        "--rounds",
        "1",
        "--collectives",
        "scatterv,gather",
        some.to_str().expect("utf-8"),
    ];
    let measured_some = job(
        Mpi::OpenMpi,
        2,
        Some(&lib),
        &[],
        &calibrate,
        &some_args,
        &dir,
    );
    assert_eq!(measured_some.code(), Some(0), "{measured_some:?}");
    let some_text = std::fs::read_to_string(&some).expect("the thresholds file");
    let some_names: Vec<&str> = some_text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' ').map(|(name, _)| name))
        .collect();
    assert_eq!(some_names, ["gather", "scatterv", "igather"], "{some_text}");
    let mut bad = some_args;
    bad[7] = "gather,allgatherw";
    let refused = job(Mpi::OpenMpi, 2, Some(&lib), &[], &calibrate, &bad, &dir);
    assert_eq!(refused.code(), Some(2), "{refused:?}");
    assert!(
        refused.stderr.contains("--collectives: names among"),
        "{refused:?}"
    );

    // A collective the file says `never` for is never served (the program makes blocking
    // calls only, of the collectives of SERVED).
    for (name, value) in &settings {
        if *value == "never" && !name.starts_with('i') {
            let Some(mpi_name) = SERVED
                .iter()
                .find(|n| n.to_lowercase() == format!("mpi_{name}"))
            else {
                assert!(name.starts_with("reduce_scatter"), "{name}");
                continue;
            };
            assert_eq!(
                stats(&done.stderr, mpi_name).map(|s| s.0),
                Some(0),
                "{done:?}"
            );
        }
    }
}

/// With `CIRCULANT_NODE_MAP=hosts` the layer starts circulant with the host names the ranks
/// exchange (for ranks a wrapper moved to other hosts) instead of MPI's shared-memory split:
/// every served collective is still served and correct.
#[test]
fn the_node_map_can_come_from_host_names() {
    let Some(lib) = layer(Mpi::Mpich) else { return };
    let exe = program(Mpi::Mpich, "collectives.c");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let done = job(
        Mpi::Mpich,
        3,
        Some(&lib),
        &[
            ("CIRCULANT_MPI", "on"),
            ("CIRCULANT_MPI_STATS", "1"),
            ("CIRCULANT_NODE_MAP", "hosts"),
        ],
        &exe,
        &["1"],
        &dir,
    );
    assert_all_passed(&done, 3, 100);
    let err = &done.stderr;
    for name in SERVED {
        let (served, _, _) =
            stats(err, name).unwrap_or_else(|| panic!("no statistics of {name}:\n{err}"));
        assert!(served > 0, "{name} never served:\n{err}");
    }
}

/// `program args` on `p` ranks placed on the emulated cluster's nodes by `layout`, the layer
/// preloaded: under Hydra each rank moves into its node (`ci/cluster rank`, which makes
/// circulant take the nodes from the host names), while MPICH, which Hydra told that all
/// ranks share one host, keeps its own traffic in shared memory (over TCP between the nodes'
/// namespaces its finalize was seen to hang, with or without the layer); under Open MPI an
/// orted in each node starts that node's ranks (`ci/cluster openmpi`, btl tcp).
fn cluster_job(
    mpi: Mpi,
    layout: &str,
    p: usize,
    lib: &Path,
    env: &[(&str, &str)],
    program: &Path,
    args: &[&str],
) -> Finished {
    let preload = format!("LD_PRELOAD={}", lib.display());
    let mut command = match mpi {
        Mpi::Mpich => {
            let mut c = Command::new("mpiexec.hydra");
            c.args(["-n", &p.to_string()])
                .arg(cluster::script())
                .args(["rank", "env", &preload]);
            c
        }
        Mpi::OpenMpi => {
            let mut c = cluster::cluster(&["openmpi", &p.to_string()]);
            c.args(["--mca", "btl", "tcp,self", "-x", &preload]);
            for (k, _) in env {
                c.args(["-x", k]);
            }
            c.envs([
                ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
                ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
            ]);
            c
        }
    };
    command
        .arg(program)
        .args(args)
        .current_dir(env!("CARGO_TARGET_TMPDIR"))
        .env("CLUSTER_LAYOUT", layout);
    for var in [
        "CIRCULANT_MPI",
        "CIRCULANT_MPI_STATS",
        "CIRCULANT_MPI_THRESHOLDS",
    ] {
        command.env_remove(var);
    }
    command.envs(env.iter().copied());
    Started::new(command).finish(LIMIT)
}

/// Every served collective on the emulated cluster under both MPIs, with the ranks on several
/// nodes over the network provider and shm inside a node: 2 nodes of 2 ranks, and 5 ranks
/// placed round robin on 3 nodes (2 + 2 + 1, no node's ranks consecutive); then the
/// nonblocking and persistent forms on 2 nodes of 2 ranks. All checks pass and every
/// collective was served.
#[test]
fn every_collective_on_the_emulated_cluster() {
    // Dropped after the cluster: no job on this host starts until it is down again.
    let _alone = HOST_NETWORK.write().unwrap_or_else(|e| e.into_inner());
    let Some(_cluster) = cluster::Cluster::up(3) else {
        return;
    };
    for mpi in [Mpi::Mpich, Mpi::OpenMpi] {
        let Some(lib) = layer(mpi) else { return };
        let exe = program(mpi, "collectives.c");
        for (layout, p) in [("blocks:2", 4), ("cyclic:3", 5)] {
            let done = cluster_job(
                mpi,
                layout,
                p,
                &lib,
                &[
                    ("CIRCULANT_MPI", "on"),
                    ("CIRCULANT_MPI_STATS", "1"),
                    ("CIRCULANT_PROVIDER", "tcp;ofi_rxm"),
                ],
                &exe,
                &["1"],
            );
            assert_all_passed(&done, p, 100);
            let err = &done.stderr;
            for name in SERVED {
                let (served, _, _) = stats(err, name)
                    .unwrap_or_else(|| panic!("{mpi:?} {layout}: no statistics of {name}:\n{err}"));
                assert!(served > 0, "{mpi:?} {layout}: {name} never served:\n{err}");
            }
        }
        // The nonblocking and persistent forms, 2 nodes of 2 ranks.
        let exe = program(mpi, "nonblocking.c");
        let done = cluster_job(
            mpi,
            "blocks:2",
            4,
            &lib,
            &[
                ("CIRCULANT_MPI", "on"),
                ("CIRCULANT_MPI_STATS", "1"),
                ("CIRCULANT_PROVIDER", "tcp;ofi_rxm"),
            ],
            &exe,
            &["3"],
        );
        assert_all_passed(&done, 4, 100);
        for name in SERVED_NONBLOCKING {
            let (served, _, _) = stats(&done.stderr, name).expect("statistics");
            assert!(served > 0, "{mpi:?}: {name} never served:\n{}", done.stderr);
        }
    }
}
