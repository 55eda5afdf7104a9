/*
 * driver.cu — module3/ring-allreduce (course-owned).
 *
 * One process per GPU; the driver makes the communicator.
 *
 * Correctness, per case (n = floats per rank): two iterations with different inputs. Before
 * each call recv and scratch are filled with NaN; after it, recv is read back on the learner's
 * stream (work left unordered on another stream is caught) and every element is compared with
 * the host sum, tolerance 0; send is read back too and must still hold this rank's input.
 * The comparisons are made by each rank's verifier (`verifier: true`, docs/protocol.md §4): the
 * rank hands recv and send over and never knows the other ranks' inputs or the sum.
 * Sizes are odd, prime, one and a power of two, on whatever number of GPUs the machine has.
 *
 * Performance (headline case "256MiB"): the learner's ring against ncclAllReduce of the same
 * send buffer (into a recv of its own) in the same run (ABAB), as bus bandwidth with
 * nccl-tests' all-reduce factor 2(world-1)/world.
 *
 * After timing ("after-timing", not in MGPU_CASES): recv must still hold the sum of the timed
 * calls' inputs (the baseline writes elsewhere, so the learner's last timed call wrote it); then
 * send gets inputs no call has seen, recv and scratch are poisoned, and one more call on the
 * timed buffers and stream must produce the new sum. A ring that stops working once it has
 * been called often enough, or on the same buffers again, fails here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"
#include "ring-allreduce.h"

enum { kIterations = 2 };

typedef struct ring_bufs {
  mgpu_buf send, recv, scratch;
  long long n;
  ncclComm_t comm;
  int rank, world;
} ring_bufs;

static void bufs_alloc(ring_bufs *b, long long n, const mgpu_ctx *ctx, ncclComm_t comm) {
  b->n = n;
  b->comm = comm;
  b->rank = ctx->rank;
  b->world = ctx->world;
  b->send = mgpu_alloc((size_t)n * sizeof(float), ctx->device);
  b->recv = mgpu_alloc((size_t)n * sizeof(float), ctx->device);
  b->scratch = mgpu_alloc(RING_SCRATCH_ELEMS(n) * sizeof(float), ctx->device);
}

static void bufs_free(ring_bufs *b) {
  mgpu_free(&b->scratch);
  mgpu_free(&b->recv);
  mgpu_free(&b->send);
}

static void call_ring(ring_bufs *b, cudaStream_t stream) {
  MGPU_LEARNER(ring_allreduce(b->comm, b->rank, b->world, (const float *)b->send.ptr,
                              (float *)b->recv.ptr, (size_t)b->n, (float *)b->scratch.ptr,
                              stream));
}

/* Host side of a check. got_recv and got_send hold what the rank read back (pinned in the
 * rank, where it reads them from the GPU; plain memory in the verifier, where they arrive).
 * want and mine (the expected sum, this rank's input) exist only where the check is made. */
typedef struct ring_check {
  float *want, *mine, *got_recv, *got_send;
  long long send_changed;
} ring_check;

static float *host_floats(const mgpu_ctx *ctx, long long n, int pinned) {
  float *p = NULL;
  if (pinned) {
    MGPU_CUDA(cudaMallocHost((void **)&p, (size_t)n * sizeof(float)));
  } else {
    p = (float *)malloc((size_t)n * sizeof(float));
    if (!p) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  }
  (void)ctx;
  return p;
}

static void check_alloc(const mgpu_ctx *ctx, ring_check *k, long long n) {
  const int pinned = mgpu_computes(ctx);
  memset(k, 0, sizeof *k);
  k->got_recv = host_floats(ctx, n, pinned);
  k->got_send = host_floats(ctx, n, pinned);
  if (mgpu_verifies(ctx)) {
    k->want = host_floats(ctx, n, 0);
    k->mine = host_floats(ctx, n, 0);
  }
}

static void check_free(const mgpu_ctx *ctx, ring_check *k) {
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaFreeHost(k->got_send));
    MGPU_CUDA(cudaFreeHost(k->got_recv));
  } else {
    free(k->got_send);
    free(k->got_recv);
  }
  free(k->mine);
  free(k->want);
}

/* want = the sum over ranks of the inputs of iteration `it`; mine = this rank's input. Only
 * where the check is made: a rank checked by a verifier cannot make another rank's inputs. */
static void expect_sum(const mgpu_ctx *ctx, long long n, int it, ring_check *k) {
  long long i;
  int rr;
  for (i = 0; i < n; i++) k->want[i] = 0.0f;
  for (rr = 0; rr < ctx->world; rr++) {
    uint64_t key = mgpu_exact_key(ctx->seed, rr, it);
    float *dst = rr == ctx->rank ? k->mine : NULL;
    for (i = 0; i < n; i++) {
      float v = mgpu_fine_value_k(key, i);
      k->want[i] += v;
      if (dst) dst[i] = v;
    }
  }
}

