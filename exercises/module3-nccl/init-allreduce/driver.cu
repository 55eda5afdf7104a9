/*
 * driver.cu — module3/init-allreduce (course-owned).
 *
 * One process per GPU. Rank 0 makes the NCCL unique id and the harness shares it through the
 * run's rendezvous directory; every rank builds its communicator with the learner's make_comm,
 * checks that the communicator agrees with the launcher (size, rank, device), then for every
 * case runs two all-reduces with different inputs (a cached or stale answer fails the second)
 * and compares every element on every rank with the sum computed on the host, tolerance 0.
 * Cases whose name starts with "inplace" pass the same buffer as send and recv.
 *
 * Results are read back on the stream the learner was given, so work that the learner leaves
 * on another stream, unordered, shows up as unwritten (poisoned) or wrong elements.
 *
 * The comparisons are each rank's verifier's (`verifier: true`, docs/protocol.md §4): the rank
 * hands over recv and what it found of the communicator, never knowing the other ranks'
 * inputs or the sum.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"
#include "init-allreduce.h"

enum { kIterations = 2 };

/* want[i] = sum over ranks r of mgpu_fine_value(seed, r, iter, i). Exact in float in any order. */
static void host_sum(float *want, uint64_t seed, int world, int iter, long long n) {
  long long i;
  int r;
  for (i = 0; i < n; i++) want[i] = 0.0f;
  for (r = 0; r < world; r++) {
    uint64_t key = mgpu_exact_key(seed, r, iter);
    for (i = 0; i < n; i++) want[i] += mgpu_fine_value_k(key, i);
  }
}

/* The rank reads `got` back on `stream` (after whatever the learner enqueued there) and hands
 * it over; where the check is made, every element is compared with the sum of every rank's
 * inputs of iteration `iter`, tolerance 0. */
static void compare_on_stream(mgpu_ctx *ctx, mgpu_result *r, const mgpu_buf *got, int iter,
                              const char *tag, long long n, float *host, float *want,
                              cudaStream_t stream) {
  long long i;
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaMemcpyAsync(host, got->ptr, (size_t)n * sizeof(float),
                              cudaMemcpyDeviceToHost, stream));
    MGPU_CUDA(cudaStreamSynchronize(stream));
  }
  if (!mgpu_hand_over(ctx, tag, host, (size_t)n * sizeof(float))) return;
  host_sum(want, ctx->seed, ctx->world, iter, n);
  for (i = 0; i < n; i++) mgpu_result_add(r, i, host[i], want[i], 0.0);
}

/* Checks the communicator against what the launcher says. Returns 1 when it is usable; else
 * writes the reason into msg. */
static int comm_matches(ncclComm_t comm, const mgpu_ctx *ctx, char *msg, size_t len) {
  int count = -1, rank = -1, dev = -1;
  if (comm == NULL) {
    snprintf(msg, len,
             "make_comm returned NULL: there is no communicator, so nothing was reduced "
             "(create one with ncclCommInitRank)");
    return 0;
  }
  MGPU_NCCL(ncclCommCount(comm, &count));
  MGPU_NCCL(ncclCommUserRank(comm, &rank));
  MGPU_NCCL(ncclCommCuDevice(comm, &dev));
  if (count != ctx->world) {
    snprintf(msg, len, "the communicator has %d ranks; the launcher started %d", count,
             ctx->world);
    return 0;
  }
  if (rank != ctx->rank) {
    snprintf(msg, len, "this process is rank %d but its communicator says rank %d", ctx->rank,
             rank);
    return 0;
  }
  if (dev != ctx->device) {
    snprintf(msg, len, "the communicator uses GPU %d; this rank's GPU is %d", dev, ctx->device);
    return 0;
  }
  return 1;
}

