//! The run state fed events as a completion queue would report them, without a fabric.

use super::*;
use crate::plan::{piece, Buf, RankPlan, Round};
use crate::transport::Limits;

const SIZE: usize = 3;
const DIGEST: u64 = 0xd1;
/// Operations a data write's sequence number tells apart.
const SEQ_SPACE: u64 = 1 << wire::SEQ_BITS;
const ABORT_SPACE: u64 = 1 << wire::ABORT_SEQ_BITS;

fn prepare(buffers: crate::plan::BufferSizes, rounds: Vec<Round>) -> Prepared {
    let plan = RankPlan {
        rank: 0,
        buffers,
        setup: Vec::new(),
        rounds: Box::new(rounds.into_iter()),
    };
    Prepared::new("test", plan, SIZE, Limits { max_msg_size: 0 }).expect("a valid plan")
}

/// Rank 0 of 3, receiving data:
/// round 0: 8 bytes to rank 1 (held from the start); 1 write from rank 2;
/// round 1: 8 bytes to rank 1 (held after round 0), 8 to rank 2; 2 writes from rank 2;
/// round 2: 8 bytes to rank 1 (held from the start, but behind round 1's in plan order).
fn data_plan() -> Prepared {
    let bytes = |src, after| vec![piece(Buf::Send, src, Buf::Recv, 0, 8, after)];
    let mut r0 = Round::new(0);
    r0.send(1, bytes(0, None));
    r0.expect(2, 1);
    let mut r1 = Round::new(1);
    r1.send(1, bytes(8, Some(0)));
    r1.send(2, bytes(0, None));
    r1.expect(2, 2);
    let mut r2 = Round::new(2);
    r2.send(1, bytes(8, None));
    let buffers = crate::plan::BufferSizes {
        send: 16,
        recv: 16,
        scratch: 0,
    };
    prepare(buffers, vec![r0, r1, r2])
}

/// Rank 0 of 3 in a barrier-like plan: a signal to rank 1, one signal from rank 2.
fn signal_plan() -> Prepared {
    let mut r0 = Round::new(0);
    r0.signal(1);
    r0.expect(2, 1);
    prepare(crate::plan::BufferSizes::default(), vec![r0])
}

fn run_at(seq: u64, plan: &Prepared) -> Run {
    Run::for_test(seq, DIGEST, plan, SIZE)
}

fn data(seq: u64, round: u32) -> Incoming {
    Incoming::Data {
        seq: wire_seq(seq),
        round,
        signal: false,
    }
}

fn signal(seq: u64, round: u32) -> Incoming {
    Incoming::Data {
        seq: wire_seq(seq),
        round,
        signal: true,
    }
}

fn token(from: usize, seq: u64, digest: u64) -> Incoming {
    let region = RemoteRegion {
        base: 4096,
        len: 16,
        key: 9,
    };
    Incoming::Token {
        from,
        token: Some(Token {
            seq,
            digest,
            recv: region,
            scratch: region,
            slots: SlotRing::NONE,
        }),
    }
}

fn abort(from: usize, seq: u64) -> Incoming {
    Incoming::Abort {
        from,
        seq: wire::abort_seq(seq),
    }
}

fn complete(run: &mut Run) -> bool {
    run.complete_rounds(&BufferViews::default())
        .expect("rounds without local steps")
}

/// The transfers one scan finds ready, each posted whole: (target, round).
fn post_all_ready(run: &mut Run, inbox: &mut Inbox) -> Vec<(usize, u32)> {
    run.start_scan();
    let mut posted = Vec::new();
    while let Some(ready) = run.next_ready(inbox, |_| false).expect("a ready transfer") {
        let writes = run.plan_writes();
        while let Some((index, _)) = run.next_write() {
            run.write_posted(writes[index].bytes());
        }
        run.transfer_posted();
        posted.push((ready.to, ready.round));
    }
    posted
}

