//! Every collective with every algorithm the registry lists for it, for p in {1, 2, 3, 5, 8},
//! as p threads of this process over `shm` and over `tcp;ofi_rxm`, bootstrapped in memory
//! ([`circulant::bootstrap::memory::Job`]). Each (collective, algorithm, p, provider) is its own
//! test, `collective::algorithm::pN::provider`, so that a failure names what broke; a test
//! checks that the generated set is exactly what the registry lists.

use std::collections::BTreeSet;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use circulant::bootstrap::memory::Job;
use circulant::comm::{Choice, Communicator, Config};
use circulant::plan::{registry, CostModel, Dtype, Problem, ReduceOp, Reduction};
use circulant_cli::cases::CaseData;

const PS: [usize; 5] = [1, 2, 3, 5, 8];
const SHM: &str = "shm";
const TCP: &str = "tcp;ofi_rxm";

/// Deadline of every fence and collective: generous for a loaded machine, short of a hang.
const DEADLINE: Duration = Duration::from_secs(30);

/// The problems one collective is tested with for p ranks: sizes 0, small and odd (not a
/// multiple of p), and a few thousand bytes; first and last root. Kept in one function so that
/// a shared module of test cases can replace it.
fn cases(collective: &str, p: usize) -> Vec<Problem> {
    let roots: Vec<usize> = if p > 1 { vec![0, p - 1] } else { vec![0] };
    // Uneven counts with empty parts: (3, 10, 6, 2, 9, 5, 1, 8, ...) and zeros at every third.
    let uneven = |scale: usize| -> Vec<usize> {
        (0..p)
            .map(|r| {
                if r % 3 == 1 {
                    0
                } else {
                    (r * 7 + 3) % 11 * scale
                }
            })
            .collect()
    };
    // One rank holds every byte: that rank's broadcast ([`circulant::plan::one_source`]).
    let mut one = vec![0; p];
    one[p / 2] = 1031;
    let counts = [vec![0; p], uneven(1), uneven(97), one];
    let reductions = [
        Reduction::new(Dtype::I64, ReduceOp::Sum),
        Reduction::new(Dtype::F64, ReduceOp::Max),
        Reduction::new(Dtype::U32, ReduceOp::Bxor),
    ]
    .map(|r| r.expect("valid reduction"));
    let mut out = Vec::new();
    match collective {
        "barrier" => out.push(Problem::Barrier { p }),
        "bcast" => {
            for bytes in [0, 13, 4099] {
                for &root in &roots {
                    out.push(Problem::Broadcast { p, root, bytes });
                }
            }
        }
        "allgather" | "alltoall" => {
            for block in [0, 5, 517] {
                out.push(if collective == "allgather" {
                    Problem::Allgather { p, block }
                } else {
                    Problem::Alltoall { p, block }
                });
            }
        }
        "allgatherv" => {
            for counts in counts {
                out.push(Problem::Allgatherv { counts });
            }
        }
        "allreduce" | "reduce" | "scan" | "exscan" => {
            for reduction in reductions {
                // 0, 13 and 1031 elements: prime counts, never a multiple of p > 1.
                for elements in [0, 13, 1031] {
                    let bytes = elements * reduction.dtype.size();
                    match collective {
                        "allreduce" => out.push(Problem::Allreduce {
                            p,
                            reduction,
                            bytes,
                        }),
                        "reduce" => {
                            for &root in &roots {
                                out.push(Problem::Reduce {
                                    p,
                                    root,
                                    reduction,
                                    bytes,
                                });
                            }
                        }
                        _ => out.push(Problem::Scan {
                            p,
                            reduction,
                            bytes,
                            exclusive: collective == "exscan",
                        }),
                    }
                }
            }
        }
        // Equal blocks of 0, 3 and 129 elements; parts of the uneven counts (zeros included) and
        // of one rank holding the whole vector, in elements.
        "reduce_scatter_block" | "reduce_scatter" => {
            for reduction in reductions {
                let size = reduction.dtype.size();
                if collective == "reduce_scatter_block" {
                    for elements in [0, 3, 129] {
                        out.push(Problem::ReduceScatterBlock {
                            p,
                            reduction,
                            block: elements * size,
                        });
                    }
                } else {
                    for counts in &counts {
                        out.push(Problem::ReduceScatter {
                            reduction,
                            counts: counts.iter().map(|c| c * size).collect(),
                        });
                    }
                }
            }
        }
        "gather" | "scatter" => {
            for block in [0, 5, 517] {
                for &root in &roots {
                    out.push(if collective == "gather" {
                        Problem::Gather { p, root, block }
                    } else {
                        Problem::Scatter { p, root, block }
                    });
                }
            }
        }
        "gatherv" | "scatterv" => {
            for counts in &counts {
                for &root in &roots {
                    let counts = counts.clone();
                    out.push(if collective == "gatherv" {
                        Problem::Gatherv { root, counts }
                    } else {
                        Problem::Scatterv { root, counts }
                    });
                }
            }
        }
        other => panic!("no cases for collective {other}"),
    }
    out
}

