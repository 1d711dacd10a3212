//! The [`Call`] of each collective from its arguments and the lengths of its buffers, with
//! this rank's checks of them: one description whether the call is started once (the
//! blocking and `i*` forms) or kept by a persistent request (Rust's `*_init`, the C API's).

use crate::plan::{Problem, Reduction};

use super::call::{Call, Choice};
use super::communicator::Communicator;
use super::error::Result;
use super::error::{argument, expect_len};

/// The lengths of a call's send and receive buffers in bytes (0 where there is none).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lengths {
    pub send: usize,
    pub recv: usize,
}

impl Communicator {
    pub(crate) fn barrier_call<'c>(&self, choice: Choice<'c>) -> Call<'c> {
        Call::new("barrier", Problem::Barrier { p: self.size() }, choice)
    }

    /// A broadcast of `bytes` from `root`.
    pub(crate) fn bcast_call<'c>(&self, bytes: usize, root: usize, choice: Choice<'c>) -> Call<'c> {
        let problem = Problem::Broadcast {
            p: self.size(),
            root,
            bytes,
        };
        // The root's buffer is input, and the call leaves it as it is.
        let is_root = self.rank() == root;
        Call::new("bcast", problem, choice)
            .copy_in(is_root)
            .unchanged(is_root)
    }

    pub(crate) fn allgather_call<'c>(&self, len: Lengths, choice: Choice<'c>) -> Call<'c> {
        let (p, block) = (self.size(), len.send);
        let checked = expect_len("allgather", "recv", len.recv, p.checked_mul(block));
        let problem = Problem::Allgather { p, block };
        Call::new("allgather", problem, choice).checked(checked)
    }

    /// An allgather in place in a receive buffer of `recv_len` bytes.
    pub(crate) fn allgather_in_place_call<'c>(
        &self,
        recv_len: usize,
        choice: Choice<'c>,
    ) -> Call<'c> {
        let p = self.size();
        let checked = equal_blocks("allgather", "recv", recv_len, p);
        let block = recv_len / p;
        let problem = Problem::Allgather { p, block };
        let mine = (self.rank() * block, block);
        Call::new("allgather", problem, choice)
            .in_place(mine)
            .checked(checked)
    }

    pub(crate) fn allgatherv_call<'c>(
        &self,
        len: Lengths,
        counts: &[usize],
        choice: Choice<'c>,
    ) -> Call<'c> {
        let op = "allgatherv";
        let checked = self
            .check_counts(op, counts, len.recv)
            .and_then(|()| expect_len(op, "send", len.send, self.own(counts)));
        let problem = Problem::Allgatherv {
            counts: counts.to_vec(),
        };
        Call::new(op, problem, choice).checked(checked)
    }

    /// An allgatherv in place in a receive buffer of `recv_len` bytes.
    pub(crate) fn allgatherv_in_place_call<'c>(
        &self,
        recv_len: usize,
        counts: &[usize],
        choice: Choice<'c>,
    ) -> Call<'c> {
        let op = "allgatherv";
        let checked = self.check_counts(op, counts, recv_len);
        let mine = self.own_part(counts);
        let problem = Problem::Allgatherv {
            counts: counts.to_vec(),
        };
        Call::new(op, problem, choice)
            .in_place(mine)
            .checked(checked)
    }

    pub(crate) fn allreduce_call<'c>(
        &self,
        len: Lengths,
        reduction: Reduction,
        choice: Choice<'c>,
    ) -> Call<'c> {
        let bytes = len.send;
        let checked = expect_len("allreduce", "recv", len.recv, Some(bytes));
        let problem = Problem::Allreduce {
            p: self.size(),
            reduction,
            bytes,
        };
        Call::new("allreduce", problem, choice).checked(checked)
    }

    pub(crate) fn reduce_call<'c>(
        &self,
        len: Lengths,
        reduction: Reduction,
        root: usize,
        choice: Choice<'c>,
    ) -> Call<'c> {
        let bytes = len.send;
        let checked = if self.rank() == root {
            expect_len("reduce", "recv", len.recv, Some(bytes))
        } else {
            Ok(())
        };
        let problem = Problem::Reduce {
            p: self.size(),
            root,
            reduction,
            bytes,
        };
        Call::new("reduce", problem, choice).checked(checked)
    }

    /// A reduce-scatter of equal blocks: `send` is size × the length of `recv`.
    pub(crate) fn reduce_scatter_block_call<'c>(
        &self,
        len: Lengths,
        reduction: Reduction,
        choice: Choice<'c>,
    ) -> Call<'c> {
        let op = "reduce_scatter_block";
        let (p, block) = (self.size(), len.recv);
        let checked = expect_len(op, "send", len.send, p.checked_mul(block));
        let problem = Problem::ReduceScatterBlock {
            p,
            reduction,
            block,
        };
        Call::new(op, problem, choice).checked(checked)
    }

    /// A reduce-scatter with `counts` elements of the reduction's type per rank: `send` holds
    /// their sum, `recv` this rank's count.
    pub(crate) fn reduce_scatter_call<'c>(
        &self,
        len: Lengths,
        reduction: Reduction,
        counts: &[usize],
        choice: Choice<'c>,
    ) -> Call<'c> {
        let op = "reduce_scatter";
        let size = reduction.dtype.size();
        // Saturated where a count's bytes overflow: refused below, and the peers' check of
        // the arguments sees the count as it was meant.
        let bytes: Vec<usize> = counts.iter().map(|c| c.saturating_mul(size)).collect();
        let checked = if counts.iter().any(|c| c.checked_mul(size).is_none()) {
            Err(argument(op, "the counts overflow".to_string()))
        } else {
            self.counts_total(op, &bytes).and_then(|total| {
                expect_len(op, "send", len.send, Some(total))
                    .and_then(|()| expect_len(op, "recv", len.recv, self.own(&bytes)))
            })
        };
        let problem = Problem::ReduceScatter {
            reduction,
            counts: bytes,
        };
        Call::new(op, problem, choice).checked(checked)
    }

    /// An inclusive scan, or an exclusive one (`exclusive`).
    pub(crate) fn scan_call<'c>(
        &self,
        len: Lengths,
        reduction: Reduction,
        exclusive: bool,
        choice: Choice<'c>,
    ) -> Call<'c> {
        let name = if exclusive { "exscan" } else { "scan" };
        let bytes = len.send;
        let checked = expect_len(name, "recv", len.recv, Some(bytes));
        let problem = Problem::Scan {
            p: self.size(),
            reduction,
            bytes,
            exclusive,
        };
        // Rank 0 of an exclusive scan keeps its receive buffer: it is staged in as it is.
        let copy_in = exclusive && self.rank() == 0;
        Call::new(name, problem, choice)
            .copy_in(copy_in)
            .checked(checked)
    }

    pub(crate) fn gather_call<'c>(
        &self,
        len: Lengths,
        root: usize,
        choice: Choice<'c>,
    ) -> Call<'c> {
        let (p, block) = (self.size(), len.send);
        let checked = if self.rank() == root {
            expect_len("gather", "recv", len.recv, p.checked_mul(block))
        } else {
            Ok(())
        };
        let problem = Problem::Gather { p, root, block };
        Call::new("gather", problem, choice).checked(checked)
    }

    pub(crate) fn scatter_call<'c>(
        &self,
        len: Lengths,
        root: usize,
        choice: Choice<'c>,
    ) -> Call<'c> {
        let (p, block) = (self.size(), len.recv);
        let checked = if self.rank() == root {
            expect_len("scatter", "send", len.send, p.checked_mul(block))
        } else {
            Ok(())
        };
        let problem = Problem::Scatter { p, root, block };
        Call::new("scatter", problem, choice).checked(checked)
    }

    pub(crate) fn gatherv_call<'c>(
        &self,
        len: Lengths,
        counts: &[usize],
        root: usize,
        choice: Choice<'c>,
    ) -> Call<'c> {
        let op = "gatherv";
        let problem = Problem::Gatherv {
            root,
            counts: counts.to_vec(),
        };
        let checked = self.check_rooted(op, counts, root, ("send", len.send), ("recv", len.recv));
        Call::new(op, problem, choice).checked(checked)
    }

    pub(crate) fn scatterv_call<'c>(
        &self,
        len: Lengths,
        counts: &[usize],
        root: usize,
        choice: Choice<'c>,
    ) -> Call<'c> {
        let op = "scatterv";
        let problem = Problem::Scatterv {
            root,
            counts: counts.to_vec(),
        };
        let checked = self.check_rooted(op, counts, root, ("recv", len.recv), ("send", len.send));
        Call::new(op, problem, choice).checked(checked)
    }

    pub(crate) fn alltoall_call<'c>(&self, len: Lengths, choice: Choice<'c>) -> Call<'c> {
        let p = self.size();
        let checked = equal_blocks("alltoall", "send", len.send, p)
            .and_then(|()| expect_len("alltoall", "recv", len.recv, Some(len.send)));
        let problem = Problem::Alltoall {
            p,
            block: len.send / p,
        };
        Call::new("alltoall", problem, choice).checked(checked)
    }
}

/// A buffer of `len` bytes cut into `p` equal blocks.
fn equal_blocks(op: &'static str, which: &str, len: usize, p: usize) -> Result<()> {
    if len % p != 0 {
        Err(argument(
            op,
            format!("{which} of {len} bytes is not {p} equal blocks"),
        ))
    } else {
        Ok(())
    }
}
