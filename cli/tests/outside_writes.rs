//! A process outside the job tries to write into the memory of a running job over
//! `tcp;ofi_rxm`, as any local user can: it runs as another user (`nobody`), connects to the
//! ranks' listening ports with the project's own fabric layer and writes 0xAB bytes with guessed
//! keys (the small integers a counting key scheme hands out) at guessed addresses (offsets from
//! 0, as providers without `FI_MR_VIRT_ADDR` use) into whatever regions those name. Meanwhile the
//! job runs broadcasts and allgathervs with checked data, on registered buffers and on plain
//! slices (the communicator's staging), and keeps a registered canary buffer it never uses;
//! every rank must finish with correct data and an intact canary, and no write of the attacker
//! may be accepted. The attacker's writes ask for delivery completion, so the target's verdict
//! comes back to it: a refusal proves that the writes reached the job and were checked.
//!
//! The ports are found the way a local attacker finds them in `/proc/net/tcp` (listening
//! sockets); this test narrows them to the ranks' own sockets, so that the writes never reach
//! other programs on the machine.
//!
//! Over shm, the job's shared-memory files are checked to be private to the user.
//!
//! This test binary plays every part (`rank_role`, selected by `CIRCULANT_TEST_ROLE`): the ranks
//! of the job under `circulant run`, and the attacker, started with the uid and gid of
//! `nobody`. It needs root to start the attacker as another user: without root it fails under
//! CI (`CI=true`) and skips with a message elsewhere.

mod common;

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use circulant::comm::Communicator;
use circulant::fabric::{
    Access, AddressVector, CompletionQueue, Domain, Endpoint, FabricError, Hints, Info, Post,
    RegisteredMemory, RemoteRange, WriteFlags,
};

use common::Started;

const ROLE_ENV: &str = "CIRCULANT_TEST_ROLE";
const STOP_ENV: &str = "CIRCULANT_TEST_STOP";
const PORTS_ENV: &str = "CIRCULANT_TEST_PORTS";

/// `nobody` on Debian-like systems.
const OUTSIDER: u32 = 65534;
/// Keys the attacker tries: every key a counting scheme gives a job's first regions.
const GUESSED_KEYS: u64 = 64;
/// Addresses the attacker tries in each region (offsets from 0).
const GUESSED_OFFSETS: [u64; 3] = [0, 4096, 65536];
/// Bytes of each attacking write.
const ATTACK_BYTES: usize = 256;
/// Rank 0 ends the job after this long even if the test never says stop.
const JOB_LIMIT: Duration = Duration::from_secs(240);
const CANARY_BYTES: usize = 1 << 17;
/// The attacker stops guessing after this long (a job it broke may no longer answer).
const ATTACK_LIMIT: Duration = Duration::from_secs(150);

fn byte(i: usize, owner: usize, k: usize) -> u8 {
    (i * 31 + owner * 131 + k * 7 + 1) as u8
}

fn canary_byte(rank: usize, k: usize) -> u8 {
    (k * 13 + rank * 71 + 5) as u8
}

#[test]
fn another_user_cannot_write_into_a_running_job() {
    if !rustix::process::geteuid().is_root() {
        common::missing(
            "root",
            "starting the attacker as another user needs root, as CI runs",
        );
        return;
    }
    let (job, ranks) = start_job("tcp;ofi_rxm", "tcp");
    let ports = listening_ports(&ranks.pids);
    assert!(
        ports.len() >= ranks.pids.len(),
        "no listening socket found for the ranks {:?}: {ports:?}",
        ranks.pids
    );
    eprintln!("ranks {:?} listen on {ports:?}", ranks.pids);
    let ports = ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(",");

    let mut attacker = common::entry_command("rank_role");
    attacker
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env(ROLE_ENV, "attacker")
        .env(PORTS_ENV, &ports)
        .uid(OUTSIDER)
        .gid(OUTSIDER);
    let attack = Started::new(attacker).finish(Duration::from_secs(200));
    // Every guess met a running job (a job that ended would refuse connections instead).
    let ran_through = ranks.pids.iter().all(|&pid| common::alive(pid));
    // The attack is over: let the job end.
    ranks.end();
    let finished = job.finish(Duration::from_secs(300));
    let job_text = format!("{}{}", finished.stdout, finished.stderr);
    let attack_text = format!("{}{}", attack.stdout, attack.stderr);
    eprintln!("attacker:\n{attack_text}\njob:\n{job_text}");

    assert_eq!(
        attack.code(),
        Some(0),
        "the attacker failed:\n{attack_text}"
    );
    assert!(ran_through, "the job ended during the attack:\n{job_text}");
    let report = attack_text
        .lines()
        .find_map(AttackReport::parse)
        .unwrap_or_else(|| panic!("no attacker report:\n{attack_text}"));
    assert_eq!(report.uid, OUTSIDER, "the attacker ran as another user");
    let expected = ranks.pids.len() as u64 * GUESSED_KEYS * GUESSED_OFFSETS.len() as u64;
    assert!(
        report.writes >= expected,
        "the attacker tried every guess: {report:?}"
    );
    assert!(
        report.refused > 0,
        "the job's ranks refused the attacker's writes (so they reached them): {report:?}"
    );
    assert_eq!(
        report.accepted, 0,
        "writes of the attacker landed: {report:?}"
    );
    assert!(finished.status.success(), "the job failed:\n{job_text}");
    assert_eq!(
        job_text.matches("target ok").count(),
        2,
        "every rank checked its data and its canary:\n{job_text}"
    );
}

