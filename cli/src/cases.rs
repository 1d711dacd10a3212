//! The cases a job checks and what every rank must see in each: one definition for the
//! selftest, the demo, the benchmark's data checks and the tests that run real jobs.
//!
//! [`matrix`] lists the one-call collectives × sizes × roots × count distributions checked for
//! p ranks ([`Scope::Quick`] or [`Scope::Full`]); [`Case::algorithms`] adds the algorithms that
//! apply. [`CaseData`] gives, for one problem and one generation of data, what each rank passes
//! (built on [`super::data`]) and what its receive buffer must hold afterwards ([`Expected`]),
//! including the buffers a rank passes that the collective must leave alone.

use circulant::plan::distribution::Distribution;
use circulant::plan::{displacements, registry, CostModel, Dtype, PlanError, Problem};
use circulant::plan::{ReduceOp, Reduction};

use circulant::sim::data;

/// The byte a receive buffer holds before a call wherever the call has not written yet; in
/// buffers the call must leave alone it must still be there afterwards.
pub const UNTOUCHED: u8 = 0xa5;

/// The one-call collectives of the matrix, by the names [`Case::collective`] gives.
pub const COLLECTIVES: [&str; 15] = [
    "barrier",
    "bcast",
    "allgather",
    "allgatherv",
    "allreduce",
    "reduce",
    "reduce_scatter_block",
    "reduce_scatter",
    "scan",
    "exscan",
    "gather",
    "scatter",
    "gatherv",
    "scatterv",
    "alltoall",
];

/// The reductions of the matrix: an exact integer sum, a floating-point order operator and a
/// bitwise one on a 4-byte type (sizes then differ in their remainders).
pub const REDUCTIONS: [Reduction; 3] = [
    Reduction {
        dtype: Dtype::I64,
        op: ReduceOp::Sum,
    },
    Reduction {
        dtype: Dtype::F64,
        op: ReduceOp::Max,
    },
    Reduction {
        dtype: Dtype::U32,
        op: ReduceOp::Bxor,
    },
];

/// The largest block of the rooted and personalised collectives (their buffers grow with p).
const BLOCK_LIMIT: usize = 64 << 10;

/// How much of the matrix to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Fewer sizes, roots and distributions (for suites that run many jobs).
    Quick,
    /// Every size, every root for p ≤ 8, three distributions for the rooted v-collectives.
    Full,
}

impl Scope {
    /// Message sizes in bytes: 0 and odd ones included.
    pub fn sizes(self) -> &'static [usize] {
        match self {
            Scope::Quick => &[0, 1, 7, 4096 + 3],
            Scope::Full => &[0, 1, 7, 4096 + 3, (1 << 20) + 1],
        }
    }

    /// Roots: every rank for p ≤ 8 in the full scope, else the first, middle and last.
    pub fn roots(self, p: usize) -> Vec<usize> {
        if p <= 8 && self == Scope::Full {
            (0..p).collect()
        } else {
            let mut r = vec![0, p / 2, p.saturating_sub(1)];
            r.dedup();
            r
        }
    }

    /// The count distributions of gatherv and scatterv (allgatherv has all of them).
    pub fn rooted_distributions(self) -> &'static [Distribution] {
        match self {
            Scope::Quick => &[Distribution::Mod3],
            Scope::Full => &[
                Distribution::Regular,
                Distribution::HalfFull,
                Distribution::Mod3,
            ],
        }
    }
}

/// One problem of the matrix with its name.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// What is checked, e.g. `bcast 7 B root 2`.
    pub name: String,
    /// The collective and its sizes.
    pub problem: Problem,
}

impl Case {
    fn new(name: String, problem: Problem) -> Self {
        Case { name, problem }
    }

    /// The collective's name as in [`COLLECTIVES`] (and `circulant selftest --only`).
    pub fn collective(&self) -> &'static str {
        collective(&self.problem)
    }

    /// The names of the algorithms that implement this case, as `registry::applicable` lists
    /// them.
    pub fn algorithms(&self, model: &CostModel) -> Result<Vec<&'static str>, PlanError> {
        Ok(registry::applicable(&self.problem, model)?
            .iter()
            .map(|a| a.name())
            .collect())
    }
}

