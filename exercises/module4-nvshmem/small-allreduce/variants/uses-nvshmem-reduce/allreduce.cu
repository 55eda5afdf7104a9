/*
 * Variant uses-nvshmem-reduce: hands the job to NVSHMEM's own collective,
 * nvshmemx_float_sum_reduce_on_stream over the world team, through two symmetric staging
 * buffers. Correct, and exactly what the exercise forbids: the point is to build the one-shot
 * all-reduce from puts and signals. Must fail at the policy stage.
 */
#include "small-allreduce.h"

void allreduce_setup(allreduce *ar, size_t max_n) {
  const size_t cap = max_n ? max_n : 1;
  ar->slots_bytes = 2 * cap * sizeof(float); // [source | result]
  ar->slots = (float *)nvshmem_malloc(ar->slots_bytes);
  ar->signals_count = 1;
  ar->signals = (uint64_t *)nvshmem_calloc(1, sizeof(uint64_t));
  ar->scratch = (void *)(uintptr_t)cap;
  ar->calls = 0;
}

void allreduce_small(allreduce *ar, const float *in, float *out, size_t n, cudaStream_t stream) {
  const size_t cap = (size_t)(uintptr_t)ar->scratch;
  float *src = ar->slots, *dst = ar->slots + cap;
  MGPU_CUDA(cudaMemcpyAsync(src, in, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  nvshmemx_float_sum_reduce_on_stream(NVSHMEM_TEAM_WORLD, dst, src, n, stream);
  MGPU_CUDA(cudaMemcpyAsync(out, dst, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  ar->calls++;
}

void allreduce_teardown(allreduce *ar) {
  nvshmem_free(ar->signals);
  nvshmem_free(ar->slots);
}
