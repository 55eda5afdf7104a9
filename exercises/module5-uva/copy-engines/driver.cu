/*
 * driver.cu: module5/copy-engines (course-owned).
 *
 * One process (launcher "single") drives every GPU, in pairs: (0,1), (2,3), ... An odd GPU
 * out sits idle; a machine with one GPU pairs GPU 0 with itself. The driver enables peer
 * access within each pair before anything else: this exercise is about the copy engines, not
 * about peer access (module0/peer-copy was).
 *
 * Correctness, per case and pair (n = bytes): exchange() moves n_ab bytes A -> B and n_ba
 * bytes B -> A. Most cases have n_ab = n_ba = n; "short-ab" has n_ab = 4096, n_ba = n, and
 * "short-ba" the reverse, so that whichever direction runs on a stream of its own is the long
 * one in one of the two cases. "swap-..." runs every pair with A and B swapped (GPU 1 -> GPU 0 is
 * A -> B, `stream` is GPU 1's) and "self-..." pairs each A with itself, as a machine with one GPU
 * does: code that works only for A = GPU 0 and B = GPU 1 fails there. After each call the
 * driver checks that the current device is A again, as it was when exchange() was called.
 *   1. Both sources hold an old pattern; the four buffers are guarded and the destinations
 *      poisoned (0xFF).
 *   2. On `stream` (a non-blocking stream of A): a 20 ms delay kernel, then the fills of both
 *      sources with new patterns (B's through peer access), then exchange().
 *   3. Right behind exchange(), still on `stream`, the driver snapshots both destinations
 *      (copy-engine copies into buffers of its own), then waits for `stream` alone.
 *   4. Then every device is synchronized, and both the snapshots and the destinations are
 *      compared with the new patterns, every byte.
 * A copy that does not wait for `stream` copies the old source (it runs during the 20 ms).
 * A copy that `stream` does not wait for is still running when the snapshot is taken: in a
 * short-* case the long copy takes ~0.7 ms and the snapshot follows the 4 KiB one at once,
 * so the snapshot holds poison although the destination is right in the end.
 *
 * Performance (pair 0): your exchange of n bytes each way (2n bytes moved) against one
 * cudaMemcpyPeerAsync of 2n bytes A -> B, timed in the same run, alternating (mgpu_time_pair,
 * algbw of 2n bytes). Both directions at once should take half the time of one direction.
 * Every timed call is checked too (the probes of ../shared/peer_common.cuh): before the timing,
 * the driver overwrites kProbes bytes of each destination, at places drawn afresh, with the
 * complement of the source's byte; right behind every timed call on `stream` (inside the timed
 * operation, and the same behind every baseline copy, on a chain of its own), a probe kernel
 * checks that the call wrote those bytes again, then overwrites kProbes others for the next
 * call. A call that skipped a direction (an exchange that copies one way only when the calls
 * come close together moves n bytes in the time of n, a ratio of 2.0 with no concurrency at
 * all) leaves the complements there, which the probe counts. A few µs per call against ~0.7 ms
 * (peer_common.cuh has the figures). After timing ("after-timing", not in MGPU_CASES): the
 * probes' count, then both sources get patterns no call has seen, both destinations are
 * poisoned, and one more exchange on the timed buffers and stream must deliver both. An
 * exchange that stops copying once it has been called often enough, or on the same buffers
 * again, fails here.
 * Afterwards, for the report only: the exchange again while a kernel keeps every SM of both
 * GPUs busy (copy engines need no SMs).
 *
 * The comparisons are the verifier's (`verifier: true`, docs/protocol.md §4): the rank hands over
 * the number of GPUs, every snapshot and destination in chunks (compare(), peer_common.cuh) and
 * the guard counts; the verifier makes the expected pattern bytes on the CPU and records.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copy_engines.h"

enum { kMaxPairs = 32, kMaxGPUs = 1024 };
static const long long kDelayNs = 20LL * 1000 * 1000;
static const size_t kStage = (size_t)64 << 20; /* host staging for comparisons */

typedef struct pair {
  int a, b;
  cudaStream_t stream;   /* non-blocking, on a */
  cudaStream_t stream_b; /* non-blocking, on b: `stream` of the case with A and B swapped */
} pair;

