/*
 * driver.cu — module3/training-loop (course-owned).
 *
 * One process per GPU; the driver makes the communicator, the model and two streams: `compute`
 * (default priority) and `comm_stream` (highest priority), and defines the course kernels.
 *
 * The model: kLayers layers of n floats. train_backward(l) writes grads[l] from weights[l],
 * the rank (its data shard), the step and the layer, with `work` rounds of integer mixing per
 * element (the knob that sets how long "compute" takes); gradients are integers in [-64, 64].
 * train_update(l) does weights[l] = fmod(weights[l] - grads[l], 4096). Everything is exact.
 *
 * Correctness, per case (n = floats per layer): identical initial weights on every rank,
 * gradients poisoned (NaN), kSteps steps of the learner's train_steps; then every weight of
 * every layer, read back on `compute`, must equal a single-GPU reference that this rank
 * computes by itself (each rank's gradient recomputed in turn and summed), tolerance 0.
 * The correctness cases use a large `work` so a gradient that is all-reduced before its
 * backward kernel has finished is caught.
 *
 * Performance (headline case "8x16MiB"): one step of train_steps against one step of the
 * serialized loop (backward, all-reduce, update, all on `compute`), same run, ABAB. Before
 * timing, rank 0 calibrates `work` so that one layer's backward takes about as long as one
 * layer's all-reduce, and shares it: that is where overlap pays most.
 *
 * After timing ("after-timing", not in MGPU_CASES): the timed model's weights get values no
 * call has seen, its gradients are poisoned, and one more train_steps call exactly as the timed
 * ones (one step, a step number never used before, the same streams) must leave the weights
 * equal to the single-GPU reference of that step. The timed calls change the weights, so there
 * is no earlier result to compare.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"
#include "training-loop.h"

enum {
  kLayers = 8,
  kSteps = 3,
  kCorrectnessWork = 2048, /* a 1M-float backward then takes long enough to lose a race */
  kCalibrationWork = 256,
  kThreads = 256,
  kInitIter = 1000,           /* initial weights of layer l: exact values of iteration 1000 + l */
  kAfterTimingInit = 5000,    /* ... and of 5000 + l before the after-timing call */
  kAfterTimingStep = 1 << 20  /* its step number: the timed calls count from 0 */
};

/* ---- the course kernels ------------------------------------------------------------------ */

__device__ __forceinline__ uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

__global__ void backward_kernel(const float *__restrict__ w, float *__restrict__ g, size_t n,
                                int rank, int step, int layer, int work) {
  const uint32_t salt =
      mix32((uint32_t)rank * 0x85ebca6bU ^ mix32((uint32_t)step * 0xc2b2ae35U ^ (uint32_t)layer));
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) {
    uint32_t h = mix32((uint32_t)i * 0x9e3779b1U ^ (uint32_t)(i >> 32) ^ salt) ^ (uint32_t)(int)w[i];
    for (int k = 0; k < work; k++) {
      h = h * 1664525U + 1013904223U;
      h ^= h >> 15;
    }
    g[i] = (float)((int)(h % 129U) - 64);
  }
}

__global__ void update_kernel(float *__restrict__ w, const float *__restrict__ g, size_t n) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride)
    w[i] = fmodf(w[i] - g[i], 4096.0f);
}

__global__ void accumulate_kernel(float *__restrict__ sum, const float *__restrict__ g, size_t n) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) sum[i] += g[i];
}

/* Enough blocks for one element per thread (the backward kernel is compute-bound; short blocks
 * let NCCL's blocks in as soon as SMs free up), capped for the cheap kernels. */
static unsigned grid_for(size_t n, size_t cap) {
  size_t b = (n + kThreads - 1) / kThreads;
  if (b > cap) b = cap;
  return (unsigned)(b ? b : 1);
}

static void launch_backward(const float *w, float *g, size_t n, int rank, int step, int layer,
                            int work, cudaStream_t s) {
  backward_kernel<<<grid_for(n, 1u << 20), kThreads, 0, s>>>(w, g, n, rank, step, layer, work);
  MGPU_KERNEL();
}

extern "C" void train_backward(const train_model *m, int layer, int step, cudaStream_t stream) {
  if (layer < 0 || layer >= m->layers)
    mgpu_fail("learner", "train_backward", __FILE__, __LINE__, layer, "layer out of range");
  launch_backward(m->weights[layer], m->grads[layer], m->params, m->rank, step, layer, m->work,
                  stream);
}

extern "C" void train_update(const train_model *m, int layer, cudaStream_t stream) {
  if (layer < 0 || layer >= m->layers)
    mgpu_fail("learner", "train_update", __FILE__, __LINE__, layer, "layer out of range");
  update_kernel<<<grid_for(m->params, 4096), kThreads, 0, stream>>>(m->weights[layer],
                                                                     m->grads[layer], m->params);
  MGPU_KERNEL();
}