/// The collective's name as in [`COLLECTIVES`]; `intercomm` for the intergroup problem.
pub fn collective(problem: &Problem) -> &'static str {
    match problem {
        Problem::Barrier { .. } => "barrier",
        Problem::Broadcast { .. } => "bcast",
        Problem::Allgather { .. } => "allgather",
        Problem::Allgatherv { .. } => "allgatherv",
        Problem::Allreduce { .. } => "allreduce",
        Problem::Reduce { .. } => "reduce",
        Problem::Scan {
            exclusive: false, ..
        } => "scan",
        Problem::Scan {
            exclusive: true, ..
        } => "exscan",
        Problem::Gather { .. } => "gather",
        Problem::Scatter { .. } => "scatter",
        Problem::Gatherv { .. } => "gatherv",
        Problem::Scatterv { .. } => "scatterv",
        Problem::Alltoall { .. } => "alltoall",
        Problem::Intergroup { .. } => "intercomm",
        Problem::ReduceScatterBlock { .. } => "reduce_scatter_block",
        Problem::ReduceScatter { .. } => "reduce_scatter",
    }
}

/// Every case for p ranks (p ≥ 1) in `scope`, in a fixed order: barrier, broadcast,
/// allgather, allgatherv, the reductions, gather/scatter/alltoall, gatherv/scatterv.
pub fn matrix(p: usize, scope: Scope) -> Vec<Case> {
    let mut cases = vec![Case::new("barrier".into(), Problem::Barrier { p })];
    cases.extend(broadcasts(p, scope));
    cases.extend(allgathers(p, scope));
    cases.extend(reductions(p, scope));
    cases.extend(rooted_blocks(p, scope));
    cases.extend(rooted_vectors(p, scope));
    cases
}

fn broadcasts(p: usize, scope: Scope) -> Vec<Case> {
    let mut out = Vec::new();
    for &bytes in scope.sizes() {
        for root in scope.roots(p) {
            out.push(Case::new(
                format!("bcast {bytes} B root {root}"),
                Problem::Broadcast { p, root, bytes },
            ));
        }
    }
    out
}

/// Allgather at each size split over the ranks, then allgatherv with every distribution.
fn allgathers(p: usize, scope: Scope) -> Vec<Case> {
    let mut out = Vec::new();
    for &bytes in scope.sizes() {
        let block = bytes.div_ceil(p);
        out.push(Case::new(
            format!("allgather {block} B/rank"),
            Problem::Allgather { p, block },
        ));
    }
    for &bytes in scope.sizes() {
        for dist in Distribution::ALL {
            let c = dist.base_for_total(p, bytes);
            out.push(Case::new(
                format!("allgatherv {dist} c={c}"),
                Problem::Allgatherv {
                    counts: dist.counts(p, c),
                },
            ));
        }
    }
    out
}

/// Allreduce, reduce (every root), reduce-scatter (equal blocks, and the parts of every count
/// distribution), scan and exscan for each reduction and size (rounded down to whole
/// elements).
fn reductions(p: usize, scope: Scope) -> Vec<Case> {
    let mut out = Vec::new();
    for reduction in REDUCTIONS {
        let size = reduction.dtype.size();
        for &bytes in scope.sizes() {
            let bytes = bytes / size * size;
            let tag = format!("{} {:?} {bytes} B", reduction.op, reduction.dtype);
            out.push(Case::new(
                format!("allreduce {tag}"),
                Problem::Allreduce {
                    p,
                    reduction,
                    bytes,
                },
            ));
            for root in scope.roots(p) {
                out.push(Case::new(
                    format!("reduce {tag} root {root}"),
                    Problem::Reduce {
                        p,
                        root,
                        reduction,
                        bytes,
                    },
                ));
            }
            let block = bytes / size / p.max(1) * size;
            out.push(Case::new(
                format!(
                    "reduce_scatter_block {} {:?} {block} B/rank",
                    reduction.op, reduction.dtype
                ),
                Problem::ReduceScatterBlock {
                    p,
                    reduction,
                    block,
                },
            ));
            for dist in Distribution::ALL {
                let c = dist.base_for_total(p, bytes / size);
                out.push(Case::new(
                    format!("reduce_scatter {dist} {tag} c={c}"),
                    Problem::ReduceScatter {
                        reduction,
                        counts: dist.counts(p, c).into_iter().map(|c| c * size).collect(),
                    },
                ));
            }
            for exclusive in [false, true] {
                let op = if exclusive { "exscan" } else { "scan" };
                out.push(Case::new(
                    format!("{op} {tag}"),
                    Problem::Scan {
                        p,
                        reduction,
                        bytes,
                        exclusive,
                    },
                ));
            }
        }
    }
    out
}

