/*
 * mgpu_cuda.cu — the CUDA part of the harness: error checks, device selection, guarded and
 * poisoned buffers, exact fills, comparisons on the GPU, and the timing protocol.
 *
 * Works with one process per GPU (mgpu_init) and with one process driving several GPUs
 * (mgpu_init_nodevice): every call that touches a buffer switches to the buffer's device and
 * restores the caller's current device.
 */
#include "mgpu_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MGPU_GUARD_BYTES 4096
#define MGPU_GUARD_KEY 0x6775617264626e64ULL /* "guardbnd" */
#define MGPU_MAX_DEVICES 64
#define MGPU_STAGE_BYTES (64u << 20)

/* ---- errors ------------------------------------------------------------------------------ */

/* Errors raised by a kernel that already ran (they surface at the next synchronizing call and
 * make the context unusable). Course drivers and harness kernels are tested with the reference
 * solution, so such an error is charged to the learner wherever it surfaces. */
static int is_async_fault(cudaError_t e) {
  switch (e) {
  case cudaErrorIllegalAddress:
  case cudaErrorLaunchTimeout:
  case cudaErrorAssert:
  case cudaErrorHardwareStackError:
  case cudaErrorIllegalInstruction:
  case cudaErrorMisalignedAddress:
  case cudaErrorInvalidAddressSpace:
  case cudaErrorInvalidPc:
  case cudaErrorLaunchFailure:
  case cudaErrorTensorMemoryLeak:
    return 1;
  default:
    return 0;
  }
}

static void fail_cuda(cudaError_t err, const char *call, const char *file, int line,
                      const char *where) {
  char msg[512];
  if (is_async_fault(err) && mgpu__env_flag("MGPU_SYNC_CHECK")) {
    where = "learner";
    snprintf(msg, sizeof msg, "%s: %s (a kernel failed while running; with MGPU_SYNC_CHECK=1 it "
             "is the last one launched before this check)",
             cudaGetErrorName(err), cudaGetErrorString(err));
  } else if (is_async_fault(err)) {
    where = "learner";
    snprintf(msg, sizeof msg,
             "%s: %s (a kernel failed before this call returned; rerun with MGPU_SYNC_CHECK=1 "
             "to stop at the launch that failed)",
             cudaGetErrorName(err), cudaGetErrorString(err));
  } else {
    snprintf(msg, sizeof msg, "%s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
  }
  mgpu_fail(where, call, file, line, (long)err, msg);
}

extern "C" void mgpu_check_cuda(cudaError_t err, const char *call, const char *file, int line) {
  if (err == cudaSuccess) return;
  fail_cuda(err, call, file, line, mgpu_where_for(file));
}

/* Set while a gated sample is being queued: synchronizing then would wait for the gate. */
static int g_queueing_gated;

extern "C" void mgpu_wait_or_hang(const mgpu_ctx *ctx, cudaStream_t stream, double timeout_s,
                                  const char *what, const char *hint) {
  cudaEvent_t ev;
  const double t0 = mgpu_now_us();
  if (!what) what = "the learner's work";
  MGPU_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  MGPU_CUDA(cudaEventRecord(ev, stream));
  for (;;) {
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) mgpu_check_cuda(e, what, "", 0);
    if (mgpu_now_us() - t0 > timeout_s * 1e6) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s did not finish within %.0f s on rank %d of %d: %s", what,
               timeout_s, ctx ? ctx->rank : -1, ctx ? ctx->world : 0,
               hint && *hint ? hint : "a wait on the device for something no rank sends");
      mgpu_fail("learner", what, "", 0, 0, msg);
    }
    usleep(200);
  }
  MGPU_CUDA(cudaEventDestroy(ev));
}

extern "C" void mgpu_check_kernel(const char *file, int line) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) fail_cuda(err, "kernel launch", file, line, mgpu_where_for(file));
  if (!g_queueing_gated && mgpu__env_flag("MGPU_SYNC_CHECK")) {
    err = cudaDeviceSynchronize();
    if (err != cudaSuccess)
      fail_cuda(err, "kernel execution (MGPU_SYNC_CHECK)", file, line, mgpu_where_for(file));
  }
}

/* Harness-internal calls. */
#define HC(call)                                                                               \
  do {                                                                                         \
    cudaError_t hc_err_ = (call);                                                              \
    if (hc_err_ != cudaSuccess) fail_cuda(hc_err_, #call, __FILE__, __LINE__, "harness");      \
  } while (0)
#define HK()                                                                                   \
  do {                                                                                         \
    cudaError_t hc_err_ = cudaGetLastError();                                                  \
    if (hc_err_ != cudaSuccess)                                                                \
      fail_cuda(hc_err_, "harness kernel launch", __FILE__, __LINE__, "harness");              \
  } while (0)

static void hfail(int line, const char *call, const char *msg) {
  mgpu_fail("harness", call, __FILE__, line, 0, msg);
}
static void dfail(int line, const char *call, const char *msg) {
  mgpu_fail("driver", call, __FILE__, line, 0, msg);
}

/* ---- devices ----------------------------------------------------------------------------- */

static unsigned long long g_used_devices; /* devices the harness has seen in use (bit mask) */
static int g_all_devices;                 /* mgpu_init_nodevice: the process drives all devices */

static void mark_device(int d) {
  if (d >= 0 && d < MGPU_MAX_DEVICES) g_used_devices |= 1ULL << d;
}

extern "C" int mgpu__cuda_setup(mgpu_ctx *ctx, int select, char *gpu, size_t gpu_len) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) fail_cuda(err, "cudaGetDeviceCount", __FILE__, __LINE__, "harness");
  ctx->num_devices = count;
  if (gpu && gpu_len) gpu[0] = 0;
  if (count == 0) hfail(__LINE__, "mgpu_init", "no CUDA device is visible to this process");
  if (!select) {
    g_all_devices = 1;
    ctx->device = -1;
    return 0;
  }
  ctx->device = ctx->local_rank % count;
  HC(cudaSetDevice(ctx->device));
  HC(cudaFree(0)); /* create the context now, not inside the first timed call */
  mark_device(ctx->device);
  {
    cudaDeviceProp prop;
    HC(cudaGetDeviceProperties(&prop, ctx->device));
    if (gpu && gpu_len) snprintf(gpu, gpu_len, "%s", prop.name);
  }
  return 0;
}