/// Starts two ranks of the target role over `provider` and waits until both are ready.
fn start_job(provider: &str, tag: &str) -> (Started, Ranks) {
    let stop = std::env::temp_dir().join(format!("circulant-outside-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_file(&stop);
    let mut job = common::circulant(&[
        "run",
        "-n",
        "2",
        "--provider",
        provider,
        "--timeout",
        "300",
        "--",
    ]);
    job.args(common::entry_program("rank_role"))
        .env(ROLE_ENV, "target")
        .env(STOP_ENV, &stop)
        .env("CIRCULANT_TIMEOUT", "60")
        // The ranks share this host, where broadcasts and allgathervs would run on the shared
        // segment: kept on the fabric, which the attacker writes to.
        .env("CIRCULANT_SEGMENT_LIMIT", "0");
    let job = Started::new(job);
    let mut ranks = Ranks {
        pids: Vec::new(),
        stop,
    };
    let mut seen = Vec::new();
    let ready_by = Instant::now() + Duration::from_secs(60);
    while ranks.pids.len() < 2 {
        let Some((_, line)) = job.next_line(ready_by) else {
            panic!("the job's ranks did not report ready:\n{}", seen.join("\n"));
        };
        if let Some(pid) = line
            .split_once("target ready pid ")
            .and_then(|(_, p)| p.split_whitespace().next()?.parse::<u32>().ok())
        {
            ranks.pids.push(pid);
        }
        seen.push(line);
    }
    (job, ranks)
}

/// Over shm, the job's shared-memory files (`/dev/shm/<pid>:...`, libfabric 1.17) are open to
/// their owner only.
#[test]
fn shared_memory_files_are_private_to_the_user() {
    let (job, ranks) = start_job("shm", "shm");
    let mut files = Vec::new();
    for entry in std::fs::read_dir("/dev/shm")
        .expect("read /dev/shm")
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        let owner = name.split(':').next().and_then(|p| p.parse::<u32>().ok());
        if owner.is_some_and(|pid| ranks.pids.contains(&pid)) {
            let mode = entry
                .metadata()
                .expect("file metadata")
                .permissions()
                .mode();
            files.push((name, mode & 0o777));
        }
    }
    ranks.end();
    let finished = job.finish(Duration::from_secs(300));
    assert!(finished.status.success(), "{finished:?}");
    assert_eq!(files.len(), ranks.pids.len(), "a file per rank: {files:?}");
    assert!(
        files.iter().all(|(_, mode)| *mode == 0o600),
        "modes: {files:?}"
    );
}

/// The job's rank processes: the stop file ends them; on the way out (also when the test
/// fails) they are told to stop and, if still there, killed.
struct Ranks {
    pids: Vec<u32>,
    stop: PathBuf,
}

impl Ranks {
    fn end(&self) {
        std::fs::write(&self.stop, b"stop").expect("write the stop file");
    }
}

impl Drop for Ranks {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.stop, b"stop");
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.pids.iter().any(|&p| common::alive(p)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        for &pid in &self.pids {
            if common::alive(pid) {
                if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
        }
        let _ = std::fs::remove_file(&self.stop);
    }
}

/// The TCP ports on which `pids` listen (IPv4, from `/proc/net/tcp`).
fn listening_ports(pids: &[u32]) -> Vec<u16> {
    let mut inodes = HashSet::new();
    for pid in pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(link) = std::fs::read_link(fd.path()) {
                let link = link.to_string_lossy().into_owned();
                if let Some(inode) = link
                    .strip_prefix("socket:[")
                    .and_then(|s| s.strip_suffix(']'))
                {
                    inodes.insert(inode.to_string());
                }
            }
        }
    }
    let table = std::fs::read_to_string("/proc/net/tcp").expect("read /proc/net/tcp");
    let mut ports = Vec::new();
    for line in table.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // sl, local_address, rem_address, st, tx:rx, tr:when, retrnsmt, uid, timeout, inode
        let (Some(local), Some(state), Some(inode)) = (fields.get(1), fields.get(3), fields.get(9))
        else {
            continue;
        };
        if *state != "0A" || !inodes.contains(*inode) {
            continue;
        }
        if let Some(port) = local
            .split_once(':')
            .and_then(|(_, port)| u16::from_str_radix(port, 16).ok())
        {
            ports.push(port);
        }
    }
    ports
}

