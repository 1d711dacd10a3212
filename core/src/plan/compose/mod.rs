//! Plans made of other plans: phases of algorithms run by groups of ranks, one after the other
//! in round numbering but overlapping in time wherever the data allows.
//!
//! A [`Composite`] is a sequence of [`Phase`]s; a phase is a set of [`Group`]s on disjoint
//! ranks, each running one algorithm on its members (sub-rank `i` is global rank
//! `members[i]`). Each phase takes its own range of global round indices. A group's buffers
//! are placed in the composite's buffers ([`Place`]: runs of bytes, so that the blocks of
//! ranks that are not consecutive can be gathered into one sub-buffer), and each member gets
//! a private range of the composite's scratch memory for the group's scratch.
//!
//! What makes the phases overlap is the dependency of each piece: a sub-plan's piece whose data
//! it holds "from the start" is, in the composite, held once the earlier phases have produced
//! it on this rank — at the round in which the last write or local step that produced those
//! bytes completed. So a block a leader receives from another node moves on inside the node as
//! soon as it has arrived, not after the whole message (the transport posts a transfer as soon
//! as its data is held). A phase without data to wait for (barriers: signals) is marked
//! `ordered`: each of its sends waits for everything this rank did in the earlier phases.
//!
//! The writes a rank expects are counted from its senders' mapped transfers (a piece may be
//! split where a run of its source or destination ends), so a rank walks the sub-plans of the
//! ranks that write to it in each phase.

use std::borrow::Cow;
use std::collections::BTreeMap;

mod held;
mod place;

use held::Held;
use place::{along, zip_ranges};
pub use place::{Place, Places};

use super::{
    push_piece, Algorithm, Buf, BufferSizes, CostModel, Local, Piece, PlanError, Prediction,
    Problem, RankPlan, Round,
};

/// One algorithm run by some ranks.
pub struct Group {
    /// The algorithm, on `members.len()` ranks.
    pub alg: Box<dyn Algorithm>,
    /// Sub-rank i is global rank `members[i]`.
    pub members: Vec<usize>,
    /// Per member, where its sub-buffers lie.
    pub places: Vec<Places>,
}

/// Groups on disjoint ranks, run in one range of rounds.
pub struct Phase {
    /// The groups.
    pub groups: Vec<Group>,
    /// Every send of the phase waits for all this rank did in earlier phases (for phases whose
    /// order no data expresses, such as barriers' signals).
    pub ordered: bool,
    /// The model of the level the phase runs on when it runs inside nodes (`None`: across
    /// nodes, the model [`Algorithm::predict`] is given).
    pub inside: Option<CostModel>,
}

impl Phase {
    /// Groups that run across nodes (priced with the model across).
    pub fn across(groups: Vec<Group>) -> Phase {
        Phase {
            groups,
            ordered: false,
            inside: None,
        }
    }

    /// Groups that run inside nodes, priced with `inside`.
    pub fn inside(groups: Vec<Group>, inside: CostModel) -> Phase {
        Phase {
            groups,
            ordered: false,
            inside: Some(inside),
        }
    }

    /// The same phase, each of its sends after everything this rank did in earlier phases.
    pub fn ordered(self) -> Phase {
        Phase {
            ordered: true,
            ..self
        }
    }
}

/// Where a rank is in a phase: group, sub-rank, and the scratch offset of its sub-scratch.
#[derive(Clone, Copy, Debug)]
struct Seat {
    group: usize,
    sub: usize,
    scratch: usize,
}

/// A plan made of phases.
pub struct Composite {
    name: &'static str,
    problem: Problem,
    phases: Vec<Phase>,
    /// Global index of each phase's round 0, and one past the last phase's rounds.
    offsets: Vec<u32>,
    /// Per phase, per global rank, its seats (a rank may run in several groups of a phase:
    /// a node with fewer ranks than lanes carries several lanes with one rank).
    seats: Vec<Vec<Vec<Seat>>>,
    /// Per rank, its buffer sizes.
    buffers: Vec<BufferSizes>,
}

