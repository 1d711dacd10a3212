//! Cost of computing schedules: one rank's receive + send arrays, by the O(log p) construction
//! the plans use and by the greedy one of seed 000 (Alg. 4, 5) side by side, the full table of
//! all p ranks (allgatherv, Alg. 9; the paper reports 40 µs for p = 36 and 5800 µs for
//! p = 1152), and the verifier.

use std::hint::black_box;
use std::time::Duration;

use circulant_core::schedule::verify::{block_counts, verify};
use circulant_core::schedule::{
    greedy, recv_schedule, send_schedule, PhaseBlocks, ScheduleTable, Skips,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

fn one_rank(c: &mut Criterion) {
    for (name, recv, send) in [
        (
            "rank_recv_send",
            recv_schedule as Construction,
            send_schedule as Construction,
        ),
        (
            "rank_recv_send_greedy",
            greedy::recv_schedule,
            greedy::send_schedule,
        ),
    ] {
        let mut group = c.benchmark_group(name);
        for p in [1 << 10, 1 << 15, 1 << 20, (1 << 20) + 1, 3_000_000] {
            let skips = Skips::new(p).unwrap();
            // A spread of ranks: the cost depends on where a rank lies among the skips.
            let ranks: Vec<usize> = (1..=16).map(|i| (p / 17 * i + i) % p).collect();
            group.bench_with_input(BenchmarkId::from_parameter(p), &skips, |b, skips| {
                let mut i = 0;
                b.iter(|| {
                    i = (i + 1) % ranks.len();
                    let r = ranks[i];
                    (recv(skips, black_box(r)), send(skips, black_box(r)))
                })
            });
        }
        group.finish();
    }
}

/// One rank's receive or send array.
type Construction = fn(&Skips, usize) -> PhaseBlocks;

fn full_table(c: &mut Criterion) {
    let mut group = c.benchmark_group("table");
    for p in [36, 576, 1152, 16384] {
        group.bench_with_input(BenchmarkId::from_parameter(p), &p, |b, &p| {
            b.iter(|| ScheduleTable::new(black_box(p)).unwrap())
        });
    }
    group.finish();
}

fn verifier(c: &mut Criterion) {
    let mut group = c.benchmark_group("verify");
    group.sample_size(10);
    for p in [1152, 16384] {
        let table = ScheduleTable::new(p).unwrap();
        let ns = block_counts(table.q());
        group.bench_with_input(BenchmarkId::from_parameter(p), &table, |b, t| {
            b.iter(|| verify(p, t.recv_flat(), t.send_flat(), &ns).unwrap())
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = one_rank, full_table, verifier
}
criterion_main!(benches);
