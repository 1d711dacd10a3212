//! The C and Fortran interface as a user meets it: `ci/install` into a prefix (once per test
//! binary), the examples built against the installed library with pkg-config, then run as
//! jobs under the installed `circulant run` with their results checked; the out-of-band
//! bootstrap with an allgather over files done by the example itself; bad input; the static
//! library.
//!
//! Every job is bounded by the launcher's `--timeout` (it stops every rank it started), and
//! the out-of-band ranks, started here, are killed if they outlive their deadline.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The prefix `ci/install` filled, shared by the tests of this binary.
fn prefix() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let dir = Path::new(ROOT).join("target/capi-test");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create target/capi-test");
        let prefix = dir.join("prefix");
        // The test profile: the build `cargo test` just made, nothing compiled twice.
        let out = Command::new(Path::new(ROOT).join("ci/install"))
            .args(["--profile", "test"])
            .arg(&prefix)
            .output()
            .expect("ci/install starts");
        assert!(out.status.success(), "ci/install failed:\n{}", text(&out));
        prefix
    })
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `pkg-config ARGS circulant` against the installed `.pc`, split into words.
fn pkg_config(args: &[&str]) -> Vec<String> {
    let out = Command::new("pkg-config")
        .args(args)
        .arg("circulant")
        .env("PKG_CONFIG_PATH", prefix().join("lib/pkgconfig"))
        .output()
        .expect("pkg-config starts (ci/deps installs it)");
    assert!(out.status.success(), "pkg-config failed:\n{}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Compiles `sources` with `compiler` as `cc prog.c $(pkg-config --cflags --libs circulant)`.
fn build(compiler: &str, sources: &[PathBuf], name: &str, extra: &[&str]) -> PathBuf {
    let dir = prefix().parent().expect("prefix has a parent").join(name);
    std::fs::create_dir_all(&dir).expect("build directory");
    let exe = dir.join(name);
    let out = Command::new(compiler)
        .current_dir(&dir)
        .args(pkg_config(&["--cflags"]))
        .args(sources)
        .args(extra)
        .args(pkg_config(&["--libs"]))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("{compiler} starts (ci/deps installs it): {e}"));
    assert!(out.status.success(), "{compiler} failed:\n{}", text(&out));
    exe
}

/// examples/c/NAME.c, warnings as errors.
fn build_c(name: &str) -> PathBuf {
    let source = example(&format!("c/{name}.c"));
    build("cc", &[source], name, &["-Wall", "-Werror"])
}

fn example(path: &str) -> PathBuf {
    Path::new(ROOT).join("examples").join(path)
}

/// `circulant run -n N --timeout 120 -- EXE` with the installed launcher.
fn run_job(n: usize, exe: &Path) -> Output {
    Command::new(prefix().join("bin/circulant"))
        .args(["run", "-n", &n.to_string(), "--timeout", "120", "--"])
        .arg(exe)
        .env("CIRCULANT_TIMEOUT", "60")
        .output()
        .expect("circulant run starts")
}

/// The "rank R: N passed, M failed" lines of a job: (rank, passed, failed) per rank.
fn summaries(out: &str) -> Vec<(usize, usize, usize)> {
    let mut found: Vec<(usize, usize, usize)> = out
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("rank ")?;
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

fn assert_every_rank_passed(out: &Output, n: usize, at_least: usize) {
    let all = text(out);
    assert!(out.status.success(), "the job failed:\n{all}");
    let found = summaries(&all);
    assert_eq!(found.len(), n, "one summary per rank expected:\n{all}");
    for (i, &(rank, passed, failed)) in found.iter().enumerate() {
        assert_eq!(rank, i, "{all}");
        assert_eq!(failed, 0, "{all}");
        assert!(
            passed >= at_least,
            "rank {rank} ran {passed} checks:\n{all}"
        );
    }
}

#[test]
fn pkg_config_points_at_the_installed_header_and_library() {
    let prefix = prefix();
    let cflags = pkg_config(&["--cflags"]);
    assert_eq!(cflags, [format!("-I{}", prefix.join("include").display())]);
    let libs = pkg_config(&["--libs"]);
    assert!(
        libs.contains(&format!("-L{}", prefix.join("lib").display())),
        "{libs:?}"
    );
    assert!(libs.contains(&"-lcirculant".to_string()), "{libs:?}");
    for file in [
        "include/circulant.h",
        "include/circulant.f90",
        "lib/libcirculant.so",
        "lib/libcirculant.a",
        "bin/circulant",
    ] {
        assert!(prefix.join(file).is_file(), "{file} not installed");
    }
}

#[test]
fn c_collectives_blocking_nonblocking_and_persistent_under_run_n4() {
    let exe = build_c("collectives");
    let out = run_job(4, &exe);
    // 57 to 60 checks per rank: a few are made on some ranks only.
    assert_every_rank_passed(&out, 4, 57);
}

#[test]
fn the_readme_c_example_builds_and_runs() {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).expect("README");
    let start = readme.find("```c\n").expect("a C block in the README") + 5;
    let len = readme[start..].find("```").expect("the block ends");
    let dir = prefix().parent().expect("parent").join("readme");
    std::fs::create_dir_all(&dir).expect("dir");
    let source = dir.join("readme.c");
    std::fs::write(&source, &readme[start..start + len]).expect("write");
    let exe = build("cc", &[source], "readme", &["-Wall", "-Werror"]);
    let out = run_job(3, &exe);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    for rank in 0..3 {
        assert!(all.contains(&format!("rank {rank} of 3: sum 3\n")), "{all}");
    }
}

#[test]
fn c_bad_input_gives_codes_and_messages_and_wrong_collectives_fail_on_every_rank() {
    let exe = build_c("bad_input");
    let out = run_job(2, &exe);
    assert_every_rank_passed(&out, 2, 46);
    let all = text(&out);
    for message in [
        "circulant_bcast(c, NULL, 16, 0) -> invalid argument: buf is NULL",
        "circulant_barrier(c) after circulant_bcast(c, NULL, 16, 0) -> the communicator is unusable",
        "circulant_bcast(c, a, sizeof a, 0) -> a peer failed",
        "unknown dtype 42",
        "unknown op 99",
        "root 2 is out of range for 2 ranks",
        "the send buffer has 4 bytes, 3 expected",
        "operation is in flight on this communicator",
        "circulant_reduce_scatter(c, a, b, NULL, CIRCULANT_INT32, CIRCULANT_SUM) -> invalid argument: counts is NULL",
        "circulant_reduce_scatter_block(c, NULL, b, 1, CIRCULANT_INT32, CIRCULANT_SUM) -> invalid argument: send is NULL",
        // SIZE_MAX / 2 elements per rank, two ranks.
        "&refused) -> invalid argument: count 18446744073709551614 overflows",
        "reduce_scatter_init (operation 3): count 9223372036854775811 overflows",
    ] {
        assert!(all.contains(message), "no \"{message}\" in:\n{all}");
    }
}

#[test]
fn the_static_library_links_and_runs_alone() {
    let prefix = prefix();
    // The archive instead of -lcirculant, with the system libraries it needs.
    let libs: Vec<String> = pkg_config(&["--libs", "--static"])
        .into_iter()
        .filter(|w| w != "-lcirculant" && !w.starts_with("-L") && !w.starts_with("-Wl"))
        .collect();
    let dir = prefix.parent().expect("parent").join("static");
    std::fs::create_dir_all(&dir).expect("dir");
    let exe = dir.join("bad_input_static");
    let out = Command::new("cc")
        .args(pkg_config(&["--cflags"]))
        .arg(example("c/bad_input.c"))
        .arg(prefix.join("lib/libcirculant.a"))
        .args(&libs)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("cc starts");
    assert!(out.status.success(), "static link failed:\n{}", text(&out));
    // No launcher: a singleton.
    let out = Command::new(&exe)
        .env_remove("PMI_FD")
        .env_remove("PMI_RANK")
        .env_remove("PMI_SIZE")
        .output()
        .expect("runs");
    assert_every_rank_passed(&out, 1, 34);
}

#[test]
fn fortran_module_under_run_n4() {
    let dir = prefix().parent().expect("parent").join("fortran");
    std::fs::create_dir_all(&dir).expect("dir");
    let module_dir = format!("-J{}", dir.display());
    let exe = build(
        "gfortran",
        &[
            prefix().join("include/circulant.f90"),
            example("fortran/collectives.f90"),
        ],
        "fortran",
        &["-std=f2008", "-Wall", &module_dir],
    );
    let out = run_job(4, &exe);
    // Blocking, nonblocking, persistent and in-place checks, and the refused call's two.
    assert_every_rank_passed(&out, 4, 18);
}

#[test]
fn c_peer_failures_give_distinct_codes_within_the_deadline() {
    let exe = build_c("failures");
    let started = Instant::now();
    let out = Command::new(prefix().join("bin/circulant"))
        .args(["run", "-n", "3", "--keep-going", "--timeout", "120", "--"])
        .arg(&exe)
        .env("CIRCULANT_TIMEOUT", "2")
        .output()
        .expect("circulant run starts");
    let all = text(&out);
    assert!(started.elapsed() < Duration::from_secs(60), "{all}");
    let lines = |phase: &str| -> Vec<String> {
        all.lines()
            .filter(|l| l.contains(&format!(": {phase}: code ")))
            .map(str::to_string)
            .collect()
    };
    // Disagreeing ranks: the one that noticed says mismatch, the others were told. A root
    // whose 8 bytes go the eager way waits for no token, so it may complete the call (its data
    // are its own) and learn of the failure with its next call.
    let mismatch = lines("mismatch");
    assert_eq!(mismatch.len(), 3, "{all}");
    assert!(mismatch.iter().any(|l| l.contains("code 4 ")), "{all}");
    let root_completed = mismatch
        .iter()
        .any(|l| l.starts_with("rank 0: ") && l.contains("code 0 "));
    assert!(
        mismatch.iter().all(|l| l.contains("code 4 ")
            || l.contains("code 2 ")
            || (l.starts_with("rank 0: ") && root_completed)),
        "{all}"
    );
    assert!(
        lines("after").iter().all(|l| l.contains("code 6 ")
            || (root_completed && l.starts_with("rank 0: ") && l.contains("code 2 "))),
        "{all}"
    );
    // Rank 1 is gone: the others fail, one by its deadline or by seeing rank 1's process end
    // (shm peers' processes are watched when written to), the other so or told by that one.
    let gone = lines("peer gone");
    assert_eq!(gone.len(), 2, "{all}");
    assert!(
        gone.iter()
            .any(|l| (l.contains("code 3 ") && l.contains("timed out"))
                || (l.contains("code 2 ") && l.contains("rank 1's process has ended"))),
        "{all}"
    );
    assert!(
        gone.iter()
            .all(|l| l.contains("code 3 ") || l.contains("code 2 ")),
        "{all}"
    );
}

/// Ranks this test started itself: killed if still running when dropped.
struct Ranks(Vec<Child>);

impl Drop for Ranks {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn c_init_oob_with_an_allgather_over_files() {
    let exe = build_c("oob");
    let exchange = prefix().parent().expect("parent").join("oob-exchange");
    let _ = std::fs::remove_dir_all(&exchange);
    std::fs::create_dir_all(&exchange).expect("exchange dir");
    let n = 3;
    let mut ranks = Ranks(Vec::new());
    for rank in 0..n {
        let child = Command::new(&exe)
            .arg(&exchange)
            .arg(rank.to_string())
            .arg(n.to_string())
            .env_remove("PMI_FD")
            .env_remove("PMI_RANK")
            .env_remove("PMI_SIZE")
            .env("CIRCULANT_TIMEOUT", "60")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("oob rank starts");
        ranks.0.push(child);
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while ranks
        .0
        .iter_mut()
        .any(|c| c.try_wait().ok().flatten().is_none())
    {
        assert!(
            Instant::now() < deadline,
            "the out-of-band ranks did not finish in time"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut outputs = Vec::new();
    for child in std::mem::take(&mut ranks.0) {
        outputs.push(child.wait_with_output().expect("output"));
    }
    for (rank, out) in outputs.iter().enumerate() {
        let all = text(out);
        assert!(out.status.success(), "rank {rank} failed:\n{all}");
        assert!(
            all.contains(&format!("oob rank {rank} of {n}")) && all.contains(": ok"),
            "rank {rank}:\n{all}"
        );
    }
    let _ = std::fs::remove_dir_all(&exchange);
}
