//! A plan materialised once for repeated starts, checked against what the wire and the
//! provider can carry: its rounds, the writes each transfer is posted as and the writes each
//! round expects.
//!
//! Zero-copy operations merge a transfer's pieces into the scatter-gather writes of
//! [`merge::merge_transfer`] under the job's [`IovLimits`] (the same on every rank), and a
//! target counts the merged writes its sources send ([`merge::Incoming`], from their plans).
//! Eager operations, and plans prepared without their algorithm, post one write per piece
//! and count pieces, as the plan's expectations do (an eager slot header counts pieces too).

use std::sync::Arc;

use crate::plan::merge::{self, IovLimits, Write};
use crate::plan::{self, Algorithm, Local, RankPlan, Round};

use super::{wire, Result, TransportError};

/// Provider limits the transport honours.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest message one write may carry.
    pub max_msg_size: usize,
}

/// A plan materialised for repeated starts ([`super::Transport::prepare`]): its [`Parts`]
/// shared, so that cloning it (every start does) is one reference count.
#[derive(Clone, Debug)]
pub struct Prepared(Arc<Parts>);

impl std::ops::Deref for Prepared {
    type Target = Parts;

    fn deref(&self) -> &Parts {
        &self.0
    }
}

/// What a [`Prepared`] plan holds.
#[derive(Clone, Debug)]
pub struct Parts {
    /// Buffer sizes the plan needs.
    pub buffers: plan::BufferSizes,
    pub(super) setup: Arc<[Local]>,
    pub(super) rounds: Arc<[Round]>,
    /// Writes expected per round.
    pub(super) expected: Arc<[usize]>,
    /// The writes every transfer is posted as, transfers in plan order (rounds, then sends).
    pub(super) writes: Arc<[Write]>,
    /// Where each transfer's writes start in `writes` (one more entry than transfers).
    pub(super) transfer_writes: Arc<[usize]>,
    /// The ranks that write into this one (they get ready tokens).
    pub(super) writers: Arc<[usize]>,
    /// The ranks this one writes data into (it waits for their tokens).
    pub(super) targets: Arc<[usize]>,
    /// Whether what arrives are signals (no receive or scratch buffer) rather than data.
    pub(super) receives_signals: bool,
    /// Whether the operation takes the eager path (the same on every rank).
    pub(super) eager: bool,
}

impl Prepared {
    /// Materialises `plan` (its rounds, expectations and writers) for `size` ranks, checked
    /// against the provider's `limits`, so that it can be started many times. Every piece is
    /// one write and the target counts pieces: every rank of the operation must prepare it
    /// this way.
    pub fn new(name: &str, plan: RankPlan<'_>, size: usize, limits: Limits) -> Result<Prepared> {
        Self::build(name, plan, size, limits, None)
    }

    /// As [`Self::new`], with each transfer posted as its merged writes under `iov` and each
    /// round expecting the merged writes of its sources, read from `algorithm` (whose plan
    /// for this rank `plan` is): every rank of the operation must prepare it this way, with
    /// the same limits.
    pub fn merged(
        name: &str,
        algorithm: &dyn Algorithm,
        plan: RankPlan<'_>,
        size: usize,
        limits: Limits,
        iov: IovLimits,
    ) -> Result<Prepared> {
        Self::build(name, plan, size, limits, Some((algorithm, iov)))
    }

    fn build(
        name: &str,
        plan: RankPlan<'_>,
        size: usize,
        limits: Limits,
        merge: Option<(&dyn Algorithm, IovLimits)>,
    ) -> Result<Prepared> {
        let invalid = |what: String| TransportError::Invalid {
            op: name.to_string(),
            what,
        };
        let rank = plan.rank;
        let mut incoming =
            merge.map(|(alg, iov)| merge::Incoming::trusting_single_pieces(alg, rank, iov));
        let rounds: Vec<Round> = plan.rounds.collect();
        let mut expected = Vec::with_capacity(rounds.len());
        let mut writers = Vec::new();
        let mut targets = Vec::new();
        let mut writes = Vec::new();
        let mut transfer_writes = vec![0];
        for round in &rounds {
            if u64::from(round.index) > wire::MAX_ROUND {
                return Err(invalid(format!(
                    "round {} does not fit the {} bits of remote CQ data",
                    round.index,
                    wire::ROUND_BITS
                )));
            }
            expected.push(match incoming.as_mut() {
                Some(incoming) => incoming.expects(round)?.iter().map(|e| e.writes).sum(),
                None => round.expects.iter().map(|e| e.writes).sum(),
            });
            writers.extend(round.expects.iter().map(|e| e.from));
            for transfer in &round.sends {
                if transfer.to >= size {
                    return Err(invalid(format!("a write to rank {}", transfer.to)));
                }
                if transfer.bytes() > 0 {
                    targets.push(transfer.to);
                }
                let posted = match merge {
                    Some((_, iov)) => merge::merge_transfer(transfer, iov),
                    None => merge::piece_writes(transfer),
                };
                for write in &posted {
                    if write.bytes() > limits.max_msg_size && limits.max_msg_size > 0 {
                        return Err(invalid(format!(
                            "a write of {} bytes ({} pieces) exceeds the provider's max_msg_size {}",
                            write.bytes(),
                            write.pieces,
                            limits.max_msg_size
                        )));
                    }
                }
                writes.extend(posted);
                transfer_writes.push(writes.len());
            }
        }
        writers.sort_unstable();
        writers.dedup();
        targets.sort_unstable();
        targets.dedup();
        if let Some(&w) = writers.last().filter(|&&w| w >= size) {
            return Err(invalid(format!("writes expected from rank {w}")));
        }
        Ok(Prepared::of(Parts {
            receives_signals: plan.buffers.recv == 0 && plan.buffers.scratch == 0,
            eager: false,
            buffers: plan.buffers,
            setup: plan.setup.into(),
            rounds: rounds.into(),
            expected: expected.into(),
            writes: writes.into(),
            transfer_writes: transfer_writes.into(),
            writers: writers.into(),
            targets: targets.into(),
        }))
    }

