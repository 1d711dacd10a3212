//! Runs the plans of p virtual ranks in one process with real bytes.
//!
//! The simulator executes all ranks' plans in lock step, round by round, and checks:
//! - the result against the definition of the collective ([`data::expected`]);
//! - the one-sided rules: a rank only sends bytes it holds by the round its piece names as
//!   dependency; no destination byte is written twice with different data; every expected write
//!   arrives, and no write arrives that was not expected; local steps read held bytes and write
//!   fresh ones.
//!
//! It reports rounds, messages and bytes per rank, and prices the plan in the α-β model two
//! ways: by rounds (each round costs its slowest rank: the larger of what the rank sends and
//! what it receives in the round, 1-ported) and by dataflow (a message starts when the data it
//! carries is held and the sender's and receiver's ports are free).

pub mod cases;
pub mod data;

use std::collections::BTreeMap;

use crate::plan::{Algorithm, Buf, CostModel, Local, PlanError, Problem, Round};

/// A plan that breaks a rule, or a wrong result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("rank {rank}, round {round}: {what}")]
    Rule {
        rank: usize,
        round: u32,
        what: String,
    },
    #[error("rank {rank}: wrong result at byte {offset} of {len}: {what}")]
    WrongResult {
        rank: usize,
        offset: usize,
        len: usize,
        what: String,
    },
}

/// Counts and prices of one simulated run.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Round indices in which at least one message was sent.
    pub rounds: u32,
    pub messages: Vec<u64>,
    pub writes: Vec<u64>,
    pub bytes_sent: Vec<u64>,
    pub bytes_received: Vec<u64>,
    pub bytes_copied: Vec<u64>,
    /// α-β time priced by rounds.
    pub round_time: f64,
    /// α-β time priced by dataflow.
    pub dataflow_time: f64,
}

const NOT_HELD: u32 = u32::MAX;

struct Memory {
    data: Vec<u8>,
    /// 0: held from the start; k + 1: held once round k is complete.
    held: Vec<u32>,
}

impl Memory {
    fn new(len: usize) -> Self {
        Memory {
            data: vec![0; len],
            held: vec![NOT_HELD; len],
        }
    }
    fn filled(data: Vec<u8>) -> Self {
        let held = vec![0; data.len()];
        Memory { data, held }
    }
}

struct RankState {
    send: Memory,
    recv: Memory,
    scratch: Memory,
    /// (round, completion time) for rounds with arrivals or local steps.
    done: Vec<(u32, f64)>,
    send_free: f64,
    recv_free: f64,
    /// Barrier knowledge: ranks known to have started, per completed round.
    knows: Vec<(u32, Vec<u64>)>,
}

impl RankState {
    fn mem(&self, b: Buf) -> &Memory {
        match b {
            Buf::Send => &self.send,
            Buf::Recv => &self.recv,
            Buf::Scratch => &self.scratch,
        }
    }
    fn mem_mut(&mut self, b: Buf) -> &mut Memory {
        match b {
            Buf::Send => &mut self.send,
            Buf::Recv => &mut self.recv,
            Buf::Scratch => &mut self.scratch,
        }
    }
    fn ready_at(&self, after: Option<u32>) -> f64 {
        let Some(a) = after else { return 0.0 };
        match self.done.partition_point(|&(r, _)| r <= a) {
            0 => 0.0,
            i => self.done[i - 1].1,
        }
    }
    /// Knowledge as of round `after` (the first entry is the initial knowledge).
    fn knowledge(&self, after: Option<u32>) -> Option<&Vec<u64>> {
        let rest = self.knows.get(1..).unwrap_or(&[]);
        let i = match after {
            None => 0,
            Some(a) => rest.partition_point(|&(r, _)| r <= a),
        };
        if i == 0 {
            self.knows.first().map(|k| &k.1)
        } else {
            rest.get(i - 1).map(|k| &k.1)
        }
    }
}

fn rule(rank: usize, round: u32, what: impl Into<String>) -> SimError {
    SimError::Rule {
        rank,
        round,
        what: what.into(),
    }
}

/// Checks that `[off, off+len)` of `mem` is held by `limit` (held marker ≤ limit).
fn check_held(
    mem: &Memory,
    off: usize,
    len: usize,
    limit: u32,
) -> Result<(), (usize, Option<u32>)> {
    let end = off.checked_add(len).ok_or((off, None))?;
    let held = mem.held.get(off..end).ok_or((off, None))?;
    for (i, &h) in held.iter().enumerate() {
        if h == NOT_HELD || h > limit {
            return Err((off + i, (h != NOT_HELD).then(|| h - 1)));
        }
    }
    Ok(())
}

