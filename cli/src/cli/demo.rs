//! `circulant demo`: starts a job of local ranks itself and shows what the library does:
//! broadcast and allgatherv (a regular and a skewed distribution) at a few sizes with every
//! algorithm that applies, every result checked, and a table of measured times beside the α-β
//! prediction and lower bound, with α and β measured in the same run.

use std::ffi::OsString;
use std::process::ExitCode;

use circulant::comm::{Choice, Communicator};
use circulant::plan::bounds::lower_bound;
use circulant::plan::distribution::Distribution;
use circulant::plan::{registry, Problem};
use circulant_cli::cases::{CaseData, RankData};
use circulant_cli::launch::{run_job, JobSpec};
use circulant_cli::report::compare::format_seconds;

use super::bench::timing::{measure_model, require_one_clock, Window};
use super::{ratio_to_bound, CliResult};

#[derive(clap::Args)]
pub struct Args {
    /// Number of local ranks to start.
    #[arg(short = 'n', long = "np", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    ranks: u32,
    /// libfabric provider (default: shm on one host).
    #[arg(long)]
    provider: Option<String>,
    /// Repetitions per measurement (the minimum is shown).
    #[arg(long, default_value_t = 5)]
    reps: u32,
    /// Runs as one rank of the demo job (set by the demo itself).
    #[arg(long, hide = true)]
    rank_of_demo: bool,
}

pub fn run(args: Args) -> CliResult {
    if args.rank_of_demo {
        return rank(&args);
    }
    let exe = std::env::current_exe()?;
    let mut spec = JobSpec::new(args.ranks as usize, exe);
    let mut child_args: Vec<OsString> = vec!["demo".into(), "--rank-of-demo".into()];
    child_args.push(format!("--reps={}", args.reps).into());
    spec.args = child_args;
    spec.timeout = Some(std::time::Duration::from_secs(600));
    spec.guardian = Some(super::guardian());
    if let Some(p) = &args.provider {
        spec.env.push(("FI_PROVIDER".into(), p.into()));
    }
    println!("circulant demo: starting {} local ranks", args.ranks);
    let report = run_job(&spec)?;
    if let Some(failure) = report.failure() {
        eprintln!("circulant demo: {failure}");
        return Ok(ExitCode::from(report.exit_code()));
    }
    Ok(ExitCode::SUCCESS)
}

/// One row of the table.
struct Row {
    op: String,
    bytes: usize,
    algorithm: &'static str,
    time: f64,
    predicted: f64,
    bound: f64,
    ok: bool,
}

/// This rank's data of each repetition, one generation each: a stale result shows.
fn data_per_rep(problem: &Problem, reps: u32, me: usize) -> Vec<RankData> {
    (0..reps)
        .map(|rep| CaseData::generation(problem.clone(), u64::from(rep)).for_rank(me))
        .collect()
}

fn rank(args: &Args) -> CliResult {
    let mut comm = Communicator::init()?;
    let (me, p) = (comm.rank(), comm.size());
    require_one_clock(&mut comm)?;
    let mut window = Window::new();
    let model = measure_model(&mut comm, &mut window)?;
    comm.set_model(model);
    if me == 0 {
        println!(
            "{p} ranks over {}, launcher {}; measured α = {:.2} µs, β = {:.3} ns/B (1/β = {:.2} GB/s), o = {:.2} µs per further write",
            comm.provider(),
            comm.launcher(),
            model.alpha * 1e6,
            model.beta * 1e9,
            1e-9 / model.beta,
            model.o * 1e6
        );
    }
    let reps = args.reps.max(1);
    let mut rows = Vec::new();
    let mut failures = 0u64;
    for bytes in [1000usize, 100_000, 4 << 20] {
        let problem = Problem::Broadcast { p, root: 0, bytes };
        let per_rep = data_per_rep(&problem, reps, me);
        for algorithm in registry::applicable(&problem, &model)? {
            let name = algorithm.name();
            let mut buf = comm.alloc(bytes)?;
            let mut best = f64::INFINITY;
            let mut ok = true;
            for data in &per_rep {
                buf.copy_from_slice(&data.recv_initial);
                let t = window.time(&mut comm, &mut |c| {
                    c.choosing(Choice::Named(name)).bcast(&mut buf, 0)
                })?;
                best = best.min(t);
                ok &= data.expected.check(&buf).is_ok();
            }
            rows.push(Row {
                op: "bcast".into(),
                bytes,
                algorithm: name,
                time: best,
                predicted: algorithm.predict(&model).time,
                bound: lower_bound(&problem, &model),
                ok,
            });
        }
    }
    for dist in [Distribution::Regular, Distribution::Spike] {
        for total in [1000usize, 100_000, 4 << 20] {
            let counts = dist.counts(p, dist.base_for_total(p, total));
            let problem = Problem::Allgatherv {
                counts: counts.clone(),
            };
            let sum: usize = counts.iter().sum();
            let per_rep = data_per_rep(&problem, reps, me);
            for algorithm in registry::applicable(&problem, &model)? {
                let name = algorithm.name();
                let mut send = comm.alloc(counts[me])?;
                let mut recv = comm.alloc(sum)?;
                let mut best = f64::INFINITY;
                let mut ok = true;
                for data in &per_rep {
                    send.copy_from_slice(&data.send);
                    recv.copy_from_slice(&data.recv_initial);
                    let t = window.time(&mut comm, &mut |c| {
                        c.choosing(Choice::Named(name))
                            .allgatherv(&send, &mut recv, &counts)
                    })?;
                    best = best.min(t);
                    ok &= data.expected.check(&recv).is_ok();
                }
                rows.push(Row {
                    op: format!("allgatherv {dist}"),
                    bytes: sum,
                    algorithm: name,
                    time: best,
                    predicted: algorithm.predict(&model).time,
                    bound: lower_bound(&problem, &model),
                    ok,
                });
            }
        }
    }
    // Every rank checked its own data: rank 0 reports the failures of all.
    let mine: Vec<u64> = vec![rows.iter().filter(|r| !r.ok).count() as u64];
    let mut all = vec![0u64];
    comm.allreduce(&mine, &mut all, circulant::plan::ReduceOp::Sum)?;
    failures += all[0];
    if me == 0 {
        println!();
        println!(
            "{:<22} {:>10}  {:<28} {:>11} {:>11} {:>11} {:>9}  data",
            "operation", "bytes", "algorithm", "measured", "α-β model", "bound", "/bound"
        );
        for r in &rows {
            println!(
                "{:<22} {:>10}  {:<28} {:>11} {:>11} {:>11} {:>8}×  {}",
                r.op,
                r.bytes,
                r.algorithm,
                format_seconds(r.time),
                format_seconds(r.predicted),
                format_seconds(r.bound),
                ratio_to_bound(r.time, r.bound, 2),
                if r.ok { "ok" } else { "WRONG" }
            );
        }
        println!();
        println!(
            "times: minimum over {reps} repetitions of the slowest rank, all ranks started at one \
             instant (as circulant bench); bound: α-β lower bound"
        );
        println!(
            "{} passed, {failures} failed",
            rows.len() as u64 * p as u64 - failures
        );
    }
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
