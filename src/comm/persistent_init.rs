//! The persistent form of every collective (`*_init`): each makes the call as the blocking
//! and `i*` forms do ([`super::calls`]) and keeps it in a [`Persistent`] request on
//! registered buffers.

use crate::plan::{ReduceOp, Reduction};

use super::arguments::typed;
use super::nonblocking::lengths;
use super::{Buffer, Choice, Communicator, Element, Persistent, Result};

impl Communicator {
    /// A persistent barrier (see [`Self::barrier`]).
    pub fn barrier_init(&mut self) -> Result<Persistent<'_, 'static>> {
        let call = self.barrier_call();
        Persistent::new(self, call, None, None)
    }

    /// A persistent broadcast of `buf` from `root` (see [`Self::bcast`]).
    pub fn bcast_init<'c, 'b>(
        &'c mut self,
        buf: &'b mut Buffer,
        root: usize,
    ) -> Result<Persistent<'c, 'b>> {
        self.bcast_init_using(buf, root, Choice::Auto)
    }

    /// [`Communicator::bcast_init`] with a forced or configured algorithm choice.
    pub fn bcast_init_using<'c, 'b>(
        &'c mut self,
        buf: &'b mut Buffer,
        root: usize,
        choice: Choice<'_>,
    ) -> Result<Persistent<'c, 'b>> {
        let call = self.bcast_call(buf.len(), root, choice);
        Persistent::new(self, call, Some(buf), None)
    }