fn run_local(
    st: &mut RankState,
    step: &Local,
    marker: u32,
    rank: usize,
    round: u32,
) -> Result<u64, SimError> {
    let fresh = |st: &RankState, b: Buf, off: usize, len: usize| -> Result<(), SimError> {
        if b == Buf::Send {
            return Err(rule(rank, round, "local step writes the send buffer"));
        }
        let m = st.mem(b);
        let end = off.checked_add(len).filter(|&e| e <= m.held.len());
        let Some(end) = end else {
            return Err(rule(
                rank,
                round,
                format!("local step writes past {b} buffer"),
            ));
        };
        if m.held[off..end].iter().any(|&h| h != NOT_HELD) {
            return Err(rule(
                rank,
                round,
                format!("local step overwrites held bytes of {b} at {off}"),
            ));
        }
        Ok(())
    };
    let held = |st: &RankState, b: Buf, off: usize, len: usize| -> Result<(), SimError> {
        check_held(st.mem(b), off, len, marker).map_err(|(at, _)| {
            rule(
                rank,
                round,
                format!("local step reads {b} byte {at}, not held"),
            )
        })
    };
    match *step {
        Local::Copy {
            src,
            src_offset,
            dst,
            dst_offset,
            len,
        } => {
            held(st, src, src_offset, len)?;
            fresh(st, dst, dst_offset, len)?;
            let bytes = st.mem(src).data[src_offset..src_offset + len].to_vec();
            let m = st.mem_mut(dst);
            m.data[dst_offset..dst_offset + len].copy_from_slice(&bytes);
            m.held[dst_offset..dst_offset + len].fill(marker);
            Ok(len as u64)
        }
        Local::Combine {
            reduction,
            a,
            b,
            dst,
            len,
        } => {
            held(st, a.0, a.1, len)?;
            held(st, b.0, b.1, len)?;
            fresh(st, dst.0, dst.1, len)?;
            let x = st.mem(a.0).data[a.1..a.1 + len].to_vec();
            let y = st.mem(b.0).data[b.1..b.1 + len].to_vec();
            let mut out = vec![0u8; len];
            reduction.combine(&x, &y, &mut out)?;
            let m = st.mem_mut(dst.0);
            m.data[dst.1..dst.1 + len].copy_from_slice(&out);
            m.held[dst.1..dst.1 + len].fill(marker);
            Ok(0)
        }
    }
}

