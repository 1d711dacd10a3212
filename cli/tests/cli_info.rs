//! `circulant info` against the real libfabric: the JSON form lists the baseline providers with
//! their limits, and `FI_PROVIDER` restricts the list.

use std::process::Command;

fn info_json(fi_provider: Option<&str>) -> serde_json::Value {
    let mut command = Command::new(env!("CARGO_BIN_EXE_circulant"));
    command.args(["info", "--json"]);
    match fi_provider {
        Some(p) => command.env("FI_PROVIDER", p),
        None => command.env_remove("FI_PROVIDER"),
    };
    let output = command.output().expect("run circulant info");
    assert!(
        output.status.success(),
        "circulant info failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON document")
}

fn provider_names(report: &serde_json::Value) -> Vec<String> {
    report["providers"]
        .as_array()
        .expect("providers array")
        .iter()
        .map(|p| p["name"].as_str().expect("name").to_string())
        .collect()
}

#[test]
fn lists_baseline_providers_with_limits() {
    let report = info_json(None);
    let version = report["libfabric"]["library"].as_str().expect("version");
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .expect("major version");
    assert!(major >= 1, "{version}");
    let names = provider_names(&report);
    for required in ["tcp;ofi_rxm", "sockets"] {
        assert!(
            names.iter().any(|n| n == required),
            "{required} in {names:?}"
        );
    }
    for provider in report["providers"].as_array().expect("providers") {
        assert!(provider["cq_data_size"].as_u64().expect("cq_data_size") >= 4);
        for limit in ["iov_limit", "rma_iov_limit", "max_msg_size"] {
            assert!(
                provider[limit].as_u64().expect(limit) >= 1,
                "{limit}: {provider}"
            );
        }
        assert!(provider["inject_size"].is_u64());
        assert!(provider["mr_mode"].is_array());
        assert!(!provider["domains"].as_array().expect("domains").is_empty());
        assert!(provider["data_progress"].is_string());
    }
    // Each provider once.
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "{names:?}");
}

#[test]
fn honours_fi_provider() {
    let report = info_json(Some("sockets"));
    assert_eq!(provider_names(&report), vec!["sockets".to_string()]);
}

/// How eager messages travel on each provider: stores into shared memory over shm, RMA writes
/// elsewhere; `CIRCULANT_EAGER_CARRIER=write` makes it writes everywhere, and another value is
/// refused.
#[test]
fn shows_the_eager_carrier_of_each_provider() {
    let carriers = |env: Option<&str>| -> Vec<(String, String)> {
        let mut command = Command::new(env!("CARGO_BIN_EXE_circulant"));
        command.args(["info", "--json"]).env_remove("FI_PROVIDER");
        match env {
            Some(v) => command.env("CIRCULANT_EAGER_CARRIER", v),
            None => command.env_remove("CIRCULANT_EAGER_CARRIER"),
        };
        let output = command.output().expect("run circulant info");
        assert!(output.status.success(), "{output:?}");
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
        report["providers"]
            .as_array()
            .expect("providers")
            .iter()
            .map(|p| {
                let name = p["name"].as_str().expect("name").to_string();
                let carrier = p["eager_carrier"]
                    .as_str()
                    .expect("eager_carrier")
                    .to_string();
                (name, carrier)
            })
            .collect()
    };
    for env in [None, Some("auto")] {
        for (name, carrier) in carriers(env) {
            let want = if name == "shm" { "memory" } else { "write" };
            assert_eq!(carrier, want, "{name} with {env:?}");
        }
    }
    assert!(carriers(Some("write")).iter().all(|(_, c)| c == "write"));
    let refused = Command::new(env!("CARGO_BIN_EXE_circulant"))
        .args(["info"])
        .env("CIRCULANT_EAGER_CARRIER", "pigeon")
        .output()
        .expect("run circulant info");
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("CIRCULANT_EAGER_CARRIER") && err.contains("auto or write"),
        "{err}"
    );
}