/* A CUDA error the learner's code left behind is the learner's, not the driver's. */
static void expect_no_pending_error(const char *fn) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    char msg[300];
    snprintf(msg, sizeof msg, "%s left a CUDA error unchecked: %s (%s). Wrap every CUDA call in MGPU_CUDA(...).",
             fn, cudaGetErrorName(e), cudaGetErrorString(e));
    mgpu_fail("learner", fn, __FILE__, __LINE__, (long)e, msg);
  }
}

/* Keeps an SM busy for `ns` without touching memory: every SM of the GPU, several blocks each. */
__global__ void busy_kernel(long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < (unsigned long long)ns);
}

#include "peer_common.cuh"

/* One case on one pair (pair number pk). Appends to r; writes an explanation into r->msg when it
 * is the first. The rank hands over both snapshots, both destinations and the guard count. */
static void check_pair(mgpu_ctx *ctx, const pair *p, int pk, const char *name, size_t n_ab, size_t n_ba,
                       int iter, mgpu_result *r, uint8_t *host) {
  const int it_ab = 2 * iter, it_ba = 2 * iter + 1;
  mgpu_buf a_src, b_dst, b_src, a_dst, snap_ab, snap_ba;
  memset(&a_src, 0, sizeof a_src);
  b_dst = b_src = a_dst = snap_ab = snap_ba = a_src;
  if (mgpu_computes(ctx)) {
    a_src = mgpu_alloc(n_ab, p->a);
    b_dst = mgpu_alloc(n_ab, p->b);
    b_src = mgpu_alloc(n_ba, p->b);
    a_dst = mgpu_alloc(n_ba, p->a);
    snap_ab = mgpu_alloc(n_ab, p->a);
    snap_ba = mgpu_alloc(n_ba, p->a);

    MGPU_CUDA(cudaSetDevice(p->a));
    mgpu_fill_pattern(a_src.ptr, n_ab, ctx->seed, it_ab + 500, p->stream);
    mgpu_fill_pattern(b_src.ptr, n_ba, ctx->seed, it_ba + 500, p->stream);
    MGPU_CUDA(cudaStreamSynchronize(p->stream));

    mgpu_delay(p->stream, kDelayNs);
    mgpu_fill_pattern(a_src.ptr, n_ab, ctx->seed, it_ab, p->stream);
    mgpu_fill_pattern(b_src.ptr, n_ba, ctx->seed, it_ba, p->stream);
    MGPU_LEARNER(exchange(b_dst.ptr, a_src.ptr, n_ab, a_dst.ptr, b_src.ptr, n_ba, p->a, p->b, p->stream));
    expect_no_pending_error("exchange");
    int now = p->a;
    MGPU_CUDA(cudaGetDevice(&now));
    if (now != p->a) {
      char msg[300];
      snprintf(msg, sizeof msg, "case %s: exchange() returned with GPU %d current; it was called with GPU %d "
               "current (dev_a = %d, dev_b = %d). Save the current device first (cudaGetDevice) and "
               "put it back before you return.", name, now, p->a, p->a, p->b);
      mgpu_fail("learner", "exchange", __FILE__, __LINE__, 0, msg);
    }
    MGPU_CUDA(cudaMemcpyAsync(snap_ab.ptr, b_dst.ptr, n_ab, cudaMemcpyDefault, p->stream));
    MGPU_CUDA(cudaMemcpyAsync(snap_ba.ptr, a_dst.ptr, n_ba, cudaMemcpyDefault, p->stream));
    MGPU_CUDA(cudaStreamSynchronize(p->stream));
    sync_all(ctx->num_devices);
    MGPU_CUDA(cudaSetDevice(p->a));
  }

  /* What `stream` saw right after exchange(), then what arrived in the end. */
  char tag[160];
  snprintf(tag, sizeof tag, "%s/%d/snap-ab", name, pk);
  tally s_ab = compare(ctx, tag, snap_ab.ptr, n_ab, it_ab, it_ab + 500, host, r, 0);
  snprintf(tag, sizeof tag, "%s/%d/snap-ba", name, pk);
  tally s_ba = compare(ctx, tag, snap_ba.ptr, n_ba, it_ba, it_ba + 500, host, r, (long long)n_ab);
  snprintf(tag, sizeof tag, "%s/%d/dst-ab", name, pk);
  tally f_ab = compare(ctx, tag, b_dst.ptr, n_ab, it_ab, it_ab + 500, host, NULL, 0);
  snprintf(tag, sizeof tag, "%s/%d/dst-ba", name, pk);
  tally f_ba = compare(ctx, tag, a_dst.ptr, n_ba, it_ba, it_ba + 500, host, NULL, 0);
  long long hits = 0;
  if (mgpu_computes(ctx)) {
    hits = mgpu_guard_hits(&b_dst) + mgpu_guard_hits(&a_dst) + mgpu_guard_hits(&a_src) + mgpu_guard_hits(&b_src);
    mgpu_free(&a_src);
    mgpu_free(&b_dst);
    mgpu_free(&b_src);
    mgpu_free(&a_dst);
    mgpu_free(&snap_ab);
    mgpu_free(&snap_ba);
  }
  snprintf(tag, sizeof tag, "%s/%d/guards", name, pk);
  if (!mgpu_hand_over(ctx, tag, &hits, sizeof hits)) return;
  r->guard_hits += hits;

  if (!r->msg[0]) {
    const struct {
      const char *dir;
      tally s, f;
      size_t n;
    } d[2] = {{"A -> B", s_ab, f_ab, n_ab}, {"B -> A", s_ba, f_ba, n_ba}};
    for (int k = 0; k < 2 && !r->msg[0]; k++) {
      const long long wrong = d[k].s.bad + d[k].s.unwritten;
      if (wrong == 0) continue;
      if (d[k].s.old > 0 && d[k].s.old * 2 >= d[k].s.bad)
        snprintf(r->msg, sizeof r->msg,
                 "case %s, GPUs %d and %d: the %s copy delivered the old contents of its source "
                 "(%lld bytes): it started before the work queued on `stream` ahead of exchange() "
                 "had written the source. A second stream must first wait for `stream` (an event "
                 "recorded on `stream`, cudaStreamWaitEvent).",
                 name, p->a, p->b, d[k].dir, d[k].s.old);
      else if (d[k].f.bad + d[k].f.unwritten == 0)
        snprintf(r->msg, sizeof r->msg,
                 "case %s, GPUs %d and %d: the %s copy was right in the end, but work queued on "
                 "`stream` right after exchange() ran before it had finished (%lld of %zu bytes "
                 "were still the poison): make `stream` wait for the other stream at the end (an "
                 "event recorded after the copy, cudaStreamWaitEvent on `stream`).",
                 name, p->a, p->b, d[k].dir, d[k].s.unwritten, d[k].n);
      else if (d[k].s.bad == 0)
        snprintf(r->msg, sizeof r->msg,
                 "case %s, GPUs %d and %d: %lld of %zu bytes of the %s copy never arrived (still "
                 "the poison, first at offset %lld).",
                 name, p->a, p->b, d[k].s.unwritten, d[k].n, d[k].dir, d[k].s.first);
      else
        snprintf(r->msg, sizeof r->msg,
                 "case %s, GPUs %d and %d: %lld of %zu bytes of the %s copy are wrong (first at "
                 "offset %lld): is each source copied to its own destination, with its own size?",
                 name, p->a, p->b, wrong, d[k].n, d[k].dir, d[k].s.first);
    }
    if (!r->msg[0] && r->guard_hits)
      snprintf(r->msg, sizeof r->msg, "%lld guard bytes around the buffers changed: write each "
               "destination's bytes and nothing else", r->guard_hits);
  }
}

