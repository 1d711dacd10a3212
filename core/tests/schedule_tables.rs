//! Golden data from the paper (seed 000): Table 1 (p = 20) in full and the baseblock rows of
//! Tables 1–4. The schedule rows of Tables 2–4 are garbled in the seed's text (they fail
//! agreement) and are not used. The paper prints the root's baseblock as 0 or −1; we define it
//! as q (the root counts as rank p), so the root's column is not compared.

use circulant_core::schedule::{
    baseblock, recv_schedule, send_schedule, Schedule, ScheduleTable, Skips,
};

const TABLE1_RECV: [[i32; 20]; 5] = [
    [
        -5, 0, -5, -4, -3, -5, -2, -5, -4, -3, -5, -1, -5, -4, -3, -5, -2, -5, -4, -3,
    ],
    [
        -3, -3, 1, -5, -4, -3, -3, -2, -5, -4, -3, -3, -1, -5, -4, -3, -3, -2, -5, -4,
    ],
    [
        -4, -4, -3, 2, 0, -4, -4, -3, -2, -2, -4, -4, -3, -1, -1, -4, -4, -3, -2, -2,
    ],
    [
        -2, -2, -2, -2, -2, 3, 0, 1, 2, 0, -2, -2, -2, -2, -2, -1, -1, -1, -1, -1,
    ],
    [
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 4, 0, 1, 2, 0, 3, 0, 1, 2, 0,
    ],
];

const TABLE1_SEND: [[i32; 20]; 5] = [
    [
        0, -5, -4, -3, -5, -2, -5, -4, -3, -5, -1, -5, -4, -3, -5, -2, -5, -4, -3, -5,
    ],
    [
        1, -5, -4, -3, -3, -2, -5, -4, -3, -3, -1, -5, -4, -3, -3, -2, -5, -4, -3, -3,
    ],
    [
        2, 0, -4, -4, -3, -2, -2, -4, -4, -3, -1, -1, -4, -4, -3, -2, -2, -4, -4, -3,
    ],
    [
        3, 0, 1, 2, 0, -2, -2, -2, -2, -2, -1, -1, -1, -1, -1, -2, -2, -2, -2, -2,
    ],
    [
        4, 0, 1, 2, 0, 3, 0, 1, 2, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    ],
];

/// Baseblocks of ranks 1..p from the paper's tables.
const BASEBLOCKS: [(usize, &[usize]); 4] = [
    (
        20,
        &[0, 1, 2, 0, 3, 0, 1, 2, 0, 4, 0, 1, 2, 0, 3, 0, 1, 2, 0],
    ),
    (
        33,
        &[
            0, 1, 2, 0, 3, 0, 1, 2, 4, 0, 1, 2, 0, 3, 0, 1, 5, 0, 1, 2, 0, 3, 0, 1, 2, 4, 0, 1, 2,
            0, 3, 0,
        ],
    ),
    (
        32,
        &[
            0, 1, 0, 2, 0, 1, 0, 3, 0, 1, 0, 2, 0, 1, 0, 4, 0, 1, 0, 2, 0, 1, 0, 3, 0, 1, 0, 2, 0,
            1, 0,
        ],
    ),
    (
        31,
        &[
            0, 1, 0, 2, 0, 1, 0, 3, 0, 1, 0, 2, 0, 1, 0, 4, 0, 1, 0, 2, 0, 1, 0, 3, 0, 1, 0, 2, 0,
            1,
        ],
    ),
];

