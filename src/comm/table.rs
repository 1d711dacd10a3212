//! The table of collectives: every collective described once, by its buffers, its other
//! arguments and the call they make ([`super::calls`]). `collectives!(m)` hands the rows to
//! the macro `m`, which makes one kind of form of every collective from them: the Rust forms
//! (`forms.rs`), the C entry points ([`crate::capi`]) and the MPI layer's rows
//! ([`crate::capi::MPI_FORMS`], from which `ci/header` writes `mpi/collectives.h`). Adding a
//! collective is a row here, its call in `calls.rs`, and its plans.
//!
//! A row: the names of the blocking, nonblocking and persistent forms (and for a reduction,
//! of its untyped forms); the buffers (`none`; `buf`, read at the root and written elsewhere;
//! `recv`, in place; `send_recv`; `typed`, a reduction's elements); the other arguments; the
//! call, made on `comm` from the buffers' lengths `len`, the arguments, the algorithm `choice`
//! (and a reduction's `reduction`). Then, where C has the collective (C has no in-place forms
//! of their own: `CIRCULANT_IN_PLACE` as the send buffer), its C part: the entry point's
//! documentation, its arguments after the communicator, and the collective they describe
//! (`crate::capi`). Last, where MPI has the collective, its MPI part, which the MPI layer
//! (mpi/) serves with the C entry points: the stem of its MPI functions (`Bcast`: `MPI_Bcast`,
//! `MPI_Ibcast`, `MPI_Bcast_init` and their `_c` forms) and the shape of their arguments
//! ([`crate::capi::MpiShape`]).

