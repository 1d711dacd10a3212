//! `circulant model`: every applicable algorithm's rounds and α-β time for one problem, from
//! the closed forms of the seeds (no plans are built, so p = 10^6 answers at once).

use std::process::ExitCode;

use clap::ValueEnum;

use super::{parse_ranks, ratio_to_bound, CliResult};
use circulant::bench::csv::AlphaBeta;
use circulant::bench::report::format_seconds;
use circulant::plan::bounds::lower_bound;
use circulant::plan::distribution::Distribution;
use circulant::plan::{registry, CostModel, Dtype, Problem, ReduceOp, Reduction};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Op {
    Bcast,
    Reduce,
    Allreduce,
    Scan,
    Exscan,
    Allgather,
    Allgatherv,
    Scatter,
    Gather,
    Scatterv,
    Gatherv,
    Alltoall,
    Barrier,
    Intergroup,
}

#[derive(clap::Args)]
pub struct Args {
    /// The collective.
    #[arg(long)]
    op: Op,
    /// Number of ranks (at most 16777215).
    #[arg(short = 'p', long = "ranks", value_parser = parse_ranks)]
    p: usize,
    /// Bytes every rank ends up with: the broadcast or vector size, the whole gathered buffer
    /// (allgather(v), gather), the whole row (scatter, alltoall).
    #[arg(long)]
    bytes: usize,
    /// Latency α in seconds.
    #[arg(long, default_value_t = 2e-6)]
    alpha: f64,
    /// Time per byte β in seconds.
    #[arg(long, default_value_t = 1e-10)]
    beta: f64,
    /// Distribution of the allgatherv, gatherv and scatterv counts (seed 001 §3), scaled to
    /// about `bytes` in total.
    #[arg(long, default_value = "regular")]
    dist: String,
    /// Root of rooted collectives.
    #[arg(long, default_value_t = 0)]
    root: usize,
    /// One JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

fn problem(args: &Args) -> Result<Problem, Box<dyn std::error::Error>> {
    let p = args.p;
    let m = args.bytes;
    let per = m / p.max(1);
    let red = Reduction::new(Dtype::I32, ReduceOp::Sum)?;
    let vector = m - m % red.dtype.size();
    Ok(match args.op {
        Op::Bcast => Problem::Broadcast {
            p,
            root: args.root,
            bytes: m,
        },
        Op::Reduce => Problem::Reduce {
            p,
            root: args.root,
            reduction: red,
            bytes: vector,
        },
        Op::Allreduce => Problem::Allreduce {
            p,
            reduction: red,
            bytes: vector,
        },
        Op::Scan | Op::Exscan => Problem::Scan {
            p,
            reduction: red,
            bytes: vector,
            exclusive: args.op == Op::Exscan,
        },
        Op::Allgather => Problem::Allgather { p, block: per },
        Op::Allgatherv => Problem::Allgatherv {
            counts: counts(args)?,
        },
        Op::Scatterv => Problem::Scatterv {
            root: args.root,
            counts: counts(args)?,
        },
        Op::Gatherv => Problem::Gatherv {
            root: args.root,
            counts: counts(args)?,
        },
        Op::Scatter => Problem::Scatter {
            p,
            root: args.root,
            block: per,
        },
        Op::Gather => Problem::Gather {
            p,
            root: args.root,
            block: per,
        },
        Op::Alltoall => Problem::Alltoall { p, block: per },
        Op::Barrier => Problem::Barrier { p },
        Op::Intergroup => {
            // Two halves, each contributing m in total.
            let pa = p.div_ceil(2);
            let pb = p - pa;
            Problem::Intergroup {
                a: vec![m / pa.max(1); pa],
                b: vec![m / pb.max(1); pb],
            }
        }
    })
}

/// Per-rank counts of the chosen distribution, about `bytes` in total.
fn counts(args: &Args) -> Result<Vec<usize>, Box<dyn std::error::Error>> {
    let d: Distribution = args.dist.parse()?;
    Ok(d.counts(args.p, d.base_for_total(args.p, args.bytes)))
}

pub fn run(args: Args) -> CliResult {
    let Some(ab) = AlphaBeta::new(args.alpha, args.beta) else {
        return Err("alpha and beta must be finite and non-negative".into());
    };
    let model = CostModel {
        alpha: ab.alpha_s,
        beta: ab.beta_s_per_byte,
    };
    let problem = problem(&args)?;
    let algs = registry::applicable(&problem, &model)?;
    let bound = lower_bound(&problem, &model);
    let mut rows: Vec<(&'static str, u64, f64)> = algs
        .iter()
        .map(|a| {
            let pr = a.predict(&model);
            (a.name(), pr.rounds, pr.time)
        })
        .collect();
    rows.sort_by(|a, b| a.2.total_cmp(&b.2));
    let op = format!("{:?}", args.op).to_lowercase();
    if args.json {
        let algorithms: Vec<serde_json::Value> = rows
            .iter()
            .map(|(name, rounds, time)| {
                serde_json::json!({"name": name, "rounds": rounds, "time_s": time})
            })
            .collect();
        let out = serde_json::json!({
            "op": op,
            "p": args.p,
            "bytes": problem.total_bytes(),
            "lower_bound_s": bound,
            "algorithms": algorithms,
        });
        println!("{out}");
    } else {
        println!(
            "{op}: p = {}, {} bytes, α = {} s, β = {} s/B; lower bound {}",
            args.p,
            problem.total_bytes(),
            args.alpha,
            args.beta,
            format_seconds(bound)
        );
        println!(
            "{:<32} {:>10} {:>14} {:>8}",
            "algorithm", "rounds", "time", "/bound"
        );
        for (name, rounds, time) in rows {
            println!(
                "{:<32} {:>10} {:>14} {:>8}",
                name,
                rounds,
                format_seconds(time),
                ratio_to_bound(time, bound, 3)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
