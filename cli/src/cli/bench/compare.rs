//! `circulant bench --compare FILE...`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use circulant_cli::report::{self, AlphaBeta, Comparison, Statistic};

use super::Args;
use crate::cli::CliResult;

/// The charts' directory when the tables are printed and --out is not given.
const DEFAULT_OUT: &str = "bench-report";

#[derive(Debug, thiserror::Error)]
enum CompareError {
    #[error("--alpha {alpha} and --beta {beta} must be finite and non-negative")]
    BadModel { alpha: f64, beta: f64 },
    #[error("cannot write {}", path.display())]
    Write {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub fn run(args: Args) -> CliResult {
    let model = match (args.alpha, args.beta) {
        (Some(alpha), Some(beta)) => {
            Some(AlphaBeta::new(alpha, beta).ok_or(CompareError::BadModel { alpha, beta })?)
        }
        _ => None,
    };
    let files = args
        .compare
        .iter()
        .map(|path| report::read_file(path))
        .collect::<Result<Vec<_>, _>>()?;
    let cmp = Comparison::build(&files, &args.reference, model)?;
    let stat = if args.median {
        Statistic::Median
    } else {
        Statistic::Min
    };

    if let Some(path) = &args.csv {
        std::fs::write(path, report::render_csv(&cmp)).map_err(|source| CompareError::Write {
            path: path.clone(),
            source,
        })?;
    }
    // Charts go with the tables, or wherever --out asks for them; --json and --markdown are
    // for other programs and documents and need no font.
    let out = match (args.out, args.json || args.markdown) {
        (Some(dir), _) => Some(dir),
        (None, false) => Some(PathBuf::from(DEFAULT_OUT)),
        (None, true) => None,
    };
    let charts = match &out {
        Some(dir) => report::write_charts(&cmp, stat, dir)?,
        None => Vec::new(),
    };

    let mut stdout = std::io::stdout().lock();
    let printed = if args.json {
        writeln!(stdout, "{}", serde_json::to_string(&cmp)?)
    } else if args.markdown {
        write!(stdout, "{}", report::render_markdown(&cmp, stat))
    } else {
        let mut text = report::render_table(&cmp, stat);
        if let Some(dir) = &out {
            text.push_str(&format!(
                "\n{} charts written to {}\n",
                charts.len(),
                dir.display()
            ));
        }
        write!(stdout, "{text}")
    };
    match printed {
        // A closed pipe (e.g. `| head`) is not a failure of the report.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}
