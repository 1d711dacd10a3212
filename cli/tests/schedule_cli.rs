//! The `schedule` and `verify` subcommands against their command-line contract.

use std::process::Command;

use circulant::schedule::verify::{block_counts, verify_rows};

fn circulant(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_circulant"))
        .args(args)
        .output()
        .expect("run circulant")
}

#[derive(serde::Deserialize)]
struct Json {
    p: usize,
    q: usize,
    skips: Vec<usize>,
    baseblock: Vec<usize>,
    recv: Vec<Vec<i32>>,
    send: Vec<Vec<i32>>,
}

#[test]
fn schedule_json_is_one_line_and_passes_the_verifier() {
    for p in [1usize, 2, 20, 33, 100] {
        let out = circulant(&["schedule", "-p", &p.to_string(), "--json"]);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(text.lines().count(), 1);
        let json: Json = serde_json::from_str(&text).unwrap();
        assert_eq!((json.p, json.skips.len()), (p, json.q + 1));
        assert_eq!(json.skips.last(), Some(&p));
        assert_eq!(json.baseblock.len(), p);
        assert_eq!(json.baseblock[0], json.q);
        assert_eq!((json.recv.len(), json.send.len()), (p, p));
        assert_eq!(
            verify_rows(&json.recv, &json.send, &block_counts(json.q)),
            Ok(())
        );
    }
    let text = String::from_utf8(circulant(&["schedule", "-p", "20", "--json"]).stdout).unwrap();
    let json: Json = serde_json::from_str(&text).unwrap();
    assert_eq!(json.recv[4], [-3, -4, 0, -2, -1]);
    assert_eq!(json.send[0], [0, 1, 2, 3, 4]);
}

#[test]
fn schedule_table_has_the_layout_of_table_1() {
    let out = circulant(&["schedule", "-p", "20"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // Header, ranks, baseblocks, q receive rows, q send rows.
    assert_eq!(lines.len(), 3 + 2 * 5);
    assert!(lines[1].starts_with("Procs r"));
    assert!(lines[2].starts_with("Baseblock"));
    assert!(lines[3].starts_with("Recv schedule"));
    assert!(lines[8].starts_with("Send schedule"));
    let cells = |l: &str| -> Vec<i32> {
        l.split(|c: char| c == '|' || c.is_whitespace())
            .filter_map(|c| c.parse().ok())
            .collect()
    };
    assert_eq!(
        cells(lines[3]),
        [-5, 0, -5, -4, -3, -5, -2, -5, -4, -3, -5, -1, -5, -4, -3, -5, -2, -5, -4, -3]
    );
    assert_eq!(
        lines[1].matches('|').count(),
        6,
        "a line before rank 0 and each skip"
    );
}

#[test]
fn invalid_input_is_an_error_not_a_panic() {
    for args in [
        &["schedule", "-p", "0"][..],
        &["schedule", "-p", "1152921504606846976", "--json"],
        &["schedule", "-p", "4", "--algorithm", "binomial"],
        &["verify", "--max-p", "4", "--algorithm", "ring"],
        &["verify", "--max-p", "4", "--min-p", "0"],
        &["verify", "--max-p", "0"],
    ] {
        let out = circulant(args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!err.is_empty());
    }
}

#[test]
fn verify_ends_with_the_tally() {
    let out = circulant(&["verify", "--max-p", "300"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().last(), Some("300 passed, 0 failed"));
    let out = circulant(&[
        "verify", "--min-p", "1000", "--max-p", "1003", "--jobs", "1",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().last(), Some("4 passed, 0 failed"));
}
