/*
 * module0/bandwidth-matrix driver.
 *
 * Two processes (launcher "local", 2 ranks), both seeing every GPU:
 *   rank 1 measures the harness's reference matrices (peer access enabled, copy engines,
 *          CUDA events), once before and once after the learner's run;
 *   rank 0 runs the learner's bandwidth_matrix, in between, and judges it.
 * The reference lives in a process of its own because peer access belongs to a process: had
 * this process enabled it for its own measurement, a learner who forgot to would be fast too.
 * Barriers keep the two from ever copying at the same time.
 *
 * Cases (MGPU_CASES, checked on rank 0; n is bytes per copy, the same for all three):
 *   "uni"      every one-way entry within ±15 % of the reference (0 on the diagonal);
 *   "bidir"    every both-ways entry within ±15 % (0 on the diagonal);
 *   "slowest"  the pair named is among the slowest: its reference figure is within 5 % of the
 *              lowest (on an NVSwitch node every pair is nearly equal, and any pair will do).
 * The ±15 % band is taken around the before and after measurements together, so a machine that
 * drifts between them does not fail a right answer.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bandwidth_matrix.h"

enum { kMaxGPUs = 16, kGuard = 16, kCopies = 3, kSamples = 3 };
static const double kTol = 0.15, kSlowestTol = 0.05;
static const double kGuardValue = -12345.0;

/* ---- the reference measurement (rank 1) ------------------------------------------------ */

typedef struct gpu_bufs {
  void *src, *dst;
  cudaStream_t stream;
  cudaEvent_t start, stop, join;
} gpu_bufs;

static void enable_all_peer_access(int n) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      if (i == j) continue;
      int ok = 0;
      MGPU_CUDA(cudaDeviceCanAccessPeer(&ok, i, j));
      if (!ok) continue; /* the reference then measures what the machine gives without it */
      MGPU_CUDA(cudaSetDevice(i));
      cudaError_t e = cudaDeviceEnablePeerAccess(j, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();
      else
        MGPU_CUDA(e);
    }
}

static double median3(double a, double b, double c) {
  double lo = fmin(a, fmin(b, c)), hi = fmax(a, fmax(b, c));
  return a + b + c - lo - hi;
}

/* GB/s of kCopies copies i -> j on i's stream, between events. */
static double one_way(gpu_bufs *g, int i, int j, size_t bytes) {
  MGPU_CUDA(cudaSetDevice(i));
  MGPU_CUDA(cudaEventRecord(g[i].start, g[i].stream));
  for (int k = 0; k < kCopies; k++)
    MGPU_CUDA(cudaMemcpyPeerAsync(g[j].dst, j, g[i].src, i, bytes, g[i].stream));
  MGPU_CUDA(cudaEventRecord(g[i].stop, g[i].stream));
  MGPU_CUDA(cudaEventSynchronize(g[i].stop));
  float ms = 0;
  MGPU_CUDA(cudaEventElapsedTime(&ms, g[i].start, g[i].stop));
  return (double)bytes * kCopies / (ms * 1e-3) / 1e9;
}

/* GB/s (sum of both directions) of kCopies copies each way, i -> j on i's stream and j -> i on
 * j's stream, at the same time. j's stream starts at i's start event; i's stop event waits for
 * j's last copy, so the events enclose both directions. */
static double both_ways(gpu_bufs *g, int i, int j, size_t bytes) {
  MGPU_CUDA(cudaSetDevice(i));
  MGPU_CUDA(cudaEventRecord(g[i].start, g[i].stream));
  MGPU_CUDA(cudaSetDevice(j));
  MGPU_CUDA(cudaStreamWaitEvent(g[j].stream, g[i].start, 0));
  for (int k = 0; k < kCopies; k++) {
    MGPU_CUDA(cudaSetDevice(i));
    MGPU_CUDA(cudaMemcpyPeerAsync(g[j].dst, j, g[i].src, i, bytes, g[i].stream));
    MGPU_CUDA(cudaSetDevice(j));
    MGPU_CUDA(cudaMemcpyPeerAsync(g[i].dst, i, g[j].src, j, bytes, g[j].stream));
  }
  MGPU_CUDA(cudaEventRecord(g[j].join, g[j].stream));
  MGPU_CUDA(cudaSetDevice(i));
  MGPU_CUDA(cudaStreamWaitEvent(g[i].stream, g[j].join, 0));
  MGPU_CUDA(cudaEventRecord(g[i].stop, g[i].stream));
  MGPU_CUDA(cudaEventSynchronize(g[i].stop));
  float ms = 0;
  MGPU_CUDA(cudaEventElapsedTime(&ms, g[i].start, g[i].stop));
  return 2.0 * (double)bytes * kCopies / (ms * 1e-3) / 1e9;
}

