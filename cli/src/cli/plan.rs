//! `circulant plan`: one algorithm's plan for a problem and a layout, every rank's rounds,
//! written as text for a replay outside this program (benches/simgrid/replay.c runs it with
//! MPI point-to-point calls under SimGrid's smpirun).
//!
//! The problem, the layout and the model's parameters are those of `circulant model` (the
//! model chooses block counts); the algorithm is one that `circulant model` lists for them.
//! Every rank's `Algorithm::rank_plan` is read twice: once to learn what each rank receives
//! (from whom, in which round, how many bytes), once to write each rank's section. Receives are
//! checked against the receiver's expectations (the writes each sender's transfers carry in
//! that round), so a file is only written for plans whose two sides agree.
//!
//! The format, version 1 (lines; fields separated by one space):
//!
//! ```text
//! circulant-plan 1 p <P>
//! algorithm <name> collective <op> bytes <total> root <root or ->
//! nodes <N> <node of rank 0> ... <node of rank P-1>
//! rank <r> rounds <R> sends <S> recvs <M> buffers <send> <recv> <scratch> setup <copy> <combine>
//! <index> [s <to> <bytes> <pieces> <after>]... [r <from> <bytes>]... [l <copy> <combine>]
//! ... (R round lines, indices increasing; then the next rank)
//! <offset of rank 0's line, 20 digits>
//! ... (P lines)
//! <offset of the first of these P lines, 20 digits>
//! ```
//!
//! - `s`: one transfer (one message): `pieces` one-sided writes of `bytes` bytes in all to rank
//!   `to`, posted once this rank's rounds up to index `after` are complete (`-`: from the
//!   start), the latest `after` of its pieces.
//! - `r`: one message from `from` in this round, in the order the sender sends them; the round
//!   is complete when all its messages have arrived and the earlier rounds are complete.
//! - `l`: the bytes the round's local steps copy and combine (reduce) once it is complete;
//!   `setup` the same before the first round.
//! - The offsets at the end let a rank seek to its own section: the last line is where the
//!   table of the ranks' offsets starts, each entry 21 bytes with its newline.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use super::model::{layout::level_costs, problem, ProblemArgs};
use super::CliResult;
use circulant::plan::{registry, Algorithm, Layout, Local, PlanError};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    problem: ProblemArgs,
    /// The algorithm, as `circulant model` names it; without it, the names that apply.
    #[arg(long)]
    algorithm: Option<String>,
    /// Where the plan goes.
    #[arg(long, required_unless_present = "list_only")]
    out: Option<PathBuf>,
    /// Only list the algorithms that apply, one a line.
    #[arg(long = "list")]
    list_only: bool,
}

/// A message as its receiver sees it.
#[derive(Clone, Copy)]
struct Incoming {
    round: u32,
    from: u32,
    bytes: u64,
    pieces: u32,
}

