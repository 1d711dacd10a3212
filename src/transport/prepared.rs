//! A plan materialised once for repeated starts, checked against what the wire and the
//! provider can carry: its rounds, the writes each transfer is posted as and the writes each
//! round expects.
//!
//! Zero-copy operations merge a transfer's pieces into the scatter-gather writes of
//! [`merge::merge_transfer`] under the job's [`IovLimits`] (the same on every rank), and a
//! target counts the merged writes its sources send ([`merge::Incoming`], from their plans).
//! Plans prepared without their algorithm post one write per piece and count pieces, as the
//! plan's expectations do.
//!
//! Which pairs of ranks take the eager path ([`EagerPairs`]) is decided here, alike on both
//! ranks of a pair: every pair in an operation of at most the eager limit, else each pair whose
//! transfers in the operation carry at most the limit in total. An eager slot header counts
//! the merged writes of the transfer it ends, so a target expects the same count either way.

use std::collections::BTreeMap;
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

/// A plan materialised for repeated starts (`Transport::prepare`): its parts (`Parts`)
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
    /// Which of this rank's pairs take the eager path.
    pub(super) eager: EagerPairs,
    /// The eager limit the pairs were chosen under (0: none), part of the operation's digest
    /// so that ranks whose limits differ fail instead of choosing differently.
    pub(super) eager_limit: usize,
}

/// The pairs of an operation that take the eager path, as this rank sees them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum EagerPairs {
    /// None: every write waits for its target's ready token.
    #[default]
    None,
    /// Every pair (the operation carries at most the eager limit).
    All,
    /// Only these: the targets this rank writes to eagerly and the writers that write to it
    /// eagerly (each sorted), those whose transfers carry at most the limit in total.
    Pairs {
        /// Targets of eager writes.
        to: Arc<[usize]>,
        /// Ranks that write to this one eagerly.
        from: Arc<[usize]>,
    },
}

impl EagerPairs {
    /// Whether this rank writes to `to` eagerly.
    pub fn to(&self, to: usize) -> bool {
        match self {
            EagerPairs::None => false,
            EagerPairs::All => true,
            EagerPairs::Pairs { to: list, .. } => list.binary_search(&to).is_ok(),
        }
    }

    /// Whether `from` writes to this rank eagerly.
    pub fn from(&self, from: usize) -> bool {
        match self {
            EagerPairs::None => false,
            EagerPairs::All => true,
            EagerPairs::Pairs { from: list, .. } => list.binary_search(&from).is_ok(),
        }
    }
}

/// How an operation chooses its eager pairs ([`Prepared::sized`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EagerRule {
    /// The eager limit in bytes (the same on every rank; 0: no eager pairs).
    pub limit: usize,
    /// The operation's size (as every rank computes it) is at most the limit: every pair.
    pub all: bool,
}

impl Prepared {
    /// Materialises `plan` (its rounds, expectations and writers) for `size` ranks, checked
    /// against the provider's `limits`, so that it can be started many times. Every piece is
    /// one write and the target counts pieces: every rank of the operation must prepare it
    /// this way.
    pub fn new(name: &str, plan: RankPlan<'_>, size: usize, limits: Limits) -> Result<Prepared> {
        Self::build(name, plan, size, limits, None, None)
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
        Self::build(name, plan, size, limits, Some((algorithm, iov)), None)
    }

    /// As [`Self::merged`], with the pairs that take the eager path chosen by `eager`: every
    /// pair if `eager.all`, else each pair whose transfers carry more than nothing and at
    /// most `eager.limit` bytes in total (a target reads that from its writers' plans, or
    /// from [`Algorithm::bytes_between`]).
    #[allow(clippy::too_many_arguments)]
    pub fn sized(
        name: &str,
        algorithm: &dyn Algorithm,
        plan: RankPlan<'_>,
        size: usize,
        limits: Limits,
        iov: IovLimits,
        eager: EagerRule,
    ) -> Result<Prepared> {
        Self::build(
            name,
            plan,
            size,
            limits,
            Some((algorithm, iov)),
            Some(eager),
        )
    }

