/* A circulant failure reaches the program through the communicator's error handler.
 *
 *   errors return   MPI_ERRORS_RETURN on a duplicate of MPI_COMM_WORLD: a broadcast of a
 *                   negative count gets MPI's MPI_ERR_COUNT ("rank R: negative count:
 *                   MPI_ERR_COUNT"); a broadcast whose
 *                   ranks disagree on the size (run with CIRCULANT_CHECK=1) returns an error
 *                   code; MPI_Error_string gives circulant's message; the next broadcast on
 *                   that communicator goes to MPI and is correct. Prints "rank R: error
 *                   class C: MESSAGE" and "rank R: after the error ok"; then the same
 *                   with MPI_Ibcast on another duplicate, the error returned by its
 *                   MPI_Wait ("rank R: nonblocking error class C: MESSAGE"); the next
 *                   MPI_Ibcast fails too (circulant's communicator is unusable, and not every
 *                   rank may know yet: "rank R: next nonblocking call failed"); a blocking
 *                   broadcast then passes to MPI, and so does the nonblocking one after it
 *                   ("rank R: after the nonblocking error ok").
 *                   With MPI 4, a persistent broadcast of a root that is no rank is refused at
 *                   its init, as MPI alone refuses it ("rank R: persistent bad root:
 *                   MPI_ERR_ROOT, no request").
 *   errors fatal    the same broadcast on MPI_COMM_WORLD (MPI_ERRORS_ARE_FATAL): the job
 *                   is aborted with circulant's message. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int fatal = argc > 1 && strcmp(argv[1], "fatal") == 0;
  MPI_Comm comm = MPI_COMM_WORLD;
  if (!fatal) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  }
  int buf[8] = {0};
  int rc;
  if (!fatal) {
    /* An argument MPI judges: the layer passes the call through, MPI reports it. */
    rc = MPI_Bcast(buf, -1, MPI_INT, 0, comm);
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    printf("rank %d: negative count: %s\n", rank, cls == MPI_ERR_COUNT ? "MPI_ERR_COUNT" : "other");
#if MPI_VERSION >= 4
    MPI_Request r = MPI_REQUEST_NULL;
    rc = MPI_Bcast_init(buf, 8, MPI_INT, 99, comm, MPI_INFO_NULL, &r);
    cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    printf("rank %d: persistent bad root: %s, %s\n", rank,
           cls == MPI_ERR_ROOT ? "MPI_ERR_ROOT" : "other",
           r == MPI_REQUEST_NULL ? "no request" : "a request");
    if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
#endif
  }
  rc = MPI_Bcast(buf, rank == 0 ? 4 : 8, MPI_INT, 0, comm);
  if (rc == MPI_SUCCESS) {
    printf("rank %d: the mismatched broadcast succeeded\n", rank);
    MPI_Finalize();
    return 1;
  }
  int cls = 0, len = 0;
  char text[MPI_MAX_ERROR_STRING];
  MPI_Error_class(rc, &cls);
  MPI_Error_string(rc, text, &len);
  printf("rank %d: error class %d: %s\n", rank, cls, text);
  for (int i = 0; i < 8; i++) buf[i] = rank == 1 ? 100 + i : -1;
  rc = MPI_Bcast(buf, 8, MPI_INT, 1, comm);
  int ok = rc == MPI_SUCCESS;
  for (int i = 0; i < 8; i++) ok = ok && buf[i] == 100 + i;
  printf("rank %d: after the error %s\n", rank, ok ? "ok" : "wrong");
  fflush(stdout);
  MPI_Comm_free(&comm);
  if (!fatal) {
    /* The nonblocking form: the error comes with the call's completion. */
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Barrier(comm); /* circulant starts on it */
    MPI_Request req;
    rc = MPI_Ibcast(buf, rank == 0 ? 4 : 8, MPI_INT, 0, comm, &req);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS) {
      printf("rank %d: the mismatched nonblocking broadcast succeeded\n", rank);
      MPI_Finalize();
      return 1;
    }
    MPI_Error_class(rc, &cls);
    MPI_Error_string(rc, text, &len);
    printf("rank %d: nonblocking error class %d: %s\n", rank, cls, text);
    rc = MPI_Ibcast(buf, 8, MPI_INT, 2, comm, &req); /* (run on 3 ranks) */
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    printf("rank %d: next nonblocking call %s\n", rank, rc == MPI_SUCCESS ? "succeeded" : "failed");
    for (int i = 0; i < 8; i++) buf[i] = rank == 2 ? 200 + i : -1;
    rc = MPI_Bcast(buf, 8, MPI_INT, 2, comm);
    int ok2 = rc == MPI_SUCCESS;
    for (int i = 0; i < 8; i++) ok2 = ok2 && buf[i] == 200 + i;
    for (int i = 0; i < 8; i++) buf[i] = rank == 0 ? 300 + i : -1;
    rc = MPI_Ibcast(buf, 8, MPI_INT, 0, comm, &req);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    ok2 = ok2 && rc == MPI_SUCCESS;
    for (int i = 0; i < 8; i++) ok2 = ok2 && buf[i] == 300 + i;
    printf("rank %d: after the nonblocking error %s\n", rank, ok2 ? "ok" : "wrong");
    fflush(stdout);
    MPI_Comm_free(&comm);
    ok = ok && ok2;
  }
  MPI_Finalize();
  return ok ? 0 : 1;
}