/* The baseline: the same kernels and collectives, one after another on one stream. */
static void serial_steps(ncclComm_t comm, const train_model *m, int first_step, int steps,
                         cudaStream_t compute) {
  int t, l;
  for (t = first_step; t < first_step + steps; t++)
    for (l = m->layers - 1; l >= 0; l--) {
      train_backward(m, l, t, compute);
      MGPU_NCCL(ncclAllReduce(m->grads[l], m->grads[l], m->params, ncclFloat, ncclSum, comm,
                              compute));
      train_update(m, l, compute);
    }
}

/* ---- model ------------------------------------------------------------------------------- */

typedef struct model_bufs {
  train_model m;
  mgpu_buf w[kLayers], g[kLayers];
  float *wp[kLayers], *gp[kLayers];
} model_bufs;

static void model_alloc(model_bufs *b, size_t n, const mgpu_ctx *ctx, int work,
                        cudaStream_t s) {
  int l;
  memset(b, 0, sizeof *b);
  for (l = 0; l < kLayers; l++) {
    b->w[l] = mgpu_alloc(n * sizeof(float), ctx->device);
    b->g[l] = mgpu_alloc(n * sizeof(float), ctx->device);
    b->wp[l] = (float *)b->w[l].ptr;
    b->gp[l] = (float *)b->g[l].ptr;
    /* The same initial weights on every rank: the fill's "rank" is 0 everywhere. */
    mgpu_fill_exact_f32(b->wp[l], (long long)n, ctx->seed, 0, kInitIter + l, s);
    mgpu_poison(&b->g[l], s);
  }
  b->m.layers = kLayers;
  b->m.params = n;
  b->m.weights = b->wp;
  b->m.grads = b->gp;
  b->m.rank = ctx->rank;
  b->m.work = work;
}

static void model_free(model_bufs *b) {
  int l;
  for (l = 0; l < kLayers; l++) {
    mgpu_free(&b->g[l]);
    mgpu_free(&b->w[l]);
  }
}

/* The single-GPU reference: weights of iteration init_iter + l, then steps first_step ..
 * first_step + steps - 1, each summing every rank's gradient in turn before the update. */
static void reference_weights(float **ref, size_t n, const mgpu_ctx *ctx, int work,
                              int init_iter, int first_step, int steps, cudaStream_t s) {
  float *g, *sum;
  int t, l, r;
  MGPU_CUDA(cudaMalloc((void **)&g, n * sizeof(float)));
  MGPU_CUDA(cudaMalloc((void **)&sum, n * sizeof(float)));
  for (l = 0; l < kLayers; l++)
    mgpu_fill_exact_f32(ref[l], (long long)n, ctx->seed, 0, init_iter + l, s);
  for (t = first_step; t < first_step + steps; t++)
    for (l = kLayers - 1; l >= 0; l--) {
      MGPU_CUDA(cudaMemsetAsync(sum, 0, n * sizeof(float), s));
      for (r = 0; r < ctx->world; r++) {
        launch_backward(ref[l], g, n, r, t, l, work, s);
        accumulate_kernel<<<grid_for(n, 4096), kThreads, 0, s>>>(sum, g, n);
        MGPU_KERNEL();
      }
      update_kernel<<<grid_for(n, 4096), kThreads, 0, s>>>(ref[l], sum, n);
      MGPU_KERNEL();
    }
  MGPU_CUDA(cudaStreamSynchronize(s));
  MGPU_CUDA(cudaFree(sum));
  MGPU_CUDA(cudaFree(g));
}

/* Reads every layer's weights back on `compute` (ordered after train_steps' work only if the
 * learner joined every stream it used back into `compute`) and compares them with ref, into r.
 * Element index = layer x n + i. */
static void compare_weights(const model_bufs *b, float **ref, size_t n, mgpu_result *r,
                            cudaStream_t compute) {
  float *host, *want;
  long long i;
  int l;
  MGPU_CUDA(cudaMallocHost((void **)&host, n * sizeof(float)));
  want = (float *)malloc(n * sizeof(float));
  if (!want) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  for (l = 0; l < kLayers; l++) {
    MGPU_CUDA(cudaMemcpyAsync(host, b->wp[l], n * sizeof(float), cudaMemcpyDeviceToHost, compute));
    MGPU_CUDA(cudaStreamSynchronize(compute));
    MGPU_CUDA(cudaMemcpy(want, ref[l], n * sizeof(float), cudaMemcpyDeviceToHost));
    for (i = 0; i < (long long)n; i++)
      mgpu_result_add(r, (long long)l * (long long)n + i, host[i], want[i], 0.0);
  }
  MGPU_CUDA(cudaDeviceSynchronize());
  for (l = 0; l < kLayers; l++)
    r->guard_hits += mgpu_guard_hits(&b->w[l]) + mgpu_guard_hits(&b->g[l]);
  free(want);
  MGPU_CUDA(cudaFreeHost(host));
}

