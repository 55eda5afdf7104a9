/*
 * module0/alpha-beta driver: gives the learner's fit_alpha_beta a peer copy GPU 0 -> GPU 1 and
 * compares the alpha and beta it returns with the harness's own sweep and fit of the same
 * copy, done the same way (task.md) once before and once after the learner's.
 *
 * One process driving GPUs 0 and 1 (launcher "single"); peer access is enabled here, since it
 * belongs to the operation, not to the learner's task. Cases (MGPU_CASES; n = the largest
 * size of the sweep, in bytes): "alpha" accepts within ±30 % or ±0.5 µs (the looser) of either
 * of the harness's fits, "beta" within ±15 %.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alpha_beta.h"

enum { SRC = 0, DST = 1, kSamples = 5 };
static const double kAlphaRel = 0.30, kAlphaAbs = 0.5, kBetaRel = 0.15;

/* ---- the operation ---------------------------------------------------------------------- */

typedef struct copy_arg {
  void *dst;
  const void *src;
  size_t max_bytes;
} copy_arg;

static void peer_copy_op(void *p, size_t bytes, cudaStream_t stream) {
  copy_arg *a = (copy_arg *)p;
  if (bytes < 1 || bytes > a->max_bytes) {
    char msg[160];
    snprintf(msg, sizeof msg, "op was called with bytes = %zu; it copies 1 to %zu bytes", bytes,
             a->max_bytes);
    mgpu_fail("learner", "op", __FILE__, __LINE__, 0, msg);
  }
  MGPU_CUDA(cudaMemcpyPeerAsync(a->dst, DST, a->src, SRC, bytes, stream));
}

/* ---- the harness's sweep and fit (the method task.md prescribes) ------------------------- */

static double median(double *v, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      double x = v[j];
      v[j] = v[j - 1];
      v[j - 1] = x;
    }
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double per_copy_us(copy_arg *a, size_t bytes, int iters, cudaStream_t s, cudaEvent_t e0,
                          cudaEvent_t e1) {
  MGPU_CUDA(cudaEventRecord(e0, s));
  for (int i = 0; i < iters; i++) peer_copy_op(a, bytes, s);
  MGPU_CUDA(cudaEventRecord(e1, s));
  MGPU_CUDA(cudaEventSynchronize(e1));
  float ms = 0;
  MGPU_CUDA(cudaEventElapsedTime(&ms, e0, e1));
  return (double)ms * 1000.0 / iters;
}

/* Ordinary least squares of t = alpha + n * slope, centred for accuracy; beta = 1 / slope. */
static void fit(const double *n, const double *t, int m, double *alpha_us, double *beta_gbps) {
  double mx = 0, my = 0, sxx = 0, sxy = 0;
  for (int i = 0; i < m; i++) {
    mx += n[i] / m;
    my += t[i] / m;
  }
  for (int i = 0; i < m; i++) {
    sxx += (n[i] - mx) * (n[i] - mx);
    sxy += (n[i] - mx) * (t[i] - my);
  }
  double slope = sxy / sxx; /* µs per byte */
  *alpha_us = my - slope * mx;
  *beta_gbps = 1.0 / (slope * 1e3); /* bytes/µs = 1e6 B/s = 1e-3 GB/s */
}

static void harness_fit(copy_arg *a, cudaStream_t s, double *alpha_us, double *beta_gbps) {
  cudaEvent_t e0, e1;
  MGPU_CUDA(cudaEventCreate(&e0));
  MGPU_CUDA(cudaEventCreate(&e1));
  double n[64], t[64];
  int m = 0;
  for (size_t bytes = 8; bytes <= a->max_bytes && m < 64; bytes *= 2) {
    per_copy_us(a, bytes, 2, s, e0, e1); /* warm-up */
    double est = per_copy_us(a, bytes, 5, s, e0, e1);
    int iters = (int)ceil(1000.0 / (est > 0.1 ? est : 0.1));
    if (iters < 5) iters = 5;
    if (iters > 2000) iters = 2000;
    double v[kSamples];
    for (int k = 0; k < kSamples; k++) v[k] = per_copy_us(a, bytes, iters, s, e0, e1);
    n[m] = (double)bytes;
    t[m] = median(v, kSamples);
    m++;
  }
  fit(n, t, m, alpha_us, beta_gbps);
  MGPU_CUDA(cudaEventDestroy(e0));
  MGPU_CUDA(cudaEventDestroy(e1));
}

/* ---- judging ------------------------------------------------------------------------------- */

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

static int alpha_ok(double got, double ref) {
  return isfinite(got) && fabs(got - ref) <= fmax(kAlphaRel * fabs(ref), kAlphaAbs);
}

static int beta_ok(double got, double ref) {
  return isfinite(got) && fabs(got - ref) <= kBetaRel * fabs(ref);
}

