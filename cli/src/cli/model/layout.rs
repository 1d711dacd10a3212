//! `circulant model` on a layout of ranks on nodes: every applicable algorithm priced in the
//! two-level α-β-o model (`sim::price::price_on`: messages inside a node at the inside model,
//! between nodes at the across model, node links shared by their ranks), the bytes across the
//! busiest node link, and the two-level lower bound (`plan::bounds::two_level`).
//!
//! Defaults, for a node of a cluster on a 100 Gbit/s InfiniBand-like network:
//! - across nodes α = 2 µs, β = 0.08 ns/B, o = 0.3 µs: β is 8 bits per byte at 100 Gbit/s
//!   (12.5 GB/s); α and o are the RDMA estimates of docs/plan-model.md (a one-way MPI message
//!   over InfiniBand takes 1–2 µs);
//! - inside a node (shared memory) α = 0.5 µs, β = 0.05 ns/B (20 GB/s, a copy through shared
//!   memory), o = 0.1 µs (the `shm` estimate of docs/plan-model.md): this machine's one-way
//!   8-byte shm write took 0.26 µs, and a library's call costs more.
//!
//! These are estimates to rank algorithms; `--alpha/--beta/--o` and
//! `--alpha-across/--beta-across/--o-across` take measured ones.

use std::process::ExitCode;

use clap::ValueEnum;

use super::{checked_model, problem, walkable, Args, ProblemArgs};
use crate::cli::{parse_ranks, ratio_to_bound, CliResult};
use circulant::limits::MAX_RANKS;
use circulant::plan::bounds::two_level;
use circulant::plan::{registry, Layout, LevelCosts};
use circulant::sim::estimate::estimate_on;
use circulant::sim::price::{price_on, walk_within};
use circulant_cli::report::compare::format_seconds;

/// Rounds and pieces of all ranks' plans that a walk on a layout may read when the plans are
/// beyond the flat answer's limits (estimated from two nodes' plans, `walk_within`; p times the
/// predicted rounds must not exceed it either). Measured
/// in a release build on a 2-core machine at 1024 nodes × 64 ranks: hier-circulant-allgatherv
/// of 1 KiB a rank reads about 3.4 × 10^7 in 42 s and 0.8 GB, lane-circulant-bcast of 1 MB
/// 2.4 × 10^7; a walk keeps 24 bytes a message. Beyond, a rank's plan alone is too
/// large (a flat or multi-lane allgatherv of p ranks sends about p pieces a rank) or there are
/// too many rounds (rings, p − 1 rounds a rank).
pub const MAX_LAYOUT_WORK: u64 = 1 << 26;

/// Beyond this many ranks plans on a layout are not walked (1024 nodes × 64 ranks): building
/// the node-aware plans of more ranks and walking them takes minutes.
pub const MAX_LAYOUT_P: usize = 1 << 16;

/// Most rounds and pieces of two nodes' plans read to estimate an algorithm whose plans are
/// not walked (`estimate_on`); beyond, the closed form across nodes alone.
const ESTIMATE_WORK: u64 = 1 << 22;

/// Inside a node: α, β, o (module documentation).
const INSIDE: (f64, f64, f64) = (0.5e-6, 0.05e-9, 0.1e-6);
/// Across nodes: α, β, o (module documentation).
const ACROSS: (f64, f64, f64) = (2e-6, 0.08e-9, 0.3e-6);

/// How `--nodes` × `--ranks-per-node` ranks are placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Placement {
    /// Ranks 0..K on node 0, K..2K on node 1, and so on.
    Blocks,
    /// Rank r on node r mod N.
    RoundRobin,
}

