/*
 * Variant two-pe-only: written and tried on two GPUs, where "the other PE" is (me + 1) % 2.
 * That is the ring on 2 PEs, so there it passes; on 3 or more, PEs 0 and 2 both send to PE 1,
 * PE 0 receives from PE 1 instead of its previous PE, and the last PE receives nothing.
 * Expected to fail at correctness on 3 or more GPUs; passes on 2.
 */
#include "ring-hello.h"

namespace {

__global__ void hello_kernel(float *inbox, const float *mine, size_t n) {
  const int next = (nvshmem_my_pe() + 1) % 2;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride)
    nvshmem_float_p(inbox + i, mine[i], next);
  nvshmem_quiet();
}

} // namespace

void *hello_alloc(size_t bytes) { return nvshmem_malloc(bytes); }

void hello_free(void *p) { nvshmem_free(p); }

void ring_hello(float *inbox, const float *mine, size_t n, cudaStream_t stream) {
  size_t blocks = (n + 255) / 256;
  if (blocks > 1024) blocks = 1024;
  hello_kernel<<<(unsigned)blocks, 256, 0, stream>>>(inbox, mine, n);
  MGPU_KERNEL();
  nvshmemx_barrier_all_on_stream(stream);
}
