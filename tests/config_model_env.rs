//! The cost model from the environment: α, β and the per-write overhead o are positive numbers,
//! else an error naming the variable; unset, each provider kind has its own figures; inside a
//! node the model follows the one across unless its own variables set it. One test,
//! as it changes the environment.

use circulant::comm::{Config, ALPHA_ENV, BETA_ENV};

const O_ENV: &str = "CIRCULANT_O";

#[test]
fn alpha_beta_and_o_from_the_environment() {
    for var in [ALPHA_ENV, BETA_ENV, O_ENV] {
        std::env::remove_var(var);
    }
    let config = Config::from_env().expect("no model variables");
    let shm = config.model_for("shm");
    let tcp = config.model_for("tcp;ofi_rxm");
    let verbs = config.model_for("verbs;ofi_rxm");
    for m in [shm, tcp, verbs] {
        // o is the software share of a one-write message, below its latency.
        assert!(m.o > 0.0 && m.o < m.alpha, "{m:?}");
    }
    assert!(shm.o < verbs.o && verbs.o < tcp.o);

    for var in [ALPHA_ENV, BETA_ENV, O_ENV] {
        for bad in ["0", "-1e-6", "nan", "inf", "soon"] {
            std::env::set_var(var, bad);
            let error = Config::from_env().expect_err(bad);
            assert_eq!(error.var, var);
            assert_eq!(error.value, bad);
            std::env::remove_var(var);
        }
    }

    std::env::set_var(O_ENV, "2.5e-7");
    let config = Config::from_env().expect("o set");
    assert_eq!(config.o, Some(2.5e-7));
    for provider in ["shm", "tcp;ofi_rxm", "verbs;ofi_rxm"] {
        let m = config.model_for(provider);
        assert_eq!(m.o, 2.5e-7);
        assert_eq!(m.alpha, Config::default().model_for(provider).alpha);
    }
    std::env::remove_var(O_ENV);
    the_model_inside_a_node_follows_the_one_across_unless_set();
}

/// Part of the one test: the environment is the process's.
fn the_model_inside_a_node_follows_the_one_across_unless_set() {
    use circulant::comm::{ALPHA_INSIDE_ENV, BETA_INSIDE_ENV};
    for var in [ALPHA_INSIDE_ENV, BETA_INSIDE_ENV] {
        std::env::remove_var(var);
    }
    let across = Config::default().model_for("tcp;ofi_rxm");
    let levels = Config::from_env().expect("unset").levels(across);
    assert_eq!(levels.inside, across);
    assert_eq!(levels.across, across);
    for var in [ALPHA_INSIDE_ENV, BETA_INSIDE_ENV] {
        for bad in ["0", "-1", "nan", "x"] {
            std::env::set_var(var, bad);
            assert_eq!(Config::from_env().expect_err(bad).var, var);
        }
        std::env::remove_var(var);
    }
    std::env::set_var(BETA_INSIDE_ENV, "1e-10");
    let levels = Config::from_env().expect("set").levels(across);
    std::env::remove_var(BETA_INSIDE_ENV);
    assert_eq!(levels.inside.beta, 1e-10);
    assert_eq!(levels.inside.alpha, across.alpha);
    assert_eq!(levels.across, across);
}
