//! One-sided RMA through the real libfabric: for each provider, two endpoints in one process
//! (each in its own fabric and domain, as two ranks would be) write into each other's
//! registered memory with remote CQ data, and the target checks bytes and CQ data; the same
//! writes also run between two processes (the test binary re-executed as the target).
//!
//! Providers: `tcp;ofi_rxm` and `sockets` must be present (the project's baseline); `shm` and
//! `udp;ofi_rxd` are skipped with a message when libfabric does not offer them, except under
//! CI (`CI=true`), where Debian's libfabric offers them and a skip fails. tcp, sockets
//! and udp are bound to 127.0.0.1. The `*_verbs_mr` tests force the verbs-like `mr_mode`
//! (`FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY`) on the domain, since
//! providers only report the bits they require (0 or `FI_MR_VIRT_ADDR` here); tcp;ofi_rxm gets
//! the set without `FI_MR_VIRT_ADDR` (see `VERBS_BUT_OFFSETS`).
//!
//! What a refused write (wrong key, outside the region) does, in libfabric 1.17: sockets and
//! tcp;ofi_rxm report an error completion to a delivery-complete write; shm and udp;ofi_rxd drop
//! it at the target and never complete it. No provider writes the bytes or reports an arrival.
//! The same holds for a write into a region registered without remote access (`local_only`);
//! a read from a region without remote read access is refused except by shm
//! (`write_only_read`). Keys are random (`random_keys`).
//! Every test runs under a watchdog and every wait has a deadline.

mod common;

use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use circulant::fabric::{
    Access, Address, AddressVector, Completion, CompletionQueue, Domain, Endpoint, FabricError,
    Hints, Info, MrMode, Post, RegisteredMemory, RemoteRange, RemoteRegion, WriteFlags,
};

/// Longest any single test may take before the watchdog fails it.
const TEST_LIMIT: Duration = Duration::from_secs(60);
/// Longest a wait for completions may take.
const DEADLINE: Duration = Duration::from_secs(15);

/// Runs `body` on its own thread and fails the test if it does not finish within TEST_LIMIT,
/// so that a provider that hangs turns into a failure instead of a stuck test run.
fn bounded(name: &str, body: impl FnOnce() + Send + 'static) {
    let (done_tx, done_rx) = mpsc::channel();
    let worker = thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            body();
            let _ = done_tx.send(());
        })
        .expect("spawn test thread");
    match done_rx.recv_timeout(TEST_LIMIT) {
        Ok(()) => {
            let _ = worker.join();
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The body panicked: re-raise its panic here.
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{name}: not finished after {TEST_LIMIT:?}")
        }
    }
}

/// Which provider, bound where, with which mr_mode hints.
#[derive(Clone, Copy, Debug)]
struct Config {
    provider: &'static str,
    node: Option<&'static str>,
    required: bool,
    /// The provider drops a write with a bad key or range at the target without telling the
    /// initiator (no completion at all, even with FI_DELIVERY_COMPLETE).
    silent_refusal: bool,
    /// The mr_mode to force on the domain for the `*_verbs_mr` tests, `None` for the
    /// provider's own choice.
    forced_mr: Option<MrMode>,
}

impl Config {
    fn hints(&self) -> Hints {
        let mut hints = Hints::rdm_rma().provider(self.provider);
        if let Some(node) = self.node {
            hints = hints.node(node);
        }
        if let Some(mr_mode) = self.forced_mr {
            hints = hints.mr_mode(mr_mode);
        }
        hints
    }

    /// The info to open, or `None` (with the reason printed) if the test is to be skipped; a
    /// failure under CI, whose libfabric (Debian's 1.17) offers every provider and mr_mode here.
    fn info(&self) -> Option<Info> {
        let infos = Info::query(&self.hints()).expect("fi_getinfo");
        let info = infos
            .into_iter()
            .find(|i| i.provider() == self.provider && i.cq_data_size() >= 4);
        match info {
            Some(info) if self.forced_mr.is_some() => {
                // Providers report only the bits they require; ask the domain to operate with
                // the whole verbs-like set, so that keys, descriptors and virtual addresses
                // take the paths a verbs provider needs.
                let mr_mode = info.mr_mode() | self.forced_mr.unwrap_or_default();
                let forced = info.with_mr_mode(mr_mode);
                match Domain::open(&forced) {
                    Ok(_) => Some(forced),
                    Err(err) => {
                        common::missing(
                            &format!("{} with mr_mode {mr_mode}", self.provider),
                            &format!("refused: {err}"),
                        );
                        None
                    }
                }
            }
            Some(info) => Some(info),
            None if self.required && self.forced_mr.is_none() => panic!(
                "provider {} with RDM, RMA and remote CQ data is required but not offered",
                self.provider
            ),
            None => {
                common::missing(
                    &format!(
                        "an RDM/RMA endpoint of {} with remote CQ data for {}",
                        self.provider,
                        if self.forced_mr.is_some() {
                            "the forced mr_mode"
                        } else {
                            "the default hints"
                        }
                    ),
                    "Debian's libfabric (ci/deps) offers one",
                );
                None
            }
        }
    }
}

