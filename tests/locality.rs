//! The node map of communicators whose ranks are threads of this process given host names
//! ([`Job::hosts`]): uneven counts per node, round-robin placement, split communicators, and
//! the communicator of one node with a collective on it.

use std::time::Duration;

use circulant::bootstrap::memory::Job;
use circulant::comm::{Communicator, Config, NodeMap};
use circulant::plan::{Dtype, Problem, ReduceOp, Reduction};

/// Deadline of every fence and collective: generous for a loaded machine, short of a hang.
const DEADLINE: Duration = Duration::from_secs(30);

/// Runs `body` on every rank of a job whose rank `r` runs on `hosts[r]` (one node for all
/// when `hosts` is None), over shm; returns what each rank returned, in rank order. Every
/// communicator a rank keeps is dropped only after all ranks are done (shm in one process).
fn run<R: Send>(
    p: usize,
    hosts: Option<&[&str]>,
    body: impl Fn(Communicator) -> (R, Vec<Communicator>) + Sync,
) -> Vec<R> {
    let mut job = Job::new(p).expect("job").timeout(DEADLINE);
    if let Some(hosts) = hosts {
        job = job.hosts(hosts.iter().copied()).expect("one host per rank");
    }
    let config = Config {
        provider: Some("shm".into()),
        deadline: DEADLINE,
        ..Config::default()
    };
    let done: Vec<(R, Vec<Communicator>)> = std::thread::scope(|s| {
        let handles: Vec<_> = job
            .bootstraps()
            .into_iter()
            .map(|bootstrap| {
                let (config, body) = (config.clone(), &body);
                s.spawn(move || {
                    let comm = Communicator::init_over(bootstrap, config).expect("init");
                    body(comm)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank did not panic"))
            .collect()
    });
    done.into_iter().map(|(result, _comms)| result).collect()
}

/// What one rank saw of its world and of its node's communicator.
#[derive(Debug, PartialEq)]
struct Seen {
    node: usize,
    nodes: usize,
    node_of_each: Vec<usize>,
    local: Vec<usize>,
    /// Rank and size in the node's communicator.
    in_node: (usize, usize),
    /// The world ranks of the node's communicator, gathered over it.
    members: Vec<u64>,
    /// The sum of those world ranks, reduced over it.
    sum: u64,
    /// The node communicator's own map: one node.
    node_nodes: usize,
}

/// Every rank's view, with the node communicator checked by an allgather and an allreduce.
fn see(p: usize, hosts: Option<&[&str]>) -> Vec<Seen> {
    run(p, hosts, |mut comm| {
        let mut local = comm.split_by_node().expect("split by node");
        let me = [comm.rank() as u64];
        let mut members = vec![0u64; local.size()];
        local
            .allgather(bytemuck_slice(&me), bytemuck_slice_mut(&mut members))
            .expect("allgather on the node");
        let mut sum = [0u64];
        local
            .allreduce(&me, &mut sum, ReduceOp::Sum)
            .expect("allreduce on the node");
        let seen = Seen {
            node: comm.node(),
            nodes: comm.nodes(),
            node_of_each: (0..comm.size())
                .map(|r| comm.node_of(r).expect("a rank"))
                .collect(),
            local: comm.local_ranks().to_vec(),
            in_node: (local.rank(), local.size()),
            members,
            sum: sum[0],
            node_nodes: local.nodes(),
        };
        assert_eq!(comm.node_of(comm.size()), None);
        assert_eq!(comm.ranks_on(comm.nodes()), None);
        (seen, vec![comm, local])
    })
}

fn bytemuck_slice(words: &[u64]) -> &[u8] {
    bytemuck::cast_slice(words)
}

fn bytemuck_slice_mut(words: &mut [u64]) -> &mut [u8] {
    bytemuck::cast_slice_mut(words)
}

/// Checks every rank's view against the placement `hosts` (None: one node).
fn check(p: usize, hosts: Option<&[&str]>) {
    let labels: Vec<&str> = hosts.map_or_else(|| vec!["one"; p], <[&str]>::to_vec);
    let expected = NodeMap::from_hosts(&labels, 0).expect("map");
    let seen = see(p, hosts);
    for (rank, seen) in seen.iter().enumerate() {
        let node = expected.node_of(rank).expect("a rank");
        let local = expected.ranks_on(node).expect("a node");
        assert_eq!(seen.node, node, "rank {rank}");
        assert_eq!(seen.nodes, expected.nodes(), "rank {rank}");
        assert_eq!(seen.node_of_each, expected.node_of_each(), "rank {rank}");
        assert_eq!(seen.local, local, "rank {rank}");
        let position = local.iter().position(|&r| r == rank).expect("on its node");
        assert_eq!(seen.in_node, (position, local.len()), "rank {rank}");
        let members: Vec<u64> = local.iter().map(|&r| r as u64).collect();
        assert_eq!(seen.members, members, "rank {rank}");
        assert_eq!(seen.sum, members.iter().sum::<u64>(), "rank {rank}");
        assert_eq!(seen.node_nodes, 1, "rank {rank}");
    }
}

#[test]
fn uneven_blocks_of_ranks_per_node() {
    check(6, Some(&["n1", "n1", "n1", "n2", "n3", "n3"]));
}

#[test]
fn round_robin_placement() {
    // Nodes are numbered by their first rank: x = 0, y = 1, z = 2.
    check(7, Some(&["x", "y", "z", "x", "y", "z", "x"]));
}

#[test]
fn one_rank_per_node_and_all_on_one_host() {
    check(3, Some(&["a", "b", "c"]));
    check(4, None);
}

#[test]
fn a_split_communicator_keeps_its_ranks_nodes() {
    let hosts = ["a", "b", "a", "b", "c", "c"];
    let seen = run(hosts.len(), Some(&hosts), |mut comm| {
        let rank = comm.rank();
        // Even and odd ranks, each group in reverse rank order.
        let mut half = comm
            .split(Some((rank % 2) as u32), -(rank as i64))
            .expect("split")
            .expect("a group");
        let map = half.node_map().node_of_each().to_vec();
        let mut local = half.split_by_node().expect("split by node");
        let mut sum = [0u64];
        local
            .allreduce(&[rank as u64], &mut sum, ReduceOp::Sum)
            .expect("allreduce");
        (
            (map, half.node(), local.size(), sum[0]),
            vec![comm, half, local],
        )
    });
    // Evens: ranks 4, 2, 0 on c, a, a; odds: ranks 5, 3, 1 on c, b, b.
    for (rank, (map, node, local_size, sum)) in seen.into_iter().enumerate() {
        assert_eq!(map, vec![0, 1, 1], "rank {rank}");
        let (want_node, want_size, want_sum) = match rank {
            4 | 5 => (0, 1, rank as u64),
            0 | 2 => (1, 2, 2),
            _ => (1, 2, 4),
        };
        assert_eq!(
            (node, local_size, sum),
            (want_node, want_size, want_sum),
            "rank {rank}"
        );
    }
}

#[test]
fn a_job_needs_one_host_name_per_rank() {
    assert!(Job::new(3).expect("job").hosts(["a", "b"]).is_err());
}

/// The problems the registry test calls: small and large broadcasts, an allgatherv and a
/// small allreduce, on `p` ranks.
fn registry_problems(p: usize) -> Vec<Problem> {
    let sum = Reduction::new(Dtype::I64, ReduceOp::Sum).expect("a reduction");
    vec![
        Problem::Broadcast {
            p,
            root: 1,
            bytes: 1000,
        },
        Problem::Broadcast {
            p,
            root: 0,
            bytes: 1 << 20,
        },
        Problem::Allgatherv {
            counts: (0..p).map(|r| 100 * (r + 1)).collect(),
        },
        Problem::Allreduce {
            p,
            reduction: sum,
            bytes: 64,
        },
    ]
}

/// The one registry of every engine's algorithms against `comm.algorithms` on `hosts` (None:
/// one node): every algorithm a call's problem lists is the registry's, the engine that
/// serves small calls by rule (names starting with `rule`, broadcasts up to `rule_bytes`) is
/// among them, a forced name runs as itself, and the automatic choice runs the rule's or the
/// fastest plan of the same list.
fn registry_against_algorithms(p: usize, hosts: Option<&[&str]>, rule: &str, rule_bytes: usize) {
    let registry = circulant::comm::algorithm_names();
    let rule = rule.to_string();
    run(p, hosts, |mut comm| {
        for problem in registry_problems(p) {
            let listed = comm.algorithms(&problem).expect("algorithms");
            assert!(!listed.is_empty(), "{problem:?}");
            for (name, _) in &listed {
                assert!(registry.contains(name), "{name} is not in the registry");
            }
            let names: Vec<&str> = listed.iter().map(|(n, _)| *n).collect();
            if problem.total_bytes() <= 1000 * p {
                assert!(
                    names.iter().any(|n| n.starts_with(rule.as_str())),
                    "{problem:?}: no {rule}* among {names:?}"
                );
            }
        }
        // Forcing by name and the automatic choice, on a broadcast of each size.
        for bytes in [1000, 1 << 20] {
            let problem = Problem::Broadcast { p, root: 0, bytes };
            let listed = comm.algorithms(&problem).expect("algorithms");
            let mut buf = comm.alloc(bytes).expect("alloc");
            for (name, _) in &listed {
                comm.using(name)
                    .bcast(&mut buf, 0)
                    .expect("a forced broadcast");
                assert_eq!(comm.last().expect("ran").algorithm, *name);
            }
            comm.bcast(&mut buf, 0).expect("broadcast");
            let chosen = comm.last().expect("ran").algorithm;
            let by_rule = listed
                .iter()
                .find(|(n, _)| bytes <= rule_bytes && n.starts_with(rule.as_str()));
            let fastest_plan = listed
                .iter()
                .filter(|(n, _)| !n.starts_with("segment-") && !n.starts_with("hier-segment-"))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            let expected = by_rule.or(fastest_plan).expect("an algorithm");
            assert_eq!(chosen, expected.0, "{bytes} bytes: {listed:?}");
        }
        ((), vec![comm])
    });
    assert!(registry.iter().any(|n| n.starts_with("segment-")));
    assert!(registry.iter().any(|n| n.starts_with("hier-segment-")));
    assert!(registry.contains(&"circulant-bcast"));
}

#[test]
fn one_registry_lists_every_algorithm_on_one_node() {
    // The segment serves broadcasts of any size (in chunks).
    registry_against_algorithms(4, None, "segment-", usize::MAX);
}

#[test]
fn one_registry_lists_every_algorithm_on_several_nodes() {
    // The node phases serve calls within the segment's limit.
    registry_against_algorithms(4, Some(&["a", "a", "b", "b"]), "hier-segment-", 1000);
}