/* The rank reads recv and send back on `stream` and hands both over; where the check is made,
 * recv is compared with the sum of iteration `it` into r and send with this rank's input. */
static void compare(mgpu_ctx *ctx, ring_bufs *b, int it, const char *tag, ring_check *k,
                    mgpu_result *r, cudaStream_t stream) {
  const size_t bytes = (size_t)b->n * sizeof(float);
  char t[128];
  long long i;
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaMemcpyAsync(k->got_recv, b->recv.ptr, bytes, cudaMemcpyDeviceToHost, stream));
    MGPU_CUDA(cudaMemcpyAsync(k->got_send, b->send.ptr, bytes, cudaMemcpyDeviceToHost, stream));
    MGPU_CUDA(cudaStreamSynchronize(stream));
  }
  snprintf(t, sizeof t, "%s/recv", tag);
  mgpu_hand_over(ctx, t, k->got_recv, bytes);
  snprintf(t, sizeof t, "%s/send", tag);
  if (!mgpu_hand_over(ctx, t, k->got_send, bytes)) return;
  expect_sum(ctx, b->n, it, k);
  for (i = 0; i < b->n; i++) mgpu_result_add(r, i, k->got_recv[i], k->want[i], 0.0);
  for (i = 0; i < b->n; i++) k->send_changed += k->got_send[i] != k->mine[i];
}

/* One checked call with the inputs of iteration `it`: recv and scratch poisoned first. */
static void checked_call(mgpu_ctx *ctx, ring_bufs *b, int it, const char *tag, ring_check *k,
                         mgpu_result *r, cudaStream_t stream) {
  if (mgpu_computes(ctx)) {
    mgpu_poison(&b->recv, stream);
    mgpu_poison(&b->scratch, stream);
    mgpu_fill_fine_f32((float *)b->send.ptr, b->n, ctx->seed, ctx->rank, it, stream);
    call_ring(b, stream);
  }
  compare(ctx, b, it, tag, k, r, stream);
}

/* Guard bytes hit around send, recv and scratch: counted by the rank, handed over. */
static long long guard_hits(mgpu_ctx *ctx, const ring_bufs *b, const char *tag) {
  long long hits = 0;
  if (mgpu_computes(ctx))
    hits = mgpu_guard_hits(&b->send) + mgpu_guard_hits(&b->recv) + mgpu_guard_hits(&b->scratch);
  mgpu_hand_over(ctx, tag, &hits, sizeof hits);
  return hits;
}

static const char kSendChanged[] =
    "send was modified: %lld of its elements no longer hold this rank's input after the call "
    "(send is read-only; use scratch)";

static void run_case(mgpu_ctx *ctx, const mgpu_case *c, ncclComm_t comm, cudaStream_t stream) {
  const long long n = c->n;
  ring_bufs b;
  ring_check k;
  mgpu_result r;
  char tag[128];
  int it;

  memset(&b, 0, sizeof b);
  b.n = n;
  if (mgpu_computes(ctx)) bufs_alloc(&b, n, ctx, comm);
  mgpu_result_init(&r, n);
  check_alloc(ctx, &k, n);
  for (it = 0; it < kIterations; it++) {
    snprintf(tag, sizeof tag, "%s/%d", c->name, it);
    checked_call(ctx, &b, it, tag, &k, &r, stream);
  }
  snprintf(tag, sizeof tag, "%s/guards", c->name);
  r.guard_hits = guard_hits(ctx, &b, tag);
  if (mgpu_verifies(ctx)) {
    if (k.send_changed)
      snprintf(r.msg, sizeof r.msg, kSendChanged, k.send_changed);
    else if (r.bad || r.unwritten)
      snprintf(r.msg, sizeof r.msg,
               "ring all-reduce of %lld floats over %d ranks (%lld per rank's chunk, remainder "
               "%lld), %d iterations: recv must hold the sum of every rank's send",
               n, ctx->world, n / ctx->world, n % ctx->world, kIterations);
    else if (r.guard_hits)
      snprintf(r.msg, sizeof r.msg, "a write landed outside send, recv or scratch");
    mgpu_record_case(c->name, &r, k.send_changed != 0);
  }

  check_free(ctx, &k);
  if (mgpu_computes(ctx)) bufs_free(&b);
}

/* ---- timing ------------------------------------------------------------------------------ */

enum { kTimedIter = 0, kAfterTimingIter = 1000 }; /* input iterations; correctness used 0, 1 */

/* The baseline's buffers: the learner's send, a recv of its own, so that after timing the
 * learner's recv holds what the learner's last timed call wrote. */
