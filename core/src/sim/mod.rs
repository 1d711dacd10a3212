//! Runs the plans of p virtual ranks in one process with real bytes.
//!
//! The simulator executes all ranks' plans in lock step, round by round, and checks:
//! - the result against the definition of the collective ([`data::expected`]);
//! - the one-sided rules: a rank only sends bytes it holds by the round its piece names as
//!   dependency; no destination byte is written twice with different data; every expected write
//!   arrives, and no write arrives that was not expected; local steps read held bytes and write
//!   fresh ones.
//!
//! It reports rounds, messages, writes and bytes per rank, and prices the plan in the α-β-o
//! model ([`CostModel::message_writes`]) two ways: by rounds (each round costs its slowest rank:
//! the larger of what the rank sends and what it receives in the round, 1-ported) and by dataflow
//! (a message starts when the data it carries is held and the sender's and receiver's ports are
//! free; the same clock with which [`price::price_on`] prices plans on a layout of ranks on
//! nodes without moving bytes).
//!
//! [`links::node_links`] counts the bytes that cross each node's link for a placement of the
//! ranks on nodes.
//!
//! [`simulate_on`] runs the plans on given inputs and returns every rank's receive buffer, for
//! results whose bits depend on the order of combination.
//!
//! [`simulate`] posts one write per piece; [`simulate_merged`] posts the merged writes of
//! [`crate::plan::merge`] for given limits, gathering each from its local segments and
//! scattering it over its remote segments, and counts arrivals against what each target
//! computes with [`Incoming`] from its sources' plans.

pub mod data;
pub mod estimate;
pub mod links;
pub mod price;

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::plan::merge::{merge_transfer, Incoming, IovLimits};
use crate::plan::{
    Algorithm, Buf, CostModel, Layout, LevelCosts, Local, PlanError, Problem, RankPlan, Round,
    Transfer,
};
use price::{next_index, Dataflow, Rounds};

/// A plan that breaks a rule, or a wrong result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    /// The plan could not be built.
    Plan(#[from] PlanError),
    #[error("rank {rank}, round {round}: {what}")]
    /// A plan broke one of the one-sided rules (module documentation).
    Rule {
        /// The rank whose plan broke it.
        rank: usize,
        /// The round.
        round: u32,
        /// The rule broken.
        what: String,
    },
    #[error("rank {rank}: wrong result at byte {offset} of {len}: {what}")]
    /// A rank's result differs from what the collective's definition demands.
    WrongResult {
        /// The rank.
        rank: usize,
        /// First wrong byte.
        offset: usize,
        /// Length of the result.
        len: usize,
        /// What differs.
        what: String,
    },
}

/// Counts and prices of one simulated run.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Round indices in which at least one message was sent.
    pub rounds: u32,
    /// Messages sent, per rank.
    pub messages: Vec<u64>,
    /// Writes posted: one per piece ([`simulate`]) or the merged ones ([`simulate_merged`]).
    pub writes: Vec<u64>,
    /// Plan pieces sent.
    pub pieces: Vec<u64>,
    /// Bytes sent, per rank.
    pub bytes_sent: Vec<u64>,
    /// Bytes received, per rank.
    pub bytes_received: Vec<u64>,
    /// Bytes copied by local steps, per rank.
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

/// Simulates `alg` for all its ranks posting one write per piece, checks it, and prices it with
/// `model`.
pub fn simulate(alg: &dyn Algorithm, model: &CostModel) -> Result<Report, SimError> {
    let (sim, plans) = Sim::new(alg, model, None)?;
    sim.run(plans)
}

/// Like [`simulate`], but every transfer is posted as the merged writes of
/// [`merge_transfer`] under `limits`, and every target counts the writes it computes from its
/// sources' plans ([`Incoming`]).
pub fn simulate_merged(
    alg: &dyn Algorithm,
    model: &CostModel,
    limits: IovLimits,
) -> Result<Report, SimError> {
    let (sim, plans) = Sim::new(alg, model, Some(limits))?;
    sim.run(plans)
}

/// Simulates `alg` posting one write per piece on the send buffers `inputs` (one per rank,
/// each of the length the plan asks for) instead of the collective's defined inputs; checks
/// the one-sided rules but not the result, and returns every rank's receive buffer. For
/// inputs whose result depends on the order of combination (floating-point sums): which bits
/// each rank ends with.
pub fn simulate_on(
    alg: &dyn Algorithm,
    model: &CostModel,
    inputs: Vec<Vec<u8>>,
) -> Result<(Report, Vec<Vec<u8>>), SimError> {
    let (mut sim, plans) = Sim::new(alg, model, None)?;
    if inputs.len() != sim.states.len() {
        return Err(PlanError::CountsLength {
            expected: sim.states.len(),
            got: inputs.len(),
        }
        .into());
    }
    for (r, input) in inputs.into_iter().enumerate() {
        if input.len() != sim.states[r].send.data.len() {
            return Err(rule(
                r,
                0,
                format!(
                    "send buffer is {} bytes, the input {}",
                    sim.states[r].send.data.len(),
                    input.len()
                ),
            ));
        }
        sim.states[r].send = Memory::filled(input.clone());
        sim.sends_in[r] = input;
    }
    sim.check = false;
    let (report, states) = sim.run_states(plans)?;
    Ok((report, states.into_iter().map(|s| s.recv.data).collect()))
}