/* Fills uni and bidir (n×n, zero diagonals): each entry the median of kSamples samples, after
 * one untimed sample. */
static void reference_matrices(gpu_bufs *g, int n, size_t bytes, double *uni, double *bidir) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      uni[i * n + j] = bidir[i * n + j] = 0;
      if (i == j) continue;
      double s[kSamples + 1];
      for (int k = 0; k <= kSamples; k++) s[k] = one_way(g, i, j, bytes);
      uni[i * n + j] = median3(s[1], s[2], s[3]);
    }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      double s[kSamples + 1];
      for (int k = 0; k <= kSamples; k++) s[k] = both_ways(g, i, j, bytes);
      bidir[i * n + j] = bidir[j * n + i] = median3(s[1], s[2], s[3]);
    }
}

/* ---- judging (rank 0) -------------------------------------------------------------------- */

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

static void add_mismatch(mgpu_result *r, long long i, const char *got, const char *want) {
  if (r->nfirst >= 8) return;
  mgpu_mismatch *m = &r->first[r->nfirst++];
  m->i = i;
  snprintf(m->got, sizeof m->got, "%s", got);
  snprintf(m->want, sizeof m->want, "%s", want);
}

/* The median of got/ref over the off-diagonal entries (NaN entries left out). */
static double median_ratio(int n, const double *got, const double *ref) {
  double v[kMaxGPUs * kMaxGPUs];
  int m = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      if (i != j && !isnan(got[i * n + j]) && ref[i * n + j] > 0)
        v[m++] = got[i * n + j] / ref[i * n + j];
  if (m == 0) return NAN;
  for (int a = 1; a < m; a++)
    for (int b = a; b > 0 && v[b - 1] > v[b]; b--) {
      double x = v[b];
      v[b] = v[b - 1];
      v[b - 1] = x;
    }
  return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

/* Compares one learner matrix with the reference: off the diagonal, each entry must lie in
 * [(1 - kTol) * min(before, after), (1 + kTol) * max(before, after)]; on it, exactly 0. */
static void judge_matrix(mgpu_result *r, int n, const double *got, const double *before,
                         const double *after) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      long long idx = (long long)i * n + j;
      double g = got[idx];
      char gs[32], ws[32];
      r->checked++;
      if (isnan(g)) {
        r->unwritten++;
        if (i == j)
          snprintf(ws, sizeof ws, "0");
        else
          snprintf(ws, sizeof ws, "%.4g GB/s", before[idx]);
        add_mismatch(r, idx, "unwritten", ws);
        continue;
      }
      double lo = 0, hi = 0, mid = 0;
      if (i != j) {
        lo = (1 - kTol) * fmin(before[idx], after[idx]);
        hi = (1 + kTol) * fmax(before[idx], after[idx]);
        mid = 0.5 * (before[idx] + after[idx]);
        double err = fabs(g - mid);
        if (err > r->max_abs_err) r->max_abs_err = err;
        if (mid > 0 && err / mid > r->max_rel_err) r->max_rel_err = err / mid;
      }
      if (g >= lo && g <= hi) continue;
      r->bad++;
      snprintf(gs, sizeof gs, "%.4g", g);
      if (i == j)
        snprintf(ws, sizeof ws, "0");
      else
        snprintf(ws, sizeof ws, "%.4g..%.4g", lo, hi);
      add_mismatch(r, idx, gs, ws);
    }
}

static long long guard_hits(const double *a, int n) {
  long long hits = 0;
  for (int k = 0; k < kGuard; k++)
    if (a[n * n + k] != kGuardValue) hits++;
  return hits;
}

static int all_zero(int n, const double *a) {
  for (int k = 0; k < n * n; k++)
    if (a[k] != 0) return 0;
  return 1;
}