static int current_device(void) {
  int d = 0;
  HC(cudaGetDevice(&d));
  return d;
}

static int sm_count(int device) {
  int n = 0;
  HC(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
  return n > 0 ? n : 1;
}

static unsigned grid_for(long long work, int device) {
  long long blocks = (work + 255) / 256;
  long long cap = (long long)sm_count(device) * 8;
  if (blocks > cap) blocks = cap;
  if (blocks < 1) blocks = 1;
  return (unsigned)blocks;
}

/* The devices a sample must wait for: every device in nodevice mode, else the ones in use. */
static int sync_set(int extra, int *devs) {
  int n = 0, count = 0, d;
  HC(cudaGetDeviceCount(&count));
  if (count > MGPU_MAX_DEVICES) count = MGPU_MAX_DEVICES;
  for (d = 0; d < count; d++)
    if (g_all_devices || d == extra || (g_used_devices >> d & 1)) devs[n++] = d;
  return n;
}

/* ---- exact values on the device (same function as mgpu_core.c) --------------------------- */

__device__ __forceinline__ uint64_t d_mix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

__device__ __forceinline__ float d_exact(uint64_t key, long long i) {
  uint64_t h = d_mix64(key ^ (uint64_t)i);
  uint32_t hi = (uint32_t)(h >> 32);
  return (float)((int)(((uint64_t)hi * 129u) >> 32) - 64);
}

__global__ void k_fill_exact(float *p, long long n, uint64_t key) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    p[i] = d_exact(key, i);
}

__global__ void k_fill_fine(float *p, long long n, uint64_t key) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint64_t h = d_mix64(key ^ (uint64_t)i);
    p[i] = d_exact(key, i) + (float)(unsigned)(h & 63u) * 0.015625f;
  }
}

/* Pattern byte i = byte (i & 7) of mix64(key ^ (i >> 3)), little-endian. */
__global__ void k_fill_pattern64(uint64_t *p, long long words, uint64_t key) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x; w < words; w += stride)
    p[w] = d_mix64(key ^ (uint64_t)w);
}

__global__ void k_fill_pattern8(uint8_t *p, long long first, long long end, uint64_t key) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = first + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < end;
       i += stride)
    p[i] = (uint8_t)(d_mix64(key ^ (uint64_t)(i >> 3)) >> (8 * (i & 7)));
}

static void fill_pattern_key(void *dev, size_t bytes, uint64_t key, cudaStream_t s) {
  int d = current_device();
  long long words = 0;
  if (bytes == 0) return;
  if (((uintptr_t)dev & 7) == 0) {
    words = (long long)(bytes / 8);
    if (words) {
      k_fill_pattern64<<<grid_for(words, d), 256, 0, s>>>((uint64_t *)dev, words, key);
      HK();
    }
  }
  if ((long long)bytes > words * 8) {
    long long first = words * 8;
    k_fill_pattern8<<<grid_for((long long)bytes - first, d), 256, 0, s>>>(
        (uint8_t *)dev, first, (long long)bytes, key);
    HK();
  }
}

extern "C" void mgpu_fill_exact_f32(float *dev, long long n, uint64_t seed, int rank, int iter,
                                    cudaStream_t s) {
  if (n <= 0) return;
  k_fill_exact<<<grid_for(n, current_device()), 256, 0, s>>>(dev, n,
                                                             mgpu_exact_key(seed, rank, iter));
  HK();
}

extern "C" void mgpu_fill_fine_f32(float *dev, long long n, uint64_t seed, int rank, int iter,
                                   cudaStream_t s) {
  if (n <= 0) return;
  k_fill_fine<<<grid_for(n, current_device()), 256, 0, s>>>(dev, n, mgpu_exact_key(seed, rank, iter));
  HK();
}

extern "C" void mgpu_fill_pattern(void *dev, size_t bytes, uint64_t seed, int iter,
                                  cudaStream_t s) {
  fill_pattern_key(dev, bytes, mgpu_pattern_key(seed, iter), s);
}

extern "C" void *mgpu_host_alloc(const mgpu_ctx *ctx, size_t bytes) {
  void *p = NULL;
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaMallocHost(&p, bytes));
  } else if (!(p = malloc(bytes))) {
    mgpu_fail("harness", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  }
  return p;
}

