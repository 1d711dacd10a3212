//! Properties of `PMI_process_mapping`'s parser and of [`NodeMap`]: any placement written
//! as a mapping reads back as it was (blocks, round robin, uneven counts), a mapping shorter
//! than the job repeats, and what is not a mapping is refused.

use circulant::bootstrap::mapping::{node_of_ranks, nodes};
use circulant::bootstrap::NodeMap;
use proptest::prelude::*;

/// `placement` (the node of each rank) as a launcher writes it: runs of ranks on one node
/// become blocks, and blocks of the same run length on consecutive nodes are merged.
fn write_mapping(placement: &[usize]) -> String {
    let mut blocks: Vec<(usize, usize, usize)> = Vec::new();
    let mut rank = 0;
    while rank < placement.len() {
        let node = placement[rank];
        let run = placement[rank..].iter().take_while(|&&n| n == node).count();
        match blocks.last_mut() {
            Some((start, count, per_node)) if *per_node == run && *start + *count == node => {
                *count += 1;
            }
            _ => blocks.push((node, 1, run)),
        }
        rank += run;
    }
    let inner: Vec<String> = blocks
        .iter()
        .map(|(s, c, n)| format!("({s},{c},{n})"))
        .collect();
    format!("(vector,{})", inner.join(","))
}

/// Any placement of 1..40 ranks on up to 6 nodes.
fn placement() -> impl Strategy<Value = Vec<usize>> {
    (1usize..7).prop_flat_map(|k| prop::collection::vec(0..k, 1..40))
}

proptest! {
    #[test]
    fn any_placement_reads_back(placement in placement()) {
        let text = write_mapping(&placement);
        prop_assert_eq!(node_of_ranks(&text, placement.len()), Some(placement.clone()));
        let distinct = placement.iter().max().map_or(0, |m| m + 1);
        prop_assert!(nodes(&text).is_some_and(|n| n <= distinct));
    }

    #[test]
    fn blocks_of_ranks_per_node(n in 1usize..9, per_node in 1usize..9) {
        let text = format!("(vector,(0,{n},{per_node}))");
        let p = n * per_node;
        let want: Vec<usize> = (0..p).map(|r| r / per_node).collect();
        prop_assert_eq!(node_of_ranks(&text, p), Some(want));
    }

    #[test]
    fn round_robin_repeats_the_block(n in 1usize..9, p in 0usize..60) {
        let text = format!("(vector,(0,{n},1))");
        let want: Vec<usize> = (0..p).map(|r| r % n).collect();
        prop_assert_eq!(node_of_ranks(&text, p), Some(want));
    }

    #[test]
    fn uneven_counts_per_node(n in 1usize..9, p in 1usize..60) {
        // Slurm's block distribution: the first p % n nodes take one rank more.
        let (q, extra) = (p / n, p % n);
        let mut blocks = Vec::new();
        if extra > 0 {
            blocks.push(format!("(0,{extra},{})", q + 1));
        }
        if q > 0 {
            blocks.push(format!("({extra},{},{q})", n - extra));
        }
        let text = format!("(vector,{})", blocks.join(","));
        let want: Vec<usize> = (0..n)
            .flat_map(|node| (0..q + usize::from(node < extra)).map(move |_| node))
            .collect();
        prop_assert_eq!(node_of_ranks(&text, p), Some(want));
    }

    #[test]
    fn a_shorter_mapping_repeats_and_a_longer_one_is_cut(
        placement in placement(),
        p in 0usize..100,
    ) {
        let text = write_mapping(&placement);
        let want: Vec<usize> = (0..p).map(|r| placement[r % placement.len()]).collect();
        prop_assert_eq!(node_of_ranks(&text, p), Some(want));
    }

    #[test]
    fn cut_or_zeroed_mappings_are_refused(placement in placement(), cut in any::<prop::sample::Index>()) {
        let text = write_mapping(&placement);
        let at = cut.index(text.len());
        prop_assert_eq!(node_of_ranks(&text[..at], 4), None, "{}", &text[..at]);
        // A block of zero nodes or zero ranks per node.
        let zero_count = text.replacen(",1,", ",0,", 1);
        if zero_count != text {
            prop_assert_eq!(node_of_ranks(&zero_count, 4), None);
        }
        prop_assert_eq!(node_of_ranks(&text.replacen("vector", "hybrid", 1), 4), None);
        prop_assert_eq!(node_of_ranks(&text.replacen(')', ",1)", 1), 4), None);
    }

    #[test]
    fn text_without_the_grammar_is_refused(text in "[^(]{0,40}") {
        prop_assert_eq!(node_of_ranks(&text, 3), None);
    }

    #[test]
    fn nodes_are_numbered_by_their_first_rank(hosts in prop::collection::vec("[abc]{1,2}", 1..30)) {
        let me = hosts.len() - 1;
        let map = NodeMap::from_hosts(&hosts, me).expect("a rank");
        prop_assert_eq!(map.size(), hosts.len());
        let mut first = Vec::new();
        for node in 0..map.nodes() {
            let ranks = map.ranks_on(node).expect("a node");
            prop_assert!(!ranks.is_empty());
            prop_assert!(ranks.windows(2).all(|w| w[0] < w[1]));
            for &r in ranks {
                prop_assert_eq!(map.node_of(r), Some(node));
                prop_assert_eq!(&hosts[r], &hosts[ranks[0]]);
            }
            first.push(ranks[0]);
        }
        prop_assert!(first.windows(2).all(|w| w[0] < w[1]));
        prop_assert_eq!(first.len(), map.nodes());
        prop_assert_eq!(map.local_ranks(), map.ranks_on(map.node()).expect("mine"));
        let all: Vec<usize> = (0..hosts.len()).collect();
        prop_assert_eq!(map.restrict(&all, me), Some(map.clone()));
    }
}
