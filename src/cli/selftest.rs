//! `circulant selftest`: inside a job, every collective with every algorithm that applies, at
//! several sizes (0 and odd ones included), roots and allgatherv distributions, the data
//! checked byte for byte on every rank. Rank 0 prints the summary `X passed, Y failed` last.

use std::process::ExitCode;
use std::time::Instant;

use circulant::comm::{Choice, CommError, Communicator, Payload, Side};
use circulant::plan::distribution::Distribution;
use circulant::plan::registry;
use circulant::plan::{Dtype, Problem, ReduceOp, Reduction};

use super::CliResult;

#[derive(clap::Args)]
pub struct Args {
    /// Fewer sizes and roots (for suites that run many jobs).
    #[arg(long)]
    quick: bool,
    /// Only these collectives (comma-separated: barrier, bcast, allgather, allgatherv,
    /// allreduce, reduce, scan, exscan, gather, scatter, gatherv, scatterv, alltoall,
    /// persistent, split, intercomm).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Print every case, not only failures.
    #[arg(long, short)]
    verbose: bool,
}

/// The names `--only` accepts.
const COLLECTIVES: [&str; 16] = [
    "barrier",
    "bcast",
    "allgather",
    "allgatherv",
    "allreduce",
    "reduce",
    "scan",
    "exscan",
    "gather",
    "scatter",
    "gatherv",
    "scatterv",
    "alltoall",
    "persistent",
    "split",
    "intercomm",
];

#[derive(Debug, thiserror::Error)]
#[error("--only: unknown collective {name:?} (known: {})", COLLECTIVES.join(", "))]
struct UnknownCollective {
    name: String,
}

/// One checked case.
struct Case {
    name: String,
    problem: Problem,
    algorithm: &'static str,
}

/// Counts of this rank.
#[derive(Default)]
struct Tally {
    passed: u64,
    failed: u64,
}

