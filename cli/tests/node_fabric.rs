//! Two fabrics per rank: in a job on several nodes, the ranks of one node reach each other
//! through the node provider (shm) and the others through the network provider (here
//! `tcp;ofi_rxm` on the loopback interface). Ranks are threads of this process given host names
//! (2 × 4 by blocks, 8 round robin on 2 nodes, 3 + 2 + 1). Every byte of each collective is
//! checked, and each rank's writes are counted per fabric: the data bytes through each equal
//! what this rank's plan sends to the ranks of its own node and of the others, so no byte
//! between ranks of one node crossed the network provider, and the bytes across the nodes'
//! links are the plan's. One node, and `CIRCULANT_NODE_PROVIDER=off`, keep one fabric.

use std::time::Duration;

mod common;
use circulant::comm::{Choice, Communicator, Config, Route, Traffic};
use circulant::plan::distribution::Distribution;
use circulant::plan::{registry, Problem};
use common::hosts::run_on_hosts_to_a_barrier as run;

const DEADLINE: Duration = Duration::from_secs(60);
const NETWORK: &str = "tcp;ofi_rxm";

fn config(algorithms: &[&str]) -> Config {
    Config {
        provider: Some(NETWORK.into()),
        deadline: DEADLINE,
        algorithms: algorithms.iter().map(|a| a.to_string()).collect(),
        // Every transfer zero-copy, so that the data bytes are the plan's exactly.
        eager_limit: Some(0),
        ..Config::default()
    }
}

/// The data bytes this rank's plan of `name` for `problem` sends to ranks of its own node and
/// to ranks of other nodes, as the communicator plans it.
fn planned(comm: &Communicator, name: &str, problem: &Problem) -> (u64, u64) {
    let layout = comm.node_map().layout();
    let alg = registry::by_name_on(name, problem, layout, &comm.levels()).expect("applies");
    let plan = alg.rank_plan(comm.rank()).expect("plan");
    let me = layout.node_of(comm.rank());
    let (mut inside, mut across) = (0u64, 0u64);
    for round in plan.rounds {
        for t in &round.sends {
            if layout.node_of(t.to) == me {
                inside += t.bytes() as u64;
            } else {
                across += t.bytes() as u64;
            }
        }
    }
    (inside, across)
}

fn since(now: Traffic, before: Traffic) -> (u64, u64, u64) {
    (
        now.node.bytes - before.node.bytes,
        now.network.bytes - before.network.bytes,
        now.memory.bytes - before.memory.bytes,
    )
}

/// Per rank: (node provider, every peer's route matches its node, and per collective the
/// bytes through each fabric against the plan's).
type Seen = (Option<String>, bool, Vec<((u64, u64, u64), (u64, u64))>);

fn collectives(comm: &mut Communicator) -> Seen {
    let p = comm.size();
    let me = comm.rank();
    let mut out = Vec::new();
    // A broadcast with a flat and a node-aware algorithm, from two roots.
    for (name, root) in [
        ("circulant-bcast", 0),
        ("circulant-bcast", p - 1),
        ("hier-circulant-bcast", 1 % p),
        ("binomial-bcast", 0),
    ] {
        let bytes = 100_003;
        let problem = Problem::Broadcast { p, root, bytes };
        let want: Vec<u8> = (0..bytes).map(|i| (i * 7 + root) as u8).collect();
        let mut buf = comm.alloc(bytes).expect("alloc");
        if me == root {
            buf.copy_from_slice(&want);
        }
        let before = comm.traffic();
        comm.choosing(Choice::Named(name))
            .bcast(&mut buf, root)
            .expect(name);
        assert_eq!(&buf[..], &want[..], "{name} root {root} rank {me}");
        out.push((since(comm.traffic(), before), planned(comm, name, &problem)));
    }
    // Allgatherv, flat and node-aware, on uneven counts.
    for name in [
        "circulant-allgatherv",
        "pipelined-ring-allgatherv",
        "hier-circulant-allgatherv",
        "lane-circulant-allgatherv",
    ] {
        let counts = Distribution::Spike.counts(p, 40_000);
        let total: usize = counts.iter().sum();
        let problem = Problem::Allgatherv {
            counts: counts.clone(),
        };
        let offsets: Vec<usize> = counts
            .iter()
            .scan(0, |at, &c| {
                let o = *at;
                *at += c;
                Some(o)
            })
            .collect();
        let value = |r: usize, i: usize| (r * 31 + i * 3) as u8;
        let send: Vec<u8> = (0..counts[me]).map(|i| value(me, i)).collect();
        let mut recv = comm.alloc(total).expect("alloc");
        let before = comm.traffic();
        comm.choosing(Choice::Named(name))
            .allgatherv(&send[..], &mut recv, &counts)
            .expect(name);
        for r in 0..p {
            for i in 0..counts[r] {
                assert_eq!(recv[offsets[r] + i], value(r, i), "{name} rank {me}");
            }
        }
        out.push((since(comm.traffic(), before), planned(comm, name, &problem)));
    }
    let map = comm.node_map();
    let routes_match = (0..p).filter(|&r| r != me).all(|r| {
        let want = if map.node_of(r) == Some(map.node()) {
            Route::Node
        } else {
            Route::Network
        };
        !matches!(comm.route(r), Some(route) if route != want)
    });
    (comm.node_provider(), routes_match, out)
}