static void run_case(mgpu_ctx *ctx, const mgpu_case *c, ncclComm_t comm, cudaStream_t stream) {
  const long long n = c->n;
  const int inplace = strncmp(c->name, "inplace", 7) == 0;
  const size_t bytes = (size_t)n * sizeof(float);
  mgpu_result r;
  mgpu_buf send, recv;
  float *want = NULL, *host;
  long long hits = 0;
  char tag[128];
  int iter;

  mgpu_result_init(&r, n);
  memset(&send, 0, sizeof send);
  memset(&recv, 0, sizeof recv);
  if (mgpu_computes(ctx)) {
    send = mgpu_alloc(bytes, ctx->device);
    recv = inplace ? send : mgpu_alloc(bytes, ctx->device);
    MGPU_CUDA(cudaMallocHost((void **)&host, bytes));
  } else {
    host = (float *)malloc(bytes);
  }
  if (mgpu_verifies(ctx)) want = (float *)malloc(bytes);
  if (!host || (mgpu_verifies(ctx) && !want))
    mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");

  for (iter = 0; iter < kIterations; iter++) {
    if (mgpu_computes(ctx)) {
      if (!inplace) mgpu_poison(&recv, stream);
      mgpu_fill_fine_f32((float *)send.ptr, n, ctx->seed, ctx->rank, iter, stream);
      MGPU_LEARNER(allreduce_sum(comm, (const float *)send.ptr, (float *)recv.ptr, (size_t)n,
                                 stream));
    }
    snprintf(tag, sizeof tag, "%s/%d/recv", c->name, iter);
    compare_on_stream(ctx, &r, &recv, iter, tag, n, host, want, stream);
  }
  if (mgpu_computes(ctx))
    hits = mgpu_guard_hits(&send) + (inplace ? 0 : mgpu_guard_hits(&recv));
  snprintf(tag, sizeof tag, "%s/guards", c->name);
  if (mgpu_hand_over(ctx, tag, &hits, sizeof hits)) {
    r.guard_hits = hits;
    if (r.bad || r.unwritten)
      snprintf(r.msg, sizeof r.msg,
               "%s all-reduce of %lld floats over %d ranks, %d iterations with different "
               "inputs: recv must hold the sum of every rank's send",
               inplace ? "in-place" : "out-of-place", n, ctx->world, kIterations);
    mgpu_record_case(c->name, &r, 0);
  }

  free(want);
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaFreeHost(host));
    if (!inplace) mgpu_free(&recv);
    mgpu_free(&send);
  } else {
    free(host);
  }
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  cudaStream_t stream = NULL;
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  char problem[sizeof(((mgpu_result *)0)->msg)];
  int usable = 1, k;

  mgpu_init(&ctx, argc, argv);
  problem[0] = 0;
  if (mgpu_computes(&ctx)) {
    MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    mgpu_nccl_unique_id(&ctx, &id);
    MGPU_LEARNER(comm = make_comm(ctx.rank, ctx.world, &id));
    usable = comm_matches(comm, &ctx, problem, sizeof problem);
    if (!usable) mgpu_note("%s", problem);
  }
  /* Whether the learner's communicator is usable, and why not, is the rank's to see. */
  mgpu_hand_over(&ctx, "comm/usable", &usable, sizeof usable);
  mgpu_hand_over(&ctx, "comm/problem", problem, sizeof problem);
  problem[sizeof problem - 1] = 0;

  for (k = 0; k < ctx.ncases; k++) {
    if (!usable) {
      mgpu_result r;
      if (!mgpu_verifies(&ctx)) continue;
      mgpu_result_init(&r, ctx.cases[k].n);
      snprintf(r.msg, sizeof r.msg, "%s", problem);
      mgpu_record_case(ctx.cases[k].name, &r, 1);
      continue;
    }
    run_case(&ctx, &ctx.cases[k], comm, stream);
  }

  if (mgpu_computes(&ctx)) {
    if (comm != NULL) MGPU_NCCL(ncclCommDestroy(comm));
    MGPU_CUDA(cudaStreamDestroy(stream));
  }
  return mgpu_finish(&ctx);
}
