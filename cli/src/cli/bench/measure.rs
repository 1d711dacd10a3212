//! `circulant bench` inside a job: every chosen operation, size, algorithm and distribution,
//! measured as the papers do and as the MPI peer (benches/peers/mpi_coll.c) does.
//!
//! Method, per (operation, distribution, size, algorithm): `--warmup` untimed calls (the first
//! one's data are checked on every rank), then `--reps` repetitions. Each repetition starts all
//! ranks at one instant of the common monotonic clock: rank 0 broadcasts a start time a window
//! δ ahead, every rank waits for it, calls the collective and takes its own time from the
//! common start to its return; the repetition's time is the maximum over the ranks (the
//! slowest rank's time), taken with a MAX allreduce. A rank that received the start time only
//! after it had passed marks the repetition late; late repetitions are repeated with δ doubled,
//! and after a repetition on time δ shrinks to four times the longest any rank took to receive
//! the start (never below 200 µs), so one stall of the machine does not slow every later one.
//! Unlike timing between barriers, this does not let a root that leaves the barrier first start
//! early (then a rank's call can return before the data could have arrived, or include the
//! barrier's skew). The clock is common to all ranks on one machine, which includes the
//! emulated cluster of ci/cluster (one kernel); a job whose ranks' clocks differ by more than
//! 1 ms (several hosts) is refused with an error rather than timed wrongly. Reported: the
//! minimum and the median over the repetitions.
//!
//! The library plans every call (algorithm choice and this rank's rounds); `plan_s` is that
//! time alone, measured outside the call (median over the repetitions of the slowest rank's
//! time); it is part of the measured time of each call, except with `--persistent`, whose
//! request is made (and planned) once before its warm-up calls.
//!
//! With `--overhead`, `overhead_s` is the software overhead of the timed calls themselves:
//! from the entry into the collective to its first post to the fabric
//! ([`circulant::comm::Executed::overhead`]), the median over the repetitions on each rank,
//! then the slowest rank's. Without it the communicator does not read the clock for it, as a
//! program's calls do not.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use circulant::comm::{Buffer, Carried, Choice, CommError, Communicator, Traffic};
use circulant::plan::distribution::{Distribution, UnknownDistribution};
use circulant::plan::{registry, CostModel, Dtype, Problem, ReduceOp, Reduction};
use circulant_cli::cases::CaseData;
use circulant_cli::report::compare::{format_bytes, format_seconds};
use circulant_cli::report::csv::{header, AlphaBeta, Record, OVERHEAD_COLUMN};
use circulant_cli::report::row_bound;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use super::forms::{Form, Repeated, Timed};
use super::levels::measure_levels;
use super::timing::{now_ns, require_one_clock, Window};
use super::Args;
use crate::cli::CliResult;

/// The operations `circulant bench` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Op {
    Bcast,
    Allgather,
    Allgatherv,
    Allreduce,
    Reduce,
    // Also as the C entry points spell them.
    #[value(alias = "reduce_scatter_block")]
    ReduceScatterBlock,
    #[value(alias = "reduce_scatter")]
    ReduceScatter,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Bcast => "bcast",
            Op::Allgather => "allgather",
            Op::Allgatherv => "allgatherv",
            Op::Allreduce => "allreduce",
            Op::Reduce => "reduce",
            Op::ReduceScatterBlock => "reduce-scatter-block",
            Op::ReduceScatter => "reduce-scatter",
        }
    }

    /// Whether its sizes are int32 elements (a reduction's).
    fn reduces(self) -> bool {
        matches!(
            self,
            Op::Allreduce | Op::Reduce | Op::ReduceScatterBlock | Op::ReduceScatter
        )
    }

    /// Whether it takes the count distributions.
    fn distributed(self) -> bool {
        matches!(self, Op::Allgatherv | Op::ReduceScatter)
    }
}

