/*
 * driver.cu — module3/grouped-collectives (course-owned).
 *
 * One process per GPU. The driver makes the communicator. A case's n is a number of tensors;
 * tensor k holds tensor_elems(k) floats, between 4 KiB and 64 KiB, most of them odd counts.
 * Every tensor has its own guarded, poisoned buffers, so a write past one tensor's end is
 * caught.
 *
 * Correctness: two iterations per case with different inputs (a result cached from the first
 * call fails the second); every element of every tensor on every rank is compared with the
 * host sum, tolerance 0, after reading it back on the learner's stream.
 *
 * Performance (headline case "many"): the learner's allreduce_many against the same calls made
 * one by one, outside any group, timed in the same run (ABAB). The baseline has a batch of
 * its own with the same inputs, so after timing the learner's recv holds what the learner's
 * last timed call wrote. Metric: time per batch.
 *
 * After timing ("after-timing", not in MGPU_CASES): recv must hold the sums of the timed
 * calls' inputs; then every send[k] gets inputs no call has seen, every recv[k] is poisoned,
 * and one more call on the timed buffers and stream must produce the new sums.
 *
 * The comparisons are each rank's verifier's (`verifier: true`, docs/protocol.md §4): the rank
 * hands every recv[k] over and never knows the other ranks' inputs or the sums.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"
#include "grouped-collectives.h"

enum { kIterations = 2 };

/* Tensor sizes: 1024..16384 floats plus a remainder of 0..12, cycling through 16 sizes. */
static size_t tensor_elems(int k) { return (size_t)(1024 * (1 + k % 16) + (k * 7) % 13); }
static const size_t kMaxTensorElems = 1024 * 16 + 12;

typedef struct batch {
  int count;
  mgpu_buf *send, *recv;
  const float **sendp;
  float **recvp;
  size_t *n;
  size_t total; /* floats over all tensors */
  ncclComm_t comm;
} batch;

/* The sizes everywhere; the device buffers only where the work is done (mgpu_computes). */
static void batch_alloc(const mgpu_ctx *ctx, batch *b, int count, int device, ncclComm_t comm) {
  int k;
  memset(b, 0, sizeof *b);
  b->count = count;
  b->comm = comm;
  b->send = (mgpu_buf *)calloc((size_t)count, sizeof(mgpu_buf));
  b->recv = (mgpu_buf *)calloc((size_t)count, sizeof(mgpu_buf));
  b->sendp = (const float **)calloc((size_t)count, sizeof(float *));
  b->recvp = (float **)calloc((size_t)count, sizeof(float *));
  b->n = (size_t *)calloc((size_t)count, sizeof(size_t));
  if (!b->send || !b->recv || !b->sendp || !b->recvp || !b->n)
    mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  for (k = 0; k < count; k++) {
    b->n[k] = tensor_elems(k);
    b->total += b->n[k];
    if (!mgpu_computes(ctx)) continue;
    b->send[k] = mgpu_alloc(b->n[k] * sizeof(float), device);
    b->recv[k] = mgpu_alloc(b->n[k] * sizeof(float), device);
    b->sendp[k] = (const float *)b->send[k].ptr;
    b->recvp[k] = (float *)b->recv[k].ptr;
  }
}

static void batch_free(const mgpu_ctx *ctx, batch *b) {
  int k;
  for (k = 0; k < b->count && mgpu_computes(ctx); k++) {
    mgpu_free(&b->send[k]);
    mgpu_free(&b->recv[k]);
  }
  free(b->n);
  free(b->recvp);
  free(b->sendp);
  free(b->recv);
  free(b->send);
}

/* The input "iteration" of tensor k in iteration it: distinct for every (it, k). */
static int data_iter(int it, int k) { return it * 4096 + k; }

enum { kTimedIt = 0, kAfterTimingIt = 100 }; /* correctness uses iterations 0 and 1 */

static void fill_inputs(const mgpu_ctx *ctx, batch *b, int it, cudaStream_t stream) {
  int k;
  for (k = 0; k < b->count; k++)
    mgpu_fill_fine_f32((float *)b->send[k].ptr, (long long)b->n[k], ctx->seed, ctx->rank,
                        data_iter(it, k), stream);
}