/// One rank's objects. Field order is irrelevant for closing: the layer orders it.
struct Side {
    ep: Endpoint,
    cq: CompletionQueue,
    _av: AddressVector,
    _domain: Domain,
    peer: Address,
}

fn open_side(info: &Info) -> (Domain, CompletionQueue, AddressVector, Endpoint) {
    let domain = Domain::open(info).expect("open domain");
    let cq = CompletionQueue::open(&domain, 0).expect("open cq");
    let av = AddressVector::open(&domain, 2).expect("open av");
    let ep = Endpoint::open(&domain, &av, &cq, &cq).expect("open endpoint");
    (domain, cq, av, ep)
}

/// Two connected ranks, `a` (initiator) and `b` (target).
fn pair(info: &Info) -> (Side, Side) {
    let (da, cqa, ava, epa) = open_side(info);
    let (db, cqb, avb, epb) = open_side(info);
    let name_a = epa.name().expect("name a");
    let name_b = epb.name().expect("name b");
    let peer_of_a = ava.insert(&name_b).expect("insert b into a");
    let peer_of_b = avb.insert(&name_a).expect("insert a into b");
    (
        Side {
            ep: epa,
            cq: cqa,
            _av: ava,
            _domain: da,
            peer: peer_of_a,
        },
        Side {
            ep: epb,
            cq: cqb,
            _av: avb,
            _domain: db,
            peer: peer_of_b,
        },
    )
}

/// What both completion queues produced while progressing.
#[derive(Default)]
struct Events {
    a: Vec<Completion>,
    b: Vec<Completion>,
    errors: Vec<FabricError>,
}

/// One round of progress on both sides (manual progress needs both); returns how many
/// completions (or completion errors) were read. Completion errors are collected, not fatal.
fn step(a: &Side, b: &Side, events: &mut Events) -> usize {
    let mut got = 0;
    for (side, out) in [(a, &mut events.a), (b, &mut events.b)] {
        match side.cq.poll(out) {
            Ok(n) => got += n,
            Err(err @ FabricError::Completion { .. }) => {
                got += 1;
                events.errors.push(err);
            }
            Err(err) => panic!("cq read failed: {err}"),
        }
        side.ep
            .replenish_cq_data_receives()
            .expect("replenish receives");
    }
    got
}

/// Progresses both sides until `done` holds or the deadline passes.
fn progress(a: &Side, b: &Side, events: &mut Events, done: impl Fn(&Events) -> bool) -> bool {
    progress_for(a, b, events, DEADLINE, done)
}

/// Progresses both sides until `done` holds or `window` has passed.
fn progress_for(
    a: &Side,
    b: &Side,
    events: &mut Events,
    window: Duration,
    done: impl Fn(&Events) -> bool,
) -> bool {
    let deadline = Instant::now() + window;
    let mut idle = 0u32;
    loop {
        if done(events) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        if step(a, b, events) > 0 {
            idle = 0;
        } else {
            idle += 1;
            if idle > 64 {
                thread::sleep(Duration::from_micros(100));
            } else {
                thread::yield_now();
            }
        }
    }
}

/// Posts with retries on -FI_EAGAIN (progressing both sides in between).
fn post(
    a: &Side,
    b: &Side,
    events: &mut Events,
    mut op: impl FnMut() -> Result<Post, FabricError>,
) {
    let deadline = Instant::now() + DEADLINE;
    while op().expect("post") == Post::Again {
        assert!(
            Instant::now() < deadline,
            "still -FI_EAGAIN at the deadline"
        );
        step(a, b, events);
        thread::yield_now();
    }
}

/// Deterministic test bytes, different for every `seed`.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

const GUARD: usize = 64;
const FILL: u8 = 0xA5;

/// A target region of `len` bytes filled with FILL, registered for `access`.
fn filled(side: &Side, len: usize, access: Access) -> RegisteredMemory {
    let mut mem = RegisteredMemory::for_endpoint(&side.ep, len, access).expect("register");
    mem.write(0, &vec![FILL; len]).expect("fill");
    mem
}