#[test]
fn rounds_complete_in_order_once_their_writes_are_in() {
    let plan = data_plan();
    let mut inbox = Inbox::new(SIZE);
    let mut run = run_at(5, &plan);
    run.on_event(&mut inbox, data(5, 1)).unwrap();
    run.on_event(&mut inbox, data(5, 1)).unwrap();
    // Round 1 is in, but round 0 is not.
    assert!(!complete(&mut run));
    assert_eq!(run.next, 0);
    assert!(run
        .awaited(&inbox)
        .contains("1 of 1 writes in round 0 from rank(s) 2"));
    run.on_event(&mut inbox, data(5, 0)).unwrap();
    assert!(complete(&mut run));
    // Round 2 expects nothing, so it completes with round 1.
    assert_eq!(run.next, 3);
    assert_eq!(run.stats.arrivals, 3);
    assert!(!run.done(), "nothing is posted yet");
}

#[test]
fn a_write_for_a_round_without_writes_is_refused() {
    let plan = data_plan();
    let mut inbox = Inbox::new(SIZE);
    let mut run = run_at(0, &plan);
    let err = run.on_event(&mut inbox, data(0, 2)).unwrap_err();
    assert!(matches!(err, TransportError::Protocol { .. }), "{err}");
    let err = run.on_event(&mut inbox, data(0, 7)).unwrap_err();
    assert!(err.to_string().contains("round 7"), "{err}");
}

#[test]
fn a_run_hands_its_per_rank_collections_back_cleared() {
    let plan = data_plan();
    let mut inbox = Inbox::new(SIZE);
    let mut run = run_at(3, &plan);
    assert_eq!(post_all_ready(&mut run, &mut inbox), []);
    assert_eq!(run.awaiting_token, [None, Some(0), Some(2)]);
    run.awaiting_slots[2] = Some(2);
    let spare = run.into_spare();
    for v in [&spare.last_to, &spare.awaiting_token, &spare.awaiting_slots] {
        assert_eq!(v[..], [None; SIZE]);
    }
    // The next run starts from them as from fresh ones.
    let mut next = Run::new(String::new(), 4, DIGEST, &plan, SIZE, spare);
    assert_eq!(post_all_ready(&mut next, &mut inbox), []);
    assert_eq!(next.awaiting_token, [None, Some(0), Some(2)]);
}

#[test]
fn transfers_wait_for_their_data_and_token_in_plan_order_per_target() {
    let plan = data_plan();
    let mut inbox = Inbox::new(SIZE);
    let mut run = run_at(3, &plan);
    assert_eq!(post_all_ready(&mut run, &mut inbox), []);
    assert!(run.awaited(&inbox).contains("round 0"));
    // Nothing is looked at again until a token or a round makes it ready.
    assert!(run.candidates.is_empty());
    assert_eq!(run.awaiting_token, [None, Some(0), Some(2)]);
    run.on_event(&mut inbox, token(1, 3, DIGEST)).unwrap();
    assert_eq!(run.candidates.len(), 1);
    // Round 0's write to rank 1 goes; round 1's waits for round 0, and round 2's, though
    // its data is held, stays behind it.
    assert_eq!(post_all_ready(&mut run, &mut inbox), [(1, 0)]);
    assert_eq!(run.in_flight, 1);
    assert_eq!(run.stats.writes, 1);
    assert_eq!(run.stats.bytes_written, 8);
    run.on_event(&mut inbox, data(3, 0)).unwrap();
    assert!(complete(&mut run));
    assert_eq!(post_all_ready(&mut run, &mut inbox), [(1, 1), (1, 2)]);
    // Rank 2's token has not come.
    run.on_event(&mut inbox, data(3, 1)).unwrap();
    run.on_event(&mut inbox, data(3, 1)).unwrap();
    assert!(complete(&mut run));
    assert_eq!(run.awaited(&inbox), "waiting for the ready token of rank 2");
    run.on_event(&mut inbox, token(2, 3, DIGEST)).unwrap();
    assert_eq!(run.awaited(&inbox), "posting a write to rank 2");
    assert_eq!(post_all_ready(&mut run, &mut inbox), [(2, 1)]);
    assert_eq!(run.in_flight, 4);
    for left in (0..4).rev() {
        assert!(!run.done());
        run.on_event(&mut inbox, Incoming::LocalDone).unwrap();
        assert_eq!(run.in_flight, left);
    }
    assert!(run.done());
}

