/*
 * driver.cu — module4/put-bandwidth (course-owned).
 *
 * One process per GPU, one NVSHMEM PE each (mgpu_nvshmem_init: unique id through the harness's
 * rendezvous). Every PE sends to the next one, (me + 1) mod npes, at the same time.
 *
 * Correctness, per case (n = bytes; 1, 15, primes, a multiple of 8 that is not one of 16,
 * and a prime just under 256 MiB), three iterations with new data. In the first two every PE
 * puts to the next PE; in the third every PE puts to itself (peer = its own PE), so a put that
 * ignores `peer` and computes a neighbour of its own fails on any PE count:
 *   - dst is symmetric (nvshmem_malloc) with 4 KiB guard bands; every PE poisons its dst (0xFF)
 *     and the PEs meet before anyone sends;
 *   - the driver queues, on the stream it hands you, a 20 ms sleep and then the fill of src
 *     with the sending PE's own byte pattern of (seed, iteration): a put that does not wait for
 *     the stream's earlier work sends poison or the previous iteration's bytes;
 *   - put_to_peer (yours); the driver waits for that stream only, overwrites src with the
 *     poison at once, meets the other PEs (the harness's file barrier: host threads only) and
 *     every PE reads its whole dst back with the copy engine at once. A put left running on a
 *     stream the caller's stream does not wait for carries the poison from src (or has not
 *     written dst yet). Every byte is compared with what the previous PE sent.
 * Performance ("256MiB"): your put against cudaMemcpyAsync of the same bytes from src to the
 * peer's dst, at the address nvshmem_ptr gives for it (the copy engine over NVLink), timed in
 * the same run, alternating, all PEs sending at once. Metric: algorithm bandwidth, bytes/time.
 * After timing ("after-timing", not in MGPU_CASES): every dst is poisoned again, src gets bytes
 * no call has sent, and put_to_peer runs once more on the timed buffers; every byte is compared.
 * (What the last timed put left in dst proves nothing: the baseline writes the same bytes there.)
 *
 * The comparisons are each PE's verifier's (`verifier: true`, docs/protocol.md §4): the PE hands
 * over its dst, in chunks of 64 MiB, and its guard counts; it can make its own bytes only, never
 * the previous PE's, which its verifier makes on the CPU.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "put-bandwidth.h"

enum { kIterations = 3, kGuard = 4096 };
enum { kSelfIteration = 2 }; /* the iteration in which every PE puts to itself */

/* The PE that PE `me` puts to in iteration `it`, and the PE whose bytes it receives. */
static int peer_of(int me, int npes, int it) { return it == kSelfIteration ? me : (me + 1) % npes; }
static int sender_of(int me, int npes, int it) {
  return it == kSelfIteration ? me : (me + npes - 1) % npes;
}
static const long long kDelayNs = 20LL * 1000 * 1000; /* before the fill of src */
static const size_t kStage = (size_t)64 << 20;         /* bytes per hand-over of dst */

/* The pattern "iteration" of the bytes a PE sends in iteration `it`: the PE's own pattern
 * (mgpu_rank_pattern_key), so that no PE can make the bytes another PE sends it. */
static int pattern_id(int it) { return 1 + it; }

/* A guarded buffer in NVSHMEM's symmetric heap (collective). */
static mgpu_buf sym_alloc(size_t bytes, int device) {
  mgpu_buf b;
  memset(&b, 0, sizeof b);
  b.base = nvshmem_malloc(bytes + 2 * (size_t)kGuard);
  if (!b.base) mgpu_fail("driver", "nvshmem_malloc", __FILE__, __LINE__, 0, "out of symmetric memory (NVSHMEM_SYMMETRIC_SIZE)");
  b.guard = kGuard;
  b.ptr = (char *)b.base + kGuard;
  b.bytes = bytes;
  b.device = device;
  mgpu_poison(&b, 0);
  MGPU_CUDA(cudaStreamSynchronize(0));
  return b;
}

static void sym_free(mgpu_buf *b) {
  nvshmem_free(b->base);
  memset(b, 0, sizeof *b);
}

/* What the comparison of one iteration found. */
typedef struct diff {
  long long bad, unwritten;
  long long first;       /* offset of the first wrong byte; -1 when none */
  long long tail_ff;     /* length of the run of 0xFF bytes (poison) that ends dst */
} diff;

