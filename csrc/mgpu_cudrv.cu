/*
 * mgpu_cudrv.cu — the CUDA driver API without linking libcuda, and SM limits (green contexts).
 *
 * Programs of the course never link libcuda: a build machine without the NVIDIA driver (CI,
 * a laptop) has no libcuda to link against, and the pip wheels of the toolkit ship no stub.
 * The runtime hands out driver entry points instead (cudaGetDriverEntryPointByVersion), the way
 * NCCL and PyTorch reach the driver API. This file resolves the few the course needs:
 *   - mgpu_cu_api(): virtual memory management (cuMemCreate, export/import of shareable
 *     handles, address reservation, mapping, access), for drivers and, through the table a
 *     driver hands them, learner functions. Never cuMulticast*: NVLink multicast stays off.
 *   - mgpu_sm_limit_*: green contexts that confine learner kernels to a number of SMs
 *     (docs/protocol.md §4, "SM limits"; docs/harness.md §9).
 */
#include "mgpu_internal.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The driver ABI the entry points are asked for: CUDA 12.5, the first with
 * cuGreenCtxStreamCreate (green contexts themselves came in 12.4; asking for 12.4 gets
 * cudaDriverEntryPointVersionNotSufficent for it, seen with driver 580 on an H100). Older
 * functions come in their newest form as of 12.5, which is the form cuda.h declares. */
static const unsigned kABI = 12050;

static void cudrv_fail(int line, const char *call, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  mgpu_fail("harness", call, __FILE__, line, 0, msg);
}

static void *entry(const char *name) {
  void *fn = NULL;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, kABI, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !fn)
    cudrv_fail(__LINE__, "cudaGetDriverEntryPointByVersion",
               "the CUDA driver does not provide %s (ABI %u): %s, query result %d; the driver "
               "is older than this program needs",
               name, kABI, e != cudaSuccess ? cudaGetErrorString(e) : "no error", (int)q);
  return fn;
}

#define RESOLVE(tbl, field, name) (tbl).field = (decltype((tbl).field))entry(name)

/* ---- the learner-facing table ------------------------------------------------------------- */

static mgpu_cu g_cu;
static int g_cu_ready;

const mgpu_cu *mgpu_cu_api(void) {
  if (g_cu_ready) return &g_cu;
  RESOLVE(g_cu, GetErrorName, "cuGetErrorName");
  RESOLVE(g_cu, DeviceGet, "cuDeviceGet");
  RESOLVE(g_cu, MemGetAllocationGranularity, "cuMemGetAllocationGranularity");
  RESOLVE(g_cu, MemCreate, "cuMemCreate");
  RESOLVE(g_cu, MemRelease, "cuMemRelease");
  RESOLVE(g_cu, MemExportToShareableHandle, "cuMemExportToShareableHandle");
  RESOLVE(g_cu, MemImportFromShareableHandle, "cuMemImportFromShareableHandle");
  RESOLVE(g_cu, MemAddressReserve, "cuMemAddressReserve");
  RESOLVE(g_cu, MemAddressFree, "cuMemAddressFree");
  RESOLVE(g_cu, MemMap, "cuMemMap");
  RESOLVE(g_cu, MemUnmap, "cuMemUnmap");
  RESOLVE(g_cu, MemSetAccess, "cuMemSetAccess");
  g_cu_ready = 1;
  return &g_cu;
}

/* ---- what the harness keeps to itself: green contexts ------------------------------------ */

static struct {
  int ready;
  CUresult (*GetErrorName)(CUresult, const char **);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DeviceGetDevResource)(CUdevice, CUdevResource *, CUdevResourceType);
  CUresult (*DevSmResourceSplitByCount)(CUdevResource *, unsigned int *, const CUdevResource *,
                                        CUdevResource *, unsigned int, unsigned int);
  CUresult (*DevResourceGenerateDesc)(CUdevResourceDesc *, CUdevResource *, unsigned int);
  CUresult (*GreenCtxCreate)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned int);
  CUresult (*GreenCtxDestroy)(CUgreenCtx);
  CUresult (*CtxFromGreenCtx)(CUcontext *, CUgreenCtx);
  CUresult (*GreenCtxStreamCreate)(CUstream *, CUgreenCtx, unsigned int, int);
  CUresult (*GreenCtxRecordEvent)(CUgreenCtx, CUevent);
  CUresult (*GreenCtxWaitEvent)(CUgreenCtx, CUevent);
  CUresult (*StreamGetGreenCtx)(CUstream, CUgreenCtx *);
  CUresult (*StreamDestroy)(CUstream);
  CUresult (*CtxGetCurrent)(CUcontext *);
  CUresult (*CtxSetCurrent)(CUcontext);
} G;