/// Gather and scatter (every root) and alltoall, each size split over the ranks.
fn rooted_blocks(p: usize, scope: Scope) -> Vec<Case> {
    let mut out = Vec::new();
    for &bytes in scope.sizes() {
        let block = bytes.div_ceil(p).min(BLOCK_LIMIT);
        for root in scope.roots(p) {
            out.push(Case::new(
                format!("gather {block} B root {root}"),
                Problem::Gather { p, root, block },
            ));
            out.push(Case::new(
                format!("scatter {block} B root {root}"),
                Problem::Scatter { p, root, block },
            ));
        }
        out.push(Case::new(
            format!("alltoall {block} B"),
            Problem::Alltoall { p, block },
        ));
    }
    out
}

/// Gatherv and scatterv for every root and distribution; zeros included: the distributions
/// give empty parts, and the root's may be empty.
fn rooted_vectors(p: usize, scope: Scope) -> Vec<Case> {
    let mut out = Vec::new();
    for &bytes in scope.sizes() {
        let bytes = bytes.min(BLOCK_LIMIT);
        for root in scope.roots(p) {
            for &dist in scope.rooted_distributions() {
                let counts = dist.counts(p, dist.base_for_total(p, bytes));
                out.push(Case::new(
                    format!("gatherv {dist} {bytes} B root {root}"),
                    Problem::Gatherv {
                        root,
                        counts: counts.clone(),
                    },
                ));
                out.push(Case::new(
                    format!("scatterv {dist} {bytes} B root {root}"),
                    Problem::Scatterv { root, counts },
                ));
            }
        }
    }
    out
}

/// What a rank's receive buffer must hold after the call.
#[derive(Clone, Debug, PartialEq)]
pub enum Expected {
    /// Exactly these bytes.
    Bytes(Vec<u8>),
    /// The buffer the rank passed (`len` bytes of [`UNTOUCHED`]) must be left alone: a
    /// non-root of a reduce or gather, rank 0 of an exclusive scan.
    Untouched {
        /// Length of the buffer.
        len: usize,
    },
    /// The collective has no receive buffer (barrier).
    Nothing,
}

/// How a receive buffer differs from what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    #[error("{got} bytes, {want} expected")]
    /// The buffer has another length.
    Length {
        /// Its length.
        got: usize,
        /// The expected length.
        want: usize,
    },
    #[error("{count} wrong bytes, the first at {first} ({got} instead of {want})")]
    /// Some bytes differ.
    Wrong {
        /// How many.
        count: usize,
        /// Offset of the first.
        first: usize,
        /// Its value.
        got: u8,
        /// The expected value.
        want: u8,
    },
    #[error("wrote into a receive buffer it must leave alone, at byte {at}")]
    /// A buffer that must stay untouched was written.
    Written {
        /// Offset of the first changed byte.
        at: usize,
    },
}

impl Expected {
    /// `Ok` if `got` is what was expected.
    pub fn check(&self, got: &[u8]) -> Result<(), Mismatch> {
        match self {
            Expected::Bytes(want) => compare(got, want),
            Expected::Untouched { len } => {
                if got.len() != *len {
                    return Err(Mismatch::Length {
                        got: got.len(),
                        want: *len,
                    });
                }
                match got.iter().position(|&b| b != UNTOUCHED) {
                    Some(at) => Err(Mismatch::Written { at }),
                    None => Ok(()),
                }
            }
            Expected::Nothing => Ok(()),
        }
    }

    /// The number of `unit`-byte units of `got` that differ from what was expected (a unit
    /// missing from `got` or beyond the expected length counts as wrong).
    pub fn wrong_units(&self, got: &[u8], unit: usize) -> u64 {
        let unit = unit.max(1);
        let want: std::borrow::Cow<[u8]> = match self {
            Expected::Bytes(want) => want.into(),
            Expected::Untouched { len } => vec![UNTOUCHED; *len].into(),
            Expected::Nothing => return 0,
        };
        let differing = got
            .chunks(unit)
            .zip(want.chunks(unit))
            .filter(|(a, b)| a != b)
            .count();
        // Units only one of the two has.
        let unpaired =
            got.len().max(want.len()).div_ceil(unit) - got.len().min(want.len()).div_ceil(unit);
        (differing + unpaired) as u64
    }
}

