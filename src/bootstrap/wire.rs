//! The PMI-1 wire format: one command per line, `cmd=NAME key=value ...`, fields separated by
//! single spaces, the line ended by `\n`. A pure parser and formatter, shared by the client
//! (`bootstrap`) and the server of the built-in launcher (`launch`).

use std::io::{self, Read};

use thiserror::Error;

/// Longest line either side accepts. Hydra's own maxima (key 64, value 1024, kvsname 256)
/// keep real lines far below this; the bound stops a garbage peer from growing a buffer forever.
pub const MAX_LINE: usize = 64 * 1024;

/// Longest request line a client sends: Slurm's PMI-1 server reads each request with a single
/// `read()` of at most this many bytes, and the built-in launcher holds clients to the same.
pub const REQUEST_LINE_MAX: usize = 1024;

/// One PMI-1 command or reply: its `cmd` and the fields after it, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    cmd: String,
    fields: Vec<(String, String)>,
}

/// Why a line is not a PMI-1 message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    #[error("the line is not UTF-8")]
    /// The bytes are not UTF-8.
    NotUtf8,
    #[error("the line is empty")]
    /// The line has no fields.
    Empty,
    #[error("the line contains control character {0:#04x}")]
    /// The line contains this control character.
    ControlChar(u8),
    #[error("token `{0}` is not of the form key=value")]
    /// A field has no `=`.
    NotKeyValue(String),
    #[error("the line must start with `cmd=NAME`, it starts with `{0}`")]
    /// The first field is not `cmd=NAME`.
    NoCmd(String),
    #[error("field `{0}` appears twice")]
    /// A field name occurs twice.
    DuplicateKey(String),
    #[error("the line is longer than {MAX_LINE} bytes")]
    /// The line exceeds the longest line the protocol allows.
    TooLong,
}

impl Message {
    /// A message with `cmd=NAME` as its first field.
    pub fn new(cmd: &str) -> Self {
        Message {
            cmd: cmd.to_owned(),
            fields: Vec::new(),
        }
    }

    /// Adds a field. The caller has checked key and value with [`check_token`].
    pub fn with(mut self, key: &str, value: impl ToString) -> Self {
        self.fields.push((key.to_owned(), value.to_string()));
        self
    }

    /// The command name.
    pub fn cmd(&self) -> &str {
        &self.cmd
    }

    /// All fields in order, `cmd` first.
    pub fn fields(&self) -> &[(String, String)] {
        &self.fields
    }

    /// The value of field `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Parses one line, with or without its `\n` (a `\r` before it is tolerated).
    pub fn parse(line: &[u8]) -> Result<Message, WireError> {
        if line.len() > MAX_LINE {
            return Err(WireError::TooLong);
        }
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(&c) = line.iter().find(|&&c| c < 0x20 || c == 0x7f) {
            return Err(WireError::ControlChar(c));
        }
        let text = std::str::from_utf8(line).map_err(|_| WireError::NotUtf8)?;
        let mut tokens = text.split(' ').filter(|t| !t.is_empty());
        let first = tokens.next().ok_or(WireError::Empty)?;
        let cmd = match first.split_once('=') {
            Some(("cmd", name)) if !name.is_empty() => name,
            _ => return Err(WireError::NoCmd(truncate(first))),
        };
        let mut message = Message::new(cmd);
        for token in tokens {
            let (key, value) = token
                .split_once('=')
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| WireError::NotKeyValue(truncate(token)))?;
            if key == "cmd" || message.get(key).is_some() {
                return Err(WireError::DuplicateKey(key.to_owned()));
            }
            message.fields.push((key.to_owned(), value.to_owned()));
        }
        Ok(message)
    }

    /// The line on the wire, ending with `\n`.
    pub fn encode(&self) -> String {
        let mut line = format!("cmd={}", self.cmd);
        for (key, value) in &self.fields {
            line.push(' ');
            line.push_str(key);
            line.push('=');
            line.push_str(value);
        }
        line.push('\n');
        line
    }
}

/// Why a key or value cannot be carried by PMI-1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenProblem {
    /// The key or value is empty.
    Empty,
    /// It contains a space (the field separator).
    Space,
    /// It contains a control character (a line end would split the line).
    Control,
    /// It contains `=` (the key-value separator).
    Equals,
}

impl std::fmt::Display for TokenProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TokenProblem::Empty => "it is empty",
            TokenProblem::Space => "it contains a space (PMI-1 separates fields by spaces)",
            TokenProblem::Control => "it contains a control character or newline",
            TokenProblem::Equals => "a key cannot contain `=`",
        })
    }
}

/// Checks that `token` survives a round trip through a line: keys must be non-empty and free of
/// `=`; neither may contain spaces or control characters. Values may be empty.
pub fn check_token(token: &str, is_key: bool) -> Result<(), TokenProblem> {
    if is_key && token.is_empty() {
        return Err(TokenProblem::Empty);
    }
    if token.contains(' ') {
        return Err(TokenProblem::Space);
    }
    if token.bytes().any(|c| c < 0x20 || c == 0x7f) {
        return Err(TokenProblem::Control);
    }
    if is_key && token.contains('=') {
        return Err(TokenProblem::Equals);
    }
    Ok(())
}