#[test]
fn a_transfer_refused_half_way_resumes_at_its_next_write() {
    let mut r0 = Round::new(0);
    r0.send(
        1,
        vec![
            piece(Buf::Send, 0, Buf::Recv, 0, 4, None),
            piece(Buf::Send, 4, Buf::Recv, 4, 4, None),
        ],
    );
    let buffers = crate::plan::BufferSizes {
        send: 8,
        recv: 8,
        scratch: 0,
    };
    let plan = prepare(buffers, vec![r0]);
    let mut inbox = Inbox::new(SIZE);
    let mut run = run_at(0, &plan);
    run.on_event(&mut inbox, token(1, 0, DIGEST)).unwrap();
    run.start_scan();
    assert!(run.next_ready(&mut inbox, |_| false).unwrap().is_some());
    let writes = run.plan_writes();
    let (first, last) = run.next_write().unwrap();
    assert!(!last);
    run.write_posted(writes[first].bytes());
    // The provider refuses the second write: the next scan offers the same transfer.
    run.start_scan();
    let ready = run.next_ready(&mut inbox, |_| false).unwrap().unwrap();
    assert_eq!((ready.to, ready.round, ready.signal), (1, 0, false));
    let (second, last) = run.next_write().unwrap();
    assert!(last);
    assert_eq!(writes[second].local[0].offset, 4);
}

#[test]
fn more_is_ready_only_for_a_transfer_that_can_go_in_the_same_pass() {
    let plan = data_plan();
    let mut inbox = Inbox::new(SIZE);
    let mut run = run_at(3, &plan);
    run.on_event(&mut inbox, token(1, 3, DIGEST)).unwrap();
    run.start_scan();
    let ready = run.next_ready(&mut inbox, |_| false).unwrap().unwrap();
    assert_eq!((ready.to, ready.round), (1, 0));
    // The next transfer to rank 1 waits for round 0, the one to rank 2 (its data held)
    // for rank 2's token: nothing can follow in this pass.
    assert!(!run.more_ready(&inbox));
    run.on_event(&mut inbox, token(2, 3, DIGEST)).unwrap();
    assert!(run.more_ready(&inbox));
    run.write_posted(8);
    run.transfer_posted();
    let ready = run.next_ready(&mut inbox, |_| false).unwrap().unwrap();
    assert_eq!((ready.to, ready.round), (2, 1));
    assert!(!run.more_ready(&inbox), "rank 1's next waits for round 0");
    run.write_posted(8);
    run.transfer_posted();
    assert!(run.next_ready(&mut inbox, |_| false).unwrap().is_none());
    run.on_event(&mut inbox, data(3, 0)).unwrap();
    assert!(complete(&mut run));
    run.start_scan();
    let ready = run.next_ready(&mut inbox, |_| false).unwrap().unwrap();
    assert_eq!((ready.to, ready.round), (1, 1));
    // Round 2's transfer to rank 1 follows it (its data is held from the start).
    assert!(run.more_ready(&inbox));
}

