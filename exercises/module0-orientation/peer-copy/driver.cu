/*
 * module0/peer-copy driver.
 *
 * Two processes (launcher "local", 2 ranks), both using GPUs 0 and 1:
 *   rank 0 runs the learner's peer_copy_setup/peer_copy: the correctness cases, then its half
 *          of the timing, then a last check on the timed buffers;
 *   rank 1 runs only the baseline, cudaMemcpyPeerAsync with peer access enabled.
 * Why two processes: peer access is a property of a process (of its CUDA contexts). If the
 * baseline ran in the learner's process, enabling peer access for it would also speed up a
 * learner who forgot to; in a process of its own it cannot.
 *
 * Timing takes turns, because the harness's mgpu_time_pair times two operations of one process:
 * for each sample k, rank 0 times one sample of peer_copy while rank 1 waits at a barrier, then
 * rank 1 times one sample of the baseline while rank 0 waits. The GPUs never run both at once,
 * and samples with the same k are taken back to back, which is how the checker pairs them.
 *
 * Cases (MGPU_CASES, all checked on rank 0; n is bytes):
 *   "ordered"     the ordering test (check_ordered): the copy must run after the work queued
 *                 on the stream before it;
 *   anything else a plain copy of n bytes into a poisoned, guarded buffer.
 * "after-timing" (not in MGPU_CASES) copies a new pattern over the timed buffers, so a copy that
 * skips repeated work fails.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "peer_copy.h"

enum { SRC = 0, DST = 1 };

/* ---- small helpers ------------------------------------------------------------------------ */

/* A CUDA error the learner's code caused but did not check is the learner's, not the driver's:
 * name it before a driver call trips over it. */
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

/* Waits for everything queued on both GPUs, whatever stream it is on. */
static void sync_devices(void) {
  MGPU_CUDA(cudaSetDevice(DST));
  MGPU_CUDA(cudaDeviceSynchronize());
  MGPU_CUDA(cudaSetDevice(SRC));
  MGPU_CUDA(cudaDeviceSynchronize());
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The baseline's process enables peer access both ways, as a careful programmer would. */
static void enable_peer_access(int from, int to) {
  int ok = 0;
  MGPU_CUDA(cudaDeviceCanAccessPeer(&ok, from, to));
  if (!ok) {
    char msg[128];
    snprintf(msg, sizeof msg, "GPU %d cannot access GPU %d: this exercise needs peer access", from,
             to);
    mgpu_fail("driver", "cudaDeviceCanAccessPeer", __FILE__, __LINE__, 0, msg);
  }
  MGPU_CUDA(cudaSetDevice(from));
  cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled)
    (void)cudaGetLastError(); /* already on: fine */
  else
    MGPU_CUDA(e);
}

/* 1 when peer access from `from` to `to` is enabled in this process, 0 when not. Leaves the
 * state as it found it. Used only after timing, to explain a slow copy. */
static int peer_access_enabled(int from, int to) {
  MGPU_CUDA(cudaSetDevice(from));
  cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
  (void)cudaGetLastError();
  if (e == cudaErrorPeerAccessAlreadyEnabled) return 1;
  if (e == cudaSuccess) MGPU_CUDA(cudaDeviceDisablePeerAccess(to));
  return 0;
}

/* ---- the ordering test ------------------------------------------------------------------- */

/* A one-thread kernel that holds its stream until the host sets gate[0] (or timeout_ns has
 * passed, so that a learner's call that blocks the host cannot deadlock the test). gate lives
 * in mapped host memory; gate[1] tells the host whether the timeout fired. */
__global__ void k_gate(volatile int *gate, long long timeout_ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  while (gate[0] == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if ((long long)(t - t0) > timeout_ns) {
      gate[1] = 1;
      return;
    }
    __nanosleep(1000);
  }
}

/*
 * Checks that peer_copy is ordered on `stream`:
 *   1. the source holds an old pattern;
 *   2. `stream` is held by a gate kernel, and the new pattern is queued behind the gate;
 *   3. peer_copy is called: a copy on `stream` queues behind the new pattern;
 *   4. the host waits 10 ms, then opens the gate.
 * A copy ordered on `stream` delivers the new pattern. A copy on a stream of its own runs at
 * once, during those 10 ms, and delivers the old one: the test fails, every time, however
 * small the copy. (A copy that blocks the host inside peer_copy waits out the gate's 100 ms
 * timeout and is then ordered; it passes, correctly.)
 */
