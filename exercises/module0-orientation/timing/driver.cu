/*
 * module0/timing driver: hands the learner's time_copy_gbps a ready copy operation and compares
 * the figure it returns with the harness's own measurement of the same operation.
 *
 * One process, one GPU (launcher "single"). Cases (MGPU_CASES; n is bytes per copy):
 *   "sm-copy..." a copy kernel on a few SMs (slower than the copy below);
 *   anything else cudaMemcpyAsync device to device.
 * Two operations of different speeds make a figure that does not come from a measurement fail.
 *
 * Each case runs 3 rounds of (harness measures, learner measures); the medians of the 3 are
 * compared: the learner's must lie within ±5 % of the harness's. A figure above 1.25× the
 * harness's is faster than the copy can run: the learner timed the launch, not the copy.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"

enum { kRounds = 3, kSamples = 5 };

/* ---- the operations the learner times --------------------------------------------------- */

typedef struct copy_arg {
  void *dst;
  const void *src;
  size_t bytes;
  int sm_copy; /* 0: cudaMemcpyAsync, 1: copy kernel */
  long long calls;
} copy_arg;

/* 16-byte copies by a fixed, small grid: a device-to-device copy that SMs do, more slowly than
 * cudaMemcpyAsync. Buffers from cudaMalloc are 256-byte aligned; bytes is a multiple of 16. */
__global__ void k_copy16(const int4 *__restrict__ src, int4 *__restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

static void copy_op_impl(void *p, cudaStream_t stream) {
  copy_arg *a = (copy_arg *)p;
  a->calls++;
  if (a->sm_copy) {
    k_copy16<<<16, 512, 0, stream>>>((const int4 *)a->src, (int4 *)a->dst, a->bytes / 16);
    MGPU_KERNEL();
  } else {
    MGPU_CUDA(cudaMemcpyAsync(a->dst, a->src, a->bytes, cudaMemcpyDeviceToDevice, stream));
  }
}

/* ---- the harness's measurement ------------------------------------------------------------ */

static double median(double *v, int n) {
  for (int i = 1; i < n; i++) /* insertion sort: n is small */
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      double x = v[j];
      v[j] = v[j - 1];
      v[j - 1] = x;
    }
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* µs of `iters` back-to-back ops between two events, per op. */
static double events_us(copy_arg *a, int iters, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1) {
  MGPU_CUDA(cudaEventRecord(e0, s));
  for (int i = 0; i < iters; i++) copy_op_impl(a, s);
  MGPU_CUDA(cudaEventRecord(e1, s));
  MGPU_CUDA(cudaEventSynchronize(e1));
  float ms = 0;
  MGPU_CUDA(cudaEventElapsedTime(&ms, e0, e1));
  return (double)ms * 1000.0 / iters;
}

/* Warm-up, then kSamples samples of a few milliseconds each; the median, in GB/s. */
static double harness_gbps(copy_arg *a, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1) {
  MGPU_CUDA(cudaStreamSynchronize(s));
  events_us(a, 2, s, e0, e1);
  double one = events_us(a, 1, s, e0, e1);
  int iters = (int)ceil(2000.0 / (one > 1 ? one : 1));
  if (iters < 3) iters = 3;
  if (iters > 1000) iters = 1000;
  double gbps[kSamples];
  for (int k = 0; k < kSamples; k++) gbps[k] = (double)a->bytes / events_us(a, iters, s, e0, e1) / 1e3;
  return median(gbps, kSamples);
}

/* ---- one case ------------------------------------------------------------------------------ */

static void expect_no_pending_error(const char *fn) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    char msg[300];
    snprintf(msg, sizeof msg,
             "%s left a CUDA error unchecked: %s (%s). Wrap every CUDA call in MGPU_CUDA(...).", fn,
             cudaGetErrorName(e), cudaGetErrorString(e));
    mgpu_fail("learner", fn, __FILE__, __LINE__, (long)e, msg);
  }
}

