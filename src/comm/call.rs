//! One collective call as the communicator runs it, and the arguments of it that every rank
//! must agree on, encoded explicitly (the digest that ready tokens carry and the records that
//! `CIRCULANT_CHECK` exchanges are built from these words, never from `Debug` output).
//!
//! How the digest is checked: docs/architecture.md, section "The one-sided protocol
//! (src/transport)", paragraph "Disagreeing ranks".

use std::time::{Duration, Instant};

use crate::plan::{Problem, Reduction};
use crate::transport::wire::Digest;

use super::error::Result;

/// Which algorithm a call uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Choice<'a> {
    /// The fastest in the α-β model for this p and size, unless `CIRCULANT_ALGORITHM` names
    /// one that applies.
    #[default]
    Auto,
    /// This algorithm (a name from `circulant model`).
    Named(&'a str),
}

/// When a call entered the communicator, where its software overhead is measured
/// ([`super::Communicator::measure_overhead`]): the clock is read only then, as its reads
/// cost a sixth of a small call on the shared segment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entered(Option<Instant>);

impl Entered {
    pub fn now(measured: bool) -> Self {
        Entered(measured.then(Instant::now))
    }

    /// The overhead up to now (zero where it is not measured).
    pub fn elapsed(self) -> Duration {
        self.0.map_or(Duration::ZERO, |at| at.elapsed())
    }

    /// The overhead up to `later` (zero where it is not measured).
    pub fn until(self, later: Instant) -> Duration {
        self.0
            .map_or(Duration::ZERO, |at| later.saturating_duration_since(at))
    }
}

/// Version of the encoding below: part of every digest, so that ranks of different library
/// versions fail instead of misreading each other.
const SHAPE_VERSION: u64 = 1;

/// One call of a collective on this rank.
pub(crate) struct Call<'a> {
    /// The operation the user called (`"bcast"`, `"allgatherv"`, ...), for messages.
    pub op: &'static str,
    pub problem: Problem,
    pub choice: Choice<'a>,
    /// The receive buffer holds input on this rank (the broadcast root's data): staged in.
    pub copy_in_recv: bool,
    /// The call leaves this rank's receive buffer as it was (the broadcast root): not staged
    /// out.
    pub recv_unchanged: bool,
    /// In place: (offset, length) of this rank's send data within the receive buffer.
    pub send_in_recv: Option<(usize, usize)>,
    /// The outcome of this rank's own checks of the arguments: a refused call is still
    /// consumed on every rank.
    pub checked: Result<()>,
}

impl<'a> Call<'a> {
    pub fn new(op: &'static str, problem: Problem, choice: Choice<'a>) -> Self {
        Call {
            op,
            problem,
            choice,
            copy_in_recv: false,
            recv_unchanged: false,
            send_in_recv: None,
            checked: Ok(()),
        }
    }

    pub fn checked(mut self, checked: Result<()>) -> Self {
        self.checked = checked;
        self
    }

    pub fn copy_in(mut self, yes: bool) -> Self {
        self.copy_in_recv = yes;
        self
    }

    pub fn unchanged(mut self, yes: bool) -> Self {
        self.recv_unchanged = yes;
        self
    }

    pub fn in_place(mut self, part: (usize, usize)) -> Self {
        self.send_in_recv = Some(part);
        self
    }
}

/// The arguments of a problem that must be equal on every rank.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Shape {
    /// The collective (`"broadcast"`, `"exscan"`, ...).
    pub collective: &'static str,
    pub root: Option<usize>,
    /// What the size means (`"bytes"`, `"block"`) and its value.
    pub size: Option<(&'static str, usize)>,
    /// Per-rank counts (the v-collectives; both groups' for the intergroup allgatherv).
    pub counts: Option<Vec<usize>>,
    /// Group A's size (intergroup allgatherv).
    pub split: Option<usize>,
    pub reduction: Option<Reduction>,
}

impl Shape {
    pub fn of(problem: &Problem) -> Shape {
        let mut shape = Shape {
            collective: crate::plan::collective_name(problem),
            root: None,
            size: None,
            counts: None,
            split: None,
            reduction: None,
        };
        match problem {
            Problem::Broadcast { root, bytes, .. } => {
                shape.root = Some(*root);
                shape.size = Some(("bytes", *bytes));
            }
            Problem::Reduce {
                root,
                reduction,
                bytes,
                ..
            } => {
                shape.root = Some(*root);
                shape.size = Some(("bytes", *bytes));
                shape.reduction = Some(*reduction);
            }
            Problem::Allreduce {
                reduction, bytes, ..
            }
            | Problem::Scan {
                reduction, bytes, ..
            } => {
                shape.size = Some(("bytes", *bytes));
                shape.reduction = Some(*reduction);
            }
            Problem::Allgather { block, .. } | Problem::Alltoall { block, .. } => {
                shape.size = Some(("block", *block));
            }
            Problem::ReduceScatterBlock {
                reduction, block, ..
            } => {
                shape.size = Some(("block", *block));
                shape.reduction = Some(*reduction);
            }
            Problem::ReduceScatter { reduction, counts } => {
                shape.counts = Some(counts.clone());
                shape.reduction = Some(*reduction);
            }
            Problem::Scatter { root, block, .. } | Problem::Gather { root, block, .. } => {
                shape.root = Some(*root);
                shape.size = Some(("block", *block));
            }
            Problem::Allgatherv { counts } => shape.counts = Some(counts.clone()),
            Problem::Scatterv { root, counts } | Problem::Gatherv { root, counts } => {
                shape.root = Some(*root);
                shape.counts = Some(counts.clone());
            }
            Problem::Intergroup { a, b } => {
                shape.split = Some(a.len());
                shape.counts = Some(a.iter().chain(b).copied().collect());
            }
            Problem::Barrier { .. } => {}
        }
        shape
    }

