//! The side-by-side comparison: measurements grouped per (op, distribution, p), one row per
//! size, one column per series (library, algorithm), ratios to the best algorithm of the
//! reference library (circulant by default) and the α-β lower bound.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::csv::{AlphaBeta, Measurements, Origin, Record};
use circulant::plan::bounds::lower_bound;
use circulant::plan::distribution::Distribution;
use circulant::plan::{CostModel, Dtype, Problem, ReduceOp, Reduction};

/// Which of the two per-size statistics a table or chart shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Statistic {
    /// Minimum over the repetitions (of each repetition's slowest rank).
    Min,
    /// Median over the repetitions.
    Median,
}

impl Statistic {
    /// The word tables and chart titles use.
    pub fn name(self) -> &'static str {
        match self {
            Statistic::Min => "minimum",
            Statistic::Median => "median",
        }
    }
}

/// A line of a chart and a column of a table: one algorithm of one library.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Series {
    /// The library that measured it (`circulant`, `mpich`, `openmpi`, ...).
    pub library: String,
    /// The algorithm's name.
    pub algorithm: String,
}

impl Series {
    /// `library/algorithm`, as legends and column heads show it.
    pub fn label(&self) -> String {
        format!("{}/{}", self.library, self.algorithm)
    }
}

/// One series' times at one size.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Timing {
    /// Repetitions measured.
    pub reps: u64,
    /// Minimum time in seconds.
    pub min_s: f64,
    /// Median time in seconds.
    pub median_s: f64,
}

impl Timing {
    /// The time of one statistic.
    pub fn get(&self, stat: Statistic) -> f64 {
        match stat {
            Statistic::Min => self.min_s,
            Statistic::Median => self.median_s,
        }
    }
}

/// The fastest series of the reference library at one size, for one statistic.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Best {
    /// Index into [`Group::series`].
    pub series: usize,
    /// Its algorithm's name.
    pub algorithm: String,
    /// Its time in seconds.
    pub time_s: f64,
}

/// One size of a group: every series' times, the reference's best, ratios and the bound.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SizeRow {
    /// Bytes per rank (the CSV's `bytes`).
    pub bytes: u64,
    /// Bytes the whole operation moves into receive buffers (the CSV's `total_bytes`).
    pub total_bytes: u64,
    /// Per series of the group, `None` where that series has no measurement at this size.
    pub times: Vec<Option<Timing>>,
    /// The reference's fastest series by minimum time.
    pub best_min: Option<Best>,
    /// The reference's fastest series by median time.
    pub best_median: Option<Best>,
    /// Per series: its minimum time over the reference's best minimum (> 1: reference faster).
    pub ratio_min: Vec<Option<f64>>,
    /// Per series: the same for the medians.
    pub ratio_median: Vec<Option<f64>>,
    /// The α-β lower bound, when α and β are known and the operation has one.
    pub bound_s: Option<f64>,
    /// The reference's best minimum over the bound (≥ 1 in the model).
    pub best_min_over_bound: Option<f64>,
    /// The reference's best median over the bound.
    pub best_median_over_bound: Option<f64>,
}

impl SizeRow {
    /// The reference's fastest series for `stat`.
    pub fn best(&self, stat: Statistic) -> Option<&Best> {
        match stat {
            Statistic::Min => self.best_min.as_ref(),
            Statistic::Median => self.best_median.as_ref(),
        }
    }

    /// Series `series`'s time over the reference's best for `stat`.
    pub fn ratio(&self, series: usize, stat: Statistic) -> Option<f64> {
        let ratios = match stat {
            Statistic::Min => &self.ratio_min,
            Statistic::Median => &self.ratio_median,
        };
        ratios.get(series).copied().flatten()
    }

    /// The reference's best over the α-β bound for `stat`.
    pub fn best_over_bound(&self, stat: Statistic) -> Option<f64> {
        match stat {
            Statistic::Min => self.best_min_over_bound,
            Statistic::Median => self.best_median_over_bound,
        }
    }
}

/// All measurements of one (op, distribution, p).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Group {
    /// The collective.
    pub op: String,
    /// The allgatherv distribution (or the CSV's placeholder for other operations).
    pub distribution: String,
    /// Number of ranks.
    pub p: u64,
    /// The reference library's series first, then the others, each sorted by name.
    pub series: Vec<Series>,
    /// Sorted by size.
    pub sizes: Vec<SizeRow>,
}