fn model() -> CostModel {
    Config::default().model_for(SHM)
}

/// The names of the algorithms the registry lists for `problem`.
fn applicable(problem: &Problem) -> Vec<&'static str> {
    registry::applicable(problem, &model())
        .expect("a valid problem")
        .iter()
        .map(|a| a.name())
        .collect()
}

/// Limits how many rank threads run at once: cargo runs tests in parallel, and many jobs of
/// p threads each on a small machine would mostly wait for cores and reach their deadlines.
struct Threads {
    running: Mutex<usize>,
    freed: Condvar,
}

const MAX_THREADS: usize = 8;

static THREADS: Threads = Threads {
    running: Mutex::new(0),
    freed: Condvar::new(),
};

struct Permit(usize);

impl Threads {
    fn acquire(&'static self, n: usize) -> Permit {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        // A job larger than the limit runs alone.
        while *running > 0 && *running + n > MAX_THREADS {
            running = self.freed.wait(running).unwrap_or_else(|e| e.into_inner());
        }
        *running += n;
        Permit(n)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut running = THREADS.running.lock().unwrap_or_else(|e| e.into_inner());
        *running -= self.0;
        THREADS.freed.notify_all();
    }
}

/// Runs `body` on each of p ranks, threads of this process over `provider`; every rank's
/// result (or why it could not join), in rank order. Every communicator stays open until all
/// ranks are done (see [`Departure`]).
fn in_job<T, F>(p: usize, provider: &str, body: F) -> Vec<Result<T, String>>
where
    T: Send,
    F: Fn(&mut Communicator) -> Result<T, String> + Sync,
{
    let _permit = THREADS.acquire(p);
    let bootstraps = Job::new(p).expect("a job").timeout(DEADLINE).bootstraps();
    let config = Config {
        provider: Some(provider.to_string()),
        deadline: DEADLINE,
        // Every algorithm of the registry runs as named; the barrier, which cannot be named,
        // would otherwise run on the shared segment (tests/segment_jobs.rs).
        segment_limit: 0,
        ..Config::default()
    };
    let departure = Departure::new(p);
    std::thread::scope(|s| {
        let handles: Vec<_> = bootstraps
            .into_iter()
            .map(|bootstrap| {
                let (config, body, departure) = (config.clone(), &body, &departure);
                s.spawn(move || {
                    let rank = bootstrap.rank();
                    // Dropped after `_leave`, also when `body` panics.
                    let mut comm = Communicator::init_over(bootstrap, config)
                        .map_err(|e| format!("rank {rank}: init: {e}"));
                    let _leave = departure.on_drop();
                    let comm = comm.as_mut().map_err(|e| e.clone())?;
                    body(comm).map_err(|e| format!("rank {rank}: {e}"))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("the thread panicked".into()))
            })
            .collect()
    })
}

/// Holds every rank's communicator open until all ranks of the job are done with theirs.
///
/// libfabric's shm provider (1.17) reaches a peer endpoint of the same process through that
/// endpoint's own mapping of its region rather than a mapping of its own, so a rank that
/// closes its endpoint unmaps memory its sibling threads may still touch while they complete
/// (SIGSEGV in the provider's progress). Separate processes keep their own mappings.
struct Departure {
    left: Mutex<usize>,
    all_left: Condvar,
    size: usize,
}

/// Arrives at its [`Departure`] and waits for the others when dropped.
struct Leave<'a>(&'a Departure);

