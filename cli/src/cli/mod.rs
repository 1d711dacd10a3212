//! The `circulant` command line: one module per subcommand.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod demo;
mod info;
mod model;
mod plan;
mod pmi_check;
mod run;
mod schedule;
mod selftest;
mod verify;

/// Errors of a subcommand, reported by `main` with their causes.
pub type CliResult = Result<ExitCode, Box<dyn std::error::Error>>;

#[derive(Parser)]
#[command(
    name = "circulant",
    version,
    about = "Round-optimal collectives over libfabric"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// libfabric version and the providers usable for one-sided collectives, with their limits.
    Info(info::Args),
    /// Benchmark report: side-by-side tables, ratios, α-β bounds and plots from CSV files.
    Bench(bench::Args),
    /// Start 4 local ranks and show broadcast and allgatherv with every algorithm, checked and timed.
    Demo(demo::Args),
    /// Rounds and α-β time of every algorithm for a collective, and the lower bound.
    Model(model::Args),
    /// One algorithm's plan for a problem and a layout, every rank's rounds, as text for a
    /// replay (benches/simgrid).
    Plan(plan::Args),
    /// Per-phase receive/send schedules of every rank (root 0), as a table or JSON.
    Schedule(schedule::Args),
    /// Verify the schedules of every p up to a bound.
    Verify(verify::Args),
    /// Start N local ranks under the built-in PMI-1 launcher.
    Run(run::Args),
    /// Inside a job: check the PMI key-value exchange between all ranks.
    PmiCheck(pmi_check::Args),
    /// Inside a job: every collective with every algorithm, data checked; `X passed, Y failed`.
    Selftest(selftest::Args),
    /// The guardian `run` and `demo` start (reads the launcher's pids on standard input).
    #[command(hide = true)]
    LaunchGuardian,
}

pub fn run(cli: Cli) -> CliResult {
    match cli.command {
        Command::Info(args) => info::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Model(args) => model::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Schedule(args) => schedule::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Run(args) => run::run(args),
        Command::PmiCheck(args) => pmi_check::run(args),
        Command::Selftest(args) => selftest::run(args),
        Command::LaunchGuardian => {
            circulant_cli::launch::guard(std::io::stdin());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The launcher's guardian: this program (whichever file it was started from, even one
/// replaced since) with the hidden subcommand `launch-guardian`.
pub fn guardian() -> circulant_cli::launch::GuardianCommand {
    circulant_cli::launch::GuardianCommand {
        program: "/proc/self/exe".into(),
        args: vec!["launch-guardian".into()],
    }
}

/// A number of ranks in 1 ..= 2^24 - 1 (the largest job), for clap.
pub fn parse_ranks(text: &str) -> Result<usize, String> {
    circulant::limits::parse_ranks(text)
}

/// A number of seconds in 0 ..= 7 days, for clap.
pub fn parse_seconds(text: &str) -> Result<std::time::Duration, String> {
    circulant::limits::parse_seconds(text).map_err(|e| format!("`{text}`: {e}"))
}

/// A positive number of seconds up to 7 days, for clap.
pub fn parse_positive_seconds(text: &str) -> Result<std::time::Duration, String> {
    circulant::limits::parse_positive_seconds(text).map_err(|e| format!("`{text}`: {e}"))
}

/// `time / bound` with `decimals` digits, or `-` when there is no bound to compare with (a
/// single rank needs no communication, so its bound is 0).
pub fn ratio_to_bound(time: f64, bound: f64, decimals: usize) -> String {
    if bound > 0.0 && time.is_finite() {
        format!("{:.*}", decimals, time / bound)
    } else {
        "-".to_owned()
    }
}

/// Schedule constructions; only the circulant one of seed 000 so far.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Algorithm {
    /// Round-optimal circulant-graph schedules (Träff, Alg. 1–5).
    Circulant,
}
