//! Several ranks per node on the emulated cluster (`ci/cluster`): the layouts of
//! `CLUSTER_LAYOUT` (blocks, round robin, an explicit list) place the ranks of `circulant run`,
//! Hydra and Open MPI on the nodes, and selftest's node map is the layout.
//!
//! Each test that needs the cluster brings it up unless one with enough nodes runs, and takes
//! down what it brought up when it ends, also when it fails. The tests run one at a time: one
//! cluster.

mod common;

use std::process::Command;

use common::cluster::{cluster, exclusive, script, Cluster};
use common::{bin, missing, run, Finished};

/// Every rank runs `program` in its node under the built-in launcher.
fn circulant_run(layout: &str, n: usize, program: &[&str]) -> Command {
    let mut command = Command::new(bin());
    command
        .args(["run", "-n", &n.to_string(), "--timeout", "50", "--"])
        .arg(script())
        .arg("rank")
        .args(program)
        .env("CLUSTER_LAYOUT", layout);
    command
}

/// Every rank runs `program` in its node under Hydra.
fn hydra(layout: &str, n: usize, program: &[&str]) -> Command {
    let mut command = Command::new("mpiexec.hydra");
    command
        .args(["-n", &n.to_string()])
        .arg(script())
        .arg("rank")
        .args(program)
        .env("CLUSTER_LAYOUT", layout);
    command
}

/// A short selftest that exercises the node map (the `nodes` check splits by node) and moves
/// data within and across nodes, naming every check it passes; the persistent requests of
/// every collective run there too, beside the blocking form (the node phases' among them).
const SELFTEST: [&str; 5] = [
    "selftest",
    "--quick",
    "--verbose",
    "--only",
    "nodes,bcast,allgatherv,persistent",
];

/// The selftest passed, and its node map is `per_node` ranks on each node, rank r on node
/// `node_of[r]`.
fn selftest_saw(done: &Finished, per_node: &[usize], node_of: &[usize]) {
    assert_eq!(done.code(), Some(0), "{done:?}");
    let want = [
        "provider tcp;ofi_rxm".to_owned(),
        format!(
            "selftest: nodes {} (ranks per node {per_node:?})",
            per_node.len()
        ),
        format!("selftest: node of each rank {node_of:?}"),
        "ok   persistent".to_owned(),
        " passed, 0 failed".to_owned(),
    ];
    // Nodes of several ranks and several nodes: the node-aware algorithms are among those run.
    let hierarchical = per_node.len() > 1 && per_node.iter().any(|&k| k > 1);
    let node_aware = [
        "[hier-circulant-bcast]",
        "[lane-circulant-bcast]",
        "[hier-circulant-allgatherv]",
        "[lane-circulant-allgatherv]",
    ];
    for name in node_aware {
        assert_eq!(
            done.stdout.contains(name),
            hierarchical,
            "{name} in the selftest of {per_node:?}: {}",
            done.stdout
        );
    }
    for line in want {
        assert!(
            done.stdout.contains(&line),
            "no `{line}` in {}",
            done.stdout
        );
    }
}

#[test]
fn layout_prints_the_node_of_every_rank() {
    let _one = exclusive();
    for (spec, p, want) in [
        ("", "3", "0 1 2"),
        ("blocks:4", "8", "0 0 0 0 1 1 1 1"),
        ("blocks:2", "5", "0 0 1 1 2"),
        ("cyclic:2", "8", "0 1 0 1 0 1 0 1"),
        ("cyclic:3", "4", "0 1 2 0"),
        ("0,0,0,1,1,2", "6", "0 0 0 1 1 2"),
        ("1,0,1", "3", "1 0 1"),
    ] {
        let done = run(cluster(&["layout", spec, p]));
        assert_eq!(done.code(), Some(0), "{spec} {p}: {done:?}");
        assert_eq!(done.stdout.trim_end(), want, "{spec} {p}");
    }
}

#[test]
fn layout_refuses_bad_specs() {
    let _one = exclusive();
    for (spec, p, error) in [
        ("blocks:0", "4", "blocks:K needs K >= 1 ranks per node"),
        ("cyclic:", "4", "cyclic:N needs N >= 1 nodes"),
        ("rows:2", "4", "is none of blocks:K, cyclic:N or a list"),
        ("0,0,1", "4", "places 3 rank(s), the job has 4"),
        ("0,,1", "3", "is none of blocks:K, cyclic:N or a list"),
        ("0,250", "2", "puts a rank on node 250"),
        ("blocks:2", "0", "P must be a positive number of ranks"),
    ] {
        let done = run(cluster(&["layout", spec, p]));
        assert_eq!(done.code(), Some(1), "{spec} {p}: {done:?}");
        assert!(
            done.stderr.contains(error),
            "{spec} {p}: no `{error}` in {}",
            done.stderr
        );
    }
}