impl Departure {
    fn new(size: usize) -> Self {
        Departure {
            left: Mutex::new(0),
            all_left: Condvar::new(),
            size,
        }
    }

    fn on_drop(&self) -> Leave<'_> {
        Leave(self)
    }
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        let departure = self.0;
        let mut left = departure.left.lock().unwrap_or_else(|e| e.into_inner());
        *left += 1;
        departure.all_left.notify_all();
        // Every rank's operations end within their deadline; this bound only keeps a bug from
        // hanging the test.
        let until = Instant::now() + 2 * DEADLINE;
        while *left < departure.size {
            let now = Instant::now();
            if now >= until {
                break;
            }
            left = departure
                .all_left
                .wait_timeout(left, until - now)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
}

/// Runs `case` with `algorithm` on this rank and checks the result against the definition
/// ([`CaseData::expected`]; where nothing is demanded, the buffer must be left alone).
fn check(
    comm: &mut Communicator,
    case: &CaseData,
    algorithm: &str,
    registered: bool,
) -> Result<(), String> {
    let rank = comm.rank();
    let problem = case.problem();
    let choice = Choice::Named(algorithm);
    let send = case.send(rank);
    let start = case.recv_initial(rank);
    let want = case.expected(rank);
    // Registered receive memory in one case of two, plain memory in the other: both paths.
    let mut plain = start.clone();
    let mut buffer = if registered {
        let mut b = comm.alloc(start.len()).map_err(|e| e.to_string())?;
        b.copy_from_slice(&start);
        Some(b)
    } else {
        None
    };
    let recv: &mut [u8] = match buffer.as_mut() {
        Some(b) => b,
        None => &mut plain,
    };
    let send = &send[..];
    let done = match problem {
        Problem::Barrier { .. } => comm.barrier(),
        Problem::Broadcast { root, .. } => comm.choosing(choice).bcast(recv, *root),
        Problem::Reduce {
            root, reduction, ..
        } => comm
            .choosing(choice)
            .reduce_bytes(send, recv, *reduction, *root),
        Problem::Allreduce { reduction, .. } => comm
            .choosing(choice)
            .allreduce_bytes(send, recv, *reduction),
        Problem::Scan {
            reduction,
            exclusive,
            ..
        } if *exclusive => comm.choosing(choice).exscan_bytes(send, recv, *reduction),
        Problem::Scan { reduction, .. } => comm.choosing(choice).scan_bytes(send, recv, *reduction),
        Problem::Allgather { .. } => comm.choosing(choice).allgather(send, recv),
        Problem::Allgatherv { counts } => comm.choosing(choice).allgatherv(send, recv, counts),
        Problem::Scatter { root, .. } => comm.choosing(choice).scatter(send, recv, *root),
        Problem::Gather { root, .. } => comm.choosing(choice).gather(send, recv, *root),
        Problem::Scatterv { root, counts } => {
            comm.choosing(choice).scatterv(send, recv, counts, *root)
        }
        Problem::Gatherv { root, counts } => {
            comm.choosing(choice).gatherv(send, recv, counts, *root)
        }
        Problem::Alltoall { .. } => comm.choosing(choice).alltoall(send, recv),
        Problem::Intergroup { .. } => return Err("intergroup is not a one-call collective".into()),
        Problem::ReduceScatterBlock { reduction, .. } => comm
            .choosing(choice)
            .reduce_scatter_block_bytes(send, recv, *reduction),
        Problem::ReduceScatter { reduction, counts } => {
            let size = reduction.dtype.size();
            let elements: Vec<usize> = counts.iter().map(|c| c / size).collect();
            comm.choosing(choice)
                .reduce_scatter_bytes(send, recv, *reduction, &elements)
        }
    };
    done.map_err(|e| format!("{problem:?}: {e}"))?;
    let ran = comm.last().map(|e| e.algorithm);
    if ran != Some(algorithm) {
        return Err(format!("{problem:?}: ran {ran:?}, not {algorithm}"));
    }
    want.check(recv)
        .map_err(|mismatch| format!("{problem:?}: {mismatch}"))
}

