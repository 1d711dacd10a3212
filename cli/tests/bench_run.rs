//! `circulant bench` measuring inside real jobs under the built-in launcher: its argument
//! handling and its CSV, read back with the bench csv module. No timing is asserted.

use std::path::PathBuf;
use std::process::{Command, Output};

use circulant::plan::distribution::Distribution;
use circulant_cli::report::csv::read_file;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_circulant");

/// `circulant run -n N --timeout 120 -- circulant bench ARGS...`.
fn bench_job(n: usize, args: &[&str]) -> Output {
    bench_job_with(n, args, None)
}

/// [`bench_job`] with `CIRCULANT_O` set to `o`, or unset.
fn bench_job_with(n: usize, args: &[&str], o: Option<&str>) -> Output {
    let mut command = Command::new(BIN);
    match o {
        Some(o) => command.env("CIRCULANT_O", o),
        None => command.env_remove("CIRCULANT_O"),
    };
    command
        .args([
            "run",
            "-n",
            &n.to_string(),
            "--timeout",
            "120",
            "--",
            BIN,
            "bench",
        ])
        .args(args)
        .env("CIRCULANT_TIMEOUT", "60")
        .output()
        .expect("circulant run starts")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench_run");
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

#[test]
fn bcast_job_writes_a_csv_the_report_reads() {
    let csv = scratch("bcast.csv");
    let out = bench_job(
        2,
        &[
            "--op",
            "bcast",
            "--max-bytes",
            "1000",
            "--reps",
            "2",
            "--overhead",
            "--csv",
            csv.to_str().expect("utf-8 path"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    // The table on stdout, once (rank 0).
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.matches("circulant bench: p = 2").count(),
        1,
        "{stdout}"
    );

    let m = read_file(&csv).expect("the CSV parses");
    assert!(m.alpha_beta.is_some(), "the run's α and β are in the file");
    // The measured per-write overhead, in the table's first line and in the file.
    assert!(
        stdout.lines().next().is_some_and(|l| l.contains(", o = ")),
        "{stdout}"
    );
    let o = o_of(&csv);
    assert!(o.is_finite() && o >= 0.0, "{o}");
    let sizes = [1u64, 2, 10, 20, 100, 200, 1000];
    for &bytes in &sizes {
        let rows: Vec<_> = m.records.iter().filter(|r| r.bytes == bytes).collect();
        let names: Vec<&str> = rows.iter().map(|r| r.algorithm.as_str()).collect();
        for want in ["circulant-bcast", "binomial-bcast"] {
            assert!(names.contains(&want), "{bytes} B: {names:?}");
        }
        for r in rows {
            assert_eq!(
                (r.library.as_str(), r.op.as_str(), r.distribution.as_str()),
                ("circulant", "bcast", "-")
            );
            assert_eq!((r.p, r.total_bytes, r.reps), (2, bytes, 2));
            assert!(r.min_s > 0.0 && r.min_s <= r.median_s, "{r:?}");
            // Entry to first post is part of every rank's call, so of the slowest one's
            // (`--overhead`).
            let overhead = r.overhead_s.expect("the overhead column");
            assert!(overhead > 0.0 && overhead <= r.median_s, "{r:?}");
        }
    }
    assert!(m.records.iter().all(|r| sizes.contains(&r.bytes)));
}

/// The `# o_s=` line of a bench CSV.
fn o_of(csv: &PathBuf) -> f64 {
    std::fs::read_to_string(csv)
        .expect("the CSV")
        .lines()
        .find_map(|l| l.strip_prefix("# o_s="))
        .expect("a `# o_s=` line")
        .parse()
        .expect("o is a number")
}

#[test]
fn a_configured_o_is_kept_and_an_unset_one_measured() {
    let csv = scratch("o.csv");
    let path = csv.to_str().expect("utf-8 path");
    let args = [
        "--op",
        "bcast",
        "--max-bytes",
        "1",
        "--reps",
        "1",
        "--csv",
        path,
    ];
    let out = bench_job_with(2, &args, Some("3e-6"));
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(o_of(&csv), 3e-6);
    let out = bench_job_with(2, &args, None);
    assert!(out.status.success(), "{}", text(&out));
    // Measured: not shm's configured estimate of 0.1 µs.
    let o = o_of(&csv);
    assert!(o.is_finite() && o >= 0.0 && o != 1e-7, "{o}");
}

#[test]
fn chosen_algorithms_and_distributions_only() {
    let csv = scratch("agv.csv");
    let out = bench_job(
        3,
        &[
            "--op",
            "allgatherv,allreduce",
            "--dist",
            "spike,geometric",
            "--algorithms",
            "circulant-allgatherv,recursive-doubling-allreduce",
            "--min-bytes",
            "10",
            "--max-bytes",
            "100",
            "--reps",
            "2",
            "--alpha",
            "1e-5",
            "--beta",
            "1e-9",
            "--no-progress",
            "--csv",
            csv.to_str().expect("utf-8 path"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(out.stderr.is_empty(), "--no-progress: {}", text(&out));
    let m = read_file(&csv).expect("the CSV parses");
    let (ab, _) = m.alpha_beta.expect("α and β");
    assert_eq!((ab.alpha_s, ab.beta_s_per_byte), (1e-5, 1e-9));
    // Without `--overhead` the calls do not measure it: no column.
    assert!(m.records.iter().all(|r| r.overhead_s.is_none()));
    let mut seen: Vec<(String, String, String, u64, u64)> = m
        .records
        .iter()
        .map(|r| {
            (
                r.op.clone(),
                r.algorithm.clone(),
                r.distribution.clone(),
                r.bytes,
                r.total_bytes,
            )
        })
        .collect();
    seen.sort();
    let mut want = Vec::new();
    for d in [Distribution::Geometric, Distribution::Spike] {
        for c in [10usize, 20, 100] {
            let total = d.counts(3, c).iter().sum::<usize>() as u64;
            want.push((
                "allgatherv".to_string(),
                "circulant-allgatherv".to_string(),
                d.name().to_string(),
                c as u64,
                total,
            ));
        }
    }
    // allreduce: int32 elements, so the size is rounded down to a multiple of 4.
    for (bytes, total) in [(10u64, 8u64), (20, 20), (100, 100)] {
        want.push((
            "allreduce".into(),
            "recursive-doubling-allreduce".into(),
            "-".into(),
            bytes,
            total,
        ));
    }
    want.sort();
    assert_eq!(seen, want);
}

#[test]
fn the_automatic_choice_is_measured_under_the_algorithm_it_took() {
    let csv = scratch("auto.csv");
    let out = bench_job(
        3,
        &[
            "--op",
            "bcast",
            "--algorithms",
            "auto,binomial-bcast",
            "--min-bytes",
            "10",
            "--max-bytes",
            "10000",
            "--reps",
            "2",
            "--no-progress",
            "--csv",
            csv.to_str().expect("utf-8 path"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let m = read_file(&csv).expect("the CSV parses");
    let mut auto: Vec<(u64, String)> = m
        .records
        .iter()
        .filter_map(|r| Some((r.bytes, r.algorithm.strip_prefix("auto:")?.to_string())))
        .collect();
    auto.sort();
    let sizes: Vec<u64> = auto.iter().map(|(b, _)| *b).collect();
    assert_eq!(sizes, [10, 20, 100, 200, 1000, 2000, 10000], "{auto:?}");
    // One node: a broadcast runs on the shared segment at every size (in chunks beyond its
    // area).
    for (bytes, name) in &auto {
        assert_eq!(name, "segment-bcast", "{bytes} B");
    }
    let binomial = m
        .records
        .iter()
        .filter(|r| r.algorithm == "binomial-bcast")
        .count();
    assert_eq!(binomial, 7);
}

/// A bench job of 3 ranks in `form` (`--nonblocking`, `--persistent`) with `more`
/// arguments: every operation measured, no wrong data, and the printed table and the CSV
/// name the form; the printed text and the CSV's records.
fn measured_in_form(
    form: &str,
    more: &[&str],
) -> (String, circulant_cli::report::csv::Measurements) {
    let name = form.trim_start_matches("--");
    let csv = scratch(&format!("{name}.csv"));
    let args = [
        &[form, "--algorithms", "auto,binomial-bcast,ring-allgather"][..],
        more,
        &["--no-progress", "--csv", csv.to_str().expect("utf-8 path")],
    ]
    .concat();
    let out = bench_job(3, &args);
    assert!(out.status.success(), "{}", text(&out));
    let printed = text(&out);
    assert!(!printed.contains("WRONG"), "{printed}");
    assert!(
        printed.contains(&format!("of the {name} calls")),
        "{printed}"
    );
    let written = std::fs::read_to_string(&csv).expect("the CSV");
    assert!(written.contains(&format!("{name} calls")), "{written}");
    let m = read_file(&csv).expect("the CSV parses");
    for op in ["bcast", "allgather", "allgatherv", "allreduce"] {
        assert!(m.records.iter().any(|r| r.op == op), "{op} missing");
    }
    (printed, m)
}

/// `--nonblocking` measures the `i*` forms (started, then waited for): every operation's
/// data checked, and the output says which forms it measured.
#[test]
fn the_nonblocking_forms_are_measured_and_named() {
    measured_in_form("--nonblocking", &["--max-bytes", "10000", "--reps", "2"]);
    let json = bench_job(
        2,
        &[
            "--nonblocking",
            "--op",
            "allreduce",
            "--max-bytes",
            "100",
            "--reps",
            "1",
            "--json",
            "--no-progress",
        ],
    );
    assert!(json.status.success(), "{}", text(&json));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("one JSON object");
    assert_eq!(v["forms"], "nonblocking");
    for r in v["rows"].as_array().expect("rows") {
        assert_eq!(r["wrong"], 0);
    }
}

/// `--persistent` measures persistent requests (made once per algorithm and size, started at
/// each repetition): every operation's data checked, the automatic choice named by what it
/// took, and the output says which forms it measured; it excludes `--nonblocking`.
#[test]
fn the_persistent_forms_are_measured_and_named() {
    let more = [
        "--dist",
        "spike,regular",
        "--max-bytes",
        "20000",
        "--reps",
        "3",
        "--warmup",
        "2",
    ];
    let (printed, m) = measured_in_form("--persistent", &more);
    assert!(printed.contains("plan: made once per request"), "{printed}");
    for op in ["bcast", "allgather", "allgatherv", "allreduce"] {
        assert!(
            m.records
                .iter()
                .any(|r| r.op == op && r.algorithm.starts_with("auto:")),
            "{op}: no automatic row"
        );
    }
    for r in m
        .records
        .iter()
        .filter(|r| r.algorithm.starts_with("auto:"))
    {
        assert_ne!(r.algorithm, "auto:auto", "{r:?}");
    }
    let both = Command::new(BIN)
        .args(["bench", "--persistent", "--nonblocking"])
        .output()
        .expect("circulant starts");
    assert!(!both.status.success());
    assert!(
        String::from_utf8_lossy(&both.stderr).contains("cannot be used with"),
        "{}",
        text(&both)
    );
}

/// `--overlap` measures the nonblocking forms alone, a computation alone as long as the call,
/// and both together: every operation's data checked, the three figures in the table, the CSV
/// (which `--compare` still reads) and JSON, each overlap within 0–100 % and consistent with
/// the medians it comes from, and the computation as long as the call at least; it excludes
/// the other forms.
#[test]
fn overlap_is_measured_with_its_figures() {
    let (printed, m) = measured_in_form("--overlap", &["--max-bytes", "20000", "--reps", "3"]);
    assert!(
        printed.contains(" alone ") && printed.contains(" overlap"),
        "{printed}"
    );
    assert!(!m.records.is_empty());
    let json = bench_job(
        2,
        &[
            "--overlap",
            "--op",
            "allreduce,bcast",
            "--min-bytes",
            "1000",
            "--max-bytes",
            "100000",
            "--reps",
            "3",
            "--json",
            "--no-progress",
        ],
    );
    assert!(json.status.success(), "{}", text(&json));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("one JSON object");
    assert_eq!(v["forms"], "overlap");
    let rows = v["rows"].as_array().expect("rows");
    assert!(!rows.is_empty());
    for r in rows {
        assert_eq!(r["wrong"], 0, "{r}");
        let figure = |k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k} in {r}"));
        let (alone, compute, both) = (figure("alone_s"), figure("compute_s"), figure("min_s"));
        let pct = figure("overlap_pct");
        assert!((0.0..=100.0).contains(&pct), "{r}");
        let expected = (100.0 * (1.0 - (both - compute) / alone)).clamp(0.0, 100.0);
        assert!((pct - expected).abs() < 1e-6, "{r}");
        // The computation lasts the call's least time alone at least (a clock, not a count).
        assert!(alone > 0.0 && compute >= alone * 0.999, "{r}");
    }
    for other in ["--nonblocking", "--persistent"] {
        let both = Command::new(BIN)
            .args(["bench", "--overlap", other])
            .output()
            .expect("circulant starts");
        assert!(!both.status.success());
        assert!(
            String::from_utf8_lossy(&both.stderr).contains("cannot be used with"),
            "{}",
            text(&both)
        );
    }
}

#[test]
fn json_output() {
    let out = bench_job(
        2,
        &[
            "--op",
            "allgather",
            "--max-bytes",
            "10",
            "--reps",
            "1",
            "--json",
            "--no-progress",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    assert_eq!(v["p"], 2);
    assert_eq!(v["forms"], "blocking");
    let rows = v["rows"].as_array().expect("rows");
    assert!(!rows.is_empty());
    for r in rows {
        assert_eq!(r["op"], "allgather");
        assert_eq!(r["wrong"], 0);
        assert!(r["plan_s"].as_f64().is_some());
    }
}

#[test]
fn bad_arguments_are_clear_errors() {
    let cases: [(&[&str], &str); 5] = [
        (&["--op", "scan"], "invalid value 'scan'"),
        (
            &["--dist", "zipf", "--op", "allgatherv"],
            "unknown distribution",
        ),
        (&["--algorithms", "fastest-bcast"], "unknown algorithm"),
        (
            &["--min-bytes", "100", "--max-bytes", "10"],
            "exceeds --max-bytes",
        ),
        (&["--root", "5", "--op", "bcast"], "--root 5 is not below"),
    ];
    for (args, message) in cases {
        let out = bench_job(2, args);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(text(&out).contains(message), "{args:?}: {}", text(&out));
    }
}

/// `examples/bcast_pingpong`, which `cargo test` builds beside the test binaries.
fn pingpong_example() -> PathBuf {
    let exe = std::env::current_exe().expect("this test's path");
    let debug = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let example = debug.join("examples").join("bcast_pingpong");
    assert!(
        example.exists(),
        "{} is built by cargo test --workspace (an example of the library)",
        example.display()
    );
    example
}

#[test]
fn the_pingpong_example_prints_a_broadcast_time_and_refuses_one_rank() {
    let example = pingpong_example();
    let example = example.to_str().expect("utf-8 path");
    let forms = [None, Some("nonblocking"), Some("persistent")];
    for (provider, form) in ["shm", "tcp;ofi_rxm"]
        .into_iter()
        .flat_map(|p| forms.map(|f| (p, f)))
    {
        let out = Command::new(BIN)
            .args([
                "run",
                "-n",
                "2",
                "--provider",
                provider,
                "--timeout",
                "120",
                "--",
            ])
            .args([example, "200", "8"])
            .args(form)
            .output()
            .expect("circulant run starts");
        let all = text(&out);
        assert!(out.status.success(), "{provider} {form:?}: {all}");
        let named = format!(", {}: ", form.unwrap_or("blocking"));
        let line = all
            .lines()
            .find(|l| l.starts_with("bcast of 8 B, p = 2,") && l.contains(&named))
            .unwrap_or_else(|| panic!("{provider} {form:?}: {all}"));
        let us: f64 = line
            .split(": ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("a time in {line}"));
        assert!(us.is_finite() && us > 0.0, "{line}");
    }
    let out = Command::new(BIN)
        .args([
            "run",
            "-n",
            "2",
            "--timeout",
            "60",
            "--",
            example,
            "10",
            "8",
            "eager",
        ])
        .output()
        .expect("circulant run starts");
    assert!(!out.status.success());
    assert!(text(&out).contains("unknown form"), "{}", text(&out));
    let out = Command::new(BIN)
        .args(["run", "-n", "1", "--timeout", "60", "--", example])
        .output()
        .expect("circulant run starts");
    assert!(!out.status.success());
    assert!(
        text(&out).contains("run it with two ranks or more"),
        "{}",
        text(&out)
    );
}

/// The common start needs one clock: where rank 1's monotonic clock runs 100000 s ahead (a
/// time namespace stands for another host's clock), `circulant bench` and the ranks of
/// `circulant demo` stop with an error that says so instead of timing every
/// call late or waiting for the other clock.
#[test]
fn ranks_whose_clocks_differ_are_refused() {
    if !common::time_namespaces() {
        return;
    }
    let job = |script: &str| {
        Command::new(BIN)
            .args([
                "run",
                "-n",
                "2",
                "--timeout",
                "120",
                "--",
                "sh",
                "-c",
                script,
            ])
            .env("CIRCULANT_TIMEOUT", "60")
            .output()
            .expect("circulant run starts")
    };
    for ranks in [
        format!("{BIN} bench --op bcast --max-bytes 8 --reps 2"),
        format!("{BIN} demo --rank-of-demo --reps=2"),
    ] {
        let script = format!(
            "if [ \"$PMI_RANK\" = 1 ]; then exec unshare --time --fork --monotonic 100000 \
             {ranks}; else exec {ranks}; fi"
        );
        let out = job(&script);
        assert!(!out.status.success(), "{}", text(&out));
        // The ranks decide alike (an allreduce of the answer); the launcher may stop a rank
        // before it prints, so at least one error is asked for.
        assert!(
            text(&out).contains("the ranks' monotonic clocks differ by more than 1 ms"),
            "{}",
            text(&out)
        );
        // Without the offset the same job measures.
        let out = job(&ranks);
        assert!(out.status.success(), "{}", text(&out));
    }
}