/* ---- timing -------------------------------------------------------------------------------- */

typedef struct perf_bufs {
  const pair *p;
  void *b_dst2;       /* 2n bytes on B: the baseline's destination */
  const void *a_src2; /* 2n bytes on A: the baseline's source; its first n bytes are yours */
  void *b_dst;        /* n bytes on B: your A -> B destination */
  void *a_dst;        /* n bytes on A */
  const void *b_src;  /* n bytes on B */
  size_t n;
  unsigned long long *probe; /* on A: {yours wrong, yours probed, baseline wrong, baseline probed} */
  probe_chain yours;         /* a_dst and b_dst (peer_common.cuh) */
  probe_chain base;          /* b_dst2 */
} perf_bufs;

static void call_exchange(const perf_bufs *b, cudaStream_t stream) {
  (void)b;
  (void)stream;
  MGPU_LEARNER(exchange(b->b_dst, b->a_src2, b->n, b->a_dst, b->b_src, b->n, b->p->a, b->p->b, stream));
}

static void op_exchange(void *arg, int iter, cudaStream_t stream) {
  (void)iter;
  call_exchange((const perf_bufs *)arg, stream);
}

/* A timed exchange: the call, then on `stream` the probe of both destinations. */
static void op_timed_exchange(void *arg, int iter, cudaStream_t stream) {
  perf_bufs *b = (perf_bufs *)arg;
  (void)iter;
  call_exchange(b, stream);
  MGPU_CUDA(cudaSetDevice(b->p->a));
  probe_queue(&b->yours, b->probe, stream);
}