/* One figure against two reference fits; ok if close to either. */
static void record(const char *name, long long n, double got, const double ref[2], int ok,
                   const char *want, const char *msg) {
  mgpu_result r;
  mgpu_result_init(&r, n);
  r.checked = 1;
  if (!ok) {
    r.bad = 1;
    r.nfirst = 1;
    r.first[0].i = 0;
    snprintf(r.first[0].got, sizeof r.first[0].got, "%.4g", got);
    snprintf(r.first[0].want, sizeof r.first[0].want, "%s", want);
    double mid = 0.5 * (ref[0] + ref[1]);
    r.max_abs_err = fabs(got - mid);
    r.max_rel_err = mid != 0 ? fabs(got - mid) / fabs(mid) : 0;
    snprintf(r.msg, sizeof r.msg, "%s", msg);
  }
  mgpu_record_case(name, &r, !ok);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  mgpu_init_nodevice(&ctx, argc, argv);
  if (ctx.num_devices < 2)
    mgpu_fail("driver", "mgpu_init", __FILE__, __LINE__, 0, "module0/alpha-beta needs 2 GPUs");
  long long max_n = 8;
  for (int c = 0; c < ctx.ncases; c++)
    if (ctx.cases[c].n > max_n) max_n = ctx.cases[c].n;

  /* The operation: peer access both ways, buffers on both GPUs, a stream on GPU 0. */
  for (int d = 0; d < 2; d++) {
    MGPU_CUDA(cudaSetDevice(d));
    cudaError_t e = cudaDeviceEnablePeerAccess(1 - d, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled)
      (void)cudaGetLastError();
    else
      MGPU_CUDA(e);
  }
  copy_arg a;
  a.max_bytes = (size_t)max_n;
  void *dst = NULL, *src = NULL;
  MGPU_CUDA(cudaSetDevice(DST));
  MGPU_CUDA(cudaMalloc(&dst, a.max_bytes));
  MGPU_CUDA(cudaSetDevice(SRC));
  MGPU_CUDA(cudaMalloc(&src, a.max_bytes));
  a.dst = dst;
  a.src = src;
  cudaStream_t s;
  MGPU_CUDA(cudaStreamCreate(&s));
  mgpu_fill_pattern(src, a.max_bytes, ctx.seed, 1, s);
  MGPU_CUDA(cudaStreamSynchronize(s));

  double ref_a[2], ref_b[2], alpha = NAN, beta = NAN;
  harness_fit(&a, s, &ref_a[0], &ref_b[0]);
  MGPU_CUDA(cudaDeviceSynchronize());
  fit_alpha_beta(peer_copy_op, &a, a.max_bytes, s, &alpha, &beta);
  expect_no_pending_error("fit_alpha_beta");
  MGPU_CUDA(cudaSetDevice(SRC));
  MGPU_CUDA(cudaDeviceSynchronize());
  harness_fit(&a, s, &ref_a[1], &ref_b[1]);

  mgpu_value("your alpha", alpha, "us");
  mgpu_value("your beta", beta, "GB/s");
  mgpu_value("harness alpha (before yours)", ref_a[0], "us");
  mgpu_value("harness alpha (after yours)", ref_a[1], "us");
  mgpu_value("harness beta (before yours)", ref_b[0], "GB/s");
  mgpu_value("harness beta (after yours)", ref_b[1], "GB/s");

  char want[32], msg[512];
  for (int c = 0; c < ctx.ncases; c++) {
    const mgpu_case *k = &ctx.cases[c];
    if (strcmp(k->name, "alpha") == 0) {
      int ok = alpha_ok(alpha, ref_a[0]) || alpha_ok(alpha, ref_a[1]);
      snprintf(want, sizeof want, "%.3g..%.3g us", fmin(ref_a[0], ref_a[1]), fmax(ref_a[0], ref_a[1]));
      snprintf(msg, sizeof msg,
               "alpha = %.4g us; the harness's fits gave %.4g and %.4g us (accepted: within 30%% "
               "or 0.5 us). alpha is the fixed cost of one copy: it comes from the small sizes, "
               "so fit every size of the sweep, not only the largest, and report microseconds.",
               alpha, ref_a[0], ref_a[1]);
      record(k->name, k->n, alpha, ref_a, ok, want, msg);
    } else if (strcmp(k->name, "beta") == 0) {
      int ok = beta_ok(beta, ref_b[0]) || beta_ok(beta, ref_b[1]);
      double ratio = beta / (0.5 * (ref_b[0] + ref_b[1]));
      const char *why = "";
      if (ratio > 800 && ratio < 1250)
        why = " 1000 times too high: check the units (1 byte per microsecond is 1e-3 GB/s).";
      else if (ratio > 0.0008 && ratio < 0.00125)
        why = " 1000 times too low: check the units (1 byte per microsecond is 1e-3 GB/s).";
      else if (!(ratio < 1.25) || ratio < 0)
        why = " Far faster than the link, or negative: did your timer see the copies? A host "
              "timer around asynchronous launches measures only the launches.";
      snprintf(want, sizeof want, "%.4g..%.4g GB/s", fmin(ref_b[0], ref_b[1]), fmax(ref_b[0], ref_b[1]));
      snprintf(msg, sizeof msg,
               "beta = %.4g GB/s; the harness's fits gave %.4g and %.4g GB/s (accepted: within "
               "15%%).%s",
               beta, ref_b[0], ref_b[1], why);
      record(k->name, k->n, beta, ref_b, ok, want, msg);
    } else {
      mgpu_fail("driver", "MGPU_CASES", __FILE__, __LINE__, 0,
                "module0/alpha-beta knows the cases \"alpha\" and \"beta\" only");
    }
  }

  MGPU_CUDA(cudaStreamDestroy(s));
  MGPU_CUDA(cudaFree(src));
  MGPU_CUDA(cudaSetDevice(DST));
  MGPU_CUDA(cudaFree(dst));
  return mgpu_finish(&ctx);
}
