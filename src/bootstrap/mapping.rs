//! `PMI_process_mapping`: how PMI-1 and PMI-2 launchers (Hydra, `circulant run`, Slurm) say
//! where the ranks of a job sit, so that a rank learns how many nodes the job spans without
//! reading every other rank's host name.
//!
//! The value is `(vector,(start,count,per_node),...)`: each block puts `per_node` consecutive
//! ranks on each of the `count` nodes from node `start` on; the blocks repeat from the first
//! when the job has more ranks than they describe. `(vector,(0,1,4))` is four ranks on one
//! node, `(vector,(0,4,1))` one rank on each of four nodes, round robin when repeated.

/// The key under which the launcher keeps the mapping.
pub const KEY: &str = "PMI_process_mapping";

/// The number of distinct nodes `mapping` places ranks on, or None when it is not a
/// mapping this parser understands (an empty vector included): the caller then finds out
/// another way.
pub fn nodes(mapping: &str) -> Option<usize> {
    let body = mapping.trim().strip_prefix('(')?.strip_suffix(')')?;
    let blocks = body.trim().strip_prefix("vector")?.trim_start();
    let mut rest = blocks;
    let mut nodes = 0usize;
    let mut any = false;
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
        nodes = nodes.max(start.checked_add(count)?);
        any = true;
        rest = inner_start[close + 1..].trim_start();
    }
    any.then_some(nodes)
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
        ] {
            assert_eq!(nodes(text), None, "{text:?}");
        }
    }
}