static void check_ordered(const mgpu_ctx *ctx, const char *name, size_t bytes, int iter,
                          cudaStream_t stream, volatile int *gate) {
  const int old_iter = iter + 500;
  mgpu_buf src = mgpu_alloc(bytes, SRC), dst = mgpu_alloc(bytes, DST);
  MGPU_CUDA(cudaSetDevice(SRC));
  mgpu_fill_pattern(src.ptr, bytes, ctx->seed, old_iter, stream);
  MGPU_CUDA(cudaStreamSynchronize(stream));

  gate[0] = 0;
  gate[1] = 0;
  __sync_synchronize();
  k_gate<<<1, 1, 0, stream>>>(gate, 100LL * 1000 * 1000);
  /* Not MGPU_KERNEL(): with MGPU_SYNC_CHECK=1 it would synchronize, i.e. wait for this gate. */
  MGPU_CUDA(cudaGetLastError());
  mgpu_fill_pattern(src.ptr, bytes, ctx->seed, iter, stream);
  peer_copy(dst.ptr, DST, src.ptr, SRC, bytes, stream);
  expect_no_pending_error("peer_copy");
  sleep_ms(10);
  __sync_synchronize();
  gate[0] = 1;
  __sync_synchronize();
  sync_devices();
  int timed_out = gate[1];

  /* Compare on the host, telling "the old source arrived" apart from other mistakes. */
  unsigned char *got = (unsigned char *)malloc(bytes);
  if (!got) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  MGPU_CUDA(cudaMemcpy(got, dst.ptr, bytes, cudaMemcpyDeviceToHost));
  uint64_t key = mgpu_pattern_key(ctx->seed, iter), old_key = mgpu_pattern_key(ctx->seed, old_iter);
  mgpu_result r;
  mgpu_result_init(&r, (long long)bytes);
  long long old_bytes = 0;
  for (size_t i = 0; i < bytes; i++) {
    unsigned want = mgpu_pattern_byte_k(key, (long long)i);
    r.checked++;
    if (got[i] == want) continue;
    if (got[i] == 0xFF) {
      r.unwritten++;
    } else {
      r.bad++;
      if (got[i] == mgpu_pattern_byte_k(old_key, (long long)i)) old_bytes++;
    }
    if (r.nfirst < 8) {
      mgpu_mismatch *m = &r.first[r.nfirst++];
      m->i = (long long)i;
      if (got[i] == 0xFF)
        snprintf(m->got, sizeof m->got, "0xff(poison)");
      else
        snprintf(m->got, sizeof m->got, "0x%02x", got[i]);
      snprintf(m->want, sizeof m->want, "0x%02x", want);
    }
  }
  free(got);
  r.guard_hits = mgpu_guard_hits(&dst);
  if (old_bytes > 0 && old_bytes * 2 >= r.bad)
    snprintf(r.msg, sizeof r.msg,
             "your copy did not wait for the work queued on `stream` before it: it copied the "
             "source as it was before that work ran (%lld bytes of the old contents). Queue the "
             "copy on the stream you are given, not on a stream of your own.",
             old_bytes);
  else if (r.bad == 0 && r.unwritten > 0)
    snprintf(r.msg, sizeof r.msg,
             "%lld byte(s) never arrived, although `stream` and both devices had gone idle.",
             r.unwritten);
  if (timed_out)
    mgpu_note("peer_copy blocked the host until work queued before it on `stream` had run (a "
              "synchronous call, or a synchronize, inside peer_copy?). It still counts as "
              "ordered, but the caller loses the time.");
  mgpu_record_case(name, &r, 0);
  mgpu_free(&src);
  mgpu_free(&dst);
}

/* ---- plain copies --------------------------------------------------------------------------- */

static void check_plain(const mgpu_ctx *ctx, const char *name, size_t bytes, int iter,
                        cudaStream_t stream) {
  mgpu_buf src = mgpu_alloc(bytes, SRC), dst = mgpu_alloc(bytes, DST); /* dst: poisoned, guarded */
  MGPU_CUDA(cudaSetDevice(SRC));
  mgpu_fill_pattern(src.ptr, bytes, ctx->seed, iter, stream);
  MGPU_CUDA(cudaStreamSynchronize(stream));
  peer_copy(dst.ptr, DST, src.ptr, SRC, bytes, stream);
  expect_no_pending_error("peer_copy");
  sync_devices();
  mgpu_check_pattern(name, &dst, ctx->seed, iter, NULL);
  mgpu_free(&src);
  mgpu_free(&dst);
}

/* ---- timing, in turns ---------------------------------------------------------------------- */

typedef void (*copy_fn)(void *dst, const void *src, size_t bytes, cudaStream_t stream);

static void yours_copy(void *dst, const void *src, size_t bytes, cudaStream_t stream) {
  peer_copy(dst, DST, src, SRC, bytes, stream);
}

static void baseline_copy(void *dst, const void *src, size_t bytes, cudaStream_t stream) {
  MGPU_CUDA(cudaMemcpyPeerAsync(dst, DST, src, SRC, bytes, stream));
}