/// The global index of a sub-plan round.
fn global(offset: u32, round: u32) -> Result<u32, PlanError> {
    offset.checked_add(round).ok_or(PlanError::Unsupported {
        algorithm: "composite",
        reason: "rounds do not fit the 32-bit round index".into(),
    })
}

impl Composite {
    /// The composite `name` solving `problem` with these phases. `scratch` gives each rank's
    /// scratch bytes that the builder placed itself (sub-scratch goes after them).
    pub fn new(
        name: &'static str,
        problem: Problem,
        phases: Vec<Phase>,
        scratch: impl Fn(usize) -> usize,
    ) -> Result<Composite, PlanError> {
        let p = problem.p();
        let mut offsets = vec![0u32];
        let mut seats = Vec::with_capacity(phases.len());
        let mut buffers: Vec<BufferSizes> = (0..p)
            .map(|r| BufferSizes {
                scratch: scratch(r),
                ..BufferSizes::default()
            })
            .collect();
        // Groups that run the same algorithm on the same problem with the same block count
        // (which its predicted rounds tell) take the same rounds.
        let mut lengths: std::collections::HashMap<(&'static str, Problem, u64), u32> =
            std::collections::HashMap::new();
        for phase in &phases {
            let mut seat: Vec<Vec<Seat>> = vec![Vec::new(); p];
            let mut length = 0u32;
            for (g, group) in phase.groups.iter().enumerate() {
                let sub_p = group.alg.problem().p();
                if group.members.len() != sub_p || group.places.len() != sub_p {
                    return Err(PlanError::CountsLength {
                        expected: sub_p,
                        got: group.members.len().min(group.places.len()),
                    });
                }
                let key = (
                    group.alg.name(),
                    group.alg.problem().clone(),
                    group.alg.predict(&CostModel::default()).rounds,
                );
                let rounds = match lengths.get(&key) {
                    Some(&n) => n,
                    None => {
                        let n = rounds_of(group.alg.as_ref())?;
                        lengths.insert(key, n);
                        n
                    }
                };
                length = length.max(rounds);
                for (sub, (&rank, places)) in group.members.iter().zip(&group.places).enumerate() {
                    let sizes = buffers
                        .get_mut(rank)
                        .ok_or(PlanError::RankOutOfRange { rank, p })?;
                    if seat[rank].iter().any(|s| s.group == g) {
                        return Err(PlanError::Unsupported {
                            algorithm: name,
                            reason: format!("rank {rank} is twice in one group"),
                        });
                    }
                    let own = group.alg.buffers(sub);
                    if places.send.len() < own.send || places.recv.len() < own.recv {
                        return Err(PlanError::Unsupported {
                            algorithm: name,
                            reason: format!("rank {rank}: a sub-buffer is placed too small"),
                        });
                    }
                    seat[rank].push(Seat {
                        group: g,
                        sub,
                        scratch: sizes.scratch,
                    });
                    sizes.scratch = sizes
                        .scratch
                        .checked_add(own.scratch)
                        .ok_or(PlanError::Overflow)?;
                    for place in [&places.send, &places.recv] {
                        let end = place.end();
                        match place.buf {
                            Buf::Send => sizes.send = sizes.send.max(end),
                            Buf::Recv => sizes.recv = sizes.recv.max(end),
                            Buf::Scratch => sizes.scratch = sizes.scratch.max(end),
                        }
                    }
                }
            }
            let last = offsets[offsets.len() - 1];
            offsets.push(global(last, length)?);
            seats.push(seat);
        }
        Ok(Composite {
            name,
            problem,
            phases,
            offsets,
            seats,
            buffers,
        })
    }

    /// The phases.
    pub fn phases(&self) -> &[Phase] {
        &self.phases
    }

    /// The seat of `rank` in group `g` of phase `k`.
    fn seat(&self, k: usize, rank: usize, g: usize) -> Result<Seat, PlanError> {
        self.seats[k]
            .get(rank)
            .and_then(|seats| seats.iter().find(|s| s.group == g))
            .copied()
            .ok_or_else(|| missing(self.name, rank))
    }

    /// Where sub-buffer `buf` of the member in `seat` of phase `k` lies (borrowed: a place
    /// may hold a run per node, and every piece looks it up).
    fn place(&self, k: usize, seat: Seat, buf: Buf) -> Cow<'_, Place> {
        let group = &self.phases[k].groups[seat.group];
        match buf {
            Buf::Send => Cow::Borrowed(&group.places[seat.sub].send),
            Buf::Recv => Cow::Borrowed(&group.places[seat.sub].recv),
            Buf::Scratch => Cow::Owned(Place::at(
                Buf::Scratch,
                seat.scratch,
                group.alg.buffers(seat.sub).scratch,
            )),
        }
    }

