//! Inputs for simulated runs and the results the definition of each collective demands.
//!
//! Every input is a function of (problem, rank, generation): a job that repeats a call can
//! change its data between calls by changing the generation, and no two ranks, buffers or
//! generations share a byte pattern, so a misplaced or stale byte shows.

use crate::plan::{Dtype, Problem, ReduceOp, Reduction};

/// A deterministic byte for (rank, index): distinct enough that a misplaced byte shows.
fn mix(rank: usize, i: usize, salt: u64) -> u64 {
    let mut x = (rank as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((i as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9))
        .wrapping_add(salt);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 29)
}

fn bytes_of(rank: usize, len: usize, salt: u64) -> Vec<u8> {
    (0..len).map(|i| mix(rank, i, salt) as u8).collect()
}

/// Elements whose reduction is exact in every order: small integers for sums, ±1 and 2 for
/// products, anything for min/max and the bitwise operators.
fn elements(rank: usize, bytes: usize, r: Reduction, salt: u64) -> Vec<u8> {
    let size = r.dtype.size();
    let n = bytes / size;
    let mut out = Vec::with_capacity(bytes);
    for i in 0..n {
        let h = mix(rank, i, salt);
        let small: i64 = match r.op {
            ReduceOp::Sum => (h % 7) as i64 - 3,
            ReduceOp::Prod => [1, 2, -1, 1][(h % 4) as usize],
            _ => (h % 2001) as i64 - 1000,
        };
        let unsigned_small: u64 = match r.op {
            ReduceOp::Sum | ReduceOp::Min | ReduceOp::Max => h % 1000,
            ReduceOp::Prod => [1, 2, 3, 1][(h % 4) as usize],
            _ => h,
        };
        match r.dtype {
            Dtype::I32 => {
                let v = if r.op.is_bitwise() {
                    h as i32
                } else {
                    small as i32
                };
                out.extend_from_slice(&v.to_le_bytes())
            }
            Dtype::I64 => {
                let v = if r.op.is_bitwise() { h as i64 } else { small };
                out.extend_from_slice(&v.to_le_bytes())
            }
            Dtype::U32 => out.extend_from_slice(&(unsigned_small as u32).to_le_bytes()),
            Dtype::U64 => out.extend_from_slice(&unsigned_small.to_le_bytes()),
            Dtype::F32 => out.extend_from_slice(&(small as f32).to_le_bytes()),
            Dtype::F64 => out.extend_from_slice(&(small as f64).to_le_bytes()),
        }
    }
    out
}

/// The salt of one buffer kind in one generation.
fn salt(kind: u64, generation: u64) -> u64 {
    kind.wrapping_add(generation.wrapping_mul(16))
}

/// The send buffer of `rank` (empty where the collective has none).
pub fn send_input(problem: &Problem, rank: usize) -> Vec<u8> {
    send_input_at(problem, rank, 0)
}

/// The send buffer of `rank` in generation `generation` (empty where the collective has none).
pub fn send_input_at(problem: &Problem, rank: usize, generation: u64) -> Vec<u8> {
    let bytes = |len: usize, kind: u64| bytes_of(rank, len, salt(kind, generation));
    match problem {
        Problem::Broadcast { .. } | Problem::Barrier { .. } => Vec::new(),
        Problem::Reduce {
            reduction, bytes, ..
        }
        | Problem::Allreduce {
            reduction, bytes, ..
        }
        | Problem::Scan {
            reduction, bytes, ..
        } => elements(rank, *bytes, *reduction, salt(7, generation)),
        Problem::ReduceScatterBlock { reduction, .. }
        | Problem::ReduceScatter { reduction, .. } => {
            elements(rank, problem.total_bytes(), *reduction, salt(8, generation))
        }
        Problem::Allgather { block, .. } | Problem::Gather { block, .. } => bytes(*block, 1),
        Problem::Allgatherv { counts } => bytes(counts[rank], 1),
        Problem::Scatter { p, root, block } => {
            if rank == *root {
                bytes(p * block, 2)
            } else {
                Vec::new()
            }
        }
        Problem::Alltoall { p, block } => bytes(p * block, 3),
        Problem::Gatherv { counts, .. } => bytes(counts[rank], 6),
        Problem::Scatterv { root, counts } => {
            if rank == *root {
                bytes(counts.iter().sum(), 7)
            } else {
                Vec::new()
            }
        }
        Problem::Intergroup { a, b } => {
            let len = if rank < a.len() {
                a[rank]
            } else {
                b[rank - a.len()]
            };
            bytes(len, 4)
        }
    }
}

/// The receive buffer's initial content where it is input (the broadcast root).
pub fn recv_input(problem: &Problem, rank: usize) -> Option<Vec<u8>> {
    recv_input_at(problem, rank, 0)
}

