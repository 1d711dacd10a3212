//! The benchmark report: reads the CSV files of `circulant bench` and of the MPI peer benchmark,
//! compares the series side by side with ratios and α-β lower bounds, and draws the charts.
//! The allgatherv distributions are those of [`circulant::plan::distribution`] and the bounds those
//! of [`circulant::plan::bounds`]: one definition each, shared with the planner and `circulant model`.
//! Pure except for reading the files and writing the charts; nothing here runs a collective.

pub mod compare;
pub mod csv;
pub mod plot;

pub use compare::{
    render_csv, render_markdown, render_table, row_bound, row_problem, Comparison, ReportError,
    Statistic,
};
pub use csv::{read_file, AlphaBeta, CsvError, Measurements, Record};
pub use plot::{write_charts, PlotError};
