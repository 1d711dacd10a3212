//! `circulant model`: every applicable algorithm's rounds and α-β-o time for one problem, from
//! the closed forms of the seeds (no plans are built, so p = 10^6 answers at once). Where the
//! plans are small (p up to [`MAX_WALKED_P`], p × rounds up to [`MAX_WALKED`]) they are also
//! walked to count the writes each rank posts when a transfer's pieces are merged under the
//! given iov limits.
//!
//! Given a layout of the ranks on nodes (`--nodes`/`--ranks-per-node` or `--node-map`), it
//! prices every algorithm in the two-level model instead (`sim::price::price_on`, where the
//! plans are small enough to walk), with the bytes across the busiest node link and the
//! two-level lower bound ([`layout`]).

use std::process::ExitCode;

use clap::ValueEnum;

pub(crate) mod layout;

use super::{parse_ranks, ratio_to_bound, CliResult};
use circulant::plan::bounds::lower_bound;
use circulant::plan::distribution::Distribution;
use circulant::plan::merge::{tally, IovLimits};
use circulant::plan::{registry, CostModel, Dtype, Layout, Problem, ReduceOp, Reduction};
use circulant_cli::report::compare::format_seconds;
use circulant_cli::report::csv::AlphaBeta;

/// Beyond this many rank-rounds (p times the predicted rounds) plans are not walked and writes
/// are not counted: the walk takes about 10 µs per rank-round in a debug build.
pub const MAX_WALKED: u64 = 1 << 20;