/* The rank reads every recv[k] back on `stream` and hands it over; where the check is made,
 * each is compared with the host sum of iteration it's inputs, into r. host and want hold
 * kMaxTensorElems floats. */
static void compare(mgpu_ctx *ctx, const batch *b, int it, const char *tag, float *host,
                    float *want, mgpu_result *r, cudaStream_t stream) {
  long long base = 0;
  char t[128];
  int k, rr;
  for (k = 0; k < b->count; k++) {
    long long i, nk = (long long)b->n[k];
    if (mgpu_computes(ctx)) {
      MGPU_CUDA(cudaMemcpyAsync(host, b->recvp[k], (size_t)nk * sizeof(float),
                                cudaMemcpyDeviceToHost, stream));
      MGPU_CUDA(cudaStreamSynchronize(stream));
    }
    snprintf(t, sizeof t, "%s/%d", tag, k);
    if (!mgpu_hand_over(ctx, t, host, (size_t)nk * sizeof(float))) continue;
    for (i = 0; i < nk; i++) want[i] = 0.0f;
    for (rr = 0; rr < ctx->world; rr++) {
      uint64_t key = mgpu_exact_key(ctx->seed, rr, data_iter(it, k));
      for (i = 0; i < nk; i++) want[i] += mgpu_fine_value_k(key, i);
    }
    for (i = 0; i < nk; i++) mgpu_result_add(r, base + i, host[i], want[i], 0.0);
    base += nk;
  }
}

/* One checked call with the inputs of iteration it, every recv[k] poisoned first. */
static void checked_call(mgpu_ctx *ctx, batch *b, int it, const char *tag, float *host,
                         float *want, mgpu_result *r, cudaStream_t stream) {
  int k;
  if (mgpu_computes(ctx)) {
    for (k = 0; k < b->count; k++) mgpu_poison(&b->recv[k], stream);
    fill_inputs(ctx, b, it, stream);
    MGPU_LEARNER(allreduce_many(b->comm, b->count, b->sendp, b->recvp, b->n, stream));
  }
  compare(ctx, b, it, tag, host, want, r, stream);
}

/* Guard bytes hit around every tensor: counted by the rank, handed over. */
static long long guard_hits(mgpu_ctx *ctx, const batch *b, const char *tag) {
  long long hits = 0;
  int k;
  for (k = 0; k < b->count && mgpu_computes(ctx); k++)
    hits += mgpu_guard_hits(&b->send[k]) + mgpu_guard_hits(&b->recv[k]);
  mgpu_hand_over(ctx, tag, &hits, sizeof hits);
  return hits;
}

static void host_alloc(const mgpu_ctx *ctx, float **host, float **want) {
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaMallocHost((void **)host, kMaxTensorElems * sizeof(float)));
  } else {
    *host = (float *)malloc(kMaxTensorElems * sizeof(float));
  }
  *want = (float *)malloc(kMaxTensorElems * sizeof(float));
  if (!*host || !*want) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
}

static void host_free(const mgpu_ctx *ctx, float *host, float *want) {
  free(want);
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaFreeHost(host));
  } else {
    free(host);
  }
}

static void run_case(mgpu_ctx *ctx, const mgpu_case *c, ncclComm_t comm, cudaStream_t stream) {
  batch b;
  mgpu_result r;
  float *host, *want;
  char tag[128];
  int it;

  if (c->n < 1 || c->n > 2048) {
    mgpu_result_init(&r, c->n);
    snprintf(r.msg, sizeof r.msg, "case %s: n must be a tensor count in 1..2048", c->name);
    if (mgpu_verifies(ctx)) mgpu_record_case(c->name, &r, 1);
    return;
  }
  batch_alloc(ctx, &b, (int)c->n, ctx->device, comm);
  mgpu_result_init(&r, (long long)b.total);
  host_alloc(ctx, &host, &want);

  for (it = 0; it < kIterations; it++) {
    snprintf(tag, sizeof tag, "%s/%d", c->name, it);
    checked_call(ctx, &b, it, tag, host, want, &r, stream);
  }
  snprintf(tag, sizeof tag, "%s/guards", c->name);
  r.guard_hits = guard_hits(ctx, &b, tag);
  if (mgpu_verifies(ctx)) {
    if (r.bad || r.unwritten)
      snprintf(r.msg, sizeof r.msg,
               "%d tensors of 4-64 KiB, %d iterations: every recv[k] must hold the sum of every "
               "rank's send[k] (element index counts through the tensors in order)",
               b.count, kIterations);
    mgpu_record_case(c->name, &r, 0);
  }

  host_free(ctx, host, want);
  batch_free(ctx, &b);
}

