//! Which node each rank of a job runs on: [`NodeMap`], from the launcher's word where it
//! gives one, else from the host names the ranks exchange (`Bootstrap::node_map`).
//!
//! Nodes are numbered 0, 1, ... in the order of their first rank, so that every rank of a job
//! numbers them alike whatever labels the launcher used; any placement is allowed (uneven
//! counts per node, round robin).

use std::hash::Hash;

use crate::plan::Layout;

use super::{mapping, Bootstrap, BootstrapError};

/// The key under which each rank publishes its host name when the launcher tells no map.
const HOST_KEY: &str = "host";

/// The node of every rank of a group, and this rank's place in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeMap {
    /// The node of each rank and the ranks of each node.
    layout: Layout,
    /// This rank.
    me: usize,
}

impl NodeMap {
    /// The map of ranks whose nodes carry `labels` (equal labels, one node), seen from rank
    /// `me`; None when `me` is not one of the ranks.
    pub fn new<K: Eq + Hash>(labels: impl IntoIterator<Item = K>, me: usize) -> Option<NodeMap> {
        let layout = Layout::from_labels(labels).ok()?;
        (me < layout.p()).then_some(NodeMap { layout, me })
    }

    /// `size` ranks on one node, seen from rank `me`.
    pub fn one_node(size: usize, me: usize) -> Option<NodeMap> {
        Self::new((0..size).map(|_| 0u8), me)
    }

    /// The map of ranks whose hosts are `hosts` (in rank order; equal names, one node).
    pub fn from_hosts<H: AsRef<[u8]>>(hosts: &[H], me: usize) -> Option<NodeMap> {
        Self::new(hosts.iter().map(AsRef::as_ref), me)
    }

    /// The map a `PMI_process_mapping` value gives a job of `size` ranks (see
    /// [`mapping::node_of_ranks`]); None when the value is not one the parser understands.
    pub fn from_mapping(value: &str, size: usize, me: usize) -> Option<NodeMap> {
        Self::new(mapping::node_of_ranks(value, size)?, me)
    }

    /// The map of a group whose rank `i` is rank `members[i]` here, seen from its rank `me`:
    /// this map restricted to those ranks, nodes numbered anew. None when a member is not a
    /// rank here or `me` not one of the group.
    pub fn restrict(&self, members: &[usize], me: usize) -> Option<NodeMap> {
        let labels = members
            .iter()
            .map(|&r| self.node_of(r))
            .collect::<Option<Vec<usize>>>()?;
        Self::new(labels, me)
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.layout.p()
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.me
    }

    /// The number of nodes.
    pub fn nodes(&self) -> usize {
        self.layout.nodes()
    }

    /// This rank's node.
    pub fn node(&self) -> usize {
        self.layout.node_of(self.me)
    }

    /// The node of `rank`; None when it is not a rank of the group.
    pub fn node_of(&self, rank: usize) -> Option<usize> {
        self.layout.node_of_each().get(rank).copied()
    }

    /// The ranks on `node`, in rank order; None when there is no such node.
    pub fn ranks_on(&self, node: usize) -> Option<&[usize]> {
        (node < self.layout.nodes()).then(|| self.layout.ranks_on(node))
    }

    /// The ranks on this rank's node, in rank order (this rank included).
    pub fn local_ranks(&self) -> &[usize] {
        self.layout.ranks_on(self.node())
    }

    /// The node of every rank, in rank order.
    pub fn node_of_each(&self) -> &[usize] {
        self.layout.node_of_each()
    }

    /// The same map as plans see it.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
}

/// Where a job's node map comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NodeSource {
    /// The launcher's map where it gives one (`PMI_process_mapping`, PMIx node ids, a job
    /// the launcher puts on one node), else the host names exchanged.
    #[default]
    Launcher,
    /// Always the host names exchanged: for ranks a wrapper moved to other hosts than the
    /// launcher placed them on.
    Hosts,
}