/// Counts the bytes it passes on, so that each rank's offset is known.
struct Counted<W> {
    inner: W,
    at: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.at += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Totals for the summary line.
#[derive(Default)]
struct Totals {
    rounds: u64,
    messages: u64,
    bytes: u64,
}

pub fn run(args: Args) -> CliResult {
    let pa = &args.problem;
    let (algorithms, layout) = match pa.layout()? {
        Some(layout) => {
            let costs = level_costs(pa)?;
            let problem = problem(pa, layout.p())?;
            (registry::applicable_on(&problem, &layout, &costs)?, layout)
        }
        None => {
            let p = pa.flat_p()?;
            let problem = problem(pa, p)?;
            let model = pa.flat_model()?;
            (
                registry::applicable(&problem, &model)?,
                Layout::one_node(p)?,
            )
        }
    };
    let Some(name) = args.algorithm.as_deref().filter(|_| !args.list_only) else {
        for a in &algorithms {
            println!("{}", a.name());
        }
        return Ok(ExitCode::SUCCESS);
    };
    let Some(alg) = algorithms.iter().find(|a| a.name() == name) else {
        let names: Vec<&str> = algorithms.iter().map(|a| a.name()).collect();
        return Err(format!(
            "{name} does not apply to this problem; these do: {}",
            names.join(", ")
        )
        .into());
    };
    let out = args.out.as_ref().ok_or("--out is required")?;
    let file = File::create(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut w = Counted {
        inner: BufWriter::new(file),
        at: 0,
    };
    let totals = write_plan(&mut w, alg.as_ref(), &layout, &pa.op_name(), pa.root_of())
        .map_err(|e| format!("{}: {e}", out.display()))?;
    w.flush()?;
    println!(
        "{name}: p = {}, {} rounds, {} messages, {} bytes sent in all; {} bytes written to {}",
        layout.p(),
        totals.rounds,
        totals.messages,
        totals.bytes,
        w.at,
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Errors of writing a plan: the plan's own, or the file's.
#[derive(Debug, thiserror::Error)]
enum WriteError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("the plans disagree: {0}")]
    Disagree(String),
}

/// What every rank receives, from the senders' plans, each receiver's list in round order.
fn incoming(alg: &dyn Algorithm, p: usize) -> Result<Vec<Vec<Incoming>>, WriteError> {
    let mut inbox: Vec<Vec<Incoming>> = vec![Vec::new(); p];
    for rank in 0..p {
        let from = u32::try_from(rank).map_err(|_| PlanError::Overflow)?;
        let mut last: Option<u32> = None;
        for round in alg.rank_plan(rank)?.rounds {
            if last.is_some_and(|l| round.index <= l) {
                return Err(WriteError::Disagree(format!(
                    "rank {rank}: round {} comes after a later one",
                    round.index
                )));
            }
            last = Some(round.index);
            for t in &round.sends {
                let to = inbox
                    .get_mut(t.to)
                    .ok_or(PlanError::RankOutOfRange { rank: t.to, p })?;
                to.push(Incoming {
                    round: round.index,
                    from,
                    bytes: t.bytes() as u64,
                    pieces: u32::try_from(t.pieces.len()).map_err(|_| PlanError::Overflow)?,
                });
            }
        }
    }
    for list in &mut inbox {
        // Stable: a sender's messages of one round stay in its order.
        list.sort_by_key(|m| m.round);
    }
    Ok(inbox)
}

/// The bytes `steps` copy and combine.
fn local_bytes(steps: &[Local]) -> (u64, u64) {
    steps.iter().fold((0, 0), |(c, x), s| match *s {
        Local::Copy { len, .. } => (c + len as u64, x),
        Local::Combine { len, .. } => (c, x + len as u64),
    })
}

fn write_plan<W: Write>(
    w: &mut Counted<W>,
    alg: &dyn Algorithm,
    layout: &Layout,
    op: &str,
    root: Option<usize>,
) -> Result<Totals, WriteError> {
    let problem = alg.problem();
    let p = problem.p();
    let inbox = incoming(alg, p)?;
    writeln!(w, "circulant-plan 1 p {p}")?;
    let root = root.map_or("-".to_string(), |r| r.to_string());
    writeln!(
        w,
        "algorithm {} collective {op} bytes {} root {root}",
        alg.name(),
        problem.total_bytes()
    )?;
    write!(w, "nodes {}", layout.nodes())?;
    for n in layout.node_of_each() {
        write!(w, " {n}")?;
    }
    writeln!(w)?;
    let mut offsets = Vec::with_capacity(p);
    let mut totals = Totals::default();
    let mut line = String::new();
    for (rank, recvs) in inbox.iter().enumerate() {
        offsets.push(w.at);
        let plan = alg.rank_plan(rank)?;
        let rounds: Vec<_> = plan.rounds.collect();
        let sends: usize = rounds.iter().map(|r| r.sends.len()).sum();
        let (copy, combine) = local_bytes(&plan.setup);
        let b = plan.buffers;
        writeln!(
            w,
            "rank {rank} rounds {} sends {sends} recvs {} buffers {} {} {} setup {copy} {combine}",
            rounds.len(),
            recvs.len(),
            b.send,
            b.recv,
            b.scratch
        )?;
        let mut next = 0;
        for round in &rounds {
            line.clear();
            line.push_str(&round.index.to_string());
            for t in &round.sends {
                let after = t.pieces.iter().map(|pc| pc.after).max().flatten();
                let after = after.map_or("-".to_string(), |a| a.to_string());
                line.push_str(&format!(
                    " s {} {} {} {after}",
                    t.to,
                    t.bytes(),
                    t.pieces.len()
                ));
                totals.messages += 1;
                totals.bytes += t.bytes() as u64;
            }
            let first = next;
            while recvs.get(next).is_some_and(|m| m.round == round.index) {
                let m = recvs[next];
                line.push_str(&format!(" r {} {}", m.from, m.bytes));
                next += 1;
            }
            check_expects(rank, round, &recvs[first..next])?;
            let (copy, combine) = local_bytes(&round.local);
            if copy + combine > 0 {
                line.push_str(&format!(" l {copy} {combine}"));
            }
            writeln!(w, "{line}")?;
        }
        if let Some(m) = recvs.get(next) {
            return Err(WriteError::Disagree(format!(
                "rank {} sends rank {rank} a message in round {}, which rank {rank}'s plan \
                 does not expect",
                m.from, m.round
            )));
        }
        totals.rounds = totals.rounds.max(rounds.len() as u64);
    }
    let table = w.at;
    for o in offsets {
        writeln!(w, "{o:020}")?;
    }
    writeln!(w, "{table:020}")?;
    Ok(totals)
}

/// Whether the messages of a round carry the writes its expectations announce, per sender.
fn check_expects(
    rank: usize,
    round: &circulant::plan::Round,
    msgs: &[Incoming],
) -> Result<(), WriteError> {
    fn add(list: &mut Vec<(usize, usize)>, from: usize, writes: usize) {
        match list.iter_mut().find(|(f, _)| *f == from) {
            Some(a) => a.1 += writes,
            None => list.push((from, writes)),
        }
    }
    let mut expected: Vec<(usize, usize)> = Vec::new();
    for e in &round.expects {
        add(&mut expected, e.from, e.writes);
    }
    let mut arriving: Vec<(usize, usize)> = Vec::new();
    for m in msgs {
        add(&mut arriving, m.from as usize, m.pieces as usize);
    }
    expected.sort_unstable();
    arriving.sort_unstable();
    if expected != arriving {
        return Err(WriteError::Disagree(format!(
            "rank {rank}, round {}: expects writes {expected:?} (from, writes), its senders' \
             plans send {arriving:?}",
            round.index
        )));
    }
    Ok(())
}