extern "C" void mgpu_host_free(const mgpu_ctx *ctx, void *p) {
  if (mgpu_computes(ctx))
    MGPU_CUDA(cudaFreeHost(p));
  else
    free(p);
}

extern "C" void mgpu_fill_rank_pattern(void *dev, size_t bytes, uint64_t seed, int rank,
                                       int iter, cudaStream_t s) {
  fill_pattern_key(dev, bytes, mgpu_rank_pattern_key(seed, rank, iter), s);
}

/* ---- delays ------------------------------------------------------------------------------ */

/* Longer than any delay a driver needs; a larger value is a driver bug (typically a negative
 * length converted to unsigned), which would otherwise hold the stream until the job's timeout. */
#define MGPU_DELAY_MAX_NS (10ULL * 1000 * 1000 * 1000)

/* One thread sleeps in steps of about 1 µs until `ns` of the GPU's global timer have passed
 * (at least one step, also for ns == 0). */
static __global__ void mgpu__k_delay(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

extern "C" void mgpu_delay(cudaStream_t stream, unsigned long long ns) {
  if (ns > MGPU_DELAY_MAX_NS) {
    char msg[160];
    snprintf(msg, sizeof msg, "a delay of %llu ns is longer than the %llu ns allowed (a negative "
             "length converted to unsigned?)", ns, (unsigned long long)MGPU_DELAY_MAX_NS);
    dfail(__LINE__, "mgpu_delay", msg);
  }
  /* HK, not mgpu_check_kernel: with MGPU_SYNC_CHECK=1 the latter would synchronize, i.e. sit
   * out the delay on the host before the caller queues the work that should come late. */
  mgpu__k_delay<<<1, 1, 0, stream>>>(ns);
  HK();
}

/* ---- guarded, poisoned buffers ---------------------------------------------------------- */

struct dev_scope { /* switches to a device, restores the caller's on exit */
  int saved;
  explicit dev_scope(int d) {
    saved = current_device();
    if (d >= 0 && d != saved) HC(cudaSetDevice(d));
  }
  ~dev_scope() {
    int now = -1;
    cudaGetDevice(&now);
    if (now != saved) cudaSetDevice(saved);
  }
};

static void arm_guards(const mgpu_buf *b, cudaStream_t s) {
  fill_pattern_key(b->base, b->guard, MGPU_GUARD_KEY, s);
  fill_pattern_key((char *)b->ptr + b->bytes, b->guard, MGPU_GUARD_KEY ^ 1, s);
}

extern "C" mgpu_buf mgpu_alloc(size_t bytes, int device) {
  mgpu_buf b;
  memset(&b, 0, sizeof b);
  if (device < 0) device = current_device();
  {
    dev_scope scope(device);
    b.device = device;
    b.guard = MGPU_GUARD_BYTES;
    b.bytes = bytes;
    HC(cudaMalloc(&b.base, bytes + 2 * b.guard));
    b.ptr = (char *)b.base + b.guard;
    mark_device(device);
    mgpu_poison(&b, 0);
    HC(cudaStreamSynchronize(0));
  }
  return b;
}

extern "C" void mgpu_free(mgpu_buf *b) {
  if (!b || !b->base) return;
  {
    dev_scope scope(b->device);
    HC(cudaFree(b->base));
  }
  memset(b, 0, sizeof *b);
}

extern "C" void mgpu_poison(mgpu_buf *b, cudaStream_t s) {
  if (!b || !b->base) dfail(__LINE__, "mgpu_poison", "buffer was not allocated by mgpu_alloc");
  dev_scope scope(b->device);
  if (b->bytes) HC(cudaMemsetAsync(b->ptr, 0xFF, b->bytes, s));
  arm_guards(b, s);
}

static long long count_guard(const uint8_t *host, size_t n, uint64_t key) {
  long long hits = 0;
  for (size_t i = 0; i < n; i++)
    if (host[i] != mgpu_pattern_byte_k(key, (long long)i)) hits++;
  return hits;
}

extern "C" long long mgpu_guard_hits(const mgpu_buf *b) {
  long long hits;
  uint8_t *h;
  if (!b || !b->base) dfail(__LINE__, "mgpu_guard_hits", "buffer was not allocated by mgpu_alloc");
  if (b->guard == 0) return 0;
  dev_scope scope(b->device);
  HC(cudaDeviceSynchronize());
  h = (uint8_t *)malloc(2 * b->guard);
  if (!h) hfail(__LINE__, "mgpu_guard_hits", "out of host memory");
  HC(cudaMemcpy(h, b->base, b->guard, cudaMemcpyDeviceToHost));
  HC(cudaMemcpy(h + b->guard, (char *)b->ptr + b->bytes, b->guard, cudaMemcpyDeviceToHost));
  hits = count_guard(h, b->guard, MGPU_GUARD_KEY) +
         count_guard(h + b->guard, b->guard, MGPU_GUARD_KEY ^ 1);
  free(h);
  return hits;
}

/* ---- comparisons ------------------------------------------------------------------------- */

struct cmp_out {
  unsigned long long bad, unwritten;
  unsigned int max_abs_bits, max_rel_bits; /* float bits of non-negative values: order kept */
  unsigned int abs_inf;                    /* an infinite error was seen */
};

__device__ __forceinline__ void atomic_max_pos(unsigned int *slot, float v) {
  atomicMax(slot, __float_as_uint(v));
}

/* The same classification as mgpu_result_add (mgpu_core.c), for float data. */
__global__ void k_cmp_f32(const float *got, const float *want, long long n, double tol,
                          cmp_out *out) {
  long long stride = (long long)gridDim.x * blockDim.x;
  unsigned long long bad = 0, unw = 0;
  float mabs = 0, mrel = 0;
  unsigned int inf = 0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float g = got[i], w = want[i];
    if (g == w || (isnan(g) && isnan(w))) continue;
    if (isnan(g)) {
      if (__float_as_uint(g) == 0xFFFFFFFFu)
        unw++;
      else
        bad++;
      continue;
    }
    double err = fabs((double)g - (double)w);
    if (!(err <= tol)) bad++;
    if (isinf(err)) {
      inf = 1;
      continue;
    }
    if (isnan(err)) continue;
    if ((float)err > mabs) mabs = (float)err;
    if (w != 0 && isfinite(w)) {
      float rel = (float)(err / fabs((double)w));
      if (rel > mrel) mrel = rel;
    }
  }
  if (bad) atomicAdd(&out->bad, bad);
  if (unw) atomicAdd(&out->unwritten, unw);
  if (mabs > 0) atomic_max_pos(&out->max_abs_bits, mabs);
  if (mrel > 0) atomic_max_pos(&out->max_rel_bits, mrel);
  if (inf) atomicMax(&out->abs_inf, 1u);
}