    /// A persistent allgather (see [`Self::allgather`]); both buffers stay with the request
    /// ([`Persistent::send_buffer_mut`], [`Persistent::buffer`]).
    pub fn allgather_init<'c, 'b>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
    ) -> Result<Persistent<'c, 'b>> {
        self.allgather_init_using(send, recv, Choice::Auto)
    }

    /// [`Communicator::allgather_init`] with a forced or configured algorithm choice.
    pub fn allgather_init_using<'c, 'b>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        choice: Choice<'_>,
    ) -> Result<Persistent<'c, 'b>> {
        let call = self.allgather_call(lengths(send, recv), choice);
        Persistent::new(self, call, Some(recv), Some(send))
    }

    /// A persistent in-place allgather (see [`Self::allgather_in_place`]): before each start
    /// the caller writes this rank's block to its place in the request's buffer
    /// ([`Persistent::buffer_mut`], at `rank × block`).
    pub fn allgather_in_place_init<'c, 'b>(
        &'c mut self,
        recv: &'b mut Buffer,
    ) -> Result<Persistent<'c, 'b>> {
        let call = self.allgather_in_place_call(recv.len());
        Persistent::new(self, call, Some(recv), None)
    }

    /// A persistent allgatherv (see [`Self::allgatherv`]); both buffers stay with the request
    /// ([`Persistent::send_buffer_mut`], [`Persistent::buffer`]).
    pub fn allgatherv_init<'c, 'b>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        counts: &[usize],
    ) -> Result<Persistent<'c, 'b>> {
        self.allgatherv_init_using(send, recv, counts, Choice::Auto)
    }

    /// [`Communicator::allgatherv_init`] with a forced or configured algorithm choice.
    pub fn allgatherv_init_using<'c, 'b>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        counts: &[usize],
        choice: Choice<'_>,
    ) -> Result<Persistent<'c, 'b>> {
        let call = self.allgatherv_call(lengths(send, recv), counts, choice);
        Persistent::new(self, call, Some(recv), Some(send))
    }

    /// A persistent in-place allgatherv (see [`Self::allgatherv_in_place`]): this rank's
    /// contribution is written into the request's buffer before each start.
    pub fn allgatherv_in_place_init<'c, 'b>(
        &'c mut self,
        recv: &'b mut Buffer,
        counts: &[usize],
    ) -> Result<Persistent<'c, 'b>> {
        self.allgatherv_in_place_init_using(recv, counts, Choice::Auto)
    }

    /// [`Communicator::allgatherv_in_place_init`] with a forced or configured algorithm choice.
    pub fn allgatherv_in_place_init_using<'c, 'b>(
        &'c mut self,
        recv: &'b mut Buffer,
        counts: &[usize],
        choice: Choice<'_>,
    ) -> Result<Persistent<'c, 'b>> {
        let call = self.allgatherv_in_place_call(recv.len(), counts, choice);
        Persistent::new(self, call, Some(recv), None)
    }

    /// A persistent allreduce (see [`Self::allreduce`]) of elements of type `T` held in
    /// registered buffers: `recv` = `op` over all ranks' `send`, elementwise.
    pub fn allreduce_init<'c, 'b, T: Element>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        op: ReduceOp,
    ) -> Result<Persistent<'c, 'b>> {
        self.allreduce_init_using::<T>(send, recv, op, Choice::Auto)
    }

    /// [`Communicator::allreduce_init`] with a forced or configured algorithm choice.
    pub fn allreduce_init_using<'c, 'b, T: Element>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        op: ReduceOp,
        choice: Choice<'_>,
    ) -> Result<Persistent<'c, 'b>> {
        self.allreduce_init_bytes(send, recv, typed::<T>(op), choice)
    }

    /// [`Communicator::allreduce_init_using`] with the element type and operation as a
    /// [`Reduction`] (over raw bytes).
    pub fn allreduce_init_bytes<'c, 'b>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        reduction: Reduction,
        choice: Choice<'_>,
    ) -> Result<Persistent<'c, 'b>> {
        let call = self.allreduce_call(lengths(send, recv), reduction, choice);
        Persistent::new(self, call, Some(recv), Some(send))
    }

    /// A persistent reduce (see [`Self::reduce`]) of elements of type `T`: the root's `recv`
    /// = `op` over all ranks' `send`; the other ranks' `recv` is not touched (it may be
    /// empty there).
    pub fn reduce_init<'c, 'b, T: Element>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        op: ReduceOp,
        root: usize,
    ) -> Result<Persistent<'c, 'b>> {
        self.reduce_init_using::<T>(send, recv, op, root, Choice::Auto)
    }

    /// [`Communicator::reduce_init`] with a forced or configured algorithm choice.
    pub fn reduce_init_using<'c, 'b, T: Element>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        op: ReduceOp,
        root: usize,
        choice: Choice<'_>,
    ) -> Result<Persistent<'c, 'b>> {
        self.reduce_init_bytes(send, recv, typed::<T>(op), root, choice)
    }

    /// [`Communicator::reduce_init_using`] with the element type and operation as a
    /// [`Reduction`] (over raw bytes).
    pub fn reduce_init_bytes<'c, 'b>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        reduction: Reduction,
        root: usize,
        choice: Choice<'_>,
    ) -> Result<Persistent<'c, 'b>> {
        let call = self.reduce_call(lengths(send, recv), reduction, root, choice);
        Persistent::new(self, call, Some(recv), Some(send))
    }

    /// A persistent inclusive scan (see [`Self::scan`]) of elements of type `T`.
    pub fn scan_init<'c, 'b, T: Element>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        op: ReduceOp,
    ) -> Result<Persistent<'c, 'b>> {
        self.scan_init_using::<T>(send, recv, op, Choice::Auto)
    }

    /// [`Communicator::scan_init`] with a forced or configured algorithm choice.
    pub fn scan_init_using<'c, 'b, T: Element>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        op: ReduceOp,
        choice: Choice<'_>,
    ) -> Result<Persistent<'c, 'b>> {
        self.scan_init_bytes(send, recv, typed::<T>(op), false, choice)
    }

    /// A persistent exclusive scan (see [`Self::exscan`]) of elements of type `T`; rank 0's
    /// receive buffer is left as it is.
    pub fn exscan_init<'c, 'b, T: Element>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        op: ReduceOp,
    ) -> Result<Persistent<'c, 'b>> {
        self.exscan_init_using::<T>(send, recv, op, Choice::Auto)
    }

    /// [`Communicator::exscan_init`] with a forced or configured algorithm choice.
    pub fn exscan_init_using<'c, 'b, T: Element>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        op: ReduceOp,
        choice: Choice<'_>,
    ) -> Result<Persistent<'c, 'b>> {
        self.scan_init_bytes(send, recv, typed::<T>(op), true, choice)
    }

    /// A persistent inclusive or exclusive (`exclusive`) scan with the element type and
    /// operation as a [`Reduction`] (over raw bytes).
    pub fn scan_init_bytes<'c, 'b>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        reduction: Reduction,
        exclusive: bool,
        choice: Choice<'_>,
    ) -> Result<Persistent<'c, 'b>> {
        let call = self.scan_call(lengths(send, recv), reduction, exclusive, choice);
        Persistent::new(self, call, Some(recv), Some(send))
    }

    /// A persistent gather to `root` (see [`Self::gather`]).
    pub fn gather_init<'c, 'b>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        root: usize,
    ) -> Result<Persistent<'c, 'b>> {
        self.gather_init_using(send, recv, root, Choice::Auto)
    }

    /// [`Communicator::gather_init`] with a forced or configured algorithm choice.
    pub fn gather_init_using<'c, 'b>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        root: usize,
        choice: Choice<'_>,
    ) -> Result<Persistent<'c, 'b>> {
        let call = self.gather_call(lengths(send, recv), root, choice);
        Persistent::new(self, call, Some(recv), Some(send))
    }

    /// A persistent gatherv to `root` (see [`Self::gatherv`]).
    pub fn gatherv_init<'c, 'b>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        counts: &[usize],
        root: usize,
    ) -> Result<Persistent<'c, 'b>> {
        self.gatherv_init_using(send, recv, counts, root, Choice::Auto)
    }

    /// [`Communicator::gatherv_init`] with a forced or configured algorithm choice.
    pub fn gatherv_init_using<'c, 'b>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        counts: &[usize],
        root: usize,
        choice: Choice<'_>,
    ) -> Result<Persistent<'c, 'b>> {
        let call = self.gatherv_call(lengths(send, recv), counts, root, choice);
        Persistent::new(self, call, Some(recv), Some(send))
    }

    /// A persistent scatter from `root` (see [`Self::scatter`]).
    pub fn scatter_init<'c, 'b>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        root: usize,
    ) -> Result<Persistent<'c, 'b>> {
        self.scatter_init_using(send, recv, root, Choice::Auto)
    }

    /// [`Communicator::scatter_init`] with a forced or configured algorithm choice.
    pub fn scatter_init_using<'c, 'b>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        root: usize,
        choice: Choice<'_>,
    ) -> Result<Persistent<'c, 'b>> {
        let call = self.scatter_call(lengths(send, recv), root, choice);
        Persistent::new(self, call, Some(recv), Some(send))
    }

    /// A persistent scatterv from `root` (see [`Self::scatterv`]).
    pub fn scatterv_init<'c, 'b>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        counts: &[usize],
        root: usize,
    ) -> Result<Persistent<'c, 'b>> {
        self.scatterv_init_using(send, recv, counts, root, Choice::Auto)
    }

    /// [`Communicator::scatterv_init`] with a forced or configured algorithm choice.
    pub fn scatterv_init_using<'c, 'b>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        counts: &[usize],
        root: usize,
        choice: Choice<'_>,
    ) -> Result<Persistent<'c, 'b>> {
        let call = self.scatterv_call(lengths(send, recv), counts, root, choice);
        Persistent::new(self, call, Some(recv), Some(send))
    }

    /// A persistent all-to-all (see [`Self::alltoall`]).
    pub fn alltoall_init<'c, 'b>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
    ) -> Result<Persistent<'c, 'b>> {
        self.alltoall_init_using(send, recv, Choice::Auto)
    }

    /// [`Communicator::alltoall_init`] with a forced or configured algorithm choice.
    pub fn alltoall_init_using<'c, 'b>(
        &'c mut self,
        send: &'b mut Buffer,
        recv: &'b mut Buffer,
        choice: Choice<'_>,
    ) -> Result<Persistent<'c, 'b>> {
        let call = self.alltoall_call(lengths(send, recv), choice);
        Persistent::new(self, call, Some(recv), Some(send))
    }
}
