/*
 * Variant non-symmetric: the inbox comes from cudaMalloc. Such memory exists on this GPU only;
 * NVSHMEM would turn its address into an offset from the symmetric heap's base and write
 * wherever that lands on the peer. The driver checks the inbox with nvshmem_ptr on every PE
 * before anything is sent and fails the case. Expected to fail at correctness.
 */
#include "ring-hello.h"

namespace {

__global__ void hello_kernel(float *inbox, const float *mine, size_t n) {
  const int me = nvshmem_my_pe();
  const int next = (me + 1) % nvshmem_n_pes();
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride)
    nvshmem_float_p(inbox + i, mine[i], next);
  nvshmem_quiet();
}

} // namespace

void *hello_alloc(size_t bytes) {
  void *p = NULL;
  MGPU_CUDA(cudaMalloc(&p, bytes));
  return p;
}

void hello_free(void *p) { MGPU_CUDA(cudaFree(p)); }

void ring_hello(float *inbox, const float *mine, size_t n, cudaStream_t stream) {
  size_t blocks = (n + 255) / 256;
  if (blocks > 1024) blocks = 1024;
  hello_kernel<<<(unsigned)blocks, 256, 0, stream>>>(inbox, mine, n);
  MGPU_KERNEL();
  nvshmemx_barrier_all_on_stream(stream);
}
