//! The job's authentication key: `circulant run` gives every rank of a job the same random
//! key (`CIRCULANT_AUTH_KEY`), keeps one the user set, and a malformed key is a clear error.
//! The fabric layer sets the key on the domain of providers that support authorization keys
//! (`auth_key_size > 0`); none of the providers of libfabric 1.17 here does, so their entries
//! stay without a key, and the tests show how far the key gets: into the `fi_info` and through
//! `fi_domain`.

mod common;

use circulant::fabric::{AuthKey, Domain, Hints, Info};
use common::{bin, circulant, run};

const VAR: &str = "CIRCULANT_AUTH_KEY";

/// The keys the ranks of one job see (one `key=` line per rank).
fn keys_of_job(ranks: usize, key: Option<&str>) -> Vec<String> {
    let n = ranks.to_string();
    let mut command = circulant(&[
        "run",
        "-n",
        &n,
        "--",
        "sh",
        "-c",
        "echo key=$CIRCULANT_AUTH_KEY",
    ]);
    match key {
        Some(key) => command.env(VAR, key),
        None => command.env_remove(VAR),
    };
    let done = run(command);
    assert_eq!(done.code(), Some(0), "{done:?}");
    done.stdout
        .lines()
        .filter_map(|l| l.strip_prefix("key="))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_rank_of_a_job_gets_the_same_random_key() {
    let first = keys_of_job(3, None);
    let second = keys_of_job(3, None);
    assert_eq!(first.len(), 3, "{first:?}");
    assert!(first.iter().all(|k| *k == first[0]), "{first:?}");
    assert_eq!(first[0].len(), 64, "32 bytes in hex: {first:?}");
    assert!(first[0].bytes().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(second.len(), 3);
    assert!(second.iter().all(|k| *k == second[0]));
    assert_ne!(first[0], second[0], "each job draws its own key");
}

#[test]
fn a_key_the_user_sets_is_kept_and_an_empty_one_means_none() {
    assert_eq!(keys_of_job(2, Some("00ff10")), vec!["00ff10"; 2]);
    assert_eq!(keys_of_job(2, Some("")), vec![""; 2]);
}

#[test]
fn a_malformed_key_is_a_clear_error_that_does_not_repeat_it() {
    let mut command = circulant(&["run", "-n", "1", "--", bin(), "selftest", "--quick"]);
    command.env(VAR, "secretzz");
    let done = run(command);
    let text = format!("{}{}", done.stdout, done.stderr);
    assert_ne!(done.code(), Some(0), "{text}");
    assert!(text.contains(VAR), "names the variable: {text}");
    assert!(
        text.contains("hexadecimal"),
        "says what is expected: {text}"
    );
    assert!(!text.contains("secretzz"), "does not print the key: {text}");
}

#[test]
fn hex_keys_parse_and_bad_ones_are_refused() {
    assert!(AuthKey::from_hex("00ff").is_ok());
    assert!(AuthKey::from_hex(&"ab".repeat(AuthKey::MAX_BYTES)).is_ok());
    for bad in [
        "",
        "0",
        "0g",
        "abc",
        "zz",
        &"ab".repeat(AuthKey::MAX_BYTES + 1),
    ] {
        assert!(AuthKey::from_hex(bad).is_err(), "{bad:?}");
    }
    let key = AuthKey::from_hex("0102").expect("key");
    assert_eq!(
        format!("{key:?}"),
        "AuthKey(2 bytes)",
        "the bytes are never printed"
    );
}

/// Providers here take no keys: a query with a key leaves their entries without one (a key
/// in the hints would exclude them); a key set on an entry by hand reaches the `fi_info`,
/// survives copies and passes `fi_domain`, which these providers ignore.
#[test]
fn the_key_reaches_the_domain_attributes_of_providers_that_take_keys() {
    let key = AuthKey::from_hex("a1b2c3d4").expect("key");
    for provider in ["tcp;ofi_rxm", "sockets", "shm", "udp;ofi_rxd"] {
        let plain = Info::query(&Hints::rdm_rma().provider(provider)).expect("fi_getinfo");
        let keyed = Info::query(&Hints::rdm_rma().provider(provider).auth_key(key.clone()))
            .expect("fi_getinfo with a key");
        assert_eq!(
            plain.len(),
            keyed.len(),
            "{provider}: the key excludes nothing"
        );
        let Some(info) = keyed.first() else {
            common::missing(
                &format!("provider {provider}"),
                "Debian's libfabric (ci/deps) offers it",
            );
            continue;
        };
        for entry in &keyed {
            if entry.auth_key_size() == 0 {
                assert_eq!(entry.auth_key(), None, "{provider}: no key without support");
            } else {
                assert_eq!(
                    entry.auth_key().map(|k| k.len()),
                    Some(entry.auth_key_size()),
                    "{provider} takes keys: the job's key is set"
                );
            }
        }
        let set = info
            .with_auth_key(&[0xa1, 0xb2, 0xc3, 0xd4])
            .expect("set key");
        assert_eq!(set.auth_key(), Some(vec![0xa1, 0xb2, 0xc3, 0xd4]));
        assert_eq!(set.auth_key_size(), 4);
        assert_eq!(
            set.clone().auth_key(),
            set.auth_key(),
            "copies keep the key"
        );
        assert!(
            Domain::open(&set).is_ok(),
            "{provider}: fi_domain with a key"
        );
        eprintln!(
            "{provider}: authorization key size {} (0: keys not supported)",
            info.auth_key_size()
        );
    }
}
