//! Pipelined round-robin broadcast (seed 004, Axida, Ta, Yoshinaga, §4–5).
//!
//! The data is cut into S segments of N − 1 messages, message d of a segment belonging to
//! destination d. The N ranks (plus a virtual player when N is odd) play a round-robin
//! tournament of M − 1 rounds per iteration (rotating schedule, §4.1). In iteration K the root
//! hands destination d its message of segment K when they meet, while two destinations that
//! meet swap their messages of segment K − 1 (Figures 4, 5). Iteration 0 is the initial
//! scatter, iteration S the final exchange.
//!
//! Rounds: (N − 1) + (S − 1)(M − 1) + (M − 1 in the last iteration, fewer for N ≤ 3), each
//! α + β⌈D/(S(N−1))⌉. As S grows the β term tends to D·(M−1)/(N−1): D for even N and D·N/(N−1)
//! for odd N (Table 1 and §5.3, with the latency term per message).

use super::{
    check_rounds, piece, Algorithm, Blocks, Buf, BufferSizes, CostModel, PlanError, Prediction,
    Problem, Round,
};

/// The pipelined round-robin broadcast of seed 004.
pub struct RoundRobinBroadcast {
    problem: Problem,
    p: usize,
    root: usize,
    segments: usize,
    messages: Blocks,
}

impl RoundRobinBroadcast {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "round-robin-bcast";

    /// With `segments` segments, or (None) the S minimising the α-β time:
    /// S = √(βD / ((N−1)α)).
    pub fn new(
        problem: &Problem,
        segments: Option<usize>,
        model: &CostModel,
    ) -> Result<Self, PlanError> {
        problem.validate()?;
        let Problem::Broadcast { p, root, bytes } = *problem else {
            return Err(PlanError::WrongCollective {
                algorithm: Self::NAME,
                collective: "broadcast",
            });
        };
        let dests = p.saturating_sub(1).max(1);
        let max_s = (bytes / dests).max(1);
        let s = match segments {
            Some(0) => return Err(PlanError::NoBlocks),
            Some(s) => s.min(max_s),
            None => {
                if model.alpha <= 0.0 {
                    max_s
                } else {
                    let s = (model.beta * bytes as f64 / (dests as f64 * model.alpha)).sqrt();
                    (s.round() as usize).clamp(1, max_s)
                }
            }
        };
        let count = s.checked_mul(dests).ok_or(PlanError::Overflow)?;
        if p > 1 {
            // S + 1 iterations of M − 1 rounds (M − 1 = N for odd N, else N − 1).
            let per_iteration = if p % 2 == 0 { p - 1 } else { p };
            let rounds = s
                .checked_add(1)
                .and_then(|i| i.checked_mul(per_iteration))
                .unwrap_or(usize::MAX);
            check_rounds(Self::NAME, rounds)?;
        }
        Ok(RoundRobinBroadcast {
            problem: problem.clone(),
            p,
            root,
            segments: s,
            messages: Blocks::new(bytes, count),
        })
    }

    /// The number of segments the message is cut into.
    pub fn segments(&self) -> usize {
        self.segments
    }

    /// Players in the tournament (N, plus a virtual player when N is odd).
    fn members(&self) -> usize {
        self.p + self.p % 2
    }

    /// Opponent of player x in round t (circle method: player M − 1 fixed).
    fn opponent(&self, x: usize, t: usize) -> usize {
        let m1 = self.members() - 1;
        if x == m1 {
            t
        } else if x == t {
            m1
        } else {
            (2 * t + m1 - x) % m1
        }
    }

    /// The round of an iteration in which the root (player 0) meets destination d.
    fn meets_root(&self, d: usize) -> usize {
        let m = self.members();
        if d == m - 1 {
            0
        } else {
            d * (m / 2) % (m - 1)
        }
    }

    /// Byte range of destination d's message of segment k.
    fn message(&self, k: usize, d: usize) -> (usize, usize) {
        self.messages.range(k * (self.p - 1) + d - 1)
    }
}

impl Algorithm for RoundRobinBroadcast {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, _rank: usize) -> BufferSizes {
        BufferSizes {
            send: 0,
            recv: self.messages.total,
            scratch: 0,
        }
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let p = self.p;
        if p == 1 {
            return Box::new(std::iter::empty());
        }
        let me = (rank + p - self.root) % p;
        let real = move |v: usize| (v + self.root) % p;
        let m1 = self.members() - 1;
        let s = self.segments;
        Box::new((0..=s).flat_map(move |k| {
            (0..m1).filter_map(move |t| {
                // Fits: `new` checked the round count.
                let index = (k * m1 + t) as u32;
                let mut r = Round::new(index);
                let o = self.opponent(me, t);
                if o >= p {
                    return None;
                }
                if me == 0 {
                    if k < s {
                        let (off, len) = self.message(k, o);
                        r.send(
                            real(o),
                            vec![piece(Buf::Recv, off, Buf::Recv, off, len, None)],
                        );
                    }
                } else if o == 0 {
                    if k < s {
                        r.expect(real(0), usize::from(self.message(k, me).1 > 0));
                    }
                } else if k >= 1 {
                    let (off, len) = self.message(k - 1, me);
                    let got = ((k - 1) * m1 + self.meets_root(me)) as u32;
                    r.send(
                        real(o),
                        vec![piece(Buf::Recv, off, Buf::Recv, off, len, Some(got))],
                    );
                    r.expect(real(o), usize::from(self.message(k - 1, o).1 > 0));
                }
                (!r.is_empty()).then_some(r)
            })
        }))
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        let n = self.p;
        if n == 1 || self.messages.total == 0 {
            return Prediction {
                rounds: 0,
                time: 0.0,
            };
        }
        let m1 = self.members() - 1;
        let last = match n {
            2 => 0,
            3 => 1,
            _ => m1,
        };
        let rounds = (n - 1) + (self.segments - 1) * m1 + last;
        Prediction {
            rounds: rounds as u64,
            time: rounds as f64 * model.message(self.messages.size),
        }
    }
}