/* Bytes: unwritten = got 0xFF where the pattern is not 0xFF. */
__global__ void k_cmp_pattern(const uint8_t *got, long long bytes, uint64_t key, cmp_out *out) {
  long long stride = (long long)gridDim.x * blockDim.x;
  long long words = ((uintptr_t)got & 7) == 0 ? bytes / 8 : 0;
  unsigned long long bad = 0, unw = 0;
  unsigned int mabs = 0;
  for (long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x; w < words; w += stride) {
    uint64_t gw = ((const uint64_t *)got)[w], ww = d_mix64(key ^ (uint64_t)w);
    if (gw == ww) continue;
    for (int k = 0; k < 8; k++) {
      unsigned gb = (unsigned)(gw >> (8 * k)) & 0xFF, wb = (unsigned)(ww >> (8 * k)) & 0xFF;
      if (gb == wb) continue;
      if (gb == 0xFF)
        unw++;
      else
        bad++;
      unsigned d = gb > wb ? gb - wb : wb - gb;
      if (d > mabs) mabs = d;
    }
  }
  for (long long i = words * 8 + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < bytes;
       i += stride) {
    unsigned gb = got[i];
    unsigned wb = (unsigned)(d_mix64(key ^ (uint64_t)(i >> 3)) >> (8 * (i & 7))) & 0xFF;
    if (gb == wb) continue;
    if (gb == 0xFF)
      unw++;
    else
      bad++;
    unsigned d = gb > wb ? gb - wb : wb - gb;
    if (d > mabs) mabs = d;
  }
  if (bad) atomicAdd(&out->bad, bad);
  if (unw) atomicAdd(&out->unwritten, unw);
  if (mabs) atomicMax(&out->max_abs_bits, mabs); /* plain integer here */
}

/* Pinned staging for copies back to the host (one per process, grown on demand). */
static void *g_stage;
static size_t g_stage_bytes;

static void *stage(size_t bytes) {
  if (g_stage_bytes < bytes) {
    if (g_stage) HC(cudaFreeHost(g_stage));
    g_stage = NULL;
    HC(cudaHostAlloc(&g_stage, bytes, cudaHostAllocPortable));
    g_stage_bytes = bytes;
  }
  return g_stage;
}

static void check_buf(const mgpu_buf *b, size_t need, const char *call) {
  char msg[256];
  if (!b || !b->base) dfail(__LINE__, call, "buffer was not allocated by mgpu_alloc");
  if (need > b->bytes) {
    snprintf(msg, sizeof msg, "compares %zu bytes but the buffer holds %zu", need, b->bytes);
    dfail(__LINE__, call, msg);
  }
}

static cmp_out *cmp_alloc(void) {
  cmp_out *o;
  HC(cudaMalloc(&o, sizeof *o));
  HC(cudaMemset(o, 0, sizeof *o));
  return o;
}

static cmp_out cmp_fetch(cmp_out *o) {
  cmp_out h;
  HC(cudaMemcpy(&h, o, sizeof h, cudaMemcpyDeviceToHost));
  HC(cudaFree(o));
  return h;
}