static void note_byte(mgpu_result *r, diff *d, long long i, uint8_t got, uint8_t want) {
  if (got == 0xFF) {
    r->unwritten++;
    d->unwritten++;
  } else {
    r->bad++;
    d->bad++;
  }
  if (d->first < 0) d->first = i;
  if (r->nfirst < 8) {
    mgpu_mismatch *m = &r->first[r->nfirst++];
    m->i = i;
    if (got == 0xFF)
      snprintf(m->got, sizeof m->got, "0xff(poison)");
    else
      snprintf(m->got, sizeof m->got, "0x%02x", got);
    snprintf(m->want, sizeof m->want, "0x%02x", want);
  }
}

/* Host memory for dst: in the rank, pinned and as large as dst (it is read back in one go); in
 * the verifier, one chunk, filled by each hand-over. The expected bytes (one chunk) exist only
 * where the check is made. */
typedef struct host_bufs {
  uint8_t *got, *want;
} host_bufs;

static host_bufs host_alloc(const mgpu_ctx *ctx, size_t bytes) {
  host_bufs h = {NULL, NULL};
  const size_t stage = bytes < kStage ? bytes : kStage;
  if (mgpu_computes(ctx))
    MGPU_CUDA(cudaMallocHost((void **)&h.got, bytes));
  else if (!(h.got = (uint8_t *)malloc(stage)))
    mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  if (mgpu_verifies(ctx) && !(h.want = (uint8_t *)malloc(stage)))
    mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  return h;
}

static void host_free(const mgpu_ctx *ctx, host_bufs *h) {
  if (mgpu_computes(ctx))
    MGPU_CUDA(cudaFreeHost(h->got));
  else
    free(h->got);
  free(h->want);
  h->got = h->want = NULL;
}

/* The rank reads all of dst back with the copy engine on `stream`, right away (a put left
 * running outside the caller's stream is still running then), and hands it over in chunks of
 * kStage bytes ("<what>/dst@<offset>"). Where the check is made, every byte is compared with
 * pattern `pattern` of PE `sender`. */
static diff check_dst(mgpu_ctx *ctx, const char *what, const mgpu_buf *dst, size_t n, int sender,
                      int pattern, host_bufs *h, mgpu_result *r, cudaStream_t stream) {
  diff d = {0, 0, -1, 0};
  uint64_t key = 0;
  char tag[128];
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaMemcpyAsync(h->got, dst->ptr, n, cudaMemcpyDeviceToHost, stream));
    MGPU_CUDA(cudaStreamSynchronize(stream));
  }
  if (mgpu_verifies(ctx)) key = mgpu_rank_pattern_key(ctx->seed, sender, pattern);
  for (size_t off = 0; off < n; off += kStage) {
    const size_t m = n - off < kStage ? n - off : kStage;
    const uint8_t *got = mgpu_computes(ctx) ? h->got + off : h->got;
    snprintf(tag, sizeof tag, "%s/dst@%zu", what, off);
    if (!mgpu_hand_over(ctx, tag, (void *)got, m)) continue;
    mgpu_pattern_fill_host(h->want, m, key, (long long)off);
    size_t ff = 0; /* this chunk's trailing 0xFF bytes */
    while (ff < m && got[m - 1 - ff] == 0xFF) ff++;
    d.tail_ff = ff == m ? d.tail_ff + (long long)m : (long long)ff;
    for (size_t b = 0; b < m; b += 4096) {
      const size_t k = m - b < 4096 ? m - b : 4096;
      if (memcmp(got + b, h->want + b, k) == 0) continue;
      for (size_t j = b; j < b + k; j++)
        if (got[j] != h->want[j]) note_byte(r, &d, (long long)(off + j), got[j], h->want[j]);
    }
    r->checked += (long long)m;
  }
  return d;
}

/* Guard bytes hit around dst and src: counted by the rank, handed over. */
static long long guard_hits_of(mgpu_ctx *ctx, const char *tag, const mgpu_buf *dst,
                               const mgpu_buf *src) {
  long long hits = 0;
  if (mgpu_computes(ctx)) hits = mgpu_guard_hits(dst) + mgpu_guard_hits(src);
  mgpu_hand_over(ctx, tag, &hits, sizeof hits);
  return hits;
}

