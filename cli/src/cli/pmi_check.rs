//! `circulant pmi-check`: run inside a job, checks the PMI key-value exchange between all
//! ranks (the bootstrap every collective relies on). Last line `X passed, Y failed`.

use std::process::ExitCode;
use std::time::Duration;

use circulant::bootstrap::{Bootstrap, BootstrapError, BootstrapOptions};

use super::CliResult;

#[derive(clap::Args)]
pub struct Args {
    /// Deadline of each PMI wait in seconds (default: CIRCULANT_BOOTSTRAP_TIMEOUT or 60).
    #[arg(long, value_name = "SECONDS", value_parser = super::parse_positive_seconds)]
    timeout: Option<Duration>,
    /// Fault injection for tests: this rank exits with status 0 right after PMI init, without
    /// finalize, leaving the others alone in the barrier.
    #[arg(long, value_name = "RANK")]
    exit_early_rank: Option<usize>,
    /// Fault injection for tests: this rank calls PMI abort with exit code 7 after init, then
    /// waits 5 s to be ended (leaving with 8 if not); under PMIx it leaves with 7 at once.
    #[arg(long, value_name = "RANK")]
    abort_rank: Option<usize>,
    /// Fault injection for tests: this rank never initializes PMI; it sleeps until stopped.
    #[arg(long, value_name = "RANK")]
    skip_init_rank: Option<usize>,
    /// Fault injection for tests: every rank sleeps this long after PMI init, outside any PMI
    /// call (a rank busy with other work).
    #[arg(long, value_name = "SECONDS", value_parser = super::parse_seconds)]
    sleep_after_init: Option<Duration>,
}

/// Exit code a rank told to abort asks for.
const ABORT_CODE: i32 = 7;
/// The exit code of an aborting rank whose launcher did not end the job.
const ABORT_NOT_ENFORCED: u8 = 8;

/// How long a rank told to skip init waits before giving up by itself.
const SKIP_INIT_SLEEP: Duration = Duration::from_secs(120);

