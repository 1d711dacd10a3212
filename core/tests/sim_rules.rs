//! The simulator rejects plans that break the one-sided rules or compute the wrong result.

use circulant_core::plan::merge::IovLimits;
use circulant_core::plan::{
    piece, Algorithm, Buf, BufferSizes, CostModel, Local, Prediction, Problem, Round,
};
use circulant_core::sim::{simulate, simulate_merged, SimError};

/// A hand-written plan: rounds per rank.
struct Scripted {
    problem: Problem,
    buffers: Vec<BufferSizes>,
    setup: Vec<Vec<Local>>,
    rounds: Vec<Vec<Round>>,
}

impl Algorithm for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }
    fn problem(&self) -> &Problem {
        &self.problem
    }
    fn buffers(&self, rank: usize) -> BufferSizes {
        self.buffers[rank]
    }
    fn setup(&self, rank: usize) -> Vec<Local> {
        self.setup[rank].clone()
    }
    fn rounds(&self, rank: usize) -> Box<dyn Iterator<Item = Round> + Send + '_> {
        Box::new(self.rounds[rank].clone().into_iter())
    }
    fn predict(&self, _: &CostModel) -> Prediction {
        Prediction {
            rounds: 0,
            time: 0.0,
        }
    }
}

const MODEL: CostModel = CostModel {
    alpha: 1.0,
    beta: 0.5,
    o: 0.0,
};

fn round(
    index: u32,
    sends: Vec<(usize, Vec<circulant_core::plan::Piece>)>,
    expects: Vec<(usize, usize)>,
) -> Round {
    let mut r = Round::new(index);
    for (to, pieces) in sends {
        r.send(to, pieces);
    }
    for (from, n) in expects {
        r.expect(from, n);
    }
    r
}

/// Three-rank broadcast of 4 bytes from 0: 0 → 1 in round 0, 1 → 2 in round 1.
fn chain(after: Option<u32>, second_len: usize) -> Scripted {
    let b = BufferSizes {
        send: 0,
        recv: 4,
        scratch: 0,
    };
    Scripted {
        problem: Problem::Broadcast {
            p: 3,
            root: 0,
            bytes: 4,
        },
        buffers: vec![b; 3],
        setup: vec![vec![]; 3],
        rounds: vec![
            vec![round(
                0,
                vec![(1, vec![piece(Buf::Recv, 0, Buf::Recv, 0, 4, None)])],
                vec![],
            )],
            vec![
                round(0, vec![], vec![(0, 1)]),
                round(
                    1,
                    vec![(
                        2,
                        vec![piece(Buf::Recv, 0, Buf::Recv, 0, second_len, after)],
                    )],
                    vec![],
                ),
            ],
            vec![round(1, vec![], vec![(1, 1)])],
        ],
    }
}

#[test]
fn a_correct_chain_passes_and_is_priced() {
    let r = simulate(&chain(Some(0), 4), &MODEL).unwrap();
    assert_eq!(r.rounds, 2);
    assert_eq!(r.round_time, 6.0);
    assert_eq!(r.dataflow_time, 6.0);
    assert_eq!(r.bytes_sent, vec![4, 4, 0]);
    assert_eq!(r.messages, vec![1, 1, 0]);
}