/// `Ok` if equal, else where they first differ and in how many bytes.
fn compare(got: &[u8], want: &[u8]) -> Result<(), Mismatch> {
    if got.len() != want.len() {
        return Err(Mismatch::Length {
            got: got.len(),
            want: want.len(),
        });
    }
    let Some(first) = got.iter().zip(want).position(|(a, b)| a != b) else {
        return Ok(());
    };
    Err(Mismatch::Wrong {
        count: got.iter().zip(want).filter(|(a, b)| a != b).count(),
        first,
        got: got[first],
        want: want[first],
    })
}

/// The data of one call of `problem` on every rank: what each rank passes and what it must
/// get. Generations give different data for repeated calls of one problem.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseData {
    problem: Problem,
    generation: u64,
}

impl CaseData {
    /// The data of generation 0 (those of [`circulant::sim::simulate`]).
    pub fn new(problem: Problem) -> Self {
        Self::generation(problem, 0)
    }

    /// The data of generation `generation`.
    pub fn generation(problem: Problem, generation: u64) -> Self {
        CaseData {
            problem,
            generation,
        }
    }

    /// The collective and its sizes.
    pub fn problem(&self) -> &Problem {
        &self.problem
    }

    /// Rank `rank`'s send buffer (empty where it has none).
    pub fn send(&self, rank: usize) -> Vec<u8> {
        data::send_input_at(&self.problem, rank, self.generation)
    }

    /// The length of the receive buffer `rank` passes. Non-roots of reduce, gather and gatherv
    /// pass one of the root's size, as MPI codes do; the intergroup ranks one of the other
    /// group's data.
    pub fn recv_len(&self, rank: usize) -> usize {
        match &self.problem {
            Problem::Broadcast { bytes, .. }
            | Problem::Reduce { bytes, .. }
            | Problem::Allreduce { bytes, .. }
            | Problem::Scan { bytes, .. } => *bytes,
            Problem::Allgather { p, block }
            | Problem::Gather { p, block, .. }
            | Problem::Alltoall { p, block } => p * block,
            Problem::Allgatherv { counts } | Problem::Gatherv { counts, .. } => counts.iter().sum(),
            Problem::Scatter { block, .. } | Problem::ReduceScatterBlock { block, .. } => *block,
            Problem::Scatterv { counts, .. } | Problem::ReduceScatter { counts, .. } => {
                counts[rank]
            }
            Problem::Barrier { .. } => 0,
            Problem::Intergroup { a, b } => {
                if rank < a.len() {
                    b.iter().sum()
                } else {
                    a.iter().sum()
                }
            }
        }
    }

    /// What `rank`'s receive buffer holds before the call: the root's data for a broadcast,
    /// else [`UNTOUCHED`] throughout.
    pub fn recv_initial(&self, rank: usize) -> Vec<u8> {
        data::recv_input_at(&self.problem, rank, self.generation)
            .unwrap_or_else(|| vec![UNTOUCHED; self.recv_len(rank)])
    }

    /// The receive buffer of an in-place allgather(v): [`UNTOUCHED`] with the rank's own
    /// contribution at its place. `None` for the other collectives.
    pub fn in_place_initial(&self, rank: usize) -> Option<Vec<u8>> {
        let counts = match &self.problem {
            Problem::Allgather { p, block } => vec![*block; *p],
            Problem::Allgatherv { counts } => counts.clone(),
            _ => return None,
        };
        let mut buf = vec![UNTOUCHED; counts.iter().sum()];
        let at = displacements(&counts)[rank];
        buf[at..at + counts[rank]].copy_from_slice(&self.send(rank));
        Some(buf)
    }

    /// What `rank`'s receive buffer must hold after the call.
    pub fn expected(&self, rank: usize) -> Expected {
        let want = data::expected_with(&self.problem, rank, self.generation, |j| self.send(j));
        match (want, &self.problem) {
            (Some(bytes), _) => Expected::Bytes(bytes),
            (None, Problem::Barrier { .. }) => Expected::Nothing,
            (None, _) => Expected::Untouched {
                len: self.recv_len(rank),
            },
        }
    }

