//! Intergroup allgather(v) between two disjoint groups (seed 003, Kang, Träff et al. 2019) and
//! the root-gathering baseline it is measured against (§3.1).
//!
//! Ranks `0..|A|` form group A, the rest group B; every rank ends with the other group's
//! contributions in rank order. The receive buffer of a member of Y is exactly the global byte
//! index space of X's messages (§4.1), so segments land at their final offsets and the closing
//! intragroup allgather needs no reordering.

use super::allgather::{doubling_cost, doubling_rounds, power_skips, Gathered};
use super::tree::{parent, top_down_receive};
use super::{
    ceil_log2, checked_sum, displacements, piece, Algorithm, Buf, BufferSizes, CostModel, Local,
    Piece, PlanError, Prediction, Problem, Round,
};

fn groups_of(problem: &Problem, name: &'static str) -> Result<(Vec<usize>, Vec<usize>), PlanError> {
    problem.validate()?;
    match problem {
        Problem::Intergroup { a, b } => Ok((a.clone(), b.clone())),
        _ => Err(PlanError::WrongCollective {
            algorithm: name,
            collective: "intergroup allgatherv",
        }),
    }
}

/// Byte range `[lo, hi)` of segment k when `total` bytes are cut into `parts` segments, the
/// first `total mod parts` of them one byte longer (Alg. 2, lines 3–10).
fn segment(total: usize, parts: usize, k: usize) -> (usize, usize) {
    let (q, r) = (total / parts, total % parts);
    let lo = k * q + k.min(r);
    (lo, lo + q + usize::from(k < r))
}

/// The segment holding byte `byte` (< total) in [`segment`]'s cut.
fn segment_of(total: usize, parts: usize, byte: usize) -> usize {
    let (q, r) = (total / parts, total % parts);
    let long = r * (q + 1);
    if byte < long {
        byte / (q + 1)
    } else {
        (byte - long).checked_div(q).map_or(parts, |x| r + x)
    }
}

/// A transfer of the exchange step with its round.
#[derive(Clone, Debug)]
struct Exchange {
    round: u32,
    from: usize,
    to: usize,
    pieces: Vec<Piece>,
}

/// Intergroup allgatherv with message segmentation (seed 003, Alg. 1 and §4.1 / Alg. 2):
/// X's bytes (total K_X) are cut into |Y| balanced segments; each rank of X writes the part of
/// its message in segment k straight to y_k's receive buffer; then both groups run an allgather
/// of their segments (Bruck, ⌈log⌉ rounds) at the same time. For equal sizes and |B| dividing
/// |A| this is Alg. 1: |A|/|B| exchange rounds. Transfer time at most M + max(k)·β (Theorem 1, 3).
pub struct IntergroupAllgatherv {
    problem: Problem,
    a: Vec<usize>,
    b: Vec<usize>,
    exchange: Vec<Exchange>,
    exchange_rounds: u32,
    /// Intragroup allgathers: segments of B's data over A, and of A's data over B.
    over_a: Gathered,
    over_b: Gathered,
}

