/* driver.c — the course-owned driver of module0/timing (a CPU timing fixture).
 *
 * Correctness: each case twice, with inputs that change per iteration, into a poisoned output.
 * Timing: for each perf case, samples of `iters` back-to-back calls of the learner's work and of
 * the baseline (the same loop, compiled here), alternating (ABAB). `us` is measured around the
 * calls; `wall_us` also waits for the deferred work (fx_defer), like a device-wide synchronize
 * after events on one stream.
 *
 * Only rank 0 times: on a CPU the other rank's timing loop would compete for the same cores and
 * blur both measurements. (GPU drivers time on every rank; the checker takes the slowest.)
 * The clock is this thread's CPU time, not the wall clock: on a loaded 2-core CI machine the
 * wall clock also counts the time other processes hold the core, which made the baseline vary
 * by more than 100% between samples; CPU time counts only this loop's own work. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mgpu.h"
#include "work.h"

static float poly(float x) { return 0.5f * x * x + 3.0f * x + 1.0f; }

/* The baseline: the loop the task asks for. */
__attribute__((noinline)) static void base_work(const float *in, float *out, long n) {
  long i;
  for (i = 0; i < n; i++) {
    float x = in[i];
    out[i] = 0.5f * x * x + 3.0f * x + 1.0f;
  }
}

/* Deferred work, run at the next fx_sync. */
#define QMAX 4096
static struct {
  void (*fn)(void *);
  void *arg;
} queue[QMAX];
static int queued;

static void fx_sync(void) {
  int i;
  for (i = 0; i < queued; i++) queue[i].fn(queue[i].arg);
  queued = 0;
}

void fx_defer(void (*fn)(void *), void *arg) {
  if (queued == QMAX) fx_sync();
  queue[queued].fn = fn;
  queue[queued].arg = arg;
  queued++;
}

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes);
  if (!p) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of memory");
  return p;
}

static void fill(const mgpu_ctx *ctx, float *in, long long n, int iter) {
  long long i;
  for (i = 0; i < n; i++) in[i] = mgpu_exact_value(ctx->seed, ctx->rank, iter, i);
}

static void check_cases(const mgpu_ctx *ctx) {
  int c, iter;
  for (c = 0; c < ctx->ncases; c++) {
    long long n = ctx->cases[c].n, i;
    float *in = xmalloc((size_t)n * sizeof(float));
    float *out = xmalloc((size_t)n * sizeof(float));
    mgpu_result r;
    mgpu_result_init(&r, n);
    for (iter = 0; iter < 2; iter++) {
      fill(ctx, in, n, iter);
      memset(out, 0xFF, (size_t)n * sizeof(float));
      work(in, out, (long)n);
      fx_sync();
      for (i = 0; i < n; i++) mgpu_result_add(&r, i, out[i], poly(in[i]), 0.0);
    }
    mgpu_record_case(ctx->cases[c].name, &r, 0);
    free(in);
    free(out);
  }
}

/* This thread's CPU time in µs. */
static double cpu_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* One sample: `iters` calls; *us around the calls, *wall until the deferred work is done. */
static void sample(int yours, const float *in, float *out, long n, int iters, double *us,
                   double *wall) {
  double t0, t1, t2;
  int k;
  t0 = cpu_us();
  for (k = 0; k < iters; k++) {
    if (yours)
      work(in, out, n);
    else
      base_work(in, out, n);
    __asm__ __volatile__("" ::: "memory");
  }
  t1 = cpu_us();
  fx_sync();
  t2 = cpu_us();
  *us = (t1 - t0) / iters;
  *wall = (t2 - t0) / iters;
}

static void time_cases(mgpu_ctx *ctx) {
  int c;
  for (c = 0; c < ctx->nperf_cases; c++) {
    long n = (long)ctx->perf_cases[c].n;
    int maxr = ctx->max_reps > 0 ? ctx->max_reps : 50;
    int minr = ctx->min_reps > 0 ? ctx->min_reps : 10;
    double budget = ctx->perf_budget_ms > 0 ? ctx->perf_budget_ms * 1000.0 : 1e6;
    double *yu = xmalloc(maxr * sizeof(double)), *yw = xmalloc(maxr * sizeof(double));
    double *bu = xmalloc(maxr * sizeof(double)), *bw = xmalloc(maxr * sizeof(double));
    float *in = xmalloc((size_t)n * sizeof(float)), *out = xmalloc((size_t)n * sizeof(float));
    double one_us, dummy, start;
    int iters, s, k;
    fill(ctx, in, n, 0);
    /* Warm-up, and the size of a sample: about 2 ms of baseline work. */
    for (k = 0; k < 3; k++) {
      sample(1, in, out, n, 1, &dummy, &dummy);
      sample(0, in, out, n, 1, &one_us, &dummy);
    }
    iters = one_us > 0 ? (int)(2000.0 / one_us) : 100;
    if (iters < 1) iters = 1;
    if (iters > 1000) iters = 1000;
    start = mgpu_now_us();
    for (s = 0; s < maxr; s++) {
      /* ABAB, alternating which goes first. */
      if (s % 2 == 0) {
        sample(1, in, out, n, iters, &yu[s], &yw[s]);
        sample(0, in, out, n, iters, &bu[s], &bw[s]);
      } else {
        sample(0, in, out, n, iters, &bu[s], &bw[s]);
        sample(1, in, out, n, iters, &yu[s], &yw[s]);
      }
      if (s + 1 >= minr && mgpu_now_us() - start > budget) {
        s++;
        break;
      }
    }
    mgpu_record_timing(ctx->perf_cases[c].name, "yours", (double)n * 8, 1, "time", yu, yw, s);
    mgpu_record_timing(ctx->perf_cases[c].name, "baseline", (double)n * 8, 1, "time", bu, bw, s);
    free(yu);
    free(yw);
    free(bu);
    free(bw);
    free(in);
    free(out);
  }
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  mgpu_init(&ctx, argc, argv);
  check_cases(&ctx);
  /* Rank 0 starts timing once every rank is done checking. */
  mgpu_barrier(&ctx, "checked");
  if (ctx.perf && ctx.rank == 0) time_cases(&ctx);
  return mgpu_finish(&ctx);
}