/// `fi_writedata` of each size from a to b, each with its own CQ data; the target checks the
/// bytes, the guard bytes around them and the CQ data; the initiator checks its completion.
fn write_sizes(cfg: Config) {
    let Some(info) = cfg.info() else { return };
    let (a, b) = pair(&info);
    let inject = info.inject_size();
    let sizes = [0, 1, 4096, (1 << 20) + 3, inject + 1];
    let mut events = Events::default();
    for (i, &size) in sizes.iter().enumerate() {
        let seed = i as u64 + 1;
        let bytes = pattern(size, seed);
        let mut src =
            RegisteredMemory::for_endpoint(&a.ep, size.max(1) + 5, Access::Local).expect("src");
        src.write(5, &bytes).expect("src bytes");
        let dst = filled(&b, size + 2 * GUARD, Access::RemoteWrite);
        let remote = dst
            .remote()
            .range(GUARD as u64, size as u64)
            .expect("range");
        let data = 0xC1C0_0000 + i as u64;
        let context = 100 + i as u64;
        post(&a, &b, &mut events, || {
            a.ep.write(src.range(5, size)?, a.peer, remote, Some(data), context)
        });
        let ok = progress(&a, &b, &mut events, |e| {
            !e.errors.is_empty()
                || (e.a.iter().any(|c| c.context == Some(context))
                    && e.b.iter().any(|c| c.data == Some(data)))
        });
        assert!(
            events.errors.is_empty(),
            "{}: write of {size} B failed: {:?}",
            cfg.provider,
            events.errors
        );
        assert!(ok, "{}: write of {size} B did not complete", cfg.provider);
        let arrival = events
            .b
            .iter()
            .find(|c| c.data == Some(data))
            .copied()
            .expect("arrival");
        assert!(arrival.is_remote_write_data(), "flags {:#x}", arrival.flags);
        assert_eq!(arrival.context, None);
        let got = dst.to_vec();
        assert_eq!(&got[..GUARD], &[FILL; GUARD][..], "{size} B: bytes before");
        assert!(
            got[GUARD..GUARD + size] == bytes[..],
            "{}: {size} B differ",
            cfg.provider
        );
        assert_eq!(
            &got[GUARD + size..],
            &[FILL; GUARD][..],
            "{size} B: bytes after"
        );
        // Nothing but our arrivals on b, in order.
        assert_eq!(
            events.b.iter().filter(|c| c.is_remote_write_data()).count(),
            i + 1
        );
    }
    assert_eq!(a.cq.in_flight(), 0, "every local write completed");
}

/// One `fi_writemsg` gathering three local ranges (in two regions) into one remote range, then
/// (where rma_iov_limit allows) a pair of writes posted with FI_MORE scattering into two remote
/// ranges; all with CQ data.
fn write_msg(cfg: Config) {
    let Some(info) = cfg.info() else { return };
    assert!(info.iov_limit() >= 3, "iov_limit {}", info.iov_limit());
    let (a, b) = pair(&info);
    let mut events = Events::default();

    let p1 = pattern(1000, 11);
    let p2 = pattern(3000, 12);
    let p3 = pattern(77, 13);
    let mut s1 = RegisteredMemory::for_endpoint(&a.ep, 8192, Access::Local).expect("s1");
    let mut s2 = RegisteredMemory::for_endpoint(&a.ep, 4096, Access::Local).expect("s2");
    s1.write(10, &p1).expect("p1");
    s1.write(5000, &p3).expect("p3");
    s2.write(1, &p2).expect("p2");
    let dst = filled(&b, 8192, Access::RemoteWrite);
    let total = p1.len() + p2.len() + p3.len();
    let remote = dst.remote().range(100, total as u64).expect("remote");
    post(&a, &b, &mut events, || {
        a.ep.write_msg(
            &[
                s1.range(10, p1.len())?,
                s2.range(1, p2.len())?,
                s1.range(5000, p3.len())?,
            ],
            a.peer,
            &[remote],
            Some(0xABCD),
            WriteFlags::NONE,
            7,
        )
    });
    let ok = progress(&a, &b, &mut events, |e| {
        !e.errors.is_empty()
            || (e.a.iter().any(|c| c.context == Some(7))
                && e.b.iter().any(|c| c.data == Some(0xABCD)))
    });
    assert!(events.errors.is_empty(), "{:?}", events.errors);
    assert!(ok, "{}: writemsg did not complete", cfg.provider);
    let got = dst.to_vec();
    let expected: Vec<u8> = [&p1[..], &p2[..], &p3[..]].concat();
    assert!(
        got[100..100 + total] == expected[..],
        "gathered bytes differ"
    );
    assert!(got[..100].iter().all(|&x| x == FILL));
    assert!(got[100 + total..].iter().all(|&x| x == FILL));

    if info.rma_iov_limit() >= 2 {
        // Scatter: 1000 local bytes into two remote ranges, then a second write, FI_MORE on
        // the first so the provider may batch them.
        let r1 = dst.remote().range(6000, 400).expect("r1");
        let r2 = dst.remote().range(7000, 600).expect("r2");
        post(&a, &b, &mut events, || {
            a.ep.write_msg(
                &[s1.range(10, 1000)?],
                a.peer,
                &[r1, r2],
                Some(0xD1),
                WriteFlags::MORE,
                8,
            )
        });
        let r3 = dst.remote().range(7700, 77).expect("r3");
        post(&a, &b, &mut events, || {
            a.ep.write_msg(
                &[s1.range(5000, 77)?],
                a.peer,
                &[r3],
                Some(0xD2),
                WriteFlags::NONE,
                9,
            )
        });
        let ok = progress(&a, &b, &mut events, |e| {
            !e.errors.is_empty()
                || (e.a.iter().any(|c| c.context == Some(8))
                    && e.a.iter().any(|c| c.context == Some(9))
                    && e.b.iter().any(|c| c.data == Some(0xD1))
                    && e.b.iter().any(|c| c.data == Some(0xD2)))
        });
        assert!(events.errors.is_empty(), "{:?}", events.errors);
        assert!(ok, "{}: scattered writes did not complete", cfg.provider);
        let got = dst.to_vec();
        assert!(got[6000..6400] == p1[..400]);
        assert!(got[7000..7600] == p1[400..1000]);
        assert!(got[7700..7777] == p3[..]);
        assert!(got[6400..7000].iter().all(|&x| x == FILL));
    } else {
        common::missing(
            &format!("an rma_iov_limit of 2 on {}", cfg.provider),
            &format!("it has {}; the scatter part needs 2", info.rma_iov_limit()),
        );
    }
    assert_eq!(a.cq.in_flight(), 0);
}

