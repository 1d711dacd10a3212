//! Reading benchmark CSV files: the columns written by `circulant bench` and by the MPI peer
//! benchmark (benches/peers/mpi_coll.c), plus `#` comment lines, one of which may carry the
//! α and β measured in the run.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// The columns every benchmark CSV file has, in the order the writers use.
pub const COLUMNS: [&str; 10] = [
    "library",
    "op",
    "algorithm",
    "distribution",
    "p",
    "bytes",
    "total_bytes",
    "reps",
    "min_s",
    "median_s",
];

/// An optional column of `circulant bench`: the median software overhead of a call (entry
/// into the collective to its first post to the fabric), in seconds. Files without it (the
/// MPI peer's, older runs) read as `None`.
pub const OVERHEAD_COLUMN: &str = "overhead_s";

/// The comment line prefix that carries the run's measured α and β.
pub const ALPHA_BETA_PREFIX: &str = "alpha_s=";

/// One measured row: a collective at one size, timed by one library and algorithm.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Record {
    /// The library that measured (`circulant`, or the MPI peer's library).
    pub library: String,
    /// The collective.
    pub op: String,
    /// The algorithm's name.
    pub algorithm: String,
    /// The allgatherv distribution, or a placeholder for other operations.
    pub distribution: String,
    /// Number of ranks.
    pub p: u64,
    /// Bytes per rank.
    pub bytes: u64,
    /// Bytes the whole operation moves into receive buffers.
    pub total_bytes: u64,
    /// Repetitions measured.
    pub reps: u64,
    /// Minimum time in seconds (of each repetition's slowest rank).
    pub min_s: f64,
    /// Median time in seconds.
    pub median_s: f64,
    /// The [`OVERHEAD_COLUMN`], where the file has it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead_s: Option<f64>,
    /// Where the row came from, for messages about it.
    #[serde(skip)]
    pub origin: Origin,
}

/// A file and 1-based line number.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    /// The file.
    pub file: PathBuf,
    /// The line, counted from 1.
    pub line: usize,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// The parameters of the α-β cost model: a message of m bytes costs α + βm seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AlphaBeta {
    /// α: seconds per message.
    pub alpha_s: f64,
    /// β: seconds per byte.
    pub beta_s_per_byte: f64,
}

impl AlphaBeta {
    /// Checks that both parameters are finite and non-negative.
    pub fn new(alpha_s: f64, beta_s_per_byte: f64) -> Option<Self> {
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        (ok(alpha_s) && ok(beta_s_per_byte)).then_some(Self {
            alpha_s,
            beta_s_per_byte,
        })
    }
}

impl AlphaBeta {
    /// The comment line (without newline) that carries α and β in a benchmark CSV file.
    pub fn comment(&self) -> String {
        format!(
            "# {ALPHA_BETA_PREFIX}{:e} beta_s_per_byte={:e}",
            self.alpha_s, self.beta_s_per_byte
        )
    }
}

/// The header line (without newline) of a benchmark CSV file.
pub fn header() -> String {
    COLUMNS.join(",")
}

impl Record {
    /// The row as a CSV line (without newline) in the order of [`COLUMNS`], times in seconds
    /// to the nanosecond like the peer benchmark. Names must not contain commas.
    pub fn csv_line(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{},{:.9},{:.9}",
            self.library,
            self.op,
            self.algorithm,
            self.distribution,
            self.p,
            self.bytes,
            self.total_bytes,
            self.reps,
            self.min_s,
            self.median_s
        )
    }
}

/// The contents of one benchmark CSV file.
#[derive(Clone, Debug, Default)]
pub struct Measurements {
    /// The rows, in file order.
    pub records: Vec<Record>,
    /// α and β from a `# alpha_s=... beta_s_per_byte=...` comment, with the line it was on.
    pub alpha_beta: Option<(AlphaBeta, Origin)>,
}