impl Group {
    /// Whether series `index` belongs to the reference library.
    pub fn is_reference(&self, index: usize, reference: &str) -> bool {
        self.series
            .get(index)
            .is_some_and(|s| s.library == reference)
    }
}

/// Where the α and β of a comparison came from.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlphaBetaSource {
    /// Given on the command line.
    CommandLine,
    /// Read from a comment in this file.
    File(String),
}

/// The whole comparison, ready to print, serialize or plot.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// The library whose best algorithm per size is the denominator of the ratios.
    pub reference: String,
    /// α and β of the bounds, if known.
    pub alpha_beta: Option<AlphaBeta>,
    /// Where they came from.
    pub alpha_beta_source: Option<AlphaBetaSource>,
    /// The groups, sorted by op, distribution and p.
    pub groups: Vec<Group>,
    /// Things the reader should know, e.g. files that disagree on α and β.
    pub notes: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
/// Why measurements cannot be compared.
pub enum ReportError {
    #[error("no measurements in the given files")]
    /// The files hold no measurements.
    NoRecords,
    #[error(
        "{}: {}/{} measured twice for {}, distribution {}, p = {}, {} bytes (first at {first})",
        second.origin, second.library, second.algorithm, second.op, second.distribution,
        second.p, second.bytes
    )]
    /// One series measured the same point twice.
    Duplicate {
        /// Where it was measured first.
        first: Origin,
        /// The second measurement.
        second: Box<Record>,
    },
    #[error(
        "{second}: total_bytes {found} differs from {expected} at {first} for the same op, distribution, p and bytes: the two runs did not measure the same problem"
    )]
    /// Two rows of the same problem disagree on the total bytes moved.
    TotalMismatch {
        /// The first row.
        first: Origin,
        /// The second row.
        second: Origin,
        /// Total bytes of the first.
        expected: u64,
        /// Total bytes of the second.
        found: u64,
    },
}

type GroupKey = (String, String, u64);

impl Comparison {
    /// Groups the rows of `files`, picks the reference's best per size and computes ratios and
    /// bounds. `alpha_beta` (from the command line) overrides the α-β comments of the files.
    pub fn build(
        files: &[Measurements],
        reference: &str,
        alpha_beta: Option<AlphaBeta>,
    ) -> Result<Self, ReportError> {
        let mut notes = Vec::new();
        let (alpha_beta, alpha_beta_source) = match alpha_beta {
            Some(ab) => (Some(ab), Some(AlphaBetaSource::CommandLine)),
            None => match choose_alpha_beta(files, &mut notes) {
                Some((ab, at)) => (Some(ab), Some(AlphaBetaSource::File(at.to_string()))),
                None => (None, None),
            },
        };

        // (group) -> (series, bytes) -> record; BTreeMaps give the sorted output order.
        let mut grouped: BTreeMap<GroupKey, BTreeMap<(Series, u64), &Record>> = BTreeMap::new();
        let mut totals: BTreeMap<(GroupKey, u64), &Record> = BTreeMap::new();
        for record in files.iter().flat_map(|f| &f.records) {
            let key = (record.op.clone(), record.distribution.clone(), record.p);
            let series = Series {
                library: record.library.clone(),
                algorithm: record.algorithm.clone(),
            };
            let first_total = totals.entry((key.clone(), record.bytes)).or_insert(record);
            if first_total.total_bytes != record.total_bytes {
                return Err(ReportError::TotalMismatch {
                    first: first_total.origin.clone(),
                    second: record.origin.clone(),
                    expected: first_total.total_bytes,
                    found: record.total_bytes,
                });
            }
            let cell = grouped.entry(key).or_default();
            if let Some(first) = cell.get(&(series.clone(), record.bytes)) {
                return Err(ReportError::Duplicate {
                    first: first.origin.clone(),
                    second: Box::new(record.clone()),
                });
            }
            cell.insert((series, record.bytes), record);
        }
        if grouped.is_empty() {
            return Err(ReportError::NoRecords);
        }

        let groups = grouped
            .into_iter()
            .map(|((op, distribution, p), cells)| {
                build_group(op, distribution, p, &cells, reference, alpha_beta)
            })
            .collect();
        Ok(Self {
            reference: reference.to_string(),
            alpha_beta,
            alpha_beta_source,
            groups,
            notes,
        })
    }
}

