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
        vec!["--op", "bcast", "-p", "4", "--bytes", "10", "--o", "-1"],
        vec![
            "--op",
            "bcast",
            "-p",
            "4",
            "--bytes",
            "10",
            "--iov-limit",
            "0",
        ],
        vec![
            "--op",
            "bcast",
            "-p",
            "4",
            "--bytes",
            "10",
            "--rma-iov-limit",
            "0",
        ],
        vec!["--op", "nope", "-p", "4", "--bytes", "10"],
    ] {
        let out = model(&args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
    }
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = model(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn algorithm<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["algorithms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("{name} missing"))
}

#[test]
fn per_write_overhead_prefers_fewer_writes() {
    let base = ["--op", "allgather", "-p", "64", "--bytes", "512", "--json"];
    let without = json(&[&base[..], &["--o", "0"]].concat());
    let with = json(&[&base[..], &["--o", "1e-6"]].concat());
    assert_eq!(with["o_s"], 1e-6);
    let t = |v: &serde_json::Value, n: &str| algorithm(v, n)["time_s"].as_f64().unwrap();
    // Without o Bruck and recursive doubling tie; with o Bruck's wrapped rounds (two writes)
    // cost five o more, and recursive doubling (one write per round) comes first.
    assert_eq!(
        t(&without, "bruck-allgather"),
        t(&without, "recursive-doubling-allgather")
    );
    let diff = t(&with, "bruck-allgather") - t(&with, "recursive-doubling-allgather");
    assert!((diff - 5e-6).abs() < 1e-12, "{diff}");
    assert_eq!(
        with["algorithms"][0]["name"],
        "recursive-doubling-allgather"
    );
    let text = String::from_utf8_lossy(
        &model(&[
            "--op",
            "allgather",
            "-p",
            "64",
            "--bytes",
            "512",
            "--o",
            "1e-6",
        ])
        .stdout,
    )
    .to_string();
    assert!(text.contains("o = 0.000001 s"), "{text}");
}

#[test]
fn writes_per_rank_follow_the_limits() {
    let at = |l: &str| {
        json(&[
            "--op",
            "allgatherv",
            "--dist",
            "spike",
            "-p",
            "64",
            "--bytes",
            "512",
            "--json",
            "--iov-limit",
            l,
            "--rma-iov-limit",
            l,
        ])
    };
    let one = at("1");
    let four = at("4");
    assert_eq!(four["iov_limit"], 4);
    assert_eq!(four["rma_iov_limit"], 4);
    let w =
        |v: &serde_json::Value, k: &str| algorithm(v, "circulant-allgatherv")[k].as_u64().unwrap();
    // 63 pieces (one per other root) in 6 rounds; merged, one write per round.
    assert_eq!(w(&one, "pieces_per_rank"), 63);
    assert!(w(&one, "writes_per_rank") < 63);
    assert_eq!(w(&four, "writes_per_rank"), 6);
    // No plans are walked for a million ranks.
    let big = json(&[
        "--op", "bcast", "-p", "1000000", "--bytes", "1024", "--json",
    ]);
    assert!(big["algorithms"][0]["writes_per_rank"].is_null());
}

#[test]
fn a_layout_prices_every_algorithm_on_its_nodes() {
    let v = json(&[
        "--op",
        "bcast",
        "--nodes",
        "4",
        "--ranks-per-node",
        "2",
        "--bytes",
        "1000000",
        "--json",
    ]);
    assert_eq!(v["p"], 8);
    assert_eq!(v["nodes"], 4);
    assert_eq!(v["max_ranks_per_node"], 2);
    assert_eq!(v["placement"], "blocks");
    assert_eq!(v["alpha_across_s"], 2e-6);
    assert_eq!(v["beta_across_s_per_byte"], 8e-11);
    assert_eq!(v["alpha_s"], 5e-7);
    // 4 nodes reached in 2 steps (each node's 2 ranks bring in 2 more), then 1 MB across.
    let bound = v["lower_bound_s"].as_f64().unwrap();
    assert!((bound - (4e-6 + 8e-11 * 1e6)).abs() < 1e-12, "{bound}");
    let algs = v["algorithms"].as_array().unwrap();
    assert!(algs.len() >= 4);
    let mut last = 0.0;
    for a in algs {
        assert_eq!(a["priced_on_layout"], true, "{a}");
        let t = a["time_s"].as_f64().unwrap();
        assert!(t >= bound && t >= last, "{a}");
        last = t;
        // Three nodes must each receive the whole message across their link.
        assert!(
            a["busiest_link_bytes"].as_u64().unwrap() >= 1_000_000,
            "{a}"
        );
        assert!(a["inside_bytes"].as_u64().is_some());
    }
}

#[test]
fn placement_and_node_maps_change_what_crosses() {
    let at = |layout: &[&str]| {
        let args = [
            &["--op", "allgather", "--bytes", "4000", "--json"][..],
            layout,
        ]
        .concat();
        json(&args)
    };
    let link = |v: &serde_json::Value| algorithm(v, "ring-allgather")["busiest_link_bytes"].clone();
    let blocks = at(&["--nodes", "2", "--ranks-per-node", "2"]);
    let rr = at(&[
        "--nodes",
        "2",
        "--ranks-per-node",
        "2",
        "--placement",
        "round-robin",
    ]);
    let map = at(&["--node-map", "5,5,9,9"]);
    // By blocks the ring crosses twice (3 blocks of 1000 each way), round robin on every edge.
    assert_eq!(link(&blocks), 3000);
    assert_eq!(link(&rr), 6000);
    assert_eq!(rr["placement"], "round-robin");
    assert_eq!(map["placement"], "node-map");
    assert_eq!(map["algorithms"], blocks["algorithms"]);
    let t = |v: &serde_json::Value| algorithm(v, "ring-allgather")["time_s"].as_f64().unwrap();
    assert!(t(&rr) > t(&blocks));
}

#[test]
fn plans_too_large_to_walk_are_estimated() {
    let args = [
        "--op",
        "bcast",
        "--nodes",
        "1000",
        "--ranks-per-node",
        "1000",
        "--bytes",
        "1048576",
    ];
    let v = json(&[&args[..], &["--json"]].concat());
    assert_eq!(v["p"], 1_000_000);
    for a in v["algorithms"].as_array().unwrap() {
        assert_eq!(a["priced_on_layout"], false, "{a}");
        assert!(a["busiest_link_bytes"].is_null());
    }
    let text = String::from_utf8_lossy(&model(&args).stdout).to_string();
    assert!(text.contains("two-level lower bound"), "{text}");
    assert!(text.contains(" *") && text.contains("estimated"), "{text}");
    // Without a layout the table is the flat one.
    let flat =
        String::from_utf8_lossy(&model(&["--op", "bcast", "-p", "8", "--bytes", "1000000"]).stdout)
            .to_string();
    assert!(
        flat.contains("merged 4/4") && !flat.contains("busiest"),
        "{flat}"
    );
}

#[test]
fn a_cluster_of_256_nodes_of_64_ranks_is_walked() {
    // p = 16384, beyond the 2048 ranks the flat answer walks: the plans of the circulant and
    // node-aware broadcasts are read (about 50 rounds and pieces a rank) and priced with the
    // node links shared; only the broadcasts of p rounds and more are estimated.
    let args = [
        "--op",
        "bcast",
        "--nodes",
        "256",
        "--ranks-per-node",
        "64",
        "--bytes",
        "65536",
    ];
    let v = json(&[&args[..], &["--json"]].concat());
    assert_eq!(v["p"], 16384);
    let walked = |name: &str| {
        let a = algorithm(&v, name);
        assert_eq!(a["priced_on_layout"], true, "{a}");
        let link = a["busiest_link_bytes"].as_u64().expect("counted");
        (a["time_s"].as_f64().expect("time"), link)
    };
    let (flat, flat_link) = walked("circulant-bcast");
    let (hier, hier_link) = walked("hier-circulant-bcast");
    walked("lane-circulant-bcast");
    walked("binomial-bcast");
    // The flat schedule sends the message across a node's link about once for every few ranks
    // behind it; the hierarchical one once into a node, and out of a leader as often as the
    // circulant schedule among the leaders sends (n − 1 + q blocks of m/n).
    assert!(flat_link > 20 * 65536, "{flat_link}");
    assert!(hier_link < 4 * 65536, "{hier_link}");
    assert!(hier < flat, "{hier} {flat}");
    let bound = v["lower_bound_s"].as_f64().expect("bound");
    assert!(hier >= bound, "{hier} {bound}");
    // Round robin has 2p - 2 rounds: too many to walk, said so.
    assert_eq!(
        algorithm(&v, "round-robin-bcast")["priced_on_layout"],
        false
    );
    let text = String::from_utf8_lossy(&model(&args).stdout).to_string();
    for line in text.lines() {
        if line.starts_with("hier-circulant-bcast") || line.starts_with("circulant-bcast") {
            assert!(!line.contains('*'), "{line}");
        }
    }
    assert!(text.contains("* estimated"), "{text}");
}

#[test]
fn bad_layouts_are_errors() {
    for args in [
        vec![
            "--op",
            "bcast",
            "-p",
            "4",
            "--bytes",
            "10",
            "--alpha-across",
            "1e-6",
        ],
        vec!["--op", "bcast", "--bytes", "10", "--nodes", "2"],
        vec!["--op", "bcast", "--bytes", "10", "--ranks-per-node", "2"],
        vec![
            "--op",
            "bcast",
            "-p",
            "5",
            "--bytes",
            "10",
            "--nodes",
            "2",
            "--ranks-per-node",
            "2",
        ],
        vec![
            "--op",
            "bcast",
            "--bytes",
            "10",
            "--nodes",
            "2",
            "--ranks-per-node",
            "2",
            "--node-map",
            "0,1",
        ],
        vec!["--op", "bcast", "--bytes", "10", "--node-map", "0,x"],
        vec![
            "--op",
            "bcast",
            "--bytes",
            "10",
            "--node-map",
            "0,1",
            "--beta-across",
            "-1",
        ],
        vec![
            "--op",
            "bcast",
            "--bytes",
            "10",
            "--nodes",
            "16777215",
            "--ranks-per-node",
            "2",
        ],
        vec!["--op", "bcast", "--bytes", "10"],
    ] {
        let out = model(&args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
    }
}