#[derive(Debug, thiserror::Error)]
/// Why a benchmark CSV file cannot be read.
pub enum CsvError {
    #[error("cannot read {}", path.display())]
    /// The file cannot be read.
    Io {
        /// The file.
        path: PathBuf,
        #[source]
        /// The operating system's error.
        source: std::io::Error,
    },
    #[error("{}: no header line (expected the columns {})", path.display(), COLUMNS.join(","))]
    /// The file has no header line.
    NoHeader {
        /// The file.
        path: PathBuf,
    },
    #[error("{at}: the header has no column `{column}` (expected the columns {})", COLUMNS.join(","))]
    /// The header lacks a required column.
    MissingColumn {
        /// Where the header is.
        at: Origin,
        /// The missing column.
        column: &'static str,
    },
    #[error("{at}: the header names column `{column}` twice")]
    /// The header names a column twice.
    DuplicateColumn {
        /// Where the header is.
        at: Origin,
        /// The column.
        column: String,
    },
    #[error("{at}: {found} fields, but the header has {expected} columns")]
    /// A row has another number of fields than the header.
    FieldCount {
        /// The row.
        at: Origin,
        /// Fields in the header.
        expected: usize,
        /// Fields in the row.
        found: usize,
    },
    #[error("{at}: column `{column}`: `{value}` is not {expected}")]
    /// A field does not parse.
    BadValue {
        /// The row.
        at: Origin,
        /// The column.
        column: &'static str,
        /// The field's text.
        value: String,
        /// What it must be.
        expected: &'static str,
    },
    #[error("{at}: column `{column}` is empty")]
    /// A required field is empty.
    EmptyField {
        /// The row.
        at: Origin,
        /// The column.
        column: &'static str,
    },
    #[error(
        "{at}: malformed α-β comment `{text}` (expected `# alpha_s=<seconds> beta_s_per_byte=<seconds per byte>`)"
    )]
    /// An α-β comment that does not parse.
    BadAlphaBeta {
        /// The comment's line.
        at: Origin,
        /// Its text.
        text: String,
    },
    #[error("{at}: a second α-β comment (the first is at line {first})")]
    /// A file with two α-β comments.
    SecondAlphaBeta {
        /// The second.
        at: Origin,
        /// The line of the first.
        first: usize,
    },
}

/// Reads and parses one benchmark CSV file.
pub fn read_file(path: &Path) -> Result<Measurements, CsvError> {
    let text = std::fs::read_to_string(path).map_err(|source| CsvError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &text)
}

/// Parses the text of a benchmark CSV file; `path` names it in errors.
///
/// The header may order the columns freely and may have more columns than [`COLUMNS`]; the
/// extra ones are ignored. Blank lines and `#` comments are skipped anywhere.
pub fn parse(path: &Path, text: &str) -> Result<Measurements, CsvError> {
    let mut out = Measurements::default();
    let mut header: Option<(Vec<usize>, Option<usize>, usize)> = None;
    for (index, raw) in text.lines().enumerate() {
        let at = Origin {
            file: path.to_path_buf(),
            line: index + 1,
        };
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            if let Some(ab) = parse_alpha_beta(comment.trim(), &at)? {
                if let Some((_, first)) = &out.alpha_beta {
                    return Err(CsvError::SecondAlphaBeta {
                        at,
                        first: first.line,
                    });
                }
                out.alpha_beta = Some((ab, at));
            }
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        match &header {
            None => {
                let overhead = fields.iter().position(|f| *f == OVERHEAD_COLUMN);
                header = Some((column_positions(&fields, &at)?, overhead, fields.len()));
            }
            Some((positions, overhead, width)) => {
                if fields.len() != *width {
                    return Err(CsvError::FieldCount {
                        at,
                        expected: *width,
                        found: fields.len(),
                    });
                }
                let overhead_s = match overhead {
                    Some(i) => Some(parse_seconds(fields[*i], OVERHEAD_COLUMN, &at)?),
                    None => None,
                };
                let mut record = parse_record(&fields, positions, at)?;
                record.overhead_s = overhead_s;
                out.records.push(record);
            }
        }
    }
    if header.is_none() {
        return Err(CsvError::NoHeader {
            path: path.to_path_buf(),
        });
    }
    Ok(out)
}