static float bits_float(unsigned int u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Finds the first mismatches by index for the report, copying chunks back until 8 are known.
 * `want_at` gives the expected value of element i (host or staged device data). */
static void collect_first_f32(mgpu_result *r, const float *got_dev, const float *want_host,
                              const float *want_dev, long long n, double tol) {
  size_t chunk = MGPU_STAGE_BYTES / 8;
  float *st = (float *)stage(MGPU_STAGE_BYTES);
  float *sw = st + chunk;
  for (long long off = 0; off < n && r->nfirst < 8; off += (long long)chunk) {
    long long m = n - off < (long long)chunk ? n - off : (long long)chunk;
    const float *w = want_host ? want_host + off : sw;
    HC(cudaMemcpy(st, got_dev + off, (size_t)m * 4, cudaMemcpyDeviceToHost));
    if (!want_host) HC(cudaMemcpy(sw, want_dev + off, (size_t)m * 4, cudaMemcpyDeviceToHost));
    for (long long j = 0; j < m && r->nfirst < 8; j++) {
      if (st[j] == w[j]) continue;
      mgpu_result tmp;
      mgpu_result_init(&tmp, 1);
      mgpu_result_add(&tmp, off + j, st[j], w[j], tol);
      if (tmp.nfirst) r->first[r->nfirst++] = tmp.first[0];
    }
  }
}

extern "C" int mgpu_check_f32(const char *case_name, const mgpu_buf *got, const float *want_host,
                              long long n, double tol, mgpu_result *r) {
  mgpu_result local;
  if (!r) r = &local;
  if (n < 0) n = 0;
  check_buf(got, (size_t)n * sizeof(float), "mgpu_check_f32");
  if (n > 0 && !want_host) dfail(__LINE__, "mgpu_check_f32", "want_host is NULL");
  mgpu_result_init(r, n);
  {
    dev_scope scope(got->device);
    HC(cudaDeviceSynchronize());
    size_t chunk = MGPU_STAGE_BYTES / sizeof(float);
    float *st = (float *)stage(MGPU_STAGE_BYTES);
    const float *g = (const float *)got->ptr;
    for (long long off = 0; off < n; off += (long long)chunk) {
      long long m = n - off < (long long)chunk ? n - off : (long long)chunk;
      long long fast = 0;
      HC(cudaMemcpy(st, g + off, (size_t)m * sizeof(float), cudaMemcpyDeviceToHost));
      for (long long j = 0; j < m; j++) {
        if (st[j] == want_host[off + j]) {
          fast++;
          continue;
        }
        mgpu_result_add(r, off + j, st[j], want_host[off + j], tol);
      }
      r->checked += fast;
    }
  }
  r->guard_hits = mgpu_guard_hits(got);
  return mgpu_record_case(case_name, r, 0);
}

extern "C" int mgpu_check_f32_dev(const char *case_name, const mgpu_buf *got,
                                  const float *want_dev, long long n, double tol,
                                  mgpu_result *r) {
  mgpu_result local;
  if (!r) r = &local;
  if (n < 0) n = 0;
  check_buf(got, (size_t)n * sizeof(float), "mgpu_check_f32_dev");
  if (n > 0 && !want_dev) dfail(__LINE__, "mgpu_check_f32_dev", "want_dev is NULL");
  mgpu_result_init(r, n);
  {
    dev_scope scope(got->device);
    HC(cudaDeviceSynchronize());
    if (n > 0) {
      cmp_out *o = cmp_alloc();
      k_cmp_f32<<<grid_for(n, got->device), 256>>>((const float *)got->ptr, want_dev, n, tol, o);
      HK();
      cmp_out h = cmp_fetch(o);
      r->checked = n;
      r->bad = (long long)h.bad;
      r->unwritten = (long long)h.unwritten;
      r->max_abs_err = h.abs_inf ? INFINITY : bits_float(h.max_abs_bits);
      r->max_rel_err = bits_float(h.max_rel_bits);
      if (h.bad || h.unwritten)
        collect_first_f32(r, (const float *)got->ptr, NULL, want_dev, n, tol);
    }
  }
  r->guard_hits = mgpu_guard_hits(got);
  return mgpu_record_case(case_name, r, 0);
}

extern "C" int mgpu_check_pattern(const char *case_name, const mgpu_buf *got, uint64_t seed,
                                  int iter, mgpu_result *r) {
  mgpu_result local;
  long long n;
  uint64_t key = mgpu_pattern_key(seed, iter);
  if (!r) r = &local;
  check_buf(got, 0, "mgpu_check_pattern");
  n = (long long)got->bytes;
  mgpu_result_init(r, n);
  {
    dev_scope scope(got->device);
    HC(cudaDeviceSynchronize());
    if (n > 0) {
      cmp_out *o = cmp_alloc();
      long long work = n / 8 + 8;
      k_cmp_pattern<<<grid_for(work, got->device), 256>>>((const uint8_t *)got->ptr, n, key, o);
      HK();
      cmp_out h = cmp_fetch(o);
      r->checked = n;
      r->bad = (long long)h.bad;
      r->unwritten = (long long)h.unwritten;
      r->max_abs_err = (double)h.max_abs_bits;
      if (h.bad || h.unwritten) {
        uint8_t *st = (uint8_t *)stage(MGPU_STAGE_BYTES);
        for (long long off = 0; off < n && r->nfirst < 8; off += MGPU_STAGE_BYTES) {
          long long m = n - off < (long long)MGPU_STAGE_BYTES ? n - off : MGPU_STAGE_BYTES;
          HC(cudaMemcpy(st, (const uint8_t *)got->ptr + off, (size_t)m, cudaMemcpyDeviceToHost));
          for (long long j = 0; j < m && r->nfirst < 8; j++) {
            unsigned wb = mgpu_pattern_byte_k(key, off + j);
            if (st[j] == wb) continue;
            mgpu_mismatch *mm = &r->first[r->nfirst++];
            mm->i = off + j;
            if (st[j] == 0xFF)
              snprintf(mm->got, sizeof mm->got, "0xff(poison)");
            else
              snprintf(mm->got, sizeof mm->got, "0x%02x", st[j]);
            snprintf(mm->want, sizeof mm->want, "0x%02x", wb);
          }
        }
      }
    }
  }
  r->guard_hits = mgpu_guard_hits(got);
  return mgpu_record_case(case_name, r, 0);
}

/* ---- timing ------------------------------------------------------------------------------ */
/*
 * One sample of op X (docs/harness.md, "Timing"):
 *   1. a gate kernel is queued on the legacy default stream of every device in the sync set;
 *      it spins on a host-mapped flag (with a time-out). `stream` waits for it through an event,
 *      and so does any later work on a blocking stream of those devices.
 *   2. start event, `iters` ops, stop event are queued on `stream` (nothing runs yet).
 *   3. the ranks meet (a file all-gather of their host clocks) and agree on a release instant a
 *      little after the last arrival; each rank spins to it and sets its flag.
 *   4. every device in the set is synchronized.
 *   us      = (stop - start event time) / iters: work ordered on `stream`.
 *   wall_us = (host clock after 4 - host clock at release) / iters: everything the devices did
 *             after the release, whatever stream it was on.
 * An honest op has us ≈ wall_us (wall adds one synchronize and the gate's exit). An op that
 * queues its work on a stream `stream` does not wait for shows us << wall_us.
 * If an op blocks the host (a synchronous call that waits for the gated stream), the gate
 * times out; that op is then timed ungated: ranks meet, release, queue, synchronize, and
 * wall_us is measured from before the queueing.
 */

struct gate_state {
  volatile int *flag;      /* host view */
  volatile int *timed_out; /* host view */
  int *flag_dev, *timed_out_dev;
};
static gate_state g_gate;

__global__ void k_gate(const volatile int *flag, long long timeout_ns, int *timed_out) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  while (*flag == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if ((long long)(t - t0) > timeout_ns) {
      *(volatile int *)timed_out = 1;
      break;
    }
  }
}

