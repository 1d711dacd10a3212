//! Properties of the PMI-1 line codec: what is encoded parses back to itself, and no input,
//! however broken, makes the parser panic or accept something that does not round-trip.

use circulant::bootstrap::wire::{check_token, Message, WireError, MAX_LINE};
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;

fn message() -> impl Strategy<Value = Message> {
    (
        "[a-z_]{1,16}",
        // Keys unique and not `cmd`; values any printable ASCII but space, possibly empty.
        btree_map("[a-z][a-z_0-9]{0,11}", "[!-~]{0,40}", 0..8),
    )
        .prop_map(|(cmd, fields)| {
            fields
                .into_iter()
                .filter(|(k, _)| k != "cmd")
                .fold(Message::new(&cmd), |m, (k, v)| m.with(&k, v))
        })
}

proptest! {
    #[test]
    fn encoded_messages_parse_back(m in message()) {
        let line = m.encode();
        prop_assert!(line.ends_with('\n'));
        prop_assert_eq!(line.matches('\n').count(), 1);
        let parsed = Message::parse(line.as_bytes());
        prop_assert_eq!(parsed, Ok(m));
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_accepted_lines_round_trip(bytes in vec(any::<u8>(), 0..300)) {
        if let Ok(m) = Message::parse(&bytes) {
            prop_assert!(!m.cmd().is_empty());
            for (key, value) in m.fields() {
                prop_assert!(check_token(key, true).is_ok());
                prop_assert!(check_token(value, false).is_ok());
            }
            prop_assert_eq!(Message::parse(m.encode().as_bytes()), Ok(m));
        }
    }

    #[test]
    fn lines_of_tokens_parse_as_their_tokens(
        cmd in "[a-z_]{1,10}",
        tokens in vec(("[a-z]{1,6}", "[!-~]{0,10}"), 0..6),
        spaces in vec(1usize..4, 0..6),
    ) {
        // Runs of spaces between fields are tolerated, as some servers pad.
        let mut line = format!("cmd={cmd}");
        let mut keys = std::collections::HashSet::new();
        let mut expected = Message::new(&cmd);
        for (i, (key, value)) in tokens.iter().enumerate() {
            if key == "cmd" || !keys.insert(key.clone()) {
                continue;
            }
            line.push_str(&" ".repeat(*spaces.get(i).unwrap_or(&1)));
            line.push_str(&format!("{key}={value}"));
            expected = expected.with(key, value);
        }
        line.push('\n');
        prop_assert_eq!(Message::parse(line.as_bytes()), Ok(expected));
    }

    #[test]
    fn tokens_without_equals_are_rejected(cmd in "[a-z]{1,8}", junk in "[a-z0-9]{1,12}") {
        let line = format!("cmd={cmd} {junk}\n");
        prop_assert!(matches!(Message::parse(line.as_bytes()), Err(WireError::NotKeyValue(_))));
    }
}

#[test]
fn over_long_lines_are_rejected() {
    let mut line = b"cmd=put value=".to_vec();
    line.resize(MAX_LINE + 1, b'x');
    assert_eq!(Message::parse(&line), Err(WireError::TooLong));
}