#[derive(Debug, PartialEq)]
struct AttackReport {
    uid: u32,
    writes: u64,
    accepted: u64,
    refused: u64,
    unanswered: u64,
}

impl AttackReport {
    fn line(&self) -> String {
        format!(
            "attack report: uid {} writes {} accepted {} refused {} unanswered {}",
            self.uid, self.writes, self.accepted, self.refused, self.unanswered
        )
    }

    fn parse(line: &str) -> Option<AttackReport> {
        let (_, rest) = line.split_once("attack report: ")?;
        let words: Vec<&str> = rest.split_whitespace().collect();
        let field = |name: &str| -> Option<u64> {
            let at = words.iter().position(|w| *w == name)?;
            words.get(at + 1)?.parse().ok()
        };
        Some(AttackReport {
            uid: u32::try_from(field("uid")?).ok()?,
            writes: field("writes")?,
            accepted: field("accepted")?,
            refused: field("refused")?,
            unanswered: field("unanswered")?,
        })
    }
}

/// Entry point of the job's ranks and of the attacker.
#[test]
#[ignore = "a rank or the attacker of this file's tests; not a test on its own"]
fn rank_role() {
    match common::role(ROLE_ENV).as_str() {
        "target" => target(),
        "attacker" => attacker(),
        other => panic!("unknown role {other}"),
    }
}

/// A rank of the attacked job: collectives with checked data until rank 0 sees the stop file.
fn target() {
    let stop = std::env::var_os(STOP_ENV).map(PathBuf::from);
    let mut comm = Communicator::init().expect("init");
    let (rank, p) = (comm.rank(), comm.size());
    let mut canary = comm.alloc(CANARY_BYTES).expect("canary");
    for (k, x) in canary.iter_mut().enumerate() {
        *x = canary_byte(rank, k);
    }
    let len = 1 << 16;
    let mut buf = comm.alloc(len).expect("broadcast buffer");
    let mut gathered = comm.alloc(p * len).expect("allgather buffer");
    let mut plain = vec![0u8; p * 4096];
    println!("target ready pid {}", std::process::id());
    let started = Instant::now();
    let mut rounds = 0;
    loop {
        let mut more = [1u8];
        if rank == 0 {
            let stopped = stop.as_deref().is_some_and(Path::exists);
            more[0] = u8::from(!stopped && started.elapsed() < JOB_LIMIT);
        }
        comm.bcast(&mut more[..], 0)
            .expect("bcast of the go-on flag");
        if more[0] == 0 {
            break;
        }
        let i = rounds;
        let root = i % p;
        if rank == root {
            for (k, x) in buf.iter_mut().enumerate() {
                *x = byte(i, root, k);
            }
        }
        comm.bcast(&mut buf, root).expect("bcast");
        assert!(
            buf.iter().enumerate().all(|(k, &x)| x == byte(i, root, k)),
            "bcast {i}: wrong data on rank {rank}"
        );
        let mine: Vec<u8> = (0..len).map(|k| byte(i, rank, k)).collect();
        gathered.fill(0);
        comm.allgather(&mine[..], &mut gathered).expect("allgather");
        for (k, &x) in gathered.iter().enumerate() {
            assert_eq!(x, byte(i, k / len, k % len), "allgather {i}: byte {k}");
        }
        let mine: Vec<u8> = (0..4096).map(|k| byte(i + 7, rank, k)).collect();
        plain.fill(0);
        comm.allgather(&mine[..], &mut plain[..])
            .expect("allgather of plain slices");
        for (k, &x) in plain.iter().enumerate() {
            assert_eq!(x, byte(i + 7, k / 4096, k % 4096), "staged allgather {i}");
        }
        rounds += 1;
    }
    let spoiled = canary
        .iter()
        .enumerate()
        .filter(|&(k, &x)| x != canary_byte(rank, k))
        .count();
    assert_eq!(spoiled, 0, "rank {rank}: {spoiled} canary bytes changed");
    println!("target ok: rank {rank}, {rounds} rounds of checked collectives");
}