static void gate_init(void) {
  void *p;
  if (g_gate.flag) return;
  HC(cudaHostAlloc(&p, 64, cudaHostAllocMapped | cudaHostAllocPortable));
  memset(p, 0, 64);
  g_gate.flag = (volatile int *)p;
  g_gate.timed_out = (volatile int *)p + 16;
  /* With unified addressing the host pointer is valid on every device. */
  g_gate.flag_dev = (int *)p;
  g_gate.timed_out_dev = (int *)p + 16;
}

typedef struct op_slot {
  const char *who;
  mgpu_op fn;
  void *arg;
  int iter;   /* next iteration index handed to fn */
  int iters;  /* ops per sample */
  int gated;  /* 0 once the gate timed out for this op */
  double *us, *wall;
  int n;
} op_slot;

typedef struct timer {
  mgpu_ctx *ctx;
  cudaStream_t stream;
  int dev;
  int devs[MGPU_MAX_DEVICES], ndevs;
  cudaEvent_t ev_start, ev_stop, ev_gate;
  double release_margin_us;
} timer;

static void sync_all(timer *tm) {
  for (int k = 0; k < tm->ndevs; k++) {
    HC(cudaSetDevice(tm->devs[k]));
    HC(cudaDeviceSynchronize());
  }
  HC(cudaSetDevice(tm->dev));
}

/* All ranks meet; returns the agreed release instant (host monotonic clock, µs). */
static double meet(timer *tm, const char *tag) {
  double now = mgpu_now_us(), latest = now;
  int w = tm->ctx->world;
  double *all = (double *)malloc(sizeof(double) * (size_t)w);
  if (!all) hfail(__LINE__, "mgpu_time_pair", "out of host memory");
  mgpu__gather(tm->ctx, tag, &now, sizeof now, all);
  for (int r = 0; r < w; r++)
    if (all[r] > latest) latest = all[r];
  free(all);
  return w > 1 ? latest + tm->release_margin_us : mgpu_now_us();
}

static void spin_until(double t_us) {
  while (mgpu_now_us() < t_us) {
  }
}