#[derive(clap::Args)]
pub struct LayoutArgs {
    /// Number of nodes; with --ranks-per-node, prices the algorithms on this layout.
    #[arg(long, requires = "ranks_per_node", conflicts_with = "node_map", value_parser = parse_ranks)]
    nodes: Option<usize>,
    /// Ranks on every node (with --nodes).
    #[arg(long, requires = "nodes", value_parser = parse_ranks)]
    ranks_per_node: Option<usize>,
    /// Placement of --nodes × --ranks-per-node ranks [default: blocks].
    #[arg(long, value_enum, requires = "nodes")]
    placement: Option<Placement>,
    /// The node of each rank, e.g. 0,0,1,1,2 (any labels; nodes are numbered by their first
    /// rank).
    #[arg(long, value_delimiter = ',')]
    node_map: Option<Vec<usize>>,
    /// Latency α across nodes in seconds [default: 2e-6].
    #[arg(long)]
    alpha_across: Option<f64>,
    /// Time per byte β across nodes in seconds [default: 8e-11, 100 Gbit/s].
    #[arg(long)]
    beta_across: Option<f64>,
    /// Overhead o of every further write of a message across nodes in seconds [default: 3e-7].
    #[arg(long)]
    o_across: Option<f64>,
}

impl LayoutArgs {
    /// The layout the arguments give, if any, checked against `-p` when given.
    pub fn layout(&self, p: Option<usize>) -> Result<Option<Layout>, String> {
        let layout = match (&self.node_map, self.nodes, self.ranks_per_node) {
            (Some(map), _, _) => {
                if map.len() > MAX_RANKS {
                    return Err(format!(
                        "--node-map names {} ranks, more than {MAX_RANKS}",
                        map.len()
                    ));
                }
                Layout::new(map).map_err(|e| format!("--node-map: {e}"))?
            }
            (None, Some(nodes), Some(per)) => {
                if !nodes.checked_mul(per).is_some_and(|p| p <= MAX_RANKS) {
                    return Err(format!(
                        "{nodes} nodes × {per} ranks is more than {MAX_RANKS} ranks"
                    ));
                }
                match self.placement.unwrap_or(Placement::Blocks) {
                    Placement::Blocks => Layout::blocks(nodes, per),
                    Placement::RoundRobin => Layout::round_robin(nodes, per),
                }
                .map_err(|e| e.to_string())?
            }
            _ => {
                if self.alpha_across.is_some()
                    || self.beta_across.is_some()
                    || self.o_across.is_some()
                {
                    return Err(
                        "--alpha-across, --beta-across and --o-across need a layout \
                         (--nodes and --ranks-per-node, or --node-map)"
                            .into(),
                    );
                }
                return Ok(None);
            }
        };
        if let Some(p) = p.filter(|&p| p != layout.p()) {
            return Err(format!("-p {p} but the layout has {} ranks", layout.p()));
        }
        Ok(Some(layout))
    }

    /// How the ranks were placed, for the output.
    fn placement(&self) -> &'static str {
        match (&self.node_map, self.placement) {
            (Some(_), _) => "node-map",
            (None, Some(Placement::RoundRobin)) => "round-robin",
            _ => "blocks",
        }
    }
}

/// The models of both levels: `--alpha`, `--beta`, `--o` inside a node and their `-across`
/// forms between nodes, or their defaults (module documentation).
pub(crate) fn level_costs(args: &ProblemArgs) -> Result<LevelCosts, String> {
    let la = &args.layout;
    let inside = checked_model(
        args.alpha.unwrap_or(INSIDE.0),
        args.beta.unwrap_or(INSIDE.1),
        args.o.unwrap_or(INSIDE.2),
        "",
    )?;
    let across = checked_model(
        la.alpha_across.unwrap_or(ACROSS.0),
        la.beta_across.unwrap_or(ACROSS.1),
        la.o_across.unwrap_or(ACROSS.2),
        "across nodes: ",
    )?;
    Ok(LevelCosts { inside, across })
}

/// One algorithm on the layout.
struct Row {
    name: &'static str,
    rounds: u64,
    time: f64,
    /// (busiest node link's bytes, bytes inside nodes) where the plans were walked; `None`:
    /// `time` is estimated (`estimate_on`).
    walked: Option<(u64, u64)>,
}