/// The attacker: writes 0xAB bytes with every guessed key and offset into every port's
/// endpoint, and reports how many writes the targets accepted and refused. A refused write
/// breaks its connection (tcp drops it), so every guess goes through an endpoint of its own.
fn attacker() {
    let ports: Vec<u16> = std::env::var(PORTS_ENV)
        .expect("ports to attack")
        .split(',')
        .map(|p| p.parse().expect("port"))
        .collect();
    let hints = Hints::rdm_rma().provider("tcp;ofi_rxm").node("127.0.0.1");
    let info: Info = Info::query(&hints)
        .expect("fi_getinfo")
        .into_iter()
        .next()
        .expect("tcp;ofi_rxm on 127.0.0.1");
    let domain = Domain::open(&info).expect("domain");
    let mut src = RegisteredMemory::new(&domain, ATTACK_BYTES, Access::Local).expect("source");
    src.write(0, &[0xAB; ATTACK_BYTES]).expect("fill");

    let mut report = AttackReport {
        uid: rustix::process::getuid().as_raw(),
        writes: 0,
        accepted: 0,
        refused: 0,
        unanswered: 0,
    };
    let mut codes = HashSet::new();
    let give_up = Instant::now() + ATTACK_LIMIT;
    'guessing: for port in &ports {
        for key in 0..GUESSED_KEYS {
            for offset in GUESSED_OFFSETS {
                if Instant::now() > give_up {
                    break 'guessing;
                }
                let remote = RemoteRange {
                    addr: offset,
                    len: ATTACK_BYTES as u64,
                    key,
                };
                report.writes += 1;
                match guess(&domain, &src, *port, remote) {
                    Some(Ok(())) => report.accepted += 1,
                    Some(Err(code)) => {
                        report.refused += 1;
                        codes.insert(code);
                    }
                    None => report.unanswered += 1,
                }
            }
        }
    }
    eprintln!("attacker: error codes of refused writes: {codes:?}");
    println!("{}", report.line());
}

/// One delivery-complete write to `remote` at 127.0.0.1:`port` from a new endpoint: the
/// target's verdict (the error code of a refusal), or `None` without one within 2 s.
fn guess(
    domain: &Domain,
    src: &RegisteredMemory,
    port: u16,
    remote: RemoteRange,
) -> Option<Result<(), i32>> {
    let cq = CompletionQueue::open(domain, 0).expect("cq");
    let av = AddressVector::open(domain, 1).expect("av");
    let ep = Endpoint::open(domain, &av, &cq, &cq).expect("endpoint");
    // Our own name is a sockaddr_in on 127.0.0.1: the target's differs only in the port.
    let mut name = ep.name().expect("own address");
    assert_eq!(name.len(), 16, "an IPv4 socket address");
    name[2..4].copy_from_slice(&port.to_be_bytes());
    let target = av.insert(&name).expect("insert the target");
    let until = Instant::now() + Duration::from_secs(2);
    let mut done = Vec::new();
    loop {
        let local = [src.range(0, ATTACK_BYTES).expect("range")];
        let posted = ep.write_msg(
            &local,
            target,
            &[remote],
            None,
            WriteFlags::DELIVERY_COMPLETE,
            1,
        );
        match posted {
            Ok(Post::Posted) => break,
            Ok(Post::Again) if Instant::now() < until => {
                let _ = cq.wait(&mut done, Duration::from_millis(1));
            }
            Ok(Post::Again) => return None,
            Err(err) => return Some(Err(err.code())),
        }
    }
    while Instant::now() < until {
        match cq.wait(&mut done, Duration::from_millis(10)) {
            Ok(_) if done.iter().any(|c| c.context == Some(1)) => return Some(Ok(())),
            Ok(_) => {}
            Err(err @ FabricError::Completion { .. }) => return Some(Err(err.code())),
            Err(err) => panic!("completion queue: {err}"),
        }
    }
    None
}