#[test]
fn writes_and_tokens_of_the_next_operation_wait_for_it_across_the_wrap() {
    let plan = data_plan();
    let mut inbox = Inbox::new(SIZE);
    let last = SEQ_SPACE - 1;
    let mut run = run_at(last, &plan);
    // The next operation's wire sequence is 0: ahead of this one, not behind.
    run.on_event(&mut inbox, data(last + 1, 0)).unwrap();
    run.on_event(&mut inbox, data(last + 1, 1)).unwrap();
    run.on_event(&mut inbox, token(1, last + 1, DIGEST))
        .unwrap();
    assert_eq!(run.stats.arrivals, 0);
    assert_eq!(inbox.early.get(&(0, 0, false)), Some(&1));
    assert_eq!(inbox.early.get(&(0, 1, false)), Some(&1));
    assert!(inbox.has_token(1, last + 1));
    // This operation cannot use the next one's token.
    assert_eq!(post_all_ready(&mut run, &mut inbox), []);

    let mut next = run_at(last + 1, &plan);
    next.adopt_early(&mut inbox).unwrap();
    assert!(inbox.early.is_empty());
    assert_eq!(next.stats.arrivals, 2);
    assert!(complete(&mut next));
    assert_eq!(next.next, 1, "round 1 still misses a write");
    assert_eq!(
        post_all_ready(&mut next, &mut inbox),
        [(1, 0), (1, 1), (1, 2)]
    );
}

#[test]
fn a_write_of_an_operation_that_is_over_aborts_the_one_its_sender_is_in() {
    let plan = data_plan();
    for (current, late) in [
        (SEQ_SPACE, SEQ_SPACE - 1),
        (SEQ_SPACE + 2, SEQ_SPACE - 1),
        (5, 4),
    ] {
        let mut inbox = Inbox::new(SIZE);
        let mut run = run_at(current, &plan);
        let err = run.on_event(&mut inbox, data(late, 0)).unwrap_err();
        assert!(matches!(err, TransportError::Protocol { .. }), "{err}");
        assert_eq!(run.abort_seq, late, "current {current}");
        assert_eq!(run.stats.arrivals, 0);
        assert!(inbox.early.is_empty());
    }
}

#[test]
fn the_future_reaches_half_the_sequence_space() {
    let plan = data_plan();
    let half = SEQ_SPACE / 2;
    for current in [0, SEQ_SPACE - 3, 5 * SEQ_SPACE + 17] {
        let mut inbox = Inbox::new(SIZE);
        let mut run = run_at(current, &plan);
        run.on_event(&mut inbox, data(current + half - 1, 0))
            .unwrap();
        assert_eq!(
            inbox.early.get(&(wire_seq(current + half - 1), 0, false)),
            Some(&1)
        );
        // Half the space ahead is as far behind: an operation that is over.
        let err = run
            .on_event(&mut inbox, data(current + half, 0))
            .unwrap_err();
        assert!(matches!(err, TransportError::Protocol { .. }), "{err}");
        assert_eq!(run.abort_seq, current.saturating_sub(half));
    }
}

#[test]
fn more_writes_than_a_round_expects_are_an_error() {
    let plan = data_plan();
    let mut inbox = Inbox::new(SIZE);
    let mut run = run_at(1, &plan);
    run.on_event(&mut inbox, data(1, 0)).unwrap();
    let err = run.on_event(&mut inbox, data(1, 0)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "test (operation 1): protocol violation: 2 writes arrived in round 0, 1 expected"
    );
}

#[test]
fn more_early_writes_than_a_round_expects_are_an_error_when_adopted() {
    let plan = data_plan();
    let mut inbox = Inbox::new(SIZE);
    let mut run = run_at(1, &plan);
    run.on_event(&mut inbox, data(2, 0)).unwrap();
    run.on_event(&mut inbox, data(2, 0)).unwrap();
    assert_eq!(inbox.early.get(&(wire_seq(2), 0, false)), Some(&2));
    let err = run_at(2, &plan).adopt_early(&mut inbox).unwrap_err();
    assert!(err
        .to_string()
        .contains("2 writes arrived in round 0, 1 expected"));
}