#[test]
fn same_node_pairs_go_through_the_node_provider_only() {
    // The network provider stays on the loopback interface, whatever hosts the ranks claim.
    std::env::set_var("FI_TCP_IFACE", "lo");
    let layouts: &[&[&str]] = &[
        &["a", "a", "a", "a", "b", "b", "b", "b"],
        &["a", "b", "a", "b", "a", "b", "a", "b"],
        &["a", "a", "a", "b", "b", "c"],
    ];
    for hosts in layouts {
        let seen = run(hosts, config(&[]), collectives);
        for (rank, (node_provider, routes_match, ops)) in seen.iter().enumerate() {
            let alone = hosts.iter().filter(|&&h| h == hosts[rank]).count() == 1;
            if alone {
                assert_eq!(node_provider, &None, "{hosts:?} rank {rank}");
            } else {
                assert_eq!(
                    node_provider.as_deref(),
                    Some("shm"),
                    "{hosts:?} rank {rank}"
                );
            }
            assert!(routes_match, "{hosts:?} rank {rank}: a route");
            for (i, ((node, network, memory), (inside, across))) in ops.iter().enumerate() {
                let what = format!("{hosts:?} rank {rank} collective {i}");
                assert_eq!(*memory, 0, "{what}: eager is off");
                assert_eq!(node, inside, "{what}: bytes through shm");
                assert_eq!(network, across, "{what}: bytes through the network");
            }
        }
        // The collectives moved bytes both ways somewhere.
        let (mut inside, mut across) = (0, 0);
        for (_, _, ops) in &seen {
            for ((node, network, _), _) in ops {
                inside += node;
                across += network;
            }
        }
        assert!(inside > 0 && across > 0, "{hosts:?}: {inside} {across}");
    }
}

/// Small collectives take the eager path: the ranks of a node store into each other's
/// receive slots in shared memory (after the first operation of a pair, which names the
/// slots and goes zero-copy through shm), the others write slots through the network.
#[test]
fn eager_messages_between_ranks_of_a_node_go_through_shared_memory() {
    std::env::set_var("FI_TCP_IFACE", "lo");
    let hosts = ["a", "a", "a", "b", "b", "c"];
    let seen = run(
        &hosts,
        Config {
            eager_limit: None,
            ..config(&[])
        },
        |comm| {
            let p = comm.size();
            let me = comm.rank();
            let mut out = Vec::new();
            for i in 0..6 {
                let name = "circulant-bcast";
                let root = i % 2;
                let problem = Problem::Broadcast {
                    p,
                    root,
                    bytes: 1000,
                };
                let mut buf = vec![0u8; 1000];
                if me == root {
                    buf.fill(i as u8 + 1);
                }
                let before = comm.traffic();
                comm.choosing(Choice::Named(name))
                    .bcast(&mut buf[..], root)
                    .expect(name);
                assert!(buf.iter().all(|&b| b == i as u8 + 1), "rank {me} bcast {i}");
                out.push((since(comm.traffic(), before), planned(comm, name, &problem)));
            }
            let mut sum = [0i64; 3];
            comm.allreduce(
                &[me as i64, 1, -(me as i64)],
                &mut sum,
                circulant::plan::ReduceOp::Sum,
            )
            .expect("allreduce");
            let all = (p * (p - 1) / 2) as i64;
            assert_eq!(sum, [all, p as i64, -all], "rank {me}");
            (out, comm.traffic())
        },
    );
    let mut memory = 0;
    for (rank, (ops, total)) in seen.iter().enumerate() {
        for (i, ((node, network, stored), (inside, across))) in ops.iter().enumerate() {
            let what = format!("rank {rank} bcast {i}");
            assert_eq!(
                node + stored,
                *inside,
                "{what}: bytes to the ranks of its node"
            );
            assert_eq!(network, across, "{what}: bytes through the network");
        }
        memory += total.memory.writes;
    }
    assert!(
        memory > 0,
        "no receive slot was stored into shared memory: {:?}",
        seen.iter().map(|s| s.1).collect::<Vec<_>>()
    );
}