static void call_put(const mgpu_buf *dst, const mgpu_buf *src, size_t bytes, int peer,
                     cudaStream_t stream) {
  MGPU_LEARNER(put_to_peer(dst->ptr, src->ptr, bytes, peer, stream));
}

static void run_case(mgpu_ctx *ctx, const mgpu_case *c, cudaStream_t stream) {
  const int me = ctx->rank, npes = ctx->world;
  const size_t bytes = (size_t)c->n;
  char tag[128];

  mgpu_buf dst, src;
  memset(&dst, 0, sizeof dst);
  memset(&src, 0, sizeof src);
  if (mgpu_computes(ctx)) {
    dst = sym_alloc(bytes, ctx->device);
    src = mgpu_alloc(bytes, ctx->device);
  }
  host_bufs h = host_alloc(ctx, bytes);

  mgpu_result r;
  mgpu_result_init(&r, c->n);
  r.checked = 0;
  diff worst = {0, 0, -1, 0};
  int worst_it = -1;
  long long guard_hits = 0, wrong_other = 0, wrong_self = 0;
  for (int it = 0; it < kIterations; it++) {
    if (mgpu_computes(ctx)) {
      mgpu_poison(&dst, stream);
      MGPU_CUDA(cudaStreamSynchronize(stream));
      nvshmem_barrier_all(); /* every dst is poisoned before anyone sends */

      mgpu_delay(stream, kDelayNs);
      mgpu_fill_rank_pattern(src.ptr, bytes, ctx->seed, me, pattern_id(it), stream);
      call_put(&dst, &src, bytes, peer_of(me, npes, it), stream);
      MGPU_CUDA(cudaStreamSynchronize(stream));
      /* Once the caller's stream has passed the call, src is the driver's again: it is
       * overwritten with the poison (0xFF, the guards untouched) at once. A put that is still
       * reading it (on a stream of its own, never joined back) carries poison into the peer's
       * dst, which the check reports as bytes still the poison after the caller's stream had
       * passed the work. Without this, such a put raced the read of dst below, and on a fast
       * link it could finish first and pass. */
      MGPU_CUDA(cudaMemsetAsync(src.ptr, 0xFF, bytes, stream));
      MGPU_CUDA(cudaStreamSynchronize(stream));
      /* The PEs meet through the harness's file rendezvous: host threads only, no GPU work, so
       * the read of dst (copy engine) starts right away even if a put left running outside the
       * caller's stream still occupies the SMs. */
      snprintf(tag, sizeof tag, "sent-%s-%d", c->name, it);
      mgpu_barrier(ctx, tag);
    }

    snprintf(tag, sizeof tag, "%s/%d", c->name, it);
    diff d = check_dst(ctx, tag, &dst, bytes, sender_of(me, npes, it), pattern_id(it), &h, &r,
                       stream);
    if (it == kSelfIteration)
      wrong_self += d.bad + d.unwritten;
    else
      wrong_other += d.bad + d.unwritten;
    /* The report explains one iteration: the first with wrong (not poison) bytes, else the
     * one with the most poison left. */
    const int worst_has_bad = worst_it >= 0 && worst.bad > 0;
    if (!worst_has_bad && (d.bad > 0 || d.unwritten > worst.unwritten)) {
      worst = d;
      worst_it = it;
    }
    snprintf(tag, sizeof tag, "%s/%d/guards", c->name, it);
    guard_hits += guard_hits_of(ctx, tag, &dst, &src);
  }
  r.guard_hits = guard_hits;

  if (mgpu_verifies(ctx)) {
    const long long wrong = worst.bad + worst.unwritten;
    const int prev = sender_of(me, npes, worst_it < 0 ? 0 : worst_it);
    const char *whose = worst_it == kSelfIteration ? "itself" : "its previous PE";
    if (wrong_self > 0 && wrong_other == 0 && npes > 1)
      snprintf(r.msg, sizeof r.msg,
               "PE %d: the puts to the next PE were right, but in iteration %d, where the driver "
               "passed peer = %d (this PE itself), %lld of %lld bytes of this PE's dst were wrong "
               "(%lld still the poison): put to the PE that the argument `peer` names, not to a "
               "neighbour computed from nvshmem_my_pe()",
               me, kSelfIteration, me, wrong_self, c->n, worst.unwritten);
    else if (wrong > 0 && worst.bad == 0 && worst.tail_ff == c->n)
      snprintf(r.msg, sizeof r.msg,
               "PE %d: none of the %lld bytes from PE %d (%s) arrived in iteration %d: dst is "
               "still the poison, every byte",
               me, c->n, prev, whose, worst_it);
    else if (wrong > 0 && worst.bad == 0 && worst.first >= c->n - worst.tail_ff)
      snprintf(r.msg, sizeof r.msg,
               "PE %d: the last %lld of %lld bytes from PE %d (%s) are still the poison "
               "(iteration %d, from offset %lld on): does every byte, up to the odd end, belong "
               "to some block's share?",
               me, c->n - worst.first, c->n, prev, whose, worst_it, worst.first);
    else if (wrong > 0 && worst.bad == 0)
      snprintf(r.msg, sizeof r.msg,
               "PE %d: %lld of %lld bytes from PE %d (%s) are still the poison after the "
               "caller's stream had passed your work (iteration %d, first at offset %lld): the "
               "whole transfer must be ordered on that stream and complete (nvshmem_quiet) when "
               "it ends",
               me, wrong, c->n, prev, whose, worst_it, worst.first);
    else if (wrong > 0)
      snprintf(r.msg, sizeof r.msg,
               "PE %d: %lld of %lld bytes differ from what PE %d (%s) put in iteration %d (%lld "
               "are still the poison, first wrong byte at offset %lld): stale bytes mean the put "
               "read src before the work queued ahead of it on the stream had written it",
               me, wrong, c->n, prev, whose, worst_it, worst.unwritten, worst.first);
    else if (r.guard_hits)
      snprintf(r.msg, sizeof r.msg,
               "%lld guard bytes around dst or src changed: write dst[0..%lld) on the peer and "
               "nothing else",
               r.guard_hits, c->n);
    mgpu_record_case(c->name, &r, 0);
  }

  host_free(ctx, &h);
  if (mgpu_computes(ctx)) {
    mgpu_free(&src);
    sym_free(&dst);
  }
}