    /// The unit in which results are counted: a reduction's element, else a byte.
    pub fn unit(&self) -> usize {
        match &self.problem {
            Problem::Reduce { reduction, .. }
            | Problem::Allreduce { reduction, .. }
            | Problem::ReduceScatterBlock { reduction, .. }
            | Problem::ReduceScatter { reduction, .. }
            | Problem::Scan { reduction, .. } => reduction.dtype.size(),
            _ => 1,
        }
    }

    /// Everything `rank` passes and must get, computed once (for a job that runs a case with
    /// several algorithms).
    pub fn for_rank(&self, rank: usize) -> RankData {
        RankData {
            rank,
            send: self.send(rank),
            recv_initial: self.recv_initial(rank),
            in_place_initial: self.in_place_initial(rank),
            expected: self.expected(rank),
        }
    }

    /// Writes what `rank`'s receive buffer holds before the call into `buf` (see
    /// [`CaseData::recv_initial`]), without another buffer of its size for the non-roots.
    pub fn fill_recv(&self, rank: usize, buf: &mut [u8]) {
        match data::recv_input_at(&self.problem, rank, self.generation) {
            Some(initial) if initial.len() == buf.len() => buf.copy_from_slice(&initial),
            _ => buf.fill(UNTOUCHED),
        }
    }

    /// How many units (see [`CaseData::unit`]) of `rank`'s receive buffer `got` are wrong.
    /// Allgather results are compared one contribution at a time, so that a large result
    /// needs no second buffer of its size.
    pub fn wrong(&self, rank: usize, got: &[u8]) -> u64 {
        let parts = match &self.problem {
            Problem::Allgather { p, block } => vec![*block; *p],
            Problem::Allgatherv { counts } => counts.clone(),
            _ => return self.expected(rank).wrong_units(got, self.unit()),
        };
        let mut wrong = 0u64;
        let mut at = 0usize;
        for (owner, &count) in parts.iter().enumerate() {
            let end = at.saturating_add(count);
            let slice = &got[at.min(got.len())..end.min(got.len())];
            wrong += Expected::Bytes(self.send(owner)).wrong_units(slice, 1);
            at = end;
        }
        // Bytes beyond the result.
        wrong + got.len().saturating_sub(at) as u64
    }
}

/// One rank's part of a [`CaseData`].
#[derive(Clone, Debug, PartialEq)]
pub struct RankData {
    /// The rank.
    pub rank: usize,
    /// See [`CaseData::send`].
    pub send: Vec<u8>,
    /// See [`CaseData::recv_initial`].
    pub recv_initial: Vec<u8>,
    /// See [`CaseData::in_place_initial`].
    pub in_place_initial: Option<Vec<u8>>,
    /// See [`CaseData::expected`].
    pub expected: Expected,
}

#[cfg(test)]
mod tests {
    use super::*;
    use circulant::plan::registry;

    fn model() -> CostModel {
        CostModel {
            alpha: 1e-6,
            beta: 1e-9,
            o: 0.0,
        }
    }

    /// A name says which problem a case is, and a problem repeats under another name only
    /// where two count distributions give the same counts. (Sizes that round to the same
    /// block or element count repeat a case under its own name: the selftest runs those as
    /// often as its size list says.)
    #[test]
    fn the_matrix_has_no_duplicates() {
        for p in [1, 2, 3, 4, 5, 8, 9, 16] {
            for scope in [Scope::Quick, Scope::Full] {
                let cases = matrix(p, scope);
                for (i, a) in cases.iter().enumerate() {
                    for b in &cases[i + 1..] {
                        if a.name == b.name {
                            assert_eq!(a.problem, b.problem, "p = {p}, {scope:?}: {}", a.name);
                        } else if a.problem == b.problem {
                            assert!(
                                ["allgatherv", "gatherv", "scatterv", "reduce_scatter"]
                                    .contains(&a.collective()),
                                "p = {p}, {scope:?}: {} and {} are one problem",
                                a.name,
                                b.name
                            );
                        }
                    }
                }
                let sizes = scope.sizes();
                let bcasts = cases.iter().filter(|c| c.collective() == "bcast").count();
                assert_eq!(bcasts, sizes.len() * scope.roots(p).len());
                let mut roots = scope.roots(p);
                roots.dedup();
                assert_eq!(roots, scope.roots(p));
            }
        }
    }

