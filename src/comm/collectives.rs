//! The blocking collectives: each runs its call to its end by the path of every call
//! (`Communicator::run`: the node phases, the shared segment or a plan, as its `i*` form
//! would start it).

use crate::plan::{ReduceOp, Reduction};

use super::arguments::typed;
use super::nonblocking::lengths;
use super::{Choice, Communicator, Element, Payload, PayloadMut, Result};

impl Communicator {
    /// Blocks until every rank has called it (dissemination barrier over the fabric).
    pub fn barrier(&mut self) -> Result<()> {
        let call = self.barrier_call();
        self.run::<[u8], [u8]>(call, None, None)
    }

    /// Root's `buf` ends up in every rank's `buf` (same length everywhere).
    pub fn bcast<B: PayloadMut + ?Sized>(&mut self, buf: &mut B, root: usize) -> Result<()> {
        self.bcast_using(buf, root, Choice::Auto)
    }

    /// [`Self::bcast`] with a forced algorithm.
    pub fn bcast_using<B: PayloadMut + ?Sized>(
        &mut self,
        buf: &mut B,
        root: usize,
        choice: Choice<'_>,
    ) -> Result<()> {
        let call = self.bcast_call(buf.bytes().len(), root, choice);
        self.run::<[u8], B>(call, None, Some(buf))
    }

