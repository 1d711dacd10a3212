//! `circulant verify`: the verifier on the schedules of every p in a range, on all cores.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use circulant::schedule::verify::{block_counts, verify_with_threads};
use circulant::schedule::{recv_schedule, send_schedule, ScheduleTable};
use indicatif::{ProgressBar, ProgressStyle};

use super::{parse_ranks, Algorithm, CliResult};

#[derive(clap::Args)]
pub struct Args {
    /// Check every p from --min-p up to this (at most 16777215).
    #[arg(long, value_name = "N", value_parser = parse_ranks)]
    max_p: usize,
    /// First p to check.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = parse_ranks)]
    min_p: usize,
    /// Schedule construction.
    #[arg(long, value_enum, default_value_t = Algorithm::Circulant)]
    algorithm: Algorithm,
    /// Seconds between progress lines when stderr is not a terminal.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = super::parse_positive_seconds, hide = true)]
    progress_every: Duration,
    /// Worker threads (default: all cores; at most 1024).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    jobs: Option<u16>,
}

#[derive(Debug, thiserror::Error)]
enum RangeError {
    #[error("--max-p {max} is below --min-p {min}: nothing to check")]
    Empty { min: usize, max: usize },
}

pub fn run(args: Args) -> CliResult {
    let Algorithm::Circulant = args.algorithm;
    if args.max_p < args.min_p {
        return Err(RangeError::Empty {
            min: args.min_p,
            max: args.max_p,
        }
        .into());
    }
    let jobs = args
        .jobs
        .map(usize::from)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let (lo, hi) = (args.min_p, args.max_p);
    let count = hi - lo + 1;
    // Fewer p than threads (a single large p): the threads share the work of each p instead.
    let inner = (jobs / count).max(1);
    let jobs = jobs.min(count);
    // Progress is weighted by p, which tracks the work far better than the count of p.
    let weight = ((lo as u128 + hi as u128) * count as u128 / 2).min(u64::MAX as u128) as u64;
    let bar = ProgressBar::new(weight);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {percent}% {msg} (eta {eta})")
            .map_or_else(
                |_| ProgressStyle::default_bar(),
                |s| s.progress_chars("=> "),
            ),
    );
    let started = Instant::now();
    // Largest p first, so the workers finish together.
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    // Without a terminal the bar is hidden: a line every --progress-every shows that long runs
    // are advancing.
    let (finished, progress_wait) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        if !std::io::stderr().is_terminal() {
            let (done, bar) = (&done, &bar);
            scope.spawn(move || {
                while let Err(RecvTimeoutError::Timeout) =
                    progress_wait.recv_timeout(args.progress_every)
                {
                    let percent = bar.position() as f64 * 100.0 / weight.max(1) as f64;
                    eprintln!(
                        "verify: {}/{count} p done ({percent:.1}% of the work) after {:.0} s",
                        done.load(Ordering::Relaxed),
                        started.elapsed().as_secs_f64()
                    );
                }
            });
        }
        let finished = &finished;
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    break;
                }
                let p = hi - i;
                if let Err(reason) = check(p, inner) {
                    bar.println(format!("p = {p}: {reason}"));
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                bar.set_message(format!("{d}/{count} p"));
                bar.inc(p as u64);
                if d == count {
                    let _ = finished.send(());
                }
            });
        }
    });
    bar.finish_and_clear();
    let failed = failed.into_inner();
    eprintln!(
        "verified p = {lo}..={hi} with {} threads in {:.1} s",
        jobs * inner,
        started.elapsed().as_secs_f64()
    );
    println!("{} passed, {failed} failed", count - failed);
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Verifies the table of p ranks, and that a spread of its rows equals what one rank computes
/// alone in O(log p), which is what `Schedule::new` uses.
fn check(p: usize, threads: usize) -> Result<(), Box<dyn std::error::Error>> {
    let table = ScheduleTable::with_threads(p, threads)?;
    verify_with_threads(
        p,
        table.recv_flat(),
        table.send_flat(),
        &block_counts(table.q()),
        threads,
    )?;
    let skips = table.skips();
    let samples = 16.min(p);
    for r in (0..samples).map(|i| i * p / samples).chain([p - 1]) {
        if table.recv(r) != &*recv_schedule(skips, r) || table.send(r) != &*send_schedule(skips, r)
        {
            return Err(
                format!("rank {r}: the table row differs from the per-rank schedule").into(),
            );
        }
    }
    Ok(())
}
