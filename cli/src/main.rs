use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cli::run(cli) {
        Ok(code) => code,
        Err(err) => {
            let _ = std::io::stderr().write_all(report(err.as_ref()).as_bytes());
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, one per line. A cause whose text the message above already
/// contains (errors that print their source themselves) is left out, so nothing shows twice.
/// Written with one call, so that a rank stopped while printing leaves no half message.
fn report(err: &dyn std::error::Error) -> String {
    let mut text = format!("circulant: {err}\n");
    let mut shown = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !shown.contains(&line) {
            text.push_str(&format!("  caused by: {line}\n"));
        }
        shown = line;
        source = cause.source();
    }
    text
}
