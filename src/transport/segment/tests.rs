use std::sync::mpsc;
use std::time::Duration;

use super::*;
use crate::plan::{Dtype, ReduceOp, Reduction};

const DEADLINE: Duration = Duration::from_secs(20);

/// The segments of `p` ranks of this process, joined.
fn segments(p: usize, area: usize) -> Vec<Segment> {
    let owns: Vec<Own> = (0..p)
        .map(|_| Own::create(area).expect("created"))
        .collect();
    let addresses: Vec<Address> = owns.iter().map(Own::address).collect();
    let mut joined: Vec<Segment> = owns
        .into_iter()
        .enumerate()
        .map(|(r, own)| own.join(r, &addresses).expect("joined"))
        .collect();
    for s in &mut joined {
        s.remove_name();
    }
    joined
}

fn sum_i64() -> Reduction {
    Reduction::new(Dtype::I64, ReduceOp::Sum).unwrap()
}

fn words(values: &[i64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Runs `ops` collectives in turn on every rank (a thread each) and checks every result.
#[test]
fn every_kind_in_turn_gives_every_rank_its_result() {
    for p in [2, 3, 4, 5] {
        let ops = 300;
        let threads: Vec<_> = segments(p, 256)
            .into_iter()
            .map(|mut segment| {
                std::thread::spawn(move || {
                    let me = segment.rank();
                    for i in 0..ops {
                        let root = i % p;
                        match i % 6 {
                            0 => {
                                let mut buf = vec![0u8; 1 + i % 200];
                                if me == root {
                                    buf.iter_mut().for_each(|b| *b = (i + 7) as u8);
                                }
                                let kind = Kind::Broadcast { root };
                                let mut run =
                                    Run::new(&mut segment, "bcast", i as u64, 1, kind, DEADLINE);
                                let send = if me == root {
                                    Source::InRecv(0, buf.len())
                                } else {
                                    Source::None
                                };
                                run.wait(&mut segment, send, &mut buf).expect("bcast");
                                assert!(
                                    buf.iter().all(|&b| b == (i + 7) as u8),
                                    "bcast {i} on {me}"
                                );
                            }
                            1 | 2 => {
                                let send = words(&[me as i64 + i as i64, -(me as i64)]);
                                let mut recv = vec![0u8; 16];
                                let reduction = sum_i64();
                                let kind = if i % 6 == 1 {
                                    Kind::Allreduce { reduction }
                                } else {
                                    Kind::Reduce { root, reduction }
                                };
                                let mut run = Run::new(
                                    &mut segment,
                                    "allreduce",
                                    i as u64,
                                    2,
                                    kind.clone(),
                                    DEADLINE,
                                );
                                run.wait(&mut segment, Source::Send(&send), &mut recv)
                                    .expect("reduce");
                                let total = (0..p as i64).sum::<i64>();
                                if matches!(kind, Kind::Allreduce { .. }) || me == root {
                                    assert_eq!(
                                        recv,
                                        words(&[total + (p * i) as i64, -total]),
                                        "{kind:?} {i}"
                                    );
                                }
                            }
                            3 => {
                                let counts: Vec<usize> = (0..p).map(|r| (r + i) % 4).collect();
                                let offsets = block_offsets(&counts);
                                let mine = vec![me as u8 + 1; counts[me]];
                                let mut recv = vec![0u8; counts.iter().sum()];
                                let kind = Kind::Allgatherv {
                                    offsets: offsets.clone(),
                                };
                                let mut run = Run::new(
                                    &mut segment,
                                    "allgatherv",
                                    i as u64,
                                    3,
                                    kind,
                                    DEADLINE,
                                );
                                run.wait(&mut segment, Source::Send(&mine), &mut recv)
                                    .expect("allgatherv");
                                for r in 0..p {
                                    assert!(recv[offsets[r]..offsets[r] + counts[r]]
                                        .iter()
                                        .all(|&b| b == r as u8 + 1));
                                }
                            }
                            4 => {
                                // Rank r's block: r + i % 3 words; every rank's vector holds
                                // (rank + 1) × (word index + 1) in each word.
                                let counts: Vec<usize> = (0..p).map(|r| 8 * (r + i % 3)).collect();
                                let mut bounds = block_offsets(&counts);
                                bounds.push(counts.iter().sum());
                                let total = bounds[p] / 8;
                                let send = words(
                                    &(0..total)
                                        .map(|w| (me as i64 + 1) * (w as i64 + 1))
                                        .collect::<Vec<_>>(),
                                );
                                let mut recv = vec![0u8; counts[me]];
                                let kind = Kind::ReduceScatter {
                                    reduction: sum_i64(),
                                    bounds: bounds.clone(),
                                };
                                let mut run = Run::new(
                                    &mut segment,
                                    "reduce-scatter",
                                    i as u64,
                                    5,
                                    kind,
                                    DEADLINE,
                                );
                                run.wait(&mut segment, Source::Send(&send), &mut recv)
                                    .expect("reduce-scatter");
                                let ranks = (1..=p as i64).sum::<i64>();
                                let first = bounds[me] / 8;
                                let want: Vec<i64> = (first..first + counts[me] / 8)
                                    .map(|w| ranks * (w as i64 + 1))
                                    .collect();
                                assert_eq!(recv, words(&want), "reduce-scatter {i} on {me}");
                            }
                            _ => {
                                let mut run = Run::new(
                                    &mut segment,
                                    "barrier",
                                    i as u64,
                                    4,
                                    Kind::Barrier,
                                    DEADLINE,
                                );
                                run.wait(&mut segment, Source::None, &mut [])
                                    .expect("barrier");
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("rank");
        }
    }
}

/// Segments of any size join (each rank maps its peers' files at the size they were made)
/// and carry a part of that size, inside the header's cache line or beyond it.
/// Byte `i` of rank `r`'s part in call `call`: a pattern that no chunk shares with another.
fn pattern(call: usize, r: usize, i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 8) ^ r.wrapping_mul(7) ^ call) as u8
}

/// A broadcast of `size` bytes from `root` (call number `call`), in chunks where it exceeds
/// the area: every byte arrives.
fn bcast_in_chunks(segment: &mut Segment, call: usize, root: usize, size: usize) {
    let me = segment.rank();
    let mut buf: Vec<u8> = (0..size)
        .map(|i| {
            if me == root {
                pattern(call, root, i)
            } else {
                0
            }
        })
        .collect();
    let send = if me == root {
        Source::InRecv(0, size)
    } else {
        Source::None
    };
    let kind = Kind::Broadcast { root };
    Run::new(segment, "bcast", call as u64, 5, kind, DEADLINE)
        .chunked(segment, size)
        .wait(segment, send, &mut buf)
        .expect("bcast");
    assert!(
        (0..size).all(|i| buf[i] == pattern(call, root, i)),
        "bcast {call} of {size} on {me}"
    );
}

/// Collectives whose parts exceed the area run in chunks, among calls that run whole, and
/// every rank gets every byte: broadcasts from every root of sizes at and around the chunk
/// boundaries, allgathervs with empty, short and long blocks (in place too), allreduces of
/// several chunks.
#[test]
fn calls_larger_than_the_area_run_in_chunks_and_every_byte_arrives() {
    let area = 256;
    for p in [2, 3, 5] {
        let sizes = [0, 1, 255, 256, 257, 511, 512, 513, 1000, 2560];
        let threads: Vec<_> = segments(p, area)
            .into_iter()
            .map(|mut segment| {
                std::thread::spawn(move || {
                    let me = segment.rank();
                    for (call, &size) in sizes.iter().cycle().take(60).enumerate() {
                        match call % 4 {
                            0 => bcast_in_chunks(&mut segment, call, call % p, size),
                            1 | 2 => {
                                // Rank r's block: `size` shifted by r, one rank's empty.
                                let counts: Vec<usize> = (0..p)
                                    .map(|r| if r == call % p { 0 } else { size + r * 97 })
                                    .collect();
                                let offsets = block_offsets(&counts);
                                let mine: Vec<u8> =
                                    (0..counts[me]).map(|i| pattern(call, me, i)).collect();
                                let mut recv = vec![0u8; counts.iter().sum()];
                                let in_place = call % 4 == 2;
                                if in_place {
                                    recv[offsets[me]..offsets[me] + counts[me]]
                                        .copy_from_slice(&mine);
                                }
                                let send = if in_place {
                                    Source::InRecv(offsets[me], counts[me])
                                } else {
                                    Source::Send(&mine)
                                };
                                let largest = counts.iter().copied().max().unwrap_or(0);
                                let kind = Kind::Allgatherv {
                                    offsets: offsets.clone(),
                                };
                                Run::new(
                                    &mut segment,
                                    "allgatherv",
                                    call as u64,
                                    6,
                                    kind,
                                    DEADLINE,
                                )
                                .chunked(&mut segment, largest)
                                .wait(&mut segment, send, &mut recv)
                                .expect("allgatherv");
                                for r in 0..p {
                                    assert!(
                                        (0..counts[r])
                                            .all(|i| recv[offsets[r] + i] == pattern(call, r, i)),
                                        "allgatherv {call}: rank {r}'s block on {me}"
                                    );
                                }
                            }
                            _ => {
                                let n = size.div_ceil(8);
                                let send =
                                    words(&(0..n).map(|i| (i * p + me) as i64).collect::<Vec<_>>());
                                let mut recv = vec![0u8; n * 8];
                                let kind = Kind::Allreduce {
                                    reduction: sum_i64(),
                                };
                                Run::new(&mut segment, "allreduce", call as u64, 7, kind, DEADLINE)
                                    .chunked(&mut segment, n * 8)
                                    .wait(&mut segment, Source::Send(&send), &mut recv)
                                    .expect("allreduce");
                                let ranks = (0..p as i64).sum::<i64>();
                                let want: Vec<i64> =
                                    (0..n).map(|i| (i * p * p) as i64 + ranks).collect();
                                assert_eq!(recv, words(&want), "allreduce {call} on {me}");
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("rank");
        }
    }
}

/// Gathervs and scattervs from every root, whole and in chunks, with empty, short and long
/// blocks, in turn with broadcasts: the root gets every block at its offset, every rank its
/// own block of the root's buffer, and nothing else in the buffers changes.
#[test]
fn gathers_and_scatters_give_every_block_to_its_place() {
    gathers_and_scatters(false, &[0, 1, 100, 255, 256, 257, 700, 2560], 61);
}

/// The same where the ranks read each other's memory: parts from [`SINGLE_COPY_FROM`] on are
/// read where they are, smaller ones go through the segment, in turn (equal blocks, so that a
/// gather's largest is the size: both sides of the threshold).
#[test]
fn gathers_and_scatters_read_large_parts_where_they_are() {
    const AT: usize = SINGLE_COPY_FROM;
    gathers_and_scatters(true, &[0, 1, AT - 1, AT, AT + 1, 3 * AT + 5, 700, 2560], 0);
    gathers_and_scatters(true, &[AT - 1, 2 * AT + 1, 3, AT / 2], 61);
}

/// Gathervs, scattervs and broadcasts of `sizes` in turn (rank r's block `size + r × stride`,
/// one empty), the bytes each rank copied telling which way a part went.
fn gathers_and_scatters(single_copy: bool, sizes: &'static [usize], stride: usize) {
    let area = 256;
    for p in [2, 3, 5] {
        let mut joined = segments(p, area);
        if single_copy {
            let probe = crate::fabric::peer_memory::probe_address();
            for s in &mut joined {
                assert!(s.can_read_peers(&vec![probe; p]));
                s.read_parts_in_place();
            }
        }
        let threads: Vec<_> = joined
            .into_iter()
            .map(|mut segment| {
                std::thread::spawn(move || {
                    let me = segment.rank();
                    for (call, &size) in sizes.iter().cycle().take(72).enumerate() {
                        let root = (call / 3) % p;
                        let counts: Vec<usize> = (0..p)
                            .map(|r| {
                                if r == (call + 1) % p {
                                    0
                                } else {
                                    size + r * stride
                                }
                            })
                            .collect();
                        let offsets = block_offsets(&counts);
                        let total: usize = counts.iter().sum();
                        match call % 3 {
                            0 => {
                                let mine: Vec<u8> =
                                    (0..counts[me]).map(|i| pattern(call, me, i)).collect();
                                let mut recv = vec![0xEEu8; if me == root { total } else { 0 }];
                                let mut bounds = offsets.clone();
                                bounds.push(total);
                                let kind = Kind::Gatherv { root, bounds };
                                let largest = counts.iter().copied().max().unwrap_or(0);
                                let mut run = Run::new(
                                    &mut segment,
                                    "gatherv",
                                    call as u64,
                                    8,
                                    kind,
                                    DEADLINE,
                                )
                                .chunked(&mut segment, largest);
                                run.wait(&mut segment, Source::Send(&mine), &mut recv)
                                    .expect("gatherv");
                                // Read where it is, a rank's block costs it no copy.
                                let single = single_copy && largest >= SINGLE_COPY_FROM;
                                if me != root {
                                    let want = if single { 0 } else { counts[me] as u64 };
                                    assert_eq!(run.bytes_copied, want, "gatherv {call} on {me}");
                                }
                                if me == root {
                                    for r in 0..p {
                                        assert!(
                                            (0..counts[r]).all(
                                                |i| recv[offsets[r] + i] == pattern(call, r, i)
                                            ),
                                            "gatherv {call}: rank {r}'s block at root {root}"
                                        );
                                    }
                                }
                            }
                            1 => {
                                let all: Vec<u8> = if me == root {
                                    (0..total).map(|i| pattern(call, root, i)).collect()
                                } else {
                                    Vec::new()
                                };
                                // One byte past the block stays as it was.
                                let mut recv = vec![0xEEu8; counts[me] + 1];
                                let mut bounds = offsets.clone();
                                bounds.push(total);
                                let kind = Kind::Scatterv { root, bounds };
                                let mut run = Run::new(
                                    &mut segment,
                                    "scatterv",
                                    call as u64,
                                    9,
                                    kind,
                                    DEADLINE,
                                )
                                .chunked(&mut segment, total);
                                run.wait(&mut segment, Source::Send(&all), &mut recv)
                                    .expect("scatterv");
                                // Read where it is, the root's buffer is not copied in.
                                let single = single_copy && total >= SINGLE_COPY_FROM;
                                let want =
                                    counts[me] + if me == root && !single { total } else { 0 };
                                assert_eq!(
                                    run.bytes_copied, want as u64,
                                    "scatterv {call} on {me}"
                                );
                                assert!(
                                    (0..counts[me])
                                        .all(|i| recv[i] == pattern(call, root, offsets[me] + i)),
                                    "scatterv {call} from {root}: the block of {me}"
                                );
                                assert_eq!(recv[counts[me]], 0xEE, "scatterv {call} on {me}");
                            }
                            _ => bcast_in_chunks(&mut segment, call, root, size),
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("rank");
        }
    }
}

/// A call in chunks numbers one operation per chunk alike on every rank, so that a rank
/// whose peer was called with another size fails with a mismatch, not with wrong bytes.
#[test]
fn a_call_in_chunks_against_one_of_another_size_is_a_mismatch() {
    let mut segments = segments(2, 64);
    let mut b = segments.pop().unwrap();
    let mut a = segments.pop().unwrap();
    let kind = Kind::Broadcast { root: 0 };
    // Rank 0 broadcasts 200 bytes (four chunks), rank 1 expects 100 with another digest.
    let mut data = vec![9u8; 200];
    let mut writer = Run::new(&mut a, "bcast", 1, 21, kind.clone(), DEADLINE).chunked(&mut a, 200);
    assert!(!writer
        .test(&mut a, Source::InRecv(0, 200), &mut data)
        .unwrap());
    let mut recv = vec![0u8; 100];
    let mut reader = Run::new(&mut b, "bcast", 1, 22, kind, DEADLINE).chunked(&mut b, 100);
    let err = reader
        .test(&mut b, Source::None, &mut recv)
        .expect_err("a mismatch");
    assert!(
        matches!(err, TransportError::Mismatch { peer: 0, .. }),
        "{err}"
    );
}

/// One step of a caller that only tests (as an `i*` request's `test`): a test, then the
/// deadline's check where it did not complete.
fn step(run: &mut Run, segment: &mut Segment, send: Source<'_>, recv: &mut [u8]) -> Result<bool> {
    Ok(run.test(segment, send, recv)? || run.test_within_deadline(segment, send, recv)?)
}

/// A call in chunks has its deadline counted from the last chunk that moved: stepped in turn,
/// two chunks a step (the writer runs at most two operations ahead of its reader), with a
/// pause of 0.6 deadlines between steps, eight chunks take longer than two deadlines and
/// complete; a pause longer than the deadline within the call fails it.
#[test]
fn a_call_in_chunks_counts_its_deadline_from_the_last_chunk_that_moved() {
    let deadline = Duration::from_millis(200);
    let pause = deadline * 3 / 5;
    let mut segs = segments(2, 64);
    let (mut b, mut a) = (segs.pop().unwrap(), segs.pop().unwrap());
    let kind = Kind::Broadcast { root: 0 };
    let mut data: Vec<u8> = (0..64 * 8).map(|i| (i * 5 + 3) as u8).collect();
    let len = data.len();
    let mut got = vec![0u8; len];
    let mut writer = Run::new(&mut a, "bcast", 1, 7, kind.clone(), deadline).chunked(&mut a, len);
    let mut reader = Run::new(&mut b, "bcast", 1, 7, kind.clone(), deadline).chunked(&mut b, len);
    let began = std::time::Instant::now();
    let (mut wrote, mut read, mut steps) = (false, false, 0);
    while !(wrote && read) {
        wrote = step(&mut writer, &mut a, Source::InRecv(0, len), &mut data)
            .expect("the writer's chunks move within the deadline");
        std::thread::sleep(pause);
        read = step(&mut reader, &mut b, Source::None, &mut got)
            .expect("the reader's chunks move within the deadline");
        steps += 1;
    }
    assert_eq!(got, data);
    assert_eq!(steps, 4, "two chunks a step");
    assert!(began.elapsed() > 2 * deadline, "{:?}", began.elapsed());

    // Four chunks, the writer silent after the first two: the reader fails once the deadline
    // has passed since its last chunk.
    let mut writer = Run::new(&mut a, "bcast", 9, 8, kind.clone(), deadline).chunked(&mut a, 256);
    let mut reader = Run::new(&mut b, "bcast", 9, 8, kind, deadline).chunked(&mut b, 256);
    let mut got = vec![0u8; 256];
    assert!(!step(&mut writer, &mut a, Source::InRecv(0, 256), &mut data).unwrap());
    assert!(!step(&mut reader, &mut b, Source::None, &mut got).unwrap());
    assert_eq!(got[..128], data[..128], "the first two chunks");
    std::thread::sleep(deadline + deadline / 4);
    let err = step(&mut reader, &mut b, Source::None, &mut got).unwrap_err();
    assert!(matches!(err, TransportError::Timeout { .. }), "{err}");
}

#[test]
fn segments_of_sizes_off_the_cache_line_join_and_carry_their_part() {
    for area in [1, 40, 41, 100, 1000] {
        let mut segs = segments(2, area);
        let (mut b, mut a) = (segs.pop().unwrap(), segs.pop().unwrap());
        let kind = Kind::Broadcast { root: 0 };
        let mut sent: Vec<u8> = (0..area).map(|i| (i * 7 + 1) as u8).collect();
        let mut run = Run::new(&mut a, "bcast", 1, 3, kind.clone(), DEADLINE);
        assert!(run
            .test(&mut a, Source::InRecv(0, area), &mut sent)
            .unwrap());
        let mut got = vec![0u8; area];
        let mut run = Run::new(&mut b, "bcast", 1, 3, kind, DEADLINE);
        run.wait(&mut b, Source::None, &mut got).expect("bcast");
        assert_eq!(got, sent, "area {area}");
    }
}

#[test]
fn a_rank_called_with_other_arguments_fails_its_reader_at_once() {
    let mut segs = segments(2, 64);
    let (mut b, mut a) = (segs.pop().unwrap(), segs.pop().unwrap());
    let kind = Kind::Broadcast { root: 0 };
    let mut run = Run::new(&mut a, "bcast", 1, 11, kind.clone(), DEADLINE);
    let mut buf = [5u8; 8];
    assert!(run.test(&mut a, Source::InRecv(0, 8), &mut buf).unwrap());
    let mut other = Run::new(&mut b, "bcast", 1, 12, kind, DEADLINE);
    let err = other.test(&mut b, Source::None, &mut [0u8; 8]).unwrap_err();
    assert!(
        matches!(err, TransportError::Mismatch { peer: 0, .. }),
        "{err}"
    );
    assert!(
        err.to_string().starts_with("bcast (operation 1): rank 0"),
        "{err}"
    );
}

#[test]
fn a_rank_that_aborts_fails_its_waiting_peers_and_a_silent_one_times_out() {
    let mut segs = segments(2, 64);
    let (b, mut a) = (segs.pop().unwrap(), segs.pop().unwrap());
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let mut run = Run::new(&mut a, "barrier", 3, 1, Kind::Barrier, DEADLINE);
        tx.send(()).unwrap();
        run.wait(&mut a, Source::None, &mut []).unwrap_err()
    });
    rx.recv().unwrap();
    b.abort();
    let err = waiter.join().unwrap();
    assert!(
        matches!(err, TransportError::AbortedBy { rank: 1, .. }),
        "{err}"
    );

    let mut segs = segments(2, 64);
    let mut a = segs.swap_remove(0);
    let short = Duration::from_millis(50);
    let mut run = Run::new(
        &mut a,
        "allreduce",
        4,
        1,
        Kind::Allreduce {
            reduction: sum_i64(),
        },
        short,
    );
    let send = words(&[1]);
    let err = run
        .wait(&mut a, Source::Send(&send), &mut [0u8; 8])
        .unwrap_err();
    assert!(matches!(err, TransportError::Timeout { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("rank 1's part in the shared segment"),
        "{err}"
    );
}

#[test]
fn a_writer_waits_until_its_parity_has_been_read() {
    let mut segs = segments(2, 64);
    let (mut b, mut a) = (segs.pop().unwrap(), segs.pop().unwrap());
    let kind = Kind::Broadcast { root: 0 };
    let mut buf = [1u8; 4];
    for n in 1..=2 {
        let mut run = Run::new(&mut a, "bcast", n, 1, kind.clone(), DEADLINE);
        assert!(
            run.test(&mut a, Source::InRecv(0, 4), &mut buf).unwrap(),
            "{n}"
        );
    }
    // The third reuses the first's parity, which rank 1 has not read.
    let mut third = Run::new(&mut a, "bcast", 3, 1, kind.clone(), DEADLINE);
    assert!(!third.test(&mut a, Source::InRecv(0, 4), &mut buf).unwrap());
    let mut got = [0u8; 4];
    let mut first = Run::new(&mut b, "bcast", 1, 1, kind, DEADLINE);
    assert!(first.test(&mut b, Source::None, &mut got).unwrap());
    assert_eq!(got, [1; 4]);
    assert!(third.test(&mut a, Source::InRecv(0, 4), &mut buf).unwrap());
}

#[test]
fn a_kernel_cpu_list_counts_its_cpus() {
    assert_eq!(cpu_list_len("0-1\n"), Some(2));
    assert_eq!(cpu_list_len("0"), Some(1));
    assert_eq!(cpu_list_len("0-3,8,10-11"), Some(7));
    assert_eq!(cpu_list_len(""), None);
    assert_eq!(cpu_list_len("3-1"), None);
    assert_eq!(cpu_list_len("a-b"), None);
    // At least the cores this process may run on.
    let affinity = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(machine_cores() >= affinity);
}

/// A rank pinned to one core (here a thread, pinned as `taskset -c` pins a rank) counts the
/// machine's online cores, so that ranks pinned one to a core spin before they yield.
#[test]
fn a_rank_pinned_to_one_core_counts_the_machine_s_cores() {
    use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|list| cpu_list_len(&list))
        .expect("the online CPUs");
    std::thread::spawn(move || {
        let allowed = sched_getaffinity(None).expect("affinity");
        let first = (0..CpuSet::MAX_CPU)
            .find(|&cpu| allowed.is_set(cpu))
            .expect("a CPU");
        let mut one = CpuSet::new();
        one.set(first);
        sched_setaffinity(None, &one).expect("pinned");
        assert_eq!(
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            1
        );
        assert_eq!(machine_cores(), online);
    })
    .join()
    .expect("the pinned thread");
}

/// A part read where it is keeps its writer in the call until its reader has completed: the
/// writer's buffer is read after the writer published, so it must not return before. A reader
/// that never comes is named in the writer's timeout, and once the writer gave up, a reader
/// that comes late fails.
#[test]
fn a_part_read_where_it_is_keeps_its_writer_until_it_was_read() {
    let mut segs = segments(2, 64);
    let (mut root, mut writer) = (segs.remove(0), segs.remove(0));
    let probe = crate::fabric::peer_memory::probe_address();
    for s in [&mut root, &mut writer] {
        s.read_parts_in_place();
        assert!(s.can_read_peers(&[probe, probe]));
    }
    let len = SINGLE_COPY_FROM + 3;
    let bounds = vec![0, 0, len];
    let kind = Kind::Gatherv { root: 0, bounds };
    let data: Vec<u8> = (0..len).map(|i| pattern(1, 1, i)).collect();
    let mut run =
        Run::new(&mut writer, "gatherv", 1, 3, kind.clone(), DEADLINE).chunked(&mut writer, len);
    for _ in 0..3 {
        assert!(!run.test(&mut writer, Source::Send(&data), &mut []).unwrap());
    }
    let mut got = vec![0u8; len];
    Run::new(&mut root, "gatherv", 1, 3, kind.clone(), DEADLINE)
        .chunked(&mut root, len)
        .wait(&mut root, Source::Send(&[]), &mut got)
        .expect("gatherv");
    assert_eq!(got, data);
    assert!(run.test(&mut writer, Source::Send(&data), &mut []).unwrap());
    // The next call's root does not come: the writer times out naming it.
    let mut late = Run::new(
        &mut writer,
        "gatherv",
        2,
        3,
        kind,
        Duration::from_millis(100),
    )
    .chunked(&mut writer, len);
    let err = late
        .wait(&mut writer, Source::Send(&data), &mut [])
        .expect_err("a timeout");
    assert!(
        err.to_string()
            .contains("waiting for rank 0 to read this rank's part"),
        "{err}"
    );
    // The writer gives up (as a failed operation does) and its program has the buffer back:
    // the root that comes now fails instead of reading it.
    writer.abort();
    let mut got = vec![0u8; len];
    let kind = Kind::Gatherv {
        root: 0,
        bounds: vec![0, 0, len],
    };
    let err = Run::new(&mut root, "gatherv", 2, 3, kind, DEADLINE)
        .chunked(&mut root, len)
        .wait(&mut root, Source::Send(&[]), &mut got)
        .expect_err("the writer aborted");
    assert!(
        matches!(err, TransportError::AbortedBy { rank: 1, .. }),
        "{err}"
    );
}
