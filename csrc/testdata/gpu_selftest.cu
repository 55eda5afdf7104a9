// gpu_selftest.cu — exercises the CUDA harness on a real GPU. Not an exercise: a test of
// csrc/ itself. Expectations that fail print "SELFTEST FAIL" and the program exits 3; the
// records it writes are checked further by selftest_check.py.
// Build: see docs/harness.md ("Building a driver"). Run with 1 or more ranks.
#include <nccl.h>

#include "mgpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;
#define EXPECT(cond, ...)                                                                   \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      failures++;                                                                           \
      fprintf(stderr, "SELFTEST FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);              \
      fprintf(stderr, __VA_ARGS__);                                                         \
      fprintf(stderr, "\n");                                                                \
    }                                                                                       \
  } while (0)

__global__ void k_copy(float *dst, const float *src, long long n) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = src[i];
}

__global__ void k_bad(float *p) { p[threadIdx.x] = 1.0f; }

struct copy_arg {
  float *dst, *src;
  long long n;
  cudaStream_t side;
};

static void op_kernel(void *a, int iter, cudaStream_t s) {
  copy_arg *c = (copy_arg *)a;
  (void)iter;
  k_copy<<<264, 512, 0, s>>>(c->dst, c->src, c->n);
  MGPU_KERNEL();
}
static void op_memcpy(void *a, int iter, cudaStream_t s) {
  copy_arg *c = (copy_arg *)a;
  (void)iter;
  MGPU_CUDA(cudaMemcpyAsync(c->dst, c->src, (size_t)c->n * 4, cudaMemcpyDeviceToDevice, s));
}
/* The adversary: the work goes to a non-blocking side stream that `s` never waits for. */
static void op_side(void *a, int iter, cudaStream_t s) {
  copy_arg *c = (copy_arg *)a;
  (void)iter;
  (void)s;
  k_copy<<<264, 512, 0, c->side>>>(c->dst, c->src, c->n);
  MGPU_KERNEL();
}
/* Blocks the host on the gated stream: the harness must fall back to ungated timing. */
static void op_sync(void *a, int iter, cudaStream_t s) {
  copy_arg *c = (copy_arg *)a;
  (void)iter;
  k_copy<<<264, 512, 0, s>>>(c->dst, c->src, c->n);
  MGPU_KERNEL();
  MGPU_CUDA(cudaStreamSynchronize(s));
}

/* Peer copy enqueued on a non-blocking stream of the source device. */
static void op_peer_side(void *a, int iter, cudaStream_t s) {
  copy_arg *c = (copy_arg *)a;
  (void)iter;
  (void)s;
  MGPU_CUDA(cudaMemcpyAsync(c->dst, c->src, (size_t)c->n * 4, cudaMemcpyDefault, c->side));
}

