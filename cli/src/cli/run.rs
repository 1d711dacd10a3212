//! `circulant run -n N [--provider P] [--timeout S] [--tag-output] [--pmi-stats] -- CMD [ARGS]`: N local ranks
//! under the built-in PMI-1 launcher.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use circulant_cli::launch::{run_job, JobReport, JobSpec, PmiRequests};

use super::{parse_positive_seconds, parse_seconds, CliResult};

#[derive(clap::Args)]
pub struct Args {
    /// Number of ranks.
    #[arg(short = 'n', long = "np", value_parser = clap::value_parser!(u32).range(1..=4096))]
    ranks: u32,
    /// libfabric provider for the ranks (sets FI_PROVIDER), e.g. `shm`, `tcp;ofi_rxm`.
    #[arg(long, value_parser = parse_provider)]
    provider: Option<String>,
    /// Stop the job after this many seconds (exit status 124; at most 604800, 7 days).
    #[arg(long, value_name = "SECONDS", value_parser = parse_positive_seconds)]
    timeout: Option<Duration>,
    /// Seconds a rank gets between SIGTERM and SIGKILL when the job is stopped (0: SIGKILL at
    /// once; at most 604800, 7 days).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds, default_value = "2")]
    grace: Duration,
    /// Prefix every line of output with `[rank] `.
    #[arg(long)]
    tag_output: bool,
    /// When a rank fails, let the others run to their own end instead of stopping them (the
    /// job still fails, naming the first failing rank).
    #[arg(long)]
    keep_going: bool,
    /// After the job, print how many PMI requests (gets, puts, barriers) the ranks made:
    /// least, most and total over the ranks.
    #[arg(long)]
    pmi_stats: bool,
    /// The program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

/// An empty FI_PROVIDER makes libfabric offer no provider at all.
fn parse_provider(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err("the provider name is empty (`circulant info` lists the providers)".into());
    }
    Ok(text.to_owned())
}

pub fn run(args: Args) -> CliResult {
    let mut command = args.command.into_iter();
    let program = command.next().ok_or("no command to run")?;
    let mut spec = JobSpec::new(args.ranks as usize, program);
    spec.args = command.collect();
    spec.timeout = args.timeout;
    spec.tag_output = args.tag_output;
    spec.grace = args.grace;
    spec.keep_going = args.keep_going;
    spec.guardian = Some(super::guardian());
    if let Some(provider) = args.provider {
        spec.env.push(("FI_PROVIDER".into(), provider.into()));
    }
    let report = run_job(&spec)?;
    if args.pmi_stats {
        eprintln!("{}", pmi_stats(&report));
    }
    if let Some(failure) = report.failure() {
        eprintln!("circulant run: {failure}");
    }
    Ok(ExitCode::from(report.exit_code()))
}

/// `circulant run: PMI requests per rank (least/most/total): gets A/B/C, puts ..., barriers ...`
fn pmi_stats(report: &JobReport) -> String {
    let of = |count: fn(&PmiRequests) -> usize| {
        let counts = report.ranks.iter().map(|r| count(&r.requests));
        let least = counts.clone().min().unwrap_or(0);
        let most = counts.clone().max().unwrap_or(0);
        let total: usize = counts.sum();
        format!("{least}/{most}/{total}")
    };
    format!(
        "circulant run: PMI requests per rank (least/most/total): gets {}, puts {}, barriers {}",
        of(|r| r.gets),
        of(|r| r.puts),
        of(|r| r.barriers)
    )
}