/// One generated test: every case of `collective` for p ranks that `algorithm` applies to.
fn run(collective: &str, algorithm: &str, p: usize, provider: &str) {
    let cases: Vec<CaseData> = cases(collective, p)
        .into_iter()
        .filter(|problem| applicable(problem).contains(&algorithm))
        .map(CaseData::new)
        .collect();
    assert!(
        !cases.is_empty(),
        "{algorithm} applies to no case of {collective} for p = {p}"
    );
    let results = in_job(p, provider, |comm| {
        for (i, case) in cases.iter().enumerate() {
            check(comm, case, algorithm, i % 2 == 1)?;
        }
        Ok(())
    });
    let failures: Vec<String> = results.into_iter().filter_map(Result::err).collect();
    assert!(
        failures.is_empty(),
        "{collective} with {algorithm}, p = {p}, over {provider}:\n{}",
        failures.join("\n")
    );
}

/// `collective { algorithm_module = "algorithm-name": p1 p2 ... / tcp: p1 p2 ...; }`: per
/// collective and algorithm, one test per p over shm (`...::shm::pN`) and one per p over
/// tcp;ofi_rxm (`...::tcp_rxm::pN`); and `GENERATED`, the list of all of them.
macro_rules! collective_tests {
    ($($collective:ident {
        $($module:ident = $algorithm:literal: $($p:ident)+ / tcp: $($q:ident)+;)+
    })+) => {
        $(mod $collective {
            $(mod $module {
                mod shm {
                    $(#[test]
                    fn $p() {
                        crate::run(stringify!($collective), $algorithm, crate::p_of(stringify!($p)), crate::SHM);
                    })+
                }
                mod tcp_rxm {
                    $(#[test]
                    fn $q() {
                        crate::run(stringify!($collective), $algorithm, crate::p_of(stringify!($q)), crate::TCP);
                    })+
                }
            })+
        })+

        /// (collective, algorithm, p over shm, p over tcp;ofi_rxm) of every generated test.
        const GENERATED: &[(&str, &str, &[&str], &[&str])] = &[
            $($((stringify!($collective), $algorithm, &[$(stringify!($p)),+], &[$(stringify!($q)),+]),)+)+
        ];
    };
}

/// The p of a test named `pN`.
fn p_of(name: &str) -> usize {
    name[1..].parse().expect("a test name pN")
}

