//! Charts of a comparison: per (op, distribution, p) the time against the size, log–log, one
//! line with markers per series and the α-β lower bound dashed; written as PNG and SVG.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::element::{DashedPathElement, DynElement, IntoDynElement};
use plotters::prelude::*;

use super::compare::{
    format_beta, format_bytes, format_seconds, format_seconds_short, Comparison, Group, Statistic,
};

/// The TrueType font used for all text, from Debian's `fonts-dejavu-core`.
pub const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
/// Environment variable naming another TrueType font file.
pub const FONT_VARIABLE: &str = "CIRCULANT_FONT";
const FAMILY: &str = "sans-serif";
const SIZE: (u32, u32) = (1100, 750);

/// Distinct, print-friendly line colours (the reference library's series come first).
const COLORS: [RGBColor; 10] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
    RGBColor(120, 60, 160),
    RGBColor(90, 90, 90),
    RGBColor(160, 40, 40),
    RGBColor(40, 120, 40),
];

#[derive(Debug, thiserror::Error)]
/// Why charts could not be drawn.
pub enum PlotError {
    #[error(
        "cannot read the font {}: install the Debian package fonts-dejavu-core, or set {FONT_VARIABLE} to a TrueType font file",
        path.display()
    )]
    /// The font file cannot be read.
    FontMissing {
        /// The font file.
        path: PathBuf,
        #[source]
        /// The operating system's error.
        source: std::io::Error,
    },
    #[error("{} is not a TrueType or OpenType font", path.display())]
    /// The font file is not a usable font.
    FontInvalid {
        /// The font file.
        path: PathBuf,
    },
    #[error("cannot create the directory {}", path.display())]
    /// The output directory cannot be created.
    CreateDir {
        /// The directory.
        path: PathBuf,
        #[source]
        /// The operating system's error.
        source: std::io::Error,
    },
    #[error("cannot draw {}: {message}", path.display())]
    /// Drawing or writing a chart failed.
    Draw {
        /// The chart's file.
        path: PathBuf,
        /// What the plotting library reported.
        message: String,
    },
}

/// Loads and registers the font once per process; later calls return the first outcome.
pub fn ensure_font() -> Result<(), PlotError> {
    /// A failure kept for later calls: the path, and the read error (kind, text) if unreadable.
    type Failure = (PathBuf, Option<(std::io::ErrorKind, String)>);
    static LOADED: OnceLock<Result<(), Failure>> = OnceLock::new();
    let outcome = LOADED.get_or_init(|| {
        let path = std::env::var_os(FONT_VARIABLE)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_FONT));
        let bytes =
            std::fs::read(&path).map_err(|e| (path.clone(), Some((e.kind(), e.to_string()))))?;
        // plotters keeps fonts for the whole process: leaking the one font read is intended.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font(FAMILY, FontStyle::Normal, bytes)
            .map_err(|_| (path.clone(), None))
    });
    match outcome {
        Ok(()) => Ok(()),
        Err((path, Some((kind, message)))) => Err(PlotError::FontMissing {
            path: path.clone(),
            source: std::io::Error::new(*kind, message.clone()),
        }),
        Err((path, None)) => Err(PlotError::FontInvalid { path: path.clone() }),
    }
}

/// The file name stem of a group's chart: `<op>-<distribution>-p<P>`, without the distribution
/// when it is `-` (operations that have none); other characters than letters, digits, `.`, `_`
/// and `-` become `_`, so names from a CSV file cannot leave the output directory.
pub fn chart_stem(group: &Group) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect::<String>()
            .trim_start_matches('.')
            .to_string()
    };
    if group.distribution == "-" {
        format!("{}-p{}", clean(&group.op), group.p)
    } else {
        format!(
            "{}-{}-p{}",
            clean(&group.op),
            clean(&group.distribution),
            group.p
        )
    }
}

