//go:build ignore

// The line above keeps the Go tool from compiling this C file into package csrc, which only
// embeds the harness sources (embed.go).

/*
 * mgpu_mpi.c — MPI error checks. Linked when the exercise's libs include mpi; compiled with the
 * MPI compiler wrapper (or -I<mpi include>). mpi.h comes before mgpu.h so that MGPU_MPI exists.
 * MPI's default error handler aborts before returning an error code; drivers that want MGPU_MPI
 * to see errors set MPI_ERRORS_RETURN on their communicators (mgpu_mpi_errors_return does it
 * for MPI_COMM_WORLD).
 */
#include <mpi.h>

#include "mgpu_internal.h"

#include <stdio.h>

void mgpu_check_mpi(int err, const char *call, const char *file, int line) {
  char text[MPI_MAX_ERROR_STRING + 1];
  char msg[MPI_MAX_ERROR_STRING + 64];
  int len = 0, cls = 0;
  if (err == MPI_SUCCESS) return;
  text[0] = 0;
  if (MPI_Error_string(err, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "unknown");
  text[len >= 0 && len <= MPI_MAX_ERROR_STRING ? len : 0] = 0;
  if (MPI_Error_class(err, &cls) != MPI_SUCCESS) cls = err;
  snprintf(msg, sizeof msg, "%s (error class %d)", text, cls);
  mgpu_fail(mgpu_where_for(file), call, file, line, (long)err, msg);
}

void mgpu_mpi_errors_return(void) {
  int rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS) mgpu_check_mpi(rc, "MPI_Comm_set_errhandler", __FILE__, __LINE__);
}
