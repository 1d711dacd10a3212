//! Dataflow pricing of plans on a layout of ranks on nodes: the two-level α-β-o model.
//!
//! `Dataflow` is the one clock of the simulator's dataflow price ([`super::simulate`]) and of
//! [`price_on`], which walks every rank's plan without moving bytes. Its rules:
//!
//! - A message from `a` to `b` of `m` bytes in `w` writes costs
//!   [`LevelCosts::between`]`(layout, a, b).message_writes(m, w)`: the `inside` model between
//!   ranks of one node, the `across` model between nodes.
//! - It starts when the data it carries is held (the rounds its pieces name in `after` are
//!   complete at the sender; a round of a rank is complete when every write that reached the
//!   rank in that round has arrived and its earlier rounds are complete) and when the sender's
//!   send port and the receiver's receive port are free (1-ported ranks, as before).
//! - A message between nodes also needs the sender node's outgoing link and the receiver
//!   node's incoming link for its β·m part, which follows its α + (w − 1)·o part. Each node
//!   link is a port that serialises the β parts of the messages that cross it: two ranks of a
//!   node sending m bytes each to other nodes at once finish after 2β·m, not β·m. This is the
//!   simplest rule that is right for large messages: the link is busy exactly β × the bytes it
//!   carries, as with a rate shared by the messages using it, and the last of a burst of
//!   messages finishes when it would with fair sharing. It is off for single messages of a
//!   burst (the first finishes earlier than with sharing, the later ones wait whole), and a
//!   small message waits for a large one's whole β part. Messages without bytes (signals) do
//!   not use the links.
//! - Ports are free from the end of the last message that used them, in the order of the walk
//!   (round index by round index, ranks in order within a round): no message is placed into an
//!   earlier gap of a port.
//!
//! On one node (or with messages that never meet on a link) and with
//! [`LevelCosts::flat`]`(model)` the price is the simulator's dataflow price for `model`.

use std::borrow::Cow;
use std::iter::Peekable;

use super::links::NodeLinks;
use crate::plan::{Algorithm, Layout, LevelCosts, PlanError, Round};

/// The rounds of one rank, with a look at the next one.
pub(super) type Rounds<'a> = Peekable<Box<dyn Iterator<Item = Round> + Send + 'a>>;

/// The index of the next round any rank has, or `Err(index)` when it does not come after
/// `last` (round indices must increase).
pub(super) fn next_index(
    iters: &mut [Rounds<'_>],
    last: &mut Option<u32>,
) -> Result<Option<u32>, u32> {
    let next = iters
        .iter_mut()
        .filter_map(|it| it.peek().map(|r| r.index))
        .min();
    let Some(index) = next else { return Ok(None) };
    if last.is_some_and(|l| index <= l) {
        return Err(index);
    }
    *last = Some(index);
    Ok(Some(index))
}

/// The dataflow clock of one run: when each rank's rounds complete, when each port is free.
pub(super) struct Dataflow<'l> {
    layout: Cow<'l, Layout>,
    costs: LevelCosts,
    /// Per rank, (round, completion time) of the rounds with arrivals or local steps.
    done: Vec<Vec<(u32, f64)>>,
    send_free: Vec<f64>,
    recv_free: Vec<f64>,
    /// Per node, when its outgoing and incoming links are free.
    out_free: Vec<f64>,
    in_free: Vec<f64>,
    /// Per rank, the latest arrival of the current round; `touched` lists the ranks set.
    arrived: Vec<f64>,
    touched: Vec<usize>,
    time: f64,
}

impl<'l> Dataflow<'l> {
    /// A clock at 0 for the ranks of `layout`.
    pub(super) fn new(layout: Cow<'l, Layout>, costs: LevelCosts) -> Self {
        let (p, nodes) = (layout.p(), layout.nodes());
        Dataflow {
            layout,
            costs,
            done: vec![Vec::new(); p],
            send_free: vec![0.0; p],
            recv_free: vec![0.0; p],
            out_free: vec![0.0; nodes],
            in_free: vec![0.0; nodes],
            arrived: vec![0.0; p],
            touched: Vec::new(),
            time: 0.0,
        }
    }

    /// When the data of `rank` named by `after` is held (0 for data held from the start).
    fn ready_at(&self, rank: usize, after: Option<u32>) -> f64 {
        let Some(a) = after else { return 0.0 };
        let done = &self.done[rank];
        match done.partition_point(|&(r, _)| r <= a) {
            0 => 0.0,
            i => done[i - 1].1,
        }
    }

