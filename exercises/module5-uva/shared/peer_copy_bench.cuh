/*
 * peer_copy_bench.cuh: the part of module5/peer-stores' and module5/tma-peer's drivers that is
 * the same (course-owned; a support file of both, "../shared/peer_copy_bench.cuh").
 *
 * Before including it, a driver defines kMaxDevices, kDelayNs, kStage, kFn (the learner's
 * function's name) and includes its exercise's header; after it, the driver defines
 *   static void learner_copy(int dev, void *dst, const void *src, size_t bytes, cudaStream_t s);
 * (the learner's call on GPU dev, current, inside MGPU_LEARNER) and its main, which calls
 * bench_open, hands the number of GPUs over (g.n, tag "gpus"), then calls bench_run and
 * bench_close. The correctness cases, the comparison, the timing against cudaMemcpyPeerAsync
 * and the check of the timed calls (probes, below) are here.
 *
 * Both exercises are split (`verifier: true`, docs/protocol.md §4): the rank copies, reads the
 * snapshots and destinations back and hands them over in chunks (compare(), peer_common.cuh),
 * with the number of GPUs, the bytes before each misaligned destination and the guard counts;
 * the verifier makes the expected pattern bytes, compares and records every case.
 */
#ifndef MODULE5_PEER_COPY_BENCH_CUH
#define MODULE5_PEER_COPY_BENCH_CUH

static void learner_copy(int dev, void *dst, const void *src, size_t bytes, cudaStream_t stream);

static void expect_no_pending_error(const char *fn) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    char msg[300];
    snprintf(msg, sizeof msg, "%s left a CUDA error unchecked: %s (%s). Wrap every CUDA call in MGPU_CUDA(...) and put MGPU_KERNEL() after each launch.",
             fn, cudaGetErrorName(e), cudaGetErrorString(e));
    mgpu_fail("learner", fn, __FILE__, __LINE__, (long)e, msg);
  }
}

#include "peer_common.cuh"

/* Misalignment of a case: "offK-..." -> K (0..15), else 0. */
static size_t case_offset(const char *name) {
  if (strncmp(name, "off", 3) != 0) return 0;
  return (size_t)(strtoul(name + 3, NULL, 10) % 16);
}

typedef struct ring {
  int n;
  cudaStream_t stream[kMaxDevices];
} ring;

static int next_of(const ring *g, int i) { return (i + 1) % g->n; }

