/* circulant: collective communication over libfabric, the C API.
 *
 * Generated from src/capi/ by cbindgen (ci/header): do not edit.
 *
 * Every function returns CIRCULANT_SUCCESS (0) or an error code; the message of the last
 * failed call on a communicator is circulant_last_error(comm), that of a call without one
 * (circulant_init, a NULL handle) circulant_last_error(NULL).
 *
 * Contract: buffers stay valid and untouched until the operation on them completes; one
 * operation is in flight per communicator (a second one fails with CIRCULANT_ERR_BUSY); a
 * communicator and its requests are used by one thread at a time. Sizes are in bytes except
 * the element counts of the reductions. */

#ifndef CIRCULANT_H
#define CIRCULANT_H

#include <stddef.h>
#include <stdint.h>
/* As send buffer: the input is already in the receive buffer (as MPI_IN_PLACE). */
#define CIRCULANT_IN_PLACE ((const void *)(~(size_t)0))

// Data types of the reductions (`int dtype`).
#define CIRCULANT_INT32 0

// 64-bit signed integers.
#define CIRCULANT_INT64 1

// 32-bit unsigned integers.
#define CIRCULANT_UINT32 2

// 64-bit unsigned integers.
#define CIRCULANT_UINT64 3

// 32-bit IEEE floats.
#define CIRCULANT_FLOAT32 4

// 64-bit IEEE floats.
#define CIRCULANT_FLOAT64 5

// Operators of the reductions (`int op`); the bitwise ones on integers only.
#define CIRCULANT_SUM 0

// Product.
#define CIRCULANT_PROD 1

// Minimum.
#define CIRCULANT_MIN 2

// Maximum.
#define CIRCULANT_MAX 3

// Bitwise and.
#define CIRCULANT_BAND 4

// Bitwise or.
#define CIRCULANT_BOR 5

// Bitwise exclusive or.
#define CIRCULANT_BXOR 6

// Marks a rank that takes part in `circulant_split` without joining a new communicator.
#define CIRCULANT_UNDEFINED -1

// The call succeeded.
#define CIRCULANT_SUCCESS 0

// A bad argument: a null pointer, a size that does not fit, a root out of range, an unknown
// data type or operator.
#define CIRCULANT_ERR_ARGUMENT 1

// A peer failed or aborted the operation (its process died, or it hit an error).
#define CIRCULANT_ERR_PEER 2

// The operation's deadline passed (`CIRCULANT_TIMEOUT`, 60 s by default).
#define CIRCULANT_ERR_TIMEOUT 3

// The ranks called the collective with arguments that do not match.
#define CIRCULANT_ERR_MISMATCH 4

// An operation is still in flight on the communicator, or requests are not freed yet.
#define CIRCULANT_ERR_BUSY 5

// The communicator is unusable after an earlier failure.
#define CIRCULANT_ERR_UNUSABLE 6

// Joining the job failed (PMI, or the out-of-band allgather).
#define CIRCULANT_ERR_BOOTSTRAP 7

// libfabric failed, or offers no usable provider.
#define CIRCULANT_ERR_FABRIC 8

// A defect in the library (a caught panic): please report it with the message.
#define CIRCULANT_ERR_INTERNAL 9

// An opaque communicator (`circulant_comm` in C).
typedef struct circulant_comm circulant_comm;

// An opaque request (`circulant_request` in C).
typedef struct circulant_request circulant_request;

// The caller's allgather: every rank passes `bytes` bytes at `send` and receives every
// rank's bytes in rank order at `recv` (size × `bytes`); returns 0 on success. `ctx` is the
// pointer given to `circulant_init_oob`.
typedef int (*circulant_oob_allgather_fn)(const void *send, void *recv, size_t bytes, void *ctx);

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// Blocks until every rank of `comm` has called it.
int circulant_barrier(const circulant_comm *comm);

// Root's `bytes` at `buf` into every rank's `buf`.
int circulant_bcast(const circulant_comm *comm, void *buf, size_t bytes, int root);