    #[test]
    fn the_matrix_covers_every_collective_and_validates() {
        for p in [1, 3, 4, 9] {
            let cases = matrix(p, Scope::Quick);
            for name in COLLECTIVES {
                assert!(cases.iter().any(|c| c.collective() == name), "{name}");
            }
            for c in &cases {
                c.problem
                    .validate()
                    .unwrap_or_else(|e| panic!("{}: {e}", c.name));
                assert!(!c.algorithms(&model()).unwrap().is_empty(), "{}", c.name);
            }
        }
    }

    #[test]
    fn quick_is_part_of_full_and_roots_follow_p() {
        assert_eq!(Scope::Full.roots(4), vec![0, 1, 2, 3]);
        assert_eq!(Scope::Quick.roots(4), vec![0, 2, 3]);
        assert_eq!(Scope::Full.roots(9), vec![0, 4, 8]);
        assert_eq!(Scope::Quick.roots(1), vec![0]);
        assert_eq!(Scope::Quick.roots(2), vec![0, 1]);
        for p in [1, 2, 4, 7] {
            let full = matrix(p, Scope::Full);
            for c in matrix(p, Scope::Quick) {
                assert!(full.contains(&c), "p = {p}: {}", c.name);
            }
        }
    }

    /// Barrier, broadcasts, allgathers, allgathervs, reductions (per reduction and size: an
    /// allreduce, a reduce per root, a reduce-scatter-block, a reduce-scatter per distribution,
    /// scan and exscan), gather/scatter/alltoall and gatherv/scatterv at p = 4.
    #[test]
    fn matrix_sizes() {
        let dists = Distribution::ALL.len();
        assert_eq!(
            matrix(4, Scope::Quick).len(),
            1 + 12 + 4 + 28 + 3 * 4 * (1 + 3 + 1 + dists + 2) + 4 * 7 + 4 * 6
        );
        assert_eq!(
            matrix(4, Scope::Full).len(),
            1 + 20 + 5 + 35 + 3 * 5 * (1 + 4 + 1 + dists + 2) + 5 * 9 + 5 * 24
        );
    }

    #[test]
    fn expected_results_agree_with_the_simulated_plans() {
        let model = model();
        for p in [1, 3, 4] {
            for case in matrix(p, Scope::Quick) {
                let data = CaseData::new(case.problem.clone());
                for algorithm in registry::applicable(&case.problem, &model).unwrap() {
                    // The simulator runs the plans on these send buffers and checks every
                    // rank's result against `data::expected`.
                    circulant::sim::simulate(algorithm.as_ref(), &model)
                        .unwrap_or_else(|e| panic!("{} [{}]: {e}", case.name, algorithm.name()));
                }
                for r in 0..p {
                    let sends: Vec<Vec<u8>> = (0..p).map(|j| data.send(j)).collect();
                    let direct = data::expected(&case.problem, r, &sends);
                    match data.expected(r) {
                        Expected::Bytes(b) => assert_eq!(Some(b), direct, "{}", case.name),
                        _ => assert_eq!(direct, None, "{}", case.name),
                    }
                }
            }
        }
    }

    #[test]
    fn untouched_regions_are_the_non_roots_and_exscan_rank_0() {
        let p = 4;
        let r = REDUCTIONS[0];
        let reduce = CaseData::new(Problem::Reduce {
            p,
            root: 2,
            reduction: r,
            bytes: 16,
        });
        let exscan = CaseData::new(Problem::Scan {
            p,
            reduction: r,
            bytes: 16,
            exclusive: true,
        });
        let gatherv = CaseData::new(Problem::Gatherv {
            root: 1,
            counts: vec![3, 0, 5, 1],
        });
        for rank in 0..p {
            let got = reduce.expected(rank);
            if rank == 2 {
                assert!(matches!(got, Expected::Bytes(ref b) if b.len() == 16));
            } else {
                assert_eq!(got, Expected::Untouched { len: 16 });
            }
            let got = exscan.expected(rank);
            assert_eq!(got == Expected::Untouched { len: 16 }, rank == 0);
            let got = gatherv.expected(rank);
            if rank == 1 {
                assert!(matches!(got, Expected::Bytes(ref b) if b.len() == 9));
            } else {
                assert_eq!(got, Expected::Untouched { len: 9 });
            }
        }
        let untouched = Expected::Untouched { len: 4 };
        assert_eq!(untouched.check(&[UNTOUCHED; 4]), Ok(()));
        assert_eq!(
            untouched.check(&[UNTOUCHED, UNTOUCHED, 0, UNTOUCHED]),
            Err(Mismatch::Written { at: 2 })
        );
        assert_eq!(
            untouched.check(&[UNTOUCHED; 3]),
            Err(Mismatch::Length { got: 3, want: 4 })
        );
        assert_eq!(
            CaseData::new(Problem::Barrier { p }).expected(0),
            Expected::Nothing
        );
    }