#[derive(Debug, thiserror::Error)]
enum MeasureError {
    #[error("--root {root} is not below the number of ranks {p}")]
    Root { root: usize, p: usize },
    #[error("--min-bytes {min} exceeds --max-bytes {max}")]
    Sizes { min: u64, max: u64 },
    #[error("--alpha {alpha} and --beta {beta} must be finite and non-negative")]
    BadModel { alpha: f64, beta: f64 },
    #[error("unknown algorithm {0:?} (see `circulant model`)")]
    UnknownAlgorithm(String),
    #[error(transparent)]
    Distribution(#[from] UnknownDistribution),
    #[error("{bytes} bytes do not fit this machine's address space")]
    TooLarge { bytes: u64 },
    #[error("cannot write {}", path.display())]
    Write {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// One measured cell: a row of the CSV plus the plan time.
#[derive(Serialize)]
struct Measured {
    #[serde(flatten)]
    record: Record,
    plan_s: f64,
    /// Wrong bytes (or elements) summed over the ranks in the checked call.
    wrong: u64,
    /// With `--overlap`: the call alone, the computation alone, the overlap.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    overlap: Option<Overlap>,
}

/// The figures of an overlap measurement (minima over the repetitions: on a busy machine each
/// series' least disturbed repetition, where a median mixes the computation's preemptions into
/// the figure).
#[derive(Clone, Copy, Serialize)]
struct Overlap {
    alone_s: f64,
    compute_s: f64,
    /// 100·(1 − (both − compute) / alone), within 0–100.
    overlap_pct: f64,
}

impl Overlap {
    fn of(alone: &[f64], compute: &[f64], both: f64) -> Self {
        let least = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let (alone_s, compute_s) = (least(alone), least(compute));
        let overlap_pct = if alone_s > 0.0 {
            (100.0 * (1.0 - (both - compute_s) / alone_s)).clamp(0.0, 100.0)
        } else {
            0.0
        };
        Overlap {
            alone_s,
            compute_s,
            overlap_pct,
        }
    }
}

/// The name `--algorithms` takes for the automatic choice.
pub(super) const AUTO: &str = "auto";

/// The work of one (operation, distribution, size): its problem and the algorithms to run.
struct Cell {
    op: Op,
    distribution: Option<Distribution>,
    bytes: u64,
    problem: Problem,
    algorithms: Vec<&'static str>,
}

pub fn run(args: Args) -> CliResult {
    if args.min_bytes > args.max_bytes {
        return Err(MeasureError::Sizes {
            min: args.min_bytes,
            max: args.max_bytes,
        }
        .into());
    }
    for name in &args.algorithms {
        if !circulant::comm::algorithm_names()
            .into_iter()
            .chain([AUTO])
            .any(|n| n == name)
        {
            return Err(MeasureError::UnknownAlgorithm(name.clone()).into());
        }
    }
    let distributions = if args.distributions.is_empty() {
        Distribution::ALL.to_vec()
    } else {
        args.distributions
            .iter()
            .map(|d| d.parse::<Distribution>())
            .collect::<Result<Vec<_>, _>>()?
    };
    let given_model = match (args.alpha, args.beta) {
        (Some(alpha), Some(beta)) => {
            if AlphaBeta::new(alpha, beta).is_none() {
                return Err(MeasureError::BadModel { alpha, beta }.into());
            }
            Some((alpha, beta))
        }
        _ => None,
    };

    let mut comm = Communicator::init()?;
    // The `overhead_s` column (read after every timed call).
    comm.measure_overhead(args.overhead);
    let (me, p) = (comm.rank(), comm.size());
    if args.root >= p {
        return Err(MeasureError::Root { root: args.root, p }.into());
    }
    require_one_clock(&mut comm)?;
    let mut window = Window::new();
    match given_model {
        // Given α and β: o stays the configured one.
        Some((alpha, beta)) => comm.set_model(CostModel {
            alpha,
            beta,
            o: comm.model().o,
        }),
        None => {
            let levels = measure_levels(&mut comm, &mut window)?;
            comm.set_levels(levels);
        }
    }
    // Bounds and the report use the model across nodes (the only one on one node).
    let model = comm.model();

    let cells = plan_cells(&args, &distributions, &comm)?;
    let total: u64 = cells.iter().map(|c| c.algorithms.len() as u64).sum();
    let progress = Progress::new(me == 0 && !args.no_progress, total);

    let form = Form::of(&args);
    let mut send = comm.alloc(1)?;
    let mut recv = comm.alloc(1)?;
    let mut results = Vec::new();
    for cell in &cells {
        let counts = match &cell.problem {
            Problem::Allgatherv { counts } => counts.clone(),
            // The calls take a reduce-scatter's counts in elements.
            Problem::ReduceScatter { counts, .. } => counts.iter().map(|c| c / 4).collect(),
            _ => Vec::new(),
        };
        let data = CaseData::new(cell.problem.clone());
        let mine = data.send(me);
        fit(&comm, &mut send, mine.len())?;
        fit(&comm, &mut recv, data.recv_len(me))?;
        send.copy_from_slice(&mine);
        drop(mine);
        for &name in &cell.algorithms {
            progress.start(cell, name);
            data.fill_recv(me, &mut recv);
            let repeated = Repeated {
                op: cell.op,
                counts: &counts,
                root: args.root,
                name,
                warmup: args.warmup,
                reps: args.reps,
            };
            let buffers = (&mut send, &mut recv);
            let timed = repeated.measure(&mut comm, &mut window, buffers, &data, form)?;
            let Timed {
                wrong,
                taken,
                mut times,
                mut overheads,
                overlap,
            } = timed;
            let mut plan_times = Vec::with_capacity(args.reps as usize);
            for _ in 0..args.reps {
                plan_times.push(plan_time(&comm, &cell.problem, taken, me)?);
            }
            let plan_s = slowest(&mut comm, median(&mut plan_times))?;
            let overhead_s = match args.overhead {
                true => Some(slowest(&mut comm, median(&mut overheads))?),
                false => None,
            };
            let wrong = sum(&mut comm, wrong)?;
            times.sort_by(f64::total_cmp);
            let both = times.first().copied().unwrap_or(0.0);
            let overlap = overlap.map(|o| Overlap::of(&o.alone, &o.compute, both));
            results.push(Measured {
                record: Record {
                    library: "circulant".into(),
                    op: cell.op.name().into(),
                    algorithm: if name == AUTO {
                        format!("{AUTO}:{taken}")
                    } else {
                        name.into()
                    },
                    distribution: cell.distribution.map_or("-", |d| d.name()).into(),
                    p: p as u64,
                    bytes: cell.bytes,
                    total_bytes: cell.problem.total_bytes() as u64,
                    reps: u64::from(args.reps),
                    min_s: times.first().copied().unwrap_or(0.0),
                    median_s: median(&mut times),
                    overhead_s,
                    origin: Default::default(),
                },
                plan_s,
                wrong,
                overlap,
            });
            progress.done();
        }
    }
    progress.finish();
    let traffic = job_traffic(&mut comm)?;

    let wrong: u64 = results.iter().map(|r| r.wrong).sum();
    if me == 0 {
        let ab = AlphaBeta::new(model.alpha, model.beta);
        if let Some(path) = &args.csv {
            let text = render_csv(&comm, &model, form, window.late, &results, &traffic);
            std::fs::write(path, text).map_err(|source| MeasureError::Write {
                path: path.clone(),
                source,
            })?;
        }
        let text = if args.json {
            let doc = serde_json::json!({
                "provider": comm.provider(),
                "launcher": comm.launcher(),
                "p": p,
                "alpha_s": model.alpha,
                "beta_s_per_byte": model.beta,
                "o_s": model.o,
                "late_repetitions": window.late,
                "forms": form.name(),
                "node_provider": comm.node_provider(),
                "traffic": {
                    "network": {"writes": traffic.network.writes, "bytes": traffic.network.bytes},
                    "node": {"writes": traffic.node.writes, "bytes": traffic.node.bytes},
                    "memory": {"slots": traffic.memory.writes, "bytes": traffic.memory.bytes},
                },
                "rows": results,
            });
            format!("{doc}\n")
        } else {
            render_table(&comm, &model, ab, form, window.late, &results)
                + &traffic_line(&comm, &traffic, "")
        };
        let mut stdout = std::io::stdout().lock();
        match stdout.write_all(text.as_bytes()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
            _ => {}
        }
        for r in results.iter().filter(|r| r.wrong > 0) {
            eprintln!(
                "circulant bench: {} {} {} bytes with {}: {} wrong bytes",
                r.record.op, r.record.distribution, r.record.bytes, r.record.algorithm, r.wrong
            );
        }
    }
    Ok(if wrong == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Sizes from `min` to `max` multiplying alternately by 2 and 5 (seed 000 §3): 1, 2, 10, 20,
/// 100, ... A size of 0 is measured once and ends the list.
pub fn sizes(min: u64, max: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut bytes = min;
    for step in 0u32.. {
        if bytes > max {
            break;
        }
        out.push(bytes);
        let factor = if step % 2 == 0 { 2 } else { 5 };
        match bytes.checked_mul(factor) {
            Some(next) if bytes > 0 => bytes = next,
            _ => break,
        }
    }
    out
}

/// Every (operation, distribution, size) with the algorithms that apply to it.
fn plan_cells(
    args: &Args,
    distributions: &[Distribution],
    comm: &Communicator,
) -> Result<Vec<Cell>, Box<dyn std::error::Error>> {
    let p = comm.size();
    let mut cells = Vec::new();
    for &op in &args.op {
        let dists: Vec<Option<Distribution>> = if op.distributed() {
            distributions.iter().copied().map(Some).collect()
        } else {
            vec![None]
        };
        for distribution in dists {
            for bytes in sizes(args.min_bytes, args.max_bytes) {
                // int32 elements, as the peer benchmark reduces them.
                if op.reduces() && bytes < 4 {
                    continue;
                }
                let m = usize::try_from(bytes).map_err(|_| MeasureError::TooLarge { bytes })?;
                let problem = match (op, distribution) {
                    (Op::Bcast, _) => Problem::Broadcast {
                        p,
                        root: args.root,
                        bytes: m,
                    },
                    (Op::Allgather, _) => Problem::Allgather { p, block: m },
                    (Op::Allgatherv, Some(d)) => Problem::Allgatherv {
                        counts: d.counts(p, m),
                    },
                    (Op::Allgatherv | Op::ReduceScatter, None) => continue,
                    (Op::Allreduce, _) => Problem::Allreduce {
                        p,
                        reduction: int32_sum(),
                        bytes: m / 4 * 4,
                    },
                    (Op::Reduce, _) => Problem::Reduce {
                        p,
                        root: args.root,
                        reduction: int32_sum(),
                        bytes: m / 4 * 4,
                    },
                    // The whole vector every rank contributes: size × its block.
                    (Op::ReduceScatterBlock, _) => Problem::ReduceScatterBlock {
                        p,
                        reduction: int32_sum(),
                        block: m / 4 / p * 4,
                    },
                    // Each rank's count of the distribution, in whole int32 elements.
                    (Op::ReduceScatter, Some(d)) => Problem::ReduceScatter {
                        reduction: int32_sum(),
                        counts: d.counts(p, m).into_iter().map(|c| c / 4 * 4).collect(),
                    },
                };
                // The communicator's list: on several nodes of several ranks, the node-aware
                // algorithms too.
                let mut algorithms: Vec<&'static str> = comm
                    .algorithms(&problem)?
                    .into_iter()
                    .map(|(name, _)| name)
                    .filter(|n| {
                        args.algorithms.is_empty() || args.algorithms.iter().any(|a| a == n)
                    })
                    .collect();
                algorithms.sort_by_key(|n| registry::names().position(|x| x == *n));
                if args.algorithms.iter().any(|a| a == AUTO) {
                    algorithms.push(AUTO);
                }
                if !algorithms.is_empty() {
                    cells.push(Cell {
                        op,
                        distribution,
                        bytes,
                        problem,
                        algorithms,
                    });
                }
            }
        }
    }
    Ok(cells)
}

/// The reduction the reductions measure: int32 sum, as the peer benchmark's.
pub(super) fn int32_sum() -> Reduction {
    Reduction {
        dtype: Dtype::I32,
        op: ReduceOp::Sum,
    }
}

/// Makes `buf` present `len` bytes, registering a larger buffer when it is too small.
fn fit(comm: &Communicator, buf: &mut Buffer, len: usize) -> Result<(), CommError> {
    if buf.set_len(len).is_err() {
        // Release the old registration before making the larger one.
        *buf = comm.alloc(1)?;
        *buf = comm.alloc(len)?;
    }
    Ok(())
}

/// This rank's planning time for one call: the algorithm's choice and construction and all of
/// this rank's rounds.
fn plan_time(
    comm: &Communicator,
    problem: &Problem,
    name: &str,
    me: usize,
) -> Result<f64, CommError> {
    if circulant::comm::SEGMENT_ALGORITHMS.contains(&name)
        || circulant::comm::NODE_PHASE_ALGORITHMS.contains(&name)
    {
        // Nothing to plan on the shared segment (the node phases' plans are their own
        // communicators').
        return Ok(0.0);
    }
    let start = now_ns();
    let algorithm = comm.choose(problem, Choice::Named(name))?;
    let rounds = algorithm.rank_plan(me)?.rounds.count();
    std::hint::black_box(rounds);
    Ok(now_ns().saturating_sub(start) as f64 * 1e-9)
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn slowest(comm: &mut Communicator, mine: f64) -> Result<f64, CommError> {
    let mut all = [0.0f64];
    comm.allreduce(&[mine], &mut all, ReduceOp::Max)?;
    Ok(all[0])
}

/// What the writes of every rank carried so far (everything the run did: probes, warm-ups,
/// repetitions and checks), summed over the ranks.
fn job_traffic(comm: &mut Communicator) -> Result<Traffic, CommError> {
    let t = comm.traffic();
    let mine = [
        t.network.writes,
        t.network.bytes,
        t.node.writes,
        t.node.bytes,
        t.memory.writes,
        t.memory.bytes,
    ];
    let mut all = [0u64; 6];
    comm.allreduce(&mine, &mut all, ReduceOp::Sum)?;
    let carried = |i: usize| Carried {
        writes: all[i],
        bytes: all[i + 1],
    };
    Ok(Traffic {
        network: carried(0),
        node: carried(2),
        memory: carried(4),
    })
}

/// Where the bytes went, summed over the ranks: through the network provider, the node's
/// (on nodes of several ranks of a job on several nodes), and receive slots stored into
/// shared memory.
fn traffic_line(comm: &Communicator, t: &Traffic, prefix: &str) -> String {
    let mut parts = vec![format!(
        "{} {} writes, {} of data",
        comm.provider(),
        t.network.writes,
        format_bytes(t.network.bytes as f64)
    )];
    if let Some(node) = comm.node_provider() {
        parts.push(format!(
            "{node} (ranks of one node) {} writes, {} of data",
            t.node.writes,
            format_bytes(t.node.bytes as f64)
        ));
    }
    if t.memory.writes > 0 {
        parts.push(format!(
            "stored into shared memory (eager slots, segment parts) {}, {} of data",
            t.memory.writes,
            format_bytes(t.memory.bytes as f64)
        ));
    }
    format!("{prefix}traffic of all ranks: {}\n", parts.join("; "))
}

fn sum(comm: &mut Communicator, mine: u64) -> Result<u64, CommError> {
    let mut all = [0u64];
    comm.allreduce(&[mine], &mut all, ReduceOp::Sum)?;
    Ok(all[0])
}

fn render_csv(
    comm: &Communicator,
    model: &CostModel,
    form: Form,
    late: u64,
    rows: &[Measured],
    traffic: &Traffic,
) -> String {
    let mut out = format!(
        "# circulant bench: p = {}, provider {}, launcher {}, method: common start, slowest rank, {} calls; late repetitions {late}\n",
        comm.size(),
        comm.provider(),
        comm.launcher(),
        form.name()
    );
    if let Some(ab) = AlphaBeta::new(model.alpha, model.beta) {
        out.push_str(&ab.comment());
        out.push('\n');
    }
    // The per-write overhead of the model, for the record (the report reads α and β only).
    out.push_str(&format!("# o_s={:e}\n", model.o));
    out.push_str(&levels_line(comm, "# "));
    out.push_str(&traffic_line(comm, traffic, "# "));
    out.push_str(&header());
    // The overhead where it was measured (`--overhead`: on every row).
    let measured = rows.iter().any(|r| r.record.overhead_s.is_some());
    out.push_str(",plan_s");
    if measured {
        out.push_str(&format!(",{OVERHEAD_COLUMN}"));
    }
    let overlapped = rows.iter().any(|r| r.overlap.is_some());
    if overlapped {
        out.push_str(",alone_s,compute_s,overlap_pct");
    }
    out.push('\n');
    for r in rows {
        out.push_str(&format!("{},{:.9}", r.record.csv_line(), r.plan_s));
        if measured {
            out.push_str(&format!(",{:.9}", r.record.overhead_s.unwrap_or(0.0)));
        }
        if let (true, Some(o)) = (overlapped, r.overlap) {
            out.push_str(&format!(
                ",{:.9},{:.9},{:.1}",
                o.alone_s, o.compute_s, o.overlap_pct
            ));
        }
        out.push('\n');
    }
    out
}

/// On nodes of several ranks: the layout and the model inside a node (the α, β and o above are
/// across nodes). Empty otherwise.
fn levels_line(comm: &Communicator, prefix: &str) -> String {
    let (p, nodes) = (comm.size(), comm.nodes());
    if nodes <= 1 || nodes == p {
        return String::new();
    }
    let inside = comm.levels().inside;
    format!(
        "{prefix}nodes {nodes} (ranks per node {:?}); the model above is across nodes; inside a node α = {}, β = {:.4} ns/B, o = {}\n",
        (0..nodes)
            .map(|v| comm.ranks_on(v).map_or(0, <[usize]>::len))
            .collect::<Vec<_>>(),
        format_seconds(inside.alpha),
        inside.beta * 1e9,
        format_seconds(inside.o)
    )
}

fn render_table(
    comm: &Communicator,
    model: &CostModel,
    ab: Option<AlphaBeta>,
    form: Form,
    late: u64,
    rows: &[Measured],
) -> String {
    let mut out = format!(
        "circulant bench: p = {} over {} ({}); α = {}, β = {:.4} ns/B (1/β = {:.3} GB/s), o = {}\n",
        comm.size(),
        comm.provider(),
        comm.launcher(),
        format_seconds(model.alpha),
        model.beta * 1e9,
        1e-9 / model.beta.max(f64::MIN_POSITIVE),
        format_seconds(model.o)
    );
    out.push_str(&levels_line(comm, ""));
    let overlapped = rows.iter().any(|r| r.overlap.is_some());
    out.push_str(&format!(
        "{:<11} {:<10} {:>11} {:>11}  {:<28} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}{}\n",
        "op",
        "dist",
        "bytes",
        "total",
        "algorithm",
        "min",
        "median",
        "plan",
        "overhead",
        "bound",
        "min/bnd",
        if overlapped {
            format!(" {:>10} {:>10} {:>8}", "alone", "compute", "overlap")
        } else {
            String::new()
        }
    ));
    for r in rows {
        let x = &r.record;
        let bound =
            ab.and_then(|ab| row_bound(&x.op, &x.distribution, x.p, x.bytes, x.total_bytes, ab));
        let over = bound
            .filter(|b| *b > 0.0)
            .map_or_else(|| "-".to_string(), |b| format!("{:.2}", x.min_s / b));
        let overlap = r.overlap.map_or_else(String::new, |o| {
            format!(
                " {:>10} {:>10} {:>7.1}%",
                format_seconds(o.alone_s),
                format_seconds(o.compute_s),
                o.overlap_pct
            )
        });
        out.push_str(&format!(
            "{:<11} {:<10} {:>11} {:>11}  {:<28} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}{}{}\n",
            x.op,
            x.distribution,
            x.bytes,
            x.total_bytes,
            x.algorithm,
            format_seconds(x.min_s),
            format_seconds(x.median_s),
            format_seconds(r.plan_s),
            r.record
                .overhead_s
                .map_or_else(|| "-".to_string(), format_seconds),
            bound.map_or_else(|| "-".to_string(), format_seconds),
            over,
            overlap,
            if r.wrong > 0 { "  WRONG DATA" } else { "" }
        ));
    }
    out.push_str(&format!(
        "times: {} repetitions of the {} calls, each the slowest rank's time from a common start; min and median over them; plan: {}{}{}{}\n",
        rows.first().map_or(0, |r| r.record.reps),
        form.name(),
        form.plan(),
        if rows.iter().any(|r| r.record.overhead_s.is_some()) {
            "; overhead: entry to first post, median"
        } else {
            ""
        },
        if overlapped {
            "; alone: the call without computation, compute: the computation without a call (minima); overlap: 100·(1 − (min − compute) / alone)"
        } else {
            ""
        },
        if late > 0 {
            format!("; {late} repetitions late")
        } else {
            String::new()
        }
    ));
    out
}

/// The progress bar (a terminal) or progress lines (a pipe, as under a launcher), on stderr.
struct Progress {
    bar: Option<ProgressBar>,
    lines: bool,
    total: u64,
    done: std::cell::Cell<u64>,
}

impl Progress {
    fn new(show: bool, total: u64) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = (show && terminal).then(|| {
            let bar = ProgressBar::new(total);
            if let Ok(style) =
                ProgressStyle::with_template("{bar:40} {pos}/{len} {elapsed_precise} {msg}")
            {
                bar.set_style(style);
            }
            bar
        });
        Progress {
            bar,
            lines: show && !terminal,
            total,
            done: std::cell::Cell::new(0),
        }
    }

    fn start(&self, cell: &Cell, algorithm: &str) {
        let what = format!(
            "{} {}{} B {algorithm}",
            cell.op.name(),
            cell.distribution.map_or(String::new(), |d| format!("{d} ")),
            cell.bytes
        );
        if let Some(bar) = &self.bar {
            bar.set_message(what);
        } else if self.lines {
            eprintln!("bench [{}/{}] {what}", self.done.get() + 1, self.total);
        }
    }

    fn done(&self) {
        self.done.set(self.done.get() + 1);
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