/// `fi_inject_writedata` (bytes copied at once, no local completion) and `fi_read` back.
fn inject_and_read(cfg: Config) {
    let Some(info) = cfg.info() else { return };
    let (a, b) = pair(&info);
    let mut events = Events::default();
    let size = info.inject_size().min(64);
    let bytes = pattern(size, 21);
    let dst = filled(&b, 4096, Access::RemoteReadWrite);
    let remote = dst.remote().range(8, size as u64).expect("remote");
    post(&a, &b, &mut events, || {
        a.ep.inject_write(&bytes, a.peer, remote, Some(0x1_0001))
    });
    let ok = progress(&a, &b, &mut events, |e| {
        !e.errors.is_empty() || e.b.iter().any(|c| c.data == Some(0x1_0001))
    });
    assert!(events.errors.is_empty(), "{:?}", events.errors);
    assert!(ok, "{}: inject did not arrive", cfg.provider);
    assert!(dst.to_vec()[8..8 + size] == bytes[..]);
    assert!(events.a.is_empty(), "inject reports no local completion");

    // Read 4 KiB of the target's region back.
    let mut dst_mut = dst;
    let far = pattern(4000, 22);
    dst_mut.write(50, &far).expect("far bytes");
    let local = RegisteredMemory::for_endpoint(&a.ep, 4096, Access::Local).expect("local");
    let remote = dst_mut.remote().range(50, 4000).expect("remote");
    post(&a, &b, &mut events, || {
        a.ep.read(local.range(96, 4000)?, a.peer, remote, 5)
    });
    let ok = progress(&a, &b, &mut events, |e| {
        !e.errors.is_empty() || e.a.iter().any(|c| c.context == Some(5))
    });
    assert!(events.errors.is_empty(), "{:?}", events.errors);
    assert!(ok, "{}: read did not complete", cfg.provider);
    assert!(local.to_vec()[96..4096] == far[..]);
}

/// Posts with retries on -FI_EAGAIN (progressing both sides in between); an error at post
/// (a refusal) is returned.
fn post_refusable(
    a: &Side,
    b: &Side,
    events: &mut Events,
    mut op: impl FnMut() -> Result<Post, FabricError>,
) -> Result<(), FabricError> {
    loop {
        match op()? {
            Post::Posted => return Ok(()),
            Post::Again => {
                step(a, b, events);
            }
        }
    }
}

/// Progresses until operation `context` completes or fails, and returns whether it did.
/// Providers that drop a refused operation silently never complete it: for them this watches
/// for a while, and the caller checks what they do guarantee (nothing done, nothing reported).
fn settle_refusal(
    cfg: Config,
    what: &str,
    a: &Side,
    b: &Side,
    events: &mut Events,
    context: u64,
) -> bool {
    let window = if cfg.silent_refusal {
        Duration::from_secs(2)
    } else {
        DEADLINE
    };
    let settled = progress_for(a, b, events, window, |e| {
        !e.errors.is_empty() || e.a.iter().any(|c| c.context == Some(context))
    });
    assert!(
        settled || cfg.silent_refusal,
        "{} {what}: neither a completion nor an error",
        cfg.provider
    );
    settled
}