    fn build(
        name: &str,
        plan: RankPlan<'_>,
        size: usize,
        limits: Limits,
        merge: Option<(&dyn Algorithm, IovLimits)>,
        eager: Option<EagerRule>,
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
        let mut sent: BTreeMap<usize, usize> = BTreeMap::new();
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
                    *sent.entry(transfer.to).or_insert(0) += transfer.bytes();
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
        let eager_limit = eager.map_or(0, |e| e.limit);
        let eager = match (eager, merge) {
            (Some(rule), _) if rule.limit == 0 => EagerPairs::None,
            (Some(rule), _) if rule.all => EagerPairs::All,
            (Some(rule), Some((alg, _))) => {
                let fits = |bytes: usize| bytes > 0 && bytes <= rule.limit;
                let to: Vec<usize> = sent
                    .iter()
                    .filter(|&(_, &bytes)| fits(bytes))
                    .map(|(&to, _)| to)
                    .collect();
                let mut from = Vec::new();
                for &w in &writers {
                    if fits(alg.bytes_between(w, rank)?) {
                        from.push(w);
                    }
                }
                if to.is_empty() && from.is_empty() {
                    EagerPairs::None
                } else {
                    EagerPairs::Pairs {
                        to: to.into(),
                        from: from.into(),
                    }
                }
            }
            _ => EagerPairs::None,
        };
        Ok(Prepared::of(Parts {
            receives_signals: plan.buffers.recv == 0 && plan.buffers.scratch == 0,
            eager,
            eager_limit,
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

    /// The same plan with every pair eager under `limit` (the same on every rank).
    #[cfg(test)]
    pub(super) fn into_eager(self, limit: usize) -> Prepared {
        let mut parts = Arc::try_unwrap(self.0).unwrap_or_else(|shared| (*shared).clone());
        parts.eager = EagerPairs::All;
        parts.eager_limit = limit;
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
            eager: EagerPairs::None,
            eager_limit: 0,
        })
    }

    /// Which pairs take the eager path, as this rank sees them.
    pub fn eager_pairs(&self) -> &EagerPairs {
        &self.eager
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

    /// Problems with uneven pairs: some carry a few bytes, some many.
    fn mixed_problems(p: usize) -> Vec<crate::plan::Problem> {
        vec![
            Problem::Broadcast {
                p,
                root: p / 2,
                bytes: 300,
            },
            Problem::Allgatherv {
                counts: (0..p).map(|r| if r == 1 { 200 } else { r % 3 }).collect(),
            },
            Problem::Alltoall { p, block: 9 },
            Problem::Gather {
                p,
                root: 0,
                block: 7,
            },
        ]
    }

    #[test]
    fn both_ranks_of_a_pair_choose_the_eager_path_alike() {
        let model = CostModel {
            alpha: 1e-6,
            beta: 1e-10,
            o: 1e-7,
        };
        let iov = IovLimits::new(2, 2).unwrap();
        let (mut eager, mut zero_copy) = (0, 0);
        for p in 2..=9 {
            for problem in mixed_problems(p) {
                for alg in registry::applicable(&problem, &model).unwrap() {
                    for limit in [1, 9, 40, 100_000] {
                        let rule = EagerRule {
                            limit,
                            all: problem.total_bytes() <= limit,
                        };
                        let prepared: Vec<Prepared> = (0..p)
                            .map(|r| {
                                let plan = alg.rank_plan(r).unwrap();
                                Prepared::sized("t", alg.as_ref(), plan, p, LIMITS, iov, rule)
                                    .unwrap()
                            })
                            .collect();
                        for (w, plan) in prepared.iter().enumerate() {
                            for &t in plan.targets.iter() {
                                let writer = plan.eager_pairs().to(t);
                                let target = prepared[t].eager_pairs().from(w);
                                let what =
                                    format!("{} p={p} limit={limit}: {w} -> {t}", alg.name());
                                assert_eq!(writer, target, "{what}");
                                // Bytes by the plan and by the algorithm agree.
                                let bytes: usize = plan
                                    .rounds
                                    .iter()
                                    .flat_map(|r| &r.sends)
                                    .filter(|s| s.to == t)
                                    .map(|s| s.bytes())
                                    .sum();
                                assert_eq!(alg.bytes_between(w, t).unwrap(), bytes, "{what}");
                                assert_eq!(writer, rule.all || bytes <= limit, "{what}");
                                if writer {
                                    eager += 1;
                                } else {
                                    zero_copy += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(eager > 0 && zero_copy > 0, "{eager} eager, {zero_copy} not");
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