// Over tcp;ofi_rxm up to p = 5: setting up a job of 8 ranks takes about a second there, and
// the whole file has to stay within its time budget.
collective_tests! {
    barrier {
        dissemination_barrier = "dissemination-barrier": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
    }
    bcast {
        circulant_bcast = "circulant-bcast": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        binomial_bcast = "binomial-bcast": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        scatter_allgather_bcast = "scatter-allgather-bcast": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        round_robin_bcast = "round-robin-bcast": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
    }
    allgather {
        circulant_allgather = "circulant-allgather": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        circulant_allgatherv = "circulant-allgatherv": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        ring_allgather = "ring-allgather": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        recursive_doubling_allgather = "recursive-doubling-allgather": p1 p2 p8 / tcp: p1 p2;
        bruck_allgather = "bruck-allgather": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        pipelined_ring_allgatherv = "pipelined-ring-allgatherv": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
    }
    allgatherv {
        circulant_allgatherv = "circulant-allgatherv": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        pipelined_ring_allgatherv = "pipelined-ring-allgatherv": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        // Counts that are all equal are an allgather.
        circulant_allgather = "circulant-allgather": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        ring_allgather = "ring-allgather": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        recursive_doubling_allgather = "recursive-doubling-allgather": p1 p2 p8 / tcp: p1 p2;
        bruck_allgather = "bruck-allgather": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        // Counts of one rank are its broadcast.
        circulant_bcast = "circulant-bcast": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        binomial_bcast = "binomial-bcast": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        scatter_allgather_bcast = "scatter-allgather-bcast": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        round_robin_bcast = "round-robin-bcast": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
    }
    allreduce {
        recursive_doubling_allreduce = "recursive-doubling-allreduce": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        reduce_scatter_allgather = "reduce-scatter-allgather": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        circulant_census = "circulant-census": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        circulant_allreduce = "circulant-allreduce": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        circulant_reduce_bcast = "circulant-reduce-bcast": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
    }
    reduce {
        binomial_reduce = "binomial-reduce": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        circulant_reduce = "circulant-reduce": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
    }
    reduce_scatter_block {
        circulant_reduce_scatter = "circulant-reduce-scatter": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        ring_reduce_scatter = "ring-reduce-scatter": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
    }
    reduce_scatter {
        circulant_reduce_scatter = "circulant-reduce-scatter": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        ring_reduce_scatter = "ring-reduce-scatter": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
    }
    scan {
        hypercube_scan = "hypercube-scan": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
    }
    exscan {
        hypercube_scan = "hypercube-scan": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
    }
    gather {
        binomial_gather = "binomial-gather": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
    }
    scatter {
        binomial_scatter = "binomial-scatter": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
    }
    gatherv {
        binomial_gatherv = "binomial-gatherv": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        linear_gatherv = "linear-gatherv": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
    }
    scatterv {
        binomial_scatterv = "binomial-scatterv": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
        linear_scatterv = "linear-scatterv": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
    }
    alltoall {
        pairwise_alltoall = "pairwise-alltoall": p1 p2 p3 p5 p8 / tcp: p1 p2 p3 p5;
    }
}

/// The tests over shm are exactly the (collective, algorithm, p) the registry lists for the
/// cases: none missing, none that applies to nothing; those over tcp;ofi_rxm a subset that
/// still has every algorithm of every collective.
#[test]
fn generated_tests_match_the_registry() {
    let mut collectives: Vec<&str> = GENERATED.iter().map(|g| g.0).collect();
    collectives.dedup();
    let mut listed = BTreeSet::new();
    for &collective in &collectives {
        for p in PS {
            for problem in cases(collective, p) {
                for algorithm in applicable(&problem) {
                    listed.insert((collective, algorithm, p));
                }
            }
        }
    }
    let expand = |tcp: bool| -> BTreeSet<(&str, &str, usize)> {
        GENERATED
            .iter()
            .flat_map(|&(c, a, shm, over_tcp)| {
                let ps = if tcp { over_tcp } else { shm };
                ps.iter().map(move |p| (c, a, p_of(p)))
            })
            .collect()
    };
    let (shm, tcp) = (expand(false), expand(true));
    let missing: Vec<_> = listed.difference(&shm).collect();
    let extra: Vec<_> = shm.difference(&listed).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "listed by the registry but not generated: {missing:?}\ngenerated but not applicable: {extra:?}"
    );
    let beyond: Vec<_> = tcp.difference(&listed).collect();
    assert!(beyond.is_empty(), "over tcp but not applicable: {beyond:?}");
    let pairs = |set: &BTreeSet<(&str, &str, usize)>| -> BTreeSet<(String, String)> {
        set.iter()
            .map(|(c, a, _)| (c.to_string(), a.to_string()))
            .collect()
    };
    assert_eq!(
        pairs(&tcp),
        pairs(&listed),
        "an algorithm never runs over tcp"
    );
}