/* The baseline, probed the same way (one pair), so that both sides pay for a probe. */
static void op_one_way(void *arg, int iter, cudaStream_t stream) {
  perf_bufs *b = (perf_bufs *)arg;
  (void)iter;
  MGPU_CUDA(cudaMemcpyPeerAsync(b->b_dst2, b->p->b, b->a_src2, b->p->a, 2 * b->n, stream));
  probe_queue(&b->base, b->probe + 2, stream);
}

/* The exchange `reps` times, timed with events on the pair's stream; GB/s of 2n bytes each. */
static double events_gbps(perf_bufs *b, int reps) {
  cudaEvent_t t0, t1;
  MGPU_CUDA(cudaSetDevice(b->p->a));
  MGPU_CUDA(cudaEventCreate(&t0));
  MGPU_CUDA(cudaEventCreate(&t1));
  MGPU_CUDA(cudaEventRecord(t0, b->p->stream));
  for (int i = 0; i < reps; i++) op_exchange(b, i, b->p->stream);
  expect_no_pending_error("exchange");
  MGPU_CUDA(cudaSetDevice(b->p->a));
  MGPU_CUDA(cudaEventRecord(t1, b->p->stream));
  MGPU_CUDA(cudaEventSynchronize(t1));
  float ms = 0;
  MGPU_CUDA(cudaEventElapsedTime(&ms, t0, t1));
  MGPU_CUDA(cudaEventDestroy(t0));
  MGPU_CUDA(cudaEventDestroy(t1));
  return 2.0 * (double)b->n * reps / ((double)ms * 1e-3) / 1e9;
}

enum { kTimedAB = 900, kTimedBA = 901, kAfterAB = 902, kAfterBA = 903 }; /* pattern iters */

/* The case "after-timing": the probes' count of the timed calls (the rank hands over {yours
 * wrong, yours probed}), then one more exchange exactly as the timed ones, with sources no
 * call has seen and poisoned destinations. The rank hands over both destinations and the
 * guard count. */