static void green_api(void) {
  if (G.ready) return;
  RESOLVE(G, GetErrorName, "cuGetErrorName");
  RESOLVE(G, DeviceGet, "cuDeviceGet");
  RESOLVE(G, DeviceGetDevResource, "cuDeviceGetDevResource");
  RESOLVE(G, DevSmResourceSplitByCount, "cuDevSmResourceSplitByCount");
  RESOLVE(G, DevResourceGenerateDesc, "cuDevResourceGenerateDesc");
  RESOLVE(G, GreenCtxCreate, "cuGreenCtxCreate");
  RESOLVE(G, GreenCtxDestroy, "cuGreenCtxDestroy");
  RESOLVE(G, CtxFromGreenCtx, "cuCtxFromGreenCtx");
  RESOLVE(G, GreenCtxStreamCreate, "cuGreenCtxStreamCreate");
  RESOLVE(G, GreenCtxRecordEvent, "cuGreenCtxRecordEvent");
  RESOLVE(G, GreenCtxWaitEvent, "cuGreenCtxWaitEvent");
  RESOLVE(G, StreamGetGreenCtx, "cuStreamGetGreenCtx");
  RESOLVE(G, StreamDestroy, "cuStreamDestroy");
  RESOLVE(G, CtxGetCurrent, "cuCtxGetCurrent");
  RESOLVE(G, CtxSetCurrent, "cuCtxSetCurrent");
  G.ready = 1;
}

static void check_cu(CUresult r, const char *call, int line) {
  const char *name = NULL;
  char msg[256];
  if (r == CUDA_SUCCESS) return;
  if (G.GetErrorName) G.GetErrorName(r, &name);
  snprintf(msg, sizeof msg, "CUDA driver call failed: %s (%d)", name ? name : "?", (int)r);
  mgpu_fail("harness", call, __FILE__, line, (long)r, msg);
}
#define HCU(call) check_cu((call), #call, __LINE__)

static void check_rt(cudaError_t e, const char *call, int line) {
  if (e != cudaSuccess) mgpu_check_cuda(e, call, __FILE__, line);
}
#define HRT(call) check_rt((call), #call, __LINE__)

struct mgpu_smlimit {
  int device, sms;
  CUgreenCtx green;
  CUcontext as_ctx; /* the green context as a CUcontext (cuCtxFromGreenCtx) */
  CUcontext prev;   /* what was current at enter */
  CUstream stream;
  cudaEvent_t after, join;
  int inside;
};

