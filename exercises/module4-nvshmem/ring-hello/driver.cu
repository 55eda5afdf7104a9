/*
 * driver.cu — module4/ring-hello (course-owned).
 *
 * One process per GPU; every process is one NVSHMEM PE, started through the harness's
 * unique-id rendezvous (mgpu_nvshmem_init, no MPI). Per case (n = floats per PE):
 *
 *   1. hello_alloc (yours) gives the symmetric memory. The driver checks on every PE that it is
 *      in NVSHMEM's symmetric heap (nvshmem_ptr of it for this PE is not NULL), and the PEs agree
 *      on the outcome before anything is sent: memory from cudaMalloc has no address on the
 *      other PEs, and a put into it would scribble over whatever the peer has there.
 *   2. The inbox is the middle of that memory, with 4 KiB guard bands on both sides.
 *   3. Three iterations with different data: the driver poisons every inbox (NaN), sets every
 *      byte of `mine` to 0x7F (a marker: "not written yet") and meets the other PEs
 *      (nvshmem_barrier_all, after its stream is idle) so that no put can land before the
 *      poison. Then, on the stream, it fills `mine` with exact values of (seed, PE, iteration),
 *      calls ring_hello (yours), and reads the inbox back right behind your work on the same
 *      stream: no barrier of the driver's in between.
 *   4. One PE per iteration (PE it mod n_pes) starts late on purpose: a kernel of the driver's
 *      sleeps 30 ms on its stream before the fill of `mine` and ring_hello's work. Its
 *      successor can only pass if your code waits for the incoming data, not just for its own
 *      outgoing put; and a kernel that is not ordered behind the stream's earlier work (launched
 *      on the default stream, say) sends the marker instead of the data.
 *   5. Every element is compared exactly with what the previous PE sent; a mismatch that is
 *      another PE's data is named as such; `mine` must be unchanged; guard bands intact.
 *
 * The comparisons are each PE's verifier's (`verifier: true`, docs/protocol.md §4): the PE hands
 * over its inbox, `mine` and the guard count, and never knows another PE's data.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring-hello.h"

enum { kIterations = 3, kGuard = 4096 };
static const long long kLateNs = 30LL * 1000 * 1000; /* how late the late PE starts */
/* Every byte of `mine` until the stream's fill has run: a float (about 3.4e38) that no exact
 * value equals, so an inbox holding it names a put that read `mine` too early. */
enum { kMarkerByte = 0x7F };

static int is_marker(float v) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  return bits == 0x7F7F7F7Fu;
}

/* What hello_alloc returned, as every PE judges it. */
enum { kAllocOK = 0, kAllocNull = 1, kAllocNotSymmetric = 2, kAllocTooSmall = 3 };

static int judge_alloc(const void *p, size_t total, int me) {
  if (!p) return kAllocNull;
  if (!nvshmem_ptr(p, me)) return kAllocNotSymmetric;
  if (!nvshmem_ptr((const char *)p + total - 1, me)) return kAllocTooSmall;
  return kAllocOK;
}

/* Every PE learns every PE's verdict (one share per PE), so all of them skip the case
 * together when any allocation is unusable. Returns the first bad PE, or -1. */
static int agree_alloc(mgpu_ctx *ctx, const char *case_name, int mine, int *what) {
  int bad = -1;
  for (int r = 0; r < ctx->world; r++) {
    char key[128];
    int v = r == ctx->rank ? mine : 0;
    snprintf(key, sizeof key, "alloc-%s-%d", case_name, r);
    mgpu_share(ctx, key, &v, sizeof v, r);
    if (v != kAllocOK && bad < 0) {
      bad = r;
      *what = v;
    }
  }
  return bad;
}

/* The run's context, for the helpers below that record. */
static mgpu_ctx *driver_ctx;

static void alloc_failed(const mgpu_case *c, size_t total, int bad_pe, int what, int me) {
  mgpu_result r;
  mgpu_result_init(&r, c->n);
  r.checked = r.unwritten = c->n; /* nothing could be sent */
  switch (what) {
  case kAllocNull:
    snprintf(r.msg, sizeof r.msg,
             "hello_alloc(%zu) returned NULL on PE %d: allocate the inbox from NVSHMEM's "
             "symmetric heap (nvshmem_malloc), on every PE, with the same size",
             total, bad_pe);
    break;
  case kAllocNotSymmetric:
    snprintf(r.msg, sizeof r.msg,
             "hello_alloc returned memory outside NVSHMEM's symmetric heap on PE %d%s "
             "(nvshmem_ptr of it is NULL): cudaMalloc'd memory has no address on the other "
             "PEs, so no put can target it. Allocate the inbox with nvshmem_malloc",
             bad_pe, bad_pe == me ? "" : " (checked there, before anything was sent)");
    break;
  default:
    snprintf(r.msg, sizeof r.msg,
             "hello_alloc(%zu) on PE %d returned symmetric memory that ends before %zu bytes: "
             "allocate as many bytes as asked",
             total, bad_pe, total);
  }
  if (mgpu_verifies(driver_ctx)) mgpu_record_case(c->name, &r, 1);
}

