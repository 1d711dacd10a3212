//! Range blocks (Alg. 3) against a naive scan for every cyclic range of every p ≤ 300.

use circulant_core::schedule::{baseblock, range_blocks, BlockSet, Skips};

#[test]
fn every_range_of_every_p_up_to_300() {
    for p in 1..=300 {
        let skips = Skips::new(p).unwrap();
        let bb: Vec<usize> = (0..p).map(|r| baseblock(&skips, r)).collect();
        for start in 0..p {
            assert_eq!(range_blocks(&skips, start, 0), BlockSet::EMPTY);
            let mut naive = BlockSet::EMPTY;
            for len in 1..=p {
                naive.insert(bb[(start + len - 1) % p]);
                assert_eq!(
                    range_blocks(&skips, start, len),
                    naive,
                    "p = {p}, range of {len} from {start}"
                );
            }
            // Longer than p wraps onto itself: still every block.
            assert_eq!(range_blocks(&skips, start, p + 3), naive);
        }
    }
}

#[test]
fn ranges_near_large_powers_of_two() {
    // Sample ranges of large p against a scan of the same ranks.
    for p in [(1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3_000_000] {
        let skips = Skips::new(p).unwrap();
        for start in [0, 1, 2, 5, p / 2 - 1, p / 2, p - 17, p - 1] {
            let mut naive = BlockSet::EMPTY;
            for len in 1..=4096 {
                naive.insert(baseblock(&skips, (start + len - 1) % p));
                assert_eq!(range_blocks(&skips, start, len), naive, "p = {p}");
            }
        }
    }
}