/// A write on its way: the bytes gathered at the sender, as parts of the target's buffers.
struct Posted {
    from: usize,
    to: usize,
    parts: Vec<(Buf, usize, Vec<u8>)>,
}

/// The state of one simulated run.
struct Sim<'a> {
    problem: &'a Problem,
    model: CostModel,
    limits: Option<IovLimits>,
    barrier: bool,
    /// Whether the results are checked against the collective's definition.
    check: bool,
    states: Vec<RankState>,
    /// The dataflow clock (one node, `model` for every message).
    flow: Dataflow<'a>,
    sends_in: Vec<Vec<u8>>,
    /// Per rank, what it computes it receives (merged runs only).
    incoming: Vec<Incoming<'a>>,
    report: Report,
}

impl<'a> Sim<'a> {
    /// Plans of all ranks, and their buffers filled with the collective's inputs.
    fn new(
        alg: &'a dyn Algorithm,
        model: &CostModel,
        limits: Option<IovLimits>,
    ) -> Result<(Self, Vec<RankPlan<'a>>), SimError> {
        let problem = alg.problem();
        problem.validate()?;
        let p = problem.p();
        let barrier = matches!(problem, Problem::Barrier { .. });
        let mut plans = Vec::with_capacity(p);
        let mut states = Vec::with_capacity(p);
        let mut sends_in = Vec::with_capacity(p);
        for r in 0..p {
            let plan = alg.rank_plan(r)?;
            let input = data::send_input(problem, r);
            states.push(initial_state(problem, r, &plan, &input, barrier)?);
            sends_in.push(input);
            plans.push(plan);
        }
        let incoming = match limits {
            Some(l) => (0..p).map(|r| Incoming::new(alg, r, l)).collect(),
            None => Vec::new(),
        };
        let flow = Dataflow::new(Cow::Owned(Layout::one_node(p)?), LevelCosts::flat(*model));
        let sim = Sim {
            problem,
            model: *model,
            limits,
            barrier,
            check: true,
            states,
            flow,
            sends_in,
            incoming,
            report: Report {
                rounds: 0,
                messages: vec![0; p],
                writes: vec![0; p],
                pieces: vec![0; p],
                bytes_sent: vec![0; p],
                bytes_received: vec![0; p],
                bytes_copied: vec![0; p],
                round_time: 0.0,
                dataflow_time: 0.0,
            },
        };
        Ok((sim, plans))
    }

    /// All rounds in lock step, then the results.
    fn run(self, plans: Vec<RankPlan<'a>>) -> Result<Report, SimError> {
        self.run_states(plans).map(|(report, _)| report)
    }

    /// All rounds in lock step, then the results checked (unless not asked for); the report
    /// and every rank's final buffers.
    fn run_states(
        mut self,
        plans: Vec<RankPlan<'a>>,
    ) -> Result<(Report, Vec<RankState>), SimError> {
        for (r, plan) in plans.iter().enumerate() {
            for step in &plan.setup {
                self.report.bytes_copied[r] += run_local(&mut self.states[r], step, 0, r, 0)?;
            }
        }
        let mut iters: Vec<Rounds<'a>> = plans.into_iter().map(|pl| pl.rounds.peekable()).collect();
        let mut last: Option<u32> = None;
        while let Some(index) = next_index(&mut iters, &mut last)
            .map_err(|index| rule(0, index, "round indices do not increase"))?
        {
            let current: Vec<Option<Round>> = iters
                .iter_mut()
                .map(|it| it.next_if(|x| x.index == index))
                .collect();
            let writes = self.post(&current, index)?;
            let counted = self.deliver(writes, index)?;
            self.check_expectations(&current, &counted, index)?;
            self.complete(current, index)?;
        }
        if self.check {
            self.check_results()?;
        }
        self.report.dataflow_time = self.flow.time();
        Ok((self.report, self.states))
    }

