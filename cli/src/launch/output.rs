//! Forwarding a rank's output: line by line, so that lines of different ranks do not mix,
//! with bounded memory whatever a rank writes.

use std::io::{Read, Write};
use std::sync::mpsc::Sender;
use std::thread;

/// Most bytes of a rank's output held at once: a longer line is forwarded in pieces.
pub const OUTPUT_CHUNK: usize = 64 * 1024;

/// Copies a rank's output to ours line by line, so that lines of different ranks do not mix.
pub(super) fn forward(
    source: impl Read + Send + 'static,
    rank: usize,
    tag: bool,
    to_stderr: bool,
    drained: Sender<()>,
) {
    thread::spawn(move || {
        let prefix = format!("[{rank}] ");
        let prefix = tag.then_some(prefix.as_str());
        let mut lines = Chunker::new(source, OUTPUT_CHUNK);
        // Write errors (a closed pipe downstream) are ignored: the rank's output must still be
        // drained so that it never blocks on a full pipe.
        while let Some(piece) = lines.next_piece() {
            let _ = if to_stderr {
                write_piece(&mut std::io::stderr().lock(), prefix, piece)
            } else {
                write_piece(&mut std::io::stdout().lock(), prefix, piece)
            };
        }
        let _ = drained.send(());
    });
}

/// Splits a stream into lines of at most `limit` bytes: a longer line comes in pieces of
/// `limit` bytes, so that memory stays bounded whatever a rank writes.
struct Chunker<R> {
    source: R,
    buffer: Vec<u8>,
    /// Bytes at the front of `buffer` already handed out.
    consumed: usize,
    limit: usize,
    ended: bool,
}

impl<R: Read> Chunker<R> {
    fn new(source: R, limit: usize) -> Self {
        Chunker {
            source,
            buffer: Vec::with_capacity(limit),
            consumed: 0,
            limit: limit.max(1),
            ended: false,
        }
    }

    /// The next line (with its `\n`), piece of a long line, or unterminated last bytes; `None`
    /// at the end of the stream (or on a read error).
    fn next_piece(&mut self) -> Option<&[u8]> {
        self.buffer.drain(..self.consumed);
        self.consumed = 0;
        loop {
            let end = self.buffer.iter().position(|&c| c == b'\n').map(|i| i + 1);
            let take = match end {
                Some(end) => Some(end),
                None if self.buffer.len() >= self.limit => Some(self.limit),
                None if self.ended && !self.buffer.is_empty() => Some(self.buffer.len()),
                None if self.ended => return None,
                None => None,
            };
            if let Some(take) = take {
                self.consumed = take;
                return Some(&self.buffer[..take]);
            }
            let start = self.buffer.len();
            self.buffer.resize(self.limit, 0);
            match self.source.read(&mut self.buffer[start..]) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                    self.buffer.truncate(start)
                }
                Ok(0) | Err(_) => {
                    self.buffer.truncate(start);
                    self.ended = true;
                }
                Ok(n) => self.buffer.truncate(start + n),
            }
        }
    }
}

/// Writes one piece of a rank's output; with a prefix every piece becomes a line of its own.
fn write_piece(out: &mut impl Write, prefix: Option<&str>, piece: &[u8]) -> std::io::Result<()> {
    if let Some(prefix) = prefix {
        out.write_all(prefix.as_bytes())?;
        out.write_all(piece)?;
        if !piece.ends_with(b"\n") {
            out.write_all(b"\n")?;
        }
    } else {
        out.write_all(piece)?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn output_pieces_are_bounded_and_keep_every_byte(
            bytes in vec(prop_oneof![Just(b'\n'), any::<u8>()], 0..3000),
            limit in 1usize..500,
        ) {
            let mut chunker = Chunker::new(&bytes[..], limit);
            let mut all = Vec::new();
            let mut short_unterminated = 0;
            while let Some(piece) = chunker.next_piece() {
                prop_assert!(!piece.is_empty() && piece.len() <= limit);
                match piece.iter().position(|&c| c == b'\n') {
                    Some(i) => prop_assert_eq!(i, piece.len() - 1),
                    None if piece.len() < limit => short_unterminated += 1,
                    None => {}
                }
                all.extend_from_slice(piece);
            }
            // Only the last piece may be cut short without a line end.
            prop_assert!(short_unterminated <= 1);
            prop_assert_eq!(all, bytes);
        }
    }
}