impl Bootstrap {
    /// The launcher's node map, where it gives one: a `PMI_process_mapping` (Hydra, `circulant
    /// run`, Slurm's PMI-2), PMIx's node id of every rank, or a job the launcher puts on one
    /// node (a singleton, a Slurm step or PMIx job of one node, an in-memory job without
    /// host names). No key-value exchange.
    pub fn launcher_node_map(&self) -> Option<NodeMap> {
        let (rank, size) = (self.rank, self.size);
        if let Some(labels) = self.backend.node_ids(size) {
            if labels.len() == size {
                return NodeMap::new(labels, rank);
            }
        }
        match self.backend.nodes() {
            Some(1) => NodeMap::one_node(size, rank),
            _ => None,
        }
    }

    /// This rank's host name: the kernel's, or the one an in-memory job gave its rank.
    pub fn host_name(&self) -> String {
        self.backend.host().unwrap_or_else(kernel_hostname)
    }

    /// The job's node map from `source`. Every rank must call it with the same source: where
    /// the launcher gives no map (or `source` is [`NodeSource::Hosts`]) the ranks exchange
    /// their host names, one key-value exchange in which every rank reads every rank's host.
    /// The launcher is taken to tell every rank the same map, so that all ranks take the same
    /// path.
    pub fn node_map(&mut self, source: NodeSource) -> Result<NodeMap, BootstrapError> {
        if source == NodeSource::Launcher {
            if let Some(map) = self.launcher_node_map() {
                return Ok(map);
            }
        }
        self.publish_host()?;
        self.fence()?;
        self.read_host_map()
    }

    /// Puts this rank's host name, for [`Bootstrap::read_host_map`] after the next fence: a
    /// caller with a fence of its own to make saves the host exchange's.
    pub fn publish_host(&mut self) -> Result<(), BootstrapError> {
        let host = self.host_name();
        self.put_bytes(&Self::rank_key(self.rank, HOST_KEY), host.as_bytes())
    }

    /// The node map of the host names every rank put with [`Bootstrap::publish_host`] before
    /// the last fence (p gets).
    pub fn read_host_map(&mut self) -> Result<NodeMap, BootstrapError> {
        let hosts = (0..self.size)
            .map(|rank| self.get_bytes(&Self::rank_key(rank, HOST_KEY)))
            .collect::<Result<Vec<_>, _>>()?;
        NodeMap::from_hosts(&hosts, self.rank).ok_or_else(|| BootstrapError::CorruptBytes {
            key: HOST_KEY.into(),
            reason: format!("{} host names for rank {}", hosts.len(), self.rank),
        })
    }
}

/// This host's name as the kernel tells it (a UTS namespace's own, where the rank runs in one).
fn kernel_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_are_numbered_by_their_first_rank() {
        let map = NodeMap::new(["b", "a", "b", "c", "a"], 2).expect("rank 2 of 5");
        assert_eq!(map.node_of_each(), &[0, 1, 0, 2, 1]);
        assert_eq!((map.size(), map.nodes(), map.node()), (5, 3, 0));
        assert_eq!(map.ranks_on(1), Some(&[1, 4][..]));
        assert_eq!(map.local_ranks(), &[0, 2]);
        assert_eq!(map.node_of(5), None);
        assert_eq!(map.ranks_on(3), None);
        assert_eq!(NodeMap::new(["a"], 1), None);
    }

    #[test]
    fn a_restricted_map_numbers_its_nodes_anew() {
        let map = NodeMap::from_hosts(&["x", "y", "x", "z", "y", "z"], 0).expect("map");
        // The group of ranks 5, 1, 4 (in that order): nodes z, y, y.
        let sub = map.restrict(&[5, 1, 4], 2).expect("restricted");
        assert_eq!(sub.node_of_each(), &[0, 1, 1]);
        assert_eq!(sub.local_ranks(), &[1, 2]);
        assert_eq!(map.restrict(&[0, 6], 0), None);
        assert_eq!(map.restrict(&[0, 1], 2), None);
    }

    #[test]
    fn a_singleton_and_an_in_memory_job_are_one_node() {
        let boot = Bootstrap::singleton();
        assert_eq!(boot.launcher_node_map(), NodeMap::one_node(1, 0));
        let boots = Bootstrap::in_memory(3, std::time::Duration::from_secs(5)).expect("job");
        let map = boots[1].launcher_node_map().expect("one node");
        assert_eq!(
            (map.nodes(), map.node(), map.local_ranks()),
            (1, 0, &[0, 1, 2][..])
        );
    }
}
