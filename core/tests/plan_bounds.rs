//! The broadcast lower bound of plan::bounds (seed 000 Theorem 2, minimised over real n) lies
//! between the plain latency + bandwidth bound αq + βm and the predicted time of every
//! broadcast algorithm of the registry.

use circulant_core::plan::bounds::lower_bound;
use circulant_core::plan::{ceil_log2, registry, CostModel, Problem};

const MODELS: [CostModel; 3] = [
    CostModel {
        alpha: 1e-6,
        beta: 1e-9,
        o: 0.0,
    },
    CostModel {
        alpha: 50e-6,
        beta: 27e-9,
        o: 0.0,
    },
    CostModel {
        alpha: 2e-6,
        beta: 1e-10,
        o: 0.0,
    },
];

#[test]
fn broadcast_bound_between_latency_bandwidth_and_every_algorithm() {
    for model in &MODELS {
        for p in [2usize, 3, 4, 5, 8, 17, 36, 100, 1000] {
            for m in [0usize, 1, 100, 4096, 100_000, 1 << 20, 50_000_000] {
                for root in [0, p - 1] {
                    let problem = Problem::Broadcast { p, root, bytes: m };
                    let bound = lower_bound(&problem, model);
                    let plain = if m == 0 {
                        0.0
                    } else {
                        ceil_log2(p) as f64 * model.alpha + model.beta * m as f64
                    };
                    assert!(
                        bound >= plain * (1.0 - 1e-12),
                        "p={p} m={m}: {bound} < {plain}"
                    );
                    for alg in registry::applicable(&problem, model).expect("valid") {
                        let t = alg.predict(model).time;
                        assert!(
                            t >= bound * (1.0 - 1e-9),
                            "{} p={p} m={m}: predicted {t} below the bound {bound}",
                            alg.name()
                        );
                    }
                }
            }
        }
    }
}
