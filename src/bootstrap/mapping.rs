//! `PMI_process_mapping`: how PMI-1 and PMI-2 launchers (Hydra, `circulant run`, Slurm) say
//! where the ranks of a job sit, so that a rank learns the node of every rank without
//! reading every other rank's host name.
//!
//! The value is `(vector,(start,count,per_node),...)`: each block puts `per_node` consecutive
//! ranks on each of the `count` nodes from node `start` on; the blocks repeat from the first
//! when the job has more ranks than they describe. `(vector,(0,1,4))` is four ranks on one
//! node, `(vector,(0,4,1))` one rank on each of four nodes, round robin when repeated.

/// The key under which the launcher keeps the mapping.
pub const KEY: &str = "PMI_process_mapping";

/// One block of a mapping: `per_node` consecutive ranks on each of `count` nodes from node
/// `start` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Block {
    start: usize,
    count: usize,
    per_node: usize,
}

/// The blocks of `mapping`, or None when it is not a mapping this parser understands (an
/// empty vector, a count or per-node of 0 and node numbers past `usize` included).
fn blocks(mapping: &str) -> Option<Vec<Block>> {
    let body = mapping.trim().strip_prefix('(')?.strip_suffix(')')?;
    let mut rest = body.trim().strip_prefix("vector")?.trim_start();
    let mut blocks = Vec::new();
    while !rest.is_empty() {
        let after_comma = rest.strip_prefix(',')?.trim_start();
        let inner_start = after_comma.strip_prefix('(')?;
        let close = inner_start.find(')')?;
        let fields: Vec<usize> = inner_start[..close]
            .split(',')
            .map(|f| f.trim().parse().ok())
            .collect::<Option<_>>()?;
        let [start, count, per_node] = fields[..] else {
            return None;
        };
        if count == 0 || per_node == 0 {
            return None;
        }
        start.checked_add(count)?;
        blocks.push(Block {
            start,
            count,
            per_node,
        });
        rest = inner_start[close + 1..].trim_start();
    }
    (!blocks.is_empty()).then_some(blocks)
}

/// The number of distinct nodes `mapping` places ranks on, or None when it is not a
/// mapping this parser understands (an empty vector included): the caller then finds out
/// another way.
pub fn nodes(mapping: &str) -> Option<usize> {
    blocks(mapping)?.iter().map(|b| b.start + b.count).max()
}

/// The node (as the mapping numbers it) of each of the `size` ranks of a job, in rank order,
/// as MPICH reads the mapping: the blocks place ranks 0, 1, ... in turn, and start again
/// from the first block (the same node numbers) while ranks are left; ranks past `size` are
/// not placed. None when `mapping` is not one this parser understands.
pub fn node_of_ranks(mapping: &str, size: usize) -> Option<Vec<usize>> {
    let blocks = blocks(mapping)?;
    let mut node = Vec::with_capacity(size);
    // Each pass over the blocks places at least one rank (no block is empty).
    while node.len() < size {
        for block in &blocks {
            for n in block.start..block.start + block.count {
                let left = size - node.len();
                if left == 0 {
                    return Some(node);
                }
                node.resize(node.len() + block.per_node.min(left), n);
            }
        }
    }
    Some(node)
}

/// The mapping of `size` ranks all on one node, as `circulant run` serves it.
pub fn one_node(size: usize) -> String {
    format!("(vector,(0,1,{size}))")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_nodes_of_launchers_mappings() {
        assert_eq!(nodes("(vector,(0,1,1))"), Some(1));
        assert_eq!(nodes("(vector,(0,1,4))"), Some(1));
        assert_eq!(nodes("(vector,(0,4,1))"), Some(4));
        assert_eq!(nodes("(vector,(0,2,3),(2,1,1))"), Some(3));
        assert_eq!(nodes("(vector, (0,2,2), (0,2,1))"), Some(2));
        assert_eq!(nodes(&one_node(64)), Some(1));
    }

    #[test]
    fn places_ranks_as_mpich_does() {
        assert_eq!(node_of_ranks("(vector,(0,1,4))", 4), Some(vec![0; 4]));
        assert_eq!(node_of_ranks("(vector,(0,1,4))", 2), Some(vec![0; 2]));
        assert_eq!(node_of_ranks("(vector,(0,2,2))", 4), Some(vec![0, 0, 1, 1]));
        // Round robin: one rank per node, the block repeated.
        assert_eq!(
            node_of_ranks("(vector,(0,3,1))", 7),
            Some(vec![0, 1, 2, 0, 1, 2, 0])
        );
        // Uneven: 2 + 2 + 1 (Slurm's block distribution of 5 ranks on 3 nodes).
        assert_eq!(
            node_of_ranks("(vector,(0,2,2),(2,1,1))", 5),
            Some(vec![0, 0, 1, 1, 2])
        );
        assert_eq!(
            node_of_ranks("(vector,(0,2,2),(2,1,1))", 7),
            Some(vec![0, 0, 1, 1, 2, 0, 0])
        );
        assert_eq!(node_of_ranks("(vector,(0,1,1))", 0), Some(vec![]));
        assert_eq!(node_of_ranks("(vector,(0,1))", 3), None);
    }

    #[test]
    fn refuses_what_it_does_not_understand() {
        for text in [
            "",
            "(vector)",
            "(vector,)",
            "(vector,(0,1))",
            "(vector,(0,0,4))",
            "(vector,(0,1,0))",
            "(vector,(a,1,1))",
            "(hybrid,(0,1,1))",
            "(vector,(0,1,1)",
            "vector,(0,1,1)",
            "(vector,(18446744073709551615,2,1))",
        ] {
            assert_eq!(nodes(text), None, "{text:?}");
            assert_eq!(node_of_ranks(text, 4), None, "{text:?}");
        }
    }
}