static void check_after_timing(mgpu_ctx *ctx, perf_bufs *b, mgpu_buf *a_src2, mgpu_buf *b_dst,
                               mgpu_buf *b_src, mgpu_buf *a_dst, uint8_t *host) {
  const pair *p = b->p;
  const size_t n = b->n;
  mgpu_result r;
  mgpu_result_init(&r, 2 * (long long)n);
  unsigned long long probe[4] = {0, 0, 0, 0};
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaSetDevice(p->a));
    MGPU_CUDA(cudaMemcpy(probe, b->probe, sizeof probe, cudaMemcpyDeviceToHost));
    if (probe[2])
      mgpu_note("after-timing: the probes found %llu of %llu bytes of the baseline's copies wrong: a bug in the course",
                probe[2], probe[3]);
  }
  mgpu_hand_over(ctx, "after-timing/probes", probe, 2 * sizeof probe[0]);
  const long long missed = (long long)probe[0];
  r.checked += (long long)probe[1];
  r.bad += missed;

  if (mgpu_computes(ctx)) {
    mgpu_fill_pattern(a_src2->ptr, n, ctx->seed, kAfterAB, p->stream);
    mgpu_fill_pattern(b_src->ptr, n, ctx->seed, kAfterBA, p->stream);
    mgpu_poison(b_dst, 0);
    mgpu_poison(a_dst, 0);
    sync_all(ctx->num_devices);
    MGPU_CUDA(cudaSetDevice(p->a));
    op_exchange(b, 0, p->stream);
    expect_no_pending_error("exchange");
    MGPU_CUDA(cudaSetDevice(p->a));
    MGPU_CUDA(cudaStreamSynchronize(p->stream));
    sync_all(ctx->num_devices);
    MGPU_CUDA(cudaSetDevice(p->a));
  }

  const tally ab = compare(ctx, "after-timing/ab", b_dst->ptr, n, kAfterAB, kTimedAB, host, &r, 0);
  const tally ba = compare(ctx, "after-timing/ba", a_dst->ptr, n, kAfterBA, kTimedBA, host, &r, (long long)n);
  long long hits = 0;
  if (mgpu_computes(ctx))
    hits = mgpu_guard_hits(a_src2) + mgpu_guard_hits(b_dst) + mgpu_guard_hits(b_src) + mgpu_guard_hits(a_dst);
  if (!mgpu_hand_over(ctx, "after-timing/guards", &hits, sizeof hits)) return;
  r.guard_hits = hits;
  /* Both at once (the late call comes a few ms after the last timed one, so an exchange that
   * does less when calls come close may do less there too): both findings, in few words. */
  if ((ab.bad + ab.unwritten + ba.bad + ba.unwritten) && missed)
    snprintf(r.msg, sizeof r.msg,
             "after the timed calls, a call with new data in the same buffers gave a wrong "
             "result (A -> B: %lld of %zu bytes wrong; B -> A: %lld), and the timed calls did "
             "not all do the whole work either: %lld of %lld bytes that the driver overwrote "
             "right before a timed call, at places drawn afresh, had not been written by it. "
             "Every call must copy both directions in full, however often and however close "
             "together the calls come",
             ab.bad + ab.unwritten, n, ba.bad + ba.unwritten, missed, (long long)probe[1]);
  else if (ab.bad + ab.unwritten + ba.bad + ba.unwritten)
    snprintf(r.msg, sizeof r.msg,
             "after the timed calls, a call with new data in the same buffers gave a wrong "
             "result: every call must do the whole work, repeated calls with the same buffers "
             "included (A -> B: %lld of %zu bytes wrong, %lld of them the previous contents; "
             "B -> A: %lld wrong, %lld the previous contents)",
             ab.bad + ab.unwritten, n, ab.old, ba.bad + ba.unwritten, ba.old);
  else if (missed)
    snprintf(r.msg, sizeof r.msg,
             "the timed calls did not all do the whole work: right before each timed call the "
             "driver overwrote %d bytes of each destination, at places drawn afresh each time, "
             "and right behind it checked them against the sources; %lld of %lld such bytes had "
             "not been written by the call in between. Every call must copy both directions in "
             "full, however often and however close together the calls come",
             kProbes, missed, (long long)probe[1]);
  else if (r.guard_hits)
    snprintf(r.msg, sizeof r.msg, "after the timed calls: %lld guard bytes around the buffers "
             "changed: write each destination's bytes and nothing else", r.guard_hits);
  mgpu_record_case("after-timing", &r, 0);
}