#[test]
fn table_1_receive_and_send_schedules() {
    let skips = Skips::new(20).unwrap();
    assert_eq!(skips.as_slice(), &[1, 2, 3, 5, 10, 20]);
    let table = ScheduleTable::new(20).unwrap();
    for r in 0..20 {
        let want_recv: Vec<i32> = TABLE1_RECV.iter().map(|row| row[r]).collect();
        let want_send: Vec<i32> = TABLE1_SEND.iter().map(|row| row[r]).collect();
        assert_eq!(
            &*recv_schedule(&skips, r),
            &want_recv[..],
            "recv of rank {r}"
        );
        assert_eq!(
            &*send_schedule(&skips, r),
            &want_send[..],
            "send of rank {r}"
        );
        assert_eq!(table.recv(r), &want_recv[..], "table recv of rank {r}");
        assert_eq!(table.send(r), &want_send[..], "table send of rank {r}");
        let schedule = Schedule::new(20, r, 0).unwrap();
        assert_eq!(schedule.recv(), &want_recv[..]);
        assert_eq!(schedule.send(), &want_send[..]);
    }
}

#[test]
fn baseblock_rows_of_tables_1_to_4() {
    for (p, row) in BASEBLOCKS {
        let skips = Skips::new(p).unwrap();
        assert_eq!(row.len(), p - 1);
        for (i, &want) in row.iter().enumerate() {
            assert_eq!(baseblock(&skips, i + 1), want, "p = {p}, rank {}", i + 1);
        }
        assert_eq!(baseblock(&skips, 0), skips.q(), "the root counts as rank p");
    }
}

#[test]
fn receive_rows_hold_the_baseblock_once_and_every_other_block_of_the_previous_phase() {
    for p in 2..=1500 {
        let table = ScheduleTable::new(p).unwrap();
        let q = table.q() as i32;
        for r in 0..p {
            let own = baseblock(table.skips(), r) as i32;
            let mut blocks: Vec<i32> = table
                .recv(r)
                .iter()
                .map(|&e| if e >= 0 { e } else { e + q })
                .collect();
            blocks.sort_unstable();
            let mut want: Vec<i32> = (0..q).collect();
            if r == 0 {
                assert!(table.recv(r).iter().all(|&e| e < 0), "p = {p}: root");
            } else {
                assert_eq!(table.recv(r).iter().filter(|&&e| e >= 0).count(), 1);
                assert!(table.recv(r).contains(&own));
            }
            want.sort_unstable();
            assert_eq!(blocks, want, "p = {p}, rank {r}");
        }
    }
}

#[test]
fn alg_5_send_schedule_matches_the_table() {
    for p in 1..=700 {
        let table = ScheduleTable::new(p).unwrap();
        for r in 0..p {
            assert_eq!(
                &*send_schedule(table.skips(), r),
                table.send(r),
                "p = {p}, r = {r}"
            );
        }
    }
    for p in [1 << 16, (1 << 16) + 1, 3_000_000, 1 << 20] {
        let skips = Skips::new(p).unwrap();
        for r in [0, 1, 2, p / 3, p / 2, p - 2, p - 1] {
            let send = send_schedule(&skips, r);
            for k in 0..skips.q() {
                let to = (r + skips.get(k)) % p;
                assert_eq!(send[k], recv_schedule(&skips, to)[k], "p = {p}, r = {r}");
            }
        }
    }
}

#[test]
fn table_rows_equal_per_rank_schedules() {
    for p in 1..=2048 {
        let table = ScheduleTable::new(p).unwrap();
        for r in 0..p {
            assert_eq!(
                table.recv(r),
                &*recv_schedule(table.skips(), r),
                "p = {p}, r = {r}"
            );
        }
    }
    // Several threads: the windows restart at each chunk boundary.
    for (p, threads) in [(70_001, 3), ((1 << 20) + 1, 2), (1 << 20, 5)] {
        let table = ScheduleTable::with_threads(p, threads).unwrap();
        assert_eq!(table, ScheduleTable::new(p).unwrap());
        let skips = table.skips();
        for r in (0..p).step_by(997).chain(p - 40..p) {
            assert_eq!(table.recv(r), &*recv_schedule(skips, r), "p = {p}, r = {r}");
            assert_eq!(table.send(r), &*send_schedule(skips, r), "p = {p}, r = {r}");
        }
    }
}
