//! `FI_PROVIDER` names the only providers libfabric offers: set to the network's provider, it
//! hides the node fabric's `shm`, and the ranks of one node reach each other through the
//! network provider (docs/library.md, "Configuration"). A file of its own: libfabric reads the variable
//! once per process.

use std::time::Duration;

mod common;
use circulant::comm::{Config, Route};
use common::hosts::run_on_hosts_to_a_barrier as run;

#[test]
fn fi_provider_hides_the_node_fabric() {
    std::env::set_var("FI_PROVIDER", "tcp;ofi_rxm");
    std::env::set_var("FI_TCP_IFACE", "lo");
    let config = Config {
        provider: Some("tcp;ofi_rxm".into()),
        deadline: Duration::from_secs(60),
        ..Config::default()
    };
    let seen = run(&["a", "a", "b", "b"], config, |comm| {
        let mut buf = comm.alloc(50_000).expect("alloc");
        comm.bcast(&mut buf, 0).expect("bcast");
        let neighbour = comm.rank() ^ 1;
        (comm.node_provider(), comm.route(neighbour), comm.traffic())
    });
    for (rank, (node_provider, route, traffic)) in seen.iter().enumerate() {
        assert_eq!(node_provider, &None, "rank {rank}");
        assert_ne!(route, &Some(Route::Node), "rank {rank}");
        assert_eq!(traffic.node.writes, 0, "rank {rank}");
    }
    assert!(seen.iter().any(|(_, _, t)| t.network.bytes > 0));
}
