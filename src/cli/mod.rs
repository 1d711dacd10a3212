//! The `circulant` command line: one module per subcommand.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
enum Command {}

pub fn run(cli: Cli) -> CliResult {
    match cli.command {}
}