impl IntergroupAllgatherv {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "intergroup-allgatherv";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        let (a, b) = groups_of(problem, Self::NAME)?;
        let (pa, pb) = (a.len(), b.len());
        let (ka, kb) = (checked_sum(&a)?, checked_sum(&b)?);
        let (da, db) = (displacements(&a), displacements(&b));
        // Transfers X → Y: member i of X sends the part of its message in segment k to y_k.
        let mut transfers: Vec<(usize, usize, Vec<Piece>)> = Vec::new();
        let mut cut =
            |counts: &[usize], displs: &[usize], total: usize, x0: usize, y0: usize, ny: usize| {
                for (i, (&c, &d)) in counts.iter().zip(displs).enumerate() {
                    if c == 0 {
                        continue;
                    }
                    // Segments overlapping [d, d + c).
                    let first = segment_of(total, ny, d);
                    for k in first..ny {
                        let (lo, hi) = segment(total, ny, k);
                        if lo >= d + c {
                            break;
                        }
                        let (s, e) = (lo.max(d), hi.min(d + c));
                        if e > s {
                            transfers.push((
                                x0 + i,
                                y0 + k,
                                vec![piece(Buf::Send, s - d, Buf::Recv, s, e - s, None)],
                            ));
                        }
                    }
                }
            };
        cut(&a, &da, ka, 0, pa, pb);
        cut(&b, &db, kb, pa, 0, pa);
        // One-ported rounds, greedily: receivers take their senders in order, senders send in
        // order of their receivers (§4.1).
        let p = pa + pb;
        let mut send_next = vec![0u32; p];
        let mut recv_next = vec![0u32; p];
        transfers.sort_by_key(|t| (t.1, t.0));
        let mut exchange = Vec::with_capacity(transfers.len());
        let mut rounds = 0;
        let mut pending = transfers;
        // Waves: each receiver's first pending transfer, so that busy senders spread out.
        while !pending.is_empty() {
            let mut rest = Vec::new();
            let mut seen = vec![0usize; p];
            for t in pending {
                let idx = seen[t.1];
                seen[t.1] += 1;
                if idx == 0 {
                    let round = send_next[t.0].max(recv_next[t.1]);
                    send_next[t.0] = round + 1;
                    recv_next[t.1] = round + 1;
                    rounds = rounds.max(round + 1);
                    exchange.push(Exchange {
                        round,
                        from: t.0,
                        to: t.1,
                        pieces: t.2,
                    });
                } else {
                    rest.push(t);
                }
            }
            pending = rest;
        }
        exchange.sort_by_key(|e| (e.round, e.from));
        let seg_counts = |total: usize, parts: usize| -> Vec<usize> {
            (0..parts)
                .map(|k| {
                    let (lo, hi) = segment(total, parts, k);
                    hi - lo
                })
                .collect()
        };
        let over_a = Gathered::new(
            &Problem::Allgatherv {
                counts: seg_counts(kb, pa),
            },
            Self::NAME,
        )?;
        let over_b = Gathered::new(
            &Problem::Allgatherv {
                counts: seg_counts(ka, pb),
            },
            Self::NAME,
        )?;
        Ok(IntergroupAllgatherv {
            problem: problem.clone(),
            a,
            b,
            exchange,
            exchange_rounds: rounds,
            over_a,
            over_b,
        })
    }

    /// Rounds of the exchange step.
    pub fn exchange_rounds(&self) -> u32 {
        self.exchange_rounds
    }

    /// Seed 003's bound: ⌈|A|/|B|⌉-ish exchange rounds plus ⌈log max(|A|,|B|)⌉ allgather rounds
    /// of latency, and transfer time M + max(max k_A, max k_B) with M = max(K_A, K_B)
    /// (Theorems 1 and 3, without the allreduce of the sizes, which callers know here), plus
    /// (|A| + |B|)β for cutting segments at whole bytes (each received block at most one byte
    /// above the average the theorems use).
    pub fn seed_bound(&self, model: &CostModel) -> f64 {
        let ka: usize = self.a.iter().sum();
        let kb: usize = self.b.iter().sum();
        let max_k = self.a.iter().chain(&self.b).copied().max().unwrap_or(0);
        let lat = self.exchange_rounds as usize + ceil_log2(self.a.len().max(self.b.len()));
        let rounding = self.a.len() + self.b.len();
        lat as f64 * model.alpha + model.beta * (ka.max(kb) + max_k + rounding) as f64
    }
}

impl Algorithm for IntergroupAllgatherv {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        let pa = self.a.len();
        let (send, recv) = if rank < pa {
            (self.a[rank], self.over_a.total)
        } else {
            (self.b[rank - pa], self.over_b.total)
        };
        BufferSizes {
            send,
            recv,
            scratch: 0,
        }
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let pa = self.a.len();
        let mut out: Vec<Round> = Vec::new();
        let mut last_recv = None;
        for e in self
            .exchange
            .iter()
            .filter(|e| e.from == rank || e.to == rank)
        {
            if out.last().map_or(true, |r| r.index != e.round) {
                out.push(Round::new(e.round));
            }
            let Some(r) = out.last_mut() else { continue };
            if e.from == rank {
                r.send(e.to, e.pieces.clone());
            } else {
                r.expect(e.from, e.pieces.len());
                last_recv = Some(e.round);
            }
        }
        out.retain(|r| !r.is_empty());
        let (g, local, base) = if rank < pa {
            (&self.over_a, rank, 0)
        } else {
            (&self.over_b, rank - pa, pa)
        };
        let e = self.exchange_rounds;
        let intra = doubling_rounds(g, power_skips(g.p()), local).map(move |mut r| {
            // Shift after the exchange and map group-local ranks to global ones.
            let k = r.index;
            r.index += e;
            for t in &mut r.sends {
                t.to += base;
                for pc in &mut t.pieces {
                    pc.after = if k == 0 { last_recv } else { Some(e + k - 1) };
                }
            }
            for x in &mut r.expects {
                x.from += base;
            }
            r
        });
        Box::new(out.into_iter().chain(intra))
    }
    /// Exchange rounds priced by their largest message, then the two Bruck allgathers side by
    /// side (each round costs the larger of the two groups' rounds).
    fn predict(&self, model: &CostModel) -> Prediction {
        let mut rounds = 0u64;
        let mut time = 0.0;
        // The exchange is sorted by round: price each run of equal rounds.
        let mut start = 0;
        while start < self.exchange.len() {
            let round = self.exchange[start].round;
            let end = start
                + self.exchange[start..]
                    .iter()
                    .take_while(|e| e.round == round)
                    .count();
            // Largest per-port load in the round.
            let mut load = std::collections::HashMap::<(bool, usize), usize>::new();
            for e in &self.exchange[start..end] {
                let bytes: usize = e.pieces.iter().map(|p| p.len).sum();
                *load.entry((true, e.from)).or_default() += bytes;
                *load.entry((false, e.to)).or_default() += bytes;
            }
            if let Some(&max) = load.values().max() {
                rounds += 1;
                time += model.message(max);
            }
            start = end;
        }
        let per_round = |g: &Gathered| -> Vec<f64> {
            let skips = power_skips(g.p());
            (0..skips.len().saturating_sub(1))
                .map(|k| {
                    let one = doubling_cost(g, &skips[k..k + 2], model);
                    one.time
                })
                .collect()
        };
        let (ra, rb) = (per_round(&self.over_a), per_round(&self.over_b));
        for k in 0..ra.len().max(rb.len()) {
            let c = ra
                .get(k)
                .copied()
                .unwrap_or(0.0)
                .max(rb.get(k).copied().unwrap_or(0.0));
            if c > 0.0 {
                rounds += 1;
                time += c;
            }
        }
        Prediction { rounds, time }
    }
}

