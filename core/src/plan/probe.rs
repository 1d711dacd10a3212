//! The probe plan that measures LogGP's o, the cost of each further write of a message
//! ([`super::CostModel::o`]): rank 0 writes `writes` one-byte pieces to rank 1, each its own
//! write, and rank 1 answers with one write once all of them have arrived. Timed at rank 0,
//! the round trip with w writes less the one with a single write, divided by w − 1, is what
//! the w − 1 further writes cost where the sender posts them back to back and the receiver
//! completes them one by one. Ranks other than 0 and 1 take part with an empty plan.

use super::{piece, Buf, BufferSizes, RankPlan, Round};

/// The probe's plan for `rank`, with `writes` (at least 1) writes from rank 0 to rank 1.
/// The pieces land at every other byte of rank 1's receive buffer, so that no two are
/// adjacent; prepared without merging (`Transport::prepare`), each piece is one write.
pub fn ping_pong(rank: usize, writes: usize) -> RankPlan<'static> {
    let writes = writes.max(1);
    let mut rounds = Vec::new();
    let buffers = match rank {
        0 => {
            let mut first = Round::new(0);
            let pieces = (0..writes)
                .map(|i| piece(Buf::Send, i, Buf::Recv, 2 * i, 1, None))
                .collect();
            first.send(1, pieces);
            let mut answer = Round::new(1);
            answer.expect(1, 1);
            rounds.extend([first, answer]);
            BufferSizes {
                send: writes,
                recv: 1,
                scratch: 0,
            }
        }
        1 => {
            let mut first = Round::new(0);
            first.expect(0, writes);
            let mut answer = Round::new(1);
            answer.send(0, vec![piece(Buf::Send, 0, Buf::Recv, 0, 1, Some(0))]);
            rounds.extend([first, answer]);
            BufferSizes {
                send: 1,
                recv: 2 * writes,
                scratch: 0,
            }
        }
        _ => BufferSizes::default(),
    };
    RankPlan {
        rank,
        buffers,
        setup: Vec::new(),
        rounds: Box::new(rounds.into_iter()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_0_writes_separate_pieces_and_rank_1_answers_after_them() {
        let plan = ping_pong(0, 4);
        let rounds: Vec<Round> = plan.rounds.collect();
        assert_eq!(rounds[0].sends.len(), 1);
        let pieces = &rounds[0].sends[0].pieces;
        assert_eq!(pieces.len(), 4);
        assert!(pieces
            .windows(2)
            .all(|w| w[1].dst_offset > w[0].dst_offset + w[0].len));
        assert_eq!(rounds[1].expects[0].from, 1);
        assert_eq!(rounds[1].expects[0].writes, 1);

        let plan = ping_pong(1, 4);
        assert_eq!(plan.buffers.recv, 8);
        let rounds: Vec<Round> = plan.rounds.collect();
        assert_eq!(rounds[0].expects[0].writes, 4);
        assert_eq!(rounds[1].sends[0].pieces[0].after, Some(0));

        let plan = ping_pong(5, 4);
        assert_eq!(plan.rounds.count(), 0);
        assert_eq!(plan.buffers, BufferSizes::default());
    }
}