    /// A transfer's pieces from `from` to `to` in phase `k`, in composite buffers: each piece
    /// split where a run of its source or destination ends, neighbours joined as
    /// [`push_piece`] does. `after` gives the dependency of a piece's composite source range.
    fn map_pieces(
        &self,
        k: usize,
        from: Seat,
        to: Seat,
        pieces: &[Piece],
        mut after: impl FnMut(&Piece, Buf, usize, usize) -> Option<u32>,
    ) -> Result<Vec<Piece>, PlanError> {
        let mut out = Vec::new();
        for piece in pieces {
            let src = self.place(k, from, piece.src);
            let dst = self.place(k, to, piece.dst);
            let srcs = src.map(piece.src_offset, piece.len)?;
            let dsts = dst.map(piece.dst_offset, piece.len)?;
            for (s_off, d_off, len) in zip_ranges(&srcs, &dsts) {
                push_piece(
                    &mut out,
                    Piece {
                        src: src.buf,
                        src_offset: s_off,
                        dst: dst.buf,
                        dst_offset: d_off,
                        len,
                        after: after(piece, src.buf, s_off, len),
                    },
                );
            }
        }
        Ok(out)
    }

    /// A local step of `rank` in phase `k`, in composite buffers, split where runs end;
    /// copies onto themselves (a sub-plan copying its input into place where the composite
    /// already placed it) are dropped.
    fn map_local(&self, k: usize, seat: Seat, step: &Local) -> Result<Vec<Local>, PlanError> {
        let place = |b: Buf| -> Result<Cow<'_, Place>, PlanError> { Ok(self.place(k, seat, b)) };
        let mut out = Vec::new();
        match *step {
            Local::Copy {
                src,
                src_offset,
                dst,
                dst_offset,
                len,
            } => {
                let (s, d) = (place(src)?, place(dst)?);
                let srcs = s.map(src_offset, len)?;
                let dsts = d.map(dst_offset, len)?;
                for (so, dof, n) in zip_ranges(&srcs, &dsts) {
                    if s.buf == d.buf && so == dof {
                        continue;
                    }
                    out.push(Local::Copy {
                        src: s.buf,
                        src_offset: so,
                        dst: d.buf,
                        dst_offset: dof,
                        len: n,
                    });
                }
            }
            Local::Combine {
                reduction,
                a,
                b,
                dst,
                len,
            } => {
                let (pa, pb, pd) = (place(a.0)?, place(b.0)?, place(dst.0)?);
                let ra = pa.map(a.1, len)?;
                let rb = pb.map(b.1, len)?;
                let rd = pd.map(dst.1, len)?;
                for (ab, od, n) in zip_ranges(
                    &zip_ranges(&ra, &rb)
                        .iter()
                        .map(|&(x, _, n)| (x, n))
                        .collect::<Vec<_>>(),
                    &rd,
                ) {
                    // `ab` is an offset in a's ranges; b runs alongside it.
                    let ob = along(&ra, &rb, ab);
                    out.push(Local::Combine {
                        reduction,
                        a: (pa.buf, ab),
                        b: (pb.buf, ob),
                        dst: (pd.buf, od),
                        len: n,
                    });
                }
            }
        }
        Ok(out)
    }