static void run_perf(mgpu_ctx *ctx, const pair *p, const mgpu_case *c, uint8_t *host) {
  const size_t n = (size_t)c->n;
  if (!mgpu_computes(ctx)) { /* the verifier: the after-timing check only */
    mgpu_buf none;
    memset(&none, 0, sizeof none);
    perf_bufs b;
    memset(&b, 0, sizeof b);
    b.p = p;
    b.n = n;
    check_after_timing(ctx, &b, &none, &none, &none, &none, host);
    return;
  }
  mgpu_buf a_src2 = mgpu_alloc(2 * n, p->a), b_dst2 = mgpu_alloc(2 * n, p->b);
  mgpu_buf b_src = mgpu_alloc(n, p->b), a_dst = mgpu_alloc(n, p->a), b_dst = mgpu_alloc(n, p->b);
  unsigned long long *probe = NULL;
  MGPU_CUDA(cudaSetDevice(p->a));
  MGPU_CUDA(cudaMalloc((void **)&probe, 4 * sizeof *probe));
  MGPU_CUDA(cudaMemset(probe, 0, 4 * sizeof *probe));
  mgpu_fill_pattern(a_src2.ptr, 2 * n, ctx->seed, kTimedAB, p->stream);
  mgpu_fill_pattern(b_src.ptr, n, ctx->seed, kTimedBA, p->stream);
  MGPU_CUDA(cudaStreamSynchronize(p->stream));
  MGPU_CUDA(cudaDeviceSynchronize());
  perf_bufs b;
  memset(&b, 0, sizeof b);
  b.p = p;
  b.b_dst2 = b_dst2.ptr;
  b.a_src2 = a_src2.ptr;
  b.b_dst = b_dst.ptr;
  b.a_dst = a_dst.ptr;
  b.b_src = b_src.ptr;
  b.n = n;
  b.probe = probe;
  /* The probes' first places (the sources are final): the first timed call is checked too. */
  const probe_span ba = {(uint8_t *)a_dst.ptr, (const uint8_t *)b_src.ptr, n};
  const probe_span ab = {(uint8_t *)b_dst.ptr, (const uint8_t *)a_src2.ptr, n};
  const probe_span base = {(uint8_t *)b_dst2.ptr, (const uint8_t *)a_src2.ptr, 2 * n};
  probe_arm(&b.yours, ba, ab, 2, p->stream);
  probe_arm(&b.base, base, base, 1, p->stream);

  mgpu_timing t;
  memset(&t, 0, sizeof t);
  t.case_name = c->name;
  t.bytes = 2.0 * (double)n;
  t.factor = 1.0;
  t.metric = "algbw";
  mgpu_time_pair(ctx, &t, op_timed_exchange, &b, op_one_way, &b, p->stream);
  expect_no_pending_error("exchange");
  sync_all(ctx->num_devices);
  check_after_timing(ctx, &b, &a_src2, &b_dst, &b_src, &a_dst, host);

  /* For the report: the same exchange while every SM of both GPUs spins. */
  const double alone = events_gbps(&b, 5);
  cudaStream_t busy[2];
  const int devs[2] = {p->a, p->b};
  const int nd = p->a == p->b ? 1 : 2;
  for (int k = 0; k < nd; k++) {
    int sms = 0;
    MGPU_CUDA(cudaSetDevice(devs[k]));
    MGPU_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, devs[k]));
    MGPU_CUDA(cudaStreamCreateWithFlags(&busy[k], cudaStreamNonBlocking));
    busy_kernel<<<sms * 8, 256, 0, busy[k]>>>(300LL * 1000 * 1000);
    MGPU_KERNEL();
  }
  const double with_busy = events_gbps(&b, 5);
  sync_all(ctx->num_devices);
  for (int k = 0; k < nd; k++) {
    MGPU_CUDA(cudaSetDevice(devs[k]));
    MGPU_CUDA(cudaStreamDestroy(busy[k]));
  }
  char name[160];
  snprintf(name, sizeof name, "%s: your exchange, GPUs idle (5 runs)", c->name);
  mgpu_value(name, alone, "GB/s");
  snprintf(name, sizeof name, "%s: your exchange while a kernel keeps every SM busy (5 runs)", c->name);
  mgpu_value(name, with_busy, "GB/s");

  mgpu_free(&a_src2);
  mgpu_free(&b_dst2);
  mgpu_free(&b_src);
  mgpu_free(&a_dst);
  mgpu_free(&b_dst);
  MGPU_CUDA(cudaSetDevice(p->a));
  MGPU_CUDA(cudaFree(probe));
}

/* The GPUs of a case on pair p: "swap-..." swaps A and B (GPU 1 is A, and `stream` is GPU 1's),
 * "self-..." pairs A with itself (as on a machine with one GPU); the others use p as it is. */