typedef struct nccl_arg {
  const void *send;
  void *recv;
  size_t n;
  ncclComm_t comm;
} nccl_arg;

static void op_ring(void *arg, int iter, cudaStream_t stream) {
  (void)iter;
  call_ring((ring_bufs *)arg, stream);
}

static void op_nccl(void *arg, int iter, cudaStream_t stream) {
  nccl_arg *a = (nccl_arg *)arg;
  (void)iter;
  MGPU_NCCL_OWN(ncclAllReduce(a->send, a->recv, a->n, ncclFloat, ncclSum, a->comm, stream));
}

/* The case "after-timing": the last timed call's recv (inputs unchanged during timing), then
 * one more call exactly as the timed ones, with inputs no call has seen. Every rank makes the
 * call, whatever its own check found. */
static void check_after_timing(mgpu_ctx *ctx, ring_bufs *b, cudaStream_t stream) {
  ring_check k;
  mgpu_result r;
  long long last_wrong;
  check_alloc(ctx, &k, b->n);
  mgpu_result_init(&r, b->n);
  compare(ctx, b, kTimedIter, "after-timing/last", &k, &r, stream);
  last_wrong = r.bad + r.unwritten;
  checked_call(ctx, b, kAfterTimingIter, "after-timing/new", &k, &r, stream);
  r.guard_hits = guard_hits(ctx, b, "after-timing/guards");
  if (mgpu_verifies(ctx)) {
    if (k.send_changed)
      snprintf(r.msg, sizeof r.msg, kSendChanged, k.send_changed);
    else if (last_wrong)
      snprintf(r.msg, sizeof r.msg,
               "after the timed calls, recv did not hold the sum of the inputs they were given "
               "(%lld wrong elements): every call must do the whole work, repeated calls with "
               "the same buffers included",
               last_wrong);
    else if (r.bad || r.unwritten)
      snprintf(r.msg, sizeof r.msg,
               "after the timed calls, a call with new data in the same buffers gave a wrong "
               "result: every call must do the whole work, repeated calls with the same buffers "
               "included (%lld floats over %d ranks)",
               b->n, ctx->world);
    else if (r.guard_hits)
      snprintf(r.msg, sizeof r.msg, "a write landed outside send, recv or scratch");
    mgpu_record_case("after-timing", &r, k.send_changed != 0);
  }
  check_free(ctx, &k);
}

static void run_perf(mgpu_ctx *ctx, const mgpu_case *c, ncclComm_t comm, cudaStream_t stream) {
  ring_bufs b;
  mgpu_buf base_recv;
  nccl_arg base;
  mgpu_timing t;
  if (!mgpu_computes(ctx)) { /* the verifier: the after-timing check only */
    memset(&b, 0, sizeof b);
    b.n = c->n;
    check_after_timing(ctx, &b, stream);
    return;
  }
  bufs_alloc(&b, c->n, ctx, comm);
  base_recv = mgpu_alloc((size_t)c->n * sizeof(float), ctx->device);
  base.send = b.send.ptr;
  base.recv = base_recv.ptr;
  base.n = (size_t)c->n;
  base.comm = comm;
  mgpu_fill_fine_f32((float *)b.send.ptr, c->n, ctx->seed, ctx->rank, kTimedIter, stream);
  MGPU_CUDA(cudaStreamSynchronize(stream));
  memset(&t, 0, sizeof t);
  t.case_name = c->name;
  t.bytes = (double)c->n * sizeof(float);
  t.factor = 2.0 * (ctx->world - 1) / ctx->world;
  t.metric = "busbw";
  mgpu_time_pair(ctx, &t, op_ring, &b, op_nccl, &base, stream);
  MGPU_CUDA(cudaDeviceSynchronize());
  check_after_timing(ctx, &b, stream);
  MGPU_CUDA(cudaDeviceSynchronize());
  mgpu_free(&base_recv);
  bufs_free(&b);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  cudaStream_t stream = NULL;
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  int k;

  mgpu_init(&ctx, argc, argv);
  if (mgpu_computes(&ctx)) {
    MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    mgpu_nccl_unique_id(&ctx, &id);
    MGPU_NCCL(ncclCommInitRank(&comm, ctx.world, id, ctx.rank));
  }

  for (k = 0; k < ctx.ncases; k++) run_case(&ctx, &ctx.cases[k], comm, stream);
  if (ctx.perf)
    for (k = 0; k < ctx.nperf_cases; k++) run_perf(&ctx, &ctx.perf_cases[k], comm, stream);

  if (mgpu_computes(&ctx)) {
    MGPU_NCCL(ncclCommDestroy(comm));
    MGPU_CUDA(cudaStreamDestroy(stream));
  }
  return mgpu_finish(&ctx);
}
