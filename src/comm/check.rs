//! The full argument check (`CIRCULANT_CHECK=1`): before every operation the ranks exchange a
//! fixed-size record of their call (the operation, the arguments that must agree, the
//! algorithm, and the error if this rank refused its own arguments), and every rank compares
//! them all. A difference fails the call on every rank with the same message, naming the
//! first rank that differs from rank 0 and how.
//!
//! Without it, only disagreements between ranks that exchange data in the call are caught
//! (by the digest of the ready tokens).
//!
//! Why it exists: docs/architecture.md, section "The one-sided protocol (src/transport)",
//! paragraph "Disagreeing ranks".

use crate::fabric::Access::{Local, RemoteWrite};
use crate::fabric::RegisteredMemory;
use crate::plan::{registry, Algorithm, CostModel, Dtype, Problem, ReduceOp};
use crate::transport::{BufferViews, Transport, View};

use super::call::{digest, Shape};
use super::error::CommError;
use super::plan_cache::Planned;
use super::staging::Staging;

/// Bytes of one record.
pub(crate) const RECORD_BYTES: usize = 256;
const MAGIC: u32 = 0x6369_7231; // "cir1"
const OP_BYTES: usize = 24;
const ALGORITHM_BYTES: usize = 40;
const ERROR_AT: usize = 128;
const DIFFER: &str = "the ranks were called with different arguments";

/// The name of the exchange's own operation, and its algorithm.
pub(crate) const CHECK_OP: &str = "argument check";
pub(crate) const CHECK_ALGORITHM: &str = "bruck-allgather";

/// One rank's call, as exchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub op: String,
    pub root: Option<u64>,
    pub size: Option<u64>,
    pub counts: Option<(u64, u64, u64)>,
    pub split: Option<u64>,
    pub reduction: Option<(u8, u8)>,
    pub algorithm: String,
    pub error: Option<String>,
}

impl Record {
    /// The record of `op` on `problem`: with the algorithm this rank chose, or the error with
    /// which it refused the call.
    pub fn new(op: &str, problem: &Problem, chosen: Result<&str, String>) -> Record {
        let shape = Shape::of(problem);
        let (algorithm, error) = match chosen {
            Ok(name) => (name.to_string(), None),
            // The message names the operation already.
            Err(e) => {
                let e = e
                    .strip_prefix(&format!("{op}: "))
                    .map_or(e.clone(), str::to_string);
                (String::new(), Some(e))
            }
        };
        Record {
            op: op.to_string(),
            root: shape.root.map(|r| r as u64),
            size: shape.size.map(|(_, n)| n as u64),
            counts: shape.counts.as_ref().map(|c| {
                let total = c.iter().fold(0u64, |s, &x| s.saturating_add(x as u64));
                (c.len() as u64, total, shape.counts_digest())
            }),
            split: shape.split.map(|s| s as u64),
            reduction: shape.reduction.map(|r| (r.dtype as u8, r.op as u8)),
            algorithm,
            error,
        }
    }

    pub fn to_bytes(&self) -> [u8; RECORD_BYTES] {
        let mut out = [0u8; RECORD_BYTES];
        out[..4].copy_from_slice(&MAGIC.to_le_bytes());
        let mut flags = 0u8;
        let mut put = |at: usize, v: Option<u64>, bit: u8, out: &mut [u8; RECORD_BYTES]| {
            if let Some(v) = v {
                flags |= bit;
                out[at..at + 8].copy_from_slice(&v.to_le_bytes());
            }
        };
        put(8, self.root, 1, &mut out);
        put(16, self.size, 2, &mut out);
        put(24, self.counts.map(|c| c.0), 4, &mut out);
        put(32, self.counts.map(|c| c.1), 4, &mut out);
        put(40, self.counts.map(|c| c.2), 4, &mut out);
        put(48, self.split, 8, &mut out);
        if let Some((dtype, op)) = self.reduction {
            flags |= 16;
            out[5] = dtype;
            out[6] = op;
        }
        if self.error.is_some() {
            flags |= 32;
        }
        out[4] = flags;
        put_text(&mut out[64..64 + OP_BYTES], &self.op);
        put_text(&mut out[88..88 + ALGORITHM_BYTES], &self.algorithm);
        put_text(&mut out[ERROR_AT..], self.error.as_deref().unwrap_or(""));
        out
    }

    /// Decodes a record; `None` if it is not one (a peer of another version).
    pub fn from_bytes(bytes: &[u8]) -> Option<Record> {
        if bytes.len() != RECORD_BYTES || bytes[..4] != MAGIC.to_le_bytes() {
            return None;
        }
        let flags = bytes[4];
        let word = |at: usize, bit: u8| {
            (flags & bit != 0).then(|| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&bytes[at..at + 8]);
                u64::from_le_bytes(w)
            })
        };
        let counts = match (word(24, 4), word(32, 4), word(40, 4)) {
            (Some(a), Some(b), Some(c)) => Some((a, b, c)),
            _ => None,
        };
        Some(Record {
            op: get_text(&bytes[64..64 + OP_BYTES]),
            root: word(8, 1),
            size: word(16, 2),
            counts,
            split: word(48, 8),
            reduction: (flags & 16 != 0).then_some((bytes[5], bytes[6])),
            algorithm: get_text(&bytes[88..88 + ALGORITHM_BYTES]),
            error: (flags & 32 != 0).then(|| get_text(&bytes[ERROR_AT..])),
        })
    }
}

