//! The eager path's settings from the environment: range-checked into errors that name the
//! variable, the value and the range; the default limit follows the model. One test, as it
//! changes the environment.

use circulant::comm::Config;

#[test]
fn eager_settings_from_the_environment_are_checked() {
    for var in [
        "CIRCULANT_EAGER_LIMIT",
        "CIRCULANT_EAGER_SLOTS",
        "CIRCULANT_EAGER_SLOT_BYTES",
        "FI_PROVIDER",
        "CIRCULANT_PROVIDER",
        "CIRCULANT_ALPHA",
    ] {
        std::env::remove_var(var);
    }
    let bad = [
        ("CIRCULANT_EAGER_LIMIT", "-1", "from 0 to 1073741824"),
        (
            "CIRCULANT_EAGER_LIMIT",
            "1073741825",
            "from 0 to 1073741824",
        ),
        ("CIRCULANT_EAGER_LIMIT", "4k", "from 0 to 1073741824"),
        ("CIRCULANT_EAGER_SLOTS", "1", "from 2 to 32"),
        ("CIRCULANT_EAGER_SLOTS", "33", "from 2 to 32"),
        ("CIRCULANT_EAGER_SLOT_BYTES", "255", "from 256 to 1048576"),
        (
            "CIRCULANT_EAGER_SLOT_BYTES",
            "1048577",
            "from 256 to 1048576",
        ),
    ];
    for (var, value, reason) in bad {
        std::env::set_var(var, value);
        let error = Config::from_env().expect_err(value);
        assert_eq!(error.var, var);
        assert_eq!(error.value, value);
        assert!(error.reason.contains(reason), "{var}={value}: {error}");
        std::env::remove_var(var);
    }

    let default = Config::from_env().expect("no eager settings");
    // α = 1 µs on shm: the limit where two copies cost as much as a message.
    let shm = default.model_for("shm");
    let eager = default.eager_for(&shm);
    assert_eq!(
        (eager.limit, eager.slots, eager.slot_bytes),
        (5000, 16, 8192)
    );

    std::env::set_var("CIRCULANT_EAGER_LIMIT", "0");
    std::env::set_var("CIRCULANT_EAGER_SLOTS", "2");
    std::env::set_var("CIRCULANT_EAGER_SLOT_BYTES", " 256 ");
    let set = Config::from_env().expect("valid eager settings");
    let eager = set.eager_for(&shm);
    assert_eq!((eager.limit, eager.slots, eager.slot_bytes), (0, 2, 256));
    assert!(!eager.applies(1));
    std::env::set_var("CIRCULANT_EAGER_LIMIT", "1073741824");
    let eager = Config::from_env()
        .expect("the largest limit")
        .eager_for(&shm);
    assert!(eager.applies(1 << 30) && !eager.applies((1 << 30) + 1));
    for var in [
        "CIRCULANT_EAGER_LIMIT",
        "CIRCULANT_EAGER_SLOTS",
        "CIRCULANT_EAGER_SLOT_BYTES",
    ] {
        std::env::remove_var(var);
    }
}
