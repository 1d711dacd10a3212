//! `circulant schedule`: the per-phase schedules of every rank for root 0.

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

use circulant::schedule::ScheduleTable;

use super::{Algorithm, CliResult};

#[derive(clap::Args)]
pub struct Args {
    /// Number of ranks.
    #[arg(short = 'p', value_name = "P", value_parser = super::parse_ranks)]
    p: usize,
    /// Schedule construction.
    #[arg(long, value_enum, default_value_t = Algorithm::Circulant)]
    algorithm: Algorithm,
    /// One JSON object on one line instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(serde::Serialize)]
struct Output<'a> {
    p: usize,
    q: usize,
    skips: &'a [usize],
    baseblock: Vec<usize>,
    recv: Vec<&'a [i32]>,
    send: Vec<&'a [i32]>,
}

pub fn run(args: Args) -> CliResult {
    let Algorithm::Circulant = args.algorithm;
    let table = ScheduleTable::with_threads(args.p, threads())?;
    let p = table.p();
    let out = Output {
        p,
        q: table.q(),
        skips: table.skips().as_slice(),
        baseblock: table.baseblocks(),
        recv: (0..p).map(|r| table.recv(r)).collect(),
        send: (0..p).map(|r| table.send(r)).collect(),
    };
    match print(&out, args.json) {
        // A reader that stops early (`| head`) is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e.into()),
        Ok(()) => Ok(ExitCode::SUCCESS),
    }
}

fn print(out: &Output, json: bool) -> std::io::Result<()> {
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    if json {
        // Streamed: the text for millions of ranks need not exist as one string.
        serde_json::to_writer(&mut stdout, out)?;
        writeln!(stdout)?;
    } else {
        write!(stdout, "{}", render(out))?;
    }
    stdout.flush()
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The layout of the paper's Table 1: one column per rank, a vertical line before each rank
/// that is a skip, baseblocks, then q rows of the receive and q rows of the send schedule.
fn render(out: &Output) -> String {
    let width = out
        .recv
        .iter()
        .chain(&out.send)
        .flat_map(|row| row.iter())
        .map(|e| e.to_string().len())
        .chain([(out.p - 1).to_string().len(), out.q.to_string().len()])
        .max()
        .unwrap_or(1)
        + 1;
    let is_skip = |r: usize| out.skips[..out.q].contains(&r);
    let line = |label: &str, cells: &mut dyn Iterator<Item = String>| {
        let mut s = format!("{label:<14}");
        for (r, cell) in cells.enumerate() {
            s.push_str(if r == 0 || is_skip(r) { " |" } else { "  " });
            let _ = write!(s, "{cell:>width$}");
        }
        s.push('\n');
        s
    };
    let mut text = format!(
        "p = {}, q = {}, skips = {:?} (vertical lines before the skips)\n",
        out.p, out.q, out.skips
    );
    text += &line("Procs r", &mut (0..out.p).map(|r| r.to_string()));
    text += &line(
        "Baseblock",
        &mut out.baseblock.iter().map(|b| b.to_string()),
    );
    for (label, rows) in [("Recv schedule", &out.recv), ("Send schedule", &out.send)] {
        for k in 0..out.q {
            let label = if k == 0 { label } else { "" };
            text += &line(label, &mut rows.iter().map(|row| row[k].to_string()));
        }
    }
    text
}