/// Beyond this many ranks plans are not walked either: a round of a vector collective looks at
/// every rank's block, so walking all p plans costs p² × rounds.
pub const MAX_WALKED_P: usize = 2048;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Op {
    Bcast,
    Reduce,
    Allreduce,
    ReduceScatterBlock,
    ReduceScatter,
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
    #[command(flatten)]
    problem: ProblemArgs,
    /// Local segments per write (the provider's iov_limit; tcp;ofi_rxm: 4).
    #[arg(long, default_value_t = 4)]
    iov_limit: usize,
    /// Remote segments per write (the provider's rma_iov_limit; tcp;ofi_rxm: 4).
    #[arg(long, default_value_t = 4)]
    rma_iov_limit: usize,
    /// One JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// The problem, the layout and the model's parameters (shared with `circulant plan`).
#[derive(clap::Args)]
pub struct ProblemArgs {
    /// The collective.
    #[arg(long)]
    op: Op,
    /// Number of ranks (at most 16777215); with a layout, taken from it (and checked against it
    /// when given).
    #[arg(short = 'p', long = "ranks", value_parser = parse_ranks)]
    p: Option<usize>,
    /// Bytes every rank ends up with: the broadcast or vector size, the whole gathered buffer
    /// (allgather(v), gather), the whole row (scatter, alltoall); the whole vector every rank
    /// contributes (reduce-scatter(-block)), of 4-byte elements.
    #[arg(long)]
    bytes: usize,
    /// Latency α in seconds [default: 2e-6; with a layout, inside a node: 5e-7, shared memory].
    #[arg(long)]
    alpha: Option<f64>,
    /// Time per byte β in seconds [default: 1e-10; with a layout, inside a node: 5e-11, 20 GB/s].
    #[arg(long)]
    beta: Option<f64>,
    /// Overhead o in seconds of every write after the first of a message (LogGP's o) [default:
    /// 3e-7; with a layout, inside a node: 1e-7].
    #[arg(long = "o")]
    o: Option<f64>,
    #[command(flatten)]
    layout: layout::LayoutArgs,
    /// Distribution of the allgatherv, gatherv, scatterv and reduce-scatter counts (seed 001
    /// §3), scaled to about `bytes` in total.
    #[arg(long, default_value = "regular")]
    dist: String,
    /// Root of rooted collectives.
    #[arg(long, default_value_t = 0)]
    root: usize,
}

pub(crate) fn problem(args: &ProblemArgs, p: usize) -> Result<Problem, Box<dyn std::error::Error>> {
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
        Op::ReduceScatterBlock => {
            let size = red.dtype.size();
            Problem::ReduceScatterBlock {
                p,
                reduction: red,
                block: per - per % size,
            }
        }
        Op::ReduceScatter => Problem::ReduceScatter {
            reduction: red,
            counts: element_counts(args, p, red.dtype.size())?,
        },
        Op::Scan | Op::Exscan => Problem::Scan {
            p,
            reduction: red,
            bytes: vector,
            exclusive: args.op == Op::Exscan,
        },
        Op::Allgather => Problem::Allgather { p, block: per },
        Op::Allgatherv => Problem::Allgatherv {
            counts: counts(args, p)?,
        },
        Op::Scatterv => Problem::Scatterv {
            root: args.root,
            counts: counts(args, p)?,
        },
        Op::Gatherv => Problem::Gatherv {
            root: args.root,
            counts: counts(args, p)?,
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
fn counts(args: &ProblemArgs, p: usize) -> Result<Vec<usize>, Box<dyn std::error::Error>> {
    let d: Distribution = args.dist.parse()?;
    Ok(d.counts(p, d.base_for_total(p, args.bytes)))
}

/// Per-rank counts of the chosen distribution in whole elements of `size` bytes, about `bytes`
/// in total.
fn element_counts(
    args: &ProblemArgs,
    p: usize,
    size: usize,
) -> Result<Vec<usize>, Box<dyn std::error::Error>> {
    let d: Distribution = args.dist.parse()?;
    let elements = d.counts(p, d.base_for_total(p, args.bytes / size));
    Ok(elements.into_iter().map(|c| c * size).collect())
}

/// Whether the plans of `p` ranks and `rounds` rounds are small enough to walk.
fn walkable(p: usize, rounds: u64) -> bool {
    p <= MAX_WALKED_P && (p as u64).saturating_mul(rounds.max(1)) <= MAX_WALKED
}

/// One algorithm's answer: closed form, and counted writes where the plans were walked.
struct Row {
    name: &'static str,
    rounds: u64,
    time: f64,
    /// (writes per rank, pieces per rank, time priced with the merged writes).
    writes: Option<(u64, u64, f64)>,
}

/// A cost model from the command line, checked.
pub(crate) fn checked_model(
    alpha: f64,
    beta: f64,
    o: f64,
    what: &str,
) -> Result<CostModel, String> {
    let Some(ab) = AlphaBeta::new(alpha, beta) else {
        return Err(format!(
            "{what}alpha and beta must be finite and non-negative"
        ));
    };
    if !(o.is_finite() && o >= 0.0) {
        return Err(format!("{what}o must be finite and non-negative"));
    }
    Ok(CostModel {
        alpha: ab.alpha_s,
        beta: ab.beta_s_per_byte,
        o,
    })
}

impl ProblemArgs {
    /// The layout the arguments give, if any.
    pub(crate) fn layout(&self) -> Result<Option<Layout>, String> {
        self.layout.layout(self.p)
    }

    /// The number of ranks without a layout.
    pub(crate) fn flat_p(&self) -> Result<usize, String> {
        self.p
            .ok_or_else(|| "-p is required without a layout (--nodes or --node-map)".into())
    }

    /// The model without a layout: `--alpha`, `--beta`, `--o` or their defaults.
    pub(crate) fn flat_model(&self) -> Result<CostModel, String> {
        checked_model(
            self.alpha.unwrap_or(2e-6),
            self.beta.unwrap_or(1e-10),
            self.o.unwrap_or(3e-7),
            "",
        )
    }

    /// The root, for the rooted collectives.
    pub(crate) fn root_of(&self) -> Option<usize> {
        match self.op {
            Op::Bcast | Op::Reduce | Op::Scatter | Op::Gather | Op::Scatterv | Op::Gatherv => {
                Some(self.root)
            }
            _ => None,
        }
    }

    /// The collective's name as `--op` spells it.
    pub(crate) fn op_name(&self) -> String {
        let op = self.op;
        op.to_possible_value()
            .map_or_else(|| format!("{op:?}"), |v| v.get_name().to_string())
    }
}

pub fn run(args: Args) -> CliResult {
    let pa = &args.problem;
    if let Some(layout) = pa.layout()? {
        return layout::run(&args, &layout);
    }
    let p = pa.flat_p()?;
    let model = pa.flat_model()?;
    let (alpha, beta, o) = (model.alpha, model.beta, model.o);
    let limits = IovLimits::new(args.iov_limit, args.rma_iov_limit)?;
    let problem = problem(pa, p)?;
    let algs = registry::applicable(&problem, &model)?;
    let bound = lower_bound(&problem, &model);
    let mut rows = Vec::with_capacity(algs.len());
    for a in &algs {
        let pr = a.predict(&model);
        let writes = if walkable(p, pr.rounds) {
            let t = tally(a.as_ref(), limits, &model)?;
            Some((t.writes_per_rank, t.pieces_per_rank, t.round_time))
        } else {
            None
        };
        rows.push(Row {
            name: a.name(),
            rounds: pr.rounds,
            time: pr.time,
            writes,
        });
    }
    rows.sort_by(|a, b| a.time.total_cmp(&b.time));
    let op = pa.op_name();
    if args.json {
        let algorithms: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "name": r.name,
                    "rounds": r.rounds,
                    "time_s": r.time,
                    "writes_per_rank": r.writes.map(|w| w.0),
                    "pieces_per_rank": r.writes.map(|w| w.1),
                    "merged_time_s": r.writes.map(|w| w.2),
                })
            })
            .collect();
        let out = serde_json::json!({
            "op": op,
            "p": p,
            "bytes": problem.total_bytes(),
            "alpha_s": alpha,
            "beta_s_per_byte": beta,
            "o_s": o,
            "iov_limit": limits.iov,
            "rma_iov_limit": limits.rma_iov,
            "lower_bound_s": bound,
            "algorithms": algorithms,
        });
        println!("{out}");
    } else {
        println!(
            "{op}: p = {}, {} bytes, α = {} s, β = {} s/B, o = {} s; lower bound {}",
            p,
            problem.total_bytes(),
            alpha,
            beta,
            o,
            format_seconds(bound)
        );
        println!(
            "{:<32} {:>10} {:>14} {:>8} {:>10} {:>14}",
            "algorithm",
            "rounds",
            "time",
            "/bound",
            "writes",
            format!("merged {}/{}", limits.iov, limits.rma_iov)
        );
        for r in rows {
            let (writes, merged) = match r.writes {
                Some((w, _, t)) => (w.to_string(), format_seconds(t)),
                None => ("-".to_string(), "-".to_string()),
            };
            println!(
                "{:<32} {:>10} {:>14} {:>8} {:>10} {:>14}",
                r.name,
                r.rounds,
                format_seconds(r.time),
                ratio_to_bound(r.time, bound, 3),
                writes,
                merged
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
