//! Where ranks run: the node of every rank ([`Layout`]), and the α-β-o model of each level of
//! the machine ([`LevelCosts`]): inside a node and across nodes.
//!
//! Node-aware algorithms are planned for a layout; the simulator prices any algorithm on one
//! (a message between two nodes crosses both nodes' links, which the ranks of a node share).
//! Nodes are numbered 0, 1, ... in the order of their first rank; any placement is allowed
//! (uneven counts per node, round robin).

use std::collections::HashMap;
use std::hash::Hash;

use super::{CostModel, PlanError};

/// The node of every rank, and the ranks of every node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    node: Vec<usize>,
    ranks: Vec<Vec<usize>>,
}

impl Layout {
    /// The layout in which rank r runs on node `node_of[r]`. Nodes are renumbered in the order
    /// of their first rank, so labels need not be dense. Errors on no ranks.
    pub fn new(node_of: &[usize]) -> Result<Layout, PlanError> {
        Self::from_labels(node_of)
    }

    /// The layout of ranks whose nodes carry `labels`, in rank order (equal labels, one node;
    /// nodes numbered in the order of their first rank). Errors on no ranks.
    pub fn from_labels<K: Eq + Hash>(
        labels: impl IntoIterator<Item = K>,
    ) -> Result<Layout, PlanError> {
        let mut index: HashMap<K, usize> = HashMap::new();
        let mut node = Vec::new();
        let mut ranks: Vec<Vec<usize>> = Vec::new();
        for (rank, label) in labels.into_iter().enumerate() {
            let next = index.len();
            let n = *index.entry(label).or_insert(next);
            if n == ranks.len() {
                ranks.push(Vec::new());
            }
            ranks[n].push(rank);
            node.push(n);
        }
        if node.is_empty() {
            return Err(PlanError::NoRanks);
        }
        Ok(Layout { node, ranks })
    }

    /// `p` ranks on one node.
    pub fn one_node(p: usize) -> Result<Layout, PlanError> {
        Self::new(&vec![0; p])
    }

    /// `nodes` × `per_node` ranks placed by blocks: ranks 0..per_node on node 0, and so on.
    pub fn blocks(nodes: usize, per_node: usize) -> Result<Layout, PlanError> {
        let node_of: Vec<usize> = (0..nodes * per_node).map(|r| r / per_node.max(1)).collect();
        Self::new(&node_of)
    }

    /// `nodes` × `per_node` ranks placed round robin: rank r on node r mod `nodes`.
    pub fn round_robin(nodes: usize, per_node: usize) -> Result<Layout, PlanError> {
        let node_of: Vec<usize> = (0..nodes * per_node).map(|r| r % nodes.max(1)).collect();
        Self::new(&node_of)
    }

    /// Number of ranks.
    pub fn p(&self) -> usize {
        self.node.len()
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.ranks.len()
    }

    /// The node of `rank` (a rank of the layout).
    pub fn node_of(&self, rank: usize) -> usize {
        self.node[rank]
    }

    /// The node of every rank, in rank order.
    pub fn node_of_each(&self) -> &[usize] {
        &self.node
    }

    /// The ranks of `node`, in rank order.
    pub fn ranks_on(&self, node: usize) -> &[usize] {
        &self.ranks[node]
    }

    /// The most ranks any node holds.
    pub fn max_per_node(&self) -> usize {
        self.ranks.iter().map(Vec::len).max().unwrap_or(0)
    }

    /// Whether some node holds several ranks and there are several nodes: the layouts on
    /// which node-aware algorithms differ from flat ones.
    pub fn is_hierarchical(&self) -> bool {
        self.nodes() > 1 && self.nodes() < self.p()
    }
}

/// The α-β-o model of each level: messages between ranks of one node, and messages between
/// nodes (which also share their nodes' links).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LevelCosts {
    /// Between ranks of one node.
    pub inside: CostModel,
    /// Between ranks of different nodes.
    pub across: CostModel,
}

impl LevelCosts {
    /// The same model on both levels.
    pub fn flat(model: CostModel) -> Self {
        LevelCosts {
            inside: model,
            across: model,
        }
    }

    /// The model of a message from `from` to `to` on `layout`.
    pub fn between(&self, layout: &Layout, from: usize, to: usize) -> &CostModel {
        if layout.node_of(from) == layout.node_of(to) {
            &self.inside
        } else {
            &self.across
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_are_numbered_by_their_first_rank() {
        let l = Layout::new(&[7, 3, 7, 9, 3]).expect("ranks");
        assert_eq!(l.node_of_each(), &[0, 1, 0, 2, 1]);
        assert_eq!(l.ranks_on(0), &[0, 2]);
        assert_eq!(l.ranks_on(1), &[1, 4]);
        assert_eq!(l.ranks_on(2), &[3]);
        assert_eq!(l.max_per_node(), 2);
        assert!(l.is_hierarchical());
    }

    #[test]
    fn blocks_and_round_robin() {
        let b = Layout::blocks(2, 3).expect("ranks");
        assert_eq!(b.node_of_each(), &[0, 0, 0, 1, 1, 1]);
        let r = Layout::round_robin(2, 3).expect("ranks");
        assert_eq!(r.node_of_each(), &[0, 1, 0, 1, 0, 1]);
        assert!(!Layout::one_node(4).expect("ranks").is_hierarchical());
        assert!(!Layout::blocks(4, 1).expect("ranks").is_hierarchical());
        assert_eq!(Layout::new(&[]), Err(PlanError::NoRanks));
    }
}
