//! The parsers of durations, rank counts and PMI lines on arbitrary input: no panic, and what
//! they accept is within the documented ranges.

use std::time::Duration;

use circulant::bootstrap::wire::{LineRead, LineReader};
use circulant::limits::{
    parse_positive_seconds, parse_ranks, parse_seconds, MAX_RANKS, MAX_SECONDS,
};
use proptest::collection::vec;
use proptest::prelude::*;

/// A reader that hands out its bytes in the given chunk sizes.
struct Chunked {
    bytes: Vec<u8>,
    sizes: Vec<usize>,
    at: usize,
    turn: usize,
}

impl std::io::Read for Chunked {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let size = self
            .sizes
            .get(self.turn % self.sizes.len().max(1))
            .copied()
            .unwrap_or(1);
        self.turn += 1;
        let n = size.max(1).min(buf.len()).min(self.bytes.len() - self.at);
        buf[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

proptest! {
    #[test]
    fn seconds_parse_within_range_or_fail(text in prop_oneof![
        "\\PC{0,20}",
        "[-+0-9.eEinfaN ]{0,16}",
        any::<f64>().prop_map(|x| x.to_string()),
    ]) {
        if let Ok(duration) = parse_seconds(&text) {
            prop_assert!(duration <= Duration::from_secs(MAX_SECONDS));
            // Any accepted duration can be added to a clock.
            prop_assert!(std::time::Instant::now().checked_add(duration).is_some());
        }
        if let Ok(duration) = parse_positive_seconds(&text) {
            prop_assert!(!duration.is_zero());
        }
    }

    #[test]
    fn rank_counts_parse_within_range_or_fail(text in prop_oneof![
        "\\PC{0,24}",
        "[-+0-9e ]{0,24}",
        any::<u64>().prop_map(|x| x.to_string()),
    ]) {
        if let Ok(p) = parse_ranks(&text) {
            prop_assert!((1..=MAX_RANKS).contains(&p));
        }
    }

    #[test]
    fn line_reader_never_exceeds_its_limit(
        bytes in vec(prop_oneof![Just(b'\n'), any::<u8>()], 0..2000),
        sizes in vec(1usize..300, 1..8),
        limit in 1usize..400,
    ) {
        let mut source = Chunked { bytes: bytes.clone(), sizes, at: 0, turn: 0 };
        let mut reader = LineReader::with_limit(limit);
        let mut seen = Vec::new();
        loop {
            match reader.read_line(&mut source) {
                Ok(LineRead::Line(line)) => {
                    prop_assert!(line.len() <= limit);
                    prop_assert_eq!(line.iter().filter(|&&c| c == b'\n').count(), 1);
                    prop_assert_eq!(line.last(), Some(&b'\n'));
                    seen.extend_from_slice(&line);
                }
                Ok(LineRead::Closed(rest)) => {
                    seen.extend_from_slice(&rest);
                    // Everything came through, in order.
                    prop_assert_eq!(&seen, &bytes);
                    break;
                }
                Err(e) => {
                    // Only an over-long line is refused, and only once one is there.
                    prop_assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
                    let rest = &bytes[seen.len()..];
                    let line = rest.iter().position(|&c| c == b'\n').map_or(rest.len(), |i| i + 1);
                    prop_assert!(line > limit);
                    break;
                }
            }
        }
    }
}