/* The case "after-timing": one more iteration, "iteration" kIterations (a pattern no earlier
 * call sent), through the very buffers the timed calls used (dst and src exist in the rank
 * only). Collective. */
static void check_after_timing(mgpu_ctx *ctx, const char *perf_case, mgpu_buf *dst,
                               mgpu_buf *src, size_t bytes, cudaStream_t stream) {
  const int me = ctx->rank, npes = ctx->world;
  const int next = (me + 1) % npes, prev = (me + npes - 1) % npes;
  char tag[128];
  host_bufs h = host_alloc(ctx, bytes);

  mgpu_result r;
  mgpu_result_init(&r, (long long)bytes);
  r.checked = 0;
  if (mgpu_computes(ctx)) {
    mgpu_poison(dst, stream);
    mgpu_poison(src, stream);
    MGPU_CUDA(cudaStreamSynchronize(stream));
    nvshmem_barrier_all(); /* every dst is poisoned before anyone sends */
    mgpu_fill_rank_pattern(src->ptr, bytes, ctx->seed, me, pattern_id(kIterations), stream);
    call_put(dst, src, bytes, next, stream);
    MGPU_CUDA(cudaStreamSynchronize(stream));
    mgpu_barrier(ctx, "after-timing-sent");
  }

  snprintf(tag, sizeof tag, "after-timing/%s", perf_case);
  const diff d = check_dst(ctx, tag, dst, bytes, prev, pattern_id(kIterations), &h, &r, stream);
  snprintf(tag, sizeof tag, "after-timing/%s/guards", perf_case);
  r.guard_hits = guard_hits_of(ctx, tag, dst, src);
  if (mgpu_verifies(ctx)) {
    if (d.bad || d.unwritten)
      snprintf(r.msg, sizeof r.msg,
               "after the timed calls, a call with new data in the same buffers gave a wrong "
               "result: every call must do the whole work, repeated calls with the same buffers "
               "included (PE %d: %lld of %lld bytes from PE %d wrong, %lld of them still the "
               "poison)",
               me, d.bad + d.unwritten, (long long)bytes, prev, d.unwritten);
    else if (r.guard_hits)
      snprintf(r.msg, sizeof r.msg,
               "after the timed calls, %lld guard bytes around dst or src changed: write "
               "dst[0..%lld) on the peer and nothing else",
               r.guard_hits, (long long)bytes);
    mgpu_record_case("after-timing", &r, 0);
  }
  host_free(ctx, &h);
}