static void run_case(mgpu_ctx *ctx, const mgpu_case *c, cudaStream_t stream) {
  const int me = ctx->rank, npes = ctx->world;
  const int prev = (me + npes - 1) % npes;
  const long long n = c->n;
  const size_t bytes = (size_t)n * sizeof(float), total = bytes + 2 * (size_t)kGuard;
  char tag[128];

  /* What the rank found of hello_alloc, as a fact it hands over: {first bad PE, what}. */
  char *base = NULL;
  int alloc[2] = {-1, kAllocOK};
  if (mgpu_computes(ctx)) {
    MGPU_LEARNER(base = (char *)hello_alloc(total));
    alloc[0] = agree_alloc(ctx, c->name, judge_alloc(base, total, me), &alloc[1]);
  }
  snprintf(tag, sizeof tag, "%s/alloc", c->name);
  mgpu_hand_over(ctx, tag, alloc, sizeof alloc);
  if (alloc[0] >= 0) {
    alloc_failed(c, total, alloc[0], alloc[1], me);
    if (base) MGPU_LEARNER(hello_free(base));
    return;
  }

  /* The inbox: a guarded buffer in the learner's symmetric memory. */
  mgpu_buf inbox, mine;
  memset(&inbox, 0, sizeof inbox);
  memset(&mine, 0, sizeof mine);
  float *host, *host_mine;
  if (mgpu_computes(ctx)) {
    inbox.base = base;
    inbox.guard = kGuard;
    inbox.ptr = base + kGuard;
    inbox.bytes = bytes;
    inbox.device = ctx->device;
    mine = mgpu_alloc(bytes, ctx->device);
    MGPU_CUDA(cudaMallocHost((void **)&host, bytes));
    MGPU_CUDA(cudaMallocHost((void **)&host_mine, bytes));
  } else {
    host = (float *)malloc(bytes);
    host_mine = (float *)malloc(bytes);
    if (!host || !host_mine) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  }
  long long *from = (long long *)calloc((size_t)npes, sizeof(long long));
  if (!from) mgpu_fail("driver", "calloc", __FILE__, __LINE__, 0, "out of host memory");

  mgpu_result r;
  mgpu_result_init(&r, n);
  long long mine_changed = 0, guard_hits = 0, marked = 0;
  int first_bad_it = -1, first_bad_late = -1, first_marked_it = -1;
  for (int it = 0; it < kIterations; it++) {
    const int late = it % npes;
    long long hits = 0;
    if (mgpu_computes(ctx)) {
      mgpu_poison(&inbox, stream);
      MGPU_CUDA(cudaMemsetAsync(mine.ptr, kMarkerByte, bytes, stream));
      MGPU_CUDA(cudaStreamSynchronize(stream));
      nvshmem_barrier_all(); /* every inbox is poisoned before any PE sends */

      /* `mine` is written on the stream, right before the call (and behind the late PE's
       * sleep): work that is not ordered after the stream's earlier work sends the marker. */
      if (npes > 1 && me == late) mgpu_delay(stream, kLateNs);
      mgpu_fill_fine_f32((float *)mine.ptr, n, ctx->seed, me, it, stream);
      MGPU_LEARNER(ring_hello((float *)inbox.ptr, (const float *)mine.ptr, (size_t)n, stream));
      MGPU_CUDA(cudaMemcpyAsync(host, inbox.ptr, bytes, cudaMemcpyDeviceToHost, stream));
      MGPU_CUDA(cudaMemcpyAsync(host_mine, mine.ptr, bytes, cudaMemcpyDeviceToHost, stream));
      MGPU_CUDA(cudaStreamSynchronize(stream));
      hits = mgpu_guard_hits(&inbox) + mgpu_guard_hits(&mine);
      nvshmem_barrier_all(); /* every PE has read its inbox before the next poison */
    }
    /* The inbox, `mine` after the call and the guards go to the verifier. */
    snprintf(tag, sizeof tag, "%s/%d/inbox", c->name, it);
    mgpu_hand_over(ctx, tag, host, bytes);
    snprintf(tag, sizeof tag, "%s/%d/mine", c->name, it);
    mgpu_hand_over(ctx, tag, host_mine, bytes);
    snprintf(tag, sizeof tag, "%s/%d/guards", c->name, it);
    if (!mgpu_hand_over(ctx, tag, &hits, sizeof hits)) continue;

    const long long bad0 = r.bad, unw0 = r.unwritten;
    const uint64_t want_key = mgpu_exact_key(ctx->seed, prev, it);
    for (long long i = 0; i < n; i++) {
      const float want = mgpu_fine_value_k(want_key, i);
      const long long before = r.bad;
      mgpu_result_add(&r, i, host[i], want, 0.0);
      if (is_marker(host[i])) {
        marked++;
        if (first_marked_it < 0) first_marked_it = it;
      }
      if (r.bad != before) { /* whose data is it? (values collide 1 in 129: count, keep the most) */
        for (int s = 0; s < npes; s++)
          if (s != prev && mgpu_fine_value(ctx->seed, s, it, i) == host[i]) from[s]++;
      }
    }
    if ((r.bad != bad0 || r.unwritten != unw0) && first_bad_it < 0) {
      first_bad_it = it;
      first_bad_late = late;
    }
    guard_hits += hits;

    /* `mine` is an input: it must come back as the driver wrote it. */
    const uint64_t mine_key = mgpu_exact_key(ctx->seed, me, it);
    for (long long i = 0; i < n; i++) mine_changed += host_mine[i] != mgpu_fine_value_k(mine_key, i);
  }
  r.guard_hits = guard_hits;

  if (mgpu_verifies(ctx)) {
    int likely = -1;
    for (int s = 0; s < npes; s++)
      if (from[s] > 0 && (likely < 0 || from[s] > from[likely])) likely = s;
    if (mine_changed) {
      snprintf(r.msg, sizeof r.msg,
               "mine was modified: %lld of its elements no longer held PE %d's data after the "
               "call; it is the source of your put, read it only",
               mine_changed, me);
    } else if (marked) {
      snprintf(r.msg, sizeof r.msg,
               "PE %d's inbox holds %lld elements of the marker the driver leaves in `mine` until "
               "the work queued on the stream before your call has written it (first in "
               "iteration %d): PE %d's put read mine before the work queued ahead of it on the "
               "stream had run. Launch your kernel on `stream` (the default stream is not "
               "ordered with it), so that it starts after that work",
               me, marked, first_marked_it, prev);
    } else if (r.bad && likely >= 0 && from[likely] * 2 >= r.bad) {
      snprintf(r.msg, sizeof r.msg,
               "PE %d's inbox holds data sent by PE %d, but its previous PE is %d (%d PEs): each "
               "PE must send to (my PE + 1) mod (number of PEs), and so receive from (my PE - 1) "
               "mod (number of PEs)",
               me, likely, prev, npes);
    } else if (r.unwritten && !r.bad && first_bad_it >= 0 && npes > 1 && first_bad_late == prev) {
      snprintf(r.msg, sizeof r.msg,
               "PE %d's inbox still held the poison once its stream had passed your work, in "
               "iteration %d, where PE %d (its previous PE) started %lld ms late on purpose: the "
               "put had not arrived. Before your work on the stream ends, wait until the data "
               "sent TO this PE is there (a barrier on the stream, or a signal), not only until "
               "your own put went out",
               me, first_bad_it, prev, kLateNs / 1000000);
    } else if (r.unwritten && !r.bad) {
      snprintf(r.msg, sizeof r.msg,
               "PE %d's inbox still held the poison (%lld of %lld elements over %d iterations) "
               "once its stream had passed your work: the put from PE %d, its previous PE, had "
               "not arrived or was never made",
               me, r.unwritten, r.checked, kIterations, prev);
    } else if (r.bad || r.unwritten) {
      snprintf(r.msg, sizeof r.msg,
               "PE %d's inbox (%lld floats, %d PEs, %d iterations) must hold exactly what PE "
               "%d, its previous PE, sent from its `mine`: %lld elements differ, %lld are still "
               "the poison",
               me, n, npes, kIterations, prev, r.bad, r.unwritten);
    } else if (r.guard_hits) {
      snprintf(r.msg, sizeof r.msg,
               "a write landed outside the inbox or outside mine (%lld guard bytes changed): "
               "write the n floats of the inbox and nothing beyond",
               r.guard_hits);
    }
    mgpu_record_case(c->name, &r, mine_changed != 0);
  }

  free(from);
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaFreeHost(host_mine));
    MGPU_CUDA(cudaFreeHost(host));
    mgpu_free(&mine);
    MGPU_LEARNER(hello_free(base));
  } else {
    free(host_mine);
    free(host);
  }
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  cudaStream_t stream = NULL;

  mgpu_init(&ctx, argc, argv);
  driver_ctx = &ctx;
  if (mgpu_computes(&ctx)) {
    /* The largest case needs 4 MiB of symmetric memory per PE; NVSHMEM's default heap is 1 GiB
     * (3.4 rounds any size up to its allocation granularity, 512 MiB unless
     * NVSHMEM_CUMEM_GRANULARITY says otherwise). Set before NVSHMEM starts, which is when it
     * reads its environment. */
    setenv("NVSHMEM_SYMMETRIC_SIZE", "64M", 1);
    mgpu_nvshmem_init(&ctx);
    MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }

  for (int k = 0; k < ctx.ncases; k++) run_case(&ctx, &ctx.cases[k], stream);

  if (mgpu_computes(&ctx)) {
    MGPU_CUDA(cudaStreamDestroy(stream));
    nvshmem_finalize();
  }
  return mgpu_finish(&ctx);
}
