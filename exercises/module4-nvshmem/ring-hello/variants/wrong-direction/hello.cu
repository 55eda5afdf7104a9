/*
 * Variant wrong-direction: sends to the previous PE instead of the next. On 2 PEs previous and
 * next are the same PE, so it passes there; on 3 or more every inbox holds the data of the
 * PE after it. Expected to fail at correctness on 3 or more GPUs; passes on 2.
 */
#include "ring-hello.h"

namespace {

__global__ void hello_kernel(float *inbox, const float *mine, size_t n) {
  const int npes = nvshmem_n_pes();
  const int to = (nvshmem_my_pe() + npes - 1) % npes;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride)
    nvshmem_float_p(inbox + i, mine[i], to);
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
