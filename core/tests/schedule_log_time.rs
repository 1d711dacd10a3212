//! The O(log p) construction of one rank's arrays ([`recv_schedule`], [`send_schedule`]) gives
//! the greedy construction's arrays (seed 000, Alg. 4 and 5): for every rank of every
//! p ≤ 4096 (against the table, whose rows are the greedy ones) and for sampled ranks up to
//! p = 2^24 − 1 (against the greedy per-rank functions); and the golden p = 17 arrays.
//! p = 33, 65–73, 81 and 129–153, where an iterative rewrite of the search goes wrong, are
//! among the first.

use circulant_core::schedule::{baseblock, greedy, recv_schedule, send_schedule};
use circulant_core::schedule::{ScheduleTable, Skips};

#[test]
fn every_rank_of_every_p_up_to_4096() {
    std::thread::scope(|s| {
        for w in 0..2 {
            s.spawn(move || {
                for p in (1 + w..=4096).step_by(2) {
                    let table = ScheduleTable::new(p).unwrap();
                    let skips = table.skips();
                    for r in 0..p {
                        assert_eq!(&*recv_schedule(skips, r), table.recv(r), "p = {p}, r = {r}");
                        assert_eq!(&*send_schedule(skips, r), table.send(r), "p = {p}, r = {r}");
                    }
                }
            });
        }
    });
}

/// A fixed xorshift sequence, so that a failure is reproducible.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn sampled_ranks_up_to_2_pow_24() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut ps: Vec<usize> = (13..=24)
        .flat_map(|k| [(1usize << k) - 1, 1 << k, (1 << k) + 1])
        .filter(|&p| p < 1 << 24)
        .collect();
    ps.extend((0..24).map(|_| 4097 + (xorshift(&mut state) % ((1 << 24) - 4097)) as usize));
    for p in ps {
        let skips = Skips::new(p).unwrap();
        // The ranks around every skip (home-range edges) and random ones.
        let mut ranks: Vec<usize> = skips
            .as_slice()
            .iter()
            .flat_map(|&s| [s - 1, s % p, (s + 1) % p, p - s])
            .collect();
        ranks.extend((0..48).map(|_| (xorshift(&mut state) % p as u64) as usize));
        for r in ranks {
            assert_eq!(
                recv_schedule(&skips, r),
                greedy::recv_schedule(&skips, r),
                "recv p = {p}, r = {r}"
            );
            assert_eq!(
                send_schedule(&skips, r),
                greedy::send_schedule(&skips, r),
                "send p = {p}, r = {r}"
            );
        }
    }
}

/// p = 17 (skips 1, 2, 3, 5, 9, 17): baseblocks, receive and send arrays by round, ranks in
/// order (the receive array of rank 0 is not part of the table).
const P17_BASEBLOCKS: [usize; 17] = [5, 0, 1, 2, 0, 3, 0, 1, 2, 4, 0, 1, 2, 0, 3, 0, 1];
const P17_RECV: [[i32; 16]; 5] = [
    [
        0, -5, -4, -3, -5, -2, -5, -4, -3, -1, -5, -4, -3, -5, -2, -5,
    ],
    [
        -4, 1, -5, -4, -3, -3, -2, -5, -4, -3, -1, -5, -4, -3, -3, -2,
    ],
    [-2, -2, 2, 0, -4, -4, -3, -2, -2, -4, -3, -1, -1, -4, -4, -3],
    [-3, -3, -2, -2, 3, 0, 1, 2, -5, -2, -2, -2, -2, -1, -1, -1],
    [-1, -1, -1, -1, -1, -1, -1, -1, 4, 0, 1, 2, 0, 3, 0, 1],
];
/// Marks the entries toward the root (r + skips[k] = 17), which hold the root's own receive
/// entry.
const ROOT: i32 = i32::MIN;
const P17_SEND: [[i32; 17]; 5] = [
    [
        0, -5, -4, -3, -5, -2, -5, -4, -3, -1, -5, -4, -3, -5, -2, -5, ROOT,
    ],
    [
        1, -5, -4, -3, -3, -2, -5, -4, -3, -1, -5, -4, -3, -3, -2, ROOT, -4,
    ],
    [
        2, 0, -4, -4, -3, -2, -2, -4, -3, -1, -1, -4, -4, -3, ROOT, -2, -2,
    ],
    [
        3, 0, 1, 2, -5, -2, -2, -2, -2, -1, -1, -1, ROOT, -3, -3, -2, -2,
    ],
    [4, 0, 1, 2, 0, 3, 0, 1, ROOT, -1, -1, -1, -1, -1, -1, -1, -1],
];

#[test]
fn golden_arrays_for_p_17() {
    let skips = Skips::new(17).unwrap();
    assert_eq!(skips.as_slice(), &[1, 2, 3, 5, 9, 17]);
    let root = recv_schedule(&skips, 0);
    for r in 0..17 {
        assert_eq!(baseblock(&skips, r), P17_BASEBLOCKS[r], "r = {r}");
        let recv = recv_schedule(&skips, r);
        let send = send_schedule(&skips, r);
        for k in 0..5 {
            if r > 0 {
                assert_eq!(recv[k], P17_RECV[k][r - 1], "recv r = {r}, k = {k}");
            }
            let to = (r + skips.get(k)) % 17;
            assert_eq!(to == 0, P17_SEND[k][r] == ROOT, "r = {r}, k = {k}");
            let want = if to == 0 { root[k] } else { P17_SEND[k][r] };
            assert_eq!(send[k], want, "send r = {r}, k = {k}");
        }
    }
}