#[test]
fn one_node_or_the_node_provider_off_keep_one_fabric() {
    std::env::set_var("FI_TCP_IFACE", "lo");
    let cases: Vec<(&[&str], Config)> = vec![
        (&["a", "a", "a", "a"], config(&[])),
        (
            &["a", "a", "b", "b"],
            Config {
                node_provider: None,
                ..config(&[])
            },
        ),
        // One rank per node: the map known before the endpoints open, and known only with
        // the cards (hosts exchanged with them), when the node fabric is opened and closed.
        (&["a", "b", "c"], config(&[])),
        (
            &["a", "b", "c"],
            Config {
                loopback: false,
                ..config(&[])
            },
        ),
    ];
    for (hosts, config) in cases {
        let seen = run(hosts, config, |comm| {
            let mut buf = comm.alloc(50_000).expect("alloc");
            comm.bcast(&mut buf, 0).expect("bcast");
            (comm.node_provider(), comm.traffic(), comm.provider())
        });
        for (rank, (node_provider, traffic, provider)) in seen.iter().enumerate() {
            assert_eq!(node_provider, &None, "{hosts:?} rank {rank}");
            assert_eq!(traffic.node.writes, 0, "{hosts:?} rank {rank}");
            assert!(provider.starts_with("tcp"), "{provider}");
        }
        assert!(seen.iter().any(|(_, t, _)| t.network.bytes > 0));
    }
}

/// A communicator split off by node keeps reaching the ranks of its node through the node
/// provider, though it spans one node.
#[test]
fn a_split_by_node_reaches_its_ranks_through_the_node_provider() {
    std::env::set_var("FI_TCP_IFACE", "lo");
    let hosts = ["a", "b", "a", "b", "a", "b"];
    let seen = run(&hosts, config(&[]), |comm| {
        let mut node = comm.split_by_node().expect("split by node");
        let mut buf = node.alloc(30_000).expect("alloc");
        if node.rank() == 0 {
            buf.fill(7);
        }
        node.bcast(&mut buf, 0).expect("bcast");
        assert!(buf.iter().all(|&b| b == 7));
        let routes: Vec<_> = (0..node.size())
            .filter(|&r| r != node.rank())
            .map(|r| node.route(r))
            .collect();
        node.barrier().expect("barrier of the node");
        (node.node_provider(), routes, node.traffic(), node)
    });
    for (rank, (provider, routes, traffic, _)) in seen.iter().enumerate() {
        assert_eq!(provider.as_deref(), Some("shm"), "rank {rank}");
        assert!(
            routes.iter().all(|r| matches!(r, None | Some(Route::Node))),
            "rank {rank}: {routes:?}"
        );
        assert_eq!(traffic.network.writes, 0, "rank {rank}: {traffic:?}");
    }
    assert!(seen.iter().any(|(_, _, t, _)| t.node.bytes > 0));
}

/// A node provider that libfabric does not offer is an error on every rank, named.
#[test]
fn an_unknown_node_provider_is_refused() {
    std::env::set_var("FI_TCP_IFACE", "lo");
    let job = circulant::bootstrap::memory::Job::new(2)
        .expect("job")
        .timeout(DEADLINE)
        .hosts(["a", "b"])
        .expect("hosts");
    let config = Config {
        node_provider: Some("no-such-provider".into()),
        ..config(&[])
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = job
            .bootstraps()
            .into_iter()
            .map(|bootstrap| {
                let config = config.clone();
                s.spawn(move || Communicator::init_over(bootstrap, config).map(|_| ()))
            })
            .collect();
        for h in handles {
            let err = h.join().expect("no panic").expect_err("refused");
            assert!(err.to_string().contains("no-such-provider"), "{err}");
        }
    });
}