    /// Every rank's `send` (all the same length) into `recv` in rank order.
    pub fn allgather<S, R>(&mut self, send: &S, recv: &mut R) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.allgather_using(send, recv, Choice::Auto)
    }

    /// [`Self::allgather`] with a forced algorithm.
    pub fn allgather_using<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let call = self.allgather_call(lengths(send, recv), choice);
        self.run(call, Some(send), Some(recv))
    }

    /// Rank r's `send` (`counts[r]` bytes) into `recv` at the sum of the counts before r.
    pub fn allgatherv<S, R>(&mut self, send: &S, recv: &mut R, counts: &[usize]) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.allgatherv_using(send, recv, counts, Choice::Auto)
    }

    /// [`Self::allgatherv`] with a forced algorithm.
    pub fn allgatherv_using<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        counts: &[usize],
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let call = self.allgatherv_call(lengths(send, recv), counts, choice);
        self.run(call, Some(send), Some(recv))
    }

    /// [`Self::allgatherv`] in place: this rank's contribution is already in `recv` at the sum
    /// of the counts before it. On a registered [`Buffer`](super::Buffer) nothing is copied at
    /// all.
    pub fn allgatherv_in_place<R>(&mut self, recv: &mut R, counts: &[usize]) -> Result<()>
    where
        R: PayloadMut + ?Sized,
    {
        self.allgatherv_in_place_using(recv, counts, Choice::Auto)
    }

    /// [`Self::allgatherv_in_place`] with a forced algorithm.
    pub fn allgatherv_in_place_using<R>(
        &mut self,
        recv: &mut R,
        counts: &[usize],
        choice: Choice<'_>,
    ) -> Result<()>
    where
        R: PayloadMut + ?Sized,
    {
        let call = self.allgatherv_in_place_call(recv.bytes().len(), counts, choice);
        self.run::<[u8], R>(call, None, Some(recv))
    }

    /// [`Self::allgather`] in place: this rank's block is already at its place in `recv`.
    pub fn allgather_in_place<R>(&mut self, recv: &mut R) -> Result<()>
    where
        R: PayloadMut + ?Sized,
    {
        let call = self.allgather_in_place_call(recv.bytes().len());
        self.run::<[u8], R>(call, None, Some(recv))
    }

    /// Every rank's `recv` = `op` over all ranks' `send`, elementwise.
    pub fn allreduce<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
    ) -> Result<()> {
        self.allreduce_using(send, recv, op, Choice::Auto)
    }

    /// [`Self::allreduce`] with a forced algorithm.
    pub fn allreduce_using<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        choice: Choice<'_>,
    ) -> Result<()> {
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.allreduce_bytes::<[u8], [u8]>(send, recv, typed::<T>(op), choice)
    }

    /// [`Self::allreduce`] over raw bytes holding elements of `reduction`'s type.
    pub fn allreduce_bytes<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        reduction: Reduction,
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let call = self.allreduce_call(lengths(send, recv), reduction, choice);
        self.run(call, Some(send), Some(recv))
    }

    /// Root's `recv` = `op` over all ranks' `send`; other ranks' `recv` is not touched (it may
    /// be empty there).
    pub fn reduce<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        self.reduce_using(send, recv, op, root, Choice::Auto)
    }

    /// [`Self::reduce`] with a forced algorithm.
    pub fn reduce_using<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        root: usize,
        choice: Choice<'_>,
    ) -> Result<()> {
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.reduce_bytes::<[u8], [u8]>(send, recv, typed::<T>(op), root, choice)
    }

    /// [`Self::reduce_bytes`] with a forced algorithm.
    pub fn reduce_bytes<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        reduction: Reduction,
        root: usize,
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        let call = self.reduce_call(lengths(send, recv), reduction, root, choice);
        self.run(call, Some(send), Some(recv))
    }

    /// Rank r's `recv` = `op` over the `send` of ranks 0..=r.
    pub fn scan<T: Element>(&mut self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        self.scan_using(send, recv, op, Choice::Auto)
    }

    /// [`Self::scan`] with a forced algorithm.
    pub fn scan_using<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        choice: Choice<'_>,
    ) -> Result<()> {
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.scan_bytes::<[u8], [u8]>(send, recv, typed::<T>(op), false, choice)
    }

    /// Rank r's `recv` = `op` over the `send` of ranks 0..r; rank 0's `recv` is not touched.
    pub fn exscan<T: Element>(&mut self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        self.exscan_using(send, recv, op, Choice::Auto)
    }

    /// [`Self::exscan`] with a forced algorithm.
    pub fn exscan_using<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        choice: Choice<'_>,
    ) -> Result<()> {
        let (send, recv) = (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        self.scan_bytes::<[u8], [u8]>(send, recv, typed::<T>(op), true, choice)
    }

    /// [`Self::scan_bytes`] with a forced algorithm.
    pub fn scan_bytes<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        reduction: Reduction,
        exclusive: bool,
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.iscan_bytes(send, recv, reduction, exclusive, choice)?
            .wait()
    }

    /// Every rank's `send` (all the same length) into root's `recv` in rank order; other
    /// ranks' `recv` is not touched (it may be empty there).
    pub fn gather<S, R>(&mut self, send: &S, recv: &mut R, root: usize) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.gather_using(send, recv, root, Choice::Auto)
    }

    /// [`Self::gather`] with a forced algorithm.
    pub fn gather_using<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        root: usize,
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.igather_using(send, recv, root, choice)?.wait()
    }

    /// Block r of root's `send` (p blocks of `recv.len()` bytes) into rank r's `recv`.
    pub fn scatter<S, R>(&mut self, send: &S, recv: &mut R, root: usize) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.scatter_using(send, recv, root, Choice::Auto)
    }

    /// [`Self::scatter`] with a forced algorithm.
    pub fn scatter_using<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        root: usize,
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.iscatter_using(send, recv, root, choice)?.wait()
    }

    /// Rank r's `send` (`counts[r]` bytes) into root's `recv` at the sum of the counts before
    /// r; other ranks' `recv` is not touched (it may be empty there).
    pub fn gatherv<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        counts: &[usize],
        root: usize,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.gatherv_using(send, recv, counts, root, Choice::Auto)
    }

    /// [`Self::gatherv`] with a forced algorithm.
    pub fn gatherv_using<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        counts: &[usize],
        root: usize,
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.igatherv_using(send, recv, counts, root, choice)?
            .wait()
    }

    /// Part r of root's `send` (cut at the counts) into rank r's `recv` (`counts[r]` bytes);
    /// other ranks' `send` is not read (it may be empty there).
    pub fn scatterv<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        counts: &[usize],
        root: usize,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.scatterv_using(send, recv, counts, root, Choice::Auto)
    }

    /// [`Self::scatterv`] with a forced algorithm.
    pub fn scatterv_using<S, R>(
        &mut self,
        send: &S,
        recv: &mut R,
        counts: &[usize],
        root: usize,
        choice: Choice<'_>,
    ) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.iscatterv_using(send, recv, counts, root, choice)?
            .wait()
    }

    /// Block j of rank i's `send` into block i of rank j's `recv` (p blocks each).
    pub fn alltoall<S, R>(&mut self, send: &S, recv: &mut R) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.alltoall_using(send, recv, Choice::Auto)
    }

    /// [`Self::alltoall`] with a forced algorithm.
    pub fn alltoall_using<S, R>(&mut self, send: &S, recv: &mut R, choice: Choice<'_>) -> Result<()>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        self.ialltoall_using(send, recv, choice)?.wait()
    }
}