#[test]
fn sending_bytes_not_yet_held_is_refused() {
    // Rank 1 claims its data is held from the start.
    let err = simulate(&chain(None, 4), &MODEL).unwrap_err();
    assert!(
        matches!(
            err,
            SimError::Rule {
                rank: 1,
                round: 1,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_dependency_on_the_same_round_is_refused() {
    let err = simulate(&chain(Some(1), 4), &MODEL).unwrap_err();
    assert!(matches!(err, SimError::Rule { rank: 1, .. }), "{err}");
}

#[test]
fn missing_data_is_a_wrong_result() {
    let err = simulate(&chain(Some(0), 3), &MODEL).unwrap_err();
    assert!(
        matches!(
            err,
            SimError::WrongResult {
                rank: 2,
                offset: 3,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn unexpected_and_missing_writes_are_refused() {
    let mut s = chain(Some(0), 4);
    s.rounds[2] = vec![];
    assert!(matches!(
        simulate(&s, &MODEL).unwrap_err(),
        SimError::Rule { rank: 2, .. }
    ));
    let mut s = chain(Some(0), 4);
    s.rounds[2] = vec![round(1, vec![], vec![(1, 2)])];
    assert!(matches!(
        simulate(&s, &MODEL).unwrap_err(),
        SimError::Rule { rank: 2, .. }
    ));
}

#[test]
fn overwriting_with_different_data_is_refused() {
    // Rank 2 gets bytes 0..4 from rank 1 and, in the same round, bytes 1..5 of rank 0's
    // buffer shifted by one: different data on the same destination bytes.
    let mut s = chain(Some(0), 4);
    s.buffers = vec![
        BufferSizes {
            send: 0,
            recv: 4,
            scratch: 0
        };
        3
    ];
    s.rounds[0].push(round(
        1,
        vec![(2, vec![piece(Buf::Recv, 1, Buf::Recv, 0, 3, None)])],
        vec![],
    ));
    s.rounds[2] = vec![round(1, vec![], vec![(1, 1), (0, 1)])];
    let err = simulate(&s, &MODEL).unwrap_err();
    assert!(matches!(err, SimError::Rule { round: 1, .. }), "{err}");
}

#[test]
fn local_steps_must_read_held_and_write_fresh_bytes() {
    let mut s = chain(Some(0), 4);
    // Copying over bytes that already arrived.
    s.rounds[2][0].local.push(Local::Copy {
        src: Buf::Recv,
        src_offset: 0,
        dst: Buf::Recv,
        dst_offset: 0,
        len: 1,
    });
    assert!(matches!(
        simulate(&s, &MODEL).unwrap_err(),
        SimError::Rule { rank: 2, .. }
    ));
    let mut s = chain(Some(0), 4);
    s.setup[2].push(Local::Copy {
        src: Buf::Recv,
        src_offset: 0,
        dst: Buf::Recv,
        dst_offset: 1,
        len: 1,
    });
    assert!(matches!(
        simulate(&s, &MODEL).unwrap_err(),
        SimError::Rule { rank: 2, .. }
    ));
}

#[test]
fn writes_out_of_bounds_or_to_oneself_are_refused() {
    let mut s = chain(Some(0), 4);
    s.rounds[1][1] = round(
        1,
        vec![(2, vec![piece(Buf::Recv, 0, Buf::Recv, 2, 4, Some(0))])],
        vec![],
    );
    assert!(simulate(&s, &MODEL).is_err());
    let mut s = chain(Some(0), 4);
    s.rounds[1][1] = round(
        1,
        vec![(1, vec![piece(Buf::Recv, 0, Buf::Recv, 0, 4, Some(0))])],
        vec![],
    );
    assert!(simulate(&s, &MODEL).is_err());
}

#[test]
fn a_barrier_that_does_not_hear_from_everyone_fails() {
    // Ring of signals for one round only: rank r hears from r − 1, not from all.
    let p = 4;
    let mut rounds = Vec::new();
    for r in 0..p {
        let mut x = Round::new(0);
        x.signal((r + 1) % p);
        x.expect((r + p - 1) % p, 1);
        rounds.push(vec![x]);
    }
    let s = Scripted {
        problem: Problem::Barrier { p },
        buffers: vec![BufferSizes::default(); p],
        setup: vec![vec![]; p],
        rounds,
    };
    assert!(matches!(
        simulate(&s, &MODEL).unwrap_err(),
        SimError::WrongResult { .. }
    ));
}

/// Two ranks, 8 bytes from 0 to 1 in two pieces (bytes 4..8 first, then 0..4), contiguous on
/// both sides once put in order; rank 1 expects `expected` writes.
fn two_pieces(expected: usize) -> Scripted {
    let b = BufferSizes {
        send: 0,
        recv: 8,
        scratch: 0,
    };
    Scripted {
        problem: Problem::Broadcast {
            p: 2,
            root: 0,
            bytes: 8,
        },
        buffers: vec![b; 2],
        setup: vec![vec![]; 2],
        rounds: vec![
            vec![round(
                0,
                vec![(
                    1,
                    vec![
                        piece(Buf::Recv, 4, Buf::Recv, 4, 4, None),
                        piece(Buf::Recv, 0, Buf::Recv, 0, 4, None),
                    ],
                )],
                vec![],
            )],
            vec![round(0, vec![], vec![(0, expected)])],
        ],
    }
}

#[test]
fn merged_writes_are_counted_and_priced() {
    let model = CostModel { o: 0.25, ..MODEL };
    let single = simulate(&two_pieces(2), &model).unwrap();
    assert_eq!((single.writes[0], single.pieces[0]), (2, 2));
    // α + o + 8β.
    assert_eq!(single.round_time, 1.0 + 0.25 + 4.0);
    let merged = simulate_merged(&two_pieces(2), &model, IovLimits::SINGLE).unwrap();
    assert_eq!((merged.writes[0], merged.pieces[0]), (1, 2));
    assert_eq!(merged.round_time, 1.0 + 4.0);
    assert_eq!(merged.dataflow_time, 5.0);
}

#[test]
fn a_target_expecting_other_pieces_than_its_source_sends_is_refused() {
    // Rank 1 expects one piece, rank 0's plan sends two: the target cannot count its writes.
    let err = simulate_merged(&two_pieces(1), &MODEL, IovLimits::SINGLE).unwrap_err();
    assert!(
        matches!(err, SimError::Rule { rank: 1, round: 0, ref what } if what.contains("expects 1 pieces")),
        "{err}"
    );
    assert!(simulate(&two_pieces(1), &MODEL).is_err());
}
