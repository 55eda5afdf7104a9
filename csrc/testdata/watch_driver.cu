// watch_driver.cu — plays NCCL's part against the course's profiler plugin (mgpu_ncclwatch.c),
// with the harness's side (mgpu_nccl.cu) for real: harness_test.go's TestNCCLWatch builds and
// runs it on the CPU and reads the counts from the done record. No GPU and no NCCL call: the
// plugin is found the way NCCL 2.28 finds it (dlopen of NCCL_PROFILER_PLUGIN, dlsym of
// ncclProfiler_v5) and handed events laid out as NCCL's profiler_v5.h lays them out.
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

#include "mgpu.h"

/* NCCL 2.28's event descriptor (src/include/plugin/profiler/profiler_v5.h), every member of
 * its union, so that the size and the offsets are NCCL's. */
struct descr_v5 {
  uint64_t type;
  void *parentObj;
  int rank;
  union {
    struct { bool graphCaptured; int groupDepth; } groupApi;
    struct { const char *func; size_t count; const char *datatype; int root; void *stream; bool graphCaptured; } collApi;
    struct { const char *func; size_t count; const char *datatype; void *stream; bool graphCaptured; } p2pApi;
    struct { void *stream; } kernelLaunch;
    struct { uint64_t seqNumber; const char *func; void const *sendBuff; void *recvBuff; size_t count; int root;
             const char *datatype; uint8_t nChannels; uint8_t nWarps; const char *algo; const char *proto;
             void *parentGroup; } coll;
    struct { const char *func; void *buff; const char *datatype; size_t count; int peer; uint8_t nChannels;
             void *parentGroup; } p2p;
    struct { pid_t pid; uint8_t channelId; int peer; int nSteps; int chunkSize; int isSend; } proxyOp;
    struct { int step; } proxyStep;
    struct { uint8_t channelId; uint64_t pTimer; } kernelCh;
    struct { int64_t id; void *data; } netPlugin;
  };
};

struct profiler_v5 {
  const char *name;
  ncclResult_t (*init)(void **context, uint64_t commId, int *eActivationMask, const char *commName,
                       int nNodes, int nranks, int rank, void *logfn);
  ncclResult_t (*startEvent)(void *context, void **eHandle, struct descr_v5 *eDescr);
  ncclResult_t (*stopEvent)(void *eHandle);
  ncclResult_t (*recordEventState)(void *eHandle, int eState, void *eStateArgs);
  ncclResult_t (*finalize)(void *context);
};

enum { kGroupApi = 1 << 8, kCollApi = 1 << 9, kP2pApi = 1 << 10 };

static struct profiler_v5 *prof;
static void *context;
static int nccl_mask; /* NCCL's process-wide ncclProfilerEventMask */

static void event(uint64_t type, const char *func) {
  struct descr_v5 d;
  void *h = (void *)1;
  memset(&d, 0, sizeof d);
  d.type = type;
  if (type == kCollApi) d.collApi.func = func;
  if (type == kP2pApi) d.p2pApi.func = func;
  if (prof->startEvent(context, &h, &d) != ncclSuccess) mgpu_fail("driver", "startEvent", __FILE__, __LINE__, 0, "failed");
  if (h) prof->stopEvent(h);
}

static void *other_thread(void *arg) {
  (void)arg;
  event(kCollApi, "ReduceScatter"); /* while the main thread is inside its own window */
  return NULL;
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  const char *mode = argc > 1 ? argv[1] : "plain";
  mgpu_init_nodevice(&ctx, argc, argv);
  void *lib = dlopen(getenv("NCCL_PROFILER_PLUGIN"), RTLD_NOW | RTLD_LOCAL);
  if (!lib) mgpu_fail("driver", "dlopen", __FILE__, __LINE__, 0, dlerror());
  prof = (struct profiler_v5 *)dlsym(lib, "ncclProfiler_v5");
  if (!prof) mgpu_fail("driver", "dlsym", __FILE__, __LINE__, 0, "no ncclProfiler_v5");
  if (strcmp(mode, "no-init") != 0) {
    prof->init(&context, 42, &nccl_mask, "watch-test", 1, 2, ctx.rank, NULL);
    prof->init(&context, 43, &nccl_mask, "watch-test-split", 1, 4, ctx.rank, NULL);
  }
  printf("mask %d\n", nccl_mask);

  event(kGroupApi, NULL);       /* not counted */
  event(kCollApi, "AllReduce"); /* the learner's */
  event(kP2pApi, "Send");
  event(kP2pApi, "Recv");
  event(kP2pApi, "Send");
  mgpu_nccl_own(1);
  event(kCollApi, "AllReduce"); /* the driver's */
  mgpu_nccl_own(1);             /* nested: still one window */
  event(kCollApi, "AllReduce");
  mgpu_nccl_own(0);
  pthread_t t;
  pthread_create(&t, NULL, other_thread, NULL);
  pthread_join(t, NULL);
  mgpu_nccl_own(0);
  event(kCollApi, "Bogus"); /* a name NCCL does not have: "other" */
  if (strcmp(mode, "blind") == 0) nccl_mask = 0;
  if (strcmp(mode, "env") == 0) setenv("NCCL_PROFILER_PLUGIN", "none", 1);
  if (strcmp(getenv("NVSHMEM_DISABLE_NCCL") ? getenv("NVSHMEM_DISABLE_NCCL") : "", "1") != 0)
    printf("NVSHMEM_DISABLE_NCCL is not 1\n");
  prof->finalize(context);
  return mgpu_finish(&ctx);
}