/* ---- timing ------------------------------------------------------------------------------ */

static void op_yours(void *arg, int iter, cudaStream_t stream) {
  batch *b = (batch *)arg;
  (void)iter;
  (void)b;
  (void)stream;
  MGPU_LEARNER(allreduce_many(b->comm, b->count, b->sendp, b->recvp, b->n, stream));
}

/* The baseline: the same collectives, one by one, each its own launch. */
static void op_baseline(void *arg, int iter, cudaStream_t stream) {
  batch *b = (batch *)arg;
  int k;
  (void)iter;
  for (k = 0; k < b->count; k++)
    MGPU_NCCL(ncclAllReduce(b->sendp[k], b->recvp[k], b->n[k], ncclFloat, ncclSum, b->comm,
                            stream));
}

/* The case "after-timing": the learner's last timed results (inputs unchanged during timing),
 * then one more call exactly as the timed ones, with inputs no call has seen. Every rank makes
 * the call, whatever its own check found. */
static void check_after_timing(mgpu_ctx *ctx, batch *b, cudaStream_t stream) {
  mgpu_result r;
  float *host, *want;
  long long last_wrong;
  host_alloc(ctx, &host, &want);
  mgpu_result_init(&r, (long long)b->total);
  compare(ctx, b, kTimedIt, "after-timing/last", host, want, &r, stream);
  last_wrong = r.bad + r.unwritten;
  checked_call(ctx, b, kAfterTimingIt, "after-timing/new", host, want, &r, stream);
  r.guard_hits = guard_hits(ctx, b, "after-timing/guards");
  if (mgpu_verifies(ctx)) {
    if (last_wrong)
      snprintf(r.msg, sizeof r.msg,
               "after the timed calls, recv did not hold the sums of the inputs they were given "
               "(%lld wrong elements): every call must do the whole work, repeated calls with "
               "the same buffers included",
               last_wrong);
    else if (r.bad || r.unwritten)
      snprintf(r.msg, sizeof r.msg,
               "after the timed calls, a call with new data in the same buffers gave a wrong "
               "result: every call must do the whole work, repeated calls with the same buffers "
               "included (%d tensors)",
               b->count);
    mgpu_record_case("after-timing", &r, 0);
  }
  host_free(ctx, host, want);
}

static void run_perf(mgpu_ctx *ctx, const mgpu_case *c, ncclComm_t comm, cudaStream_t stream) {
  batch b, base;
  mgpu_timing t;
  if (c->n < 1 || c->n > 2048) {
    if (mgpu_computes(ctx))
      mgpu_note("perf case %s: n must be a tensor count in 1..2048; skipped", c->name);
    return;
  }
  batch_alloc(ctx, &b, (int)c->n, ctx->device, comm);
  if (!mgpu_computes(ctx)) { /* the verifier: the after-timing check only */
    check_after_timing(ctx, &b, stream);
    batch_free(ctx, &b);
    return;
  }
  batch_alloc(ctx, &base, (int)c->n, ctx->device, comm);
  fill_inputs(ctx, &b, kTimedIt, stream);
  fill_inputs(ctx, &base, kTimedIt, stream);
  MGPU_CUDA(cudaStreamSynchronize(stream));
  memset(&t, 0, sizeof t);
  t.case_name = c->name;
  t.bytes = (double)b.total * sizeof(float);
  t.factor = 1.0;
  t.metric = "time";
  mgpu_time_pair(ctx, &t, op_yours, &b, op_baseline, &base, stream);
  MGPU_CUDA(cudaDeviceSynchronize());
  check_after_timing(ctx, &b, stream);
  MGPU_CUDA(cudaDeviceSynchronize());
  batch_free(ctx, &base);
  batch_free(ctx, &b);
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