/// A write the target must refuse, into a region registered for `access`, `bad(remote region,
/// its range)` giving the target range. The refusal may be the post's error or an error
/// completion on either side; no successful arrival may be reported and the target's bytes
/// must be untouched.
fn refused_write(
    cfg: Config,
    what: &str,
    access: Access,
    bad: fn(RemoteRange, u64) -> RemoteRange,
) {
    let Some(info) = cfg.info() else { return };
    let (a, b) = pair(&info);
    let mut events = Events::default();
    let size = 4096;
    let mut src = RegisteredMemory::for_endpoint(&a.ep, size, Access::Local).expect("src");
    src.write(0, &pattern(size, 31)).expect("src bytes");
    let dst = filled(&b, 8192, access);
    let remote = dst.remote().range(0, size as u64).expect("range");
    let target = bad(remote, dst.len() as u64);
    let posted = post_refusable(&a, &b, &mut events, || {
        // Delivery-complete: the initiator's completion waits for the target's verdict.
        let local = [src.range(0, size)?];
        a.ep.write_msg(
            &local,
            a.peer,
            &[target],
            Some(0xBAD),
            WriteFlags::DELIVERY_COMPLETE,
            1,
        )
    });
    match posted {
        Err(err) => eprintln!("{} {what}: refused at post: {err}", cfg.provider),
        Ok(()) => {
            let settled = settle_refusal(cfg, what, &a, &b, &mut events, 1);
            assert!(
                events.a.iter().all(|c| c.context != Some(1)),
                "{} {what}: delivery-complete write reported success",
                cfg.provider
            );
            if settled {
                for err in &events.errors {
                    eprintln!("{} {what}: {err}", cfg.provider);
                    assert_ne!(err.code(), 0);
                    assert!(!err.text().is_empty());
                }
                // An error completion finishes the operation and releases its memory.
                assert_eq!(a.cq.in_flight(), 0);
            } else {
                eprintln!(
                    "{} {what}: dropped without completion (documented); {} op in flight at close",
                    cfg.provider,
                    a.cq.in_flight()
                );
            }
            // Give a late arrival at the target a moment to show up before checking.
            progress_for(&a, &b, &mut events, Duration::from_millis(200), |e| {
                !e.b.is_empty()
            });
        }
    }
    assert!(
        events.b.iter().all(|c| c.data != Some(0xBAD)),
        "{} {what}: refused write arrived",
        cfg.provider
    );
    assert!(
        dst.to_vec().iter().all(|&x| x == FILL),
        "{} {what}: target bytes changed",
        cfg.provider
    );
    // Closing with a refused write possibly still in flight must not crash or hang.
    drop((a, b));
}

fn wrong_key(cfg: Config) {
    refused_write(cfg, "wrong key", Access::RemoteWrite, |r, _| RemoteRange {
        key: r.key ^ 0x5A5A,
        ..r
    });
}

fn out_of_range(cfg: Config) {
    refused_write(cfg, "out of range", Access::RemoteWrite, |r, region_len| {
        RemoteRange {
            addr: r.addr + region_len - 100,
            ..r
        }
    });
}

/// A write with the right key and range into a region registered without remote access (as
/// send buffers are).
fn local_only(cfg: Config) {
    refused_write(cfg, "local-only region", Access::Local, |r, _| r);
}

/// A read from a region registered for remote writes only (as every region of the transport
/// is) is refused: an error, or no completion where the provider drops refusals silently; no
/// byte arrives. Except on shm, which (libfabric 1.17) does not check the access of reads: the
/// read succeeds there, as docs/security.md says.
fn write_only_read(cfg: Config) {
    let Some(info) = cfg.info() else { return };
    let checks_reads = cfg.provider != "shm";
    let (a, b) = pair(&info);
    let mut events = Events::default();
    let dst = filled(&b, 4096, Access::RemoteWrite);
    let local = RegisteredMemory::for_endpoint(&a.ep, 4096, Access::Local).expect("local");
    let remote = dst.remote().range(0, 4000).expect("remote");
    let posted = post_refusable(&a, &b, &mut events, || {
        a.ep.read(local.range(0, 4000)?, a.peer, remote, 9)
    });
    match posted {
        Err(err) => eprintln!("{} remote read: refused at post: {err}", cfg.provider),
        Ok(()) => {
            settle_refusal(cfg, "remote read", &a, &b, &mut events, 9);
            if !checks_reads {
                assert!(events.errors.is_empty(), "{:?}", events.errors);
                assert!(local.to_vec()[..4000].iter().all(|&x| x == FILL));
                eprintln!("{}: reads a write-only region", cfg.provider);
                return;
            }
            assert!(
                events.a.iter().all(|c| c.context != Some(9)),
                "{} remote read of a write-only region succeeded",
                cfg.provider
            );
            for err in &events.errors {
                eprintln!("{} remote read: {err}", cfg.provider);
            }
        }
    }
    assert!(
        local.to_vec().iter().all(|&x| x == 0),
        "{}: bytes of a write-only region were read",
        cfg.provider
    );
}

/// Keys of one domain's registrations are distinct and drawn from all 64 bits: none of the
/// small integers a counter hands out. Where the provider chooses keys (the forced
/// `FI_MR_PROV_KEY` of the `_verbs_mr` runs) they are only distinct, and printed.
fn random_keys(cfg: Config) {
    let Some(info) = cfg.info() else { return };
    let (a, _b) = pair(&info);
    let regions: Vec<RegisteredMemory> = (0..32)
        .map(|_| RegisteredMemory::for_endpoint(&a.ep, 4096, Access::RemoteWrite).expect("mr"))
        .collect();
    let mut keys: Vec<u64> = regions.iter().map(RegisteredMemory::key).collect();
    if info.mr_mode().contains(MrMode::PROV_KEY) {
        eprintln!("{} chooses keys: {:x?}", cfg.provider, &keys[..4]);
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), regions.len(), "{}: keys repeat", cfg.provider);
        return;
    }
    assert_eq!(info.mr_key_size(), 8, "{} keys of 8 bytes", cfg.provider);
    // A random 64-bit key is below 2^32 with probability 2^-32.
    let small = keys.iter().filter(|&&k| k < 1 << 32).count();
    assert!(small <= 1, "{}: small keys {keys:x?}", cfg.provider);
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), regions.len(), "{}: keys repeat", cfg.provider);
}