pub fn run(args: Args) -> CliResult {
    // The rank as the launcher's environment tells it, before any PMI is spoken.
    let env_rank = ["PMI_RANK", "PMIX_RANK"]
        .iter()
        .find_map(|name| std::env::var(name).ok())
        .and_then(|r| r.parse::<usize>().ok());
    if env_rank.is_some() && env_rank == args.skip_init_rank {
        let rank = env_rank.unwrap_or_default();
        println!(
            "rank {rank}: never initializing PMI, as asked; pid {}",
            std::process::id()
        );
        std::thread::sleep(SKIP_INIT_SLEEP);
        return Ok(ExitCode::FAILURE);
    }
    let mut options = BootstrapOptions::from_env()?;
    if let Some(timeout) = args.timeout {
        options.timeout = timeout;
    }
    let mut boot = Bootstrap::from_env_with(&options)?;
    let (rank, size) = (boot.rank(), boot.size());
    let nodes = boot.nodes().map_or("unknown".to_owned(), |n| n.to_string());
    println!(
        "rank {rank} of {size}: {} kvs {} limits {:?} nodes {nodes} pid {}",
        boot.kind(),
        boot.kvsname(),
        boot.limits(),
        std::process::id()
    );
    if let Some(pause) = args.sleep_after_init {
        std::thread::sleep(pause);
    }
    if args.exit_early_rank == Some(rank) {
        println!("rank {rank}: exiting early as asked, without finalize");
        return Ok(ExitCode::SUCCESS);
    }

    if args.abort_rank == Some(rank) {
        boot.abort(ABORT_CODE, "asked to abort by --abort-rank")?;
        if boot.kind() == "pmix" {
            // PMIx_Abort returns once the server has the request; leave with the code, as an
            // MPI_Abort does. Debian 12's mpirun (Open MPI 4.1.4) crashed or hung in its own
            // finalize in about one run in five when it had to kill the aborting rank itself
            // while the others waited in a fence.
            return Ok(ExitCode::from(ABORT_CODE as u8));
        }
        // The launcher ends the job; should it not, leave with a code of our own, so that a
        // test can tell an abort that did nothing from one that worked.
        std::thread::sleep(Duration::from_secs(5));
        eprintln!("rank {rank}: the job was not ended within 5 s of the abort");
        return Ok(ExitCode::from(ABORT_NOT_ENFORCED));
    }

    let mut checks = Checks::default();
    // One short value per rank, read back by every rank after the barrier.
    let key = Bootstrap::rank_key(rank, "check");
    checks.record("put own key", boot.put(&key, &value_of(rank)));
    // A binary value longer than one PMI value, in pieces.
    let long = long_bytes(rank, boot.limits().value_max);
    checks.record(
        "put_bytes longer than vallen_max",
        boot.put_bytes(&Bootstrap::rank_key(rank, "bytes"), &long),
    );
    // The barrier is where a missing rank shows up: fail the whole check if it does.
    boot.fence().map_err(|e| with_rank(rank, e))?;
    checks.pass("barrier");
    for peer in 0..size {
        let got = boot.get(&Bootstrap::rank_key(peer, "check"));
        checks.compare(&format!("get key of rank {peer}"), got, value_of(peer));
        let got = boot.get_bytes(&Bootstrap::rank_key(peer, "bytes"));
        let want = long_bytes(peer, boot.limits().value_max);
        checks.compare(&format!("get_bytes of rank {peer}"), got, want);
    }
    // The one-call exchange the communicator uses for fabric addresses.
    let mine = format!("address-of-{rank}").into_bytes();
    let want: Vec<Vec<u8>> = (0..size)
        .map(|r| format!("address-of-{r}").into_bytes())
        .collect();
    checks.compare("exchange", boot.exchange("addr", &mine), want);
    checks.record(
        "missing key reports KeyNotFound",
        match boot.get("no-such-key") {
            Err(BootstrapError::KeyNotFound { .. }) => Ok(()),
            Ok(v) => Err(format!("got value {v:?}")),
            Err(e) => Err(e.to_string()),
        },
    );
    checks.record(
        "over-long value is refused before sending",
        match boot.put("too-long", &"x".repeat(boot.limits().value_max + 1)) {
            Err(BootstrapError::ValueTooLong { .. }) => Ok(()),
            Ok(()) => Err("accepted".to_owned()),
            Err(e) => Err(e.to_string()),
        },
    );
    boot.barrier().map_err(|e| with_rank(rank, e))?;
    checks.pass("second barrier");
    checks.record("finalize", boot.finalize());
    println!(
        "rank {rank}: {} passed, {} failed",
        checks.passed, checks.failed
    );
    println!("{} passed, {} failed", checks.passed, checks.failed);
    Ok(if checks.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn value_of(rank: usize) -> String {
    format!("rank-{rank}-says-hello")
}

/// Bytes that differ per rank, cover every byte value, and need several PMI values.
fn long_bytes(rank: usize, value_max: usize) -> Vec<u8> {
    (0..value_max + 300)
        .map(|i| (i.wrapping_mul(31) ^ rank.wrapping_mul(97)) as u8)
        .collect()
}

fn with_rank(rank: usize, error: BootstrapError) -> Box<dyn std::error::Error> {
    format!("rank {rank}: {error}").into()
}

#[derive(Default)]
struct Checks {
    passed: usize,
    failed: usize,
}

impl Checks {
    fn pass(&mut self, _name: &str) {
        self.passed += 1;
    }

    fn record<E: std::fmt::Display>(&mut self, name: &str, result: Result<(), E>) {
        match result {
            Ok(()) => self.passed += 1,
            Err(e) => {
                println!("FAIL {name}: {e}");
                self.failed += 1;
            }
        }
    }

    fn compare<T: PartialEq + std::fmt::Debug>(
        &mut self,
        name: &str,
        got: Result<T, BootstrapError>,
        want: T,
    ) {
        self.record(
            name,
            match got {
                Ok(v) if v == want => Ok(()),
                Ok(v) => Err(format!("got {v:?}, expected {want:?}")),
                Err(e) => Err(e.to_string()),
            },
        );
    }
}
