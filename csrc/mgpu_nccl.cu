/*
 * mgpu_nccl.cu — NCCL error checks and the unique-id exchange. Linked when the exercise's libs
 * include nccl. nccl.h comes before mgpu.h so that the NCCL declarations there are active.
 */
#include <nccl.h>

#include "mgpu_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
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

/* ---- NCCL's watch (docs/protocol.md §4): the course's profiler plugin, mgpu_ncclwatch.c ---- *
 *
 * The checker names the plugin in MGPU_NCCL_WATCH for the ranks of an exercise that forbids an
 * NCCL collective. The harness opens it before the driver creates a communicator and points
 * NCCL_PROFILER_PLUGIN at the same file, so NCCL's dlopen returns this object; holding it open
 * keeps the counts after the driver destroys its communicators. */
static struct {
  int active;
  void (*own)(int);
  size_t (*json)(char *, size_t);
  char path[4096];
} watch;

extern "C" void mgpu__nccl_setup(void) {
  const char *path = getenv("MGPU_NCCL_WATCH");
  void *h;
  int (*abi)(void);
  char msg[1024];
  if (!path || !*path) return;
  h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(msg, sizeof msg, "cannot load NCCL's watch %s: %s", path, dlerror());
    mgpu_fail("harness", "NCCL watch", __FILE__, __LINE__, 0, msg);
  }
  abi = (int (*)(void))dlsym(h, "mgpu_ncclwatch_abi");
  watch.own = (void (*)(int))dlsym(h, "mgpu_ncclwatch_own");
  watch.json = (size_t(*)(char *, size_t))dlsym(h, "mgpu_ncclwatch_json");
  if (!abi || !watch.own || !watch.json || !dlsym(h, "ncclProfiler_v5") || abi() != 1) {
    snprintf(msg, sizeof msg, "%s is not the course's NCCL watch (interface 1)", path);
    mgpu_fail("harness", "NCCL watch", __FILE__, __LINE__, 0, msg);
  }
  /* NVSHMEM, where linked, would bring up NCCL communicators of its own and run its host-side
   * collectives through them (src/host/coll: ncclAllReduce, ncclSend, ...), calls the watch
   * could not tell from the learner's; the course's exercises time NVSHMEM's own paths. */
  if (setenv("NCCL_PROFILER_PLUGIN", path, 1) != 0 || setenv("NVSHMEM_DISABLE_NCCL", "1", 1) != 0)
    mgpu_fail("harness", "NCCL watch", __FILE__, __LINE__, 0,
              "cannot set NCCL_PROFILER_PLUGIN and NVSHMEM_DISABLE_NCCL");
  snprintf(watch.path, sizeof watch.path, "%s", path);
  watch.active = 1;
}

extern "C" void mgpu_nccl_own(int enter) {
  if (watch.active) watch.own(enter);
}

/* The plugin's counts with env_ok in front: NCCL_PROFILER_PLUGIN still names the watch (code
 * that pointed it elsewhere before a communicator was created would have NCCL load no plugin
 * for it). */
extern "C" size_t mgpu__nccl_watch_json(char *buf, size_t cap) {
  const char *now = getenv("NCCL_PROFILER_PLUGIN");
  int env_ok = now && strcmp(now, watch.path) == 0;
  size_t head, n;
  if (!watch.active || !buf || cap < 32) return 0;
  head = (size_t)snprintf(buf, cap, "{\"env_ok\":%d,", env_ok);
  n = watch.json(buf + head - 1, cap - head + 1); /* its '{' lands on our ',' */
  if (n == 0 || n >= cap - head + 1) return cap; /* does not fit: the caller says so */
  buf[head - 1] = ',';
  return head - 1 + n;
}