/* ---- timing ------------------------------------------------------------------------------ */

typedef struct perf_bufs {
  const mgpu_buf *dst; /* symmetric: the peer's copy is what your put writes */
  const mgpu_buf *src;
  void *peer_dst; /* the peer's dst as this GPU addresses it (nvshmem_ptr): the copy's target */
  size_t bytes;
  int next;
} perf_bufs;

static void op_put(void *arg, int iter, cudaStream_t stream) {
  perf_bufs *b = (perf_bufs *)arg;
  (void)iter;
  call_put(b->dst, b->src, b->bytes, b->next, stream);
}

static void op_copy_engine(void *arg, int iter, cudaStream_t stream) {
  perf_bufs *b = (perf_bufs *)arg;
  (void)iter;
  MGPU_CUDA(cudaMemcpyAsync(b->peer_dst, b->src->ptr, b->bytes, cudaMemcpyDeviceToDevice,
                            stream));
}

static void run_perf(mgpu_ctx *ctx, const mgpu_case *c, cudaStream_t stream) {
  const int next = (ctx->rank + 1) % ctx->world;
  const size_t bytes = (size_t)c->n;
  mgpu_buf dst, src;
  memset(&dst, 0, sizeof dst);
  memset(&src, 0, sizeof src);
  if (mgpu_computes(ctx)) {
    dst = sym_alloc(bytes, ctx->device);
    src = mgpu_alloc(bytes, ctx->device);
    mgpu_fill_rank_pattern(src.ptr, bytes, ctx->seed, ctx->rank, 0, stream);
    MGPU_CUDA(cudaStreamSynchronize(stream));

    perf_bufs b;
    b.dst = &dst;
    b.src = &src;
    b.peer_dst = nvshmem_ptr(dst.ptr, next);
    b.bytes = bytes;
    b.next = next;
    if (!b.peer_dst) {
      char msg[200];
      snprintf(msg, sizeof msg, "nvshmem_ptr gives no address for PE %d's dst: NVSHMEM reaches "
               "it without peer mapping, so the copy-engine baseline cannot address it", next);
      mgpu_fail("driver", "nvshmem_ptr", __FILE__, __LINE__, 0, msg);
    }
    nvshmem_barrier_all();

    mgpu_timing t;
    memset(&t, 0, sizeof t);
    t.case_name = c->name;
    t.bytes = (double)bytes;
    t.factor = 1.0;
    t.metric = "algbw";
    mgpu_time_pair(ctx, &t, op_put, &b, op_copy_engine, &b, stream);
    MGPU_CUDA(cudaStreamSynchronize(stream));
    nvshmem_barrier_all(); /* every timed write into every dst has landed */
  }
  check_after_timing(ctx, c->name, &dst, &src, bytes, stream);
  if (mgpu_computes(ctx)) {
    nvshmem_barrier_all();
    mgpu_free(&src);
    sym_free(&dst);
  }
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  cudaStream_t stream = NULL;

  mgpu_init(&ctx, argc, argv);
  if (mgpu_computes(&ctx)) {
    /* The largest buffer is 256 MiB (+ guards) per PE, one at a time; leave room for NVSHMEM's
     * allocator (3.4 rounds the heap up to its 512 MiB allocation granularity). Set before
     * NVSHMEM starts, which is when it reads its environment. */
    setenv("NVSHMEM_SYMMETRIC_SIZE", "512M", 1);
    mgpu_nvshmem_init(&ctx);
    MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }

  for (int k = 0; k < ctx.ncases; k++) run_case(&ctx, &ctx.cases[k], stream);
  if (ctx.perf)
    for (int k = 0; k < ctx.nperf_cases; k++) run_perf(&ctx, &ctx.perf_cases[k], stream);

  if (mgpu_computes(&ctx)) {
    MGPU_CUDA(cudaStreamDestroy(stream));
    nvshmem_finalize();
  }
  return mgpu_finish(&ctx);
}