/// `CompletionQueue::wait` blocks until an arrival, with the initiator progressed by another
/// thread (as another rank would), and returns 0 on a timeout with nothing to read.
fn wait_for_arrival(cfg: Config) {
    let Some(info) = cfg.info() else { return };
    let (a, b) = pair(&info);
    let mut out = Vec::new();
    let idle =
        b.cq.wait(&mut out, Duration::from_millis(20))
            .expect("idle wait");
    assert_eq!((idle, out.len()), (0, 0), "nothing to read yet");

    let size = 100_000;
    let mut src = RegisteredMemory::for_endpoint(&a.ep, size, Access::Local).expect("src");
    let bytes = pattern(size, 41);
    src.write(0, &bytes).expect("bytes");
    let dst = filled(&b, size, Access::RemoteWrite);
    let remote = dst.remote().range(0, size as u64).expect("remote");
    let src = Arc::new(src);
    let initiator = {
        let (ep, cq, peer, src) = (a.ep.clone(), a.cq.clone(), a.peer, src.clone());
        thread::spawn(move || -> Result<Vec<Completion>, FabricError> {
            let deadline = Instant::now() + DEADLINE;
            while ep.write(src.range(0, size)?, peer, remote, Some(0x77), 3)? == Post::Again {
                cq.wait(&mut Vec::new(), Duration::from_millis(1))?;
            }
            let mut done = Vec::new();
            while !done.iter().any(|c: &Completion| c.context == Some(3))
                && Instant::now() < deadline
            {
                cq.wait(&mut done, Duration::from_millis(5))?;
            }
            Ok(done)
        })
    };
    // Wait for the arrival, then keep progressing the target until the initiator is done
    // (its completion may need the target's acknowledgement).
    let deadline = Instant::now() + DEADLINE;
    while (!out.iter().any(|c| c.data == Some(0x77)) || !initiator.is_finished())
        && Instant::now() < deadline
    {
        b.cq.wait(&mut out, Duration::from_millis(20))
            .expect("wait");
        b.ep.replenish_cq_data_receives().expect("replenish");
    }
    let done = initiator
        .join()
        .expect("initiator thread")
        .expect("initiator");
    assert!(
        out.iter().any(|c| c.data == Some(0x77)),
        "{}: no arrival within the deadline (wait object: {})",
        cfg.provider,
        b.cq.has_wait_object()
    );
    assert!(
        done.iter().any(|c| c.context == Some(3)),
        "initiator completion"
    );
    assert!(dst.to_vec() == bytes);
}

macro_rules! provider_tests {
    ($module:ident, $provider:expr, $node:expr, $required:expr, $silent:expr, $forced:expr) => {
        mod $module {
            use super::*;

            fn cfg(verbs_mr: bool) -> Config {
                Config {
                    provider: $provider,
                    node: $node,
                    required: $required,
                    silent_refusal: $silent,
                    forced_mr: verbs_mr.then_some($forced),
                }
            }

            #[test]
            fn write_sizes() {
                bounded("write_sizes", || super::write_sizes(cfg(false)));
            }
            #[test]
            fn write_sizes_verbs_mr() {
                bounded("write_sizes_verbs_mr", || super::write_sizes(cfg(true)));
            }
            #[test]
            fn write_msg() {
                bounded("write_msg", || super::write_msg(cfg(false)));
            }
            #[test]
            fn write_msg_verbs_mr() {
                bounded("write_msg_verbs_mr", || super::write_msg(cfg(true)));
            }
            #[test]
            fn inject_and_read() {
                bounded("inject_and_read", || super::inject_and_read(cfg(false)));
            }
            #[test]
            fn inject_and_read_verbs_mr() {
                bounded("inject_and_read_verbs_mr", || {
                    super::inject_and_read(cfg(true))
                });
            }
            #[test]
            fn wrong_key() {
                bounded("wrong_key", || super::wrong_key(cfg(false)));
            }
            #[test]
            fn wrong_key_verbs_mr() {
                bounded("wrong_key_verbs_mr", || super::wrong_key(cfg(true)));
            }
            #[test]
            fn out_of_range() {
                bounded("out_of_range", || super::out_of_range(cfg(false)));
            }
            #[test]
            fn out_of_range_verbs_mr() {
                bounded("out_of_range_verbs_mr", || super::out_of_range(cfg(true)));
            }
            #[test]
            fn local_only() {
                bounded("local_only", || super::local_only(cfg(false)));
            }
            #[test]
            fn local_only_verbs_mr() {
                bounded("local_only_verbs_mr", || super::local_only(cfg(true)));
            }
            #[test]
            fn write_only_read() {
                bounded("write_only_read", || super::write_only_read(cfg(false)));
            }
            #[test]
            fn random_keys() {
                bounded("random_keys", || super::random_keys(cfg(false)));
            }
            #[test]
            fn random_keys_verbs_mr() {
                bounded("random_keys_verbs_mr", || super::random_keys(cfg(true)));
            }
            #[test]
            fn wait_for_arrival() {
                bounded("wait_for_arrival", || super::wait_for_arrival(cfg(false)));
            }
        }
    };
}