/// A short, printable excerpt of a peer's bytes for an error message (a final line end
/// is left out).
pub fn excerpt(bytes: &[u8]) -> String {
    const SHOWN: usize = 80;
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let shown = &bytes[..bytes.len().min(SHOWN)];
    let mut text: String = String::from_utf8_lossy(shown).escape_debug().collect();
    if bytes.len() > SHOWN {
        text.push_str("...");
    }
    text
}

fn truncate(token: &str) -> String {
    excerpt(token.as_bytes())
}

/// Splits a byte stream into lines, keeping a partial line across reads (a read may time out
/// between two halves of a line) and refusing lines longer than its limit ([`MAX_LINE`]
/// unless set).
#[derive(Debug)]
pub struct LineReader {
    buffer: Vec<u8>,
    limit: usize,
}

impl Default for LineReader {
    fn default() -> Self {
        LineReader::with_limit(MAX_LINE)
    }
}

/// What [`LineReader::read_line`] found.
#[derive(Debug)]
pub enum LineRead {
    /// A complete line, without its `\n`.
    Line(Vec<u8>),
    /// The peer closed the stream; holds any unterminated bytes it sent last.
    Closed(Vec<u8>),
}

impl LineReader {
    /// A reader with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// A reader that refuses lines longer than `limit` bytes (the end of line included).
    pub fn with_limit(limit: usize) -> Self {
        LineReader {
            buffer: Vec::new(),
            limit,
        }
    }

    /// Reads until a whole line is buffered. I/O errors (timeouts included) are returned as they
    /// are; the partial line stays buffered.
    pub fn read_line(&mut self, source: &mut impl Read) -> io::Result<LineRead> {
        loop {
            let end = self.buffer.iter().position(|&c| c == b'\n');
            if end.map_or(self.buffer.len(), |end| end + 1) > self.limit {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "no end of line within {} bytes: {}",
                        self.limit,
                        excerpt(&self.buffer)
                    ),
                ));
            }
            if let Some(end) = end {
                let rest = self.buffer.split_off(end + 1);
                return Ok(LineRead::Line(std::mem::replace(&mut self.buffer, rest)));
            }
            let mut chunk = [0u8; 4096];
            match source.read(&mut chunk) {
                Ok(0) => return Ok(LineRead::Closed(std::mem::take(&mut self.buffer))),
                Ok(n) => self.buffer.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hydra_replies() {
        let m = Message::parse(b"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n")
            .expect("valid");
        assert_eq!(m.cmd(), "maxes");
        assert_eq!(m.get("vallen_max"), Some("1024"));
        let m = Message::parse(b"cmd=get_result rc=-1 msg=key_x_not_found value=unknown\n")
            .expect("valid");
        assert_eq!(m.get("rc"), Some("-1"));
        assert_eq!(m.get("value"), Some("unknown"));
        let m = Message::parse(b"cmd=barrier_out\n").expect("valid");
        assert!(m.fields().is_empty());
    }

    #[test]
    fn value_may_contain_equals_and_be_empty() {
        let m = Message::parse(b"cmd=put key=a value=x=y empty=\n").expect("valid");
        assert_eq!(m.get("value"), Some("x=y"));
        assert_eq!(m.get("empty"), Some(""));
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(Message::parse(b"\n"), Err(WireError::Empty));
        assert!(matches!(
            Message::parse(b"hello world\n"),
            Err(WireError::NoCmd(_))
        ));
        assert!(matches!(
            Message::parse(b"cmd=put junk\n"),
            Err(WireError::NotKeyValue(_))
        ));
        assert!(matches!(
            Message::parse(b"cmd=put a=1 a=2\n"),
            Err(WireError::DuplicateKey(_))
        ));
        assert_eq!(Message::parse(b"cmd=x a=\xff\n"), Err(WireError::NotUtf8));
        assert_eq!(
            Message::parse(b"cmd=x a=\x01\n"),
            Err(WireError::ControlChar(1))
        );
    }

    #[test]
    fn line_reader_keeps_partial_lines() {
        let mut reader = LineReader::new();
        let mut source: &[u8] = b"cmd=a\ncmd=b x=1\ncmd=c";
        let LineRead::Line(a) = reader.read_line(&mut source).expect("read") else {
            panic!("expected a line")
        };
        assert_eq!(a, b"cmd=a\n");
        let LineRead::Line(b) = reader.read_line(&mut source).expect("read") else {
            panic!("expected a line")
        };
        assert_eq!(b, b"cmd=b x=1\n");
        let LineRead::Closed(rest) = reader.read_line(&mut source).expect("read") else {
            panic!("expected the end")
        };
        assert_eq!(rest, b"cmd=c");
    }
}