// Every rank's `send_bytes` at `send` into `recv` (size × `send_bytes`) in rank order.
// `send` may be `CIRCULANT_IN_PLACE`: this rank's block is already at its place in `recv`.
int circulant_allgather(const circulant_comm *comm,
                        const void *send,
                        size_t send_bytes,
                        void *recv);

// Rank r's `counts[r]` bytes into `recv` at the sum of the counts before r. `counts` has one
// entry per rank and `send_bytes` must equal `counts[rank]`; `send` may be
// `CIRCULANT_IN_PLACE`.
int circulant_allgatherv(const circulant_comm *comm,
                         const void *send,
                         size_t send_bytes,
                         void *recv,
                         const size_t *counts);

// Every rank's `recv` = `op` over all ranks' `send`, `count` elements of `dtype`. `send` may
// be `CIRCULANT_IN_PLACE` (the input is in `recv`).
int circulant_allreduce(const circulant_comm *comm,
                        const void *send,
                        void *recv,
                        size_t count,
                        int dtype,
                        int op);

// Root's `recv` = `op` over all ranks' `send`; `recv` may be NULL on the other ranks.
int circulant_reduce(const circulant_comm *comm,
                     const void *send,
                     void *recv,
                     size_t count,
                     int dtype,
                     int op,
                     int root);

// Rank r's `recv` = `op` over the `send` of ranks 0..=r.
int circulant_scan(const circulant_comm *comm,
                   const void *send,
                   void *recv,
                   size_t count,
                   int dtype,
                   int op);

// Rank r's `recv` = `op` over the `send` of ranks 0..r; rank 0's `recv` is not touched.
int circulant_exscan(const circulant_comm *comm,
                     const void *send,
                     void *recv,
                     size_t count,
                     int dtype,
                     int op);

// Every rank's `send_bytes` into root's `recv` (size × `send_bytes`) in rank order.
int circulant_gather(const circulant_comm *comm,
                     const void *send,
                     size_t send_bytes,
                     void *recv,
                     int root);

// Rank r's `counts[r]` bytes into root's `recv` at the sum of the counts before r.
int circulant_gatherv(const circulant_comm *comm,
                      const void *send,
                      size_t send_bytes,
                      void *recv,
                      const size_t *counts,
                      int root);

// Block r of root's `send` (size × `recv_bytes`) into rank r's `recv`.
int circulant_scatter(const circulant_comm *comm,
                      const void *send,
                      void *recv,
                      size_t recv_bytes,
                      int root);

// Part r of root's `send` (cut at the counts) into rank r's `recv` (`counts[r]` bytes).
int circulant_scatterv(const circulant_comm *comm,
                       const void *send,
                       const size_t *counts,
                       void *recv,
                       size_t recv_bytes,
                       int root);

// Block j of rank i's `send` into block i of rank j's `recv` (size blocks of `block_bytes`).
int circulant_alltoall(const circulant_comm *comm,
                       const void *send,
                       void *recv,
                       size_t block_bytes);

// Joins the job this process was started in (PMI-1 from `circulant run` or Hydra), or becomes
// rank 0 of 1 when started alone. `*comm` receives the world communicator.
int circulant_init(circulant_comm **comm);

// Releases a communicator (the world one or one from `circulant_split`) and the memory
// `circulant_alloc` gave on it. Refused with `CIRCULANT_ERR_BUSY` while requests on it are not
// freed. The job is left when the last communicator of the process is released.
int circulant_finalize(circulant_comm *comm);

// This process's rank in `comm`.
int circulant_rank(const circulant_comm *comm, int *rank);

// The number of ranks of `comm`.
int circulant_size(const circulant_comm *comm, int *size);

// Splits `comm` as `MPI_Comm_split`: ranks with the same `color` (>= 0) form a communicator,
// ordered by `key`, then by rank in `comm`. A rank passing `CIRCULANT_UNDEFINED` gets NULL.
// Every rank of `comm` must call it.
int circulant_split(const circulant_comm *comm, int color, int key, circulant_comm **newcomm);

// `bytes` of memory registered with `comm`'s fabric domain, zeroed: collectives on a buffer
// that starts at `*ptr` copy nothing. Released by `circulant_free` or with `comm`.
int circulant_alloc(const circulant_comm *comm, size_t bytes, void **ptr);