/// The root-gathering baseline (seed 003 §3.1): each group's root gathers its group's messages
/// (binomial tree), the two roots swap them, and each root broadcasts the other group's data in
/// its group (binomial tree). Both groups act at the same time.
pub struct RootGathering {
    problem: Problem,
    a: Vec<usize>,
    b: Vec<usize>,
}

/// One group's view: its members' counts and displacements, its first global rank.
struct Group<'a> {
    counts: &'a [usize],
    displs: Vec<usize>,
    total: usize,
    base: usize,
}

impl Group<'_> {
    fn size(&self) -> usize {
        self.counts.len()
    }
    fn subtree_end(&self, v: usize) -> usize {
        super::tree::subtree_end(self.size(), v)
    }
    /// Bytes of members [lo, hi).
    fn span(&self, lo: usize, hi: usize) -> usize {
        let end = if hi == self.size() {
            self.total
        } else {
            self.displs[hi]
        };
        end - self.displs[lo]
    }
    /// Scratch offset of member u's block at member w (w's scratch holds [w+1, end) or, at the
    /// root, everything).
    fn slot(&self, w: usize, u: usize) -> usize {
        if w == 0 {
            self.displs[u]
        } else {
            self.displs[u] - self.displs[w + 1]
        }
    }
}

impl RootGathering {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "root-gathering";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        let (a, b) = groups_of(problem, Self::NAME)?;
        Ok(RootGathering {
            problem: problem.clone(),
            a,
            b,
        })
    }

    fn groups(&self) -> (Group<'_>, Group<'_>) {
        let ga = Group {
            counts: &self.a,
            displs: displacements(&self.a),
            total: self.a.iter().sum(),
            base: 0,
        };
        let gb = Group {
            counts: &self.b,
            displs: displacements(&self.b),
            total: self.b.iter().sum(),
            base: self.a.len(),
        };
        (ga, gb)
    }

    fn gather_rounds(&self) -> u32 {
        ceil_log2(self.a.len().max(self.b.len())) as u32
    }
}