mgpu_smlimit *mgpu_sm_limit_create(int device, int sms) {
  mgpu_smlimit *l;
  CUdevice dev;
  CUdevResource all, group, rest;
  CUdevResourceDesc desc;
  unsigned int nb = 1;
  int saved = 0;
  green_api();
  l = (mgpu_smlimit *)calloc(1, sizeof *l);
  if (!l) cudrv_fail(__LINE__, "mgpu_sm_limit_create", "out of host memory");
  HRT(cudaGetDevice(&saved));
  HRT(cudaSetDevice(device));
  HRT(cudaFree(0)); /* the primary context exists before the green one (cuGreenCtxCreate's advice) */
  HCU(G.DeviceGet(&dev, device));
  memset(&all, 0, sizeof all);
  memset(&group, 0, sizeof group);
  memset(&rest, 0, sizeof rest);
  HCU(G.DeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
  if (sms < 1 || (unsigned)sms > all.sm.smCount)
    cudrv_fail(__LINE__, "mgpu_sm_limit_create", "device %d has %u SMs; a limit of %d is not possible",
               device, all.sm.smCount, sms);
  HCU(G.DevSmResourceSplitByCount(&group, &nb, &all, &rest, 0, (unsigned)sms));
  if (nb < 1)
    cudrv_fail(__LINE__, "cuDevSmResourceSplitByCount", "device %d: no group of %d SMs (it has %u, "
               "partitions of at least %u)", device, sms, all.sm.smCount, all.sm.minSmPartitionSize);
  HCU(G.DevResourceGenerateDesc(&desc, &group, 1));
  HCU(G.GreenCtxCreate(&l->green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  HCU(G.CtxFromGreenCtx(&l->as_ctx, l->green));
  HCU(G.GreenCtxStreamCreate(&l->stream, l->green, CU_STREAM_NON_BLOCKING, 0));
  /* Events of the primary context: cuGreenCtxRecordEvent takes events of the same primary
   * context as the green one. */
  HRT(cudaEventCreateWithFlags(&l->after, cudaEventDisableTiming));
  HRT(cudaEventCreateWithFlags(&l->join, cudaEventDisableTiming));
  l->device = device;
  l->sms = (int)group.sm.smCount;
  HRT(cudaSetDevice(saved));
  return l;
}

int mgpu_sm_limit_sms(const mgpu_smlimit *l) { return l ? l->sms : 0; }

cudaStream_t mgpu_sm_limit_stream(const mgpu_smlimit *l) { return l ? (cudaStream_t)l->stream : 0; }

void mgpu_sm_limit_enter(mgpu_smlimit *l, cudaStream_t after) {
  if (!l || l->inside) cudrv_fail(__LINE__, "mgpu_sm_limit_enter", l ? "entered twice" : "no limit");
  HCU(G.CtxGetCurrent(&l->prev));
  HRT(cudaEventRecord(l->after, after));
  /* Everything later queued in the green context, on any of its streams, waits for `after`. */
  HCU(G.GreenCtxWaitEvent(l->green, (CUevent)l->after));
  HCU(G.CtxSetCurrent(l->as_ctx));
  l->inside = 1;
}

void mgpu_sm_limit_leave(mgpu_smlimit *l, cudaStream_t join, const char *what) {
  CUgreenCtx now = NULL;
  CUcontext cur = NULL;
  if (!l || !l->inside) cudrv_fail(__LINE__, "mgpu_sm_limit_leave", "not entered");
  HCU(G.CtxGetCurrent(&cur));
  if (cur == l->as_ctx) HCU(G.StreamGetGreenCtx((CUstream)0, &now));
  if (cur != l->as_ctx || now != l->green) {
    char msg[600];
    snprintf(msg, sizeof msg,
             "%s left its SM limit: the context current on this thread when it returned was not "
             "the %d-SM green context the driver made current for it (a cudaSetDevice, a "
             "cudaDeviceReset, or a context of its own replaces it, and work queued then may run "
             "on every SM of the GPU). Keep to the stream you are given and do not change the "
             "current device or context.",
             what ? what : "your code", l->sms);
    mgpu_fail("policy", what ? what : "SM limit", __FILE__, __LINE__, 0, msg);
  }
  /* Everything queued in the green context so far, whatever its stream. */
  HCU(G.GreenCtxRecordEvent(l->green, (CUevent)l->join));
  HCU(G.CtxSetCurrent(l->prev));
  HRT(cudaStreamWaitEvent(join, l->join, 0));
  l->inside = 0;
}

void mgpu_sm_limit_destroy(mgpu_smlimit *l) {
  int saved = 0;
  if (!l) return;
  if (l->inside) cudrv_fail(__LINE__, "mgpu_sm_limit_destroy", "still entered");
  HRT(cudaGetDevice(&saved));
  HRT(cudaSetDevice(l->device));
  HRT(cudaDeviceSynchronize());
  HCU(G.StreamDestroy(l->stream));
  HRT(cudaEventDestroy(l->after));
  HRT(cudaEventDestroy(l->join));
  HCU(G.GreenCtxDestroy(l->green));
  HRT(cudaSetDevice(saved));
  free(l);
}