// Bytes `comm` copied locally so far (staging of memory that is not from `circulant_alloc`,
// the plans' copy steps, and operations up to `CIRCULANT_EAGER_LIMIT` bytes, whose data go
// through receive slots): larger broadcasts and in-place allgathervs on memory from
// `circulant_alloc` add nothing.
int circulant_bytes_copied(const circulant_comm *comm, uint64_t *bytes);

// Releases memory from `circulant_alloc` (NULL is ignored).
int circulant_free(const circulant_comm *comm, void *ptr);

// The message of the last failed call on `comm` ("" if none), or with `comm` NULL of the
// last failed call of this thread that had no communicator (init, a NULL handle). Valid until
// the next failing call that sets it.
const char *circulant_last_error(const circulant_comm *comm);

// Joins a job of `size` processes as `rank`, exchanging addresses through `allgather`
// (called during this call only, with the same sizes on every rank). For programs that
// already have MPI, a TCP store or their own launcher. Every rank must call it.
int circulant_init_oob(circulant_comm **comm,
                       int rank,
                       int size,
                       circulant_oob_allgather_fn allgather,
                       void *ctx);

// `circulant_init_oob` where the caller knows the node of every rank: `nodes` has `size`
// entries, `nodes[r]` rank r's node under any non-negative labels (equal labels, one node;
// e.g. from `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`), the same on every rank. Start-up
// then skips the exchange of host names. Every rank must call it.
int circulant_init_oob_nodes(circulant_comm **comm,
                             int rank,
                             int size,
                             const int *nodes,
                             circulant_oob_allgather_fn allgather,
                             void *ctx);

// Progresses `request` without blocking; `*done` = 1 once it is complete (the results are
// then in place), else 0. A request that is not started counts as complete.
int circulant_test(circulant_request *request, int *done);

// Completes `request` (at once if it is not started). The request stays valid: free it
// with `circulant_request_free`, or start it again if it is persistent.
int circulant_wait(circulant_request *request);

// Starts a persistent request again (after it completed).
int circulant_start(circulant_request *request);

// Releases a completed request (NULL is ignored). An operation still in flight must be
// completed first: `CIRCULANT_ERR_BUSY`.
int circulant_request_free(circulant_request *request);

// Starts a barrier.
int circulant_ibarrier(const circulant_comm *comm, circulant_request **request);

// Starts a broadcast (see `circulant_bcast`).
int circulant_ibcast(const circulant_comm *comm,
                     void *buf,
                     size_t bytes,
                     int root,
                     circulant_request **request);

// Starts an allgather (see `circulant_allgather`).
int circulant_iallgather(const circulant_comm *comm,
                         const void *send,
                         size_t send_bytes,
                         void *recv,
                         circulant_request **request);

// Starts an allgatherv (see `circulant_allgatherv`).
int circulant_iallgatherv(const circulant_comm *comm,
                          const void *send,
                          size_t send_bytes,
                          void *recv,
                          const size_t *counts,
                          circulant_request **request);

// Starts an allreduce (see `circulant_allreduce`).
int circulant_iallreduce(const circulant_comm *comm,
                         const void *send,
                         void *recv,
                         size_t count,
                         int dtype,
                         int op,
                         circulant_request **request);

// Starts a reduce (see `circulant_reduce`).
int circulant_ireduce(const circulant_comm *comm,
                      const void *send,
                      void *recv,
                      size_t count,
                      int dtype,
                      int op,
                      int root,
                      circulant_request **request);

// Starts an inclusive scan (see `circulant_scan`).
int circulant_iscan(const circulant_comm *comm,
                    const void *send,
                    void *recv,
                    size_t count,
                    int dtype,
                    int op,
                    circulant_request **request);

// Starts an exclusive scan (see `circulant_exscan`).
int circulant_iexscan(const circulant_comm *comm,
                      const void *send,
                      void *recv,
                      size_t count,
                      int dtype,
                      int op,
                      circulant_request **request);

// Starts a gather (see `circulant_gather`).
int circulant_igather(const circulant_comm *comm,
                      const void *send,
                      size_t send_bytes,
                      void *recv,
                      int root,
                      circulant_request **request);