impl Algorithm for RootGathering {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        let (ga, gb) = self.groups();
        let (mine, other) = if rank < self.a.len() {
            (&ga, &gb)
        } else {
            (&gb, &ga)
        };
        let v = rank - mine.base;
        let scratch = if v == 0 {
            mine.total
        } else {
            mine.span(v, mine.subtree_end(v)) - mine.counts[v]
        };
        BufferSizes {
            send: mine.counts[v],
            recv: other.total,
            scratch,
        }
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        let (ga, gb) = self.groups();
        let mine = if rank < self.a.len() { &ga } else { &gb };
        if rank == mine.base && mine.counts[0] > 0 {
            vec![Local::Copy {
                src: Buf::Send,
                src_offset: 0,
                dst: Buf::Scratch,
                dst_offset: 0,
                len: mine.counts[0],
            }]
        } else {
            Vec::new()
        }
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let (ga, gb) = self.groups();
        let (mine, other) = if rank < self.a.len() {
            (&ga, &gb)
        } else {
            (&gb, &ga)
        };
        let v = rank - mine.base;
        let g = self.gather_rounds();
        let mut out = Vec::new();
        // Gather: pieces from member c to its parent w.
        let gather_pieces = |c: usize, w: usize, after: Option<u32>| -> Vec<Piece> {
            let end = mine.subtree_end(c);
            let mut ps = vec![piece(
                Buf::Send,
                0,
                Buf::Scratch,
                mine.slot(w, c),
                mine.counts[c],
                None,
            )];
            if end > c + 1 {
                ps.push(piece(
                    Buf::Scratch,
                    0,
                    Buf::Scratch,
                    mine.slot(w, c + 1),
                    mine.span(c + 1, end),
                    after,
                ));
            }
            ps.retain(|p| p.len > 0);
            ps
        };
        let top = if v == 0 {
            ceil_log2(mine.size())
        } else {
            v.trailing_zeros() as usize
        };
        let mut after = None;
        for i in 0..top {
            let c = v + (1 << i);
            if c < mine.size() {
                let mut r = Round::new(i as u32);
                r.expect(mine.base + c, gather_pieces(c, v, Some(0)).len());
                after = Some(i as u32);
                out.push(r);
            }
        }
        if v != 0 {
            let bit = v.trailing_zeros() as usize;
            let mut r = Round::new(bit as u32);
            r.send(mine.base + parent(v), gather_pieces(v, parent(v), after));
            out.push(r);
        }
        // Roots swap; then binomial broadcast of the other group's data in each group.
        let (got, start) = if v == 0 {
            let mut r = Round::new(g);
            r.send(
                other.base,
                vec![piece(Buf::Scratch, 0, Buf::Recv, 0, mine.total, after)],
            );
            r.expect(other.base, usize::from(other.total > 0));
            out.push(r);
            (Some(g), ceil_log2(mine.size()))
        } else {
            let q = ceil_log2(mine.size());
            let (j, bit) = top_down_receive(v, q);
            let j = g + 1 + j;
            let mut r = Round::new(j);
            r.expect(mine.base + parent(v), usize::from(other.total > 0));
            out.push(r);
            (Some(j), bit)
        };
        let q = ceil_log2(mine.size());
        for bit in (0..start).rev() {
            let t = v + (1 << bit);
            if t < mine.size() {
                let mut r = Round::new(g + 1 + (q - 1 - bit) as u32);
                r.send(
                    mine.base + t,
                    vec![piece(Buf::Recv, 0, Buf::Recv, 0, other.total, got)],
                );
                out.push(r);
            }
        }
        out.retain(|r| !r.is_empty());
        out.sort_by_key(|r| r.index);
        Box::new(out.into_iter())
    }
    /// Σ rounds of max(gather A, gather B) + (α + β·max(K_A, K_B)) + Σ rounds of
    /// max(broadcast A, broadcast B); seed 003 eq. (1) with binomial trees.
    fn predict(&self, model: &CostModel) -> Prediction {
        let (ga, gb) = self.groups();
        let gather = |g: &Group, i: usize| -> usize {
            // Largest subtree moved in round i: members v ≡ 2^i mod 2^(i+1).
            (1usize << i..g.size())
                .step_by(1 << (i + 1))
                .map(|v| g.span(v, g.subtree_end(v)))
                .max()
                .unwrap_or(0)
        };
        let mut rounds = 0u64;
        let mut time = 0.0;
        let mut add = |bytes_a: Option<usize>, bytes_b: Option<usize>| {
            let c = bytes_a
                .into_iter()
                .chain(bytes_b)
                .map(|b| model.message(b))
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
            if let Some(c) = c {
                rounds += 1;
                time += c;
            }
        };
        let g = self.gather_rounds() as usize;
        for i in 0..g {
            let a = (1usize << i < ga.size())
                .then(|| gather(&ga, i))
                .filter(|&x| x > 0);
            let b = (1usize << i < gb.size())
                .then(|| gather(&gb, i))
                .filter(|&x| x > 0);
            add(a, b);
        }
        add(
            (ga.total > 0).then_some(ga.total),
            (gb.total > 0).then_some(gb.total),
        );
        let (qa, qb) = (ceil_log2(ga.size()), ceil_log2(gb.size()));
        for j in 0..qa.max(qb) {
            let a = (j < qa && gb.total > 0).then_some(gb.total);
            let b = (j < qb && ga.total > 0).then_some(ga.total);
            add(a, b);
        }
        Prediction { rounds, time }
    }
}