/* Runs one sample of `iters` ops. Returns 0 when the gate timed out (the sample is void). */
static int sample(timer *tm, op_slot *op, int iters, long long gate_timeout_ns, double *us,
                  double *wall) {
  double t_rel, t_end, t0;
  float ms = 0;
  int timed_out = 0;
  if (op->gated) {
    *g_gate.flag = 0;
    *g_gate.timed_out = 0;
    __sync_synchronize();
    for (int k = 0; k < tm->ndevs; k++) {
      HC(cudaSetDevice(tm->devs[k]));
      k_gate<<<1, 1, 0, cudaStreamLegacy>>>(g_gate.flag_dev, gate_timeout_ns,
                                            g_gate.timed_out_dev);
      HK();
    }
    HC(cudaSetDevice(tm->dev));
    HC(cudaEventRecord(tm->ev_gate, cudaStreamLegacy));
    HC(cudaStreamWaitEvent(tm->stream, tm->ev_gate, 0));
    HC(cudaEventRecord(tm->ev_start, tm->stream));
    g_queueing_gated = 1;
    for (int i = 0; i < iters; i++) {
      op->fn(op->arg, op->iter++, tm->stream);
      HC(cudaSetDevice(tm->dev));
    }
    g_queueing_gated = 0;
    HC(cudaEventRecord(tm->ev_stop, tm->stream));
    double rel = meet(tm, "gate");
    spin_until(rel);
    t_rel = mgpu_now_us();
    __sync_synchronize();
    *g_gate.flag = 1;
    __sync_synchronize();
    sync_all(tm);
    t_end = mgpu_now_us();
    timed_out = *g_gate.timed_out;
  } else {
    double rel = meet(tm, "nogate");
    spin_until(rel);
    t0 = mgpu_now_us();
    t_rel = t0;
    HC(cudaEventRecord(tm->ev_start, tm->stream));
    for (int i = 0; i < iters; i++) {
      op->fn(op->arg, op->iter++, tm->stream);
      HC(cudaSetDevice(tm->dev));
    }
    HC(cudaEventRecord(tm->ev_stop, tm->stream));
    sync_all(tm);
    t_end = mgpu_now_us();
  }
  HC(cudaEventElapsedTime(&ms, tm->ev_start, tm->ev_stop));
  *us = (double)ms * 1000.0 / iters;
  *wall = (t_end - t_rel) / iters;
  return !timed_out;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(const double *v, int n) {
  double *t;
  double m;
  if (n <= 0) return NAN;
  t = (double *)malloc(sizeof(double) * (size_t)n);
  if (!t) hfail(__LINE__, "mgpu_time_pair", "out of host memory");
  memcpy(t, v, sizeof(double) * (size_t)n);
  qsort(t, (size_t)n, sizeof(double), cmp_double);
  m = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  free(t);
  return m;
}

/* What every rank contributes after each round: its last samples and its elapsed time. */
struct round_info {
  double us[2], wall[2];
  double elapsed_ms;
  int voided[2];
};

static void time_ops(mgpu_ctx *ctx, const mgpu_timing *t, op_slot *ops, int nops,
                     cudaStream_t stream) {
  timer tm;
  int w, min_reps, max_reps, warmup, rounds = 0;
  double budget_ms, t_begin;
  double *max_series[2] = {NULL, NULL};
  struct round_info mine, *all;
  char msg[512];

  if (!ctx) ctx = mgpu__ctx();
  if (!ctx) hfail(__LINE__, "mgpu_time_pair", "mgpu_init was not called");
  if (!t) dfail(__LINE__, "mgpu_time_pair", "timing description is NULL");
  memset(&tm, 0, sizeof tm);
  tm.ctx = ctx;
  tm.stream = stream;
  tm.dev = current_device();
  {
    int sd = tm.dev;
    if (cudaStreamGetDevice(stream, &sd) == cudaSuccess && sd != tm.dev)
      dfail(__LINE__, "mgpu_time_pair", "the stream belongs to another device than the current one");
    (void)cudaGetLastError();
  }
  mark_device(tm.dev);
  tm.ndevs = sync_set(tm.dev, tm.devs);
  tm.release_margin_us = 400.0 + 20.0 * ctx->world;
  w = ctx->world;
  min_reps = ctx->min_reps > 0 ? ctx->min_reps : 5;
  max_reps = ctx->max_reps > 0 ? ctx->max_reps : 30;
  if (min_reps > max_reps) min_reps = max_reps;
  warmup = t->warmup > 0 ? t->warmup : 3;
  budget_ms = (ctx->perf_budget_ms > 0 ? ctx->perf_budget_ms : 20000.0) /
              (ctx->nperf_cases > 0 ? ctx->nperf_cases : 1);
  gate_init();
  HC(cudaEventCreate(&tm.ev_start));
  HC(cudaEventCreate(&tm.ev_stop));
  HC(cudaEventCreateWithFlags(&tm.ev_gate, cudaEventDisableTiming));
  all = (struct round_info *)calloc((size_t)w, sizeof *all);
  for (int k = 0; k < nops; k++) {
    ops[k].us = (double *)calloc((size_t)max_reps, sizeof(double));
    ops[k].wall = (double *)calloc((size_t)max_reps, sizeof(double));
    max_series[k] = (double *)calloc((size_t)max_reps, sizeof(double));
    ops[k].gated = 1;
    ops[k].n = 0;
    ops[k].iter = 0;
    if (!ops[k].us || !ops[k].wall || !max_series[k])
      hfail(__LINE__, "mgpu_time_pair", "out of host memory");
  }
  if (!all) hfail(__LINE__, "mgpu_time_pair", "out of host memory");
  t_begin = mgpu_now_us();

  /* Warm-up, untimed, ungated. */
  for (int i = 0; i < warmup; i++)
    for (int k = 0; k < nops; k++) {
      ops[k].fn(ops[k].arg, ops[k].iter++, stream);
      HC(cudaSetDevice(tm.dev));
    }
  sync_all(&tm);

  /* One gated op each: finds ops that block the host, and the op's cost for choosing iters.
   * Every rank adopts the slowest rank's figures, so all ranks run the same number of ops. */
  memset(&mine, 0, sizeof mine);
  mgpu__gather(ctx, "calib-meet", &mine, sizeof mine, all);
  for (int k = 0; k < nops; k++)
    mine.voided[k] = !sample(&tm, &ops[k], 1, 2000000000LL, &mine.us[k], &mine.wall[k]);
  mgpu__gather(ctx, "calib", &mine, sizeof mine, all);
  for (int k = 0; k < nops; k++) {
    double est = 0;
    int voided = 0;
    for (int r = 0; r < w; r++) {
      double e = all[r].us[k] > all[r].wall[k] ? all[r].us[k] : all[r].wall[k];
      if (e > est) est = e;
      voided |= all[r].voided[k];
    }
    if (voided) {
      ops[k].gated = 0;
      snprintf(msg, sizeof msg,
               "timing %s/%s: the operation blocks the host while its stream waits (a "
               "synchronous call?); it is timed without the start gate",
               t->case_name ? t->case_name : "", ops[k].who);
      mgpu_note("%s", msg);
      fprintf(stderr, "[rank %d] %s\n", ctx->rank, msg);
      sync_all(&tm);
    }
    if (t->iters > 0) {
      ops[k].iters = t->iters;
    } else {
      double it = ceil(1000.0 / (est > 0.5 ? est : 0.5));
      ops[k].iters = it < 1 ? 1 : it > 100000 ? 100000 : (int)it;
    }
  }

  /* Rounds: one sample of each op, back to back (ABAB across rounds). */
  while (rounds < max_reps) {
    memset(&mine, 0, sizeof mine);
    for (int k = 0; k < nops; k++)
      mine.voided[k] = !sample(&tm, &ops[k], ops[k].iters, 10000000000LL, &mine.us[k],
                               &mine.wall[k]);
    mine.elapsed_ms = (mgpu_now_us() - t_begin) / 1000.0;
    mgpu__gather(ctx, "round", &mine, sizeof mine, all);
    int voided = 0;
    double elapsed = 0;
    for (int r = 0; r < w; r++) {
      for (int k = 0; k < nops; k++)
        if (all[r].voided[k]) {
          voided = 1;
          ops[k].gated = 0;
        }
      if (all[r].elapsed_ms > elapsed) elapsed = all[r].elapsed_ms;
    }
    if (voided) { /* the round is dropped; the op that timed out goes ungated */
      sync_all(&tm);
      mgpu_note("timing %s: a start gate timed out; the round was dropped",
                t->case_name ? t->case_name : "");
      if (elapsed > 3 * budget_ms) break;
      continue;
    }
    for (int k = 0; k < nops; k++) {
      double mx = 0;
      ops[k].us[rounds] = mine.us[k];
      ops[k].wall[rounds] = mine.wall[k];
      ops[k].n = rounds + 1;
      for (int r = 0; r < w; r++)
        if (all[r].us[k] > mx) mx = all[r].us[k];
      max_series[k][rounds] = mx;
    }
    rounds++;
    if (rounds < min_reps) continue;
    if (elapsed >= budget_ms) break;
    int stable = rounds >= 2;
    for (int k = 0; k < nops && stable; k++) {
      double a = median(max_series[k], rounds - 1), b = median(max_series[k], rounds);
      if (!(fabs(b - a) <= 0.01 * fabs(a))) stable = 0;
    }
    if (stable) break;
  }

  for (int k = 0; k < nops; k++) {
    mgpu_record_timing(t->case_name, ops[k].who, t->bytes, t->factor > 0 ? t->factor : 1.0,
                       t->metric && *t->metric ? t->metric : "busbw", ops[k].us, ops[k].wall,
                       ops[k].n);
    free(max_series[k]);
  }
  free(all);
  HC(cudaEventDestroy(tm.ev_start));
  HC(cudaEventDestroy(tm.ev_stop));
  HC(cudaEventDestroy(tm.ev_gate));
}

extern "C" void mgpu_time_pair(mgpu_ctx *ctx, const mgpu_timing *t, mgpu_op yours,
                               void *yours_arg, mgpu_op baseline, void *baseline_arg,
                               cudaStream_t stream) {
  op_slot ops[2];
  if (!ctx) ctx = mgpu__ctx();
  if (!ctx || !ctx->perf) return;
  if (!yours || !baseline) dfail(__LINE__, "mgpu_time_pair", "an operation is NULL");
  memset(ops, 0, sizeof ops);
  ops[0].who = "yours";
  ops[0].fn = yours;
  ops[0].arg = yours_arg;
  ops[1].who = "baseline";
  ops[1].fn = baseline;
  ops[1].arg = baseline_arg;
  time_ops(ctx, t, ops, 2, stream);
  for (int k = 0; k < 2; k++) {
    free(ops[k].us);
    free(ops[k].wall);
  }
}

extern "C" double mgpu_time_one(mgpu_ctx *ctx, const mgpu_timing *t, const char *who, mgpu_op op,
                                void *arg, cudaStream_t stream) {
  op_slot ops[1];
  double m;
  if (!ctx) ctx = mgpu__ctx();
  if (!ctx || !ctx->perf) return NAN;
  if (!op) dfail(__LINE__, "mgpu_time_one", "the operation is NULL");
  memset(ops, 0, sizeof ops);
  ops[0].who = who && *who ? who : "yours";
  ops[0].fn = op;
  ops[0].arg = arg;
  time_ops(ctx, t, ops, 1, stream);
  m = median(ops[0].us, ops[0].n);
  free(ops[0].us);
  free(ops[0].wall);
  return m;
}