typedef struct timed {
  copy_fn fn;
  const char *who; /* "yours" or "baseline" */
  void *dst;
  const void *src;
  size_t bytes;
  cudaStream_t stream;
  cudaEvent_t start, stop;
} timed;

/* One sample: `iters` copies back to back between two events on the stream (µs per copy), and
 * the host clock from before the first copy to both devices idle (wall µs per copy). */
static void take_sample(timed *t, int iters, double *us, double *wall) {
  MGPU_CUDA(cudaSetDevice(SRC));
  double t0 = mgpu_now_us();
  MGPU_CUDA(cudaEventRecord(t->start, t->stream));
  for (int i = 0; i < iters; i++) {
    t->fn(t->dst, t->src, t->bytes, t->stream);
    MGPU_CUDA(cudaSetDevice(SRC));
  }
  MGPU_CUDA(cudaEventRecord(t->stop, t->stream));
  if (t->fn == yours_copy) expect_no_pending_error("peer_copy");
  sync_devices();
  double t1 = mgpu_now_us();
  float ms = 0;
  MGPU_CUDA(cudaEventElapsedTime(&ms, t->start, t->stop));
  *us = (double)ms * 1000.0 / iters;
  *wall = (t1 - t0) / iters;
}

static double median(const double *v, int n) {
  double *s = (double *)malloc(sizeof(double) * (size_t)n);
  if (!s) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  memcpy(s, v, sizeof(double) * (size_t)n);
  for (int i = 1; i < n; i++) /* insertion sort: n is small */
    for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
      double x = s[j];
      s[j] = s[j - 1];
      s[j - 1] = x;
    }
  double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  free(s);
  return m;
}

/*
 * Times one performance case in turns. Rank 0 passes its learner op, rank 1 the baseline;
 * both must call it with the same case. Returns this rank's median µs per copy.
 */
static double time_in_turns(mgpu_ctx *ctx, const mgpu_case *pc, timed *t) {
  const int me = ctx->rank;
  /* Copies per sample: enough for a few milliseconds at NVLink speed. */
  double est_us = 5.0 + (double)t->bytes / 400e3;
  int iters = (int)ceil(8000.0 / est_us);
  if (iters < 1) iters = 1;
  if (iters > 1000) iters = 1000;

  /* Warm-up, one rank at a time; each also learns what one copy costs it. */
  double cost[2] = {0, 0};
  for (int r = 0; r < 2; r++) {
    mgpu_barrier(ctx, "warm-up");
    if (r != me) continue;
    double us, wall;
    take_sample(t, 1, &us, &wall); /* first touch: not counted */
    take_sample(t, 1, &us, &wall);
    cost[r] = wall;
  }
  mgpu_share(ctx, "cost-0", &cost[0], sizeof cost[0], 0);
  mgpu_share(ctx, "cost-1", &cost[1], sizeof cost[1], 1);

  /* Samples: as many as the run allows (MGPU_PERF_MAX_REPS), within the time budget, at least
   * 5. Both ranks compute the same number from the same figures. */
  int max_reps = ctx->max_reps > 0 ? ctx->max_reps : 10;
  int min_reps = ctx->min_reps > 0 ? ctx->min_reps : 5;
  if (max_reps > 100) max_reps = 100;
  if (min_reps > max_reps) min_reps = max_reps;
  double budget_ms = (ctx->perf_budget_ms > 0 ? ctx->perf_budget_ms : 20000.0) /
                     (ctx->nperf_cases > 0 ? ctx->nperf_cases : 1);
  double per_round_ms = iters * (cost[0] + cost[1]) / 1000.0;
  int samples = per_round_ms > 0 ? (int)(budget_ms / per_round_ms) : max_reps;
  if (samples > max_reps) samples = max_reps;
  if (samples < min_reps) samples = min_reps;

  double *us = (double *)calloc((size_t)samples, sizeof(double));
  double *wall = (double *)calloc((size_t)samples, sizeof(double));
  if (!us || !wall) mgpu_fail("driver", "calloc", __FILE__, __LINE__, 0, "out of host memory");
  for (int k = 0; k < samples; k++) {
    mgpu_barrier(ctx, "yours-turn");
    if (me == 0) take_sample(t, iters, &us[k], &wall[k]);
    mgpu_barrier(ctx, "baseline-turn");
    if (me == 1) take_sample(t, iters, &us[k], &wall[k]);
  }
  mgpu_barrier(ctx, "timed");
  mgpu_record_timing(pc->name, t->who, (double)t->bytes, 1.0, "algbw", us, wall, samples);
  double m = median(us, samples);
  free(us);
  free(wall);
  return m;
}