    /// The words every rank must agree on, in a fixed order: absent fields are marked, so
    /// that no two shapes encode alike.
    fn words(&self) -> Vec<u64> {
        let opt = |v: Option<usize>| match v {
            Some(v) => [1, v as u64],
            None => [0, 0],
        };
        let mut out = vec![SHAPE_VERSION];
        out.extend(opt(self.root));
        out.extend(opt(self.size.map(|(_, n)| n)));
        out.extend(opt(self.split));
        match self.reduction {
            Some(r) => out.extend([1, r.dtype as u64, r.op as u64]),
            None => out.extend([0, 0, 0]),
        }
        match &self.counts {
            Some(counts) => {
                out.push(counts.len() as u64 + 1);
                out.extend(counts.iter().map(|&c| c as u64));
            }
            None => out.push(0),
        }
        out
    }

    /// Digest of the counts alone (0 without counts).
    pub fn counts_digest(&self) -> u64 {
        self.counts.as_ref().map_or(0, |counts| {
            counts
                .iter()
                .fold(Digest::default(), |d, &c| d.word(c as u64))
                .finish()
        })
    }

    /// What a call with this shape, operation `op` and `algorithm` must agree on, as one
    /// word: the digest ready tokens carry.
    pub fn digest(&self, op: &str, algorithm: &str) -> u64 {
        self.words()
            .into_iter()
            .fold(
                Digest::default()
                    .text(op)
                    .text(self.collective)
                    .text(algorithm),
                Digest::word,
            )
            .finish()
    }
}

/// The digest of a call of `op` on `problem` with `algorithm`.
pub(crate) fn digest(op: &str, algorithm: &str, problem: &Problem) -> u64 {
    Shape::of(problem).digest(op, algorithm)
}

/// The digests of the last few calls' arguments: computing one costs more than a small call
/// on the shared segment, and programs repeat their calls (a ping-pong alternates two roots).
#[derive(Debug, Default)]
pub(crate) struct Digests {
    entries: Vec<(&'static str, &'static str, Problem, u64)>,
    next: usize,
}

/// Calls whose digests are kept.
const DIGESTS_KEPT: usize = 8;

impl Digests {
    /// The digest of a call of `op` on `problem` with `algorithm`.
    pub fn of(&mut self, op: &'static str, algorithm: &'static str, problem: &Problem) -> u64 {
        if let Some(entry) = self
            .entries
            .iter()
            .find(|(o, n, p, _)| *o == op && *n == algorithm && p == problem)
        {
            return entry.3;
        }
        let made = digest(op, algorithm, problem);
        let entry = (op, algorithm, problem.clone(), made);
        if self.entries.len() < DIGESTS_KEPT {
            self.entries.push(entry);
        } else {
            self.entries[self.next] = entry;
            self.next = (self.next + 1) % DIGESTS_KEPT;
        }
        made
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Dtype, ReduceOp};

    #[test]
    fn digests_differ_in_every_field() {
        let base = Problem::Broadcast {
            p: 4,
            root: 0,
            bytes: 10,
        };
        let d = digest("bcast", "circulant-bcast", &base);
        assert_eq!(d, digest("bcast", "circulant-bcast", &base.clone()));
        assert_ne!(d, digest("bcast", "binomial-bcast", &base));
        assert_ne!(d, digest("gather", "circulant-bcast", &base));
        let root1 = Problem::Broadcast {
            p: 4,
            root: 1,
            bytes: 10,
        };
        assert_ne!(d, digest("bcast", "circulant-bcast", &root1));
        let bytes = Problem::Broadcast {
            p: 4,
            root: 0,
            bytes: 11,
        };
        assert_ne!(d, digest("bcast", "circulant-bcast", &bytes));
        let sum = Reduction::new(Dtype::I32, ReduceOp::Sum).unwrap();
        let max = Reduction::new(Dtype::I32, ReduceOp::Max).unwrap();
        let r = |reduction| Problem::Allreduce {
            p: 4,
            reduction,
            bytes: 8,
        };
        assert_ne!(digest("a", "x", &r(sum)), digest("a", "x", &r(max)));
        let v = |counts: Vec<usize>| Problem::Allgatherv { counts };
        assert_ne!(
            digest("a", "x", &v(vec![1, 2])),
            digest("a", "x", &v(vec![2, 1]))
        );
        assert_ne!(
            digest("a", "x", &v(vec![1, 2])),
            digest("a", "x", &v(vec![1, 2, 0]))
        );
        // The same counts split differently into groups.
        let g = |a: Vec<usize>, b: Vec<usize>| Problem::Intergroup { a, b };
        assert_ne!(
            digest("a", "x", &g(vec![1], vec![2, 3])),
            digest("a", "x", &g(vec![1, 2], vec![3]))
        );
    }
}