static void run_case(const mgpu_ctx *ctx, const mgpu_case *c, ncclComm_t comm,
                     cudaStream_t compute, cudaStream_t comm_stream) {
  const size_t n = (size_t)c->n;
  model_bufs b;
  float *ref[kLayers];
  mgpu_result r;
  int l;

  model_alloc(&b, n, ctx, kCorrectnessWork, compute);
  for (l = 0; l < kLayers; l++) MGPU_CUDA(cudaMalloc((void **)&ref[l], n * sizeof(float)));
  reference_weights(ref, n, ctx, kCorrectnessWork, kInitIter, 0, kSteps, compute);

  /* Two calls, the second starting at step 1, as the timed calls start at step iter: a loop
   * that counts from 0 instead of first_step shows here, not only as an absurd speed-up. */
  train_steps(comm, &b.m, 0, 1, compute, comm_stream);
  train_steps(comm, &b.m, 1, kSteps - 1, compute, comm_stream);

  mgpu_result_init(&r, (long long)n * kLayers);
  compare_weights(&b, ref, n, &r, compute);
  if (r.bad || r.unwritten)
    snprintf(r.msg, sizeof r.msg,
             "after %d steps of %d layers x %lld floats on %d ranks the weights differ from the "
             "single-GPU reference (element index = layer x %lld + i). Is every all-reduce "
             "ordered after its layer's backward kernel, and every update after its "
             "all-reduce?",
             kSteps, kLayers, (long long)n, ctx->world, (long long)n);
  mgpu_record_case(c->name, &r, 0);

  for (l = 0; l < kLayers; l++) MGPU_CUDA(cudaFree(ref[l]));
  model_free(&b);
}

/* ---- performance ------------------------------------------------------------------------- */

typedef struct perf_arg {
  ncclComm_t comm;
  const train_model *m;
  cudaStream_t comm_stream;
} perf_arg;

static void op_yours(void *arg, int iter, cudaStream_t stream) {
  perf_arg *a = (perf_arg *)arg;
  train_steps(a->comm, a->m, iter, 1, stream, a->comm_stream);
}

static void op_serial(void *arg, int iter, cudaStream_t stream) {
  perf_arg *a = (perf_arg *)arg;
  serial_steps(a->comm, a->m, iter, 1, stream);
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static float median_ms(float *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_float);
  return v[n / 2];
}

/* Chooses `work` so that one layer's backward lasts about as long as one layer's all-reduce:
 * medians of a few event-timed repetitions of each, measured on every rank, decided by rank 0
 * and shared so that all ranks compute the same gradients. */
static int calibrate_work(mgpu_ctx *ctx, ncclComm_t comm, const train_model *m,
                          cudaStream_t s) {
  enum { kReps = 7 };
  cudaEvent_t e0, e1;
  float ms, comm_ms[kReps], comp_ms[kReps], comm_med, comp_med;
  int k, work;
  MGPU_CUDA(cudaEventCreate(&e0));
  MGPU_CUDA(cudaEventCreate(&e1));
  for (k = 0; k < 3; k++)
    MGPU_NCCL(ncclAllReduce(m->grads[0], m->grads[0], m->params, ncclFloat, ncclSum, comm, s));
  MGPU_CUDA(cudaStreamSynchronize(s));
  for (k = 0; k < kReps; k++) {
    mgpu_barrier(ctx, "train-calibrate");
    MGPU_CUDA(cudaEventRecord(e0, s));
    MGPU_NCCL(ncclAllReduce(m->grads[0], m->grads[0], m->params, ncclFloat, ncclSum, comm, s));
    MGPU_CUDA(cudaEventRecord(e1, s));
    MGPU_CUDA(cudaEventSynchronize(e1));
    MGPU_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    comm_ms[k] = ms;
    MGPU_CUDA(cudaEventRecord(e0, s));
    launch_backward(m->weights[0], m->grads[0], m->params, m->rank, 0, 0, kCalibrationWork, s);
    MGPU_CUDA(cudaEventRecord(e1, s));
    MGPU_CUDA(cudaEventSynchronize(e1));
    MGPU_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    comp_ms[k] = ms;
  }
  comm_med = median_ms(comm_ms, kReps);
  comp_med = median_ms(comp_ms, kReps);
  work = (int)lround(kCalibrationWork * comm_med / comp_med);
  if (work < 1) work = 1;
  if (work > 1 << 20) work = 1 << 20;
  mgpu_share(ctx, "train-work", &work, sizeof work, 0);
  if (ctx->rank == 0) {
    mgpu_value("all-reduce per layer (calibration)", comm_med * 1000.0, "us");
    mgpu_value("backward per layer at calibration work", comp_med * 1000.0, "us");
    mgpu_value("backward work chosen", work, "rounds");
  }
  MGPU_CUDA(cudaEventDestroy(e1));
  MGPU_CUDA(cudaEventDestroy(e0));
  return work;
}

