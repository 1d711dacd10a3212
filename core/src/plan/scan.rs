//! Hypercube prefix sum (seed 002, PREFIX_SUMS_HCUBE), inclusive and exclusive: in round i rank
//! r exchanges its subcube total with r XOR 2^i (when that rank exists), adds what it receives
//! to the total, and to its result when the partner is lower. ⌈log p⌉ rounds, ⌈log p⌉(α + βm).

use super::{
    ceil_log2, piece, Algorithm, Buf, BufferSizes, CostModel, Local, PlanError, Prediction,
    Problem, Reduction, Round,
};

/// Hypercube prefix sum (inclusive or exclusive scan).
pub struct HypercubeScan {
    problem: Problem,
    p: usize,
    reduction: Reduction,
    bytes: usize,
    exclusive: bool,
}

impl HypercubeScan {
    /// The algorithm's name, as the registry, `CIRCULANT_ALGORITHM` and reports use it.
    pub const NAME: &'static str = "hypercube-scan";

    /// Plans `problem`; an error if it is not a problem this algorithm solves or its arguments are
    /// invalid.
    pub fn new(problem: &Problem) -> Result<Self, PlanError> {
        problem.validate()?;
        match *problem {
            Problem::Scan {
                p,
                reduction,
                bytes,
                exclusive,
            } => Ok(HypercubeScan {
                problem: problem.clone(),
                p,
                reduction,
                bytes,
                exclusive,
            }),
            _ => Err(PlanError::WrongCollective {
                algorithm: Self::NAME,
                collective: "scan",
            }),
        }
    }

    /// The round whose message an exclusive scan receives straight into its result.
    fn direct_round(&self, rank: usize) -> Option<usize> {
        if !self.exclusive {
            return None;
        }
        let lower: Vec<usize> = self
            .partners(rank)
            .iter()
            .filter(|&&(_, x)| x < rank)
            .map(|&(i, _)| i)
            .collect();
        (lower.len() == 1).then(|| lower[0])
    }

    fn partners(&self, rank: usize) -> Vec<(usize, usize)> {
        (0..ceil_log2(self.p))
            .map(|i| (i, rank ^ (1 << i)))
            .filter(|&(_, x)| x < self.p)
            .collect()
    }
}

impl Algorithm for HypercubeScan {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, _rank: usize) -> BufferSizes {
        BufferSizes {
            send: self.bytes,
            recv: self.bytes,
            scratch: 3 * ceil_log2(self.p) * self.bytes,
        }
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        let lower = self.partners(rank).iter().any(|&(_, x)| x < rank);
        if !self.exclusive && !lower && self.bytes > 0 {
            vec![Local::Copy {
                src: Buf::Send,
                src_offset: 0,
                dst: Buf::Recv,
                dst_offset: 0,
                len: self.bytes,
            }]
        } else {
            Vec::new()
        }
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        let m = self.bytes;
        let partners = self.partners(rank);
        let last_lower = partners.iter().rposition(|&(_, x)| x < rank);
        let mut msg = (Buf::Send, 0usize);
        let mut msg_after = None;
        let mut result: Option<(Buf, usize)> = (!self.exclusive).then_some((Buf::Send, 0));
        let mut out = Vec::new();
        for (k, &(i, partner)) in partners.iter().enumerate() {
            let index = i as u32;
            let mut r = Round::new(index);
            let final_result = last_lower == Some(k);
            // An exclusive result with a single contribution is that contribution: receive it
            // in place.
            let direct = self.direct_round(rank) == Some(i);
            let slot = if direct {
                (Buf::Recv, 0)
            } else {
                (Buf::Scratch, 3 * i * m)
            };
            let their_slot = if self.direct_round(partner) == Some(i) {
                (Buf::Recv, 0)
            } else {
                (Buf::Scratch, 3 * i * m)
            };
            r.send(
                partner,
                vec![piece(
                    msg.0,
                    msg.1,
                    their_slot.0,
                    their_slot.1,
                    m,
                    msg_after,
                )],
            );
            r.expect(partner, usize::from(m > 0));
            if k + 1 < partners.len() && m > 0 {
                let dst = (Buf::Scratch, (3 * i + 1) * m);
                r.local.push(Local::Combine {
                    reduction: self.reduction,
                    a: msg,
                    b: slot,
                    dst,
                    len: m,
                });
                msg = dst;
                msg_after = Some(index);
            }
            if partner < rank {
                match result {
                    None => result = Some(slot),
                    Some(res) => {
                        let dst = if final_result {
                            (Buf::Recv, 0)
                        } else {
                            (Buf::Scratch, (3 * i + 2) * m)
                        };
                        if m > 0 {
                            r.local.push(Local::Combine {
                                reduction: self.reduction,
                                a: res,
                                b: slot,
                                dst,
                                len: m,
                            });
                        }
                        result = Some(dst);
                    }
                }
            }
            out.push(r);
        }
        out.retain(|r| !r.is_empty());
        Box::new(out.into_iter())
    }
    fn predict(&self, model: &CostModel) -> Prediction {
        let q = ceil_log2(self.p);
        if self.bytes == 0 || q == 0 {
            return Prediction {
                rounds: 0,
                time: 0.0,
            };
        }
        Prediction {
            rounds: q as u64,
            time: q as f64 * model.message(self.bytes),
        }
    }
}