static void explain(char *msg, size_t len, double yours, double ref, long long calls) {
  double ratio = yours / ref;
  if (calls == 0)
    snprintf(msg, len,
             "time_copy_gbps never called op: the figure must come from timing the operation.");
  else if (!isfinite(yours) || yours <= 0)
    snprintf(msg, len, "time_copy_gbps returned %g: not a positive, finite bandwidth.", yours);
  else if (ratio > 1.25)
    snprintf(msg, len,
             "%.4g GB/s is faster than this GPU can copy (the harness measured %.4g GB/s): did you "
             "time the launch instead of the copy? (a host timer around an asynchronous launch "
             "measures only the launch)%s",
             yours, ref,
             ratio > 800 && ratio < 1250 ? " If not, look for a factor of 1000 in your units." : "");
  else if (ratio > 0.92 && ratio < 0.945)
    snprintf(msg, len,
             "%.4g GB/s is %.3f times the harness's %.4g GB/s, the ratio of a GiB (2^30 bytes) to "
             "a GB (10^9 bytes): report GB/s, bytes / 1e9 / seconds.",
             yours, ratio, ref);
  else if (ratio > 1.06 && ratio < 1.085)
    snprintf(msg, len,
             "%.4g GB/s is %.3f times the harness's %.4g GB/s, the ratio of a GiB (2^30 bytes) to "
             "a GB (10^9 bytes) the other way round: report GB/s, bytes / 1e9 / seconds.",
             yours, ratio, ref);
  else if (ratio > 1.05)
    snprintf(msg, len,
             "%.4g GB/s is %.0f%% above the harness's %.4g GB/s: do your events enclose every "
             "copy you count, on `stream`?",
             yours, 100 * (ratio - 1), ref);
  else if (ratio > 0.0008 && ratio < 0.00125)
    snprintf(msg, len,
             "%.4g GB/s is 1000 times lower than the harness's %.4g GB/s: cudaEventElapsedTime "
             "gives milliseconds; convert them to seconds before dividing.",
             yours, ref);
  else if (ratio < 0.95)
    snprintf(msg, len,
             "%.4g GB/s is %.0f%% below the harness's %.4g GB/s: did you time extra work (the "
             "warm-up, a synchronize, an allocation) or count fewer bytes than were copied? A "
             "single copy timed from an idle GPU also reads low: time several back to back.",
             yours, 100 * (1 - ratio), ref);
  else
    msg[0] = 0;
}

static void check_case(const mgpu_case *c, void *dst, const void *src, cudaStream_t s,
                       cudaEvent_t e0, cudaEvent_t e1) {
  copy_arg a = {dst, src, (size_t)c->n, strncmp(c->name, "sm-copy", 7) == 0, 0};
  double ref[kRounds], yours[kRounds];
  long long calls = 0;
  for (int r = 0; r < kRounds; r++) {
    ref[r] = harness_gbps(&a, s, e0, e1);
    MGPU_CUDA(cudaStreamSynchronize(s));
    a.calls = 0;
    yours[r] = time_copy_gbps(copy_op_impl, &a, a.bytes, s);
    expect_no_pending_error("time_copy_gbps");
    calls += a.calls;
    MGPU_CUDA(cudaDeviceSynchronize());
  }
  double ref_m = median(ref, kRounds), yours_m = median(yours, kRounds);
  char name[160];
  snprintf(name, sizeof name, "%s: your figure (median of %d calls)", c->name, kRounds);
  mgpu_value(name, yours_m, "GB/s");
  snprintf(name, sizeof name, "%s: the harness's figure", c->name);
  mgpu_value(name, ref_m, "GB/s");

  mgpu_result r;
  mgpu_result_init(&r, c->n);
  r.checked = 1; /* one figure */
  /* ±5 %: the reference solution's median stays within 0.2 % of the harness's on an H100
   * (docs/validation/nvidia-h100-x1-timing.txt), and GiB/s instead of GB/s is 7 % off. */
  int ok = calls > 0 && isfinite(yours_m) && fabs(yours_m / ref_m - 1.0) <= 0.05;
  if (!ok) {
    r.bad = 1;
    r.nfirst = 1;
    r.first[0].i = 0;
    snprintf(r.first[0].got, sizeof r.first[0].got, "%.4g GB/s", yours_m);
    snprintf(r.first[0].want, sizeof r.first[0].want, "%.4g GB/s ±5%%", ref_m);
    r.max_abs_err = fabs(yours_m - ref_m);
    r.max_rel_err = fabs(yours_m - ref_m) / ref_m;
    explain(r.msg, sizeof r.msg, yours_m, ref_m, calls);
  }
  mgpu_record_case(c->name, &r, !ok);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  mgpu_init(&ctx, argc, argv);
  size_t most = 16;
  for (int c = 0; c < ctx.ncases; c++)
    if ((size_t)ctx.cases[c].n > most) most = (size_t)ctx.cases[c].n;
  most = (most + 15) / 16 * 16;
  void *src = NULL, *dst = NULL;
  MGPU_CUDA(cudaMalloc(&src, most));
  MGPU_CUDA(cudaMalloc(&dst, most));
  cudaStream_t s;
  MGPU_CUDA(cudaStreamCreate(&s));
  mgpu_fill_pattern(src, most, ctx.seed, 1, s); /* what is copied does not change the timing */
  cudaEvent_t e0, e1;
  MGPU_CUDA(cudaEventCreate(&e0));
  MGPU_CUDA(cudaEventCreate(&e1));

  for (int c = 0; c < ctx.ncases; c++) {
    mgpu_case k = ctx.cases[c];
    if (k.n % 16) k.n += 16 - k.n % 16; /* the copy kernel moves 16-byte words */
    check_case(&k, dst, src, s, e0, e1);
  }

  MGPU_CUDA(cudaEventDestroy(e0));
  MGPU_CUDA(cudaEventDestroy(e1));
  MGPU_CUDA(cudaStreamDestroy(s));
  MGPU_CUDA(cudaFree(src));
  MGPU_CUDA(cudaFree(dst));
  return mgpu_finish(&ctx);
}