// Starts a gatherv (see `circulant_gatherv`).
int circulant_igatherv(const circulant_comm *comm,
                       const void *send,
                       size_t send_bytes,
                       void *recv,
                       const size_t *counts,
                       int root,
                       circulant_request **request);

// Starts a scatter (see `circulant_scatter`).
int circulant_iscatter(const circulant_comm *comm,
                       const void *send,
                       void *recv,
                       size_t recv_bytes,
                       int root,
                       circulant_request **request);

// Starts a scatterv (see `circulant_scatterv`).
int circulant_iscatterv(const circulant_comm *comm,
                        const void *send,
                        const size_t *counts,
                        void *recv,
                        size_t recv_bytes,
                        int root,
                        circulant_request **request);

// Starts an all-to-all (see `circulant_alltoall`).
int circulant_ialltoall(const circulant_comm *comm,
                        const void *send,
                        void *recv,
                        size_t block_bytes,
                        circulant_request **request);

// A persistent barrier: planned now, started by `circulant_start`.
int circulant_barrier_init(const circulant_comm *comm, circulant_request **request);

// A persistent broadcast: its arguments are checked and its algorithm chosen and planned
// now, on this memory; each `circulant_start` runs that plan again (the memory must stay
// valid until the request is freed).
int circulant_bcast_init(const circulant_comm *comm,
                         void *buf,
                         size_t bytes,
                         int root,
                         circulant_request **request);

// A persistent allgather.
int circulant_allgather_init(const circulant_comm *comm,
                             const void *send,
                             size_t send_bytes,
                             void *recv,
                             circulant_request **request);

// A persistent allgatherv (the counts are copied).
int circulant_allgatherv_init(const circulant_comm *comm,
                              const void *send,
                              size_t send_bytes,
                              void *recv,
                              const size_t *counts,
                              circulant_request **request);

// A persistent allreduce.
int circulant_allreduce_init(const circulant_comm *comm,
                             const void *send,
                             void *recv,
                             size_t count,
                             int dtype,
                             int op,
                             circulant_request **request);

// A persistent reduce to `root` (see `circulant_reduce`).
int circulant_reduce_init(const circulant_comm *comm,
                          const void *send,
                          void *recv,
                          size_t count,
                          int dtype,
                          int op,
                          int root,
                          circulant_request **request);

// A persistent inclusive scan (see `circulant_scan`).
int circulant_scan_init(const circulant_comm *comm,
                        const void *send,
                        void *recv,
                        size_t count,
                        int dtype,
                        int op,
                        circulant_request **request);

// A persistent exclusive scan (see `circulant_exscan`).
int circulant_exscan_init(const circulant_comm *comm,
                          const void *send,
                          void *recv,
                          size_t count,
                          int dtype,
                          int op,
                          circulant_request **request);

// A persistent gather (see `circulant_gather`).
int circulant_gather_init(const circulant_comm *comm,
                          const void *send,
                          size_t send_bytes,
                          void *recv,
                          int root,
                          circulant_request **request);

// A persistent gatherv (see `circulant_gatherv`; the counts are copied).
int circulant_gatherv_init(const circulant_comm *comm,
                           const void *send,
                           size_t send_bytes,
                           void *recv,
                           const size_t *counts,
                           int root,
                           circulant_request **request);

// A persistent scatter (see `circulant_scatter`).
int circulant_scatter_init(const circulant_comm *comm,
                           const void *send,
                           void *recv,
                           size_t recv_bytes,
                           int root,
                           circulant_request **request);

// A persistent scatterv (see `circulant_scatterv`; the counts are copied).
int circulant_scatterv_init(const circulant_comm *comm,
                            const void *send,
                            const size_t *counts,
                            void *recv,
                            size_t recv_bytes,
                            int root,
                            circulant_request **request);

// A persistent all-to-all (see `circulant_alltoall`).
int circulant_alltoall_init(const circulant_comm *comm,
                            const void *send,
                            void *recv,
                            size_t block_bytes,
                            circulant_request **request);

// The text of a status code (a static string; never NULL).
const char *circulant_strerror(int code);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* CIRCULANT_H */