static void run_case(mgpu_ctx *ctx, ring *g, const mgpu_case *c, int iter, uint8_t *host) {
  const size_t bytes = (size_t)c->n, off = case_offset(c->name);
  mgpu_buf src[kMaxDevices], dst[kMaxDevices], snap[kMaxDevices];
  memset(dst, 0, sizeof dst);
  memset(snap, 0, sizeof snap);
  if (mgpu_computes(ctx)) {
    /* The pattern is laid at the misaligned address: byte i of the copy is pattern byte i. */
    for (int i = 0; i < g->n; i++) {
      src[i] = mgpu_alloc(bytes + off, i);
      dst[i] = mgpu_alloc(bytes + off, next_of(g, i));
      snap[i] = mgpu_alloc(bytes, i);
      MGPU_CUDA(cudaSetDevice(i));
      mgpu_fill_pattern((char *)src[i].ptr + off, bytes, ctx->seed, iter + 500, g->stream[i]);
    }
    sync_all(g->n);
    for (int i = 0; i < g->n; i++) {
      MGPU_CUDA(cudaSetDevice(i));
      mgpu_delay(g->stream[i], kDelayNs);
      mgpu_fill_pattern((char *)src[i].ptr + off, bytes, ctx->seed, iter, g->stream[i]);
      learner_copy(i, (char *)dst[i].ptr + off, (const char *)src[i].ptr + off, bytes, g->stream[i]);
      MGPU_CUDA(cudaMemcpyAsync(snap[i].ptr, (const char *)dst[i].ptr + off, bytes, cudaMemcpyDefault, g->stream[i]));
    }
    for (int i = 0; i < g->n; i++) {
      MGPU_CUDA(cudaSetDevice(i));
      MGPU_CUDA(cudaStreamSynchronize(g->stream[i]));
    }
    sync_all(g->n);
  }

  mgpu_result r;
  mgpu_result_init(&r, (long long)bytes * g->n);
  for (int i = 0; i < g->n; i++) {
    char tag[160];
    /* Handed over per GPU: the snapshot, dst, the misaligned head of dst, dst's guard count. */
    if (mgpu_computes(ctx)) MGPU_CUDA(cudaSetDevice(i));
    snprintf(tag, sizeof tag, "%s/%d/snap", c->name, i);
    tally s = compare(ctx, tag, snap[i].ptr, bytes, iter, iter + 500, host, &r, 0);
    snprintf(tag, sizeof tag, "%s/%d/dst", c->name, i);
    const void *dst_i = mgpu_computes(ctx) ? (const char *)dst[i].ptr + off : NULL;
    tally f = compare(ctx, tag, dst_i, bytes, iter, iter + 500, host, NULL, 0);
    /* The misaligned head of dst lies inside the usable bytes: it must still be the poison. */
    uint8_t h[16];
    memset(h, 0xFF, sizeof h);
    long long hits = 0;
    if (mgpu_computes(ctx)) {
      if (off) MGPU_CUDA(cudaMemcpy(h, dst[i].ptr, off, cudaMemcpyDefault));
      hits = mgpu_guard_hits(&dst[i]);
    }
    snprintf(tag, sizeof tag, "%s/%d/head", c->name, i);
    mgpu_hand_over(ctx, tag, h, sizeof h);
    snprintf(tag, sizeof tag, "%s/%d/guards", c->name, i);
    if (!mgpu_hand_over(ctx, tag, &hits, sizeof hits)) continue;
    for (size_t k = 0; k < off; k++)
      if (h[k] != 0xFF) r.guard_hits++;
    r.guard_hits += hits;
    const long long wrong = s.bad + s.unwritten;
    if (r.msg[0] || (wrong == 0 && r.guard_hits == 0)) continue;
    const int to = next_of(g, i);
    if (wrong == 0)
      snprintf(r.msg, sizeof r.msg, "GPU %d -> GPU %d: bytes outside dst[0..%zu) changed (guard bands or the %zu bytes before dst): write dst's bytes and nothing else",
               i, to, bytes, off);
    else if (s.old > 0 && s.old * 2 >= s.bad)
      snprintf(r.msg, sizeof r.msg, "GPU %d -> GPU %d: %lld bytes hold src's old contents: the copy ran before the work queued on `stream` ahead of %s had written src. Launch on the stream you are given.",
               i, to, s.old, kFn);
    else if (f.bad + f.unwritten == 0)
      snprintf(r.msg, sizeof r.msg, "GPU %d -> GPU %d: right in the end, but work queued on `stream` after %s saw %lld of %zu bytes still the poison: the copy was not ordered on `stream`.",
               i, to, kFn, s.unwritten, bytes);
    else if (s.bad == 0 && f.first >= 0 && (size_t)f.first + (size_t)f.unwritten == bytes)
      snprintf(r.msg, sizeof r.msg, "GPU %d -> GPU %d: the last %lld of %zu bytes are still the poison: the bytes after the last 16-byte boundary need copying too (misalignment %zu)",
               i, to, f.unwritten, bytes, off);
    else
      snprintf(r.msg, sizeof r.msg, "GPU %d -> GPU %d: %lld of %zu bytes wrong or missing (%lld still the poison, first at offset %lld; misalignment %zu)",
               i, to, wrong, bytes, s.unwritten, s.first, off);
  }
  if (mgpu_verifies(ctx)) mgpu_record_case(c->name, &r, 0);
  if (mgpu_computes(ctx)) {
    for (int i = 0; i < g->n; i++) {
      mgpu_free(&src[i]);
      mgpu_free(&dst[i]);
      mgpu_free(&snap[i]);
    }
  }
}

/* ---- timing -------------------------------------------------------------------------------- */

/* Both ops copy src into dst (the same buffers). Behind every call, on the timed stream, a probe
 * (peer_common.cuh) checks that the call wrote again the kProbes bytes of dst that the probe
 * before it had overwritten with complements, and overwrites kProbes others: one chain for both
 * ops, since both write dst, each op counting into its own pair of `counts`. A call that copies
 * part of the bytes when the calls come back to back (and all of them when it is looked at: the
 * cases, the call of "after-timing") leaves complements where the next probe looks. The probe
 * runs on GPU `from` and reaches dst through peer access: a few µs per call against ~2.7 ms for
 * 1 GiB, paid by both ops, inside the timed interval (which the harness gives no way out of). */
