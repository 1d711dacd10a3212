//! `circulant selftest`: inside a job, every collective with every algorithm that applies, at
//! several sizes (0 and odd ones included), roots and allgatherv distributions, the data
//! checked byte for byte on every rank. Rank 0 prints the summary `X passed, Y failed` last.

use std::process::ExitCode;
use std::time::Instant;

use circulant::comm::{Choice, CommError, Communicator, Side};
use circulant::plan::{registry, Problem, ReduceOp};
use circulant_cli::cases::{self, Case, CaseData, RankData, Scope};

use super::CliResult;

mod persistent;
use persistent::persistent;

#[derive(clap::Args)]
pub struct Args {
    /// Fewer sizes and roots (for suites that run many jobs).
    #[arg(long)]
    quick: bool,
    /// Only these collectives (comma-separated: barrier, bcast, allgather, allgatherv,
    /// allreduce, reduce, reduce_scatter_block, reduce_scatter, scan, exscan, gather, scatter,
    /// gatherv, scatterv, alltoall, persistent, split, intercomm).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Print every case, not only failures.
    #[arg(long, short)]
    verbose: bool,
}

/// Operations beyond the one-call collectives of [`cases::COLLECTIVES`], each checked as a
/// whole.
const EXTRAS: [(&str, Extra); 4] = [
    ("persistent", persistent),
    ("split", split),
    ("intercomm", intercomm),
    ("nodes", nodes),
];

#[derive(Debug, thiserror::Error)]
#[error("--only: unknown collective {name:?} (known: {})", known_names().join(", "))]
struct UnknownCollective {
    name: String,
}

/// The names `--only` accepts.
fn known_names() -> Vec<&'static str> {
    cases::COLLECTIVES
        .into_iter()
        .chain(EXTRAS.iter().map(|(name, _)| *name))
        .collect()
}

/// Counts of this rank.
#[derive(Default)]
struct Tally {
    passed: u64,
    failed: u64,
    /// The communicator failed: nothing more can run on it.
    broken: bool,
}

impl Tally {
    /// Counts one outcome, printing failures (and with `verbose`, on rank 0, passes).
    fn record(&mut self, rank: usize, verbose: bool, what: &str, outcome: Outcome) {
        match outcome {
            Ok(None) => {
                self.passed += 1;
                if verbose && rank == 0 {
                    println!("ok   {what}");
                }
            }
            Ok(Some(wrong)) => {
                self.failed += 1;
                println!("FAIL rank {rank}: {what}: {wrong}");
            }
            Err(err) => {
                self.failed += 1;
                println!("FAIL rank {rank}: {what}: {err}");
                // The communicator is unusable after an error.
                self.broken = true;
            }
        }
    }
}

/// What one check found: `Ok(Some(what))` if data came out wrong.
type Outcome = Result<Option<String>, CommError>;

pub fn run(args: Args) -> CliResult {
    // Before joining the job: a misspelt name would otherwise select nothing and pass.
    let known = known_names();
    if let Some(name) = args.only.iter().find(|o| !known.contains(&o.as_str())) {
        return Err(UnknownCollective { name: name.clone() }.into());
    }
    let started = Instant::now();
    let mut comm = Communicator::init()?;
    print_start(&comm, started);
    let scope = if args.quick {
        Scope::Quick
    } else {
        Scope::Full
    };
    let chosen: Vec<Case> = cases::matrix(comm.size(), scope)
        .into_iter()
        .filter(|c| args.wanted(c.collective()))
        .collect();
    let mut tally = Tally::default();
    run_cases(&mut comm, &chosen, args.verbose, &mut tally)?;
    run_extras(&mut comm, &args, &mut tally);
    Ok(summarise(&mut comm, &tally, started))
}

impl Args {
    fn wanted(&self, op: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == op)
    }
}