    /// Prices one message (ranks of the layout) and returns its arrival.
    pub(super) fn message(
        &mut self,
        from: usize,
        to: usize,
        dep: Option<u32>,
        bytes: usize,
        writes: usize,
    ) -> f64 {
        let start = self
            .ready_at(from, dep)
            .max(self.send_free[from])
            .max(self.recv_free[to]);
        let model = *self.costs.between(&self.layout, from, to);
        let (nf, nt) = (self.layout.node_of(from), self.layout.node_of(to));
        let end = if nf == nt || bytes == 0 {
            start + model.message_writes(bytes, writes)
        } else {
            // α + (w − 1)·o first, then the bytes on both links.
            let wire = model.beta * bytes as f64;
            let on = (start + model.message_writes(0, writes))
                .max(self.out_free[nf])
                .max(self.in_free[nt]);
            self.out_free[nf] = on + wire;
            self.in_free[nt] = on + wire;
            on + wire
        };
        self.send_free[from] = end;
        self.recv_free[to] = end;
        self.time = self.time.max(end);
        if self.arrived[to] == 0.0 {
            self.touched.push(to);
        }
        self.arrived[to] = self.arrived[to].max(end);
        end
    }

    /// Marks round `index` of `rank` complete: once its arrivals of this round are in and its
    /// earlier rounds are complete.
    pub(super) fn complete(&mut self, rank: usize, index: u32) {
        let prev = self.done[rank].last().map_or(0.0, |d| d.1);
        let t = prev.max(self.arrived[rank]);
        self.done[rank].push((index, t));
    }

    /// Forgets the arrivals of the round just priced.
    pub(super) fn end_round(&mut self) {
        for r in self.touched.drain(..) {
            self.arrived[r] = 0.0;
        }
    }

    /// The latest arrival so far.
    pub(super) fn time(&self) -> f64 {
        self.time
    }
}

/// An algorithm priced on a layout by [`price_on`].
#[derive(Clone, Debug, PartialEq)]
pub struct Priced {
    /// Dataflow time in seconds: the last arrival.
    pub time: f64,
    /// Round indices in which at least one message is sent.
    pub rounds: u32,
    /// The bytes crossing each node's link, and those between ranks of one node.
    pub links: NodeLinks,
}

impl Priced {
    /// The most bytes any one node link carries in one direction.
    pub fn busiest_link_bytes(&self) -> u64 {
        self.links.busiest()
    }

    /// The bytes sent between ranks of one node.
    pub fn inside_bytes(&self) -> u64 {
        self.links.inside
    }
}

/// What the clock needs of one transfer of a plan.
#[derive(Clone, Copy, Debug)]
struct Msg {
    to: u32,
    dep: Option<u32>,
    writes: u32,
    bytes: u64,
}

/// One round of one rank's plan, reduced to what the clock needs; its messages are those of
/// [`Walk::msgs`] from the previous step's `end` to its own.
#[derive(Clone, Copy, Debug)]
struct Step {
    index: u32,
    /// Whether the round has expectations or local steps (it then completes on this rank).
    completes: bool,
    end: usize,
}

/// Every rank's plan reduced to steps and messages, built one rank at a time: each rank's
/// plan is dropped once read, so memory holds 24 bytes a message rather than whole rounds.
struct Walk {
    steps: Vec<Step>,
    msgs: Vec<Msg>,
    /// Per rank, its first step; one more entry closes the last rank.
    first: Vec<usize>,
}

fn out_of_order(alg: &dyn Algorithm, index: u32) -> PlanError {
    PlanError::Unsupported {
        algorithm: alg.name(),
        reason: format!("round {index} comes after a later one"),
    }
}

impl Walk {
    fn read(alg: &dyn Algorithm, p: usize) -> Result<Walk, PlanError> {
        let mut walk = Walk {
            steps: Vec::new(),
            msgs: Vec::new(),
            first: Vec::with_capacity(p + 1),
        };
        for rank in 0..p {
            walk.first.push(walk.steps.len());
            let mut last: Option<u32> = None;
            for round in alg.rank_plan(rank)?.rounds {
                if last.is_some_and(|l| round.index <= l) {
                    return Err(out_of_order(alg, round.index));
                }
                last = Some(round.index);
                for t in &round.sends {
                    if t.to >= p {
                        return Err(PlanError::RankOutOfRange { rank: t.to, p });
                    }
                    walk.msgs.push(Msg {
                        to: u32::try_from(t.to).map_err(|_| PlanError::Overflow)?,
                        dep: t.pieces.iter().map(|pc| pc.after).max().flatten(),
                        writes: u32::try_from(t.pieces.len()).map_err(|_| PlanError::Overflow)?,
                        bytes: t.bytes() as u64,
                    });
                }
                walk.steps.push(Step {
                    index: round.index,
                    completes: !round.expects.is_empty() || !round.local.is_empty(),
                    end: walk.msgs.len(),
                });
            }
        }
        walk.first.push(walk.steps.len());
        Ok(walk)
    }

