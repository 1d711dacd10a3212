//! The `circulant` command line: one module per subcommand.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod info;

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
}

pub fn run(cli: Cli) -> CliResult {
    match cli.command {
        Command::Info(args) => info::run(args),
        Command::Bench(args) => bench::run(args),
    }
}
