//! Inputs for simulated runs and the results the definition of each collective demands.

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
fn elements(rank: usize, bytes: usize, r: Reduction) -> Vec<u8> {
    let size = r.dtype.size();
    let n = bytes / size;
    let mut out = Vec::with_capacity(bytes);
    for i in 0..n {
        let h = mix(rank, i, 7);
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

/// The send buffer of `rank` (empty where the collective has none).
pub fn send_input(problem: &Problem, rank: usize) -> Vec<u8> {
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
        } => elements(rank, *bytes, *reduction),
        Problem::Allgather { block, .. } | Problem::Gather { block, .. } => {
            bytes_of(rank, *block, 1)
        }
        Problem::Allgatherv { counts } => bytes_of(rank, counts[rank], 1),
        Problem::Scatter { p, root, block } => {
            if rank == *root {
                bytes_of(rank, p * block, 2)
            } else {
                Vec::new()
            }
        }
        Problem::Alltoall { p, block } => bytes_of(rank, p * block, 3),
        Problem::Gatherv { counts, .. } => bytes_of(rank, counts[rank], 6),
        Problem::Scatterv { root, counts } => {
            if rank == *root {
                bytes_of(rank, counts.iter().sum(), 7)
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
            bytes_of(rank, len, 4)
        }
    }
}

/// The receive buffer's initial content where it is input (the broadcast root).
pub fn recv_input(problem: &Problem, rank: usize) -> Option<Vec<u8>> {
    match problem {
        Problem::Broadcast { root, bytes, .. } if rank == *root => Some(bytes_of(rank, *bytes, 5)),
        _ => None,
    }
}

/// What `rank`'s receive buffer must hold at the end (`None`: nothing is demanded).
pub fn expected(problem: &Problem, rank: usize, sends: &[Vec<u8>]) -> Option<Vec<u8>> {
    let fold = |ranks: std::ops::Range<usize>, r: &Reduction| -> Option<Vec<u8>> {
        let mut it = ranks;
        let first = it.next()?;
        let mut acc = sends[first].clone();
        for j in it {
            // The element buffers were built valid; an error cannot occur here.
            r.accumulate(&mut acc, &sends[j]).ok()?;
        }
        Some(acc)
    };
    match problem {
        Problem::Broadcast { root, bytes, .. } => Some(bytes_of(*root, *bytes, 5)),
        Problem::Reduce {
            p, root, reduction, ..
        } => (rank == *root).then(|| fold(0..*p, reduction)).flatten(),
        Problem::Allreduce { p, reduction, .. } => fold(0..*p, reduction),
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
        Problem::Allgather { .. } | Problem::Allgatherv { .. } => Some(sends.concat()),
        Problem::Scatter { root, block, .. } => {
            Some(sends[*root][rank * block..(rank + 1) * block].to_vec())
        }
        Problem::Gather { root, .. } | Problem::Gatherv { root, .. } => {
            (rank == *root).then(|| sends.concat())
        }
        Problem::Scatterv { root, counts } => {
            let at: usize = counts[..rank].iter().sum();
            Some(sends[*root][at..at + counts[rank]].to_vec())
        }
        Problem::Alltoall { p, block } => Some(
            (0..*p)
                .flat_map(|i| sends[i][rank * block..(rank + 1) * block].to_vec())
                .collect(),
        ),
        Problem::Barrier { .. } => None,
        Problem::Intergroup { a, .. } => {
            if rank < a.len() {
                Some(sends[a.len()..].concat())
            } else {
                Some(sends[..a.len()].concat())
            }
        }
    }
}