/// Rank 2 of 3 leaves after start-up, dropping its communicator; the others' allreduce must
/// fail within their deadline (2 s), not hang. Returns what each rank's allreduce gave and how
/// long it took.
fn a_rank_leaves(provider: &str, drop_it: bool) -> Vec<(Result<(), String>, Duration)> {
    const P: usize = 3;
    let _permit = THREADS.acquire(P);
    let bootstraps = Job::new(P).expect("a job").timeout(DEADLINE).bootstraps();
    let config = Config {
        provider: Some(provider.to_string()),
        deadline: DEADLINE,
        ..Config::default()
    };
    let started = std::sync::Barrier::new(P);
    let departure = Departure::new(P);
    std::thread::scope(|s| {
        let handles: Vec<_> = bootstraps
            .into_iter()
            .map(|bootstrap| {
                let (config, started, departure) = (config.clone(), &started, &departure);
                s.spawn(move || {
                    let mut comm = Communicator::init_over(bootstrap, config);
                    started.wait();
                    let comm = match comm.as_mut() {
                        Ok(comm) => comm,
                        Err(e) => return (Err(format!("init: {e}")), Duration::ZERO),
                    };
                    if comm.rank() == P - 1 {
                        if drop_it {
                            return (Ok(()), Duration::ZERO);
                        }
                        // Gone from the job, but its endpoint stays open until the others are
                        // done (see `Departure`).
                        let _leave = departure.on_drop();
                        return (Ok(()), Duration::ZERO);
                    }
                    let _leave = (!drop_it).then(|| departure.on_drop());
                    comm.set_deadline(Duration::from_secs(2));
                    let send = vec![1i64; 1000];
                    let mut recv = vec![0i64; 1000];
                    let clock = Instant::now();
                    let result = comm
                        .allreduce(&send, &mut recv, ReduceOp::Sum)
                        .map_err(|e| e.to_string());
                    (result, clock.elapsed())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a rank's thread panicked"))
            .take(P - 1)
            .collect()
    })
}

fn assert_the_others_fail(results: Vec<(Result<(), String>, Duration)>) {
    for (rank, (result, took)) in results.into_iter().enumerate() {
        let error = result.expect_err("an allreduce without rank 2 must fail");
        assert!(
            took < Duration::from_secs(10),
            "rank {rank} failed only after {took:?}: {error}"
        );
        assert!(!error.is_empty());
    }
}

#[test]
fn a_rank_that_drops_its_communicator_fails_the_others_over_tcp() {
    assert_the_others_fail(a_rank_leaves(TCP, true));
}

#[test]
fn a_rank_that_returns_early_fails_the_others_over_shm() {
    assert_the_others_fail(a_rank_leaves(SHM, false));
}

/// The write-overhead probe: every rank gets rank 0's value, a finite o ≥ 0, and the
/// communicator goes on with the next collective (the probe kept the sequence of operations).
fn write_overhead_is_measured_alike(provider: &str, p: usize) {
    let results = in_job(p, provider, |comm| {
        let o = comm.measure_write_overhead().map_err(|e| e.to_string())?;
        let mut data = vec![comm.rank() as u8 + 1; 3];
        comm.bcast(&mut data[..], p - 1)
            .map_err(|e| e.to_string())?;
        if data != vec![p as u8; 3] {
            return Err(format!("bcast after the probe gave {data:?}"));
        }
        Ok(o)
    });
    let values: Vec<f64> = results
        .into_iter()
        .map(|r| r.expect("the probe and the broadcast after it succeed"))
        .collect();
    assert!(values.iter().all(|&o| o == values[0]), "{values:?}");
    assert!(values[0].is_finite() && values[0] >= 0.0, "{values:?}");
    let configured = Config::default().model_for(provider).o;
    if p == 1 {
        // Nothing to measure: the configured model's o.
        assert_eq!(values[0], configured);
    } else {
        // A measured time, not the configured estimate.
        assert_ne!(values[0], configured);
    }
}

#[test]
fn the_write_overhead_is_measured_alike_on_every_rank_over_shm() {
    for p in [1, 2, 3] {
        write_overhead_is_measured_alike("shm", p);
    }
}

#[test]
fn the_write_overhead_is_measured_alike_on_every_rank_over_tcp() {
    for p in [2, 3] {
        write_overhead_is_measured_alike("tcp;ofi_rxm", p);
    }
}
