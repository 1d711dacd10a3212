/* circulant-mpi: MPI's blocking point-to-point calls while the layer has calls outstanding.
 *
 * circulant moves a call only while the rank is inside the layer. A rank blocked in MPI's own
 * MPI_Recv would hold up its peers' share of a nonblocking collective the layer serves (the
 * root's later blocks, a block it forwards), and a peer that sends to it only after that call
 * completed would never send: the program would stop where MPI's own nonblocking collectives,
 * which progress inside every MPI call, let it go on. So while some call of the layer is not
 * complete, the blocking point-to-point calls are made as their nonblocking forms, waited for
 * with the layer's calls moving (requests.c, `wait_moving`), and a probe or test that finds
 * nothing moves them once. Otherwise they go to the PMPI_ function at once. A send and a receive match alike in either form, so ranks may differ in
 * which one they take; blocking and nonblocking collectives do not match each other, so the
 * collectives MPI runs stay as the program made them.
 */
#define _GNU_SOURCE
#include "layer.h"

#include <stdlib.h>

/* Waits for a send and a receive; the receive's status into `st`. */
static int wait_pair(MPI_Request rs[2], MPI_Status *st) {
  MPI_Status sts[2];
  int rc = MPI_SUCCESS;
  for (int i = 0; i < 2; i++) {
    int one = wait_moving(&rs[i], &sts[i]);
    if (one != MPI_SUCCESS && rc == MPI_SUCCESS) rc = one;
  }
  if (st != MPI_STATUS_IGNORE) *st = sts[1];
  return rc;
}

/* The receive `rs[1]` is posted and `rc` is how the send's start went: waits for both, or
 * withdraws the receive (waited for: it may have matched a message already, which must not
 * land in the buffer after the call returned). */
static int pair_started(int rc, MPI_Request rs[2], MPI_Status *st) {
  if (rc == MPI_SUCCESS) return wait_pair(rs, st);
  PMPI_Cancel(&rs[1]);
  PMPI_Wait(&rs[1], MPI_STATUS_IGNORE);
  return rc;
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (!requests_pending()) return PMPI_Send(buf, count, type, dest, tag, comm);
  MPI_Request r;
  int rc = PMPI_Isend(buf, count, type, dest, tag, comm, &r);
  return rc == MPI_SUCCESS ? wait_moving(&r, MPI_STATUS_IGNORE) : rc;
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (!requests_pending()) return PMPI_Ssend(buf, count, type, dest, tag, comm);
  MPI_Request r;
  int rc = PMPI_Issend(buf, count, type, dest, tag, comm, &r);
  return rc == MPI_SUCCESS ? wait_moving(&r, MPI_STATUS_IGNORE) : rc;
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (!requests_pending()) return PMPI_Rsend(buf, count, type, dest, tag, comm);
  MPI_Request r;
  int rc = PMPI_Irsend(buf, count, type, dest, tag, comm, &r);
  return rc == MPI_SUCCESS ? wait_moving(&r, MPI_STATUS_IGNORE) : rc;
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status *st) {
  if (!requests_pending()) return PMPI_Recv(buf, count, type, source, tag, comm, st);
  MPI_Request r;
  int rc = PMPI_Irecv(buf, count, type, source, tag, comm, &r);
  return rc == MPI_SUCCESS ? wait_moving(&r, st) : rc;
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag,
                 void *rbuf, int rcount, MPI_Datatype rtype, int source, int rtag, MPI_Comm comm,
                 MPI_Status *st) {
  if (!requests_pending())
    return PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag,
                         comm, st);
  MPI_Request rs[2];
  int rc = PMPI_Irecv(rbuf, rcount, rtype, source, rtag, comm, &rs[1]);
  if (rc != MPI_SUCCESS) return rc;
  return pair_started(PMPI_Isend(sbuf, scount, stype, dest, stag, comm, &rs[0]), rs, st);
}

/* The buffer's data is packed first, as the receive overwrites it (a message sent as
 * MPI_PACKED matches any receive of the same type signature). */
int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int stag,
                         int source, int rtag, MPI_Comm comm, MPI_Status *st) {
  if (!requests_pending())
    return PMPI_Sendrecv_replace(buf, count, type, dest, stag, source, rtag, comm, st);
  /* Where it cannot be packed (out of memory, a size beyond an int), MPI's own call. */
  int size = 0, at = 0;
  void *packed = NULL;
  if (PMPI_Pack_size(count, type, comm, &size) != MPI_SUCCESS ||
      !(packed = malloc(size > 0 ? (size_t)size : 1)) ||
      PMPI_Pack(buf, count, type, packed, size, &at, comm) != MPI_SUCCESS) {
    free(packed);
    return PMPI_Sendrecv_replace(buf, count, type, dest, stag, source, rtag, comm, st);
  }
  MPI_Request rs[2];
  int rc = PMPI_Irecv(buf, count, type, source, rtag, comm, &rs[1]);
  if (rc == MPI_SUCCESS)
    rc = pair_started(PMPI_Isend(packed, at, MPI_PACKED, dest, stag, comm, &rs[0]), rs, st);
  free(packed);
  return rc;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *st) {
  for (;;) {
    if (!requests_pending()) return PMPI_Probe(source, tag, comm, st);
    int flag = 0, rc = PMPI_Iprobe(source, tag, comm, &flag, st);
    if (rc != MPI_SUCCESS || flag) return rc;
    keep_progressing(1);
  }
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *msg, MPI_Status *st) {
  for (;;) {
    if (!requests_pending()) return PMPI_Mprobe(source, tag, comm, msg, st);
    int flag = 0, rc = PMPI_Improbe(source, tag, comm, &flag, msg, st);
    if (rc != MPI_SUCCESS || flag) return rc;
    keep_progressing(1);
  }
}