/// The verbs-like set without FI_MR_VIRT_ADDR: tcp;ofi_rxm (1.17) accepts a forced
/// FI_MR_VIRT_ADDR in fi_domain but its tcp core keeps addressing by offset, so writes to
/// virtual addresses are dropped; FI_MR_LOCAL, FI_MR_ALLOCATED and FI_MR_PROV_KEY work.
const VERBS_BUT_OFFSETS: MrMode = MrMode(MrMode::VERBS.0 & !MrMode::VIRT_ADDR.0);

// (module, provider, local address, required, drops refused writes silently, forced mr_mode)
provider_tests!(
    tcp_rxm,
    "tcp;ofi_rxm",
    Some("127.0.0.1"),
    true,
    false,
    VERBS_BUT_OFFSETS
);
provider_tests!(
    sockets,
    "sockets",
    Some("127.0.0.1"),
    true,
    false,
    MrMode::VERBS
);
provider_tests!(shm, "shm", None, false, true, MrMode::VERBS);
provider_tests!(
    udp_rxd,
    "udp;ofi_rxd",
    Some("127.0.0.1"),
    false,
    true,
    MrMode::VERBS
);

// ---------------------------------------------------------------------------------------------
// Two processes: the test binary re-executes itself as the target rank, as the launcher will
// run ranks. Names and region descriptors go over the child's stdin/stdout as `CIRC ...` lines.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};

/// Environment variable that turns the `peer_process` entry into the target rank.
const PEER_ENV: &str = "CIRCULANT_FABRIC_PEER";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Where write `i` of `sizes` lands in the target region: one after the other, 64 bytes apart.
fn layout(sizes: &[usize]) -> (Vec<usize>, usize) {
    let mut offsets = Vec::new();
    let mut at = GUARD;
    for &size in sizes {
        offsets.push(at);
        at += size + GUARD;
    }
    (offsets, at)
}

fn cross_sizes(info: &Info) -> Vec<usize> {
    vec![0, 1, 4096, (1 << 20) + 3, info.inject_size() + 1]
}

/// Lines of a reader, delivered through a channel so that reads can have a deadline.
fn line_channel(reader: impl BufRead + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in reader.lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next `CIRC <tag> <value>` line with this tag, within the deadline.
fn expect_line(lines: &mpsc::Receiver<String>, tag: &str, deadline: Instant) -> String {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no `CIRC {tag}` line from the peer in time"));
        assert!(
            !line.contains("running 0 tests"),
            "the peer ran no test: `peer_process` is no ignored test"
        );
        // The child's harness may print "test peer_process ... " before our line.
        if let Some(rest) = line.find("CIRC ").map(|at| &line[at + 5..]) {
            let (got, value) = rest.split_once(' ').unwrap_or((rest, ""));
            if got == tag {
                return value.to_string();
            }
            if got == "fail" {
                panic!("peer failed: {value}");
            }
        }
    }
}

/// Kills and reaps the child unless it already exited, whatever way the test ends.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// The target rank, run in a child process: registers a region, publishes its name and
/// region, checks every arrival's bytes and CQ data, and keeps progressing until the initiator
/// says it is done.
#[test]
#[ignore = "the target process of this file's two-process tests; not a test on its own"]
fn peer_process() {
    let spec = common::role(PEER_ENV);
    let out = |line: String| {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "CIRC {line}");
        let _ = stdout.flush();
    };
    let result = std::panic::catch_unwind(|| {
        let (provider, node) = spec.split_once('|').expect("spec provider|node");
        let cfg = Config {
            provider: Box::leak(provider.to_string().into_boxed_str()),
            node: (node != "-").then(|| &*Box::leak(node.to_string().into_boxed_str())),
            required: true,
            silent_refusal: false,
            forced_mr: None,
        };
        let info = cfg.info().expect("provider offered");
        let (_domain, cq, av, ep) = open_side(&info);
        let sizes = cross_sizes(&info);
        let (offsets, total) = layout(&sizes);
        let dst =
            RegisteredMemory::for_endpoint(&ep, total, Access::RemoteWrite).expect("register");
        out(format!("name {}", hex(&ep.name().expect("name"))));
        out(format!("region {}", hex(&dst.remote().to_bytes())));

        let stdin = line_channel(BufReader::new(std::io::stdin()));
        let deadline = Instant::now() + DEADLINE;
        let peer = unhex(&expect_line(&stdin, "peer", deadline)).expect("peer hex");
        av.insert(&peer).expect("insert initiator");

        let mut arrivals = Vec::new();
        let mut initiator_done = false;
        while (arrivals.len() < sizes.len() || !initiator_done) && Instant::now() < deadline {
            cq.wait(&mut arrivals, Duration::from_millis(10))
                .expect("wait");
            ep.replenish_cq_data_receives().expect("replenish");
            while let Ok(line) = stdin.try_recv() {
                initiator_done |= line == "CIRC done";
            }
        }
        assert_eq!(arrivals.len(), sizes.len(), "arrivals by the deadline");
        let got = dst.to_vec();
        for (i, (&size, &offset)) in sizes.iter().zip(&offsets).enumerate() {
            let data = 0xC1C0_0000 + i as u64;
            assert!(
                arrivals.iter().any(|c| c.data == Some(data)),
                "arrival with CQ data {data:#x}"
            );
            assert!(
                got[offset..offset + size] == pattern(size, i as u64 + 1)[..],
                "bytes of write {i} ({size} B)"
            );
            assert!(got[offset + size..offset + size + GUARD]
                .iter()
                .all(|&x| x == 0));
        }
    });
    match result {
        Ok(()) => out("ok -".to_string()),
        Err(panic) => {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            out(format!("fail {text}"));
        }
    }
}

