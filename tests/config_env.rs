//! The library's parsing of the environment: every duration is range-checked into an error
//! that names the variable, the value and the range. One test, as it changes the environment.

use std::time::Duration;

use circulant::bootstrap::{BootstrapError, BootstrapOptions, TIMEOUT_ENV};
use circulant::comm::{
    Config, DEFAULT_SEGMENT_LIMIT, NODE_PROVIDER_ENV, SEGMENT_LIMIT_ENV,
    TIMEOUT_ENV as COLLECTIVE_TIMEOUT_ENV,
};

#[test]
fn durations_and_providers_from_the_environment_are_checked() {
    std::env::remove_var("FI_PROVIDER");
    std::env::remove_var("CIRCULANT_PROVIDER");
    for (value, reason) in [
        ("1e30", "more than 604800 seconds"),
        ("1e19", "more than 604800 seconds"),
        ("-1", "negative"),
        ("nan", "not a finite number"),
        ("inf", "not a finite number"),
        ("0", "zero seconds"),
        ("soon", "not a number"),
    ] {
        std::env::set_var(COLLECTIVE_TIMEOUT_ENV, value);
        let error = Config::from_env().expect_err(value);
        assert_eq!(error.var, COLLECTIVE_TIMEOUT_ENV);
        assert!(error.reason.contains(reason), "{value}: {error}");

        std::env::set_var(TIMEOUT_ENV, value);
        match BootstrapOptions::from_env() {
            Err(BootstrapError::Env { var, reason: r, .. }) => {
                assert_eq!(var, TIMEOUT_ENV);
                assert!(r.contains(reason), "{value}: {r}");
            }
            other => panic!("{value}: {other:?}"),
        }
    }
    std::env::set_var(COLLECTIVE_TIMEOUT_ENV, "604800");
    assert_eq!(
        Config::from_env().expect("7 days").deadline,
        Duration::from_secs(604_800)
    );
    std::env::set_var(TIMEOUT_ENV, "0.25");
    assert_eq!(
        BootstrapOptions::from_env()
            .expect("a quarter second")
            .timeout,
        Duration::from_millis(250)
    );
    std::env::remove_var(COLLECTIVE_TIMEOUT_ENV);
    std::env::remove_var(TIMEOUT_ENV);

    std::env::set_var("FI_PROVIDER", "");
    let error = Config::from_env().expect_err("empty FI_PROVIDER");
    assert_eq!(error.var, "FI_PROVIDER");
    assert!(error.reason.contains("the value is empty"), "{error}");
    std::env::set_var("FI_PROVIDER", "tcp;ofi_rxm");
    assert_eq!(
        Config::from_env().expect("a provider").provider.as_deref(),
        Some("tcp;ofi_rxm")
    );
    std::env::remove_var("FI_PROVIDER");

    std::env::remove_var(NODE_PROVIDER_ENV);
    assert_eq!(
        Config::from_env()
            .expect("default")
            .node_provider
            .as_deref(),
        Some("shm")
    );
    for (value, want) in [
        ("off", None),
        ("sockets", Some("sockets")),
        (" shm ", Some("shm")),
    ] {
        std::env::set_var(NODE_PROVIDER_ENV, value);
        assert_eq!(
            Config::from_env().expect(value).node_provider.as_deref(),
            want,
            "{value}"
        );
    }
    std::env::remove_var(NODE_PROVIDER_ENV);

    // The shared segment's limit: a whole number up to 65536, 0 turning it off.
    assert_eq!(
        Config::from_env().expect("default").segment_limit,
        DEFAULT_SEGMENT_LIMIT
    );
    for (value, want) in [("0", 0), ("65536", 65536), (" 100 ", 100)] {
        std::env::set_var(SEGMENT_LIMIT_ENV, value);
        assert_eq!(Config::from_env().expect(value).segment_limit, want);
    }
    for value in ["65537", "-1", "lots"] {
        std::env::set_var(SEGMENT_LIMIT_ENV, value);
        let error = Config::from_env().expect_err(value);
        assert_eq!(error.var, SEGMENT_LIMIT_ENV, "{value}");
    }
    std::env::remove_var(SEGMENT_LIMIT_ENV);
}