/* A program that polls with MPI_Iprobe (or MPI_Test, requests.c) moves the layer's calls too. */
int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *st) {
  int rc = PMPI_Iprobe(source, tag, comm, flag, st);
  if (rc == MPI_SUCCESS && !*flag && requests_pending()) keep_progressing(0);
  return rc;
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *msg, MPI_Status *st) {
  int rc = PMPI_Improbe(source, tag, comm, flag, msg, st);
  if (rc == MPI_SUCCESS && !*flag && requests_pending()) keep_progressing(0);
  return rc;
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype type, MPI_Message *msg, MPI_Status *st) {
  if (!requests_pending()) return PMPI_Mrecv(buf, count, type, msg, st);
  MPI_Request r;
  int rc = PMPI_Imrecv(buf, count, type, msg, &r);
  return rc == MPI_SUCCESS ? wait_moving(&r, st) : rc;
}

#if LAYER_LARGE_COUNT
int MPI_Send_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag,
               MPI_Comm comm) {
  if (!requests_pending()) return PMPI_Send_c(buf, count, type, dest, tag, comm);
  MPI_Request r;
  int rc = PMPI_Isend_c(buf, count, type, dest, tag, comm, &r);
  return rc == MPI_SUCCESS ? wait_moving(&r, MPI_STATUS_IGNORE) : rc;
}

int MPI_Ssend_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag,
                MPI_Comm comm) {
  if (!requests_pending()) return PMPI_Ssend_c(buf, count, type, dest, tag, comm);
  MPI_Request r;
  int rc = PMPI_Issend_c(buf, count, type, dest, tag, comm, &r);
  return rc == MPI_SUCCESS ? wait_moving(&r, MPI_STATUS_IGNORE) : rc;
}

int MPI_Rsend_c(const void *buf, MPI_Count count, MPI_Datatype type, int dest, int tag,
                MPI_Comm comm) {
  if (!requests_pending()) return PMPI_Rsend_c(buf, count, type, dest, tag, comm);
  MPI_Request r;
  int rc = PMPI_Irsend_c(buf, count, type, dest, tag, comm, &r);
  return rc == MPI_SUCCESS ? wait_moving(&r, MPI_STATUS_IGNORE) : rc;
}

int MPI_Recv_c(void *buf, MPI_Count count, MPI_Datatype type, int source, int tag,
               MPI_Comm comm, MPI_Status *st) {
  if (!requests_pending()) return PMPI_Recv_c(buf, count, type, source, tag, comm, st);
  MPI_Request r;
  int rc = PMPI_Irecv_c(buf, count, type, source, tag, comm, &r);
  return rc == MPI_SUCCESS ? wait_moving(&r, st) : rc;
}

int MPI_Sendrecv_c(const void *sbuf, MPI_Count scount, MPI_Datatype stype, int dest, int stag,
                   void *rbuf, MPI_Count rcount, MPI_Datatype rtype, int source, int rtag,
                   MPI_Comm comm, MPI_Status *st) {
  if (!requests_pending())
    return PMPI_Sendrecv_c(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag,
                           comm, st);
  MPI_Request rs[2];
  int rc = PMPI_Irecv_c(rbuf, rcount, rtype, source, rtag, comm, &rs[1]);
  if (rc != MPI_SUCCESS) return rc;
  return pair_started(PMPI_Isend_c(sbuf, scount, stype, dest, stag, comm, &rs[0]), rs, st);
}

int MPI_Sendrecv_replace_c(void *buf, MPI_Count count, MPI_Datatype type, int dest, int stag,
                           int source, int rtag, MPI_Comm comm, MPI_Status *st) {
  if (!requests_pending())
    return PMPI_Sendrecv_replace_c(buf, count, type, dest, stag, source, rtag, comm, st);
  MPI_Count size = 0, at = 0;
  void *packed = NULL;
  if (PMPI_Pack_size_c(count, type, comm, &size) != MPI_SUCCESS ||
      !(packed = malloc(size > 0 ? (size_t)size : 1)) ||
      PMPI_Pack_c(buf, count, type, packed, size, &at, comm) != MPI_SUCCESS) {
    free(packed);
    return PMPI_Sendrecv_replace_c(buf, count, type, dest, stag, source, rtag, comm, st);
  }
  MPI_Request rs[2];
  int rc = PMPI_Irecv_c(buf, count, type, source, rtag, comm, &rs[1]);
  if (rc == MPI_SUCCESS)
    rc = pair_started(PMPI_Isend_c(packed, at, MPI_PACKED, dest, stag, comm, &rs[0]), rs, st);
  free(packed);
  return rc;
}

int MPI_Mrecv_c(void *buf, MPI_Count count, MPI_Datatype type, MPI_Message *msg,
                MPI_Status *st) {
  if (!requests_pending()) return PMPI_Mrecv_c(buf, count, type, msg, st);
  MPI_Request r;
  int rc = PMPI_Imrecv_c(buf, count, type, msg, &r);
  return rc == MPI_SUCCESS ? wait_moving(&r, st) : rc;
}
#endif
