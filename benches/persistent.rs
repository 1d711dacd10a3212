//! What a start of a persistent operation saves over a plain call: the algorithm's
//! construction (for the circulant allgatherv the schedule table of seed 000) and the plan's
//! materialisation, which a plain call does every time and a persistent request once. A start
//! only clones the prepared plan (reference counts).

use std::hint::black_box;

use circulant::bench_support::{Limits, Prepared};
use circulant::plan::distribution::Distribution;
use circulant::plan::registry;
use circulant::plan::{CostModel, Problem};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

const MODEL: CostModel = CostModel {
    alpha: 1e-6,
    beta: 1e-10,
    o: 0.0,
};

const LIMITS: Limits = Limits {
    max_msg_size: 1 << 30,
};

/// Per call: choose by name, build the algorithm, plan one rank, materialise.
fn plan_per_call(name: &str, problem: &Problem, rank: usize) -> Prepared {
    let algorithm = registry::by_name(name, problem, &MODEL).expect("algorithm applies");
    let plan = algorithm.rank_plan(rank).expect("rank in range");
    Prepared::new("allgatherv", plan, problem.p(), LIMITS).expect("plan fits")
}

fn per_start(c: &mut Criterion) {
    let mut group = c.benchmark_group("allgatherv_per_start");
    for p in [4usize, 64] {
        for total in [4096usize, 1 << 20] {
            let dist = Distribution::Regular;
            let problem = Problem::Allgatherv {
                counts: dist.counts(p, dist.base_for_total(p, total)),
            };
            let name = "circulant-allgatherv";
            let id = format!("p{p}_{total}B");
            group.bench_with_input(BenchmarkId::new("plain", &id), &problem, |b, problem| {
                b.iter(|| plan_per_call(name, black_box(problem), 1))
            });
            let prepared = plan_per_call(name, &problem, 1);
            group.bench_with_input(
                BenchmarkId::new("persistent", &id),
                &prepared,
                |b, prepared| b.iter(|| black_box(prepared).clone()),
            );
        }
    }
    group.finish();
}

criterion_group!(benches, per_start);
criterion_main!(benches);