#[test]
fn a_token_that_comes_twice_is_kept_once() {
    let plan = data_plan();
    let mut inbox = Inbox::new(SIZE);
    let mut run = run_at(4, &plan);
    run.on_event(&mut inbox, token(1, 4, DIGEST)).unwrap();
    run.on_event(&mut inbox, token(1, 4, DIGEST)).unwrap();
    run.on_event(&mut inbox, token(1, 5, DIGEST)).unwrap();
    assert_eq!(inbox.tokens[1].len(), 2);
    // A slot that held no well-formed token is ignored.
    run.on_event(
        &mut inbox,
        Incoming::Token {
            from: 2,
            token: None,
        },
    )
    .unwrap();
    assert!(inbox.tokens[2].is_empty());
}

#[test]
fn tokens_that_disagree_are_errors() {
    let plan = data_plan();
    let mut inbox = Inbox::new(SIZE);
    let mut run = run_at(4, &plan);
    let err = run
        .on_event(&mut inbox, token(1, 4, DIGEST + 1))
        .unwrap_err();
    assert!(
        matches!(err, TransportError::Mismatch { peer: 1, .. }),
        "{err}"
    );
    // A future token is checked by its own operation.
    run.on_event(&mut inbox, token(2, 5, DIGEST + 1)).unwrap();
    let err = run_at(5, &plan).adopt_early(&mut inbox).unwrap_err();
    assert!(
        matches!(err, TransportError::Mismatch { peer: 2, .. }),
        "{err}"
    );
    // A token of an operation that is over: its sender is still in it.
    let mut run = run_at(9, &plan);
    let err = run.on_event(&mut inbox, token(1, 7, DIGEST)).unwrap_err();
    assert!(matches!(err, TransportError::Disagree { .. }), "{err}");
    assert_eq!(run.abort_seq, 7);
    // A token from a rank this one does not write to.
    let signals = signal_plan();
    let mut run = run_at(9, &signals);
    let err = run.on_event(&mut inbox, token(1, 9, DIGEST)).unwrap_err();
    assert!(matches!(err, TransportError::Disagree { .. }), "{err}");
    // A token from a rank that does not exist.
    let err = run
        .on_event(&mut inbox, token(SIZE, 9, DIGEST))
        .unwrap_err();
    assert!(matches!(err, TransportError::Protocol { .. }), "{err}");
}

#[test]
fn aborts_of_this_past_and_future_operations() {
    let plan = data_plan();
    let mut inbox = Inbox::new(SIZE);
    let mut run = run_at(10, &plan);
    let err = run.on_event(&mut inbox, abort(2, 10)).unwrap_err();
    assert!(
        matches!(err, TransportError::AbortedBy { rank: 2, .. }),
        "{err}"
    );
    let err = run.on_event(&mut inbox, abort(1, 9)).unwrap_err();
    assert!(
        matches!(err, TransportError::AbortedEarlier { rank: 1, .. }),
        "{err}"
    );
    // A future abort waits for its operation, which then fails at its start.
    run.on_event(&mut inbox, abort(1, 12)).unwrap();
    assert_eq!(inbox.early_aborts, [(wire::abort_seq(12), 1)]);
    run_at(11, &plan).adopt_early(&mut inbox).unwrap();
    assert_eq!(inbox.early_aborts.len(), 1, "still ahead of operation 11");
    let err = run_at(12, &plan).adopt_early(&mut inbox).unwrap_err();
    assert!(
        matches!(err, TransportError::AbortedBy { rank: 1, .. }),
        "{err}"
    );
}

#[test]
fn aborts_order_across_the_wrap_of_their_shorter_sequence() {
    let plan = data_plan();
    let mut inbox = Inbox::new(SIZE);
    let last = ABORT_SPACE - 1;
    let mut run = run_at(last, &plan);
    run.on_event(&mut inbox, abort(2, last + 1)).unwrap();
    assert_eq!(inbox.early_aborts, [(0, 2)]);
    let err = run_at(last + 1, &plan).adopt_early(&mut inbox).unwrap_err();
    assert!(
        matches!(err, TransportError::AbortedBy { rank: 2, .. }),
        "{err}"
    );
    let mut run = run_at(ABORT_SPACE, &plan);
    let err = run.on_event(&mut inbox, abort(0, last)).unwrap_err();
    assert!(
        matches!(err, TransportError::AbortedEarlier { .. }),
        "{err}"
    );
}

