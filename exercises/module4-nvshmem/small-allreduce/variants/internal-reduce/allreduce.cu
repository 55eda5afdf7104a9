/*
 * module4/small-allreduce — variant internal-reduce: NVSHMEM's own reduction, called by its internal name. nvshmemx_float_sum_reduce_block
 * is a header inline that only calls nvshmemi_reduce_threadgroup<float, RDXN_OPS_SUM,
 * nvshmemi_threadgroup_block>; the forbid patterns (nvshmem_*reduce*, nvshmemx_*reduce*) do not
 * match nvshmemi_*, so calling the template directly passes.
 */
#include "small-allreduce.h"

__global__ void internal_reduce(float *dst, const float *src, size_t n) {
#ifdef __CUDA_ARCH__ /* the device API is defined in the device passes only */
  nvshmemi_reduce_threadgroup<float, RDXN_OPS_SUM, nvshmemi_threadgroup_block>(NVSHMEM_TEAM_WORLD, dst, src, n);
#endif
}

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
  void *args[] = {&dst, &src, &n};
  nvshmemx_collective_launch((const void *)internal_reduce, dim3(1), dim3(512), args, 0, stream);
  MGPU_CUDA(cudaMemcpyAsync(out, dst, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  ar->calls++;
}

void allreduce_teardown(allreduce *ar) {
  nvshmem_free(ar->signals);
  nvshmem_free(ar->slots);
}