#define PEER_HINT                                                                           \
  "your figures are far below the harness's (median ratio %.2f): is peer access enabled "     \
  "between every pair (cudaDeviceCanAccessPeer, then cudaDeviceEnablePeerAccess from each "   \
  "device to each other)? Without it each copy is staged through host memory."

static void judge(int n, size_t bytes, const double *uni, const double *bidir, int s, int d,
                  const double *ref) {
  const double *uni_b = ref, *bidir_b = ref + n * n, *uni_a = ref + 2 * n * n,
               *bidir_a = ref + 3 * n * n;
  double uni_ratio = median_ratio(n, uni, uni_b), bidir_ratio = median_ratio(n, bidir, bidir_b);
  int no_peer = uni_ratio < 0.5;

  mgpu_result r;
  mgpu_result_init(&r, (long long)bytes);
  judge_matrix(&r, n, uni, uni_b, uni_a);
  r.guard_hits = guard_hits(uni, n);
  if (all_zero(n, uni))
    snprintf(r.msg, sizeof r.msg, "every entry is 0: nothing was measured yet.");
  else if (r.guard_hits)
    snprintf(r.msg, sizeof r.msg, "entries after the n x n matrix were written.");
  else if (no_peer)
    snprintf(r.msg, sizeof r.msg, PEER_HINT, uni_ratio);
  else if (r.bad)
    snprintf(r.msg, sizeof r.msg,
             "uni[i*n+j] is the bandwidth of copies from GPU i to GPU j alone, in GB/s "
             "(1e9 bytes/s), and 0 where i == j.");
  mgpu_record_case("uni", &r, 0);

  mgpu_result_init(&r, (long long)bytes);
  judge_matrix(&r, n, bidir, bidir_b, bidir_a);
  r.guard_hits = guard_hits(bidir, n);
  if (all_zero(n, bidir))
    snprintf(r.msg, sizeof r.msg, "every entry is 0: nothing was measured yet.");
  else if (r.guard_hits)
    snprintf(r.msg, sizeof r.msg, "entries after the n x n matrix were written.");
  else if (no_peer)
    snprintf(r.msg, sizeof r.msg, PEER_HINT, uni_ratio);
  else if (r.bad && bidir_ratio > 0.35 && bidir_ratio < 0.65)
    snprintf(r.msg, sizeof r.msg,
             "your both-ways figures are about half the harness's (median ratio %.2f), no more "
             "than one direction alone gives: the two copies ran one after the other. Queue them "
             "on two streams, one on each GPU, and time the pair together.",
             bidir_ratio);
  else if (r.bad)
    snprintf(r.msg, sizeof r.msg,
             "bidir[i*n+j] is the sum of both directions' GB/s with i -> j and j -> i copying at "
             "the same time, and 0 where i == j.");
  mgpu_record_case("bidir", &r, 0);

  /* The slowest pair: any pair whose reference figure is within 5 % of the lowest. */
  double mean[kMaxGPUs * kMaxGPUs];
  int ms = -1, md = -1;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      mean[i * n + j] = 0.5 * (uni_b[i * n + j] + uni_a[i * n + j]);
      if (i != j && (ms < 0 || mean[i * n + j] < mean[ms * n + md])) {
        ms = i;
        md = j;
      }
    }
  mgpu_result_init(&r, (long long)bytes);
  r.checked = 1;
  char gs[32], ws[32];
  snprintf(gs, sizeof gs, "%d -> %d", s, d);
  snprintf(ws, sizeof ws, "%d -> %d (or within 5%%)", ms, md);
  if (s == -1 && d == -1) {
    r.unwritten = 1;
    add_mismatch(&r, 0, "unwritten", ws);
  } else if (s < 0 || s >= n || d < 0 || d >= n || s == d) {
    r.bad = 1;
    add_mismatch(&r, 0, gs, ws);
    snprintf(r.msg, sizeof r.msg,
             "%d -> %d is not a pair of two different GPUs among 0..%d.", s, d, n - 1);
  } else if (mean[s * n + d] > (1 + kSlowestTol) * mean[ms * n + md]) {
    r.bad = 1;
    add_mismatch(&r, 0, gs, ws);
    snprintf(r.msg, sizeof r.msg,
             "GPU %d -> GPU %d is not among the slowest pairs: the harness measured %.4g GB/s for "
             "it and %.4g GB/s for GPU %d -> GPU %d.",
             s, d, mean[s * n + d], mean[ms * n + md], ms, md);
  }
  mgpu_record_case("slowest", &r, 0);

  if (!isnan(uni_ratio)) mgpu_value("one way: your figures / the harness's (median)", uni_ratio, "");
  if (!isnan(bidir_ratio))
    mgpu_value("both ways: your figures / the harness's (median)", bidir_ratio, "");
  mgpu_value("one way: the harness's slowest pair", mean[ms * n + md], "GB/s");
}