/// Rank 0 names the job and how long joining it took.
fn print_start(comm: &Communicator, started: Instant) {
    if comm.rank() != 0 {
        return;
    }
    println!(
        "selftest: {} rank(s), provider {}, launcher {}",
        comm.size(),
        comm.provider(),
        comm.launcher()
    );
    if let Some(node) = comm.node_provider() {
        println!("selftest: rank 0 reaches the ranks of its node through {node}");
    }
    // From this process's start to the barrier that ends start-up on every rank.
    println!(
        "selftest: init took {:.0} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    print_nodes(comm);
}

/// Rank 0 names the nodes the job runs on and the node of every rank (nodes numbered in the
/// order of their first rank).
fn print_nodes(comm: &Communicator) {
    if comm.rank() != 0 {
        return;
    }
    let per_node: Vec<usize> = (0..comm.nodes())
        .map(|n| comm.ranks_on(n).map_or(0, <[usize]>::len))
        .collect();
    println!(
        "selftest: nodes {} (ranks per node {per_node:?})",
        comm.nodes()
    );
    println!(
        "selftest: node of each rank {:?}",
        comm.node_map().node_of_each()
    );
}

/// Every case with every algorithm that applies, until the communicator fails.
fn run_cases(
    comm: &mut Communicator,
    chosen: &[Case],
    verbose: bool,
    tally: &mut Tally,
) -> Result<(), Box<dyn std::error::Error>> {
    for case in chosen {
        let me = CaseData::new(case.problem.clone()).for_rank(comm.rank());
        // The communicator's list: on several nodes of several ranks, the node-aware ones too.
        let names: Vec<&'static str> = comm
            .algorithms(&case.problem)?
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        for algorithm in names {
            let outcome = check(comm, &case.problem, &me, algorithm);
            tally.record(
                comm.rank(),
                verbose,
                &format!("{} [{algorithm}]", case.name),
                outcome,
            );
            if tally.broken {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The whole-feature checks `--only` selects, while the communicator works.
fn run_extras(comm: &mut Communicator, args: &Args, tally: &mut Tally) {
    for (name, extra) in EXTRAS {
        if tally.broken || !args.wanted(name) {
            continue;
        }
        let outcome = extra(comm);
        tally.record(comm.rank(), args.verbose, name, outcome);
    }
}

/// Rank 0 reports the totals of all ranks; if the communicator failed, each rank its own.
fn summarise(comm: &mut Communicator, tally: &Tally, started: Instant) -> ExitCode {
    let rank = comm.rank();
    let mine = [tally.passed, tally.failed];
    let mut all = [0u64; 2];
    if comm.allreduce(&mine, &mut all, ReduceOp::Sum).is_err() {
        println!(
            "rank {rank}: {} passed, {} failed",
            tally.passed,
            tally.failed.max(1)
        );
        return ExitCode::FAILURE;
    }
    let [passed, failed] = all;
    if rank == 0 {
        println!(
            "selftest took {:.1} s, {} bytes copied on rank 0",
            started.elapsed().as_secs_f64(),
            comm.bytes_copied()
        );
        println!("{passed} passed, {failed} failed");
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// This rank's verdict on its receive buffer `got`.
fn verdict(me: &RankData, got: &[u8]) -> Option<String> {
    me.expected.check(got).err().map(|m| m.to_string())
}

/// Runs one case with `algorithm` on this rank.
fn check(
    comm: &mut Communicator,
    problem: &Problem,
    me: &RankData,
    algorithm: &'static str,
) -> Outcome {
    let choice = Choice::Named(algorithm);
    match problem {
        Problem::Barrier { .. } => {
            comm.barrier()?;
            Ok(None)
        }
        Problem::Broadcast { root, .. } => bcast(comm, me, *root, choice),
        Problem::Allgather { .. } => allgather(comm, me, choice),
        Problem::Allgatherv { counts } => allgatherv(comm, me, counts, choice),
        Problem::Allreduce { .. }
        | Problem::Reduce { .. }
        | Problem::Scan { .. }
        | Problem::ReduceScatterBlock { .. }
        | Problem::ReduceScatter { .. } => reduction(comm, problem, me, choice),
        Problem::Gather { root, .. } => gather(comm, me, *root, choice),
        Problem::Scatter { root, .. } => scatter(comm, me, *root, choice),
        Problem::Alltoall { .. } => alltoall(comm, me, choice),
        Problem::Gatherv { root, counts } => gatherv(comm, me, counts, *root, choice),
        Problem::Scatterv { root, counts } => scatterv(comm, me, counts, *root, choice),
        // Inter-communicators are checked as a whole by `intercomm`.
        Problem::Intergroup { .. } => Ok(None),
    }
}

/// Registered memory on one root in two, plain memory on the others: both paths.
fn bcast(comm: &mut Communicator, me: &RankData, root: usize, choice: Choice) -> Outcome {
    let initial = me.recv_initial.clone();
    if root % 2 == 0 {
        let mut buf = comm.alloc(initial.len())?;
        buf.copy_from_slice(&initial);
        comm.choosing(choice).bcast(&mut buf, root)?;
        Ok(verdict(me, &buf))
    } else {
        let mut buf = initial;
        comm.choosing(choice).bcast(&mut buf[..], root)?;
        Ok(verdict(me, &buf))
    }
}

fn allgather(comm: &mut Communicator, me: &RankData, choice: Choice) -> Outcome {
    let send = me.send.clone();
    let mut recv = comm.alloc(me.recv_initial.len())?;
    recv.copy_from_slice(&me.recv_initial.clone());
    comm.choosing(choice).allgather(&send[..], &mut recv)?;
    Ok(verdict(me, &recv))
}

/// From a registered send buffer, then in place: the contribution already at its place in
/// the receive buffer.
fn allgatherv(comm: &mut Communicator, me: &RankData, counts: &[usize], choice: Choice) -> Outcome {
    let mut send = comm.alloc(counts[me.rank])?;
    send.copy_from_slice(&me.send.clone());
    let mut recv = comm.alloc(me.recv_initial.len())?;
    recv.copy_from_slice(&me.recv_initial.clone());
    comm.choosing(choice).allgatherv(&send, &mut recv, counts)?;
    if let Some(wrong) = verdict(me, &recv) {
        return Ok(Some(wrong));
    }
    let mut in_place = comm.alloc(me.recv_initial.len())?;
    if let Some(initial) = &me.in_place_initial {
        in_place.copy_from_slice(initial);
    }
    comm.choosing(choice)
        .allgatherv_in_place(&mut in_place, counts)?;
    Ok(verdict(me, &in_place).map(|w| format!("in place: {w}")))
}

/// Allreduce, reduce, the reduce-scatters, scan and exscan. Every rank passes a full receive buffer, as MPI codes
/// do: the non-roots' of a reduce and rank 0's of an exclusive scan must be left alone.
fn reduction(comm: &mut Communicator, problem: &Problem, me: &RankData, choice: Choice) -> Outcome {
    let send = me.send.clone();
    let mut recv = me.recv_initial.clone();
    match problem {
        Problem::Allreduce { reduction, .. } => {
            comm.choosing(choice)
                .allreduce_bytes(&send[..], &mut recv[..], *reduction)?
        }
        Problem::Reduce {
            root, reduction, ..
        } => comm
            .choosing(choice)
            .reduce_bytes(&send[..], &mut recv[..], *reduction, *root)?,
        Problem::ReduceScatterBlock { reduction, .. } => comm
            .choosing(choice)
            .reduce_scatter_block_bytes(&send[..], &mut recv[..], *reduction)?,
        Problem::ReduceScatter { reduction, counts } => {
            let size = reduction.dtype.size();
            let elements: Vec<usize> = counts.iter().map(|c| c / size).collect();
            comm.choosing(choice).reduce_scatter_bytes(
                &send[..],
                &mut recv[..],
                *reduction,
                &elements,
            )?
        }
        Problem::Scan {
            reduction,
            exclusive,
            ..
        } if *exclusive => {
            comm.choosing(choice)
                .exscan_bytes(&send[..], &mut recv[..], *reduction)?
        }
        Problem::Scan { reduction, .. } => {
            comm.choosing(choice)
                .scan_bytes(&send[..], &mut recv[..], *reduction)?
        }
        _ => return Ok(Some("not a reduction".into())),
    }
    Ok(verdict(me, &recv))
}

/// Non-roots pass a buffer of the root's size, which must be left alone.
fn gather(comm: &mut Communicator, me: &RankData, root: usize, choice: Choice) -> Outcome {
    let send = me.send.clone();
    let mut recv = me.recv_initial.clone();
    comm.choosing(choice)
        .gather(&send[..], &mut recv[..], root)?;
    Ok(verdict(me, &recv))
}

fn scatter(comm: &mut Communicator, me: &RankData, root: usize, choice: Choice) -> Outcome {
    let send = me.send.clone();
    let mut recv = me.recv_initial.clone();
    comm.choosing(choice)
        .scatter(&send[..], &mut recv[..], root)?;
    Ok(verdict(me, &recv))
}

fn alltoall(comm: &mut Communicator, me: &RankData, choice: Choice) -> Outcome {
    let send = me.send.clone();
    let mut recv = me.recv_initial.clone();
    comm.choosing(choice).alltoall(&send[..], &mut recv[..])?;
    Ok(verdict(me, &recv))
}

/// Registered receive memory at the root in one case of two: both paths. Non-roots pass a
/// buffer of the root's size, which must be left alone.
fn gatherv(
    comm: &mut Communicator,
    me: &RankData,
    counts: &[usize],
    root: usize,
    choice: Choice,
) -> Outcome {
    let send = me.send.clone();
    if me.rank == root && root % 2 == 0 {
        let mut recv = comm.alloc(me.recv_initial.len())?;
        recv.copy_from_slice(&me.recv_initial.clone());
        comm.choosing(choice)
            .gatherv(&send[..], &mut recv, counts, root)?;
        return Ok(verdict(me, &recv));
    }
    let mut recv = me.recv_initial.clone();
    comm.choosing(choice)
        .gatherv(&send[..], &mut recv[..], counts, root)?;
    Ok(verdict(me, &recv))
}

fn scatterv(
    comm: &mut Communicator,
    me: &RankData,
    counts: &[usize],
    root: usize,
    choice: Choice,
) -> Outcome {
    let send = me.send.clone();
    let mut recv = comm.alloc(me.recv_initial.len())?;
    recv.copy_from_slice(&me.recv_initial.clone());
    comm.choosing(choice)
        .scatterv(&send[..], &mut recv, counts, root)?;
    Ok(verdict(me, &recv))
}

/// A check of a whole feature.
type Extra = fn(&mut Communicator) -> Outcome;

/// `split(rank % 2, p − rank)`: each group ordered by descending old rank, then an allgather
/// inside each group.
/// Every rank's own node agrees with every rank's map, and the communicator of this node holds
/// this node's ranks in rank order and carries a collective.
fn nodes(comm: &mut Communicator) -> Outcome {
    let mine = (comm.node() as u64).to_le_bytes();
    let mut all = vec![0u8; 8 * comm.size()];
    comm.allgather(&mine[..], &mut all[..])?;
    let told: Vec<usize> = all
        .chunks_exact(8)
        .map(|c| {
            c.iter()
                .rev()
                .fold(0usize, |n, &b| (n << 8) | usize::from(b))
        })
        .collect();
    if told != comm.node_map().node_of_each() {
        return Ok(Some(format!(
            "the ranks' own nodes {told:?}, this rank's map {:?}",
            comm.node_map().node_of_each()
        )));
    }
    let local = comm.local_ranks().to_vec();
    let mut sub = comm.split_by_node()?;
    let want_rank = local.iter().position(|&r| r == comm.rank());
    if sub.size() != local.len() || Some(sub.rank()) != want_rank || sub.nodes() != 1 {
        return Ok(Some(format!(
            "rank {} of {} on {} node(s) in the node's communicator, {want_rank:?} of {} on 1 \
             expected",
            sub.rank(),
            sub.size(),
            sub.nodes(),
            local.len()
        )));
    }
    let me = (comm.rank() as u64).to_le_bytes();
    let mut members = vec![0u8; 8 * sub.size()];
    sub.allgather(&me[..], &mut members[..])?;
    let want: Vec<u8> = local
        .iter()
        .flat_map(|&r| (r as u64).to_le_bytes())
        .collect();
    if members != want {
        return Ok(Some(format!(
            "allgather in the node's communicator: {members:?}, {want:?} expected"
        )));
    }
    // The parent still works after its child.
    comm.barrier()?;
    Ok(None)
}

fn split(comm: &mut Communicator) -> Outcome {
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
    let data = CaseData::new(Problem::Allgather {
        p: sub.size(),
        block: 3,
    });
    let mine = data.send(sub.rank());
    let mut all = data.recv_initial(sub.rank());
    sub.allgather(&mine[..], &mut all[..])?;
    if let Some(wrong) = verdict(&data.for_rank(sub.rank()), &all) {
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
fn intercomm(comm: &mut Communicator) -> Outcome {
    let (rank, p) = (comm.rank(), comm.size());
    if p < 2 {
        return Ok(None);
    }
    let side = if rank % 2 == 0 { Side::A } else { Side::B };
    let mut inter = comm.intercomm(side)?;
    let group =
        |s: Side| -> Vec<usize> { (0..p).filter(|r| (r % 2 == 0) == (s == Side::A)).collect() };
    let (a, b) = (group(Side::A), group(Side::B));
    let (local, remote) = match side {
        Side::A => (&a, &b),
        Side::B => (&b, &a),
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
    // This rank in the intergroup problem: A's ranks first, then B's.
    let index = match side {
        Side::A => inter.local_rank(),
        Side::B => a.len() + inter.local_rank(),
    };
    let count = |r: usize| (r * 37) % 100 + usize::from(r % 3 == 0) * 300;
    let local_counts: Vec<usize> = local.iter().map(|&r| count(r)).collect();
    let remote_counts: Vec<usize> = remote.iter().map(|&r| count(r)).collect();
    let problem = Problem::Intergroup {
        a: a.iter().map(|&r| count(r)).collect(),
        b: b.iter().map(|&r| count(r)).collect(),
    };
    let data = CaseData::new(problem.clone());
    let model = inter.comm().model();
    for algorithm in registry::applicable(&problem, &model)? {
        let name = algorithm.name();
        let send = data.send(index);
        let mut recv = inter.comm().alloc(data.recv_len(index))?;
        recv.copy_from_slice(&data.recv_initial(index));
        inter.allgatherv_using(
            &send[..],
            &mut recv,
            &local_counts,
            &remote_counts,
            Choice::Named(name),
        )?;
        if let Some(wrong) = verdict(&data.for_rank(index), &recv) {
            return Ok(Some(format!("allgatherv [{name}]: {wrong}")));
        }
    }
    // Allgather: each group has its own block size.
    let data = CaseData::generation(
        Problem::Intergroup {
            a: vec![5; a.len()],
            b: vec![9; b.len()],
        },
        1,
    );
    let send = data.send(index);
    let mut recv = data.recv_initial(index);
    inter.allgather(&send[..], &mut recv[..])?;
    Ok(verdict(&data.for_rank(index), &recv).map(|wrong| format!("allgather: {wrong}")))
}