    /// Checks every rank's sends of the round, gathers their bytes and prices them.
    fn post(&mut self, current: &[Option<Round>], index: u32) -> Result<Vec<Posted>, SimError> {
        let p = current.len();
        let mut out = Vec::new();
        let mut recv_cost: BTreeMap<usize, f64> = BTreeMap::new();
        let mut round_max = 0.0f64;
        let mut any = false;
        for (r, round) in current.iter().enumerate() {
            let Some(round) = round else { continue };
            let mut my_send = 0.0;
            for t in &round.sends {
                if t.to >= p || t.to == r {
                    return Err(rule(r, index, format!("sends to invalid rank {}", t.to)));
                }
                if t.pieces.is_empty() {
                    return Err(rule(r, index, "message without pieces"));
                }
                let (bytes, dep) = self.check_sources(r, t, index)?;
                let writes = self.gather(r, t);
                let cost = self.model.message_writes(bytes, writes.len());
                any = true;
                my_send += cost;
                *recv_cost.entry(t.to).or_insert(0.0) += cost;
                let rep = &mut self.report;
                rep.messages[r] += 1;
                rep.writes[r] += writes.len() as u64;
                rep.pieces[r] += t.pieces.len() as u64;
                rep.bytes_sent[r] += bytes as u64;
                rep.bytes_received[t.to] += bytes as u64;
                self.flow.message(r, t.to, dep, bytes, writes.len());
                out.extend(writes);
                if self.barrier {
                    self.spread_knowledge(r, t.to, dep, index);
                }
            }
            round_max = round_max.max(my_send);
        }
        for c in recv_cost.values() {
            round_max = round_max.max(*c);
        }
        if any {
            self.report.rounds += 1;
            self.report.round_time += round_max;
        }
        Ok(out)
    }