/// Writes `<stem>.png` and `<stem>.svg` for every group into `dir` (created if missing) and
/// returns the paths written.
pub fn write_charts(
    cmp: &Comparison,
    stat: Statistic,
    dir: &Path,
) -> Result<Vec<PathBuf>, PlotError> {
    ensure_font()?;
    std::fs::create_dir_all(dir).map_err(|source| PlotError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut written = Vec::new();
    for group in &cmp.groups {
        let stem = chart_stem(group);
        let png = dir.join(format!("{stem}.png"));
        let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
        draw(root, cmp, group, stat).map_err(|message| PlotError::Draw {
            path: png.clone(),
            message,
        })?;
        written.push(png);

        let svg = dir.join(format!("{stem}.svg"));
        let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
        draw(root, cmp, group, stat).map_err(|message| PlotError::Draw {
            path: svg.clone(),
            message,
        })?;
        written.push(svg);
    }
    Ok(written)
}

type Point = (f64, f64);

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    cmp: &Comparison,
    group: &Group,
    stat: Statistic,
) -> Result<(), String> {
    let text = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(text)?;

    // Log axes cannot show zero: sizes of 0 bytes and times of 0 are left out of the chart.
    let lines: Vec<Vec<Point>> = (0..group.series.len())
        .map(|i| {
            group
                .sizes
                .iter()
                .filter_map(|row| Some((row.bytes as f64, row.times[i]?.get(stat))))
                .filter(|&(x, y)| x > 0.0 && y > 0.0)
                .collect()
        })
        .collect();
    let bound: Vec<Point> = group
        .sizes
        .iter()
        .filter_map(|row| Some((row.bytes as f64, row.bound_s?)))
        .filter(|&(x, y)| x > 0.0 && y > 0.0)
        .collect();
    let all = || lines.iter().flatten().chain(&bound);
    let (mut x_lo, mut x_hi, mut y_lo, mut y_hi) = all().fold(
        (f64::INFINITY, 0.0f64, f64::INFINITY, 0.0f64),
        |(a, b, c, d), &(x, y)| (a.min(x), b.max(x), c.min(y), d.max(y)),
    );
    if !x_lo.is_finite() {
        // Nothing positive to draw: an empty chart with a default range still says so.
        (x_lo, x_hi, y_lo, y_hi) = (1.0, 10.0, 1e-6, 1e-3);
    }
    let (x_lo, x_hi) = (x_lo / 1.3, x_hi * 1.3);
    let (y_lo, y_hi) = (y_lo / 1.5, y_hi * 2.5);

    let model = match cmp.alpha_beta {
        Some(ab) => format!(
            "α = {}, β = {}",
            format_seconds(ab.alpha_s),
            format_beta(ab.beta_s_per_byte)
        ),
        None => "α, β unknown: no bound".into(),
    };
    let distribution = if group.distribution == "-" {
        String::new()
    } else {
        format!(", distribution {}", group.distribution)
    };
    let title = format!("{}{distribution}, p = {} ({model})", group.op, group.p);

    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FAMILY, 24))
        .margin(18)
        .x_label_area_size(55)
        .y_label_area_size(95)
        .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())
        .map_err(text)?;
    let size_label = match group.op.as_str() {
        "allgather" => "bytes per rank",
        "allgatherv" => "base count c (bytes)",
        _ => "message size (bytes)",
    };
    chart
        .configure_mesh()
        .x_desc(size_label)
        .y_desc(format!("time, {} over repetitions", stat.name()))
        .x_label_formatter(&|v| format_bytes(*v))
        .y_label_formatter(&|v| format_seconds_short(*v))
        .label_style((FAMILY, 15))
        .axis_desc_style((FAMILY, 17))
        .light_line_style(RGBColor(235, 235, 235))
        .bold_line_style(RGBColor(200, 200, 200))
        .draw()
        .map_err(text)?;

    for (i, (series, points)) in group.series.iter().zip(&lines).enumerate() {
        let color = COLORS[i % COLORS.len()];
        let width = if series.library == cmp.reference {
            3
        } else {
            2
        };
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(width),
            ))
            .map_err(text)?
            .label(series.label())
            .legend(move |(x, y)| {
                EmptyElement::at((x + 12, y))
                    + marker::<DB>(i, (0, 0), color)
                    + PathElement::new(vec![(-12, 0), (12, 0)], color.stroke_width(width))
            });
        chart
            .draw_series(
                points
                    .iter()
                    .map(|&p| EmptyElement::at(p) + marker::<DB>(i, (0, 0), color)),
            )
            .map_err(text)?;
    }
    if !bound.is_empty() {
        let style = BLACK.stroke_width(2);
        chart
            .draw_series(DashedLineSeries::new(bound.iter().copied(), 8, 6, style))
            .map_err(text)?
            .label("α-β lower bound")
            .legend(move |(x, y)| {
                DashedPathElement::new(vec![(x, y), (x + 24, y)], 6, 4, BLACK.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FAMILY, 15))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(text)?;
    root.present().map_err(text)
}

/// The marker of series `index`: filled circle, triangle, cross, square, hollow circle, ...
fn marker<DB: DrawingBackend>(
    index: usize,
    at: (i32, i32),
    color: RGBColor,
) -> DynElement<'static, DB, (i32, i32)> {
    let filled = color.filled();
    let line = color.stroke_width(2);
    match index % 5 {
        0 => Circle::new(at, 4, filled).into_dyn(),
        1 => TriangleMarker::new(at, 6, filled).into_dyn(),
        2 => Cross::new(at, 5, line).into_dyn(),
        3 => Rectangle::new([(at.0 - 4, at.1 - 4), (at.0 + 4, at.1 + 4)], filled).into_dyn(),
        _ => Circle::new(at, 5, line).into_dyn(),
    }
}
