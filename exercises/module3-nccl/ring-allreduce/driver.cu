/*
 * driver.cu — module3/ring-allreduce (course-owned).
 *
 * One process per GPU; the driver makes the communicator.
 *
 * Correctness, per case (n = floats per rank): two iterations with different inputs. Before
 * each call recv and scratch are filled with NaN; after it, recv is read back on the learner's
 * stream (work left unordered on another stream is caught) and every element is compared with
 * the host sum, tolerance 0; send is read back too and must still hold this rank's input.
 * Sizes are odd, prime, one and a power of two, on whatever number of GPUs the machine has.
 *
 * Performance (headline case "256MiB"): the learner's ring against ncclAllReduce on the same
 * buffers in the same run (ABAB), as bus bandwidth with nccl-tests' all-reduce factor
 * 2(world-1)/world.
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
  ring_allreduce(b->comm, b->rank, b->world, (const float *)b->send.ptr, (float *)b->recv.ptr,
                 (size_t)b->n, (float *)b->scratch.ptr, stream);
}

static void run_case(const mgpu_ctx *ctx, const mgpu_case *c, ncclComm_t comm,
                     cudaStream_t stream) {
  const long long n = c->n;
  const size_t bytes = (size_t)n * sizeof(float);
  ring_bufs b;
  mgpu_result r;
  float *want, *mine, *host;
  long long send_changed = 0, i;
  int it, rr;

  bufs_alloc(&b, n, ctx, comm);
  mgpu_result_init(&r, n);
  want = (float *)malloc(bytes);
  mine = (float *)malloc(bytes);
  if (!want || !mine) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  MGPU_CUDA(cudaMallocHost((void **)&host, bytes));

  for (it = 0; it < kIterations; it++) {
    mgpu_poison(&b.recv, stream);
    mgpu_poison(&b.scratch, stream);
    mgpu_fill_exact_f32((float *)b.send.ptr, n, ctx->seed, ctx->rank, it, stream);
    call_ring(&b, stream);

    for (i = 0; i < n; i++) want[i] = 0.0f;
    for (rr = 0; rr < ctx->world; rr++) {
      uint64_t key = mgpu_exact_key(ctx->seed, rr, it);
      float *dst = rr == ctx->rank ? mine : NULL;
      for (i = 0; i < n; i++) {
        float v = mgpu_exact_value_k(key, i);
        want[i] += v;
        if (dst) dst[i] = v;
      }
    }
    MGPU_CUDA(cudaMemcpyAsync(host, b.recv.ptr, bytes, cudaMemcpyDeviceToHost, stream));
    MGPU_CUDA(cudaStreamSynchronize(stream));
    for (i = 0; i < n; i++) mgpu_result_add(&r, i, host[i], want[i], 0.0);

    MGPU_CUDA(cudaMemcpyAsync(host, b.send.ptr, bytes, cudaMemcpyDeviceToHost, stream));
    MGPU_CUDA(cudaStreamSynchronize(stream));
    for (i = 0; i < n; i++) send_changed += host[i] != mine[i];
  }
  r.guard_hits = mgpu_guard_hits(&b.send) + mgpu_guard_hits(&b.recv) + mgpu_guard_hits(&b.scratch);
  if (send_changed)
    snprintf(r.msg, sizeof r.msg,
             "send was modified: %lld of its elements no longer hold this rank's input after "
             "the call (send is read-only; use scratch)",
             send_changed);
  else if (r.bad || r.unwritten)
    snprintf(r.msg, sizeof r.msg,
             "ring all-reduce of %lld floats over %d ranks (%lld per rank's chunk, remainder "
             "%lld), %d iterations: recv must hold the sum of every rank's send",
             n, ctx->world, n / ctx->world, n % ctx->world, kIterations);
  else if (r.guard_hits)
    snprintf(r.msg, sizeof r.msg, "a write landed outside send, recv or scratch");
  mgpu_record_case(c->name, &r, send_changed != 0);

  MGPU_CUDA(cudaFreeHost(host));
  free(mine);
  free(want);
  bufs_free(&b);
}

/* ---- timing ------------------------------------------------------------------------------ */

static void op_ring(void *arg, int iter, cudaStream_t stream) {
  (void)iter;
  call_ring((ring_bufs *)arg, stream);
}

static void op_nccl(void *arg, int iter, cudaStream_t stream) {
  ring_bufs *b = (ring_bufs *)arg;
  (void)iter;
  MGPU_NCCL(ncclAllReduce(b->send.ptr, b->recv.ptr, (size_t)b->n, ncclFloat, ncclSum, b->comm,
                          stream));
}

static void run_perf(mgpu_ctx *ctx, const mgpu_case *c, ncclComm_t comm, cudaStream_t stream) {
  ring_bufs b;
  mgpu_timing t;
  bufs_alloc(&b, c->n, ctx, comm);
  mgpu_fill_exact_f32((float *)b.send.ptr, c->n, ctx->seed, ctx->rank, 0, stream);
  MGPU_CUDA(cudaStreamSynchronize(stream));
  memset(&t, 0, sizeof t);
  t.case_name = c->name;
  t.bytes = (double)c->n * sizeof(float);
  t.factor = 2.0 * (ctx->world - 1) / ctx->world;
  t.metric = "busbw";
  mgpu_time_pair(ctx, &t, op_ring, &b, op_nccl, &b, stream);
  MGPU_CUDA(cudaStreamSynchronize(stream));
  bufs_free(&b);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  cudaStream_t stream;
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  int k;

  mgpu_init(&ctx, argc, argv);
  MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  mgpu_nccl_unique_id(&ctx, &id);
  MGPU_NCCL(ncclCommInitRank(&comm, ctx.world, id, ctx.rank));

  for (k = 0; k < ctx.ncases; k++) run_case(&ctx, &ctx.cases[k], comm, stream);
  if (ctx.perf)
    for (k = 0; k < ctx.nperf_cases; k++) run_perf(&ctx, &ctx.perf_cases[k], comm, stream);

  MGPU_NCCL(ncclCommDestroy(comm));
  MGPU_CUDA(cudaStreamDestroy(stream));
  return mgpu_finish(&ctx);
}
