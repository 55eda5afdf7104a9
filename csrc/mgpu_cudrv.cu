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
#include <unistd.h>

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

/* ---- symmetric buffers (docs/protocol.md §5) ----------------------------------------------- */

static CUmemAllocationProp symm_prop(int device) {
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

static void symm_map(const mgpu_cu *cu, CUmemGenericAllocationHandle h, size_t size, int device,
                     CUdeviceptr *ptr) {
  CUmemAccessDesc a;
  *ptr = 0;
  HCU(cu->MemAddressReserve(ptr, size, 0, 0, 0));
  HCU(cu->MemMap(*ptr, size, 0, h, 0));
  memset(&a, 0, sizeof a);
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = device;
  a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  HCU(cu->MemSetAccess(*ptr, size, &a, 1));
}

void mgpu_symm_alloc(mgpu_ctx *ctx, const char *key, size_t bytes, mgpu_symm *s) {
  const mgpu_cu *cu = mgpu_cu_api();
  if (!ctx || !s || !key) cudrv_fail(__LINE__, "mgpu_symm_alloc", "NULL argument");
  if (ctx->device < 0) cudrv_fail(__LINE__, "mgpu_symm_alloc", "this rank has no CUDA device");
  if (ctx->world > MGPU_SYMM_MAX_RANKS)
    cudrv_fail(__LINE__, "mgpu_symm_alloc", "symmetric buffers span at most %d ranks, this job has %d",
               MGPU_SYMM_MAX_RANKS, ctx->world);
  if (ctx->local_world != ctx->world)
    cudrv_fail(__LINE__, "mgpu_symm_alloc", "symmetric buffers need every rank on one host (%d of %d here)",
               ctx->local_world, ctx->world);
  if (bytes == 0) cudrv_fail(__LINE__, "mgpu_symm_alloc", "zero bytes");
  memset(s, 0, sizeof *s);
  s->rank = ctx->rank;
  s->world = ctx->world;
  CUmemAllocationProp p = symm_prop(ctx->device);
  size_t g = 0;
  HCU(cu->MemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  if (g == 0) g = 2u << 20;
  s->bytes = (bytes + g - 1) / g * g;
  /* Every rank must have asked for the same size: a mismatch would map past a buffer's end. */
  for (int r = 0; r < ctx->world; r++) {
    unsigned long long theirs = (unsigned long long)s->bytes;
    mgpu_share(ctx, key, &theirs, sizeof theirs, r);
    if (theirs != (unsigned long long)s->bytes)
      cudrv_fail(__LINE__, "mgpu_symm_alloc", "\"%s\": rank %d asked for %llu bytes, rank %d for %llu",
                 key, r, theirs, ctx->rank, (unsigned long long)s->bytes);
  }
  CUmemGenericAllocationHandle h = 0;
  HCU(cu->MemCreate(&h, s->bytes, &p, 0));
  CUdeviceptr mine = 0;
  symm_map(cu, h, s->bytes, ctx->device, &mine);
  s->handle[ctx->rank] = (unsigned long long)h;
  s->ptr[ctx->rank] = (void *)(uintptr_t)mine;
  int saved = 0;
  HRT(cudaGetDevice(&saved));
  HRT(cudaSetDevice(ctx->device));
  HRT(cudaMemset(s->ptr[ctx->rank], 0, s->bytes));
  HRT(cudaDeviceSynchronize());
  HRT(cudaSetDevice(saved));
  int fd = -1;
  HCU(cu->MemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  int fds[MGPU_SYMM_MAX_RANKS];
  mgpu_share_fds(ctx, key, &fd, 1, fds);
  for (int r = 0; r < ctx->world; r++) {
    if (r != ctx->rank) {
      CUmemGenericAllocationHandle ph = 0;
      CUdeviceptr ptr = 0;
      HCU(cu->MemImportFromShareableHandle(&ph, (void *)(uintptr_t)fds[r], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
      symm_map(cu, ph, s->bytes, ctx->device, &ptr);
      s->handle[r] = (unsigned long long)ph;
      s->ptr[r] = (void *)(uintptr_t)ptr;
    }
    close(fds[r]);
  }
  close(fd);
  /* Nobody touches a peer's buffer before its owner has zeroed it. */
  mgpu_barrier(ctx, key);
}

void mgpu_symm_free(mgpu_ctx *ctx, mgpu_symm *s) {
  const mgpu_cu *cu = mgpu_cu_api();
  if (!s || s->world == 0) return;
  HRT(cudaDeviceSynchronize());
  mgpu_barrier(ctx, "mgpu_symm_free");
  for (int r = 0; r < s->world; r++) {
    if (!s->ptr[r]) continue;
    HCU(cu->MemUnmap((CUdeviceptr)(uintptr_t)s->ptr[r], s->bytes));
    HCU(cu->MemAddressFree((CUdeviceptr)(uintptr_t)s->ptr[r], s->bytes));
    HCU(cu->MemRelease((CUmemGenericAllocationHandle)s->handle[r]));
  }
  memset(s, 0, sizeof *s);
}