/// The receive buffer's initial content where it is input (the broadcast root), in generation
/// `generation`.
pub fn recv_input_at(problem: &Problem, rank: usize, generation: u64) -> Option<Vec<u8>> {
    match problem {
        Problem::Broadcast { root, bytes, .. } if rank == *root => {
            Some(bytes_of(rank, *bytes, salt(5, generation)))
        }
        _ => None,
    }
}

/// What `rank`'s receive buffer must hold at the end (`None`: nothing is demanded), given
/// every rank's send buffer of generation 0 (as [`send_input`] makes them).
pub fn expected(problem: &Problem, rank: usize, sends: &[Vec<u8>]) -> Option<Vec<u8>> {
    match problem {
        // A part of every send buffer: sliced, not copied whole.
        Problem::ReduceScatterBlock { .. } | Problem::ReduceScatter { .. } => {
            reduce_scatter_part(problem, rank, |j, at, len| {
                sends[j].get(at..at + len).map(<[u8]>::to_vec)
            })
        }
        _ => expected_with(problem, rank, 0, |j| sends[j].clone()),
    }
}

/// Rank `rank`'s part of a reduce-scatter, reduced in rank order; `part(j, at, len)` is
/// `[at, at + len)` of rank j's send buffer.
fn reduce_scatter_part(
    problem: &Problem,
    rank: usize,
    part: impl Fn(usize, usize, usize) -> Option<Vec<u8>>,
) -> Option<Vec<u8>> {
    let (p, reduction, at, len) = match problem {
        Problem::ReduceScatterBlock {
            p,
            reduction,
            block,
        } => (*p, reduction, rank * block, *block),
        Problem::ReduceScatter { reduction, counts } => (
            counts.len(),
            reduction,
            counts[..rank].iter().sum(),
            counts[rank],
        ),
        _ => return None,
    };
    let mut acc = part(0, at, len)?;
    for j in 1..p {
        // The element buffers were built valid; an error cannot occur here.
        reduction.accumulate(&mut acc, &part(j, at, len)?).ok()?;
    }
    Some(acc)
}

/// What `rank`'s receive buffer must hold at the end of generation `generation` (`None`:
/// nothing is demanded); `send(j)` is rank j's send buffer. Only the send buffers the result
/// depends on are asked for, one at a time: a rank's result can be had without every rank's
/// input in memory at once.
pub fn expected_with(
    problem: &Problem,
    rank: usize,
    generation: u64,
    send: impl Fn(usize) -> Vec<u8>,
) -> Option<Vec<u8>> {
    let fold = |ranks: std::ops::Range<usize>, r: &Reduction| -> Option<Vec<u8>> {
        let mut it = ranks;
        let first = it.next()?;
        let mut acc = send(first);
        for j in it {
            // The element buffers were built valid; an error cannot occur here.
            r.accumulate(&mut acc, &send(j)).ok()?;
        }
        Some(acc)
    };
    let concat = |ranks: std::ops::Range<usize>| -> Vec<u8> { ranks.flat_map(&send).collect() };
    match problem {
        Problem::Broadcast { root, .. } => recv_input_at(problem, *root, generation),
        Problem::Reduce {
            p, root, reduction, ..
        } => (rank == *root).then(|| fold(0..*p, reduction)).flatten(),
        Problem::Allreduce { p, reduction, .. } => fold(0..*p, reduction),
        Problem::ReduceScatterBlock { .. } | Problem::ReduceScatter { .. } => {
            reduce_scatter_part(problem, rank, |j, at, len| {
                send(j).get(at..at + len).map(<[u8]>::to_vec)
            })
        }
        Problem::Scan {
            reduction,
            exclusive,
            ..
        } => {
            if *exclusive {
                fold(0..rank, reduction)
            } else {
                fold(0..rank + 1, reduction)
            }
        }
        Problem::Allgather { p, .. } => Some(concat(0..*p)),
        Problem::Allgatherv { counts } => Some(concat(0..counts.len())),
        Problem::Scatter { root, block, .. } => {
            Some(send(*root)[rank * block..(rank + 1) * block].to_vec())
        }
        Problem::Gather { p, root, .. } => (rank == *root).then(|| concat(0..*p)),
        Problem::Gatherv { root, counts } => (rank == *root).then(|| concat(0..counts.len())),
        Problem::Scatterv { root, counts } => {
            let at: usize = counts[..rank].iter().sum();
            Some(send(*root)[at..at + counts[rank]].to_vec())
        }
        Problem::Alltoall { p, block } => Some(
            (0..*p)
                .flat_map(|i| send(i)[rank * block..(rank + 1) * block].to_vec())
                .collect(),
        ),
        Problem::Barrier { .. } => None,
        Problem::Intergroup { a, b } => {
            if rank < a.len() {
                Some(concat(a.len()..a.len() + b.len()))
            } else {
                Some(concat(0..a.len()))
            }
        }
    }
}