static pair case_pair(const mgpu_case *c, const pair *p) {
  pair q = *p;
  if (strncmp(c->name, "swap-", 5) == 0) {
    q.a = p->b;
    q.b = p->a;
    q.stream = p->stream_b;
    q.stream_b = p->stream;
  } else if (strncmp(c->name, "self-", 5) == 0) {
    q.b = p->a;
    q.stream_b = p->stream;
  }
  return q;
}

/* n_ab and n_ba of a case: "short-ab" and "short-ba" make one direction 4 KiB. */
static void sizes(const mgpu_case *c, size_t *n_ab, size_t *n_ba) {
  *n_ab = *n_ba = (size_t)c->n;
  if (strncmp(c->name, "short-ab", 8) == 0) *n_ab = 4096;
  if (strncmp(c->name, "short-ba", 8) == 0) *n_ba = 4096;
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  mgpu_init_nodevice(&ctx, argc, argv);
  if (ctx.world != 1)
    mgpu_fail("driver", "mgpu_init", __FILE__, __LINE__, 0,
              "module5/copy-engines runs as one process (launcher single)");
  /* The rank counts its GPUs and hands the count over: the verifier (no GPU) pairs them alike. */
  int ndev = 0;
  if (mgpu_computes(&ctx)) {
    if (ctx.num_devices < 1) mgpu_fail("driver", "mgpu_init", __FILE__, __LINE__, 0, "no GPU");
    ndev = ctx.num_devices;
  }
  mgpu_hand_over(&ctx, "gpus", &ndev, sizeof ndev);
  check_handed_count("gpus", ndev, kMaxGPUs);

  pair pairs[kMaxPairs];
  memset(pairs, 0, sizeof pairs);
  int np = ndev >= 2 ? ndev / 2 : 1;
  if (np > kMaxPairs) np = kMaxPairs;
  for (int k = 0; k < np; k++) {
    pairs[k].a = ndev >= 2 ? 2 * k : 0;
    pairs[k].b = ndev >= 2 ? 2 * k + 1 : 0;
    if (!mgpu_computes(&ctx)) continue;
    enable_peer(pairs[k].a, pairs[k].b);
    enable_peer(pairs[k].b, pairs[k].a);
    MGPU_CUDA(cudaSetDevice(pairs[k].a));
    MGPU_CUDA(cudaStreamCreateWithFlags(&pairs[k].stream, cudaStreamNonBlocking));
    MGPU_CUDA(cudaSetDevice(pairs[k].b));
    MGPU_CUDA(cudaStreamCreateWithFlags(&pairs[k].stream_b, cudaStreamNonBlocking));
  }
  if (mgpu_computes(&ctx) && ndev == 1) mgpu_note("one GPU: it is paired with itself");

  uint8_t *host = (uint8_t *)mgpu_host_alloc(&ctx, kStage);
  for (int c = 0; c < ctx.ncases; c++) {
    size_t n_ab, n_ba;
    sizes(&ctx.cases[c], &n_ab, &n_ba);
    mgpu_result r;
    mgpu_result_init(&r, (long long)(n_ab + n_ba) * np);
    for (int k = 0; k < np; k++) {
      const pair q = case_pair(&ctx.cases[c], &pairs[k]);
      check_pair(&ctx, &q, k, ctx.cases[c].name, n_ab, n_ba, 10 * c + 1, &r, host);
    }
    if (mgpu_verifies(&ctx)) mgpu_record_case(ctx.cases[c].name, &r, 0);
  }
  if (ctx.perf) {
    if (mgpu_computes(&ctx)) MGPU_CUDA(cudaSetDevice(pairs[0].a));
    for (int c = 0; c < ctx.nperf_cases; c++) run_perf(&ctx, &pairs[0], &ctx.perf_cases[c], host);
  }
  mgpu_host_free(&ctx, host);
  if (mgpu_computes(&ctx)) {
    sync_all(ctx.num_devices);
    for (int k = 0; k < np; k++) {
      MGPU_CUDA(cudaSetDevice(pairs[k].a));
      MGPU_CUDA(cudaStreamDestroy(pairs[k].stream));
      MGPU_CUDA(cudaSetDevice(pairs[k].b));
      MGPU_CUDA(cudaStreamDestroy(pairs[k].stream_b));
    }
  }
  return mgpu_finish(&ctx);
}