typedef struct perf_bufs {
  void *dst;
  const void *src;
  size_t bytes;
  int from, to;
  probe_chain chain;
  unsigned long long *counts; /* on GPU from: {yours wrong, yours checked, baseline wrong, baseline checked} */
} perf_bufs;

static void op_yours(void *arg, int iter, cudaStream_t stream) {
  perf_bufs *b = (perf_bufs *)arg;
  (void)iter;
  learner_copy(b->from, b->dst, b->src, b->bytes, stream); /* returns with GPU from current */
  probe_queue(&b->chain, b->counts, stream);
}

static void op_copy_engine(void *arg, int iter, cudaStream_t stream) {
  perf_bufs *b = (perf_bufs *)arg;
  (void)iter;
  MGPU_CUDA(cudaMemcpyPeerAsync(b->dst, b->to, b->src, b->from, b->bytes, stream));
  probe_queue(&b->chain, b->counts + 2, stream);
}

/* The rank times; then (both programs) the case "after-timing": the probes' count for your timed
 * calls, handed over, must be 0, and dst, handed over, must hold a new pattern copied over the
 * timed buffers. */
static void run_perf(mgpu_ctx *ctx, ring *g, const mgpu_case *c, uint8_t *host) {
  const size_t bytes = (size_t)c->n;
  const int from = 0, to = next_of(g, 0);
  mgpu_buf src, dst;
  memset(&src, 0, sizeof src);
  memset(&dst, 0, sizeof dst);
  long long hits = 0;
  unsigned long long probe[4] = {0, 0, 0, 0};
  if (mgpu_computes(ctx)) {
    src = mgpu_alloc(bytes, from);
    dst = mgpu_alloc(bytes, to);
    MGPU_CUDA(cudaSetDevice(from));
    mgpu_fill_pattern(src.ptr, bytes, ctx->seed, 800, g->stream[from]);
    MGPU_CUDA(cudaStreamSynchronize(g->stream[from]));
    perf_bufs b;
    memset(&b, 0, sizeof b);
    b.dst = dst.ptr;
    b.src = src.ptr;
    b.bytes = bytes;
    b.from = from;
    b.to = to;
    MGPU_CUDA(cudaMalloc((void **)&b.counts, sizeof probe));
    MGPU_CUDA(cudaMemset(b.counts, 0, sizeof probe));
    /* src is final: the probes' first places, so that the first timed call is checked too. */
    const probe_span span = {(uint8_t *)dst.ptr, (const uint8_t *)src.ptr, bytes};
    probe_arm(&b.chain, span, span, 1, g->stream[from]);
    mgpu_timing t;
    memset(&t, 0, sizeof t);
    t.case_name = c->name;
    t.bytes = (double)bytes;
    t.factor = 1.0;
    t.metric = "algbw";
    mgpu_time_pair(ctx, &t, op_yours, &b, op_copy_engine, &b, g->stream[from]);
    sync_all(g->n);
    MGPU_CUDA(cudaSetDevice(from));
    MGPU_CUDA(cudaMemcpy(probe, b.counts, sizeof probe, cudaMemcpyDeviceToHost));
    MGPU_CUDA(cudaFree(b.counts));
    if (probe[2])
      mgpu_note("after-timing: the probes found %llu of %llu bytes of the baseline's copies wrong: a bug in the course",
                probe[2], probe[3]);

    /* A new pattern over the timed buffers: a copy that skips repeated work fails here. */
    MGPU_CUDA(cudaSetDevice(from));
    mgpu_fill_pattern(src.ptr, bytes, ctx->seed, 801, g->stream[from]);
    mgpu_poison(&dst, 0);
    sync_all(g->n);
    MGPU_CUDA(cudaSetDevice(from));
    learner_copy(from, dst.ptr, src.ptr, bytes, g->stream[from]);
    MGPU_CUDA(cudaStreamSynchronize(g->stream[from]));
    sync_all(g->n);
  }
  mgpu_result r;
  mgpu_result_init(&r, (long long)bytes);
  /* {yours wrong, yours checked}: the probes' bytes count in the case's. */
  mgpu_hand_over(ctx, "after-timing/probes", probe, 2 * sizeof probe[0]);
  const long long missed = (long long)probe[0];
  r.checked += (long long)probe[1];
  r.bad += missed;
  tally f = compare(ctx, "after-timing/dst", dst.ptr, bytes, 801, 800, host, &r, 0);
  if (mgpu_computes(ctx)) hits = mgpu_guard_hits(&dst);
  if (mgpu_hand_over(ctx, "after-timing/guards", &hits, sizeof hits)) {
    r.guard_hits = hits;
    if (missed)
      snprintf(r.msg, sizeof r.msg, "after-timing: a timed call left bytes of dst unwritten: right before each timed call the driver overwrote %d bytes of dst, at places drawn afresh each time, and right behind it checked them against src; %lld of %lld such bytes had not been written by the %s call in between%s. Every call must copy all `bytes`, however often and however close together the calls come",
               kProbes, missed, (long long)probe[1], kFn,
               f.bad + f.unwritten > 0 ? " (and the late call after the timing got a new src wrong too)" : "");
    else if (f.bad + f.unwritten > 0)
      snprintf(r.msg, sizeof r.msg, "after-timing: a new src copied over the timed buffers arrived wrong or not at all (%lld bytes; %lld still the poison, %lld the previous contents): does %s skip work it has seen before?",
               f.bad + f.unwritten, f.unwritten, f.old, kFn);
    mgpu_record_case("after-timing", &r, 0);
  }
  if (mgpu_computes(ctx)) {
    mgpu_free(&src);
    mgpu_free(&dst);
  }
}