    #[test]
    fn generations_differ_and_recv_buffers_start_untouched() {
        let problem = Problem::Allgatherv {
            counts: vec![5, 0, 7],
        };
        let a = CaseData::new(problem.clone());
        let b = CaseData::generation(problem, 1);
        assert_ne!(a.send(0), b.send(0));
        assert_ne!(a.expected(1), b.expected(1));
        assert_eq!(a.recv_initial(1), vec![UNTOUCHED; 12]);
        let in_place = a.in_place_initial(2).unwrap();
        assert_eq!(&in_place[5..], &a.send(2)[..]);
        assert!(in_place[..5].iter().all(|&x| x == UNTOUCHED));
        let bcast = CaseData::generation(
            Problem::Broadcast {
                p: 3,
                root: 1,
                bytes: 9,
            },
            3,
        );
        assert_eq!(bcast.expected(2), Expected::Bytes(bcast.recv_initial(1)));
        assert_eq!(bcast.recv_initial(0), vec![UNTOUCHED; 9]);
        assert_eq!(bcast.in_place_initial(0), None);
        let mine = bcast.for_rank(2);
        assert_eq!(mine.expected, bcast.expected(2));
        assert_eq!(mine.recv_initial, vec![UNTOUCHED; 9]);
        assert!(mine.send.is_empty());
    }

    #[test]
    fn wrong_results_are_found_and_counted_in_units() {
        let data = CaseData::new(Problem::Allreduce {
            p: 3,
            reduction: Reduction {
                dtype: Dtype::I32,
                op: ReduceOp::Sum,
            },
            bytes: 16,
        });
        let Expected::Bytes(want) = data.expected(0) else {
            panic!("allreduce has a result on every rank");
        };
        assert_eq!(data.wrong(0, &want), 0);
        let mut got = want.clone();
        got[1] ^= 1;
        got[2] ^= 1;
        got[13] ^= 1;
        assert_eq!(data.wrong(0, &got), 2);
        assert_eq!(data.wrong(0, &got[..8]), 3);
        assert_eq!(
            data.expected(0).check(&got),
            Err(Mismatch::Wrong {
                count: 3,
                first: 1,
                got: want[1] ^ 1,
                want: want[1],
            })
        );
        assert_eq!(
            Expected::Bytes(vec![1, 2, 3]).wrong_units(&[1, 2, 3, 4, 5], 2),
            2
        );
        assert_eq!(Expected::Bytes(vec![1, 2, 3]).wrong_units(&[1, 2, 4], 2), 1);

        // Allgather(v) results are counted per contribution, as the whole result would be.
        let data = CaseData::new(Problem::Allgatherv {
            counts: vec![3, 0, 4],
        });
        let Expected::Bytes(want) = data.expected(1) else {
            panic!("allgatherv has a result on every rank");
        };
        let mut got = want.clone();
        got[0] ^= 1;
        got[6] ^= 1;
        for g in [
            &want[..],
            &got[..],
            &got[..5],
            &[&got[..], &[0, 0]].concat()[..],
        ] {
            assert_eq!(
                data.wrong(1, g),
                data.expected(1).wrong_units(g, 1),
                "{g:?}"
            );
        }
        let mut buf = vec![0u8; 7];
        data.fill_recv(0, &mut buf);
        assert_eq!(buf, data.recv_initial(0));
        let bcast = CaseData::new(Problem::Broadcast {
            p: 2,
            root: 1,
            bytes: 5,
        });
        let mut buf = vec![0u8; 5];
        bcast.fill_recv(1, &mut buf);
        assert_eq!(buf, bcast.recv_initial(1));
    }
}