    /// The messages of step `i`.
    fn msgs_of(&self, i: usize) -> &[Msg] {
        let from = if i == 0 { 0 } else { self.steps[i - 1].end };
        &self.msgs[from..self.steps[i].end]
    }
}

/// Prices `alg` on `layout` by dataflow in the two-level α-β-o model of `costs` (module
/// documentation): every rank's plan is read once, one rank at a time, into the messages and
/// round completions the clock needs, then all ranks are walked in lock step, round index by
/// round index, ranks in order within a round; no bytes are moved and nothing is checked
/// beyond the ranks the plans name. Each piece counts as one write. Errors when the layout has
/// another number of ranks than the problem, a plan cannot be built, names a rank out of
/// range, or its round indices do not increase.
pub fn price_on(
    alg: &dyn Algorithm,
    layout: &Layout,
    costs: &LevelCosts,
) -> Result<Priced, PlanError> {
    let problem = alg.problem();
    problem.validate()?;
    let p = problem.p();
    if layout.p() != p {
        return Err(PlanError::CountsLength {
            expected: p,
            got: layout.p(),
        });
    }
    let walk = Walk::read(alg, p)?;
    let mut flow = Dataflow::new(Cow::Borrowed(layout), *costs);
    let mut links = NodeLinks::new(layout.nodes());
    let mut rounds = 0u32;
    // Every step as (round index, rank), in the walk's order: by index, ranks in order within
    // an index (sorting once costs less than looking at every rank for every index: a
    // scatter-allgather of 8 bytes has p indices with a step on a few ranks each).
    let mut order: Vec<(u32, u32)> = Vec::with_capacity(walk.steps.len());
    for r in 0..p {
        let rank = u32::try_from(r).map_err(|_| PlanError::Overflow)?;
        order.extend(
            walk.steps[walk.first[r]..walk.first[r + 1]]
                .iter()
                .map(|s| (s.index, rank)),
        );
    }
    order.sort_unstable();
    // Per rank, its next step.
    let mut next: Vec<usize> = walk.first[..p].to_vec();
    let mut at = 0;
    while at < order.len() {
        let index = order[at].0;
        let end = at + order[at..].partition_point(|s| s.0 == index);
        let group = &order[at..end];
        at = end;
        let mut any = false;
        for &(_, r) in group {
            let r = r as usize;
            for m in walk.msgs_of(next[r]) {
                let to = m.to as usize;
                flow.message(r, to, m.dep, m.bytes as usize, m.writes as usize);
                links.add(layout.node_of(r), layout.node_of(to), m.bytes);
                any = true;
            }
        }
        if any {
            rounds += 1;
        }
        for &(_, r) in group {
            let r = r as usize;
            if walk.steps[next[r]].completes {
                flow.complete(r, index);
            }
            next[r] += 1;
        }
        flow.end_round();
    }
    Ok(Priced {
        time: flow.time(),
        rounds,
        links,
    })
}