fn put_text(out: &mut [u8], text: &str) {
    // Cut at a character boundary so that the text stays valid UTF-8.
    let mut end = text.len().min(out.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    out[..end].copy_from_slice(&text.as_bytes()[..end]);
}

fn get_text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

fn reduction_name((dtype, op): (u8, u8)) -> String {
    let dtype = Dtype::ALL.get(usize::from(dtype));
    let op = ReduceOp::ALL.get(usize::from(op));
    match (dtype, op) {
        (Some(d), Some(o)) => format!("{o} over {d}"),
        _ => "an unknown reduction".to_string(),
    }
}

/// The verdict over every rank's record (in rank order): `None` if all agree and none
/// refused its call, else what differed. Every rank computes the same message.
pub(crate) fn compare(records: &[Option<Record>]) -> Option<String> {
    let unreadable = records.iter().position(Option::is_none);
    if let Some(r) = unreadable {
        return Some(format!(
            "rank {r} sent an argument record this rank cannot read (another version, or another collective)"
        ));
    }
    let records: Vec<&Record> = records.iter().flatten().collect();
    let first = records.first()?;
    for (r, rec) in records.iter().enumerate().skip(1) {
        let with = |what: &str, theirs: String, ours: String| {
            Some(format!(
                "{DIFFER}: rank {r} called {} with {what} {theirs}, rank 0 with {what} {ours}",
                rec.op
            ))
        };
        if rec.op != first.op {
            return Some(format!(
                "{DIFFER}: rank {r} called {}, rank 0 called {}",
                rec.op, first.op
            ));
        }
        let show = |v: Option<u64>| v.map_or("none".to_string(), |v| v.to_string());
        if rec.root != first.root {
            return with("root", show(rec.root), show(first.root));
        }
        if rec.size != first.size {
            return with("size", show(rec.size), show(first.size));
        }
        if rec.split != first.split {
            return with("group A of size", show(rec.split), show(first.split));
        }
        if rec.counts != first.counts {
            let (theirs, ours) = (
                rec.counts.unwrap_or_default(),
                first.counts.unwrap_or_default(),
            );
            return if (theirs.0, theirs.1) != (ours.0, ours.1) {
                Some(format!(
                    "{DIFFER}: rank {r} called {} with {} counts summing to {}, rank 0 with {} counts summing to {}",
                    rec.op, theirs.0, theirs.1, ours.0, ours.1
                ))
            } else {
                Some(format!(
                    "{DIFFER}: rank {r} called {} with other counts than rank 0 (same number and sum)",
                    rec.op
                ))
            };
        }
        if rec.reduction != first.reduction {
            let name = |x: Option<(u8, u8)>| x.map_or("none".to_string(), reduction_name);
            return with("reduction", name(rec.reduction), name(first.reduction));
        }
    }
    if let Some((r, rec)) = records
        .iter()
        .enumerate()
        .find(|(_, rec)| rec.error.is_some())
    {
        return Some(format!(
            "rank {r} refused its arguments: {}",
            rec.error.as_deref().unwrap_or_default()
        ));
    }
    for (r, rec) in records.iter().enumerate().skip(1) {
        if rec.algorithm != first.algorithm {
            return Some(format!(
                "{DIFFER}: rank {r} runs {} with algorithm {}, rank 0 with {}",
                rec.op, rec.algorithm, first.algorithm
            ));
        }
    }
    None
}

/// The algorithm of the exchange itself: a regular allgather of one record per rank.
pub(crate) fn exchange_problem(p: usize) -> Problem {
    Problem::Allgather {
        p,
        block: RECORD_BYTES,
    }
}

pub(crate) fn exchange_algorithm(
    p: usize,
    model: &crate::plan::CostModel,
) -> Result<Box<dyn Algorithm>, crate::plan::PlanError> {
    registry::by_name(CHECK_ALGORITHM, &exchange_problem(p), model)
}

/// The memory of the check's exchange, and its plan (kept unless the plan cache is off).
#[derive(Default)]
pub(crate) struct Checker {
    mem: Option<(RegisteredMemory, RegisteredMemory)>,
    plan: Option<Planned>,
}

/// What the check's exchange runs on: the communicator's transport, its scratch memory, and
/// the model that plans the exchange.
pub(crate) struct Exchange<'c> {
    pub transport: &'c mut Transport,
    pub staging: &'c mut Staging,
    pub model: &'c CostModel,
    /// Whether the exchange's plan is kept for the next call.
    pub keep_plan: bool,
}

impl Checker {
    /// Forgets the exchange's plan (made under another model).
    pub fn forget_plan(&mut self) {
        self.plan = None;
    }