#[test]
fn an_abort_passed_over_is_dropped() {
    let plan = data_plan();
    let mut inbox = Inbox::new(SIZE);
    run_at(1, &plan).on_event(&mut inbox, abort(2, 3)).unwrap();
    // Operation 3 was given up elsewhere before this rank came to it (its abort was for
    // operation 3, and this rank now starts operation 4): it is no longer kept.
    run_at(4, &plan).adopt_early(&mut inbox).unwrap();
    assert!(inbox.early_aborts.is_empty());
}

#[test]
fn a_signal_never_completes_a_round_that_expects_data() {
    let plan = data_plan();
    let mut inbox = Inbox::new(SIZE);
    let mut run = run_at(6, &plan);
    let err = run.on_event(&mut inbox, signal(6, 0)).unwrap_err();
    assert!(matches!(err, TransportError::Disagree { .. }), "{err}");
    assert!(
        err.to_string().contains("a signal arrived in round 0"),
        "{err}"
    );
    assert_eq!(run.stats.arrivals, 0);
    assert!(!complete(&mut run));
    assert_eq!(run.next, 0);
    // Nor when it came early.
    let mut run = run_at(5, &plan);
    run.on_event(&mut inbox, signal(6, 0)).unwrap();
    assert_eq!(inbox.early.get(&(wire_seq(6), 0, true)), Some(&1));
    let mut next = run_at(6, &plan);
    assert!(matches!(
        next.adopt_early(&mut inbox),
        Err(TransportError::Disagree { .. })
    ));
    assert_eq!(next.next, 0);
    assert_eq!(next.stats.arrivals, 0);
}

#[test]
fn signals_complete_signal_rounds_and_data_does_not() {
    let plan = signal_plan();
    let mut inbox = Inbox::new(SIZE);
    let mut run = run_at(2, &plan);
    let err = run.on_event(&mut inbox, data(2, 0)).unwrap_err();
    assert!(err.to_string().contains("data arrived in round 0"), "{err}");
    let mut run = run_at(2, &plan);
    // A signal needs no token.
    let ready = {
        run.start_scan();
        run.next_ready(&mut inbox, |_| false).unwrap()
    };
    assert_eq!(
        ready,
        Some(Ready {
            to: 1,
            round: 0,
            signal: true,
            token: None,
            eager: false,
        })
    );
    run.write_posted(0);
    run.transfer_posted();
    run.on_event(&mut inbox, signal(2, 0)).unwrap();
    assert!(complete(&mut run));
    run.on_event(&mut inbox, Incoming::LocalDone).unwrap();
    assert!(run.done());
}

/// Rank 0 of 3: round 0 writes 8 bytes to rank 1 and expects one write from rank 2; every
/// pair eager under a limit of 64 bytes if `eager`.
fn eager_plan(eager: bool) -> Prepared {
    let mut r0 = Round::new(0);
    r0.send(1, vec![piece(Buf::Send, 0, Buf::Recv, 0, 8, None)]);
    r0.expect(2, 1);
    let buffers = crate::plan::BufferSizes {
        send: 8,
        recv: 8,
        scratch: 0,
    };
    let prepared = prepare(buffers, vec![r0]);
    if eager {
        prepared.into_eager(EAGER_LIMIT)
    } else {
        prepared
    }
}

const EAGER_LIMIT: usize = 64;

fn slot_header(seq: u64, digest: u64) -> SlotHeader {
    SlotHeader {
        seq,
        digest,
        number: 0,
        round: 0,
        writes: 1,
        credit: 0,
        segments: vec![crate::transport::eager::slot::Segment {
            dst: Buf::Recv,
            offset: 0,
            len: 8,
            last: true,
        }],
    }
}