/// Simulates `alg` for all its ranks, checks it, and prices it with `model`.
pub fn simulate(alg: &dyn Algorithm, model: &CostModel) -> Result<Report, SimError> {
    let problem = alg.problem();
    problem.validate()?;
    let p = problem.p();
    let barrier = matches!(problem, Problem::Barrier { .. });
    let words = p.div_ceil(64);

    let mut plans = Vec::with_capacity(p);
    let mut states = Vec::with_capacity(p);
    let mut sends_in = Vec::with_capacity(p);
    for r in 0..p {
        let plan = alg.rank_plan(r)?;
        let input = data::send_input(problem, r);
        if input.len() != plan.buffers.send {
            return Err(rule(
                r,
                0,
                format!(
                    "send buffer is {} bytes, the collective gives {}",
                    plan.buffers.send,
                    input.len()
                ),
            ));
        }
        let recv = match data::recv_input(problem, r) {
            Some(d) if d.len() == plan.buffers.recv => Memory::filled(d),
            Some(d) => {
                return Err(rule(
                    r,
                    0,
                    format!(
                        "receive buffer is {} bytes, the root's data {}",
                        plan.buffers.recv,
                        d.len()
                    ),
                ))
            }
            None => Memory::new(plan.buffers.recv),
        };
        let mut knows = Vec::new();
        if barrier {
            let mut k = vec![0u64; words];
            k[r / 64] |= 1 << (r % 64);
            knows.push((u32::MAX, k));
        }
        states.push(RankState {
            send: Memory::filled(input.clone()),
            recv,
            scratch: Memory::new(plan.buffers.scratch),
            done: Vec::new(),
            send_free: 0.0,
            recv_free: 0.0,
            knows,
        });
        sends_in.push(input);
        plans.push(plan);
    }

    let mut report = Report {
        rounds: 0,
        messages: vec![0; p],
        writes: vec![0; p],
        bytes_sent: vec![0; p],
        bytes_received: vec![0; p],
        bytes_copied: vec![0; p],
        round_time: 0.0,
        dataflow_time: 0.0,
    };

    for (r, plan) in plans.iter().enumerate() {
        for step in &plan.setup {
            report.bytes_copied[r] += run_local(&mut states[r], step, 0, r, 0)?;
        }
    }

    let mut iters: Vec<_> = plans.into_iter().map(|pl| pl.rounds.peekable()).collect();
    let mut last: Option<u32> = None;
    let mut current: Vec<Option<Round>> = vec![None; p];
    loop {
        let next = iters
            .iter_mut()
            .filter_map(|it| it.peek().map(|r| r.index))
            .min();
        let Some(index) = next else { break };
        if last.is_some_and(|l| index <= l) {
            return Err(rule(0, index, "round indices do not increase"));
        }
        last = Some(index);
        let marker = index + 1;
        for (r, it) in iters.iter_mut().enumerate() {
            current[r] = if it.peek().is_some_and(|x| x.index == index) {
                it.next()
            } else {
                None
            };
        }

        // Sends: check sources, collect writes.
        struct Write {
            from: usize,
            to: usize,
            dst: Buf,
            off: usize,
            bytes: Vec<u8>,
        }
        let mut writes: Vec<Write> = Vec::new();
        let mut recv_cost: BTreeMap<usize, f64> = BTreeMap::new();
        let mut round_max = 0.0f64;
        let mut arrivals: BTreeMap<usize, f64> = BTreeMap::new();
        let mut any = false;
        for r in 0..p {
            let Some(round) = &current[r] else { continue };
            let mut my_send = 0.0;
            for t in &round.sends {
                if t.to >= p || t.to == r {
                    return Err(rule(r, index, format!("sends to invalid rank {}", t.to)));
                }
                if t.pieces.is_empty() {
                    return Err(rule(r, index, "message without pieces"));
                }
                let mut bytes = 0usize;
                let mut dep: Option<u32> = None;
                for pc in &t.pieces {
                    if pc.after.is_some_and(|a| a >= index) {
                        return Err(rule(
                            r,
                            index,
                            format!("piece depends on round {:?}, not earlier", pc.after),
                        ));
                    }
                    dep = dep.max(pc.after);
                    let limit = pc.after.map_or(0, |a| a + 1);
                    check_held(states[r].mem(pc.src), pc.src_offset, pc.len, limit).map_err(
                        |(at, when)| {
                            rule(
                                r,
                                index,
                                match when {
                                    Some(w) => format!(
                                        "sends {} byte {at} to {}: held only after round {w}, piece says {:?}",
                                        pc.src, t.to, pc.after
                                    ),
                                    None => format!(
                                        "sends {} byte {at} to {}: not held",
                                        pc.src, t.to
                                    ),
                                },
                            )
                        },
                    )?;
                    if pc.dst == Buf::Send {
                        return Err(rule(r, index, "writes into a send buffer"));
                    }
                    let bytes_src =
                        states[r].mem(pc.src).data[pc.src_offset..pc.src_offset + pc.len].to_vec();
                    writes.push(Write {
                        from: r,
                        to: t.to,
                        dst: pc.dst,
                        off: pc.dst_offset,
                        bytes: bytes_src,
                    });
                    bytes += pc.len;
                }
                any = true;
                let cost = model.message(bytes);
                my_send += cost;
                *recv_cost.entry(t.to).or_insert(0.0) += cost;
                report.messages[r] += 1;
                report.writes[r] += t.pieces.len() as u64;
                report.bytes_sent[r] += bytes as u64;
                report.bytes_received[t.to] += bytes as u64;
                // Dataflow: start when the data is held and both ports are free.
                let start = states[r]
                    .ready_at(dep)
                    .max(states[r].send_free)
                    .max(states[t.to].recv_free);
                let end = start + cost;
                states[r].send_free = end;
                states[t.to].recv_free = end;
                let a = arrivals.entry(t.to).or_insert(0.0);
                *a = a.max(end);
                report.dataflow_time = report.dataflow_time.max(end);
                if barrier {
                    let k = states[r].knowledge(dep).cloned().unwrap_or_default();
                    let kt = &mut states[t.to];
                    let mut merged = kt.knows.last().map(|x| x.1.clone()).unwrap_or_default();
                    for (m, w) in merged.iter_mut().zip(k.iter()) {
                        *m |= w;
                    }
                    // Knowledge arriving in this round counts once the round is complete.
                    match kt.knows.last_mut() {
                        Some(last) if last.0 == index => last.1 = merged,
                        _ => kt.knows.push((index, merged)),
                    }
                }
            }
            round_max = round_max.max(my_send);
        }
        for c in recv_cost.values() {
            round_max = round_max.max(*c);
        }
        if any {
            report.rounds += 1;
            report.round_time += round_max;
        }

        // Deliver.
        let mut counted: BTreeMap<(usize, usize), usize> = BTreeMap::new();
        for w in writes {
            let st = &mut states[w.to];
            let m = st.mem_mut(w.dst);
            let fits = w
                .off
                .checked_add(w.bytes.len())
                .is_some_and(|end| end <= m.data.len());
            if !fits {
                return Err(rule(
                    w.from,
                    index,
                    format!(
                        "writes past the end of rank {}'s {} buffer ({}+{} > {})",
                        w.to,
                        w.dst,
                        w.off,
                        w.bytes.len(),
                        m.data.len()
                    ),
                ));
            }
            for (i, &b) in w.bytes.iter().enumerate() {
                let at = w.off + i;
                if m.held[at] != NOT_HELD {
                    if m.data[at] != b {
                        return Err(rule(
                            w.from,
                            index,
                            format!(
                                "overwrites byte {at} of rank {}'s {} buffer with different data",
                                w.to, w.dst
                            ),
                        ));
                    }
                } else {
                    m.data[at] = b;
                    m.held[at] = marker;
                }
            }
            *counted.entry((w.to, w.from)).or_insert(0) += 1;
        }

        // Expectations.
        for (r, round) in current.iter().enumerate() {
            let mut want: BTreeMap<usize, usize> = BTreeMap::new();
            if let Some(round) = round {
                for e in &round.expects {
                    *want.entry(e.from).or_insert(0) += e.writes;
                }
            }
            let got: BTreeMap<usize, usize> = counted
                .range((r, 0)..(r, usize::MAX))
                .map(|(&(_, from), &n)| (from, n))
                .filter(|&(_, n)| n > 0)
                .collect();
            if want != got {
                return Err(rule(
                    r,
                    index,
                    format!("expected writes {want:?}, got {got:?}"),
                ));
            }
        }

        // Completion and local steps.
        for r in 0..p {
            let Some(round) = current[r].take() else {
                continue;
            };
            if !round.expects.is_empty() || !round.local.is_empty() {
                let prev = states[r].done.last().map_or(0.0, |d| d.1);
                let t = prev.max(arrivals.get(&r).copied().unwrap_or(0.0));
                states[r].done.push((index, t));
            }
            for step in &round.local {
                report.bytes_copied[r] += run_local(&mut states[r], step, marker, r, index)?;
            }
        }
    }

    // Results.
    for (r, st) in states.iter().enumerate() {
        if let Some(want) = data::expected(problem, r, &sends_in) {
            let got = &st.recv;
            if got.data.len() != want.len() {
                return Err(SimError::WrongResult {
                    rank: r,
                    offset: 0,
                    len: want.len(),
                    what: format!("receive buffer has {} bytes", got.data.len()),
                });
            }
            for i in 0..want.len() {
                if got.held[i] == NOT_HELD {
                    return Err(SimError::WrongResult {
                        rank: r,
                        offset: i,
                        len: want.len(),
                        what: "never written".into(),
                    });
                }
                if got.data[i] != want[i] {
                    return Err(SimError::WrongResult {
                        rank: r,
                        offset: i,
                        len: want.len(),
                        what: format!("{} instead of {}", got.data[i], want[i]),
                    });
                }
            }
        }
        if barrier {
            let all = st
                .knows
                .last()
                .map(|k| k.1.iter().map(|w| w.count_ones()).sum::<u32>());
            if all != Some(p as u32) {
                return Err(SimError::WrongResult {
                    rank: r,
                    offset: 0,
                    len: 0,
                    what: format!("leaves the barrier knowing of {all:?} of {p} ranks"),
                });
            }
        }
    }
    Ok(report)
}