    /// The plan of `rank`, every round built.
    fn compose(&self, rank: usize) -> Result<(Vec<Local>, Vec<Round>), PlanError> {
        let mut setup = Vec::new();
        let mut rounds: BTreeMap<u32, Round> = BTreeMap::new();
        let mut held = Held::default();
        let mut last: Option<u32> = None;
        for (k, phase) in self.phases.iter().enumerate() {
            let (offset, end) = (self.offsets[k], self.offsets[k + 1]);
            let start = if phase.ordered { last } else { None };
            // What this phase produces is held for the next phases; within the phase, its own
            // pieces' dependencies say when their data is held.
            let mut produced: Vec<(Buf, usize, usize, u32)> = Vec::new();
            for &seat in &self.seats[k][rank] {
                let group = &phase.groups[seat.group];
                let plan = group.alg.rank_plan(seat.sub)?;
                let sub_rounds: Vec<Round> = plan.rounds.collect();

                // Setup steps run once what they read is held.
                for step in &plan.setup {
                    for local in self.map_local(k, seat, step)? {
                        let at = held.reads(&local).max(start);
                        match at {
                            None => setup.push(local),
                            Some(r) => rounds
                                .entry(r)
                                .or_insert_with(|| Round::new(r))
                                .local
                                .push(local),
                        }
                        held.writes(&local, at);
                    }
                }

                // What this rank's senders in the phase write to it, round by round.
                let mut senders: Vec<usize> = sub_rounds
                    .iter()
                    .flat_map(|r| r.expects.iter().map(|e| e.from))
                    .collect();
                senders.sort_unstable();
                senders.dedup();
                let mut arrivals: BTreeMap<u32, Vec<(usize, Piece)>> = BTreeMap::new();
                for &from_sub in &senders {
                    let from = *group
                        .members
                        .get(from_sub)
                        .ok_or(PlanError::RankOutOfRange {
                            rank: from_sub,
                            p: group.members.len(),
                        })?;
                    let from_seat = self.seat(k, from, seat.group)?;
                    for round in group.alg.rank_plan(from_sub)?.rounds {
                        for t in round.sends.iter().filter(|t| t.to == seat.sub) {
                            let index = global(offset, round.index)?;
                            for piece in
                                self.map_pieces(k, from_seat, seat, &t.pieces, |_, _, _, _| None)?
                            {
                                arrivals.entry(index).or_default().push((from, piece));
                            }
                        }
                    }
                }

                // Sends wait for the data earlier phases produced; rounds are renumbered.
                for sub in &sub_rounds {
                    let index = global(offset, sub.index)?;
                    if index >= end {
                        return Err(PlanError::Unsupported {
                            algorithm: self.name,
                            reason: format!(
                                "{} has a round beyond the {} counted for its phase",
                                group.alg.name(),
                                end - offset
                            ),
                        });
                    }
                    let out = rounds.entry(index).or_insert_with(|| Round::new(index));
                    for t in &sub.sends {
                        let to = group.members[t.to];
                        let to_seat = self.seat(k, to, seat.group)?;
                        let pieces = self.map_pieces(
                            k,
                            seat,
                            to_seat,
                            &t.pieces,
                            |piece, buf, off, len| match piece.after {
                                Some(i) => Some(offset + i),
                                None => held.range(buf, off, len).max(start),
                            },
                        )?;
                        if t.bytes() == 0 {
                            // A signal: one empty write.
                            out.signal(to);
                            if let Some(last) = out.sends.last_mut() {
                                last.pieces[0].after =
                                    t.pieces[0].after.map(|i| offset + i).or(start);
                            }
                        } else {
                            out.send(to, pieces);
                        }
                    }
                }
                // Signals of senders count as one write each.
                for sub in &sub_rounds {
                    let index = global(offset, sub.index)?;
                    let out = rounds.entry(index).or_insert_with(|| Round::new(index));
                    let counted = arrivals.get(&index);
                    for e in &sub.expects {
                        let from = group.members[e.from];
                        let pieces = counted
                            .map_or(0, |list| list.iter().filter(|(f, _)| *f == from).count());
                        // An empty transfer is a signal of one write.
                        out.expect(from, if pieces == 0 { e.writes } else { pieces });
                    }
                }
                for (&index, list) in &arrivals {
                    for (_, piece) in list {
                        produced.push((piece.dst, piece.dst_offset, piece.len, index));
                    }
                }
                for sub in &sub_rounds {
                    let index = global(offset, sub.index)?;
                    for step in &sub.local {
                        for local in self.map_local(k, seat, step)? {
                            let (buf, off, len) = local.output();
                            produced.push((buf, off, len, index));
                            rounds
                                .entry(index)
                                .or_insert_with(|| Round::new(index))
                                .local
                                .push(local);
                        }
                    }
                }
            }
            for (buf, off, len, index) in produced {
                held.put(buf, off, len, Some(index));
            }
            last = rounds.keys().next_back().copied().max(last);
        }
        let rounds = rounds
            .into_values()
            .filter(|r| !r.is_empty())
            .map(merge_expects)
            .collect();
        Ok((setup, rounds))
    }
}

