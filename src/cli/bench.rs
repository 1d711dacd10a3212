//! `circulant bench`: benchmark reports. `--compare` reads CSV files (of `circulant bench` and
//! of the MPI peer benchmark) and prints the side-by-side comparison and writes the charts.

use std::path::PathBuf;

use super::CliResult;

mod compare;

#[derive(clap::Args)]
pub struct Args {
    /// Benchmark CSV files to compare (the columns of `circulant bench` and of the MPI peer).
    #[arg(long, value_name = "FILE", num_args = 1.., required = true)]
    pub compare: Vec<PathBuf>,

    /// Directory for the charts (<op>-<distribution>-p<P>.png and .svg).
    #[arg(long, value_name = "DIR", default_value = "bench-report")]
    pub out: PathBuf,

    /// Latency α in seconds for the lower bounds (overrides the files' `# alpha_s=` comment).
    #[arg(long, value_name = "S", requires = "beta", allow_hyphen_values = true)]
    pub alpha: Option<f64>,

    /// Time per byte β in seconds for the lower bounds (overrides the files' comment).
    #[arg(
        long,
        value_name = "S_PER_BYTE",
        requires = "alpha",
        allow_hyphen_values = true
    )]
    pub beta: Option<f64>,

    /// Show and plot the median over the repetitions instead of the minimum.
    #[arg(long)]
    pub median: bool,

    /// Also write the comparison as CSV to this file.
    #[arg(long, value_name = "OUT")]
    pub csv: Option<PathBuf>,

    /// Print the comparison as one JSON object instead of the tables.
    #[arg(long)]
    pub json: bool,

    /// The library whose best algorithm per size is the denominator of the ratios.
    #[arg(long, value_name = "LIBRARY", default_value = "circulant")]
    pub reference: String,
}

pub fn run(args: Args) -> CliResult {
    // The measuring mode (inside a job) joins here as a second branch.
    compare::run(args)
}
