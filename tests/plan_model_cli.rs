//! `circulant model` answers for every collective, in text and JSON, at p = 10^6.

use std::process::Command;

fn model(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_circulant"))
        .arg("model")
        .args(args)
        .output()
        .expect("the binary runs")
}

#[test]
fn json_for_broadcast_at_a_million_ranks() {
    let out = model(&[
        "--op", "bcast", "-p", "1000000", "--bytes", "1048576", "--json",
    ]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["op"], "bcast");
    assert_eq!(v["p"], 1_000_000);
    assert_eq!(v["bytes"], 1_048_576);
    let bound = v["lower_bound_s"].as_f64().unwrap();
    let algs = v["algorithms"].as_array().unwrap();
    assert!(algs.len() >= 4);
    for a in algs {
        assert!(a["time_s"].as_f64().unwrap() >= bound);
        assert!(a["rounds"].as_u64().is_some());
    }
    // Sorted by time; the circulant broadcast wins at 1 MiB.
    assert_eq!(algs[0]["name"], "circulant-bcast");
    // n − 1 + q rounds with q = 20.
    assert!(algs[0]["rounds"].as_u64().unwrap() >= 20);
}

#[test]
fn every_op_answers() {
    for op in [
        "bcast",
        "reduce",
        "allreduce",
        "scan",
        "exscan",
        "allgather",
        "allgatherv",
        "scatter",
        "gather",
        "scatterv",
        "gatherv",
        "alltoall",
        "barrier",
        "intergroup",
    ] {
        let out = model(&["--op", op, "-p", "36", "--bytes", "4096"]);
        assert!(
            out.status.success(),
            "{op}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("lower bound"));
    }
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    for args in [
        vec!["--op", "bcast", "-p", "0", "--bytes", "10"],
        vec!["--op", "bcast", "-p", "4", "--bytes", "10", "--root", "4"],
        vec![
            "--op",
            "allgatherv",
            "-p",
            "4",
            "--bytes",
            "10",
            "--dist",
            "nope",
        ],
        vec!["--op", "bcast", "-p", "4", "--bytes", "10", "--alpha", "-1"],
        vec!["--op", "nope", "-p", "4", "--bytes", "10"],
    ] {
        let out = model(&args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
    }
}