    /// The full argument check (`CIRCULANT_CHECK=1`): every rank's record of this call is
    /// exchanged over `on` and compared on every rank; a difference, or a rank that refused
    /// its call, fails the call everywhere with the same message.
    pub fn agree(
        &mut self,
        on: Exchange<'_>,
        op: &'static str,
        problem: &Problem,
        chosen: Result<&str, String>,
    ) -> super::error::Result<()> {
        let Exchange {
            transport,
            staging,
            model,
            keep_plan,
        } = on;
        let record = Record::new(op, problem, chosen);
        let p = transport.size();
        let planned = match self.plan.clone() {
            Some(planned) => planned,
            None => {
                let algorithm = exchange_algorithm(p, model)?;
                let plan = algorithm.rank_plan(transport.rank())?;
                // Merged writes and the eager path as for any call of the same size.
                let bytes = exchange_problem(p).total_bytes();
                let planned = Planned {
                    algorithm: algorithm.name(),
                    prepared: transport.prepare_sized(CHECK_OP, algorithm.as_ref(), plan, bytes)?,
                    digest: digest(CHECK_OP, algorithm.name(), &exchange_problem(p)),
                };
                // The exchange's plan depends on p and the model only.
                if keep_plan {
                    self.plan = Some(planned.clone());
                }
                planned
            }
        };
        let need = planned.prepared.buffers;
        let (send, recv) = match self.mem.take() {
            Some(mem) => mem,
            None => (
                transport.alloc(RECORD_BYTES, Local)?,
                transport.alloc(p * RECORD_BYTES, RemoteWrite)?,
            ),
        };
        let (send, recv) = &*self.mem.insert((send, recv));
        staging.ensure_scratch(transport, need.scratch)?;
        send.store(0, &record.to_bytes())?;
        let buffers = BufferViews {
            send: Some(View::prefix(send, RECORD_BYTES)),
            recv: Some(View::prefix(recv, p * RECORD_BYTES)),
            scratch: staging.scratch_view(need.scratch),
        };
        let operation = transport.start(CHECK_OP, planned.digest, &planned.prepared, buffers)?;
        let stats = transport.finish(operation, buffers)?;
        // The check's own copies are not the user's.
        transport.discount_copied(stats.bytes_copied);
        let records: Vec<Option<Record>> = recv
            .to_vec()
            .chunks_exact(RECORD_BYTES)
            .map(Record::from_bytes)
            .collect();
        match compare(&records) {
            None => Ok(()),
            Some(what) => {
                transport.abandon(op, &what);
                Err(CommError::Disagree { op, what })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bcast(root: usize, bytes: usize) -> Problem {
        Problem::Broadcast { p: 4, root, bytes }
    }

    #[test]
    fn records_round_trip() {
        let r = Record::new("bcast", &bcast(1, 10), Ok("circulant-bcast"));
        let back = Record::from_bytes(&r.to_bytes()).unwrap();
        assert_eq!(back.root, Some(1));
        assert_eq!(back.size, Some(10));
        assert_eq!(back.algorithm, "circulant-bcast");
        assert_eq!(back.error, None);
        let e = Record::new("gather", &bcast(0, 3), Err("é".repeat(200)));
        let back = Record::from_bytes(&e.to_bytes()).unwrap();
        assert!(back.error.unwrap().starts_with("éé"));
        assert_eq!(Record::from_bytes(&[0u8; RECORD_BYTES]), None);
    }

    #[test]
    fn the_first_difference_is_named() {
        let ok = |root, bytes, alg: &'static str| {
            Record::from_bytes(&Record::new("bcast", &bcast(root, bytes), Ok(alg)).to_bytes())
        };
        let same = vec![ok(0, 8, "a"), ok(0, 8, "a"), ok(0, 8, "a")];
        assert_eq!(compare(&same), None);
        let root = vec![ok(0, 8, "a"), ok(0, 8, "a"), ok(1, 8, "a")];
        assert_eq!(
            compare(&root).unwrap(),
            format!("{DIFFER}: rank 2 called bcast with root 1, rank 0 with root 0")
        );
        let alg = vec![ok(0, 8, "a"), ok(0, 8, "b")];
        assert_eq!(
            compare(&alg).unwrap(),
            format!("{DIFFER}: rank 1 runs bcast with algorithm b, rank 0 with a")
        );
        let refused = Record::new(
            "bcast",
            &bcast(0, 8),
            Err("the recv buffer is short".into()),
        );
        let v = vec![ok(0, 8, "a"), Record::from_bytes(&refused.to_bytes())];
        assert_eq!(
            compare(&v).unwrap(),
            "rank 1 refused its arguments: the recv buffer is short"
        );
        let other = Record::new("barrier", &Problem::Barrier { p: 4 }, Ok("x"));
        let v = vec![ok(0, 8, "a"), Record::from_bytes(&other.to_bytes())];
        assert_eq!(
            compare(&v).unwrap(),
            format!("{DIFFER}: rank 1 called barrier, rank 0 called bcast")
        );
    }
}