/* ---- main -------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  mgpu_init_nodevice(&ctx, argc, argv);
  if (ctx.world != 2)
    mgpu_fail("driver", "mgpu_init", __FILE__, __LINE__, 0,
              "module0/peer-copy runs as exactly 2 ranks (launcher local, ranks 2)");
  if (ctx.num_devices < 2)
    mgpu_fail("driver", "mgpu_init", __FILE__, __LINE__, 0, "module0/peer-copy needs 2 GPUs");

  cudaStream_t stream;
  MGPU_CUDA(cudaSetDevice(SRC));
  MGPU_CUDA(cudaStreamCreate(&stream)); /* a blocking stream of the source GPU */
  cudaEvent_t start, stop;
  MGPU_CUDA(cudaEventCreate(&start));
  MGPU_CUDA(cudaEventCreate(&stop));

  if (ctx.rank == 0) {
    peer_copy_setup(SRC, DST);
    expect_no_pending_error("peer_copy_setup");
    MGPU_CUDA(cudaSetDevice(SRC));
    volatile int *gate = NULL;
    MGPU_CUDA(cudaHostAlloc((void **)&gate, 64, cudaHostAllocMapped | cudaHostAllocPortable));
    for (int c = 0; c < ctx.ncases; c++) {
      const mgpu_case *k = &ctx.cases[c];
      if (strcmp(k->name, "ordered") == 0)
        check_ordered(&ctx, k->name, (size_t)k->n, c + 1, stream, gate);
      else
        check_plain(&ctx, k->name, (size_t)k->n, c + 1, stream);
      MGPU_CUDA(cudaSetDevice(SRC));
    }
    MGPU_CUDA(cudaFreeHost((void *)gate));
  } else {
    enable_peer_access(SRC, DST);
    enable_peer_access(DST, SRC);
    MGPU_CUDA(cudaSetDevice(SRC));
  }

  if (ctx.perf) {
    for (int c = 0; c < ctx.nperf_cases; c++) {
      const mgpu_case *pc = &ctx.perf_cases[c];
      size_t bytes = (size_t)pc->n;
      const int iter = 1000 + c;
      mgpu_buf src = mgpu_alloc(bytes, SRC), dst = mgpu_alloc(bytes, DST);
      MGPU_CUDA(cudaSetDevice(SRC));
      mgpu_fill_pattern(src.ptr, bytes, ctx.seed, iter, stream);
      MGPU_CUDA(cudaStreamSynchronize(stream));
      timed t = {ctx.rank == 0 ? yours_copy : baseline_copy,
                 ctx.rank == 0 ? "yours" : "baseline",
                 dst.ptr,
                 src.ptr,
                 bytes,
                 stream,
                 start,
                 stop};
      double mine_us = time_in_turns(&ctx, pc, &t);

      /* Both medians, for the report and for explaining a slow copy. */
      double base_us = mine_us;
      mgpu_share(&ctx, "baseline-median", &base_us, sizeof base_us, 1);
      if (ctx.rank == 0) {
        double yours_gbps = (double)bytes / mine_us / 1e3, base_gbps = (double)bytes / base_us / 1e3;
        char name[160];
        snprintf(name, sizeof name, "%s: your copy (median)", pc->name);
        mgpu_value(name, yours_gbps, "GB/s");
        snprintf(name, sizeof name, "%s: cudaMemcpyPeerAsync with peer access (median)", pc->name);
        mgpu_value(name, base_gbps, "GB/s");
        if (yours_gbps < 0.5 * base_gbps) {
          int fwd = peer_access_enabled(SRC, DST), back = peer_access_enabled(DST, SRC);
          if (!fwd || !back)
            mgpu_note("peer access was not enabled in your process (GPU %d -> GPU %d: %s, GPU %d "
                      "-> GPU %d: %s). Without it the copy is staged through host memory.",
                      SRC, DST, fwd ? "on" : "off", DST, SRC, back ? "on" : "off");
        }

        /* A new pattern over the same buffers: a copy that skips repeated work fails here. */
        MGPU_CUDA(cudaSetDevice(SRC));
        mgpu_fill_pattern(src.ptr, bytes, ctx.seed, iter + 1, stream);
        mgpu_poison(&dst, 0);
        sync_devices();
        peer_copy(dst.ptr, DST, src.ptr, SRC, bytes, stream);
        expect_no_pending_error("peer_copy");
        sync_devices();
        mgpu_check_pattern("after-timing", &dst, ctx.seed, iter + 1, NULL);
      }
      mgpu_barrier(&ctx, "case-done");
      mgpu_free(&src);
      mgpu_free(&dst);
    }
  }

  MGPU_CUDA(cudaSetDevice(SRC));
  MGPU_CUDA(cudaEventDestroy(start));
  MGPU_CUDA(cudaEventDestroy(stop));
  MGPU_CUDA(cudaStreamDestroy(stream));
  return mgpu_finish(&ctx);
}