    /// Checks that rank `r` holds every byte of `t` by the round its piece names, and that no
    /// piece writes a send buffer; returns the bytes and the latest dependency.
    fn check_sources(
        &self,
        r: usize,
        t: &Transfer,
        index: u32,
    ) -> Result<(usize, Option<u32>), SimError> {
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
            check_held(self.states[r].mem(pc.src), pc.src_offset, pc.len, limit).map_err(
                |(at, when)| {
                    rule(
                        r,
                        index,
                        match when {
                            Some(w) => format!(
                                "sends {} byte {at} to {}: held only after round {w}, piece says {:?}",
                                pc.src, t.to, pc.after
                            ),
                            None => format!("sends {} byte {at} to {}: not held", pc.src, t.to),
                        },
                    )
                },
            )?;
            if pc.dst == Buf::Send {
                return Err(rule(r, index, "writes into a send buffer"));
            }
            bytes += pc.len;
        }
        Ok((bytes, dep))
    }

    /// The writes carrying `t` (sources already checked): one per piece, or the merged ones,
    /// each gathered from its local segments and cut along its remote segments.
    fn gather(&self, r: usize, t: &Transfer) -> Vec<Posted> {
        let st = &self.states[r];
        let read = |b: Buf, off: usize, len: usize| st.mem(b).data[off..off + len].to_vec();
        let Some(limits) = self.limits else {
            return t
                .pieces
                .iter()
                .map(|pc| Posted {
                    from: r,
                    to: t.to,
                    parts: vec![(pc.dst, pc.dst_offset, read(pc.src, pc.src_offset, pc.len))],
                })
                .collect();
        };
        merge_transfer(t, limits)
            .into_iter()
            .map(|w| {
                let stream: Vec<u8> = w
                    .local
                    .iter()
                    .flat_map(|s| read(s.buf, s.offset, s.len))
                    .collect();
                let mut at = 0;
                let mut parts = Vec::with_capacity(w.remote.len());
                for s in &w.remote {
                    let end = (at + s.len).min(stream.len());
                    parts.push((s.buf, s.offset, stream[at..end].to_vec()));
                    at = end;
                }
                Posted {
                    from: r,
                    to: w.to,
                    parts,
                }
            })
            .collect()
    }

    /// Barrier knowledge: the target learns of every rank the sender knew of by `dep`.
    fn spread_knowledge(&mut self, from: usize, to: usize, dep: Option<u32>, index: u32) {
        let k = self.states[from]
            .knowledge(dep)
            .cloned()
            .unwrap_or_default();
        let kt = &mut self.states[to];
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

    /// Lands the writes; returns the writes that arrived per (target, source).
    fn deliver(
        &mut self,
        writes: Vec<Posted>,
        index: u32,
    ) -> Result<BTreeMap<(usize, usize), usize>, SimError> {
        let marker = index + 1;
        let mut counted: BTreeMap<(usize, usize), usize> = BTreeMap::new();
        for w in writes {
            for (dst, off, bytes) in &w.parts {
                land(
                    &mut self.states[w.to],
                    w.from,
                    w.to,
                    *dst,
                    *off,
                    bytes,
                    index,
                    marker,
                )?;
            }
            *counted.entry((w.to, w.from)).or_insert(0) += 1;
        }
        Ok(counted)
    }

    /// Every rank got exactly the writes it expects in the round: its plan's counts, or in a
    /// merged run the merged counts it computes from its sources' plans.
    fn check_expectations(
        &mut self,
        current: &[Option<Round>],
        counted: &BTreeMap<(usize, usize), usize>,
        index: u32,
    ) -> Result<(), SimError> {
        for (r, round) in current.iter().enumerate() {
            let mut want: BTreeMap<usize, usize> = BTreeMap::new();
            if let Some(round) = round {
                let expects = match self.incoming.get_mut(r) {
                    Some(inc) => inc
                        .expects(round)
                        .map_err(|e| rule(r, index, e.to_string()))?,
                    None => round.expects.clone(),
                };
                for e in expects {
                    *want.entry(e.from).or_insert(0) += e.writes;
                }
            }
            want.retain(|_, n| *n > 0);
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
        Ok(())
    }

    /// Marks the rounds complete and runs their local steps.
    fn complete(&mut self, current: Vec<Option<Round>>, index: u32) -> Result<(), SimError> {
        for (r, round) in current.into_iter().enumerate() {
            let Some(round) = round else { continue };
            if !round.expects.is_empty() || !round.local.is_empty() {
                self.flow.complete(r, index);
            }
            let st = &mut self.states[r];
            for step in &round.local {
                self.report.bytes_copied[r] += run_local(st, step, index + 1, r, index)?;
            }
        }
        self.flow.end_round();
        Ok(())
    }

    /// Every receive buffer holds the collective's result; every rank left a barrier knowing of
    /// all.
    fn check_results(&self) -> Result<(), SimError> {
        let p = self.states.len();
        // Every rank's result is the same: computed once (an allreduce's costs p·m).
        let same = matches!(
            self.problem,
            Problem::Broadcast { .. }
                | Problem::Allreduce { .. }
                | Problem::Allgather { .. }
                | Problem::Allgatherv { .. }
        );
        let mut first: Option<Vec<u8>> = None;
        for (r, st) in self.states.iter().enumerate() {
            let want = match &first {
                Some(want) => Some(want.clone()),
                None => data::expected(self.problem, r, &self.sends_in),
            };
            if let Some(want) = want {
                check_result(r, &st.recv, &want)?;
                if same && first.is_none() {
                    first = Some(want);
                }
            }
            if self.barrier {
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
        Ok(())
    }
}

/// Rank `r`'s buffers before the operation: its input, the root's data where the collective
/// has one in the receive buffer, barrier knowledge of itself.
fn initial_state(
    problem: &Problem,
    r: usize,
    plan: &RankPlan<'_>,
    input: &[u8],
    barrier: bool,
) -> Result<RankState, SimError> {
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
        let mut k = vec![0u64; problem.p().div_ceil(64)];
        k[r / 64] |= 1 << (r % 64);
        knows.push((u32::MAX, k));
    }
    Ok(RankState {
        send: Memory::filled(input.to_vec()),
        recv,
        scratch: Memory::new(plan.buffers.scratch),
        knows,
    })
}

/// Writes `bytes` at `off` of `to`'s `dst` buffer: in bounds, and never over held bytes with
/// different data.
#[allow(clippy::too_many_arguments)]
fn land(
    st: &mut RankState,
    from: usize,
    to: usize,
    dst: Buf,
    off: usize,
    bytes: &[u8],
    index: u32,
    marker: u32,
) -> Result<(), SimError> {
    let m = st.mem_mut(dst);
    let fits = off
        .checked_add(bytes.len())
        .is_some_and(|end| end <= m.data.len());
    if !fits {
        return Err(rule(
            from,
            index,
            format!(
                "writes past the end of rank {to}'s {dst} buffer ({off}+{} > {})",
                bytes.len(),
                m.data.len()
            ),
        ));
    }
    for (i, &b) in bytes.iter().enumerate() {
        let at = off + i;
        if m.held[at] != NOT_HELD {
            if m.data[at] != b {
                return Err(rule(
                    from,
                    index,
                    format!("overwrites byte {at} of rank {to}'s {dst} buffer with different data"),
                ));
            }
        } else {
            m.data[at] = b;
            m.held[at] = marker;
        }
    }
    Ok(())
}

/// Rank `r`'s receive buffer equals `want`, every byte written.
fn check_result(r: usize, got: &Memory, want: &[u8]) -> Result<(), SimError> {
    let wrong = |offset: usize, what: String| SimError::WrongResult {
        rank: r,
        offset,
        len: want.len(),
        what,
    };
    if got.data.len() != want.len() {
        return Err(wrong(
            0,
            format!("receive buffer has {} bytes", got.data.len()),
        ));
    }
    for (i, (&w, (&g, &h))) in want.iter().zip(got.data.iter().zip(&got.held)).enumerate() {
        if h == NOT_HELD {
            return Err(wrong(i, "never written".into()));
        }
        if g != w {
            return Err(wrong(i, format!("{g} instead of {w}")));
        }
    }
    Ok(())
}