/* ---- main's parts ---------------------------------------------------------------------------- */

/* The rank finds its GPUs, enables peer access from each to the next and makes a non-blocking
 * stream on each. The driver's main then hands g->n over ("gpus"), so that the verifier (no
 * GPU) expects the same outputs, and calls bench_run. */
static void bench_open(mgpu_ctx *ctx, ring *g) {
  memset(g, 0, sizeof *g);
  if (ctx->world != 1)
    mgpu_fail("driver", "mgpu_init", __FILE__, __LINE__, 0, "this exercise runs as one process (launcher single)");
  if (!mgpu_computes(ctx)) return;
  if (ctx->num_devices < 1) mgpu_fail("driver", "mgpu_init", __FILE__, __LINE__, 0, "no GPU");
  g->n = ctx->num_devices < kMaxDevices ? ctx->num_devices : kMaxDevices;
  for (int i = 0; i < g->n; i++) enable_peer(i, next_of(g, i));
  for (int i = 0; i < g->n; i++) {
    MGPU_CUDA(cudaSetDevice(i));
    MGPU_CUDA(cudaStreamCreateWithFlags(&g->stream[i], cudaStreamNonBlocking));
  }
  if (g->n == 1) mgpu_note("one GPU: it copies to itself");
}

/* Every correctness case, then (with timing) every perf case and its after-timing check. */
static void bench_run(mgpu_ctx *ctx, ring *g) {
  check_handed_count("gpus", g->n, kMaxDevices);
  uint8_t *host = (uint8_t *)mgpu_host_alloc(ctx, kStage);
  for (int c = 0; c < ctx->ncases; c++) run_case(ctx, g, &ctx->cases[c], 10 * c + 1, host);
  if (ctx->perf) {
    if (mgpu_computes(ctx)) MGPU_CUDA(cudaSetDevice(0));
    for (int c = 0; c < ctx->nperf_cases; c++) run_perf(ctx, g, &ctx->perf_cases[c], host);
  }
  mgpu_host_free(ctx, host);
}

static void bench_close(mgpu_ctx *ctx, ring *g) {
  if (!mgpu_computes(ctx)) return;
  sync_all(g->n);
  for (int i = 0; i < g->n; i++) {
    MGPU_CUDA(cudaSetDevice(i));
    MGPU_CUDA(cudaStreamDestroy(g->stream[i]));
  }
}

#endif /* MODULE5_PEER_COPY_BENCH_CUH */
