//! `circulant bench`: inside a job it measures collectives (`measure`); with `--compare` it
//! reads CSV files (of `circulant bench` and of the MPI peer benchmark) and prints the
//! side-by-side comparison and writes the charts (`compare`).

use std::path::PathBuf;

use super::CliResult;

mod compare;
mod forms;
pub(super) mod levels;
pub(super) mod measure;
pub(super) mod timing;

#[derive(clap::Args)]
pub struct Args {
    /// Benchmark CSV files to compare (the columns of `circulant bench` and of the MPI peer);
    /// without it, `circulant bench` measures inside the job it was started in.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub compare: Vec<PathBuf>,

    /// Operations to measure (comma-separated): bcast, allgather, allgatherv, allreduce,
    /// reduce, reduce-scatter-block, reduce-scatter. The size is the message (bcast), each
    /// rank's block (allgather), the distribution's base count (allgatherv; reduce-scatter,
    /// each count rounded down to whole int32 elements), the vector of int32 elements every
    /// rank contributes (allreduce, reduce, reduce-scatter-block).
    #[arg(
        long,
        value_name = "OPS",
        value_delimiter = ',',
        default_value = "bcast,allgather,allgatherv,allreduce"
    )]
    pub op: Vec<measure::Op>,

    /// Algorithms to measure (comma-separated names of `circulant model`); default: every one
    /// that applies. Names that do not apply to an operation are skipped for it. `auto`
    /// measures the automatic choice too: its rows name the algorithm it took (`auto:NAME`).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub algorithms: Vec<String>,

    /// allgatherv and reduce-scatter distributions (comma-separated): regular, broadcast, spike, half-full,
    /// decreasing, geometric, mod3; default: all.
    #[arg(long = "dist", value_name = "NAMES", value_delimiter = ',')]
    pub distributions: Vec<String>,

    /// Smallest size in bytes; sizes grow by ×2 and ×5 alternately (1, 2, 10, 20, 100, ...).
    #[arg(long, value_name = "B", default_value_t = 1)]
    pub min_bytes: u64,

    /// Largest size in bytes (default 256 MiB).
    #[arg(long, value_name = "B", default_value_t = 256 << 20)]
    pub max_bytes: u64,

    /// Timed repetitions per size and algorithm.
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub reps: u32,

    /// Untimed calls before the repetitions (the first one's data are checked).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub warmup: u32,

    /// Root of the broadcast.
    #[arg(long, value_name = "R", default_value_t = 0)]
    pub root: usize,

    /// Measure the nonblocking forms (`ibcast`, `iallgatherv`, …: each call started, then
    /// waited for) instead of the blocking calls.
    #[arg(long)]
    pub nonblocking: bool,

    /// Measure persistent requests (`bcast_init`, `allgatherv_init`, …): one request per
    /// operation, distribution, size and algorithm, made before its warm-up calls, each
    /// repetition one start and wait.
    #[arg(long, conflicts_with = "nonblocking")]
    pub persistent: bool,

    /// Measure overlap as the OSU micro-benchmarks do: per size and algorithm the nonblocking
    /// call alone (started, then waited for), a computation alone as long as the call's
    /// least time, and the call started, the computation, then the wait; overlap =
    /// 100·(1 − (both − computation) / alone), minima, at least 0. The times are those of
    /// both together; the `alone`, `compute` and `overlap` columns (`alone_s`, `compute_s`,
    /// `overlap_pct` in CSV) the rest. The computation keeps a core busy for its time.
    #[arg(long, conflicts_with_all = ["nonblocking", "persistent"])]
    pub overlap: bool,

    /// Measure each timed call's software overhead (entry to first post,
    /// `Executed::overhead`): the `overhead` column, `overhead_s` in CSV. It reads the clock
    /// twice per call, which the times then include.
    #[arg(long)]
    pub overhead: bool,

    /// No progress bar on stderr.
    #[arg(long)]
    pub no_progress: bool,

    /// Directory for the charts (<op>-<distribution>-p<P>.png and .svg) of `--compare`
    /// (default bench-report; with --json or --markdown charts are written only when it is
    /// given).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Latency α in seconds for the bounds (`--compare`: overrides the files' `# alpha_s=`
    /// comment; measuring: used instead of measuring α and β in the job).
    #[arg(long, value_name = "S", requires = "beta", allow_hyphen_values = true)]
    pub alpha: Option<f64>,

    /// Time per byte β in seconds (see --alpha).
    #[arg(
        long,
        value_name = "S_PER_BYTE",
        requires = "alpha",
        allow_hyphen_values = true
    )]
    pub beta: Option<f64>,

    /// Print a Markdown summary instead of the full tables (`--compare`): per size the best
    /// algorithm of the reference library, the other series and their ratios to it, and the
    /// bound.
    #[arg(long, conflicts_with = "json")]
    pub markdown: bool,

    /// Show and plot the median over the repetitions instead of the minimum (`--compare`).
    #[arg(long)]
    pub median: bool,

    /// Write CSV to this file: the measurements, or with `--compare` the comparison.
    #[arg(long, value_name = "OUT")]
    pub csv: Option<PathBuf>,

    /// Print JSON instead of the table: the measurements, or the whole comparison.
    #[arg(long)]
    pub json: bool,

    /// The library whose best algorithm per size is the denominator of the ratios (`--compare`).
    #[arg(long, value_name = "LIBRARY", default_value = "circulant")]
    pub reference: String,
}

pub fn run(args: Args) -> CliResult {
    if args.compare.is_empty() {
        measure::run(args)
    } else {
        compare::run(args)
    }
}
