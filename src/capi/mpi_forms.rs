//! The collectives of the MPI layer (mpi/), from the MPI parts of the table of collectives
//! (`crate::comm`'s `table.rs`): [`MPI_FORMS`], from which `ci/header` writes
//! `mpi/collectives.h`, the rows the layer defines its entry points over. The layer serves
//! each with the C entry points of the same row.

/// The arguments of a collective's MPI functions, as its blocking form takes them (the
/// nonblocking form adds a request, the persistent one an info and a request). The MPI layer
/// defines the entry points of each shape once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MpiShape {
    /// No buffers: `MPI_Barrier(comm)`.
    NoBuffer,
    /// One buffer, read at the root and written elsewhere:
    /// `MPI_Bcast(buf, count, type, root, comm)`.
    RootedBuffer,
    /// A send block and size receive blocks:
    /// `MPI_Allgather(send, scount, stype, recv, rcount, rtype, comm)`.
    Blocks,
    /// Blocks to or from a root: `MPI_Gather(send, scount, stype, recv, rcount, rtype, root,
    /// comm)`.
    RootedBlocks,
    /// Counts and displacements of the receive side:
    /// `MPI_Allgatherv(send, scount, stype, recv, rcounts, displs, rtype, comm)`.
    RecvV,
    /// Counts and displacements of the root's receive side:
    /// `MPI_Gatherv(send, scount, stype, recv, rcounts, displs, rtype, root, comm)`.
    RootedRecvV,
    /// Counts and displacements of the root's send side:
    /// `MPI_Scatterv(send, scounts, displs, stype, recv, rcount, rtype, root, comm)`.
    RootedSendV,
    /// A reduction: `MPI_Allreduce(send, recv, count, type, op, comm)`.
    Reduction,
    /// A reduction to a root: `MPI_Reduce(send, recv, count, type, op, root, comm)`.
    RootedReduction,
    /// A reduction scattered in equal blocks:
    /// `MPI_Reduce_scatter_block(send, recv, rcount, type, op, comm)`.
    ReductionScatterBlock,
    /// A reduction scattered at per-rank counts:
    /// `MPI_Reduce_scatter(send, recv, rcounts, type, op, comm)`.
    ReductionScatterV,
}

/// One collective of the MPI layer.
#[derive(Clone, Copy, Debug)]
pub struct MpiForm {
    /// The stem of its MPI functions: `Bcast` for `MPI_Bcast`, `MPI_Ibcast`, `MPI_Bcast_init`
    /// and their `_c` forms.
    pub stem: &'static str,
    /// The layer's name of it (in thresholds files), the name of its C entry point after
    /// `circulant_`: `bcast`.
    pub op: &'static str,
    /// The arguments its MPI functions take.
    pub shape: MpiShape,
}

macro_rules! mpi_forms {
    ($($(#[doc = $doc:expr])* $name:ident, $iname:ident, $init:ident $(/ $bytes:ident, $ibytes:ident, $init_bytes:ident)?:
        $shape:ident ($($arg:ident: $ty:ty),*) => |$comm:ident, $len:ident, $choice:ident $(, $reduction:ident)?| $make:expr;
        $(@c $cdoc:literal ($($cp:ident: $ct:ty),*) => |$cc:ident| $cmake:expr;)?
        $(@mpi $mstem:ident $mshape:ident;)?)*) => {
        /// Every collective of the MPI layer, in the order of the table.
        pub const MPI_FORMS: &[MpiForm] = &[
            $($(
                MpiForm {
                    stem: stringify!($mstem),
                    op: stringify!($name),
                    shape: MpiShape::$mshape,
                },
            )?)*
        ];
    };
}

crate::comm::collectives!(mpi_forms);