/// Whether walking `alg`'s plans on `layout` (what [`price_on`] does) reads at most `budget`
/// rounds and pieces in all, estimated from the plans of two nodes' ranks (the first node's
/// and the last's): per node, its ranks' rounds and pieces scaled from its ranks to all p, the
/// larger of the two. On a layout whose nodes run alike (blocks of equal nodes: every node
/// has one leader and the same share of the work) the estimate is the walk's own count up to
/// the ranks that differ; it stops reading as soon as one node's part alone is over budget, so
/// a plan far too large to walk costs little to refuse.
pub fn walk_within(alg: &dyn Algorithm, layout: &Layout, budget: u64) -> Result<bool, PlanError> {
    let p = layout.p() as u64;
    let nodes = layout.nodes();
    let probed: &[usize] = if nodes > 1 { &[0, nodes - 1] } else { &[0] };
    for &v in probed {
        let ranks = layout.ranks_on(v);
        let share = ranks.len().max(1) as u64;
        let mut work = 0u64;
        for &rank in ranks {
            for round in alg.rank_plan(rank)?.rounds {
                let pieces: usize = round.sends.iter().map(|t| t.pieces.len()).sum();
                work = work.saturating_add(1 + pieces as u64);
                // work × p / share > budget, without overflow.
                if u128::from(work) * u128::from(p) > u128::from(budget) * u128::from(share) {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::distribution::Distribution;
    use crate::plan::{registry, CostModel, Dtype, Problem, ReduceOp, Reduction};
    use crate::sim::links::node_links;
    use crate::sim::simulate;

    const INSIDE: CostModel = CostModel {
        alpha: 1.0,
        beta: 0.001,
        o: 0.0,
    };
    const ACROSS: CostModel = CostModel {
        alpha: 10.0,
        beta: 0.01,
        o: 0.0,
    };
    const COSTS: LevelCosts = LevelCosts {
        inside: INSIDE,
        across: ACROSS,
    };

    fn algorithm(name: &str, problem: &Problem) -> Box<dyn Algorithm> {
        registry::by_name(name, problem, &INSIDE).expect("the algorithm applies")
    }

    fn problems() -> Vec<Problem> {
        let reduction = Reduction::new(Dtype::I32, ReduceOp::Sum).expect("defined");
        let mut out = Vec::new();
        for p in [2, 3, 5, 8, 12] {
            out.push(Problem::Broadcast {
                p,
                root: p / 2,
                bytes: 10_000,
            });
            out.push(Problem::Allgather { p, block: 1000 });
            out.push(Problem::Allgatherv {
                counts: Distribution::Spike.counts(p, 500),
            });
            out.push(Problem::Allreduce {
                p,
                reduction,
                bytes: 4000,
            });
            out.push(Problem::Reduce {
                p,
                root: 1,
                reduction,
                bytes: 4000,
            });
            out.push(Problem::Barrier { p });
        }
        out
    }

    #[test]
    fn one_node_with_one_model_is_the_simulators_dataflow_price() {
        let model = CostModel {
            alpha: 2e-6,
            beta: 1e-10,
            o: 3e-7,
        };
        for problem in problems() {
            let one = Layout::one_node(problem.p()).expect("ranks");
            for alg in registry::applicable(&problem, &model).expect("valid") {
                let report = simulate(alg.as_ref(), &model).expect("a correct plan");
                let priced =
                    price_on(alg.as_ref(), &one, &LevelCosts::flat(model)).expect("priced");
                assert_eq!(priced.time, report.dataflow_time, "{}", alg.name());
                assert_eq!(priced.rounds, report.rounds, "{}", alg.name());
                assert_eq!(priced.busiest_link_bytes(), 0);
                let sent: u64 = report.bytes_sent.iter().sum();
                assert_eq!(priced.inside_bytes(), sent, "{}", alg.name());
            }
        }
    }

    #[test]
    fn a_ring_on_two_nodes_by_blocks_and_round_robin() {
        // 2 nodes × 2 ranks, blocks of 1000 bytes: a message inside a node takes
        // 1 + 0.001·1000 = 2, across 10 + 0.01·1000 = 20.
        let problem = Problem::Allgather { p: 4, block: 1000 };
        let ring = algorithm("ring-allgather", &problem);
        // By blocks only 1 → 2 and 3 → 0 cross, one message per link and round; ranks 1 and 3
        // send across in every round and their send ports are busy 20 each time: 3 × 20 = 60
        // (the ranks inside wait for them, as they forward what came across).
        let blocks =
            price_on(ring.as_ref(), &Layout::blocks(2, 2).expect("ranks"), &COSTS).expect("priced");
        assert_eq!(blocks.time, 60.0);
        assert_eq!(blocks.rounds, 3);
        assert_eq!(blocks.busiest_link_bytes(), 3000);
        assert_eq!(blocks.inside_bytes(), 6000);
        // Round robin: every edge crosses, and two ranks of a node share its outgoing link.
        // Round 0: 0 → 1 and 1 → 2 hold the links from 10 to 20, 2 → 3 and 3 → 0 wait for them
        // and end at 30. Round 1: 1 → 2 from 20 (link 30–40), 3 → 0 from 30 (link 40–50), 0 → 1
        // from 30 (link 40–50), 2 → 3 from 30 waits for 0 → 1 on node 0's link: 50–60.
        // Round 2: 0 → 1 and 1 → 2 from 50 (links 60–70), 2 → 3 and 3 → 0 from 60 (links
        // 70–80): 80.
        let scattered = price_on(
            ring.as_ref(),
            &Layout::round_robin(2, 2).expect("ranks"),
            &COSTS,
        )
        .expect("priced");
        assert_eq!(scattered.time, 80.0);
        assert_eq!(scattered.busiest_link_bytes(), 6000);
        assert_eq!(scattered.inside_bytes(), 0);
    }

    #[test]
    fn ranks_of_a_node_share_its_link() {
        // A binomial broadcast of 8 ranks from 0, ranks placed round robin on 2 nodes: it
        // sends 0 → 4, then 0 → 2 and 4 → 6 inside node 0, then 0 → 1, 2 → 3, 4 → 5, 6 → 7 at
        // once, all across node 0's link.
        let bytes = 1000;
        let problem = Problem::Broadcast {
            p: 8,
            root: 0,
            bytes,
        };
        let tree = algorithm("binomial-bcast", &problem);
        let layout = Layout::round_robin(2, 4).expect("ranks");
        let wire = ACROSS.beta * bytes as f64;
        let free = LevelCosts {
            inside: INSIDE,
            across: CostModel {
                beta: 0.0,
                ..ACROSS
            },
        };
        let shared = price_on(tree.as_ref(), &layout, &COSTS)
            .expect("priced")
            .time;
        let unshared = price_on(tree.as_ref(), &layout, &free)
            .expect("priced")
            .time;
        // Without link time the four take α each in parallel; with it they pass the link one
        // after another: the last ends 4 wire times later.
        assert_eq!(shared - unshared, 4.0 * wire);
    }

    #[test]
    fn the_busiest_link_is_what_node_links_counts() {
        let counts = Distribution::Spike.counts(6, 700);
        let problem = Problem::Allgatherv { counts };
        for layout in [
            Layout::blocks(2, 3).expect("ranks"),
            Layout::round_robin(3, 2).expect("ranks"),
            Layout::new(&[0, 0, 0, 0, 1, 2]).expect("ranks"),
        ] {
            for alg in registry::applicable(&problem, &INSIDE).expect("valid") {
                let priced = price_on(alg.as_ref(), &layout, &COSTS).expect("priced");
                let counted = node_links(alg.as_ref(), layout.node_of_each()).expect("counted");
                assert_eq!(priced.links, counted, "{}", alg.name());
                assert!(priced.busiest_link_bytes() > 0, "{}", alg.name());
            }
        }
    }

    /// The walk `price_on` made before it read each rank's plan once: every rank's lazy plan
    /// kept open and walked in lock step. The reference the one-pass walk must equal.
    fn lockstep(alg: &dyn Algorithm, layout: &Layout, costs: &LevelCosts) -> Priced {
        let p = alg.problem().p();
        let mut iters = (0..p)
            .map(|r| alg.rank_plan(r).map(|plan| plan.rounds.peekable()))
            .collect::<Result<Vec<Rounds<'_>>, PlanError>>()
            .expect("plans");
        let mut flow = Dataflow::new(Cow::Borrowed(layout), *costs);
        let mut links = NodeLinks::new(layout.nodes());
        let mut rounds = 0u32;
        let mut last = None;
        while let Some(index) = next_index(&mut iters, &mut last).expect("increasing") {
            let current: Vec<(usize, Round)> = iters
                .iter_mut()
                .enumerate()
                .filter_map(|(r, it)| it.next_if(|x| x.index == index).map(|x| (r, x)))
                .collect();
            let mut any = false;
            for (r, round) in &current {
                for t in &round.sends {
                    let dep = t.pieces.iter().map(|pc| pc.after).max().flatten();
                    flow.message(*r, t.to, dep, t.bytes(), t.pieces.len());
                    links.add(layout.node_of(*r), layout.node_of(t.to), t.bytes() as u64);
                    any = true;
                }
            }
            rounds += u32::from(any);
            for (r, round) in &current {
                if !round.expects.is_empty() || !round.local.is_empty() {
                    flow.complete(*r, index);
                }
            }
            flow.end_round();
        }
        Priced {
            time: flow.time(),
            rounds,
            links,
        }
    }

    /// Layouts of `nodes` × `per` ranks: blocks, round robin, and one with a node of one rank.
    fn layouts(nodes: usize, per: usize) -> Vec<Layout> {
        let mut uneven: Vec<usize> = (0..nodes * per).map(|r| r / per).collect();
        if let Some(last) = uneven.last_mut() {
            *last = nodes;
        }
        vec![
            Layout::blocks(nodes, per).expect("ranks"),
            Layout::round_robin(nodes, per).expect("ranks"),
            Layout::new(&uneven).expect("ranks"),
        ]
    }

    fn assert_same(alg: &dyn Algorithm, layout: &Layout, costs: &LevelCosts) {
        let fast = price_on(alg, layout, costs).expect("priced");
        let reference = lockstep(alg, layout, costs);
        assert_eq!(
            fast,
            reference,
            "{} on {} nodes",
            alg.name(),
            layout.nodes()
        );
    }

    #[test]
    fn the_one_pass_walk_is_the_lock_step_walk() {
        for problem in problems() {
            let p = problem.p();
            for nodes in (2..=p).filter(|n| p % n == 0) {
                for layout in layouts(nodes, p / nodes) {
                    for alg in registry::applicable_on(&problem, &layout, &COSTS).expect("valid") {
                        assert_same(alg.as_ref(), &layout, &COSTS);
                    }
                }
            }
        }
    }

    #[test]
    fn the_one_pass_walk_is_the_lock_step_walk_up_to_2048_ranks() {
        // The figures of docs/performance.md: 64 ranks a node, up to 32 nodes; inside α = 0.3
        // µs, β = 0.1 ns/B; across α = 1.5 µs, β = 0.08 ns/B.
        let costs = LevelCosts {
            inside: CostModel {
                alpha: 3e-7,
                beta: 1e-10,
                o: 1e-7,
            },
            across: CostModel {
                alpha: 1.5e-6,
                beta: 8e-11,
                o: 3e-7,
            },
        };
        // Every layout at 256 and 384 ranks; at 2048 (32 × 64) by blocks, and the broadcasts
        // round robin too (the allgathervs of 2048 ranks take seconds a walk).
        for (nodes, per) in [(4, 64), (48, 8), (32, 64)] {
            let p = nodes * per;
            let problems = [
                Problem::Broadcast {
                    p,
                    root: 0,
                    bytes: 1_000_000,
                },
                Problem::Broadcast {
                    p,
                    root: p - 3,
                    bytes: 65_536,
                },
                Problem::Allgatherv {
                    counts: Distribution::Regular.counts(p, 1024),
                },
            ];
            for problem in problems {
                let all = layouts(nodes, per);
                let used = match (p, &problem) {
                    (2048, Problem::Allgatherv { .. }) => &all[..1],
                    (2048, _) => &all[..2],
                    _ => &all[..],
                };
                for layout in used {
                    for alg in registry::applicable_on(&problem, layout, &costs).expect("valid") {
                        // Rings and round robin have p rounds a rank: p² rank-rounds.
                        if alg.predict(&costs.across).rounds > 300 {
                            continue;
                        }
                        assert_same(alg.as_ref(), layout, &costs);
                    }
                }
            }
        }
    }

    #[test]
    fn walk_within_counts_rounds_and_pieces_of_two_nodes() {
        // A ring allgather of 4 nodes × 2 ranks by blocks: every rank sends one piece in each
        // of 7 rounds, 14 a rank, 112 in all; both probed nodes say so exactly.
        let problem = Problem::Allgather { p: 8, block: 10 };
        let ring = algorithm("ring-allgather", &problem);
        let layout = Layout::blocks(4, 2).expect("ranks");
        assert!(walk_within(ring.as_ref(), &layout, 112).expect("read"));
        assert!(!walk_within(ring.as_ref(), &layout, 111).expect("read"));
        // A ring of 1024 nodes × 64 ranks is refused after part of one rank's plan.
        let big = Problem::Allgather { p: 65536, block: 1 };
        let ring = algorithm("ring-allgather", &big);
        let layout = Layout::blocks(1024, 64).expect("ranks");
        assert!(!walk_within(ring.as_ref(), &layout, 1 << 26).expect("read"));
    }

    #[test]
    fn a_layout_of_another_size_is_refused() {
        let problem = Problem::Barrier { p: 4 };
        let barrier = algorithm("dissemination-barrier", &problem);
        let wrong = Layout::blocks(2, 3).expect("ranks");
        assert_eq!(
            price_on(barrier.as_ref(), &wrong, &COSTS),
            Err(PlanError::CountsLength {
                expected: 4,
                got: 6
            })
        );
    }
}