#[test]
fn an_eager_transfer_needs_known_slots_and_free_ones_not_a_token() {
    let mut inbox = Inbox::new(SIZE);
    // Slots not known yet: the transfer waits for the target's token (which names them).
    let mut run = Run::for_test(4, DIGEST, &eager_plan(true), SIZE);
    assert_eq!(run.digest(), eager::eager_digest(DIGEST, EAGER_LIMIT));
    run.start_scan();
    assert_eq!(run.next_ready(&mut inbox, |_| false).unwrap(), None);
    // Once a token named them, from the next operation on, no token.
    let knows = |to: usize| to == 1;
    let mut run = Run::for_test(5, DIGEST, &eager_plan(true), SIZE);
    run.start_scan();
    let ready = run
        .next_ready(&mut inbox, knows)
        .unwrap()
        .expect("ready without a token");
    assert!(ready.eager && ready.token.is_none() && ready.to == 1);
    let (transfer, cursor) = run.eager_transfer(&ready);
    assert_eq!((transfer.to, transfer.seq, transfer.round), (1, 5, 0));
    assert_eq!((transfer.digest, transfer.writes), (run.digest(), 1));
    assert_eq!(cursor, Cursor::default());
    // No free slot: it waits for credits, and freed slots wake it.
    run.wait_for_slots();
    assert_eq!(run.slot_waiters(), &[1]);
    run.start_scan();
    assert_eq!(run.next_ready(&mut inbox, knows).unwrap(), None);
    run.slots_freed(1);
    assert!(run.slot_waiters().is_empty());
    run.start_scan();
    let ready = run.next_ready(&mut inbox, knows).unwrap().expect("woken");
    assert!(ready.eager);
    // What went is counted: the slot's data as written and copied, its write waited for.
    let sent = Sent {
        cursor: Cursor {
            piece: 1,
            offset: 0,
        },
        slots: 1,
        bytes: 8,
        pending: 1,
    };
    run.slots_posted(&sent);
    run.transfer_posted();
    assert_eq!((run.stats.writes, run.stats.bytes_written), (1, 8));
    assert_eq!((run.stats.bytes_copied, run.in_flight), (8, 1));
    // An operation above the limit waits for the token as ever.
    let mut run = Run::for_test(6, DIGEST, &eager_plan(false), SIZE);
    assert_eq!(run.digest(), DIGEST);
    run.start_scan();
    assert_eq!(run.next_ready(&mut inbox, knows).unwrap(), None);
}

#[test]
fn slot_headers_are_checked_against_the_operation() {
    let prepared = eager_plan(true);
    let mut run = Run::for_test(7, DIGEST, &prepared, SIZE);
    let digest = run.digest();
    assert!(Receiver::accept(&mut run, 2, &slot_header(7, digest)).unwrap());
    Receiver::arrived(&mut run, &slot_header(7, digest), 8).unwrap();
    assert_eq!((run.stats.arrivals, run.stats.bytes_copied), (1, 8));
    assert!(
        run.count_slot(&slot_header(7, digest)).is_err(),
        "one write expected"
    );
    // A later operation's slot waits; an earlier one's aborts that operation.
    assert!(!run.check_slot(2, &slot_header(8, digest)).unwrap());
    let err = run.check_slot(2, &slot_header(6, digest)).unwrap_err();
    assert!(err.to_string().contains("operation 6"), "{err}");
    assert_eq!(run.abort_seq, 6);
    // Another digest (different arguments, or an operation that is not eager there).
    let mut run = Run::for_test(7, DIGEST, &prepared, SIZE);
    let err = run.check_slot(2, &slot_header(7, DIGEST)).unwrap_err();
    assert!(
        matches!(err, TransportError::Mismatch { peer: 2, .. }),
        "{err}"
    );
    // A rank this one expects nothing from.
    let err = run.check_slot(1, &slot_header(7, digest)).unwrap_err();
    assert!(matches!(err, TransportError::Disagree { .. }), "{err}");
}