pub fn run(args: Args) -> CliResult {
    // Before joining the job: a misspelt name would otherwise select nothing and pass.
    if let Some(name) = args
        .only
        .iter()
        .find(|o| !COLLECTIVES.contains(&o.as_str()))
    {
        return Err(UnknownCollective { name: name.clone() }.into());
    }
    let started = Instant::now();
    let mut comm = Communicator::init()?;
    let init_time = started.elapsed();
    let (rank, p) = (comm.rank(), comm.size());
    if rank == 0 {
        println!(
            "selftest: {p} rank(s), provider {}, launcher {}",
            comm.provider(),
            comm.launcher()
        );
        // From this process's start to the barrier that ends start-up on every rank.
        println!(
            "selftest: init took {:.0} ms",
            init_time.as_secs_f64() * 1e3
        );
    }
    let mut tally = Tally::default();
    let wanted = |op: &str| args.only.is_empty() || args.only.iter().any(|o| o == op);
    let sizes: &[usize] = if args.quick {
        &[0, 1, 7, 4096 + 3]
    } else {
        &[0, 1, 7, 4096 + 3, (1 << 20) + 1]
    };
    let roots: Vec<usize> = if p <= 8 && !args.quick {
        (0..p).collect()
    } else {
        let mut r = vec![0, p / 2, p - 1];
        r.dedup();
        r
    };

    let mut cases = Vec::new();
    if wanted("barrier") {
        cases.push(("barrier".to_string(), Problem::Barrier { p }));
    }
    if wanted("bcast") {
        for &bytes in sizes {
            for &root in &roots {
                cases.push((
                    format!("bcast {bytes} B root {root}"),
                    Problem::Broadcast { p, root, bytes },
                ));
            }
        }
    }
    if wanted("allgather") {
        for &bytes in sizes {
            let block = bytes.div_ceil(p);
            cases.push((
                format!("allgather {block} B/rank"),
                Problem::Allgather { p, block },
            ));
        }
    }
    if wanted("allgatherv") {
        for &bytes in sizes {
            for dist in Distribution::ALL {
                let c = dist.base_for_total(p, bytes);
                let counts = dist.counts(p, c);
                cases.push((
                    format!("allgatherv {dist} c={c}"),
                    Problem::Allgatherv { counts },
                ));
            }
        }
    }
    let reductions = [
        Reduction::new(Dtype::I64, ReduceOp::Sum)?,
        Reduction::new(Dtype::F64, ReduceOp::Max)?,
        Reduction::new(Dtype::U32, ReduceOp::Bxor)?,
    ];
    for reduction in reductions {
        let size = reduction.dtype.size();
        for &bytes in sizes {
            let bytes = bytes / size * size;
            let tag = format!("{} {:?} {bytes} B", reduction.op, reduction.dtype);
            if wanted("allreduce") {
                cases.push((
                    format!("allreduce {tag}"),
                    Problem::Allreduce {
                        p,
                        reduction,
                        bytes,
                    },
                ));
            }
            if wanted("reduce") {
                for &root in &roots {
                    cases.push((
                        format!("reduce {tag} root {root}"),
                        Problem::Reduce {
                            p,
                            root,
                            reduction,
                            bytes,
                        },
                    ));
                }
            }
            for exclusive in [false, true] {
                let op = if exclusive { "exscan" } else { "scan" };
                if wanted(op) {
                    cases.push((
                        format!("{op} {tag}"),
                        Problem::Scan {
                            p,
                            reduction,
                            bytes,
                            exclusive,
                        },
                    ));
                }
            }
        }
    }
    for &bytes in sizes {
        let block = bytes.div_ceil(p).min(64 << 10);
        for &root in &roots {
            if wanted("gather") {
                cases.push((
                    format!("gather {block} B root {root}"),
                    Problem::Gather { p, root, block },
                ));
            }
            if wanted("scatter") {
                cases.push((
                    format!("scatter {block} B root {root}"),
                    Problem::Scatter { p, root, block },
                ));
            }
        }
        if wanted("alltoall") {
            cases.push((
                format!("alltoall {block} B"),
                Problem::Alltoall { p, block },
            ));
        }
    }

    for &bytes in sizes {
        // Zeros included: the distributions give empty parts, and the root's may be empty.
        let bytes = bytes.min(64 << 10);
        for &root in &roots {
            let dists: &[Distribution] = if args.quick {
                &[Distribution::Mod3]
            } else {
                &[
                    Distribution::Regular,
                    Distribution::HalfFull,
                    Distribution::Mod3,
                ]
            };
            for &dist in dists {
                let counts = dist.counts(p, dist.base_for_total(p, bytes));
                if wanted("gatherv") {
                    cases.push((
                        format!("gatherv {dist} {bytes} B root {root}"),
                        Problem::Gatherv {
                            root,
                            counts: counts.clone(),
                        },
                    ));
                }
                if wanted("scatterv") {
                    cases.push((
                        format!("scatterv {dist} {bytes} B root {root}"),
                        Problem::Scatterv { root, counts },
                    ));
                }
            }
        }
    }

    let model = comm.model();
    let mut broken = false;
    'cases: for (name, problem) in cases {
        for algorithm in registry::applicable(&problem, &model)? {
            let case = Case {
                name: name.clone(),
                problem: problem.clone(),
                algorithm: algorithm.name(),
            };
            match check(&mut comm, &case) {
                Ok(None) => {
                    tally.passed += 1;
                    if args.verbose && rank == 0 {
                        println!("ok   {} [{}]", case.name, case.algorithm);
                    }
                }
                Ok(Some(wrong)) => {
                    tally.failed += 1;
                    println!(
                        "FAIL rank {rank}: {} [{}]: {wrong}",
                        case.name, case.algorithm
                    );
                }
                Err(err) => {
                    tally.failed += 1;
                    println!(
                        "FAIL rank {rank}: {} [{}]: {err}",
                        case.name, case.algorithm
                    );
                    // The communicator is unusable after an error.
                    broken = true;
                    break 'cases;
                }
            }
        }
    }

    // Operations beyond the one-call collectives, each checked as a whole.
    let extras: [(&str, Extra); 3] = [
        ("persistent", persistent),
        ("split", split),
        ("intercomm", intercomm),
    ];
    for (name, extra) in extras {
        if broken || !wanted(name) {
            continue;
        }
        match extra(&mut comm) {
            Ok(None) => {
                tally.passed += 1;
                if args.verbose && rank == 0 {
                    println!("ok   {name}");
                }
            }
            Ok(Some(wrong)) => {
                tally.failed += 1;
                println!("FAIL rank {rank}: {name}: {wrong}");
            }
            Err(err) => {
                tally.failed += 1;
                println!("FAIL rank {rank}: {name}: {err}");
                broken = true;
            }
        }
    }

    // Rank 0 reports the totals of all ranks; if the communicator failed, each rank its own.
    let mine = [tally.passed, tally.failed];
    let mut all = [0u64; 2];
    let totals = match comm.allreduce(&mine, &mut all, ReduceOp::Sum) {
        Ok(()) => Some(all),
        Err(_) => None,
    };
    match totals {
        Some([passed, failed]) => {
            if rank == 0 {
                println!(
                    "selftest took {:.1} s, {} bytes copied on rank 0",
                    started.elapsed().as_secs_f64(),
                    comm.bytes_copied()
                );
                println!("{passed} passed, {failed} failed");
            }
            Ok(if failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        None => {
            println!(
                "rank {rank}: {} passed, {} failed",
                tally.passed,
                tally.failed.max(1)
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Runs one case with its algorithm; `Ok(Some(what))` if the data came out wrong.
fn check(comm: &mut Communicator, case: &Case) -> Result<Option<String>, CommError> {
    let (rank, p) = (comm.rank(), comm.size());
    let choice = Choice::Named(case.algorithm);
    let pattern = |owner: usize, k: usize| (owner * 131 + k * 7 + 1) as u8;
    match &case.problem {
        Problem::Barrier { .. } => {
            comm.barrier()?;
            Ok(None)
        }
        Problem::Broadcast { root, bytes, .. } => {
            // Registered memory on one root in two, plain memory on the others: both paths.
            let expected: Vec<u8> = (0..*bytes).map(|k| pattern(*root, k)).collect();
            if root % 2 == 0 {
                let mut buf = comm.alloc(*bytes)?;
                if rank == *root {
                    buf.copy_from_slice(&expected);
                }
                comm.bcast_using(&mut buf, *root, choice)?;
                Ok(compare(buf.bytes(), &expected))
            } else {
                let mut buf = if rank == *root {
                    expected.clone()
                } else {
                    vec![0u8; *bytes]
                };
                comm.bcast_using(&mut buf[..], *root, choice)?;
                Ok(compare(&buf, &expected))
            }
        }
        Problem::Allgather { block, .. } => {
            let send: Vec<u8> = (0..*block).map(|k| pattern(rank, k)).collect();
            let expected: Vec<u8> = (0..p)
                .flat_map(|r| (0..*block).map(move |k| pattern(r, k)))
                .collect();
            let mut recv = comm.alloc(p * block)?;
            comm.allgather_using(&send[..], &mut recv, choice)?;
            Ok(compare(&recv, &expected))
        }
        Problem::Allgatherv { counts } => {
            let send_buf = {
                let mut b = comm.alloc(counts[rank])?;
                for (k, x) in b.iter_mut().enumerate() {
                    *x = pattern(rank, k);
                }
                b
            };
            let expected: Vec<u8> = counts
                .iter()
                .enumerate()
                .flat_map(|(r, &c)| (0..c).map(move |k| pattern(r, k)))
                .collect();
            let mut recv = comm.alloc(expected.len())?;
            comm.allgatherv_using(&send_buf, &mut recv, counts, choice)?;
            if let Some(wrong) = compare(&recv, &expected) {
                return Ok(Some(wrong));
            }
            // In place: the contribution already at its place in the receive buffer.
            let mut in_place = comm.alloc(expected.len())?;
            let offset: usize = counts[..rank].iter().sum();
            in_place[offset..offset + counts[rank]].copy_from_slice(&send_buf);
            comm.allgatherv_in_place_using(&mut in_place, counts, choice)?;
            Ok(compare(&in_place, &expected).map(|w| format!("in place: {w}")))
        }
        Problem::Allreduce {
            reduction, bytes, ..
        } => {
            let (send, expected) = reduction_data(*reduction, *bytes, rank, p, |_| true);
            let mut recv = vec![0u8; *bytes];
            comm.allreduce_bytes(&send[..], &mut recv[..], *reduction, choice)?;
            Ok(compare(&recv, &expected))
        }
        Problem::Reduce {
            root,
            reduction,
            bytes,
            ..
        } => {
            let (send, expected) = reduction_data(*reduction, *bytes, rank, p, |_| true);
            // Other ranks pass a full buffer too, as MPI codes do: it must be left alone.
            let mut recv = vec![UNTOUCHED; *bytes];
            comm.reduce_bytes(&send[..], &mut recv[..], *reduction, *root, choice)?;
            Ok(if rank == *root {
                compare(&recv, &expected)
            } else {
                untouched(&recv)
            })
        }
        Problem::Scan {
            reduction,
            bytes,
            exclusive,
            ..
        } => {
            let upto = if *exclusive { rank } else { rank + 1 };
            let (send, expected) = reduction_data(*reduction, *bytes, rank, p, |r| r < upto);
            let mut recv = vec![UNTOUCHED; *bytes];
            comm.scan_bytes(&send[..], &mut recv[..], *reduction, *exclusive, choice)?;
            if *exclusive && rank == 0 {
                // Rank 0's result is undefined for an exclusive scan: it must be left alone.
                return Ok(untouched(&recv));
            }
            Ok(compare(&recv, &expected))
        }
        Problem::Gather { root, block, .. } => {
            let send: Vec<u8> = (0..*block).map(|k| pattern(rank, k)).collect();
            // Non-roots pass a buffer of the root's size, which must be left alone.
            let mut recv = vec![UNTOUCHED; p * block];
            comm.gather_using(&send[..], &mut recv[..], *root, choice)?;
            let expected: Vec<u8> = (0..p)
                .flat_map(|r| (0..*block).map(move |k| pattern(r, k)))
                .collect();
            Ok(if rank == *root {
                compare(&recv, &expected)
            } else {
                untouched(&recv)
            })
        }
        Problem::Scatter { root, block, .. } => {
            let send: Vec<u8> = if rank == *root {
                (0..p * block)
                    .map(|k| pattern(k / block.max(&1), k))
                    .collect()
            } else {
                Vec::new()
            };
            let mut recv = vec![0u8; *block];
            comm.scatter_using(&send[..], &mut recv[..], *root, choice)?;
            let expected: Vec<u8> = (rank * block..(rank + 1) * block)
                .map(|k| pattern(rank, k))
                .collect();
            Ok(compare(&recv, &expected))
        }
        Problem::Alltoall { block, .. } => {
            // Block j of rank i holds pattern(i * p + j, ...).
            let send: Vec<u8> = (0..p)
                .flat_map(|j| (0..*block).map(move |k| pattern(rank * p + j, k)))
                .collect();
            let mut recv = vec![0u8; p * block];
            comm.alltoall_using(&send[..], &mut recv[..], choice)?;
            let expected: Vec<u8> = (0..p)
                .flat_map(|i| (0..*block).map(move |k| pattern(i * p + rank, k)))
                .collect();
            Ok(compare(&recv, &expected))
        }
        Problem::Gatherv { root, counts } => {
            let send: Vec<u8> = (0..counts[rank]).map(|k| pattern(rank, k)).collect();
            let expected: Vec<u8> = counts
                .iter()
                .enumerate()
                .flat_map(|(r, &c)| (0..c).map(move |k| pattern(r, k)))
                .collect();
            // Registered receive memory at the root in one case of two: both paths.
            if rank == *root && root % 2 == 0 {
                let mut recv = comm.alloc(expected.len())?;
                comm.gatherv_using(&send[..], &mut recv, counts, *root, choice)?;
                return Ok(compare(&recv, &expected));
            }
            let mut recv = vec![UNTOUCHED; expected.len()];
            comm.gatherv_using(&send[..], &mut recv[..], counts, *root, choice)?;
            Ok(if rank == *root {
                compare(&recv, &expected)
            } else {
                untouched(&recv)
            })
        }
        Problem::Scatterv { root, counts } => {
            let send: Vec<u8> = if rank == *root {
                counts
                    .iter()
                    .enumerate()
                    .flat_map(|(r, &c)| (0..c).map(move |k| pattern(r, k)))
                    .collect()
            } else {
                Vec::new()
            };
            let expected: Vec<u8> = (0..counts[rank]).map(|k| pattern(rank, k)).collect();
            let mut recv = comm.alloc(counts[rank])?;
            comm.scatterv_using(&send[..], &mut recv, counts, *root, choice)?;
            Ok(compare(&recv, &expected))
        }
        Problem::Intergroup { .. } => Ok(None),
    }
}

/// A check of a whole feature: `Ok(Some(what))` if data came out wrong.
type Extra = fn(&mut Communicator) -> Result<Option<String>, CommError>;

fn fill(buf: &mut [u8], owner: usize, step: usize) {
    for (k, x) in buf.iter_mut().enumerate() {
        *x = (owner * 131 + k * 7 + step * 31 + 1) as u8;
    }
}

fn expect_fill(got: &[u8], owner: usize, step: usize) -> Option<String> {
    let mut want = vec![0u8; got.len()];
    fill(&mut want, owner, step);
    compare(got, &want)
}

/// Persistent broadcast and allgatherv (separate and in place) with every algorithm that
/// applies: several starts, the data changed between them.
fn persistent(comm: &mut Communicator) -> Result<Option<String>, CommError> {
    let (rank, p) = (comm.rank(), comm.size());
    let model = comm.model();
    let bytes = 4096 + 3;
    let root = p / 2;
    let problem = Problem::Broadcast { p, root, bytes };
    for algorithm in registry::applicable(&problem, &model)? {
        let name = algorithm.name();
        let mut buf = comm.alloc(bytes)?;
        let mut request = comm.bcast_init_using(&mut buf, root, Choice::Named(name))?;
        for step in 0..4 {
            if rank == root {
                fill(request.buffer_mut()?, root, step);
            }
            request.start()?;
            request.wait()?;
            if let Some(wrong) = expect_fill(request.buffer()?, root, step) {
                return Ok(Some(format!("bcast [{name}] start {step}: {wrong}")));
            }
        }
    }
    let counts = Distribution::Mod3.counts(p, 1000);
    let total: usize = counts.iter().sum();
    let offset: usize = counts[..rank].iter().sum();
    let problem = Problem::Allgatherv {
        counts: counts.clone(),
    };
    for algorithm in registry::applicable(&problem, &model)? {
        let name = algorithm.name();
        let mut send = comm.alloc(counts[rank])?;
        let mut recv = comm.alloc(total)?;
        let mut request =
            comm.allgatherv_init_using(&mut send, &mut recv, &counts, Choice::Named(name))?;
        for step in 0..3 {
            fill(request.send_buffer_mut()?, rank, step);
            request.run()?;
            let got = request.buffer()?;
            let mut at = 0;
            for (owner, &c) in counts.iter().enumerate() {
                if let Some(wrong) = expect_fill(&got[at..at + c], owner, step) {
                    return Ok(Some(format!(
                        "allgatherv [{name}] start {step}, rank {owner}'s part: {wrong}"
                    )));
                }
                at += c;
            }
        }
        drop(request);
        let mut recv = comm.alloc(total)?;
        let mut request =
            comm.allgatherv_in_place_init_using(&mut recv, &counts, Choice::Named(name))?;
        for step in 0..3 {
            fill(
                &mut request.buffer_mut()?[offset..offset + counts[rank]],
                rank,
                step,
            );
            request.start()?;
            request.wait()?;
            let got = request.buffer()?;
            let mut at = 0;
            for (owner, &c) in counts.iter().enumerate() {
                if let Some(wrong) = expect_fill(&got[at..at + c], owner, step) {
                    return Ok(Some(format!(
                        "allgatherv in place [{name}] start {step}, rank {owner}'s part: {wrong}"
                    )));
                }
                at += c;
            }
        }
    }
    Ok(None)
}

/// `split(rank % 2, p − rank)`: each group ordered by descending old rank, then an allgather
/// inside each group.
fn split(comm: &mut Communicator) -> Result<Option<String>, CommError> {
    let (rank, p) = (comm.rank(), comm.size());
    let color = (rank % 2) as u32;
    let mut sub =
        comm.split(Some(color), (p - rank) as i64)?
            .ok_or_else(|| CommError::Argument {
                op: "split",
                what: "no communicator for a rank with a color".into(),
            })?;
    // Members: old ranks of the same parity, highest first.
    let members: Vec<usize> = (0..p).rev().filter(|r| r % 2 == rank % 2).collect();
    let want_rank = members
        .iter()
        .position(|&r| r == rank)
        .unwrap_or(usize::MAX);
    if sub.size() != members.len() || sub.rank() != want_rank {
        return Ok(Some(format!(
            "rank {} of {} in the new group, {want_rank} of {} expected",
            sub.rank(),
            sub.size(),
            members.len()
        )));
    }
    let mine = [rank as u8; 3];
    let mut all = vec![0u8; 3 * sub.size()];
    sub.allgather(&mine[..], &mut all[..])?;
    let expected: Vec<u8> = members.iter().flat_map(|&r| [r as u8; 3]).collect();
    if let Some(wrong) = compare(&all, &expected) {
        return Ok(Some(format!("allgather in the group: {wrong}")));
    }
    // A rank without a color gets no communicator; the others go on working.
    let none = comm.split((rank != 0).then_some(7), 0)?;
    if none.is_some() == (rank == 0) {
        return Ok(Some("split with no color on rank 0".into()));
    }
    // The parent still works after its children.
    comm.barrier()?;
    Ok(None)
}

/// An inter-communicator of the even ranks (A) and the odd ranks (B): allgatherv and allgather
/// with every intergroup algorithm, each rank receiving the other group's data.
fn intercomm(comm: &mut Communicator) -> Result<Option<String>, CommError> {
    let (rank, p) = (comm.rank(), comm.size());
    if p < 2 {
        return Ok(None);
    }
    let side = if rank % 2 == 0 { Side::A } else { Side::B };
    let mut inter = comm.intercomm(side)?;
    let group =
        |s: Side| -> Vec<usize> { (0..p).filter(|r| (r % 2 == 0) == (s == Side::A)).collect() };
    let (local, remote) = match side {
        Side::A => (group(Side::A), group(Side::B)),
        Side::B => (group(Side::B), group(Side::A)),
    };
    if inter.local_size() != local.len()
        || inter.remote_size() != remote.len()
        || local.get(inter.local_rank()) != Some(&rank)
    {
        return Ok(Some(format!(
            "local rank {} of {}, remote size {}",
            inter.local_rank(),
            inter.local_size(),
            inter.remote_size()
        )));
    }
    let count = |r: usize| (r * 37) % 100 + usize::from(r % 3 == 0) * 300;
    let local_counts: Vec<usize> = local.iter().map(|&r| count(r)).collect();
    let remote_counts: Vec<usize> = remote.iter().map(|&r| count(r)).collect();
    let problem = Problem::Intergroup {
        a: group(Side::A).iter().map(|&r| count(r)).collect(),
        b: group(Side::B).iter().map(|&r| count(r)).collect(),
    };
    let model = inter.comm().model();
    for algorithm in registry::applicable(&problem, &model)? {
        let name = algorithm.name();
        let mut send = vec![0u8; count(rank)];
        fill(&mut send, rank, 0);
        let mut recv = inter.comm().alloc(remote_counts.iter().sum())?;
        inter.allgatherv_using(
            &send[..],
            &mut recv,
            &local_counts,
            &remote_counts,
            Choice::Named(name),
        )?;
        let mut at = 0;
        for (&r, &c) in remote.iter().zip(&remote_counts) {
            if let Some(wrong) = expect_fill(&recv[at..at + c], r, 0) {
                return Ok(Some(format!("allgatherv [{name}] from rank {r}: {wrong}")));
            }
            at += c;
        }
    }
    // Allgather: each group has its own block size.
    let block = |s: Side| if s == Side::A { 5 } else { 9 };
    let mut send = vec![0u8; block(side)];
    fill(&mut send, rank, 1);
    let other = if side == Side::A { Side::B } else { Side::A };
    let mut recv = vec![0u8; block(other) * remote.len()];
    inter.allgather(&send[..], &mut recv[..])?;
    for (i, &r) in remote.iter().enumerate() {
        let b = block(other);
        if let Some(wrong) = expect_fill(&recv[i * b..(i + 1) * b], r, 1) {
            return Ok(Some(format!("allgather from rank {r}: {wrong}")));
        }
    }
    Ok(None)
}

/// This rank's input of a reduction and the result over the ranks `include` accepts.
fn reduction_data(
    reduction: Reduction,
    bytes: usize,
    rank: usize,
    p: usize,
    include: impl Fn(usize) -> bool,
) -> (Vec<u8>, Vec<u8>) {
    let size = reduction.dtype.size();
    let elements = bytes / size;
    // Small integral values: every operator, floats included, is exact in any order.
    let value = |r: usize, k: usize| ((r * 7 + k * 3) % 61) as u64 + 1;
    let encode = |v: u64| -> Vec<u8> {
        match reduction.dtype {
            Dtype::I32 => (v as i32).to_le_bytes().to_vec(),
            Dtype::U32 => (v as u32).to_le_bytes().to_vec(),
            Dtype::I64 => (v as i64).to_le_bytes().to_vec(),
            Dtype::U64 => v.to_le_bytes().to_vec(),
            Dtype::F32 => (v as f32).to_le_bytes().to_vec(),
            Dtype::F64 => (v as f64).to_le_bytes().to_vec(),
        }
    };
    let send: Vec<u8> = (0..elements).flat_map(|k| encode(value(rank, k))).collect();
    let mut expected = vec![0u8; elements * size];
    let mut first = true;
    for r in (0..p).filter(|&r| include(r)) {
        let x: Vec<u8> = (0..elements).flat_map(|k| encode(value(r, k))).collect();
        if first {
            expected = x;
            first = false;
        } else {
            let acc = expected.clone();
            // Operators and dtypes here are valid, so combine cannot fail.
            let _ = reduction.combine(&acc, &x, &mut expected);
        }
    }
    (send, expected)
}

/// What a receive buffer holds before a collective that must not write into it.
const UNTOUCHED: u8 = 0xa5;

/// A complaint if a buffer filled with [`UNTOUCHED`] was written into.
fn untouched(buf: &[u8]) -> Option<String> {
    buf.iter()
        .position(|&b| b != UNTOUCHED)
        .map(|at| format!("wrote into a receive buffer it must leave alone, at byte {at}"))
}

/// `None` if equal, else where they first differ.
fn compare(got: &[u8], want: &[u8]) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} bytes, {} expected", got.len(), want.len()));
    }
    let first = got.iter().zip(want).position(|(a, b)| a != b)?;
    let wrong = got.iter().zip(want).filter(|(a, b)| a != b).count();
    Some(format!(
        "{wrong} wrong bytes, the first at {first} ({} instead of {})",
        got[first], want[first]
    ))
}
