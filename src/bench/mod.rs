//! The benchmark report: reads the CSV files of `circulant bench` and of the MPI peer benchmark,
//! compares the series side by side with ratios and α-β lower bounds, and draws the charts.
//! Pure except for reading the files and writing the charts; nothing here runs a collective.

pub mod bounds;
pub mod csv;
pub mod distribution;
pub mod plot;
pub mod report;

pub use csv::{read_file, AlphaBeta, CsvError, Measurements, Record};
pub use plot::{write_charts, PlotError};
pub use report::{render_csv, render_table, Comparison, ReportError, Statistic};