/* ---- main -------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  mgpu_init_nodevice(&ctx, argc, argv);
  if (ctx.world != 2)
    mgpu_fail("driver", "mgpu_init", __FILE__, __LINE__, 0,
              "module0/bandwidth-matrix runs as exactly 2 ranks (launcher local, ranks 2)");
  int n = ctx.num_devices < kMaxGPUs ? ctx.num_devices : kMaxGPUs;
  if (n < 2)
    mgpu_fail("driver", "mgpu_init", __FILE__, __LINE__, 0, "module0/bandwidth-matrix needs 2 GPUs");
  size_t bytes = (size_t)mgpu_case_n(&ctx, "uni", ctx.ncases > 0 ? ctx.cases[0].n : 256LL << 20);

  /* ref: uni before, bidir before, uni after, bidir after. */
  double *ref = (double *)calloc((size_t)4 * n * n, sizeof(double));
  if (!ref) mgpu_fail("driver", "calloc", __FILE__, __LINE__, 0, "out of host memory");
  gpu_bufs g[kMaxGPUs];
  if (ctx.rank == 1) {
    enable_all_peer_access(n);
    for (int i = 0; i < n; i++) {
      MGPU_CUDA(cudaSetDevice(i));
      MGPU_CUDA(cudaMalloc(&g[i].src, bytes));
      MGPU_CUDA(cudaMalloc(&g[i].dst, bytes));
      MGPU_CUDA(cudaStreamCreate(&g[i].stream));
      mgpu_fill_pattern(g[i].src, bytes, ctx.seed, i, g[i].stream);
      MGPU_CUDA(cudaEventCreate(&g[i].start));
      MGPU_CUDA(cudaEventCreate(&g[i].stop));
      MGPU_CUDA(cudaEventCreateWithFlags(&g[i].join, cudaEventDisableTiming));
      MGPU_CUDA(cudaDeviceSynchronize());
    }
    reference_matrices(g, n, bytes, ref, ref + n * n);
  }
  mgpu_barrier(&ctx, "reference-before");

  double *uni = NULL, *bidir = NULL;
  int s = -1, d = -1;
  if (ctx.rank == 0) {
    uni = (double *)malloc(sizeof(double) * (size_t)(n * n + kGuard));
    bidir = (double *)malloc(sizeof(double) * (size_t)(n * n + kGuard));
    if (!uni || !bidir) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
    for (int k = 0; k < n * n + kGuard; k++) {
      uni[k] = bidir[k] = k < n * n ? NAN : kGuardValue;
    }
    bandwidth_matrix(n, bytes, uni, bidir, &s, &d);
    expect_no_pending_error("bandwidth_matrix");
  }
  mgpu_barrier(&ctx, "learner-done");

  if (ctx.rank == 1) {
    reference_matrices(g, n, bytes, ref + 2 * n * n, ref + 3 * n * n);
    for (int i = 0; i < n; i++) {
      MGPU_CUDA(cudaSetDevice(i));
      MGPU_CUDA(cudaFree(g[i].src));
      MGPU_CUDA(cudaFree(g[i].dst));
      MGPU_CUDA(cudaStreamDestroy(g[i].stream));
      MGPU_CUDA(cudaEventDestroy(g[i].start));
      MGPU_CUDA(cudaEventDestroy(g[i].stop));
      MGPU_CUDA(cudaEventDestroy(g[i].join));
    }
  }
  mgpu_share(&ctx, "reference", ref, sizeof(double) * 4 * n * n, 1);

  if (ctx.rank == 0) {
    judge(n, bytes, uni, bidir, s, d, ref);
    free(uni);
    free(bidir);
  }
  free(ref);
  return mgpu_finish(&ctx);
}