#[test]
fn selftest_under_circulant_run_sees_the_layout() {
    let Some(_cluster) = Cluster::up(3) else {
        return;
    };
    for (layout, n, per_node, node_of) in [
        ("blocks:4", 8, &[4, 4][..], &[0, 0, 0, 0, 1, 1, 1, 1][..]),
        ("cyclic:2", 8, &[4, 4], &[0, 1, 0, 1, 0, 1, 0, 1]),
        ("0,0,0,1,1,2", 6, &[3, 2, 1], &[0, 0, 0, 1, 1, 2]),
    ] {
        let done = run(circulant_run(
            layout,
            n,
            &[&[bin()][..], &SELFTEST].concat(),
        ));
        selftest_saw(&done, per_node, node_of);
    }
}

/// On nodes of several ranks `circulant bench` measures the model inside a node besides the
/// one across nodes, and prints the layout with it.
#[test]
fn bench_measures_both_levels_on_nodes_of_several_ranks() {
    let Some(_cluster) = Cluster::up(3) else {
        return;
    };
    let bench = [
        bin(),
        "bench",
        "--op",
        "bcast",
        "--max-bytes",
        "10",
        "--reps",
        "1",
        "--no-progress",
    ];
    let done = run(circulant_run("blocks:2", 4, &bench));
    assert_eq!(done.code(), Some(0), "{done:?}");
    let line =
        "nodes 2 (ranks per node [2, 2]); the model above is across nodes; inside a node α = ";
    assert!(done.stdout.contains(line), "no `{line}` in {}", done.stdout);
    assert!(
        done.stdout.contains("hier-circulant-bcast"),
        "{}",
        done.stdout
    );
    // The ranks of a node reach each other through shm, the others through the network; both
    // carried data.
    let traffic = done
        .stdout
        .lines()
        .find(|l| l.starts_with("traffic of all ranks: "))
        .unwrap_or_else(|| panic!("no traffic line in {}", done.stdout));
    assert!(traffic.contains("shm (ranks of one node) "), "{traffic}");
    for part in traffic
        .split("; ")
        .filter(|p| !p.starts_with("stored into shared memory"))
    {
        let writes: u64 = part
            .split_whitespace()
            .rev()
            .skip_while(|w| *w != "writes,")
            .nth(1)
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("no count in `{part}`"));
        assert!(writes > 0, "{traffic}");
    }
}

#[test]
fn selftest_under_hydra_sees_the_layout() {
    let Some(_cluster) = Cluster::up(3) else {
        return;
    };
    let done = run(hydra("cyclic:3", 6, &[&[bin()][..], &SELFTEST].concat()));
    selftest_saw(&done, &[2, 2, 2], &[0, 1, 2, 0, 1, 2]);
}

#[test]
fn a_layout_beyond_the_nodes_that_are_up_fails_clearly() {
    let Some(_cluster) = Cluster::up(3) else {
        return;
    };
    let done = run(cluster(&["layout", "0,1,7", "3"]));
    assert_eq!(done.code(), Some(1), "{done:?}");
    assert!(
        done.stderr.contains("needs node 7, which is not up"),
        "{}",
        done.stderr
    );
    let done = run(circulant_run("0,7", 2, &["true"]));
    assert_ne!(done.code(), Some(0), "{done:?}");
    assert!(done.stderr.contains("node 7 is not up"), "{}", done.stderr);
}

/// The host of every rank of an Open MPI job on the cluster under `layout`, in rank order.
fn openmpi_hosts(layout: &str, n: usize) -> Vec<String> {
    let mut command = cluster(&[
        "openmpi",
        &n.to_string(),
        "sh",
        "-c",
        "echo rank $OMPI_COMM_WORLD_RANK on $(hostname)",
    ]);
    command
        .env("CLUSTER_LAYOUT", layout)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let done = run(command);
    assert_eq!(done.code(), Some(0), "{layout}: {done:?}");
    let mut hosts = vec![String::new(); n];
    for line in done.stdout.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let ["rank", rank, "on", host] = words[..] {
            let rank: usize = rank.parse().expect("rank number");
            hosts[rank] = host.to_owned();
        }
    }
    hosts
}

#[test]
fn openmpi_places_ranks_by_layout() {
    if Command::new("mpiexec.openmpi")
        .arg("--version")
        .output()
        .is_err()
    {
        missing("mpiexec.openmpi", "ci/deps installs openmpi-bin");
        return;
    }
    let Some(_cluster) = Cluster::up(3) else {
        return;
    };
    // --host with slots and --map-by slot, --map-by node, and the seq mapper.
    for (layout, want) in [
        ("0,0,0,1,1,2", &[0, 0, 0, 1, 1, 2][..]),
        ("cyclic:2", &[0, 1, 0, 1, 0]),
        ("1,0,2,0", &[1, 0, 2, 0]),
    ] {
        let want: Vec<String> = want.iter().map(|i| format!("circ-node{i}")).collect();
        assert_eq!(openmpi_hosts(layout, want.len()), want, "{layout}");
    }
}