/// One expectation per sender in a round (a rank in several groups of a phase may hear from
/// one sender in two of them).
fn merge_expects(mut round: Round) -> Round {
    let mut by_sender: BTreeMap<usize, usize> = BTreeMap::new();
    for e in &round.expects {
        *by_sender.entry(e.from).or_default() += e.writes;
    }
    if by_sender.len() < round.expects.len() {
        round.expects = by_sender
            .into_iter()
            .map(|(from, writes)| super::Expect { from, writes })
            .collect();
    }
    round
}

/// One past the last round index of any rank's plan of `alg`.
fn rounds_of(alg: &dyn Algorithm) -> Result<u32, PlanError> {
    let mut end = 0u32;
    for r in 0..alg.problem().p() {
        if let Some(last) = alg.rank_plan(r)?.rounds.last() {
            end = end.max(global(last.index, 1)?);
        }
    }
    Ok(end)
}

fn missing(name: &'static str, rank: usize) -> PlanError {
    PlanError::Unsupported {
        algorithm: name,
        reason: format!("rank {rank} has no place in a phase it sends in"),
    }
}

impl Algorithm for Composite {
    fn name(&self) -> &'static str {
        self.name
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        self.buffers[rank]
    }
    // Callers reach a composite's plan through `rank_plan`, which builds it once and returns
    // its error; `setup` and `rounds` alone build it again and give nothing on an error.
    fn setup(&self, rank: usize) -> Vec<Local> {
        self.compose(rank).map(|(s, _)| s).unwrap_or_default()
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        Box::new(
            self.compose(rank)
                .map(|(_, r)| r)
                .unwrap_or_default()
                .into_iter(),
        )
    }
    /// The phases one after the other (no overlap counted), each with its level's model.
    fn predict(&self, model: &CostModel) -> Prediction {
        let mut out = Prediction {
            rounds: 0,
            time: 0.0,
        };
        for phase in &self.phases {
            let level = phase.inside.as_ref().unwrap_or(model);
            let slowest = phase.groups.iter().map(|g| g.alg.predict(level)).fold(
                Prediction {
                    rounds: 0,
                    time: 0.0,
                },
                |a, b| Prediction {
                    rounds: a.rounds.max(b.rounds),
                    time: a.time.max(b.time),
                },
            );
            out.rounds += slowest.rounds;
            out.time += slowest.time;
        }
        out
    }
    fn prepare(&self) -> Result<(), PlanError> {
        for phase in &self.phases {
            for group in &phase.groups {
                group.alg.prepare()?;
            }
        }
        Ok(())
    }
    fn rank_plan(&self, rank: usize) -> Result<RankPlan<'_>, PlanError> {
        let p = self.problem.p();
        if rank >= p {
            return Err(PlanError::RankOutOfRange { rank, p });
        }
        self.prepare()?;
        let (setup, rounds) = self.compose(rank)?;
        Ok(RankPlan {
            rank,
            buffers: self.buffers[rank],
            setup,
            rounds: Box::new(rounds.into_iter()),
        })
    }
}