/// For each of [`COLUMNS`], its position in the header.
fn column_positions(fields: &[&str], at: &Origin) -> Result<Vec<usize>, CsvError> {
    for (i, name) in fields.iter().enumerate() {
        if fields[..i].contains(name) {
            return Err(CsvError::DuplicateColumn {
                at: at.clone(),
                column: (*name).to_string(),
            });
        }
    }
    COLUMNS
        .iter()
        .map(|column| {
            fields
                .iter()
                .position(|f| f == column)
                .ok_or_else(|| CsvError::MissingColumn {
                    at: at.clone(),
                    column,
                })
        })
        .collect()
}

fn parse_record(fields: &[&str], positions: &[usize], at: Origin) -> Result<Record, CsvError> {
    let get = |i: usize| fields[positions[i]];
    let text = |i: usize| -> Result<String, CsvError> {
        let v = get(i);
        if v.is_empty() {
            Err(CsvError::EmptyField {
                at: at.clone(),
                column: COLUMNS[i],
            })
        } else {
            Ok(v.to_string())
        }
    };
    let int = |i: usize| -> Result<u64, CsvError> {
        get(i).parse::<u64>().map_err(|_| CsvError::BadValue {
            at: at.clone(),
            column: COLUMNS[i],
            value: get(i).to_string(),
            expected: "a non-negative integer",
        })
    };
    let seconds = |i: usize| parse_seconds(get(i), COLUMNS[i], &at);
    let p = int(4)?;
    if p == 0 {
        return Err(CsvError::BadValue {
            at,
            column: "p",
            value: "0".into(),
            expected: "a rank count of at least 1",
        });
    }
    Ok(Record {
        library: text(0)?,
        op: text(1)?,
        algorithm: text(2)?,
        distribution: text(3)?,
        p,
        bytes: int(5)?,
        total_bytes: int(6)?,
        reps: int(7)?,
        min_s: seconds(8)?,
        median_s: seconds(9)?,
        overhead_s: None,
        origin: at,
    })
}

/// A time column's value: a finite non-negative number of seconds.
fn parse_seconds(value: &str, column: &'static str, at: &Origin) -> Result<f64, CsvError> {
    match value.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(CsvError::BadValue {
            at: at.clone(),
            column,
            value: value.to_string(),
            expected: "a finite non-negative number of seconds",
        }),
    }
}

/// Parses `alpha_s=<f64> beta_s_per_byte=<f64>`; other comments give `None`.
fn parse_alpha_beta(comment: &str, at: &Origin) -> Result<Option<AlphaBeta>, CsvError> {
    if !comment.starts_with(ALPHA_BETA_PREFIX) {
        return Ok(None);
    }
    let bad = || CsvError::BadAlphaBeta {
        at: at.clone(),
        text: comment.to_string(),
    };
    let mut alpha = None;
    let mut beta = None;
    for word in comment.split_whitespace() {
        let (key, value) = word.split_once('=').ok_or_else(bad)?;
        let slot = match key {
            "alpha_s" => &mut alpha,
            "beta_s_per_byte" => &mut beta,
            _ => return Err(bad()),
        };
        if slot.is_some() {
            return Err(bad());
        }
        *slot = Some(value.parse::<f64>().map_err(|_| bad())?);
    }
    match (alpha, beta) {
        (Some(a), Some(b)) => AlphaBeta::new(a, b).map(Some).ok_or_else(bad),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overhead_column_is_read_where_present() {
        let path = Path::new("t.csv");
        let with = format!("{},plan_s,{OVERHEAD_COLUMN}\ncirculant,bcast,a,-,2,8,8,3,0.000002,0.000003,0.000001,0.000000700\n", header());
        let m = parse(path, &with).expect("parses");
        assert_eq!(m.records[0].overhead_s, Some(0.0000007));
        let without = format!("{}\nmpi,bcast,a,-,2,8,8,3,0.000002,0.000003\n", header());
        let m = parse(path, &without).expect("parses");
        assert_eq!(m.records[0].overhead_s, None);
        let bad = with.replace("0.000000700", "-1");
        let err = parse(path, &bad).expect_err("a negative time").to_string();
        assert!(
            err.contains("t.csv:2") && err.contains("`overhead_s`"),
            "{err}"
        );
    }
}