/// The first α-β comment among the files; a note for each file that disagrees with it.
fn choose_alpha_beta(
    files: &[Measurements],
    notes: &mut Vec<String>,
) -> Option<(AlphaBeta, Origin)> {
    let mut found = files.iter().filter_map(|f| f.alpha_beta.as_ref());
    let (chosen, at) = found.next()?;
    for (other, other_at) in found {
        if other != chosen {
            notes.push(format!(
                "{other_at} gives α = {}, β = {} but {at} gives α = {}, β = {}; using the latter (override with --alpha and --beta)",
                format_seconds(other.alpha_s),
                format_beta(other.beta_s_per_byte),
                format_seconds(chosen.alpha_s),
                format_beta(chosen.beta_s_per_byte),
            ));
        }
    }
    Some((*chosen, at.clone()))
}

fn build_group(
    op: String,
    distribution: String,
    p: u64,
    cells: &BTreeMap<(Series, u64), &Record>,
    reference: &str,
    alpha_beta: Option<AlphaBeta>,
) -> Group {
    let mut series: Vec<Series> = cells.keys().map(|(s, _)| s.clone()).collect();
    series.dedup();
    // Reference first; stable sort keeps the name order within each part.
    series.sort_by_key(|s| s.library != reference);
    let mut sizes: Vec<u64> = cells.keys().map(|&(_, bytes)| bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();

    let rows = sizes
        .into_iter()
        .map(|bytes| {
            let records: Vec<Option<&Record>> = series
                .iter()
                .map(|s| cells.get(&(s.clone(), bytes)).copied())
                .collect();
            let total_bytes = records
                .iter()
                .flatten()
                .map(|r| r.total_bytes)
                .next()
                .unwrap_or(bytes);
            let times: Vec<Option<Timing>> = records
                .iter()
                .map(|r| {
                    r.map(|r| Timing {
                        reps: r.reps,
                        min_s: r.min_s,
                        median_s: r.median_s,
                    })
                })
                .collect();
            let best = |stat: Statistic| best_of(&series, &times, reference, stat);
            let (best_min, best_median) = (best(Statistic::Min), best(Statistic::Median));
            let ratios = |best: &Option<Best>, stat: Statistic| -> Vec<Option<f64>> {
                times
                    .iter()
                    .map(|t| ratio(t.as_ref()?.get(stat), best.as_ref()?.time_s))
                    .collect()
            };
            let bound_s =
                alpha_beta.and_then(|ab| row_bound(&op, &distribution, p, bytes, total_bytes, ab));
            let over_bound = |best: &Option<Best>| ratio(best.as_ref()?.time_s, bound_s?);
            SizeRow {
                bytes,
                total_bytes,
                ratio_min: ratios(&best_min, Statistic::Min),
                ratio_median: ratios(&best_median, Statistic::Median),
                best_min_over_bound: over_bound(&best_min),
                best_median_over_bound: over_bound(&best_median),
                times,
                best_min,
                best_median,
                bound_s,
            }
        })
        .collect();
    Group {
        op,
        distribution,
        p,
        series,
        sizes: rows,
    }
}

/// The reference library's fastest series by `stat`; ties go to the first in name order.
fn best_of(
    series: &[Series],
    times: &[Option<Timing>],
    reference: &str,
    stat: Statistic,
) -> Option<Best> {
    let mut best: Option<Best> = None;
    for (index, (s, t)) in series.iter().zip(times).enumerate() {
        let Some(t) = t else { continue };
        if s.library != reference {
            continue;
        }
        let time_s = t.get(stat);
        if best.as_ref().map_or(true, |b| time_s < b.time_s) {
            best = Some(Best {
                series: index,
                algorithm: s.algorithm.clone(),
                time_s,
            });
        }
    }
    best
}

/// `num / den`, or `None` when the denominator is zero (a ratio to nothing says nothing).
fn ratio(num: f64, den: f64) -> Option<f64> {
    (den > 0.0).then(|| num / den)
}

/// A duration with three significant digits and a unit: "812 ns", "3.07 µs", "23.5 ms", "1.20 s".
pub fn format_seconds(s: f64) -> String {
    let (value, unit) = if s == 0.0 {
        return "0 s".into();
    } else if s < 1e-6 {
        (s * 1e9, "ns")
    } else if s < 1e-3 {
        (s * 1e6, "µs")
    } else if s < 1.0 {
        (s * 1e3, "ms")
    } else {
        (s, "s")
    };
    format!("{} {unit}", three_digits(value))
}

/// β as a time per byte, scaled like [`format_seconds`]: "0.312 ns/B".
pub fn format_beta(s_per_byte: f64) -> String {
    if s_per_byte == 0.0 {
        return "0 s/B".into();
    }
    let (value, unit) = if s_per_byte < 1e-9 {
        (s_per_byte * 1e12, "ps/B")
    } else if s_per_byte < 1e-6 {
        (s_per_byte * 1e9, "ns/B")
    } else if s_per_byte < 1e-3 {
        (s_per_byte * 1e6, "µs/B")
    } else {
        (s_per_byte * 1e3, "ms/B")
    };
    format!("{} {unit}", three_digits(value))
}

/// A byte count in decimal units: "1 B", "20 kB", "1 MB", "2.5 GB".
pub fn format_bytes(bytes: f64) -> String {
    let (value, unit) = if bytes < 1e3 {
        (bytes, "B")
    } else if bytes < 1e6 {
        (bytes / 1e3, "kB")
    } else if bytes < 1e9 {
        (bytes / 1e6, "MB")
    } else {
        (bytes / 1e9, "GB")
    };
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} {unit}")
}