/// The initiator in this process, the target in a child process: `fi_writedata` of every size
/// with CQ data, checked by the child.
fn two_processes(cfg: Config) {
    let Some(info) = cfg.info() else { return };
    let child = common::entry_command("peer_process")
        .env(
            PEER_ENV,
            format!("{}|{}", cfg.provider, cfg.node.unwrap_or("-")),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn peer");
    let mut child = ChildGuard(child);
    let mut to_child = child.0.stdin.take().expect("child stdin");
    let lines = line_channel(BufReader::new(child.0.stdout.take().expect("child stdout")));
    let deadline = Instant::now() + DEADLINE;

    let (_domain, cq, av, ep) = open_side(&info);
    let name = unhex(&expect_line(&lines, "name", deadline)).expect("name hex");
    let region = parse_region(&expect_line(&lines, "region", deadline));
    let peer = av.insert(&name).expect("insert target");
    writeln!(to_child, "CIRC peer {}", hex(&ep.name().expect("name"))).expect("to child");

    let sizes = cross_sizes(&info);
    let (offsets, _) = layout(&sizes);
    let mut sources = Vec::new();
    for (i, (&size, &offset)) in sizes.iter().zip(&offsets).enumerate() {
        let mut src = RegisteredMemory::for_endpoint(&ep, size.max(1), Access::Local).expect("src");
        src.write(0, &pattern(size, i as u64 + 1)).expect("bytes");
        let remote = region.range(offset as u64, size as u64).expect("range");
        let data = 0xC1C0_0000 + i as u64;
        loop {
            let posted = ep
                .write(
                    src.range(0, size).expect("src range"),
                    peer,
                    remote,
                    Some(data),
                    i as u64,
                )
                .expect("post");
            if posted == Post::Posted {
                break;
            }
            assert!(Instant::now() < deadline, "-FI_EAGAIN until the deadline");
            cq.wait(&mut Vec::new(), Duration::from_millis(1))
                .expect("progress");
        }
        sources.push(src);
    }
    let mut done = Vec::new();
    while done.len() < sizes.len() && Instant::now() < deadline {
        cq.wait(&mut done, Duration::from_millis(10))
            .expect("initiator completions");
    }
    assert_eq!(
        done.len(),
        sizes.len(),
        "{}: local completions",
        cfg.provider
    );
    writeln!(to_child, "CIRC done").expect("to child");
    expect_line(&lines, "ok", deadline);
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("child status") {
            break status;
        }
        assert!(Instant::now() < deadline, "peer did not exit");
        thread::sleep(Duration::from_millis(5));
    };
    assert!(status.success(), "peer exit status {status}");
}

/// Parses the child's region descriptor line.
fn parse_region(text: &str) -> RemoteRegion {
    let bytes = unhex(text).expect("region hex");
    RemoteRegion::from_bytes(&bytes).expect("region descriptor")
}

macro_rules! two_process_tests {
    ($name:ident, $provider:expr, $node:expr, $required:expr) => {
        #[test]
        fn $name() {
            bounded(stringify!($name), || {
                two_processes(Config {
                    provider: $provider,
                    node: $node,
                    required: $required,
                    silent_refusal: false,
                    forced_mr: None,
                })
            });
        }
    };
}

two_process_tests!(
    two_processes_tcp_rxm,
    "tcp;ofi_rxm",
    Some("127.0.0.1"),
    true
);
two_process_tests!(two_processes_sockets, "sockets", Some("127.0.0.1"), true);
two_process_tests!(two_processes_shm, "shm", None, false);
two_process_tests!(
    two_processes_udp_rxd,
    "udp;ofi_rxd",
    Some("127.0.0.1"),
    false
);

#[test]
fn remote_range_whose_address_wraps_is_an_error() {
    // A peer's base near the top of the address space: no offset may wrap around it.
    let region = |base| circulant::fabric::RemoteRegion {
        base,
        len: 16,
        key: 0,
    };
    assert!(region(u64::MAX - 1).range(4, 4).is_err());
    let ok = region(0x1000).range(4, 4).expect("in range");
    assert_eq!(ok.addr, 0x1004);
}