/* The case "after-timing": new weights and poisoned gradients in the timed model, one more
 * call as the timed ones make it, compared with the reference of that one step. Every rank
 * makes the call, whatever its own check found. */
static void check_after_timing(const mgpu_ctx *ctx, model_bufs *b, ncclComm_t comm,
                               cudaStream_t compute, cudaStream_t comm_stream) {
  const size_t n = b->m.params;
  float *ref[kLayers];
  mgpu_result r;
  int l;
  for (l = 0; l < kLayers; l++) MGPU_CUDA(cudaMalloc((void **)&ref[l], n * sizeof(float)));
  reference_weights(ref, n, ctx, b->m.work, kAfterTimingInit, kAfterTimingStep, 1, compute);
  for (l = 0; l < kLayers; l++) {
    mgpu_fill_exact_f32(b->wp[l], (long long)n, ctx->seed, 0, kAfterTimingInit + l, compute);
    mgpu_poison(&b->g[l], compute);
  }
  train_steps(comm, &b->m, kAfterTimingStep, 1, compute, comm_stream);
  mgpu_result_init(&r, (long long)n * kLayers);
  compare_weights(b, ref, n, &r, compute);
  if (r.bad || r.unwritten)
    snprintf(r.msg, sizeof r.msg,
             "after the timed calls, a call with new data in the same buffers gave a wrong "
             "result: every call must do the whole work, repeated calls with the same buffers "
             "included (one step of %d layers x %lld floats; element index = layer x %lld + i)",
             kLayers, (long long)n, (long long)n);
  mgpu_record_case("after-timing", &r, 0);
  for (l = 0; l < kLayers; l++) MGPU_CUDA(cudaFree(ref[l]));
}

static void run_perf(mgpu_ctx *ctx, const mgpu_case *c, ncclComm_t comm, cudaStream_t compute,
                     cudaStream_t comm_stream) {
  model_bufs b;
  perf_arg a;
  mgpu_timing t;
  model_alloc(&b, (size_t)c->n, ctx, kCalibrationWork, compute);
  MGPU_CUDA(cudaStreamSynchronize(compute));
  b.m.work = calibrate_work(ctx, comm, &b.m, compute);
  a.comm = comm;
  a.m = &b.m;
  a.comm_stream = comm_stream;
  memset(&t, 0, sizeof t);
  t.case_name = c->name;
  t.bytes = (double)c->n * sizeof(float) * kLayers; /* gradient bytes all-reduced per step */
  t.factor = 1.0;
  t.metric = "time";
  mgpu_time_pair(ctx, &t, op_yours, &a, op_serial, &a, compute);
  MGPU_CUDA(cudaDeviceSynchronize());
  check_after_timing(ctx, &b, comm, compute, comm_stream);
  model_free(&b);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  cudaStream_t compute, comm_stream;
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  int least = 0, greatest = 0, k;

  mgpu_init(&ctx, argc, argv);
  MGPU_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  MGPU_CUDA(cudaStreamCreateWithPriority(&compute, cudaStreamNonBlocking, least));
  MGPU_CUDA(cudaStreamCreateWithPriority(&comm_stream, cudaStreamNonBlocking, greatest));
  mgpu_nccl_unique_id(&ctx, &id);
  MGPU_NCCL(ncclCommInitRank(&comm, ctx.world, id, ctx.rank));

  for (k = 0; k < ctx.ncases; k++) run_case(&ctx, &ctx.cases[k], comm, compute, comm_stream);
  if (ctx.perf)
    for (k = 0; k < ctx.nperf_cases; k++)
      run_perf(&ctx, &ctx.perf_cases[k], comm, compute, comm_stream);

  MGPU_CUDA(cudaDeviceSynchronize());
  MGPU_NCCL(ncclCommDestroy(comm));
  MGPU_CUDA(cudaStreamDestroy(comm_stream));
  MGPU_CUDA(cudaStreamDestroy(compute));
  return mgpu_finish(&ctx);
}
