/*
 * mgpu_nccl.cu — NCCL error checks and the unique-id exchange. Linked when the exercise's libs
 * include nccl. nccl.h comes before mgpu.h so that the NCCL declarations there are active.
 */
#include <nccl.h>

#include "mgpu_internal.h"

#include <stdio.h>
#include <string.h>

extern "C" void mgpu_check_nccl(ncclResult_t r, const char *call, const char *file, int line) {
  char msg[768];
  const char *last = NULL;
  if (r == ncclSuccess) return;
#ifdef NCCL_VERSION_CODE
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
  if (r == ncclInProgress) return; /* non-blocking communicators: not an error */
  last = ncclGetLastError(NULL);
#endif
#endif
  if (last && *last)
    snprintf(msg, sizeof msg, "%s (%d): %s", ncclGetErrorString(r), (int)r, last);
  else
    snprintf(msg, sizeof msg, "%s (%d)", ncclGetErrorString(r), (int)r);
  mgpu_fail(mgpu_where_for(file), call, file, line, (long)r, msg);
}

extern "C" void mgpu_nccl_unique_id(mgpu_ctx *ctx, ncclUniqueId *id) {
  if (!ctx) ctx = mgpu__ctx();
  if (!ctx || !id) mgpu_fail("driver", "mgpu_nccl_unique_id", __FILE__, __LINE__, 0,
                             "mgpu_init was not called or id is NULL");
  memset(id, 0, sizeof *id);
  if (ctx->rank == 0) {
    ncclResult_t r = ncclGetUniqueId(id);
    if (r != ncclSuccess) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s (%d)", ncclGetErrorString(r), (int)r);
      mgpu_fail("harness", "ncclGetUniqueId", __FILE__, __LINE__, (long)r, msg);
    }
  }
  mgpu_share(ctx, "nccl-unique-id", id, sizeof *id, 0);
}