/// The answer on `layout`: priced by dataflow where the plans are small enough to walk (the
/// limits of the flat answer's write counts, or at most [`MAX_LAYOUT_WORK`] rounds and pieces
/// in all), else estimated from the closed form across nodes and two nodes' plans.
pub fn run(args: &Args, layout: &Layout) -> CliResult {
    let la = &args.problem.layout;
    let costs = level_costs(&args.problem)?;
    let LevelCosts { inside, across } = costs;
    let p = layout.p();
    let problem = problem(&args.problem, p)?;
    // The flat algorithms' block counts are chosen for the level that bounds the time: across,
    // on several nodes; the node-aware ones are planned for the layout.
    let algs = registry::applicable_on(&problem, layout, &costs)?;
    let bound = two_level(&problem, layout, &costs).ok_or("the layout has another size")?;
    let mut rows = Vec::with_capacity(algs.len());
    for a in &algs {
        let pr = a.predict(&across);
        // Some plans pass over rounds in which a rank does nothing (a scatter-allgather of 8
        // bytes); the predicted rounds of every rank bound that work too.
        let walk = walkable(p, pr.rounds)
            || (p <= MAX_LAYOUT_P
                && (p as u64).saturating_mul(pr.rounds) <= MAX_LAYOUT_WORK
                && walk_within(a.as_ref(), layout, MAX_LAYOUT_WORK)?);
        rows.push(if walk {
            let priced = price_on(a.as_ref(), layout, &costs)?;
            Row {
                name: a.name(),
                rounds: u64::from(priced.rounds),
                time: priced.time,
                walked: Some((priced.busiest_link_bytes(), priced.inside_bytes())),
            }
        } else {
            Row {
                name: a.name(),
                rounds: pr.rounds,
                time: estimate_on(a.as_ref(), layout, &costs, ESTIMATE_WORK)?.time,
                walked: None,
            }
        });
    }
    rows.sort_by(|a, b| a.time.total_cmp(&b.time));
    let op = args.problem.op_name();
    if args.json {
        let algorithms: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "name": r.name,
                    "rounds": r.rounds,
                    "time_s": r.time,
                    "priced_on_layout": r.walked.is_some(),
                    "busiest_link_bytes": r.walked.map(|w| w.0),
                    "inside_bytes": r.walked.map(|w| w.1),
                })
            })
            .collect();
        let out = serde_json::json!({
            "op": op,
            "p": p,
            "bytes": problem.total_bytes(),
            "nodes": layout.nodes(),
            "max_ranks_per_node": layout.max_per_node(),
            "placement": la.placement(),
            "alpha_s": inside.alpha,
            "beta_s_per_byte": inside.beta,
            "o_s": inside.o,
            "alpha_across_s": across.alpha,
            "beta_across_s_per_byte": across.beta,
            "o_across_s": across.o,
            "lower_bound_s": bound,
            "algorithms": algorithms,
        });
        println!("{out}");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{op}: p = {p} on {} nodes (at most {} ranks a node, {}), {} bytes; inside α = {} s, \
         β = {} s/B, o = {} s; across α = {} s, β = {} s/B, o = {} s; two-level lower bound {}",
        layout.nodes(),
        layout.max_per_node(),
        la.placement(),
        problem.total_bytes(),
        inside.alpha,
        inside.beta,
        inside.o,
        across.alpha,
        across.beta,
        across.o,
        format_seconds(bound)
    );
    println!(
        "{:<32} {:>8} {:>14} {:>14} {:>14} {:>8}",
        "algorithm", "rounds", "busiest link", "inside nodes", "time", "/bound"
    );
    let mut closed = false;
    for r in &rows {
        let (link, inside_bytes, mark) = match r.walked {
            Some((l, i)) => (l.to_string(), i.to_string(), ""),
            None => {
                closed = true;
                ("-".to_string(), "-".to_string(), " *")
            }
        };
        println!(
            "{:<32} {:>8} {:>14} {:>14} {:>14} {:>8}",
            r.name,
            r.rounds,
            link,
            inside_bytes,
            format!("{}{mark}", format_seconds(r.time)),
            ratio_to_bound(r.time, bound, 3)
        );
    }
    if closed {
        println!(
            "* estimated (the plans are too large to walk: more than {MAX_LAYOUT_P} ranks or \
             {MAX_LAYOUT_WORK} rounds and pieces): the closed form with the across model, or \
             the busiest node link or rank of the first and last nodes' plans where longer"
        );
    }
    Ok(ExitCode::SUCCESS)
}