struct ar_arg {
  float *buf;
  long long n;
  ncclComm_t comm;
};
static void op_allreduce(void *a, int iter, cudaStream_t s) {
  ar_arg *c = (ar_arg *)a;
  (void)iter;
  MGPU_NCCL(ncclAllReduce(c->buf, c->buf, (size_t)c->n, ncclFloat, ncclSum, c->comm, s));
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  int nodevice = getenv("SELFTEST_NODEVICE") != NULL;
  int dev;
  if (nodevice) { /* one process drives every GPU */
    mgpu_init_nodevice(&ctx, argc, argv);
    EXPECT(ctx.device == -1 && ctx.num_devices > 0, "device %d of %d", ctx.device,
           ctx.num_devices);
    dev = ctx.num_devices - 1; /* not device 0, to catch code that assumes it */
    MGPU_CUDA(cudaSetDevice(dev));
  } else {
    mgpu_init(&ctx, argc, argv);
    EXPECT(ctx.device >= 0 && ctx.num_devices > 0, "device %d of %d", ctx.device,
           ctx.num_devices);
    dev = ctx.device;
  }
  if (getenv("SELFTEST_FAULT")) { /* an illegal address: must be charged to the learner */
    k_bad<<<1, 32>>>((float *)16);
    MGPU_KERNEL();
    MGPU_CUDA(cudaDeviceSynchronize());
    fprintf(stderr, "SELFTEST FAIL: the fault was not reported\n");
    return 3;
  }
  cudaStream_t s;
  MGPU_CUDA(cudaStreamCreate(&s));
  long long n = mgpu_case_n(&ctx, "n", (1 << 20) + 3);

  /* 1. exact fill matches the host function; host-want comparison passes. */
  mgpu_buf a = mgpu_alloc((size_t)n * 4, dev);
  float *want = (float *)malloc((size_t)n * 4);
  for (long long i = 0; i < n; i++) want[i] = mgpu_exact_value(ctx.seed, ctx.rank, 7, i);
  mgpu_fill_exact_f32((float *)a.ptr, n, ctx.seed, ctx.rank, 7, s);
  MGPU_CUDA(cudaStreamSynchronize(s));
  mgpu_result r;
  int ok = mgpu_check_f32("fill-host", &a, want, n, 0, &r);
  EXPECT(ok && r.checked == n && r.bad == 0, "bad=%lld checked=%lld", r.bad, r.checked);

  /* 2. device-want comparison: one wrong value, one unwritten (poison), guards clean. */
  mgpu_buf b = mgpu_alloc((size_t)n * 4, dev);
  mgpu_fill_exact_f32((float *)b.ptr, n, ctx.seed, ctx.rank, 7, s);
  float bogus = 1000.0f;
  unsigned poison = 0xFFFFFFFFu;
  MGPU_CUDA(cudaMemcpyAsync((float *)b.ptr + 5, &bogus, 4, cudaMemcpyHostToDevice, s));
  MGPU_CUDA(cudaMemcpyAsync((float *)b.ptr + n - 1, &poison, 4, cudaMemcpyHostToDevice, s));
  MGPU_CUDA(cudaStreamSynchronize(s));
  ok = mgpu_check_f32_dev("cmp-dev", &b, (const float *)a.ptr, n, 0, &r);
  EXPECT(!ok && r.bad == 1 && r.unwritten == 1 && r.nfirst == 2 && r.first[0].i == 5 &&
             r.first[1].i == n - 1 && r.guard_hits == 0,
         "ok=%d bad=%lld unw=%lld nfirst=%d i0=%lld", ok, r.bad, r.unwritten, r.nfirst,
         r.nfirst ? r.first[0].i : -1);
  EXPECT(fabs(r.max_abs_err - fabs(1000.0 - want[5])) < 1e-3, "max_abs %g", r.max_abs_err);
  /* the same on the host path */
  ok = mgpu_check_f32("cmp-host", &b, want, n, 0, &r);
  EXPECT(!ok && r.bad == 1 && r.unwritten == 1 && r.first[0].i == 5, "bad=%lld unw=%lld",
         r.bad, r.unwritten);

  /* 3. a write one byte past the end hits the guard; poison re-arms it. */
  MGPU_CUDA(cudaMemset((char *)b.ptr + b.bytes, 0x00, 3));
  EXPECT(mgpu_guard_hits(&b) == 3, "guard hits %lld", mgpu_guard_hits(&b));
  MGPU_CUDA(cudaMemset((char *)b.ptr - 1, 0x00, 1));
  EXPECT(mgpu_guard_hits(&b) == 4, "guard hits %lld", mgpu_guard_hits(&b));
  mgpu_poison(&b, s);
  MGPU_CUDA(cudaStreamSynchronize(s));
  EXPECT(mgpu_guard_hits(&b) == 0, "guard hits after poison %lld", mgpu_guard_hits(&b));
  ok = mgpu_check_f32_dev("all-poison", &b, (const float *)a.ptr, n, 0, &r);
  EXPECT(!ok && r.unwritten == n && r.bad == 0, "unw=%lld bad=%lld", r.unwritten, r.bad);

  /* 4. patterns: fill matches the host bytes; partial copy shows unwritten bytes. */
  size_t pb = (size_t)n * 4 - 1; /* odd size: tail path */
  mgpu_buf p = mgpu_alloc(pb, dev);
  mgpu_fill_pattern(p.ptr, pb, ctx.seed, 3, s);
  MGPU_CUDA(cudaStreamSynchronize(s));
  unsigned char *hp = (unsigned char *)malloc(pb);
  MGPU_CUDA(cudaMemcpy(hp, p.ptr, pb, cudaMemcpyDeviceToHost));
  long long diff = 0;
  for (size_t i = 0; i < pb; i++) diff += hp[i] != mgpu_pattern_byte(ctx.seed, 3, (long long)i);
  EXPECT(diff == 0, "pattern bytes differing from host: %lld", diff);
  ok = mgpu_check_pattern("pattern-ok", &p, ctx.seed, 3, &r);
  EXPECT(ok && r.checked == (long long)pb, "bad=%lld", r.bad);
  ok = mgpu_check_pattern("pattern-wrong-iter", &p, ctx.seed, 4, &r);
  EXPECT(!ok && r.bad + r.unwritten > (long long)pb / 2, "bad=%lld", r.bad);
  mgpu_poison(&p, s);
  mgpu_fill_pattern(p.ptr, pb / 2, ctx.seed, 3, s); /* "copies" only the first half */
  ok = mgpu_check_pattern("pattern-half", &p, ctx.seed, 3, &r);
  EXPECT(!ok && r.unwritten > (long long)pb / 2 * 99 / 100 && r.first[0].i == (long long)(pb / 2),
         "unw=%lld first=%lld", r.unwritten, r.nfirst ? r.first[0].i : -1);

  /* 5. timing on 256 MiB: honest kernel vs memcpy; side-stream adversary; host-blocking op. */
  long long tn = mgpu_case_n(&ctx, "tn", 64LL << 20);
  mgpu_buf src = mgpu_alloc((size_t)tn * 4, dev), dst = mgpu_alloc((size_t)tn * 4, dev);
  mgpu_fill_exact_f32((float *)src.ptr, tn, ctx.seed, ctx.rank, 0, s);
  copy_arg ca = {(float *)dst.ptr, (float *)src.ptr, tn, 0};
  MGPU_CUDA(cudaStreamCreateWithFlags(&ca.side, cudaStreamNonBlocking));
  mgpu_timing t = {"copy", (double)tn * 4, 1.0, "algbw", 0, 0};
  mgpu_time_pair(&ctx, &t, op_kernel, &ca, op_memcpy, &ca, s);
  t.case_name = "side";
  mgpu_time_pair(&ctx, &t, op_side, &ca, op_memcpy, &ca, s);
  t.case_name = "sync";
  mgpu_time_pair(&ctx, &t, op_sync, &ca, op_memcpy, &ca, s);

  /* 7. single process, two GPUs: a peer copy into device 0 timed on a device-0 stream, and an
   * adversary that does the copy on a non-blocking stream of the other device. */
  if (nodevice && ctx.num_devices >= 2) {
    int other = 0;
    MGPU_CUDA(cudaDeviceEnablePeerAccess(other, 0));
    MGPU_CUDA(cudaSetDevice(other));
    MGPU_CUDA(cudaDeviceEnablePeerAccess(dev, 0));
    cudaStream_t s0, side1;
    MGPU_CUDA(cudaStreamCreate(&s0));
    mgpu_buf d0 = mgpu_alloc((size_t)tn * 4, other);
    MGPU_CUDA(cudaSetDevice(dev));
    MGPU_CUDA(cudaStreamCreateWithFlags(&side1, cudaStreamNonBlocking));
    MGPU_CUDA(cudaSetDevice(other));
    copy_arg pa = {(float *)d0.ptr, (float *)src.ptr, tn, side1};
    mgpu_timing pt = {"peer", (double)tn * 4, 1.0, "algbw", 0, 0};
    mgpu_time_pair(&ctx, &pt, op_memcpy, &pa, op_memcpy, &pa, s0);
    EXPECT(mgpu_check_f32_dev("peer-copy", &d0, (const float *)src.ptr, tn, 0, &r),
           "peer copy bad=%lld unw=%lld", r.bad, r.unwritten);
    pt.case_name = "peer-side";
    mgpu_time_pair(&ctx, &pt, op_peer_side, &pa, op_memcpy, &pa, s0);
    int cur = -1;
    MGPU_CUDA(cudaGetDevice(&cur));
    EXPECT(cur == other, "current device changed by the harness: %d", cur);
  }

  /* 6. NCCL all-reduce among the ranks: unique id through mgpu_share, timing in lockstep. */
  if (ctx.world > 1) {
    ncclUniqueId id;
    ncclComm_t comm;
    mgpu_nccl_unique_id(&ctx, &id);
    MGPU_NCCL(ncclCommInitRank(&comm, ctx.world, id, ctx.rank));
    long long an = 1 << 24;
    mgpu_buf ab = mgpu_alloc((size_t)an * 4, dev);
    mgpu_fill_exact_f32((float *)ab.ptr, an, ctx.seed, ctx.rank, 0, s);
    ar_arg aa = {(float *)ab.ptr, an, comm};
    op_allreduce(&aa, 0, s);
    MGPU_CUDA(cudaStreamSynchronize(s));
    float *aw = (float *)malloc((size_t)an * 4);
    for (long long i = 0; i < an; i++) {
      float sum = 0;
      for (int rr = 0; rr < ctx.world; rr++) sum += mgpu_exact_value(ctx.seed, rr, 0, i);
      aw[i] = sum;
    }
    ok = mgpu_check_f32("allreduce", &ab, aw, an, 0, &r);
    EXPECT(ok, "allreduce bad=%lld", r.bad);
    mgpu_timing at = {"allreduce", (double)an * 4, 2.0 * (ctx.world - 1) / ctx.world, "busbw", 0, 0};
    mgpu_time_pair(&ctx, &at, op_allreduce, &aa, op_allreduce, &aa, s);
    MGPU_NCCL(ncclCommDestroy(comm));
  }

  mgpu_value("selftest_failures", failures, "count");
  int rc = mgpu_finish(&ctx);
  return failures ? 3 : rc;
}