    fn of(parts: Parts) -> Prepared {
        Prepared(Arc::new(parts))
    }

    /// The same plan taking the eager path (the same on every rank).
    pub(super) fn into_eager(self) -> Prepared {
        let mut parts = Arc::try_unwrap(self.0).unwrap_or_else(|shared| (*shared).clone());
        parts.eager = true;
        Prepared::of(parts)
    }

    /// A plan that does nothing (the stand-in for an operation given up before its start).
    pub(super) fn empty() -> Prepared {
        Prepared::of(Parts {
            buffers: plan::BufferSizes::default(),
            setup: Arc::new([]),
            rounds: Arc::new([]),
            expected: Arc::new([]),
            writes: Arc::new([]),
            transfer_writes: Arc::new([0]),
            writers: Arc::new([]),
            targets: Arc::new([]),
            receives_signals: true,
            eager: false,
        })
    }

    /// Whether the operation takes the eager path.
    pub fn is_eager(&self) -> bool {
        self.eager
    }

    /// Rounds in which this rank does something.
    pub fn rounds(&self) -> usize {
        self.rounds.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{registry, CostModel, Problem};

    const LIMITS: Limits = Limits { max_msg_size: 0 };

    fn allgatherv(p: usize) -> Box<dyn Algorithm> {
        let problem = Problem::Allgatherv {
            counts: (0..p).map(|r| 8 + r % 3).collect(),
        };
        let model = CostModel {
            alpha: 1e-6,
            beta: 1e-10,
            o: 1e-7,
        };
        registry::by_name("circulant-allgatherv", &problem, &model).expect("applies")
    }

    #[test]
    fn merged_plans_post_and_expect_the_writes_of_the_merge() {
        let p = 8;
        let alg = allgatherv(p);
        for iov in [
            IovLimits::SINGLE,
            IovLimits::new(4, 1).unwrap(),
            IovLimits::new(4, 4).unwrap(),
        ] {
            let (mut sent, mut arriving) = (0, 0);
            for rank in 0..p {
                let plan = alg.rank_plan(rank).unwrap();
                let prepared = Prepared::merged("t", alg.as_ref(), plan, p, LIMITS, iov).unwrap();
                let rounds: Vec<Round> = alg.rank_plan(rank).unwrap().rounds.collect();
                let writes: Vec<Write> = rounds
                    .iter()
                    .flat_map(|r| merge::round_writes(r, iov))
                    .collect();
                assert_eq!(&prepared.writes[..], &writes[..], "rank {rank}, {iov}");
                let transfers: usize = rounds.iter().map(|r| r.sends.len()).sum();
                assert_eq!(prepared.transfer_writes.len(), transfers + 1);
                assert_eq!(prepared.transfer_writes.last(), Some(&writes.len()));
                sent += writes.len();
                arriving += prepared.expected.iter().sum::<usize>();
            }
            // Every write posted is expected by its target.
            assert_eq!(sent, arriving, "{iov}");
        }
    }

    #[test]
    fn unmerged_plans_post_and_expect_one_write_per_piece() {
        let p = 5;
        let alg = allgatherv(p);
        for rank in 0..p {
            let prepared = Prepared::new("t", alg.rank_plan(rank).unwrap(), p, LIMITS).unwrap();
            let rounds: Vec<Round> = alg.rank_plan(rank).unwrap().rounds.collect();
            let pieces: usize = rounds
                .iter()
                .flat_map(|r| &r.sends)
                .map(|t| t.pieces.len())
                .sum();
            assert_eq!(prepared.writes.len(), pieces);
            assert!(prepared.writes.iter().all(|w| w.pieces == 1));
            let expected: Vec<usize> = rounds
                .iter()
                .map(|r| r.expects.iter().map(|e| e.writes).sum())
                .collect();
            assert_eq!(&prepared.expected[..], &expected[..]);
        }
    }

    #[test]
    fn a_merged_write_above_max_msg_size_is_refused() {
        let alg = allgatherv(8);
        let small = Limits { max_msg_size: 9 };
        let err = Prepared::merged(
            "t",
            alg.as_ref(),
            alg.rank_plan(0).unwrap(),
            8,
            small,
            IovLimits::new(4, 4).unwrap(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("max_msg_size 9"), "{err}");
    }
}