/// Hands the rows of the table to the macro `$m` (see the module documentation).
macro_rules! collectives {
    ($m:ident) => {
        $m! {
            /// Blocks until every rank has called it.
            barrier, ibarrier, barrier_init:
                none () => |comm, _len, choice| comm.barrier_call(choice);
                @c "Blocks until every rank of `comm` has called it." ()
                => |_c| Ok(Collective::Barrier);
                @mpi Barrier NoBuffer;

            /// Root's `buf` ends up in every rank's `buf` (the same length everywhere).
            bcast, ibcast, bcast_init:
                buf (root: usize) => |comm, len, choice| comm.bcast_call(len.recv, root, choice);
                @c "Root's `bytes` at `buf` into every rank's `buf`."
                (buf: *mut c_void, bytes: usize, root: c_int)
                => |_c| Collective::bcast(buf, bytes, root);
                @mpi Bcast RootedBuffer;

            /// Every rank's `send` (all the same length) into `recv` in rank order.
            allgather, iallgather, allgather_init:
                send_recv () => |comm, len, choice| comm.allgather_call(len, choice);
                @c "Every rank's `send_bytes` at `send` into `recv` (size × `send_bytes`) in rank \
                   order. `send` may be `CIRCULANT_IN_PLACE`: this rank's block is already at \
                   its place in `recv`."
                (send: *const c_void, send_bytes: usize, recv: *mut c_void)
                => |_c| Ok(Collective::allgather(send, send_bytes, recv));
                @mpi Allgather Blocks;

            /// An allgather in place: this rank's block is already at its place in `recv`
            /// (at rank × block).
            allgather_in_place, iallgather_in_place, allgather_in_place_init:
                recv () => |comm, len, choice| comm.allgather_in_place_call(len.recv, choice);

            /// Rank r's `send` (`counts[r]` bytes) into `recv` at the sum of the counts
            /// before r.
            allgatherv, iallgatherv, allgatherv_init:
                send_recv (counts: &[usize])
                => |comm, len, choice| comm.allgatherv_call(len, counts, choice);
                @c "Rank r's `counts[r]` bytes into `recv` at the sum of the counts before r. \
                   `counts` has one entry per rank and `send_bytes` must equal `counts[rank]`; \
                   `send` may be `CIRCULANT_IN_PLACE`."
                (send: *const c_void, send_bytes: usize, recv: *mut c_void, counts: *const usize)
                => |c| Collective::allgatherv(c, send, send_bytes, recv, counts);
                @mpi Allgatherv RecvV;

            /// An allgatherv in place: this rank's contribution is already in `recv` at the
            /// sum of the counts before it. On a registered [`Buffer`] nothing is copied.
            allgatherv_in_place, iallgatherv_in_place, allgatherv_in_place_init:
                recv (counts: &[usize])
                => |comm, len, choice| comm.allgatherv_in_place_call(len.recv, counts, choice);

            /// Every rank's `recv` = `op` over all ranks' `send`, elementwise.
            allreduce, iallreduce, allreduce_init / allreduce_bytes, iallreduce_bytes,
            allreduce_init_bytes:
                typed () => |comm, len, choice, reduction|
                    comm.allreduce_call(len, reduction, choice);
                @c "Every rank's `recv` = `op` over all ranks' `send`, `count` elements of \
                   `dtype`. `send` may be `CIRCULANT_IN_PLACE` (the input is in `recv`)."
                (send: *const c_void, recv: *mut c_void, count: usize, dtype: c_int, op: c_int)
                => |_c| Collective::reducing(Reducing::All, send, recv, count, dtype, op);
                @mpi Allreduce Reduction;

            /// Root's `recv` = `op` over all ranks' `send`; the others' `recv` is not touched
            /// (it may be empty).
            reduce, ireduce, reduce_init / reduce_bytes, ireduce_bytes, reduce_init_bytes:
                typed (root: usize) => |comm, len, choice, reduction|
                    comm.reduce_call(len, reduction, root, choice);
                @c "Root's `recv` = `op` over all ranks' `send`; `recv` may be NULL on the other \
                   ranks."
                (send: *const c_void, recv: *mut c_void, count: usize, dtype: c_int, op: c_int,
                 root: c_int)
                => |_c| Collective::reducing(Reducing::To(rank_arg(root, "root")?), send, recv, count, dtype, op);
                @mpi Reduce RootedReduction;

            /// Block r of `op` over all ranks' `send` (size equal blocks, each the length of
            /// `recv`) into rank r's `recv`.
            reduce_scatter_block, ireduce_scatter_block, reduce_scatter_block_init /
            reduce_scatter_block_bytes, ireduce_scatter_block_bytes,
            reduce_scatter_block_init_bytes:
                typed () => |comm, len, choice, reduction|
                    comm.reduce_scatter_block_call(len, reduction, choice);
                @c "Block r of `op` over all ranks' `send` (size × `recv_count` elements of \
                   `dtype`) into rank r's `recv` (`recv_count` elements). `send` may be \
                   `CIRCULANT_IN_PLACE` (the input is in `recv`, size × `recv_count` elements; \
                   the block lands at its start)."
                (send: *const c_void, recv: *mut c_void, recv_count: usize, dtype: c_int, op: c_int)
                => |c| Collective::reduce_scatter_block(c, send, recv, recv_count, dtype, op);
                @mpi Reduce_scatter_block ReductionScatterBlock;

            /// Part r of `op` over all ranks' `send` (cut at `counts`, elements of the
            /// reduction's type per rank, zeros allowed) into rank r's `recv` (`counts[r]`
            /// elements).
            reduce_scatter, ireduce_scatter, reduce_scatter_init / reduce_scatter_bytes,
            ireduce_scatter_bytes, reduce_scatter_init_bytes:
                typed (counts: &[usize]) => |comm, len, choice, reduction|
                    comm.reduce_scatter_call(len, reduction, counts, choice);
                @c "Part r of `op` over all ranks' `send` (the sum of `recv_counts` elements of \
                   `dtype`, cut at them) into rank r's `recv` (`recv_counts[r]` elements). \
                   `recv_counts` has one entry per rank. `send` may be `CIRCULANT_IN_PLACE` \
                   (the input is in `recv`, the whole vector; the part lands at its start)."
                (send: *const c_void, recv: *mut c_void, recv_counts: *const usize, dtype: c_int,
                 op: c_int)
                => |c| Collective::reduce_scatter(c, send, recv, recv_counts, dtype, op);
                @mpi Reduce_scatter ReductionScatterV;

            /// Rank r's `recv` = `op` over the `send` of ranks 0..=r (inclusive prefix).
            scan, iscan, scan_init / scan_bytes, iscan_bytes, scan_init_bytes:
                typed () => |comm, len, choice, reduction|
                    comm.scan_call(len, reduction, false, choice);
                @c "Rank r's `recv` = `op` over the `send` of ranks 0..=r."
                (send: *const c_void, recv: *mut c_void, count: usize, dtype: c_int, op: c_int)
                => |_c| Collective::reducing(Reducing::Scan, send, recv, count, dtype, op);
                @mpi Scan Reduction;

            /// Rank r's `recv` = `op` over the `send` of ranks 0..r (exclusive prefix); rank
            /// 0's `recv` is left as it was.
            exscan, iexscan, exscan_init / exscan_bytes, iexscan_bytes, exscan_init_bytes:
                typed () => |comm, len, choice, reduction|
                    comm.scan_call(len, reduction, true, choice);
                @c "Rank r's `recv` = `op` over the `send` of ranks 0..r; rank 0's `recv` is not \
                   touched."
                (send: *const c_void, recv: *mut c_void, count: usize, dtype: c_int, op: c_int)
                => |_c| Collective::reducing(Reducing::Exscan, send, recv, count, dtype, op);
                @mpi Exscan Reduction;

            /// Every rank's `send` (all the same length) into root's `recv` in rank order.
            gather, igather, gather_init:
                send_recv (root: usize)
                => |comm, len, choice| comm.gather_call(len, root, choice);
                @c "Every rank's `send_bytes` into root's `recv` (size × `send_bytes`) in rank \
                   order."
                (send: *const c_void, send_bytes: usize, recv: *mut c_void, root: c_int)
                => |_c| Collective::gather(send, send_bytes, recv, root);
                @mpi Gather RootedBlocks;

            /// Rank r's `send` (`counts[r]` bytes) into root's `recv` at the sum of the
            /// counts before r.
            gatherv, igatherv, gatherv_init:
                send_recv (counts: &[usize], root: usize)
                => |comm, len, choice| comm.gatherv_call(len, counts, root, choice);
                @c "Rank r's `counts[r]` bytes into root's `recv` at the sum of the counts before \
                   r."
                (send: *const c_void, send_bytes: usize, recv: *mut c_void, counts: *const usize,
                 root: c_int)
                => |c| Collective::gatherv(c, send, send_bytes, recv, counts, root);
                @mpi Gatherv RootedRecvV;

            /// Block r of root's `send` (size × the length of `recv`) into rank r's `recv`.
            scatter, iscatter, scatter_init:
                send_recv (root: usize)
                => |comm, len, choice| comm.scatter_call(len, root, choice);
                @c "Block r of root's `send` (size × `recv_bytes`) into rank r's `recv`."
                (send: *const c_void, recv: *mut c_void, recv_bytes: usize, root: c_int)
                => |_c| Collective::scatter(send, recv, recv_bytes, root);
                @mpi Scatter RootedBlocks;

            /// Root's `send` cut at `counts` (rank r's part: `counts[r]` bytes at the sum of
            /// the counts before r) into each rank's `recv`.
            scatterv, iscatterv, scatterv_init:
                send_recv (counts: &[usize], root: usize)
                => |comm, len, choice| comm.scatterv_call(len, counts, root, choice);
                @c "Part r of root's `send` (cut at the counts) into rank r's `recv` \
                   (`counts[r]` bytes)."
                (send: *const c_void, counts: *const usize, recv: *mut c_void, recv_bytes: usize,
                 root: c_int)
                => |c| Collective::scatterv(c, send, counts, recv, recv_bytes, root);
                @mpi Scatterv RootedSendV;

            /// Block j of rank i's `send` into block i of rank j's `recv` (size equal blocks
            /// each).
            alltoall, ialltoall, alltoall_init:
                send_recv () => |comm, len, choice| comm.alltoall_call(len, choice);
                @c "Block j of rank i's `send` into block i of rank j's `recv` (size blocks of \
                   `block_bytes`)."
                (send: *const c_void, recv: *mut c_void, block_bytes: usize)
                => |_c| Ok(Collective::alltoall(send, recv, block_bytes));
                @mpi Alltoall Blocks;
        }
    };
}

pub(crate) use collectives;