/// A ratio with three significant digits: "21.5", "1.06", "0.0123".
pub fn format_ratio(r: f64) -> String {
    if r >= 1.0 || r == 0.0 {
        three_digits(r)
    } else {
        // Enough decimals for three significant digits of a ratio below 1.
        let decimals = (2.0 - r.log10().floor()).clamp(2.0, 12.0) as usize;
        format!("{r:.decimals$}")
    }
}

/// [`format_seconds`] without trailing zeros after the decimal point, for axis labels.
pub fn format_seconds_short(s: f64) -> String {
    let text = format_seconds(s);
    match text.split_once(' ') {
        Some((number, unit)) if number.contains('.') => {
            format!(
                "{} {unit}",
                number.trim_end_matches('0').trim_end_matches('.')
            )
        }
        _ => text,
    }
}

fn three_digits(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The human-readable tables of `cmp` for `stat`, one per group, with aligned columns.
pub fn render_table(cmp: &Comparison, stat: Statistic) -> String {
    let mut out = String::new();
    match (&cmp.alpha_beta, &cmp.alpha_beta_source) {
        (Some(ab), source) => {
            let from = match source {
                Some(AlphaBetaSource::File(at)) => format!(" (from {at})"),
                _ => " (from the command line)".into(),
            };
            let _ = writeln!(
                out,
                "α-β model: α = {}, β = {}{from}",
                format_seconds(ab.alpha_s),
                format_beta(ab.beta_s_per_byte)
            );
        }
        _ => {
            out.push_str("α-β model: α and β unknown, no lower bounds (give --alpha and --beta)\n")
        }
    }
    for note in &cmp.notes {
        let _ = writeln!(out, "note: {note}");
    }
    for group in &cmp.groups {
        out.push('\n');
        render_group(&mut out, cmp, group, stat);
    }
    out
}

fn render_group(out: &mut String, cmp: &Comparison, group: &Group, stat: Statistic) {
    let reference = &cmp.reference;
    let has_reference = (0..group.series.len()).any(|i| group.is_reference(i, reference));
    let has_bound = group.sizes.iter().any(|s| s.bound_s.is_some());
    let _ = writeln!(
        out,
        "{}, distribution {}, p = {}: {} time over the repetitions",
        group.op,
        group.distribution,
        group.p,
        stat.name()
    );
    if !has_reference {
        let _ = writeln!(
            out,
            "  (no {reference} series here: no ratios; choose another with --reference)"
        );
    }

    let mut header: Vec<String> = vec!["bytes".into(), "total".into()];
    header.extend(group.series.iter().map(Series::label));
    let others: Vec<usize> = (0..group.series.len())
        .filter(|&i| !group.is_reference(i, reference))
        .collect();
    if has_reference {
        header.push(format!("best {reference}"));
        header.extend(
            others
                .iter()
                .map(|&i| format!("{} / best", group.series[i].label())),
        );
    }
    if has_bound {
        header.push("α-β bound".into());
        if has_reference {
            header.push("best / bound".into());
        }
    }

    let dash = || "-".to_string();
    let rows: Vec<Vec<String>> = group
        .sizes
        .iter()
        .map(|row| {
            let mut cells = vec![row.bytes.to_string(), row.total_bytes.to_string()];
            cells.extend(
                row.times
                    .iter()
                    .map(|t| t.map_or_else(dash, |t| format_seconds(t.get(stat)))),
            );
            if has_reference {
                cells.push(row.best(stat).map_or_else(dash, |b| b.algorithm.clone()));
                cells.extend(
                    others
                        .iter()
                        .map(|&i| row.ratio(i, stat).map_or_else(dash, format_ratio)),
                );
            }
            if has_bound {
                cells.push(row.bound_s.map_or_else(dash, format_seconds));
                if has_reference {
                    cells.push(row.best_over_bound(stat).map_or_else(dash, format_ratio));
                }
            }
            cells
        })
        .collect();

    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain([header[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |out: &mut String, cells: &[String]| {
        let mut text = String::new();
        for (cell, width) in cells.iter().zip(&widths) {
            let pad = width - cell.chars().count();
            let _ = write!(text, "  {}{cell}", " ".repeat(pad));
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(out, &header);
    for row in &rows {
        line(out, row);
    }
}

/// A Markdown summary of `cmp` for `stat`, one table per group: the reference's best
/// algorithm per size, every other series' time and its ratio to that best, and the best over
/// the bound (for documents; the plain tables have every series).
pub fn render_markdown(cmp: &Comparison, stat: Statistic) -> String {
    let mut out = String::new();
    let reference = &cmp.reference;
    for group in &cmp.groups {
        let others: Vec<usize> = (0..group.series.len())
            .filter(|&i| !group.is_reference(i, reference))
            .collect();
        let has_bound = group.sizes.iter().any(|s| s.bound_s.is_some());
        let what = match group.op.as_str() {
            "allgatherv" => format!("allgatherv {}", group.distribution),
            op => op.to_string(),
        };
        let _ = writeln!(
            out,
            "**{what}, p = {}** ({} over the repetitions; ratios > 1: {reference} faster)\n",
            group.p,
            stat.name()
        );
        let mut header = vec!["bytes".to_string(), format!("{reference} best")];
        header.extend(others.iter().map(|&i| group.series[i].label()));
        header.extend(
            others
                .iter()
                .map(|&i| format!("{} / {reference}", group.series[i].label())),
        );
        if has_bound {
            header.push(format!("{reference} / bound"));
        }
        let _ = writeln!(out, "| {} |", header.join(" | "));
        let align: Vec<&str> = (0..header.len())
            .map(|c| if c == 1 { "---" } else { "---:" })
            .collect();
        let _ = writeln!(out, "|{}|", align.join("|"));
        let dash = || "–".to_string();
        for row in &group.sizes {
            let mut cells = vec![row.bytes.to_string()];
            cells.push(row.best(stat).map_or_else(dash, |b| {
                format!("{} ({})", format_seconds(b.time_s), b.algorithm)
            }));
            cells.extend(
                others
                    .iter()
                    .map(|&i| row.times[i].map_or_else(dash, |t| format_seconds(t.get(stat)))),
            );
            cells.extend(
                others
                    .iter()
                    .map(|&i| row.ratio(i, stat).map_or_else(dash, |r| format!("{r:.2}"))),
            );
            if has_bound {
                cells.push(
                    row.best_over_bound(stat)
                        .map_or_else(dash, |r| format!("{r:.2}")),
                );
            }
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        out.push('\n');
    }
    out
}

/// The comparison as CSV for scripts: one line per (group, size, series) with both statistics,
/// the ratios to the reference's best and the bound. Empty fields where a value is unknown.
pub fn render_csv(cmp: &Comparison) -> String {
    let mut out = String::from(
        "op,distribution,p,bytes,total_bytes,library,algorithm,reps,min_s,median_s,\
         ratio_min,ratio_median,best_min_algorithm,best_median_algorithm,bound_s\n",
    );
    // Seconds to the nanosecond like the input files; ratios to four decimals.
    let secs = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.9}"));
    let ratio = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.4}"));
    for group in &cmp.groups {
        for row in &group.sizes {
            for (i, (series, time)) in group.series.iter().zip(&row.times).enumerate() {
                let Some(t) = time else { continue };
                let best_name = |stat| {
                    row.best(stat)
                        .map_or_else(String::new, |b| b.algorithm.clone())
                };
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{:.9},{:.9},{},{},{},{},{}",
                    group.op,
                    group.distribution,
                    group.p,
                    row.bytes,
                    row.total_bytes,
                    series.library,
                    series.algorithm,
                    t.reps,
                    t.min_s,
                    t.median_s,
                    ratio(row.ratio(i, Statistic::Min)),
                    ratio(row.ratio(i, Statistic::Median)),
                    best_name(Statistic::Min),
                    best_name(Statistic::Median),
                    secs(row.bound_s),
                );
            }
        }
    }
    out
}

/// The reduction of the benchmarks' rows (the element type does not enter the bounds).
const INT32_SUM: Reduction = Reduction {
    dtype: Dtype::I32,
    op: ReduceOp::Sum,
};

/// The problem a CSV row measured, or `None` for an operation or distribution the benchmarks
/// do not know or sizes beyond `usize`.
///
/// `bytes` and `total_bytes` mean what the CSV columns mean: for bcast the message, for
/// allgather each rank's contribution, for allgatherv the base count c of `distribution`
/// ([`Distribution::counts`]), for allreduce, reduce and reduce-scatter-block the vector
/// (whose exact size is `total_bytes`), for reduce-scatter the base count of `distribution`
/// (each count rounded down to whole int32 elements).
pub fn row_problem(
    op: &str,
    distribution: &str,
    p: u64,
    bytes: u64,
    total_bytes: u64,
) -> Option<Problem> {
    let p = usize::try_from(p).ok().filter(|&p| p >= 1)?;
    let bytes = usize::try_from(bytes).ok()?;
    Some(match op {
        "bcast" | "broadcast" => Problem::Broadcast { p, root: 0, bytes },
        "allgather" => Problem::Allgather { p, block: bytes },
        "allgatherv" => Problem::Allgatherv {
            counts: distribution.parse::<Distribution>().ok()?.counts(p, bytes),
        },
        "allreduce" => Problem::Allreduce {
            p,
            reduction: INT32_SUM,
            bytes: usize::try_from(total_bytes).ok()?,
        },
        "reduce" => Problem::Reduce {
            p,
            root: 0,
            reduction: INT32_SUM,
            bytes: usize::try_from(total_bytes).ok()?,
        },
        // The whole vector is the total; each rank's block is its p-th.
        "reduce-scatter-block" => Problem::ReduceScatterBlock {
            p,
            reduction: INT32_SUM,
            block: usize::try_from(total_bytes).ok()? / p,
        },
        // The distribution's counts, each in whole int32 elements.
        "reduce-scatter" => Problem::ReduceScatter {
            reduction: INT32_SUM,
            counts: distribution
                .parse::<Distribution>()
                .ok()?
                .counts(p, bytes)
                .into_iter()
                .map(|c| c / 4 * 4)
                .collect(),
        },
        _ => return None,
    })
}

/// The α-β lower bound ([`circulant::plan::bounds`]) of a CSV row's problem ([`row_problem`]).
pub fn row_bound(
    op: &str,
    distribution: &str,
    p: u64,
    bytes: u64,
    total_bytes: u64,
    ab: AlphaBeta,
) -> Option<f64> {
    let problem = row_problem(op, distribution, p, bytes, total_bytes)?;
    let model = CostModel {
        alpha: ab.alpha_s,
        beta: ab.beta_s_per_byte,
        o: 0.0,
    };
    Some(lower_bound(&problem, &model))
}
