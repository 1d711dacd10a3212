//! The rounds iterator (Alg. 6 with the root offset, negative blocks and clamping) run for all
//! ranks together, and the typed errors of invalid input.

use circulant_core::schedule::{rounds_count, Round, Schedule, ScheduleError, ScheduleTable};

/// Runs the rounds of every rank for a broadcast of n blocks from `root` and checks that every
/// send meets a matching receive, every sent block is held, and everyone ends with all blocks.
fn broadcast(schedules: &[Schedule], root: usize, n: usize) {
    let p = schedules.len();
    let rounds: Vec<Vec<Round>> = schedules
        .iter()
        .map(|s| s.rounds(n).unwrap().collect())
        .collect();
    let total = rounds_count(p, n).unwrap();
    let mut held = vec![vec![false; n]; p];
    held[root] = vec![true; n];
    for i in 0..total {
        for (r, rs) in rounds.iter().enumerate() {
            let round = rs[i];
            assert_eq!(round.index, i);
            let peer = rounds[round.to][i];
            assert_eq!(peer.from, r, "p = {p}, root {root}, n = {n}: {round:?}");
            assert_eq!(peer.recv, round.send, "p = {p}, root {root}, n = {n}");
            if let Some(b) = round.send {
                assert!(
                    b < n && held[r][b],
                    "p = {p}, root {root}, n = {n}: {round:?}"
                );
            }
            if r == root {
                assert_eq!(round.recv, None);
            }
        }
        for (r, rs) in rounds.iter().enumerate() {
            if let Some(b) = rs[i].recv {
                held[r][b] = true;
            }
        }
    }
    for (r, h) in held.iter().enumerate() {
        assert!(
            h.iter().all(|&x| x),
            "p = {p}, root {root}, n = {n}: rank {r} {h:?}"
        );
    }
}

#[test]
fn every_rank_gets_every_block_from_any_root() {
    for p in 1..=70 {
        let table = ScheduleTable::new(p).unwrap();
        let q = table.q();
        for root in [0, p / 2, p - 1] {
            let schedules: Vec<Schedule> =
                (0..p).map(|r| Schedule::new(p, r, root).unwrap()).collect();
            for (r, s) in schedules.iter().enumerate() {
                let from_table = Schedule::from_table(&table, r, root).unwrap();
                assert_eq!(from_table.recv(), s.recv());
                assert_eq!(from_table.send(), s.send());
                assert_eq!(s.virtual_rank(), (r + p - root) % p);
            }
            for n in (1..=3 * q + 2).chain([50]) {
                broadcast(&schedules, root, n);
            }
        }
    }
}

#[test]
fn round_counts() {
    assert_eq!(rounds_count(1, 7), Ok(0));
    assert_eq!(rounds_count(2, 1), Ok(1));
    assert_eq!(rounds_count(20, 10), Ok(14));
    assert_eq!(rounds_count(1 << 20, 1), Ok(20));
    assert_eq!(rounds_count((1 << 20) + 1, 3), Ok(23));
    let s = Schedule::new(1, 0, 0).unwrap();
    assert_eq!(s.q(), 0);
    assert!(s.recv().is_empty() && s.send().is_empty());
    assert_eq!(s.rounds(4).unwrap().count(), 0);
    let s = Schedule::new(20, 7, 3).unwrap();
    assert_eq!(s.rounds(10).unwrap().len(), 14);
    let borrowed: Vec<Round> = s.rounds(10).unwrap().collect();
    let owned: Vec<Round> = s.clone().into_rounds(10).unwrap().collect();
    assert_eq!(borrowed, owned);
}

#[test]
fn invalid_input_gives_typed_errors() {
    assert_eq!(Schedule::new(0, 0, 0).err(), Some(ScheduleError::ZeroRanks));
    assert_eq!(
        Schedule::new(5, 5, 0).err(),
        Some(ScheduleError::RankOutOfRange { rank: 5, p: 5 })
    );
    assert_eq!(
        Schedule::new(5, 1, 9).err(),
        Some(ScheduleError::RootOutOfRange { root: 9, p: 5 })
    );
    let s = Schedule::new(5, 1, 2).unwrap();
    assert_eq!(s.rounds(0).err(), Some(ScheduleError::ZeroBlocks));
    assert_eq!(rounds_count(0, 1), Err(ScheduleError::ZeroRanks));
    assert_eq!(rounds_count(3, 0), Err(ScheduleError::ZeroBlocks));
    assert_eq!(ScheduleTable::new(0).err(), Some(ScheduleError::ZeroRanks));
    let table = ScheduleTable::new(4).unwrap();
    assert_eq!(
        Schedule::from_table(&table, 4, 0).err(),
        Some(ScheduleError::RankOutOfRange { rank: 4, p: 4 })
    );
    assert!(circulant_core::schedule::Skips::new(0).is_err());
    let n = circulant_core::schedule::MAX_BLOCKS + 1;
    assert_eq!(s.rounds(n).err(), Some(ScheduleError::TooManyBlocks { n }));
    for p in [usize::MAX, 1 << 60] {
        assert_eq!(
            ScheduleTable::new(p).err(),
            Some(ScheduleError::TableTooLarge { p })
        );
    }
    // One rank's schedule needs no table: any p works.
    let s = Schedule::new(usize::MAX, usize::MAX - 1, 3).unwrap();
    assert_eq!(s.q(), 64);
    assert_eq!(s.rounds(2).unwrap().len(), 65);
}
