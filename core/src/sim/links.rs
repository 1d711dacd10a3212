//! The bytes an algorithm's plans send across each node's link, for a placement of its ranks
//! on nodes: what a node-aware algorithm must keep low, and what the node bound of a
//! collective is measured against (a broadcast of m bytes must bring m into every node but
//! the root's once).

use crate::plan::{Algorithm, PlanError};

/// Bytes crossing each node's link in one run of an algorithm, out of and into each node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLinks {
    /// Per node, bytes its ranks send to ranks of other nodes.
    pub out: Vec<u64>,
    /// Per node, bytes its ranks receive from ranks of other nodes.
    pub into: Vec<u64>,
    /// Bytes sent between ranks of one node.
    pub inside: u64,
}

impl NodeLinks {
    /// Nothing counted yet, for `nodes` nodes.
    pub fn new(nodes: usize) -> Self {
        NodeLinks {
            out: vec![0; nodes],
            into: vec![0; nodes],
            inside: 0,
        }
    }

    /// Counts a message of `bytes` from a rank of node `from` to a rank of node `to` (nodes
    /// below the count given to [`NodeLinks::new`]).
    pub fn add(&mut self, from: usize, to: usize, bytes: u64) {
        if from == to {
            self.inside += bytes;
        } else {
            self.out[from] += bytes;
            self.into[to] += bytes;
        }
    }

    /// The most any one node's link carries in one direction.
    pub fn busiest(&self) -> u64 {
        self.out
            .iter()
            .chain(&self.into)
            .copied()
            .max()
            .unwrap_or(0)
    }
}

/// The bytes `alg`'s plans send across node links when rank r runs on node `node_of[r]`
/// (nodes numbered from 0; one entry per rank of the algorithm's problem).
pub fn node_links(alg: &dyn Algorithm, node_of: &[usize]) -> Result<NodeLinks, PlanError> {
    let p = alg.problem().p();
    if node_of.len() != p {
        return Err(PlanError::CountsLength {
            expected: p,
            got: node_of.len(),
        });
    }
    let nodes = node_of.iter().max().map_or(0, |&n| n + 1);
    let mut links = NodeLinks::new(nodes);
    for (rank, &from) in node_of.iter().enumerate() {
        let plan = alg.rank_plan(rank)?;
        for round in plan.rounds {
            for transfer in &round.sends {
                let to = *node_of.get(transfer.to).ok_or(PlanError::RankOutOfRange {
                    rank: transfer.to,
                    p,
                })?;
                links.add(from, to, transfer.bytes() as u64);
            }
        }
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{registry, CostModel, Problem};

    const MODEL: CostModel = CostModel {
        alpha: 1e-6,
        beta: 1e-9,
        o: 0.0,
    };

    fn algorithm(name: &str, problem: &Problem) -> Box<dyn Algorithm> {
        registry::by_name(name, problem, &MODEL).expect("the algorithm applies")
    }

    #[test]
    fn a_ring_crosses_each_node_link_once_per_block() {
        // Ranks 0, 1 on node 0 and 2, 3 on node 1: of the ring's edges, 1 → 2 and 3 → 0 cross,
        // and each carries every block but its receiver's own.
        let block = 1000;
        let problem = Problem::Allgather { p: 4, block };
        let ring = algorithm("ring-allgather", &problem);
        let links = node_links(ring.as_ref(), &[0, 0, 1, 1]).unwrap();
        let crossing = 3 * block as u64;
        assert_eq!(links.out, vec![crossing, crossing]);
        assert_eq!(links.into, vec![crossing, crossing]);
        assert_eq!(links.inside, 2 * crossing);
        assert_eq!(links.busiest(), crossing);
        // Round robin puts every edge across the nodes.
        let scattered = node_links(ring.as_ref(), &[0, 1, 0, 1]).unwrap();
        assert_eq!(scattered.out, vec![2 * crossing, 2 * crossing]);
        assert_eq!(scattered.inside, 0);
    }

    #[test]
    fn every_byte_is_counted_once_whatever_the_placement() {
        let problem = Problem::Broadcast {
            p: 5,
            root: 2,
            bytes: 10_000,
        };
        let bcast = algorithm("circulant-bcast", &problem);
        let p = problem.p();
        let one_node = node_links(bcast.as_ref(), &vec![0; p]).unwrap();
        assert_eq!((one_node.out, one_node.into), (vec![0], vec![0]));
        for map in [
            vec![0, 0, 0, 1, 1],
            vec![0, 1, 2, 0, 1],
            vec![0, 1, 1, 1, 1],
        ] {
            let links = node_links(bcast.as_ref(), &map).unwrap();
            let out: u64 = links.out.iter().sum();
            assert_eq!(out, links.into.iter().sum::<u64>());
            assert_eq!(out + links.inside, one_node.inside, "{map:?}");
            // Every node but the root's must receive the whole message at least once.
            for (node, &into) in links.into.iter().enumerate() {
                if node != map[2] {
                    assert!(into >= 10_000, "node {node} of {map:?} got {into}");
                }
            }
        }
    }

    #[test]
    fn a_map_of_another_size_is_refused() {
        let problem = Problem::Broadcast {
            p: 3,
            root: 0,
            bytes: 8,
        };
        let bcast = algorithm("binomial-bcast", &problem);
        assert!(node_links(bcast.as_ref(), &[0, 1]).is_err());
    }
}
